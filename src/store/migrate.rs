//! Schema migration at open: a data directory of layout version 1 (index
//! keys by agent id; no ordinals, no compact records) is brought to the
//! current layout from its `records` tree, which both versions share.
//!
//! The derived trees are cleared and written again from the records, in
//! batches; the schema version is raised only after the migration is
//! flushed, so a migration cut short (a crash, a kill) runs again in full
//! at the next open. Nothing in `records`, `local`, `reports` or
//! `reasons` is touched.

use super::blocking::decode_stored;
use super::compact::{encode_live, encode_tombstone};
use super::postings::{body_terms, index_key};
use super::{CompactAgent, RecordBody, StoreError};

/// Records migrated per batch of tree writes.
const BATCH: usize = 10_000;

/// Rebuilds `index`, `ordinals` and `compact` from `records`: ordinals in
/// id order (the order version 1 listed agents in), compact records with
/// the `local` tree's marks, index keys by ordinal.
///
/// # Errors
/// [`StoreError::Sled`], or [`StoreError::Corrupt`] for a record that does
/// not decode (the migration stops; the data directory stays at version
/// 1, as it was).
pub(super) fn from_v1(
    db: &sled::Db,
    records: &sled::Tree,
    index: &sled::Tree,
    local: &sled::Tree,
    ordinals: &sled::Tree,
    compact: &sled::Tree,
) -> Result<(), StoreError> {
    tracing::info!(
        records = records.len(),
        "migrating the store from layout version 1"
    );
    index.clear()?;
    ordinals.clear()?;
    compact.clear()?;
    let (mut ib, mut ob, mut cb) = (
        sled::Batch::default(),
        sled::Batch::default(),
        sled::Batch::default(),
    );
    let mut in_batch = 0;
    for (ord, entry) in (0u32..).zip(records.iter()) {
        let (key, value) = entry?;
        let id = String::from_utf8_lossy(&key).into_owned();
        let agent = decode_stored(&id, &value)?;
        let ord_key = ord.to_be_bytes();
        ob.insert(key.as_ref(), &ord_key[..]);
        match &agent.body {
            RecordBody::Descriptor(d) => {
                let is_local = local.contains_key(&key)?;
                cb.insert(
                    &ord_key[..],
                    encode_live(&CompactAgent::of(&agent.record, d, is_local)),
                );
            }
            RecordBody::Tombstone(t) => cb.insert(&ord_key[..], encode_tombstone(&id, t.seq)),
        }
        for p in body_terms(&agent.body) {
            ib.insert(index_key(&p, ord), &[][..]);
        }
        in_batch += 1;
        if in_batch == BATCH {
            index.apply_batch(std::mem::take(&mut ib))?;
            ordinals.apply_batch(std::mem::take(&mut ob))?;
            compact.apply_batch(std::mem::take(&mut cb))?;
            in_batch = 0;
        }
    }
    index.apply_batch(ib)?;
    ordinals.apply_batch(ob)?;
    compact.apply_batch(cb)?;
    db.flush()?;
    tracing::info!("store migrated to layout version {}", super::SCHEMA_VERSION);
    Ok(())
}
