//! What a probe's answers mean, without I/O: which protocol an agent is
//! asked in and at which URL ([`target`]), the JSON-RPC answer found in a
//! JSON or an event-stream body ([`rpc_response`]), and the
//! [`LiveState`] each protocol's answer stands for. Every input comes
//! from the agent or its publisher: bodies are bounded by the caller
//! (64 KiB, `fetch/exchange.rs`) and read
//! with `serde_json`'s recursion limit; nothing here panics on them.

use serde_json::{Map, Value};
use url::Url;

use super::super::error::CrawlError;
use crate::descriptor::DocumentFormat;
use crate::formats::a2a::{self, RpcInterface};
use crate::store::{LiveState, ProbeProtocol};

/// JSON-RPC's "method not found".
const METHOD_NOT_FOUND: i64 = -32601;

/// Where and how an agent is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    /// The protocol spoken.
    pub(super) protocol: ProbeProtocol,
    /// The URL asked.
    pub(super) url: String,
    /// For AIDIP: whether `url` is the document's declared health URL
    /// (asked with `GET`) rather than the endpoint (asked with `HEAD`).
    pub(super) health: bool,
    /// For A2A: the card's JSON-RPC interface asked (its URL is `url`),
    /// which says the version to speak and the tenant.
    pub(super) a2a: Option<RpcInterface>,
}

/// How an agent of `format` with this `endpoint` and `document` is
/// probed; `None` when it is not: ADP agents (the crawl's challenge
/// proves them), formats without a protocol to speak here (ARD, DNS-AID,
/// AID), an MCP server whose first remote is not `streamable-http`, an
/// A2A agent whose card declares no JSON-RPC interface of a version
/// spoken here (the gateway's choice,
/// [`AgentCard::rpc_interface`](crate::formats::a2a::AgentCard::rpc_interface)),
/// an agent without an endpoint.
pub(super) fn target(
    format: DocumentFormat,
    endpoint: Option<&str>,
    document: &Value,
) -> Option<Target> {
    let endpoint = endpoint?;
    let at = |protocol, url: &str, health| {
        Some(Target {
            protocol,
            url: url.to_owned(),
            health,
            a2a: None,
        })
    };
    match format {
        DocumentFormat::McpRegistry => {
            let first = document.pointer("/remotes/0/type").and_then(Value::as_str);
            (first == Some("streamable-http")).then_some(())?;
            at(ProbeProtocol::Mcp, endpoint, false)
        }
        DocumentFormat::A2a => {
            let interface = a2a::parse_card(document).ok()?.rpc_interface()?;
            Some(Target {
                protocol: ProbeProtocol::A2a,
                url: interface.url.clone(),
                health: false,
                a2a: Some(interface),
            })
        }
        DocumentFormat::Aidip => match health_url(endpoint, document) {
            Some(health) => at(ProbeProtocol::Aidip, health.as_str(), true),
            None => at(ProbeProtocol::Aidip, endpoint, false),
        },
        _ => None,
    }
}

/// An AIDIP document's declared health check (`health` or `health_url`):
/// an https URL on the endpoint's host and port, or a path on it
/// (`/health`). Anything else is ignored, and the endpoint is asked.
pub(super) fn health_url(endpoint: &str, document: &Value) -> Option<Url> {
    let declared = ["health", "health_url"]
        .into_iter()
        .find_map(|m| document.get(m).and_then(Value::as_str))?;
    let base = Url::parse(endpoint).ok()?;
    let url = if declared.starts_with('/') && !declared.starts_with("//") {
        base.join(declared).ok()?
    } else {
        Url::parse(declared).ok()?
    };
    let same_host = url.scheme() == "https"
        && url.host_str().map(str::to_ascii_lowercase)
            == base.host_str().map(str::to_ascii_lowercase)
        && url.port_or_known_default() == base.port_or_known_default();
    same_host.then_some(url)
}

/// The media type of a `Content-Type` value, lower-case, without
/// parameters.
pub(super) fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Whether `content_type` is `text/event-stream`.
pub(super) fn is_event_stream(content_type: &str) -> bool {
    essence(content_type) == "text/event-stream"
}

/// The `data` of each event of an event-stream body
/// ([`event_data`](crate::crawl::fetch::event_data)).
pub(super) fn sse_data(body: &[u8]) -> Vec<String> {
    crate::crawl::fetch::event_data(&String::from_utf8_lossy(body))
}

/// The JSON-RPC 2.0 response to the request `id` in a JSON body or in
/// one event of an event-stream body: an object with `"jsonrpc": "2.0"`,
/// that `id`, and a `result` or an `error` object with an integer code.
pub(super) fn rpc_response(
    content_type: &str,
    body: &[u8],
    id: &Value,
) -> Option<Map<String, Value>> {
    let answers = |v: Value| -> Option<Map<String, Value>> {
        let Value::Object(o) = v else { return None };
        let error_ok = match o.get("error") {
            None => o.contains_key("result"),
            Some(e) => e.get("code").and_then(Value::as_i64).is_some() && !o.contains_key("result"),
        };
        (o.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
            && o.get("id") == Some(id)
            && error_ok)
            .then_some(o)
    };
    match essence(content_type).as_str() {
        "application/json" => serde_json::from_slice(body).ok().and_then(answers),
        "text/event-stream" => sse_data(body)
            .into_iter()
            .filter_map(|d| serde_json::from_str(&d).ok())
            .find_map(answers),
        _ => None,
    }
}

/// 401 and 403: the agent is up and wants a credential.
fn auth_required(status: u16) -> bool {
    matches!(status, 401 | 403)
}

/// The error code of a JSON-RPC response, if it is an error.
fn error_code(response: &Map<String, Value>) -> Option<i64> {
    response.get("error")?.get("code")?.as_i64()
}

/// MCP's `initialize` (id 1): `Ok` when a 2xx carries its result with a
/// `protocolVersion`, else the state it stands for.
///
/// # Errors
/// [`LiveState::AuthRequired`] for 401 and 403, else
/// [`LiveState::NotProtocol`].
pub(super) fn mcp_initialize(
    status: u16,
    content_type: &str,
    body: &[u8],
) -> Result<(), LiveState> {
    if auth_required(status) {
        return Err(LiveState::AuthRequired);
    }
    let initialized = (200..300).contains(&status)
        && rpc_response(content_type, body, &Value::from(1))
            .and_then(|r| r.get("result").cloned())
            .is_some_and(|r| r.get("protocolVersion").is_some_and(Value::is_string));
    if initialized {
        Ok(())
    } else {
        Err(LiveState::NotProtocol)
    }
}

/// MCP's `tools/list` (id 2) after a session opened: a 2xx with the
/// list, or with a JSON-RPC error (a server without tools still speaks
/// MCP), is `alive`.
pub(super) fn mcp_tools_list(status: u16, content_type: &str, body: &[u8]) -> LiveState {
    if auth_required(status) {
        return LiveState::AuthRequired;
    }
    let answered = (200..300).contains(&status)
        && rpc_response(content_type, body, &Value::from(2)).is_some_and(|r| {
            r.get("result")
                .is_some_and(|r| r.get("tools").is_some_and(Value::is_array))
                || r.contains_key("error")
        });
    if answered {
        LiveState::Alive
    } else {
        LiveState::NotProtocol
    }
}

/// A2A's `tasks/get` (0.x) or `GetTask` (1.x) of a task the agent never
/// made, sent with `id`: a 2xx with the JSON-RPC answer (task not found,
/// or any error but "method not found"; a result, should the random id
/// exist) is `alive`.
pub(super) fn a2a_tasks_get(status: u16, content_type: &str, body: &[u8], id: &Value) -> LiveState {
    if auth_required(status) {
        return LiveState::AuthRequired;
    }
    let speaks = (200..300).contains(&status)
        && rpc_response(content_type, body, id)
            .is_some_and(|r| error_code(&r) != Some(METHOD_NOT_FOUND));
    if speaks {
        LiveState::Alive
    } else {
        LiveState::NotProtocol
    }
}

/// An AIDIP endpoint or health URL: the draft defines no read-only call,
/// so any HTTP answer is `alive`, but 401 and 403 `auth_required`.
pub(super) fn aidip(status: u16) -> LiveState {
    if auth_required(status) {
        LiveState::AuthRequired
    } else {
        LiveState::Alive
    }
}

/// The state a probe that failed with `e` records: `unreachable` when
/// nothing answered (the name, the connection, TLS), `timeout`; `None`
/// when the agent was not asked at all (a URL or address the policy
/// refuses, a host held after a 429), which records nothing.
pub(super) fn failure(e: &CrawlError) -> Option<LiveState> {
    match e {
        CrawlError::Connect { .. } | CrawlError::Tls { .. } | CrawlError::Dns(_) => {
            Some(LiveState::Unreachable)
        }
        CrawlError::Timeout { .. } => Some(LiveState::Timeout),
        _ => None,
    }
}
