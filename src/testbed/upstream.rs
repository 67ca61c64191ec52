//! An MCP registry on loopback, for the follower's tests
//! (`crawl::follow`): HTTPS with a test-CA leaf, serving the `/v0.1` list
//! API as the official registry's OpenAPI document describes it
//! (`limit` at most 100, an opaque `cursor`, `updated_since` in RFC 3339
//! which includes deleted servers, `version=latest`, `include_deleted`),
//! over servers a test publishes, deprecates and deletes over time with
//! the times it says. It counts requests, keeps their query strings, and
//! can fail the next requests with a 500.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{TestCa, TestbedError};
use crate::formats::mcp::{rfc3339, OFFICIAL_META};

/// One version of a server, as the registry holds it.
#[derive(Debug, Clone)]
struct Version {
    server: Value,
    status: &'static str,
    status_message: Option<String>,
    published_at: u64,
    updated_at: u64,
}

impl Version {
    fn name(&self) -> &str {
        self.server["name"].as_str().unwrap_or_default()
    }
    fn version(&self) -> &str {
        self.server["version"].as_str().unwrap_or_default()
    }
}

#[derive(Debug, Default)]
struct Shared {
    versions: Mutex<Vec<Version>>,
    queries: Mutex<Vec<String>>,
    /// Requests answered before the failures start.
    ok_first: AtomicUsize,
    /// Requests then answered with a 500.
    fail: AtomicUsize,
    /// A body answered instead of the list, when set.
    raw: Mutex<Option<String>>,
}

/// The registry. Dropping it stops the server.
#[derive(Debug)]
pub struct UpstreamRegistry {
    addr: SocketAddr,
    shared: Arc<Shared>,
    token: CancellationToken,
    server: Option<JoinHandle<()>>,
}

impl Drop for UpstreamRegistry {
    fn drop(&mut self) {
        self.token.cancel();
        if let Some(s) = self.server.take() {
            s.abort();
        }
    }
}

impl UpstreamRegistry {
    /// Starts an empty registry on 127.0.0.1:0 with a leaf from `ca`.
    ///
    /// # Errors
    /// [`TestbedError::Bind`], [`TestbedError::Certificate`].
    pub async fn start(ca: &TestCa) -> Result<Self, TestbedError> {
        let tls = ca.single_server_config(&["127.0.0.1"])?;
        let wanted = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let bind_error = |source| TestbedError::Bind {
            what: "upstream registry",
            addr: wanted,
            source,
        };
        let listener = TcpListener::bind(wanted).await.map_err(bind_error)?;
        let addr = listener.local_addr().map_err(bind_error)?;
        let shared = Arc::new(Shared::default());
        let app = Router::new()
            .route("/v0.1/servers", get(list))
            .with_state(shared.clone());
        let token = CancellationToken::new();
        let server = tokio::spawn(super::agents::serve::serve(
            listener,
            tls,
            app,
            token.clone(),
        ));
        Ok(Self {
            addr,
            shared,
            token,
            server: Some(server),
        })
    }

    /// `https://127.0.0.1:{port}`.
    pub fn base_url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The listener's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Publishes `server` (a `server.json`) at `at` (unix seconds): a new
    /// version of its name becomes the latest.
    pub fn publish(&self, server: Value, at: u64) {
        lock(&self.shared.versions).push(Version {
            server,
            status: "active",
            status_message: None,
            published_at: at,
            updated_at: at,
        });
    }

    /// Sets the status of every version of `name` at `at`.
    pub fn set_status(&self, name: &str, status: &'static str, message: Option<&str>, at: u64) {
        for v in lock(&self.shared.versions).iter_mut() {
            if v.name() == name {
                v.status = status;
                v.status_message = message.map(str::to_owned);
                v.updated_at = at;
            }
        }
    }

    /// Answers `ok` more requests, then the `n` after them with a 500.
    pub fn fail_after(&self, ok: usize, n: usize) {
        self.shared.ok_first.store(ok, Ordering::SeqCst);
        self.shared.fail.store(n, Ordering::SeqCst);
    }

    /// Answers every list request with `body` (`application/json`)
    /// instead of the list; `None` serves the list again.
    pub fn answer_raw(&self, body: Option<String>) {
        *lock(&self.shared.raw) = body;
    }

    /// The query string of every list request so far, in order.
    pub fn queries(&self) -> Vec<String> {
        lock(&self.shared.queries).clone()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

async fn list(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Response {
    lock(&shared.queries).push(uri.query().unwrap_or_default().to_owned());
    let let_through = shared
        .ok_first
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if !let_through
        && shared
            .fail
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "failing as asked");
    }
    if let Some(body) = lock(&shared.raw).clone() {
        return (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
    }
    let limit = match q.get("limit").map(|l| l.parse::<usize>()) {
        None => 30,
        Some(Ok(n)) if (1..=100).contains(&n) => n,
        Some(_) => return error(StatusCode::BAD_REQUEST, "limit is 1 to 100"),
    };
    let since = match q.get("updated_since") {
        None => None,
        Some(t) => match humantime::parse_rfc3339(t) {
            Ok(t) => Some(
                t.duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
            ),
            Err(_) => return error(StatusCode::BAD_REQUEST, "updated_since is not RFC 3339"),
        },
    };
    let include_deleted = since.is_some() || q.get("include_deleted").is_some_and(|v| v == "true");
    let after = q
        .get("cursor")
        .and_then(|c| URL_SAFE_NO_PAD.decode(c).ok())
        .and_then(|b| String::from_utf8(b).ok());
    let versions = lock(&shared.versions);
    // The newest publication of each name: its latest version.
    let mut newest: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for v in versions.iter() {
        let at = newest.entry(v.name()).or_insert(v.published_at);
        *at = (*at).max(v.published_at);
    }
    let latest = |v: &Version| newest.get(v.name()) == Some(&v.published_at);
    let mut chosen: Vec<&Version> = versions
        .iter()
        .filter(|v| include_deleted || v.status != "deleted")
        .filter(|v| since.is_none_or(|t| v.updated_at > t))
        .filter(|v| match q.get("version").map(String::as_str) {
            Some("latest") => latest(v),
            Some(exact) => v.version() == exact,
            None => true,
        })
        .collect();
    chosen.sort_by(|a, b| (a.name(), a.version()).cmp(&(b.name(), b.version())));
    let key = |v: &Version| format!("{}\u{0}{}", v.name(), v.version());
    let start = after.map_or(0, |a| chosen.partition_point(|v| key(v) <= a));
    let page: Vec<&Version> = chosen.iter().skip(start).take(limit).copied().collect();
    let more = start + page.len() < chosen.len();
    let servers: Vec<Value> = page
        .iter()
        .map(|v| {
            let mut official = json!({
                "status": v.status,
                "publishedAt": rfc3339(v.published_at),
                "updatedAt": rfc3339(v.updated_at),
                "isLatest": latest(v),
            });
            if let Some(m) = &v.status_message {
                official["statusMessage"] = m.clone().into();
            }
            json!({"server": v.server, "_meta": { OFFICIAL_META: official }})
        })
        .collect();
    let next = more
        .then(|| page.last().map(|last| URL_SAFE_NO_PAD.encode(key(last))))
        .flatten();
    drop(versions);
    let mut metadata = json!({ "count": servers.len() });
    if let Some(next) = next {
        metadata["nextCursor"] = next.into();
    }
    Json(json!({ "servers": servers, "metadata": metadata })).into_response()
}
