//! Records that could not be gossiped when they were issued, because no
//! peer was known to subscribe to the records topic: a node that has
//! just started (its peers' subscriptions not yet exchanged) or is cut
//! off. gossipsub refuses such a publish (`NoPeersSubscribedToTopic`)
//! and keeps nothing, and nothing else sends a new record to every node:
//! a tombstone issued then would leave every node that stores the agent
//! (replication `"all"`) serving it until its record expires. So the loop
//! keeps them here, in issue order, and gossips them when a peer
//! subscribes to the topic ([`Unsent::take`]). Bounded in count
//! ([`MAX_UNSENT`], the oldest dropped first) and in age
//! ([`UNSENT_FOR`]: past it a record is not news, and the DHT's
//! republication still carries it).
//!
//! This file owns no I/O: the loop pushes, takes and publishes.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// Most records kept (one bulk registration on a node alone would
/// otherwise grow this without bound).
pub(super) const MAX_UNSENT: usize = 1024;

/// How long a record is kept for gossip.
pub(super) const UNSENT_FOR: Duration = Duration::from_secs(600);

/// The records waiting for a subscribed peer, oldest first.
#[derive(Debug, Default)]
pub(super) struct Unsent {
    records: VecDeque<(Instant, Vec<u8>)>,
    dropped: u64,
}

impl Unsent {
    /// Keeps `record`, issued at `now`; drops the oldest kept record when
    /// [`MAX_UNSENT`] are already kept.
    pub(super) fn push(&mut self, now: Instant, record: Vec<u8>) {
        if self.records.len() >= MAX_UNSENT {
            self.records.pop_front();
            self.dropped += 1;
        }
        self.records.push_back((now, record));
    }

    /// Every kept record younger than [`UNSENT_FOR`] at `now`, oldest
    /// first; the list is left empty (what still cannot be sent is pushed
    /// again by the caller, with its first time).
    pub(super) fn take(&mut self, now: Instant) -> Vec<(Instant, Vec<u8>)> {
        let all = std::mem::take(&mut self.records);
        let (fresh, stale): (Vec<_>, Vec<_>) = all
            .into_iter()
            .partition(|(at, _)| now.saturating_duration_since(*at) < UNSENT_FOR);
        self.dropped += stale.len() as u64;
        fresh
    }

    /// Records kept now.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.records.len()
    }

    /// Nothing is kept.
    pub(super) fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Records dropped, by the bound or by age, since the loop started.
    pub(super) fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn records_come_back_in_issue_order_and_only_once() {
        let mut u = Unsent::default();
        let t0 = Instant::now();
        for i in 0..3u8 {
            u.push(t0, vec![i]);
        }
        let got: Vec<Vec<u8>> = u.take(t0).into_iter().map(|(_, r)| r).collect();
        assert_eq!(got, [vec![0], vec![1], vec![2]]);
        assert!(u.take(t0).is_empty());
        assert_eq!(u.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_oldest_go_first_past_the_bound_and_all_past_the_age() {
        let mut u = Unsent::default();
        let t0 = Instant::now();
        for i in 0..=MAX_UNSENT {
            u.push(t0, (i as u32).to_be_bytes().to_vec());
        }
        assert_eq!(u.len(), MAX_UNSENT);
        assert_eq!(u.dropped(), 1);
        let later = t0 + Duration::from_secs(1);
        u.push(later, b"new".to_vec());
        // Past the age, only the record issued later is left.
        let kept = u.take(t0 + UNSENT_FOR);
        assert_eq!(kept, [(later, b"new".to_vec())]);
        assert_eq!(u.dropped(), 1 + MAX_UNSENT as u64);
    }
}
