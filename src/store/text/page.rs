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
//!
//! A filtered search ([`top_kept`]) reads the filter into a set of
//! documents per segment first, then ranks inside it in the way the
//! filter's density suits.

use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use tantivy::columnar::Column;
use tantivy::index::SegmentId;
use tantivy::query::{BitSetDocSet, BooleanQuery, EnableScoring, Query};
use tantivy::{BitSet, DocAddress, DocId, DocSet, Score, Searcher, TERMINATED};

use super::schema::text_err;
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

/// Each segment's expiry and order columns, and the time expiry is
/// judged against (Unix seconds).
pub(super) struct Columns<'a> {
    pub(super) now: u64,
    pub(super) expiry: &'a [Column<u64>],
    pub(super) order: &'a [Column<u64>],
}

/// The page being filled across the segments, with the expired hits
/// passed over so far.
struct Filling<'a> {
    page: Page,
    columns: &'a Columns<'a>,
    expired: usize,
}

impl Filling<'_> {
    fn done(&self) -> bool {
        self.expired >= MAX_EXPIRED
    }

    /// Offers a live hit of segment `ord`; returns the threshold a hit
    /// must exceed to be offered next.
    fn offer(&mut self, ord: usize, doc: DocId, score: Score) -> Score {
        if self.columns.expiry[ord].first(doc).unwrap_or(0) <= self.columns.now {
            self.expired += 1;
            // Nothing more is offered once too many have expired.
            return if self.done() {
                Score::MAX
            } else {
                self.page.threshold()
            };
        }
        let segment = u32::try_from(ord).expect("fewer than 2^32 segments");
        self.page.offer(Hit {
            score,
            order: self.columns.order[ord].first(doc).unwrap_or(0),
            address: DocAddress::new(segment, doc),
        })
    }

    fn hits(self) -> Vec<Hit> {
        let mut hits = self.page.heap.into_vec();
        hits.sort_by(Hit::rank);
        hits
    }
}

/// The best `limit` hits of `query` whose `expires` column is past
/// `columns.now`, held by `keep` when given, deleted documents left out,
/// best first.
///
/// # Errors
/// [`StoreError::Text`] when tantivy cannot score the query.
pub(super) fn top(
    searcher: &Searcher,
    query: &dyn Query,
    keep: Option<&Keep>,
    limit: usize,
    columns: &Columns<'_>,
) -> Result<Vec<Hit>, StoreError> {
    let weight = query
        .weight(EnableScoring::enabled_from_searcher(searcher))
        .map_err(text_err)?;
    let mut filling = Filling {
        page: Page::new(limit),
        columns,
        expired: 0,
    };
    for (ord, reader) in searcher.segment_readers().iter().enumerate() {
        if filling.done() {
            break;
        }
        let alive = reader.alive_bitset();
        let threshold = filling.page.threshold();
        weight
            .for_each_pruning(threshold, reader, &mut |doc: DocId, score: Score| {
                if alive.is_some_and(|a| a.is_deleted(doc))
                    || keep.is_some_and(|k| !k.sets[ord].contains(doc))
                {
                    return filling.page.threshold();
                }
                filling.offer(ord, doc, score)
            })
            .map_err(text_err)?;
    }
    Ok(filling.hits())
}

/// The documents a filter keeps, one set per segment of the searcher
/// (deleted documents included: the ranking leaves them out).
pub(super) struct Keep {
    sets: Vec<Arc<BitSet>>,
}

/// Most bytes the sets [`KeepCache`] holds take, all told: a set is a
/// bit per document of its segment (125 KiB for a segment of a million),
/// so at a million agents this holds a hundred filters' worth or more.
const KEEP_CACHE_BYTES: usize = 16 << 20;

/// The filter sets read lately, by segment and filter, as Lucene's query
/// cache keeps them: a segment's postings never change (a delete only
/// marks it in the segment's alive set, which the ranking reads apart), so
/// a set stays right for as long as its segment exists, across commits;
/// a set of a segment merged away just ages out. The least recently used
/// set goes first.
#[derive(Default)]
pub(super) struct KeepCache {
    sets: std::sync::Mutex<VecDeque<(SegmentId, String, Arc<BitSet>)>>,
}

/// About what a set takes in memory.
fn set_bytes(set: &BitSet) -> usize {
    set.max_value() as usize / 8 + std::mem::size_of::<BitSet>()
}

impl KeepCache {
    fn get(&self, segment: SegmentId, filter: &str) -> Option<Arc<BitSet>> {
        let mut sets = self.sets.lock().unwrap_or_else(|e| e.into_inner());
        let at = sets
            .iter()
            .position(|(id, f, _)| *id == segment && f == filter)?;
        let entry = sets.remove(at)?;
        let set = Arc::clone(&entry.2);
        sets.push_front(entry);
        Some(set)
    }

    fn put(&self, segment: SegmentId, filter: &str, set: Arc<BitSet>) {
        let mut sets = self.sets.lock().unwrap_or_else(|e| e.into_inner());
        sets.retain(|(id, f, _)| !(*id == segment && f == filter));
        sets.push_front((segment, filter.to_owned(), set));
        let mut bytes: usize = sets.iter().map(|(_, _, s)| set_bytes(s)).sum();
        while bytes > KEEP_CACHE_BYTES && sets.len() > 1 {
            if let Some((_, _, oldest)) = sets.pop_back() {
                bytes -= set_bytes(&oldest);
            }
        }
    }
}

impl Keep {
    /// The documents matching `filter` (its scores unused), segment by
    /// segment: one pass over the filter's postings, for the segments
    /// `cache` holds no set of under `key` (which names the filter, and
    /// only it).
    ///
    /// # Errors
    /// [`StoreError::Text`] when tantivy cannot read the filter.
    pub(super) fn of(
        searcher: &Searcher,
        filter: &dyn Query,
        key: &str,
        cache: &KeepCache,
    ) -> Result<Self, StoreError> {
        let weight = filter
            .weight(EnableScoring::disabled_from_searcher(searcher))
            .map_err(text_err)?;
        let mut sets = Vec::with_capacity(searcher.segment_readers().len());
        for reader in searcher.segment_readers() {
            let segment = reader.segment_id();
            if let Some(set) = cache.get(segment, key) {
                sets.push(set);
                continue;
            }
            let mut set = BitSet::with_max_value(reader.max_doc());
            weight
                .for_each_no_score(reader, &mut |docs: &[DocId]| {
                    for &d in docs {
                        set.insert(d);
                    }
                })
                .map_err(text_err)?;
            let set = Arc::new(set);
            cache.put(segment, key, Arc::clone(&set));
            sets.push(set);
        }
        Ok(Self { sets })
    }

    /// The documents kept, over every segment.
    fn len(&self) -> u64 {
        self.sets.iter().map(|s| s.len() as u64).sum()
    }
}

/// How much dearer a seek into a term's postings is than a step along
/// them: the kept documents are visited one by one (each term seeked to
/// each) when there are fewer than the ranked terms' postings divided by
/// this.
const SEEK_COST: u64 = 16;
/// A filter keeping at least one document in this many leaves the
/// ranking to block-max WAND over the union, each hit checked against the
/// filter: the page fills from kept documents about as fast as without a
/// filter, and the threshold rises as usual. A sparser filter would leave
/// the threshold low while WAND steps through hits it then drops.
const DENSE_SHARE: u64 = 4;

/// The best `limit` hits among the documents `keep` holds that match at
/// least one of `clauses` (each scored on its own, the scores summed, as
/// their union would), live and unexpired, best first. How, by the share
/// of the index the filter keeps and `postings` (the clauses' document
/// frequencies summed): a dense filter through block-max WAND over the
/// union; a few kept documents one by one, each term seeked to each; else
/// term by term along the postings, the kept documents scored. Measured
/// at a million agents (BENCHMARKS.md, section 8), one tantivy query with
/// the filter as a conjunction was slower for the bench's filter.
///
/// # Errors
/// [`StoreError::Text`] when tantivy cannot score a clause.
pub(super) fn top_kept(
    searcher: &Searcher,
    clauses: &[Box<dyn Query>],
    keep: Keep,
    postings: u64,
    limit: usize,
    columns: &Columns<'_>,
) -> Result<Vec<Hit>, StoreError> {
    let kept = keep.len();
    if kept.saturating_mul(DENSE_SHARE) >= searcher.num_docs() {
        let union = BooleanQuery::union(clauses.iter().map(|c| c.box_clone()).collect());
        return top(searcher, &union, Some(&keep), limit, columns);
    }
    let scoring = EnableScoring::enabled_from_searcher(searcher);
    let weights = clauses
        .iter()
        .map(|c| c.weight(scoring))
        .collect::<Result<Vec<_>, _>>()
        .map_err(text_err)?;
    let by_document = kept.saturating_mul(weights.len() as u64) <= postings / SEEK_COST;
    let mut filling = Filling {
        page: Page::new(limit),
        columns,
        expired: 0,
    };
    SCORES.with_borrow_mut(|scores| {
        fill_kept(searcher, &weights, keep, by_document, &mut filling, scores)
    })?;
    Ok(filling.hits())
}

thread_local! {
    /// Each thread's score array (4 bytes per document of the largest
    /// segment it ranked in), kept between searches: a fresh one per search
    /// would cost the kernel's zeroing of a page per 1,024 documents.
    static SCORES: std::cell::RefCell<Scores> = std::cell::RefCell::default();
}

/// [`top_kept`]'s walk, segment by segment, into `filling`.
fn fill_kept(
    searcher: &Searcher,
    weights: &[Box<dyn tantivy::query::Weight>],
    keep: Keep,
    by_document: bool,
    filling: &mut Filling<'_>,
    scores: &mut Scores,
) -> Result<(), StoreError> {
    let segments = searcher.segment_readers().iter().zip(keep.sets);
    for (ord, (reader, set)) in segments.enumerate() {
        if filling.done() {
            break;
        }
        if set.len() == 0 {
            continue;
        }
        let mut scorers = weights
            .iter()
            .map(|w| w.scorer(reader, 1.0))
            .collect::<Result<Vec<_>, _>>()
            .map_err(text_err)?;
        scores.clear(reader.max_doc());
        if by_document {
            let mut kept = BitSetDocSet::from(BitSet::clone(&set));
            let mut d = kept.doc();
            while d != TERMINATED {
                for s in &mut scorers {
                    if s.doc() < d {
                        s.seek(d);
                    }
                    if s.doc() == d {
                        scores.add(d, s.score());
                    }
                }
                d = kept.advance();
            }
        } else {
            for s in &mut scorers {
                let mut d = s.doc();
                while d != TERMINATED {
                    if set.contains(d) {
                        scores.add(d, s.score());
                    }
                    d = s.advance();
                }
            }
        }
        let alive = reader.alive_bitset();
        // In document order, as the unfiltered walk offers them: a long tie
        // keeps the same first hits either way.
        for d in scores.touched() {
            if filling.done() {
                break;
            }
            if alive.is_some_and(|a| a.is_deleted(d)) {
                continue;
            }
            let score = scores.sum[d as usize];
            if score > filling.page.threshold() {
                filling.offer(ord, d, score);
            }
        }
    }
    Ok(())
}

/// Scores summed per document of one segment: a dense array, and a bit
/// per document written, so that the written documents come back in
/// document order, each once, without sorting the tens of thousands a
/// common word touches (the sort showed in profiles of filtered searches
/// at a million agents; BENCHMARKS.md section 8).
#[derive(Default)]
struct Scores {
    sum: Vec<Score>,
    touched: Vec<u64>,
}

impl Scores {
    /// Zeroes what the last segment wrote and sizes for one of `max_doc`.
    fn clear(&mut self, max_doc: DocId) {
        for d in set_bits(&self.touched) {
            self.sum[d as usize] = 0.0;
        }
        self.touched.fill(0);
        self.sum.resize(max_doc as usize, 0.0);
        self.touched.resize((max_doc as usize).div_ceil(64), 0);
    }

    fn add(&mut self, doc: DocId, score: Score) {
        self.sum[doc as usize] += score;
        self.touched[doc as usize / 64] |= 1 << (doc % 64);
    }

    /// The documents written since the last clear, in document order, each
    /// once (a clause scoring 0 included).
    fn touched(&self) -> impl Iterator<Item = DocId> + '_ {
        set_bits(&self.touched)
    }
}

/// The positions of the bits set in `words` (64 per word), lowest first.
fn set_bits(words: &[u64]) -> impl Iterator<Item = DocId> + '_ {
    words.iter().enumerate().flat_map(|(i, &word)| {
        let base = u32::try_from(i * 64).expect("a segment holds fewer than 2^32 documents");
        std::iter::successors((word != 0).then_some(word), |w| {
            let rest = w & (w - 1);
            (rest != 0).then_some(rest)
        })
        .map(move |w| base + w.trailing_zeros())
    })
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
    fn the_filter_set_cache_keeps_the_latest_sets_by_segment_and_filter() {
        let cache = KeepCache::default();
        let segments: Vec<SegmentId> = (0..6).map(|_| SegmentId::generate_random()).collect();
        // Sets of a quarter of the cache's bytes each, less a little: four fit.
        let quarter = u32::try_from(KEEP_CACHE_BYTES * 8 / 4).unwrap() - 8 * 1024;
        let set = |n: u32| {
            let mut s = BitSet::with_max_value(quarter);
            s.insert(n);
            Arc::new(s)
        };
        let held = |cache: &KeepCache| cache.sets.lock().unwrap().len();
        cache.put(segments[0], "a", set(1));
        cache.put(segments[0], "b", set(2));
        // By segment and filter both.
        assert!(cache.get(segments[0], "a").unwrap().contains(1));
        assert!(cache.get(segments[0], "b").unwrap().contains(2));
        assert!(cache.get(segments[1], "a").is_none());
        // Read last: (0, "a") after (0, "b").
        assert!(cache.get(segments[0], "a").is_some());
        cache.put(segments[1], "a", set(3));
        cache.put(segments[2], "a", set(3));
        assert_eq!(held(&cache), 4);
        // Over the bytes: the least recently used goes first.
        cache.put(segments[3], "a", set(3));
        assert_eq!(held(&cache), 4);
        assert!(cache.get(segments[0], "b").is_none(), "the oldest went");
        assert!(cache.get(segments[0], "a").is_some());
        cache.put(segments[4], "a", set(3));
        assert!(
            cache.get(segments[1], "a").is_none(),
            "then the next oldest"
        );
        assert!(cache.get(segments[0], "a").is_some());
        // A set put again replaces the one held.
        cache.put(segments[0], "a", set(5));
        assert!(cache.get(segments[0], "a").unwrap().contains(5));
        assert_eq!(held(&cache), 4);
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

    #[test]
    fn written_documents_come_back_in_order_once_each_and_a_clear_leaves_nothing() {
        let mut scores = Scores::default();
        scores.clear(200);
        // Two clauses, the second out of document order and scoring one
        // document 0, as a walk posting list after posting list writes them.
        for d in [3, 64, 130, 199] {
            scores.add(d, 1.0);
        }
        for d in [150, 0, 64, 3] {
            scores.add(d, if d == 150 { 0.0 } else { 0.5 });
        }
        assert_eq!(
            scores.touched().collect::<Vec<_>>(),
            [0, 3, 64, 130, 150, 199]
        );
        assert_eq!(scores.sum[64], 1.5);
        assert_eq!(scores.sum[150], 0.0);
        // A smaller segment next, then a larger one: nothing carries over.
        scores.clear(100);
        assert_eq!(scores.touched().count(), 0);
        scores.add(99, 2.0);
        assert_eq!(scores.touched().collect::<Vec<_>>(), [99]);
        scores.clear(300);
        assert_eq!(scores.touched().count(), 0);
        assert!(scores.sum.iter().all(|&s| s == 0.0));
        assert_eq!(scores.sum.len(), 300);
    }
}
