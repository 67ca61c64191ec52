//! The text index (tantivy): what a free-text search ranks. BM25 over one
//! field holding an agent's name, description, capabilities (twice),
//! tags, publisher and operations, and over its tags alone (two posting
//! lists per query word); English stemming and CJK bigrams; filter terms, the
//! trust level and the record's expiry are indexed beside them so that
//! filters narrow and the text ranks in one query (expired records are
//! left out of the hits).
//!
//! The index follows the store's `records` tree exactly, and lives in
//! `text-index/` inside the store's directory:
//! - every store write marks its agent in the `pending` tree (id -> seq,
//!   in the write's own transaction) and then sends the id here;
//! - one writer thread applies what it is sent by reading the agent's
//!   *current* record (so the order in which concurrent writers' ids
//!   arrive does not matter: the last one applied reads the last write),
//!   commits in groups (at once when someone waits on [`TextIndex::sync`],
//!   else every [`COMMIT_EVERY`], [`COMMIT_EVERY_BULK`] while a bulk of
//!   changes keeps coming (see `Cadence`), or [`COMMIT_OPS`] changes),
//!   and only then clears the agents it committed from `pending`
//!   (compare-and-swap on the seq, so a newer write stays marked);
//! - at open, an index that is missing, of another [`TEXT_VERSION`], or
//!   whose document count differs from the store's live count is rebuilt
//!   from `records`; otherwise the agents still in `pending` (a crash
//!   between a store write and the index commit) are re-applied.
//!
//! Nothing here runs on the async runtime's workers: the writer is its own
//! thread, and searches run on the caller's blocking thread.

use std::collections::HashSet;
use std::path::Path;
use std::sync::mpsc;
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tantivy::query::{
    BooleanQuery, BoostQuery, ConstScoreQuery, FuzzyTermQuery, Occur, Query, RangeQuery, TermQuery,
};
use tantivy::schema::{
    Field, IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions, Value, FAST,
    INDEXED, STORED, STRING,
};
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter,
    TextAnalyzer, Token, TokenStream, Tokenizer,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term};

use super::{decode_stored, descriptor, Filter, StoreError, KIND_TOMBSTONE};
use crate::record::{DescriptorRecord, RecordBody};
use crate::verify::TrustLevel;

mod opening;
mod page;
pub(super) use opening::Text;
pub use opening::TextIndexOpen;

/// The index's directory, inside the store's.
const INDEX_DIR: &str = "text-index";
/// The version of the schema and analysis; an index of another version is
/// rebuilt at open.
pub(super) const TEXT_VERSION: u32 = 3;
const VERSION_FILE: &str = "agentmesh-text-version";
const TOKENIZER: &str = "agentmesh";
/// The writer's indexing memory (tantivy's floor is 15 MB per thread).
const WRITER_HEAP: usize = 24 << 20;
/// Longest time a change waits for a commit when nobody asks for one,
/// after a quiet spell.
pub(super) const COMMIT_EVERY: Duration = Duration::from_millis(500);
/// ... and while changes keep coming: after a commit of at least
/// [`BULK_COMMIT_OPS`] changes (a bulk import, a burst of gossip), the
/// next waits this long, so that a long import adds a segment every few
/// seconds instead of two a second (each segment is walked by every text
/// search until merges join them). Whoever needs a change searchable at
/// once asks for it ([`TextIndex::sync`]), which commits at once.
pub(super) const COMMIT_EVERY_BULK: Duration = Duration::from_secs(5);
/// Changes in one commit that make the next wait [`COMMIT_EVERY_BULK`].
const BULK_COMMIT_OPS: usize = 500;
/// Most changes held before a commit.
const COMMIT_OPS: usize = 50_000;
/// Most distinct query terms ranked; the rest of a long query is ignored.
pub const MAX_QUERY_TERMS: usize = 32;
/// Most operations (or A2A skills) of a document that are indexed.
const MAX_OPERATIONS: usize = 64;
/// Longest token indexed, in bytes.
const MAX_TOKEN_BYTES: usize = 40;
/// The weight of a capability id the query names, matched exactly.
const CAPABILITY_BOOST: f32 = 3.0;
/// The weight of a subject word of the query found in an agent's tags.
const SUBJECT_BOOST: f32 = 2.0;
/// Shortest query word (in characters) that is corrected when no record
/// has it: shorter words have too many neighbours one edit away.
const CORRECT_MIN_CHARS: usize = 5;
/// Shortest query word corrected up to two edits away (the stemmer can
/// turn one misspelling into two: "databse" is "databs", "database"
/// indexed as "databas"; "postgress" stays, but "postgres" is "postgr",
/// three edits away, and is not found).
const CORRECT_TWO_MIN_CHARS: usize = 8;
/// Most indexed words a misspelt query word is corrected to.
const MAX_CORRECTIONS: usize = 3;
/// Most dictionary words one correction looks at, over all segments.
const MAX_CORRECTION_SCAN: usize = 256;
/// The weight of a corrected word beside a word matched as typed.
const CORRECTION_BOOST: f32 = 0.8;

/// The fields of an indexed agent.
#[derive(Clone, Copy)]
struct Fields {
    id: Field,
    expires: Field,
    /// Every ranked text of the agent, in one field; what weighs more
    /// is written more than once (see [`document`]).
    all: Field,
    /// The tags again, ranked beside `all`: a subject tag ("legal")
    /// weighs more than the same word in a description.
    tags: Field,
    cap: Field,
    tag: Field,
    lang: Field,
    trust: Field,
    /// Where the agent stands among hits of equal score: a hash of its
    /// id, the same in every index and segment layout.
    order: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let fields = Fields {
        id: b.add_text_field("id", STRING | STORED),
        expires: b.add_u64_field("expires", NumericOptions::default() | INDEXED | FAST),
        all: b.add_text_field("all", text.clone()),
        tags: b.add_text_field("tags", text),
        cap: b.add_text_field("cap", STRING),
        tag: b.add_text_field("tag", STRING),
        lang: b.add_text_field("lang", STRING),
        trust: b.add_u64_field("trust", NumericOptions::default() | INDEXED | FAST),
        order: b.add_u64_field("order", NumericOptions::default() | FAST),
    };
    (b.build(), fields)
}

/// The analysis of every ranked field and of queries: words split on
/// anything not alphanumeric (so `speech_to_text` is three words), CJK
/// text as overlapping bigrams, lower-cased, folded to ASCII, English stop
/// words dropped, English stemming.
fn analyzer() -> TextAnalyzer {
    let stop = StopWordFilter::new(Language::English)
        .expect("tantivy ships English stop words (feature `stopwords`)");
    TextAnalyzer::builder(MeshTokenizer)
        .filter(RemoveLongFilter::limit(MAX_TOKEN_BYTES))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .filter(stop)
        .filter(Stemmer::new(Language::English))
        .build()
}

/// Splits text into words and CJK bigrams.
#[derive(Clone, Default)]
struct MeshTokenizer;

/// The tokens of one text, split up front.
struct SplitTokens {
    tokens: Vec<Token>,
    at: usize,
}

impl Tokenizer for MeshTokenizer {
    type TokenStream<'a> = SplitTokens;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> SplitTokens {
        SplitTokens {
            tokens: split(text),
            at: 0,
        }
    }
}

impl TokenStream for SplitTokens {
    fn advance(&mut self) -> bool {
        if self.at < self.tokens.len() {
            self.at += 1;
            true
        } else {
            false
        }
    }
    fn token(&self) -> &Token {
        &self.tokens[self.at.saturating_sub(1).min(self.tokens.len() - 1)]
    }
    fn token_mut(&mut self) -> &mut Token {
        let i = self.at.saturating_sub(1).min(self.tokens.len() - 1);
        &mut self.tokens[i]
    }
}

/// Han, kana and Hangul: scripts written without spaces between words,
/// indexed as character bigrams.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF   // Hiragana, Katakana
        | 0x31F0..=0x31FF // Katakana extensions
        | 0x3400..=0x4DBF // CJK extension A
        | 0x4E00..=0x9FFF // CJK unified ideographs
        | 0xF900..=0xFAFF // CJK compatibility ideographs
        | 0x1100..=0x11FF // Hangul Jamo
        | 0x3130..=0x318F // Hangul compatibility Jamo
        | 0xAC00..=0xD7AF // Hangul syllables
        | 0x20000..=0x2FFFF)
}

fn split(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let push = |from: usize, to: usize, out: &mut Vec<Token>| {
        out.push(Token {
            offset_from: from,
            offset_to: to,
            position: out.len(),
            text: text[from..to].to_owned(),
            position_length: 1,
        });
    };
    let mut chars = text.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if is_cjk(c) {
            // A run of CJK characters: its bigrams (a lone one as itself).
            let mut run = vec![(start, c)];
            while let Some(&(i, d)) = chars.peek() {
                if !is_cjk(d) {
                    break;
                }
                run.push((i, d));
                chars.next();
            }
            if run.len() == 1 {
                push(start, start + c.len_utf8(), &mut out);
            }
            for w in run.windows(2) {
                let (from, _) = w[0];
                let (i, d) = w[1];
                push(from, i + d.len_utf8(), &mut out);
            }
        } else if c.is_alphanumeric() {
            let mut end = start + c.len_utf8();
            while let Some(&(i, d)) = chars.peek() {
                if !d.is_alphanumeric() || is_cjk(d) {
                    break;
                }
                end = i + d.len_utf8();
                chars.next();
            }
            push(start, end, &mut out);
        }
    }
    out
}

/// The analysed terms of `text`, distinct, in order of appearance, at most
/// `limit`.
fn analyse(analyzer: &mut TextAnalyzer, text: &str, limit: usize) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut stream = analyzer.token_stream(text);
    while out.len() < limit && stream.advance() {
        let t = &stream.token().text;
        if seen.insert(t.clone()) {
            out.push(t.clone());
        }
    }
    out
}

/// A free-text search: `text` ranks, `filter` narrows, records expired at
/// `now` (Unix seconds) are left out.
#[derive(Debug, Clone, Copy)]
pub struct TextQuery<'a> {
    /// The words to rank with.
    pub text: &'a str,
    /// Terms every result must carry.
    pub filter: &'a Filter,
    /// Most results.
    pub limit: usize,
    /// The time against which expiry is judged, in Unix seconds.
    pub now: u64,
    /// The lowest trust level answered, if any.
    pub min_trust: Option<TrustLevel>,
    /// Capability ids that rank (matched exactly, weighted like a word
    /// found in the capabilities), beside the text's words; not required.
    pub capabilities: &'a [String],
    /// Words of `text` that name the subject the query is about
    /// (`legal`, `travel`): found in an agent's tags they weigh
    /// [`SUBJECT_BOOST`] times a word, so an agent built for the subject
    /// ranks above one whose capability merely shares the word
    /// (`travel_planning`).
    pub subjects: &'a [String],
}

/// What the writer thread is asked to do.
enum Op {
    /// The agent's record changed: index what the store now holds.
    Changed(String),
    /// Commit what was applied, then answer.
    Sync(tokio::sync::oneshot::Sender<Result<(), String>>),
}

/// The text index of one store: a reader for searches and the channel to
/// its writer thread. Dropping it stops the thread after a last commit.
pub(super) struct TextIndex {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    /// The filter sets of the latest filtered searches, by segment.
    keep_cache: page::KeepCache,
    tx: Mutex<Option<mpsc::Sender<Op>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Tests only: drop changes, as a process killed between a store
    /// write and the index's commit would.
    #[cfg(test)]
    pub(super) lose_changes: std::sync::atomic::AtomicBool,
}

fn text_err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Text {
        reason: e.to_string(),
    }
}

impl TextIndex {
    /// Opens the index in `store_dir`, rebuilding or repairing it from
    /// `records` and `pending` as the module documentation says, and
    /// starts its writer thread. `live` is the store's count of live
    /// descriptors.
    pub(super) fn open(
        store_dir: &Path,
        records: &sled::Tree,
        pending: &sled::Tree,
        live: u64,
    ) -> Result<Self, StoreError> {
        let dir = store_dir.join(INDEX_DIR);
        let (schema, fields) = schema();
        let version_ok = std::fs::read_to_string(dir.join(VERSION_FILE))
            .ok()
            .and_then(|v| v.trim().parse::<u32>().ok())
            == Some(TEXT_VERSION);
        let opened = if version_ok {
            Index::open_in_dir(&dir).ok()
        } else {
            None
        };
        let (index, fresh) = match opened {
            Some(index) => (index, false),
            None => {
                if dir.exists() {
                    std::fs::remove_dir_all(&dir).map_err(text_err)?;
                }
                std::fs::create_dir_all(&dir).map_err(text_err)?;
                let index = Index::create_in_dir(&dir, schema).map_err(text_err)?;
                std::fs::write(dir.join(VERSION_FILE), TEXT_VERSION.to_string())
                    .map_err(text_err)?;
                (index, true)
            }
        };
        index.tokenizers().register(TOKENIZER, analyzer());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(text_err)?;
        // The writer is made on its own thread, at background priority:
        // tantivy's indexing worker, segment updater and merge threads are
        // started with it and keep the priority of the thread that made
        // them (Linux keeps a nice value per thread), and a merge at 1M
        // agents is seconds of CPU. The repair below runs there too, and
        // the open waits for it.
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), StoreError>>();
        let thread = {
            let (index, reader) = (index.clone(), reader.clone());
            let (records, pending) = (records.clone(), pending.clone());
            std::thread::Builder::new()
                .name("text-index".into())
                .spawn(move || {
                    // Indexing is bulk work: searches go first.
                    crate::priority::lower_current_thread();
                    let writer =
                        match repaired(&index, &reader, fields, &records, &pending, fresh, live) {
                            Ok(writer) => {
                                let _ = ready_tx.send(Ok(()));
                                writer
                            }
                            Err(e) => {
                                let _ = ready_tx.send(Err(e));
                                return;
                            }
                        };
                    WriterLoop {
                        writer,
                        reader,
                        fields,
                        records,
                        pending,
                    }
                    .run(rx);
                })
                .map_err(text_err)?
        };
        let ready = ready_rx
            .recv()
            .unwrap_or_else(|_| Err(text_err("the text index writer ended while opening")));
        if let Err(e) = ready {
            let _ = thread.join();
            return Err(e);
        }
        Ok(Self {
            index,
            reader,
            fields,
            keep_cache: page::KeepCache::default(),
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            #[cfg(test)]
            lose_changes: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Tells the writer that `id`'s record changed.
    pub(super) fn changed(&self, id: &str) {
        #[cfg(test)]
        if self.lose_changes.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        self.send(Op::Changed(id.to_owned()));
    }

    fn send(&self, op: Op) -> bool {
        let tx = self
            .tx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tx.as_ref().is_some_and(|tx| tx.send(op).is_ok())
    }

    /// Waits until every change sent before this call is searchable (and
    /// committed): concurrent callers share one commit.
    pub(super) async fn sync(&self) -> Result<(), StoreError> {
        let (reply, rx) = tokio::sync::oneshot::channel();
        if !self.send(Op::Sync(reply)) {
            return Err(text_err("the text index writer has stopped"));
        }
        match rx.await {
            Ok(r) => r.map_err(text_err),
            Err(_) => Err(text_err("the text index writer has stopped")),
        }
    }

    /// As [`TextIndex::sync`], on this (blocking) thread.
    pub(super) fn sync_blocking(&self) -> Result<(), StoreError> {
        let (reply, rx) = tokio::sync::oneshot::channel();
        if !self.send(Op::Sync(reply)) {
            return Err(text_err("the text index writer has stopped"));
        }
        match rx.blocking_recv() {
            Ok(r) => r.map_err(text_err),
            Err(_) => Err(text_err("the text index writer has stopped")),
        }
    }

    /// Live agents matching `q.filter`, ranked by `q.text`, best first,
    /// with scores in 0..1 (1 when every query term matches in its best
    /// field at that field's usual length), ties in a fixed order (a hash of
    /// the id, whatever the segments). `None` when the
    /// text has no term to rank with (empty, only stop words or symbols).
    pub(super) fn search(
        &self,
        q: &TextQuery<'_>,
    ) -> Result<Option<Vec<(String, f64)>>, StoreError> {
        let mut analyzer = self
            .index
            .tokenizers()
            .get(TOKENIZER)
            .expect("registered at open");
        let terms = analyse(&mut analyzer, q.text, MAX_QUERY_TERMS);
        let subjects = analyse(&mut analyzer, &q.subjects.join(" "), MAX_QUERY_TERMS);
        let capabilities = &q.capabilities[..q.capabilities.len().min(MAX_QUERY_TERMS)];
        if terms.is_empty() && capabilities.is_empty() {
            return Ok(None);
        }
        if q.limit == 0 {
            return Ok(Some(Vec::new()));
        }
        let searcher = self.reader.searcher();
        let docs = searcher.num_docs().max(1);
        let f = self.fields;
        // One flat union of term queries (two per word: `all` and `tags`),
        // so tantivy can skip whole blocks of documents that cannot reach
        // the top (block-max WAND) when no filter narrows. A capability id
        // (its field keeps no term frequencies) makes tantivy walk the
        // plain union instead, which measured faster at a million agents
        // (BENCHMARKS.md, section 8).
        let mut ranked: Vec<Box<dyn Query>> = Vec::new();
        let mut ceiling = 0.0f64;
        // The postings the ranked terms hold, all told.
        let mut postings = 0u64;
        let mut clause = |field: Field, text: &str, boost: f32| -> Result<f64, StoreError> {
            let term = Term::from_field_text(field, text);
            let df = searcher.doc_freq(&term).map_err(text_err)?;
            postings += df;
            if df > 0 {
                ranked.push(Box::new(BoostQuery::new(
                    Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)),
                    boost,
                )));
            }
            Ok(if df > 0 {
                f64::from(boost) * idf(df, docs)
            } else {
                0.0
            })
        };
        for t in &terms {
            let mut best = 0.0f64;
            best = best.max(clause(f.all, t, 1.0)?);
            let tag_boost = if subjects.contains(t) {
                SUBJECT_BOOST
            } else {
                1.0
            };
            best = best.max(clause(f.tags, t, tag_boost)?);
            // A word no record has is likely misspelt ("scaner",
            // "brwoser"): the indexed words an edit or two away rank instead,
            // weighing a little less than a word matched as typed.
            if best == 0.0 && t.chars().count() >= CORRECT_MIN_CHARS {
                // The ceiling counts the word at its full weight, so a
                // record matching only the correction scores less.
                let full = f64::from(CORRECTION_BOOST);
                for c in corrections(&searcher, f.all, t)? {
                    best = best.max(clause(f.all, &c, CORRECTION_BOOST)? / full);
                    best = best.max(clause(f.tags, &c, CORRECTION_BOOST)? / full);
                }
            }
            // A word no agent has still counts against every result: an
            // agent matching half of the query scores about half.
            ceiling += if best > 0.0 { best } else { idf(0, docs) };
        }
        for c in capabilities {
            let best = clause(f.cap, c, CAPABILITY_BOOST)?;
            ceiling += if best > 0.0 { best } else { idf(0, docs) };
        }
        if ranked.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let exact = |field: Field, value: &str| -> (Occur, Box<dyn Query>) {
            let q = TermQuery::new(
                Term::from_field_text(field, value),
                IndexRecordOption::Basic,
            );
            (
                Occur::Must,
                Box::new(ConstScoreQuery::new(Box::new(q), 0.0)),
            )
        };
        // The filter's terms as one conjunction, read into a set of
        // documents per segment (or taken from the sets read by earlier
        // searches, page::KeepCache), and the ranked terms scored inside it
        // (page::top_kept). Inside one query, the conjunction would make
        // tantivy seek the union's buffered windows for every document of
        // the filter, which cost milliseconds at a million agents.
        let mut must: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for c in &q.filter.capabilities {
            must.push(exact(f.cap, c));
        }
        for t in &q.filter.tags {
            must.push(exact(f.tag, t));
        }
        for l in &q.filter.languages {
            must.push(exact(f.lang, &l.to_ascii_lowercase()));
        }
        let min_trust = q.min_trust.max(q.filter.min_trust);
        if let Some(min) = min_trust {
            let trusted = RangeQuery::new(
                std::ops::Bound::Included(Term::from_field_u64(f.trust, trust_rank(min))),
                std::ops::Bound::Unbounded,
            );
            must.push((
                Occur::Must,
                Box::new(ConstScoreQuery::new(Box::new(trusted), 0.0)),
            ));
        }
        // Each segment's expiry and order columns, opened once per search:
        // expired records are left out as the page fills, and a tie at its
        // last place is settled by `order` (page.rs).
        let column = |name: &str| {
            searcher
                .segment_readers()
                .iter()
                .map(|r| r.fast_fields().u64(name))
                .collect::<Result<Vec<_>, _>>()
                .map_err(text_err)
        };
        let (expiry, order) = (column("expires")?, column("order")?);
        let columns = page::Columns {
            now: q.now,
            expiry: &expiry,
            order: &order,
        };
        let hits = if must.is_empty() {
            let union = BooleanQuery::union(ranked);
            page::top(&searcher, &union, None, q.limit, &columns)?
        } else {
            // The filter's name among the sets read before: its terms.
            let key = format!(
                "{:?}\u{0}{:?}\u{0}{:?}\u{0}{:?}",
                q.filter.capabilities,
                q.filter.tags,
                q.filter.languages,
                min_trust.map(trust_rank)
            );
            let filter = BooleanQuery::new(must);
            let keep = page::Keep::of(&searcher, &filter, &key, &self.keep_cache)?;
            page::top_kept(&searcher, &ranked, keep, postings, q.limit, &columns)?
        };
        // Only the page's records are read from the doc store.
        let ceiling = ceiling.max(f64::MIN_POSITIVE);
        let mut out = Vec::with_capacity(hits.len());
        for hit in hits {
            let doc: TantivyDocument = searcher.doc(hit.address).map_err(text_err)?;
            if let Some(id) = doc.get_first(f.id).and_then(|v| v.as_str()) {
                let s = (f64::from(hit.score) / ceiling).clamp(0.0, 1.0);
                out.push((id.to_owned(), s));
            }
        }
        Ok(Some(out))
    }

    /// Segments the committed index is read from: every text search
    /// walks each of them, so many small ones (each commit adds one: a
    /// long import, every [`COMMIT_EVERY_BULK`]) cost every search until
    /// merges join them.
    pub(super) fn segments(&self) -> usize {
        self.reader.searcher().segment_readers().len()
    }

    #[cfg(test)]
    /// Documents in the committed index (live and expired descriptors).
    pub(super) fn len(&self) -> u64 {
        self.reader.searcher().num_docs()
    }
}

/// The index's writer, once the index holds what the store holds: rebuilt
/// from `records` when `fresh` or its count disagrees with the store's
/// `live` descriptors, else the `pending` marks of writes it may have
/// missed applied and committed. Runs on the writer's thread.
fn repaired(
    index: &Index,
    reader: &IndexReader,
    fields: Fields,
    records: &sled::Tree,
    pending: &sled::Tree,
    fresh: bool,
    live: u64,
) -> Result<IndexWriter, StoreError> {
    let mut writer: IndexWriter = index
        .writer_with_num_threads(1, WRITER_HEAP)
        .map_err(text_err)?;
    let mut apply = Applier {
        writer: &mut writer,
        fields,
        records,
    };
    let held = reader.searcher().num_docs();
    if fresh || held != live {
        if !fresh {
            tracing::warn!(
                held,
                live,
                "the text index disagrees with the store; rebuilding it"
            );
        }
        let started = Instant::now();
        apply.rebuild()?;
        pending.clear()?;
        tracing::info!(
            agents = live,
            secs = started.elapsed().as_secs_f64(),
            "text index built from the store"
        );
    } else if !pending.is_empty() {
        let mut done = Vec::new();
        for id in pending.iter().keys() {
            let id = String::from_utf8_lossy(&id?).into_owned();
            done.push((id.clone(), apply.changed(&id)?));
        }
        writer.commit().map_err(text_err)?;
        clear_pending(pending, &done);
        tracing::info!(
            agents = done.len(),
            "text index caught up with the store's last writes"
        );
    }
    reader.reload().map_err(text_err)?;
    Ok(writer)
}

impl Drop for TextIndex {
    fn drop(&mut self) {
        // Closing the channel ends the writer's loop after a last commit.
        self.tx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

/// The words of `field` one edit away from `word` (a letter added,
/// dropped, changed, or two neighbours swapped; two edits for words of
/// [`CORRECT_TWO_MIN_CHARS`] or more), the most frequent first, at most
/// [`MAX_CORRECTIONS`]; read from each segment's term dictionary.
fn corrections(searcher: &Searcher, field: Field, word: &str) -> Result<Vec<String>, StoreError> {
    let edits = if word.chars().count() >= CORRECT_TWO_MIN_CHARS {
        2
    } else {
        1
    };
    let automaton = FuzzyTermQuery::new(Term::from_field_text(field, word), edits, true)
        .automaton()
        .map_err(text_err)?;
    let mut found: std::collections::HashMap<Vec<u8>, u64> = std::collections::HashMap::new();
    'segments: for segment in searcher.segment_readers() {
        let index = segment.inverted_index(field).map_err(text_err)?;
        let mut stream = index
            .terms()
            .search(&automaton)
            .into_stream()
            .map_err(text_err)?;
        while stream.advance() {
            if found.len() >= MAX_CORRECTION_SCAN && !found.contains_key(stream.key()) {
                break 'segments;
            }
            *found.entry(stream.key().to_vec()).or_default() += u64::from(stream.value().doc_freq);
        }
    }
    let mut found: Vec<(Vec<u8>, u64)> = found
        .into_iter()
        .filter(|(k, _)| k != word.as_bytes())
        .collect();
    found.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(found
        .into_iter()
        .take(MAX_CORRECTIONS)
        .filter_map(|(k, _)| String::from_utf8(k).ok())
        .collect())
}

/// An agent's place among hits of equal score: the first 8 bytes of the
/// SHA-256 of its id.
pub(super) fn tie_order(id: &str) -> u64 {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(id.as_bytes());
    u64::from_be_bytes(digest[..8].try_into().expect("a SHA-256 is 32 bytes"))
}

/// A trust level as indexed: its rank, lowest 0.
fn trust_rank(level: TrustLevel) -> u64 {
    match level {
        TrustLevel::Unverified => 0,
        TrustLevel::DnsVerified => 1,
        TrustLevel::KeyVerified => 2,
        TrustLevel::PeerVerified => 3,
    }
}

/// BM25's inverse document frequency, as tantivy computes it.
fn idf(doc_freq: u64, docs: u64) -> f64 {
    let (n, d) = (doc_freq as f64, docs as f64);
    (1.0 + (d - n + 0.5) / (n + 0.5)).ln()
}

/// Applies store changes to a writer.
struct Applier<'a> {
    writer: &'a mut IndexWriter,
    fields: Fields,
    records: &'a sled::Tree,
}

impl Applier<'_> {
    /// Re-indexes `id` from what the store holds now; returns the seq it
    /// read (0 when the store holds nothing).
    fn changed(&mut self, id: &str) -> Result<u64, StoreError> {
        self.writer
            .delete_term(Term::from_field_text(self.fields.id, id));
        let Some(bytes) = self.records.get(id.as_bytes())? else {
            return Ok(0);
        };
        let stored = decode_stored(id, &bytes)?;
        if let RecordBody::Descriptor(d) = &stored.body {
            self.writer
                .add_document(document(&self.fields, d, stored.counted_level()))
                .map_err(text_err)?;
        }
        Ok(stored.body.seq())
    }

    /// Indexes every live descriptor of the store, then commits.
    fn rebuild(&mut self) -> Result<(), StoreError> {
        self.writer.delete_all_documents().map_err(text_err)?;
        for entry in self.records.iter() {
            let (key, value) = entry?;
            if value.first() == Some(&KIND_TOMBSTONE) {
                continue;
            }
            let stored = decode_stored(&String::from_utf8_lossy(&key), &value)?;
            if let RecordBody::Descriptor(d) = &stored.body {
                self.writer
                    .add_document(document(&self.fields, d, stored.counted_level()))
                    .map_err(text_err)?;
            }
        }
        self.writer.commit().map_err(text_err)?;
        Ok(())
    }
}

/// The index document of a descriptor record. `all` holds the name, the
/// description, the publisher and the operations once, and the
/// capability ids twice (a capability is what an agent is for); the tags
/// go to `all` and to `tags`. `level` is the trust level this node counts
/// for the record (`unverified` for claimed evidence).
fn document(f: &Fields, r: &DescriptorRecord, level: TrustLevel) -> TantivyDocument {
    let d = &r.descriptor;
    let mut doc = TantivyDocument::default();
    doc.add_text(f.id, &r.agent_id);
    doc.add_u64(f.expires, r.expires_at);
    doc.add_u64(f.trust, trust_rank(level));
    doc.add_u64(f.order, tie_order(&r.agent_id));
    doc.add_text(f.all, &d.name);
    doc.add_text(f.all, &d.description);
    for c in &d.capabilities {
        doc.add_text(f.all, c);
        doc.add_text(f.all, c);
        doc.add_text(f.cap, c);
    }
    for t in &d.tags {
        doc.add_text(f.all, t);
        doc.add_text(f.tags, t);
        doc.add_text(f.tag, t);
    }
    let mut langs = HashSet::new();
    for l in &d.languages {
        langs.insert(l.to_ascii_lowercase());
        langs.insert(descriptor::primary_language(l).to_ascii_lowercase());
    }
    for l in langs {
        doc.add_text(f.lang, l);
    }
    if let Some(p) = &d.publisher {
        doc.add_text(f.all, p);
    }
    for op in operations(&r.document) {
        doc.add_text(f.all, op);
    }
    doc
}

/// The names and descriptions of a document's operations (AIDIP
/// `operations`, A2A `skills`), at most [`MAX_OPERATIONS`] of them.
fn operations(document: &str) -> Vec<String> {
    let Ok(serde_json::Value::Object(doc)) = serde_json::from_str(document) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for key in ["operations", "skills"] {
        let Some(serde_json::Value::Array(items)) = doc.get(key) else {
            continue;
        };
        for item in items.iter().take(MAX_OPERATIONS) {
            for member in ["name", "id", "description"] {
                if let Some(s) = item.get(member).and_then(serde_json::Value::as_str) {
                    out.push(s.to_owned());
                }
            }
        }
    }
    out
}

/// How long the writer lets changes wait for a commit: [`COMMIT_EVERY`],
/// or [`COMMIT_EVERY_BULK`] after a commit of [`BULK_COMMIT_OPS`] or more
/// until a quiet spell (no change for as long as the bulk wait).
#[derive(Debug)]
struct Cadence {
    every: Duration,
    last_commit: Instant,
}

impl Cadence {
    fn new(now: Instant) -> Self {
        Self {
            every: COMMIT_EVERY,
            last_commit: now,
        }
    }

    /// The first change since the last commit came at `now`: after a
    /// quiet spell it waits the short time again.
    fn first_change(&mut self, now: Instant) {
        if now.saturating_duration_since(self.last_commit) >= COMMIT_EVERY_BULK {
            self.every = COMMIT_EVERY;
        }
    }

    /// A commit of `changes` at `now`.
    fn committed(&mut self, changes: usize, now: Instant) {
        self.every = if changes >= BULK_COMMIT_OPS {
            COMMIT_EVERY_BULK
        } else {
            COMMIT_EVERY
        };
        self.last_commit = now;
    }
}

/// Clears the committed agents from `pending`, unless a newer write has
/// marked them again since.
fn clear_pending(pending: &sled::Tree, done: &[(String, u64)]) {
    for (id, seq) in done {
        let _ = pending.compare_and_swap(
            id.as_bytes(),
            Some(&seq.to_be_bytes()[..]),
            None as Option<&[u8]>,
        );
    }
}

/// The writer thread.
struct WriterLoop {
    writer: IndexWriter,
    reader: IndexReader,
    fields: Fields,
    records: sled::Tree,
    pending: sled::Tree,
}

impl WriterLoop {
    fn run(mut self, rx: mpsc::Receiver<Op>) {
        let mut done: Vec<(String, u64)> = Vec::new();
        let mut waiting = Vec::new();
        let mut dirty_since: Option<Instant> = None;
        let mut cadence = Cadence::new(Instant::now());
        loop {
            let wait = dirty_since.map_or(Duration::from_secs(3600), |t| {
                cadence.every.saturating_sub(t.elapsed())
            });
            let first = match rx.recv_timeout(wait) {
                Ok(op) => Some(op),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    if !done.is_empty() {
                        let _ = self.commit(&mut done);
                    }
                    // Merges finish before the thread ends, so that the
                    // index's files and lock are released when the store
                    // is dropped (a reopen follows at once in a restart).
                    if let Err(e) = self.writer.wait_merging_threads() {
                        tracing::warn!(error = %e, "text index: a merge failed at shutdown");
                    }
                    return;
                }
            };
            // Everything already queued joins this round.
            for op in first.into_iter().chain(rx.try_iter()) {
                match op {
                    Op::Changed(id) => {
                        let mut apply = Applier {
                            writer: &mut self.writer,
                            fields: self.fields,
                            records: &self.records,
                        };
                        match apply.changed(&id) {
                            Ok(seq) => done.push((id, seq)),
                            // Left in `pending`: repaired at the next open.
                            Err(e) => {
                                tracing::error!(%id, error = %e, "text index: could not index")
                            }
                        }
                        if dirty_since.is_none() {
                            let now = Instant::now();
                            cadence.first_change(now);
                            dirty_since = Some(now);
                        }
                    }
                    Op::Sync(reply) => waiting.push(reply),
                }
                if done.len() >= COMMIT_OPS {
                    break;
                }
            }
            let due = dirty_since.is_some_and(|t| t.elapsed() >= cadence.every)
                || done.len() >= COMMIT_OPS
                || !waiting.is_empty();
            if !due {
                continue;
            }
            cadence.committed(done.len(), Instant::now());
            let result = if done.is_empty() {
                Ok(())
            } else {
                self.commit(&mut done)
            };
            dirty_since = None;
            for reply in waiting.drain(..) {
                let _ = reply.send(result.clone());
            }
        }
    }

    fn commit(&mut self, done: &mut Vec<(String, u64)>) -> Result<(), String> {
        let result = self
            .writer
            .commit()
            .and_then(|_| self.reader.reload())
            .map_err(|e| e.to_string());
        match &result {
            Ok(()) => clear_pending(&self.pending, done),
            Err(e) => tracing::error!(error = %e, "text index commit failed"),
        }
        done.clear();
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &str) -> Vec<String> {
        let mut a = analyzer();
        analyse(&mut a, s, 100)
    }

    #[test]
    fn commits_wait_longer_while_a_bulk_of_changes_keeps_coming() {
        let t0 = Instant::now();
        let mut c = Cadence::new(t0);
        assert_eq!(c.every, COMMIT_EVERY);
        // A few changes: the short wait stays.
        c.committed(BULK_COMMIT_OPS - 1, t0);
        assert_eq!(c.every, COMMIT_EVERY);
        // A bulk: the next changes, coming at once, wait the long time.
        c.committed(BULK_COMMIT_OPS, t0);
        c.first_change(t0 + Duration::from_millis(1));
        assert_eq!(c.every, COMMIT_EVERY_BULK);
        // A change after a quiet spell does not wait for the bulk's time.
        c.first_change(t0 + COMMIT_EVERY_BULK);
        assert_eq!(c.every, COMMIT_EVERY);
        // A bulk ends with a small commit: short again.
        c.committed(BULK_COMMIT_OPS, t0);
        c.committed(1, t0 + COMMIT_EVERY_BULK);
        assert_eq!(c.every, COMMIT_EVERY);
    }

    #[test]
    fn words_split_on_punctuation_and_underscores_and_are_stemmed() {
        assert_eq!(
            texts("Speech_to_text: Transcribing meetings"),
            ["speech", "text", "transcrib", "meet"]
        );
    }

    #[test]
    fn cjk_text_becomes_bigrams_beside_latin_words() {
        assert_eq!(
            texts("法律文件 summary"),
            ["法律", "律文", "文件", "summari"]
        );
        assert_eq!(texts("翻"), ["翻"]);
        // Kana and Hangul too.
        assert_eq!(texts("ほんやく"), ["ほん", "んや", "やく"]);
        assert_eq!(texts("번역기"), ["번역", "역기"]);
    }

    #[test]
    fn query_terms_are_bounded() {
        let long: String = (0..100).map(|i| format!("w{i} ")).collect();
        let mut a = analyzer();
        assert_eq!(
            analyse(&mut a, &long, MAX_QUERY_TERMS).len(),
            MAX_QUERY_TERMS
        );
        assert!(texts("   !!! ,,, ").is_empty());
        // Over-long tokens are dropped, not truncated.
        assert!(texts(&"x".repeat(MAX_TOKEN_BYTES + 1)).is_empty());
    }

    #[test]
    fn operations_come_from_aidip_operations_and_a2a_skills() {
        let doc = r#"{"operations":[{"name":"summarize","description":"Short notes"}],
                      "skills":[{"id":"tr","name":"Translate"}]}"#;
        assert_eq!(
            operations(doc),
            ["summarize", "Short notes", "Translate", "tr"]
        );
        assert!(operations("not json").is_empty());
        assert!(operations(r#"{"operations":"x"}"#).is_empty());
    }
}
