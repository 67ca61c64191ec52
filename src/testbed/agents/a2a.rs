//! The A2A agent (A2A v0.3, JSON-RPC transport): its card at
//! `GET /a2a/{mode}/.well-known/agent-card.json`, and `POST /a2a/{mode}`
//! answering `message/send` with a Task whose artifact echoes what the
//! message carried, and `tasks/get` with a task it made.
//!
//! JSON-RPC errors are answered 200, as A2A's JSON-RPC binding does: a
//! body that is not JSON -32700, not a request -32600, an unknown method
//! -32601, bad params -32602, an unknown task -32001 (`TaskNotFoundError`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use super::jsonrpc::{self, Message, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND};
use super::{error_object, html, json_body, lock, random_id, Shared};

/// The card's path under `/a2a/{mode}/`.
const CARD_PATH: &str = ".well-known/agent-card.json";
/// A2A's `TaskNotFoundError`.
const TASK_NOT_FOUND: i64 = -32001;
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
}

impl A2aMode {
    /// Every mode.
    pub const ALL: [A2aMode; 3] = [Self::Ok, Self::Fails, Self::NotA2a];

    /// The path segment: `ok`, `fails`, `not-a2a`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Fails => "fails",
            Self::NotA2a => "not-a2a",
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

/// The card of the agent in `mode` at `base`.
pub(super) fn card(base: &str, mode: A2aMode) -> Value {
    let mode = mode.as_str();
    json!({
        "name": format!("Testbed A2A echo agent ({mode})"),
        "description": "Echoes what a message carries, as a task's artifact; the agentmesh testbed's invokable A2A agent.",
        "url": format!("{base}/a2a/{mode}"),
        "version": "1.0.0",
        "protocolVersion": "0.3.0",
        "preferredTransport": "JSONRPC",
        "capabilities": { "streaming": false },
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": [{
            "id": "echo",
            "name": "Echo",
            "description": "Returns the text or data of the message it is sent.",
            "tags": ["echo", "testbed"],
        }],
    })
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
    let answer = match jsonrpc::parse(&body) {
        Ok(Message::Request { id, method, params }) => match method.as_str() {
            "message/send" => match send(&shared, mode, &params) {
                Ok(task) => jsonrpc::result(&id, task),
                Err(message) => jsonrpc::error(&id, INVALID_PARAMS, message),
            },
            "tasks/get" => match params.get("id").and_then(Value::as_str) {
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
    let mut received = Vec::with_capacity(parts.len());
    for part in parts {
        let value = match part.get("kind").and_then(Value::as_str) {
            Some("text") => part.get("text").filter(|t| t.is_string()),
            Some("data") => part.get("data").filter(|d| d.is_object()),
            _ => None,
        };
        received.push(
            value
                .cloned()
                .ok_or("each part must be a text part or a data part")?,
        );
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
    task.insert("kind".into(), json!("task"));
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
            task.insert("status".into(), json!({ "state": "completed" }));
            let artifact = json!({
                "artifactId": random_id(),
                "name": "echo",
                "parts": [{ "kind": "data", "data": { "echo": echoed } }],
            });
            task.insert("artifacts".into(), json!([artifact]));
        }
    }
    let task = Value::Object(task);
    shared.tasks.keep(id, task.clone());
    Ok(task)
}
