//! The conversations of a probe, one per protocol, read-only: what a
//! client would send first, through the crawler's guards
//! ([`Fetcher::exchange`](crate::crawl::fetch::Fetcher)), and the answer
//! judged by [`classify`](super::classify).
//!
//! - MCP (streamable HTTP, 2025-06-18): `initialize` (id 1), the
//!   `notifications/initialized` notification, `tools/list` (id 2), each
//!   a POST with `Accept: application/json, text/event-stream`, the
//!   `Mcp-Session-Id` the server gave sent back and, after `initialize`,
//!   `MCP-Protocol-Version`; then the session closed with `DELETE`. A
//!   JSON body or an event stream is read, the stream only until the
//!   answer arrives.
//! - A2A (JSON-RPC, at the card's interface the gateway would call):
//!   `tasks/get` (0.x) or `GetTask` with `A2A-Version: 1.0` and the
//!   interface's tenant (1.x) of a random task id, which a working agent
//!   answers with an error (task not found).
//! - AIDIP: `GET` of the declared health URL, else `HEAD` of the
//!   endpoint.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use url::Url;

use super::super::error::CrawlError;
use super::super::fetch::{Answer, Ask};
use super::super::{target, Crawler};
use super::classify::{self, Target};
use crate::formats::a2a::RpcVersion;
use crate::store::{LiveState, ProbeProtocol};

/// The MCP version spoken.
pub(super) const MCP_PROTOCOL_VERSION: &str = "2025-06-18";
/// What an MCP request accepts.
const MCP_ACCEPT: &str = "application/json, text/event-stream";

/// What a probe found: the state and the first request's round trip.
pub(super) type Heard = (LiveState, Duration);

/// Asks `t` in its protocol, each request within `timeout`.
///
/// # Errors
/// A [`CrawlError`]: the URL, its address or port refused, the host
/// held, or no answer (connection, TLS, timeout) which
/// [`classify::failure`] turns into a state.
pub(super) async fn speak(
    crawler: &Crawler,
    t: &Target,
    timeout: Duration,
) -> Result<Heard, CrawlError> {
    let (mut url, resolved) =
        target::resolve(&crawler.dns, &crawler.options, "", &t.url, None, None).await?;
    if url.scheme() == "wss" {
        let _ = url.set_scheme("https");
    }
    let ask = Asker {
        crawler,
        url: &url,
        ips: &resolved.ips,
        timeout,
    };
    match t.protocol {
        // ADP agents answer the crawler's challenge on its visits; the
        // probe has no ADP target (`classify::target`).
        ProbeProtocol::Adp => Err(CrawlError::ChallengeUnavailable),
        ProbeProtocol::Aidip => {
            let method = if t.health { Method::GET } else { Method::HEAD };
            let answer = ask.send(method, Vec::new(), None).await?;
            Ok((classify::aidip(answer.status), answer.rtt))
        }
        ProbeProtocol::A2a => {
            // `target` gives every A2A target its interface; without
            // one, 0.x as before 1.x was spoken.
            let (version, tenant) = t
                .a2a
                .as_ref()
                .map_or((RpcVersion::V0, None), |i| (i.version, i.tenant.as_deref()));
            let id = Value::String(format!("agentmesh-probe-{:016x}", rand::random::<u64>()));
            let mut params =
                json!({ "id": format!("agentmesh-probe-{:032x}", rand::random::<u128>()) });
            if let (RpcVersion::V1, Some(tenant)) = (version, tenant) {
                params["tenant"] = json!(tenant);
            }
            let body = json!({
                "jsonrpc": "2.0",
                "id": id,
                "method": version.get_task_method(),
                "params": params,
            });
            let mut headers = vec![
                ("content-type", "application/json".to_owned()),
                ("accept", "application/json".to_owned()),
            ];
            if let Some((name, value)) = version.header() {
                headers.push((name, value.to_owned()));
            }
            let answer = ask.send(Method::POST, headers, Some(&body)).await?;
            let state =
                classify::a2a_tasks_get(answer.status, &answer.content_type, &answer.body, &id);
            Ok((state, answer.rtt))
        }
        ProbeProtocol::Mcp => mcp(&ask).await,
    }
}

/// One probe's requests to one URL.
struct Asker<'a> {
    crawler: &'a Crawler,
    url: &'a Url,
    ips: &'a [std::net::IpAddr],
    timeout: Duration,
}

impl Asker<'_> {
    /// Sends one request; an event stream is read until the JSON-RPC
    /// answer of `body`'s id is in.
    async fn send(
        &self,
        method: Method,
        headers: Vec<(&'static str, String)>,
        body: Option<&Value>,
    ) -> Result<Answer, CrawlError> {
        let id = body.and_then(|b| b.get("id")).cloned();
        let ask = Ask {
            method,
            headers,
            body: body.map(|b| b.to_string().into_bytes()),
        };
        let complete = |content_type: &str, so_far: &[u8]| {
            classify::is_event_stream(content_type)
                && id
                    .as_ref()
                    .is_some_and(|id| classify::rpc_response(content_type, so_far, id).is_some())
        };
        self.crawler
            .fetcher
            .exchange(self.url, self.ips, &ask, self.timeout, complete)
            .await
    }
}

/// The headers of an MCP request in `session` (after `initialize`, the
/// protocol version too).
fn mcp_headers(session: Option<&str>, initialized: bool) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("content-type", "application/json".to_owned()),
        ("accept", MCP_ACCEPT.to_owned()),
    ];
    if initialized {
        headers.push(("mcp-protocol-version", MCP_PROTOCOL_VERSION.to_owned()));
    }
    if let Some(s) = session {
        headers.push(("mcp-session-id", s.to_owned()));
    }
    headers
}

async fn mcp(ask: &Asker<'_>) -> Result<Heard, CrawlError> {
    let initialize = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": MCP_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": { "name": "agentmesh-probe", "version": env!("CARGO_PKG_VERSION") },
        },
    });
    let opened = ask
        .send(Method::POST, mcp_headers(None, false), Some(&initialize))
        .await?;
    let rtt = opened.rtt;
    if let Err(state) = classify::mcp_initialize(opened.status, &opened.content_type, &opened.body)
    {
        return Ok((state, rtt));
    }
    let session = opened.session.as_deref();
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    // A notification: 202 and no body expected; what it answers does
    // not change the verdict, `tools/list` does.
    let _ = ask
        .send(Method::POST, mcp_headers(session, true), Some(&initialized))
        .await?;
    let list = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" });
    let listed = ask
        .send(Method::POST, mcp_headers(session, true), Some(&list))
        .await?;
    let state = classify::mcp_tools_list(listed.status, &listed.content_type, &listed.body);
    if session.is_some() {
        // Politeness: the session is not needed any more. A server may
        // refuse (405); that changes nothing.
        let _ = ask
            .send(Method::DELETE, mcp_headers(session, true), None)
            .await;
    }
    Ok((state, rtt))
}
