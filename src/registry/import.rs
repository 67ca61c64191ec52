//! Bulk import: AIDIP documents, one JSON object per line (NDJSON), into
//! this node's registry as local registrations. `agentmesh import` (into a
//! data directory) and `POST /admin/import` (into a running node) both run
//! [`Importer::run`]; each reads lines from an `AsyncBufRead` and receives
//! one [`LineResult`] per document line on a bounded channel, in line
//! order, then gets the [`ImportSummary`] back.
//!
//! Each document is validated as `POST /agents` validates it
//! (`Registry::prepare`: the AIDIP schema, every problem reported at its
//! JSON pointer) and issued through the node's one [`Issuer`](crate::issuer::Issuer) (signed with
//! the node key for `store.record_ttl`), as a local registration
//! ([`Origin::Local`], [`Expect::LocalOrAbsent`]: an id crawled or received
//! from a peer is refused, as `POST /agents` refuses it). Lines are taken in
//! batches ([`BATCH_LINES`] lines or [`BATCH_BYTES`] bytes); records are
//! issued with [`Durability::Periodic`] and the store is flushed once at the
//! end of each batch, so what a batch imported is on disk before its
//! results are reported. The text index is waited for once, at the end
//! of the run: in between it commits on its own cadence, as a long import
//! would otherwise leave it in a small segment per batch.
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
//!
//! The input is AIDIP by default; [`ImportFormat::McpRegistry`] reads MCP
//! Registry servers instead (the `mcp` submodule: their shapes, their ids
//! `mcp:{name}`, the registry's `deleted` status as a deletion). Both go
//! through the one pipeline here: only how an input line or item becomes
//! what is issued differs, and the same unchanged check, issuer batches
//! and flushes follow.

mod canonical;
mod input;
mod mcp;
mod report;

use std::collections::{HashSet, VecDeque};

use futures_util::StreamExt as _;
use serde_json::Value;
use tokio::io::AsyncBufRead;
use tokio::sync::mpsc;

use self::canonical::derived_id;
pub use self::input::MAX_DOCUMENT_BYTES;
use self::input::{Checked, Entry, LineReader, Read, Source, Unit};
pub use self::report::{ImportSummary, LineResult, Outcome, Stopped};
use super::{Prepared, Registry, RegistryError};
use crate::aidip::FieldProblem;
use crate::descriptor::Descriptor;
use crate::issuer::Durability;
use crate::record::{self, RecordBody};
use crate::store::{Expect, Origin, PutOutcome, StoreError};
use crate::trust::Evidence;

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

/// What the input of an import holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ImportFormat {
    /// AIDIP agent metadata documents, one per line (NDJSON).
    #[default]
    Aidip,
    /// MCP Registry servers: one JSON document (a list API response, an
    /// array of its `{server, _meta}` items or of `server.json` objects,
    /// or a single `server.json`), or NDJSON whose lines each are a
    /// `server.json` or an item ([`crate::formats::mcp`]).
    McpRegistry,
}

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

/// Imports NDJSON into a registry. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Importer {
    registry: Registry,
    limits: ImportLimits,
    issue_chunk: usize,
    format: ImportFormat,
}

impl Importer {
    /// An importer into `registry` (its validator, its issuer) with
    /// `limits`.
    pub fn new(registry: Registry, limits: ImportLimits) -> Self {
        Self {
            registry,
            limits,
            issue_chunk: ISSUE_CHUNK,
            format: ImportFormat::Aidip,
        }
    }

    /// Reads input of `format` ([`ImportFormat::Aidip`] unless told).
    #[must_use]
    pub fn with_format(mut self, format: ImportFormat) -> Self {
        self.format = format;
        self
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
    /// then stays imported and is flushed. For [`ImportFormat::McpRegistry`]
    /// input that is one JSON document, the document is read whole first
    /// (at most [`MAX_DOCUMENT_BYTES`]) and its items take the place of
    /// lines; input that is neither such a document nor NDJSON stops with
    /// [`Stopped::Invalid`] before anything is imported.
    pub async fn run<R>(&self, input: R, results: mpsc::Sender<LineResult>) -> ImportSummary
    where
        R: AsyncBufRead + Unpin,
    {
        let mut reader = LineReader::new(input, self.limits.max_line_bytes);
        let mut summary = ImportSummary::default();
        let mut source = match self.format {
            ImportFormat::Aidip => Source::Lines(VecDeque::new()),
            ImportFormat::McpRegistry => {
                match mcp::sniff(&mut reader, self.limits.max_line_bytes).await {
                    Ok(source) => source,
                    Err(stopped) => {
                        summary.stopped = Some(stopped);
                        return summary;
                    }
                }
            }
        };
        let mut batch: Vec<Entry> = Vec::new();
        let mut batch_bytes = 0usize;
        let mut in_validation = None;
        loop {
            let next = source.next(&mut reader).await;
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
                Ok(Some(Unit::Entry(entry))) => {
                    summary.lines = line;
                    batch.push(entry);
                    None
                }
                Ok(Some(Unit::Read(read))) => {
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
        // What the run imported is searchable by text when it answers.
        if let Err(e) = self.registry.store.sync_text().await {
            tracing::error!(error = %e, "import: the text index did not catch up");
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
            let (registry, format) = (self.registry.clone(), self.format);
            let (tx, rx) = tokio::sync::oneshot::channel();
            let spawned = std::thread::Builder::new()
                .name("import-validate".into())
                .spawn(move || {
                    crate::priority::lower_current_thread();
                    let checked: Vec<Checked> = part
                        .into_iter()
                        .map(|e| check(&registry, format, e))
                        .collect();
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
            let repeats = c
                .as_ref()
                .and_then(Checked::id)
                .is_some_and(|id| ids.contains(id));
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
                if let Some(id) = c.id() {
                    ids.insert(id.to_owned());
                }
                run.push(c);
            }
        }
        // What was issued is made durable before it is reported, even when
        // the store failed on a later line. The text index is not waited
        // for here: it commits on its own cadence during a long import
        // (fewer, larger segments), and once at the end of the run.
        self.registry
            .store
            .flush_durable()
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
    /// transaction) for the rest; then deletes the agents to delete
    /// (through the registry's delete path). A store failure is an `Err`
    /// among the results; refusals are refused lines.
    ///
    /// [`Issuer::descriptors`]: crate::issuer::Issuer::descriptors
    async fn apply(&self, chunk: Vec<Checked>) -> Vec<Result<LineResult, StoreError>> {
        let held = match self.held(&chunk).await {
            Ok(held) => held,
            Err(e) => return vec![Err(e)],
        };
        let mut out = Vec::with_capacity(chunk.len());
        let sorted = sort_chunk(chunk, held, &mut out);
        self.issue(sorted.issuing, sorted.items, &mut out).await;
        self.delete(sorted.deleting, &mut out).await;
        out
    }

    /// What is held for each ready line of `chunk`, in order: the
    /// document and descriptor of a local agent with more than half of
    /// its record's lifetime left, else `None` (it is issued whatever it
    /// says).
    async fn held(&self, chunk: &[Checked]) -> Result<Vec<Option<Held>>, StoreError> {
        // Only a local, fresh agent can be left unchanged: its compact
        // record says so without the whole record, which is read (for its
        // document) only then.
        let half_life = self.registry.issuer.ttl().as_secs() / 2;
        let ids: Vec<String> = chunk
            .iter()
            .filter_map(|c| match c {
                Checked::Ready { id, .. } => Some(id.clone()),
                Checked::Done(_) | Checked::Delete { .. } => None,
            })
            .collect();
        self.registry
            .store
            .run_blocking(move |s| -> Result<Vec<Option<Held>>, StoreError> {
                let now = record::unix_now();
                ids.iter()
                    .map(|id| match s.compact(id)? {
                        Some(c) if c.local && c.expires_at > now.saturating_add(half_life) => {
                            Ok(s.get(id)?.and_then(|a| match a.body {
                                RecordBody::Descriptor(held) => Some(Held {
                                    document: held.document,
                                    descriptor: held.descriptor,
                                }),
                                RecordBody::Tombstone(_) => None,
                            }))
                        }
                        _ => Ok(None),
                    })
                    .collect()
            })
            .await
            .and_then(|r| r)
    }

    /// Issues the `items` of the `issuing` lines in one store transaction
    /// and reports each: created or updated, refused, or a store failure.
    async fn issue(
        &self,
        issuing: Vec<(u64, String)>,
        items: Vec<(Descriptor, String, Evidence)>,
        out: &mut Vec<Result<LineResult, StoreError>>,
    ) {
        let issued = self
            .registry
            .issuer
            .descriptors(
                items,
                Origin::Local,
                Expect::LocalOrAbsent,
                Durability::Periodic,
            )
            .await;
        for ((line, id), issued) in issuing.into_iter().zip(issued) {
            out.push(match issued.map_err(RegistryError::from) {
                Ok(issued) => Ok(LineResult::done(
                    line,
                    id,
                    match issued.outcome {
                        PutOutcome::Created => Outcome::Created,
                        PutOutcome::Updated => Outcome::Updated,
                    },
                )),
                Err(RegistryError::Store(e)) => Err(e),
                Err(e) => Ok(LineResult::refused(line, Some(id), problems_of(e))),
            });
        }
    }

    /// Deletes the agents of the `deleting` lines that are held here and
    /// reports each: deleted, skipped when not held, refused, or a store
    /// failure.
    async fn delete(
        &self,
        deleting: Vec<(u64, String)>,
        out: &mut Vec<Result<LineResult, StoreError>>,
    ) {
        for (line, id) in deleting {
            let deleted = self.registry.delete_with(&id, Durability::Periodic).await;
            out.push(match deleted {
                Ok(()) => Ok(LineResult::done(line, id, Outcome::Deleted)),
                Err(RegistryError::NotFound { .. }) => Ok(LineResult::skipped(
                    line,
                    id,
                    "deleted by its registry, and not held here",
                )),
                Err(RegistryError::Store(e)) => Err(e),
                Err(e) => Ok(LineResult::refused(line, Some(id), problems_of(e))),
            });
        }
    }
}

/// A chunk's lines sorted by what is left to do with them.
struct Sorted {
    /// The lines to issue (line, id), in order.
    issuing: Vec<(u64, String)>,
    /// What each of them issues.
    items: Vec<(Descriptor, String, Evidence)>,
    /// The lines that delete an agent (line, id).
    deleting: Vec<(u64, String)>,
}

/// Sorts a chunk: lines already done and documents unchanged from what is
/// `held` (one per ready line, in order) are reported into `out`; the
/// rest are to issue or to delete.
fn sort_chunk(
    chunk: Vec<Checked>,
    held: Vec<Option<Held>>,
    out: &mut Vec<Result<LineResult, StoreError>>,
) -> Sorted {
    let mut held = held.into_iter();
    let mut sorted = Sorted {
        issuing: Vec::new(),
        items: Vec::new(),
        deleting: Vec::new(),
    };
    for c in chunk {
        let (line, id, prepared) = match c {
            Checked::Done(r) => {
                out.push(Ok(r));
                continue;
            }
            Checked::Delete { line, id } => {
                sorted.deleting.push((line, id));
                continue;
            }
            Checked::Ready { line, id, prepared } => (line, id, prepared),
        };
        let held = held.next().expect("one held document per ready line");
        if held.is_some_and(|held| held.says(&prepared)) {
            out.push(Ok(LineResult::done(line, id, Outcome::Unchanged)));
            continue;
        }
        let Prepared {
            descriptor,
            document,
            ..
        } = *prepared;
        sorted.issuing.push((line, id));
        sorted
            .items
            .push((descriptor, document, Evidence::default()));
    }
    sorted
}

/// What is held for an agent a line would issue.
struct Held {
    document: String,
    descriptor: Descriptor,
}

impl Held {
    /// Whether issuing `new` would say what is held: the same document
    /// (as JSON values) and the same descriptor (for an MCP server, its
    /// status lives outside the document).
    fn says(&self, new: &Prepared) -> bool {
        self.descriptor == new.descriptor && same_document(&self.document, new)
    }
}

/// Parses and validates one line or item of `format` (on a blocking
/// thread).
fn check(registry: &Registry, format: ImportFormat, entry: Entry) -> Checked {
    let (line, doc) = match entry {
        Entry::Done(r) => return Checked::Done(r),
        Entry::Item { line, item } => (line, item),
        Entry::Line { line, bytes } => match serde_json::from_slice(&bytes) {
            Ok(doc) => (line, doc),
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
        },
    };
    match format {
        ImportFormat::Aidip => check_aidip(registry, line, &doc),
        ImportFormat::McpRegistry => mcp::check(line, &doc),
    }
}

/// Validates one AIDIP document as a registration.
fn check_aidip(registry: &Registry, line: u64, doc: &Value) -> Checked {
    let id = match doc.get("id") {
        None | Some(Value::Null) => derived_id(doc),
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
    if doc.get("visibility").is_some() {
        // A hidden agent must be hidden before its first record is
        // stored: that is the API's to do, one registration at a time.
        return Checked::Done(LineResult::refused(
            line,
            Some(id),
            vec![FieldProblem {
                field: "/visibility".into(),
                message: "an import registers public agents; register an unlisted or \
                          private agent with POST /agents"
                    .into(),
            }],
        ));
    }
    match registry.prepare(&id, doc) {
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

#[cfg(test)]
mod tests;
