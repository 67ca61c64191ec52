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

mod mcp;

use std::collections::{BTreeMap, HashSet, VecDeque};

use futures_util::StreamExt as _;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _};
use tokio::sync::mpsc;

use super::{generated_id, Prepared, Registry, RegistryError};
use crate::aidip::FieldProblem;
use crate::descriptor::Descriptor;
use crate::formats::FormatError;
use crate::issuer::{Durability, Issuer};
use crate::record::{self, RecordBody};
use crate::store::{Expect, Origin, PutOutcome, StoreError};
use crate::verify::{Evidence, Reason};

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

/// Largest input read as one JSON document (an `mcp-registry` list), in
/// bytes; larger lists are given as NDJSON, one server per line.
pub const MAX_DOCUMENT_BYTES: usize = 128 << 20;

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

/// What became of one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = ImportOutcome)]
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
    /// A server the registry deleted was held here and is now deleted
    /// (`mcp-registry`).
    Deleted,
    /// Nothing to do (`mcp-registry`: a deleted server not held here, a
    /// version that is not the latest, an item a later one supersedes);
    /// `problems` says why.
    Skipped,
}

impl Outcome {
    /// The outcome as it appears in results.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::Unchanged => "unchanged",
            Self::Refused => "refused",
            Self::Deleted => "deleted",
            Self::Skipped => "skipped",
        }
    }
}

/// The result of one document line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct LineResult {
    /// Its line number, from 1 (for one JSON document: its item's number,
    /// from 1).
    pub line: u64,
    /// The agent id, when the line got as far as having one.
    pub id: Option<String>,
    /// What became of it.
    pub outcome: Outcome,
    /// Why it was refused or skipped (empty otherwise), each at its JSON
    /// pointer.
    pub problems: Vec<FieldProblem>,
    /// The reason code of a refusal, when the format has one
    /// (`mcp-registry`: `mcp_server_invalid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
}

impl LineResult {
    fn refused(line: u64, id: Option<String>, problems: Vec<FieldProblem>) -> Self {
        Self {
            line,
            id,
            outcome: Outcome::Refused,
            problems,
            reason: None,
        }
    }

    /// A refusal of a format's parser: its reason code, its message split
    /// into the member it names and what is wrong.
    fn refused_as(line: u64, id: Option<String>, e: FormatError) -> Self {
        let problem = match e.message.split_once(": ") {
            Some((field, message)) if field.starts_with('/') => FieldProblem {
                field: field.into(),
                message: message.into(),
            },
            _ => FieldProblem {
                field: String::new(),
                message: e.message,
            },
        };
        Self {
            reason: Some(e.reason),
            ..Self::refused(line, id, vec![problem])
        }
    }

    fn skipped(line: u64, id: String, why: impl Into<String>) -> Self {
        Self {
            line,
            id: Some(id),
            outcome: Outcome::Skipped,
            problems: vec![FieldProblem {
                field: String::new(),
                message: why.into(),
            }],
            reason: None,
        }
    }

    fn done(line: u64, id: String, outcome: Outcome) -> Self {
        Self {
            line,
            id: Some(id),
            outcome,
            problems: Vec::new(),
            reason: None,
        }
    }
}

/// Why an import stopped before the end of its input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = ImportStopped)]
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
    /// The input is not what its format reads (`mcp-registry`: neither
    /// one JSON document of a server list nor NDJSON of servers, or a
    /// document over [`MAX_DOCUMENT_BYTES`]); nothing was imported.
    Invalid {
        /// What is wrong.
        message: String,
    },
    /// Nobody takes the results any more (the client went away).
    Cancelled,
}

/// The counts of a finished import.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ImportSummary {
    /// Lines read, blank ones included (for one JSON document: its
    /// items).
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
    /// Agents deleted (`mcp-registry`; left out when 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub deleted: u64,
    /// Lines skipped (`mcp-registry`; left out when 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub skipped: u64,
    /// The refused lines that carry a reason code, by code (left out
    /// when none does).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub refused_reasons: BTreeMap<Reason, u64>,
    /// Why the import stopped early; `None` when it read all its input.
    pub stopped: Option<Stopped>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ImportSummary {
    /// Counts one result.
    pub fn count(&mut self, r: &LineResult) {
        match r.outcome {
            Outcome::Created => self.created += 1,
            Outcome::Updated => self.updated += 1,
            Outcome::Unchanged => self.unchanged += 1,
            Outcome::Refused => {
                self.refused += 1;
                if let Some(reason) = r.reason {
                    *self.refused_reasons.entry(reason).or_default() += 1;
                }
            }
            Outcome::Deleted => self.deleted += 1,
            Outcome::Skipped => self.skipped += 1,
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

/// A line waiting in a batch.
enum Entry {
    /// Already decided (too long, superseded).
    Done(LineResult),
    /// A document line to parse, validate and issue.
    Line { line: u64, bytes: Vec<u8> },
    /// An item of one JSON document, already parsed, numbered from 1.
    Item { line: u64, item: Value },
}

/// A line after validation.
enum Checked {
    Done(LineResult),
    Ready {
        line: u64,
        id: String,
        prepared: Box<Prepared>,
    },
    /// An agent to delete when it is held here (a server the MCP
    /// Registry deleted).
    Delete {
        line: u64,
        id: String,
    },
}

impl Checked {
    /// The agent this issues or deletes.
    fn id(&self) -> Option<&str> {
        match self {
            Self::Ready { id, .. } | Self::Delete { id, .. } => Some(id),
            Self::Done(_) => None,
        }
    }
}

/// Where the lines of an import come from.
enum Source {
    /// The input's lines (after these, read already).
    Lines(VecDeque<Read>),
    /// The items of one JSON document, read whole.
    Items(std::vec::IntoIter<Entry>),
}

/// One unit of input: a line, or an item of a document.
enum Unit {
    Read(Read),
    Entry(Entry),
}

impl Source {
    async fn next<R: AsyncBufRead + Unpin>(
        &mut self,
        reader: &mut LineReader<R>,
    ) -> std::io::Result<Option<Unit>> {
        match self {
            Self::Lines(before) => match before.pop_front() {
                Some(read) => Ok(Some(Unit::Read(read))),
                None => Ok(reader.next_line().await?.map(Unit::Read)),
            },
            Self::Items(items) => Ok(items.next().map(Unit::Entry)),
        }
    }
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
                Checked::Done(_) | Checked::Delete { .. } => None,
            })
            .collect();
        let held = self
            .registry
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
            .and_then(|r| r);
        let mut held = match held {
            Ok(held) => held.into_iter(),
            Err(e) => return vec![Err(e)],
        };
        let mut out = Vec::with_capacity(chunk.len());
        let mut issuing: Vec<(u64, String)> = Vec::new();
        let mut items = Vec::new();
        let mut deleting: Vec<(u64, String)> = Vec::new();
        for c in chunk {
            let (line, id, prepared) = match c {
                Checked::Done(r) => {
                    out.push(Ok(r));
                    continue;
                }
                Checked::Delete { line, id } => {
                    deleting.push((line, id));
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
        out
    }
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
