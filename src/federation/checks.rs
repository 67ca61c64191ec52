//! The checks of one record that need nothing of the judge's state: the
//! flags a record of a format besides ADP may carry, a liveness result's
//! time, what a tombstone revokes or may replace, a descriptor's transfer;
//! and the audit entry of an accepted remote tombstone.

use super::{Refusal, MAX_CLOCK_SKEW_SECS, MAX_LIVENESS_AGE_SECS};
use crate::adp::AgentDocument;
use crate::descriptor::DocumentFormat;
use crate::record::{self, DescriptorRecord, LivenessRecord, RecordBody, SignedRecord};
use crate::store::{Store, StoredAgent};

/// The flags a record of a format besides ADP may carry, and the domain
/// that proves them, for this node to re-verify (docs/protocol.md#records):
/// an A2A card's key anchored by the domain's AID record (`fingerprint`,
/// and `dnssec` only beside it), its domain the id's after `a2a:`; a
/// DNS-AID record's Secure SVCB RRset (`dnssec`), its domain the one its
/// owner is published under ([`dns_aid::published_domain`]). `None` when
/// no flag is claimed. Neither format proves a challenge or a mutual
/// peer, and no other format any flag.
///
/// [`dns_aid::published_domain`]: crate::formats::dns_aid::published_domain
pub(super) fn dns_claim(
    format: DocumentFormat,
    agent_id: &str,
    e: &crate::trust::Evidence,
) -> Result<Option<String>, Refusal> {
    if e.challenge.is_some() || e.mutual_peer {
        return Err(Refusal::BadEvidence);
    }
    if !e.dnssec && !e.fingerprint {
        return Ok(None);
    }
    let domain = match format {
        DocumentFormat::A2a if e.fingerprint => agent_id
            .strip_prefix("a2a:")
            .and_then(|d| crate::identity::normalise_domain(d).ok()),
        DocumentFormat::DnsAid if !e.fingerprint => agent_id
            .strip_prefix("dns-aid:")
            .and_then(crate::formats::dns_aid::published_domain),
        _ => None,
    };
    domain.map(Some).ok_or(Refusal::BadEvidence)
}

/// A liveness result's time: checked no later than the tolerated skew
/// from `now`, and no longer ago than [`MAX_LIVENESS_AGE_SECS`].
pub(super) fn check_liveness_window(body: &LivenessRecord, now: u64) -> Result<(), Refusal> {
    if body.checked_at > now.saturating_add(MAX_CLOCK_SKEW_SECS) {
        return Err(Refusal::IssuedInFuture);
    }
    if body.checked_at.saturating_add(MAX_LIVENESS_AGE_SECS) < now {
        return Err(Refusal::LivenessTooOld);
    }
    Ok(())
}

/// The fingerprint of the agent key a `Revoked` tombstone revokes, when
/// the agent's own key (the one the held ADP descriptor's document
/// carries) signed it: a revocation is final for that key, whatever the
/// seqs.
pub(super) fn revokes_held(
    held: Option<&StoredAgent>,
    record: &SignedRecord,
    body: &RecordBody,
) -> Option<String> {
    let RecordBody::Tombstone(t) = body else {
        return None;
    };
    if t.reason != record::TombstoneReason::Revoked {
        return None;
    }
    let RecordBody::Descriptor(d) = &held?.body else {
        return None;
    };
    let doc: AgentDocument = serde_json::from_str(&d.document).ok()?;
    (doc.proven_key()? == *record.signer()).then(|| crate::identity::fingerprint(record.signer()))
}

/// A descriptor's transfer, if it carries one, must verify and hand its
/// id to its signer; an ADP descriptor carries none (its id moves with
/// its DNS). Whether it covers the held record is checked against it.
pub(super) fn check_transfer(record: &SignedRecord, d: &DescriptorRecord) -> Result<(), Refusal> {
    let Some(t) = &d.transfer else {
        return Ok(());
    };
    if d.descriptor.format == DocumentFormat::Adp {
        return Err(Refusal::BadTransfer);
    }
    t.verify_for(&d.agent_id, record.signer())
        .map(|_| ())
        .map_err(|_| Refusal::BadTransfer)
}

/// A tombstone stands when the agent's own key signed it, or the node
/// that attested the descriptor it replaces (`held`).
pub(super) fn check_tombstone(
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

/// Records a tombstone from elsewhere that this node accepted (a
/// revocation or a remote deletion), with its signed bytes.
pub(super) fn audit_revocation(store: &Store, record: &SignedRecord, agent_id: &str) {
    let mut event = crate::store::AuditEvent::new(
        "remote",
        crate::store::AuditAction::Revoke,
        agent_id,
        crate::store::AuditOutcome::Ok,
    );
    event.record = Some(record.encode());
    if let Err(e) = store.blocking().audit_append(&event) {
        tracing::error!(error = %e, "the audit log failed");
    }
}
