//! Calling an A2A agent over its card's JSON-RPC interface, in A2A 0.x
//! or 1.x as the card declares ([`RpcInterface`]: a 1.x JSON-RPC
//! interface when there is one, else a 0.x one; the differences are
//! tabled in `formats/a2a/binding.rs`): a blocking `message/send` (0.x)
//! or `SendMessage` with `A2A-Version: 1.0` (1.x), the input as the
//! message's one part (a `data` part for JSON, a `text` part for a
//! string), the operation named among the card's skills in the message's
//! `metadata.skill`, a 1.x interface's `tenant` carried.
//!
//! What the agent answers becomes the call's outcome, the same in both
//! versions:
//! - a Task `completed`: its artifacts' parts (one `data` part: that
//!   data; one `text` part: `{"text": ...}`; else `{"parts": [...]}`);
//! - a Message: its parts the same way;
//! - a Task still `submitted` or `working` when the blocking call came
//!   back: 202 with the task (the client may ask the agent for it);
//! - `input-required`: 409, `auth-required`: 401, passed on as the
//!   agent's refusal; `failed`, `rejected`, `canceled`: a failed task,
//!   never a 2xx;
//! - JSON-RPC's invalid-params error: the client's (400); other errors
//!   the agent's failure; what is not JSON-RPC, or not the version's
//!   result shape: `not_protocol`.

use std::net::IpAddr;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT};
use serde_json::{json, Value};
use url::Url;

use super::error::GatewayError;
use super::forward::Upstream;
use super::rpc;
use crate::formats::a2a::{AgentCard, RpcInterface, RpcVersion};

/// The interface a call goes to ([`AgentCard::rpc_interface`]).
///
/// # Errors
/// [`GatewayError::NotInvocable`] when the card has none.
pub fn endpoint(card: &AgentCard) -> Result<RpcInterface, GatewayError> {
    card.rpc_interface().ok_or_else(|| {
        GatewayError::NotInvocable(
            "the agent's card has no JSON-RPC interface of A2A 0.x or 1.x, which the gateway speaks"
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

/// The message part `input` becomes, in `version`'s shape.
fn part_of(version: RpcVersion, input: &Value) -> Value {
    match (version, input) {
        (RpcVersion::V0, Value::String(text)) => json!({"kind": "text", "text": text}),
        (RpcVersion::V0, other) => json!({"kind": "data", "data": other}),
        (RpcVersion::V1, Value::String(text)) => json!({"text": text}),
        (RpcVersion::V1, other) => json!({"data": other}),
    }
}

/// The JSON-RPC request that sends `input` for `skill` at `to`, with
/// the request's `id`.
fn request(to: &RpcInterface, id: &str, skill: &str, input: &Value) -> Value {
    let message_id = hex::encode(rand::random::<[u8; 16]>());
    let accepted = ["application/json", "text/plain"];
    let params = match to.version {
        RpcVersion::V0 => json!({
            "message": {
                "kind": "message",
                "role": "user",
                "messageId": message_id,
                "parts": [part_of(to.version, input)],
                "metadata": {"skill": skill},
            },
            "configuration": {"blocking": true, "acceptedOutputModes": accepted},
        }),
        RpcVersion::V1 => {
            // Blocking is 1.x's default (`returnImmediately` unset).
            let mut params = json!({
                "message": {
                    "role": "ROLE_USER",
                    "messageId": message_id,
                    "parts": [part_of(to.version, input)],
                    "metadata": {"skill": skill},
                },
                "configuration": {"acceptedOutputModes": accepted},
            });
            if let Some(tenant) = &to.tenant {
                params["tenant"] = json!(tenant);
            }
            params
        }
    };
    json!({"jsonrpc": "2.0", "id": id, "method": to.version.send_method(), "params": params})
}

/// Sends `input` to the agent at `url` for `skill`; the outcome's status
/// (200, or 202 for a task still running) and JSON.
///
/// # Errors
/// [`GatewayError`] as the module documentation maps it.
pub async fn call(
    upstream: &Upstream,
    (to, url, ips): (&RpcInterface, &Url, &[IpAddr]),
    mut headers: HeaderMap,
    skill: &str,
    input: &Value,
) -> Result<(u16, Value), GatewayError> {
    headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
    if let Some((name, value)) = to.version.header() {
        headers.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    let id = hex::encode(rand::random::<[u8; 8]>());
    let body = request(to, &id, skill, input);
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
        return Err(rpc::error_of(to.version.send_method(), error));
    }
    let result = message
        .get("result")
        .ok_or_else(|| not_a2a("its answer has no result"))?;
    outcome(to.version, result)
}

/// A `message/send` result as the call's outcome.
///
/// # Errors
/// As the module documentation says.
pub fn outcome(version: RpcVersion, result: &Value) -> Result<(u16, Value), GatewayError> {
    match answered(version, result) {
        Some(("message", message)) => Ok((200, parts_output(message.get("parts")))),
        Some(("task", result)) => {
            let state = result
                .pointer("/status/state")
                .and_then(Value::as_str)
                .map_or("unknown", |s| version.state_name(s));
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

/// What a send result holds, `task` or `message`, and that object: 0.x
/// says so in `kind`, 1.x in the one member it has (`SendMessageResponse`).
fn answered(version: RpcVersion, result: &Value) -> Option<(&'static str, &Value)> {
    match version {
        RpcVersion::V0 => match result.get("kind").and_then(Value::as_str) {
            Some("task") => Some(("task", result)),
            Some("message") => Some(("message", result)),
            _ => None,
        },
        RpcVersion::V1 => ["task", "message"]
            .into_iter()
            .find_map(|k| result.get(k).filter(|v| v.is_object()).map(|v| (k, v))),
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
        assert_eq!(
            outcome(RpcVersion::V0, &done).unwrap(),
            (200, json!({"echo": 1}))
        );
        let running = json!({"kind": "task", "id": "t", "status": {"state": "working"}});
        assert_eq!(outcome(RpcVersion::V0, &running).unwrap().0, 202);
        let failed = json!({"kind": "task", "status": {"state": "failed",
            "message": {"parts": [{"kind": "text", "text": "no luck"}]}}});
        match outcome(RpcVersion::V0, &failed) {
            Err(GatewayError::AgentFailed(m)) => assert!(m.contains("no luck"), "{m}"),
            other => panic!("{other:?}"),
        }
        let input = json!({"kind": "task", "status": {"state": "input-required"}});
        assert!(matches!(
            outcome(RpcVersion::V0, &input),
            Err(GatewayError::AgentRefused { status: 409, .. })
        ));
        let reply = json!({"kind": "message", "parts": [{"kind": "text", "text": "hi"}]});
        assert_eq!(
            outcome(RpcVersion::V0, &reply).unwrap(),
            (200, json!({"text": "hi"}))
        );
        assert!(matches!(
            outcome(RpcVersion::V0, &json!({"kind": "status-update"})),
            Err(GatewayError::NotProtocol(_))
        ));
    }

    #[test]
    fn a_1x_answer_maps_as_a_0x_one_does() {
        let v1 = RpcVersion::V1;
        let done = json!({"task": {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a", "parts": [{"text": "HELLO"}]}]}});
        assert_eq!(outcome(v1, &done).unwrap(), (200, json!({"text": "HELLO"})));
        let data = json!({"task": {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a", "parts": [{"data": [1, 2]}]}]}});
        assert_eq!(outcome(v1, &data).unwrap(), (200, json!([1, 2])));
        let running = json!({"task": {"id": "t", "status": {"state": "TASK_STATE_SUBMITTED"}}});
        assert_eq!(
            outcome(v1, &running).unwrap(),
            (202, running["task"].clone())
        );
        let failed = json!({"task": {"id": "t", "status": {"state": "TASK_STATE_FAILED",
            "message": {"role": "ROLE_AGENT", "parts": [{"text": "no luck"}]}}}});
        match outcome(v1, &failed) {
            Err(GatewayError::AgentFailed(m)) => {
                assert_eq!(m, "the task ended failed: no luck");
            }
            other => panic!("{other:?}"),
        }
        for (state, status) in [
            ("TASK_STATE_INPUT_REQUIRED", 409),
            ("TASK_STATE_AUTH_REQUIRED", 401),
        ] {
            let task = json!({"task": {"id": "t", "status": {"state": state}}});
            match outcome(v1, &task) {
                Err(GatewayError::AgentRefused { status: s, .. }) => assert_eq!(s, status),
                other => panic!("{state}: {other:?}"),
            }
        }
        let reply = json!({"message": {"role": "ROLE_AGENT", "parts": [{"text": "hi"}]}});
        assert_eq!(outcome(v1, &reply).unwrap(), (200, json!({"text": "hi"})));
        // The other version's shape is not this version's answer.
        let v0_task = json!({"kind": "task", "status": {"state": "completed"}});
        assert!(matches!(
            outcome(v1, &v0_task),
            Err(GatewayError::NotProtocol(_))
        ));
        assert!(matches!(
            outcome(RpcVersion::V0, &done),
            Err(GatewayError::NotProtocol(_))
        ));
    }

    #[test]
    fn each_version_is_sent_its_own_request() {
        let at = |version, tenant: Option<&str>| RpcInterface {
            url: "https://a/rpc".into(),
            version,
            tenant: tenant.map(str::to_owned),
        };
        let old = request(&at(RpcVersion::V0, None), "1", "echo", &json!("hi"));
        assert_eq!(old["method"], "message/send");
        assert_eq!(old["params"]["message"]["role"], "user");
        assert_eq!(
            old["params"]["message"]["parts"],
            json!([{"kind": "text", "text": "hi"}])
        );
        assert_eq!(old["params"]["configuration"]["blocking"], true);
        let new = request(
            &at(RpcVersion::V1, Some("t1")),
            "2",
            "echo",
            &json!({"a": 1}),
        );
        assert_eq!(new["method"], "SendMessage");
        assert_eq!(new["params"]["tenant"], "t1");
        assert_eq!(new["params"]["message"]["role"], "ROLE_USER");
        assert_eq!(
            new["params"]["message"]["parts"],
            json!([{"data": {"a": 1}}])
        );
        assert_eq!(new["params"]["message"]["metadata"]["skill"], "echo");
        assert!(new["params"]["message"].get("kind").is_none());
        let plain = request(&at(RpcVersion::V1, None), "3", "echo", &json!("hi"));
        assert!(plain["params"].get("tenant").is_none());
        assert_eq!(plain["params"]["message"]["parts"], json!([{"text": "hi"}]));
    }
}
