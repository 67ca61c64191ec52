//! The node's transparency log, its pure parts (docs/protocol.md#log):
//! what an entry is, the C2SP tlog-tiles resource paths, and the
//! checkpoint the node signs as a C2SP signed note. The log itself, kept
//! in the store in the same transaction as the records it logs, is
//! `store/log.rs`; its HTTP face is `api/log.rs`.
//!
//! The Merkle tree is RFC 6962's (SHA-256, leaf `0x00 || entry`, node
//! `0x01 || left || right`), its hashes stored and its proofs made by the
//! `tlog_tiles` crate (a port of Go's `golang.org/x/mod/sumdb/tlog`);
//! notes are signed and opened by `signed_note`.

use sha2::{Digest, Sha256};

pub mod cosign;
pub mod note;
pub mod path;
pub mod witness;

pub use note::{Checkpoint, CheckpointError, Notary};
pub use path::{TilePath, TILE_WIDTH};
pub use tlog_tiles::{check_record, check_tree, Hash, RecordProof, TreeProof};

/// The prefix of a sealed entry: what the log holds, in place of the
/// record, for an agent that is not public (unlisted or private agents
/// never leave the node): the prefix and the SHA-256 of the record.
pub const SEALED_PREFIX: &[u8] = b"agentmesh/sealed/v1\n";

/// The prefix of a suspension entry: an operator suspending an agent on
/// this node, or lifting the suspension, as the log holds it (the prefix,
/// then the statement's JSON: `agent_id`, `state` `suspended` or
/// `lifted`, `reason`, `at`).
pub const SUSPENSION_PREFIX: &[u8] = b"agentmesh/suspension/v1\n";

/// The most bytes of one entry: an entry bundle prefixes each with a
/// big-endian `u16` length.
pub const MAX_ENTRY_BYTES: usize = u16::MAX as usize;

/// The log entry of a signed record's encoded bytes: the bytes
/// themselves, or, when `sealed`, [`SEALED_PREFIX`] and their SHA-256.
pub fn entry_of(record: &[u8], sealed: bool) -> Vec<u8> {
    if sealed {
        let mut entry = SEALED_PREFIX.to_vec();
        entry.extend_from_slice(&Sha256::digest(record));
        entry
    } else {
        record.to_vec()
    }
}

/// The RFC 6962 leaf hash of an entry.
pub fn leaf_hash(entry: &[u8]) -> Hash {
    tlog_tiles::record_hash(entry)
}

/// The standard base64 of a hash, as checkpoints and proofs carry it.
pub fn encode_hash(hash: &Hash) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(hash.0)
}

/// A hash from its standard base64.
///
/// # Errors
/// When `text` is not the base64 of 32 bytes.
pub fn decode_hash(text: &str) -> Result<Hash, tlog_tiles::Error> {
    Hash::parse_hash(text)
}

#[cfg(test)]
mod tests;
