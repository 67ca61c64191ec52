//! [`TextIndex`]: the index of one store, open. A reader for searches,
//! the filter sets kept between them, and the channel to the writer
//! thread (`store/text/writer.rs`), which it starts at open and joins
//! when dropped.

use std::path::Path;
use std::sync::mpsc;
use std::sync::Mutex;
use std::thread::JoinHandle;

use tantivy::columnar::Column;
use tantivy::query::BooleanQuery;
use tantivy::schema::Value;
use tantivy::{Index, IndexReader, ReloadPolicy, Searcher, TantivyDocument};

use super::analysis::{analyse, analyzer};
use super::page;
use super::query::{self, Ranked, TextQuery, MAX_QUERY_TERMS};
use super::schema::{schema, text_err, Fields, INDEX_DIR, TEXT_VERSION, TOKENIZER, VERSION_FILE};
use super::writer::{repaired, Op, WriterLoop};
use crate::store::error::StoreError;

/// The text index of one store: a reader for searches and the channel to
/// its writer thread. Dropping it stops the thread after a last commit.
pub(in crate::store) struct TextIndex {
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
    pub(in crate::store) lose_changes: std::sync::atomic::AtomicBool,
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
        let ranked = query::ranked(&searcher, self.fields, &terms, &subjects, capabilities)?;
        if ranked.clauses.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let ceiling = ranked.ceiling;
        let hits = self.hits(&searcher, q, ranked)?;
        scored_ids(&searcher, self.fields, hits, ceiling).map(Some)
    }

    /// The page's hits for `q`: the ranked clauses' union walked over
    /// the whole index when no filter narrows; else the filter's terms as
    /// one conjunction, read into a set of documents per segment (or
    /// taken from the sets read by earlier searches, `page::KeepCache`),
    /// and the ranked clauses scored inside it (`page::top_kept`). Inside
    /// one query, the conjunction would make tantivy seek the union's
    /// buffered windows for every document of the filter, which cost
    /// milliseconds at a million agents.
    fn hits(
        &self,
        searcher: &Searcher,
        q: &TextQuery<'_>,
        ranked: Ranked,
    ) -> Result<Vec<page::Hit>, StoreError> {
        let min_trust = q.min_trust.max(q.filter.min_trust);
        let must = query::filter_clauses(self.fields, q.filter, min_trust);
        // Each segment's expiry and order columns, opened once per search:
        // expired records are left out as the page fills, and a tie at its
        // last place is settled by `order` (page.rs).
        let (expiry, order) = (column(searcher, "expires")?, column(searcher, "order")?);
        let columns = page::Columns {
            now: q.now,
            expiry: &expiry,
            order: &order,
        };
        if must.is_empty() {
            let union = BooleanQuery::union(ranked.clauses);
            page::top(searcher, &union, None, q.limit, &columns)
        } else {
            let key = query::filter_key(q.filter, min_trust);
            let filter = BooleanQuery::new(must);
            let keep = page::Keep::of(searcher, &filter, &key, &self.keep_cache)?;
            page::top_kept(
                searcher,
                &ranked.clauses,
                keep,
                ranked.postings,
                q.limit,
                &columns,
            )
        }
    }

    /// Segments the committed index is read from: every text search
    /// walks each of them, so many small ones (each commit adds one: a
    /// long import, every `COMMIT_EVERY_BULK`) cost every search until
    /// merges join them.
    pub(super) fn segments(&self) -> usize {
        self.reader.searcher().segment_readers().len()
    }

    #[cfg(test)]
    /// Documents in the committed index (live and expired descriptors).
    pub(in crate::store) fn len(&self) -> u64 {
        self.reader.searcher().num_docs()
    }
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

/// Each segment's fast column `name`, in the searcher's segment order.
fn column(searcher: &Searcher, name: &str) -> Result<Vec<Column<u64>>, StoreError> {
    searcher
        .segment_readers()
        .iter()
        .map(|r| r.fast_fields().u64(name))
        .collect::<Result<Vec<_>, _>>()
        .map_err(text_err)
}

/// The page's ids with their scores in 0..1 (divided by `ceiling`): only
/// the page's records are read from the doc store.
fn scored_ids(
    searcher: &Searcher,
    f: Fields,
    hits: Vec<page::Hit>,
    ceiling: f64,
) -> Result<Vec<(String, f64)>, StoreError> {
    let ceiling = ceiling.max(f64::MIN_POSITIVE);
    let mut out = Vec::with_capacity(hits.len());
    for hit in hits {
        let doc: TantivyDocument = searcher.doc(hit.address).map_err(text_err)?;
        if let Some(id) = doc.get_first(f.id).and_then(|v| v.as_str()) {
            let s = (f64::from(hit.score) / ceiling).clamp(0.0, 1.0);
            out.push((id.to_owned(), s));
        }
    }
    Ok(out)
}
