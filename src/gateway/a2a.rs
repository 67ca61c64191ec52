//! Calling an A2A agent (its card's JSON-RPC interface, A2A 0.x):
//! `message/send`, blocking, with the input as the message's one part (a
//! `data` part for a JSON object, a `text` part for a string), the
//! operation named among the card's skills.
//!
//! What the agent answers becomes the call's outcome:
//! - a Task `completed`: its artifacts' parts (one `data` part: that
//!   data; else `{"artifacts": [...]}`);
//! - a Message: its parts the same way;
//! - a Task still `submitted` or `working` when the blocking call came
//!   back: 202 with the task (the client may ask the agent for it);
//! - `input-required`: 409, `auth-required`: 401, passed on as the
//!   agent's refusal; `failed`, `rejected`, `canceled`: a failed task,
//!   never a 2xx;
//! - JSON-RPC's invalid-params error: the client's (400); other errors
//!   the agent's failure; what is not JSON-RPC: `not_protocol`.

use std::net::IpAddr;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT};
use serde_json::{json, Value};
use url::Url;

use super::error::GatewayError;
use super::forward::Upstream;
use super::rpc;
use crate::formats::a2a::AgentCard;

/// The interface a call goes to: the card's first JSON-RPC interface of
/// an A2A 0.x version (a 1.x interface speaks other method names).
///
/// # Errors
/// [`GatewayError::NotInvocable`] when the card has none.
pub fn endpoint(card: &AgentCard) -> Result<String, GatewayError> {
    card.interfaces
        .iter()
        .find(|i| {
            i.protocol_binding.eq_ignore_ascii_case("JSONRPC")
                && i.protocol_version
                    .as_deref()
                    .is_none_or(|v| v.starts_with("0."))
        })
        .map(|i| i.url.clone())
        .ok_or_else(|| {
            GatewayError::NotInvocable(
                "the agent's card has no JSON-RPC interface of A2A 0.x, which the gateway speaks"
                    .into(),
            )
        })
}

/// The skill a call names (or the card's only one).
///
/// # Errors
/// [`GatewayError::UnknownOperation`] naming the skills.
pub fn skill(card: &AgentCard, name: Option<&str>) -> Result<String, GatewayError> {
    let ids: Vec<String> = card.skills.iter().map(|s| s.id.clone()).collect();
    match (name, ids.as_slice()) {
        (Some(n), _) if ids.iter().any(|i| i == n) => Ok(n.to_owned()),
        (None, [only]) => Ok(only.clone()),
        (asked, _) => Err(GatewayError::UnknownOperation {
            asked: asked.map(str::to_owned),
            known: ids,
        }),
    }
}

/// The message part `input` becomes.
fn part_of(input: &Value) -> Value {
    match input {
        Value::String(text) => json!({"kind": "text", "text": text}),
        other => json!({"kind": "data", "data": other}),
    }
}

/// Sends `input` to the agent at `url` for `skill`; the outcome's status
/// (200, or 202 for a task still running) and JSON.
///
/// # Errors
/// [`GatewayError`] as the module documentation maps it.
pub async fn call(
    upstream: &Upstream,
    url: &Url,
    ips: &[IpAddr],
    mut headers: HeaderMap,
    skill: &str,
    input: &Value,
) -> Result<(u16, Value), GatewayError> {
    headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
    let id = hex::encode(rand::random::<[u8; 8]>());
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "role": "user",
                "messageId": hex::encode(rand::random::<[u8; 16]>()),
                "parts": [part_of(input)],
                "metadata": {"skill": skill},
            },
            "configuration": {"blocking": true, "acceptedOutputModes": ["application/json", "text/plain"]},
        },
    });
    let bytes = Bytes::from(serde_json::to_vec(&body).expect("a Value serialises"));
    let answer = upstream.post_once(url, ips, headers, bytes).await?;
    if let Some(failure) = rpc::status_failure(&answer, "the A2A agent", "A2A") {
        return Err(failure);
    }
    let message: Value =
        serde_json::from_slice(&answer.body).map_err(|_| not_a2a("its answer is not JSON"))?;
    if message.get("id").and_then(Value::as_str) != Some(id.as_str()) {
        return Err(not_a2a("its answer is not the JSON-RPC response asked for"));
    }
    if let Some(error) = message.get("error") {
        return Err(rpc::error_of("message/send", error));
    }
    let result = message
        .get("result")
        .ok_or_else(|| not_a2a("its answer has no result"))?;
    outcome(result)
}

/// A `message/send` result as the call's outcome.
///
/// # Errors
/// As the module documentation says.
pub fn outcome(result: &Value) -> Result<(u16, Value), GatewayError> {
    match result.get("kind").and_then(Value::as_str) {
        Some("message") => Ok((200, parts_output(result.get("parts")))),
        Some("task") => {
            let state = result
                .pointer("/status/state")
                .and_then(Value::as_str)
                .unwrap_or("unknown");
            let said = result
                .pointer("/status/message/parts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(" ");
            match state {
                "completed" => {
                    let parts: Vec<Value> = result
                        .get("artifacts")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|a| a.get("parts").and_then(Value::as_array))
                        .flatten()
                        .cloned()
                        .collect();
                    Ok((200, parts_output(Some(&Value::Array(parts)))))
                }
                "submitted" | "working" => Ok((202, result.clone())),
                "input-required" => Err(GatewayError::AgentRefused {
                    status: 409,
                    body: json!({"error": {"code": "AgentError", "message": format!("the agent needs more input: {said}")}}),
                }),
                "auth-required" => Err(GatewayError::AgentRefused {
                    status: 401,
                    body: json!({"error": {"code": "AgentError", "message": format!("the agent needs authentication: {said}")}}),
                }),
                other => Err(GatewayError::AgentFailed(format!(
                    "the task ended {other}: {said}"
                ))),
            }
        }
        _ => Err(not_a2a("its result is neither a task nor a message")),
    }
}

/// What a list of parts answers: one `data` part's data, one `text`
/// part's text, else `{"parts": [...]}`.
fn parts_output(parts: Option<&Value>) -> Value {
    let parts: Vec<Value> = parts.and_then(Value::as_array).cloned().unwrap_or_default();
    match parts.as_slice() {
        [one] if one.get("data").is_some() => one["data"].clone(),
        [one] if one.get("text").is_some() => json!({"text": one["text"]}),
        _ => json!({"parts": parts}),
    }
}

fn not_a2a(why: &str) -> GatewayError {
    rpc::not_protocol("A2A", why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_task_state_maps_to_its_outcome() {
        let done = json!({"kind": "task", "status": {"state": "completed"},
            "artifacts": [{"artifactId": "a", "parts": [{"kind": "data", "data": {"echo": 1}}]}]});
        assert_eq!(outcome(&done).unwrap(), (200, json!({"echo": 1})));
        let running = json!({"kind": "task", "id": "t", "status": {"state": "working"}});
        assert_eq!(outcome(&running).unwrap().0, 202);
        let failed = json!({"kind": "task", "status": {"state": "failed",
            "message": {"parts": [{"kind": "text", "text": "no luck"}]}}});
        match outcome(&failed) {
            Err(GatewayError::AgentFailed(m)) => assert!(m.contains("no luck"), "{m}"),
            other => panic!("{other:?}"),
        }
        let input = json!({"kind": "task", "status": {"state": "input-required"}});
        assert!(matches!(
            outcome(&input),
            Err(GatewayError::AgentRefused { status: 409, .. })
        ));
        let reply = json!({"kind": "message", "parts": [{"kind": "text", "text": "hi"}]});
        assert_eq!(outcome(&reply).unwrap(), (200, json!({"text": "hi"})));
        assert!(matches!(
            outcome(&json!({"kind": "status-update"})),
            Err(GatewayError::NotProtocol(_))
        ));
    }
}
