//! Schema migration at open: a data directory of an earlier layout is
//! brought to the current one from its `records` tree, which every
//! version shares.
//!
//! - Version 1 kept index keys by agent id and had neither ordinals nor
//!   compact records: ordinals are given in id order (the order version 1
//!   listed agents in), compact records written.
//! - Version 2 kept one `index` key per term and ordinal, and compact
//!   records without tags and languages: the ordinals stay, the compact
//!   records are written again with what the filter terms come from.
//!
//! The derived trees are written again from the records, in batches; the
//! schema version is raised only after the migration is flushed, so a
//! migration cut short (a crash, a kill) runs again in full at the next
//! open. Nothing in `records`, `local`, `reports` or `reasons` is touched;
//! the old `index` tree is dropped once the version is raised.

use super::compact::{encode_live, encode_tombstone, CompactAgent};
use super::error::StoreError;
use super::postings::decode_ord;
use super::stored::decode_stored;
use crate::record::RecordBody;

/// The on-disk layout version this code reads and writes. Versions 1
/// (index keys by agent id, no ordinals or compact records) and 2 (an
/// `index` tree of one key per term and ordinal; compact records without
/// tags and languages) are migrated at open (`store/migrate.rs`).
pub const SCHEMA_VERSION: u32 = 3;

/// Records migrated per batch of tree writes.
const BATCH: usize = 10_000;

/// Records between two progress lines in the log.
const PROGRESS_EVERY: u64 = 100_000;

/// Where a migration's ordinals come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ordinals {
    /// Given afresh, in id order (version 1 had none).
    Assign,
    /// Kept as the `ordinals` tree holds them (version 2).
    Keep,
}

/// Writes the `compact` tree (and with [`Ordinals::Assign`] the
/// `ordinals` tree) again from `records`, with the `local` tree's marks.
///
/// # Errors
/// [`StoreError::Sled`], or [`StoreError::Corrupt`] for a record that does
/// not decode or (keeping ordinals) has none (the migration stops; the
/// data directory stays at its version, as it was).
pub(super) fn rebuild(
    db: &sled::Db,
    records: &sled::Tree,
    local: &sled::Tree,
    ordinals: &sled::Tree,
    compact: &sled::Tree,
    from: Ordinals,
) -> Result<(), StoreError> {
    tracing::info!(
        records = records.len(),
        ordinals = ?from,
        "migrating the store to layout version {}",
        SCHEMA_VERSION
    );
    if from == Ordinals::Assign {
        ordinals.clear()?;
    }
    compact.clear()?;
    let (mut ob, mut cb) = (sled::Batch::default(), sled::Batch::default());
    let mut in_batch = 0;
    let mut done = 0u64;
    for (next, entry) in (0u32..).zip(records.iter()) {
        let (key, value) = entry?;
        let id = String::from_utf8_lossy(&key).into_owned();
        let agent = decode_stored(&id, &value)?;
        let ord = match from {
            Ordinals::Assign => {
                ob.insert(key.as_ref(), &next.to_be_bytes()[..]);
                next
            }
            Ordinals::Keep => match ordinals.get(&key)? {
                Some(v) => decode_ord(&id, &v)?,
                None => {
                    return Err(StoreError::Corrupt {
                        key: id,
                        reason: "a record without an ordinal".into(),
                    })
                }
            },
        };
        let ord_key = ord.to_be_bytes();
        match &agent.body {
            RecordBody::Descriptor(d) => {
                let is_local = local.contains_key(&key)?;
                cb.insert(
                    &ord_key[..],
                    encode_live(&CompactAgent::of(&agent.record, d, is_local, agent.claimed)),
                );
            }
            RecordBody::Tombstone(t) => cb.insert(&ord_key[..], encode_tombstone(&id, t.seq)),
        }
        in_batch += 1;
        done += 1;
        if in_batch == BATCH {
            ordinals.apply_batch(std::mem::take(&mut ob))?;
            compact.apply_batch(std::mem::take(&mut cb))?;
            in_batch = 0;
        }
        if done.is_multiple_of(PROGRESS_EVERY) {
            tracing::info!(done, "migrating the store");
        }
    }
    ordinals.apply_batch(ob)?;
    compact.apply_batch(cb)?;
    db.flush()?;
    tracing::info!("store migrated to layout version {}", SCHEMA_VERSION);
    Ok(())
}
