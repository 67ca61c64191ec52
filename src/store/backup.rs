//! Backup and move: a whole store written out as one versioned JSONL
//! export ([`BlockingStore::export`]), and an export restored into an
//! empty directory ([`restore`]). `agentmesh export`, `GET /admin/export`
//! and `agentmesh import --format export` call these
//! (docs/protocol.md#export).
//!
//! The lines, in this order:
//! - the header, `{"agentmesh_export":1,"schema":N,"created":T}`: the
//!   format's version, and the store layout ([`SCHEMA_VERSION`]) the
//!   entries below are in;
//! - `{"type":"registration","id","document"}`: each live agent
//!   registered through this node's API, its AIDIP document as JSON
//!   (`jq -c 'select(.type=="registration").document'` gives AIDIP JSONL
//!   that any registry imports), with `"visibility"` for an unlisted or
//!   private one (add `and .visibility == null` to leave those out);
//! - `{"type":"record","id","kind","record"}`: every record held (kind
//!   `descriptor`, `claimed` or `tombstone`), `record` the signed
//!   envelope's bytes in base64, exactly as this node received or signed
//!   them: nothing is re-signed on the way back;
//! - `{"type":"entry","tree","key","value"}`: every entry of every other
//!   tree of the store (keys and values in base64), whatever the tree, so
//!   a tree added later (the audit log's among them) travels without a
//!   change here; only `pending`, the text index's own bookkeeping, is
//!   left out, as the index is rebuilt from the records at restore;
//! - the trailer, `{"type":"end","lines":N}`: the count of lines before
//!   it. An export without it broke off and is refused.
//!
//! Consistency: record writes (registrations, imports, crawls, records
//! from peers) wait while the export copies the store, so the records,
//! the registrations and their indexes are those of one instant; the
//! other trees are read in the same pass, each entry whole. The node's
//! private key is not in an export: the operator copies `node.key`
//! beside the restored store.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::error::StoreError;
use super::handles::BlockingStore;
use super::migrate::SCHEMA_VERSION;
use super::open::StoreOptions;
use super::stored::{KIND_CLAIMED, KIND_DESCRIPTOR, KIND_TOMBSTONE};
use super::Store;
use crate::record::SignedRecord;

/// The version of the export format this build writes and reads.
pub const EXPORT_VERSION: u32 = 1;

/// The header line's first member, by which an export is recognised.
pub const EXPORT_MAGIC: &str = "agentmesh_export";

/// The longest line [`restore`] reads: a record is at most
/// `record::MAX_RECORD_BYTES` (base64 grows it by a third), and the
/// other trees' values (crawl reports, schedule entries, audit entries)
/// are far smaller.
pub const MAX_EXPORT_LINE_BYTES: usize = 4 * 1024 * 1024;

/// The sled tree of the text index's bookkeeping, left out of exports.
const PENDING_TREE: &str = "pending";
/// The tree of the records, written as `record` lines.
const RECORDS_TREE: &str = "records";
/// sled's own default tree (never written by the store).
const SLED_DEFAULT_TREE: &str = "__sled__default";

/// Errors of an export or a restore.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackupError {
    /// Reading the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The database failed while restoring.
    #[error("store I/O: {0}")]
    Sled(#[from] sled::Error),
    /// Writing the export or reading the input failed.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    /// A line of the input is not what the format says.
    #[error("line {line}: {reason}")]
    Format {
        /// The line's number, from 1.
        line: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// The input ended before its trailer: the export broke off.
    #[error("the export ends at line {lines} without its trailer: it is incomplete")]
    Truncated {
        /// The lines read.
        lines: u64,
    },
    /// The export is in a store layout this build does not read.
    #[error("the export holds store schema {found}; this build reads schema {expected}")]
    Schema {
        /// The export's schema.
        found: u32,
        /// [`SCHEMA_VERSION`].
        expected: u32,
    },
    /// A restore goes only into an empty directory.
    #[error("{} is not empty: a restore goes only into an empty store directory", dir.display())]
    NotEmpty {
        /// The store directory.
        dir: PathBuf,
    },
}

/// The first line of an export.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    agentmesh_export: u32,
    schema: u32,
    /// When the export was made (seconds since the Unix epoch).
    created: u64,
}

/// Every line after the header.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum Line {
    Registration {
        id: String,
        document: serde_json::Value,
        /// `unlisted` or `private` for a hidden agent (absent: public),
        /// so that a filter can leave hidden agents out of what goes to
        /// another registry.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        visibility: Option<super::visibility::Visibility>,
    },
    Record {
        id: String,
        kind: RecordKind,
        record: String,
    },
    Entry {
        tree: String,
        key: String,
        value: String,
    },
    End {
        lines: u64,
    },
}

/// How the store holds a record (`store/stored.rs`'s kind byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RecordKind {
    /// A live descriptor whose evidence counts.
    Descriptor,
    /// A live descriptor whose evidence is only claimed.
    Claimed,
    /// A tombstone.
    Tombstone,
}

impl RecordKind {
    fn of(byte: u8) -> Option<Self> {
        match byte {
            KIND_DESCRIPTOR => Some(Self::Descriptor),
            KIND_CLAIMED => Some(Self::Claimed),
            KIND_TOMBSTONE => Some(Self::Tombstone),
            _ => None,
        }
    }

    fn byte(self) -> u8 {
        match self {
            Self::Descriptor => KIND_DESCRIPTOR,
            Self::Claimed => KIND_CLAIMED,
            Self::Tombstone => KIND_TOMBSTONE,
        }
    }
}

/// What an export or a restore carried.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BackupSummary {
    /// Live registrations of this node.
    pub registrations: u64,
    /// Records, tombstones included.
    pub records: u64,
    /// Entries of the other trees.
    pub entries: u64,
}

impl BlockingStore {
    /// Writes the whole store to `out` in the export format (the module
    /// documentation), record writes held back until it is done.
    ///
    /// # Errors
    /// [`BackupError::Io`] when `out` fails, [`BackupError::Store`] when
    /// a tree cannot be read.
    pub fn export(&self, out: &mut dyn Write) -> Result<BackupSummary, BackupError> {
        let inner = &self.inner;
        // Record writes take the gate shared for their transaction: held
        // exclusively, no record changes while the trees are read.
        let _frozen = inner
            .gate
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut summary = BackupSummary::default();
        let mut out = Out { out, lines: 0 };
        out.put(&Header {
            agentmesh_export: EXPORT_VERSION,
            schema: SCHEMA_VERSION,
            created: crate::record::unix_now(),
        })?;
        for id in inner.local.iter().keys() {
            let id = id.map_err(StoreError::from)?;
            let Some(stored) = inner.records.get(&id).map_err(StoreError::from)? else {
                continue;
            };
            let id = String::from_utf8_lossy(&id).into_owned();
            if stored.first() == Some(&KIND_TOMBSTONE) {
                continue;
            }
            let envelope = super::stored::stored_envelope(&id, &stored)?;
            let Some(document) = SignedRecord::trusted_document(envelope)
                .map_err(|e| super::error::corrupt(&id, e.to_string()))?
            else {
                continue;
            };
            let document =
                serde_json::from_str(&document).unwrap_or(serde_json::Value::String(document));
            let visibility = self
                .entitlement(&id)
                .map(|e| e.visibility)
                .filter(|v| *v != super::visibility::Visibility::Public);
            out.put(&Line::Registration {
                id,
                document,
                visibility,
            })?;
            summary.registrations += 1;
        }
        for entry in inner.records.iter() {
            let (id, stored) = entry.map_err(StoreError::from)?;
            let id = String::from_utf8_lossy(&id).into_owned();
            let kind = stored
                .first()
                .copied()
                .and_then(RecordKind::of)
                .ok_or_else(|| super::error::corrupt(&id, "unknown record kind".into()))?;
            let record = B64.encode(super::stored::stored_envelope(&id, &stored)?);
            out.put(&Line::Record { id, kind, record })?;
            summary.records += 1;
        }
        let mut names: Vec<String> = inner
            .db
            .tree_names()
            .iter()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .filter(|n| ![RECORDS_TREE, PENDING_TREE, SLED_DEFAULT_TREE].contains(&n.as_str()))
            .collect();
        names.sort();
        for name in names {
            let tree = inner.db.open_tree(&name).map_err(StoreError::from)?;
            for entry in tree.iter() {
                let (key, value) = entry.map_err(StoreError::from)?;
                out.put(&Line::Entry {
                    tree: name.clone(),
                    key: B64.encode(key),
                    value: B64.encode(value),
                })?;
                summary.entries += 1;
            }
        }
        let lines = out.lines;
        out.put(&Line::End { lines })?;
        out.out.flush()?;
        Ok(summary)
    }
}

impl BlockingStore {
    /// The store exported into a spool file beside the store (in the
    /// data directory), rewound and already unlinked, so that nothing is
    /// left behind whatever happens to the reader: the node then streams
    /// it to a slow client while record writes go on.
    ///
    /// # Errors
    /// As [`BlockingStore::export`]; [`BackupError::Io`] when the spool
    /// file cannot be made.
    pub fn export_to_spool(&self) -> Result<(std::fs::File, BackupSummary), BackupError> {
        use std::io::Seek as _;
        let dir = self.inner.dir.parent().unwrap_or(&self.inner.dir);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let path = dir.join(format!(".export-{}-{nanos}.jsonl", std::process::id()));
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        let removed = std::fs::remove_file(&path);
        let summary = {
            let mut out = std::io::BufWriter::new(&mut file);
            let summary = self.export(&mut out);
            out.flush()?;
            summary
        };
        removed?;
        let summary = summary?;
        file.rewind()?;
        Ok((file, summary))
    }
}

/// Whether `first_line` is an export's header (how `agentmesh import`
/// tells an export from AIDIP documents).
pub fn is_export_header(first_line: &str) -> bool {
    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(first_line)
        .is_ok_and(|m| m.keys().next().map(String::as_str) == Some(EXPORT_MAGIC))
}

/// Restores an export read from `input` into `dir`, which must be absent
/// or empty: every record as it was exported (its signature checked,
/// its bytes kept), every other tree's entries, then the store opened
/// once with `options` (which rebuilds the text index from the records)
/// and closed. On any failure nothing is left in `dir`.
///
/// # Errors
/// [`BackupError::NotEmpty`]; [`BackupError::Format`] for a line that is
/// not what the format says (a record whose signature does not verify
/// among them); [`BackupError::Schema`]; [`BackupError::Truncated`];
/// [`BackupError::Io`], [`BackupError::Sled`] and [`BackupError::Store`]
/// from the disk.
pub fn restore(
    dir: &Path,
    input: &mut dyn BufRead,
    options: &StoreOptions,
) -> Result<BackupSummary, BackupError> {
    let empty = match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_none(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => return Err(e.into()),
    };
    if !empty {
        return Err(BackupError::NotEmpty {
            dir: dir.to_path_buf(),
        });
    }
    let result = restore_into(dir, input).and_then(|summary| {
        let store = Store::open_with(dir, options)?;
        store.close_blocking()?;
        Ok(summary)
    });
    if result.is_err() {
        // The directory was empty: what is in it now is this restore's.
        let _ = std::fs::remove_dir_all(dir);
    }
    result
}

fn restore_into(dir: &Path, input: &mut dyn BufRead) -> Result<BackupSummary, BackupError> {
    let mut reader = Lines {
        input,
        number: 0,
        buf: Vec::new(),
    };
    let Some(first) = reader.next()? else {
        return Err(BackupError::Truncated { lines: 0 });
    };
    let header: Header = serde_json::from_slice(first).map_err(|e| BackupError::Format {
        line: 1,
        reason: format!("not an export header: {e}"),
    })?;
    if header.agentmesh_export != EXPORT_VERSION {
        return Err(BackupError::Format {
            line: 1,
            reason: format!(
                "export format version {} (this build reads {EXPORT_VERSION})",
                header.agentmesh_export
            ),
        });
    }
    if header.schema != SCHEMA_VERSION {
        return Err(BackupError::Schema {
            found: header.schema,
            expected: SCHEMA_VERSION,
        });
    }
    let db = sled::Config::new().path(dir).flush_every_ms(None).open()?;
    let records = db.open_tree(RECORDS_TREE)?;
    let mut summary = BackupSummary::default();
    loop {
        let line_no = reader.number + 1;
        let Some(raw) = reader.next()? else {
            return Err(BackupError::Truncated {
                lines: reader.number,
            });
        };
        let bad = |reason: String| BackupError::Format {
            line: line_no,
            reason,
        };
        let line: Line = serde_json::from_slice(raw).map_err(|e| bad(e.to_string()))?;
        match line {
            // Derived from the records and the `local` tree's entries.
            Line::Registration { .. } => summary.registrations += 1,
            Line::Record { id, kind, record } => {
                let bytes = B64
                    .decode(record)
                    .map_err(|e| bad(format!("record of {id}: {e}")))?;
                let signed = SignedRecord::decode(&bytes)
                    .map_err(|e| bad(format!("record of {id}: {e}")))?;
                let body = signed
                    .body()
                    .map_err(|e| bad(format!("record of {id}: {e}")))?;
                if body.agent_id() != id {
                    return Err(bad(format!(
                        "the record under {id} is for {}",
                        body.agent_id()
                    )));
                }
                let mut value = Vec::with_capacity(bytes.len() + 1);
                value.push(kind.byte());
                value.extend_from_slice(&bytes);
                records.insert(id.as_bytes(), value)?;
                summary.records += 1;
            }
            Line::Entry { tree, key, value } => {
                if [RECORDS_TREE, PENDING_TREE, SLED_DEFAULT_TREE].contains(&tree.as_str()) {
                    return Err(bad(format!("tree {tree} is not exported as entries")));
                }
                let key = B64.decode(key).map_err(|e| bad(format!("key: {e}")))?;
                let value = B64.decode(value).map_err(|e| bad(format!("value: {e}")))?;
                db.open_tree(&tree)?.insert(key, value)?;
                summary.entries += 1;
            }
            Line::End { lines } => {
                if lines != reader.number - 1 {
                    return Err(bad(format!(
                        "the trailer counts {lines} lines, the export has {}",
                        reader.number - 1
                    )));
                }
                if reader.next()?.is_some() {
                    return Err(BackupError::Format {
                        line: reader.number,
                        reason: "a line after the trailer".into(),
                    });
                }
                break;
            }
        }
    }
    db.flush()?;
    drop(records);
    drop(db);
    super::open::wait_unlocked(dir, super::open::CLOSE_WAIT)?;
    Ok(summary)
}

/// Bounded lines of the input.
struct Lines<'a> {
    input: &'a mut dyn BufRead,
    number: u64,
    buf: Vec<u8>,
}

impl Lines<'_> {
    /// The next line without its newline, `None` at the end.
    fn next(&mut self) -> Result<Option<&[u8]>, BackupError> {
        self.buf.clear();
        let limit = MAX_EXPORT_LINE_BYTES as u64 + 1;
        let read = std::io::Read::take(&mut *self.input, limit).read_until(b'\n', &mut self.buf)?;
        if read == 0 {
            return Ok(None);
        }
        self.number += 1;
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
        } else if self.buf.len() > MAX_EXPORT_LINE_BYTES {
            return Err(BackupError::Format {
                line: self.number,
                reason: format!("longer than {MAX_EXPORT_LINE_BYTES} bytes"),
            });
        }
        Ok(Some(&self.buf))
    }
}

/// The export being written, and its lines so far.
struct Out<'a> {
    out: &'a mut dyn Write,
    lines: u64,
}

impl Out<'_> {
    fn put(&mut self, line: &impl Serialize) -> std::io::Result<()> {
        serde_json::to_writer(&mut *self.out, line).map_err(std::io::Error::from)?;
        self.out.write_all(b"\n")?;
        self.lines += 1;
        Ok(())
    }
}
