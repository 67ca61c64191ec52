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

#[derive(Debug)]
struct Inner {
    search: Arc<Semaphore>,
    gossip: Arc<Semaphore>,
    dht: Arc<Semaphore>,
    per_peer: usize,
    gossip_per_peer: usize,
    in_flight: Mutex<HashMap<(PeerId, Work), usize>>,
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
    pub(super) fn new(total: usize, per_peer: usize) -> Self {
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
    fn the_pools_add_up_to_the_total_and_are_never_empty() {
        for (total, search, dht) in [(64, 24, 16), (8, 3, 2), (1, 1, 1), (2, 1, 1)] {
            let q = Quotas::new(total, 100);
            assert_eq!(q.inner.search.available_permits(), search, "{total}");
            assert_eq!(q.inner.gossip.available_permits(), search, "{total}");
            assert_eq!(q.inner.dht.available_permits(), dht, "{total}");
        }
    }
}
