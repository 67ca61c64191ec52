//! Re-verification that the mesh asks for, rate-limited so that no peer
//! can steer this node's crawler.
//!
//! A record from an untrusted signer about an ADP agent (or that tells
//! of a document that differs from the one this node verified), or about
//! an A2A or DNS-AID agent claiming a flag, hands its domain back for
//! this node's own crawl, whose result replaces the claim: the job
//! crawls the domain in every format the crawler reads, as any crawl does
//! (`Crawler::crawl_many`). Left alone, one peer could aim thousands of
//! fetches at a victim by gossiping records of its domains. So each
//! request passes, in order:
//!
//! - a window per domain: a domain queued in the last `recent` is not
//!   queued again (`recent`);
//! - a token bucket per sending peer (`peer_rate`), and one per record
//!   signer (`signer_rate`): a Sybil with many keys behind one peer, or
//!   one key gossiped by many peers, is held to its own share;
//! - a bucket for the whole node (`node_rate`);
//! - the crawl queue, which answers full (`queue_full`).
//!
//! A re-verification job crawls the one domain and never follows the
//! agent's peers. Every request is counted, queued or dropped by reason
//! (`GET /peers`, `records.reverify`). The maps are bounded: past
//! [`MAX_TRACKED`] sources, idle ones are forgotten first, and a request
//! from a new source is dropped (`too_many_sources`) while none is idle.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use libp2p::PeerId;

use crate::crawl::queue::CrawlQueue;

/// Most peers, signers or domains tracked at once, each.
pub const MAX_TRACKED: usize = 10_000;

/// How fast re-verifications may be asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReverifyLimits {
    /// Domains one sending peer may have queued per minute (its burst too).
    pub per_peer_per_minute: u32,
    /// Domains the records of one signer may have queued per minute.
    pub per_signer_per_minute: u32,
    /// Domains the mesh may have queued per minute, all peers together.
    pub per_minute: u32,
    /// A domain queued is not queued again within this window.
    pub recent: Duration,
}

impl Default for ReverifyLimits {
    fn default() -> Self {
        Self {
            per_peer_per_minute: 30,
            per_signer_per_minute: 30,
            per_minute: 300,
            recent: Duration::from_secs(600),
        }
    }
}

/// Why a request was not queued: the codes `records.reverify.dropped`
/// counts under. The strings never change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Dropped {
    /// The domain was queued within the window.
    Recent,
    /// The sending peer is over its rate.
    PeerRate,
    /// The records' signer is over its rate.
    SignerRate,
    /// The node is over its rate.
    NodeRate,
    /// More sources than can be tracked, none idle.
    TooManySources,
    /// The crawl queue is full or stopped.
    QueueFull,
}

impl Dropped {
    /// The wire code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Recent => "recent",
            Self::PeerRate => "peer_rate",
            Self::SignerRate => "signer_rate",
            Self::NodeRate => "node_rate",
            Self::TooManySources => "too_many_sources",
            Self::QueueFull => "queue_full",
        }
    }
}

/// A token bucket: `rate` tokens a minute, at most `rate` held.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(rate: u32, now: Instant) -> Self {
        Self {
            tokens: f64::from(rate),
            at: now,
        }
    }

    fn refill(&mut self, rate: u32, now: Instant) {
        let per_sec = f64::from(rate) / 60.0;
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * per_sec).min(f64::from(rate));
        self.at = now;
    }

    fn has_token(&mut self, rate: u32, now: Instant) -> bool {
        self.refill(rate, now);
        self.tokens >= 1.0
    }

    fn take(&mut self) {
        self.tokens -= 1.0;
    }

    /// Full again: nothing is lost by forgetting it.
    fn idle(&self, rate: u32, now: Instant) -> bool {
        let mut b = *self;
        b.refill(rate, now);
        b.tokens >= f64::from(rate)
    }
}

/// Buckets by source, bounded.
#[derive(Debug)]
struct Buckets<K> {
    rate: u32,
    map: HashMap<K, Bucket>,
}

impl<K: Hash + Eq + Clone> Buckets<K> {
    fn new(rate: u32) -> Self {
        Self {
            rate,
            map: HashMap::new(),
        }
    }

    /// The bucket of `key`, made room for when the map is full; `None`
    /// when there is no room.
    fn entry(&mut self, key: &K, now: Instant) -> Option<&mut Bucket> {
        if !self.map.contains_key(key) && self.map.len() >= MAX_TRACKED {
            let rate = self.rate;
            self.map.retain(|_, b| !b.idle(rate, now));
            if self.map.len() >= MAX_TRACKED {
                return None;
            }
        }
        let rate = self.rate;
        Some(
            self.map
                .entry(key.clone())
                .or_insert_with(|| Bucket::full(rate, now)),
        )
    }
}

#[derive(Debug)]
struct State {
    peers: Buckets<PeerId>,
    signers: Buckets<[u8; 32]>,
    node: Bucket,
    recent: HashMap<String, Instant>,
    queued: u64,
    dropped: BTreeMap<Dropped, u64>,
}

/// What the re-verifier did so far (`GET /peers`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct ReverifyCounts {
    /// Domains queued for this node's own crawl.
    pub queued: u64,
    /// Requests dropped, by reason.
    pub dropped: BTreeMap<String, u64>,
}

/// Queues the domains the mesh asks to re-verify, within the limits.
#[derive(Debug)]
pub struct Reverifier {
    queue: Option<CrawlQueue>,
    limits: ReverifyLimits,
    state: Mutex<State>,
}

impl Reverifier {
    /// A re-verifier feeding `queue` (none: requests are only counted, as
    /// on a node that does not crawl).
    pub fn new(queue: Option<CrawlQueue>, limits: ReverifyLimits) -> Self {
        let now = Instant::now();
        Self {
            queue,
            limits,
            state: Mutex::new(State {
                peers: Buckets::new(limits.per_peer_per_minute),
                signers: Buckets::new(limits.per_signer_per_minute),
                node: Bucket::full(limits.per_minute, now),
                recent: HashMap::new(),
                queued: 0,
                dropped: BTreeMap::new(),
            }),
        }
    }

    /// Asks for `domain` to be re-verified on behalf of a record signed
    /// by `signer` and sent by `peer` (`None`: from `POST /records`).
    pub fn request(&self, domain: String, peer: Option<PeerId>, signer: [u8; 32]) {
        self.request_at(domain, peer, signer, Instant::now());
    }

    fn request_at(&self, domain: String, peer: Option<PeerId>, signer: [u8; 32], now: Instant) {
        let mut s = self
            .state
            .lock()
            .expect("the re-verifier's state is never poisoned");
        let verdict = Self::admit(&mut s, &self.limits, &domain, peer, signer, now);
        let verdict = verdict.and_then(|()| match &self.queue {
            Some(q) => q
                .enqueue_one(domain.clone())
                .map_err(|_| Dropped::QueueFull),
            None => Ok(()),
        });
        match verdict {
            Ok(()) => {
                s.queued += 1;
                if s.recent.len() >= MAX_TRACKED {
                    let window = self.limits.recent;
                    s.recent
                        .retain(|_, at| now.saturating_duration_since(*at) < window);
                }
                if s.recent.len() < MAX_TRACKED {
                    s.recent.insert(domain, now);
                }
            }
            Err(reason) => {
                tracing::debug!(%domain, reason = reason.as_str(), "re-verification not queued");
                *s.dropped.entry(reason).or_default() += 1;
            }
        }
    }

    /// Checks every limit; takes the tokens only when all have one.
    fn admit(
        s: &mut State,
        limits: &ReverifyLimits,
        domain: &str,
        peer: Option<PeerId>,
        signer: [u8; 32],
        now: Instant,
    ) -> Result<(), Dropped> {
        if s.recent
            .get(domain)
            .is_some_and(|at| now.saturating_duration_since(*at) < limits.recent)
        {
            return Err(Dropped::Recent);
        }
        if let Some(peer) = &peer {
            let bucket = s.peers.entry(peer, now).ok_or(Dropped::TooManySources)?;
            if !bucket.has_token(limits.per_peer_per_minute, now) {
                return Err(Dropped::PeerRate);
            }
        }
        let bucket = s
            .signers
            .entry(&signer, now)
            .ok_or(Dropped::TooManySources)?;
        if !bucket.has_token(limits.per_signer_per_minute, now) {
            return Err(Dropped::SignerRate);
        }
        if !s.node.has_token(limits.per_minute, now) {
            return Err(Dropped::NodeRate);
        }
        if let Some(peer) = &peer {
            if let Some(b) = s.peers.map.get_mut(peer) {
                b.take();
            }
        }
        if let Some(b) = s.signers.map.get_mut(&signer) {
            b.take();
        }
        s.node.take();
        Ok(())
    }

    /// What was queued and dropped so far.
    pub fn counts(&self) -> ReverifyCounts {
        let s = self
            .state
            .lock()
            .expect("the re-verifier's state is never poisoned");
        ReverifyCounts {
            queued: s.queued,
            dropped: s
                .dropped
                .iter()
                .map(|(r, n)| (r.as_str().to_owned(), *n))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ReverifyLimits {
        ReverifyLimits {
            per_peer_per_minute: 3,
            per_signer_per_minute: 5,
            per_minute: 8,
            recent: Duration::from_secs(600),
        }
    }

    #[test]
    fn one_peer_gets_its_share_and_no_more() {
        let r = Reverifier::new(None, limits());
        let now = Instant::now();
        let peer = PeerId::random();
        for i in 0..10 {
            // Every record from another signer: the peer's bucket decides.
            r.request_at(format!("d{i}.test"), Some(peer), [i as u8; 32], now);
        }
        let c = r.counts();
        assert_eq!(c.queued, 3);
        assert_eq!(c.dropped["peer_rate"], 7);
        // A minute on, the bucket is full again.
        r.request_at(
            "later.test".into(),
            Some(peer),
            [99; 32],
            now + Duration::from_secs(60),
        );
        assert_eq!(r.counts().queued, 4);
    }

    #[test]
    fn one_signer_through_many_peers_gets_its_share() {
        let r = Reverifier::new(None, limits());
        let now = Instant::now();
        for i in 0..10 {
            r.request_at(format!("d{i}.test"), Some(PeerId::random()), [7; 32], now);
        }
        assert_eq!(r.counts().queued, 5);
        assert_eq!(r.counts().dropped["signer_rate"], 5);
    }

    #[test]
    fn the_node_has_a_ceiling_and_a_domain_is_queued_once_per_window() {
        let r = Reverifier::new(None, limits());
        let now = Instant::now();
        for i in 0..20u8 {
            r.request_at(format!("d{i}.test"), Some(PeerId::random()), [i; 32], now);
        }
        assert_eq!(r.counts().queued, 8);
        assert_eq!(r.counts().dropped["node_rate"], 12);
        let r = Reverifier::new(None, limits());
        r.request_at("same.test".into(), None, [1; 32], now);
        r.request_at("same.test".into(), None, [2; 32], now);
        assert_eq!(r.counts().queued, 1);
        assert_eq!(r.counts().dropped["recent"], 1);
        r.request_at(
            "same.test".into(),
            None,
            [3; 32],
            now + Duration::from_secs(601),
        );
        assert_eq!(r.counts().queued, 2);
    }

    #[test]
    fn a_dropped_request_takes_no_token_from_the_others() {
        let r = Reverifier::new(None, limits());
        let now = Instant::now();
        let peer = PeerId::random();
        // The signer's five go through other peers first.
        for i in 0..5 {
            r.request_at(format!("s{i}.test"), Some(PeerId::random()), [7; 32], now);
        }
        // Refused for the signer: the peer keeps its three tokens.
        r.request_at("x.test".into(), Some(peer), [7; 32], now);
        for i in 0..3 {
            r.request_at(format!("p{i}.test"), Some(peer), [i as u8; 32], now);
        }
        assert_eq!(r.counts().queued, 8);
    }
}
