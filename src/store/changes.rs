//! Change feeds: how something outside the store that keeps its own view
//! of the agents (the registry's vector index) learns which ones changed.
//!
//! A feed is a set of agent ordinals, marked after each committed write
//! (descriptor or tombstone) and taken whole by its follower, which reads
//! each agent's *current* compact record, as the text index's writer
//! reads the current record: the order of the marks does not matter, a
//! burst of writes to one agent is one mark, and the set is bounded by the
//! ordinals the store has given out, so nothing is dropped and a writer
//! never waits for a follower (a mark is a bitmap insert under a lock
//! nobody holds for longer than a swap).
//!
//! A feed made before a follower reads the store whole misses nothing:
//! what changes during that read is marked and read again after it.

use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock, Weak};
use std::time::Duration;

use roaring::RoaringBitmap;

/// The ordinals of the agents changed since the follower last took them.
/// Dropping it unregisters it.
#[derive(Debug)]
pub struct ChangeFeed {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct State {
    marked: RoaringBitmap,
    closed: bool,
}

impl ChangeFeed {
    /// Waits until an agent is marked, the feed is closed or `timeout`
    /// passes, and takes what is marked (empty on a timeout; once closed,
    /// what was marked before, at once).
    pub fn take(&self, timeout: Duration) -> RoaringBitmap {
        let state = self
            .shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (mut state, _) = self
            .shared
            .wake
            .wait_timeout_while(state, timeout, |s| s.marked.is_empty() && !s.closed)
            .unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut state.marked)
    }

    /// Wakes a follower waiting in [`ChangeFeed::take`] and makes every
    /// later `take` return at once: for a follower's shutdown.
    pub fn close(&self) {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .closed = true;
        self.shared.wake.notify_all();
    }

    /// Whether [`ChangeFeed::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .closed
    }
}

/// The store's feeds.
#[derive(Debug, Default)]
pub(super) struct Feeds {
    list: RwLock<Vec<Weak<Shared>>>,
}

impl Feeds {
    /// A new feed, marked from now on.
    pub(super) fn subscribe(&self) -> ChangeFeed {
        let shared = Arc::new(Shared::default());
        let mut list = self.list.write().unwrap_or_else(PoisonError::into_inner);
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(&shared));
        ChangeFeed { shared }
    }

    /// Marks `ord` in every live feed.
    pub(super) fn mark(&self, ord: u32) {
        let list = self.list.read().unwrap_or_else(PoisonError::into_inner);
        for feed in list.iter().filter_map(Weak::upgrade) {
            let mut state = feed.state.lock().unwrap_or_else(PoisonError::into_inner);
            if state.marked.insert(ord) {
                feed.wake.notify_one();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn marks_are_taken_once_each_and_a_dropped_feed_is_forgotten() {
        let feeds = Feeds::default();
        let a = feeds.subscribe();
        feeds.mark(3);
        feeds.mark(3);
        feeds.mark(7);
        let b = feeds.subscribe();
        feeds.mark(9);
        assert_eq!(a.take(Duration::ZERO).iter().collect::<Vec<_>>(), [3, 7, 9]);
        assert_eq!(b.take(Duration::ZERO).iter().collect::<Vec<_>>(), [9]);
        assert!(a.take(Duration::ZERO).is_empty());
        drop(b);
        feeds.mark(1);
        assert_eq!(a.take(Duration::ZERO).iter().collect::<Vec<_>>(), [1]);
        let _c = feeds.subscribe();
        assert_eq!(feeds.list.read().unwrap().len(), 2, "b's slot is gone");
    }

    #[test]
    fn a_waiting_follower_wakes_at_a_mark_or_a_close() {
        let feeds = Arc::new(Feeds::default());
        let feed = Arc::new(feeds.subscribe());
        let waiter = {
            let feed = feed.clone();
            std::thread::spawn(move || feed.take(Duration::from_secs(60)))
        };
        feeds.mark(5);
        assert_eq!(waiter.join().unwrap().iter().collect::<Vec<_>>(), [5]);

        let waiter = {
            let feed = feed.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                (feed.take(Duration::from_secs(60)), start.elapsed())
            })
        };
        feed.close();
        let (taken, waited) = waiter.join().unwrap();
        assert!(taken.is_empty());
        assert!(waited < Duration::from_secs(60), "woken by the close");
        assert!(feed.is_closed());
    }
}
