//! Bulk import: AIDIP documents, one JSON object per line (NDJSON), into
//! this node's registry as local registrations. `agentmesh import` (into a
//! data directory) and `POST /admin/import` (into a running node) both run
//! [`Importer::run`]; each reads lines from an `AsyncBufRead` and receives
//! one [`LineResult`] per document line on a bounded channel, in line
//! order, then gets the [`ImportSummary`] back.
//!
//! Each document is validated as `POST /agents` validates it
//! (`Registry::prepare`: the AIDIP schema, every problem reported at its
//! JSON pointer) and issued through the node's one [`Issuer`] (signed with
//! the node key for `store.record_ttl`), as a local registration
//! ([`Origin::Local`], [`Expect::LocalOrAbsent`]: an id crawled or received
//! from a peer is refused, as `POST /agents` refuses it). Lines are taken in
//! batches ([`BATCH_LINES`] lines or [`BATCH_BYTES`] bytes); records are
//! issued with [`Durability::Periodic`] and the store is flushed once at the
//! end of each batch, so what a batch imported is on disk before its
//! results are reported.
//!
//! Re-running an import is idempotent:
//! - a document equal to the one held for its id (as JSON values: member
//!   order and whitespace aside, array order counts) is `unchanged` and
//!   not re-signed, so its seq stays, unless less than half of its
//!   record's lifetime is left (then it is re-signed and reported
//!   `updated`, which is how a periodic re-import keeps records alive);
//! - a document without an id gets one of the form `POST /agents` assigns
//!   (`agent-` and 32 hex digits), but derived from the SHA-256 of the
//!   document (members sorted) rather than random: the same document gets
//!   the same id on every run, and identical id-less lines are one agent.
//!   An edited id-less document is a new agent (nothing says it was the
//!   old one); give documents ids to update them in place.
//!
//! Bad lines (not JSON, longer than the line limit, invalid documents,
//! ids owned elsewhere) are `refused` with their problems; the other lines
//! still go in. Blank lines are skipped without a result.

use std::collections::HashSet;

use futures_util::StreamExt as _;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _};
use tokio::sync::mpsc;

use super::{generated_id, Prepared, Registry, RegistryError};
use crate::aidip::FieldProblem;
use crate::issuer::{Durability, Issuer};
use crate::record::{self, RecordBody};
use crate::store::{Expect, Origin, PutOutcome, StoreError};
use crate::verify::Evidence;

/// The default longest line, in bytes (the newline aside).
pub const DEFAULT_MAX_LINE_BYTES: usize = crate::config::DEFAULT_IMPORT_MAX_LINE_BYTES;
/// Most lines in one batch (one store flush each).
pub const BATCH_LINES: usize = 1000;
/// Most line bytes held in one batch.
pub const BATCH_BYTES: usize = 8 << 20;
/// Documents of distinct agents issued in one store transaction, by
/// default (`agentmesh import`: nothing else runs).
pub const ISSUE_CHUNK: usize = 128;
/// The same on a serving node (`POST /admin/import`): smaller
/// transactions, so that the searches served meanwhile wait less behind
/// each one.
pub const SERVING_ISSUE_CHUNK: usize = 16;
/// Chunks issued at once within a batch (one is checked for unchanged
/// documents while another is signed and stored).
const IN_FLIGHT: usize = 2;

/// What one import may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportLimits {
    /// Longest line, in bytes; a longer line is refused (and skipped
    /// without being held in memory).
    pub max_line_bytes: usize,
    /// Most lines (blank ones included); the import stops after them.
    pub max_lines: u64,
}

impl Default for ImportLimits {
    fn default() -> Self {
        Self {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_lines: u64::MAX,
        }
    }
}

/// What became of one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// A new local registration (no live descriptor was held).
    Created,
    /// A live local registration was replaced (or re-signed).
    Updated,
    /// The document equals the one held; nothing was written.
    Unchanged,
    /// The line was not imported; `problems` says why.
    Refused,
}

impl Outcome {
    /// The outcome as it appears in results.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::Unchanged => "unchanged",
            Self::Refused => "refused",
        }
    }
}

/// The result of one document line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LineResult {
    /// Its line number, from 1.
    pub line: u64,
    /// The agent id, when the line got as far as having one.
    pub id: Option<String>,
    /// What became of it.
    pub outcome: Outcome,
    /// Why it was refused (empty otherwise), each at its JSON pointer.
    pub problems: Vec<FieldProblem>,
}

impl LineResult {
    fn refused(line: u64, id: Option<String>, problems: Vec<FieldProblem>) -> Self {
        Self {
            line,
            id,
            outcome: Outcome::Refused,
            problems,
        }
    }
}

/// Why an import stopped before the end of its input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "code", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Stopped {
    /// The input has more lines than [`ImportLimits::max_lines`].
    TooManyLines {
        /// The limit.
        max_lines: u64,
    },
    /// Reading the input failed.
    Read {
        /// The read error.
        message: String,
    },
    /// The store failed; lines from this one on were not imported.
    Store {
        /// The store error.
        message: String,
    },
    /// Nobody takes the results any more (the client went away).
    Cancelled,
}

/// The counts of a finished import.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ImportSummary {
    /// Lines read, blank ones included.
    pub lines: u64,
    /// Blank lines skipped.
    pub blank: u64,
    /// Agents created.
    pub created: u64,
    /// Agents updated.
    pub updated: u64,
    /// Documents already held as they are.
    pub unchanged: u64,
    /// Lines refused.
    pub refused: u64,
    /// Why the import stopped early; `None` when it read all its input.
    pub stopped: Option<Stopped>,
}

impl ImportSummary {
    fn count(&mut self, r: &LineResult) {
        match r.outcome {
            Outcome::Created => self.created += 1,
            Outcome::Updated => self.updated += 1,
            Outcome::Unchanged => self.unchanged += 1,
            Outcome::Refused => self.refused += 1,
        }
    }
}

/// Imports NDJSON into a registry. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Importer {
    registry: Registry,
    limits: ImportLimits,
    issue_chunk: usize,
}

/// A line waiting in a batch.
enum Entry {
    /// Already decided (too long).
    Done(LineResult),
    /// A document line to parse, validate and issue.
    Line { line: u64, bytes: Vec<u8> },
}

/// A line after validation.
enum Checked {
    Done(LineResult),
    Ready {
        line: u64,
        id: String,
        prepared: Box<Prepared>,
    },
}

impl Importer {
    /// An importer into `registry` (its validator, its issuer) with
    /// `limits`.
    pub fn new(registry: Registry, limits: ImportLimits) -> Self {
        Self {
            registry,
            limits,
            issue_chunk: ISSUE_CHUNK,
        }
    }

    /// Issues at most `n` documents per store transaction (at least 1):
    /// [`SERVING_ISSUE_CHUNK`] on a node that serves searches meanwhile.
    #[must_use]
    pub fn with_issue_chunk(mut self, n: usize) -> Self {
        self.issue_chunk = n.max(1);
        self
    }

    /// Imports every line of `input`, sending one [`LineResult`] per
    /// document line to `results` in line order (each batch's results once
    /// the batch is on disk), and answers the counts. Stops early, with
    /// [`ImportSummary::stopped`] saying why, at the line limit, a read or
    /// store error, or when `results` is closed; what was imported until
    /// then stays imported and is flushed.
    pub async fn run<R>(&self, input: R, results: mpsc::Sender<LineResult>) -> ImportSummary
    where
        R: AsyncBufRead + Unpin,
    {
        let mut reader = LineReader::new(input, self.limits.max_line_bytes);
        let mut summary = ImportSummary::default();
        let mut batch: Vec<Entry> = Vec::new();
        let mut batch_bytes = 0usize;
        let mut in_validation = None;
        loop {
            let next = reader.next_line().await;
            let line = summary.lines + 1;
            let stop = match next {
                Ok(None) => Some(None),
                Err(e) => Some(Some(Stopped::Read {
                    message: format!("line {line}: {e}"),
                })),
                Ok(Some(_)) if summary.lines >= self.limits.max_lines => {
                    Some(Some(Stopped::TooManyLines {
                        max_lines: self.limits.max_lines,
                    }))
                }
                Ok(Some(read)) => {
                    summary.lines = line;
                    match read {
                        Read::TooLong { bytes } => batch.push(Entry::Done(LineResult::refused(
                            line,
                            None,
                            vec![FieldProblem {
                                field: String::new(),
                                message: format!(
                                    "the line has {bytes} bytes; at most {} are allowed",
                                    self.limits.max_line_bytes
                                ),
                            }],
                        ))),
                        Read::Line(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => {
                            summary.blank += 1;
                        }
                        Read::Line(bytes) => {
                            batch_bytes += bytes.len();
                            batch.push(Entry::Line { line, bytes });
                        }
                    }
                    None
                }
            };
            let full = batch.len() >= BATCH_LINES || batch_bytes >= BATCH_BYTES;
            if full || stop.is_some() {
                // This batch is validated while the one before it is
                // issued: the two stages overlap on the two sides of the
                // blocking pool and the runtime.
                let entries = std::mem::take(&mut batch);
                batch_bytes = 0;
                let validating = self.validate(entries);
                if let Some(previous) = in_validation.replace(validating) {
                    if let Err(stopped) = self
                        .issue_batch(previous.await, &results, &mut summary)
                        .await
                    {
                        summary.stopped = Some(stopped);
                        in_validation = None;
                        break;
                    }
                }
            }
            if let Some(stopped) = stop {
                summary.stopped = stopped;
                break;
            }
        }
        if let Some(last) = in_validation {
            if let Err(stopped) = self.issue_batch(last.await, &results, &mut summary).await {
                summary.stopped.get_or_insert(stopped);
            }
        }
        summary
    }

    /// Starts validating a batch, split over the cores, on threads of its
    /// own at background priority (`crate::priority`: on a busy machine
    /// the node's searches run first); what the future answers is the
    /// batch in line order.
    fn validate(
        &self,
        entries: Vec<Entry>,
    ) -> impl std::future::Future<Output = Result<Vec<Checked>, Stopped>> {
        let parts = std::thread::available_parallelism().map_or(1, |n| n.get());
        let per_part = entries.len().div_ceil(parts).max(1);
        let mut entries = entries.into_iter();
        let mut tasks = Vec::with_capacity(parts);
        let mut spawn_error = None;
        loop {
            let part: Vec<Entry> = entries.by_ref().take(per_part).collect();
            if part.is_empty() {
                break;
            }
            let registry = self.registry.clone();
            let (tx, rx) = tokio::sync::oneshot::channel();
            let spawned = std::thread::Builder::new()
                .name("import-validate".into())
                .spawn(move || {
                    crate::priority::lower_current_thread();
                    let checked: Vec<Checked> =
                        part.into_iter().map(|e| check(&registry, e)).collect();
                    let _ = tx.send(checked);
                });
            match spawned {
                Ok(_) => tasks.push(rx),
                Err(e) => {
                    spawn_error = Some(e.to_string());
                    break;
                }
            }
        }
        async move {
            if let Some(e) = spawn_error {
                return Err(Stopped::Store {
                    message: format!("could not start a validation thread: {e}"),
                });
            }
            let mut out = Vec::new();
            for task in tasks {
                out.extend(task.await.map_err(|_| Stopped::Store {
                    message: "a validation thread ended without its results".into(),
                })?);
            }
            Ok(out)
        }
    }

    /// Issues and flushes one validated batch, then reports its results.
    async fn issue_batch(
        &self,
        checked: Result<Vec<Checked>, Stopped>,
        results: &mpsc::Sender<LineResult>,
        summary: &mut ImportSummary,
    ) -> Result<(), Stopped> {
        let checked = checked?;
        if checked.is_empty() {
            return Ok(());
        }

        // Issued concurrently in runs of distinct ids, so that two lines
        // for one agent land in line order.
        let mut done: Vec<LineResult> = Vec::with_capacity(checked.len());
        let mut run: Vec<Checked> = Vec::new();
        let mut ids: HashSet<String> = HashSet::new();
        let mut store_error = None;
        for c in checked.into_iter().map(Some).chain([None]) {
            let repeats = match &c {
                Some(Checked::Ready { id, .. }) => ids.contains(id),
                _ => false,
            };
            if c.is_none() || repeats {
                let mut pending = std::mem::take(&mut run).into_iter();
                let chunks: Vec<Vec<Checked>> = std::iter::from_fn(|| {
                    let chunk: Vec<Checked> = pending.by_ref().take(self.issue_chunk).collect();
                    (!chunk.is_empty()).then_some(chunk)
                })
                .collect();
                let issued: Vec<_> = futures_util::stream::iter(chunks)
                    .map(|chunk| self.apply(chunk))
                    .buffered(IN_FLIGHT)
                    .collect::<Vec<_>>()
                    .await
                    .into_iter()
                    .flatten()
                    .collect();
                ids.clear();
                for r in issued {
                    match r {
                        Ok(r) => done.push(r),
                        Err(e) => {
                            store_error.get_or_insert(e);
                        }
                    }
                }
                if store_error.is_some() {
                    break;
                }
            }
            if let Some(c) = c {
                if let Checked::Ready { id, .. } = &c {
                    ids.insert(id.clone());
                }
                run.push(c);
            }
        }
        // What was issued is made durable before it is reported, even when
        // the store failed on a later line.
        self.registry
            .store
            .flush()
            .await
            .map_err(|e| Stopped::Store {
                message: e.to_string(),
            })?;
        done.sort_by_key(|r| r.line);
        for r in done {
            summary.count(&r);
            if results.send(r).await.is_err() {
                return Err(Stopped::Cancelled);
            }
        }
        // After a store failure, the lines issued before it are reported;
        // the summary says where the import stopped.
        match store_error {
            Some(e) => Err(Stopped::Store {
                message: e.to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Issues a chunk of validated documents of distinct agents, each
    /// unless it is unchanged: one hop to the blocking pool to find the
    /// unchanged ones, then one [`Issuer::descriptors`] call (one store
    /// transaction) for the rest. A store failure is an `Err` among the
    /// results; refusals are refused lines.
    async fn apply(&self, chunk: Vec<Checked>) -> Vec<Result<LineResult, StoreError>> {
        let issuer: &Issuer = &self.registry.issuer;
        // Only a local, fresh agent can be left unchanged: its compact
        // record says so without the whole record, which is read (for its
        // document) only then.
        let half_life = issuer.ttl().as_secs() / 2;
        let ids: Vec<String> = chunk
            .iter()
            .filter_map(|c| match c {
                Checked::Ready { id, .. } => Some(id.clone()),
                Checked::Done(_) => None,
            })
            .collect();
        let held = self
            .registry
            .store
            .run_blocking(move |s| -> Result<Vec<Option<String>>, StoreError> {
                let now = record::unix_now();
                ids.iter()
                    .map(|id| match s.compact(id)? {
                        Some(c) if c.local && c.expires_at > now.saturating_add(half_life) => {
                            Ok(s.get(id)?.and_then(|a| match a.body {
                                RecordBody::Descriptor(held) => Some(held.document),
                                RecordBody::Tombstone(_) => None,
                            }))
                        }
                        _ => Ok(None),
                    })
                    .collect()
            })
            .await
            .and_then(|r| r);
        let mut held = match held {
            Ok(held) => held.into_iter(),
            Err(e) => return vec![Err(e)],
        };
        let mut out = Vec::with_capacity(chunk.len());
        let mut issuing: Vec<(u64, String)> = Vec::new();
        let mut items = Vec::new();
        for c in chunk {
            let (line, id, prepared) = match c {
                Checked::Done(r) => {
                    out.push(Ok(r));
                    continue;
                }
                Checked::Ready { line, id, prepared } => (line, id, prepared),
            };
            let held_document = held.next().expect("one held document per ready line");
            if held_document.is_some_and(|held| same_document(&held, &prepared)) {
                out.push(Ok(LineResult {
                    line,
                    id: Some(id),
                    outcome: Outcome::Unchanged,
                    problems: Vec::new(),
                }));
                continue;
            }
            let Prepared {
                descriptor,
                document,
                ..
            } = *prepared;
            issuing.push((line, id));
            items.push((descriptor, document, Evidence::default()));
        }
        let issued = issuer
            .descriptors(
                items,
                Origin::Local,
                Expect::LocalOrAbsent,
                Durability::Periodic,
            )
            .await;
        for ((line, id), issued) in issuing.into_iter().zip(issued) {
            out.push(match issued.map_err(RegistryError::from) {
                Ok(issued) => Ok(LineResult {
                    line,
                    id: Some(id),
                    outcome: match issued.outcome {
                        PutOutcome::Created => Outcome::Created,
                        PutOutcome::Updated => Outcome::Updated,
                    },
                    problems: Vec::new(),
                }),
                Err(RegistryError::Store(e)) => Err(e),
                Err(e) => Ok(LineResult::refused(line, Some(id), problems_of(e))),
            });
        }
        out
    }
}

/// Parses and validates one line (on a blocking thread).
fn check(registry: &Registry, entry: Entry) -> Checked {
    let (line, bytes) = match entry {
        Entry::Done(r) => return Checked::Done(r),
        Entry::Line { line, bytes } => (line, bytes),
    };
    let doc: Value = match serde_json::from_slice(&bytes) {
        Ok(doc) => doc,
        Err(e) => {
            return Checked::Done(LineResult::refused(
                line,
                None,
                vec![FieldProblem {
                    field: String::new(),
                    message: format!("the line is not JSON: {e}"),
                }],
            ))
        }
    };
    let id = match doc.get("id") {
        None | Some(Value::Null) => derived_id(&doc),
        Some(Value::String(id)) => id.clone(),
        Some(_) => {
            return Checked::Done(LineResult::refused(
                line,
                None,
                vec![FieldProblem {
                    field: "/id".into(),
                    message: "id must be a string".into(),
                }],
            ))
        }
    };
    match registry.prepare(&id, &doc) {
        Ok(prepared) => Checked::Ready {
            line,
            id,
            prepared: Box::new(prepared),
        },
        Err(e) => Checked::Done(LineResult::refused(line, Some(id), problems_of(e))),
    }
}

/// A registry refusal as field problems.
fn problems_of(e: RegistryError) -> Vec<FieldProblem> {
    match e {
        RegistryError::Invalid { problems, .. } => problems,
        RegistryError::NotLocal { .. } => vec![FieldProblem {
            field: "/id".into(),
            message: e.to_string(),
        }],
        other => vec![FieldProblem {
            field: String::new(),
            message: other.to_string(),
        }],
    }
}

/// Whether the held document text says what `new` says, as JSON values.
fn same_document(held: &str, new: &Prepared) -> bool {
    held == new.document || serde_json::from_str::<Value>(held).is_ok_and(|v| v == new.doc)
}

/// The id of a document given without one: `agent-` and the first 16
/// bytes of the SHA-256 of its canonical JSON (members sorted, the `id`
/// member left out).
fn derived_id(doc: &Value) -> String {
    let mut canonical = Vec::new();
    match doc {
        Value::Object(map) => {
            let mut without_id = map.clone();
            without_id.remove("id");
            write_canonical(&Value::Object(without_id), &mut canonical);
        }
        other => write_canonical(other, &mut canonical),
    }
    let digest = Sha256::digest(&canonical);
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    generated_id(bytes)
}

/// JSON with object members in key order, no whitespace.
fn write_canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(map) => {
            let mut members: Vec<_> = map.iter().collect();
            members.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, k).expect("writing to a Vec cannot fail");
                out.push(b':');
                write_canonical(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => serde_json::to_writer(&mut *out, scalar).expect("writing to a Vec cannot fail"),
    }
}

/// One line as read.
#[derive(Debug, PartialEq, Eq)]
enum Read {
    /// The line's bytes, without its `\n` (or `\r\n`).
    Line(Vec<u8>),
    /// Over the limit: skipped to its end, not held.
    TooLong { bytes: u64 },
}

/// Splits input into lines, holding at most `max` bytes of one.
struct LineReader<R> {
    inner: R,
    max: usize,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    fn new(inner: R, max: usize) -> Self {
        Self { inner, max }
    }

    /// The next line; `None` at the end of input. A last line without a
    /// newline is a line.
    async fn next_line(&mut self) -> std::io::Result<Option<Read>> {
        let mut buf = Vec::new();
        let mut bytes: u64 = 0;
        let mut too_long = false;
        let mut any = false;
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                if !any {
                    return Ok(None);
                }
                break;
            }
            any = true;
            let (chunk, used, end) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (&available[..i], i + 1, true),
                None => (available, available.len(), false),
            };
            bytes += chunk.len() as u64;
            if !too_long {
                if buf.len() + chunk.len() > self.max.saturating_add(1) {
                    // One byte over is kept so that a `\r` before the
                    // newline does not count against the limit.
                    too_long = true;
                    buf = Vec::new();
                } else {
                    buf.extend_from_slice(chunk);
                }
            }
            self.inner.consume(used);
            if end {
                break;
            }
        }
        if !too_long && buf.last() == Some(&b'\r') {
            buf.pop();
            bytes -= 1;
        }
        if too_long || buf.len() > self.max {
            return Ok(Some(Read::TooLong { bytes }));
        }
        Ok(Some(Read::Line(buf)))
    }
}

#[cfg(test)]
mod tests;
