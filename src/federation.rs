//! Judging records that arrive from other nodes (gossip, the DHT, search
//! answers, `POST /records`) before anything stores or shows them
//! (docs/protocol.md#records, #trust-across-nodes and #ownership).
//!
//! [`Judge::judge`] is pure with respect to the network: it decodes the
//! envelope (size, canonical form, signature), checks the window (issued
//! no later than the tolerated skew, a seq no further ahead of this node's
//! clock than that skew, a lifetime no longer than
//! `p2p.max_record_lifetime`), and re-checks every piece of evidence it
//! can on its own: the challenge proof is recomputed from the document
//! digest and verified against the document's key, whose fingerprint it
//! must match.
//!
//! **Trust shown is trust proven.** A challenge proof only shows that
//! someone holds the document's key; what ties a domain to that key is
//! DNS, which cannot be re-checked remotely. So a record's evidence counts
//! only when its signer is this node or in `trusted_peers`; any other
//! signer's record is stored as *claimed* (`store::Origin::Claimed`:
//! shown with who claims it, counted as `unverified`) and its agent's
//! domain handed back for local re-verification, whose result replaces
//! the claim: an ADP agent's always, an A2A or DNS-AID agent's when it
//! claims the flags DNS gives those formats (`dnssec`, and an A2A card's
//! AID-anchored `fingerprint`; never `challenge` or `mutual_peer`, and no
//! flag at all for the other formats). A claim never replaces a record
//! this node counts ([`Judgement::Outranked`]), and key continuity is
//! judged only against counted records, so a forged claim cannot squat an
//! agent.
//!
//! **Ids belong to their owners.** An ADP id `agent:{domain}` belongs to
//! the key its domain's DNS names: what this node counts is what it (or a
//! trusted peer) checked against DNS, and a later record must keep that
//! key or hand over from it with a rotation statement. Any other id (AIDIP,
//! A2A, ARD, DNS-AID, AID, MCP) belongs to the key that signed the record
//! this node holds for it: the registry that first registered it, as far
//! as this node saw. A record for it signed by another key is refused
//! (`not_owner`; `local_registration` when the agent was registered
//! through this node's API), whoever signs it and whatever its seq,
//! unless it carries a [`record::Transfer`] the held record's signer
//! signed: the owner handing the id to the record's signer (a registry
//! moving its agents to another), bounded by the owner's seq so that it
//! cannot be replayed once the owner wrote again (`bad_transfer`).
//! Tombstones are accepted only from the agent's own key or from the
//! signer of the record they replace. A `Revoked` tombstone signed by the
//! agent's own key is final for that key: it replaces the descriptor
//! whatever the seqs, the key goes to the store's revoked list, and every
//! later descriptor carrying it is refused (`key_revoked`).
//!
//! **Liveness results** (`liveness` records, docs/protocol.md#probe) are
//! another node's signed word that its probe found an agent alive (or
//! not): kept only about an agent this node holds live at the probed seq
//! or later and shows (never a private or unlisted one), checked no
//! longer ago than [`MAX_LIVENESS_AGE_SECS`] and not in the future beyond
//! the skew; one per signer per agent, at most
//! [`store::MAX_CHECKS_PER_AGENT`](crate::store::MAX_CHECKS_PER_AGENT).
//! They are shown with their signer; only a trusted peer's counts for
//! `alive_within`.
//!
//! Every refusal is counted by reason.
//!
//! Files: `federation/refusal.rs` ([`Refusal`], the reasons),
//! `federation/judgement.rs` ([`Judgement`], what became of a record),
//! `federation/handler.rs` (the node's [`crate::mesh::MeshHandler`]),
//! `federation/reverify.rs` (the rate-limited re-verification claims ask
//! for).

mod checks;
pub mod handler;
mod judgement;
mod refusal;
pub mod reverify;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use ed25519_dalek::VerifyingKey;

use crate::adp::{handshake, AgentDocument};
use crate::config::Replication;
use crate::descriptor::DocumentFormat;
use crate::identity::AgentId;
use crate::record::{self, DescriptorRecord, RecordBody, RecordError, SignedRecord};
use crate::store::{
    CheckPut, Expect, Origin, PeerCheck, PutOutcome, Store, StoreError, StoredAgent,
};
use crate::witness::Witness;
use checks::{
    audit_revocation, check_liveness_window, check_tombstone, check_transfer, dns_claim,
    revokes_held,
};

pub use judgement::Judgement;
pub use refusal::Refusal;

/// Tolerated clock skew, seconds: how far in the future `issued_at` may
/// be, and how far a seq (milliseconds by convention,
/// [`record::next_seq`]) may run ahead of this node's clock.
pub const MAX_CLOCK_SKEW_SECS: u64 = 300;

/// The oldest liveness result accepted, seconds since its `checked_at`:
/// a day.
pub const MAX_LIVENESS_AGE_SECS: u64 = 24 * 3600;

/// What the judge saw of liveness records (`GET /peers`,
/// `records.liveness`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct LivenessCounts {
    /// Liveness records that reached the judge, whatever became of them.
    pub received: u64,
    /// Of those, kept.
    pub stored: u64,
    /// Of those, about an agent this node does not show
    /// (`liveness_unknown_agent`).
    pub unknown_agent: u64,
}

/// The longest record lifetime accepted by default
/// (`p2p.max_record_lifetime`): 30 days.
pub const DEFAULT_MAX_LIFETIME: std::time::Duration = crate::config::DEFAULT_MAX_RECORD_LIFETIME;

/// The highest seq acceptable now: this node's clock in milliseconds
/// plus the tolerated skew.
pub fn max_seq_now() -> u64 {
    record::next_seq(None).saturating_add(MAX_CLOCK_SKEW_SECS * 1000)
}

/// How many live records this node holds from signers it does not trust.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimQuotas {
    /// From any one such signer.
    pub per_signer: u64,
    /// From all of them together.
    pub total: u64,
}

impl Default for ClaimQuotas {
    fn default() -> Self {
        Self {
            per_signer: crate::config::DEFAULT_MAX_CLAIMS_PER_SIGNER,
            total: crate::config::DEFAULT_MAX_CLAIMS,
        }
    }
}

/// Judges and stores remote records. Cheap to share behind an `Arc`.
///
/// Its methods block (signature checks, the store's blocking face): call
/// them from a blocking context, as the mesh handler and the API's mesh
/// search do (`spawn_blocking`), never on a runtime worker.
pub struct Judge {
    store: Store,
    replication: Replication,
    max_lifetime_secs: u64,
    quotas: ClaimQuotas,
    own_key: VerifyingKey,
    trusted: HashSet<[u8; 32]>,
    refusals: Mutex<BTreeMap<Refusal, u64>>,
    accepted: Mutex<u64>,
    liveness: Mutex<LivenessCounts>,
    /// Refuses what keys caught equivocating sign (`p2p.on_equivocation
    /// = "distrust"`).
    witness: Option<Arc<Witness>>,
    /// What a record's DNSSEC chain is checked from first (the root's
    /// keys); a chain that holds only from its own top key still stands.
    dnssec_anchors: crate::dnssec::TrustAnchorSet,
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
            max_lifetime_secs: DEFAULT_MAX_LIFETIME.as_secs(),
            quotas: ClaimQuotas::default(),
            own_key,
            trusted: trusted.into_iter().map(|k| k.to_bytes()).collect(),
            refusals: Mutex::new(BTreeMap::new()),
            accepted: Mutex::new(0),
            liveness: Mutex::new(LivenessCounts::default()),
            witness: None,
            dnssec_anchors: crate::dnssec::TrustAnchorSet::builtin_root(),
        }
    }

    /// Refuses every record signed by a key `witness` caught showing two
    /// histories of its log, and no longer counts such a key as trusted.
    #[must_use]
    pub fn distrusting(mut self, witness: Arc<Witness>) -> Self {
        self.witness = Some(witness);
        self
    }

    /// Whether `key` was caught equivocating and this node distrusts it.
    fn distrusted(&self, key: &VerifyingKey) -> bool {
        self.witness
            .as_ref()
            .is_some_and(|w| w.equivocated_key(key))
    }

    /// Keeps what peers offer unasked according to `replication`.
    #[must_use]
    pub fn with_replication(mut self, replication: Replication) -> Self {
        self.replication = replication;
        self
    }

    /// Refuses records whose lifetime is longer than `max`
    /// (`p2p.max_record_lifetime`).
    #[must_use]
    pub fn with_max_lifetime(mut self, max: std::time::Duration) -> Self {
        self.max_lifetime_secs = max.as_secs();
        self
    }

    /// Holds at most `quotas` live records from signers this node does
    /// not trust (`p2p.max_claims_per_signer`, `p2p.max_claims`).
    #[must_use]
    pub fn with_claim_quotas(mut self, quotas: ClaimQuotas) -> Self {
        self.quotas = quotas;
        self
    }

    /// The keys whose evidence this node counts: its own and its trusted
    /// peers' (what [`Store::reassess`] classifies against).
    pub fn vouched(&self) -> std::collections::BTreeSet<[u8; 32]> {
        let mut out: std::collections::BTreeSet<[u8; 32]> = self.trusted.iter().copied().collect();
        out.insert(self.own_key.to_bytes());
        out
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

    /// What was seen of liveness records so far.
    pub fn liveness_counts(&self) -> LivenessCounts {
        *self
            .liveness
            .lock()
            .expect("the counters are never poisoned")
    }

    fn count_liveness(&self, f: impl FnOnce(&mut LivenessCounts)) {
        f(&mut self
            .liveness
            .lock()
            .expect("the counters are never poisoned"));
    }

    fn refuse(&self, reason: Refusal) -> Judgement {
        // Aggregated per code (`store/audit.rs`): a hostile peer cannot
        // flood the log.
        if let Err(e) = self.store.blocking().audit_refusal(reason.as_str()) {
            tracing::error!(error = %e, "the audit log failed");
        }
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
        if self.distrusted(record.signer()) {
            return self.refuse(Refusal::Equivocated);
        }
        if record.kind() == record::RecordType::Liveness {
            self.count_liveness(|c| c.received += 1);
            return self.judge_liveness(&record, dht_key);
        }
        let body = match record.body() {
            Ok(b) => b,
            Err(e) => return self.refuse(Refusal::from(&e)),
        };
        if dht_key.is_some_and(|k| k != crate::mesh::agent_key(body.agent_id()).as_slice()) {
            return self.refuse(Refusal::WrongDhtKey);
        }
        if let Err(reason) = self.check_window(&body) {
            return self.refuse(reason);
        }
        // The held record is read once and serves every check below.
        let held = match self.store.blocking().get(body.agent_id()) {
            Ok(h) => h,
            Err(_) => return self.refuse(Refusal::StoreFailed),
        };
        let revocation = revokes_held(held.as_ref(), &record, &body);
        if let Some(held) = &held {
            // What is not newer than the held record needs no evidence
            // check (most search answers in a replicating mesh), but for
            // a revocation by the agent's own key.
            let newer = body.seq() > held.body.seq()
                || (revocation.is_some() && matches!(held.body, RecordBody::Descriptor(_)));
            if !newer {
                if body.seq() == held.body.seq() {
                    return Judgement::Duplicate;
                }
                self.refuse(Refusal::StaleSeq);
                return Judgement::Stale;
            }
        }
        let vouched = self.is_trusted(record.signer());
        let checked = match &body {
            RecordBody::Descriptor(d) => check_transfer(&record, d)
                .and_then(|()| self.check_descriptor(d))
                .and_then(|reverify| self.check_chain(d).map(|()| reverify))
                .and_then(|reverify| {
                    self.check_descriptor_against(held.as_ref(), &record, d, vouched)
                        .map(|kept| (reverify, kept))
                }),
            RecordBody::Tombstone(_) => check_tombstone(held.as_ref(), &record).map(|r| (r, None)),
        };
        let reverify = match checked {
            Ok((_, Some(outranked))) => return outranked,
            Ok((r, None)) => r,
            Err(reason @ Refusal::TombstoneForUnknownAgent) => {
                return Judgement::Unverifiable(reason)
            }
            Err(reason) => return self.refuse(reason),
        };
        if !keep_new && held.is_none() {
            return Judgement::NotKept;
        }
        self.keep(
            &record,
            &body,
            held.as_ref(),
            (revocation.as_deref(), vouched, reverify),
        )
    }

    /// Stores a record that passed every check: the key revocation it
    /// carries first, the signer's claim quota when it is not vouched
    /// for, then the record as counted or claimed.
    fn keep(
        &self,
        record: &SignedRecord,
        body: &RecordBody,
        held: Option<&StoredAgent>,
        (revocation, vouched, reverify): (Option<&str>, bool, Option<String>),
    ) -> Judgement {
        if let Some(fingerprint) = revocation {
            if self
                .store
                .blocking()
                .revoke_key(fingerprint, body.agent_id())
                .is_err()
            {
                return self.refuse(Refusal::StoreFailed);
            }
            tracing::info!(agent = %body.agent_id(), key = %fingerprint, "agent key revoked by its holder");
        }
        if !vouched {
            if let Err(reason) = self.check_quota(held, record, body) {
                return self.refuse(reason);
            }
        }
        let origin = if vouched {
            Origin::Remote
        } else {
            Origin::Claimed
        };
        let expect = if revocation.is_some() {
            Expect::Revocation
        } else {
            Expect::Any
        };
        match self.store.blocking().put(record, body, origin, expect) {
            Ok(PutOutcome::Created | PutOutcome::Updated) => {
                *self.accepted.lock().expect("the counter is never poisoned") += 1;
                if matches!(body, RecordBody::Tombstone(_)) {
                    audit_revocation(&self.store, record, body.agent_id());
                }
                Judgement::Stored {
                    agent_id: body.agent_id().to_owned(),
                    trusted: vouched,
                    reverify: if vouched { None } else { reverify },
                    signer: record.signer().to_bytes(),
                }
            }
            // Lost a race with another copy of the same or a newer record.
            Err(StoreError::Record(RecordError::StaleSeq { .. })) => Judgement::Duplicate,
            Err(e) if e.is_out_of_space() => {
                tracing::warn!(error = %e, "no room for a remote record");
                self.refuse(Refusal::NoRoom)
            }
            Err(e) => {
                tracing::error!(error = %e, "storing a remote record failed");
                self.refuse(Refusal::StoreFailed)
            }
        }
    }

    /// A liveness record (its signature checked): kept as the signer's
    /// check of an agent this node holds and shows, or why not.
    fn judge_liveness(&self, record: &SignedRecord, dht_key: Option<&[u8]>) -> Judgement {
        let body = match record.liveness() {
            Ok(b) => b,
            Err(e) => return self.refuse(Refusal::from(&e)),
        };
        // The DHT holds agent records under agent keys, nothing else.
        if dht_key.is_some() {
            return self.refuse(Refusal::WrongDhtKey);
        }
        if let Err(reason) = check_liveness_window(&body, record::unix_now()) {
            return self.refuse(reason);
        }
        // This node's own results are in the agent's freshness already.
        if *record.signer() == self.own_key {
            return Judgement::Duplicate;
        }
        let store = self.store.blocking();
        let held = match store.get(&body.agent_id) {
            Ok(h) => h,
            Err(_) => return self.refuse(Refusal::StoreFailed),
        };
        let shown = held.is_some_and(|h| {
            matches!(h.body, RecordBody::Descriptor(_)) && h.body.seq() >= body.seq
        }) && !store.is_hidden(&body.agent_id);
        if !shown {
            self.count_liveness(|c| c.unknown_agent += 1);
            return Judgement::Unverifiable(Refusal::LivenessUnknownAgent);
        }
        let trusted = self.trusted.contains(record.signer().as_bytes());
        let check = PeerCheck {
            seq: body.seq,
            state: body.state,
            checked_at: body.checked_at,
            rtt_ms: body.rtt_ms,
            protocol: body.protocol,
            trusted,
        };
        match store.put_peer_check(&body.agent_id, record.signer().as_bytes(), check) {
            Ok(CheckPut::Stored) => {
                self.count_liveness(|c| c.stored += 1);
                Judgement::Stored {
                    agent_id: body.agent_id,
                    trusted,
                    reverify: None,
                    signer: record.signer().to_bytes(),
                }
            }
            Ok(CheckPut::Same) => Judgement::Duplicate,
            Ok(CheckPut::Older) => {
                self.refuse(Refusal::StaleSeq);
                Judgement::Stale
            }
            Ok(CheckPut::Full) => self.refuse(Refusal::LivenessFull),
            Ok(CheckPut::UnknownAgent) => {
                self.count_liveness(|c| c.unknown_agent += 1);
                Judgement::Unverifiable(Refusal::LivenessUnknownAgent)
            }
            Err(e) => {
                tracing::error!(error = %e, "storing a liveness result failed");
                self.refuse(Refusal::StoreFailed)
            }
        }
    }

    /// A descriptor from an untrusted signer that adds a claim (not one
    /// that replaces the signer's own) must fit its signer's quota and
    /// the node's.
    fn check_quota(
        &self,
        held: Option<&StoredAgent>,
        record: &SignedRecord,
        body: &RecordBody,
    ) -> Result<(), Refusal> {
        if !matches!(body, RecordBody::Descriptor(_)) {
            return Ok(());
        }
        let replaces_own = held.is_some_and(|h| {
            h.claimed
                && h.record.signer() == record.signer()
                && matches!(h.body, RecordBody::Descriptor(_))
        });
        if replaces_own {
            return Ok(());
        }
        let (by_signer, total) = self.store.blocking().claims(record.signer().as_bytes());
        if by_signer >= self.quotas.per_signer {
            return Err(Refusal::SignerQuota);
        }
        if total >= self.quotas.total {
            return Err(Refusal::ClaimsFull);
        }
        Ok(())
    }

    fn is_trusted(&self, key: &VerifyingKey) -> bool {
        *key == self.own_key || (self.trusted.contains(key.as_bytes()) && !self.distrusted(key))
    }

    /// The window every record must sit in, whatever it is: issued no
    /// later than the skew allows, a seq no further ahead of this node's
    /// clock, and (descriptors) not expired, with a lifetime under the cap.
    fn check_window(&self, body: &RecordBody) -> Result<(), Refusal> {
        let now = record::unix_now();
        let issued_at = match body {
            RecordBody::Descriptor(d) => d.issued_at,
            RecordBody::Tombstone(t) => t.issued_at,
        };
        if issued_at > now + MAX_CLOCK_SKEW_SECS {
            return Err(Refusal::IssuedInFuture);
        }
        if body.seq() > max_seq_now() {
            return Err(Refusal::SeqAhead);
        }
        if let RecordBody::Descriptor(d) = body {
            if d.expires_at <= now {
                return Err(Refusal::Expired);
            }
            if d.expires_at.saturating_sub(d.issued_at) > self.max_lifetime_secs {
                return Err(Refusal::LifetimeTooLong);
            }
        }
        Ok(())
    }

    /// Checks a descriptor's evidence on its own; answers the domain to
    /// re-verify for an ADP agent, and for an A2A or DNS-AID agent that
    /// claims a flag.
    fn check_descriptor(&self, d: &DescriptorRecord) -> Result<Option<String>, Refusal> {
        let e = &d.evidence;
        match d.descriptor.format {
            // AIDIP registrations and the formats besides ADP: attested by
            // the signing node under their own id space (none of the
            // reserved ones for AIDIP and ARD), with at most the flags DNS
            // gives their format ([`dns_claim`]).
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
                dns_claim(format, &d.agent_id, e)
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
                match self
                    .store
                    .blocking()
                    .revocation(&doc.identity.public_key.fingerprint.to_ascii_lowercase())
                {
                    Ok(None) => {}
                    Ok(Some(_)) => return Err(Refusal::KeyRevoked),
                    Err(_) => return Err(Refusal::StoreFailed),
                }
                Ok(Some(domain))
            }
        }
    }

    /// A descriptor's DNSSEC chain, when it carries one, holds together
    /// and proves what its flags claim (`answer::chain_stands`), so a
    /// stored record never makes a signed answer about its agent fail.
    /// Checked after every cheaper check: at most 64 signature checks.
    fn check_chain(&self, d: &DescriptorRecord) -> Result<(), Refusal> {
        crate::answer::chain_stands(
            &d.evidence,
            d.descriptor.format,
            &d.agent_id,
            &d.document,
            d.issued_at,
            &self.dnssec_anchors,
        )
        .map_err(|why| {
            tracing::debug!(agent = %d.agent_id, %why, "a record's DNSSEC chain does not stand");
            Refusal::BadEvidence
        })
    }

    /// Checks a descriptor against the record held for its agent: who owns
    /// the id, and (ADP) whether the key carries on from the one this node
    /// counts. `Ok(Some(_))` when the record is valid but kept out.
    fn check_descriptor_against(
        &self,
        held: Option<&StoredAgent>,
        record: &SignedRecord,
        d: &DescriptorRecord,
        vouched: bool,
    ) -> Result<Option<Judgement>, Refusal> {
        let Some(held) = held else {
            return Ok(None);
        };
        if d.descriptor.format != DocumentFormat::Adp {
            if held.record.signer() == record.signer() {
                return Ok(None);
            }
            if let Some(t) = &d.transfer {
                // Its signature and names were checked (check_transfer).
                return if t.covers(held.record.signer(), held.body.seq()) {
                    Ok(None)
                } else {
                    Err(Refusal::BadTransfer)
                };
            }
            return match self.store.blocking().is_local(&d.agent_id) {
                Ok(true) => Err(Refusal::LocalRegistration),
                Ok(false) => Err(Refusal::NotOwner),
                Err(_) => Err(Refusal::StoreFailed),
            };
        }
        // ADP: only a record this node counts, and still valid, speaks for
        // the agent's key; a claim held is no ground to refuse another.
        let RecordBody::Descriptor(ours) = &held.body else {
            return Ok(None);
        };
        if held.claimed || ours.expires_at <= record::unix_now() {
            return Ok(None);
        }
        if !vouched {
            let reverify = (ours.doc_sha256 != d.doc_sha256)
                .then(|| d.agent_id.strip_prefix("agent:").map(str::to_owned))
                .flatten();
            return Ok(Some(Judgement::Outranked {
                reverify,
                signer: record.signer().to_bytes(),
            }));
        }
        crate::adp::rotation::continuity_of(&ours.document, &d.document)
            .map(|_| None)
            .map_err(|_| Refusal::KeyChangedUnproven)
    }
}

/// Records a search brought back were looked up: judged like a DHT get
/// (kept when valid, whatever `p2p.replication` says).
impl crate::search::Admit for Judge {
    fn admit(&self, record: &[u8]) -> bool {
        matches!(self.judge(record), Judgement::Stored { .. })
    }
}

#[cfg(all(test, feature = "testbed"))]
mod tests;
