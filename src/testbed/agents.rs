//! Invokable agents that misbehave on request: one HTTPS
//! server on loopback that the invocation gateway's tests call, with an
//! AIDIP agent, an MCP server and an A2A agent, each in several modes.
//!
//! [`InvokeAgents::start`] binds `127.0.0.1:0` with a leaf from the
//! test CA valid for `127.0.0.1`, `::1` and `localhost` (HTTP/1.1). The
//! mode is a path segment, so every mode of every protocol is served at
//! once:
//! - `POST /aidip/{mode}/{operation}` and `POST /aidip/{mode}` (the
//!   operation `echo`): [`AidipMode`] (`agents/aidip.rs`), described by
//!   [`InvokeAgents::aidip_document`]; `GET` and `HEAD /aidip/{mode}`,
//!   what a liveness probe asks, answered as the mode behaves (`ok`,
//!   the status, 401, hanging...);
//! - `POST /mcp/{mode}`: MCP streamable HTTP, JSON answers ([`McpMode`],
//!   `agents/mcp.rs`), at [`InvokeAgents::mcp_url`];
//! - `GET /a2a/{mode}/.well-known/agent-card.json` and `POST /a2a/{mode}`:
//!   A2A JSON-RPC ([`A2aMode`], `agents/a2a.rs`), whose card is
//!   [`InvokeAgents::a2a_card`].
//!
//! Every request is recorded ([`InvokeAgents::seen`]) and counted in
//! flight ([`InvokeAgents::max_in_flight`]) by one layer in front of the
//! handlers, which also bounds request bodies to [`MAX_BODY`]; the
//! connections are served by `agents/serve.rs`. JSON-RPC framing shared
//! by MCP and A2A is in `agents/jsonrpc.rs`.
//!
//! The handle is a drop guard: dropping it aborts the server;
//! [`InvokeAgents::shutdown`] ends hanging and slow requests first.

mod a2a;
mod aidip;
mod jsonrpc;
mod mcp;
pub(crate) mod serve;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, request, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, post};
use axum::Router;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info_span, warn, Instrument};

pub use a2a::A2aMode;
pub use aidip::{AidipMode, HUGE_BYTES, SLOW_DEFAULT};
pub use mcp::{McpMode, MCP_PROTOCOL_VERSION};

use super::{TestCa, TestbedError};

/// The credential the `Auth` modes accept: `Authorization: Bearer
/// agent-secret` (and, for the AIDIP agent, `X-API-Key: agent-secret`).
pub const SECRET: &str = "agent-secret";
/// Largest request body read; a longer one is answered 413.
pub const MAX_BODY: usize = 1024 * 1024;
/// Most requests [`InvokeAgents::seen`] keeps (the first ones); later
/// requests are still served and counted in flight.
pub const MAX_SEEN: usize = 10_000;
/// The names the server's certificate is valid for.
const NAMES: &[&str] = &["127.0.0.1", "::1", "localhost"];
/// How long [`InvokeAgents::shutdown`] waits for the server to stop.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The URI path, without the query.
    pub path: String,
    /// Every header in order, names lower-case, values lossily UTF-8.
    pub headers: Vec<(String, String)>,
    /// The body (empty when it was refused as too large or unreadable).
    pub body: Vec<u8>,
}

impl SeenRequest {
    /// The first value of header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the handlers share: the log, the in-flight counts, MCP sessions
/// and A2A tasks, and the shutdown token that ends hanging requests.
#[derive(Debug)]
struct Shared {
    base_url: String,
    token: CancellationToken,
    seen: Mutex<Vec<SeenRequest>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    sessions: mcp::Sessions,
    tasks: a2a::Tasks,
}

/// A request in flight, counted until dropped.
struct InFlight<'a>(&'a Shared);

impl<'a> InFlight<'a> {
    fn enter(shared: &'a Shared) -> Self {
        let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        shared.max_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(shared)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Locks `m`, carrying on after a panic elsewhere (the data is a log).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn note(&self, parts: &request::Parts, body: &[u8]) {
        let mut seen = lock(&self.seen);
        if seen.len() >= MAX_SEEN {
            return;
        }
        seen.push(SeenRequest {
            method: parts.method.as_str().to_owned(),
            path: parts.uri.path().to_owned(),
            headers: parts
                .headers
                .iter()
                .map(|(n, v)| {
                    let value = String::from_utf8_lossy(v.as_bytes()).into_owned();
                    (n.as_str().to_owned(), value)
                })
                .collect(),
            body: body.to_vec(),
        });
    }
}

/// The layer in front of every handler: counts the request in flight
/// until its handler answers (a streamed body may still be flowing),
/// reads its body up to [`MAX_BODY`] and records it.
async fn record(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let _in_flight = InFlight::enter(&shared);
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(body) => body,
        Err(e) => {
            shared.note(&parts, &[]);
            let too_large = e
                .into_inner()
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some();
            return if too_large {
                let message = format!("the body is larger than {MAX_BODY} bytes");
                error_object(StatusCode::PAYLOAD_TOO_LARGE, "TooLarge", &message)
            } else {
                error_object(StatusCode::BAD_REQUEST, "InvalidInput", "unreadable body")
            };
        }
    };
    shared.note(&parts, &body);
    next.run(Request::from_parts(parts, Body::from(body))).await
}

/// The error object of the AIDIP agent (and of unknown paths):
/// `{"error":{"code","message"}}` with `status`.
fn error_object(status: StatusCode, code: &str, message: &str) -> Response {
    let body = json!({ "error": { "code": code, "message": message } });
    (status, json_body(&body)).into_response()
}

/// `value` as an `application/json` body.
fn json_body(value: &Value) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        value.to_string(),
    )
        .into_response()
}

/// 200 `text/html`: what an endpoint that speaks HTTP but not the
/// protocol asked for answers.
fn html() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        "<html><head><title>Welcome</title></head>\
         <body><h1>Welcome to our site</h1></body></html>",
    )
        .into_response()
}

/// 401 with `WWW-Authenticate: Bearer` and the error object.
fn unauthorized() -> Response {
    let mut response = error_object(
        StatusCode::UNAUTHORIZED,
        "Unauthorized",
        "this agent needs a credential",
    );
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// `Authorization: Bearer {SECRET}` is present.
fn has_bearer(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get_all(header::AUTHORIZATION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split_once(' '))
        .any(|(scheme, token)| scheme.eq_ignore_ascii_case("bearer") && token.trim() == SECRET)
}

/// A random id: 32 hex digits.
fn random_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

async fn not_found() -> Response {
    error_object(StatusCode::NOT_FOUND, "NotFound", "no such path")
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route(
            "/aidip/{mode}",
            post(aidip::call_echo).get(aidip::status_check),
        )
        .route("/aidip/{mode}/{operation}", post(aidip::call))
        .route("/mcp/{mode}", any(mcp::handle))
        .route("/a2a/{mode}", any(a2a::rpc))
        .route("/a2a/{mode}/{*rest}", any(a2a::get))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(shared.clone(), record))
        .with_state(shared)
}

/// The running server; dropping it aborts it.
#[derive(Debug)]
pub struct InvokeAgents {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: Option<JoinHandle<()>>,
}

impl InvokeAgents {
    /// Starts the server on 127.0.0.1:0 with a certificate from `ca`
    /// (valid for `127.0.0.1`, `::1` and `localhost`). Must run inside a
    /// tokio runtime.
    ///
    /// # Errors
    /// [`TestbedError::Bind`] when no port can be bound,
    /// [`TestbedError::Certificate`] when the leaf cannot be made.
    pub async fn start(ca: &TestCa) -> Result<InvokeAgents, TestbedError> {
        Self::serve(ca.single_server_config(NAMES)?, Ipv4Addr::LOCALHOST).await
    }

    /// As [`InvokeAgents::start`], on `ip` (another loopback address, so
    /// that several servers are several hosts to a client's per-host
    /// limits), its certificate valid for `ip`.
    ///
    /// # Errors
    /// As [`InvokeAgents::start`].
    pub async fn start_at(ca: &TestCa, ip: Ipv4Addr) -> Result<InvokeAgents, TestbedError> {
        Self::serve(ca.single_server_config(&[ip.to_string()])?, ip).await
    }

    /// As [`InvokeAgents::start`], and every connection must present a
    /// client certificate `ca` issued (an agent whose authentication is
    /// `mtls`): the TLS handshake fails for any other.
    ///
    /// # Errors
    /// As [`InvokeAgents::start`].
    pub async fn start_requiring_client_certificates(
        ca: &TestCa,
    ) -> Result<InvokeAgents, TestbedError> {
        Self::serve(
            ca.single_server_config_requiring_clients(NAMES)?,
            Ipv4Addr::LOCALHOST,
        )
        .await
    }

    async fn serve(
        tls: Arc<rustls::ServerConfig>,
        ip: Ipv4Addr,
    ) -> Result<InvokeAgents, TestbedError> {
        let wanted = SocketAddr::from((ip, 0));
        let bind_error = |source| TestbedError::Bind {
            what: "agents",
            addr: wanted,
            source,
        };
        let listener = TcpListener::bind(wanted).await.map_err(bind_error)?;
        let addr = listener.local_addr().map_err(bind_error)?;
        let token = CancellationToken::new();
        let shared = Arc::new(Shared {
            base_url: format!("https://{addr}"),
            token: token.clone(),
            seen: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            sessions: mcp::Sessions::default(),
            tasks: a2a::Tasks::default(),
        });
        let app = router(shared.clone());
        let span = info_span!("testbed_agents", %addr);
        let server = tokio::spawn(serve::serve(listener, tls, app, token).instrument(span));
        Ok(Self {
            addr,
            shared,
            server: Some(server),
        })
    }

    /// The listener's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:{port}`, no trailing slash.
    pub fn base_url(&self) -> String {
        self.shared.base_url.clone()
    }

    /// Every request received so far, in order (the first [`MAX_SEEN`]).
    pub fn seen(&self) -> Vec<SeenRequest> {
        lock(&self.shared.seen).clone()
    }

    /// The most requests that were in flight at once: from a request's
    /// arrival until its handler answered (a hanging request stays in
    /// flight).
    pub fn max_in_flight(&self) -> usize {
        self.shared.max_in_flight.load(Ordering::SeqCst)
    }

    /// A valid AIDIP agent document (`operations` style) under `id`,
    /// whose endpoint is `{base}/aidip/{mode}`, with `auth` as
    /// `authentication.type` (`none`, `api_key`, `oauth2_bearer`, ...)
    /// and two operations: `echo` (input: an object with a required
    /// string `text` and an optional integer `times`, 1 to 5; output: an
    /// object with a required string `echo`) and `count` (input: an
    /// object with a required array `items`; output: an object with a
    /// required integer `count`).
    pub fn aidip_document(&self, id: &str, mode: AidipMode, auth: &str) -> Value {
        aidip::document(&self.shared.base_url, id, mode, auth)
    }

    /// The A2A agent card the server serves at
    /// `{base}/a2a/{mode}/.well-known/agent-card.json` (for
    /// [`A2aMode::NotA2a`], the card the agent would claim; the server
    /// answers HTML there).
    pub fn a2a_card(&self, mode: A2aMode) -> Value {
        a2a::card(&self.shared.base_url, mode)
    }

    /// The MCP endpoint of `mode`: `{base}/mcp/{mode}`.
    pub fn mcp_url(&self, mode: McpMode) -> String {
        format!("{}/mcp/{}", self.shared.base_url, mode.as_str())
    }

    /// Ends hanging and slow requests (answered 503), stops accepting,
    /// and waits (at most 10 s) for the open connections to close.
    pub async fn shutdown(mut self) {
        self.shared.token.cancel();
        if let Some(mut server) = self.server.take() {
            if tokio::time::timeout(SHUTDOWN_TIMEOUT, &mut server)
                .await
                .is_err()
            {
                warn!("the invokable agents did not stop within 10 s; aborting them");
                server.abort();
            }
        }
    }
}

impl Drop for InvokeAgents {
    fn drop(&mut self) {
        self.shared.token.cancel();
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}

/// 503 with the error object: what a hanging or slow request gets when
/// the server shuts down.
fn shutting_down() -> Response {
    error_object(
        StatusCode::SERVICE_UNAVAILABLE,
        "Unavailable",
        "the testbed is shutting down",
    )
}

/// The body as JSON, `None` when it is not.
fn parse_json(body: &Bytes) -> Option<Value> {
    serde_json::from_slice(body).ok()
}

#[cfg(test)]
mod tests;
