//! The A2A agent (JSON-RPC transport; A2A 0.3, or 1.0 in mode `v1`): its
//! card at `GET /a2a/{mode}/.well-known/agent-card.json`, and
//! `POST /a2a/{mode}` answering `message/send` (1.0: `SendMessage`) with
//! a Task whose artifact echoes what the message carried, and `tasks/get`
//! (1.0: `GetTask`) with a task it made. In mode `v1` the shapes are 1.0's
//! (`{"task": ...}`, `TASK_STATE_*`, parts without `kind`) and a request
//! must say `A2A-Version: 1.x`, as the A2A Python SDK requires.
//!
//! JSON-RPC errors are answered 200, as A2A's JSON-RPC binding does: a
//! body that is not JSON -32700, not a request -32600, an unknown method
//! -32601, bad params -32602, an unknown task -32001 (`TaskNotFoundError`),
//! a version not spoken -32009 (`VersionNotSupportedError`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use super::jsonrpc::{self, Message, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND};
use super::{error_object, html, json_body, lock, random_id, Shared};

/// The card's path under `/a2a/{mode}/`.
const CARD_PATH: &str = ".well-known/agent-card.json";
/// A2A's `TaskNotFoundError`.
const TASK_NOT_FOUND: i64 = -32001;
/// A2A 1.0's `VersionNotSupportedError`.
const VERSION_NOT_SUPPORTED: i64 = -32009;
/// Most tasks kept for `tasks/get`; the oldest is forgotten past it.
const MAX_TASKS: usize = 1024;

/// How the A2A agent behaves: the path segment `{mode}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum A2aMode {
    /// Tasks complete with an artifact echoing the message.
    Ok,
    /// Tasks end `failed`, with a status message saying why.
    Fails,
    /// 200 `text/html` to everything, the card included.
    NotA2a,
    /// As [`A2aMode::Ok`], in A2A 1.0: a 1.0 card, `SendMessage` and
    /// `GetTask` with `A2A-Version: 1.x`, 1.0's shapes.
    V1,
}

impl A2aMode {
    /// Every mode.
    pub const ALL: [A2aMode; 4] = [Self::Ok, Self::Fails, Self::NotA2a, Self::V1];

    /// The path segment: `ok`, `fails`, `not-a2a`, `v1`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Fails => "fails",
            Self::NotA2a => "not-a2a",
            Self::V1 => "v1",
        }
    }

    /// The mode of a path segment, `None` for anything else.
    pub fn parse(segment: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == segment)
    }
}

/// The tasks made, oldest first.
#[derive(Debug, Default)]
pub(super) struct Tasks(Mutex<VecDeque<(String, Value)>>);

impl Tasks {
    fn keep(&self, id: String, task: Value) {
        let mut tasks = lock(&self.0);
        if tasks.len() >= MAX_TASKS {
            tasks.pop_front();
        }
        tasks.push_back((id, task));
    }

    fn get(&self, id: &str) -> Option<Value> {
        let tasks = lock(&self.0);
        tasks.iter().find(|(t, _)| t == id).map(|(_, v)| v.clone())
    }
}

/// The card of the agent in `mode` at `base`: a 0.3 card, or in mode
/// `v1` a 1.0 card.
pub(super) fn card(base: &str, mode: A2aMode) -> Value {
    let name = mode.as_str();
    let url = format!("{base}/a2a/{name}");
    let mut card = json!({
        "name": format!("Testbed A2A echo agent ({name})"),
        "description": "Echoes what a message carries, as a task's artifact; the agentmesh testbed's invokable A2A agent.",
        "version": "1.0.0",
        "capabilities": { "streaming": false },
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": [{
            "id": "echo",
            "name": "Echo",
            "description": "Returns the text or data of the message it is sent.",
            "tags": ["echo", "testbed"],
        }],
    });
    let interface = if mode == A2aMode::V1 {
        json!({"supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        ]})
    } else {
        json!({"url": url, "protocolVersion": "0.3.0", "preferredTransport": "JSONRPC"})
    };
    for (k, v) in interface.as_object().into_iter().flatten() {
        card[k] = v.clone();
    }
    card
}

/// 404 for a path segment that names no mode.
fn no_mode(segment: &str) -> Response {
    let message = format!("no A2A agent mode {segment:?}");
    error_object(StatusCode::NOT_FOUND, "NotFound", &message)
}

/// Any method on `/a2a/{mode}/{*rest}`: the card, or HTML for `NotA2a`.
pub(super) async fn get(
    State(shared): State<Arc<Shared>>,
    Path((mode, rest)): Path<(String, String)>,
    method: Method,
) -> Response {
    let Some(mode) = A2aMode::parse(&mode) else {
        return no_mode(&mode);
    };
    if mode == A2aMode::NotA2a {
        return html();
    }
    if rest != CARD_PATH {
        return error_object(StatusCode::NOT_FOUND, "NotFound", "no such path");
    }
    if method != Method::GET {
        return method_not_allowed("GET");
    }
    json_body(&card(&shared.base_url, mode))
}

fn method_not_allowed(allow: &'static str) -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::ALLOW, HeaderValue::from_static(allow))],
    )
        .into_response()
}

/// Any method on `/a2a/{mode}`: JSON-RPC over `POST`.
pub(super) async fn rpc(
    State(shared): State<Arc<Shared>>,
    Path(mode): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(mode) = A2aMode::parse(&mode) else {
        return no_mode(&mode);
    };
    if mode == A2aMode::NotA2a {
        return html();
    }
    if method != Method::POST {
        return method_not_allowed("POST");
    }
    let v1 = mode == A2aMode::V1;
    let (send_method, get_method) = if v1 {
        ("SendMessage", "GetTask")
    } else {
        ("message/send", "tasks/get")
    };
    // 1.0 §3.6.2: no header is 0.3, which this mode does not speak.
    let version = headers
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("0.3");
    let answer = match jsonrpc::parse(&body) {
        Ok(Message::Request { id, .. }) if v1 && !version.starts_with("1.") => jsonrpc::error(
            &id,
            VERSION_NOT_SUPPORTED,
            "A2A version not supported: this interface speaks 1.0",
        ),
        Ok(Message::Request { id, method, params }) => match method.as_str() {
            m if m == send_method => match send(&shared, mode, &params) {
                Ok(task) => jsonrpc::result(&id, task),
                Err(message) => jsonrpc::error(&id, INVALID_PARAMS, message),
            },
            m if m == get_method => match params.get("id").and_then(Value::as_str) {
                Some(task) => match shared.tasks.get(task) {
                    Some(task) => jsonrpc::result(&id, task),
                    None => jsonrpc::error(&id, TASK_NOT_FOUND, "Task not found"),
                },
                None => jsonrpc::error(&id, INVALID_PARAMS, "params.id must be a string"),
            },
            _ => jsonrpc::error(&id, METHOD_NOT_FOUND, "Method not found"),
        },
        Ok(Message::Notification { .. } | Message::Response) => jsonrpc::error(
            &Value::Null,
            INVALID_REQUEST,
            "Invalid Request: an id is required",
        ),
        Err(refused) => jsonrpc::error(&refused.id, refused.code, refused.message),
    };
    json_body(&answer)
}

/// What one part carries: 0.3 names its kind (`text`, `data` an object),
/// 1.0 has one of `text` or `data` (any JSON).
fn part_value(v1: bool, part: &Value) -> Option<Value> {
    let value = if v1 {
        part.get("text")
            .filter(|t| t.is_string())
            .or_else(|| part.get("data"))
    } else {
        match part.get("kind").and_then(Value::as_str) {
            Some("text") => part.get("text").filter(|t| t.is_string()),
            Some("data") => part.get("data").filter(|d| d.is_object()),
            _ => None,
        }
    };
    value.cloned()
}

/// `message/send`: the task made from `params.message`, kept for
/// `tasks/get`; or why the params are refused.
fn send(shared: &Shared, mode: A2aMode, params: &Value) -> Result<Value, &'static str> {
    let message = params
        .get("message")
        .and_then(Value::as_object)
        .ok_or("params.message must be an object")?;
    if message.get("messageId").and_then(Value::as_str).is_none() {
        return Err("params.message.messageId must be a string");
    }
    let parts = message
        .get("parts")
        .and_then(Value::as_array)
        .filter(|p| !p.is_empty())
        .ok_or("params.message.parts must be a non-empty array")?;
    let v1 = mode == A2aMode::V1;
    let mut received = Vec::with_capacity(parts.len());
    for part in parts {
        received.push(part_value(v1, part).ok_or("each part must be a text part or a data part")?);
    }
    let echoed = if received.len() == 1 {
        received.remove(0)
    } else {
        Value::Array(received)
    };
    let id = random_id();
    let context = message
        .get("contextId")
        .and_then(Value::as_str)
        .map_or_else(random_id, str::to_owned);
    let mut task = Map::new();
    if !v1 {
        task.insert("kind".into(), json!("task"));
    }
    task.insert("id".into(), json!(id));
    task.insert("contextId".into(), json!(context));
    match mode {
        A2aMode::Fails => {
            let status = json!({
                "state": "failed",
                "message": {
                    "role": "agent",
                    "kind": "message",
                    "messageId": random_id(),
                    "taskId": id,
                    "contextId": context,
                    "parts": [{
                        "kind": "text",
                        "text": "the echo skill failed: this agent's tasks fail on request (mode fails)",
                    }],
                },
            });
            task.insert("status".into(), status);
        }
        _ => {
            let (state, part) = if v1 {
                (
                    "TASK_STATE_COMPLETED",
                    json!({ "data": { "echo": echoed } }),
                )
            } else {
                (
                    "completed",
                    json!({ "kind": "data", "data": { "echo": echoed } }),
                )
            };
            task.insert("status".into(), json!({ "state": state }));
            let artifact = json!({
                "artifactId": random_id(),
                "name": "echo",
                "parts": [part],
            });
            task.insert("artifacts".into(), json!([artifact]));
        }
    }
    // 1.0 wraps the task (`SendMessageResponse`); `GetTask` answers it bare.
    let task = Value::Object(task);
    shared.tasks.keep(id, task.clone());
    Ok(if v1 { json!({ "task": task }) } else { task })
}
