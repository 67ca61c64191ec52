//! The index's writer thread: it applies each change by reading the
//! agent's current record, commits in groups (at once when someone waits,
//! else on a cadence that lengthens while a bulk keeps coming), clears
//! what it committed from `pending`; at open, the repair or rebuild from
//! the store's trees.

use std::collections::HashSet;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tantivy::{Index, IndexReader, IndexWriter, TantivyDocument, Term};

use super::schema::{text_err, tie_order, trust_rank, Fields};
use crate::descriptor;
use crate::record::{DescriptorRecord, RecordBody};
use crate::store::error::StoreError;
use crate::store::stored::{decode_stored, KIND_TOMBSTONE};
use crate::trust::TrustLevel;

/// The writer's indexing memory (tantivy's floor is 15 MB per thread).
pub(super) const WRITER_HEAP: usize = 24 << 20;
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
pub(super) const BULK_COMMIT_OPS: usize = 500;
/// Most changes held before a commit.
pub(super) const COMMIT_OPS: usize = 50_000;
/// Most operations (or A2A skills) of a document that are indexed.
pub(super) const MAX_OPERATIONS: usize = 64;

/// What the writer thread is asked to do.
pub(super) enum Op {
    /// The agent's record changed: index what the store now holds.
    Changed(String),
    /// Commit what was applied, then answer.
    Sync(tokio::sync::oneshot::Sender<Result<(), String>>),
}

/// The index's writer, once the index holds what the store holds: rebuilt
/// from `records` when `fresh` or its count disagrees with the store's
/// `live` descriptors, else the `pending` marks of writes it may have
/// missed applied and committed. Runs on the writer's thread.
pub(super) fn repaired(
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
pub(super) fn operations(document: &str) -> Vec<String> {
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
pub(super) struct Cadence {
    /// The wait now.
    pub(super) every: Duration,
    last_commit: Instant,
}

impl Cadence {
    /// A cadence whose last commit was at `now`.
    pub(super) fn new(now: Instant) -> Self {
        Self {
            every: COMMIT_EVERY,
            last_commit: now,
        }
    }

    /// The first change since the last commit came at `now`: after a
    /// quiet spell it waits the short time again.
    pub(super) fn first_change(&mut self, now: Instant) {
        if now.saturating_duration_since(self.last_commit) >= COMMIT_EVERY_BULK {
            self.every = COMMIT_EVERY;
        }
    }

    /// A commit of `changes` at `now`.
    pub(super) fn committed(&mut self, changes: usize, now: Instant) {
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
pub(super) struct WriterLoop {
    pub(super) writer: IndexWriter,
    pub(super) reader: IndexReader,
    pub(super) fields: Fields,
    pub(super) records: sled::Tree,
    pub(super) pending: sled::Tree,
}

impl WriterLoop {
    /// Applies what `rx` brings until it closes, then commits a last
    /// time and waits for the merges.
    pub(super) fn run(mut self, rx: mpsc::Receiver<Op>) {
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
