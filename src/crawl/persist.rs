//! The crawler's store side: signing and storing what verified, keeping
//! each domain's latest report, upgrading mutual verified peers on both
//! sides, and crawling many domains with bounded concurrency while the
//! relationships feed the frontier.

use std::time::Instant;

use futures_util::StreamExt;

use super::report::{summarise, CrawlOutcome, CrawlReport, Step, StepOutcome, Verified};
use super::{CrawlError, Crawler};
use crate::adp::AgentDocument;
use crate::descriptor::Descriptor;
use crate::identity::normalise_domain;
use crate::issuer::{DescriptorIssue, Durability, Issuer};
use crate::record::RecordBody;
use crate::store::{Expect, Origin, Store};
use crate::verify::TrustLevel;

/// A key this node will not sign for (revoked, or changed without
/// proof): the step failed, and the crawl earns no trust.
fn key_refused(report: &mut CrawlReport, step: &'static str, e: &CrawlError, started: Instant) {
    let reason = e.reason();
    report.steps.push(Step {
        step,
        outcome: StepOutcome::Failed,
        detail: e.to_string(),
        reason: Some(reason),
        ms: started.elapsed().as_secs_f64() * 1000.0,
    });
    report.reasons.push(reason);
    report.trust = summarise(&crate::verify::Evidence::default());
}

impl Crawler {
    /// Crawls `domain` and, when its document is consistent with DNS,
    /// signs and stores a descriptor record with the evidence; mutual
    /// verified peers already held are upgraded on both sides.
    pub async fn crawl_and_store(&self, issuer: &Issuer, domain: &str) -> CrawlOutcome {
        let outcome = self.crawl(domain).await;
        self.store_outcome(issuer, outcome).await
    }

    /// Discovers every agent `domain` publishes ([`Crawler::discover`]),
    /// and stores each as [`Crawler::crawl_and_store`] does.
    pub async fn discover_and_store(&self, issuer: &Issuer, domain: &str) -> Vec<CrawlOutcome> {
        self.discover_and_store_with(issuer, domain, None).await
    }

    /// As [`Crawler::discover_and_store`], as a revisit with the `held`
    /// ADP document ([`Crawler::crawl_with`]). A 304 whose evidence did
    /// not change re-signs nothing until the held record is past half its
    /// lifetime.
    pub async fn discover_and_store_with(
        &self,
        issuer: &Issuer,
        domain: &str,
        held: Option<&super::Held>,
    ) -> Vec<CrawlOutcome> {
        let mut out = Vec::new();
        for outcome in self.discover_with(domain, held).await {
            out.push(self.store_outcome(issuer, outcome).await);
        }
        out
    }

    /// Stores what verified of one outcome and keeps its report.
    async fn store_outcome(&self, issuer: &Issuer, mut outcome: CrawlOutcome) -> CrawlOutcome {
        if let Some(verified) = outcome.verified.as_mut() {
            self.store_verified(issuer, verified, &outcome.peers, &mut outcome.report)
                .await;
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
        &self,
        issuer: &Issuer,
        verified: &mut Verified,
        peers: &[String],
        report: &mut CrawlReport,
    ) {
        let started = Instant::now();
        // Only a record this node counts (its own, or a trusted peer's)
        // speaks for the agent's key: a claim from elsewhere is replaced
        // by what this crawl verified, whatever key it carried.
        let held = match issuer.store().get(&verified.descriptor.id).await {
            Ok(held) => held.filter(|h| !h.claimed).and_then(|h| match h.body {
                RecordBody::Descriptor(d) => Some(*d),
                RecordBody::Tombstone(_) => None,
            }),
            Err(e) => {
                let e = CrawlError::Store {
                    message: e.to_string(),
                };
                report.steps.push(Step {
                    step: "record",
                    outcome: StepOutcome::Failed,
                    detail: e.to_string(),
                    reason: Some(e.reason()),
                    ms: started.elapsed().as_secs_f64() * 1000.0,
                });
                report.reasons.push(e.reason());
                return;
            }
        };
        if verified.descriptor.format == crate::descriptor::DocumentFormat::Adp {
            if let Err(e) = self.check_not_revoked(issuer.store(), verified).await {
                key_refused(report, "revocation", &e, started);
                return;
            }
            match key_continuity(held.as_ref(), verified) {
                Ok(None) => {}
                Ok(Some(detail)) => report.steps.push(Step {
                    step: "rotation",
                    outcome: StepOutcome::Ok,
                    detail,
                    reason: None,
                    ms: started.elapsed().as_secs_f64() * 1000.0,
                }),
                Err(e) => {
                    // The held descriptor stays; the new key earns nothing.
                    key_refused(report, "rotation", &e, started);
                    return;
                }
            }
        }
        // An unchanged visit (304 or the same bytes, same evidence) leaves the held record
        // as it is while it has half its lifetime left: nothing new to
        // sign or gossip.
        if let Some(h) = held.as_ref().filter(|h| {
            report.visit.unchanged
                && h.document == verified.document
                && h.evidence
                    == crate::verify::Evidence {
                        // The held record may carry the mutual-peer mark
                        // a later step of an earlier visit added.
                        mutual_peer: h.evidence.mutual_peer,
                        ..verified.evidence.clone()
                    }
                && h.expires_at.saturating_sub(crate::record::unix_now())
                    > h.expires_at.saturating_sub(h.issued_at) / 2
        }) {
            report.stored = true;
            report.steps.push(Step {
                step: "record",
                outcome: StepOutcome::Ok,
                detail: format!(
                    "unchanged: the held record (seq {}) stands until {}",
                    h.seq, h.expires_at
                ),
                reason: None,
                ms: 0.0,
            });
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
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        if let Err(e) = stored {
            let reason = e.reason();
            report.steps.push(Step {
                step: "record",
                outcome: StepOutcome::Failed,
                detail: e.to_string(),
                reason: Some(reason),
                ms,
            });
            report.reasons.push(reason);
            return;
        }
        report.stored = true;
        report.steps.push(Step {
            step: "record",
            outcome: StepOutcome::Ok,
            detail: format!("signed and stored at {}", report.trust.level),
            reason: None,
            ms,
        });

        let started = Instant::now();
        let own = issuer.key().verifying_key();
        let mutual = match self.mutual_peers(issuer.store(), &own, report, peers).await {
            Ok(m) => m,
            Err(e) => {
                report.steps.push(Step {
                    step: "peers",
                    outcome: StepOutcome::Failed,
                    detail: e.to_string(),
                    reason: Some(e.reason()),
                    ms: started.elapsed().as_secs_f64() * 1000.0,
                });
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
            match self.upgrade_peer(issuer, agent).await {
                Ok(()) => upgraded.push(agent.as_str()),
                Err(e) => {
                    tracing::warn!(agent = %agent, error = %e, "could not mark a mutual peer");
                }
            }
        }
        report.steps.push(Step {
            step: "peers",
            outcome: StepOutcome::Ok,
            detail: format!(
                "mutual verified peers: {}; re-signed at {}: {}",
                mutual.join(", "),
                report.trust.level,
                upgraded.join(", ")
            ),
            reason: None,
            ms: started.elapsed().as_secs_f64() * 1000.0,
        });
    }

    /// A document whose key its holder revoked earns nothing.
    async fn check_not_revoked(
        &self,
        store: &Store,
        verified: &Verified,
    ) -> Result<(), CrawlError> {
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
        &self,
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
    async fn upgrade_peer(&self, issuer: &Issuer, peer: &str) -> Result<(), CrawlError> {
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

    /// Crawls `domains` with bounded concurrency (each domain once),
    /// storing what verifies; with `follow_peers`, peers listed by crawled
    /// agents join the frontier up to `max_domains` in all. Calls
    /// `progress` after each domain.
    pub async fn crawl_many(
        &self,
        issuer: &Issuer,
        domains: Vec<String>,
        follow_peers: bool,
        max_domains: usize,
        mut progress: impl FnMut(&CrawlReport),
    ) -> Vec<CrawlReport> {
        let mut seen = std::collections::HashSet::new();
        let mut frontier: Vec<String> = Vec::new();
        for d in domains {
            let d = normalise_domain(&d).unwrap_or(d);
            if seen.insert(d.clone()) {
                frontier.push(d);
            }
        }
        let mut reports = Vec::new();
        while !frontier.is_empty() {
            let batch = std::mem::take(&mut frontier);
            let mut results = futures_util::stream::iter(batch)
                .map(|d| async move {
                    futures_util::stream::iter(self.discover_and_store(issuer, &d).await)
                })
                .buffer_unordered(self.options.concurrency.max(1))
                .flatten();
            while let Some(outcome) = results.next().await {
                let report = outcome.report;
                progress(&report);
                if follow_peers {
                    for peer in &outcome.peers {
                        let Some(d) = peer.strip_prefix("agent:") else {
                            continue;
                        };
                        if seen.len() < max_domains && seen.insert(d.to_owned()) {
                            frontier.push(d.to_owned());
                        }
                    }
                }
                reports.push(report);
            }
        }
        // Crawled records ride the periodic flush (`Durability::Periodic`);
        // a finished crawl is on disk before it reports (`agentmesh crawl`
        // runs no flusher).
        if let Err(e) = issuer.store().flush().await {
            tracing::error!(error = %e, "flushing crawled records failed");
        }
        reports
    }
}

/// Whether the crawled document keeps the key of the descriptor held for
/// its agent (`Ok(None)`), or hands over from it with a rotation statement
/// (`Ok(Some(detail))`); a held descriptor that expired binds nothing.
///
/// # Errors
/// [`CrawlError::KeyChangedUnproven`].
fn key_continuity(
    held: Option<&crate::record::DescriptorRecord>,
    verified: &Verified,
) -> Result<Option<String>, CrawlError> {
    let Some(held) = held else {
        return Ok(None);
    };
    if held.expires_at <= crate::record::unix_now() {
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

/// Signs and stores a crawled agent's descriptor through the one issuer.
async fn issue(
    issuer: &Issuer,
    descriptor: Descriptor,
    document: String,
    evidence: crate::verify::Evidence,
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
