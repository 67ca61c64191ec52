//! The MCP server: streamable HTTP (MCP 2025-06-18), `POST /mcp/{mode}`,
//! each JSON-RPC request answered with one `application/json` object.
//!
//! `initialize` opens a session (a random `Mcp-Session-Id` in the
//! answer); every later message must carry it: without the header 400,
//! with an id this server never gave (or closed by `DELETE`) 404, as the
//! specification says. A notification or a client's response is 202 with
//! no body. Methods: `ping`, `tools/list` (one tool, `echo`) and
//! `tools/call`; others -32601, an unknown tool or bad arguments -32602.
//! A body that is not a JSON-RPC message is 400 with the JSON-RPC error;
//! an `MCP-Protocol-Version` header naming a version this server does not
//! speak is 400. `GET` (no server-sent stream) is 405.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::jsonrpc::{self, Message, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND};
use super::{error_object, has_bearer, html, json_body, lock, random_id, unauthorized, Shared};

/// The protocol version this server answers `initialize` with.
pub const MCP_PROTOCOL_VERSION: &str = "2025-06-18";
/// Versions accepted in the `MCP-Protocol-Version` header.
const ACCEPTED_VERSIONS: [&str; 2] = [MCP_PROTOCOL_VERSION, "2025-03-26"];
/// The session header.
const SESSION: &str = "mcp-session-id";
/// Most open sessions; the oldest is forgotten past it.
const MAX_SESSIONS: usize = 1024;

/// How the MCP server behaves: the path segment `{mode}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum McpMode {
    /// A working server.
    Ok,
    /// `tools/call` answers `isError: true` with a text explaining.
    ToolError,
    /// 200 `text/html` to every request: HTTP, but not MCP.
    NotMcp,
    /// 401 with `WWW-Authenticate: Bearer` unless `Authorization: Bearer
    /// agent-secret`; then as `Ok`.
    Auth,
    /// As `Ok`, but `tools/call` never answers (until the server shuts
    /// down): a session its client must end after giving up.
    Hang,
}

impl McpMode {
    /// Every mode.
    pub const ALL: [McpMode; 5] = [
        Self::Ok,
        Self::ToolError,
        Self::NotMcp,
        Self::Auth,
        Self::Hang,
    ];

    /// The path segment: `ok`, `tool-error`, `not-mcp`, `auth`, `hang`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ToolError => "tool-error",
            Self::NotMcp => "not-mcp",
            Self::Auth => "auth",
            Self::Hang => "hang",
        }
    }

    /// The mode of a path segment, `None` for anything else.
    pub fn parse(segment: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == segment)
    }
}

/// The open sessions, oldest first.
#[derive(Debug, Default)]
pub(super) struct Sessions(Mutex<VecDeque<String>>);

impl Sessions {
    fn open(&self) -> String {
        let id = random_id();
        let mut open = lock(&self.0);
        if open.len() >= MAX_SESSIONS {
            open.pop_front();
        }
        open.push_back(id.clone());
        id
    }

    fn is_open(&self, id: &str) -> bool {
        lock(&self.0).iter().any(|s| s == id)
    }

    fn close(&self, id: &str) -> bool {
        let mut open = lock(&self.0);
        let before = open.len();
        open.retain(|s| s != id);
        open.len() != before
    }
}

/// Any method on `/mcp/{mode}`.
pub(super) async fn handle(
    State(shared): State<Arc<Shared>>,
    Path(mode): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(mode) = McpMode::parse(&mode) else {
        let message = format!("no MCP server mode {mode:?}");
        return error_object(StatusCode::NOT_FOUND, "NotFound", &message);
    };
    if mode == McpMode::NotMcp {
        return html();
    }
    if mode == McpMode::Auth && !has_bearer(&headers) {
        return unauthorized();
    }
    let session = headers.get(SESSION).and_then(|v| v.to_str().ok());
    match method {
        Method::POST => post(&shared, mode, session, &headers, &body).await,
        Method::DELETE => match session {
            Some(id) if shared.sessions.close(id) => StatusCode::OK.into_response(),
            Some(_) => StatusCode::NOT_FOUND.into_response(),
            None => StatusCode::BAD_REQUEST.into_response(),
        },
        _ => (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, HeaderValue::from_static("POST, DELETE"))],
        )
            .into_response(),
    }
}

/// A JSON-RPC object with `status`.
fn rpc(status: StatusCode, value: &Value) -> Response {
    (status, json_body(value)).into_response()
}

async fn post(
    shared: &Shared,
    mode: McpMode,
    session: Option<&str>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let version = headers
        .get("mcp-protocol-version")
        .map(|v| v.to_str().unwrap_or_default());
    if version.is_some_and(|v| !ACCEPTED_VERSIONS.contains(&v)) {
        let message = "Unsupported MCP-Protocol-Version";
        let error = jsonrpc::error(&Value::Null, INVALID_REQUEST, message);
        return rpc(StatusCode::BAD_REQUEST, &error);
    }
    let message = match jsonrpc::parse(body) {
        Ok(message) => message,
        Err(refused) => {
            let error = jsonrpc::error(&refused.id, refused.code, refused.message);
            return rpc(StatusCode::BAD_REQUEST, &error);
        }
    };
    let (id, method, params) = match message {
        Message::Request { id, method, params } => (id, method, params),
        Message::Notification { .. } | Message::Response => {
            return session_refusal(shared, session, &Value::Null)
                .unwrap_or_else(|| StatusCode::ACCEPTED.into_response());
        }
    };
    if method == "initialize" {
        let session = shared.sessions.open();
        let result = json!({
            "protocolVersion": MCP_PROTOCOL_VERSION,
            "capabilities": { "tools": {} },
            "serverInfo": { "name": "agentmesh-testbed-echo", "version": "1.0.0" },
            "instructions": "One tool, echo, which returns its text.",
        });
        let mut response = rpc(StatusCode::OK, &jsonrpc::result(&id, result));
        if let Ok(value) = HeaderValue::from_str(&session) {
            response.headers_mut().insert(SESSION, value);
        }
        return response;
    }
    if let Some(refusal) = session_refusal(shared, session, &id) {
        return refusal;
    }
    let answer = match method.as_str() {
        "ping" => jsonrpc::result(&id, json!({})),
        "tools/list" => jsonrpc::result(&id, json!({ "tools": [tool()] })),
        "tools/call" if mode == McpMode::Hang => {
            shared.token.cancelled().await;
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        }
        "tools/call" => match call(mode, &params) {
            Ok(result) => jsonrpc::result(&id, result),
            Err(message) => jsonrpc::error(&id, INVALID_PARAMS, message),
        },
        _ => jsonrpc::error(&id, METHOD_NOT_FOUND, "Method not found"),
    };
    rpc(StatusCode::OK, &answer)
}

/// The refusal of a message without an open session: 400 without a
/// session id, 404 with one this server does not hold; `None` when the
/// session is open.
fn session_refusal(shared: &Shared, session: Option<&str>, id: &Value) -> Option<Response> {
    let (status, message) = match session {
        Some(s) if shared.sessions.is_open(s) => return None,
        Some(_) => (StatusCode::NOT_FOUND, "Unknown Mcp-Session-Id"),
        None => (StatusCode::BAD_REQUEST, "Missing Mcp-Session-Id"),
    };
    Some(rpc(status, &jsonrpc::error(id, INVALID_REQUEST, message)))
}

/// The one tool.
fn tool() -> Value {
    json!({
        "name": "echo",
        "title": "Echo",
        "description": "Returns the text it is given.",
        "inputSchema": {
            "type": "object",
            "properties": { "text": { "type": "string" } },
            "required": ["text"]
        },
        "outputSchema": {
            "type": "object",
            "properties": { "echo": { "type": "string" } },
            "required": ["echo"]
        }
    })
}

/// The result of `tools/call`, or the message of its -32602.
fn call(mode: McpMode, params: &Value) -> Result<Value, &'static str> {
    let name = params.get("name").and_then(Value::as_str);
    if name != Some("echo") {
        return Err("Unknown tool: this server has one tool, echo");
    }
    let text = params
        .get("arguments")
        .and_then(|a| a.get("text"))
        .and_then(Value::as_str)
        .ok_or("Invalid arguments: \"text\" must be a string")?;
    if mode == McpMode::ToolError {
        let message = "the echo tool failed: this server's tools fail on request (mode tool-error)";
        return Ok(json!({
            "content": [{ "type": "text", "text": message }],
            "isError": true,
        }));
    }
    let structured = json!({ "echo": text });
    Ok(json!({
        "content": [{ "type": "text", "text": structured.to_string() }],
        "structuredContent": structured,
        "isError": false,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_and_sessions_are_bounded() {
        for mode in McpMode::ALL {
            assert_eq!(McpMode::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(McpMode::parse("OK"), None);
        let sessions = Sessions::default();
        let first = sessions.open();
        assert!(sessions.is_open(&first));
        for _ in 0..MAX_SESSIONS {
            sessions.open();
        }
        assert!(!sessions.is_open(&first), "the oldest session is forgotten");
        let last = sessions.open();
        assert!(sessions.close(&last));
        assert!(!sessions.is_open(&last));
        assert!(!sessions.close(&last));
    }

    #[test]
    fn tools_call_checks_its_params() {
        let ok = call(
            McpMode::Ok,
            &json!({ "name": "echo", "arguments": { "text": "hi" } }),
        );
        assert_eq!(ok.unwrap()["structuredContent"], json!({ "echo": "hi" }));
        assert!(call(McpMode::Ok, &json!({ "name": "other", "arguments": {} })).is_err());
        assert!(call(
            McpMode::Ok,
            &json!({ "name": "echo", "arguments": { "text": 1 } })
        )
        .is_err());
        assert!(call(McpMode::Ok, &Value::Null).is_err());
    }
}
