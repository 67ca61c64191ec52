//! The `liveness` record: one node's signed result of probing an agent
//! the way a client of its protocol would (`crawl::probe`), gossiped
//! with the agent's record so that other nodes can show "checked live by
//! node X at T" (docs/protocol.md#record-types, #probe).
//!
//! [`LiveState`] and [`ProbeProtocol`] live here, below the store that
//! keeps this node's own results and the results of its peers: one
//! definition for what the probe finds and what the wire carries.

use serde::{Deserialize, Serialize};

/// Largest `liveness` payload, in bytes: an agent id and five small
/// numbers and names fit many times over.
pub const MAX_LIVENESS_PAYLOAD_BYTES: usize = 2 * 1024;

/// What a liveness probe found: the agent's endpoint asked the way a
/// client of its protocol would ask it, read-only.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum LiveState {
    /// It answered in its protocol (MCP `initialize` and `tools/list`,
    /// A2A's JSON-RPC, any HTTP answer of an AIDIP endpoint).
    Alive,
    /// It answered 401 or 403: up, and wanting a credential.
    AuthRequired,
    /// It answered HTTP, but not in its protocol (HTML, a body that is
    /// not the JSON-RPC answer, a 404 on the JSON-RPC endpoint).
    NotProtocol,
    /// No answer at all: the name did not resolve, the connection or
    /// the TLS handshake failed.
    Unreachable,
    /// Connected, but no whole answer within `crawl.probe_timeout`.
    Timeout,
}

impl LiveState {
    /// Every state, in order (the metrics' fixed label set).
    pub const ALL: [LiveState; 5] = [
        Self::Alive,
        Self::AuthRequired,
        Self::NotProtocol,
        Self::Unreachable,
        Self::Timeout,
    ];

    /// The wire name (`alive`, `auth_required`, `not_protocol`,
    /// `unreachable`, `timeout`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Alive => "alive",
            Self::AuthRequired => "auth_required",
            Self::NotProtocol => "not_protocol",
            Self::Unreachable => "unreachable",
            Self::Timeout => "timeout",
        }
    }

    /// Whether the endpoint is up (it answered, in its protocol or
    /// asking for a credential).
    pub fn is_up(self) -> bool {
        matches!(self, Self::Alive | Self::AuthRequired)
    }
}

/// The protocol a probe spoke.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ProbeProtocol {
    /// MCP streamable HTTP: `initialize`, `tools/list`.
    Mcp,
    /// A2A JSON-RPC: `tasks/get` of a task that does not exist.
    A2a,
    /// AIDIP: the declared health URL, else a `HEAD` of the endpoint.
    Aidip,
    /// ADP: the crawler's challenge on the agent's chat WebSocket
    /// (docs/protocol.md#crawl-challenge), on its visits.
    Adp,
}

impl ProbeProtocol {
    /// The wire name (`mcp`, `a2a`, `aidip`, `adp`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mcp => "mcp",
            Self::A2a => "a2a",
            Self::Aidip => "aidip",
            Self::Adp => "adp",
        }
    }
}

/// The payload of a `liveness` record: what the signing node's probe
/// found of an agent, and of which of its records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LivenessRecord {
    /// The agent probed.
    pub agent_id: String,
    /// The seq of the agent's descriptor record the signer held when it
    /// probed: a node that holds an older one does not take the result.
    pub seq: u64,
    /// What the probe found.
    pub state: LiveState,
    /// When, Unix seconds.
    pub checked_at: u64,
    /// How long the agent took to answer (until the probe gave up, for
    /// `unreachable` and `timeout`), milliseconds.
    pub rtt_ms: u64,
    /// The protocol the probe spoke.
    pub protocol: ProbeProtocol,
}
