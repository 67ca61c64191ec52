//! Following MCP registries (`crawl.mcp_upstreams`): a node that names
//! the official registry, or any registry speaking its `/v0.1` API, keeps
//! its servers as its own registrations, incrementally.
//!
//! A pass over an upstream reads `GET {base}/v0.1/servers`, 100 servers a
//! page, following `metadata.nextCursor` to the end. The first pass asks
//! for every server (`version=latest`); each later one asks only for
//! what changed since the newest `updatedAt` the last finished pass saw
//! (`updated_since`, which makes the registry include deleted servers).
//! Each page goes through the bulk import's `mcp-registry` path
//! ([`Importer`] with [`ImportFormat::McpRegistry`]): a new or changed
//! server is signed and stored under `mcp:{name}` with its status and
//! status message, a deleted one is deleted here, an outdated version is
//! skipped, an invalid one refused, an unchanged one left alone.
//!
//! Every page is fetched as the crawler fetches a document (https only,
//! the address policy, the allowed ports, the host's politeness and its
//! `Retry-After`, the size and JSON limits of [`MCP_PAGE`]). The state of
//! each upstream (the pass's cursor, the `updated_since` it asks with,
//! counts, the last error) is kept in the store after every page, so a
//! restarted node resumes the pass where it stopped rather than reading
//! the registry again; `GET /health` shows it. A failed pass is retried
//! after the interval doubled per failure in a row (at most 16 times the
//! interval), from the page that failed.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use url::Url;

use super::fetch::{DocumentKind, Fetched};
use super::{CrawlError, Crawler};
use crate::metrics::Metrics;
use crate::registry::import::{ImportFormat, ImportLimits, Importer};
use crate::registry::Registry;
use crate::store::Store;

/// A page of an upstream's server list.
pub const MCP_PAGE: DocumentKind = DocumentKind {
    what: "MCP registry page",
    accept: "application/json",
    media_types: &["application/json"],
    max_bytes: 4 * 1024 * 1024,
    max_values: 1_000_000,
    json: true,
    headers: &[],
};
/// Servers asked for per page (the registry's maximum).
pub const PAGE_LIMIT: usize = 100;
/// Most pages read in one pass (a million servers); the pass goes on at
/// the next one.
pub const MAX_PAGES_PER_PASS: u64 = 10_000;
/// The largest multiple of the interval a failing upstream waits.
pub const MAX_BACKOFF_FACTOR: u32 = 16;
/// Longest `nextCursor` followed, in bytes.
const MAX_CURSOR_BYTES: usize = 2048;

/// What a node knows of one upstream, kept in the store and shown by
/// `GET /health`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct UpstreamState {
    /// The upstream's base URL, as configured.
    pub url: String,
    /// The `updated_since` the next pass asks with (unix seconds: the
    /// newest `updatedAt` a finished pass saw); absent before the first
    /// pass finished, which reads everything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// The pass in progress: the cursor of its next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// The pass in progress: the newest `updatedAt` it has seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newest: Option<u64>,
    /// When a pass last finished (unix seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synced_at: Option<u64>,
    /// When a page was last asked for (unix seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempted_at: Option<u64>,
    /// Why the last pass stopped, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Passes failed in a row.
    pub failures: u32,
    /// Pages read, in all.
    pub pages: u64,
    /// Servers created, updated, deleted, unchanged, skipped and refused,
    /// in all.
    pub created: u64,
    /// See `created`.
    pub updated: u64,
    /// See `created`.
    pub deleted: u64,
    /// See `created`.
    pub unchanged: u64,
    /// See `created`.
    pub skipped: u64,
    /// See `created`.
    pub refused: u64,
}

impl UpstreamState {
    /// How long after its last attempt the upstream is asked again: the
    /// interval, doubled per failure in a row (at most
    /// [`MAX_BACKOFF_FACTOR`] times).
    pub fn wait(&self, interval: Duration) -> Duration {
        let factor = 1u32
            .checked_shl(self.failures.min(8))
            .unwrap_or(u32::MAX)
            .min(MAX_BACKOFF_FACTOR);
        interval * factor
    }

    /// Whether it is due at `now` (unix seconds): never attempted, in the
    /// middle of a pass that did not fail, or its wait is over.
    pub fn due(&self, now: u64, interval: Duration) -> bool {
        match self.attempted_at {
            None => true,
            Some(_) if self.cursor.is_some() && self.failures == 0 => true,
            Some(at) => now >= at.saturating_add(self.wait(interval).as_secs()),
        }
    }
}

/// Follows the upstreams. Cheap to clone.
#[derive(Clone)]
pub struct Follower {
    crawler: Crawler,
    importer: Importer,
    store: Store,
    metrics: Option<Metrics>,
    interval: Duration,
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower")
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl Follower {
    /// A follower fetching with `crawler`, importing into `registry`, an
    /// upstream asked again `interval` after its last pass.
    pub fn new(crawler: Crawler, registry: Registry, interval: Duration) -> Self {
        let store = registry.store().clone();
        let importer = Importer::new(registry, ImportLimits::default())
            .with_format(ImportFormat::McpRegistry)
            .with_issue_chunk(crate::registry::import::SERVING_ISSUE_CHUNK);
        Self {
            crawler,
            importer,
            store,
            metrics: None,
            interval,
        }
    }

    /// Counts what is read in `metrics`.
    #[must_use]
    pub fn counting_in(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The state kept for `url` (a fresh one when none is).
    ///
    /// # Errors
    /// [`CrawlError::Store`] when the store fails.
    pub async fn state(&self, url: &str) -> Result<UpstreamState, CrawlError> {
        let key = url.to_owned();
        let kept = self
            .store
            .run_blocking(move |s| s.upstream(&key))
            .await
            .and_then(|r| r)
            .map_err(store_failed)?;
        Ok(kept
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_else(|| UpstreamState {
                url: url.to_owned(),
                ..UpstreamState::default()
            }))
    }

    async fn keep(&self, state: &UpstreamState) -> Result<(), CrawlError> {
        let key = state.url.clone();
        let bytes = serde_json::to_vec(state).expect("an UpstreamState serialises");
        self.store
            .run_blocking(move |s| s.put_upstream(&key, &bytes))
            .await
            .and_then(|r| r)
            .map_err(store_failed)
    }

    /// One round: a pass over every upstream that is due at `now`.
    pub async fn round(&self, upstreams: &[String], now: u64) {
        for url in upstreams {
            match self.state(url).await {
                Ok(state) if state.due(now, self.interval) => {
                    let state = self.pass(url).await;
                    if let Some(e) = &state.last_error {
                        tracing::warn!(upstream = %url, error = %e, failures = state.failures, "following an MCP registry failed; retried later");
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(upstream = %url, error = %e, "reading an upstream's state failed")
                }
            }
        }
    }

    /// Spawns the follower: a round every `tick` until `cancel` fires.
    pub fn spawn(
        self,
        upstreams: Vec<String>,
        tick: Duration,
        cancel: tokio_util::sync::CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let upstreams = std::sync::Arc::new(upstreams);
        crate::periodic::every(tick, cancel, move || {
            let follower = self.clone();
            let upstreams = upstreams.clone();
            async move { follower.round(&upstreams, unix_now()).await }
        })
    }

    /// One pass over the upstream at `url`, from where the last one
    /// stopped, to the end of its list or the first failure; the state is
    /// kept after every page, and answered.
    pub async fn pass(&self, url: &str) -> UpstreamState {
        let mut state = match self.state(url).await {
            Ok(state) => state,
            Err(e) => {
                return UpstreamState {
                    url: url.to_owned(),
                    last_error: Some(e.to_string()),
                    ..UpstreamState::default()
                }
            }
        };
        let mut pages = 0;
        loop {
            state.attempted_at = Some(unix_now());
            let read = match self.page(&state).await {
                Ok(read) => read,
                Err(e) => {
                    state.failures = state.failures.saturating_add(1);
                    state.last_error = Some(e.to_string());
                    self.count_sync("failed");
                    let _ = self.keep(&state).await;
                    return state;
                }
            };
            state.pages += 1;
            pages += 1;
            state.newest = state.newest.max(read.newest);
            state.cursor = read.next;
            self.count(&mut state, &read.summary);
            if state.cursor.is_none() {
                // The pass is done: the next asks for what changed since
                // the newest change it saw (the same second again: a
                // change within it is read twice, never missed).
                state.since = state.newest.or(state.since);
                state.newest = None;
                state.synced_at = state.attempted_at;
                state.failures = 0;
                state.last_error = None;
                self.count_sync("ok");
            }
            if let Err(e) = self.keep(&state).await {
                state.last_error = Some(e.to_string());
                return state;
            }
            if state.cursor.is_none() || pages >= MAX_PAGES_PER_PASS {
                return state;
            }
        }
    }

    /// Reads and imports the next page of the pass `state` is in.
    async fn page(&self, state: &UpstreamState) -> Result<Page, CrawlError> {
        let url = page_url(&state.url, state.since, state.cursor.as_deref())?;
        let fetched = self.crawler.fetch_url(&url, MCP_PAGE).await?;
        let doc: serde_json::Value =
            serde_json::from_str(&fetched.text).map_err(|e| bad_page(&url, &e.to_string()))?;
        if !doc.get("servers").is_some_and(serde_json::Value::is_array) {
            return Err(bad_page(&url, "it has no servers array"));
        }
        let next = match doc.pointer("/metadata/nextCursor") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(c)) if c.is_empty() => None,
            Some(serde_json::Value::String(c)) if c.len() <= MAX_CURSOR_BYTES => Some(c.clone()),
            Some(_) => return Err(bad_page(&url, "metadata.nextCursor is not a short string")),
        };
        if next.is_some() && next == state.cursor {
            return Err(bad_page(
                &url,
                "metadata.nextCursor repeats the cursor asked with",
            ));
        }
        let newest = newest_update(&doc);
        let (tx, mut rx) = mpsc::channel(PAGE_LIMIT * 2);
        let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
        let summary = self
            .importer
            .run(std::io::Cursor::new(fetched.text.into_bytes()), tx)
            .await;
        let _ = drain.await;
        if let Some(stopped) = &summary.stopped {
            return Err(bad_page(&url, &format!("{stopped:?}")));
        }
        Ok(Page {
            next,
            newest,
            summary,
        })
    }

    fn count(&self, state: &mut UpstreamState, s: &crate::registry::import::ImportSummary) {
        state.created += s.created;
        state.updated += s.updated;
        state.deleted += s.deleted;
        state.unchanged += s.unchanged;
        state.skipped += s.skipped;
        state.refused += s.refused;
        if let Some(m) = &self.metrics {
            for (outcome, n) in [
                ("created", s.created),
                ("updated", s.updated),
                ("deleted", s.deleted),
                ("unchanged", s.unchanged),
                ("skipped", s.skipped),
                ("refused", s.refused),
            ] {
                if n > 0 {
                    m.upstream_servers(outcome, n);
                }
            }
        }
    }

    fn count_sync(&self, result: &'static str) {
        if let Some(m) = &self.metrics {
            m.upstream_synced(result);
        }
    }
}

impl Crawler {
    /// GETs `url` (https, any host): its host's addresses under the
    /// policy, then the fetch with every limit of `kind`.
    ///
    /// # Errors
    /// The [`CrawlError`] naming the refusal or failure; a 304 (never
    /// asked for) as [`CrawlError::HttpStatus`].
    pub(crate) async fn fetch_url(
        &self,
        url: &Url,
        kind: DocumentKind,
    ) -> Result<Fetched, CrawlError> {
        if url.scheme() != "https" {
            return Err(CrawlError::InsecureUrl {
                url: url.to_string(),
            });
        }
        let host = url.host_str().ok_or_else(|| CrawlError::BadUrl {
            url: url.to_string(),
            reason: "no host".into(),
        })?;
        let ips = self.dns.addresses(host).await?;
        let ips = super::fetch::allowed(host, &ips, self.options.policy)?;
        self.fetcher
            .fetch_kind(url, &ips, None, kind)
            .await?
            .ok_or_else(|| CrawlError::HttpStatus {
                url: url.to_string(),
                status: 304,
            })
    }
}

/// What one page brought.
struct Page {
    next: Option<String>,
    newest: Option<u64>,
    summary: crate::registry::import::ImportSummary,
}

/// The URL of a page: `{base}/v0.1/servers?limit=100`, with
/// `updated_since` after the first pass (else `version=latest`) and the
/// cursor within a pass.
///
/// # Errors
/// [`CrawlError::BadUrl`] for a base that does not parse.
pub fn page_url(base: &str, since: Option<u64>, cursor: Option<&str>) -> Result<Url, CrawlError> {
    let mut url = Url::parse(base.trim_end_matches('/')).map_err(|e| CrawlError::BadUrl {
        url: base.to_owned(),
        reason: e.to_string(),
    })?;
    let path = format!("{}/v0.1/servers", url.path().trim_end_matches('/'));
    url.set_path(&path);
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("limit", &PAGE_LIMIT.to_string());
        match since {
            Some(t) => q.append_pair("updated_since", &crate::formats::mcp::rfc3339(t)),
            None => q.append_pair("version", "latest"),
        };
        if let Some(c) = cursor {
            q.append_pair("cursor", c);
        }
    }
    Ok(url)
}

/// The newest `_meta.official.updatedAt` of a page's servers (unix
/// seconds, rounded down).
fn newest_update(doc: &serde_json::Value) -> Option<u64> {
    doc.get("servers")?
        .as_array()?
        .iter()
        .filter_map(|item| {
            let at = item
                .get("_meta")?
                .get(crate::formats::mcp::OFFICIAL_META)?
                .get("updatedAt")?
                .as_str()?;
            humantime::parse_rfc3339_weak(at.trim_end_matches('Z'))
                .ok()?
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs())
        })
        .max()
}

fn bad_page(url: &Url, why: &str) -> CrawlError {
    CrawlError::Format(crate::formats::FormatError::new(
        crate::trust::Reason::McpServerInvalid,
        format!("{url} is not a server list page: {why}"),
    ))
}

fn store_failed(e: crate::store::StoreError) -> CrawlError {
    CrawlError::Store {
        message: e.to_string(),
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
