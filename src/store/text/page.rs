//! One page of a text search in one pass over the segments: the best
//! `limit` live hits by score, ties by each agent's `order` column.
//!
//! tantivy's `TopDocs` offers a hit only when it beats the page's current
//! last score, so among hits of equal score the page keeps those it met
//! first, in the order of the segments (which merges change). Here the
//! threshold handed back to the scorer sits just below the last score:
//! block-max WAND still skips every block that cannot reach the page, and a
//! hit tying the last place is offered and judged by its `order`. A tie
//! longer than [`MAX_TIE_OFFERS`] is cut where the index's order leaves
//! it, as tantivy would.

use std::collections::BinaryHeap;

use tantivy::columnar::Column;
use tantivy::query::{EnableScoring, Query};
use tantivy::{DocAddress, DocId, Score, Searcher};

use super::text_err;
use crate::store::StoreError;

/// Most hits tying the page's last place that one search judges by their
/// order; past it the threshold is the last score itself. Each is scored
/// and blocks holding only tied hits are not skipped: at 100k agents a cap
/// of 1024 cost about 0.1 ms per search over 64 (benches/store.rs,
/// section e), and 64 judges as long a tie as the former second fetch.
pub(super) const MAX_TIE_OFFERS: usize = 64;
/// Most expired hits one search passes over (the index drops a record when
/// the store replaces it, and the expiry sweep removes the rest, so they
/// are few); past it the page is what was found.
pub(super) const MAX_EXPIRED: usize = 10_000;

/// A hit on the page.
#[derive(Clone, Copy, Debug)]
pub(super) struct Hit {
    pub(super) score: Score,
    /// The agent's place among hits of equal score.
    pub(super) order: u64,
    pub(super) address: DocAddress,
}

impl Hit {
    /// `Less` when `self` ranks above `other`: higher score, then lower
    /// order (then the address, so the order is total).
    fn rank(&self, other: &Self) -> std::cmp::Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then(self.order.cmp(&other.order))
            .then(self.address.cmp(&other.address))
    }
}

/// In the heap the worst hit is the greatest, so it is the one on top.
impl Ord for Hit {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.rank(other)
    }
}
impl PartialOrd for Hit {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Hit {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for Hit {}

/// The page being filled: at most `limit` hits, the worst on top.
struct Page {
    limit: usize,
    heap: BinaryHeap<Hit>,
    tie_offers: usize,
}

impl Page {
    fn new(limit: usize) -> Self {
        Self {
            limit,
            heap: BinaryHeap::with_capacity(limit.saturating_add(1)),
            tie_offers: 0,
        }
    }

    /// Offers a hit; returns the threshold a hit must exceed to be offered
    /// next.
    fn offer(&mut self, hit: Hit) -> Score {
        if self.heap.len() < self.limit {
            self.heap.push(hit);
        } else if let Some(mut worst) = self.heap.peek_mut() {
            if hit.score == worst.score {
                self.tie_offers += 1;
            }
            if hit.rank(&worst).is_lt() {
                *worst = hit;
            }
        }
        self.threshold()
    }

    fn threshold(&self) -> Score {
        match self.heap.peek() {
            Some(worst) if self.heap.len() == self.limit => {
                if self.tie_offers < MAX_TIE_OFFERS {
                    worst.score.next_down()
                } else {
                    worst.score
                }
            }
            _ => Score::MIN,
        }
    }
}

/// The best `limit` hits of `query` whose `expires` column is past `now`,
/// deleted documents left out, best first.
///
/// # Errors
/// [`StoreError::Text`] when tantivy cannot score the query.
pub(super) fn top(
    searcher: &Searcher,
    query: &dyn Query,
    limit: usize,
    now: u64,
    expiry: &[Column<u64>],
    order: &[Column<u64>],
) -> Result<Vec<Hit>, StoreError> {
    let weight = query
        .weight(EnableScoring::enabled_from_searcher(searcher))
        .map_err(text_err)?;
    let mut page = Page::new(limit);
    let mut expired = 0usize;
    for (ord, reader) in searcher.segment_readers().iter().enumerate() {
        if expired >= MAX_EXPIRED {
            break;
        }
        let alive = reader.alive_bitset();
        let threshold = page.threshold();
        let segment = u32::try_from(ord).expect("fewer than 2^32 segments");
        weight
            .for_each_pruning(threshold, reader, &mut |doc: DocId, score: Score| {
                if alive.is_some_and(|a| a.is_deleted(doc)) {
                    return page.threshold();
                }
                if expiry[ord].first(doc).unwrap_or(0) <= now {
                    expired += 1;
                    // Nothing more is offered once too many have expired.
                    return if expired >= MAX_EXPIRED {
                        Score::MAX
                    } else {
                        page.threshold()
                    };
                }
                page.offer(Hit {
                    score,
                    order: order[ord].first(doc).unwrap_or(0),
                    address: DocAddress::new(segment, doc),
                })
            })
            .map_err(text_err)?;
    }
    let mut hits = page.heap.into_vec();
    hits.sort_by(Hit::rank);
    Ok(hits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(score: Score, order: u64, doc: DocId) -> Hit {
        Hit {
            score,
            order,
            address: DocAddress::new(0, doc),
        }
    }

    #[test]
    fn a_tie_at_the_last_place_is_settled_by_order_whatever_comes_first() {
        let mut p = Page::new(2);
        assert_eq!(p.offer(hit(3.0, 9, 0)), Score::MIN, "not full yet");
        // Full: a hit tying the last score is still offered.
        let t = p.offer(hit(1.0, 7, 1));
        assert!(t < 1.0 && t > 0.99, "{t}");
        p.offer(hit(1.0, 2, 2));
        p.offer(hit(1.0, 5, 3));
        let mut kept = p.heap.into_vec();
        kept.sort_by(Hit::rank);
        let orders: Vec<u64> = kept.iter().map(|h| h.order).collect();
        assert_eq!(orders, vec![9, 2]);
    }

    #[test]
    fn a_long_tie_stops_being_offered() {
        let mut p = Page::new(1);
        p.offer(hit(1.0, u64::MAX, 0));
        let mut last = 0.0;
        for i in 0..=MAX_TIE_OFFERS {
            last = p.offer(hit(1.0, u64::MAX - 1 - i as u64, i as DocId + 1));
        }
        assert_eq!(last, 1.0, "past the cap the threshold is the last score");
        assert_eq!(
            p.heap.peek().unwrap().order,
            u64::MAX - 1 - MAX_TIE_OFFERS as u64
        );
    }

    #[test]
    fn a_better_score_replaces_the_worst_and_raises_the_threshold() {
        let mut p = Page::new(1);
        p.offer(hit(1.0, 0, 0));
        let t = p.offer(hit(2.0, 9, 1));
        assert!(t > 1.9 && t < 2.0, "{t}");
        assert_eq!(p.heap.peek().unwrap().order, 9);
    }
}
