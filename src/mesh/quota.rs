//! Fair shares of the handler tasks that judge what peers send.
//!
//! Every inbound item a handler must look at (a search request, a gossip
//! message, a DHT put, a record a lookup found) runs as a bounded task.
//! One pool for all of them let one peer that opens 64 search streams
//! take every permit, and gossip from everyone else was then dropped as
//! `overloaded`. So the handler tasks are split into three pools of their
//! own, searches, gossip and the DHT (puts and the records lookups find),
//! so that no kind of work can starve another; and inside each pool one
//! peer holds a bounded share (`peer_quota`), so that no peer can starve
//! the others: `max_inflight_per_peer` of the search and DHT pools, and
//! half of the gossip pool, since an honest relay forwards everyone's
//! records in bursts (a newcomer's backlog arrives 16 at a time,
//! `mesh/unsent.rs`). The same shape as libp2p's per-peer
//! request-response limits and go-libp2p's resource manager scopes: a
//! budget per kind of work, and one per peer inside it.
//!
//! In-flight shares bound what a peer costs at one moment; a peer that
//! sends as fast as its permits come back would still hold its share for
//! ever. So searches and DHT work also have a rate per peer over time, a
//! token bucket (`peer_rate`): [`Rates::SEARCH`] and [`Rates::DHT`] by
//! default. Gossip has none: a relay forwards everyone's records, and a
//! record gossipsub was told to ignore is not sent again; its in-flight
//! share and gossipsub's scoring of refused records bound it instead.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use libp2p::PeerId;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The kinds of inbound work, each with a pool of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Work {
    /// A search request from a peer.
    Search,
    /// A gossip message.
    Gossip,
    /// A DHT put, or a record a DHT lookup found.
    Dht,
}

/// Why no permit was given (the `overloaded` and `peer_quota` reasons of
/// the mesh's counters).
pub(super) const OVERLOADED: &str = "overloaded";
/// The peer holds its share of the pool.
pub(super) const PEER_QUOTA: &str = "peer_quota";
/// The peer sent more than its rate over time.
pub(super) const PEER_RATE: &str = "peer_rate";

/// A rate per peer: `burst` items at once, refilled at `per_second`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Items a peer may send at once after a quiet spell.
    pub burst: f64,
    /// Items per second it may send for as long as it likes.
    pub per_second: f64,
}

/// The rates of the kinds of work that have one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    /// Search requests from one peer.
    pub search: Rate,
    /// DHT puts, and records its lookups found, from one peer.
    pub dht: Rate,
}

impl Rates {
    /// Searches: a node asks one peer once per search it runs, so 32 a
    /// second is a node running hundreds of searches a second across its
    /// peers; 128 at once covers a burst of its users.
    pub const SEARCH: Rate = Rate {
        burst: 128.0,
        per_second: 32.0,
    };
    /// DHT work: a republishing node puts each of its records to the 20
    /// peers closest to its key, so one peer sees a share of them.
    pub const DHT: Rate = Rate {
        burst: 512.0,
        per_second: 128.0,
    };
}

impl Default for Rates {
    fn default() -> Self {
        Self {
            search: Self::SEARCH,
            dht: Self::DHT,
        }
    }
}

/// One peer's tokens for one kind of work.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: std::time::Instant,
}

/// Buckets kept before the full ones (peers quiet long enough to have
/// their whole burst back) are dropped.
const MAX_BUCKETS: usize = 4096;

#[derive(Debug)]
struct Inner {
    search: Arc<Semaphore>,
    gossip: Arc<Semaphore>,
    dht: Arc<Semaphore>,
    per_peer: usize,
    gossip_per_peer: usize,
    in_flight: Mutex<HashMap<(PeerId, Work), usize>>,
    rates: Rates,
    buckets: Mutex<HashMap<(PeerId, Work), Bucket>>,
}

/// The pools; cheap to clone.
#[derive(Debug, Clone)]
pub(super) struct Quotas {
    inner: Arc<Inner>,
}

/// One handler task's permit; gives its place back when dropped.
#[derive(Debug)]
pub(super) struct Permit {
    _pool: OwnedSemaphorePermit,
    key: (PeerId, Work),
    inner: Arc<Inner>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut in_flight = self
            .inner
            .in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = in_flight.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                in_flight.remove(&self.key);
            }
        }
    }
}

impl Quotas {
    /// `total` handler tasks split into the three pools (searches and
    /// gossip 3/8 each, the DHT the rest, each at least one), at most
    /// `per_peer` of the search and DHT pools and half the gossip pool
    /// held by one peer.
    #[cfg(test)]
    pub(super) fn new(total: usize, per_peer: usize) -> Self {
        Self::with_rates(total, per_peer, Rates::default())
    }

    /// As [`Quotas::new`], with `rates` per peer over time.
    pub(super) fn with_rates(total: usize, per_peer: usize, rates: Rates) -> Self {
        let share = (total * 3 / 8).max(1);
        let dht = total.saturating_sub(2 * share).max(1);
        Self {
            inner: Arc::new(Inner {
                search: Arc::new(Semaphore::new(share)),
                gossip: Arc::new(Semaphore::new(share)),
                dht: Arc::new(Semaphore::new(dht)),
                per_peer: per_peer.max(1),
                gossip_per_peer: (share / 2).max(1),
                in_flight: Mutex::new(HashMap::new()),
                rates,
                buckets: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// A permit for `work` from `peer`, or why there is none.
    pub(super) fn acquire(&self, work: Work, peer: PeerId) -> Result<Permit, &'static str> {
        let key = (peer, work);
        let mut in_flight = self
            .inner
            .in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let held = in_flight.get(&key).copied().unwrap_or(0);
        let cap = match work {
            Work::Gossip => self.inner.gossip_per_peer,
            Work::Search | Work::Dht => self.inner.per_peer,
        };
        if held >= cap {
            return Err(PEER_QUOTA);
        }
        self.take_token(work, peer, std::time::Instant::now())?;
        let pool = match work {
            Work::Search => &self.inner.search,
            Work::Gossip => &self.inner.gossip,
            Work::Dht => &self.inner.dht,
        };
        let permit = pool.clone().try_acquire_owned().map_err(|_| OVERLOADED)?;
        in_flight.insert(key, held + 1);
        Ok(Permit {
            _pool: permit,
            key,
            inner: self.inner.clone(),
        })
    }

    /// Takes one of `peer`'s tokens for `work` at `now`, if the kind has a
    /// rate.
    fn take_token(
        &self,
        work: Work,
        peer: PeerId,
        now: std::time::Instant,
    ) -> Result<(), &'static str> {
        let rate = match work {
            Work::Search => self.inner.rates.search,
            Work::Dht => self.inner.rates.dht,
            Work::Gossip => return Ok(()),
        };
        let mut buckets = self
            .inner
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let refill = |b: &Bucket| {
            let secs = now.saturating_duration_since(b.at).as_secs_f64();
            (b.tokens + secs * rate.per_second).min(rate.burst)
        };
        if buckets.len() >= MAX_BUCKETS {
            buckets.retain(|_, b| refill(b) < rate.burst);
        }
        let bucket = buckets.entry((peer, work)).or_insert(Bucket {
            tokens: rate.burst,
            at: now,
        });
        let tokens = refill(bucket);
        if tokens < 1.0 {
            return Err(PEER_RATE);
        }
        *bucket = Bucket {
            tokens: tokens - 1.0,
            at: now,
        };
        Ok(())
    }

    /// Permits held now, all pools and peers together (tests).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.inner
            .in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_peer_cannot_take_a_pool_and_one_kind_cannot_starve_another() {
        let q = Quotas::new(64, 8);
        // A relay's gossip: half the gossip pool (12 of 24), no more.
        let relay = PeerId::random();
        let burst: Vec<Permit> = (0..12)
            .map(|_| q.acquire(Work::Gossip, relay).unwrap())
            .collect();
        assert_eq!(q.acquire(Work::Gossip, relay).unwrap_err(), PEER_QUOTA);
        drop(burst);
        let greedy = PeerId::random();
        let mut held = Vec::new();
        for _ in 0..8 {
            held.push(q.acquire(Work::Search, greedy).unwrap());
        }
        assert_eq!(q.acquire(Work::Search, greedy).unwrap_err(), PEER_QUOTA);
        // The same peer's gossip has a pool of its own.
        held.push(q.acquire(Work::Gossip, greedy).unwrap());
        // Sybils fill the search pool (24 of 64)...
        let sybils: Vec<PeerId> = (0..2).map(|_| PeerId::random()).collect();
        for s in &sybils {
            for _ in 0..8 {
                held.push(q.acquire(Work::Search, *s).unwrap());
            }
        }
        assert_eq!(
            q.acquire(Work::Search, PeerId::random()).unwrap_err(),
            OVERLOADED
        );
        // ...and gossip and the DHT from everyone else still run.
        let honest = PeerId::random();
        held.push(q.acquire(Work::Gossip, honest).unwrap());
        held.push(q.acquire(Work::Dht, honest).unwrap());
        assert_eq!(q.held(), 8 + 1 + 16 + 2);
        held.clear();
        assert_eq!(q.held(), 0, "every permit gives its place back");
        assert!(q.acquire(Work::Search, greedy).is_ok());
    }

    #[test]
    fn a_peer_that_sends_faster_than_its_rate_is_held_to_it() {
        let rates = Rates {
            search: Rate {
                burst: 4.0,
                per_second: 2.0,
            },
            dht: Rates::DHT,
        };
        let q = Quotas::with_rates(64, 100, rates);
        let (fast, other) = (PeerId::random(), PeerId::random());
        let t0 = std::time::Instant::now();
        for _ in 0..4 {
            q.take_token(Work::Search, fast, t0).unwrap();
        }
        assert_eq!(q.take_token(Work::Search, fast, t0), Err(PEER_RATE));
        // Another peer, and another kind of work, are not affected.
        assert!(q.take_token(Work::Search, other, t0).is_ok());
        assert!(q.take_token(Work::Dht, fast, t0).is_ok());
        // Gossip has no rate.
        for _ in 0..1000 {
            assert!(q.take_token(Work::Gossip, fast, t0).is_ok());
        }
        // Half a second later: one more (2 a second), then none.
        let later = t0 + std::time::Duration::from_millis(500);
        assert!(q.take_token(Work::Search, fast, later).is_ok());
        assert_eq!(q.take_token(Work::Search, fast, later), Err(PEER_RATE));
        // A quiet spell gives the burst back, and no more.
        let quiet = t0 + std::time::Duration::from_secs(60);
        for _ in 0..4 {
            q.take_token(Work::Search, fast, quiet).unwrap();
        }
        assert_eq!(q.take_token(Work::Search, fast, quiet), Err(PEER_RATE));
        // Through acquire, the refusal is counted as peer_rate.
        let q = Quotas::with_rates(64, 100, rates);
        let held: Vec<Permit> = (0..4)
            .map(|_| q.acquire(Work::Search, fast).unwrap())
            .collect();
        drop(held);
        assert_eq!(q.acquire(Work::Search, fast).unwrap_err(), PEER_RATE);
    }

    #[test]
    fn buckets_of_quiet_peers_are_dropped_when_there_are_too_many() {
        let q = Quotas::new(64, 100);
        let t0 = std::time::Instant::now();
        for _ in 0..MAX_BUCKETS {
            q.take_token(Work::Search, PeerId::random(), t0).unwrap();
        }
        let later = t0 + std::time::Duration::from_secs(60);
        q.take_token(Work::Search, PeerId::random(), later).unwrap();
        let left = q.inner.buckets.lock().unwrap().len();
        assert_eq!(left, 1, "only the new peer's bucket is left");
    }

    #[test]
    fn the_pools_add_up_to_the_total_and_are_never_empty() {
        for (total, search, dht) in [(64, 24, 16), (8, 3, 2), (1, 1, 1), (2, 1, 1)] {
            let q = Quotas::new(total, 100);
            assert_eq!(q.inner.search.available_permits(), search, "{total}");
            assert_eq!(q.inner.gossip.available_permits(), search, "{total}");
            assert_eq!(q.inner.dht.available_permits(), dht, "{total}");
        }
    }
}
