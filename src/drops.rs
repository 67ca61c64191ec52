//! What a bounded queue drops, counted, and a warning of it at most once
//! an interval, with the count since the last one: a burst (a bulk import
//! into a running node, or on a node alone) logs one line per interval,
//! not one per item. Used by the issuer's outbox and the mesh's records
//! kept for gossip.

use std::time::Duration;

use tokio::time::Instant;

/// The drops of one queue and when they were last warned of.
#[derive(Debug)]
pub struct Drops {
    every: Duration,
    total: u64,
    since_warning: u64,
    warned_at: Option<Instant>,
}

impl Drops {
    /// No drops yet; warnings at most every `every`.
    pub const fn new(every: Duration) -> Self {
        Self {
            every,
            total: 0,
            since_warning: 0,
            warned_at: None,
        }
    }

    /// `n` more items dropped.
    pub fn add(&mut self, n: u64) {
        self.total += n;
        self.since_warning += n;
    }

    /// Items dropped since this was made.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The items dropped since the last warning, when there are some and
    /// that warning is at least the interval old (or there was none): the
    /// caller warns with the count now.
    pub fn to_warn(&mut self, now: Instant) -> Option<u64> {
        let soon = self
            .warned_at
            .is_some_and(|at| now.saturating_duration_since(at) < self.every);
        if self.since_warning == 0 || soon {
            return None;
        }
        self.warned_at = Some(now);
        Some(std::mem::take(&mut self.since_warning))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn drops_are_warned_of_at_most_once_an_interval() {
        let every = Duration::from_secs(10);
        let mut d = Drops::new(every);
        let t0 = Instant::now();
        assert_eq!(d.to_warn(t0), None, "nothing dropped");
        d.add(3);
        assert_eq!(d.to_warn(t0), Some(3));
        d.add(1);
        assert_eq!(d.to_warn(t0 + Duration::from_secs(1)), None, "too soon");
        assert_eq!(d.to_warn(t0 + every), Some(1));
        assert_eq!(d.to_warn(t0 + 3 * every), None, "no new drop");
        assert_eq!(d.total(), 4);
    }
}
