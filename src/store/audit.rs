//! The tamper-evident audit log (docs/protocol.md#audit): who did what,
//! on what, how it ended, each entry hash-chained to the one before it.
//! Three sled trees:
//! - `audit`: seq (u64 big-endian, from 1) -> the stored entry
//!   (`audit/entry.rs`);
//! - `audit_versions`: SHA-256 of a signed record's bytes -> the bytes,
//!   the record a write left, so old versions stay readable through the
//!   trail;
//! - `audit_meta`: `head` (the last seq and hash appended, which reveals
//!   entries deleted at the end) and `checkpoint` (the signed
//!   [`AuditCheckpoint`] retention leaves).
//!
//! An append is one sled transaction over the three trees, under a lock
//! that orders appends; it runs right after the write it describes has
//! committed (not inside that write's transaction), and the API flushes
//! it before it answers (`api/audit.rs`), so every write the API
//! acknowledges has a durable entry. A crash between a write and its
//! entry leaves the write without one; the chain stays whole.
//!
//! Refusals of peers' records and failed authentications come by the
//! thousand from a hostile client: [`BlockingStore::audit_aggregated`]
//! keeps at most one entry per key (refusal code, client address) per
//! [`REFUSAL_WINDOW`], carrying how many events it stands for.

mod append;
mod entry;
mod verify;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use ed25519_dalek::{SigningKey, VerifyingKey};
use sha2::{Digest as _, Sha256};
use sled::Transactional as _;

pub use entry::{
    AuditAction, AuditCheckpoint, AuditEntry, AuditEvent, AuditOutcome, GENESIS, MAX_FIELD_BYTES,
};
pub use verify::{verify_chain, Broken, VerifyReport};

use super::error::StoreError;

/// At most one `remote_refused` entry per refusal code in this window.
pub const REFUSAL_WINDOW: Duration = Duration::from_secs(60);

/// Most keys [`BlockingStore::audit_aggregated`] tallies at once.
const MAX_TALLIES: usize = 4096;

/// Most entries one page reads.
pub const MAX_AUDIT_PAGE: usize = 1000;

/// How long the log keeps entries (`store.audit_retention`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    /// Entries younger than this.
    Age(Duration),
    /// The newest this many entries.
    Count(u64),
}

/// The chain's end as appends see it.
#[derive(Debug, Clone, Copy)]
struct Head {
    /// The last seq appended (the checkpoint's, or 0, before any).
    seq: u64,
    hash: [u8; 32],
}

/// Refusals counted since the last entry of their code.
#[derive(Debug)]
struct Tally {
    since: std::time::Instant,
    count: u64,
}

/// The audit log's trees and its head (part of the store's `Inner`).
pub(super) struct AuditLog {
    entries: sled::Tree,
    versions: sled::Tree,
    meta: sled::Tree,
    head: Mutex<Head>,
    refusals: Mutex<HashMap<String, Tally>>,
}

const HEAD_KEY: &str = "head";
const CHECKPOINT_KEY: &str = "checkpoint";

impl AuditLog {
    /// Opens the log's trees in `db` and reads its head.
    pub(super) fn open(db: &sled::Db) -> Result<Self, StoreError> {
        let entries = db.open_tree("audit")?;
        let versions = db.open_tree("audit_versions")?;
        let meta = db.open_tree("audit_meta")?;
        let head = match read_head(&meta)? {
            Some((seq, hash)) => Head { seq, hash },
            None => match read_checkpoint(&meta)? {
                Some(c) => Head {
                    seq: c.through,
                    hash: c.check(None).map_err(|why| corrupt("checkpoint", why))?,
                },
                None => Head {
                    seq: 0,
                    hash: GENESIS,
                },
            },
        };
        Ok(Self {
            entries,
            versions,
            meta,
            head: Mutex::new(head),
            refusals: Mutex::new(HashMap::new()),
        })
    }

    fn lock_head(&self) -> std::sync::MutexGuard<'_, Head> {
        self.head
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn corrupt(key: &str, reason: String) -> StoreError {
    StoreError::Corrupt {
        key: format!("audit {key}"),
        reason,
    }
}

fn read_head(meta: &sled::Tree) -> Result<Option<(u64, [u8; 32])>, StoreError> {
    let Some(v) = meta.get(HEAD_KEY)? else {
        return Ok(None);
    };
    if v.len() != 40 {
        return Err(corrupt("head", format!("{} bytes, 40 expected", v.len())));
    }
    let seq = u64::from_be_bytes(v[..8].try_into().expect("8 bytes"));
    let hash = v[8..].try_into().expect("32 bytes");
    Ok(Some((seq, hash)))
}

fn read_checkpoint(meta: &sled::Tree) -> Result<Option<AuditCheckpoint>, StoreError> {
    meta.get(CHECKPOINT_KEY)?
        .map(|v| serde_json::from_slice(&v).map_err(|e| corrupt("checkpoint", e.to_string())))
        .transpose()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests;
