//! Why a call through the gateway did not give the agent's answer: the
//! client's request (an unknown operation, an input the schema refuses),
//! the agent (unreachable, too slow, failing, overloaded, an answer that
//! is not JSON or too large), or this node (at its limit). Each has the
//! HTTP status the AIDIP draft gives it; none is a 2xx.

use std::time::Duration;

/// A value a schema refused: where, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    /// JSON Pointer into the value (`""` for the value itself).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// A call that did not give the agent's answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// No live agent with this id (or one the client may not see).
    #[error("agent {id} not found")]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// The operator suspended the agent on this node.
    #[error("agent {id} is suspended on this node")]
    Suspended {
        /// The agent.
        id: String,
    },
    /// The agent is not one this node calls (no endpoint, or a protocol
    /// the gateway does not speak).
    #[error("{0}")]
    NotInvocable(String),
    /// The agent declares no operation.
    #[error("the agent declares no operations and no inputs")]
    NoOperations,
    /// The call names an operation the agent does not declare, or none
    /// when it declares several.
    #[error("{}", unknown_operation(asked.as_deref(), known))]
    UnknownOperation {
        /// The name asked for.
        asked: Option<String>,
        /// The names the agent declares.
        known: Vec<String>,
    },
    /// The input does not fit the operation's schema: nothing was sent.
    #[error("the input does not match the operation's input schema ({} problems)", .0.len())]
    InvalidInput(Vec<Violation>),
    /// The agent's own schema does not compile: nothing was sent.
    #[error("the agent's input schema is not a usable JSON Schema: {0}")]
    BadSchema(String),
    /// The agent's endpoint is not one this node connects to (not HTTPS,
    /// a port or an address the policy refuses).
    #[error("the agent's endpoint is not one this node connects to: {0}")]
    EndpointRefused(String),
    /// The agent could not be reached (DNS, connection, TLS).
    #[error("the agent could not be reached")]
    Unreachable(String),
    /// The agent did not answer in time.
    #[error("the agent did not answer within {} s", .0.as_secs_f64())]
    Timeout(Duration),
    /// The agent answered 4xx: the client's call was refused by the
    /// agent, passed on.
    #[error("the agent refused the call ({status})")]
    AgentRefused {
        /// The agent's status.
        status: u16,
        /// The agent's error object or body, bounded.
        body: serde_json::Value,
    },
    /// The agent is overloaded (429 or 503): try again later.
    #[error("the agent is overloaded")]
    AgentBusy {
        /// Its `Retry-After`, bounded.
        retry_after: Duration,
    },
    /// The agent failed (5xx), or answered what is not JSON or too much.
    #[error("the agent failed")]
    AgentFailed(String),
    /// The endpoint answers HTTP, but not the protocol the agent is
    /// published with (an MCP server that is not one).
    #[error("{0}")]
    NotProtocol(String),
    /// An ADP agent's handshake did not prove the key this node counts
    /// for it: nothing of the call was sent.
    #[error("the agent did not prove its key: {0}")]
    KeyNotProven(String),
    /// An ADP agent's reply is unsigned or not signed by its key: nothing
    /// of it is passed on.
    #[error("the agent's reply is not signed by its key")]
    BadSignature(String),
    /// This node runs as many calls as it may (in all, or to this agent).
    #[error("{0}")]
    Busy(&'static str),
}

fn unknown_operation(asked: Option<&str>, known: &[String]) -> String {
    let known = if known.is_empty() {
        "none".to_owned()
    } else {
        known.join(", ")
    };
    match asked {
        Some(name) => format!("the agent has no operation {name:?} (it has: {known})"),
        None => format!("the agent has several operations: name one ({known})"),
    }
}

impl GatewayError {
    /// The stable reason code an answer, the log and the metrics carry.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => "not_found",
            Self::Suspended { .. } => "suspended",
            Self::NotInvocable(_) => "not_invocable",
            Self::NoOperations => "no_operations",
            Self::UnknownOperation { .. } => "unknown_operation",
            Self::InvalidInput(_) => "invalid_input",
            Self::BadSchema(_) => "bad_schema",
            Self::EndpointRefused(_) => "endpoint_refused",
            Self::Unreachable(_) => "unreachable",
            Self::Timeout(_) => "timeout",
            Self::AgentRefused { .. } => "agent_refused",
            Self::AgentBusy { .. } => "agent_busy",
            Self::AgentFailed(_) => "agent_failed",
            Self::NotProtocol(_) => "not_protocol",
            Self::KeyNotProven(_) => "key_not_proven",
            Self::BadSignature(_) => "bad_signature",
            Self::Busy(_) => "node_busy",
        }
    }
}
