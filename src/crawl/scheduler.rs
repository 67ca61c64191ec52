//! Revisiting what was crawled (ADP 10, REQ-DISC-6; issue 10 point 4).
//!
//! Every domain a crawl reaches gets a [`DomainState`], kept in the
//! store's `schedule` tree so it survives restarts. After each visit:
//! - success (a record is held for what the domain publishes): the next
//!   visit is at min(DNS TTL capped at 3600 s, HTTP max-age), no sooner
//!   than `crawl.min_recrawl`, plus up to 10 % (never sooner: the answers
//!   must have expired) so a population crawled together does not come
//!   back together;
//! - failure: exponential backoff from `crawl.retry_base`, doubling per
//!   consecutive failure up to `crawl.retry_max`; never sooner than the
//!   SOA minimum of an NXDOMAIN answer (negative caching) or the
//!   publisher's `Retry-After`.
//!
//! A revisit asks for the ADP document with the held ETag; a 304 keeps
//! the held text (checked against DNS again) and its challenge proof until
//! `crawl.challenge_interval` runs out ([`Held`]). Each agent's
//! [`Freshness`] (fresh, stale after `crawl.stale_after` without a
//! confirmation, dropped from default results after `crawl.drop_after`)
//! goes to the store's `freshness` tree, which results read.
//!
//! Time comes from a [`Clock`], so tests drive days of schedule with a
//! [`ManualClock`] and no waiting.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{CrawlReport, Crawler, Held};
use crate::config::CrawlConfig;
use crate::descriptor::DocumentFormat;
use crate::issuer::Issuer;
use crate::record::RecordBody;
use crate::store::{FreshState, Freshness, StoreError};

/// The longest revisit interval on success (ADP 10.1's TTL cap).
pub const MAX_INTERVAL: Duration = Duration::from_secs(3600);

/// Most agent ids remembered per domain.
const MAX_AGENTS_PER_DOMAIN: usize = 64;

/// How long a visit in flight keeps its domain from being picked again.
const IN_FLIGHT: u64 = 600;

/// Where the scheduler reads the time: Unix seconds.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now, Unix seconds.
    fn now(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> u64 {
        crate::record::unix_now()
    }
}

/// A clock that moves only when told (tests, simulations).
#[derive(Debug)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock reading `now`.
    pub fn new(now: u64) -> Self {
        Self(AtomicU64::new(now))
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_secs(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The scheduler's intervals (the `[crawl]` settings of the same names).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SchedulePolicy {
    /// The shortest interval on success.
    pub min_interval: Duration,
    /// How long a challenge proof stands over unchanged documents.
    pub challenge_interval: Duration,
    /// The first retry after a failure.
    pub retry_base: Duration,
    /// The longest retry.
    pub retry_max: Duration,
    /// Unconfirmed this long: stale.
    pub stale_after: Duration,
    /// Unconfirmed this long: dropped from default results.
    pub drop_after: Duration,
    /// Jitter, as a share of the interval added at most (0.1: up to 10 %
    /// later).
    pub jitter: f64,
}

impl SchedulePolicy {
    /// The policy of a `[crawl]` section.
    pub fn from_config(c: &CrawlConfig) -> Self {
        Self {
            min_interval: c.min_recrawl,
            challenge_interval: c.challenge_interval,
            retry_base: c.retry_base,
            retry_max: c.retry_max,
            stale_after: c.stale_after,
            drop_after: c.drop_after,
            jitter: 0.1,
        }
    }

    /// Seconds until the next visit after a success whose records say to
    /// come back after `recrawl_after_secs`, before jitter.
    pub fn success_interval(&self, recrawl_after_secs: u64) -> u64 {
        recrawl_after_secs
            .min(MAX_INTERVAL.as_secs())
            .max(self.min_interval.as_secs().max(1))
    }

    /// Seconds until the next try after the `failures`-th failure in a
    /// row, before jitter: the backoff, or longer when the answer itself
    /// said how long (`negative_ttl`, `retry_after`).
    pub fn failure_interval(
        &self,
        failures: u32,
        negative_ttl: Option<u32>,
        retry_after: Option<u64>,
    ) -> u64 {
        let base = self.retry_base.as_secs().max(1);
        let doubled = base.saturating_mul(1u64 << failures.saturating_sub(1).min(32));
        let backoff = doubled.min(self.retry_max.as_secs().max(base));
        backoff
            .max(negative_ttl.map_or(0, u64::from))
            .max(retry_after.unwrap_or(0))
    }

    /// The state of an agent last confirmed at `confirmed_at`, at `now`.
    pub fn state_at(&self, confirmed_at: u64, now: u64) -> FreshState {
        let age = now.saturating_sub(confirmed_at);
        if age >= self.drop_after.as_secs() {
            FreshState::Dropped
        } else if age >= self.stale_after.as_secs() {
            FreshState::Stale
        } else {
            FreshState::Fresh
        }
    }

    /// `secs` plus up to `jitter` of it more: never sooner, so a revisit
    /// never finds the answers it came back for still cached with a few
    /// seconds left (which would bring it back at once).
    /// The state of a domain's agents at `now`: by the age of the last
    /// confirmation, and at least stale while the last visit found its
    /// DNS forged (`dnssec_bogus`): a held record proven under DNSSEC is
    /// not presented as fresh once the zone stops validating.
    pub fn state_of(&self, s: &DomainState, now: u64) -> FreshState {
        let aged = s
            .confirmed_at
            .map_or(FreshState::Fresh, |at| self.state_at(at, now));
        if s.last_reason.as_deref() == Some(crate::verify::Reason::DnssecBogus.as_str()) {
            aged.max(FreshState::Stale)
        } else {
            aged
        }
    }

    fn jittered(&self, secs: u64) -> u64 {
        let spread = (secs as f64 * self.jitter.clamp(0.0, 0.5)) as u64;
        if spread == 0 {
            return secs;
        }
        secs + rand::random::<u64>() % (spread + 1)
    }
}

/// What the scheduler keeps of one domain (JSON in the store's
/// `schedule` tree).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DomainState {
    /// When it is visited next, Unix seconds.
    pub next_at: u64,
    /// When it was last visited.
    pub visited_at: u64,
    /// When a visit last confirmed what it publishes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmed_at: Option<u64>,
    /// When its ADP endpoint last answered the challenge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_at: Option<u64>,
    /// Whether the endpoint answered at the last challenge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_ok: Option<bool>,
    /// When the challenge last ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub challenged_at: Option<u64>,
    /// Failed visits in a row.
    pub failures: u32,
    /// The ADP document's ETag and max-age.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// The ADP document's max-age, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_secs: Option<u64>,
    /// The first reason code of the last visit that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reason: Option<String>,
    /// The agents the domain gave.
    #[serde(default)]
    pub agents: Vec<String>,
    /// Their freshness.
    pub state: FreshState,
}

/// Counts of one [`Scheduler::run_due`] round.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Round {
    /// Domains visited.
    pub visited: usize,
    /// Of those, visits whose document answered 304.
    pub not_modified: usize,
    /// Of those, visits whose document was the held one (304, or the same
    /// bytes).
    pub unchanged: usize,
    /// Visits that failed.
    pub failed: usize,
    /// Agents whose freshness state changed without a visit (stale,
    /// dropped).
    pub aged: usize,
}

/// What [`Scheduler::counts`] answers (`GET /health`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ScheduleCounts {
    /// Domains scheduled.
    pub domains: usize,
    /// Of those, the ones due now.
    pub due: usize,
    /// When the soonest is due, Unix seconds (`None`: nothing scheduled).
    pub next_at: Option<u64>,
}

/// The recrawl scheduler. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    crawler: Crawler,
    issuer: Issuer,
    policy: SchedulePolicy,
    clock: Arc<dyn Clock>,
    domains: Mutex<HashMap<String, DomainState>>,
    /// Where revisits are counted (`/metrics`), once set.
    metrics: std::sync::OnceLock<crate::metrics::Metrics>,
}

impl Scheduler {
    /// A scheduler with the states the store holds.
    ///
    /// # Errors
    /// [`StoreError`] when the `schedule` tree cannot be read or holds a
    /// value that does not decode.
    pub async fn load(
        crawler: Crawler,
        issuer: Issuer,
        policy: SchedulePolicy,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        let mut domains = HashMap::new();
        for (domain, bytes) in issuer.store().schedules().await? {
            let state: DomainState =
                serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
                    key: domain.clone(),
                    reason: format!("schedule: {e}"),
                })?;
            domains.insert(domain, state);
        }
        Ok(Self {
            inner: Arc::new(Inner {
                crawler,
                issuer,
                policy,
                clock,
                domains: Mutex::new(domains),
                metrics: std::sync::OnceLock::new(),
            }),
        })
    }

    /// Counts revisits in `metrics` (crawl outcomes by reason, as the
    /// queue's crawls are); a second call keeps the first.
    pub fn count_in(&self, metrics: crate::metrics::Metrics) {
        let _ = self.inner.metrics.set(metrics);
    }

    /// The policy kept.
    pub fn policy(&self) -> SchedulePolicy {
        self.inner.policy
    }

    /// `domain`'s state, if it was ever visited.
    pub fn state(&self, domain: &str) -> Option<DomainState> {
        self.domains().get(domain).cloned()
    }

    /// Domains scheduled.
    pub fn len(&self) -> usize {
        self.domains().len()
    }

    /// Whether no domain is scheduled.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many domains are scheduled, how many are due now, and when the
    /// soonest is due (Unix seconds).
    pub fn counts(&self) -> ScheduleCounts {
        let now = self.inner.clock.now();
        let domains = self.domains();
        ScheduleCounts {
            domains: domains.len(),
            due: domains.values().filter(|s| s.next_at <= now).count(),
            next_at: domains.values().map(|s| s.next_at).min(),
        }
    }

    /// Domains due now, soonest first, at most `limit`.
    pub fn due(&self, limit: usize) -> Vec<String> {
        let now = self.inner.clock.now();
        let mut due: Vec<(u64, String)> = self
            .domains()
            .iter()
            .filter(|(_, s)| s.next_at <= now)
            .map(|(d, s)| (s.next_at, d.clone()))
            .collect();
        due.sort();
        due.truncate(limit);
        due.into_iter().map(|(_, d)| d).collect()
    }

    /// Takes in what a visit of `domain` reported (a crawl from anywhere:
    /// the queue, a revisit) and schedules the next one.
    ///
    /// # Errors
    /// [`StoreError`] when the state or an agent's freshness cannot be
    /// written.
    pub async fn observe(&self, domain: &str, reports: &[CrawlReport]) -> Result<(), StoreError> {
        let now = self.inner.clock.now();
        let policy = self.inner.policy;
        let adp = reports
            .iter()
            .find(|r| r.source_format == DocumentFormat::Adp);
        let stored: Vec<&CrawlReport> = reports.iter().filter(|r| r.stored).collect();
        let mut state = self.state(domain).unwrap_or(DomainState {
            next_at: now,
            visited_at: now,
            confirmed_at: None,
            seen_at: None,
            endpoint_ok: None,
            challenged_at: None,
            failures: 0,
            etag: None,
            max_age_secs: None,
            last_reason: None,
            agents: Vec::new(),
            state: FreshState::Fresh,
        });
        state.visited_at = now;
        if let Some(adp) = adp.filter(|r| r.stored) {
            state.etag = adp.visit.etag.clone();
            state.max_age_secs = adp.visit.max_age_secs;
            if let Some(ok) = adp.visit.endpoint_ok {
                state.endpoint_ok = Some(ok);
                state.challenged_at = Some(now);
                if ok {
                    state.seen_at = Some(now);
                }
            }
        }
        if stored.is_empty() {
            state.failures = state.failures.saturating_add(1);
            state.last_reason = reports
                .iter()
                .find_map(|r| r.reasons.first())
                .map(|r| r.as_str().to_owned());
            let visit = adp.map(|r| &r.visit);
            let wait = policy.failure_interval(
                state.failures,
                visit.and_then(|v| v.negative_ttl_secs),
                reports
                    .iter()
                    .filter_map(|r| r.visit.retry_after_secs)
                    .max(),
            );
            state.next_at = now + policy.jittered(wait);
        } else {
            state.failures = 0;
            state.last_reason = None;
            state.confirmed_at = Some(now);
            let after = stored
                .iter()
                .map(|r| r.recrawl_after_secs)
                .min()
                .unwrap_or(MAX_INTERVAL.as_secs());
            state.next_at = now + policy.jittered(policy.success_interval(after));
            for r in &stored {
                if !state.agents.contains(&r.agent_id) && state.agents.len() < MAX_AGENTS_PER_DOMAIN
                {
                    state.agents.push(r.agent_id.clone());
                }
            }
        }
        state.state = policy.state_of(&state, now);
        self.keep(domain, state).await
    }

    /// Visits `domain` once, as a revisit (conditional on the held
    /// document), and schedules the next visit.
    ///
    /// # Errors
    /// [`StoreError`] when the held record or the schedule cannot be read
    /// or written.
    pub async fn visit(&self, domain: &str) -> Result<Vec<CrawlReport>, StoreError> {
        let held = self.held(domain).await?;
        let outcomes = self
            .inner
            .crawler
            .discover_and_store_with(&self.inner.issuer, domain, held.as_ref())
            .await;
        let reports: Vec<CrawlReport> = outcomes.into_iter().map(|o| o.report).collect();
        if let Some(m) = self.inner.metrics.get() {
            for r in &reports {
                m.crawled(r.stored, &r.reasons);
            }
        }
        self.observe(domain, &reports).await?;
        Ok(reports)
    }

    /// Visits every domain due now (as many at once as the crawler's
    /// concurrency), then ages the agents of domains not confirmed since
    /// (stale, dropped).
    ///
    /// # Errors
    /// The first [`StoreError`] met.
    pub async fn run_due(&self) -> Result<Round, StoreError> {
        let concurrency = self.inner.crawler.options().concurrency.max(1);
        let due = self.due(concurrency.saturating_mul(16));
        // Claimed, so a round that starts meanwhile does not pick them.
        {
            let now = self.inner.clock.now();
            let mut domains = self.domains();
            for d in &due {
                if let Some(s) = domains.get_mut(d) {
                    s.next_at = now + IN_FLIGHT;
                }
            }
        }
        let mut round = Round::default();
        let mut visits = futures_util::stream::iter(due)
            .map(|d| async move { self.visit(&d).await })
            .buffer_unordered(concurrency);
        let mut first_error = None;
        while let Some(visit) = visits.next().await {
            match visit {
                Ok(reports) => {
                    round.visited += 1;
                    if reports.iter().any(|r| r.visit.not_modified) {
                        round.not_modified += 1;
                    }
                    if reports.iter().any(|r| r.visit.unchanged) {
                        round.unchanged += 1;
                    }
                    if !reports.iter().any(|r| r.stored) {
                        round.failed += 1;
                    }
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        drop(visits);
        round.aged = self.age().await?;
        match first_error {
            Some(e) => Err(e),
            None => Ok(round),
        }
    }

    /// Runs [`Scheduler::run_due`] every `tick` until `cancel` fires.
    pub fn spawn(&self, tick: Duration, cancel: CancellationToken) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        crate::periodic::every(tick, cancel, move || {
            let this = this.clone();
            async move {
                match this.run_due().await {
                    Ok(r) if r.visited > 0 || r.aged > 0 => tracing::info!(
                        visited = r.visited,
                        not_modified = r.not_modified,
                        failed = r.failed,
                        aged = r.aged,
                        "recrawl round"
                    ),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "recrawl round failed"),
                }
            }
        })
    }

    /// Moves the agents of domains not confirmed lately to stale or
    /// dropped; returns how many domains changed state.
    async fn age(&self) -> Result<usize, StoreError> {
        let now = self.inner.clock.now();
        let policy = self.inner.policy;
        let changed: Vec<(String, DomainState)> = self
            .domains()
            .iter()
            .filter_map(|(d, s)| {
                s.confirmed_at?;
                let state = policy.state_of(s, now);
                (state != s.state).then(|| {
                    let mut s = s.clone();
                    s.state = state;
                    (d.clone(), s)
                })
            })
            .collect();
        let count = changed.len();
        for (domain, state) in changed {
            self.keep(&domain, state).await?;
        }
        Ok(count)
    }

    /// Writes `state` (memory, the `schedule` tree, and each agent's
    /// freshness).
    async fn keep(&self, domain: &str, state: DomainState) -> Result<(), StoreError> {
        let store = self.inner.issuer.store();
        let adp_id = crate::identity::AgentId::of_domain(domain).to_string();
        for agent in &state.agents {
            let adp = *agent == adp_id;
            let freshness = Freshness {
                state: state.state,
                checked_at: state.confirmed_at.unwrap_or(state.visited_at),
                seen_at: state.seen_at.filter(|_| adp),
                endpoint_ok: state.endpoint_ok.filter(|_| adp),
                next_check_at: state.next_at,
            };
            store.set_freshness(agent, freshness).await?;
        }
        let bytes = serde_json::to_vec(&state).expect("a domain state serialises");
        store.put_schedule(domain, bytes).await?;
        self.domains().insert(domain.to_owned(), state);
        Ok(())
    }

    /// The ADP document held for `domain`, for a conditional revisit.
    async fn held(&self, domain: &str) -> Result<Option<Held>, StoreError> {
        let Some(state) = self.state(domain) else {
            return Ok(None);
        };
        let id = crate::identity::AgentId::of_domain(domain).to_string();
        let Some(stored) = self.inner.issuer.store().get(&id).await? else {
            return Ok(None);
        };
        let RecordBody::Descriptor(body) = stored.body else {
            return Ok(None);
        };
        let now = self.inner.clock.now();
        let challenge_due = state.challenged_at.is_none_or(|at| {
            now.saturating_sub(at) >= self.inner.policy.challenge_interval.as_secs()
        });
        Ok(Some(Held {
            text: body.document,
            etag: state.etag,
            max_age_secs: state.max_age_secs,
            challenge: body.evidence.challenge,
            challenge_due,
        }))
    }

    fn domains(&self) -> std::sync::MutexGuard<'_, HashMap<String, DomainState>> {
        self.inner
            .domains
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> SchedulePolicy {
        SchedulePolicy {
            min_interval: Duration::from_secs(60),
            challenge_interval: Duration::from_secs(6 * 3600),
            retry_base: Duration::from_secs(300),
            retry_max: Duration::from_secs(24 * 3600),
            stale_after: Duration::from_secs(6 * 3600),
            drop_after: Duration::from_secs(72 * 3600),
            jitter: 0.1,
        }
    }

    #[test]
    fn success_comes_back_at_the_records_ttl_within_the_bounds() {
        let p = policy();
        assert_eq!(p.success_interval(300), 300);
        assert_eq!(p.success_interval(86_400), 3600, "capped at an hour");
        assert_eq!(p.success_interval(5), 60, "no sooner than min_recrawl");
    }

    #[test]
    fn failures_back_off_exponentially_up_to_the_cap_and_never_below_what_the_answer_said() {
        let p = policy();
        let backoff: Vec<u64> = (1..=10)
            .map(|n| p.failure_interval(n, None, None))
            .collect();
        assert_eq!(
            backoff,
            [300, 600, 1200, 2400, 4800, 9600, 19_200, 38_400, 76_800, 86_400]
        );
        assert_eq!(p.failure_interval(1_000, None, None), 86_400);
        assert_eq!(
            p.failure_interval(1, Some(3600), None),
            3600,
            "NXDOMAIN's SOA minimum"
        );
        assert_eq!(p.failure_interval(1, Some(60), None), 300);
        assert_eq!(p.failure_interval(2, None, Some(7200)), 7200, "Retry-After");
    }

    #[test]
    fn agents_go_stale_then_dropped_as_confirmations_age() {
        let p = policy();
        assert_eq!(p.state_at(1000, 1000), FreshState::Fresh);
        assert_eq!(p.state_at(1000, 1000 + 6 * 3600 - 1), FreshState::Fresh);
        assert_eq!(p.state_at(1000, 1000 + 6 * 3600), FreshState::Stale);
        assert_eq!(p.state_at(1000, 1000 + 72 * 3600), FreshState::Dropped);
        assert_eq!(p.state_at(1000, 10), FreshState::Fresh, "a clock set back");
    }

    #[test]
    fn jitter_spreads_over_the_next_ten_percent_never_sooner() {
        let p = policy();
        let seen: Vec<u64> = (0..2000).map(|_| p.jittered(1000)).collect();
        assert!(seen.iter().all(|s| (1000..=1100).contains(s)));
        assert!(seen.iter().any(|s| *s < 1020) && seen.iter().any(|s| *s > 1080));
        assert_eq!(p.jittered(5), 5, "nothing to spread");
    }
}
