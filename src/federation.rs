//! Judging records that arrive from other nodes (gossip, the DHT, search
//! answers) before anything stores or shows them (DESIGN.md section 5).
//!
//! [`Judge::judge`] is pure with respect to the network: it decodes the
//! envelope (size, canonical form, signature), checks the validity window,
//! and re-checks every piece of evidence it can on its own: the challenge
//! proof is recomputed from the document digest and verified against the
//! document's key, whose fingerprint it must match. The DNS part of the
//! chain cannot be re-checked remotely: it is taken as is from attesters
//! listed in `trusted_peers`, and otherwise the result stays "attested by"
//! its signer and the agent is handed back for local re-verification.
//! Tombstones are accepted only from the agent's own key or from the node
//! that attested the descriptor they replace. Every refusal is counted by
//! reason.

pub mod handler;

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

use ed25519_dalek::VerifyingKey;

use crate::adp::{handshake, AgentDocument};
use crate::config::Replication;
use crate::descriptor::DocumentFormat;
use crate::identity::AgentId;
use crate::record::{self, DescriptorRecord, RecordBody, RecordError, SignedRecord};
use crate::store::{Expect, Origin, PutOutcome, Store, StoreError, StoredAgent};

/// Why the judge refused (or could not check) a record from a peer: the
/// codes `GET /peers` counts under `records.refused` and gossipsub's
/// verdicts carry. The strings never change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Refusal {
    /// The envelope is over the record size limit.
    TooLarge,
    /// The envelope is not the CBOR the record format says.
    Malformed,
    /// A well-formed envelope in another encoding than the canonical one.
    NonCanonical,
    /// Bytes follow the envelope.
    TrailingBytes,
    /// A record type this node does not know.
    UnknownType,
    /// The signature does not verify for the signer key.
    BadSignature,
    /// The payload is not the type the envelope says.
    BadPayload,
    /// The document does not hash to the stated digest.
    DigestMismatch,
    /// Older than the record held (counted, not penalised).
    StaleSeq,
    /// Past its `expires_at`.
    Expired,
    /// Issued further in the future than the tolerated clock skew.
    IssuedInFuture,
    /// A DHT value under another agent's key.
    WrongDhtKey,
    /// An AIDIP registration with an id in the reserved `agent:` space.
    ReservedId,
    /// Evidence that does not check (a challenge proof, or flags that do not go together).
    BadEvidence,
    /// An ADP document that does not parse or does not name the record's agent.
    BadDocument,
    /// An ADP descriptor whose key is not the held descriptor's, without a rotation statement signed by the held key (a replayed pre-rotation record among them).
    KeyChangedUnproven,
    /// A tombstone for an agent not held here: its signer cannot be checked (ignored, not counted).
    TombstoneForUnknownAgent,
    /// A tombstone signed by neither the agent key nor the attester of the held descriptor.
    TombstoneNotAuthorised,
    /// The store failed while judging.
    StoreFailed,
}

impl Refusal {
    /// Every refusal, in the order above.
    pub const ALL: [Refusal; 19] = [
        Self::TooLarge,
        Self::Malformed,
        Self::NonCanonical,
        Self::TrailingBytes,
        Self::UnknownType,
        Self::BadSignature,
        Self::BadPayload,
        Self::DigestMismatch,
        Self::StaleSeq,
        Self::Expired,
        Self::IssuedInFuture,
        Self::WrongDhtKey,
        Self::ReservedId,
        Self::BadEvidence,
        Self::BadDocument,
        Self::KeyChangedUnproven,
        Self::TombstoneForUnknownAgent,
        Self::TombstoneNotAuthorised,
        Self::StoreFailed,
    ];

    /// The refusal's wire code (`bad_signature`, `stale_seq`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TooLarge => "too_large",
            Self::Malformed => "malformed",
            Self::NonCanonical => "non_canonical",
            Self::TrailingBytes => "trailing_bytes",
            Self::UnknownType => "unknown_type",
            Self::BadSignature => "bad_signature",
            Self::BadPayload => "bad_payload",
            Self::DigestMismatch => "digest_mismatch",
            Self::StaleSeq => "stale_seq",
            Self::Expired => "expired",
            Self::IssuedInFuture => "issued_in_future",
            Self::WrongDhtKey => "wrong_dht_key",
            Self::ReservedId => "reserved_id",
            Self::BadEvidence => "bad_evidence",
            Self::BadDocument => "bad_document",
            Self::KeyChangedUnproven => "key_changed_unproven",
            Self::TombstoneForUnknownAgent => "tombstone_for_unknown_agent",
            Self::TombstoneNotAuthorised => "tombstone_not_authorised",
            Self::StoreFailed => "store_failed",
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&RecordError> for Refusal {
    fn from(e: &RecordError) -> Self {
        match e {
            RecordError::TooLarge { .. } => Self::TooLarge,
            RecordError::Malformed { .. } => Self::Malformed,
            RecordError::NonCanonical => Self::NonCanonical,
            RecordError::TrailingBytes { .. } => Self::TrailingBytes,
            RecordError::UnknownType { .. } => Self::UnknownType,
            RecordError::BadSignature => Self::BadSignature,
            RecordError::BadPayload { .. } => Self::BadPayload,
            RecordError::DigestMismatch => Self::DigestMismatch,
            RecordError::StaleSeq { .. } => Self::StaleSeq,
            RecordError::Expired { .. } => Self::Expired,
        }
    }
}

/// Tolerated clock skew for `issued_at` in the future, seconds.
pub const MAX_CLOCK_SKEW_SECS: u64 = 300;

/// What happened to a remote record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// Stored (new or newer than what was held).
    Stored {
        /// The agent.
        agent_id: String,
        /// The signer is in `trusted_peers` (or is this node).
        trusted: bool,
        /// An ADP agent to re-verify locally (untrusted attester).
        reverify: Option<String>,
    },
    /// The record this node holds (same seq): nothing to do, not an
    /// offence.
    Duplicate,
    /// Older than what this node holds (a replay or a late copy): not
    /// stored, counted as `stale_seq`, not penalised.
    Stale,
    /// Valid, about an agent this node does not hold, and not kept: the
    /// node caches only what it looked up ([`Replication::Lookups`]).
    NotKept,
    /// Cannot be checked here, through no fault of the sender: a tombstone
    /// for an agent this node does not hold (its signer can only be checked
    /// against the descriptor it replaces). Not stored, not counted as a
    /// refusal.
    Unverifiable(Refusal),
    /// Refused; the reason is counted.
    Refused(Refusal),
}

/// Judges and stores remote records. Cheap to share behind an `Arc`.
///
/// Its methods block (signature checks, the store's blocking face): call
/// them from a blocking context, as the mesh handler and the API's mesh
/// search do (`spawn_blocking`), never on a runtime worker.
pub struct Judge {
    store: Store,
    replication: Replication,
    own_key: VerifyingKey,
    trusted: HashSet<[u8; 32]>,
    refusals: Mutex<BTreeMap<Refusal, u64>>,
    accepted: Mutex<u64>,
}

impl std::fmt::Debug for Judge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Judge")
            .field("trusted", &self.trusted.len())
            .finish()
    }
}

impl Judge {
    /// A judge storing into `store`; records signed by `own_key` or by a
    /// key in `trusted` carry their DNS evidence as is.
    pub fn new(
        store: Store,
        own_key: VerifyingKey,
        trusted: impl IntoIterator<Item = VerifyingKey>,
    ) -> Self {
        Self {
            store,
            replication: Replication::All,
            own_key,
            trusted: trusted.into_iter().map(|k| k.to_bytes()).collect(),
            refusals: Mutex::new(BTreeMap::new()),
            accepted: Mutex::new(0),
        }
    }

    /// Keeps what peers offer unasked according to `replication`.
    #[must_use]
    pub fn with_replication(mut self, replication: Replication) -> Self {
        self.replication = replication;
        self
    }

    /// Refusals so far, by reason code.
    pub fn refusals(&self) -> BTreeMap<&'static str, u64> {
        self.refusals
            .lock()
            .expect("the refusal counters are never poisoned")
            .iter()
            .map(|(r, n)| (r.as_str(), *n))
            .collect()
    }

    /// Records stored so far.
    pub fn accepted(&self) -> u64 {
        *self.accepted.lock().expect("the counter is never poisoned")
    }

    fn refuse(&self, reason: Refusal) -> Judgement {
        *self
            .refusals
            .lock()
            .expect("the refusal counters are never poisoned")
            .entry(reason)
            .or_default() += 1;
        Judgement::Refused(reason)
    }

    /// Decodes, checks and (when it is new and valid) stores `bytes`.
    pub fn judge(&self, bytes: &[u8]) -> Judgement {
        self.judge_under(bytes, None)
    }

    /// As [`Judge::judge`], for a DHT value found or offered under
    /// `dht_key`, which must be its agent's key
    /// ([`crate::mesh::agent_key`]); otherwise `wrong_dht_key`.
    pub fn judge_under(&self, bytes: &[u8], dht_key: Option<&[u8]>) -> Judgement {
        self.judge_keeping(bytes, dht_key, true)
    }

    /// As [`Judge::judge_under`], for a record a peer offered unasked
    /// (gossip, a DHT put): under [`Replication::Lookups`] a valid record
    /// of an agent this node does not hold is [`Judgement::NotKept`].
    pub fn judge_offered(&self, bytes: &[u8], dht_key: Option<&[u8]>) -> Judgement {
        self.judge_keeping(bytes, dht_key, self.replication == Replication::All)
    }

    fn judge_keeping(&self, bytes: &[u8], dht_key: Option<&[u8]>, keep_new: bool) -> Judgement {
        let record = match SignedRecord::decode(bytes) {
            Ok(r) => r,
            Err(e) => return self.refuse(Refusal::from(&e)),
        };
        let body = match record.body() {
            Ok(b) => b,
            Err(e) => return self.refuse(Refusal::from(&e)),
        };
        if dht_key.is_some_and(|k| k != crate::mesh::agent_key(body.agent_id()).as_slice()) {
            return self.refuse(Refusal::WrongDhtKey);
        }
        // What is not newer than the held record needs no evidence check
        // (most search answers in a replicating mesh). The held record is
        // read once and serves every check below.
        let held = match self.store.blocking().get(body.agent_id()) {
            Ok(h) => h,
            Err(_) => return self.refuse(Refusal::StoreFailed),
        };
        if let Some(held) = &held {
            if body.seq() == held.body.seq() {
                return Judgement::Duplicate;
            }
            if body.seq() < held.body.seq() {
                self.refuse(Refusal::StaleSeq);
                return Judgement::Stale;
            }
            if self.keeps_own(held, &record, &body) {
                return Judgement::Duplicate;
            }
        }
        let checked = match &body {
            RecordBody::Descriptor(d) => self
                .check_descriptor(d)
                .and_then(|r| check_key_continuity(held.as_ref(), d).map(|()| r)),
            RecordBody::Tombstone(_) => check_tombstone(held.as_ref(), &record),
        };
        let reverify = match checked {
            Ok(r) => r,
            Err(reason @ Refusal::TombstoneForUnknownAgent) => {
                return Judgement::Unverifiable(reason)
            }
            Err(reason) => return self.refuse(reason),
        };
        if !keep_new && held.is_none() {
            return Judgement::NotKept;
        }
        let trusted = self.is_trusted(record.signer());
        match self
            .store
            .blocking()
            .put(&record, &body, Origin::Remote, Expect::Any)
        {
            Ok(PutOutcome::Created | PutOutcome::Updated) => {
                *self.accepted.lock().expect("the counter is never poisoned") += 1;
                Judgement::Stored {
                    agent_id: body.agent_id().to_owned(),
                    trusted,
                    reverify: if trusted { None } else { reverify },
                }
            }
            // Lost a race with another copy of the same or a newer record.
            Err(StoreError::Record(RecordError::StaleSeq { .. })) => Judgement::Duplicate,
            Err(e) => {
                tracing::error!(error = %e, "storing a remote record failed");
                self.refuse(Refusal::StoreFailed)
            }
        }
    }

    /// Whether this node keeps its own attestation instead of an untrusted
    /// peer's newer one: same document, ours still valid. Otherwise two
    /// nodes that do not trust each other would re-verify and re-sign
    /// each other's records without end (each re-crawl a newer seq).
    fn keeps_own(&self, held: &StoredAgent, record: &SignedRecord, body: &RecordBody) -> bool {
        let (RecordBody::Descriptor(ours), RecordBody::Descriptor(theirs)) = (&held.body, body)
        else {
            return false;
        };
        held.record.signer() == &self.own_key
            && !self.is_trusted(record.signer())
            && ours.doc_sha256 == theirs.doc_sha256
            && ours.expires_at > record::unix_now()
    }

    fn is_trusted(&self, key: &VerifyingKey) -> bool {
        *key == self.own_key || self.trusted.contains(key.as_bytes())
    }

    /// Checks a descriptor's window and evidence; answers the domain to
    /// re-verify for ADP agents.
    fn check_descriptor(&self, d: &DescriptorRecord) -> Result<Option<String>, Refusal> {
        let now = record::unix_now();
        if d.expires_at <= now {
            return Err(Refusal::Expired);
        }
        if d.issued_at > now + MAX_CLOCK_SKEW_SECS {
            return Err(Refusal::IssuedInFuture);
        }
        let e = &d.evidence;
        match d.descriptor.format {
            // AIDIP registrations and the formats with no proof a peer
            // can re-check: attested by the signing node, at unverified,
            // under their own id space (none of the reserved ones for
            // AIDIP and ARD).
            format @ (DocumentFormat::Aidip
            | DocumentFormat::A2a
            | DocumentFormat::Ard
            | DocumentFormat::DnsAid
            | DocumentFormat::Aid
            | DocumentFormat::McpRegistry) => {
                let own_space = match format.id_prefix() {
                    Some(prefix) => d.agent_id.starts_with(prefix),
                    None => crate::descriptor::reserved_prefix(&d.agent_id).is_none(),
                };
                if !own_space {
                    return Err(Refusal::ReservedId);
                }
                if e.dnssec || e.fingerprint || e.challenge.is_some() || e.mutual_peer {
                    return Err(Refusal::BadEvidence);
                }
                Ok(None)
            }
            DocumentFormat::Adp => {
                let doc: AgentDocument =
                    serde_json::from_str(&d.document).map_err(|_| Refusal::BadDocument)?;
                let domain = doc
                    .identity
                    .domain
                    .trim_end_matches('.')
                    .to_ascii_lowercase();
                if AgentId::of_domain(&domain) != d.agent_id || !doc.names_domain(&domain) {
                    return Err(Refusal::BadDocument);
                }
                if (e.mutual_peer && e.challenge.is_none())
                    || (e.challenge.is_some() && !e.fingerprint)
                {
                    return Err(Refusal::BadEvidence);
                }
                if let Some(proof) = &e.challenge {
                    let key = doc.proven_key().ok_or(Refusal::BadEvidence)?;
                    handshake::check_proof(proof, &d.doc_sha256, &d.agent_id, &key)
                        .map_err(|_| Refusal::BadEvidence)?;
                }
                Ok(Some(domain))
            }
        }
    }
}

/// Records a search brought back were looked up: judged like a DHT get
/// (kept when valid, whatever `p2p.replication` says).
impl crate::search::Admit for Judge {
    fn admit(&self, record: &[u8]) -> bool {
        matches!(self.judge(record), Judgement::Stored { .. })
    }
}

/// An ADP descriptor keeps the key of the live descriptor held for its
/// agent, or hands over from it with a rotation statement
/// (`adp::rotation`); anything else is refused, a replayed pre-rotation
/// record included.
fn check_key_continuity(held: Option<&StoredAgent>, d: &DescriptorRecord) -> Result<(), Refusal> {
    if d.descriptor.format != DocumentFormat::Adp {
        return Ok(());
    }
    let Some(RecordBody::Descriptor(held)) = held.map(|h| &h.body) else {
        return Ok(());
    };
    if held.expires_at <= record::unix_now() {
        return Ok(());
    }
    crate::adp::rotation::continuity_of(&held.document, &d.document)
        .map(drop)
        .map_err(|_| Refusal::KeyChangedUnproven)
}

/// A tombstone stands when the agent's own key signed it, or the node
/// that attested the descriptor it replaces (`held`).
fn check_tombstone(
    held: Option<&StoredAgent>,
    record: &SignedRecord,
) -> Result<Option<String>, Refusal> {
    let Some(held) = held else {
        return Err(Refusal::TombstoneForUnknownAgent);
    };
    if held.record.signer() == record.signer() {
        return Ok(None);
    }
    if let RecordBody::Descriptor(d) = &held.body {
        if let Ok(doc) = serde_json::from_str::<AgentDocument>(&d.document) {
            if doc.proven_key().is_some_and(|k| k == *record.signer()) {
                return Ok(None);
            }
        }
    }
    Err(Refusal::TombstoneNotAuthorised)
}

#[cfg(all(test, feature = "testbed"))]
mod tests;
