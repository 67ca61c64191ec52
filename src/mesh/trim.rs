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
//! configured bootstrap peer or a trusted one (`p2p.trusted_peers`), nor a
//! peer connected or used (a search
//! request or answer, either way) within
//! [`MeshTimeouts::connection_grace`](super::MeshTimeouts); of the rest,
//! peers outside our gossip mesh before those in it, each group least
//! recently used first. A trimmed peer stays in the routing table, so a
//! later lookup dials it again.
//!
//! The event loop keeps each connected peer's [`Use`] in its peer table
//! and asks [`Trimmer::choose`] on its tick; this file owns no I/O and no
//! list of peers of its own.

use std::time::Duration;

use libp2p::PeerId;
use tokio::time::Instant;

/// When a connected peer came, when we last exchanged a search with it,
/// and whether we have trimmed it already (its connections closing).
#[derive(Debug, Clone, Copy)]
pub(super) struct Use {
    since: Instant,
    last: Instant,
    trimmed: bool,
}

impl Use {
    /// A peer first connected at `now`.
    pub(super) fn new(now: Instant) -> Self {
        Self {
            since: now,
            last: now,
            trimmed: false,
        }
    }

    /// A search request or answer went to or came from the peer.
    pub(super) fn used(&mut self, now: Instant) {
        self.last = now;
    }

    /// The peer was chosen and is being disconnected: the next tick must
    /// neither choose nor count it while its connections close.
    pub(super) fn trimmed(&mut self) {
        self.trimmed = true;
    }
}

/// The trimming marks and grace.
#[derive(Debug)]
pub(super) struct Trimmer {
    low: usize,
    high: usize,
    grace: Duration,
}

impl Trimmer {
    /// Trims down to `low` when more than `high` peers are connected;
    /// `grace` shields a peer newly connected or used.
    pub(super) fn new(low: usize, high: usize, grace: Duration) -> Self {
        Self { low, high, grace }
    }

    /// The peers to disconnect now, so that `low` stay connected (fewer,
    /// when too many are shielded); none while at most `high` are
    /// connected. `peers` are the connected peers and their use (those
    /// already trimmed are left out); `protected` marks configured
    /// bootstrap and trusted peers; `in_mesh` our gossip mesh for the records topic.
    pub(super) fn choose<'a>(
        &self,
        now: Instant,
        peers: impl IntoIterator<Item = (&'a PeerId, &'a Use)>,
        protected: impl Fn(&PeerId) -> bool,
        in_mesh: impl Fn(&PeerId) -> bool,
    ) -> Vec<PeerId> {
        let live: Vec<(&PeerId, &Use)> = peers.into_iter().filter(|(_, u)| !u.trimmed).collect();
        if live.len() <= self.high {
            return Vec::new();
        }
        let shielded = |u: &Use| {
            now.saturating_duration_since(u.since) < self.grace
                || now.saturating_duration_since(u.last) < self.grace
        };
        let mut candidates: Vec<(bool, Instant, PeerId)> = live
            .iter()
            .filter(|(p, u)| !shielded(u) && !protected(p))
            .map(|(p, u)| (in_mesh(p), u.last, **p))
            .collect();
        // Outside the mesh first (false < true), then the least recently
        // used; the peer id settles ties so the choice is deterministic.
        candidates.sort_unstable();
        let excess = live.len() - self.low;
        candidates.into_iter().take(excess).map(|c| c.2).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn peers(n: usize) -> Vec<PeerId> {
        (0..n).map(|_| PeerId::random()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_trimmed_at_or_below_the_high_mark() {
        let mut m = HashMap::new();
        let t = Trimmer::new(2, 4, Duration::from_secs(1));
        let start = Instant::now();
        for p in peers(4) {
            m.insert(p, Use::new(start));
        }
        let later = start + Duration::from_secs(60);
        assert!(t.choose(later, &m, |_| false, |_| false).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn over_the_high_mark_the_least_recently_used_go_down_to_the_low_mark() {
        let mut m = HashMap::new();
        let t = Trimmer::new(2, 4, Duration::from_secs(1));
        let start = Instant::now();
        let p = peers(5);
        for (i, peer) in p.iter().enumerate() {
            m.insert(*peer, Use::new(start));
            // Peer i last used at start + i seconds.
            m.get_mut(peer)
                .unwrap()
                .used(start + Duration::from_secs(i as u64));
        }
        let now = start + Duration::from_secs(10);
        let chosen = t.choose(now, &m, |_| false, |_| false);
        assert_eq!(chosen, vec![p[0], p[1], p[2]]);
    }

    #[tokio::test(start_paused = true)]
    async fn mesh_peers_go_last_and_bootstrap_peers_never() {
        let mut m = HashMap::new();
        let t = Trimmer::new(1, 3, Duration::from_secs(1));
        let start = Instant::now();
        let p = peers(5);
        for peer in &p {
            m.insert(*peer, Use::new(start));
        }
        let now = start + Duration::from_secs(10);
        // p0 is a bootstrap peer; p1 and p2 are in the gossip mesh.
        let chosen = t.choose(now, &m, |x| *x == p[0], |x| *x == p[1] || *x == p[2]);
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
        let mut m = HashMap::new();
        let t = Trimmer::new(0, 1, Duration::from_secs(30));
        let start = Instant::now();
        let p = peers(3);
        m.insert(p[0], Use::new(start));
        m.insert(p[1], Use::new(start));
        let now = start + Duration::from_secs(40);
        m.insert(p[2], Use::new(now - Duration::from_secs(5))); // new
        m.get_mut(&p[1])
            .unwrap()
            .used(now - Duration::from_secs(29)); // busy
        assert_eq!(t.choose(now, &m, |_| false, |_| false), vec![p[0]]);
        m.remove(&p[0]);
        assert!(t.choose(now, &m, |_| false, |_| false).is_empty());
    }
}
