//! Mutual peers one hop out, for `agentmesh verify DOMAIN`: a crawl of one
//! agent that also crawls the peers its document lists with
//! `trust: verified` (at most [`MAX_PEERS_CHECKED`], with the same limits
//! and address policy as the crawl itself), and reports `peer-verified`
//! when one of them is key-verified and lists the agent back (ADP 7.2).
//! Nothing is stored: the node's crawler reaches peer-verified through
//! the records it holds (`persist.rs`).

use std::time::Instant;

use futures_util::StreamExt;

use super::report::{summarise, CrawlOutcome, PeerCheck, Step, StepOutcome};
use super::Crawler;
use crate::verify::TrustLevel;

/// Most listed peers one verification crawls.
pub const MAX_PEERS_CHECKED: usize = 8;
/// Peers crawled at once.
const PEER_CONCURRENCY: usize = 4;

impl Crawler {
    /// Crawls `domain`, then, when it is key-verified, the verified peers
    /// its document lists (the first [`MAX_PEERS_CHECKED`]); a peer that is
    /// key-verified and lists the agent back makes it `peer-verified`.
    /// Each peer's own report is in the agent's `peer_checks`, and a
    /// `peers` step says what was found.
    pub async fn verify_with_peers(&self, domain: &str) -> CrawlOutcome {
        let mut outcome = self.crawl(domain).await;
        let started = Instant::now();
        let listed = outcome.peers.len();
        let step = |outcome: &mut CrawlOutcome, kind: StepOutcome, detail: String| {
            outcome.report.steps.push(Step {
                step: "peers",
                outcome: kind,
                detail,
                reason: None,
                ms: started.elapsed().as_secs_f64() * 1000.0,
            });
        };
        if outcome.report.level() < TrustLevel::KeyVerified {
            let detail = "not key-verified: its peers are not checked".to_owned();
            step(&mut outcome, StepOutcome::Skipped, detail);
            return outcome;
        }
        let me = outcome.report.agent_id.clone();
        let mut candidates: Vec<String> = Vec::new();
        for peer in &outcome.peers {
            let Some(peer_domain) = peer.strip_prefix("agent:") else {
                continue;
            };
            if *peer != me && !candidates.iter().any(|c| c == peer_domain) {
                candidates.push(peer_domain.to_owned());
            }
        }
        if candidates.is_empty() {
            let detail = "lists no verified peer".to_owned();
            step(&mut outcome, StepOutcome::Skipped, detail);
            return outcome;
        }
        candidates.truncate(MAX_PEERS_CHECKED);
        let mut checks: Vec<PeerCheck> = futures_util::stream::iter(candidates)
            .map(|d| async move { self.crawl(&d).await })
            .buffered(PEER_CONCURRENCY)
            .map(|partner| {
                let lists_back = partner.peers.contains(&me);
                PeerCheck {
                    agent_id: partner.report.agent_id.clone(),
                    mutual: lists_back && partner.report.level() >= TrustLevel::KeyVerified,
                    lists_back,
                    report: partner.report,
                }
            })
            .collect()
            .await;
        let mutual: Vec<&str> = checks
            .iter()
            .filter(|c| c.mutual)
            .map(|c| c.agent_id.as_str())
            .collect();
        let others: Vec<String> = checks
            .iter()
            .filter(|c| !c.mutual)
            .map(|c| {
                let why = if c.report.level() < TrustLevel::KeyVerified {
                    let reason = c.report.reasons.first().map_or("", |r| r.as_str());
                    format!("{} [{reason}]", c.report.level())
                } else {
                    "does not list it back".to_owned()
                };
                format!("{} ({why})", c.agent_id)
            })
            .collect();
        let checked = format!("{} of {listed} listed checked", checks.len());
        let detail = if mutual.is_empty() {
            format!("no mutual verified peer ({checked}): {}", others.join(", "))
        } else {
            let mut d = format!("mutual verified peers: {} ({checked})", mutual.join(", "));
            if !others.is_empty() {
                d.push_str(&format!("; not mutual: {}", others.join(", ")));
            }
            d
        };
        if !mutual.is_empty() {
            if let Some(verified) = outcome.verified.as_mut() {
                verified.evidence.mutual_peer = true;
                outcome.report.trust = summarise(&verified.evidence);
            }
        }
        step(&mut outcome, StepOutcome::Ok, detail);
        checks.sort_by_key(|c| !c.mutual);
        outcome.report.peer_checks = checks;
        outcome
    }
}
