//! Mutual peers one hop out, for `agentmesh verify DOMAIN`: a crawl of one
//! agent that also crawls the peers its document lists with
//! `trust: verified` (at most [`MAX_PEERS_CHECKED`], with the same limits
//! and address policy as the crawl itself), and reports `peer-verified`
//! when one of them is key-verified and lists the agent back (ADP 7.2).
//! Nothing is stored: the node's crawler reaches peer-verified through
//! the records it holds (`persist.rs`). The crawler crawls; this module
//! says whom ([`candidates`]) and what their crawls mean ([`conclude`]).

use super::report::{summarise, CrawlOutcome, PeerCheck, StepName};
use crate::trust::TrustLevel;

/// Most listed peers one verification crawls.
pub const MAX_PEERS_CHECKED: usize = 8;
/// Peers crawled at once.
pub(super) const PEER_CONCURRENCY: usize = 4;

/// The domains of the verified peers to crawl for `outcome` (the first
/// [`MAX_PEERS_CHECKED`] it lists, itself and repeats left out), or why
/// none is: the `peers` step's detail, skipped.
pub(super) fn candidates(outcome: &CrawlOutcome) -> Result<Vec<String>, &'static str> {
    if outcome.report.level() < TrustLevel::KeyVerified {
        return Err("not key-verified: its peers are not checked");
    }
    let me = &outcome.report.agent_id;
    let mut candidates: Vec<String> = Vec::new();
    for peer in &outcome.peers {
        let Some(peer_domain) = peer.strip_prefix("agent:") else {
            continue;
        };
        if peer != me && !candidates.iter().any(|c| c == peer_domain) {
            candidates.push(peer_domain.to_owned());
        }
    }
    if candidates.is_empty() {
        return Err("lists no verified peer");
    }
    candidates.truncate(MAX_PEERS_CHECKED);
    Ok(candidates)
}

/// What the peers' crawls (`partners`, in the order of the candidates)
/// mean for `outcome`: each one's check, mutual when it is key-verified
/// and lists the agent back; `peer-verified` when one is; the `peers`
/// step's detail. The checks go in the report's `peer_checks`, the
/// mutual ones first.
pub(super) fn conclude(outcome: &mut CrawlOutcome, partners: Vec<CrawlOutcome>, ms: f64) {
    let listed = outcome.peers.len();
    let me = &outcome.report.agent_id;
    let mut checks: Vec<PeerCheck> = partners
        .into_iter()
        .map(|partner| {
            let lists_back = partner.peers.contains(me);
            PeerCheck {
                agent_id: partner.report.agent_id.clone(),
                mutual: lists_back && partner.report.level() >= TrustLevel::KeyVerified,
                lists_back,
                report: partner.report,
            }
        })
        .collect();
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
    let any_mutual = !mutual.is_empty();
    if any_mutual {
        if let Some(verified) = outcome.verified.as_mut() {
            verified.evidence.mutual_peer = true;
            outcome.report.trust = summarise(&verified.evidence);
        }
    }
    outcome.report.passed(StepName::Peers, ms, detail);
    checks.sort_by_key(|c| !c.mutual);
    outcome.report.peer_checks = checks;
}
