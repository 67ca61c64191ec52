//! [`Transfer`]: an id's owner handing it to another key, and the token
//! that carries it from the owner to the new registry.

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use super::cbor::{from_cbor_exact, to_cbor};

/// The domain-separation prefix of a transfer's signature.
pub const TRANSFER_CONTEXT: &[u8] = b"agentmesh/transfer/v1\n";

/// An id's owner handing it to another key: an organisation moving its
/// registrations to another registry. Ids other than ADP ones belong to
/// the key that signed the record a node holds for them; a record from
/// `to` carrying this, signed by that owner (`from`), takes the id over.
///
/// `up_to_seq` bounds it: it covers the id while the owner's held record
/// is at or below that seq, so the owner's own later record ends it and
/// it cannot be replayed to take back an id that came back to the owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transfer {
    /// The id handed over.
    pub agent_id: String,
    /// The owner's key (32 bytes, Ed25519).
    #[serde(with = "serde_bytes")]
    pub from: Vec<u8>,
    /// The new owner's key (32 bytes, Ed25519): the signer of the records
    /// that carry this.
    #[serde(with = "serde_bytes")]
    pub to: Vec<u8>,
    /// The highest seq of the owner's records this covers.
    pub up_to_seq: u64,
    /// `from`'s Ed25519 signature over [`Transfer::signed_bytes`].
    #[serde(with = "serde_bytes")]
    pub signature: Vec<u8>,
}

/// Why a transfer does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    /// A key or the signature is not the length Ed25519's are, the key is
    /// not a curve point, or the signature does not verify.
    #[error("the transfer's keys or signature do not verify")]
    BadSignature,
    /// The token is not a base64url CBOR transfer.
    #[error("the transfer token does not decode: {0}")]
    Malformed(String),
    /// It hands another id, or to another key, than the record's.
    #[error("the transfer is for {what}")]
    Mismatch {
        /// What differs (`another agent id`, `another key`).
        what: &'static str,
    },
}

impl Transfer {
    /// What `from` signs: the context, then the id's length (4 bytes, big
    /// endian) and bytes, the new key, and `up_to_seq` (8 bytes, big
    /// endian).
    pub fn signed_bytes(agent_id: &str, to: &VerifyingKey, up_to_seq: u64) -> Vec<u8> {
        let id = agent_id.as_bytes();
        let mut msg = Vec::with_capacity(TRANSFER_CONTEXT.len() + 4 + id.len() + 32 + 8);
        msg.extend_from_slice(TRANSFER_CONTEXT);
        msg.extend_from_slice(&(id.len() as u32).to_be_bytes());
        msg.extend_from_slice(id);
        msg.extend_from_slice(to.as_bytes());
        msg.extend_from_slice(&up_to_seq.to_be_bytes());
        msg
    }

    /// `owner` hands `agent_id` to `to`, covering its records up to
    /// `up_to_seq`.
    pub fn sign(agent_id: &str, to: &VerifyingKey, up_to_seq: u64, owner: &SigningKey) -> Self {
        let signature = owner.sign(&Self::signed_bytes(agent_id, to, up_to_seq));
        Self {
            agent_id: agent_id.to_owned(),
            from: owner.verifying_key().to_bytes().to_vec(),
            to: to.to_bytes().to_vec(),
            up_to_seq,
            signature: signature.to_bytes().to_vec(),
        }
    }

    /// Checks the signature (strict Ed25519) and answers the previous
    /// owner's key.
    ///
    /// # Errors
    /// [`TransferError::BadSignature`].
    pub fn verify(&self) -> Result<VerifyingKey, TransferError> {
        let key = |b: &[u8]| {
            <[u8; 32]>::try_from(b)
                .ok()
                .and_then(|b| VerifyingKey::from_bytes(&b).ok())
                .filter(|k| !k.is_weak())
                .ok_or(TransferError::BadSignature)
        };
        let (from, to) = (key(&self.from)?, key(&self.to)?);
        let signature = <[u8; 64]>::try_from(self.signature.as_slice())
            .map(|b| Signature::from_bytes(&b))
            .map_err(|_| TransferError::BadSignature)?;
        from.verify_strict(
            &Self::signed_bytes(&self.agent_id, &to, self.up_to_seq),
            &signature,
        )
        .map_err(|_| TransferError::BadSignature)?;
        Ok(from)
    }

    /// Checks the signature, and that this hands `agent_id` to `signer`;
    /// answers the previous owner's key.
    ///
    /// # Errors
    /// [`TransferError::BadSignature`], [`TransferError::Mismatch`].
    pub fn verify_for(
        &self,
        agent_id: &str,
        signer: &VerifyingKey,
    ) -> Result<VerifyingKey, TransferError> {
        if self.agent_id != agent_id {
            return Err(TransferError::Mismatch {
                what: "another agent id",
            });
        }
        if self.to.as_slice() != signer.as_bytes() {
            return Err(TransferError::Mismatch {
                what: "another key",
            });
        }
        self.verify()
    }

    /// Whether this hands over the id as `held` holds it: signed by the
    /// held record's signer, and the held seq within its bound. The
    /// signature is checked by [`Transfer::verify_for`].
    pub fn covers(&self, held_signer: &VerifyingKey, held_seq: u64) -> bool {
        self.from.as_slice() == held_signer.as_bytes() && held_seq <= self.up_to_seq
    }

    /// The token an owner gives the new registry: the CBOR, base64url
    /// without padding.
    pub fn to_token(&self) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(to_cbor(self))
    }

    /// Reads a token made by [`Transfer::to_token`] (at most 1 KiB).
    ///
    /// # Errors
    /// [`TransferError::Malformed`].
    pub fn from_token(token: &str) -> Result<Self, TransferError> {
        use base64::Engine as _;
        if token.len() > 1024 {
            return Err(TransferError::Malformed("longer than 1024 bytes".into()));
        }
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token.trim())
            .map_err(|e| TransferError::Malformed(e.to_string()))?;
        from_cbor_exact(&bytes).map_err(|e| TransferError::Malformed(e.to_string()))
    }
}
