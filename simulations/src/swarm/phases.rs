//! The run's phases before the searches: start the nodes and wait until
//! every one has its peers ([`start`], [`ready`]), register the
//! population at their homes ([`populate`]) and wait until it is held
//! ([`converge`]) or announced ([`provided`]).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use agentmesh::registry::import::{ImportLimits, Importer, SERVING_ISSUE_CHUNK};
use anyhow::{bail, Context, Result};
use tokio_util::sync::CancellationToken;

use super::agents::{agent_id, document, normalised};
use super::measure::{gossip_line, memory, mib, peers_line, queries_ended};
use super::node::{bootstrap_of, start_node, statuses, SimNode, Swarm};
use crate::model::{SwarmAgent, SwarmParams};

/// Routing-table peers each node must have before the run goes on (or
/// every other node, in a smaller swarm).
pub const READY_ROUTING_PEERS: usize = 8;
/// Gossip mesh peers each node must have before the run goes on (or
/// every other node, in a smaller swarm).
pub const READY_GOSSIP_PEERS: usize = 3;
/// Nodes that import their share of the population at once.
const REGISTERING_AT_ONCE: usize = 8;
/// How often the bootstrap and convergence waits look.
pub(super) const POLL_EVERY: Duration = Duration::from_millis(250);

pub(super) async fn start(
    params: &SwarmParams,
    dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Swarm> {
    let cancel = CancellationToken::new();
    let (rss0, _) = memory();
    let started = Instant::now();
    let mut nodes: Vec<SimNode> = Vec::with_capacity(params.nodes);
    for i in 0..params.nodes {
        let bootstrap = bootstrap_of(i)
            .into_iter()
            .map(|j| nodes[j].addr.clone())
            .collect();
        nodes.push(start_node(i, dir, bootstrap, params, &cancel).await?);
        if (i + 1) % 100 == 0 || i + 1 == params.nodes {
            let (rss, _) = memory();
            progress(&format!(
                "started {}/{} nodes ({:.1} s; RSS {:.0} MiB)",
                i + 1,
                params.nodes,
                started.elapsed().as_secs_f64(),
                mib(rss)
            ));
        }
    }
    let swarm = Swarm {
        nodes,
        starts: (0..params.nodes).map(|_| AtomicU32::new(0)).collect(),
        cancel,
    };
    let deadline = Duration::from_secs(60) + Duration::from_millis(300) * params.nodes as u32;
    ready(&swarm.nodes, deadline, progress).await?;
    let (rss, _) = memory();
    progress(&format!(
        "bootstrapped {} nodes in {:.1} s; RSS {:.0} MiB ({:.2} MiB per node); {}; stores under {}",
        params.nodes,
        started.elapsed().as_secs_f64(),
        mib(rss),
        mib(rss.saturating_sub(rss0)) / params.nodes as f64,
        peers_line(&swarm).await?,
        dir.display(),
    ));
    Ok(swarm)
}

/// Waits until every node has [`READY_ROUTING_PEERS`] routing-table peers
/// and [`READY_GOSSIP_PEERS`] gossip mesh peers (fewer in a small swarm:
/// all the others), within `deadline`. A node found ready is not asked
/// again (without churn its tables only grow).
pub(super) async fn ready(
    nodes: &[SimNode],
    deadline: Duration,
    progress: &mut dyn FnMut(&str),
) -> Result<()> {
    let others = nodes.len().saturating_sub(1);
    let (routing, gossip) = (
        READY_ROUTING_PEERS.min(others),
        READY_GOSSIP_PEERS.min(others),
    );
    let started = Instant::now();
    let until = started + deadline;
    let mut waiting: Vec<usize> = (0..nodes.len()).collect();
    let mut last = usize::MAX;
    loop {
        let pass = Instant::now();
        let answers = statuses(nodes, &waiting).await?;
        let not_yet: HashSet<usize> = answers
            .iter()
            .filter(|(_, s)| s.routing_table_peers < routing || s.gossip_mesh_peers < gossip)
            .map(|(i, _)| *i)
            .collect();
        waiting.retain(|i| not_yet.contains(i));
        if waiting.is_empty() {
            progress(&format!(
                "bootstrap: every node ready after {:.1} s of waiting",
                started.elapsed().as_secs_f64()
            ));
            return Ok(());
        }
        let ok = nodes.len() - waiting.len();
        if ok != last {
            progress(&format!(
                "bootstrap: {ok}/{} nodes ready (this pass asked {} nodes in {:.2} s)",
                nodes.len(),
                answers.len(),
                pass.elapsed().as_secs_f64()
            ));
            last = ok;
        }
        if Instant::now() >= until {
            bail!(
                "the swarm did not bootstrap in {deadline:?}: {ok}/{} nodes have {routing} \
                 routing-table peers and {gossip} gossip mesh peers",
                nodes.len()
            );
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Registers the population at their home nodes through the node's bulk
/// import (`agentmesh import`, `POST /admin/import`: validated as
/// registrations, issued and signed by the home node in store
/// transactions of [`SERVING_ISSUE_CHUNK`], one flush per batch, each
/// record published through the outbox), a few nodes at a time.
pub(super) async fn populate(
    swarm: &Swarm,
    agents: &[SwarmAgent],
    progress: &mut dyn FnMut(&str),
) -> Result<()> {
    let mut by_home: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, a) in agents.iter().enumerate() {
        by_home.entry(a.home).or_default().push(i);
    }
    let mut homes: Vec<(usize, Vec<usize>)> = by_home.into_iter().collect();
    homes.sort_unstable_by_key(|(h, _)| *h);
    let started = Instant::now();
    let mut done = 0u64;
    for chunk in homes.chunks(REGISTERING_AT_ONCE) {
        let mut set = tokio::task::JoinSet::new();
        for (home, members) in chunk {
            let importer =
                Importer::new(swarm.nodes[*home].registry.clone(), ImportLimits::default())
                    .with_issue_chunk(SERVING_ISSUE_CHUNK);
            let mut ndjson = Vec::new();
            for &i in members {
                let doc = document(i, &agent_id(i), &agents[i].capabilities);
                serde_json::to_writer(&mut ndjson, &doc).context("an NDJSON line")?;
                ndjson.push(b'\n');
            }
            let home = *home;
            set.spawn(async move {
                let (tx, mut rx) = tokio::sync::mpsc::channel(64);
                let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
                let summary = importer.run(ndjson.as_slice(), tx).await;
                let _ = drain.await;
                if summary.refused > 0 || summary.stopped.is_some() {
                    bail!(
                        "node {home}: the import refused {} documents (stopped: {:?})",
                        summary.refused,
                        summary.stopped
                    );
                }
                anyhow::Ok(summary.created)
            });
        }
        while let Some(r) = set.join_next().await {
            done += r.context("an import task")??;
        }
        progress(&format!(
            "registered {done}/{} agents ({:.1} s)",
            agents.len(),
            started.elapsed().as_secs_f64()
        ));
    }
    Ok(())
}

/// Waits until every node holds `count` live agents, within `deadline`;
/// returns how many nodes do.
pub(super) async fn converge(
    swarm: &Swarm,
    count: u64,
    deadline: Duration,
    progress: &mut dyn FnMut(&str),
) -> usize {
    let until = Instant::now() + deadline;
    let started = Instant::now();
    let mut last = usize::MAX;
    loop {
        let held = swarm
            .nodes
            .iter()
            .filter(|n| n.store.len() >= count)
            .count();
        if held == swarm.nodes.len() {
            progress(&format!(
                "population held by every node after {:.1} s; {}",
                started.elapsed().as_secs_f64(),
                gossip_line(swarm)
            ));
            return held;
        }
        if held != last {
            progress(&format!(
                "convergence: {held}/{} nodes hold all {count} agents; {}",
                swarm.nodes.len(),
                gossip_line(swarm)
            ));
            last = held;
        }
        if Instant::now() >= until {
            progress(&format!(
                "convergence deadline {deadline:?} passed: {held}/{} nodes hold all {count} \
                 agents; {}",
                swarm.nodes.len(),
                gossip_line(swarm)
            ));
            return held;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Under replication "lookups" an agent is findable once its home node
/// has announced its capabilities: waits until the nodes' finished
/// `start_providing` queries (whatever their outcome) number the distinct
/// capabilities of each node's agents, within `deadline`.
pub(super) async fn provided(
    swarm: &Swarm,
    agents: &[SwarmAgent],
    deadline: Duration,
    progress: &mut dyn FnMut(&str),
) {
    let mut by_home: HashMap<usize, HashSet<String>> = HashMap::new();
    for a in agents {
        by_home
            .entry(a.home)
            .or_default()
            .extend(normalised(&a.capabilities));
    }
    let want: u64 = by_home.values().map(|c| c.len() as u64).sum();
    let started = Instant::now();
    loop {
        let ended: u64 = swarm
            .nodes
            .iter()
            .map(|n| queries_ended(&n.mesh.stats(), "start_providing"))
            .sum();
        if ended >= want || started.elapsed() >= deadline {
            progress(&format!(
                "{ended} of {want} capability announcements ended after {:.1} s; {}",
                started.elapsed().as_secs_f64(),
                gossip_line(swarm)
            ));
            return;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}
