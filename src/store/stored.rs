//! A record as the `records` tree keeps it: one kind byte (a live
//! descriptor whose evidence counts, one whose evidence is only claimed,
//! or a tombstone) and the signed envelope; [`StoredAgent`], what reading
//! it back gives.

use super::error::{corrupt, StoreError};
use crate::record::{RecordBody, SignedRecord};
use crate::trust::{Evidence, TrustLevel};

/// A live descriptor whose evidence counts.
pub(super) const KIND_DESCRIPTOR: u8 = b'd';
/// A tombstone.
pub(super) const KIND_TOMBSTONE: u8 = b't';
/// A live descriptor whose evidence this node has not proven: signed by a
/// peer outside `p2p.trusted_peers` (see [`Origin::Claimed`](super::Origin::Claimed)). Its
/// evidence is shown as claimed and counts as `unverified`.
pub(super) const KIND_CLAIMED: u8 = b'c';

/// A typical encoded record size, to size buffers.
pub(super) const MAX_ENCODED_HINT: usize = 2048;

/// A record as read back from the store.
#[derive(Debug, Clone)]
pub struct StoredAgent {
    /// The signed envelope.
    pub record: SignedRecord,
    /// Its decoded payload.
    pub body: RecordBody,
    /// Its evidence is a claim this node has not proven
    /// ([`Origin::Claimed`]): it counts as `unverified`.
    pub claimed: bool,
}

impl StoredAgent {
    /// The evidence this node counts for the record: the record's own
    /// when this node proved it or a trusted peer attested it, none when
    /// it is only claimed (and none for a tombstone).
    pub fn counted_evidence(&self) -> Evidence {
        match &self.body {
            RecordBody::Descriptor(d) if !self.claimed => d.evidence.clone(),
            _ => Evidence::default(),
        }
    }

    /// The trust level this node counts for the record.
    pub fn counted_level(&self) -> TrustLevel {
        self.counted_evidence().level()
    }
}

/// Reads back the value stored for `id`.
pub(super) fn decode_stored(id: &str, bytes: &[u8]) -> Result<StoredAgent, StoreError> {
    let record = SignedRecord::decode_trusted(stored_envelope(id, bytes)?)
        .map_err(|e| corrupt(id, e.to_string()))?;
    let body = record.body().map_err(|e| corrupt(id, e.to_string()))?;
    Ok(StoredAgent {
        record,
        body,
        claimed: bytes.first() == Some(&KIND_CLAIMED),
    })
}

/// The signed envelope of a stored record value (past its leading byte).
pub(super) fn stored_envelope<'a>(id: &str, bytes: &'a [u8]) -> Result<&'a [u8], StoreError> {
    bytes
        .split_first()
        .map(|(_, rest)| rest)
        .ok_or_else(|| corrupt(id, "empty value".into()))
}
