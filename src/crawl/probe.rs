//! The liveness probe of agents registered through this node's API
//! (off by default, `crawl.probe_registered`): crawled
//! agents prove they work by answering the challenge on each revisit, but
//! a registration is only a document, so an operator may have the node
//! ask each registered agent's `endpoint` now and then whether it
//! answers. A `HEAD`, at most once per agent per `crawl.probe_interval`,
//! at most `per_round` agents per round, under the crawler's address
//! policy and per-host limits; the answer goes to the agent's
//! [`Freshness`] (`endpoint_ok`, `seen_at`), which results show.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::scheduler::Clock;
use super::Crawler;
use crate::store::{FreshState, Freshness, Store, StoreError};

/// Agents read per store hop while looking for due ones.
const PAGE: usize = 256;

/// Store hops per round at most: a round reads at most 2,048
/// registrations, due or not, so a large registry is swept over several
/// rounds rather than read whole every few seconds.
const PAGES_PER_ROUND: usize = 8;

/// A registered agent as a round reads it: id, endpoint, freshness.
type Registered = (String, Option<String>, Option<Freshness>);

/// What one [`Prober::round`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeRound {
    /// Endpoints asked.
    pub probed: usize,
    /// Of those, endpoints that answered.
    pub answered: usize,
    /// Agents whose endpoint could not be asked (no endpoint, a URL the
    /// policy refuses).
    pub skipped: usize,
}

/// Probes registered agents' endpoints. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Prober {
    crawler: Crawler,
    store: Store,
    clock: Arc<dyn Clock>,
    interval: Duration,
    per_round: usize,
    /// Where the next round goes on looking (the last id looked at).
    cursor: Arc<Mutex<Option<String>>>,
}

impl Prober {
    /// A prober asking each registered agent once per `interval`, at most
    /// `per_round` per [`Prober::round`].
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
            cursor: Arc::default(),
        }
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
        'pages: for _ in 0..PAGES_PER_ROUND {
            let from = after.clone();
            let page = self
                .store
                .run_blocking(move |s| -> Result<Vec<Registered>, StoreError> {
                    let mut page = Vec::new();
                    for id in s.local_ids(from.as_deref(), PAGE)? {
                        let endpoint = s.compact(&id)?.and_then(|c| c.endpoint);
                        let freshness = s.freshness(&id)?;
                        page.push((id, endpoint, freshness));
                    }
                    Ok(page)
                })
                .await??;
            if page.is_empty() {
                // The end: the next round starts from the first again.
                after = None;
                break;
            }
            for (id, endpoint, held) in page {
                after = Some(id.clone());
                if held.as_ref().is_some_and(|f| f.next_check_at > now) {
                    continue;
                }
                self.probe(&id, endpoint.as_deref(), held, now, &mut out)
                    .await?;
                if out.probed + out.skipped >= self.per_round {
                    break 'pages;
                }
            }
        }
        *self.cursor.lock().expect("cursor lock") = after;
        Ok(out)
    }

    async fn probe(
        &self,
        id: &str,
        endpoint: Option<&str>,
        held: Option<Freshness>,
        now: u64,
        out: &mut ProbeRound,
    ) -> Result<(), StoreError> {
        let Some(endpoint) = endpoint else {
            out.skipped += 1;
            return Ok(());
        };
        let ok = match self.crawler.probe(endpoint).await {
            Ok(ok) => ok,
            Err(e) => {
                tracing::debug!(agent = %id, error = %e, "endpoint not probed");
                out.skipped += 1;
                return Ok(());
            }
        };
        out.probed += 1;
        out.answered += usize::from(ok);
        let freshness = Freshness {
            state: FreshState::Fresh,
            checked_at: now,
            seen_at: if ok {
                Some(now)
            } else {
                held.and_then(|f| f.seen_at)
            },
            endpoint_ok: Some(ok),
            next_check_at: now + self.interval.as_secs().max(1),
        };
        self.store.set_freshness(id, freshness).await
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
                        "probed registered endpoints"
                    ),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "probing registered endpoints failed"),
                }
            }
        })
    }
}
