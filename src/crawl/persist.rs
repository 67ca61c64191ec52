//! The crawler's store side: signing and storing what verified, keeping
//! each domain's latest report, upgrading mutual verified peers on both
//! sides, and crawling many domains with bounded concurrency while the
//! relationships feed the frontier.

use std::time::Instant;

use futures_util::StreamExt;

use super::report::{summarise, CrawlReport, Step, StepOutcome};
use super::{normalise_domain, CrawlError, Crawler};
use crate::adp::AgentDocument;
use crate::descriptor::Descriptor;
use crate::record::{self, DescriptorRecord, RecordBody, SignedRecord};
use crate::store::{Expect, Origin, Store};
use crate::verify::TrustLevel;

impl Crawler {
    /// Crawls `domain` and, when its document is consistent with DNS,
    /// signs and stores a descriptor record with the evidence; mutual
    /// verified peers already held are upgraded on both sides.
    pub async fn crawl_and_store(&self, store: &Store, domain: &str) -> CrawlReport {
        let mut report = self.crawl(domain).await;
        if let Some(descriptor) = report.descriptor.clone() {
            self.store_verified(store, descriptor, &mut report).await;
        }
        let json = serde_json::to_vec(&report).expect("a report always serialises");
        if let Err(e) = store.put_report(&report.agent_id, json).await {
            tracing::warn!(agent = %report.agent_id, error = %e, "could not keep the crawl report");
        }
        report
    }

    async fn store_verified(
        &self,
        store: &Store,
        descriptor: Descriptor,
        report: &mut CrawlReport,
    ) {
        // One domain at a time from the mutual-peer check to the last
        // write: two agents listing each other, crawled at once, would
        // otherwise each find the other not yet stored, and neither
        // would be marked (the store calls await between check and write).
        let _turn = self.store_turn.lock().await;
        let started = Instant::now();
        let mutual = match self.mutual_peers(store, report).await {
            Ok(m) => m,
            Err(e) => {
                let ms = started.elapsed().as_secs_f64() * 1000.0;
                report.steps.push(Step {
                    step: "peers",
                    outcome: StepOutcome::Failed,
                    detail: e.to_string(),
                    reason: Some(e.reason()),
                    ms,
                });
                Vec::new()
            }
        };
        if !mutual.is_empty() {
            report.evidence.mutual_peer = true;
            report.trust = summarise(&report.evidence);
            report.steps.push(Step {
                step: "peers",
                outcome: StepOutcome::Ok,
                detail: format!("mutual verified peers: {}", mutual.join(", ")),
                reason: None,
                ms: started.elapsed().as_secs_f64() * 1000.0,
            });
        }
        let started = Instant::now();
        let stored = self.store_record(store, descriptor, report).await;
        match stored {
            Ok(()) => {
                report.stored = true;
                report.steps.push(Step {
                    step: "record",
                    outcome: StepOutcome::Ok,
                    detail: format!("signed and stored at {}", report.trust.level),
                    reason: None,
                    ms: started.elapsed().as_secs_f64() * 1000.0,
                });
                for peer in &mutual {
                    if let Err(e) = self.upgrade_peer(store, peer).await {
                        tracing::warn!(peer = %peer, error = %e, "could not mark a mutual peer");
                    }
                }
            }
            Err(e) => {
                let reason = e.reason();
                report.steps.push(Step {
                    step: "record",
                    outcome: StepOutcome::Failed,
                    detail: e.to_string(),
                    reason: Some(reason),
                    ms: started.elapsed().as_secs_f64() * 1000.0,
                });
                report.reasons.push(reason);
            }
        }
    }

    async fn store_record(
        &self,
        store: &Store,
        descriptor: Descriptor,
        report: &CrawlReport,
    ) -> Result<(), CrawlError> {
        let to_store = |e: &dyn std::fmt::Display| CrawlError::Store {
            message: e.to_string(),
        };
        let document = report
            .document_text
            .clone()
            .ok_or_else(|| CrawlError::Store {
                message: "the report holds no document".into(),
            })?;
        let held = store
            .get(&report.agent_id)
            .await
            .map_err(|e| to_store(&e))?
            .map(|a| a.body.seq());
        self.sign_and_store(store, descriptor, document, held, report.evidence.clone())
            .await
    }

    /// Signs a descriptor record above `held`, stores it and hands it to
    /// the outbox.
    async fn sign_and_store(
        &self,
        store: &Store,
        descriptor: Descriptor,
        document: String,
        held: Option<u64>,
        evidence: crate::verify::Evidence,
    ) -> Result<(), CrawlError> {
        let to_store = |e: &dyn std::fmt::Display| CrawlError::Store {
            message: e.to_string(),
        };
        let body = DescriptorRecord::new(
            descriptor,
            document,
            record::next_seq(held),
            record::unix_now(),
            self.options.record_ttl.as_secs(),
            evidence,
        );
        let signed = SignedRecord::sign_descriptor(&body, &self.key).map_err(|e| to_store(&e))?;
        let body = RecordBody::Descriptor(Box::new(body));
        store
            .put(&signed, &body, Origin::Remote, Expect::Any)
            .await
            .map_err(|e| to_store(&e))?;
        if let Some(outbox) = &self.outbox {
            outbox.send(crate::federation::outbox::Published::of(&signed, &body));
        }
        Ok(())
    }

    /// Verified peers of this report's agent that are held key-verified
    /// and list this agent back as a verified peer.
    async fn mutual_peers(
        &self,
        store: &Store,
        report: &CrawlReport,
    ) -> Result<Vec<String>, CrawlError> {
        if report.trust.level < TrustLevel::KeyVerified {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for peer in &report.peers {
            let Some(held) = store.get(peer).await.map_err(|e| CrawlError::Store {
                message: e.to_string(),
            })?
            else {
                continue;
            };
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

    async fn upgrade_peer(&self, store: &Store, peer: &str) -> Result<(), CrawlError> {
        let to_store = |e: &dyn std::fmt::Display| CrawlError::Store {
            message: e.to_string(),
        };
        let Some(held) = store.get(peer).await.map_err(|e| to_store(&e))? else {
            return Ok(());
        };
        let RecordBody::Descriptor(body) = held.body else {
            return Ok(());
        };
        if body.evidence.mutual_peer {
            return Ok(());
        }
        let mut evidence = body.evidence.clone();
        evidence.mutual_peer = true;
        let (descriptor, document, seq) =
            (body.descriptor.clone(), body.document.clone(), body.seq);
        self.sign_and_store(store, descriptor, document, Some(seq), evidence)
            .await
    }

    /// Crawls `domains` with bounded concurrency (each domain once),
    /// storing what verifies; with `follow_peers`, peers listed by crawled
    /// agents join the frontier up to `max_domains` in all. Calls
    /// `progress` after each domain.
    pub async fn crawl_many(
        &self,
        store: &Store,
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
                .map(|d| async move { self.crawl_and_store(store, &d).await })
                .buffer_unordered(self.options.concurrency.max(1));
            while let Some(report) = results.next().await {
                progress(&report);
                if follow_peers {
                    for peer in &report.peers {
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
        if let Err(e) = store.flush().await {
            tracing::error!(error = %e, "flushing crawled records failed");
        }
        reports
    }
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
