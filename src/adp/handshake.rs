//! The ADP WebSocket challenge, as agentmesh profiles it (DESIGN.md 4.5).
//!
//! The verifier opens the agent's `endpoints.chat` WebSocket and sends an
//! `adp_handshake` frame carrying its own id `V`, its public key and a
//! nonce `N`. The agent answers with an `adp_handshake` frame that carries
//! its id, its public key and an Ed25519 signature over
//! `"ADP/1.0 handshake\n" + N + "\n" + agent_id + "\n" + V`.
//!
//! The nonce is `hex(SHA-256(doc_sha256 || verifier || unix_ms_be64 ||
//! rand16))`, so the signature is transferable evidence: anyone holding the
//! record can recompute `N` from the document digest and the proof's
//! fields and check that the key holder endorsed this exact document.
//! Both sides of the exchange live here: the crawler's check and the
//! agent's answer (used by `agent-host` and the testbed).

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::identity;
use crate::verify::ChallengeProof;

/// The protocol string of the frames.
pub const PROTOCOL: &str = "ADP/1.0";
/// The frame type.
pub const FRAME_TYPE: &str = "adp_handshake";
/// The prefix of the signed handshake string.
pub const SIGNING_PREFIX: &str = "ADP/1.0 handshake\n";
/// Largest handshake frame either side accepts, bytes.
pub const MAX_FRAME_BYTES: usize = 4096;

/// A handshake frame (both directions; `signature` only in the answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandshakeFrame {
    /// Always [`FRAME_TYPE`].
    #[serde(rename = "type")]
    pub kind: String,
    /// Always [`PROTOCOL`].
    pub protocol: String,
    /// The sender's id: the verifier's in the challenge, the agent's
    /// (`agent:{domain}`) in the answer.
    pub agent_id: String,
    /// The sender's Ed25519 public key, base64url without padding.
    pub public_key: String,
    /// The verifier's nonce, echoed in the answer.
    pub nonce: String,
    /// The agent's signature (base64url), in the answer only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// Why a handshake answer does not prove the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// Not a handshake frame, or a malformed one.
    #[error("malformed handshake answer: {reason}")]
    Malformed {
        /// What is wrong with it.
        reason: String,
    },
    /// The answer echoes another nonce.
    #[error("the answer is for another nonce")]
    WrongNonce,
    /// The answer speaks for another agent id.
    #[error("the answer is from {got}, not {expected}")]
    WrongAgent {
        /// The agent id the challenge was for (`agent:{domain}`).
        expected: String,
        /// The agent id the answer gives.
        got: String,
    },
    /// The answer's key is not the key the fingerprint chain proved.
    #[error("the answer's public key is not the agent's key")]
    WrongKey,
    /// The signature does not verify.
    #[error("the handshake signature does not verify")]
    BadSignature,
}

/// The nonce for a challenge about the document with digest `doc_sha256`.
pub fn nonce(doc_sha256: &[u8], verifier: &str, unix_ms: u64, rand: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(doc_sha256);
    h.update(verifier.as_bytes());
    h.update(unix_ms.to_be_bytes());
    h.update(rand);
    hex::encode(h.finalize())
}

/// The bytes the agent signs.
pub fn signing_input(nonce: &str, agent_id: &str, verifier: &str) -> Vec<u8> {
    format!("{SIGNING_PREFIX}{nonce}\n{agent_id}\n{verifier}").into_bytes()
}

/// The verifier's challenge frame.
pub fn challenge(verifier: &str, verifier_key: &VerifyingKey, nonce: &str) -> HandshakeFrame {
    HandshakeFrame {
        kind: FRAME_TYPE.into(),
        protocol: PROTOCOL.into(),
        agent_id: verifier.into(),
        public_key: identity::encode_public_key(verifier_key),
        nonce: nonce.into(),
        signature: None,
    }
}

/// The agent's answer to `challenge`, signed with `key`.
pub fn answer(challenge: &HandshakeFrame, agent_id: &str, key: &SigningKey) -> HandshakeFrame {
    let sig = key.sign(&signing_input(
        &challenge.nonce,
        agent_id,
        &challenge.agent_id,
    ));
    HandshakeFrame {
        kind: FRAME_TYPE.into(),
        protocol: PROTOCOL.into(),
        agent_id: agent_id.into(),
        public_key: identity::encode_public_key(&key.verifying_key()),
        nonce: challenge.nonce.clone(),
        signature: Some(crate::identity::encode_bytes(&sig.to_bytes())),
    }
}

/// Checks an agent's answer to the challenge with `nonce`, sent by
/// `verifier`, against the key the fingerprint chain proved. Returns the
/// raw signature bytes (the transferable evidence).
///
/// # Errors
/// The [`HandshakeError`] that says what is wrong.
pub fn check_answer(
    answer: &HandshakeFrame,
    nonce: &str,
    agent_id: &str,
    verifier: &str,
    agent_key: &VerifyingKey,
) -> Result<Vec<u8>, HandshakeError> {
    let malformed = |reason: &str| HandshakeError::Malformed {
        reason: reason.into(),
    };
    if answer.kind != FRAME_TYPE {
        return Err(malformed("frame type is not adp_handshake"));
    }
    if answer.nonce != nonce {
        return Err(HandshakeError::WrongNonce);
    }
    if answer.agent_id != agent_id {
        return Err(HandshakeError::WrongAgent {
            expected: agent_id.into(),
            got: answer.agent_id.clone(),
        });
    }
    let key = identity::decode_public_key(&answer.public_key)
        .map_err(|_| malformed("public_key is not an Ed25519 key"))?;
    if key != *agent_key {
        return Err(HandshakeError::WrongKey);
    }
    let sig = answer
        .signature
        .as_deref()
        .ok_or_else(|| malformed("no signature"))?;
    let sig: [u8; 64] = identity::decode_bytes(sig)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| malformed("signature is not 64 bytes of base64url"))?;
    agent_key
        .verify_strict(
            &signing_input(nonce, agent_id, verifier),
            &Signature::from_bytes(&sig),
        )
        .map_err(|_| HandshakeError::BadSignature)?;
    Ok(sig.to_vec())
}

/// Re-checks a stored challenge proof: recomputes the nonce from the
/// document digest and the proof, and verifies the signature.
///
/// # Errors
/// [`HandshakeError::Malformed`] or [`HandshakeError::BadSignature`].
pub fn check_proof(
    proof: &ChallengeProof,
    doc_sha256: &[u8],
    agent_id: &str,
    agent_key: &VerifyingKey,
) -> Result<(), HandshakeError> {
    let sig: [u8; 64] =
        proof
            .signature
            .as_slice()
            .try_into()
            .map_err(|_| HandshakeError::Malformed {
                reason: "proof signature is not 64 bytes".into(),
            })?;
    if proof.rand.len() != 16 {
        return Err(HandshakeError::Malformed {
            reason: "proof rand is not 16 bytes".into(),
        });
    }
    let n = nonce(doc_sha256, &proof.verifier, proof.unix_ms, &proof.rand);
    agent_key
        .verify_strict(
            &signing_input(&n, agent_id, &proof.verifier),
            &Signature::from_bytes(&sig),
        )
        .map_err(|_| HandshakeError::BadSignature)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_checks_and_its_proof_is_transferable() {
        let agent = SigningKey::from_bytes(&[3; 32]);
        let verifier = SigningKey::from_bytes(&[4; 32]);
        let digest = [9u8; 32];
        let rand = [5u8; 16];
        let n = nonce(&digest, "node-a", 1_700_000_000_000, &rand);
        let c = challenge("node-a", &verifier.verifying_key(), &n);
        let a = answer(&c, "agent:a.test", &agent);
        let sig = check_answer(&a, &n, "agent:a.test", "node-a", &agent.verifying_key()).unwrap();
        let proof = ChallengeProof {
            verifier: "node-a".into(),
            unix_ms: 1_700_000_000_000,
            rand: rand.to_vec(),
            signature: sig,
        };
        check_proof(&proof, &digest, "agent:a.test", &agent.verifying_key()).unwrap();
        assert_eq!(
            check_proof(&proof, &[8u8; 32], "agent:a.test", &agent.verifying_key()),
            Err(HandshakeError::BadSignature),
            "the proof is bound to the document digest"
        );
    }

    #[test]
    fn each_bad_answer_has_its_reason() {
        let agent = SigningKey::from_bytes(&[3; 32]);
        let other = SigningKey::from_bytes(&[6; 32]);
        let n = nonce(&[0; 32], "v", 1, &[0; 16]);
        let c = challenge("v", &other.verifying_key(), &n);
        let good = answer(&c, "agent:a.test", &agent);
        let check =
            |a: &HandshakeFrame| check_answer(a, &n, "agent:a.test", "v", &agent.verifying_key());
        assert!(check(&good).is_ok());

        let mut wrong_nonce = answer(
            &challenge("v", &other.verifying_key(), "00"),
            "agent:a.test",
            &agent,
        );
        assert_eq!(check(&wrong_nonce), Err(HandshakeError::WrongNonce));
        wrong_nonce.nonce = n.clone();
        assert_eq!(
            check(&wrong_nonce),
            Err(HandshakeError::BadSignature),
            "signed for another nonce"
        );

        assert!(matches!(
            check(&answer(&c, "agent:b.test", &agent)),
            Err(HandshakeError::WrongAgent { .. })
        ));
        assert_eq!(
            check(&answer(&c, "agent:a.test", &other)),
            Err(HandshakeError::WrongKey)
        );

        let mut forged = good.clone();
        forged.signature = Some(identity::encode_bytes(&[0u8; 64]));
        assert_eq!(check(&forged), Err(HandshakeError::BadSignature));
        let mut unsigned = good.clone();
        unsigned.signature = None;
        assert!(matches!(
            check(&unsigned),
            Err(HandshakeError::Malformed { .. })
        ));
        let mut typo = good;
        typo.kind = "message".into();
        assert!(matches!(
            check(&typo),
            Err(HandshakeError::Malformed { .. })
        ));
    }
}
