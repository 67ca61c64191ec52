//! How much a client may ask: the rate limits and daily quotas of
//! `[api.limits]`, and the load shedding at `api.max_concurrent_requests`.
//! Two layers of the router use it: [`enforce`] (after the caller is
//! known, before tracing) and [`shed`] (just outside the timeout).
//!
//! Every request is charged to one budget ([`Limit`]), by route and, for
//! a search, by what it asks: mesh scope (the default scope's first
//! page, which asks peers) is the costliest, then ranking by meaning
//! (a node with a semantic model), then free text; a filter-only local
//! search is a read. Each budget is a token bucket (GCRA, the `governor`
//! crate) per client: the caller's principal when its credentials
//! proved one (`key:<id>`, `jwt:<subject>`, `admin-token`), else its
//! address (an IPv6 address by its /64, which one host commonly owns
//! whole). A bucket holds the whole budget and refills it evenly over
//! `api.limits.window`. A refused request is answered 429 `RateLimited`
//! with `Retry-After` (whole seconds, rounded up) and counted by the
//! budget's name (`agentmesh_http_rate_limited`).
//!
//! The tables are bounded: a bucket idle for a window is full again and
//! is forgotten; when a table still holds `api.limits.max_tracked`
//! clients, new ones share one overflow bucket, so that a flood from
//! rotating addresses costs neither memory nor the budgets of the
//! clients already known.
//!
//! API keys, token subjects and client certificate entries also have a
//! daily quota (`api.limits.daily_quota` requests per UTC day), counted
//! in memory: a restart starts the day's counts again.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, MonotonicClock};
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use serde_json::json;

use super::caller::{Caller, Principal};
use super::error::{ApiError, ErrorCode};
use super::serve::BodyStalled;
use crate::config::{ApiConfig, LimitsConfig};
use crate::metrics::Metrics;

/// The budgets of `[api.limits]`, one per kind of request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Limit {
    /// Reads: `GET`s, and filter-only local searches.
    Reads,
    /// Local free-text searches.
    TextSearch,
    /// Local searches ranked by meaning.
    SemanticSearch,
    /// Searches that ask peers.
    MeshSearch,
    /// `POST /resolve`.
    Resolve,
    /// Register, update, delete, suspend, transfer, crawl.
    Writes,
    /// `POST /records`.
    Records,
    /// `POST /admin/import`.
    Import,
}

impl Limit {
    const ALL: [Limit; 8] = [
        Limit::Reads,
        Limit::TextSearch,
        Limit::SemanticSearch,
        Limit::MeshSearch,
        Limit::Resolve,
        Limit::Writes,
        Limit::Records,
        Limit::Import,
    ];

    /// Its key in `[api.limits]`, and its label in the metrics.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Limit::Reads => "reads",
            Limit::TextSearch => "text_search",
            Limit::SemanticSearch => "semantic_search",
            Limit::MeshSearch => "mesh_search",
            Limit::Resolve => "resolve",
            Limit::Writes => "writes",
            Limit::Records => "records",
            Limit::Import => "import",
        }
    }

    fn budget(self, config: &LimitsConfig) -> u32 {
        match self {
            Limit::Reads => config.reads,
            Limit::TextSearch => config.text_search,
            Limit::SemanticSearch => config.semantic_search,
            Limit::MeshSearch => config.mesh_search,
            Limit::Resolve => config.resolve,
            Limit::Writes => config.writes,
            Limit::Records => config.records,
            Limit::Import => config.import,
        }
    }
}

/// Whom a bucket belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Client {
    /// A principal its credentials proved, by its name (`key:<id>`).
    Principal(String),
    /// An anonymous client, by its address (IPv6 by its /64).
    Addr(IpAddr),
}

impl Client {
    /// Who is charged for a request of `caller`; `None` for a request
    /// that came without a server (nothing to key it by).
    pub(super) fn of(caller: &Caller) -> Option<Client> {
        match (&caller.principal, caller.addr) {
            (Principal::Anonymous, Some(addr)) => Some(Client::Addr(address_key(addr))),
            (Principal::Anonymous, None) => None,
            (principal, _) => Some(Client::Principal(principal.to_string())),
        }
    }
}

/// The address a bucket is kept for: IPv4 as is, IPv6 by its /64.
fn address_key(addr: IpAddr) -> IpAddr {
    match addr.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
        v4 => v4,
    }
}

type Bucket = RateLimiter<NotKeyed, InMemoryState, MonotonicClock, NoOpMiddleware<Instant>>;

/// A bucket and when it was last asked.
struct Tracked {
    bucket: Bucket,
    seen: Instant,
}

/// One budget's buckets.
struct Table {
    buckets: HashMap<Client, Tracked>,
    /// Shared by the clients that find the table full.
    overflow: Bucket,
    swept: Instant,
}

/// One budget: its quota and its table.
pub(super) struct Budget {
    limit: Limit,
    quota: Quota,
    window: Duration,
    max_tracked: usize,
    table: Mutex<Table>,
}

impl Budget {
    pub(super) fn new(limit: Limit, config: &LimitsConfig, now: Instant) -> Self {
        let n = NonZeroU32::new(limit.budget(config)).unwrap_or(NonZeroU32::MIN);
        let period = (config.window / n.get()).max(Duration::from_nanos(1));
        let quota = Quota::with_period(period)
            .expect("a period of at least a nanosecond")
            .allow_burst(n);
        Self {
            limit,
            quota,
            window: config.window,
            max_tracked: config.max_tracked,
            table: Mutex::new(Table {
                buckets: HashMap::new(),
                overflow: RateLimiter::direct_with_clock(quota, MonotonicClock),
                swept: now,
            }),
        }
    }

    /// Takes one token of `client`'s bucket, or tells how long until one
    /// is there. `now` decides what is idle enough to forget.
    pub(super) fn check(&self, client: &Client, now: Instant) -> Result<(), Duration> {
        let mut table = self.table.lock().expect("a limits table is never poisoned");
        let full = table.buckets.len() >= self.max_tracked;
        let since = now.saturating_duration_since(table.swept);
        // A sweep walks the whole table: once a window, or more often
        // (still bounded) while the table is full and new clients come.
        if since >= self.window || (full && since >= self.window / 8) {
            let window = self.window;
            table
                .buckets
                .retain(|_, t| now.saturating_duration_since(t.seen) < window);
            table.buckets.shrink_to(self.max_tracked.min(1024));
            table.swept = now;
        }
        let len = table.buckets.len();
        let table = &mut *table;
        let bucket = match table.buckets.get_mut(client) {
            Some(tracked) => {
                tracked.seen = now;
                &tracked.bucket
            }
            None if len < self.max_tracked => {
                let tracked = table.buckets.entry(client.clone()).or_insert(Tracked {
                    bucket: RateLimiter::direct_with_clock(self.quota, MonotonicClock),
                    seen: now,
                });
                &tracked.bucket
            }
            None => &table.overflow,
        };
        bucket
            .check()
            .map_err(|not_until| not_until.wait_time_from(MonotonicClock.now()))
    }

    /// Clients tracked now.
    #[cfg(test)]
    pub(super) fn tracked(&self) -> usize {
        self.table
            .lock()
            .expect("a limits table is never poisoned")
            .buckets
            .len()
    }
}

/// The daily quota of API keys, token subjects and client certificate
/// entries.
pub(super) struct DailyQuota {
    per_day: u64,
    max_tracked: usize,
    /// Per principal: the UTC day counted, and the requests in it.
    counts: Mutex<HashMap<String, (u64, u64)>>,
}

const DAY: u64 = 86_400;

impl DailyQuota {
    pub(super) fn new(per_day: u64, max_tracked: usize) -> Self {
        Self {
            per_day,
            max_tracked,
            counts: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one request of `principal` at `now` (seconds since the Unix
    /// epoch), or tells how long until the next UTC day when its quota is
    /// spent. A principal that finds the table full of today's counts is
    /// not counted.
    pub(super) fn charge(&self, principal: &str, now: u64) -> Result<(), Duration> {
        let today = now / DAY;
        let mut counts = self
            .counts
            .lock()
            .expect("the quota table is never poisoned");
        if !counts.contains_key(principal) && counts.len() >= self.max_tracked {
            counts.retain(|_, (day, _)| *day == today);
            if counts.len() >= self.max_tracked {
                return Ok(());
            }
        }
        let (day, n) = counts.entry(principal.to_owned()).or_insert((today, 0));
        if *day != today {
            *day = today;
            *n = 0;
        }
        if *n >= self.per_day {
            return Err(Duration::from_secs((today + 1) * DAY - now));
        }
        *n += 1;
        Ok(())
    }
}

/// Everything [`enforce`] needs.
pub(super) struct Limits {
    enabled: bool,
    budgets: Vec<Budget>,
    quota: Option<DailyQuota>,
    /// Whether the node ranks by meaning (what a text search costs).
    semantic: bool,
    max_body_bytes: usize,
    metrics: Metrics,
}

impl Limits {
    /// The limits of `config`, on a node that ranks by meaning when
    /// `semantic`.
    pub(super) fn new(config: &ApiConfig, semantic: bool, metrics: Metrics) -> Self {
        let limits = &config.limits;
        let now = Instant::now();
        Self {
            enabled: limits.enabled,
            budgets: Limit::ALL
                .iter()
                .map(|l| Budget::new(*l, limits, now))
                .collect(),
            quota: (limits.daily_quota > 0)
                .then(|| DailyQuota::new(limits.daily_quota, limits.max_tracked)),
            semantic,
            max_body_bytes: config.max_body_bytes,
            metrics,
        }
    }

    fn budget(&self, limit: Limit) -> &Budget {
        let budget = &self.budgets[limit as usize];
        debug_assert_eq!(budget.limit, limit);
        budget
    }
}

/// The rate-limit layer: charges the request to its client's bucket of
/// its budget, and an API key's or token's request to its daily quota;
/// answers 429 with `Retry-After` when either is spent.
pub(super) async fn enforce(
    State(limits): State<Arc<Limits>>,
    req: Request,
    next: Next,
) -> Response {
    if !limits.enabled {
        return next.run(req).await;
    }
    let caller = Caller::of(req.extensions());
    let Some(client) = Client::of(&caller) else {
        return next.run(req).await;
    };
    let (limit, req) = match classify(&limits, req).await {
        Ok(classified) => classified,
        Err(e) => return e.into_response(),
    };
    if let Err(wait) = limits.budget(limit).check(&client, Instant::now()) {
        limits.metrics.rate_limited(limit.as_str());
        let message = format!(
            "this client is over its budget of {} requests; try again later",
            limit.as_str().replace('_', " ")
        );
        return refusal(limit.as_str(), message, wait);
    }
    if let (
        Some(quota),
        Principal::ApiKey { .. } | Principal::Jwt { .. } | Principal::Certificate { .. },
    ) = (&limits.quota, &caller.principal)
    {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if let Err(wait) = quota.charge(&caller.principal.to_string(), now) {
            limits.metrics.rate_limited("daily_quota");
            let message = format!(
                "{} has made its {} requests of the day (UTC); the quota renews at midnight",
                caller.principal, quota.per_day
            );
            return refusal("daily_quota", message, wait);
        }
    }
    next.run(req).await
}

/// The whole seconds a client is told to wait: `wait` rounded up, at
/// least one.
pub(super) fn retry_after_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

/// A 429 answer for `limit`, with `Retry-After`.
fn refusal(limit: &'static str, message: String, wait: Duration) -> Response {
    let secs = retry_after_secs(wait);
    let mut response = ApiError::new(ErrorCode::RateLimited, message)
        .with_details(json!({"limit": limit, "retry_after": secs}))
        .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    response
}

/// The budget a request is charged to, and the request (its body read
/// and put back when a search's had to be looked at).
async fn classify(limits: &Limits, req: Request) -> Result<(Limit, Request), ApiError> {
    let route = req.extensions().get::<MatchedPath>().cloned();
    let limit = match (req.method(), route.as_ref().map(MatchedPath::as_str)) {
        (&Method::POST, Some("/agents/search")) => return search_limit(limits, req).await,
        (&Method::POST, Some("/resolve")) => Limit::Resolve,
        // ARD's search asks the mesh unless told not to: charged as a
        // mesh search; its explore ranks locally.
        (&Method::POST, Some("/ard/search")) => Limit::MeshSearch,
        (&Method::POST, Some("/ard/explore")) => Limit::TextSearch,
        (&Method::POST, Some("/records")) => Limit::Records,
        (&Method::POST, Some("/admin/import")) => Limit::Import,
        (&Method::GET | &Method::HEAD | &Method::OPTIONS, _) | (_, None) => Limit::Reads,
        _ => Limit::Writes,
    };
    Ok((limit, req))
}

/// What a search body says about its cost; anything else in it is the
/// handler's to check.
#[derive(Debug, serde::Deserialize)]
struct SearchCost {
    query: Option<String>,
    scope: Option<String>,
    cursor: Option<String>,
}

/// The budget of a search: read from its body, then put back. A body
/// over `api.max_body_bytes` by its `Content-Length` is left to the
/// handler's 413 (and charged as a read).
async fn search_limit(limits: &Limits, req: Request) -> Result<(Limit, Request), ApiError> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_body_bytes as u64) {
        return Ok((Limit::Reads, req));
    }
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, limits.max_body_bytes)
        .await
        .map_err(unreadable_body)?;
    let limit = search_cost(&bytes, limits.semantic);
    Ok((limit, Request::from_parts(parts, Body::from(bytes))))
}

/// The budget a search body is charged to (a malformed one, which the
/// handler refuses, as a read).
pub(super) fn search_cost(body: &[u8], semantic: bool) -> Limit {
    let Ok(cost) = serde_json::from_slice::<SearchCost>(body) else {
        return Limit::Reads;
    };
    let text = cost.query.is_some_and(|q| !q.trim().is_empty());
    if cost.scope.as_deref() != Some("local") && cost.cursor.is_none() {
        Limit::MeshSearch
    } else if text && semantic {
        Limit::SemanticSearch
    } else if text {
        Limit::TextSearch
    } else {
        Limit::Reads
    }
}

/// The answer to a body that could not be read: 408 when it stalled,
/// 413 when it was too long, else 400.
pub(super) fn unreadable_body(e: axum::Error) -> ApiError {
    if let Some(stalled) = BodyStalled::in_chain(&e) {
        return ApiError::new(ErrorCode::InvalidInput, stalled.to_string())
            .with_status(StatusCode::REQUEST_TIMEOUT);
    }
    let too_long = std::iter::successors(Some(&e as &(dyn std::error::Error + 'static)), |e| {
        e.source()
    })
    .any(|e| e.is::<http_body_util::LengthLimitError>());
    if too_long {
        return ApiError::new(ErrorCode::InvalidInput, "the request body is too large")
            .with_status(StatusCode::PAYLOAD_TOO_LARGE);
    }
    ApiError::new(
        ErrorCode::InvalidInput,
        format!("the request body could not be read: {e}"),
    )
}

/// The load-shedding layer's state: the permits of
/// `api.max_concurrent_requests`, one set for the whole router.
pub(super) struct Shed {
    permits: Arc<tokio::sync::Semaphore>,
    metrics: Metrics,
}

impl Shed {
    pub(super) fn new(max_concurrent_requests: usize, metrics: Metrics) -> Self {
        Self {
            permits: Arc::new(tokio::sync::Semaphore::new(max_concurrent_requests)),
            metrics,
        }
    }
}

/// Seconds a shed request is told to wait.
const SHED_RETRY_AFTER: u64 = 1;

/// The load-shedding layer: runs the request when fewer than
/// `api.max_concurrent_requests` are in flight, else answers 503 with
/// `Retry-After` at once (a queue would only make every client wait
/// longer, and hold their connections meanwhile).
pub(super) async fn shed(State(shed): State<Arc<Shed>>, req: Request, next: Next) -> Response {
    let Ok(permit) = shed.permits.clone().try_acquire_owned() else {
        shed.metrics.shed();
        let mut response = ApiError::new(
            ErrorCode::Unavailable,
            "the node is handling as many requests as it allows; try again shortly",
        )
        .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(SHED_RETRY_AFTER));
        return response;
    };
    let response = next.run(req).await;
    drop(permit);
    response
}

#[cfg(test)]
mod tests;
