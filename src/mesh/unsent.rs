//! Records that could not be gossiped when they were issued, because no
//! peer was known to subscribe to the records topic: a node that has
//! just started (its peers' subscriptions not yet exchanged) or is cut
//! off. gossipsub refuses such a publish (`NoPeersSubscribedToTopic`)
//! and keeps nothing, and nothing else sends a new record to every node:
//! a tombstone issued then would leave every node that stores the agent
//! (replication `"all"`) serving it until its record expires. So the loop
//! keeps them here, in issue order, and gossips them when a peer
//! subscribes to the topic and on each tick after, a few at a time
//! ([`UNSENT_PER_TURN`]: a peer judges a bounded number of records at
//! once and ignores the rest, which gossipsub then never sends again).
//! Bounded in count
//! ([`MAX_UNSENT`], the oldest dropped first) and in age
//! ([`UNSENT_FOR`]: past it a record is not news, and the DHT's
//! republication still carries it).
//!
//! This file owns no I/O: the loop pushes, takes and publishes.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use crate::drops::Drops;

/// Most records kept (one bulk registration on a node alone would
/// otherwise grow this without bound).
pub(super) const MAX_UNSENT: usize = 1024;

/// How long a record is kept for gossip.
pub(super) const UNSENT_FOR: Duration = Duration::from_secs(600);

/// Most kept records gossiped in one turn (the loop's 500 ms tick): under
/// what a peer judges at once from one peer (half its gossip pool,
/// `mesh/quota.rs`: 24 by default).
pub(super) const UNSENT_PER_TURN: usize = 16;

/// Least time between two warnings of dropped records.
pub(super) const WARN_DROPS_EVERY: Duration = Duration::from_secs(10);

/// The records waiting for a subscribed peer, oldest first.
#[derive(Debug)]
pub(super) struct Unsent {
    records: VecDeque<(Instant, Vec<u8>)>,
    dropped: Drops,
}

impl Default for Unsent {
    fn default() -> Self {
        Self {
            records: VecDeque::new(),
            dropped: Drops::new(WARN_DROPS_EVERY),
        }
    }
}

impl Unsent {
    /// Keeps `record`, issued at `now`; drops the oldest kept record when
    /// [`MAX_UNSENT`] are already kept.
    pub(super) fn push(&mut self, now: Instant, record: Vec<u8>) {
        if self.records.len() >= MAX_UNSENT {
            self.records.pop_front();
            self.dropped.add(1);
        }
        self.records.push_back((now, record));
    }

    /// The oldest `max` kept records younger than [`UNSENT_FOR`] at
    /// `now`, oldest first, taken out of the list (older ones are
    /// dropped); what the caller still cannot send goes back with
    /// [`Unsent::put_back`].
    pub(super) fn take(&mut self, now: Instant, max: usize) -> Vec<(Instant, Vec<u8>)> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some((at, record)) = self.records.pop_front() else {
                break;
            };
            if now.saturating_duration_since(at) < UNSENT_FOR {
                out.push((at, record));
            } else {
                self.dropped.add(1);
            }
        }
        out
    }

    /// Returns records [`Unsent::take`] gave out, in the order it gave
    /// them, to the front of the list.
    pub(super) fn put_back(&mut self, records: Vec<(Instant, Vec<u8>)>) {
        for r in records.into_iter().rev() {
            self.records.push_front(r);
        }
    }

    /// Records kept now.
    pub(super) fn len(&self) -> usize {
        self.records.len()
    }

    /// Nothing is kept.
    pub(super) fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Records dropped, by the bound or by age, since the loop started.
    pub(super) fn dropped(&self) -> u64 {
        self.dropped.total()
    }

    /// Records dropped since the last warning, when it is time to warn
    /// again ([`Drops::to_warn`], at most every [`WARN_DROPS_EVERY`]).
    pub(super) fn drops_to_warn(&mut self, now: Instant) -> Option<u64> {
        self.dropped.to_warn(now)
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
        let first = u.take(t0, 2);
        assert_eq!(u.len(), 1);
        // What could not go is given back in front of the rest.
        u.put_back(first);
        let got: Vec<Vec<u8>> = u.take(t0, 10).into_iter().map(|(_, r)| r).collect();
        assert_eq!(got, [vec![0], vec![1], vec![2]]);
        assert!(u.take(t0, 10).is_empty());
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
        let kept = u.take(t0 + UNSENT_FOR, MAX_UNSENT);
        assert_eq!(kept, [(later, b"new".to_vec())]);
        assert_eq!(u.dropped(), 1 + MAX_UNSENT as u64);
    }

    #[tokio::test(start_paused = true)]
    async fn drops_are_warned_of_at_most_once_an_interval() {
        let mut u = Unsent::default();
        let t0 = Instant::now();
        assert_eq!(u.drops_to_warn(t0), None, "nothing dropped");
        for i in 0..MAX_UNSENT + 3 {
            u.push(t0, (i as u32).to_be_bytes().to_vec());
        }
        assert_eq!(u.drops_to_warn(t0), Some(3));
        u.push(t0, b"one more".to_vec());
        assert_eq!(
            u.drops_to_warn(t0 + Duration::from_secs(1)),
            None,
            "too soon"
        );
        assert_eq!(u.drops_to_warn(t0 + WARN_DROPS_EVERY), Some(1));
        assert_eq!(
            u.drops_to_warn(t0 + 3 * WARN_DROPS_EVERY),
            None,
            "no new drop"
        );
    }
}
