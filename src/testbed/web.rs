//! The agents' sites: `GET /.well-known/agent.json`, the HTML landing page
//! `GET /` (ADP 6.1), and the `/agent/chat` WebSocket that answers the
//! ADP challenge (docs/protocol.md#crawl-challenge), with each HTTP-visible [`Behaviour`].
//!
//! An [`AgentSite`] is one agent (its document and key), independent of
//! any population: `agentmesh agent-host` serves a single one with
//! [`Sites::single`] and [`serve`]. [`Sites`] routes many by Host (and,
//! on an IP-literal host, by the path prefix `/agents/{domain}`).
//! [`serve`] runs the front door on a TCP listener: optional TLS, then a
//! look at the request head: WebSocket upgrades of `/agent/chat` go to the
//! challenge responder (`web/chat.rs`), everything else to the axum [`router`].
//! (The WebSocket is handled outside axum because axum is built without
//! its `ws` feature.)
//!
//! Used by [`super::Testbed`] and `agent-host`.

mod body;
mod chat;
mod front;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use ed25519_dalek::SigningKey;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

pub use body::Drip;
pub use front::serve;

use body::{drip_body, escape_html, matches_etag, nest, pad};

use super::population::Behaviour;
use crate::adp::AgentDocument;
use crate::adp::{CHAT_PATH, WELL_KNOWN_PATH};

/// The 64 KiB document limit of docs/protocol.md#crawl-fetch, and how far past it an
/// `Oversized` document goes.
pub const OVERSIZED_BYTES: usize = 64 * 1024 + 4096;
/// How deep a `DeepNesting` document nests.
pub const DEEP_NESTING: usize = 1000;
/// `Cache-Control` of the well-known document.
pub const CACHE_CONTROL: &str = "max-age=300";

/// What a site has served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SiteCounts {
    /// Requests for the well-known document (any answer).
    pub well_known: u64,
    /// Of those, `304 Not Modified` answers.
    pub not_modified: u64,
    /// Landing page requests.
    pub landing: u64,
    /// WebSocket challenge sessions opened.
    pub chat: u64,
    /// Mutual handshakes completed: the verifier's closing frame, signed
    /// over the agent's own nonce, checked (`challenge_own_nonce` sites).
    pub mutual: u64,
    /// ADP message frames received whose signature checked against the
    /// key of the handshake's challenge (calls through a gateway).
    pub messages: u64,
}

#[derive(Debug, Default)]
struct Counters {
    well_known: AtomicU64,
    not_modified: AtomicU64,
    landing: AtomicU64,
    chat: AtomicU64,
    mutual: AtomicU64,
    messages: AtomicU64,
}

/// Where a site's document comes from.
enum Source {
    /// These bytes, verbatim.
    Bytes(Bytes),
    /// Rendered on first use (the testbed renders thousands of documents
    /// only when they are asked for).
    Lazy(Box<dyn Fn() -> Bytes + Send + Sync>),
}

/// The document, the well-known body made from it, and the body's ETag.
#[derive(Debug)]
struct Rendered {
    document: Bytes,
    body: Bytes,
    etag: String,
}

/// One agent's site: its document, its key and how it behaves.
pub struct AgentSite {
    domain: String,
    agent_id: String,
    key: SigningKey,
    impostor: Option<SigningKey>,
    source: Source,
    rendered: OnceLock<Rendered>,
    behaviour: Behaviour,
    redirect_target: String,
    drip: Drip,
    counters: Counters,
    runtime: Runtime,
}

/// What a test changes while a site serves: a status the well-known
/// document answers with instead, a chat endpoint that stopped
/// answering, and the log of requests.
#[derive(Debug, Default)]
struct Runtime {
    /// The status (and `Retry-After` seconds) to answer with instead of
    /// the document.
    refuse: std::sync::Mutex<Option<(StatusCode, Option<u64>)>>,
    /// The chat endpoint accepts the WebSocket and never answers.
    chat_down: std::sync::atomic::AtomicBool,
    /// The handshake answer carries the agent's key but is signed by
    /// another (as [`Behaviour::ChallengeBadSignature`] sites do).
    handshake_forged: std::sync::atomic::AtomicBool,
    /// The document is served without an ETag (and conditional requests
    /// are answered in full).
    no_etag: std::sync::atomic::AtomicBool,
    /// The last requests, oldest first.
    log: std::sync::Mutex<std::collections::VecDeque<Request>>,
}

/// Most requests a site's log keeps.
const LOG_KEPT: usize = 256;

/// A request a site served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// When it arrived.
    pub at: std::time::Instant,
    /// `well_known` or `chat`.
    pub kind: &'static str,
    /// Its `User-Agent` (empty without one).
    pub user_agent: String,
}

impl std::fmt::Debug for AgentSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSite")
            .field("domain", &self.domain)
            .field("behaviour", &self.behaviour)
            .finish_non_exhaustive()
    }
}

fn etag_of(body: &[u8]) -> String {
    format!("\"{}\"", &hex::encode(Sha256::digest(body))[..32])
}

impl AgentSite {
    fn with_source(domain: &str, source: Source, key: SigningKey) -> Self {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        Self {
            agent_id: format!("agent:{domain}"),
            redirect_target: format!("https://elsewhere.test{WELL_KNOWN_PATH}"),
            domain,
            key,
            impostor: None,
            source,
            rendered: OnceLock::new(),
            behaviour: Behaviour::Healthy,
            drip: Drip::default(),
            counters: Counters::default(),
            runtime: Runtime::default(),
        }
    }

    /// A healthy site serving `document` (bytes, verbatim) for `domain`,
    /// answering challenges with `key`.
    pub fn new(domain: &str, document: impl Into<Bytes>, key: SigningKey) -> Self {
        Self::with_source(domain, Source::Bytes(document.into()), key)
    }

    /// A healthy site serving `document` as pretty-printed JSON.
    pub fn from_document(domain: &str, document: &AgentDocument, key: SigningKey) -> Self {
        let bytes = serde_json::to_vec_pretty(document)
            .expect("an AgentDocument always serialises to JSON");
        Self::new(domain, bytes, key)
    }

    /// A healthy site whose document `render` makes on first use.
    pub fn lazy(
        domain: &str,
        key: SigningKey,
        render: impl Fn() -> Bytes + Send + Sync + 'static,
    ) -> Self {
        Self::with_source(domain, Source::Lazy(Box::new(render)), key)
    }

    /// Makes the site misbehave as `behaviour` (those visible in HTTP or in
    /// the challenge; the others change nothing here).
    #[must_use]
    pub fn with_behaviour(mut self, behaviour: Behaviour) -> Self {
        self.behaviour = behaviour;
        self.rendered = OnceLock::new();
        self
    }

    /// Where a `RedirectOtherHost` site redirects to.
    #[must_use]
    pub fn with_redirect_target(mut self, url: &str) -> Self {
        self.redirect_target = url.to_owned();
        self
    }

    /// The drip rate of a `SlowBody` site.
    #[must_use]
    pub fn with_drip(mut self, drip: Drip) -> Self {
        self.drip = drip;
        self
    }

    /// The key a `ChallengeBadSignature` site signs with (a fresh random
    /// key by default).
    #[must_use]
    pub fn with_impostor(mut self, key: SigningKey) -> Self {
        self.impostor = Some(key);
        self
    }

    fn rendered(&self) -> &Rendered {
        self.rendered.get_or_init(|| {
            let document = match &self.source {
                Source::Bytes(bytes) => bytes.clone(),
                Source::Lazy(render) => render(),
            };
            let body = match self.behaviour {
                Behaviour::Oversized => pad(&document, OVERSIZED_BYTES),
                Behaviour::InvalidJson => document.slice(..document.len() * 2 / 3),
                Behaviour::DeepNesting => nest(&document, DEEP_NESTING),
                _ => document.clone(),
            };
            Rendered {
                etag: etag_of(&body),
                document,
                body,
            }
        })
    }

    /// The domain.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// How it behaves.
    pub fn behaviour(&self) -> Behaviour {
        self.behaviour
    }

    /// The bytes `GET /.well-known/agent.json` answers with.
    pub fn body(&self) -> &Bytes {
        &self.rendered().body
    }

    /// What it has served so far.
    pub fn counts(&self) -> SiteCounts {
        let c = &self.counters;
        SiteCounts {
            well_known: c.well_known.load(Ordering::Relaxed),
            not_modified: c.not_modified.load(Ordering::Relaxed),
            landing: c.landing.load(Ordering::Relaxed),
            chat: c.chat.load(Ordering::Relaxed),
            mutual: c.mutual.load(Ordering::Relaxed),
            messages: c.messages.load(Ordering::Relaxed),
        }
    }

    /// From now on, answers the well-known document with `status` (and a
    /// `Retry-After` of that many seconds) instead; `None` serves it
    /// again.
    pub fn refuse_with(&self, status: Option<(u16, Option<u64>)>) {
        let status = status.map(|(code, retry)| {
            (
                StatusCode::from_u16(code).expect("a test gives a valid status"),
                retry,
            )
        });
        *self.runtime.refuse.lock().expect("site runtime lock") = status;
    }

    /// From now on, the chat endpoint accepts challenges and never
    /// answers (`false`: it answers again).
    pub fn set_chat_down(&self, down: bool) {
        self.runtime.chat_down.store(down, Ordering::SeqCst);
    }

    /// From now on, serves the document without an ETag and answers
    /// every request in full, as publishers without ETag support do
    /// (`true`), or with one again.
    pub fn set_no_etag(&self, no_etag: bool) {
        self.runtime.no_etag.store(no_etag, Ordering::SeqCst);
    }

    /// From now on, the handshake answer carries the agent's key but is
    /// signed by another, as an impostor's would be (`false`: signed by
    /// the agent's key again).
    pub fn set_handshake_forged(&self, forged: bool) {
        self.runtime
            .handshake_forged
            .store(forged, Ordering::SeqCst);
    }

    pub(super) fn handshake_forged(&self) -> bool {
        self.runtime.handshake_forged.load(Ordering::SeqCst)
    }

    pub(super) fn chat_down(&self) -> bool {
        self.runtime.chat_down.load(Ordering::SeqCst)
    }

    /// The last requests served (the well-known document and challenge
    /// sessions), oldest first.
    pub fn requests(&self) -> Vec<Request> {
        let log = self.runtime.log.lock().expect("site runtime lock");
        log.iter().cloned().collect()
    }

    pub(super) fn log(&self, kind: &'static str, headers: &HeaderMap) {
        let user_agent = headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let mut log = self.runtime.log.lock().expect("site runtime lock");
        if log.len() == LOG_KEPT {
            log.pop_front();
        }
        log.push_back(Request {
            at: std::time::Instant::now(),
            kind,
            user_agent,
        });
    }

    fn well_known(&self, request: &HeaderMap, shutdown: &CancellationToken) -> Response {
        self.counters.well_known.fetch_add(1, Ordering::Relaxed);
        self.log("well_known", request);
        let refused = *self.runtime.refuse.lock().expect("site runtime lock");
        if let Some((status, retry_after)) = refused {
            let mut headers = HeaderMap::new();
            if let Some(secs) = retry_after {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
            }
            return (status, headers, "come back later\n").into_response();
        }
        let found = |location: &str| {
            (StatusCode::FOUND, [(header::LOCATION, location.to_owned())]).into_response()
        };
        match self.behaviour {
            Behaviour::RedirectLoop => return found(WELL_KNOWN_PATH),
            Behaviour::RedirectOtherHost => return found(&self.redirect_target),
            _ => {}
        }
        let content_type = match self.behaviour {
            Behaviour::WrongContentType => "text/html; charset=utf-8",
            _ => "application/json",
        };
        let Rendered { body, etag, .. } = self.rendered();
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        headers.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static(CACHE_CONTROL),
        );
        let no_etag = self.runtime.no_etag.load(Ordering::SeqCst);
        match HeaderValue::from_str(etag) {
            Ok(value) if !no_etag => {
                headers.insert(header::ETAG, value);
            }
            _ => {}
        }
        if self.behaviour == Behaviour::SlowBody {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
            let body = drip_body(body.clone(), self.drip, shutdown.clone());
            return (StatusCode::OK, headers, body).into_response();
        }
        if !no_etag && matches_etag(request, etag) {
            self.counters.not_modified.fetch_add(1, Ordering::Relaxed);
            return (StatusCode::NOT_MODIFIED, headers).into_response();
        }
        (StatusCode::OK, headers, body.clone()).into_response()
    }

    fn landing(&self) -> Response {
        self.counters.landing.fetch_add(1, Ordering::Relaxed);
        let document = &self.rendered().document;
        let parsed: Option<AgentDocument> = serde_json::from_slice(document).ok();
        let name = parsed
            .as_ref()
            .map_or(self.domain.as_str(), |d| d.identity.name.as_str());
        let capabilities: String = parsed
            .iter()
            .flat_map(|d| &d.capabilities)
            .map(|c| {
                let text = c.description.as_deref().unwrap_or_default();
                format!(
                    "<li><code>{}</code> {}</li>\n",
                    escape_html(&c.id),
                    escape_html(text)
                )
            })
            .collect();
        // `<` only occurs inside JSON strings, where `\u003c` means the same.
        let embedded = String::from_utf8_lossy(document).replace('<', "\\u003c");
        let html = format!(
            "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <title>{name}</title>\n\
             <link rel=\"alternate\" type=\"application/json\" href=\"{WELL_KNOWN_PATH}\">\n\
             <script type=\"application/json\" id=\"adp-agent\">\n{embedded}\n</script>\n\
             </head>\n<body>\n<h1>{name}</h1>\n<p><code>{id}</code></p>\n<ul>\n{capabilities}</ul>\n\
             </body>\n</html>\n",
            name = escape_html(name),
            id = escape_html(&self.agent_id),
        );
        ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
    }
}

/// A document served verbatim at one host and path (the other discovery
/// formats' publishers: A2A cards, ARD catalogs, key sets).
#[derive(Debug, Clone)]
pub struct Served {
    /// The `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: Bytes,
    /// The status (200 unless a broken publisher says otherwise).
    pub status: StatusCode,
    /// Drip-fed at this rate (a slow publisher), else sent at once.
    pub drip: Option<Drip>,
}

/// Many sites, routed by Host.
#[derive(Debug)]
pub struct Sites {
    by_host: HashMap<String, Arc<AgentSite>>,
    single: Option<Arc<AgentSite>>,
    documents: HashMap<(String, String), Served>,
    fetches: std::sync::Mutex<HashMap<(String, String), u64>>,
    /// Requests for any other path (served or 404).
    other_requests: AtomicU64,
    /// Connections accepted (TCP, and the TLS handshake when served over
    /// TLS).
    connections: AtomicU64,
    shutdown: CancellationToken,
}

impl Sites {
    /// Routes each site by its domain. Cancelling `shutdown` ends slow
    /// bodies and open challenge sessions, and stops [`serve`].
    pub fn new(sites: impl IntoIterator<Item = AgentSite>, shutdown: CancellationToken) -> Self {
        let by_host = sites
            .into_iter()
            .map(|s| (s.domain.clone(), Arc::new(s)))
            .collect();
        Self {
            by_host,
            single: None,
            documents: HashMap::new(),
            fetches: std::sync::Mutex::default(),
            other_requests: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            shutdown,
        }
    }

    /// Also serves each `(host, path)` document; a document at an agent
    /// site's well-known path takes its place.
    #[must_use]
    pub fn with_documents(
        mut self,
        documents: impl IntoIterator<Item = ((String, String), Served)>,
    ) -> Self {
        self.documents.extend(documents);
        self
    }

    /// How many times the document at `host` and `path` was fetched.
    pub fn document_fetches(&self, host: &str, path: &str) -> u64 {
        let fetches = self
            .fetches
            .lock()
            .expect("the fetch counters are never poisoned");
        fetches
            .get(&(host.to_owned(), path.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// Connections accepted so far, all sites together (with TLS, each a
    /// handshake completed).
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Counts a connection accepted.
    pub(super) fn connected(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests for paths other than the agents' well-known documents,
    /// landing pages and chat (the other formats' documents, served or
    /// not).
    pub fn other_requests(&self) -> u64 {
        self.other_requests.load(Ordering::Relaxed)
    }

    /// The document served at `host` (a `Host` value) and `path`, counted.
    fn document(&self, host: &str, path: &str) -> Option<Response> {
        self.other_requests.fetch_add(1, Ordering::Relaxed);
        let key = (host_name(host)?, path.to_owned());
        let served = self.documents.get(&key)?;
        *self
            .fetches
            .lock()
            .expect("the fetch counters are never poisoned")
            .entry(key)
            .or_default() += 1;
        let headers = [(header::CONTENT_TYPE, served.content_type)];
        if let Some(drip) = served.drip {
            let body = drip_body(served.body.clone(), drip, self.shutdown.clone());
            return Some((served.status, headers, body).into_response());
        }
        Some((served.status, headers, served.body.clone()).into_response())
    }

    /// One site, served whatever the Host (what `agent-host` runs).
    pub fn single(site: AgentSite, shutdown: CancellationToken) -> Self {
        let site = Arc::new(site);
        Self {
            by_host: HashMap::from([(site.domain.clone(), site.clone())]),
            single: Some(site),
            documents: HashMap::new(),
            fetches: std::sync::Mutex::default(),
            other_requests: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            shutdown,
        }
    }

    /// The site of `domain`.
    pub fn get(&self, domain: &str) -> Option<&Arc<AgentSite>> {
        self.by_host.get(domain)
    }

    /// The token that stops everything serving these sites.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// The site for a `Host` header value (port and trailing dot ignored).
    pub(crate) fn for_host(&self, host: &str) -> Option<&Arc<AgentSite>> {
        if let Some(site) = &self.single {
            return Some(site);
        }
        self.by_host.get(&host_name(host)?)
    }
}

/// The lowercase name of a `Host` value, without port or trailing dot;
/// `None` for an IP literal.
fn host_name(host: &str) -> Option<String> {
    if host.starts_with('[') {
        return None; // An IPv6 literal.
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    let name = name.trim_end_matches('.');
    name.parse::<IpAddr>()
        .is_err()
        .then(|| name.to_ascii_lowercase())
}

fn host_header(headers: &HeaderMap) -> &str {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default()
}

fn unknown_host(host: &str) -> Response {
    (
        StatusCode::MISDIRECTED_REQUEST,
        format!("no agent is served at host {host:?}\n"),
    )
        .into_response()
}

async fn well_known(State(sites): State<Arc<Sites>>, headers: HeaderMap) -> Response {
    let host = host_header(&headers);
    if let Some(served) = sites.document(host, WELL_KNOWN_PATH) {
        return served;
    }
    match sites.for_host(host) {
        Some(site) => site.well_known(&headers, &sites.shutdown),
        None => unknown_host(host),
    }
}

/// `/agents/{domain}/.well-known/agent.json`, on an IP-literal host only
/// (where `LoopbackTarget` agents point).
async fn well_known_by_path(
    State(sites): State<Arc<Sites>>,
    Path(domain): Path<String>,
    headers: HeaderMap,
) -> Response {
    let host = host_header(&headers);
    if host_name(host).is_some() {
        return (StatusCode::NOT_FOUND, "not found\n").into_response();
    }
    match sites.get(&domain.to_ascii_lowercase()) {
        Some(site) => site.well_known(&headers, &sites.shutdown),
        None => (StatusCode::NOT_FOUND, "no such agent\n").into_response(),
    }
}

async fn landing(State(sites): State<Arc<Sites>>, headers: HeaderMap) -> Response {
    let host = host_header(&headers);
    match sites.for_host(host) {
        Some(site) => site.landing(),
        // A publisher's home page (the formats organisation's).
        None => sites
            .document(host, "/")
            .unwrap_or_else(|| unknown_host(host)),
    }
}

/// `/agent/chat` reached without a WebSocket upgrade.
async fn chat_without_upgrade() -> Response {
    (
        StatusCode::UPGRADE_REQUIRED,
        [(header::UPGRADE, "websocket")],
        "the ADP challenge is a WebSocket: send an upgrade request\n",
    )
        .into_response()
}

/// Any other path: a served document, else 404.
async fn documents(
    State(sites): State<Arc<Sites>>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Response {
    sites
        .document(host_header(&headers), uri.path())
        .unwrap_or_else(|| (StatusCode::NOT_FOUND, "not found\n").into_response())
}

/// The HTTP routes of the sites (everything but the WebSocket upgrade,
/// which [`serve`] handles before a request reaches this router).
pub fn router(sites: Arc<Sites>) -> Router {
    Router::new()
        .route(WELL_KNOWN_PATH, get(well_known))
        .route(
            "/agents/{domain}/.well-known/agent.json",
            get(well_known_by_path),
        )
        .route("/", get(landing))
        .route(CHAT_PATH, get(chat_without_upgrade))
        .fallback(documents)
        .with_state(sites)
}

/// The HTTP routes of one agent's site, whatever the Host. Serve it with
/// [`serve`] (and [`Sites::single`]) to also answer the challenge.
pub fn agent_router(site: AgentSite) -> Router {
    router(Arc::new(Sites::single(site, CancellationToken::new())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_names_without_port_case_or_trailing_dot() {
        assert_eq!(
            host_name("A.Org1.test:8443").as_deref(),
            Some("a.org1.test")
        );
        assert_eq!(host_name("a.org1.test.").as_deref(), Some("a.org1.test"));
        for literal in ["127.0.0.1", "127.0.0.1:8443", "[::1]", "[::1]:8443"] {
            assert_eq!(host_name(literal), None, "{literal}");
        }
    }

    #[test]
    fn if_none_match_accepts_lists_weak_tags_and_star() {
        let with = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header::IF_NONE_MATCH, HeaderValue::from_static(v));
            h
        };
        assert!(matches_etag(&with("\"x\", \"abc\""), "\"abc\""));
        assert!(matches_etag(&with("W/\"abc\""), "\"abc\""));
        assert!(matches_etag(&with("*"), "\"abc\""));
        assert!(!matches_etag(&with("\"abd\""), "\"abc\""));
        assert!(!matches_etag(&HeaderMap::new(), "\"abc\""));
    }
}
