//! The probes of a run without churn, after its searches: publications
//! and revocations one at a time, each timed at every node, with the
//! stale results that searches elsewhere return while a tombstone
//! spreads.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::agents::{agent_id, document, normalised, probe_id};
use super::measure::search_once;
use super::node::Swarm;
use super::outcome::SwarmOutcome;
use super::watch::{
    is_descriptor, is_tombstone, probe_deadline, push_arrivals, Probe, WATCH_EVERY,
};
use crate::model::SwarmParams;

/// Nodes that run mesh searches while a revocation propagates.
const STALE_SEARCHERS: usize = 8;

/// Without churn: publishes the probes one at a time and times their
/// arrival at every node, then tombstones the revoke probes one at a time
/// and times their disappearance, while [`STALE_SEARCHERS`] other nodes
/// search for the revoked agent's capability and count it where it comes
/// back.
pub(super) async fn probes_after_searches(
    swarm: &Swarm,
    params: &SwarmParams,
    started: Instant,
    shards: u32,
    out: &mut SwarmOutcome,
    progress: &mut dyn FnMut(&str),
) -> Result<()> {
    let deadline = probe_deadline(params.nodes);
    for (j, p) in params.publish_probes.iter().enumerate() {
        let id = probe_id(j);
        let doc = document(params.agents.len() + j, &id, &p.capabilities);
        let t0 = Instant::now();
        swarm.nodes[p.home]
            .registry
            .register(doc)
            .await
            .with_context(|| format!("publishing probe {id}"))?;
        let arrivals = swarm.watch(&id, t0, deadline, is_descriptor).await?;
        push_arrivals(out, Probe::Publish, &arrivals, &id, progress);
    }
    if !params.publish_probes.is_empty() {
        progress(&format!("published {} probes", params.publish_probes.len()));
    }

    let mut rng = StdRng::seed_from_u64(params.seed ^ 0x5EED_0F57_A1E5);
    let none = HashSet::new();
    for (i, agent) in params.agents.iter().take(params.revoke_probes).enumerate() {
        let id = agent_id(i);
        let others: Vec<usize> = (0..params.nodes).filter(|n| *n != agent.home).collect();
        let searchers: Vec<usize> = others
            .choose_multiple(&mut rng, STALE_SEARCHERS)
            .copied()
            .collect();
        let capability = normalised(&agent.capabilities)
            .into_iter()
            .next()
            .unwrap_or_default();
        let t0 = Instant::now();
        swarm.nodes[agent.home]
            .registry
            .delete(&id)
            .await
            .with_context(|| format!("revoking {id}"))?;
        let done = Arc::new(AtomicBool::new(false));
        let watching = {
            let done = done.clone();
            let w = swarm.watch(&id, t0, deadline, is_tombstone);
            async move {
                let r = w.await;
                done.store(true, Ordering::SeqCst);
                r
            }
        };
        let stale = async {
            let mut stale = 0usize;
            'rounds: while !done.load(Ordering::SeqCst) {
                for &n in &searchers {
                    if done.load(Ordering::SeqCst) {
                        break 'rounds;
                    }
                    let t = HashSet::from([id.clone()]);
                    let at_s = started.elapsed().as_secs_f64();
                    let searched = search_once(
                        &swarm.nodes[n],
                        &capability,
                        params.limit,
                        shards,
                        &t,
                        &none,
                        at_s,
                    );
                    if let Ok(r) = searched.await {
                        stale += r.sample.found;
                    }
                }
                if searchers.is_empty() {
                    tokio::time::sleep(WATCH_EVERY).await;
                }
            }
            stale
        };
        let (arrivals, stale) = tokio::join!(watching, stale);
        out.stale_results += stale;
        push_arrivals(out, Probe::Revoke, &arrivals?, &id, progress);
    }
    if params.revoke_probes > 0 {
        progress(&format!(
            "revoked {} agents; {} stale results meanwhile",
            params.revoke_probes, out.stale_results
        ));
    }
    Ok(())
}
