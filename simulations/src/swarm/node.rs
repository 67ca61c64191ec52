//! One simulated node and the swarm of them: a node is the parts
//! `Node::spawn` wires (its store, issuer, registry and the mesh half
//! through [`start_mesh`]) over libp2p's memory transport; the swarm
//! starts, stops and restarts them (churn) and asks them their status.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agentmesh::config::{Config, P2pConfig};
use agentmesh::issuer::{Issuer, Outbox};
use agentmesh::mesh::{MeshClient, MeshConfig, MeshStatus, MeshTransport, Multiaddr};
use agentmesh::node::{start_mesh, MeshWiring};
use agentmesh::registry::Registry;
use agentmesh::search::FederatedSearch;
use agentmesh::store::{Store, StoreOptions, TextIndexOpen};
use anyhow::{Context, Result};
use ed25519_dalek::SigningKey;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{RngCore, SeedableRng};
use tokio_util::sync::CancellationToken;

use crate::model::SwarmParams;
use crate::scenario::Security;

/// The sled page cache of each node's store.
pub const STORE_CACHE_BYTES: u64 = 2 << 20;
/// Nodes asked for their status at once.
pub(super) const STATUS_AT_ONCE: usize = 64;

/// One node: the parts `Node::spawn` wires, without the API and crawler.
pub(super) struct SimNode {
    pub(super) mesh: MeshClient,
    pub(super) addr: Multiaddr,
    pub(super) registry: Registry,
    pub(super) store: Store,
    pub(super) search: FederatedSearch,
    /// Stops this node's tasks (a child of the swarm's token).
    pub(super) cancel: CancellationToken,
    /// The mesh event loop: a stopped node's address is free once it
    /// ends. `None` once churn stopped the node (until it starts again).
    pub(super) task: Option<tokio::task::JoinHandle<()>>,
}

/// The swarm; cancelled (every node's tasks) on drop.
pub(super) struct Swarm {
    pub(super) nodes: Vec<SimNode>,
    /// How many times churn has started each node again (a watch tells
    /// an arrival after a restart from one before it: a stopped node
    /// writes nothing, so a record seen while it is down arrived before
    /// it stopped).
    pub(super) starts: Arc<[AtomicU32]>,
    pub(super) cancel: CancellationToken,
}

impl Drop for Swarm {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// The node key of node `i`, derived from the run's seed.
pub(super) fn node_key(seed: u64, i: usize) -> SigningKey {
    let mut rng = StdRng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut bytes = [0u8; 32];
    rng.fill_bytes(&mut bytes);
    SigningKey::from_bytes(&bytes)
}

/// The mesh configuration of a simulated node: the node's own defaults
/// (`MeshConfig::from_p2p` of the default `[p2p]`), over memory, on
/// `listen` (a new port when `None`), with the run's connection limit if
/// it sets one, and no trimming if it says so.
pub(super) fn mesh_config(
    listen: Option<&Multiaddr>,
    bootstrap: Vec<Multiaddr>,
    params: &SwarmParams,
) -> Result<MeshConfig> {
    let p2p = P2pConfig {
        listen: vec![listen.map_or_else(|| "/memory/0".to_owned(), ToString::to_string)],
        allow_private_addresses: true,
        ..P2pConfig::default()
    };
    let mut config = MeshConfig::from_p2p(&p2p)?;
    config.transport = match params.security {
        Security::Noise => MeshTransport::Memory,
        Security::Plaintext => MeshTransport::MemoryPlaintext,
    };
    config.bootstrap = bootstrap;
    if let Some(n) = params.max_connections {
        config.limits.set_max_connections(n);
    }
    if !params.trim_connections {
        let l = &mut config.limits;
        (l.connections_low_water, l.connections_high_water) =
            (l.max_connections, l.max_connections);
    }
    Ok(config)
}

/// Opens node `i`'s store under `root` and starts the node.
pub(super) async fn start_node(
    i: usize,
    root: &Path,
    bootstrap: Vec<Multiaddr>,
    params: &SwarmParams,
    cancel: &CancellationToken,
) -> Result<SimNode> {
    let dir = root.join(format!("node-{i:05}"));
    let options = StoreOptions {
        cache_bytes: STORE_CACHE_BYTES,
        // Capability searches walk the filter indexes: no node here
        // ever opens its text index (see the module documentation).
        text_index: TextIndexOpen::AtFirstSearch,
        max_bytes: None,
        // No transparency log: the swarm measures search and gossip.
        log_signer: None,
    };
    let store = tokio::task::spawn_blocking(move || Store::open_with(&dir, &options))
        .await
        .context("the store-open task")?
        .with_context(|| format!("node {i}: opening its store"))?;
    run_node(i, store, None, bootstrap, params, cancel, false).await
}

/// Starts node `i`'s parts over `store`, listening on `listen` (a new
/// address when `None`); a `restart` also runs the republisher, as
/// `agentmesh node` does at every start (at the first start a node has
/// signed nothing yet).
pub(super) async fn run_node(
    i: usize,
    store: Store,
    listen: Option<&Multiaddr>,
    bootstrap: Vec<Multiaddr>,
    params: &SwarmParams,
    swarm_cancel: &CancellationToken,
    restart: bool,
) -> Result<SimNode> {
    let cancel = swarm_cancel.child_token();
    let key = Arc::new(node_key(params.seed, i));
    store.spawn_flusher(Duration::from_secs(1), cancel.clone());
    let node_defaults = Config::default();
    let (outbox, outbox_rx) = Outbox::new(4096);
    let issuer =
        Issuer::new(store.clone(), key.clone(), node_defaults.store.record_ttl).with_outbox(outbox);
    let registry = Registry::new(issuer);
    // The node's own assembly of its mesh half (node::start_mesh), with
    // the run's replication and search budget; no crawler behind it.
    let p2p = P2pConfig {
        replication: params.replication,
        search_timeout: params.search_timeout,
        search_ends_when_full: params.search_ends_when_full,
        ..node_defaults.p2p
    };
    let parts = start_mesh(MeshWiring {
        p2p: &p2p,
        mesh: mesh_config(listen, bootstrap, params)?,
        key: &key,
        store: &store,
        registry: &registry,
        crawl_queue: None,
        outbox: outbox_rx,
        republish: restart,
        witness: None,
        cancel: cancel.clone(),
    })
    .await
    .with_context(|| format!("node {i}: starting its mesh"))?;
    // The publisher and republisher end with `cancel`.
    drop(parts.tasks);
    let (mesh, search, task) = (parts.mesh, parts.search, parts.event_loop);
    let addr = mesh
        .listen_addrs()
        .await?
        .into_iter()
        .next()
        .with_context(|| format!("node {i}: no listen address"))?;
    Ok(SimNode {
        mesh,
        addr,
        registry,
        store,
        search,
        cancel,
        task: Some(task),
    })
}

/// How long a stopped node's event loop may take to end.
pub(super) const STOP_DEADLINE: Duration = Duration::from_secs(10);
/// Live nodes, besides its usual two, a restarted node bootstraps from.
pub(super) const RESTART_BOOTSTRAP_LIVE: usize = 3;

impl Swarm {
    /// Stops node `i` (churn): its tasks are cancelled and its event loop
    /// awaited, so its connections are closed and its address is free.
    pub(super) async fn stop(&mut self, i: usize) -> Result<()> {
        let node = &mut self.nodes[i];
        node.cancel.cancel();
        if let Some(task) = node.task.take() {
            tokio::time::timeout(STOP_DEADLINE, task)
                .await
                .with_context(|| {
                    format!("node {i}: its event loop did not end in {STOP_DEADLINE:?}")
                })?
                .with_context(|| format!("node {i}: its event loop"))?;
        }
        Ok(())
    }

    /// Starts node `i` again on its address and store, bootstrapping from
    /// its usual peers and [`RESTART_BOOTSTRAP_LIVE`] live ones.
    pub(super) async fn restart(
        &mut self,
        i: usize,
        params: &SwarmParams,
        rng: &mut StdRng,
    ) -> Result<()> {
        // Counted before the node runs: whatever it holds from now on
        // may have come after the restart.
        self.starts[i].fetch_add(1, Ordering::SeqCst);
        let live: Vec<usize> = (0..self.nodes.len())
            .filter(|&j| j != i && !self.is_down(j))
            .collect();
        let mut from = bootstrap_of(i);
        from.extend(live.choose_multiple(rng, RESTART_BOOTSTRAP_LIVE).copied());
        from.sort_unstable();
        from.dedup();
        let bootstrap = from.iter().map(|&j| self.nodes[j].addr.clone()).collect();
        let old = &self.nodes[i];
        // Its listen address: what it listened on, without the peer id.
        let (addr, _) = agentmesh::mesh::behaviour::split_peer(&old.addr);
        let store = old.store.clone();
        let node = run_node(i, store, Some(&addr), bootstrap, params, &self.cancel, true)
            .await
            .with_context(|| format!("node {i}: starting again"))?;
        self.nodes[i] = node;
        Ok(())
    }
    /// Node `i` was stopped by churn and has not started again.
    pub(super) fn is_down(&self, i: usize) -> bool {
        self.nodes[i].task.is_none()
    }

    /// The node a search planned at `from` is asked of: `from`, or the
    /// next live node after it.
    pub(super) fn live_from(&self, from: usize) -> usize {
        let n = self.nodes.len();
        (0..n)
            .map(|k| (from + k) % n)
            .find(|&j| !self.is_down(j))
            .unwrap_or(from)
    }
}

/// The nodes node `i` bootstraps from: its parent in a binary tree and
/// its predecessor.
pub(super) fn bootstrap_of(i: usize) -> Vec<usize> {
    if i == 0 {
        return Vec::new();
    }
    let mut v = vec![(i - 1) / 2, i - 1];
    v.dedup();
    v
}

/// Each listed node's mesh status, asked of [`STATUS_AT_ONCE`] nodes at
/// a time: one node's event loop, busy on a loaded machine, does not hold
/// up the others' answers.
pub(super) async fn statuses(
    nodes: &[SimNode],
    which: &[usize],
) -> Result<Vec<(usize, MeshStatus)>> {
    let mut out = Vec::with_capacity(which.len());
    for chunk in which.chunks(STATUS_AT_ONCE) {
        let mut set = tokio::task::JoinSet::new();
        for &i in chunk {
            let mesh = nodes[i].mesh.clone();
            set.spawn(async move { (i, mesh.status().await) });
        }
        while let Some(r) = set.join_next().await {
            let (i, status) = r.context("a status task")?;
            out.push((i, status.with_context(|| format!("node {i}: its status"))?));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bootstrap_tree_reaches_back_to_node_zero() {
        assert!(bootstrap_of(0).is_empty());
        assert_eq!(bootstrap_of(1), vec![0]);
        assert_eq!(bootstrap_of(2), vec![0, 1]);
        assert_eq!(bootstrap_of(6), vec![2, 5]);
        for i in 1..1000 {
            assert!(bootstrap_of(i).iter().all(|j| *j < i));
        }
    }

    #[test]
    fn node_keys_follow_the_seed() {
        assert_eq!(node_key(7, 3).to_bytes(), node_key(7, 3).to_bytes());
        assert_ne!(node_key(7, 3).to_bytes(), node_key(7, 4).to_bytes());
        assert_ne!(node_key(7, 3).to_bytes(), node_key(8, 3).to_bytes());
    }
}
