//! [`MeshStats`]: counters the event loop and its handler tasks bump, and
//! anyone holding a [`MeshClient`](super::MeshClient) reads
//! ([`MeshClient::stats`](super::MeshClient::stats)) without a round trip
//! to the loop. Totals are atomics; per-reason counts sit in small maps
//! keyed by the `&'static str` reason codes, behind a mutex held only for
//! one increment or one copy.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::Verdict;

#[derive(Default)]
struct Counts {
    accepted: AtomicU64,
    rejected: Mutex<BTreeMap<&'static str, u64>>,
    ignored: Mutex<BTreeMap<&'static str, u64>>,
}

fn bump(map: &Mutex<BTreeMap<&'static str, u64>>, reason: &'static str) {
    let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
    *m.entry(reason).or_default() += 1;
}

fn copy(map: &Mutex<BTreeMap<&'static str, u64>>) -> BTreeMap<String, u64> {
    let m = map.lock().unwrap_or_else(|e| e.into_inner());
    m.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

impl Counts {
    fn count(&self, verdict: &Verdict) {
        match verdict {
            Verdict::Accept => {
                self.accepted.fetch_add(1, Ordering::Relaxed);
            }
            Verdict::Reject(r) => bump(&self.rejected, r),
            Verdict::Ignore(r) => bump(&self.ignored, r),
        }
    }

    fn snapshot(&self) -> VerdictCounts {
        VerdictCounts {
            accepted: self.accepted.load(Ordering::Relaxed),
            rejected: copy(&self.rejected),
            ignored: copy(&self.ignored),
        }
    }
}

/// Which inbound path a verdict belongs to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Path {
    Gossip,
    DhtPut,
    DhtGet,
}

#[derive(Default)]
struct Inner {
    gossip: Counts,
    dht_put: Counts,
    dht_get: Counts,
    searches_served: AtomicU64,
    searches_refused: Mutex<BTreeMap<&'static str, u64>>,
    requests_sent: AtomicU64,
    requests_failed: AtomicU64,
    requests_timed_out: AtomicU64,
    providers_stored: AtomicU64,
    providers_refused: AtomicU64,
    bootstrap_dials: AtomicU64,
    dial_failures: AtomicU64,
}

/// Live counters of one mesh. Cheap to clone (an `Arc`).
#[derive(Clone, Default)]
pub struct MeshStats {
    inner: Arc<Inner>,
}

/// Verdict counts of one inbound path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VerdictCounts {
    /// Accepted items.
    pub accepted: u64,
    /// Rejected items by reason.
    pub rejected: BTreeMap<String, u64>,
    /// Ignored items by reason (`overloaded`, `handler_timeout`, the
    /// handler's own reasons, ...).
    pub ignored: BTreeMap<String, u64>,
}

impl VerdictCounts {
    /// All rejected items.
    pub fn rejected_total(&self) -> u64 {
        self.rejected.values().sum()
    }

    /// All ignored items.
    pub fn ignored_total(&self) -> u64 {
        self.ignored.values().sum()
    }
}

/// A copy of the counters at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StatsSnapshot {
    /// Gossip messages on the records topic.
    pub gossip: VerdictCounts,
    /// Inbound Kademlia `PutRecord`s.
    pub dht_put: VerdictCounts,
    /// Records found by our own `get_record` lookups.
    pub dht_get: VerdictCounts,
    /// Inbound searches answered.
    pub searches_served: u64,
    /// Inbound searches not answered, by reason (`overloaded`,
    /// `too_many_terms`, `handler_timeout`, ...).
    pub searches_refused: BTreeMap<String, u64>,
    /// Outbound search requests sent.
    pub requests_sent: u64,
    /// Outbound search requests that failed (dial, protocol, I/O).
    pub requests_failed: u64,
    /// Outbound search requests still unanswered at their deadline.
    pub requests_timed_out: u64,
    /// Inbound provider records stored.
    pub providers_stored: u64,
    /// Inbound provider records refused (malformed key, store full).
    pub providers_refused: u64,
    /// Dials of bootstrap peers.
    pub bootstrap_dials: u64,
    /// Outgoing connections that failed.
    pub dial_failures: u64,
}

impl MeshStats {
    pub(crate) fn verdict(&self, path: Path, verdict: &Verdict) {
        match path {
            Path::Gossip => self.inner.gossip.count(verdict),
            Path::DhtPut => self.inner.dht_put.count(verdict),
            Path::DhtGet => self.inner.dht_get.count(verdict),
        }
    }

    pub(crate) fn search_served(&self) {
        self.inner.searches_served.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn search_refused(&self, reason: &'static str) {
        bump(&self.inner.searches_refused, reason);
    }

    pub(crate) fn requests_sent(&self, n: u64) {
        self.inner.requests_sent.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn request_failed(&self) {
        self.inner.requests_failed.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn requests_timed_out(&self, n: u64) {
        self.inner
            .requests_timed_out
            .fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn provider(&self, stored: bool) {
        let c = if stored {
            &self.inner.providers_stored
        } else {
            &self.inner.providers_refused
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn bootstrap_dial(&self) {
        self.inner.bootstrap_dials.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn dial_failure(&self) {
        self.inner.dial_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// A copy of every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        let i = &self.inner;
        StatsSnapshot {
            gossip: i.gossip.snapshot(),
            dht_put: i.dht_put.snapshot(),
            dht_get: i.dht_get.snapshot(),
            searches_served: i.searches_served.load(Ordering::Relaxed),
            searches_refused: copy(&i.searches_refused),
            requests_sent: i.requests_sent.load(Ordering::Relaxed),
            requests_failed: i.requests_failed.load(Ordering::Relaxed),
            requests_timed_out: i.requests_timed_out.load(Ordering::Relaxed),
            providers_stored: i.providers_stored.load(Ordering::Relaxed),
            providers_refused: i.providers_refused.load(Ordering::Relaxed),
            bootstrap_dials: i.bootstrap_dials.load(Ordering::Relaxed),
            dial_failures: i.dial_failures.load(Ordering::Relaxed),
        }
    }
}

impl std::fmt::Debug for MeshStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.snapshot().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_path_and_reason() {
        let s = MeshStats::default();
        s.verdict(Path::Gossip, &Verdict::Accept);
        s.verdict(Path::Gossip, &Verdict::Reject("bad_signature"));
        s.verdict(Path::Gossip, &Verdict::Reject("bad_signature"));
        s.verdict(Path::DhtPut, &Verdict::Ignore("overloaded"));
        let snap = s.clone().snapshot();
        assert_eq!(snap.gossip.accepted, 1);
        assert_eq!(snap.gossip.rejected["bad_signature"], 2);
        assert_eq!(snap.gossip.rejected_total(), 2);
        assert_eq!(snap.dht_put.ignored_total(), 1);
        assert_eq!(snap.dht_get, VerdictCounts::default());
    }
}
