//! The ADP/1.0 `agent.json` document (ADP section 5.3) and its mapping into
//! a [`Descriptor`]. Unknown members are kept in `extra` (ADP 10.4: unknown
//! fields are ignored, never an error). The crawler fetches and validates
//! these documents against `proto/adp-agent.schema.json`.

pub mod check;
pub mod handshake;
pub mod message;
pub mod rotation;
pub mod txt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::descriptor::{self, Descriptor, DocumentFormat};

/// Where a domain publishes its `agent.json` (ADP 5.1).
pub const WELL_KNOWN_PATH: &str = "/.well-known/agent.json";
/// The path of the challenge WebSocket (`endpoints.chat`) in the documents
/// `agentmesh publish` writes and the testbed serves.
pub const CHAT_PATH: &str = "/agent/chat";

/// The JSON Schema of `agent.json`.
pub const SCHEMA: &str = include_str!("../proto/adp-agent.schema.json");

/// The root of an `agent.json` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentDocument {
    /// `ADP/1.0`.
    pub protocol: String,
    /// Who the agent is.
    pub identity: Identity,
    /// Logical endpoint name to URL (`discovery`, `wellKnown`, `chat`, ...).
    pub endpoints: Map<String, Value>,
    /// What it offers.
    pub capabilities: Vec<Capability>,
    /// Interface type to URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<Map<String, Value>>,
    /// Known peer agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relationships: Option<Vec<Relationship>>,
    /// Security configuration.
    pub security: Value,
    /// Policy links.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<Value>,
    /// Status and uptime.
    pub availability: Availability,
    /// Document metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    /// Members this version does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The `identity` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    /// `agent:{domain}`.
    pub id: String,
    /// Canonical FQDN.
    pub domain: String,
    /// Display name.
    pub name: String,
    /// Operator's display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// ISO 8601 creation time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// The agent's key.
    pub public_key: PublicKey,
    /// The key before a rotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_fingerprint: Option<String>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `identity.publicKey`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PublicKey {
    /// `ed25519`.
    pub algorithm: String,
    /// `ed25519:` + hex SHA-256 of the raw key.
    pub fingerprint: String,
    /// The raw key, base64url without padding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full: Option<String>,
}

/// One capability object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capability {
    /// Capability id.
    pub id: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Accepted input media types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Vec<String>>,
    /// Produced output media types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Vec<String>>,
    /// `chat`, `api`, `webhook`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<Vec<String>>,
    /// BCP 47 tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub languages: Option<Vec<String>>,
    /// `{model, details?}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pricing: Option<Value>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One entry of `relationships`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relationship {
    /// `peer`, `child` or `parent`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The other agent's URI.
    pub id: String,
    /// Its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `verified` when this agent vouches for the peer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<String>,
    /// Since when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

/// The `availability` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Availability {
    /// `online`, `offline`, `maintenance`.
    pub status: String,
    /// Anything else (uptime, maintenance window).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl AgentDocument {
    /// The normalised descriptor: capability ids, the union of capability
    /// languages, the chat endpoint (or the first endpoint) as endpoint.
    pub fn to_descriptor(&self) -> Descriptor {
        let caps = self.capabilities.iter().map(|c| c.id.as_str());
        let languages = self
            .capabilities
            .iter()
            .flat_map(|c| c.languages.iter().flatten())
            .filter_map(|t| descriptor::normalise_language(t))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let endpoint = ["tasks", "chat", "discovery"]
            .iter()
            .find_map(|k| self.endpoints.get(*k).and_then(Value::as_str))
            .map(str::to_owned);
        let description = self
            .capabilities
            .iter()
            .filter_map(|c| c.description.as_deref())
            .collect::<Vec<_>>()
            .join(" ");
        Descriptor {
            id: self.identity.id.to_lowercase(),
            name: self.identity.name.clone(),
            description,
            version: self
                .meta
                .as_ref()
                .and_then(|m| m.get("version"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            publisher: self.identity.owner.clone(),
            endpoint,
            capabilities: descriptor::normalise_terms(caps),
            tags: Vec::new(),
            languages,
            status: Some(self.availability.status.trim().to_lowercase()),
            auth: None,
            format: DocumentFormat::Adp,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALICE: &str = r#"{
      "protocol": "ADP/1.0",
      "identity": {"id": "agent:alice.agent", "domain": "alice.agent", "name": "Alice's Agent",
        "owner": "Alice", "publicKey": {"algorithm": "ed25519",
        "fingerprint": "ed25519:0000000000000000000000000000000000000000000000000000000000000000"}},
      "endpoints": {"discovery": "https://alice.agent/", "chat": "wss://alice.agent/agent/chat",
        "tasks": "https://alice.agent/agent/tasks"},
      "capabilities": [{"id": "Chat", "description": "General-purpose conversational AI",
        "languages": ["en", "ZH"], "pricing": {"model": "free"}}],
      "security": {"tlsRequired": true},
      "availability": {"status": "online"},
      "x-future": {"kept": true}
    }"#;

    #[test]
    fn agent_json_maps_into_a_descriptor_and_keeps_unknown_members() {
        let doc: AgentDocument = serde_json::from_str(ALICE).unwrap();
        assert!(doc.extra.contains_key("x-future"));
        let d = doc.to_descriptor();
        assert_eq!(d.id, "agent:alice.agent");
        assert_eq!(d.capabilities, vec!["chat"]);
        assert_eq!(d.languages, vec!["en", "zh"]);
        assert_eq!(
            d.endpoint.as_deref(),
            Some("https://alice.agent/agent/tasks")
        );
        assert_eq!(d.format, DocumentFormat::Adp);
    }
}
