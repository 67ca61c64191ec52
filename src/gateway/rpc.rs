//! What the two JSON-RPC protocols the gateway speaks (MCP and A2A)
//! share: a non-2xx answer, and a JSON-RPC error object, as the call's
//! outcome.

use std::time::Duration;

use serde_json::{json, Value};

use super::error::GatewayError;
use super::forward::Answer;
use super::refusal_body;

/// JSON-RPC's "invalid params".
const INVALID_PARAMS: i64 = -32602;

/// The failure a non-2xx answer of `who` (speaking `protocol`) is;
/// `None` for a 2xx. 429 and 503 are busy, 401 and 403 the agent's
/// refusal passed on (its body bounded), 5xx its failure, anything else
/// an endpoint that does not speak the protocol.
pub(super) fn status_failure(answer: &Answer, who: &str, protocol: &str) -> Option<GatewayError> {
    Some(match answer.status {
        200..=299 => return None,
        429 | 503 => GatewayError::AgentBusy {
            retry_after: answer.retry_after.unwrap_or(Duration::from_secs(1)),
        },
        status @ (401 | 403) => GatewayError::AgentRefused {
            status,
            body: refusal_body(&answer.body),
        },
        status @ 500..=599 => GatewayError::AgentFailed(format!("{who} answered {status}")),
        status => not_protocol(protocol, &format!("it answered {status}")),
    })
}

/// A JSON-RPC `error` object in the answer to `method`: invalid params
/// are the client's (400), any other error the agent's failure.
pub(super) fn error_of(method: &str, error: &Value) -> GatewayError {
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
    let text = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("no message");
    if code == INVALID_PARAMS {
        GatewayError::AgentRefused {
            status: 400,
            body: json!({"error": {"code": "InvalidInput", "message": text}}),
        }
    } else {
        GatewayError::AgentFailed(format!("{method} failed: {code} {text}"))
    }
}

/// An endpoint that answers HTTP but not `protocol`.
pub(super) fn not_protocol(protocol: &str, why: &str) -> GatewayError {
    GatewayError::NotProtocol(format!(
        "the endpoint answers HTTP but not {protocol}: {why}"
    ))
}
