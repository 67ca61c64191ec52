//! Quotas on the provider records peers announce to this node
//! (Kademlia's `ADD_PROVIDER`), so that junk cannot crowd out the node's
//! own keys nor one peer fill the store.
//!
//! The DHT store holds at most `max_provider_keys` keys with providers,
//! this node's own and everyone else's together, and refuses a new key
//! when full: a peer announcing junk keys could fill it, and the node's
//! own `start_providing` then failed. So announcements from peers may use
//! at most three quarters of the keys (`no_room`), the rest stays for the
//! node's own capabilities, and one peer may be the provider of at most a
//! quarter of them (`peer_quota`). The quota remembers what it admitted;
//! the store forgets providers as they expire, so when a limit is reached
//! the quota first lets go of what the store no longer holds (at most once
//! every [`RECONCILE_EVERY`], so a flood cannot make it rescan each time).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use libp2p::kad::RecordKey;
use libp2p::PeerId;

/// Least time between two reconciliations with the store.
pub(super) const RECONCILE_EVERY: Duration = Duration::from_secs(10);

/// A peer holds its share of the keys.
pub(super) const PEER_QUOTA: &str = "peer_quota";
/// Announcements from peers fill their share of the store.
pub(super) const NO_ROOM: &str = "no_room";

/// What peers' announcements hold, and the limits.
#[derive(Debug)]
pub(super) struct ProviderQuota {
    room: usize,
    per_peer: usize,
    keys: HashMap<RecordKey, HashSet<PeerId>>,
    by_peer: HashMap<PeerId, usize>,
    reconciled: Option<Instant>,
}

impl ProviderQuota {
    /// Quotas for a store of `max_keys` keys with providers.
    pub(super) fn new(max_keys: usize) -> Self {
        Self {
            room: (max_keys * 3 / 4).max(1),
            per_peer: (max_keys / 4).max(1),
            keys: HashMap::new(),
            by_peer: HashMap::new(),
            reconciled: None,
        }
    }

    /// Whether `peer`'s announcement of `key` may be stored; `held` says
    /// whether the store still holds a provider (the key, the peer) as
    /// the quota last saw it.
    pub(super) fn admit(
        &mut self,
        key: &RecordKey,
        peer: PeerId,
        now: Instant,
        held: impl Fn(&RecordKey, &PeerId) -> bool,
    ) -> Result<(), &'static str> {
        if self.keys.get(key).is_some_and(|p| p.contains(&peer)) {
            return Ok(());
        }
        if let Err(reason) = self.fits(key, &peer) {
            if !self.reconcile(now, &held) {
                return Err(reason);
            }
            self.fits(key, &peer)?;
        }
        self.keys.entry(key.clone()).or_default().insert(peer);
        *self.by_peer.entry(peer).or_default() += 1;
        Ok(())
    }

    fn fits(&self, key: &RecordKey, peer: &PeerId) -> Result<(), &'static str> {
        if self.by_peer.get(peer).copied().unwrap_or(0) >= self.per_peer {
            return Err(PEER_QUOTA);
        }
        if !self.keys.contains_key(key) && self.keys.len() >= self.room {
            return Err(NO_ROOM);
        }
        Ok(())
    }

    /// Forgets what the store no longer holds; `false` when it is too
    /// soon after the last time.
    fn reconcile(&mut self, now: Instant, held: &impl Fn(&RecordKey, &PeerId) -> bool) -> bool {
        if self
            .reconciled
            .is_some_and(|at| now.saturating_duration_since(at) < RECONCILE_EVERY)
        {
            return false;
        }
        self.reconciled = Some(now);
        let by_peer = &mut self.by_peer;
        self.keys.retain(|key, peers| {
            peers.retain(|p| {
                let keep = held(key, p);
                if !keep {
                    if let Some(n) = by_peer.get_mut(p) {
                        *n -= 1;
                    }
                }
                keep
            });
            !peers.is_empty()
        });
        by_peer.retain(|_, n| *n > 0);
        true
    }

    /// Keys admitted from peers.
    pub(super) fn keys_admitted(&self) -> usize {
        self.keys.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> RecordKey {
        RecordKey::new(&i.to_be_bytes())
    }

    #[test]
    fn one_peer_fills_a_quarter_and_peers_three_quarters_leaving_room_for_our_own() {
        let mut q = ProviderQuota::new(100);
        let now = Instant::now();
        let all = |_: &RecordKey, _: &PeerId| true;
        let junk = PeerId::random();
        for i in 0..25 {
            q.admit(&key(i), junk, now, all).unwrap();
        }
        assert_eq!(q.admit(&key(25), junk, now, all), Err(PEER_QUOTA));
        // Its announcements again are no new keys.
        assert_eq!(q.admit(&key(3), junk, now, all), Ok(()));
        let sybils: Vec<PeerId> = (0..3).map(|_| PeerId::random()).collect();
        let mut next = 100;
        for s in &sybils {
            for _ in 0..25 {
                let _ = q.admit(&key(next), *s, now, all);
                next += 1;
            }
        }
        assert_eq!(q.keys_admitted(), 75, "peers' keys stop at three quarters");
        assert_eq!(
            q.admit(&key(9_999), PeerId::random(), now, all),
            Err(NO_ROOM)
        );
        // A known key takes one more provider, room or not.
        assert_eq!(q.admit(&key(0), PeerId::random(), now, all), Ok(()));
    }

    #[test]
    fn what_the_store_let_expire_is_forgotten_at_most_every_ten_seconds() {
        let mut q = ProviderQuota::new(8);
        let now = Instant::now();
        let peer = PeerId::random();
        q.admit(&key(1), peer, now, |_, _| true).unwrap();
        q.admit(&key(2), peer, now, |_, _| true).unwrap();
        // The store let both expire: the quota learns it when it is full.
        let gone = |_: &RecordKey, _: &PeerId| false;
        assert_eq!(q.admit(&key(3), peer, now, gone), Ok(()));
        assert_eq!(q.keys_admitted(), 1);
        q.admit(&key(4), peer, now, gone).unwrap();
        // Full again, and too soon to look again.
        assert_eq!(q.admit(&key(5), peer, now, gone), Err(PEER_QUOTA));
        assert_eq!(q.admit(&key(5), peer, now + RECONCILE_EVERY, gone), Ok(()));
    }
}
