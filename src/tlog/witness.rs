//! What a witness concludes from two checkpoints of one log, and the
//! proof of equivocation it keeps when they cannot both be true
//! (docs/protocol.md#witnessing).
//!
//! Two checkpoints signed by one log key, for one origin, equivocate when
//! - they have the same size and different roots, or
//! - the larger tree's prefix of the smaller size has another root than
//!   the smaller checkpoint: shown by that prefix's root and the RFC 9162
//!   consistency proof from it to the larger root. The proof ties the
//!   prefix root to the larger tree (it recomputes the larger root from
//!   it), so a prefix root other than the smaller checkpoint's shows that
//!   the log signed two histories.
//!
//! An [`Equivocation`] holds exactly that, and [`Equivocation::verify`]
//! checks it with nothing else: anyone holding the file can convince
//! themselves, offline.

use serde::{Deserialize, Serialize};

use super::note::{verifier_key, Checkpoint, CheckpointError};
use super::{decode_hash, encode_hash, Hash, TreeProof};

/// Most hashes in a proof of equivocation (as a consistency proof).
pub const MAX_PROOF_HASHES: usize = 128;

/// How a peer's new checkpoint relates to the last one a witness holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Relation {
    /// The same tree.
    Same,
    /// An extension of it, proven.
    Extends,
    /// Not an extension: the evidence.
    Forked(Equivocation),
}

/// Two checkpoints one log key signed that cannot both be true.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Equivocation {
    /// The log's peer id (its Ed25519 key).
    pub peer: String,
    /// One checkpoint, as the signed note the log sent.
    pub first: String,
    /// The other, the larger when the sizes differ.
    pub second: String,
    /// When the sizes differ: the root of the larger tree's prefix of the
    /// smaller size (standard base64), as the log itself proved it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_root: Option<String>,
    /// When the sizes differ: the consistency proof from that prefix to
    /// the larger tree (standard base64 hashes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proof: Vec<String>,
}

/// What [`Equivocation::verify`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fork {
    /// Two roots for one size.
    SameSize {
        /// The size.
        size: u64,
    },
    /// The larger checkpoint does not extend the smaller.
    NotExtension {
        /// The smaller size.
        from: u64,
        /// The larger.
        to: u64,
    },
}

/// Why a claimed equivocation does not hold.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum EquivocationError {
    /// The peer id does not carry an Ed25519 key.
    #[error("{0} is not the peer id of an Ed25519 key")]
    Peer(String),
    /// A checkpoint does not open under the log's key.
    #[error("a checkpoint does not open: {0}")]
    Checkpoint(#[from] CheckpointError),
    /// The two checkpoints belong to different logs.
    #[error("the checkpoints name two origins")]
    Origins,
    /// They agree: same size and root, or a valid extension.
    #[error("the checkpoints agree: {0}")]
    Consistent(&'static str),
    /// The prefix root or the proof is missing, malformed or does not
    /// lead to the larger root.
    #[error("the proof does not hold: {0}")]
    Proof(String),
}

/// The origin a checkpoint note names (its first line), unchecked.
fn origin_of(note: &str) -> Option<&str> {
    note.lines().next().filter(|o| !o.is_empty())
}

/// Opens `note` as a checkpoint signed by `key` for its own origin.
fn open(note: &str, key: &ed25519_dalek::VerifyingKey) -> Result<Checkpoint, EquivocationError> {
    let origin = origin_of(note).ok_or_else(|| {
        EquivocationError::Checkpoint(CheckpointError::Malformed("no origin line".into()))
    })?;
    let vkey = verifier_key(origin, key);
    Ok(Checkpoint::open(note.as_bytes(), &vkey, Some(origin))?)
}

impl Equivocation {
    /// Checks the evidence: both checkpoints signed by the peer's key for
    /// one origin, and either one size with two roots, or a prefix root
    /// other than the smaller checkpoint's that the consistency proof
    /// ties to the larger root.
    ///
    /// # Errors
    /// [`EquivocationError`] naming what does not hold.
    pub fn verify(&self) -> Result<Fork, EquivocationError> {
        let key = crate::identity::key_of_peer_id(&self.peer)
            .ok_or_else(|| EquivocationError::Peer(self.peer.clone()))?;
        let a = open(&self.first, &key)?;
        let b = open(&self.second, &key)?;
        if a.origin != b.origin {
            return Err(EquivocationError::Origins);
        }
        let (small, large) = if a.size <= b.size { (a, b) } else { (b, a) };
        if small.size == large.size {
            return if small.root == large.root {
                Err(EquivocationError::Consistent("one size, one root"))
            } else {
                Ok(Fork::SameSize { size: small.size })
            };
        }
        if small.size == 0 {
            return Err(EquivocationError::Consistent(
                "every tree extends the empty one",
            ));
        }
        let prefix = self
            .prefix_root
            .as_deref()
            .ok_or_else(|| EquivocationError::Proof("no prefix root".into()))
            .and_then(|t| decode_hash(t).map_err(|e| EquivocationError::Proof(e.to_string())))?;
        let proof = decode_proof(&self.proof).map_err(EquivocationError::Proof)?;
        tlog_tiles::check_tree(&proof, large.size, large.root, small.size, prefix)
            .map_err(|e| EquivocationError::Proof(e.to_string()))?;
        if prefix == small.root {
            return Err(EquivocationError::Consistent(
                "the larger tree extends the smaller",
            ));
        }
        Ok(Fork::NotExtension {
            from: small.size,
            to: large.size,
        })
    }
}

/// The hashes of a proof from their base64, at most [`MAX_PROOF_HASHES`].
///
/// # Errors
/// A description of the first bad hash.
pub fn decode_proof(proof: &[String]) -> Result<TreeProof, String> {
    if proof.len() > MAX_PROOF_HASHES {
        return Err(format!("{} hashes, over {MAX_PROOF_HASHES}", proof.len()));
    }
    proof
        .iter()
        .map(|h| decode_hash(h).map_err(|e| format!("a proof hash: {e}")))
        .collect()
}

/// How the checkpoint `new` of a peer relates to `old`, the last one a
/// witness holds from it, both opened under the peer's key, given what
/// the peer answered: the root of its tree of `old.size` entries and the
/// consistency proof from it to `new` (unused when the sizes are equal).
/// `None` when the answer proves nothing (a proof that does not lead to
/// `new.root`): the peer failed to show its log, which is not yet
/// evidence against it.
///
/// `new.size` must be at least `old.size`: a smaller one is asked the
/// other way round.
pub fn relate(
    peer: &str,
    old: (&Checkpoint, &str),
    new: (&Checkpoint, &str),
    prefix_root: Hash,
    proof: &TreeProof,
) -> Option<Relation> {
    let ((o, o_note), (n, n_note)) = (old, new);
    let evidence = |prefix: Option<Hash>, proof: &TreeProof| Equivocation {
        peer: peer.to_owned(),
        first: o_note.to_owned(),
        second: n_note.to_owned(),
        prefix_root: prefix.as_ref().map(encode_hash),
        proof: proof.iter().map(encode_hash).collect(),
    };
    if o.size == n.size {
        return Some(if o.root == n.root {
            Relation::Same
        } else {
            Relation::Forked(evidence(None, &Vec::new()))
        });
    }
    if o.size == 0 || n.size < o.size {
        return (o.size == 0).then_some(Relation::Extends);
    }
    tlog_tiles::check_tree(proof, n.size, n.root, o.size, prefix_root).ok()?;
    Some(if prefix_root == o.root {
        Relation::Extends
    } else {
        Relation::Forked(evidence(Some(prefix_root), proof))
    })
}
