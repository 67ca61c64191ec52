//! The node's Prometheus metrics: one [`Metrics`] handle (cheap to clone,
//! an `Arc` inside) that the API, the crawl queue and the federated search
//! bump, and that `GET /metrics` renders ([`Metrics::render`]) in the
//! OpenMetrics text format ([`CONTENT_TYPE`]).
//!
//! What is counted where it happens: API requests by route template,
//! method and status (the API's middleware); crawled domains by outcome
//! and by reason code, and crawl job durations (the crawl queue); search
//! durations by scope (`FederatedSearch::search`, `GET /agents`).
//!
//! What is read at scrape time, from the parts [`Metrics::watch`] was
//! given: records held by trust level (the store's posting lists, no read)
//! and by source (a walk of the compact records, done again only when the
//! store was written or the suspensions changed since the last one, and
//! on a large store at most 1 % of the time: see `WalkCost`);
//! connected peers (the mesh loop's status); the mesh's own counters
//! ([`MeshStats`]: records from peers by path, verdict and reason,
//! Kademlia queries by kind and outcome); and libp2p's bandwidth metrics,
//! as libp2p names them.
//!
//! Every label value is bounded: reason codes, trust levels, query kinds
//! and outcomes are `&'static str` codes of enums, routes are the
//! router's templates (`/agents/{id}`, never a raw path; `unmatched` for
//! a path no route has), methods outside the standard ones are `other`.
//! Nothing secret is held here: no token, no key, no request content.

mod library;
mod mesh;

pub use library::{CountLibraryWarnings, DNSSEC_LIBRARY_TARGET, DNSSEC_LIBRARY_WARNINGS};

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry as PromRegistry, Unit};

use crate::mesh::{MeshClient, MeshStats};
use crate::registry::Registry;
use crate::store::{Audience, Filter};
use crate::trust::{Reason, TrustLevel};

/// The content type of [`Metrics::render`]'s text: OpenMetrics 1.0, the
/// format `prometheus-client` encodes (it ends with `# EOF`).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every trust level, lowest first.
const TRUST_LEVELS: [TrustLevel; 4] = [
    TrustLevel::Unverified,
    TrustLevel::DnsVerified,
    TrustLevel::KeyVerified,
    TrustLevel::PeerVerified,
];

/// Stops compiling when a trust level is added and not listed in
/// [`TRUST_LEVELS`].
const fn _every_level_listed(level: TrustLevel) {
    match level {
        TrustLevel::Unverified
        | TrustLevel::DnsVerified
        | TrustLevel::KeyVerified
        | TrustLevel::PeerVerified => {}
    }
}

/// Crawl job durations, seconds: a one-domain job takes tens of
/// milliseconds on a fast network, a seed list with its peers minutes.
const CRAWL_BUCKETS: [f64; 12] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];
/// Search durations, seconds: a local search takes a millisecond or
/// less, a mesh search up to `p2p.search_timeout` (2 s by default).
const SEARCH_BUCKETS: [f64; 13] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// Labels of an API request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    route: String,
    method: &'static str,
    status: u16,
}

type Labels1 = [(&'static str, &'static str); 1];

/// Handle to the node's metrics. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: PromRegistry,
    requests: Family<RequestLabels, Counter>,
    auth_failures: Family<Labels1, Counter>,
    rate_limited: Family<Labels1, Counter>,
    shed: Counter,
    connections_refused: Family<Labels1, Counter>,
    crawls: Family<Labels1, Counter>,
    crawl_reasons: Family<Labels1, Counter>,
    crawl_jobs: Histogram,
    schedule_left: Family<Labels1, Counter>,
    probes: Family<Labels1, Counter>,
    upstream_servers: Family<Labels1, Counter>,
    upstream_syncs: Family<Labels1, Counter>,
    searches: Family<Labels1, Histogram, fn() -> Histogram>,
    records_by_trust: Family<Labels1, Gauge>,
    records_by_source: Family<Labels1, Gauge>,
    peers: Gauge,
    text_segments: Gauge,
    semantic_agents: Gauge,
    semantic_stopped: Gauge,
    dnssec_library_warnings: Counter,
    watched: OnceLock<Watched>,
    /// The mesh counters the collector reads (set with `watched`).
    mesh_stats: Arc<OnceLock<MeshStats>>,
    /// The source counts of the last walk, and what the store held when
    /// it started.
    by_source: tokio::sync::Mutex<Option<(StoreState, SourceCounts, WalkCost)>>,
}

/// When the last walk ended and how long it took: a walk that took
/// longer than [`CHEAP_WALK`] is not done again for a hundred times its
/// length (a node of a million agents, written all the time, walks at
/// most 1 % of the time; its source counts lag by that much).
#[derive(Debug, Clone, Copy)]
struct WalkCost {
    ended: std::time::Instant,
    took: Duration,
}

/// A walk this quick is redone whenever the store changed.
const CHEAP_WALK: Duration = Duration::from_millis(100);

/// What is read at scrape time.
struct Watched {
    registry: Registry,
    own_key: [u8; 32],
    mesh: Option<MeshClient>,
}

/// What decides whether a walk's counts still hold: the store's writes,
/// and the agents suspended (a walk leaves them out).
#[derive(Debug, Clone, PartialEq, Eq)]
struct StoreState {
    writes: u64,
    suspended: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct SourceCounts {
    local: u64,
    crawl: u64,
    mesh: u64,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("watching", &self.inner.watched.get().is_some())
            .finish()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn search_histogram() -> Histogram {
    Histogram::new(SEARCH_BUCKETS)
}

impl Inner {
    /// The HTTP API's metrics: requests and refusals.
    fn register_http(&mut self) {
        self.registry.register(
            "http_requests",
            "HTTP API requests answered, by route template, method and status",
            self.requests.clone(),
        );
        self.registry.register(
            "auth_failures",
            "Requests refused for their credentials, by reason: malformed, \
             unknown_key, expired_key, revoked_key, bad_token, bad_jwt",
            self.auth_failures.clone(),
        );
        self.registry.register(
            "http_rate_limited",
            "HTTP API requests refused with 429, by the limit they were over: a budget of api.limits (reads, text_search, semantic_search, mesh_search, resolve, writes, records, import) or daily_quota",
            self.rate_limited.clone(),
        );
        self.registry.register(
            "http_shed",
            "HTTP API requests answered 503 at once because api.max_concurrent_requests were in flight",
            self.shed.clone(),
        );
        self.registry.register(
            "http_connections_refused",
            "HTTP connections closed as they were accepted, by cap: total (api.max_connections) or per_ip (api.max_connections_per_ip)",
            self.connections_refused.clone(),
        );
    }

    /// The crawler's metrics: crawls, their schedule, probes and followed
    /// MCP registries.
    fn register_crawl(&mut self) {
        self.registry.register(
            "crawls",
            "Domains crawled (one per report), by outcome: stored or not_stored",
            self.crawls.clone(),
        );
        self.registry.register(
            "crawl_reasons",
            "Reason codes in crawl reports (a report may carry several)",
            self.crawl_reasons.clone(),
        );
        self.registry.register_with_unit(
            "crawl_job_duration",
            "Crawl jobs (POST /crawl, seeds, re-verifications, with the peers they follow), start to last report",
            Unit::Seconds,
            self.crawl_jobs.clone(),
        );
        self.registry.register(
            "crawl_schedule_left",
            "Domains the recrawl schedule let go, by cause: failures (failed crawl.evict_after_failures times in a row), evicted (made room for a new domain at crawl.max_scheduled_domains), refused (a new domain not scheduled: full of domains that do not fail)",
            self.schedule_left.clone(),
        );
        self.registry.register(
            "crawl_probes",
            "Liveness probes of agents (crawl.probe_registered), by result: alive, auth_required, not_protocol, unreachable, timeout",
            self.probes.clone(),
        );
        self.registry.register(
            "mcp_upstream_servers",
            "Servers read from the MCP registries this node follows (crawl.mcp_upstreams), by outcome: created, updated, unchanged, deleted, skipped, refused",
            self.upstream_servers.clone(),
        );
        self.registry.register(
            "mcp_upstream_syncs",
            "Passes over the MCP registries this node follows, by result: ok (every change read), failed (stopped, resumed later where it stopped)",
            self.upstream_syncs.clone(),
        );
    }

    /// Searches answered, and what the node holds: records by trust and
    /// source, peers, the indexes.
    fn register_held(&mut self) {
        self.registry.register_with_unit(
            "search_duration",
            "Searches answered, by scope (mesh when peers were asked, else local)",
            Unit::Seconds,
            self.searches.clone(),
        );
        self.registry.register(
            "records_by_trust",
            "Live descriptors held, by trust level",
            self.records_by_trust.clone(),
        );
        self.registry.register(
            "records_by_source",
            "Live descriptors held as listings show them (suspended agents left out), by source: local, crawl or mesh",
            self.records_by_source.clone(),
        );
        self.registry.register(
            "peers_connected",
            "Peers with at least one established connection",
            self.peers.clone(),
        );
        self.registry.register(
            "text_index_segments",
            "Segments of the text index that every text search walks (merges join them; a bulk import adds them)",
            self.text_segments.clone(),
        );
        self.registry.register(
            "semantic_index_agents",
            "Agents in the vector index that semantic search finds by meaning (0 without a semantic model)",
            self.semantic_agents.clone(),
        );
        self.registry.register(
            "dnssec_library_warnings",
            "Warnings the DNS library's DNSSEC validator logged (an unsigned or broken zone on the path of a validating lookup), kept out of the log and counted here",
            self.dnssec_library_warnings.clone(),
        );
        self.registry.register(
            "semantic_index_stopped",
            "1 when the vector index's thread has stopped (a panic, in the log): semantic search answers from what it held, no longer following the store, until a restart",
            self.semantic_stopped.clone(),
        );
    }
}

impl Metrics {
    /// Fresh metrics, every counter at zero, watching nothing yet.
    pub fn new() -> Self {
        let mut inner = Inner {
            registry: PromRegistry::with_prefix("agentmesh"),
            requests: Family::default(),
            auth_failures: Family::default(),
            rate_limited: Family::default(),
            shed: Counter::default(),
            connections_refused: Family::default(),
            crawls: Family::default(),
            crawl_reasons: Family::default(),
            crawl_jobs: Histogram::new(CRAWL_BUCKETS),
            schedule_left: Family::default(),
            probes: Family::default(),
            upstream_servers: Family::default(),
            upstream_syncs: Family::default(),
            searches: Family::new_with_constructor(search_histogram),
            records_by_trust: Family::default(),
            records_by_source: Family::default(),
            peers: Gauge::default(),
            text_segments: Gauge::default(),
            semantic_agents: Gauge::default(),
            semantic_stopped: Gauge::default(),
            dnssec_library_warnings: Counter::default(),
            watched: OnceLock::new(),
            mesh_stats: Arc::new(OnceLock::new()),
            by_source: tokio::sync::Mutex::new(None),
        };
        inner.register_http();
        inner.register_crawl();
        inner.register_held();
        let collector = mesh::MeshCollector(inner.mesh_stats.clone());
        inner.registry.register_collector(Box::new(collector));
        Self {
            inner: Arc::new(inner),
        }
    }

    /// Reads records from `registry` (whose records signed by `own_key`
    /// are this node's crawls) and peers from `mesh` at each scrape. Set
    /// once; later calls are ignored.
    pub fn watch(&self, registry: Registry, own_key: [u8; 32], mesh: Option<MeshClient>) {
        if let Some(m) = &mesh {
            let _ = self.inner.mesh_stats.set(m.stats_handle().clone());
        }
        let _ = self.inner.watched.set(Watched {
            registry,
            own_key,
            mesh,
        });
    }

    /// One API request answered. `route` is the router's template of the
    /// matched route (`None`: no route matched).
    pub fn request(&self, route: Option<&str>, method: &axum::http::Method, status: u16) {
        let labels = RequestLabels {
            route: route.unwrap_or("unmatched").to_owned(),
            method: method_label(method),
            status,
        };
        self.inner.requests.get_or_create(&labels).inc();
    }

    /// One request refused for its credentials, and why.
    pub fn auth_failed(&self, reason: &'static str) {
        self.inner
            .auth_failures
            .get_or_create(&[("reason", reason)])
            .inc();
    }

    /// One API request refused (429) for being over `limit` (a budget's
    /// name, or `daily_quota`).
    pub fn rate_limited(&self, limit: &'static str) {
        self.inner
            .rate_limited
            .get_or_create(&[("limit", limit)])
            .inc();
    }

    /// One API request shed (503) at the concurrency limit.
    pub fn shed(&self) {
        self.inner.shed.inc();
    }

    /// One connection closed as it was accepted, by `cap` (`total` or
    /// `per_ip`).
    pub fn connection_refused(&self, cap: &'static str) {
        self.inner
            .connections_refused
            .get_or_create(&[("cap", cap)])
            .inc();
    }

    /// One domain crawled: whether a record was stored, and the reason
    /// codes of its report.
    pub fn crawled(&self, stored: bool, reasons: &[Reason]) {
        let outcome = if stored { "stored" } else { "not_stored" };
        self.inner
            .crawls
            .get_or_create(&[("outcome", outcome)])
            .inc();
        for r in reasons {
            self.inner
                .crawl_reasons
                .get_or_create(&[("reason", r.as_str())])
                .inc();
        }
    }

    /// One domain the recrawl schedule let go, by `cause` (`failures`,
    /// `evicted`, `refused`: [`crate::crawl::scheduler::LeftBecause`]).
    pub fn schedule_left(&self, cause: &'static str) {
        self.inner
            .schedule_left
            .get_or_create(&[("cause", cause)])
            .inc();
    }

    /// One liveness probe's result, by its state's wire name (the fixed
    /// set of [`crate::store::LiveState::as_str`]).
    pub fn probed(&self, result: &'static str) {
        self.inner.probes.get_or_create(&[("result", result)]).inc();
    }

    /// `n` servers read from a followed MCP registry with `outcome`.
    pub fn upstream_servers(&self, outcome: &'static str, n: u64) {
        self.inner
            .upstream_servers
            .get_or_create(&[("outcome", outcome)])
            .inc_by(n);
    }

    /// One pass over a followed MCP registry ended: `ok` or `failed`.
    pub fn upstream_synced(&self, result: &'static str) {
        self.inner
            .upstream_syncs
            .get_or_create(&[("result", result)])
            .inc();
    }

    /// One crawl job done, after `elapsed`.
    pub fn crawl_job_done(&self, elapsed: Duration) {
        self.inner.crawl_jobs.observe(elapsed.as_secs_f64());
    }

    /// One search answered after `elapsed`; `mesh` when peers were asked.
    pub fn searched(&self, mesh: bool, elapsed: Duration) {
        let scope = if mesh { "mesh" } else { "local" };
        self.inner
            .searches
            .get_or_create(&[("scope", scope)])
            .observe(elapsed.as_secs_f64());
    }

    /// Everything, in the OpenMetrics text format: this node's metrics
    /// (the gauges read now), then libp2p's, then `# EOF`.
    pub async fn render(&self) -> String {
        self.refresh().await;
        let mut out = String::new();
        // Writing to a String cannot fail; the encoders only pass on the
        // writer's errors.
        let _ = prometheus_client::encoding::text::encode_registry(&mut out, &self.inner.registry);
        if let Some(mesh) = self.inner.watched.get().and_then(|w| w.mesh.as_ref()) {
            let _ = mesh.stats_handle().encode_libp2p(&mut out);
        }
        let _ = prometheus_client::encoding::text::encode_eof(&mut out);
        out
    }

    /// Sets the scrape-time gauges.
    async fn refresh(&self) {
        let warnings = DNSSEC_LIBRARY_WARNINGS.load(std::sync::atomic::Ordering::Relaxed);
        let counted = &self.inner.dnssec_library_warnings;
        counted.inc_by(warnings.saturating_sub(counted.get()));
        let Some(watched) = self.inner.watched.get() else {
            return;
        };
        let store = watched.registry.store();
        for level in TRUST_LEVELS {
            let n = gauge(store.trust_count(level));
            self.inner
                .records_by_trust
                .get_or_create(&[("level", level.as_str())])
                .set(n);
        }
        if let Some(n) = store.text_segments() {
            self.inner.text_segments.set(gauge(n));
        }
        if let Some(n) = watched.registry.semantic_agents() {
            self.inner.semantic_agents.set(gauge(n));
        }
        if let Some(stopped) = watched.registry.semantic_stopped() {
            self.inner.semantic_stopped.set(i64::from(stopped));
        }
        if let Some(counts) = self.source_counts(watched).await {
            for (source, n) in [
                ("local", counts.local),
                ("crawl", counts.crawl),
                ("mesh", counts.mesh),
            ] {
                self.inner
                    .records_by_source
                    .get_or_create(&[("source", source)])
                    .set(gauge(n));
            }
        }
        if let Some(mesh) = &watched.mesh {
            if let Ok(status) = mesh.status().await {
                self.inner.peers.set(gauge(status.connected_peers));
            }
        }
    }

    /// The records by source: the last walk's, unless the store was
    /// written or an agent suspended or reinstated since it started; then
    /// a new walk on a blocking thread.
    /// One walk at a time: scrapes that arrive during a walk wait for it
    /// and take its counts when nothing was written meanwhile.
    async fn source_counts(&self, watched: &Watched) -> Option<SourceCounts> {
        let mut held = self.inner.by_source.lock().await;
        let store = watched.registry.store().clone();
        let now = StoreState {
            writes: store.write_count(),
            suspended: store.suspensions().into_iter().map(|(id, _)| id).collect(),
        };
        if let Some((at, counts, cost)) = &*held {
            let resting = cost.took > CHEAP_WALK && cost.ended.elapsed() < cost.took * 100;
            if *at == now || resting {
                return Some(*counts);
            }
        }
        let own_key = watched.own_key;
        let started = std::time::Instant::now();
        let walked = tokio::task::spawn_blocking(move || {
            let blocking = store.blocking();
            let filter = Filter {
                include_stale: true,
                audience: Audience::Everything,
                ..Filter::default()
            };
            let mut counts = SourceCounts::default();
            let mut after: Option<String> = None;
            loop {
                let (page, next) = blocking.walk(&filter, None, after.as_deref(), 1000)?;
                for agent in &page {
                    if agent.local {
                        counts.local += 1;
                    } else if agent.signer == own_key {
                        counts.crawl += 1;
                    } else {
                        counts.mesh += 1;
                    }
                }
                match next {
                    Some(n) if !page.is_empty() => after = Some(n),
                    _ => break,
                }
            }
            Ok::<_, crate::store::StoreError>(counts)
        })
        .await;
        match walked {
            Ok(Ok(counts)) => {
                let cost = WalkCost {
                    ended: std::time::Instant::now(),
                    took: started.elapsed(),
                };
                *held = Some((now, counts, cost));
                Some(counts)
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "counting records by source failed");
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "the records-by-source walk did not finish");
                None
            }
        }
    }
}

/// A bounded label for an HTTP method: the standard ones by name, any
/// other `other`.
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    let standard = [
        ("GET", Method::GET),
        ("POST", Method::POST),
        ("PUT", Method::PUT),
        ("DELETE", Method::DELETE),
        ("HEAD", Method::HEAD),
        ("OPTIONS", Method::OPTIONS),
        ("PATCH", Method::PATCH),
        ("TRACE", Method::TRACE),
        ("CONNECT", Method::CONNECT),
    ];
    standard
        .iter()
        .find(|(_, m)| m == method)
        .map_or("other", |(name, _)| name)
}

/// A count as a gauge's value (saturating: a count past `i64::MAX` shows
/// as that).
fn gauge(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;
