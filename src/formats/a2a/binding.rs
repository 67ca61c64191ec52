//! Which of a card's interfaces agentmesh speaks A2A's JSON-RPC binding
//! to, and what differs between the two versions of that binding it
//! speaks (docs/protocol.md#gateway): the gateway's call and the probe's
//! read-only request both choose here, so they ask the same interface in
//! the same version.
//!
//! | | 0.x (0.2.x, 0.3) | 1.x (1.0) |
//! | --- | --- | --- |
//! | send | `message/send` | `SendMessage` |
//! | read a task | `tasks/get` | `GetTask` |
//! | header | none (an agent reads none as 0.3) | `A2A-Version: 1.0` |
//! | a part | `{"kind": "text", "text"}`, `{"kind": "data", "data"}` | `{"text"}`, `{"data"}` |
//! | a result | an object with `kind` `task` or `message` | `{"task": ...}` or `{"message": ...}` |
//! | a task state | `completed`, `input-required`, ... | `TASK_STATE_COMPLETED`, ... |
//! | a role | `user` | `ROLE_USER` |
//!
//! The choice, as A2A 1.0 §8.3.2 has clients choose: the card's first
//! JSON-RPC interface, in the card's order (its order of preference), of
//! a version agentmesh speaks, 1.x or 0.x (a 0.x card without
//! `protocolVersion`, from before 0.2.5, counts as 0.x); a card declaring
//! neither has no interface agentmesh speaks.

use super::AgentCard;

/// The HTTP header a 1.x request names its version in (A2A 1.0 §3.6.1,
/// `A2A-Version`), lower-case as HTTP/2 sends it.
pub const VERSION_HEADER: &str = "a2a-version";
/// The version a 1.x request names: the one whose semantics agentmesh
/// implements (`Major.Minor`, as §3.6 asks).
pub const V1_VERSION: &str = "1.0";

/// A version of A2A's JSON-RPC binding agentmesh speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcVersion {
    /// A2A 0.2.x and 0.3: slash-separated method names, `kind`
    /// discriminators, lower-case task states.
    V0,
    /// A2A 1.x: PascalCase method names, the `A2A-Version` header,
    /// `TASK_STATE_*` states.
    V1,
}

impl RpcVersion {
    /// The method that sends a message.
    pub fn send_method(self) -> &'static str {
        match self {
            Self::V0 => "message/send",
            Self::V1 => "SendMessage",
        }
    }

    /// The method that reads a task.
    pub fn get_task_method(self) -> &'static str {
        match self {
            Self::V0 => "tasks/get",
            Self::V1 => "GetTask",
        }
    }

    /// The version header a request carries, if any: 0.x sends none (an
    /// agent reads none as 0.3, and a 0.2.x agent knows no header).
    pub fn header(self) -> Option<(&'static str, &'static str)> {
        match self {
            Self::V0 => None,
            Self::V1 => Some((VERSION_HEADER, V1_VERSION)),
        }
    }

    /// A task state in the 0.x spelling (`completed`, `input-required`);
    /// a 1.x `TASK_STATE_*` mapped, anything else as it came.
    pub fn state_name(self, state: &str) -> &str {
        if self == Self::V0 {
            return state;
        }
        match state {
            "TASK_STATE_SUBMITTED" => "submitted",
            "TASK_STATE_WORKING" => "working",
            "TASK_STATE_COMPLETED" => "completed",
            "TASK_STATE_FAILED" => "failed",
            "TASK_STATE_CANCELED" => "canceled",
            "TASK_STATE_INPUT_REQUIRED" => "input-required",
            "TASK_STATE_REJECTED" => "rejected",
            "TASK_STATE_AUTH_REQUIRED" => "auth-required",
            other => other,
        }
    }
}

/// The interface a JSON-RPC request goes to, and in which version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcInterface {
    /// The endpoint.
    pub url: String,
    /// The version spoken there.
    pub version: RpcVersion,
    /// The `tenant` a 1.x request must carry when the interface declares
    /// one (A2A 1.0 §8.3.2).
    pub tenant: Option<String>,
}

impl AgentCard {
    /// The JSON-RPC interface agentmesh speaks to (the module
    /// documentation's choice); `None` when the card declares none of a
    /// version it speaks.
    pub fn rpc_interface(&self) -> Option<RpcInterface> {
        self.interfaces
            .iter()
            .filter(|i| i.protocol_binding.eq_ignore_ascii_case("JSONRPC"))
            .find_map(|i| {
                Some(RpcInterface {
                    url: i.url.clone(),
                    version: version_of(i.protocol_version.as_deref())?,
                    tenant: i.tenant.clone().filter(|t| !t.is_empty()),
                })
            })
    }
}

/// The binding version a declared `protocolVersion` is: its major number
/// (`1.0`, `1`, `1.0.1` are 1.x; `0.3.0` 0.x), none declared 0.x; any
/// other major, or what is not a version, `None`.
fn version_of(declared: Option<&str>) -> Option<RpcVersion> {
    let Some(declared) = declared else {
        return Some(RpcVersion::V0);
    };
    let major = declared.trim().split('.').next()?;
    match major {
        "0" => Some(RpcVersion::V0),
        "1" => Some(RpcVersion::V1),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::formats::a2a::parse_card;

    fn card_with(interfaces: serde_json::Value) -> AgentCard {
        parse_card(&json!({
            "name": "n", "description": "d", "version": "1",
            "supportedInterfaces": interfaces, "capabilities": {},
            "defaultInputModes": [], "defaultOutputModes": [], "skills": [],
        }))
        .unwrap()
    }

    #[test]
    fn the_card_s_first_json_rpc_interface_of_a_version_spoken_wins() {
        let card = card_with(json!([
            {"url": "https://a/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": "https://a/future", "protocolBinding": "JSONRPC", "protocolVersion": "2.0"},
            {"url": "https://a/new", "protocolBinding": "JSONRPC", "protocolVersion": "1.0", "tenant": "t1"},
            {"url": "https://a/old", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ]));
        assert_eq!(
            card.rpc_interface(),
            Some(RpcInterface {
                url: "https://a/new".into(),
                version: RpcVersion::V1,
                tenant: Some("t1".into()),
            })
        );
        // The card's order is its preference (A2A 1.0 §8.3.2): a 0.x
        // interface listed first is the one spoken to.
        let prefers_old = card_with(json!([
            {"url": "https://a/old", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": "https://a/new", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        ]));
        let chosen = prefers_old.rpc_interface().unwrap();
        assert_eq!(
            (chosen.url.as_str(), chosen.version),
            ("https://a/old", RpcVersion::V0)
        );
        let old = card_with(json!([
            {"url": "https://a/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": "https://a/old", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ]));
        let chosen = old.rpc_interface().unwrap();
        assert_eq!(
            (chosen.url.as_str(), chosen.version),
            ("https://a/old", RpcVersion::V0)
        );
        let future = card_with(json!([
            {"url": "https://a/x", "protocolBinding": "JSONRPC", "protocolVersion": "2.0"},
            {"url": "https://a/y", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
        ]));
        assert_eq!(future.rpc_interface(), None);
    }

    #[test]
    fn a_0x_card_speaks_0x_even_without_a_version() {
        let card = parse_card(&json!({
            "name": "n", "description": "d", "version": "1", "url": "https://a/rpc",
            "capabilities": {}, "defaultInputModes": [], "defaultOutputModes": [], "skills": [],
        }))
        .unwrap();
        let chosen = card.rpc_interface().unwrap();
        assert_eq!(
            (chosen.url.as_str(), chosen.version),
            ("https://a/rpc", RpcVersion::V0)
        );
        assert_eq!(chosen.tenant, None);
    }

    #[test]
    fn states_read_in_either_spelling() {
        assert_eq!(
            RpcVersion::V1.state_name("TASK_STATE_INPUT_REQUIRED"),
            "input-required"
        );
        assert_eq!(
            RpcVersion::V1.state_name("TASK_STATE_UNSPECIFIED"),
            "TASK_STATE_UNSPECIFIED"
        );
        assert_eq!(RpcVersion::V0.state_name("completed"), "completed");
        assert_eq!(
            RpcVersion::V0.state_name("TASK_STATE_COMPLETED"),
            "TASK_STATE_COMPLETED"
        );
    }
}
