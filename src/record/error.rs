//! [`RecordError`]: every way encoding, decoding or checking a record
//! fails, each with a short stable reason code.

/// Errors from encoding, decoding and checking records.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// Encoded size over [`MAX_RECORD_BYTES`](crate::record::MAX_RECORD_BYTES).
    #[error("record is {size} bytes, over the {max}-byte limit")]
    TooLarge {
        /// The encoded size in bytes.
        size: usize,
        /// The limit, [`MAX_RECORD_BYTES`](crate::record::MAX_RECORD_BYTES).
        max: usize,
    },
    /// The bytes are not a well-formed envelope.
    #[error("malformed record: {reason}")]
    Malformed {
        /// What is wrong with the envelope.
        reason: String,
    },
    /// A well-formed envelope that is not in the one canonical encoding
    /// (`proto/records.cddl`, ENCODING): keys in another order, indefinite
    /// lengths, longer heads, tags.
    #[error("record envelope is not in canonical form")]
    NonCanonical,
    /// Bytes left over after the envelope.
    #[error("{extra} trailing bytes after the record")]
    TrailingBytes {
        /// How many bytes follow it.
        extra: usize,
    },
    /// The record type is not one we know.
    #[error("unknown record type {kind:?}")]
    UnknownType {
        /// The envelope's type string.
        kind: String,
    },
    /// The signature does not verify for the signer key.
    #[error("bad signature")]
    BadSignature,
    /// The payload is not the type the envelope says.
    #[error("malformed {kind} payload: {reason}")]
    BadPayload {
        /// The payload type expected (`descriptor`, `tombstone` or `liveness`).
        kind: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The payload's document does not hash to its stated digest.
    #[error("document digest does not match the document")]
    DigestMismatch,
    /// The record's seq is not above the one already held.
    #[error("stale record for {agent_id}: seq {seq} is not above the held seq {held}")]
    StaleSeq {
        /// The agent the record is for.
        agent_id: String,
        /// The record's seq.
        seq: u64,
        /// The seq of the record already held.
        held: u64,
    },
    /// The record's validity window has passed.
    #[error("record for {agent_id} expired at {expires_at}")]
    Expired {
        /// The agent the record is for.
        agent_id: String,
        /// When it expired, in Unix seconds.
        expires_at: u64,
    },
}

impl RecordError {
    /// A short, stable reason code for counters and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "too_large",
            Self::Malformed { .. } => "malformed",
            Self::NonCanonical => "non_canonical",
            Self::TrailingBytes { .. } => "trailing_bytes",
            Self::UnknownType { .. } => "unknown_type",
            Self::BadSignature => "bad_signature",
            Self::BadPayload { .. } => "bad_payload",
            Self::DigestMismatch => "digest_mismatch",
            Self::StaleSeq { .. } => "stale_seq",
            Self::Expired { .. } => "expired",
        }
    }
}
