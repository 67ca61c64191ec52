//! The log as the store's handles read it: the durable tree's head,
//! tiles and entry bundles, entries, and inclusion and consistency
//! proofs (`BlockingStore`'s methods), each answering [`BeyondLog`] for
//! what the durable tree does not hold.

use sha2::{Digest, Sha256};
use tlog_tiles::Tile;

use super::{decode_u64, BeyondLog, TILE_HEIGHT};
use crate::store::error::{corrupt, StoreError};
use crate::store::handles::BlockingStore;
use crate::tlog::{Hash, RecordProof, TilePath, TreeProof};

impl BlockingStore {
    /// The durable tree: its size and root hash.
    ///
    /// # Errors
    /// [`StoreError::Sled`], or [`StoreError::Corrupt`] for a missing hash.
    pub fn log_head(&self) -> Result<(u64, Hash), StoreError> {
        let log = &self.inner.log;
        let size = log.durable();
        Ok((size, log.root(size)?))
    }

    /// The root hash of the tree of `size` entries (at most the durable size).
    ///
    /// # Errors
    /// As [`Self::log_head`]; `Ok(Err(_))` for a size past the durable tree.
    pub fn log_root(&self, size: u64) -> Result<Result<Hash, BeyondLog>, StoreError> {
        let log = &self.inner.log;
        if let Err(e) = within(size, log.durable()) {
            return Ok(Err(e));
        }
        Ok(Ok(log.root(size)?))
    }

    /// A hash tile or an entry bundle of the durable tree, as
    /// tlog-tiles serves it; `Ok(Err(_))` when the durable tree does not
    /// hold it (a partial tile is served up to the durable width; a full
    /// tile once complete).
    ///
    /// # Errors
    /// As [`Self::log_head`].
    pub fn log_tile(&self, tile: TilePath) -> Result<Result<Vec<u8>, BeyondLog>, StoreError> {
        let log = &self.inner.log;
        let level = u32::from(tile.level.unwrap_or(0));
        // Subtrees of 256^level entries the durable tree holds complete.
        let complete = log.durable() >> (8 * level).min(63);
        let last = tile.first().saturating_add(u64::from(tile.width));
        if level * 8 >= 64 || last > complete {
            return Ok(Err(BeyondLog(format!(
                "tile {tile} is not in the log of {} entries",
                log.durable()
            ))));
        }
        let Some(l) = tile.level else {
            return self.log_bundle(tile.first(), last).map(Ok);
        };
        let reader = log.reader();
        let data = Tile::new(TILE_HEIGHT, l, tile.index, tile.width, false)
            .read_data(&reader)
            .map_err(|e| reader.failure(e))?;
        Ok(Ok(data))
    }

    /// Entries `first..last`, each prefixed by its big-endian u16 length.
    fn log_bundle(&self, first: u64, last: u64) -> Result<Vec<u8>, StoreError> {
        let mut bundle = Vec::new();
        let range = first.to_be_bytes()..last.to_be_bytes();
        let mut expected = first;
        for item in self.inner.log.entries.range(range) {
            let (key, entry) = item?;
            if decode_u64("log entry index", &key)? != expected {
                return Err(corrupt("log", format!("log entry {expected} is missing")));
            }
            let len = u16::try_from(entry.len())
                .map_err(|_| corrupt("log", format!("log entry {expected} is too long")))?;
            bundle.extend_from_slice(&len.to_be_bytes());
            bundle.extend_from_slice(&entry);
            expected += 1;
        }
        if expected != last {
            return Err(corrupt("log", format!("log entry {expected} is missing")));
        }
        Ok(bundle)
    }

    /// One entry of the durable tree.
    ///
    /// # Errors
    /// As [`Self::log_head`].
    pub fn log_entry(&self, index: u64) -> Result<Option<Vec<u8>>, StoreError> {
        if index >= self.inner.log.durable() {
            return Ok(None);
        }
        Ok(self
            .inner
            .log
            .entries
            .get(index.to_be_bytes())?
            .map(|v| v.to_vec()))
    }

    /// The leaf hashes of entries `start .. start + count` of the durable
    /// tree (what a peer repairing from this log compares with what it
    /// holds); `Ok(Err(_))` past the durable tree.
    ///
    /// # Errors
    /// As [`Self::log_head`].
    pub fn log_leaf_hashes(
        &self,
        start: u64,
        count: u64,
    ) -> Result<Result<Vec<Hash>, BeyondLog>, StoreError> {
        let end = start.saturating_add(count);
        if let Err(e) = within(end, self.inner.log.durable()) {
            return Ok(Err(e));
        }
        let indexes: Vec<u64> = (start..end)
            .map(|i| tlog_tiles::stored_hash_index(0, i))
            .collect();
        let reader = self.inner.log.reader();
        Ok(Ok(tlog_tiles::HashReader::read_hashes(&reader, &indexes)
            .map_err(|e| reader.failure(e))?))
    }

    /// The index of the record whose encoded bytes are `record`, once the
    /// durable tree holds it.
    ///
    /// # Errors
    /// As [`Self::log_head`].
    pub fn log_index_of(&self, record: &[u8]) -> Result<Option<u64>, StoreError> {
        let hash: [u8; 32] = Sha256::digest(record).into();
        match self.inner.log.index.get(hash)? {
            Some(v) => {
                let index = decode_u64("log index", &v)?;
                Ok((index < self.inner.log.durable()).then_some(index))
            }
            None => Ok(None),
        }
    }

    /// The durable tree's size and root, and for each of `records` (their
    /// encoded bytes) its index and inclusion proof there, when it holds
    /// it: what a signed answer carries.
    ///
    /// # Errors
    /// As [`Self::log_head`].
    #[allow(clippy::type_complexity)]
    pub fn log_proofs(
        &self,
        records: &[Vec<u8>],
    ) -> Result<(u64, Hash, Vec<Option<(u64, RecordProof)>>), StoreError> {
        let (size, root) = self.log_head()?;
        let mut proofs = Vec::with_capacity(records.len());
        for record in records {
            let proof = match self.log_index_of(record)?.filter(|i| *i < size) {
                Some(i) => self.log_inclusion(i, size)?.ok().map(|p| (i, p)),
                None => None,
            };
            proofs.push(proof);
        }
        Ok((size, root, proofs))
    }

    /// The inclusion proof of entry `index` in the tree of `size`.
    ///
    /// # Errors
    /// As [`Self::log_head`]; `Ok(Err(_))` outside the durable tree.
    pub fn log_inclusion(
        &self,
        index: u64,
        size: u64,
    ) -> Result<Result<RecordProof, BeyondLog>, StoreError> {
        if let Err(e) = within(size, self.inner.log.durable()) {
            return Ok(Err(e));
        }
        if index >= size {
            return Ok(Err(BeyondLog(format!(
                "entry {index} is not in the tree of {size} entries"
            ))));
        }
        let reader = self.inner.log.reader();
        Ok(Ok(
            tlog_tiles::prove_record(size, index, &reader).map_err(|e| reader.failure(e))?
        ))
    }

    /// The consistency proof from the tree of `from` entries to the tree
    /// of `size`.
    ///
    /// # Errors
    /// As [`Self::log_head`]; `Ok(Err(_))` outside the durable tree.
    pub fn log_consistency(
        &self,
        from: u64,
        size: u64,
    ) -> Result<Result<TreeProof, BeyondLog>, StoreError> {
        if let Err(e) = within(size, self.inner.log.durable()) {
            return Ok(Err(e));
        }
        if from > size {
            return Ok(Err(BeyondLog(format!(
                "a tree of {from} entries is not a prefix of one of {size}"
            ))));
        }
        // Every tree extends the empty one: nothing to prove.
        if from == 0 {
            return Ok(Ok(Vec::new()));
        }
        let reader = self.inner.log.reader();
        Ok(Ok(
            tlog_tiles::prove_tree(size, from, &reader).map_err(|e| reader.failure(e))?
        ))
    }
}

/// `size` within the durable tree of `durable` entries.
fn within(size: u64, durable: u64) -> Result<(), BeyondLog> {
    if size > durable {
        Err(BeyondLog(format!(
            "the log holds {durable} entries, not {size}"
        )))
    } else {
        Ok(())
    }
}
