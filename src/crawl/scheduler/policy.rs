//! The scheduler's arithmetic, with no I/O: when a domain is visited next
//! after a success or a failure, how fresh its agents are, and the
//! [`DomainState`] it keeps of each domain.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::CrawlConfig;
use crate::crawl::report::CrawlReport;
use crate::descriptor::DocumentFormat;
use crate::store::FreshState;

/// The longest revisit interval on success (ADP 10.1's TTL cap).
pub const MAX_INTERVAL: Duration = Duration::from_secs(3600);
/// Most agent ids remembered per domain.
pub(in crate::crawl) const MAX_AGENTS_PER_DOMAIN: usize = 64;

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
    /// Most domains scheduled (at least 1).
    pub max_domains: usize,
    /// Failed visits in a row after which a domain leaves the schedule
    /// (at least 1).
    pub evict_after_failures: u32,
}

impl DomainState {
    /// The liveness shown for `agent`: the challenge's for the domain's
    /// ADP agent (`adp`), the probe's for the others.
    pub fn liveness_of(&self, agent: &str, adp: bool) -> Option<crate::store::Liveness> {
        if adp {
            self.liveness
        } else {
            self.probed.get(agent).copied()
        }
    }

    /// The state of a domain never visited, as of `now`.
    pub(in crate::crawl) fn unvisited(now: u64) -> Self {
        Self {
            next_at: now,
            visited_at: now,
            confirmed_at: None,
            seen_at: None,
            endpoint_ok: None,
            challenged_at: None,
            liveness: None,
            probed: std::collections::BTreeMap::new(),
            failures: 0,
            etag: None,
            max_age_secs: None,
            last_reason: None,
            agents: Vec::new(),
            state: FreshState::Fresh,
        }
    }
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
            max_domains: c.max_scheduled_domains,
            evict_after_failures: c.evict_after_failures,
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

    /// The state of a domain's agents at `now`: by the age of the last
    /// confirmation, and at least stale while the last visit found its
    /// DNS forged (`dnssec_bogus`): a held record proven under DNSSEC is
    /// not presented as fresh once the zone stops validating.
    pub fn state_of(&self, s: &DomainState, now: u64) -> FreshState {
        let aged = s
            .confirmed_at
            .map_or(FreshState::Fresh, |at| self.state_at(at, now));
        if s.last_reason.as_deref() == Some(crate::trust::Reason::DnssecBogus.as_str()) {
            aged.max(FreshState::Stale)
        } else {
            aged
        }
    }

    /// `secs` plus up to `jitter` of it more: never sooner, so a revisit
    /// never finds the answers it came back for still cached with a few
    /// seconds left (which would bring it back at once).
    pub(super) fn jittered(&self, secs: u64) -> u64 {
        let spread = (secs as f64 * self.jitter.clamp(0.0, 0.5)) as u64;
        if spread == 0 {
            return secs;
        }
        secs + rand::random::<u64>() % (spread + 1)
    }

    /// When a visit that `reports` tell of (`stored`: the agents it stored)
    /// schedules the next one: after a failure, the backoff (the
    /// NXDOMAIN's negative TTL and any `Retry-After` respected); after a
    /// success, the shortest revisit an agent asked for, the domain's agents
    /// noted.
    pub(in crate::crawl) fn reschedule(
        &self,
        state: &mut DomainState,
        reports: &[CrawlReport],
        stored: &[&CrawlReport],
        now: u64,
    ) {
        if stored.is_empty() {
            state.failures = state.failures.saturating_add(1);
            state.last_reason = reports
                .iter()
                .find_map(|r| r.reasons.first())
                .map(|r| r.as_str().to_owned());
            let adp = reports
                .iter()
                .find(|r| r.source_format == DocumentFormat::Adp);
            let visit = adp.map(|r| &r.visit);
            let wait = self.failure_interval(
                state.failures,
                visit.and_then(|v| v.negative_ttl_secs),
                reports
                    .iter()
                    .filter_map(|r| r.visit.retry_after_secs)
                    .max(),
            );
            state.next_at = now + self.jittered(wait);
        } else {
            state.failures = 0;
            state.last_reason = None;
            state.confirmed_at = Some(now);
            let after = stored
                .iter()
                .map(|r| r.recrawl_after_secs)
                .min()
                .unwrap_or(MAX_INTERVAL.as_secs());
            state.next_at = now + self.jittered(self.success_interval(after));
            for r in stored {
                if !state.agents.contains(&r.agent_id) && state.agents.len() < MAX_AGENTS_PER_DOMAIN
                {
                    state.agents.push(r.agent_id.clone());
                }
            }
        }
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
    /// What the latest challenge that told showed of the ADP agent's
    /// liveness (its `liveness`, protocol `adp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness: Option<crate::store::Liveness>,
    /// What the latest visit's probe found of the domain's agents of
    /// other formats (`crawl.probe_crawled`), by agent id; only agents
    /// the domain still holds.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub probed: std::collections::BTreeMap<String, crate::store::Liveness>,
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
