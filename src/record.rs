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

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::descriptor::Descriptor;
use crate::verify::Evidence;

/// Largest encoded record, in bytes (DESIGN.md 5).
pub const MAX_RECORD_BYTES: usize = 16 * 1024;
/// The domain-separation prefix of every record signature.
pub const SIGNING_CONTEXT: &[u8] = b"agentmesh/record/v1\n";

/// Errors from encoding, decoding and checking records.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// Encoded size over [`MAX_RECORD_BYTES`].
    #[error("record is {size} bytes, over the {max}-byte limit")]
    TooLarge {
        /// The encoded size in bytes.
        size: usize,
        /// The limit, [`MAX_RECORD_BYTES`].
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
        /// The payload type expected (`descriptor` or `tombstone`).
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

/// The kinds of record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordType {
    /// An attested agent descriptor.
    Descriptor,
    /// A revocation, suspension or deletion.
    Tombstone,
    /// A second node co-signing a descriptor hash.
    Attestation,
}

impl RecordType {
    /// The wire name, which is also part of the signed bytes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Descriptor => "descriptor",
            Self::Tombstone => "tombstone",
            Self::Attestation => "attestation",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "descriptor" => Some(Self::Descriptor),
            "tombstone" => Some(Self::Tombstone),
            "attestation" => Some(Self::Attestation),
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

fn to_cbor<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(value, &mut out).expect("CBOR encoding into a Vec cannot fail");
    out
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

/// An attestation where an agent record (descriptor or tombstone) is read.
fn not_an_agent_record() -> RecordError {
    RecordError::BadPayload {
        kind: "attestation",
        reason: "attestations are not agent records".into(),
    }
}

fn from_cbor_exact<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, RecordError> {
    let mut rest = bytes;
    let value = ciborium::from_reader(&mut rest).map_err(|e| RecordError::Malformed {
        reason: e.to_string(),
    })?;
    if !rest.is_empty() {
        return Err(RecordError::TrailingBytes { extra: rest.len() });
    }
    Ok(value)
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
            Some(RecordType::Attestation) => Err(not_an_agent_record()),
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

    /// Decodes the payload by type.
    ///
    /// # Errors
    /// As [`SignedRecord::descriptor`] / [`SignedRecord::tombstone`];
    /// attestations are not stored as agent records yet.
    pub fn body(&self) -> Result<RecordBody, RecordError> {
        match self.kind {
            RecordType::Descriptor => self
                .descriptor()
                .map(|d| RecordBody::Descriptor(Box::new(d))),
            RecordType::Tombstone => self.tombstone().map(RecordBody::Tombstone),
            RecordType::Attestation => Err(not_an_agent_record()),
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
