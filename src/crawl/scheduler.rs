//! Revisiting what was crawled (ADP 10, REQ-DISC-6).
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
//! The schedule is bounded (`crawl.max_scheduled_domains`), so what the
//! mesh or a crawl request names cannot grow it without end:
//! - a domain whose visits failed `crawl.evict_after_failures` times in a
//!   row leaves it (its agents are marked dropped: nothing confirms them);
//! - when it is full, a new domain takes the place of the held domain with
//!   the most failures in a row (the oldest confirmation breaks ties),
//!   provided that one failed at least once and at least as often as the
//!   new one; otherwise the new domain is not scheduled. A schedule full
//!   of domains that answer is never churned by new names.
//!
//! Either way the domain is only out of the schedule: a later crawl of it
//! schedules it again. Each departure is counted ([`ScheduleCounts`],
//! `agentmesh_crawl_schedule_left_total`). A departed domain's key leaves
//! the store's `schedule` tree (an empty state removes it), so the tree
//! stays as bounded as the schedule; [`Scheduler::load`] also skips an
//! empty value, which stores written before that may hold.
//!
//! Time comes from a [`Clock`], so tests drive days of schedule with a
//! [`ManualClock`] and no waiting.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::{CrawlReport, Crawler, Held};
use crate::descriptor::DocumentFormat;
use crate::issuer::Issuer;
use crate::record::RecordBody;
use crate::store::{FreshState, Freshness, StoreError};

mod policy;

pub use super::clock::{Clock, ManualClock, SystemClock};
pub use policy::{DomainState, SchedulePolicy, MAX_INTERVAL};

/// How long a visit in flight keeps its domain from being picked again.
const IN_FLIGHT: u64 = 600;

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

/// Why a domain left the schedule (or never entered it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeftBecause {
    /// It failed `crawl.evict_after_failures` visits in a row.
    Failures,
    /// The schedule was full and a new domain took its place.
    Evicted,
    /// The schedule was full of domains that fail less (a new domain,
    /// not scheduled).
    Refused,
}

impl LeftBecause {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Failures => "failures",
            Self::Evicted => "evicted",
            Self::Refused => "refused",
        }
    }
}

/// What [`Scheduler::counts`] answers (`GET /health`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ScheduleCounts {
    /// Domains scheduled.
    pub domains: usize,
    /// Most domains that may be scheduled (`crawl.max_scheduled_domains`).
    pub capacity: usize,
    /// Since start: domains that left after failing
    /// `crawl.evict_after_failures` visits in a row.
    pub left_failing: u64,
    /// Since start: domains evicted from a full schedule for a new one.
    pub evicted: u64,
    /// Since start: new domains not scheduled, the schedule being full of
    /// domains that fail less.
    pub refused: u64,
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
    /// Departures since start, by [`LeftBecause`]: failures, evicted,
    /// refused.
    left: [AtomicU64; 3],
    /// Where revisits are counted (`/metrics`), once set.
    metrics: std::sync::OnceLock<crate::metrics::Metrics>,
    /// When set (`crawl.probe_crawled`), the agents of other formats a
    /// visit stores are probed on it, each within this timeout.
    probe_found: std::sync::OnceLock<Duration>,
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
            if bytes.is_empty() {
                // A domain that left the schedule.
                continue;
            }
            let state: DomainState =
                serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
                    key: domain.clone(),
                    reason: format!("schedule: {e}"),
                })?;
            domains.insert(domain, state);
        }
        // A limit lowered since the last run: the domains that fail most
        // go first, and the ones that do not fail stay.
        let max = policy.max_domains.max(1);
        let mut dropped = Vec::new();
        if domains.len() > max {
            let mut ranked: Vec<(&String, &DomainState)> = domains.iter().collect();
            ranked.sort_by_key(|(d, s)| eviction_rank(s, d));
            dropped = ranked
                .iter()
                .rev()
                .take(domains.len() - max)
                .map(|(d, _)| (*d).clone())
                .collect();
        }
        for d in &dropped {
            domains.remove(d);
            issuer.store().put_schedule(d, Vec::new()).await?;
        }
        Ok(Self {
            inner: Arc::new(Inner {
                crawler,
                issuer,
                policy,
                clock,
                domains: Mutex::new(domains),
                left: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
                metrics: std::sync::OnceLock::new(),
                probe_found: std::sync::OnceLock::new(),
            }),
        })
    }

    /// Counts revisits in `metrics` (crawl outcomes by reason, as the
    /// queue's crawls are); a second call keeps the first.
    pub fn count_in(&self, metrics: crate::metrics::Metrics) {
        let _ = self.inner.metrics.set(metrics);
    }

    /// Probes, on each visit, the agents of other formats than ADP the
    /// visit stores (an A2A agent whose card the domain serves) as the
    /// liveness probe asks a registered one, each within `timeout`
    /// (`crawl.probe_crawled`).
    pub fn probe_found(&self, timeout: Duration) {
        let _ = self.inner.probe_found.set(timeout);
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
        let left = |i: usize| self.inner.left[i].load(Ordering::Relaxed);
        ScheduleCounts {
            domains: domains.len(),
            capacity: self.inner.policy.max_domains,
            left_failing: left(0),
            evicted: left(1),
            refused: left(2),
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
        let held = self.state(domain);
        let is_new = held.is_none();
        // The ADP agent's challenge in this visit, when it told its liveness.
        let mut challenged = None;
        let mut state = held.unwrap_or_else(|| DomainState::unvisited(now));
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
        let mut probed = Vec::new();
        if let Some(timeout) = self.inner.probe_found.get() {
            let store = self.inner.issuer.store();
            for r in stored
                .iter()
                .filter(|r| r.source_format != DocumentFormat::Adp)
            {
                let crawler = &self.inner.crawler;
                if let Some(found) =
                    super::probe::probe_found(crawler, store, &r.agent_id, *timeout).await
                {
                    state.probed.insert(r.agent_id.clone(), found);
                    probed.push((r.agent_id.clone(), found));
                }
            }
        }
        // A challenge tells whether or not the visit stored the agent (a
        // held one stays, and its liveness with it).
        if let Some(adp) = adp {
            if let Some(found) = adp.visit.liveness {
                state.liveness = Some(found);
                challenged = Some((adp.agent_id.clone(), found));
            }
        }
        policy.reschedule(&mut state, reports, &stored, now);
        state.state = policy.state_of(&state, now);
        if state.failures >= policy.evict_after_failures.max(1) {
            if is_new {
                // Never scheduled (`crawl.evict_after_failures` = 1).
                self.count_left(LeftBecause::Failures);
            } else {
                self.leave(domain, state, LeftBecause::Failures).await?;
            }
            return Ok(());
        }
        if is_new {
            match self.admit(domain, &state) {
                Admission::Admitted => {}
                Admission::Refused => {
                    self.count_left(LeftBecause::Refused);
                    tracing::debug!(domain, "the recrawl schedule is full: not scheduled");
                    return Ok(());
                }
                Admission::Evicted(victim, victim_state) => {
                    self.leave(&victim, *victim_state, LeftBecause::Evicted)
                        .await?;
                }
            }
        }
        let agents = &state.agents;
        state.probed.retain(|id, _| agents.contains(id));
        self.keep(domain, state).await?;
        for (agent, found) in challenged.into_iter().chain(probed) {
            // Signed and gossiped as the probe's results are; kept here
            // whatever becomes of its publication.
            if let Err(e) = self.inner.issuer.liveness(&agent, found).await {
                tracing::warn!(agent = %agent, error = %e, "publishing a liveness result failed");
            }
        }
        Ok(())
    }

    /// Makes room for a new `domain` (state `state`), under the lock, so
    /// concurrent visits never push the schedule past its limit: it is
    /// taken in at once, or a victim is taken out for it, or it is
    /// refused.
    fn admit(&self, domain: &str, state: &DomainState) -> Admission {
        let max = self.inner.policy.max_domains.max(1);
        let mut domains = self.domains();
        if domains.contains_key(domain) || domains.len() < max {
            domains.insert(domain.to_owned(), state.clone());
            return Admission::Admitted;
        }
        let victim = domains
            .iter()
            .max_by_key(|(d, s)| eviction_rank(s, d))
            .filter(|(_, s)| s.failures >= 1 && s.failures >= state.failures)
            .map(|(d, _)| d.clone());
        match victim {
            Some(victim) => {
                let victim_state = domains
                    .remove(&victim)
                    .expect("the victim was just found in the map");
                domains.insert(domain.to_owned(), state.clone());
                Admission::Evicted(victim, Box::new(victim_state))
            }
            None => Admission::Refused,
        }
    }

    /// Takes `domain` out of the schedule: its agents are marked dropped
    /// (nothing will confirm them), its key leaves the `schedule` tree,
    /// and the departure is counted.
    async fn leave(
        &self,
        domain: &str,
        mut state: DomainState,
        why: LeftBecause,
    ) -> Result<(), StoreError> {
        self.domains().remove(domain);
        let store = self.inner.issuer.store();
        let adp_id = crate::identity::AgentId::of_domain(domain).to_string();
        state.state = FreshState::Dropped;
        for agent in &state.agents {
            let adp = *agent == adp_id;
            let freshness = Freshness {
                state: state.state,
                checked_at: state.confirmed_at.unwrap_or(state.visited_at),
                seen_at: state.seen_at.filter(|_| adp),
                endpoint_ok: state.endpoint_ok.filter(|_| adp),
                next_check_at: 0,
                liveness: state.liveness_of(agent, adp),
            };
            store.set_freshness(agent, freshness).await?;
        }
        store.put_schedule(domain, Vec::new()).await?;
        self.count_left(why);
        tracing::info!(
            domain,
            failures = state.failures,
            cause = why.as_str(),
            "left the recrawl schedule"
        );
        Ok(())
    }

    fn count_left(&self, why: LeftBecause) {
        let i = match why {
            LeftBecause::Failures => 0,
            LeftBecause::Evicted => 1,
            LeftBecause::Refused => 2,
        };
        self.inner.left[i].fetch_add(1, Ordering::Relaxed);
        if let Some(m) = self.inner.metrics.get() {
            m.schedule_left(why.as_str());
        }
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
                liveness: state.liveness_of(agent, adp),
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

/// What [`Scheduler::admit`] decided about a new domain.
enum Admission {
    /// There was room.
    Admitted,
    /// This domain (with its state) left to make room.
    Evicted(String, Box<DomainState>),
    /// No room, and nothing that may be evicted for it.
    Refused,
}

/// How readily a domain leaves a full schedule: the most failures in a
/// row first, then the oldest confirmation (never confirmed: oldest of
/// all), then the name, so the choice does not depend on the map's order.
fn eviction_rank<'a>(s: &DomainState, domain: &'a str) -> (u32, std::cmp::Reverse<u64>, &'a str) {
    (
        s.failures,
        std::cmp::Reverse(s.confirmed_at.unwrap_or(0)),
        domain,
    )
}

#[cfg(test)]
mod tests;
