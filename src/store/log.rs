//! The node's transparency log (docs/protocol.md#log): every record this
//! node signs, appended to an RFC 6962 Merkle tree in the same sled
//! transaction that stores the record, so that the store and the log
//! never disagree, not even after a crash. Three trees:
//! - `log_entries`: index (u64 big-endian) -> the entry: the record's
//!   encoded bytes, or a sealed entry for an agent that is not public
//!   ([`crate::tlog::entry_of`]);
//! - `log_hashes`: stored-hash index (u64 big-endian, the numbering of
//!   Go's `sumdb/tlog`: every complete subtree's hash, about two per
//!   entry) -> 32 bytes;
//! - `log_index`: SHA-256 of a record's bytes -> its index (a record
//!   written again, its evidence reassessed, is not appended twice), and
//!   `size` -> the tree size.
//!
//! The append is here; the reads (head, tiles, bundles, proofs) are the
//! store's methods in `store/log/read.rs`.
//!
//! What is served and signed is the tree at its *durable* size, the size
//! the last flush covered ([`Log::durable`]): a checkpoint the node
//! signed always survives a crash, so a restart can never shrink the log
//! below a tree head it handed out (which would be equivocation).

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use sled::transaction::{ConflictableTransactionError, TransactionalTree};
use tlog_tiles::HashReader;

use super::error::{corrupt, StoreError};
use crate::tlog::{self, Hash};

/// The `log_index` key of the tree size.
const SIZE_KEY: &[u8] = b"size";
/// Tiles are 2^8 hashes wide.
pub(super) const TILE_HEIGHT: u8 = 8;

/// The log's trees and sizes.
pub(super) struct Log {
    entries: sled::Tree,
    hashes: sled::Tree,
    index: sled::Tree,
    /// The key whose records are logged: the node's own.
    signer: Option<[u8; 32]>,
    /// The size committed (possibly not yet flushed).
    appended: AtomicU64,
    /// The size the last flush made durable.
    durable: AtomicU64,
}

/// The trees an append writes, inside a write's transaction.
pub(super) type LogTx<'a> = (
    &'a TransactionalTree,
    &'a TransactionalTree,
    &'a TransactionalTree,
);

impl Log {
    /// Opens the log's trees in `db` (empty in a data directory written
    /// before the log existed), logging the records signed by `signer`.
    pub(super) fn open(db: &sled::Db, signer: Option<[u8; 32]>) -> Result<Self, StoreError> {
        let entries = db.open_tree("log_entries")?;
        let hashes = db.open_tree("log_hashes")?;
        let index = db.open_tree("log_index")?;
        let size = match index.get(SIZE_KEY)? {
            Some(v) => decode_u64("log size", &v)?,
            None => 0,
        };
        Ok(Self {
            entries,
            hashes,
            index,
            signer,
            appended: AtomicU64::new(size),
            durable: AtomicU64::new(size),
        })
    }

    /// The trees an append writes, for a write's transaction.
    pub(super) fn trees(&self) -> (&sled::Tree, &sled::Tree, &sled::Tree) {
        (&self.entries, &self.hashes, &self.index)
    }

    /// The key whose records are logged, if any.
    pub(super) fn signer(&self) -> Option<[u8; 32]> {
        self.signer
    }

    /// Whether records signed by `signer` are logged.
    pub(super) fn logs(&self, signer: &[u8; 32]) -> bool {
        self.signer.as_ref() == Some(signer)
    }

    /// Appends `entry` (the entry of the record whose bytes hash to
    /// `record_hash`) inside a transaction, unless that record is in the
    /// log already. Returns the tree size after it.
    pub(super) fn append(
        tx: LogTx<'_>,
        record_hash: &[u8; 32],
        entry: &[u8],
    ) -> Result<u64, ConflictableTransactionError<StoreError>> {
        let (entries, hashes, index) = tx;
        let size = match index.get(SIZE_KEY)? {
            Some(v) => decode_u64("log size", &v).map_err(ConflictableTransactionError::Abort)?,
            None => 0,
        };
        if index.get(record_hash)?.is_some() {
            return Ok(size);
        }
        let reader = Reader::new(
            |i: u64| {
                hashes
                    .get(i.to_be_bytes())
                    .map_err(ConflictableTransactionError::from)
            },
            ConflictableTransactionError::Abort,
        );
        let new = tlog_tiles::stored_hashes_for_record_hash(size, tlog::leaf_hash(entry), &reader)
            .map_err(|e| reader.failure(e))?;
        let first = tlog_tiles::stored_hash_index(0, size);
        for (i, hash) in (first..).zip(new) {
            hashes.insert(&i.to_be_bytes()[..], &hash.0[..])?;
        }
        entries.insert(&size.to_be_bytes()[..], entry)?;
        index.insert(&record_hash[..], &size.to_be_bytes()[..])?;
        index.insert(SIZE_KEY, &(size + 1).to_be_bytes()[..])?;
        Ok(size + 1)
    }

    /// After a transaction that appended committed: the tree's size.
    pub(super) fn committed(&self, size: u64) {
        self.appended.fetch_max(size, Ordering::SeqCst);
    }

    /// The size a flush about to run covers (read under the write gate).
    pub(super) fn appended(&self) -> u64 {
        self.appended.load(Ordering::SeqCst)
    }

    /// After a flush that covered `size` entries.
    pub(super) fn flushed(&self, size: u64) {
        self.durable.fetch_max(size, Ordering::SeqCst);
    }

    /// The durable size: what is signed and served.
    pub(super) fn durable(&self) -> u64 {
        self.durable.load(Ordering::SeqCst)
    }

    /// The root hash of the tree of `size` entries (held): RFC 6962's
    /// hash of the empty string for the empty tree.
    fn root(&self, size: u64) -> Result<Hash, StoreError> {
        if size == 0 {
            return Ok(Hash(Sha256::digest(b"").into()));
        }
        let reader = self.reader();
        tlog_tiles::tree_hash(size, &reader).map_err(|e| reader.failure(e))
    }

    fn reader(
        &self,
    ) -> Reader<StoreError, impl Fn(u64) -> Result<Option<sled::IVec>, StoreError> + '_> {
        Reader::new(
            |i: u64| self.hashes.get(i.to_be_bytes()).map_err(StoreError::from),
            std::convert::identity,
        )
    }
}

/// The log's entry of a record's encoded bytes, and the SHA-256 it is
/// indexed by.
pub(super) fn entry_for(record: &[u8], sealed: bool) -> ([u8; 32], Vec<u8>) {
    (
        Sha256::digest(record).into(),
        tlog::entry_of(record, sealed),
    )
}

/// What a proof or tile read names that the durable tree does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BeyondLog(pub String);

pub(super) fn decode_u64(what: &str, bytes: &[u8]) -> Result<u64, StoreError> {
    <[u8; 8]>::try_from(bytes)
        .map(u64::from_be_bytes)
        .map_err(|_| corrupt(what, format!("{} bytes, not 8", bytes.len())))
}

/// Stored hashes read one by one with `get` (from the `log_hashes` tree,
/// or inside a transaction); the first failure is kept, in the caller's
/// error type `E` (`wrap` makes one of the store's), and given back in
/// place of the tlog error it caused.
struct Reader<E, G> {
    get: G,
    wrap: fn(StoreError) -> E,
    failed: RefCell<Option<E>>,
}

impl<E, G: Fn(u64) -> Result<Option<sled::IVec>, E>> Reader<E, G> {
    fn new(get: G, wrap: fn(StoreError) -> E) -> Self {
        Self {
            get,
            wrap,
            failed: RefCell::new(None),
        }
    }

    /// The error behind `e`: the one kept, or the tree's corruption.
    fn failure(&self, e: tlog_tiles::Error) -> E {
        self.failed
            .borrow_mut()
            .take()
            .unwrap_or_else(|| (self.wrap)(corrupt("log", e.to_string())))
    }
}

impl<E, G: Fn(u64) -> Result<Option<sled::IVec>, E>> HashReader for Reader<E, G> {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::Error> {
        let mut out = Vec::with_capacity(indexes.len());
        for &i in indexes {
            let failure = match (self.get)(i) {
                Ok(found) => match found.as_deref().map(<[u8; 32]>::try_from) {
                    Some(Ok(h)) => {
                        out.push(Hash(h));
                        continue;
                    }
                    _ => (self.wrap)(corrupt("log", format!("stored hash {i} is missing"))),
                },
                Err(e) => e,
            };
            *self.failed.borrow_mut() = Some(failure);
            return Err(tlog_tiles::Error::IndexesNotInTree);
        }
        Ok(out)
    }
}

mod read;

#[cfg(test)]
mod tests;
