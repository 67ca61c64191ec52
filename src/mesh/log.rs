//! Wire types of the log protocol `/agentmesh/log/1.0.0` (CBOR, libp2p's
//! request-response codec) and of the checkpoints topic, and their bounds
//! (docs/protocol.md#witnessing). The mesh carries them without knowing
//! what a checkpoint means: the node's witness (`crate::witness`) asks
//! and answers.
//!
//! A witness that saw a peer's checkpoint of size `m` and is shown one of
//! size `n > m` asks that peer for [`LogRequest::Consistency`]; having
//! checked the proof it hands its cosignature back with
//! [`LogRequest::Cosignature`].

use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

/// Largest message on the checkpoints topic: a checkpoint is a few hundred
/// bytes; an equivocation proof holds two and a consistency proof of at
/// most [`MAX_PROOF_HASHES`] hashes (4 KiB).
pub const MAX_CHECKPOINT_MESSAGE_BYTES: usize = 16 * 1024;
/// Largest encoded log request (a cosigned checkpoint note, bounded by
/// `tlog::note::MAX_CHECKPOINT_BYTES`, plus the CBOR around it).
pub const MAX_LOG_REQUEST_BYTES: u64 = 20 * 1024;
/// Largest encoded log response: [`MAX_ENTRIES`] entries of at most
/// 16 KiB (the record limit) and their CBOR framing, or
/// [`MAX_LEAF_HASHES`] hashes.
pub const MAX_LOG_RESPONSE_BYTES: u64 = 1200 * 1024;
/// Most entries one [`LogRequest::Entries`] asks for.
pub const MAX_ENTRIES: usize = 64;
/// Most leaf hashes one [`LogRequest::LeafHashes`] asks for.
pub const MAX_LEAF_HASHES: u32 = 1024;
/// Most hashes in a consistency proof: two per level of a tree of 2^63
/// entries is 126.
pub const MAX_PROOF_HASHES: usize = 128;
/// Longest refusal reason, in bytes.
pub const MAX_REASON_BYTES: usize = 200;

/// What a node asks of a peer's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LogRequest {
    /// The root of the peer's tree of `from` entries and the consistency
    /// proof from it to the tree of `to` entries.
    Consistency {
        /// The smaller size.
        from: u64,
        /// The larger size (a checkpoint the peer signed).
        to: u64,
    },
    /// The leaf hashes of entries `start .. start + count` of the peer's
    /// durable log (`count` at most [`MAX_LEAF_HASHES`]): what a node
    /// compares with the records it received, before it fetches the
    /// missing ones.
    LeafHashes {
        /// The first entry's index.
        start: u64,
        /// How many.
        count: u32,
    },
    /// The entries at these indexes (at most [`MAX_ENTRIES`]).
    Entries {
        /// The indexes, in the durable log.
        indexes: Vec<u64>,
    },
    /// The asker's witness cosignature on one of the peer's checkpoints:
    /// the signed note with the cosignature line added.
    Cosignature {
        /// The cosigned checkpoint note.
        note: ByteBuf,
    },
    /// The peer's newest checkpoint: what a node asks a peer it has just
    /// connected to (again), since gossip does not carry a checkpoint
    /// again to a peer that was away when it went out.
    Checkpoint,
}

/// A peer's answer to a [`LogRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LogResponse {
    /// The root of the tree of `from` entries and the consistency proof
    /// (RFC 9162 section 2.1.4) to the tree of `to` entries.
    Consistency {
        /// The root of the smaller tree, 32 bytes.
        prefix_root: ByteBuf,
        /// The proof's hashes, 32 bytes each.
        proof: Vec<ByteBuf>,
    },
    /// The leaf hashes asked for, 32 bytes each, in order.
    LeafHashes {
        /// The hashes.
        hashes: Vec<ByteBuf>,
    },
    /// The entries asked for, in order.
    Entries {
        /// Each entry's bytes.
        entries: Vec<ByteBuf>,
    },
    /// The cosignature was kept.
    Cosigned,
    /// The newest checkpoint of the log, the signed note as published on
    /// the checkpoints topic.
    Checkpoint {
        /// The note.
        note: ByteBuf,
    },
    /// Not answered; a short reason.
    Refused {
        /// Why.
        reason: String,
    },
}

impl LogResponse {
    /// A refusal with `reason` cut to [`MAX_REASON_BYTES`].
    pub fn refused(reason: impl Into<String>) -> Self {
        let mut reason = reason.into();
        if reason.len() > MAX_REASON_BYTES {
            let mut end = MAX_REASON_BYTES;
            while !reason.is_char_boundary(end) {
                end -= 1;
            }
            reason.truncate(end);
        }
        Self::Refused { reason }
    }

    /// Checks the bounds a received response must keep: 32-byte hashes,
    /// at most [`MAX_PROOF_HASHES`] of them, a short reason.
    ///
    /// # Errors
    /// A short description of the bound broken.
    pub fn check(&self) -> Result<(), &'static str> {
        match self {
            Self::Consistency { prefix_root, proof } => {
                if prefix_root.len() != 32 || proof.iter().any(|h| h.len() != 32) {
                    return Err("a hash that is not 32 bytes");
                }
                if proof.len() > MAX_PROOF_HASHES {
                    return Err("too many proof hashes");
                }
                Ok(())
            }
            Self::LeafHashes { hashes } => {
                if hashes.len() > MAX_LEAF_HASHES as usize || hashes.iter().any(|h| h.len() != 32) {
                    return Err("leaf hashes out of bounds");
                }
                Ok(())
            }
            Self::Checkpoint { note } => {
                if note.len() > crate::tlog::note::MAX_CHECKPOINT_BYTES {
                    return Err("a checkpoint over its size limit");
                }
                Ok(())
            }
            Self::Entries { entries } => {
                let max = crate::record::MAX_RECORD_BYTES;
                if entries.len() > MAX_ENTRIES || entries.iter().any(|e| e.len() > max) {
                    return Err("entries out of bounds");
                }
                Ok(())
            }
            Self::Cosigned => Ok(()),
            Self::Refused { reason } if reason.len() > MAX_REASON_BYTES => {
                Err("a refusal reason over 200 bytes")
            }
            Self::Refused { .. } => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_out_of_bounds_are_named() {
        let hash = ByteBuf::from(vec![0u8; 32]);
        let ok = LogResponse::Consistency {
            prefix_root: hash.clone(),
            proof: vec![hash.clone(); 3],
        };
        assert_eq!(ok.check(), Ok(()));
        let short = LogResponse::Consistency {
            prefix_root: hash.clone(),
            proof: vec![ByteBuf::from(vec![0u8; 31])],
        };
        assert_eq!(short.check(), Err("a hash that is not 32 bytes"));
        let long = LogResponse::Consistency {
            prefix_root: hash.clone(),
            proof: vec![hash; MAX_PROOF_HASHES + 1],
        };
        assert_eq!(long.check(), Err("too many proof hashes"));
        let reason = LogResponse::Refused {
            reason: "é".repeat(150),
        };
        assert!(reason.check().is_err());
        let LogResponse::Refused { reason } = LogResponse::refused("é".repeat(150)) else {
            unreachable!()
        };
        assert!(reason.len() <= MAX_REASON_BYTES && reason.ends_with('é'));
    }
}
