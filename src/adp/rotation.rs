//! Key rotation (ADP 7.3, as agentmesh profiles it; `proto/key-rotation.cddl`).
//!
//! An agent that changes its key publishes the new key (in DNS and in
//! `identity.publicKey`), the old key's fingerprint as
//! `identity.previousFingerprint`, and a rotation statement
//! `identity.keyRotation = {"previousKey": <old raw key, base64url>,
//! "signature": <base64url Ed25519 signature by the old key>}` over the
//! UTF-8 bytes of `"ADP/1.0 key-rotation\n" + agent_id + "\n" +
//! previousFingerprint + "\n" + fingerprint`. A node that holds the agent
//! under the old key keeps its identity across the change only with that
//! statement; without it the change is `key_changed_unproven`: the old
//! descriptor stays (until it expires) and the new key earns nothing. A
//! document that goes back to a key replaced since is no rotation of the
//! held key, so a replayed pre-rotation descriptor is refused the same way.

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use super::AgentDocument;
use crate::identity;

/// The prefix of the signed rotation text.
pub const SIGNING_PREFIX: &str = "ADP/1.0 key-rotation\n";
/// The `identity` member holding the statement.
pub const MEMBER: &str = "keyRotation";

/// `identity.keyRotation`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RotationStatement {
    /// The old key, raw 32 bytes base64url without padding.
    pub previous_key: String,
    /// The old key's Ed25519 signature over [`signing_input`], base64url.
    pub signature: String,
}

/// Why a key change is not a proven rotation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RotationError {
    /// The document names no previous key, or not the held one.
    #[error(
        "the key changed from {held} and the document does not name it as previousFingerprint"
    )]
    NotFromHeldKey {
        /// The held key's fingerprint.
        held: String,
    },
    /// `previousFingerprint` names the held key but no statement proves it.
    #[error("previousFingerprint names the held key but there is no keyRotation statement")]
    NoStatement,
    /// The statement is not one (shape, key, signature encoding).
    #[error("malformed keyRotation statement: {reason}")]
    Malformed {
        /// What is wrong.
        reason: String,
    },
    /// The statement's signature does not verify with the held key.
    #[error("the keyRotation signature does not verify with the previous key")]
    BadSignature,
}

/// The bytes the old key signs.
pub fn signing_input(agent_id: &str, previous_fingerprint: &str, fingerprint: &str) -> Vec<u8> {
    format!("{SIGNING_PREFIX}{agent_id}\n{previous_fingerprint}\n{fingerprint}").into_bytes()
}

/// The statement that `old` hands agent `agent_id` over to `new`.
pub fn sign(agent_id: &str, old: &SigningKey, new: &VerifyingKey) -> RotationStatement {
    let input = signing_input(
        agent_id,
        &identity::fingerprint(&old.verifying_key()),
        &identity::fingerprint(new),
    );
    RotationStatement {
        previous_key: identity::encode_public_key(&old.verifying_key()),
        signature: identity::encode_bytes(&old.sign(&input).to_bytes()),
    }
}

/// How a document's key relates to the key held for its agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Continuity {
    /// The same key.
    SameKey,
    /// Another key, handed over by the held one.
    Rotated {
        /// The held key's fingerprint.
        from: String,
        /// The new key's fingerprint.
        to: String,
    },
}

/// [`continuity`] of the document `new` against the key the held document
/// `held` proves; `Ok(None)` when there is nothing to compare (either is
/// not an ADP document, or the held one proves no key). The crawler and
/// the judge both decide with this.
///
/// # Errors
/// The [`RotationError`] that makes the change unproven.
pub fn continuity_of(held: &str, new: &str) -> Result<Option<Continuity>, RotationError> {
    let held_key = serde_json::from_str::<AgentDocument>(held)
        .ok()
        .and_then(|d| d.proven_key());
    match (held_key, serde_json::from_str::<AgentDocument>(new)) {
        (Some(key), Ok(doc)) => continuity(&doc, &key).map(Some),
        _ => Ok(None),
    }
}

/// Checks `doc`'s key against `held`, the key of the agent's descriptor
/// this node holds.
///
/// # Errors
/// The [`RotationError`] that makes the change unproven.
pub fn continuity(doc: &AgentDocument, held: &VerifyingKey) -> Result<Continuity, RotationError> {
    let fingerprint = &doc.identity.public_key.fingerprint;
    if super::check::has_fingerprint(held, fingerprint) {
        return Ok(Continuity::SameKey);
    }
    let held_fp = identity::fingerprint(held);
    let previous = doc
        .identity
        .previous_fingerprint
        .as_deref()
        .unwrap_or_default();
    if !previous.eq_ignore_ascii_case(&held_fp) {
        return Err(RotationError::NotFromHeldKey { held: held_fp });
    }
    let malformed = |reason: &str| RotationError::Malformed {
        reason: reason.into(),
    };
    let raw = doc
        .identity
        .extra
        .get(MEMBER)
        .ok_or(RotationError::NoStatement)?;
    let statement: RotationStatement =
        serde_json::from_value(raw.clone()).map_err(|e| malformed(&e.to_string()))?;
    let key = identity::decode_public_key(&statement.previous_key)
        .map_err(|_| malformed("previousKey is not an Ed25519 key"))?;
    if key != *held {
        return Err(malformed("previousKey is not the previous key"));
    }
    let sig: [u8; 64] = identity::decode_bytes(&statement.signature)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| malformed("signature is not 64 bytes of base64url"))?;
    held.verify_strict(
        &signing_input(
            &doc.identity.id.to_ascii_lowercase(),
            &held_fp,
            &fingerprint.to_ascii_lowercase(),
        ),
        &Signature::from_bytes(&sig),
    )
    .map_err(|_| RotationError::BadSignature)?;
    Ok(Continuity::Rotated {
        from: held_fp,
        to: fingerprint.to_ascii_lowercase(),
    })
}

#[cfg(test)]
mod tests;
