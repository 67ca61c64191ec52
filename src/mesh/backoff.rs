//! Dial back-off: a peer whose dial failed is not dialled again until its
//! back-off has passed, for every dial that names it (Kademlia's, a
//! search's, the log's), so that lookups running at once do not each dial
//! a dead peer, or one at its connection limit, over and over.
//!
//! The back-off starts at [`MeshTimeouts::dial_backoff_min`] and doubles
//! with each failure in a row, up to [`MeshTimeouts::dial_backoff_max`]
//! (as go-libp2p's swarm backs off a failing peer). A dial denied here
//! fails at once, before any transport work, as a refused one does: the
//! query that wanted it asks its next peer instead of waiting for a
//! handshake to time out. A connection with the peer, either way, clears
//! it. Configured bootstrap and trusted peers are never held back here:
//! the bootstrap peers have a re-dial schedule of their own, and the
//! trusted ones are let in whatever the count.
//!
//! Only a failure of the peer's own counts (the transport could not reach
//! it, or another key answered): a dial this node denied itself (its own
//! limits, this back-off) or abandoned does not.
//!
//! [`MeshTimeouts::dial_backoff_min`]: super::MeshTimeouts
//! [`MeshTimeouts::dial_backoff_max`]: super::MeshTimeouts

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use libp2p::core::transport::PortUse;
use libp2p::core::{Endpoint, Multiaddr};
use libp2p::swarm::{
    behaviour::ConnectionEstablished, dummy, ConnectionDenied, ConnectionId, DialError,
    DialFailure, FromSwarm, NetworkBehaviour, THandler, THandlerInEvent, THandlerOutEvent, ToSwarm,
};
use libp2p::PeerId;

use super::admission::gate_plumbing;
use super::MeshStats;

/// Peers held back at once, at most: a node meets many peers, and a
/// flood of unreachable ids must not grow the table without bound. Past
/// it, the entry that would end soonest makes room.
pub const MAX_BACKED_OFF: usize = 8192;

/// The refusal a held-back dial gets; what the event loop counts as
/// `dials_backed_off`.
#[derive(Debug, thiserror::Error)]
#[error("{peer}'s last dial failed; not dialled again for {remaining:?}")]
pub struct BackedOff {
    /// The peer.
    pub peer: PeerId,
    /// Until its back-off ends.
    pub remaining: Duration,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Failures in a row.
    failures: u32,
    /// No dial before this.
    until: Instant,
}

/// Holds back dials of peers whose last dial failed.
#[derive(Debug)]
pub struct DialBackoff {
    min: Duration,
    max: Duration,
    exempt: HashSet<PeerId>,
    held: HashMap<PeerId, Entry>,
    /// Where held-back dials are counted: the swarm fails them before
    /// they start, and reports them to the behaviours only.
    stats: MeshStats,
}

impl DialBackoff {
    /// A back-off from `min` doubling up to `max`; `exempt` peers are
    /// never held back; held-back dials are counted in `stats`.
    pub fn new(min: Duration, max: Duration, exempt: HashSet<PeerId>, stats: MeshStats) -> Self {
        Self {
            min,
            max,
            exempt,
            held: HashMap::new(),
            stats,
        }
    }

    /// How long a dial of `peer` is still held back at `now` (none: it may
    /// be dialled).
    pub fn remaining(&self, peer: &PeerId, now: Instant) -> Option<Duration> {
        let until = self.held.get(peer)?.until;
        (until > now).then(|| until - now)
    }

    /// A dial of `peer` failed at `now`.
    fn failed(&mut self, peer: PeerId, now: Instant) {
        if self.exempt.contains(&peer) {
            return;
        }
        if !self.held.contains_key(&peer) && self.held.len() >= MAX_BACKED_OFF {
            self.make_room(now);
        }
        let failures = self.held.get(&peer).map_or(0, |e| e.failures) + 1;
        // min, 2 min, 4 min, ... (the shift capped well before overflow).
        let wait = self
            .min
            .saturating_mul(1 << (failures - 1).min(20))
            .min(self.max);
        self.held.insert(
            peer,
            Entry {
                failures,
                until: now + wait,
            },
        );
    }

    /// Drops the entries that have ended; if none had, the one ending soonest.
    fn make_room(&mut self, now: Instant) {
        self.held.retain(|_, e| e.until > now);
        if self.held.len() < MAX_BACKED_OFF {
            return;
        }
        if let Some(peer) = self
            .held
            .iter()
            .min_by_key(|(_, e)| e.until)
            .map(|(p, _)| *p)
        {
            self.held.remove(&peer);
        }
    }

    /// Peers held back now, ended or not (for the tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.held.len()
    }
}

/// Whether a failed dial is the peer's doing: the transport could not
/// reach it, or another key answered at its address. Not a dial this node
/// denied itself, abandoned, or had no address for.
fn peers_fault(error: &DialError) -> bool {
    matches!(
        error,
        DialError::Transport(_) | DialError::WrongPeerId { .. }
    )
}

impl NetworkBehaviour for DialBackoff {
    type ConnectionHandler = dummy::ConnectionHandler;
    type ToSwarm = Infallible;

    fn handle_pending_outbound_connection(
        &mut self,
        _connection_id: ConnectionId,
        maybe_peer: Option<PeerId>,
        _addresses: &[Multiaddr],
        _effective_role: Endpoint,
    ) -> Result<Vec<Multiaddr>, ConnectionDenied> {
        if let Some(peer) = maybe_peer {
            if let Some(remaining) = self.remaining(&peer, Instant::now()) {
                self.stats.dial_backed_off();
                return Err(ConnectionDenied::new(BackedOff { peer, remaining }));
            }
        }
        Ok(Vec::new())
    }

    fn on_swarm_event(&mut self, event: FromSwarm) {
        match event {
            FromSwarm::DialFailure(DialFailure {
                peer_id: Some(peer),
                error,
                ..
            }) if peers_fault(error) => self.failed(peer, Instant::now()),
            FromSwarm::ConnectionEstablished(ConnectionEstablished { peer_id, .. }) => {
                self.held.remove(&peer_id);
            }
            _ => {}
        }
    }

    gate_plumbing!();
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(2);
    const MAX: Duration = Duration::from_secs(60);

    #[test]
    fn a_failing_peer_waits_twice_as_long_each_time_up_to_the_most() {
        let mut b = DialBackoff::new(MIN, MAX, HashSet::new(), MeshStats::default());
        let peer = PeerId::random();
        let t0 = Instant::now();
        assert_eq!(b.remaining(&peer, t0), None, "never failed: dialled");
        let mut waits = Vec::new();
        for i in 0..8 {
            let now = t0 + Duration::from_secs(1000 * i);
            b.failed(peer, now);
            waits.push(b.remaining(&peer, now).unwrap().as_secs());
        }
        assert_eq!(waits, [2, 4, 8, 16, 32, 60, 60, 60]);
        // Once it has passed, the peer may be dialled again.
        let last = t0 + Duration::from_secs(7000);
        assert_eq!(b.remaining(&peer, last + MAX), None);
        assert_eq!(
            b.remaining(&peer, last + MAX - Duration::from_secs(1)),
            Some(Duration::from_secs(1))
        );
        // Another peer is not affected.
        assert_eq!(b.remaining(&PeerId::random(), last), None);
    }

    #[test]
    fn an_exempt_peer_is_never_held_back() {
        let trusted = PeerId::random();
        let mut b = DialBackoff::new(MIN, MAX, HashSet::from([trusted]), MeshStats::default());
        let now = Instant::now();
        b.failed(trusted, now);
        assert_eq!(b.remaining(&trusted, now), None);
    }

    #[test]
    fn only_the_peers_own_failures_count() {
        use libp2p::core::transport::TransportError;
        let peer = PeerId::random();
        let refused = DialError::Transport(vec![(
            "/ip4/203.0.113.5/tcp/1".parse().unwrap(),
            TransportError::Other(std::io::Error::other("connection refused")),
        )]);
        assert!(peers_fault(&refused));
        assert!(peers_fault(&DialError::WrongPeerId {
            obtained: PeerId::random(),
            address: "/ip4/203.0.113.5/tcp/1".parse().unwrap(),
        }));
        let ours = DialError::Denied {
            cause: ConnectionDenied::new(BackedOff {
                peer,
                remaining: MIN,
            }),
        };
        assert!(!peers_fault(&ours), "our own denial");
        assert!(!peers_fault(&DialError::Aborted));
        assert!(!peers_fault(&DialError::NoAddresses));
    }

    #[test]
    fn a_refused_dial_holds_the_peer_back_and_a_connection_clears_it() {
        use libp2p::core::transport::TransportError;
        use libp2p::core::ConnectedPoint;
        let mut b = DialBackoff::new(MIN, MAX, HashSet::new(), MeshStats::default());
        let peer = PeerId::random();
        let addr: Multiaddr = "/ip4/203.0.113.5/tcp/1".parse().unwrap();
        let dial = |b: &mut DialBackoff, id| {
            b.handle_pending_outbound_connection(
                ConnectionId::new_unchecked(id),
                Some(peer),
                &[],
                Endpoint::Dialer,
            )
        };
        assert!(dial(&mut b, 1).is_ok());
        let refused = DialError::Transport(vec![(
            addr.clone(),
            TransportError::Other(std::io::Error::other("connection refused")),
        )]);
        b.on_swarm_event(FromSwarm::DialFailure(DialFailure {
            peer_id: Some(peer),
            error: &refused,
            connection_id: ConnectionId::new_unchecked(1),
        }));
        let denied = dial(&mut b, 2).expect_err("held back");
        let cause = denied
            .downcast::<BackedOff>()
            .expect("the back-off's refusal");
        assert_eq!(cause.peer, peer);
        assert!(cause.remaining <= MIN);
        // Our own denial does not lengthen it.
        let ours = DialError::Denied {
            cause: ConnectionDenied::new(BackedOff {
                peer,
                remaining: MIN,
            }),
        };
        b.on_swarm_event(FromSwarm::DialFailure(DialFailure {
            peer_id: Some(peer),
            error: &ours,
            connection_id: ConnectionId::new_unchecked(2),
        }));
        assert_eq!(b.held[&peer].failures, 1);
        // The peer connects to us: it may be dialled at once again.
        let endpoint = ConnectedPoint::Listener {
            local_addr: "/ip4/127.0.0.1/tcp/7701".parse().unwrap(),
            send_back_addr: addr,
        };
        b.on_swarm_event(FromSwarm::ConnectionEstablished(ConnectionEstablished {
            peer_id: peer,
            connection_id: ConnectionId::new_unchecked(3),
            endpoint: &endpoint,
            failed_addresses: &[],
            other_established: 0,
        }));
        assert!(dial(&mut b, 4).is_ok());
        // A dial that names no peer is never held back.
        let anonymous = b.handle_pending_outbound_connection(
            ConnectionId::new_unchecked(5),
            None,
            &[],
            Endpoint::Dialer,
        );
        assert!(anonymous.is_ok());
    }

    #[test]
    fn a_flood_of_failing_ids_is_bounded() {
        let mut b = DialBackoff::new(MIN, MAX, HashSet::new(), MeshStats::default());
        let now = Instant::now();
        for _ in 0..MAX_BACKED_OFF + 100 {
            b.failed(PeerId::random(), now);
        }
        assert_eq!(b.len(), MAX_BACKED_OFF);
        // Once the earlier ones have ended, they make room for new ones.
        let later = now + Duration::from_secs(3600);
        let fresh = PeerId::random();
        b.failed(fresh, later);
        assert_eq!(b.len(), 1);
        assert!(b.remaining(&fresh, later).is_some());
    }
}
