//! Where the recrawl scheduler reads the time: the system clock in the
//! node, a [`ManualClock`] that moves only when told in tests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Where the scheduler reads the time: Unix seconds.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now, Unix seconds.
    fn now(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> u64 {
        crate::record::unix_now()
    }
}

/// A clock that moves only when told (tests, simulations).
#[derive(Debug)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock reading `now`.
    pub fn new(now: u64) -> Self {
        Self(AtomicU64::new(now))
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_secs(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}
