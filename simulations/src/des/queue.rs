//! The event queue: a binary heap of (virtual time in µs, insertion
//! sequence, event). Ties break by insertion order, so a run is a pure
//! function of the scenario and the seed.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Item<E> {
    at: u64,
    seq: u64,
    ev: E,
}

impl<E> PartialEq for Item<E> {
    fn eq(&self, o: &Self) -> bool {
        self.at == o.at && self.seq == o.seq
    }
}
impl<E> Eq for Item<E> {}
impl<E> PartialOrd for Item<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Item<E> {
    // Reversed: the heap pops the earliest first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// Events ordered by time, then by when they were scheduled.
pub struct Queue<E> {
    heap: BinaryHeap<Item<E>>,
    seq: u64,
    popped: u64,
}

impl<E> Default for Queue<E> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            seq: 0,
            popped: 0,
        }
    }
}

impl<E> Queue<E> {
    /// Schedules `ev` at `at` µs.
    pub fn push(&mut self, at: u64, ev: E) {
        self.seq += 1;
        self.heap.push(Item {
            at,
            seq: self.seq,
            ev,
        });
    }

    /// The earliest event.
    pub fn pop(&mut self) -> Option<(u64, E)> {
        let item = self.heap.pop()?;
        self.popped += 1;
        Some((item.at, item.ev))
    }

    /// Events processed so far.
    pub fn processed(&self) -> u64 {
        self.popped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_then_fifo() {
        let mut q = Queue::default();
        q.push(5, 'a');
        q.push(1, 'b');
        q.push(5, 'c');
        q.push(0, 'd');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['d', 'b', 'a', 'c']);
    }
}
