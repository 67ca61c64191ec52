//! Connection trimming: what keeps a node at its connection limit open to
//! new peers.
//!
//! gossipsub holds a stream open on every connection to a peer of the
//! records topic, so no such connection ever goes idle, and a node stays
//! connected to every peer its bootstrap and lookups met until it reaches
//! [`MeshLimits::max_connections`](super::MeshLimits::max_connections).
//! There `connection_limits` refuses every further connection, in and out,
//! Kademlia's dials among them: a lookup can then reach only the peers it
//! is already connected to, and its queries time out (measured in real
//! swarms of 200 and 500 nodes, `simulations/README.md`).
//!
//! So the loop trims, as go-libp2p's connection manager does: when more
//! than [`MeshLimits::connections_high_water`](super::MeshLimits) peers are
//! connected, it closes connections down to
//! [`MeshLimits::connections_low_water`](super::MeshLimits), leaving room
//! for new ones below the hard limit. [`Trimmer`] chooses whom: never a
//! configured bootstrap peer, nor a peer connected or used (a search
//! request or answer, either way) within
//! [`MeshTimeouts::connection_grace`](super::MeshTimeouts); of the rest,
//! peers outside our gossip mesh before those in it, each group least
//! recently used first. A trimmed peer stays in the routing table, so a
//! later lookup dials it again.
//!
//! The event loop feeds it connection and use events and asks
//! [`Trimmer::choose`] on its tick; it owns no I/O.

use std::collections::HashMap;
use std::time::Duration;

use libp2p::PeerId;
use tokio::time::Instant;

/// When a connected peer came and when we last exchanged a search with it.
#[derive(Debug, Clone, Copy)]
struct Use {
    since: Instant,
    last: Instant,
}

/// Connected peers and their use, and the marks trimming keeps between.
#[derive(Debug)]
pub(super) struct Trimmer {
    low: usize,
    high: usize,
    grace: Duration,
    peers: HashMap<PeerId, Use>,
}

impl Trimmer {
    /// Trims down to `low` when more than `high` peers are connected;
    /// `grace` shields a peer newly connected or used.
    pub(super) fn new(low: usize, high: usize, grace: Duration) -> Self {
        Self {
            low,
            high,
            grace,
            peers: HashMap::new(),
        }
    }

    /// A first connection to `peer` (further ones change nothing).
    pub(super) fn connected(&mut self, peer: PeerId, now: Instant) {
        self.peers.entry(peer).or_insert(Use {
            since: now,
            last: now,
        });
    }

    /// The last connection to `peer` closed.
    pub(super) fn disconnected(&mut self, peer: &PeerId) {
        self.peers.remove(peer);
    }

    /// A search request or answer went to or came from `peer`.
    pub(super) fn used(&mut self, peer: &PeerId, now: Instant) {
        if let Some(u) = self.peers.get_mut(peer) {
            u.last = now;
        }
    }

    /// The peers to disconnect now, so that `low` stay connected (fewer,
    /// when too many are shielded); none while at most `high` are
    /// connected. `protected` marks configured bootstrap peers;
    /// `in_mesh` our gossip mesh for the records topic.
    pub(super) fn choose(
        &self,
        now: Instant,
        protected: impl Fn(&PeerId) -> bool,
        in_mesh: impl Fn(&PeerId) -> bool,
    ) -> Vec<PeerId> {
        if self.peers.len() <= self.high {
            return Vec::new();
        }
        let shielded = |u: &Use| {
            now.saturating_duration_since(u.since) < self.grace
                || now.saturating_duration_since(u.last) < self.grace
        };
        let mut candidates: Vec<(bool, Instant, PeerId)> = self
            .peers
            .iter()
            .filter(|(p, u)| !shielded(u) && !protected(p))
            .map(|(p, u)| (in_mesh(p), u.last, *p))
            .collect();
        // Outside the mesh first (false < true), then the least recently
        // used; the peer id settles ties so the choice is deterministic.
        candidates.sort_unstable();
        let excess = self.peers.len() - self.low;
        candidates.into_iter().take(excess).map(|c| c.2).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peers(n: usize) -> Vec<PeerId> {
        (0..n).map(|_| PeerId::random()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_trimmed_at_or_below_the_high_mark() {
        let mut t = Trimmer::new(2, 4, Duration::from_secs(1));
        let start = Instant::now();
        for p in peers(4) {
            t.connected(p, start);
        }
        let later = start + Duration::from_secs(60);
        assert!(t.choose(later, |_| false, |_| false).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn over_the_high_mark_the_least_recently_used_go_down_to_the_low_mark() {
        let mut t = Trimmer::new(2, 4, Duration::from_secs(1));
        let start = Instant::now();
        let p = peers(5);
        for (i, peer) in p.iter().enumerate() {
            t.connected(*peer, start);
            // Peer i last used at start + i seconds.
            t.used(peer, start + Duration::from_secs(i as u64));
        }
        let now = start + Duration::from_secs(10);
        let chosen = t.choose(now, |_| false, |_| false);
        assert_eq!(chosen, vec![p[0], p[1], p[2]]);
    }

    #[tokio::test(start_paused = true)]
    async fn mesh_peers_go_last_and_bootstrap_peers_never() {
        let mut t = Trimmer::new(1, 3, Duration::from_secs(1));
        let start = Instant::now();
        let p = peers(5);
        for peer in &p {
            t.connected(*peer, start);
        }
        let now = start + Duration::from_secs(10);
        // p0 is a bootstrap peer; p1 and p2 are in the gossip mesh.
        let chosen = t.choose(now, |x| *x == p[0], |x| *x == p[1] || *x == p[2]);
        assert_eq!(chosen.len(), 4, "{chosen:?}");
        assert!(!chosen.contains(&p[0]));
        // The two outside the mesh come before the two in it.
        let outside: Vec<_> = chosen[..2].to_vec();
        assert!(
            outside.contains(&p[3]) && outside.contains(&p[4]),
            "{chosen:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_peer_connected_or_used_within_the_grace_is_kept() {
        let mut t = Trimmer::new(0, 1, Duration::from_secs(30));
        let start = Instant::now();
        let p = peers(3);
        t.connected(p[0], start);
        t.connected(p[1], start);
        let now = start + Duration::from_secs(40);
        t.connected(p[2], now - Duration::from_secs(5)); // new
        t.used(&p[1], now - Duration::from_secs(29)); // busy
        assert_eq!(t.choose(now, |_| false, |_| false), vec![p[0]]);
        t.disconnected(&p[0]);
        assert!(t.choose(now, |_| false, |_| false).is_empty());
    }
}
