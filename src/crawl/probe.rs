//! The liveness probe of agents registered through this node's API
//! (off by default, `crawl.probe_registered`): crawled ADP agents prove
//! they work by answering the challenge on each revisit, but a
//! registration (an AIDIP registration, an MCP server imported from an
//! MCP registry, an A2A agent registered here) is only a document, so an
//! operator may have the node ask each one now and then whether it
//! answers, the way a client of its protocol would, read-only
//! (`probe/speak.rs`): MCP `initialize` and `tools/list`, A2A `tasks/get`
//! of a task that does not exist, AIDIP the declared health URL or a
//! `HEAD` of the endpoint. An HTTP server that does not speak the
//! protocol is told apart from a dead one and from one wanting a
//! credential (`probe/classify.rs`: [`LiveState`]).
//!
//! At most once per agent per `crawl.probe_interval`, at most `per_round`
//! agents per round, `crawl.probe_concurrency` at once, each probe within
//! `crawl.probe_timeout`, under the
//! crawler's address policy, allowed ports and per-host and per-address
//! limits; the result goes to the agent's [`Freshness`] (`liveness`, and
//! `endpoint_ok` and `seen_at` as before), which results show and
//! `alive_within` filters by. ADP agents, and agents of the other formats
//! a crawl found (the recrawl scheduler keeps their freshness), are not
//! probed. With an issuer ([`Prober::publishing`]), each result of a
//! public agent is also signed with the node key as a `liveness` record
//! and gossiped ([`Issuer::liveness`]), so that other nodes show who
//! checked it when; a private or unlisted agent's never leaves the node,
//! and a publication that fails never holds the probe up.

mod classify;
mod speak;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::clock::Clock;
use super::{CrawlError, Crawler};
use crate::descriptor::DocumentFormat;
use crate::issuer::Issuer;
use crate::metrics::Metrics;
use crate::store::{FreshState, Freshness, LiveState, Liveness, Store, StoreError};
use classify::Target;

/// Agents read per store hop while looking for due ones.
const PAGE: usize = 256;

/// Store hops per round at most: a round reads at most 2,048
/// registrations, due or not, so a large registry is swept over several
/// rounds rather than read whole every few seconds.
const PAGES_PER_ROUND: usize = 8;

/// The whole probe of one agent, every request of it, by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Probes run at once by default (`crawl.probe_concurrency`).
pub const DEFAULT_CONCURRENCY: usize = 16;

/// A registered agent as a round reads it: its id, how to probe it
/// (`None`: it is not probed), and its freshness; `None` when not due.
type Registered = (String, Option<Target>, Option<Freshness>);

/// What one [`Prober::round`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeRound {
    /// Agents asked (whatever the answer, unreachable and timed out
    /// included).
    pub probed: usize,
    /// Of those, agents that answered in their protocol (`alive`) or
    /// asked for a credential (`auth_required`).
    pub answered: usize,
    /// Agents not asked: no endpoint, a format not probed, a URL or an
    /// address the policy refuses, a host that asked to slow down.
    pub skipped: usize,
    /// The probes by result, in [`LiveState::ALL`] order.
    pub states: [usize; 5],
}

impl ProbeRound {
    /// How many probes found `state`.
    pub fn count(&self, state: LiveState) -> usize {
        LiveState::ALL
            .iter()
            .position(|s| *s == state)
            .map_or(0, |i| self.states[i])
    }
}

/// Probes registered agents. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Prober {
    crawler: Crawler,
    store: Store,
    clock: Arc<dyn Clock>,
    interval: Duration,
    per_round: usize,
    timeout: Duration,
    concurrency: usize,
    metrics: Arc<OnceLock<Metrics>>,
    /// Signs and gossips the results of public agents, when set.
    issuer: Option<Issuer>,
    /// Where the next round goes on looking (the last id looked at).
    cursor: Arc<Mutex<Option<String>>>,
}

impl Prober {
    /// A prober asking each registered agent once per `interval`, at most
    /// `per_round` per [`Prober::round`], each within [`DEFAULT_TIMEOUT`].
    pub fn new(
        crawler: Crawler,
        store: Store,
        clock: Arc<dyn Clock>,
        interval: Duration,
        per_round: usize,
    ) -> Self {
        Self {
            crawler,
            store,
            clock,
            interval,
            per_round: per_round.max(1),
            timeout: DEFAULT_TIMEOUT,
            concurrency: DEFAULT_CONCURRENCY,
            metrics: Arc::default(),
            issuer: None,
            cursor: Arc::default(),
        }
    }

    /// The same prober, running up to `concurrency` probes at once
    /// (`crawl.probe_concurrency`; the crawler's per-host and
    /// per-address limits still hold each host).
    #[must_use]
    pub fn with_concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// The same prober, signing each result of a public agent with
    /// `issuer`'s node key and gossiping it ([`Issuer::liveness`]).
    #[must_use]
    pub fn publishing(mut self, issuer: Issuer) -> Self {
        self.issuer = Some(issuer);
        self
    }

    /// The same prober, each probe (all its requests) within `timeout`
    /// (`crawl.probe_timeout`).
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Counts each probe's result in `metrics` (`agentmesh_crawl_probes_total`).
    pub fn count_in(&self, metrics: Metrics) {
        let _ = self.metrics.set(metrics);
    }

    /// Probes the registered agents that are due, up to the round's
    /// budget, going on from where the last round stopped.
    ///
    /// # Errors
    /// [`StoreError`] when the registrations or freshness cannot be read
    /// or written.
    pub async fn round(&self) -> Result<ProbeRound, StoreError> {
        let now = self.clock.now();
        let mut out = ProbeRound::default();
        let mut after = self.cursor.lock().expect("cursor lock").clone();
        let mut round = Vec::new();
        'pages: for _ in 0..PAGES_PER_ROUND {
            let from = after.clone();
            let page = self
                .store
                .run_blocking(
                    move |s| -> Result<Vec<(String, Option<Registered>)>, StoreError> {
                        let mut page = Vec::new();
                        for id in s.local_ids(from.as_deref(), PAGE)? {
                            let freshness = s.freshness(&id)?;
                            if freshness.as_ref().is_some_and(|f| f.next_check_at > now) {
                                page.push((id, None));
                                continue;
                            }
                            let target = match s.compact(&id)? {
                                Some(c) => {
                                    let format = c.source_format();
                                    // Only MCP servers, AIDIP documents and
                                    // A2A cards say more than the endpoint.
                                    let document = match format {
                                        DocumentFormat::McpRegistry
                                        | DocumentFormat::Aidip
                                        | DocumentFormat::A2a => s
                                            .document(&id)?
                                            .and_then(|d| serde_json::from_str(&d).ok())
                                            .unwrap_or(Value::Null),
                                        _ => Value::Null,
                                    };
                                    classify::target(format, c.endpoint.as_deref(), &document)
                                }
                                None => None,
                            };
                            page.push((id.clone(), Some((id, target, freshness))));
                        }
                        Ok(page)
                    },
                )
                .await??;
            if page.is_empty() {
                // The end: the next round starts from the first again.
                after = None;
                break;
            }
            for (id, due) in page {
                after = Some(id);
                let Some(due) = due else {
                    continue;
                };
                round.push(due);
                if round.len() >= self.per_round {
                    break 'pages;
                }
            }
        }
        *self.cursor.lock().expect("cursor lock") = after;
        // At most the crawler's per-host concurrency of probes of one host
        // start at once, so that a probe's timeout never runs while it
        // waits for its host's turn (it would be counted a `timeout`).
        let per_host = self.crawler.options().politeness.per_host_concurrency;
        let mut gates: HashMap<String, Arc<Semaphore>> = HashMap::new();
        let mut probes = futures_util::stream::iter(round)
            .map(|(id, target, held)| {
                let gate = target.as_ref().map(|t| {
                    let host = url::Url::parse(&t.url)
                        .ok()
                        .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
                        .unwrap_or_default();
                    gates
                        .entry(host)
                        .or_insert_with(|| Arc::new(Semaphore::new(per_host.max(1))))
                        .clone()
                });
                async move {
                    let _turn = match gate {
                        Some(gate) => Some(gate.acquire_owned().await.expect("never closed")),
                        None => None,
                    };
                    self.probe(&id, target, held, now).await
                }
            })
            .buffer_unordered(self.concurrency);
        while let Some(probed) = probes.next().await {
            match probed? {
                None => out.skipped += 1,
                Some(state) => {
                    out.probed += 1;
                    out.answered += usize::from(state.is_up());
                    if let Some(i) = LiveState::ALL.iter().position(|s| *s == state) {
                        out.states[i] += 1;
                    }
                }
            }
        }
        Ok(out)
    }

    /// Probes one agent and keeps what it found: its state, or `None`
    /// when it was not asked.
    async fn probe(
        &self,
        id: &str,
        target: Option<Target>,
        held: Option<Freshness>,
        now: u64,
    ) -> Result<Option<LiveState>, StoreError> {
        let Some(target) = target else {
            return Ok(None);
        };
        let Some((state, rtt)) = self.ask(id, &target).await else {
            return Ok(None);
        };
        if let Some(m) = self.metrics.get() {
            m.probed(state.as_str());
        }
        tracing::debug!(agent = %id, state = state.as_str(), rtt_ms = rtt.as_millis() as u64, "probed");
        let up = state.is_up();
        let next = backoff(self.interval, held.as_ref(), up);
        let liveness = Liveness {
            state,
            checked_at: now,
            rtt_ms: u64::try_from(rtt.as_millis()).unwrap_or(u64::MAX),
            protocol: target.protocol,
        };
        let freshness = Freshness {
            state: FreshState::Fresh,
            checked_at: now,
            seen_at: if up {
                Some(now)
            } else {
                held.and_then(|f| f.seen_at)
            },
            endpoint_ok: Some(up),
            next_check_at: now + next,
            liveness: Some(liveness),
        };
        self.store.set_freshness(id, freshness).await?;
        if let Some(issuer) = &self.issuer {
            // The result is kept whatever becomes of its publication.
            if let Err(e) = issuer.liveness(id, liveness).await {
                tracing::warn!(agent = %id, error = %e, "publishing a liveness result failed");
            }
        }
        Ok(Some(state))
    }

    /// The state `target` is in and the round trip, or `None` when it
    /// could not be asked (nothing is recorded then).
    async fn ask(&self, id: &str, target: &Target) -> Option<(LiveState, Duration)> {
        ask(&self.crawler, id, target, self.timeout).await
    }

    /// Runs [`Prober::round`] every `tick` until `cancel` fires.
    pub fn spawn(&self, tick: Duration, cancel: CancellationToken) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        crate::periodic::every(tick, cancel, move || {
            let this = this.clone();
            async move {
                match this.round().await {
                    Ok(r) if r.probed > 0 => tracing::debug!(
                        probed = r.probed,
                        answered = r.answered,
                        "probed registered agents"
                    ),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "probing registered agents failed"),
                }
            }
        })
    }
}

/// The state `target` is in and the round trip, the whole probe within
/// `timeout`, or `None` when it could not be asked.
async fn ask(
    crawler: &Crawler,
    id: &str,
    target: &Target,
    timeout: Duration,
) -> Option<(LiveState, Duration)> {
    let started = Instant::now();
    let spoken = tokio::time::timeout(timeout, speak::speak(crawler, target, timeout)).await;
    match spoken {
        Err(_) => Some((LiveState::Timeout, started.elapsed())),
        Ok(Ok(heard)) => Some(heard),
        Ok(Err(e)) => match classify::failure(&e) {
            Some(state) => Some((state, started.elapsed())),
            None => {
                tracing::debug!(agent = %id, error = %e, "agent not probed");
                None
            }
        },
    }
}

/// Asks an agent a crawl found in another format than ADP (an A2A agent
/// whose card a crawled domain serves) what the probe asks a registered
/// one, within `timeout`: its liveness, or `None` when its format is not
/// probed or it could not be asked. The recrawl scheduler calls it on
/// its visits (`crawl.probe_crawled`).
pub(super) async fn probe_found(
    crawler: &Crawler,
    store: &Store,
    id: &str,
    timeout: Duration,
) -> Option<Liveness> {
    let held = id.to_owned();
    let target = store
        .run_blocking(move |s| -> Result<Option<Target>, StoreError> {
            let Some(c) = s.compact(&held)? else {
                return Ok(None);
            };
            let document = s
                .document(&held)?
                .and_then(|d| serde_json::from_str(&d).ok())
                .unwrap_or(Value::Null);
            Ok(classify::target(
                c.source_format(),
                c.endpoint.as_deref(),
                &document,
            ))
        })
        .await
        .ok()?
        .ok()??;
    let (state, rtt) = ask(crawler, id, &target, timeout).await?;
    Some(Liveness {
        state,
        checked_at: crate::record::unix_now(),
        rtt_ms: u64::try_from(rtt.as_millis()).unwrap_or(u64::MAX),
        protocol: target.protocol,
    })
}

/// Seconds until an agent is probed again: `interval` after an answer;
/// after a probe that found it down (unreachable, timed out, not its
/// protocol), twice the wait before when the probe before found it down
/// too, at most [`MAX_BACKOFF`] intervals, so dead endpoints cost less
/// and less until one answers.
fn backoff(interval: Duration, held: Option<&Freshness>, up: bool) -> u64 {
    let interval = interval.as_secs().max(1);
    let was_down = held
        .and_then(|f| f.liveness)
        .is_some_and(|l| !l.state.is_up());
    if up || !was_down {
        return interval;
    }
    let before = held.map_or(interval, |f| f.next_check_at.saturating_sub(f.checked_at));
    before
        .saturating_mul(2)
        .clamp(interval, interval.saturating_mul(MAX_BACKOFF))
}

/// The longest wait between probes of an agent found down, in intervals.
pub const MAX_BACKOFF: u64 = 8;

/// The liveness a failed ADP challenge shows (the crawler's challenge is
/// an ADP agent's probe, on its visits): no connection, `unreachable`; no
/// answer in time, `timeout`; an answer that is not the handshake or does
/// not prove the key, or a connection closed unanswered, `not_protocol`;
/// `None` when the challenge was not tried (no chat endpoint, an address
/// or port the policy refuses).
pub(super) fn challenge_state(e: &CrawlError) -> Option<LiveState> {
    match e {
        CrawlError::ChallengeNoAnswer { after } if !after.is_zero() => Some(LiveState::Timeout),
        CrawlError::ChallengeNoAnswer { .. }
        | CrawlError::ChallengeBadSignature
        | CrawlError::ChallengeWrongNonce
        | CrawlError::ChallengeFailed { .. } => Some(LiveState::NotProtocol),
        other => classify::failure(other),
    }
}

#[cfg(test)]
mod tests;
