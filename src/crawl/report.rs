//! What a crawl reports: each step with its outcome and time, the trust
//! level with its evidence, and the reason codes of what failed. The
//! report is what `verify --json`, `crawl --json` and `GET /crawl/{domain}`
//! print.

use std::time::Instant;

use serde::Serialize;

use super::CrawlError;
use crate::descriptor::Descriptor;
use crate::verify::{Evidence, TrustLevel};

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepOutcome {
    /// It passed.
    Ok,
    /// It failed; the report's reasons say why.
    Failed,
    /// It did not apply (e.g. no SRV record).
    Skipped,
}

/// One step of the chain.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// `dns_txt`, `dns_srv`, `dns_address`, `fetch`, `document`,
    /// `fingerprint`, `challenge`, `peers`, `record`.
    pub step: &'static str,
    /// Its outcome.
    pub outcome: StepOutcome,
    /// What happened, for people.
    pub detail: String,
    /// The reason code when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// Time spent, milliseconds.
    pub ms: f64,
}

/// The trust part of a report.
#[derive(Debug, Clone, Serialize)]
pub struct TrustSummary {
    /// The level reached.
    pub level: TrustLevel,
    /// The evidence flags.
    pub evidence: EvidenceSummary,
}

/// Evidence flags as reported.
#[derive(Debug, Clone, Serialize)]
pub struct EvidenceSummary {
    /// DNSSEC-validated TXT.
    pub dnssec: bool,
    /// Fingerprint chain.
    pub fingerprint: bool,
    /// Signed challenge.
    pub challenge: bool,
    /// Mutual verified peers.
    pub mutual_peer: bool,
}

/// The outcome of crawling one domain.
#[derive(Debug, Clone, Serialize)]
pub struct CrawlReport {
    /// The domain crawled (normalised).
    pub domain: String,
    /// `agent:{domain}`.
    pub agent_id: String,
    /// Level and evidence.
    pub trust: TrustSummary,
    /// Reason codes of everything that failed, in order.
    pub reasons: Vec<&'static str>,
    /// Every step with its outcome.
    pub steps: Vec<Step>,
    /// Recrawl after this many seconds (min of DNS TTL, max-age, 3600).
    pub recrawl_after_secs: u64,
    /// Whether a record was stored (only when the document is consistent
    /// with DNS: fingerprint chain and domain).
    pub stored: bool,
    /// Agent ids of verified peers the document lists (the frontier).
    #[serde(skip)]
    pub peers: Vec<String>,
    /// The full evidence (with the challenge proof).
    #[serde(skip)]
    pub evidence: Evidence,
    /// The descriptor, when the document was read.
    #[serde(skip)]
    pub descriptor: Option<Descriptor>,
    /// The document as fetched, when it was read.
    #[serde(skip)]
    pub document_text: Option<String>,
    /// The first failure, for callers that want the error itself.
    #[serde(skip)]
    pub error: Option<CrawlError>,
}

impl CrawlReport {
    /// The trust level reached.
    pub fn level(&self) -> TrustLevel {
        self.trust.level
    }
}

pub(super) struct Run {
    pub(super) report: CrawlReport,
}

impl Run {
    /// Records a step that started at `started` and ends now.
    pub(super) fn step<T>(
        &mut self,
        step: &'static str,
        started: Instant,
        result: Result<T, CrawlError>,
        ok: impl FnOnce(&T) -> String,
    ) -> Result<T, ()> {
        self.step_took(step, started.elapsed(), result, ok)
    }

    /// Records a step that took `took` (for steps run concurrently).
    pub(super) fn step_took<T>(
        &mut self,
        step: &'static str,
        took: std::time::Duration,
        result: Result<T, CrawlError>,
        ok: impl FnOnce(&T) -> String,
    ) -> Result<T, ()> {
        let ms = took.as_secs_f64() * 1000.0;
        match result {
            Ok(v) => {
                self.report.steps.push(Step {
                    step,
                    outcome: StepOutcome::Ok,
                    detail: ok(&v),
                    reason: None,
                    ms,
                });
                Ok(v)
            }
            Err(e) => {
                self.fail(step, ms, e);
                Err(())
            }
        }
    }

    pub(super) fn fail(&mut self, step: &'static str, ms: f64, e: CrawlError) {
        let reason = e.reason();
        self.report.steps.push(Step {
            step,
            outcome: StepOutcome::Failed,
            detail: e.to_string(),
            reason: Some(reason),
            ms,
        });
        self.report.reasons.push(reason);
        self.report.error.get_or_insert(e);
    }

    pub(super) fn skip(&mut self, step: &'static str, detail: impl Into<String>) {
        self.report.steps.push(Step {
            step,
            outcome: StepOutcome::Skipped,
            detail: detail.into(),
            reason: None,
            ms: 0.0,
        });
    }
}

/// The trust summary of `e`.
pub(super) fn summarise(e: &Evidence) -> TrustSummary {
    TrustSummary {
        level: e.level(),
        evidence: EvidenceSummary {
            dnssec: e.dnssec,
            fingerprint: e.fingerprint,
            challenge: e.challenge.is_some(),
            mutual_peer: e.mutual_peer,
        },
    }
}
