//! [`Refusal`]: why the judge refused a record, as the stable codes that
//! counters and gossipsub verdicts carry.

use crate::record::RecordError;

/// Why the judge refused (or could not check) a record from a peer: the
/// codes `GET /peers` counts under `records.refused` and gossipsub's
/// verdicts carry. The strings never change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Refusal {
    /// The envelope is over the record size limit.
    TooLarge,
    /// The envelope is not the CBOR the record format says.
    Malformed,
    /// A well-formed envelope in another encoding than the canonical one.
    NonCanonical,
    /// Bytes follow the envelope.
    TrailingBytes,
    /// A record type this node does not know.
    UnknownType,
    /// The signature does not verify for the signer key.
    BadSignature,
    /// The payload is not the type the envelope says.
    BadPayload,
    /// The document does not hash to the stated digest.
    DigestMismatch,
    /// Older than the record held (counted, not penalised).
    StaleSeq,
    /// Past its `expires_at`.
    Expired,
    /// Issued further in the future than the tolerated clock skew.
    IssuedInFuture,
    /// A DHT value under another agent's key.
    WrongDhtKey,
    /// An AIDIP registration with an id in the reserved `agent:` space.
    ReservedId,
    /// Evidence that does not check (a challenge proof, or flags that do not go together).
    BadEvidence,
    /// An ADP document that does not parse or does not name the record's agent.
    BadDocument,
    /// An ADP descriptor whose key is not the held descriptor's, without a rotation statement signed by the held key (a replayed pre-rotation record among them).
    KeyChangedUnproven,
    /// A tombstone for an agent not held here: its signer cannot be checked (ignored, not counted).
    TombstoneForUnknownAgent,
    /// A tombstone signed by neither the agent key nor the attester of the held descriptor.
    TombstoneNotAuthorised,
    /// The store failed while judging.
    StoreFailed,
    /// The store has no room (`store.max_bytes` reached, or the disk
    /// full): valid perhaps, and no fault of the sender (not penalised).
    NoRoom,
    /// A seq further ahead of this node's clock (in milliseconds) than
    /// the tolerated skew: it would pin the agent against its owner's
    /// later records.
    SeqAhead,
    /// A lifetime (`expires_at - issued_at`) over `p2p.max_record_lifetime`.
    LifetimeTooLong,
    /// A record for an id that belongs to another key (the registry that
    /// signed the record held).
    NotOwner,
    /// A record from elsewhere for an agent registered through this
    /// node's API: a remote record never replaces a local registration.
    LocalRegistration,
    /// An ADP descriptor whose document carries a key its own holder
    /// revoked.
    KeyRevoked,
    /// Signed by a key whose transparency log this node caught showing
    /// two histories (`p2p.on_equivocation = "distrust"`; not penalised:
    /// a relay may not know yet).
    Equivocated,
    /// A new claim from an untrusted signer that holds
    /// `p2p.max_claims_per_signer` live records here already (not
    /// penalised: a relay may pass on a prolific signer's records).
    SignerQuota,
    /// A new claim from an untrusted signer while `p2p.max_claims` live
    /// claims are held (not penalised).
    ClaimsFull,
    /// A transfer that does not hand this id to the record's signer: its
    /// signature does not verify, it names another id or key, it is on
    /// an ADP record (whose id moves with its DNS), or, for an id held
    /// here, it is not signed by the held record's signer or the held
    /// seq is past its bound.
    BadTransfer,
    /// A liveness result about an agent this node does not show: not
    /// held, held at an older seq than the one probed, deleted, or
    /// private or unlisted here (ignored, not counted).
    LivenessUnknownAgent,
    /// A liveness result checked longer ago than
    /// [`MAX_LIVENESS_AGE_SECS`](super::MAX_LIVENESS_AGE_SECS) (not
    /// penalised).
    LivenessTooOld,
    /// A liveness result from a new signer while the agent's results are
    /// full of newer ones or trusted ones (not penalised).
    LivenessFull,
}

impl Refusal {
    /// Every refusal, in the order above.
    pub const ALL: [Refusal; 32] = [
        Self::TooLarge,
        Self::Malformed,
        Self::NonCanonical,
        Self::TrailingBytes,
        Self::UnknownType,
        Self::BadSignature,
        Self::BadPayload,
        Self::DigestMismatch,
        Self::StaleSeq,
        Self::Expired,
        Self::IssuedInFuture,
        Self::WrongDhtKey,
        Self::ReservedId,
        Self::BadEvidence,
        Self::BadDocument,
        Self::KeyChangedUnproven,
        Self::TombstoneForUnknownAgent,
        Self::TombstoneNotAuthorised,
        Self::StoreFailed,
        Self::NoRoom,
        Self::SeqAhead,
        Self::LifetimeTooLong,
        Self::NotOwner,
        Self::LocalRegistration,
        Self::KeyRevoked,
        Self::Equivocated,
        Self::SignerQuota,
        Self::ClaimsFull,
        Self::BadTransfer,
        Self::LivenessUnknownAgent,
        Self::LivenessTooOld,
        Self::LivenessFull,
    ];

    /// The refusal's wire code (`bad_signature`, `stale_seq`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TooLarge => "too_large",
            Self::Malformed => "malformed",
            Self::NonCanonical => "non_canonical",
            Self::TrailingBytes => "trailing_bytes",
            Self::UnknownType => "unknown_type",
            Self::BadSignature => "bad_signature",
            Self::BadPayload => "bad_payload",
            Self::DigestMismatch => "digest_mismatch",
            Self::StaleSeq => "stale_seq",
            Self::Expired => "expired",
            Self::IssuedInFuture => "issued_in_future",
            Self::WrongDhtKey => "wrong_dht_key",
            Self::ReservedId => "reserved_id",
            Self::BadEvidence => "bad_evidence",
            Self::BadDocument => "bad_document",
            Self::KeyChangedUnproven => "key_changed_unproven",
            Self::TombstoneForUnknownAgent => "tombstone_for_unknown_agent",
            Self::TombstoneNotAuthorised => "tombstone_not_authorised",
            Self::StoreFailed => "store_failed",
            Self::NoRoom => "no_room",
            Self::SeqAhead => "seq_ahead",
            Self::LifetimeTooLong => "lifetime_too_long",
            Self::NotOwner => "not_owner",
            Self::LocalRegistration => "local_registration",
            Self::KeyRevoked => "key_revoked",
            Self::Equivocated => "equivocated",
            Self::SignerQuota => "signer_quota",
            Self::ClaimsFull => "claims_full",
            Self::BadTransfer => "bad_transfer",
            Self::LivenessUnknownAgent => "liveness_unknown_agent",
            Self::LivenessTooOld => "liveness_too_old",
            Self::LivenessFull => "liveness_full",
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&RecordError> for Refusal {
    fn from(e: &RecordError) -> Self {
        match e {
            RecordError::TooLarge { .. } => Self::TooLarge,
            RecordError::Malformed { .. } => Self::Malformed,
            RecordError::NonCanonical => Self::NonCanonical,
            RecordError::TrailingBytes { .. } => Self::TrailingBytes,
            RecordError::UnknownType { .. } => Self::UnknownType,
            RecordError::BadSignature => Self::BadSignature,
            RecordError::BadPayload { .. } => Self::BadPayload,
            RecordError::DigestMismatch => Self::DigestMismatch,
            RecordError::StaleSeq { .. } => Self::StaleSeq,
            RecordError::Expired { .. } => Self::Expired,
        }
    }
}
