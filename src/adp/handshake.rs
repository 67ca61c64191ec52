//! The ADP WebSocket challenge, as agentmesh profiles it (docs/protocol.md#crawl-challenge).
//!
//! The verifier opens the agent's `endpoints.chat` WebSocket and sends an
//! `adp_handshake` frame carrying its own id `V`, its public key and a
//! nonce `N`. The agent answers with its own `adp_handshake` frame: its id,
//! its public key, a nonce and an Ed25519 signature over
//! `"ADP/1.0 handshake\n" + N + "\n" + agent_id + "\n" + V`. The answer's
//! `nonce` field is the agent's own fresh nonce (ADP 6.2: each side's frame
//! carries that side's random nonce) or an echo of `N`; both are accepted,
//! because what proves the key is the signature over `N`, never the field.
//! When the agent sent a nonce of its own, the verifier completes the
//! mutual handshake with [`completion`]: its own frame, signed the same way
//! over the agent's nonce.
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
use crate::trust::ChallengeProof;

/// The protocol string of the frames.
pub const PROTOCOL: &str = "ADP/1.0";
/// The frame type.
pub const FRAME_TYPE: &str = "adp_handshake";
/// The prefix of the signed handshake string.
pub const SIGNING_PREFIX: &str = "ADP/1.0 handshake\n";
/// Largest handshake frame either side accepts, bytes.
pub const MAX_FRAME_BYTES: usize = 4096;
/// Longest nonce accepted in a frame, hex digits (ours are 64).
pub const MAX_NONCE_CHARS: usize = 128;

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
    /// The sender's nonce: the verifier's `N` in the challenge; in the
    /// answer the agent's own nonce, or an echo of `N`.
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
    /// The answer is signed over another nonce than the challenge's (its
    /// own, typically) rather than over `N`.
    #[error("the answer is signed over another nonce than the challenge's")]
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

/// The agent's answer to `challenge`, signed with `key`, echoing the
/// challenge's nonce.
pub fn answer(challenge: &HandshakeFrame, agent_id: &str, key: &SigningKey) -> HandshakeFrame {
    answer_with_nonce(challenge, agent_id, key, &challenge.nonce)
}

/// The agent's answer to `challenge`, signed with `key` over the
/// challenge's nonce, its `nonce` field carrying `own_nonce` (the agent's
/// side of a mutual handshake, ADP 6.2).
pub fn answer_with_nonce(
    challenge: &HandshakeFrame,
    agent_id: &str,
    key: &SigningKey,
    own_nonce: &str,
) -> HandshakeFrame {
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
        nonce: own_nonce.into(),
        signature: Some(identity::encode_bytes(&sig.to_bytes())),
    }
}

/// The key an answer must be signed with: `proven`, the key the
/// document's fingerprint chain proved (its `publicKey.full`), or without
/// it the answer's own key when it hashes to the document's `fingerprint`
/// (the one DNS published).
///
/// # Errors
/// [`HandshakeError::Malformed`] for a `public_key` that is not a key,
/// [`HandshakeError::WrongKey`] for one that does not hash to
/// `fingerprint`.
pub fn answer_key(
    proven: Option<VerifyingKey>,
    fingerprint: &str,
    answer: &HandshakeFrame,
) -> Result<VerifyingKey, HandshakeError> {
    if let Some(k) = proven {
        return Ok(k);
    }
    let k =
        identity::decode_public_key(&answer.public_key).map_err(|e| HandshakeError::Malformed {
            reason: e.to_string(),
        })?;
    if !crate::adp::check::has_fingerprint(&k, fingerprint) {
        return Err(HandshakeError::WrongKey);
    }
    Ok(k)
}

/// An answer that proved the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedAnswer {
    /// The raw signature over the challenge (the transferable evidence).
    pub signature: Vec<u8>,
    /// The agent's own nonce, when its frame carried one rather than an
    /// echo of the challenge's: the verifier may answer it with
    /// [`completion`].
    pub agent_nonce: Option<String>,
}

/// Checks an agent's answer to the challenge with `nonce`, sent by
/// `verifier`, against the key the fingerprint chain proved.
///
/// The answer's `nonce` field may be the agent's own or an echo of
/// `nonce`; the signature must be over `nonce`. An answer signed over its
/// own nonce instead is [`HandshakeError::WrongNonce`].
///
/// # Errors
/// The [`HandshakeError`] that says what is wrong.
pub fn check_answer(
    answer: &HandshakeFrame,
    nonce: &str,
    agent_id: &str,
    verifier: &str,
    agent_key: &VerifyingKey,
) -> Result<CheckedAnswer, HandshakeError> {
    let malformed = |reason: &str| HandshakeError::Malformed {
        reason: reason.into(),
    };
    if answer.kind != FRAME_TYPE {
        return Err(malformed("frame type is not adp_handshake"));
    }
    if answer.nonce.is_empty()
        || answer.nonce.len() > MAX_NONCE_CHARS
        || !answer.nonce.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Err(malformed("nonce is not 1 to 128 hex digits"));
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
    let signature = Signature::from_bytes(&sig);
    if agent_key
        .verify_strict(&signing_input(nonce, agent_id, verifier), &signature)
        .is_err()
    {
        let over_own = answer.nonce != nonce
            && agent_key
                .verify_strict(
                    &signing_input(&answer.nonce, agent_id, verifier),
                    &signature,
                )
                .is_ok();
        return Err(if over_own {
            HandshakeError::WrongNonce
        } else {
            HandshakeError::BadSignature
        });
    }
    Ok(CheckedAnswer {
        signature: sig.to_vec(),
        agent_nonce: (answer.nonce != nonce).then(|| answer.nonce.clone()),
    })
}

/// The verifier's closing frame of a mutual handshake: its own frame,
/// carrying the challenge's nonce `N` and signed with `verifier_key` over
/// the agent's nonce (the same signing input with the roles swapped).
/// The agent checks it with [`check_answer`], roles swapped too.
pub fn completion(
    verifier: &str,
    verifier_key: &SigningKey,
    nonce: &str,
    agent_id: &str,
    agent_nonce: &str,
) -> HandshakeFrame {
    let sig = verifier_key.sign(&signing_input(agent_nonce, verifier, agent_id));
    HandshakeFrame {
        kind: FRAME_TYPE.into(),
        protocol: PROTOCOL.into(),
        agent_id: verifier.into(),
        public_key: identity::encode_public_key(&verifier_key.verifying_key()),
        nonce: nonce.into(),
        signature: Some(identity::encode_bytes(&sig.to_bytes())),
    }
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
        let checked =
            check_answer(&a, &n, "agent:a.test", "node-a", &agent.verifying_key()).unwrap();
        assert_eq!(checked.agent_nonce, None, "an echo of N");
        let sig = checked.signature;
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
        assert_eq!(
            check(&wrong_nonce),
            Err(HandshakeError::WrongNonce),
            "signed over its own nonce instead of N"
        );
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

    #[test]
    fn an_answer_with_the_agents_own_nonce_proves_the_key_and_can_be_completed() {
        let agent = SigningKey::from_bytes(&[3; 32]);
        let verifier = SigningKey::from_bytes(&[4; 32]);
        let n = nonce(&[1; 32], "node-a", 7, &[2; 16]);
        let c = challenge("node-a", &verifier.verifying_key(), &n);
        let own = "ab".repeat(32);
        let a = answer_with_nonce(&c, "agent:a.test", &agent, &own);
        let checked =
            check_answer(&a, &n, "agent:a.test", "node-a", &agent.verifying_key()).unwrap();
        assert_eq!(checked.agent_nonce.as_deref(), Some(own.as_str()));

        // The verifier's closing frame is checked by the agent with the
        // roles swapped: signed over the agent's nonce, by the verifier.
        let done = completion("node-a", &verifier, &n, "agent:a.test", &own);
        let back = check_answer(
            &done,
            &own,
            "node-a",
            "agent:a.test",
            &verifier.verifying_key(),
        )
        .unwrap();
        assert_eq!(back.agent_nonce.as_deref(), Some(n.as_str()));
        assert_eq!(
            check_answer(
                &done,
                &"cd".repeat(32),
                "node-a",
                "agent:a.test",
                &verifier.verifying_key()
            ),
            Err(HandshakeError::BadSignature),
            "a completion is bound to the agent's nonce"
        );
    }

    #[test]
    fn the_nonce_field_is_bounded_hex() {
        let agent = SigningKey::from_bytes(&[3; 32]);
        let n = nonce(&[0; 32], "v", 1, &[0; 16]);
        let c = challenge("v", &agent.verifying_key(), &n);
        for bad in [String::new(), "xyz".into(), "a".repeat(MAX_NONCE_CHARS + 1)] {
            let a = answer_with_nonce(&c, "agent:a.test", &agent, &bad);
            assert!(
                matches!(
                    check_answer(&a, &n, "agent:a.test", "v", &agent.verifying_key()),
                    Err(HandshakeError::Malformed { .. })
                ),
                "nonce {bad:?}"
            );
        }
        let longest = answer_with_nonce(&c, "agent:a.test", &agent, &"a".repeat(MAX_NONCE_CHARS));
        assert!(check_answer(&longest, &n, "agent:a.test", "v", &agent.verifying_key()).is_ok());
    }
}
