//! The simulated agents as the node sees them: their ids and the AIDIP
//! registrations they are imported and published with.

/// The agent id of population member `i`.
pub(super) fn agent_id(i: usize) -> String {
    format!("sim-agent-{i:07}")
}

/// The agent id of publish probe `j`.
pub(super) fn probe_id(j: usize) -> String {
    format!("sim-probe-{j:05}")
}

/// A valid AIDIP registration with `id` and `capabilities` (the rest
/// from the testbed's synthetic population).
pub(super) fn document(i: usize, id: &str, capabilities: &[String]) -> serde_json::Value {
    let mut doc = agentmesh::testbed::synthetic_agent(i);
    doc["id"] = serde_json::json!(id);
    doc["capabilities"] = serde_json::json!(capabilities);
    doc
}

/// The capabilities as the node stores them (lower-cased, trimmed,
/// deduplicated).
pub(super) fn normalised(capabilities: &[String]) -> Vec<String> {
    agentmesh::descriptor::normalise_terms(capabilities.iter().map(String::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_valid_registrations() {
        let v = agentmesh::aidip::MetadataValidator::new();
        let doc = document(3, "sim-agent-0000003", &["cap-17".into(), "CAP-2".into()]);
        v.parse(&doc).unwrap();
        assert_eq!(
            normalised(&["CAP-2".into(), "cap-2 ".into()]),
            vec!["cap-2"]
        );
    }
}
