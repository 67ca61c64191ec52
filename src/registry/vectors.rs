//! The vector index: the meaning of every agent the store holds as a
//! descriptor, kept beside the text index when a semantic model is
//! configured, so that a query finds the agents that say what it means in
//! other words ("dictate my voice memos" and "speech to text for
//! recordings"), which the text index, ranking shared words, never offers
//! as candidates.
//!
//! It lives in memory, one row per store ordinal (`store/postings.rs`), so
//! a request's filters are the store's own bitmaps
//! ([`BlockingStore::matching`]: suspended and dropped agents left out)
//! and the index needs no copy of them:
//! - each row is the agent's unit vector quantised to one signed byte per
//!   dimension (and its scale), plus a binary code (one bit per dimension:
//!   above or below the index's centre, the mean of its rows, taken again
//!   each time they double);
//! - a query scores every allowed row by the Hamming distance of the codes
//!   (a few machine words per agent), keeps the [`RESCORE`] closest, and
//!   orders those by the quantised cosine; when the filter leaves at most
//!   [`EXACT_MAX`] agents, all of them are scored by the cosine;
//! - `dim × 1.125 + 4` bytes per *ordinal* up to the highest held (292
//!   for the 256-dimension model of `scripts/semantic-model.sh`), since
//!   ordinals are never reused: a deleted agent's row stays allocated.
//!   An agent whose text has no token the model knows has no row.
//!
//! Nothing is written to disk: the index is read from the store's compact
//! records on its own thread (at background priority) when the registry
//! gets the model, and follows the store through a [`ChangeFeed`] made
//! before that read, so a write during the read is read again after it.
//! Until the first read ends, searches use the rows read so far
//! ([`VectorIndex::ready`] says when it has). Should the thread panic,
//! the index keeps what it held, stops following the store, and says so
//! ([`VectorIndex::stopped`]: the node's `/health` and metrics). What the index finds is
//! read back from the store and checked (live, unexpired, still close
//! enough by the model's embedding of the record as it is now) before it
//! is answered, so a row a write has not reached yet can cost a candidate
//! but never answers a record's old meaning.

use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use roaring::RoaringBitmap;

use crate::store::{BlockingStore, ChangeFeed, CompactAgent, StoreError};

/// Candidates kept by the binary codes, to be ordered by the cosine.
pub(crate) const RESCORE: usize = 512;

/// A filter leaving at most this many agents is scored by the cosine
/// alone (no binary pass).
pub(crate) const EXACT_MAX: usize = 8_192;

/// Ordinals read and embedded between two takes of the table's lock.
const CHUNK: usize = 512;

/// The centre of the codes is taken again when the agents have doubled
/// since it was last taken, from this many on (computed under the table's
/// read lock, searches going on, and put under the write lock).
const RECENTRE_MIN: u64 = 1_024;

/// How long the follower waits for marks before it looks at its stop flag.
const IDLE: Duration = Duration::from_millis(500);

/// The index. Dropping it stops its thread.
pub(crate) struct VectorIndex {
    shared: Arc<Shared>,
    feed: Arc<ChangeFeed>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    table: RwLock<Table>,
    ready: AtomicBool,
    /// The follower ended by a panic: the table no longer follows the
    /// store.
    stopped: AtomicBool,
    /// The agents the table holds, as of the follower's last change (read
    /// without the table's lock, by the metrics).
    agents: AtomicU64,
}

/// The rows, by ordinal.
struct Table {
    dim: usize,
    /// `u64` words per binary code.
    words: usize,
    /// The point each code's bits are taken around: the mean of the rows
    /// (zero until the first read ends, then taken again each time they
    /// double), so that the bits split the agents rather than all lean one
    /// way.
    centre: Vec<f32>,
    codes: Vec<u64>,
    quantised: Vec<i8>,
    scales: Vec<f32>,
    present: RoaringBitmap,
}

impl Table {
    fn new(dim: usize) -> Self {
        Self {
            dim,
            words: dim.div_ceil(64),
            centre: vec![0.0; dim],
            codes: Vec::new(),
            quantised: Vec::new(),
            scales: Vec::new(),
            present: RoaringBitmap::new(),
        }
    }

    fn code(&self, v: &[f32], out: &mut [u64]) {
        code_around(&self.centre, v, out);
    }

    fn put(&mut self, ord: u32, v: &[f32]) {
        let i = ord as usize;
        if self.scales.len() <= i {
            let rows = i + 1;
            self.codes.resize(rows * self.words, 0);
            self.quantised.resize(rows * self.dim, 0);
            self.scales.resize(rows, 0.0);
        }
        let mut code = vec![0; self.words];
        self.code(v, &mut code);
        self.codes[i * self.words..(i + 1) * self.words].copy_from_slice(&code);
        let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
        for (q, x) in self.quantised[i * self.dim..(i + 1) * self.dim]
            .iter_mut()
            .zip(v)
        {
            // In -127..=127 by the choice of scale.
            *q = (x / scale).round().clamp(-127.0, 127.0) as i8;
        }
        self.scales[i] = scale;
        self.present.insert(ord);
    }

    fn remove(&mut self, ord: u32) {
        self.present.remove(ord);
    }

    /// The rows' mean, and every present row's code taken around it: the
    /// new centre and codes, computed without changing the table (under
    /// a read lock), to be put with [`Table::set_centre`].
    fn recentred(&self) -> Option<(Vec<f32>, Vec<u64>)> {
        if self.present.is_empty() {
            return None;
        }
        let mut sum = vec![0.0f64; self.dim];
        for ord in &self.present {
            let (row, scale) = self.row(ord);
            for (s, q) in sum.iter_mut().zip(row) {
                *s += f64::from(*q) * f64::from(scale);
            }
        }
        let n = self.present.len() as f64;
        let centre: Vec<f32> = sum.iter().map(|s| (s / n) as f32).collect();
        let mut codes = self.codes.clone();
        let mut v = vec![0.0f32; self.dim];
        for ord in &self.present {
            let (row, scale) = self.row(ord);
            for (x, q) in v.iter_mut().zip(row) {
                *x = f32::from(*q) * scale;
            }
            let i = ord as usize;
            code_around(
                &centre,
                &v,
                &mut codes[i * self.words..(i + 1) * self.words],
            );
        }
        Some((centre, codes))
    }

    /// Puts a centre and codes from [`Table::recentred`] (rows written
    /// since would be coded around the old centre: only the table's one
    /// writer calls the two, one after the other).
    fn set_centre(&mut self, (centre, codes): (Vec<f32>, Vec<u64>)) {
        debug_assert_eq!(codes.len(), self.codes.len(), "no row written between");
        if codes.len() == self.codes.len() {
            self.centre = centre;
            self.codes = codes;
        }
    }

    #[cfg(test)]
    fn recentre(&mut self) {
        if let Some(c) = self.recentred() {
            self.set_centre(c);
        }
    }

    fn row(&self, ord: u32) -> (&[i8], f32) {
        let i = ord as usize;
        (
            &self.quantised[i * self.dim..(i + 1) * self.dim],
            self.scales[i],
        )
    }

    fn cosine(&self, query: &[f32], ord: u32) -> f32 {
        let (row, scale) = self.row(ord);
        let dot: f32 = row.iter().zip(query).map(|(q, x)| f32::from(*q) * x).sum();
        dot * scale
    }

    fn hamming(&self, code: &[u64], ord: u32) -> u32 {
        let i = ord as usize;
        self.codes[i * self.words..(i + 1) * self.words]
            .iter()
            .zip(code)
            .map(|(a, b)| (a ^ b).count_ones())
            .sum()
    }

    /// Up to `k` of the ordinals in `allowed` closest to `query` (a unit
    /// vector), closest first, with their quantised cosines.
    fn nearest(&self, query: &[f32], allowed: &RoaringBitmap, k: usize) -> Vec<(u32, f32)> {
        if k == 0 || query.len() != self.dim {
            return Vec::new();
        }
        let candidates = allowed & &self.present;
        let pool: Vec<u32> = if candidates.len() <= EXACT_MAX as u64 {
            candidates.iter().collect()
        } else {
            let mut code = vec![0; self.words];
            self.code(query, &mut code);
            let keep = RESCORE.max(k);
            // The `keep` smallest distances (ties to the lower ordinal).
            let mut heap: BinaryHeap<(u32, u32)> = BinaryHeap::with_capacity(keep + 1);
            for ord in &candidates {
                let d = self.hamming(&code, ord);
                if heap.len() < keep {
                    heap.push((d, ord));
                } else if heap.peek().is_some_and(|top| (d, ord) < *top) {
                    heap.pop();
                    heap.push((d, ord));
                }
            }
            heap.into_iter().map(|(_, ord)| ord).collect()
        };
        let mut scored: Vec<(u32, f32)> = pool
            .into_iter()
            .map(|ord| (ord, self.cosine(query, ord)))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(k);
        scored
    }
}

/// The binary code of `v`: bit `i` set when `v[i]` is above `centre[i]`.
fn code_around(centre: &[f32], v: &[f32], out: &mut [u64]) {
    out.fill(0);
    for (i, (x, c)) in v.iter().zip(centre).enumerate() {
        if x > c {
            out[i / 64] |= 1 << (i % 64);
        }
    }
}

impl VectorIndex {
    /// Starts the index of `store`'s agents, each as `embed` makes it a
    /// vector of `dim` numbers (all zero: nothing known of it, no row):
    /// its thread reads the store, then follows it.
    pub(crate) fn start(
        store: BlockingStore,
        dim: usize,
        embed: impl Fn(&CompactAgent) -> Vec<f32> + Send + 'static,
    ) -> Self {
        let shared = Arc::new(Shared {
            table: RwLock::new(Table::new(dim)),
            ready: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            agents: AtomicU64::new(0),
        });
        // Before the read, so that nothing written during it is missed.
        let feed = Arc::new(store.change_feed());
        let follower = Follower {
            shared: shared.clone(),
            feed: feed.clone(),
            store,
            embed: Box::new(embed),
        };
        let thread = std::thread::Builder::new()
            .name("vector-index".into())
            .spawn(move || {
                crate::priority::lower_current_thread();
                let (shared, feed) = (follower.shared.clone(), follower.feed.clone());
                let run = std::panic::AssertUnwindSafe(|| follower.run());
                if std::panic::catch_unwind(run).is_err() {
                    shared.stopped.store(true, Ordering::Release);
                    // Nobody takes its marks any more.
                    feed.close();
                    tracing::error!(
                        "the vector index stopped (a panic, above): searches by meaning \
                         answer from what it held, and no longer follow the store"
                    );
                }
            })
            .expect("spawning the vector index's thread");
        Self {
            shared,
            feed,
            thread: Some(thread),
        }
    }

    /// Whether the store has been read whole once.
    pub(crate) fn ready(&self) -> bool {
        self.shared.ready.load(Ordering::Acquire)
    }

    /// Whether the index's thread ended by a panic: searches by meaning
    /// then answer from what it held, which no longer follows the store
    /// (until the node restarts).
    pub(crate) fn stopped(&self) -> bool {
        self.shared.stopped.load(Ordering::Acquire)
    }

    /// How many agents the index holds (without waiting for its lock).
    pub(crate) fn len(&self) -> u64 {
        self.shared.agents.load(Ordering::Relaxed)
    }

    /// Up to `k` ordinals of `allowed` closest to `query` (a unit vector
    /// from the same model), closest first, with their approximate
    /// cosines.
    pub(crate) fn nearest(
        &self,
        query: &[f32],
        allowed: &RoaringBitmap,
        k: usize,
    ) -> Vec<(u32, f32)> {
        self.shared.read().nearest(query, allowed, k)
    }
}

impl Shared {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        self.table.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Table> {
        self.table.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for VectorIndex {
    fn drop(&mut self) {
        self.feed.close();
        if let Some(thread) = self.thread.take() {
            // A panic in it was caught and logged there.
            let _ = thread.join();
        }
    }
}

/// The index's thread.
struct Follower {
    shared: Arc<Shared>,
    feed: Arc<ChangeFeed>,
    store: BlockingStore,
    embed: Embed,
}

/// What makes an agent a vector (the model, on the agent's text).
type Embed = Box<dyn Fn(&CompactAgent) -> Vec<f32> + Send>;

impl Follower {
    fn run(self) {
        let started = std::time::Instant::now();
        let seen = self.store.ordinals_seen();
        let mut first = 0u32;
        while first < seen {
            if self.feed.is_closed() {
                return;
            }
            let last = seen.min(first.saturating_add(CHUNK as u32));
            self.apply(first..last);
            first = last;
        }
        let mut centred_at = self.recentre();
        self.shared.ready.store(true, Ordering::Release);
        tracing::info!(
            agents = centred_at,
            seconds = started.elapsed().as_secs_f64(),
            "vector index read from the store"
        );
        loop {
            let marked = self.feed.take(IDLE);
            if self.feed.is_closed() {
                return;
            }
            let marked: Vec<u32> = marked.iter().collect();
            for chunk in marked.chunks(CHUNK) {
                if self.feed.is_closed() {
                    return;
                }
                self.apply(chunk.iter().copied());
            }
            // A centre taken over few agents is taken again as they
            // grow (a node that started empty), each time they double.
            let n = self.shared.agents.load(Ordering::Relaxed);
            if n >= RECENTRE_MIN && n >= 2 * centred_at {
                centred_at = self.recentre();
            }
        }
    }

    /// Takes the centre again (computed under the read lock, put under
    /// the write lock); answers how many agents it was taken over.
    fn recentre(&self) -> u64 {
        let (centred, n) = {
            let table = self.shared.read();
            (table.recentred(), table.present.len())
        };
        if let Some(centred) = centred {
            self.shared.write().set_centre(centred);
        }
        n
    }

    /// Reads each ordinal's compact record and puts its vector, or
    /// removes its row when it is no longer a live descriptor.
    fn apply(&self, ords: impl IntoIterator<Item = u32>) {
        let mut rows: Vec<(u32, Option<Vec<f32>>)> = Vec::new();
        let mut failed: Option<(u32, StoreError)> = None;
        for ord in ords {
            match self.store.compact_by_ordinal(ord) {
                Ok(Some(agent)) => {
                    let v = (self.embed)(&agent);
                    let known = v.iter().any(|x| *x != 0.0);
                    rows.push((ord, known.then_some(v)));
                }
                Ok(None) => rows.push((ord, None)),
                Err(e) => failed = Some((ord, e)),
            }
        }
        if let Some((ord, error)) = failed {
            // Left as it was; the agent's next write marks it again.
            tracing::warn!(ord, %error, "vector index: a compact record could not be read");
        }
        let mut table = self.shared.write();
        for (ord, v) in rows {
            match v {
                // Left as it was, rather than a row of another width.
                Some(v) if v.len() != table.dim => {
                    tracing::warn!(
                        ord,
                        width = v.len(),
                        "vector index: a vector of the wrong width"
                    );
                }
                Some(v) => table.put(ord, &v),
                None => table.remove(ord),
            }
        }
        self.shared
            .agents
            .store(table.present.len(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    /// A seeded table of `n` unit vectors of `dim` dimensions, in
    /// clusters around 200 topics that all lean one way, as text
    /// embeddings do (agents about the same thing, one language).
    fn random_table(n: u32, dim: usize, seed: u64) -> (Table, Vec<Vec<f32>>) {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let topics: Vec<Vec<f32>> = (0..200)
            .map(|_| {
                (0..dim)
                    .map(|i| if i == 0 { 1.5 } else { 0.0 } + rng.gen_range(-1.0..1.0))
                    .collect()
            })
            .collect();
        let mut table = Table::new(dim);
        let mut rows = Vec::new();
        for ord in 0..n {
            let topic = &topics[rng.gen_range(0..topics.len())];
            let v: Vec<f32> = topic.iter().map(|x| x + rng.gen_range(-0.6..0.6)).collect();
            let v = unit(&v);
            table.put(ord, &v);
            rows.push(v);
        }
        table.recentre();
        (table, rows)
    }

    fn exact(rows: &[Vec<f32>], query: &[f32], allowed: &RoaringBitmap, k: usize) -> Vec<u32> {
        let mut scored: Vec<(u32, f32)> = allowed
            .iter()
            .map(|ord| (ord, crate::semantic::dot(query, &rows[ord as usize])))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.into_iter().take(k).map(|(o, _)| o).collect()
    }

    #[test]
    fn the_binary_pass_keeps_nearly_every_true_neighbour() {
        let (table, rows) = random_table(30_000, 128, 7);
        let all: RoaringBitmap = (0..30_000).collect();
        let mut found = 0;
        let mut wanted = 0;
        for q in 0..20u32 {
            // A query near a stored row.
            let query = unit(
                &rows[(q * 997) as usize]
                    .iter()
                    .enumerate()
                    .map(|(i, x)| x + if i == q as usize { 0.2 } else { 0.0 })
                    .collect::<Vec<_>>(),
            );
            let truth = exact(&rows, &query, &all, 10);
            let got: Vec<u32> = table
                .nearest(&query, &all, 10)
                .into_iter()
                .map(|(o, _)| o)
                .collect();
            wanted += truth.len();
            found += truth.iter().filter(|o| got.contains(o)).count();
        }
        let recall = found as f64 / wanted as f64;
        assert!(recall >= 0.9, "recall@10 {recall}");
    }

    #[test]
    fn only_allowed_present_rows_are_answered_and_small_sets_exactly() {
        let (mut table, rows) = random_table(2_000, 32, 3);
        let query = rows[42].clone();
        let allowed: RoaringBitmap = (0..2_000).filter(|o| o % 2 == 0).collect();
        let got = table.nearest(&query, &allowed, 5);
        assert_eq!(got[0].0, 42, "a row is its own nearest");
        assert!((got[0].1 - 1.0).abs() < 0.02, "{}", got[0].1);
        assert_eq!(
            got.iter().map(|(o, _)| *o).collect::<Vec<_>>(),
            exact(&rows, &query, &allowed, 5),
            "under EXACT_MAX, exactly the true order"
        );
        assert!(got.iter().all(|(o, _)| o % 2 == 0));
        table.remove(42);
        assert!(table
            .nearest(&query, &allowed, 5)
            .iter()
            .all(|(o, _)| *o != 42));
        assert!(table.nearest(&query, &RoaringBitmap::new(), 5).is_empty());
        assert!(
            table.nearest(&[1.0], &allowed, 5).is_empty(),
            "another width"
        );
    }

    #[test]
    fn a_row_written_again_is_replaced() {
        let mut table = Table::new(4);
        table.put(3, &unit(&[1.0, 0.0, 0.0, 0.0]));
        table.put(3, &unit(&[0.0, 1.0, 0.0, 0.0]));
        let all: RoaringBitmap = (0..10).collect();
        let got = table.nearest(&unit(&[0.0, 1.0, 0.0, 0.0]), &all, 3);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, 3);
        assert!((got[0].1 - 1.0).abs() < 0.01);
        assert!(table.nearest(&unit(&[1.0, 0.0, 0.0, 0.0]), &all, 3)[0].1 < 0.01);
    }

    /// A store in a temporary directory, and the issuer that writes to it.
    fn store() -> (
        tempfile::TempDir,
        crate::store::Store,
        crate::issuer::Issuer,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(dir.path(), 8 << 20).unwrap();
        let key = Arc::new(ed25519_dalek::SigningKey::from_bytes(&[6u8; 32]));
        let issuer = crate::issuer::Issuer::new(store.clone(), key, Duration::from_secs(3600));
        (dir, store, issuer)
    }

    async fn issue(issuer: &crate::issuer::Issuer, id: &str, name: &str) {
        let descriptor = crate::descriptor::Descriptor {
            name: name.into(),
            ..crate::record::tests::sample_descriptor(id)
        };
        issuer
            .descriptor(crate::issuer::DescriptorIssue {
                descriptor,
                document: "{}".into(),
                evidence: crate::trust::Evidence::default(),
                origin: crate::store::Origin::Local,
                expect: crate::store::Expect::Any,
                durability: crate::issuer::Durability::Periodic,
            })
            .await
            .unwrap();
    }

    /// Waits (10 s at most) until `done` holds.
    fn until(what: &str, done: &dyn Fn() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// An index whose thread panics keeps what it held and says it has
    /// stopped; one that runs says it has not.
    #[tokio::test]
    async fn an_index_whose_thread_panics_says_it_has_stopped_and_keeps_what_it_held() {
        let (_dir, store, issuer) = store();
        issue(&issuer, "agent:first.test", "First").await;
        let index = VectorIndex::start(store.blocking().clone(), 2, |agent| {
            assert_ne!(agent.name, "Poison", "an agent the embedding cannot take");
            vec![1.0, 0.0]
        });
        until("the index reads the store", &|| {
            index.ready() && index.len() == 1
        });
        assert!(!index.stopped());

        issue(&issuer, "agent:poison.test", "Poison").await;
        until("the index says it stopped", &|| index.stopped());
        assert_eq!(index.len(), 1, "what it held is kept");
        let all: RoaringBitmap = (0..16).collect();
        assert_eq!(index.nearest(&[1.0, 0.0], &all, 5).len(), 1);
    }

    /// A vector of another width than the index's is left out, and the
    /// index goes on with the next agents.
    #[tokio::test]
    async fn a_vector_of_another_width_is_left_out_and_the_index_goes_on() {
        let (_dir, store, issuer) = store();
        let index = VectorIndex::start(store.blocking().clone(), 2, |agent| {
            if agent.name == "Wide" {
                vec![1.0, 0.0, 0.0]
            } else {
                vec![0.0, 1.0]
            }
        });
        until("the index reads the empty store", &|| index.ready());
        issue(&issuer, "agent:wide.test", "Wide").await;
        issue(&issuer, "agent:next.test", "Next").await;
        until("the next agent is held", &|| index.len() == 1);
        assert!(!index.stopped());
        let all: RoaringBitmap = (0..16).collect();
        let got = index.nearest(&[0.0, 1.0], &all, 5);
        assert_eq!(got.len(), 1, "{got:?}");
    }
}
