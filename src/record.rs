//! Signed records: the unit that nodes store, index and gossip.
//!
//! A [`SignedRecord`] is a CBOR envelope `{type, payload, signer,
//! signature}` (wire definition: `proto/records.cddl`). The signature covers
//! `"agentmesh/record/v1\n" || type || "\n" || payload`, the exact payload
//! bytes, so verifying never re-encodes anything. [`SignedRecord::decode`]
//! is the only way in from the outside: it enforces the size limit, refuses
//! trailing bytes and any encoding of the envelope but its canonical one
//! (`non_canonical`), and checks the signature before anything else looks at
//! the payload.
//!
//! Files: `record/error.rs` ([`RecordError`]), `record/cbor.rs` (the CBOR
//! helpers both record and transfer use), `record/transfer.rs`
//! ([`Transfer`], an id handed to another key), `record/liveness.rs`
//! ([`LivenessRecord`], a node's signed probe result, with [`LiveState`]
//! and [`ProbeProtocol`]).

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::descriptor::Descriptor;
use crate::trust::Evidence;

mod cbor;
mod error;
mod liveness;
mod transfer;

use cbor::{from_cbor_exact, to_cbor};
pub use error::RecordError;
pub use liveness::{LiveState, LivenessRecord, ProbeProtocol, MAX_LIVENESS_PAYLOAD_BYTES};
pub use transfer::{Transfer, TransferError, TRANSFER_CONTEXT};

/// Largest encoded record, in bytes (docs/protocol.md#record-limits).
pub const MAX_RECORD_BYTES: usize = 16 * 1024;
/// The domain-separation prefix of every record signature.
pub const SIGNING_CONTEXT: &[u8] = b"agentmesh/record/v1\n";

/// The kinds of record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordType {
    /// An attested agent descriptor.
    Descriptor,
    /// A revocation, suspension or deletion.
    Tombstone,
    /// A second node co-signing a descriptor hash.
    Attestation,
    /// A node's signed result of probing an agent ([`LivenessRecord`]).
    Liveness,
}

impl RecordType {
    /// The wire name, which is also part of the signed bytes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Descriptor => "descriptor",
            Self::Tombstone => "tombstone",
            Self::Attestation => "attestation",
            Self::Liveness => "liveness",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "descriptor" => Some(Self::Descriptor),
            "tombstone" => Some(Self::Tombstone),
            "attestation" => Some(Self::Attestation),
            "liveness" => Some(Self::Liveness),
            _ => None,
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
    #[serde(with = "serde_bytes")]
    payload: Vec<u8>,
    #[serde(with = "serde_bytes")]
    signer: Vec<u8>,
    #[serde(with = "serde_bytes")]
    signature: Vec<u8>,
}

/// A record whose signature has been checked (or that we signed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedRecord {
    kind: RecordType,
    payload: Vec<u8>,
    signer: VerifyingKey,
    signature: Signature,
}

fn signed_bytes(kind: RecordType, payload: &[u8]) -> Vec<u8> {
    let kind = kind.as_str().as_bytes();
    let mut msg = Vec::with_capacity(SIGNING_CONTEXT.len() + kind.len() + 1 + payload.len());
    msg.extend_from_slice(SIGNING_CONTEXT);
    msg.extend_from_slice(kind);
    msg.push(b'\n');
    msg.extend_from_slice(payload);
    msg
}

/// [`RecordError::TooLarge`] for an envelope of `size` bytes over
/// [`MAX_RECORD_BYTES`].
fn within_limit(size: usize) -> Result<(), RecordError> {
    if size > MAX_RECORD_BYTES {
        return Err(RecordError::TooLarge {
            size,
            max: MAX_RECORD_BYTES,
        });
    }
    Ok(())
}

/// An attestation or a liveness result where an agent record
/// (descriptor or tombstone) is read.
fn not_an_agent_record(kind: RecordType) -> RecordError {
    RecordError::BadPayload {
        kind: kind.as_str(),
        reason: format!("a {} is not an agent record", kind.as_str()),
    }
}

impl SignedRecord {
    /// Signs `payload` as a record of `kind`.
    ///
    /// # Errors
    /// [`RecordError::TooLarge`] when the envelope would exceed the limit.
    pub fn sign(kind: RecordType, payload: Vec<u8>, key: &SigningKey) -> Result<Self, RecordError> {
        let signature = key.sign(&signed_bytes(kind, &payload));
        let record = Self {
            kind,
            payload,
            signer: key.verifying_key(),
            signature,
        };
        within_limit(record.encode().len())?;
        Ok(record)
    }

    /// Signs a descriptor payload.
    ///
    /// # Errors
    /// As [`SignedRecord::sign`].
    pub fn sign_descriptor(body: &DescriptorRecord, key: &SigningKey) -> Result<Self, RecordError> {
        Self::sign(RecordType::Descriptor, to_cbor(body), key)
    }

    /// Signs a tombstone payload.
    ///
    /// # Errors
    /// As [`SignedRecord::sign`].
    pub fn sign_tombstone(body: &TombstoneRecord, key: &SigningKey) -> Result<Self, RecordError> {
        Self::sign(RecordType::Tombstone, to_cbor(body), key)
    }

    /// Signs a liveness payload.
    ///
    /// # Errors
    /// As [`SignedRecord::sign`], and [`RecordError::BadPayload`] for a
    /// payload over [`MAX_LIVENESS_PAYLOAD_BYTES`].
    pub fn sign_liveness(body: &LivenessRecord, key: &SigningKey) -> Result<Self, RecordError> {
        let payload = to_cbor(body);
        liveness_within_limit(payload.len())?;
        Self::sign(RecordType::Liveness, payload, key)
    }

    /// The envelope's CBOR bytes.
    pub fn encode(&self) -> Vec<u8> {
        to_cbor(&Envelope {
            kind: self.kind.as_str().to_owned(),
            payload: self.payload.clone(),
            signer: self.signer.as_bytes().to_vec(),
            signature: self.signature.to_bytes().to_vec(),
        })
    }

    /// Decodes an envelope from untrusted bytes and checks its signature.
    ///
    /// # Errors
    /// [`RecordError::TooLarge`], [`RecordError::Malformed`] (also for a
    /// weak signer key), [`RecordError::TrailingBytes`],
    /// [`RecordError::UnknownType`], [`RecordError::NonCanonical`],
    /// [`RecordError::BadSignature`] (strict Ed25519 verification).
    pub fn decode(bytes: &[u8]) -> Result<Self, RecordError> {
        let record = Self::decode_unchecked(bytes)?;
        // One record, one byte string: gossip ids and de-duplication key on
        // the bytes, so equivalent non-canonical encodings are refused.
        if record.encode() != bytes {
            return Err(RecordError::NonCanonical);
        }
        if record.signer.is_weak() {
            return Err(RecordError::Malformed {
                reason: "signer is a small-order (weak) Ed25519 key".into(),
            });
        }
        record
            .signer
            .verify_strict(
                &signed_bytes(record.kind, &record.payload),
                &record.signature,
            )
            .map_err(|_| RecordError::BadSignature)?;
        Ok(record)
    }

    /// Decodes bytes that this node verified before writing them (its own
    /// store), without checking the signature again.
    ///
    /// # Errors
    /// As [`SignedRecord::decode`], less the signature check.
    pub fn decode_trusted(bytes: &[u8]) -> Result<Self, RecordError> {
        Self::decode_unchecked(bytes)
    }

    /// The document of a descriptor record this node verified before
    /// writing it (its own store), read without the rest: no signer key
    /// decompressed, no descriptor decoded, no digest checked (what a
    /// `GET /agents/{id}` answers). `None` for a tombstone.
    ///
    /// # Errors
    /// [`RecordError::TooLarge`], [`RecordError::Malformed`],
    /// [`RecordError::TrailingBytes`], [`RecordError::UnknownType`],
    /// [`RecordError::BadPayload`] (an attestation, or no document).
    pub fn trusted_document(bytes: &[u8]) -> Result<Option<String>, RecordError> {
        /// The envelope less its signer and signature (skipped unread).
        #[derive(Deserialize)]
        struct Head {
            #[serde(rename = "type")]
            kind: String,
            #[serde(with = "serde_bytes")]
            payload: Vec<u8>,
        }
        /// A descriptor payload less everything but its document.
        #[derive(Deserialize)]
        struct DocumentOnly {
            document: String,
        }
        within_limit(bytes.len())?;
        let head: Head = from_cbor_exact(bytes)?;
        match RecordType::parse(&head.kind) {
            Some(RecordType::Descriptor) => from_cbor_exact::<DocumentOnly>(&head.payload)
                .map(|d| Some(d.document))
                .map_err(|e| RecordError::BadPayload {
                    kind: "descriptor",
                    reason: e.to_string(),
                }),
            Some(RecordType::Tombstone) => Ok(None),
            Some(kind @ (RecordType::Attestation | RecordType::Liveness)) => {
                Err(not_an_agent_record(kind))
            }
            None => Err(RecordError::UnknownType { kind: head.kind }),
        }
    }

    fn decode_unchecked(bytes: &[u8]) -> Result<Self, RecordError> {
        within_limit(bytes.len())?;
        let env: Envelope = from_cbor_exact(bytes)?;
        let kind =
            RecordType::parse(&env.kind).ok_or(RecordError::UnknownType { kind: env.kind })?;
        let signer: [u8; 32] =
            env.signer
                .try_into()
                .map_err(|v: Vec<u8>| RecordError::Malformed {
                    reason: format!("signer is {} bytes, expected 32", v.len()),
                })?;
        let signer = VerifyingKey::from_bytes(&signer).map_err(|e| RecordError::Malformed {
            reason: format!("signer is not an Ed25519 key: {e}"),
        })?;
        let signature: [u8; 64] =
            env.signature
                .try_into()
                .map_err(|v: Vec<u8>| RecordError::Malformed {
                    reason: format!("signature is {} bytes, expected 64", v.len()),
                })?;
        Ok(Self {
            kind,
            payload: env.payload,
            signer,
            signature: Signature::from_bytes(&signature),
        })
    }

    /// The record type.
    pub fn kind(&self) -> RecordType {
        self.kind
    }

    /// The signed payload bytes.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// The key that signed the record.
    pub fn signer(&self) -> &VerifyingKey {
        &self.signer
    }

    /// Decodes the payload as a descriptor and checks its document digest.
    ///
    /// # Errors
    /// [`RecordError::BadPayload`] for the wrong type or a malformed body,
    /// [`RecordError::DigestMismatch`].
    pub fn descriptor(&self) -> Result<DescriptorRecord, RecordError> {
        if self.kind != RecordType::Descriptor {
            return Err(RecordError::BadPayload {
                kind: "descriptor",
                reason: format!("record is a {}", self.kind.as_str()),
            });
        }
        let body: DescriptorRecord =
            from_cbor_exact(&self.payload).map_err(|e| RecordError::BadPayload {
                kind: "descriptor",
                reason: e.to_string(),
            })?;
        if body.descriptor.id != body.agent_id {
            return Err(RecordError::BadPayload {
                kind: "descriptor",
                reason: "descriptor id differs from the record's agent id".into(),
            });
        }
        if Sha256::digest(body.document.as_bytes()).as_slice() != body.doc_sha256.as_slice() {
            return Err(RecordError::DigestMismatch);
        }
        Ok(body)
    }

    /// Decodes the payload as a tombstone.
    ///
    /// # Errors
    /// [`RecordError::BadPayload`].
    pub fn tombstone(&self) -> Result<TombstoneRecord, RecordError> {
        if self.kind != RecordType::Tombstone {
            return Err(RecordError::BadPayload {
                kind: "tombstone",
                reason: format!("record is a {}", self.kind.as_str()),
            });
        }
        from_cbor_exact(&self.payload).map_err(|e| RecordError::BadPayload {
            kind: "tombstone",
            reason: e.to_string(),
        })
    }

    /// Decodes the payload as a liveness result.
    ///
    /// # Errors
    /// [`RecordError::BadPayload`] for the wrong type, a payload over
    /// [`MAX_LIVENESS_PAYLOAD_BYTES`], or a malformed body (unknown
    /// fields, states and protocols included).
    pub fn liveness(&self) -> Result<LivenessRecord, RecordError> {
        if self.kind != RecordType::Liveness {
            return Err(RecordError::BadPayload {
                kind: "liveness",
                reason: format!("record is a {}", self.kind.as_str()),
            });
        }
        liveness_within_limit(self.payload.len())?;
        from_cbor_exact(&self.payload).map_err(|e| RecordError::BadPayload {
            kind: "liveness",
            reason: e.to_string(),
        })
    }

    /// Decodes the payload by type.
    ///
    /// # Errors
    /// As [`SignedRecord::descriptor`] / [`SignedRecord::tombstone`];
    /// attestations and liveness results are not agent records
    /// ([`SignedRecord::liveness`] reads the latter).
    pub fn body(&self) -> Result<RecordBody, RecordError> {
        match self.kind {
            RecordType::Descriptor => self
                .descriptor()
                .map(|d| RecordBody::Descriptor(Box::new(d))),
            RecordType::Tombstone => self.tombstone().map(RecordBody::Tombstone),
            kind @ (RecordType::Attestation | RecordType::Liveness) => {
                Err(not_an_agent_record(kind))
            }
        }
    }
}

/// A decoded agent record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordBody {
    /// The agent as attested.
    Descriptor(Box<DescriptorRecord>),
    /// The agent is gone.
    Tombstone(TombstoneRecord),
}

impl RecordBody {
    /// The agent the record is about.
    pub fn agent_id(&self) -> &str {
        match self {
            Self::Descriptor(d) => &d.agent_id,
            Self::Tombstone(t) => &t.agent_id,
        }
    }

    /// The record's sequence number.
    pub fn seq(&self) -> u64 {
        match self {
            Self::Descriptor(d) => d.seq,
            Self::Tombstone(t) => t.seq,
        }
    }
}

/// The payload of a `descriptor` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DescriptorRecord {
    /// The agent id.
    pub agent_id: String,
    /// Strictly increasing per agent.
    pub seq: u64,
    /// Unix seconds when signed.
    pub issued_at: u64,
    /// Unix seconds after which the record is refused.
    pub expires_at: u64,
    /// The normalised descriptor.
    pub descriptor: Descriptor,
    /// The original document, as received (UTF-8 JSON).
    pub document: String,
    /// SHA-256 of `document`'s bytes.
    #[serde(with = "serde_bytes")]
    pub doc_sha256: Vec<u8>,
    /// What was verified about the agent.
    pub evidence: Evidence,
    /// The previous owner's consent to this record's signer taking the
    /// id over (absent on almost every record; never on an ADP one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer: Option<Transfer>,
}

impl DescriptorRecord {
    /// Builds a descriptor payload, hashing the document.
    pub fn new(
        descriptor: Descriptor,
        document: String,
        seq: u64,
        issued_at: u64,
        ttl_secs: u64,
        evidence: Evidence,
    ) -> Self {
        Self {
            agent_id: descriptor.id.clone(),
            seq,
            issued_at,
            expires_at: issued_at.saturating_add(ttl_secs),
            doc_sha256: Sha256::digest(document.as_bytes()).to_vec(),
            descriptor,
            document,
            evidence,
            transfer: None,
        }
    }
}

/// Why an agent was removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TombstoneReason {
    /// Deleted by its registrant.
    Deleted,
    /// Revoked: its key or document must not be trusted.
    Revoked,
    /// Suspended for now.
    Suspended,
}

/// The payload of a `tombstone` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TombstoneRecord {
    /// The agent id.
    pub agent_id: String,
    /// Above the seq of every descriptor it replaces.
    pub seq: u64,
    /// Unix seconds when signed.
    pub issued_at: u64,
    /// Why.
    pub reason: TombstoneReason,
}

/// [`RecordError::BadPayload`] for a liveness payload of `size` bytes
/// over [`MAX_LIVENESS_PAYLOAD_BYTES`].
fn liveness_within_limit(size: usize) -> Result<(), RecordError> {
    if size > MAX_LIVENESS_PAYLOAD_BYTES {
        return Err(RecordError::BadPayload {
            kind: "liveness",
            reason: format!("{size} bytes, over the {MAX_LIVENESS_PAYLOAD_BYTES}-byte limit"),
        });
    }
    Ok(())
}

/// Current Unix time in seconds.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The next seq for an agent: above `held`, and at least the current Unix
/// time in milliseconds, so seqs keep increasing even if a store is lost.
/// Saturates at `u64::MAX` (which the store then refuses as stale: an agent
/// whose seq reached it can only be replaced under a new id).
pub fn next_seq(held: Option<u64>) -> u64 {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    held.map_or(now_ms, |h| now_ms.max(h.saturating_add(1)))
}

#[cfg(test)]
mod props;
#[cfg(test)]
pub(crate) mod tests;
