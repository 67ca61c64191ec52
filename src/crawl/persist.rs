//! The store phase of a crawl: what verified signed and stored through
//! the issuer (after an ADP key's checks: not revoked, the key held or a
//! rotation from it; an unchanged visit leaves the held record standing),
//! each agent's latest report kept, and mutual verified peers upgraded on
//! both sides.

use std::time::Instant;

use super::error::CrawlError;
use super::report::{summarise, CrawlOutcome, CrawlReport, StepName, Verified};
use crate::adp::AgentDocument;
use crate::descriptor::{Descriptor, DocumentFormat};
use crate::issuer::{DescriptorIssue, Durability, Issuer};
use crate::record::{unix_now, DescriptorRecord, RecordBody};
use crate::store::{Expect, Origin, Store};
use crate::trust::{Evidence, TrustLevel};

/// Stores what verified of one outcome and keeps its report.
pub(super) async fn store_outcome(issuer: &Issuer, mut outcome: CrawlOutcome) -> CrawlOutcome {
    if let Some(verified) = outcome.verified.as_mut() {
        store_verified(issuer, verified, &outcome.peers, &mut outcome.report).await;
    }
    let report = &outcome.report;
    let json = serde_json::to_vec(report).expect("a report always serialises");
    if let Err(e) = issuer
        .store()
        .put_report(&report.agent_id, json, report.reasons.clone())
        .await
    {
        tracing::warn!(agent = %report.agent_id, error = %e, "could not keep the crawl report");
    }
    outcome
}

/// Stores the agent, then looks for mutual verified peers already
/// held and, when it finds some, upgrades both sides. Storing before
/// looking means that of two mutual agents crawled at the same time,
/// the later look always finds the other stored, with no lock between
/// crawls.
async fn store_verified(
    issuer: &Issuer,
    verified: &mut Verified,
    peers: &[String],
    report: &mut CrawlReport,
) {
    let started = Instant::now();
    let held = match held_descriptor(issuer.store(), &verified.descriptor.id).await {
        Ok(held) => held,
        Err(e) => {
            report.failed(StepName::Record, ms(started), &e);
            return;
        }
    };
    if verified.descriptor.format == DocumentFormat::Adp {
        if let Err((step, e)) =
            check_key(issuer.store(), held.as_ref(), verified, report, started).await
        {
            // The held descriptor stays; the new key earns nothing.
            report.failed(step, ms(started), &e);
            report.trust = summarise(&Evidence::default());
            return;
        }
    }
    if let Some(h) = held.as_ref().filter(|h| still_stands(h, verified, report)) {
        report.stored = true;
        report.passed(
            StepName::Record,
            0.0,
            format!(
                "unchanged: the held record (seq {}) stands until {}",
                h.seq, h.expires_at
            ),
        );
        return;
    }
    let started = Instant::now();
    let stored = issue(
        issuer,
        verified.descriptor.clone(),
        verified.document.clone(),
        verified.evidence.clone(),
    )
    .await;
    let took = ms(started);
    if let Err(e) = stored {
        report.failed(StepName::Record, took, &e);
        return;
    }
    report.stored = true;
    let detail = format!("signed and stored at {}", report.trust.level);
    report.passed(StepName::Record, took, detail);
    mark_mutual_peers(issuer, verified, peers, report).await;
}

/// The checks of an ADP document's key against what this node knows
/// of it: not revoked by its holder, and the key held or a rotation
/// from it (a `rotation` step says so). A key refused names the step
/// that refused it.
async fn check_key(
    store: &Store,
    held: Option<&DescriptorRecord>,
    verified: &Verified,
    report: &mut CrawlReport,
    started: Instant,
) -> Result<(), (StepName, CrawlError)> {
    check_not_revoked(store, verified)
        .await
        .map_err(|e| (StepName::Revocation, e))?;
    let rotated = key_continuity(held, verified).map_err(|e| (StepName::Rotation, e))?;
    if let Some(detail) = rotated {
        report.passed(StepName::Rotation, ms(started), detail);
    }
    Ok(())
}

/// Looks for mutual verified peers of the agent just stored and, when
/// there are some, marks both sides: the agent's evidence and report,
/// and each record held, re-signed. A `peers` step says what was done.
async fn mark_mutual_peers(
    issuer: &Issuer,
    verified: &mut Verified,
    peers: &[String],
    report: &mut CrawlReport,
) {
    let started = Instant::now();
    let own = issuer.key().verifying_key();
    let mutual = match mutual_peers(issuer.store(), &own, report, peers).await {
        Ok(m) => m,
        Err(e) => {
            report.failed_aside(StepName::Peers, ms(started), &e);
            return;
        }
    };
    if mutual.is_empty() {
        return;
    }
    verified.evidence.mutual_peer = true;
    report.trust = summarise(&verified.evidence);
    let mut upgraded = Vec::new();
    for agent in std::iter::once(&report.agent_id).chain(&mutual) {
        match upgrade_peer(issuer, agent).await {
            Ok(()) => upgraded.push(agent.as_str()),
            Err(e) => {
                tracing::warn!(agent = %agent, error = %e, "could not mark a mutual peer");
            }
        }
    }
    let detail = format!(
        "mutual verified peers: {}; re-signed at {}: {}",
        mutual.join(", "),
        report.trust.level,
        upgraded.join(", ")
    );
    report.passed(StepName::Peers, ms(started), detail);
}

/// A document whose key its holder revoked earns nothing.
async fn check_not_revoked(store: &Store, verified: &Verified) -> Result<(), CrawlError> {
    let Ok(doc) = serde_json::from_str::<AgentDocument>(&verified.document) else {
        return Ok(());
    };
    let fingerprint = doc.identity.public_key.fingerprint.to_ascii_lowercase();
    match store.revocation(&fingerprint).await {
        Ok(None) => Ok(()),
        Ok(Some(r)) => Err(CrawlError::KeyRevoked {
            fingerprint,
            since: r.since,
        }),
        Err(e) => Err(CrawlError::Store {
            message: e.to_string(),
        }),
    }
}

/// Verified peers of this report's agent that this node itself
/// verified at key-verified or above (a record another node signed,
/// trusted or not, never makes a pair: this node re-signs what it
/// proved, nothing else) and that list this agent back as a verified
/// peer.
async fn mutual_peers(
    store: &Store,
    own: &ed25519_dalek::VerifyingKey,
    report: &CrawlReport,
    peers: &[String],
) -> Result<Vec<String>, CrawlError> {
    if report.trust.level < TrustLevel::KeyVerified {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for peer in peers {
        let Some(held) = store.get(peer).await.map_err(|e| CrawlError::Store {
            message: e.to_string(),
        })?
        else {
            continue;
        };
        if held.claimed || held.record.signer() != own {
            continue;
        }
        let RecordBody::Descriptor(body) = &held.body else {
            continue;
        };
        if body.evidence.level() < TrustLevel::KeyVerified {
            continue;
        }
        let Ok(doc) = serde_json::from_str::<AgentDocument>(&body.document) else {
            continue;
        };
        if verified_peers(&doc).contains(&report.agent_id) {
            out.push(peer.clone());
        }
    }
    Ok(out)
}

/// Re-signs `peer`'s record with the mutual-peer mark, when this node
/// signed the record held (it re-signs only what it verified itself).
async fn upgrade_peer(issuer: &Issuer, peer: &str) -> Result<(), CrawlError> {
    let held = issuer
        .store()
        .get(peer)
        .await
        .map_err(|e| CrawlError::Store {
            message: e.to_string(),
        })?;
    let own = issuer.key().verifying_key();
    let Some(RecordBody::Descriptor(body)) = held
        .filter(|h| !h.claimed && h.record.signer() == &own)
        .map(|h| h.body)
    else {
        return Ok(());
    };
    if body.evidence.mutual_peer {
        return Ok(());
    }
    let mut evidence = body.evidence.clone();
    evidence.mutual_peer = true;
    let body = *body;
    issue(issuer, body.descriptor, body.document, evidence).await
}

/// Whether the crawled document keeps the key of the descriptor held for
/// its agent (`Ok(None)`), or hands over from it with a rotation statement
/// (`Ok(Some(detail))`); a held descriptor that expired binds nothing.
///
/// # Errors
/// [`CrawlError::KeyChangedUnproven`].
fn key_continuity(
    held: Option<&DescriptorRecord>,
    verified: &Verified,
) -> Result<Option<String>, CrawlError> {
    let Some(held) = held else {
        return Ok(None);
    };
    if held.expires_at <= unix_now() {
        return Ok(None);
    }
    use crate::adp::rotation::{continuity_of, Continuity};
    match continuity_of(&held.document, &verified.document) {
        Ok(None | Some(Continuity::SameKey)) => Ok(None),
        Ok(Some(Continuity::Rotated { from, to })) => Ok(Some(format!(
            "key rotated from {from} to {to}, signed by the previous key"
        ))),
        Err(e) => Err(CrawlError::KeyChangedUnproven {
            message: e.to_string(),
        }),
    }
}

/// The descriptor held for `id` that speaks for the agent's key: only a
/// record this node counts (its own, or a trusted peer's). A claim from
/// elsewhere is replaced by what this crawl verified, whatever key it
/// carried.
async fn held_descriptor(store: &Store, id: &str) -> Result<Option<DescriptorRecord>, CrawlError> {
    let held = store.get(id).await.map_err(|e| CrawlError::Store {
        message: e.to_string(),
    })?;
    Ok(held.filter(|h| !h.claimed).and_then(|h| match h.body {
        RecordBody::Descriptor(d) => Some(*d),
        RecordBody::Tombstone(_) => None,
    }))
}

/// Whether an unchanged visit (304 or the same bytes, same evidence)
/// leaves the held record as it is: while it has half its lifetime left,
/// there is nothing new to sign or gossip.
fn still_stands(held: &DescriptorRecord, verified: &Verified, report: &CrawlReport) -> bool {
    report.visit.unchanged
        && held.document == verified.document
        && held.evidence
            == Evidence {
                // The held record may carry the mutual-peer mark a later
                // step of an earlier visit added; its DNSSEC chain still
                // proves the RRset when it was signed, though the zone's
                // signatures may have been renewed since.
                mutual_peer: held.evidence.mutual_peer,
                dnssec_chain: held.evidence.dnssec_chain.clone(),
                ..verified.evidence.clone()
            }
        && held.expires_at.saturating_sub(unix_now())
            > held.expires_at.saturating_sub(held.issued_at) / 2
}

fn ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}

/// Signs and stores a crawled agent's descriptor through the one issuer.
async fn issue(
    issuer: &Issuer,
    descriptor: Descriptor,
    document: String,
    evidence: Evidence,
) -> Result<(), CrawlError> {
    issuer
        .descriptor(DescriptorIssue {
            descriptor,
            document,
            evidence,
            origin: Origin::Remote,
            expect: Expect::Any,
            durability: Durability::Periodic,
        })
        .await
        .map(drop)
        .map_err(|e| CrawlError::Store {
            message: e.to_string(),
        })
}

/// Ids of the peers a document lists with `trust: verified`.
pub(super) fn verified_peers(doc: &AgentDocument) -> Vec<String> {
    doc.relationships
        .iter()
        .flatten()
        .filter(|r| r.kind == "peer" && r.trust.as_deref() == Some("verified"))
        .map(|r| r.id.to_ascii_lowercase())
        .collect()
}
