//! The real-swarm engine: N agentmesh nodes in one process, each made of
//! the node's own parts: a sled [`Store`] with its text index, an
//! [`Issuer`] with its outbox, the [`Registry`], and the mesh half as
//! `Node::spawn` assembles it, through the same function
//! ([`agentmesh::node::start_mesh`]: the federation judge behind the
//! node's handler, the mesh event loop, the publisher and the federated
//! search with the node's fan-out). What a node runs that is left out: the HTTP API,
//! the crawler and its schedulers (no agent here is crawled) and the
//! renewer (no record ages past half its lifetime during a run). The
//! republisher runs when a node starts again after an outage, as
//! `agentmesh node` runs it at every start.
//!
//! The swarms talk over libp2p's in-memory transport
//! ([`MeshTransport::Memory`]: `/memory/N` addresses, noise and yamux as
//! over TCP, the same address policy with private addresses allowed).
//! Node `i > 0` bootstraps from node `(i - 1) / 2` (a binary tree, so the
//! joins spread over the nodes) and node `i - 1` (a ring, so no node
//! hangs on one link); Kademlia's own bootstrap fills the routing tables.
//! Every wait is on a condition with a deadline: routing tables and
//! gossip meshes formed ([`READY_ROUTING_PEERS`],
//! [`READY_GOSSIP_PEERS`]), the population held everywhere, a probe's
//! record at each node.
//!
//! Storage: each node's sled directory lives under one temporary
//! directory, in `/dev/shm` (memory-backed) when it exists, else the
//! system's temporary directory, named with the process id
//! ([`TEMP_PREFIX`]); removed when the run ends, also when a SIGINT or
//! SIGTERM stops it ([`Interrupted`]). A run first removes the
//! directories of runs whose process is gone ([`remove_stale_dirs`]:
//! one killed with SIGKILL, or a crash). Each store's sled page cache is
//! bounded at [`STORE_CACHE_BYTES`].
//!
//! One setting of the node's parts differs from `agentmesh node`'s, for
//! memory, not for what a search or a gossip message does: each store
//! opens its text index at its first text search
//! ([`TextIndexOpen::AtFirstSearch`]) rather than with the store. The
//! swarm's searches are capability searches, which walk the filter
//! indexes, so no node here ever opens one; with it, each node held a
//! tantivy writer (its arena and term table while documents are
//! uncommitted) and ~11 threads: 41 MiB per node instead of 12 at 50
//! nodes with 500 agents.
//!
//! What a node's memory then goes with is its connections: gossipsub
//! holds a stream open on every connection to a peer subscribed to the
//! records topic, so no connection is ever idle, and every peer a
//! node's bootstrap and lookups touched stays connected up to the
//! node's limit (`MeshLimits::max_connections`, 256, or the run's
//! [`SwarmParams::max_connections`]: a node at it refuses further
//! connections, Kademlia's dials among them). At 200 nodes every
//! node was connected to all 199 others, ~90 KiB per connection end
//! (noise, yamux and the protocol handlers' buffers), 18 MiB per node
//! before any agent; and flood publishing reaches every node in one hop
//! while the swarm is below the limit.
//!
//! Replication is the node's default (`p2p.replication = "all"`: every
//! node stores every record gossip brings it) unless the run says
//! `"lookups"` (a node stores its own registrations and what its searches
//! brought it); either way a search's page is ranked from what the asker
//! holds plus what its providers answered, exactly as `agentmesh node`
//! answers `POST /agents/search`.
//!
//! Churn ([`SwarmParams::outages`], each an [`Outage`]) is played during
//! the search phase, which then keeps to the searches' planned times: a
//! stop cancels the node's tasks and waits for its event loop to end (its
//! connections close, its peers' requests to it fail); a start builds the
//! node again on the same store, key and memory address, bootstrapping
//! from its two usual peers and [`RESTART_BOOTSTRAP_LIVE`] live ones, and
//! runs the republisher. A search planned at a node that is down is asked
//! of the next live node (as in the DES). Under churn the probes are
//! played on the same timeline, at their planned times
//! ([`SwarmParams::publish_at`], [`SwarmParams::revoke_at`]): a probe is
//! published at its home or, if the home is down, at the next live node
//! (as in the DES); an agent whose home is down when it is revoked is
//! tombstoned when its home starts again (only the home holds its
//! registration), and counted ([`SwarmOutcome::revocations_deferred`]);
//! the arrivals are watched at the nodes live at that moment, while the
//! churn goes on, and a search counts the revoked agents on its page as
//! stale, as the DES does. After the last search the churn goes on until
//! the last probe's deadline; then the nodes still down start again and
//! the run waits until every node has its peers.
//!
//! The run, in order: start and bootstrap the nodes; register the
//! starting population at their home nodes (through the node's bulk
//! import, so through the issuer: signed with the home node's key,
//! stored, flushed and published); wait until every node
//! holds all of it (under `"lookups"`: until the home nodes' capability
//! announcements have ended); run the searches one at a time, with the
//! churn if any, (so each one's
//! counters at its asking node are its own); without churn, publish the
//! probes one at a time and time their arrival at every node, then
//! tombstone the revoke probes one at a time and time their
//! disappearance at every node, while mesh searches from a few other
//! nodes count the stale results they still return (under churn the
//! probes ran during the search phase, above).
//!
//! What is measured, and how:
//! - a search's latency is its `FederatedSearch::search` call (the mesh
//!   half within `search_timeout`, then the local ranking); `found`
//!   counts the distinct ground-truth agents on its page;
//! - `lookup_requests` are the Kademlia requests of the provider lookup's
//!   shard queries, read from the asking node's counters once all its
//!   shard queries ended, and of those the failed ones (libp2p's
//!   `QueryStats::num_failures`: dial failures, peer timeouts, closed
//!   connections); `messages` = those + search requests sent +
//!   answers received; `bytes` = the asking node's transport bytes (both
//!   directions, every protocol) while the search ran; hops are not known
//!   (rust-libp2p's query statistics do not count them);
//! - propagation and revocation: every node's store is read every
//!   [`WATCH_EVERY`] from the moment the registration (deletion) is
//!   called at the home node, so the home node's value is the call's own
//!   time (signed, stored, flushed); a node not reached by the deadline is
//!   left out of the figures and reported in a progress line. Under
//!   churn, a node live at the call that got the record only after it
//!   had been stopped and started again (its home's republish, a later
//!   search, gossip's IHAVE) is counted apart
//!   ([`SwarmOutcome::propagation_recovered`]), not in the times: the
//!   DES, which delivers gossip to live nodes only, counts such a node
//!   as not reached, and the coverage of both engines means the share
//!   reached while up.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use agentmesh::config::{Config, P2pConfig, Replication};
use agentmesh::issuer::{Issuer, Outbox};
use agentmesh::mesh::{
    MeshClient, MeshConfig, MeshStatus, MeshTransport, Multiaddr, StatsSnapshot,
};
use agentmesh::node::{start_mesh, MeshWiring};
use agentmesh::record::RecordBody;
use agentmesh::registry::import::{ImportLimits, Importer, SERVING_ISSUE_CHUNK};
use agentmesh::registry::{Registry, SearchQuery};
use agentmesh::search::{Asked, FederatedSearch, Scope};
use agentmesh::store::{Filter, Store, StoreOptions, TextIndexOpen};
use anyhow::{bail, Context, Result};
use ed25519_dalek::SigningKey;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{RngCore, SeedableRng};
use tokio_util::sync::CancellationToken;

use crate::population::SearchKind;
use crate::scenario::Security;

/// One agent of the simulated population.
#[derive(Debug, Clone)]
pub struct SwarmAgent {
    /// Index of the node that registers it (its home registry), 0..nodes.
    pub home: usize,
    /// Its capabilities (names from the scenario's vocabulary, e.g. "cap-17").
    pub capabilities: Vec<String>,
}

/// One capability search to run after the population has converged.
#[derive(Debug, Clone)]
pub struct SwarmSearch {
    /// Index of the node that is asked (over its own search path); if it
    /// is down (churn), the next live node is asked.
    pub from: usize,
    /// The capability searched for (one filter term).
    pub capability: String,
    /// When it runs, from the start of the search phase. Only a run with
    /// [`SwarmParams::outages`] keeps to it; without churn the searches
    /// run back to back.
    pub at: Duration,
    /// Why it runs (the report splits recall by it).
    pub kind: SearchKind,
}

/// One node's time away (churn): at `down_at` its mesh, publisher and
/// flusher stop, as when `agentmesh node` is stopped (its connections
/// close, its peers' dials fail); at `up_at` it starts again as the node
/// does after a restart: the same key, store and address, a new swarm
/// (empty routing table and Kademlia store), bootstrapping from its usual
/// peers and a few live ones, and the republisher putting its own records
/// back in the DHT. Both times count from the start of the search phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outage {
    /// The node.
    pub node: usize,
    /// When it stops.
    pub down_at: Duration,
    /// When it starts again.
    pub up_at: Duration,
}

/// What the real-swarm engine runs.
#[derive(Debug, Clone)]
pub struct SwarmParams {
    /// Nodes in the swarm.
    pub nodes: usize,
    /// The starting population, registered at their home nodes before searches start.
    pub agents: Vec<SwarmAgent>,
    /// The searches, run after the population converged.
    pub searches: Vec<SwarmSearch>,
    /// Agents published after the population converged; the time from publish
    /// until each live node holds the record is measured.
    pub publish_probes: Vec<SwarmAgent>,
    /// Under churn, when each publish probe is published, from the start
    /// of the search phase (one per probe, as the searches' `at`): the
    /// probes then go out while nodes stop and start. Without churn they
    /// are published one after the other once the searches are done, and
    /// this is not read.
    pub publish_at: Vec<Duration>,
    /// The first `revoke_probes` agents of `agents` are tombstoned after
    /// convergence; the time until each live node no longer returns them is measured.
    pub revoke_probes: usize,
    /// Under churn, when they are tombstoned, from the start of the
    /// search phase (an agent whose home is down then is tombstoned when
    /// its home starts again: only the home holds its registration).
    /// Without churn, not read.
    pub revoke_at: Duration,
    /// Results asked per search (the `top`/limit).
    pub limit: usize,
    /// Deadline of one search.
    pub search_timeout: std::time::Duration,
    /// Established connections per node (`MeshLimits::max_connections`);
    /// `None`: the node's default. The trimming marks follow it
    /// (`MeshLimits::set_max_connections`).
    pub max_connections: Option<u32>,
    /// Whether nodes trim connections over the high-water mark (the
    /// node's behaviour); false keeps every connection up to the limit.
    pub trim_connections: bool,
    /// The connections' security handshake: noise, as the node, or
    /// plaintext ([`MeshTransport::MemoryPlaintext`]).
    pub security: Security,
    /// What nodes keep of gossiped records (`p2p.replication`).
    pub replication: Replication,
    /// Churn during the search phase, in no particular order (empty: no
    /// churn). Nodes still down after the last search come back before
    /// the probes.
    pub outages: Vec<Outage>,
    /// Seeds the node keys and the sampling of the stale-result searches.
    pub seed: u64,
}

/// One search's outcome.
#[derive(Debug, Clone)]
pub struct SearchSample {
    /// Distinct live agents with the capability that the search returned.
    pub found: usize,
    /// Live agents with the capability in the population (ground truth), capped at `limit`
    /// (recall = found / min(expected, limit)).
    pub expected: usize,
    /// From the search's call until its ranked page, in milliseconds.
    pub latency_ms: f64,
    /// Kademlia requests the provider lookup sent (0 when no lookup ran).
    pub lookup_requests: u32,
    /// Of those, the requests that failed: no answer within the peer
    /// timeout, a dial refused (a down node, a connection limit), a
    /// connection closed before the answer.
    pub lookup_failed: u32,
    /// Hops of the lookup to its first answer, if known.
    pub lookup_hops: Option<u32>,
    /// Messages the search sent in all (lookup requests + search requests + answers).
    pub messages: u32,
    /// Bytes the asking node sent and received while the search ran.
    pub bytes: u64,
}

/// One search as an engine saw it (both engines' CSV rows and plots).
#[derive(Debug, Clone)]
pub struct SearchRecord {
    /// When it started, s: virtual time (DES), or wall-clock time since
    /// the run started (swarm).
    pub at_s: f64,
    /// Why it ran.
    pub kind: SearchKind,
    /// What it measured.
    pub sample: SearchSample,
    /// Revoked agents among its results.
    pub stale: usize,
    /// Results in a forger's version of the agent (DES takeover scenarios;
    /// 0 in a swarm, which runs no adversaries). `sample.found` counts the
    /// owners' versions only.
    pub taken_over: usize,
    /// Peers asked.
    pub asked: u32,
    /// Peers that answered in time.
    pub answered: u32,
    /// It asked providers (else connected peers).
    pub asked_providers: bool,
}

/// What the real-swarm engine measured.
#[derive(Debug, Clone, Default)]
pub struct SwarmOutcome {
    /// One record per search of the scenario, in order (all of the base
    /// workload: the stale-result searches during revocations are
    /// counted in `stale_results` only).
    pub searches: Vec<SearchRecord>,
    /// One value per (probe, live node): ms from publish until that node held the record.
    pub propagation_ms: Vec<f64>,
    /// One value per (revoked agent, live node): ms from tombstone until that node stopped
    /// returning it.
    pub revocation_ms: Vec<f64>,
    /// Results still returning a revoked agent while revocation propagated.
    pub stale_results: usize,
    /// (probe, node) pairs the record had not reached by the deadline.
    pub propagation_unreached: usize,
    /// (revoked agent, node) pairs the tombstone had not reached by the
    /// deadline.
    pub revocation_unreached: usize,
    /// (probe, node) pairs, of nodes live at publication, where the
    /// record arrived only after churn had stopped the node and started
    /// it again: not in `propagation_ms` (see the module notes).
    pub propagation_recovered: usize,
    /// The same for the tombstones.
    pub revocation_recovered: usize,
    /// Revoked agents whose home was down at the planned time, tombstoned
    /// when it started again.
    pub revocations_deferred: usize,
    /// Starting the nodes and waiting until every one has its routing
    /// table and gossip mesh peers, in seconds.
    pub bootstrap_s: f64,
    /// Registering the population and waiting until every node holds it,
    /// in seconds.
    pub populate_s: f64,
    /// The process's resident memory once every node holds the
    /// population, less what it held before the first node started, per
    /// node, in MiB.
    pub rss_per_node_mb: f64,
    /// Outages carried out (a node stopped and started again).
    pub restarts: usize,
    /// Searches whose node was down, asked of the next live node instead.
    pub searches_moved: usize,
    /// The whole run, in seconds.
    pub wall_s: f64,
}

/// Most nodes one run starts (threads and memory maps per node bound it
/// well before this; see the crate's notes).
pub const MAX_NODES: usize = 4096;
/// Most results a search asks for (the API's own page bound).
pub const MAX_LIMIT: usize = 1000;
/// The sled page cache of each node's store.
pub const STORE_CACHE_BYTES: u64 = 2 << 20;
/// Routing-table peers each node must have before the run goes on (or
/// every other node, in a smaller swarm).
pub const READY_ROUTING_PEERS: usize = 8;
/// Gossip mesh peers each node must have before the run goes on (or
/// every other node, in a smaller swarm).
pub const READY_GOSSIP_PEERS: usize = 3;
/// Nodes that import their share of the population at once.
const REGISTERING_AT_ONCE: usize = 8;
/// Nodes that run mesh searches while a revocation propagates.
const STALE_SEARCHERS: usize = 8;
/// How often a watch looks at the nodes' stores.
pub const WATCH_EVERY: Duration = Duration::from_millis(2);
/// Nodes asked for their status at once.
const STATUS_AT_ONCE: usize = 64;
/// How often the bootstrap and convergence waits look.
const POLL_EVERY: Duration = Duration::from_millis(250);

/// Runs N real node swarms in one process; `progress` gets short status lines
/// (the caller draws the progress bar on stderr).
///
/// # Errors
/// Parameters out of range (which one and why), a node that cannot start,
/// the swarm not bootstrapping by its deadline, or [`Interrupted`] (a
/// SIGINT or SIGTERM while it ran; the stores are removed all the same).
pub fn run(params: &SwarmParams, progress: &mut dyn FnMut(&str)) -> anyhow::Result<SwarmOutcome> {
    check(params)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("swarm")
        .build()
        .context("starting the swarm's runtime")?;
    let dir = temp_root(progress)?;
    let running = Running::start();
    // A signal drops the run (and so cancels every node) instead of
    // killing the process with the stores still in memory.
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = run_async(params, dir.path(), progress) => outcome,
            signal = interrupted() => Err(anyhow::Error::new(signal)),
        }
    });
    // Blocking-pool threads parked in sled or tantivy are not waited for.
    runtime.shutdown_timeout(Duration::from_secs(5));
    // Only now that the nodes' tasks are gone can their directories go.
    drop(dir);
    match (outcome, running.end()) {
        (Ok(_), Some(signal)) => Err(anyhow::Error::new(signal)),
        (outcome, _) => outcome,
    }
}

/// The signals' fate outside a swarm run. Tokio's handler, once a run has
/// installed it, stays installed for the life of the process: without
/// this, a Ctrl-C while the report is written would reach no one and be
/// lost. So SIGINT and SIGTERM also exit
/// the process at once (130, 143) whenever no run is in progress, and a
/// signal that came after a run's searches ended but before its stores
/// were removed turns its outcome into [`Interrupted`].
struct Running;

/// What [`Running`] shares with the signal handlers.
struct SignalState {
    /// Runs in progress (tests run several at once, on threads of one
    /// process).
    runs: std::sync::Mutex<usize>,
    /// True while no run is in progress: the handlers then exit.
    exit_now: Arc<AtomicBool>,
    /// The last signal's number since the first of the runs in progress
    /// began, 0 if none.
    seen: Arc<AtomicUsize>,
}

impl Running {
    fn state() -> &'static SignalState {
        static STATE: OnceLock<SignalState> = OnceLock::new();
        STATE.get_or_init(|| {
            let state = SignalState {
                runs: std::sync::Mutex::new(0),
                exit_now: Arc::new(AtomicBool::new(false)),
                seen: Arc::new(AtomicUsize::new(0)),
            };
            #[cfg(unix)]
            for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
                let code = Interrupted { signal }.exit_code();
                // Without a handler the signal keeps tokio's fate alone:
                // a run still stops on it, as before.
                let _ = signal_hook::flag::register_conditional_shutdown(
                    signal,
                    code,
                    Arc::clone(&state.exit_now),
                );
                let _ = signal_hook::flag::register_usize(
                    signal,
                    Arc::clone(&state.seen),
                    usize::try_from(signal).unwrap_or(0),
                );
            }
            state
        })
    }

    fn start() -> Running {
        let state = Running::state();
        let mut runs = state.runs.lock().unwrap_or_else(|e| e.into_inner());
        if *runs == 0 {
            state.seen.store(0, Ordering::SeqCst);
        }
        *runs += 1;
        state.exit_now.store(false, Ordering::SeqCst);
        Running
    }

    /// Ends this run; the signal that came during it, if any.
    fn end(self) -> Option<Interrupted> {
        // From the drop on a signal exits (if no other run is in
        // progress); one that came just before is read here, so none
        // falls between the two.
        drop(self);
        match i32::try_from(Running::state().seen.load(Ordering::SeqCst)) {
            Ok(0) | Err(_) => None,
            Ok(signal) => Some(Interrupted { signal }),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let state = Running::state();
        let mut runs = state.runs.lock().unwrap_or_else(|e| e.into_inner());
        *runs = runs.saturating_sub(1);
        if *runs == 0 {
            state.exit_now.store(true, Ordering::SeqCst);
        }
    }
}

fn check(p: &SwarmParams) -> Result<()> {
    if p.nodes == 0 || p.nodes > MAX_NODES {
        bail!("nodes: {} is not in 1..={MAX_NODES}", p.nodes);
    }
    if p.limit == 0 || p.limit > MAX_LIMIT {
        bail!("limit: {} is not in 1..={MAX_LIMIT}", p.limit);
    }
    if p.search_timeout.is_zero() || p.search_timeout > Duration::from_secs(60) {
        bail!("search_timeout: must be above zero and at most 60 s (the node's bound)");
    }
    if p.max_connections == Some(0) {
        bail!("max_connections: 0 would leave every node alone");
    }
    if p.revoke_probes > p.agents.len() {
        bail!(
            "revoke_probes: {} is more than the {} agents",
            p.revoke_probes,
            p.agents.len()
        );
    }
    for (what, list) in [("agents", &p.agents), ("publish_probes", &p.publish_probes)] {
        for (i, a) in list.iter().enumerate() {
            if a.home >= p.nodes {
                bail!(
                    "{what}[{i}].home: {} is not a node (0..{})",
                    a.home,
                    p.nodes
                );
            }
            if a.capabilities.is_empty() {
                bail!("{what}[{i}].capabilities: an agent needs at least one");
            }
        }
    }
    check_outages(p)?;
    if !p.outages.is_empty() && p.publish_at.len() != p.publish_probes.len() {
        bail!(
            "publish_at: {} times for {} publish probes (under churn each probe needs its time)",
            p.publish_at.len(),
            p.publish_probes.len()
        );
    }
    if p.replication == Replication::Lookups
        && (!p.publish_probes.is_empty() || p.revoke_probes > 0)
    {
        bail!(
            "publish_probes, revoke_probes: under replication \"lookups\" only an agent's home \
             node stores its record, so there is no arrival at the other nodes to time"
        );
    }
    for (i, s) in p.searches.iter().enumerate() {
        if s.from >= p.nodes {
            bail!(
                "searches[{i}].from: {} is not a node (0..{})",
                s.from,
                p.nodes
            );
        }
        if s.capability.trim().is_empty() {
            bail!("searches[{i}].capability: empty");
        }
    }
    Ok(())
}

/// Each outage names a node, ends after it starts, and does not overlap
/// the node's other outages.
fn check_outages(p: &SwarmParams) -> Result<()> {
    let mut by_node: Vec<&Outage> = p.outages.iter().collect();
    by_node.sort_by_key(|o| (o.node, o.down_at));
    for (i, o) in by_node.iter().enumerate() {
        if o.node >= p.nodes {
            bail!("outages: node {} is not a node (0..{})", o.node, p.nodes);
        }
        if o.up_at <= o.down_at {
            bail!(
                "outages: node {} comes back at {:?}, not after it stops ({:?})",
                o.node,
                o.up_at,
                o.down_at
            );
        }
        if let Some(next) = by_node.get(i + 1).filter(|n| n.node == o.node) {
            if next.down_at < o.up_at {
                bail!(
                    "outages: node {} stops at {:?}, before its outage from {:?} ends",
                    o.node,
                    next.down_at,
                    o.down_at
                );
            }
        }
    }
    Ok(())
}

/// One node: the parts `Node::spawn` wires, without the API and crawler.
struct SimNode {
    mesh: MeshClient,
    addr: Multiaddr,
    registry: Registry,
    store: Store,
    search: FederatedSearch,
    /// Stops this node's tasks (a child of the swarm's token).
    cancel: CancellationToken,
    /// The mesh event loop: a stopped node's address is free once it
    /// ends. `None` once churn stopped the node (until it starts again).
    task: Option<tokio::task::JoinHandle<()>>,
}

/// The swarm; cancelled (every node's tasks) on drop.
struct Swarm {
    nodes: Vec<SimNode>,
    /// How many times churn has started each node again (a watch tells
    /// an arrival after a restart from one before it: a stopped node
    /// writes nothing, so a record seen while it is down arrived before
    /// it stopped).
    starts: Arc<[AtomicU32]>,
    cancel: CancellationToken,
}

impl Drop for Swarm {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// How a run's temporary directory is named: this prefix, the process
/// id, `-`, and tempfile's random suffix (`agentmesh-swarm-4242-Xa9cQ1`).
pub const TEMP_PREFIX: &str = "agentmesh-swarm-";

/// Where the node stores go: `/dev/shm` (memory-backed) when it exists,
/// else the system's temporary directory.
pub fn temp_base() -> PathBuf {
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir() {
        shm
    } else {
        std::env::temp_dir()
    }
}

/// The temporary directory the node stores live under (see the module
/// documentation), after removing those of dead runs.
fn temp_root(progress: &mut dyn FnMut(&str)) -> Result<tempfile::TempDir> {
    let base = temp_base();
    for dir in remove_stale_dirs(&base) {
        progress(&format!(
            "removed {}, left by a run that is gone",
            dir.display()
        ));
    }
    tempfile::Builder::new()
        .prefix(&format!("{TEMP_PREFIX}{}-", std::process::id()))
        .tempdir_in(&base)
        .with_context(|| format!("a temporary directory under {}", base.display()))
}

/// Removes the run directories under `base` whose process is gone: named
/// [`TEMP_PREFIX`]`<pid>-…` with no `/proc/<pid>`. Only where `/proc`
/// exists (Linux), and never a directory named otherwise (one of a run
/// before the pid was in the name) or of a live process, whatever it runs
/// now. A run in another pid namespace sharing `base` would look dead:
/// this assumes one machine's runs. Answers the directories removed.
pub fn remove_stale_dirs(base: &std::path::Path) -> Vec<PathBuf> {
    let proc_ = std::path::Path::new("/proc");
    if !proc_.join("self").exists() {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(base) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(TEMP_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let path = entry.path();
        if pid == std::process::id() || proc_.join(pid.to_string()).exists() || !path.is_dir() {
            continue;
        }
        if std::fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// A run stopped by SIGINT (Ctrl-C) or SIGTERM: its node stores were
/// removed; the CLI exits with [`Interrupted::exit_code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupted {
    /// The signal's number (2 or 15).
    pub signal: i32,
}

impl Interrupted {
    /// 128 + the signal's number, as a shell reports a process it killed
    /// (130 for Ctrl-C, 143 for SIGTERM).
    pub fn exit_code(self) -> i32 {
        128 + self.signal
    }
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "interrupted by signal {}; the node stores are removed",
            self.signal
        )
    }
}

impl std::error::Error for Interrupted {}

/// Resolves at the first SIGINT or SIGTERM, with its number; never if
/// neither can be listened for.
async fn interrupted() -> Interrupted {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(mut int), Ok(mut term)) => tokio::select! {
                _ = int.recv() => Interrupted { signal: 2 },
                _ = term.recv() => Interrupted { signal: 15 },
            },
            _ => std::future::pending().await,
        }
    }
    #[cfg(not(unix))]
    {
        match tokio::signal::ctrl_c().await {
            Ok(()) => Interrupted { signal: 2 },
            Err(_) => std::future::pending().await,
        }
    }
}

/// The node key of node `i`, derived from the run's seed.
fn node_key(seed: u64, i: usize) -> SigningKey {
    let mut rng = StdRng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut bytes = [0u8; 32];
    rng.fill_bytes(&mut bytes);
    SigningKey::from_bytes(&bytes)
}

/// The mesh configuration of a simulated node: the node's own defaults
/// (`MeshConfig::from_p2p` of the default `[p2p]`), over memory, on
/// `listen` (a new port when `None`), with the run's connection limit if
/// it sets one, and no trimming if it says so.
fn mesh_config(
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
async fn start_node(
    i: usize,
    root: &std::path::Path,
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
async fn run_node(
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
const STOP_DEADLINE: Duration = Duration::from_secs(10);
/// Live nodes, besides its usual two, a restarted node bootstraps from.
const RESTART_BOOTSTRAP_LIVE: usize = 3;

impl Swarm {
    /// Stops node `i` (churn): its tasks are cancelled and its event loop
    /// awaited, so its connections are closed and its address is free.
    async fn stop(&mut self, i: usize) -> Result<()> {
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
    async fn restart(&mut self, i: usize, params: &SwarmParams, rng: &mut StdRng) -> Result<()> {
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

    /// Watches, from `t0`, the stores of the nodes live now (see
    /// [`watch`]).
    fn watch(
        &self,
        id: &str,
        t0: Instant,
        deadline: Duration,
        holds: fn(&RecordBody) -> bool,
    ) -> impl std::future::Future<Output = Result<Vec<Option<Arrival>>>> + Send + 'static {
        let watched = (0..self.nodes.len())
            .filter(|&i| !self.is_down(i))
            .map(|i| Watched {
                node: i,
                store: self.nodes[i].store.clone(),
                starts: self.starts[i].load(Ordering::SeqCst),
            })
            .collect();
        watch(
            watched,
            self.starts.clone(),
            id.to_owned(),
            t0,
            deadline,
            holds,
        )
    }

    /// Node `i` was stopped by churn and has not started again.
    fn is_down(&self, i: usize) -> bool {
        self.nodes[i].task.is_none()
    }

    /// The node a search planned at `from` is asked of: `from`, or the
    /// next live node after it.
    fn live_from(&self, from: usize) -> usize {
        let n = self.nodes.len();
        (0..n)
            .map(|k| (from + k) % n)
            .find(|&j| !self.is_down(j))
            .unwrap_or(from)
    }
}

/// The nodes node `i` bootstraps from: its parent in a binary tree and
/// its predecessor.
fn bootstrap_of(i: usize) -> Vec<usize> {
    if i == 0 {
        return Vec::new();
    }
    let mut v = vec![(i - 1) / 2, i - 1];
    v.dedup();
    v
}

/// Resident and peak memory of this process, in bytes (Linux; zeros
/// elsewhere).
pub fn memory() -> (u64, u64) {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return (0, 0);
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

async fn start(
    params: &SwarmParams,
    dir: &std::path::Path,
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

/// Each listed node's mesh status, asked of [`STATUS_AT_ONCE`] nodes at
/// a time: one node's event loop, busy on a loaded machine, does not hold
/// up the others' answers.
async fn statuses(nodes: &[SimNode], which: &[usize]) -> Result<Vec<(usize, MeshStatus)>> {
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

/// Waits until every node has [`READY_ROUTING_PEERS`] routing-table peers
/// and [`READY_GOSSIP_PEERS`] gossip mesh peers (fewer in a small swarm:
/// all the others), within `deadline`. A node found ready is not asked
/// again (without churn its tables only grow).
async fn ready(
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

/// The agent id of population member `i`.
fn agent_id(i: usize) -> String {
    format!("sim-agent-{i:07}")
}

/// The agent id of publish probe `j`.
fn probe_id(j: usize) -> String {
    format!("sim-probe-{j:05}")
}

/// A valid AIDIP registration with `id` and `capabilities` (the rest
/// from the testbed's synthetic population).
fn document(i: usize, id: &str, capabilities: &[String]) -> serde_json::Value {
    let mut doc = agentmesh::testbed::synthetic_agent(i);
    doc["id"] = serde_json::json!(id);
    doc["capabilities"] = serde_json::json!(capabilities);
    doc
}

/// The capabilities as the node stores them (lower-cased, trimmed,
/// deduplicated).
fn normalised(capabilities: &[String]) -> Vec<String> {
    agentmesh::descriptor::normalise_terms(capabilities.iter().map(String::as_str))
}

/// Registers the population at their home nodes through the node's bulk
/// import (`agentmesh import`, `POST /admin/import`: validated as
/// registrations, issued and signed by the home node in store
/// transactions of [`SERVING_ISSUE_CHUNK`], one flush per batch, each
/// record published through the outbox), a few nodes at a time.
async fn populate(
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

/// A line of the swarm's gossip verdicts, summed over the nodes: what
/// explains a record that did not arrive somewhere.
fn gossip_line(swarm: &Swarm) -> String {
    let mut accepted = 0u64;
    let mut ignored: std::collections::BTreeMap<String, u64> = Default::default();
    let mut rejected = 0u64;
    let mut queries: std::collections::BTreeMap<String, u64> = Default::default();
    for n in &swarm.nodes {
        let s = n.mesh.stats();
        for (kind, outcomes) in &s.kad_queries {
            for (outcome, v) in outcomes {
                *queries.entry(format!("{kind}/{outcome}")).or_default() += v;
            }
        }
        accepted += s.gossip.accepted;
        rejected += s.gossip.rejected_total();
        for (k, v) in s.gossip.ignored {
            *ignored.entry(k).or_default() += v;
        }
    }
    format!(
        "gossip over all nodes: {accepted} accepted, {rejected} rejected, ignored {ignored:?}; \
         Kademlia queries ended: {queries:?}"
    )
}

/// A line of the search requests over all nodes: sent, failed and timed
/// out at the askers, served and refused (by reason) at the peers asked,
/// the dials that failed, the incoming connections refused or failed, and
/// the connections trimmed: what explains a search whose peers did not
/// answer.
fn serving_line(swarm: &Swarm) -> String {
    let (mut sent, mut failed, mut timed_out, mut served, mut dial_failures) = (0, 0, 0, 0, 0);
    let (mut incoming_failures, mut trimmed) = (0, 0);
    let mut refused: std::collections::BTreeMap<String, u64> = Default::default();
    let mut failed_by: std::collections::BTreeMap<String, u64> = Default::default();
    for n in &swarm.nodes {
        let s = n.mesh.stats();
        sent += s.requests_sent;
        failed += s.requests_failed;
        for (k, v) in s.requests_failed_by {
            *failed_by.entry(k).or_default() += v;
        }
        timed_out += s.requests_timed_out;
        served += s.searches_served;
        dial_failures += s.dial_failures;
        incoming_failures += s.incoming_failures;
        trimmed += s.connections_trimmed;
        for (k, v) in s.searches_refused {
            *refused.entry(k).or_default() += v;
        }
    }
    format!(
        "search requests over all nodes: {sent} sent, {failed} failed {failed_by:?}, {timed_out} timed out; \
         {served} served, refused {refused:?}; {dial_failures} dials failed, \
         {incoming_failures} incoming connections failed or refused, {trimmed} trimmed"
    )
}

/// A line of the swarm's mean connections, routing-table peers, gossip
/// mesh peers and DHT records per node: what a node's memory goes with.
async fn peers_line(swarm: &Swarm) -> Result<String> {
    let (mut connected, mut routing, mut mesh, mut dht, mut max_connected) = (0, 0, 0, 0, 0);
    let all: Vec<usize> = (0..swarm.nodes.len()).collect();
    for (_, s) in statuses(&swarm.nodes, &all).await? {
        connected += s.connected_peers;
        max_connected = max_connected.max(s.connected_peers);
        routing += s.routing_table_peers;
        mesh += s.gossip_mesh_peers;
        dht += s.dht_records;
    }
    let n = swarm.nodes.len().max(1) as f64;
    Ok(format!(
        "per node: {:.1} connected peers (most {max_connected}), {:.1} in the routing table, \
         {:.1} gossip mesh peers, {:.1} DHT records",
        connected as f64 / n,
        routing as f64 / n,
        mesh as f64 / n,
        dht as f64 / n
    ))
}

/// Waits until every node holds `count` live agents, within `deadline`;
/// returns how many nodes do.
async fn converge(
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
async fn provided(
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

/// Finished Kademlia queries of `kind` in a snapshot, whatever their outcome.
fn queries_ended(s: &StatsSnapshot, kind: &str) -> u64 {
    s.kad_queries.get(kind).map_or(0, |m| m.values().sum())
}

/// Kademlia requests of the provider lookups in a snapshot: sent, and of
/// those failed.
fn provider_requests(s: &StatsSnapshot) -> (u64, u64) {
    let of =
        |m: &std::collections::BTreeMap<String, u64>| m.get("get_providers").copied().unwrap_or(0);
    (of(&s.kad_requests_sent), of(&s.kad_requests_failed))
}

/// Runs one search from its node; `truth` holds the live agents of its
/// capability, `revoked` the agents tombstoned so far (stale on a page);
/// `at_s` is when it starts (s since the run started).
async fn search_once(
    node: &SimNode,
    capability: &str,
    limit: usize,
    shards: u32,
    truth: &HashSet<String>,
    revoked: &HashSet<String>,
    at_s: f64,
) -> Result<SearchRecord> {
    let query = SearchQuery {
        filter: Filter {
            capabilities: normalised(&[capability.to_owned()]),
            ..Filter::default()
        },
        query: None,
        after: None,
        limit,
    };
    let before = node.mesh.stats();
    let t0 = Instant::now();
    let outcome = node.search.search(&query, Scope::Mesh).await?;
    let latency = t0.elapsed();
    let report = outcome.mesh;
    let looked_up = report
        .as_ref()
        .is_some_and(|r| r.whom != Asked::Nobody && !query.filter.capabilities.is_empty());
    // The lookup's shard queries end (and are counted) as the loop
    // stops them, just after the lookup answered.
    let mut after = node.mesh.stats();
    if looked_up {
        let want = queries_ended(&before, "get_providers") + u64::from(shards);
        let until = Instant::now() + Duration::from_secs(10);
        while queries_ended(&after, "get_providers") < want && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(5)).await;
            after = node.mesh.stats();
        }
    }
    let ((sent_after, failed_after), (sent_before, failed_before)) =
        (provider_requests(&after), provider_requests(&before));
    let lookup_requests = sent_after.saturating_sub(sent_before);
    let lookup_failed = failed_after.saturating_sub(failed_before);
    let found: HashSet<&str> = outcome
        .page
        .items
        .iter()
        .map(|s| s.id.as_str())
        .filter(|id| truth.contains(*id))
        .collect();
    let stale = outcome
        .page
        .items
        .iter()
        .map(|s| s.id.as_str())
        .filter(|id| revoked.contains(*id))
        .collect::<HashSet<&str>>()
        .len();
    let (asked, answered) = report.as_ref().map_or((0, 0), |r| (r.asked, r.answered));
    let bytes = (after.transport.inbound + after.transport.outbound)
        .saturating_sub(before.transport.inbound + before.transport.outbound);
    let sample = SearchSample {
        found: found.len(),
        expected: truth.len().min(limit),
        latency_ms: latency.as_secs_f64() * 1000.0,
        lookup_requests: u32::try_from(lookup_requests).unwrap_or(u32::MAX),
        lookup_failed: u32::try_from(lookup_failed).unwrap_or(u32::MAX),
        lookup_hops: None,
        messages: u32::try_from(lookup_requests + (asked + answered) as u64).unwrap_or(u32::MAX),
        bytes,
    };
    Ok(SearchRecord {
        at_s,
        kind: SearchKind::Normal,
        sample,
        stale,
        taken_over: 0,
        asked: u32::try_from(asked).unwrap_or(u32::MAX),
        answered: u32::try_from(answered).unwrap_or(u32::MAX),
        asked_providers: report.as_ref().is_some_and(|r| r.whom == Asked::Providers),
    })
}

/// A node a [`watch`] reads.
struct Watched {
    node: usize,
    store: Store,
    /// Its restart count when the watch began.
    starts: u32,
}

/// A record's arrival at one watched node.
#[derive(Debug, Clone, Copy)]
struct Arrival {
    /// From the watch's `t0`.
    after: Duration,
    /// Churn had started the node again between `t0` and the arrival, so
    /// the record may have come after the restart.
    restarted: bool,
}

/// Watches the `watched` nodes' stores from `t0` until `holds` is true
/// of the agent's record at each, or `deadline`; each one's arrival,
/// `None` for the nodes never reached.
async fn watch(
    watched: Vec<Watched>,
    starts: Arc<[AtomicU32]>,
    id: String,
    t0: Instant,
    deadline: Duration,
    holds: fn(&RecordBody) -> bool,
) -> Result<Vec<Option<Arrival>>> {
    tokio::task::spawn_blocking(move || {
        let mut at: Vec<Option<Arrival>> = vec![None; watched.len()];
        let mut left = watched.len();
        while left > 0 && t0.elapsed() < deadline {
            for (i, w) in watched.iter().enumerate() {
                if at[i].is_some() {
                    continue;
                }
                if let Ok(Some(a)) = w.store.blocking().get(&id) {
                    if holds(&a.body) {
                        at[i] = Some(Arrival {
                            after: t0.elapsed(),
                            restarted: starts[w.node].load(Ordering::SeqCst) != w.starts,
                        });
                        left -= 1;
                    }
                }
            }
            std::thread::sleep(WATCH_EVERY);
        }
        at
    })
    .await
    .context("a watch task")
}

fn is_descriptor(b: &RecordBody) -> bool {
    matches!(b, RecordBody::Descriptor(_))
}

fn is_tombstone(b: &RecordBody) -> bool {
    matches!(b, RecordBody::Tombstone(_))
}

/// How long a probe may take to reach every node.
fn probe_deadline(nodes: usize) -> Duration {
    Duration::from_secs(30) + Duration::from_millis(20) * nodes as u32
}

/// Which probe a watch timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    Publish,
    Revoke,
}

/// Adds the nodes' arrival times to `out`'s figures for `probe`, the
/// nodes not reached and those reached only after a restart to its
/// counts.
fn push_arrivals(
    out: &mut SwarmOutcome,
    probe: Probe,
    arrivals: &[Option<Arrival>],
    what: &str,
    progress: &mut dyn FnMut(&str),
) {
    let (ms, unreached, recovered) = match probe {
        Probe::Publish => (
            &mut out.propagation_ms,
            &mut out.propagation_unreached,
            &mut out.propagation_recovered,
        ),
        Probe::Revoke => (
            &mut out.revocation_ms,
            &mut out.revocation_unreached,
            &mut out.revocation_recovered,
        ),
    };
    let missing = arrivals.iter().filter(|a| a.is_none()).count();
    let late = arrivals.iter().flatten().filter(|a| a.restarted).count();
    *unreached += missing;
    *recovered += late;
    ms.extend(
        arrivals
            .iter()
            .flatten()
            .filter(|a| !a.restarted)
            .map(|a| a.after.as_secs_f64() * 1000.0),
    );
    if missing > 0 {
        progress(&format!(
            "{what}: {missing} nodes not reached by the deadline (left out of the figures)"
        ));
    }
    if late > 0 {
        progress(&format!(
            "{what}: {late} nodes got it only after churn had stopped and started them \
             (counted apart)"
        ));
    }
}

/// The ground truth of the searches: the live agents of each capability,
/// and the agents tombstoned so far. Under churn the probes change it as
/// they are played, as the DES's ground truth does at their times.
struct Truth {
    live: HashMap<String, HashSet<String>>,
    revoked: HashSet<String>,
}

impl Truth {
    fn of(agents: &[SwarmAgent]) -> Self {
        let mut t = Self {
            live: HashMap::new(),
            revoked: HashSet::new(),
        };
        for (i, a) in agents.iter().enumerate() {
            t.add(&agent_id(i), &a.capabilities);
        }
        t
    }

    fn add(&mut self, id: &str, capabilities: &[String]) {
        for c in normalised(capabilities) {
            self.live.entry(c).or_default().insert(id.to_owned());
        }
    }

    fn revoke(&mut self, id: &str, capabilities: &[String]) {
        for c in normalised(capabilities) {
            if let Some(ids) = self.live.get_mut(&c) {
                ids.remove(id);
            }
        }
        self.revoked.insert(id.to_owned());
    }
}

/// A step of a churning run's timeline. The derived order puts, at one
/// instant, the starts before the stops and both before the probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Start(usize),
    Stop(usize),
    /// Publish probe `j` ([`SwarmParams::publish_probes`]).
    Publish(usize),
    /// Tombstone the revoke probes.
    Revoke,
}

/// A probe's [`watch`], spawned.
type Watching = tokio::task::JoinHandle<Result<Vec<Option<Arrival>>>>;

/// The churn of a run: its outages as a timeline of stops and starts,
/// with the probes on the same timeline, played as the search phase
/// reaches them. The loop that runs the searches plays them between two
/// searches, so a step can come up to one search (at most its budget)
/// late, and a start that takes long delays the next search by as much.
struct Churning {
    /// Sorted by time, then by [`Step`]'s order, then by node.
    steps: Vec<(Duration, Step)>,
    next: usize,
    /// When the search phase began.
    t0: Instant,
    rng: StdRng,
    restarts: usize,
    /// Revoked agents whose home was down at the revocation's time: each
    /// is tombstoned when its home starts again.
    deferred: Vec<usize>,
    deferred_total: usize,
    /// The probes' watches, running.
    watches: Vec<(Probe, String, Watching)>,
}

impl Churning {
    /// No churn, no steps: without outages the probes run after the
    /// searches instead.
    fn new(params: &SwarmParams) -> Self {
        let mut steps: Vec<(Duration, Step)> = params
            .outages
            .iter()
            .flat_map(|o| {
                [
                    (o.down_at, Step::Stop(o.node)),
                    (o.up_at, Step::Start(o.node)),
                ]
            })
            .collect();
        if !steps.is_empty() {
            steps.extend(
                params
                    .publish_at
                    .iter()
                    .enumerate()
                    .map(|(j, &at)| (at, Step::Publish(j))),
            );
            if params.revoke_probes > 0 {
                steps.push((params.revoke_at, Step::Revoke));
            }
        }
        steps.sort();
        Self {
            steps,
            next: 0,
            t0: Instant::now(),
            rng: StdRng::seed_from_u64(params.seed ^ 0xC4_0257),
            restarts: 0,
            deferred: Vec::new(),
            deferred_total: 0,
            watches: Vec::new(),
        }
    }

    fn on(&self) -> bool {
        !self.steps.is_empty()
    }

    /// When the last probe is played, from the start of the search phase.
    fn last_probe(&self) -> Option<Duration> {
        self.steps
            .iter()
            .filter(|(_, s)| matches!(s, Step::Publish(_) | Step::Revoke))
            .map(|&(at, _)| at)
            .max()
    }

    /// Plays the steps due before `at` (from the start of the search
    /// phase), each at its time, then waits until `at`.
    async fn until(
        &mut self,
        swarm: &mut Swarm,
        at: Duration,
        params: &SwarmParams,
        truth: &mut Truth,
        progress: &mut dyn FnMut(&str),
    ) -> Result<()> {
        let before = self.next;
        while let Some(&(when, step)) = self.steps.get(self.next) {
            if when > at {
                break;
            }
            tokio::time::sleep_until((self.t0 + when).into()).await;
            self.next += 1;
            self.play(swarm, step, params, truth, progress).await?;
        }
        tokio::time::sleep_until((self.t0 + at).into()).await;
        // A line each time another 50 have been played.
        if self.next / 50 > before / 50 {
            let down = (0..swarm.nodes.len()).filter(|&i| swarm.is_down(i)).count();
            progress(&format!(
                "churn: {} of {} stops, starts and probes played, {down} nodes down",
                self.next,
                self.steps.len()
            ));
        }
        Ok(())
    }

    async fn play(
        &mut self,
        swarm: &mut Swarm,
        step: Step,
        params: &SwarmParams,
        truth: &mut Truth,
        progress: &mut dyn FnMut(&str),
    ) -> Result<()> {
        match step {
            Step::Stop(node) => swarm.stop(node).await?,
            Step::Start(node) => {
                self.start(swarm, node, params).await?;
                let (now, later): (Vec<usize>, Vec<usize>) = self
                    .deferred
                    .iter()
                    .partition(|&&i| params.agents[i].home == node);
                self.deferred = later;
                for i in now {
                    self.revoke(swarm, i, params, truth).await?;
                }
            }
            Step::Publish(j) => {
                let probe = &params.publish_probes[j];
                let id = probe_id(j);
                let doc = document(params.agents.len() + j, &id, &probe.capabilities);
                let origin = swarm.live_from(probe.home);
                let t0 = Instant::now();
                swarm.nodes[origin]
                    .registry
                    .register(doc)
                    .await
                    .with_context(|| format!("publishing probe {id} at node {origin}"))?;
                truth.add(&id, &probe.capabilities);
                let watch = swarm.watch(&id, t0, probe_deadline(params.nodes), is_descriptor);
                self.watches
                    .push((Probe::Publish, id.clone(), tokio::spawn(watch)));
                progress(&format!("published {id} at node {origin}"));
            }
            Step::Revoke => {
                for i in 0..params.revoke_probes {
                    if swarm.is_down(params.agents[i].home) {
                        self.deferred.push(i);
                        self.deferred_total += 1;
                    } else {
                        self.revoke(swarm, i, params, truth).await?;
                    }
                }
                progress(&format!(
                    "revoked {} agents, {} more when their homes start again",
                    params.revoke_probes - self.deferred.len(),
                    self.deferred.len()
                ));
            }
        }
        Ok(())
    }

    async fn start(&mut self, swarm: &mut Swarm, node: usize, params: &SwarmParams) -> Result<()> {
        swarm.restart(node, params, &mut self.rng).await?;
        self.restarts += 1;
        Ok(())
    }

    /// Tombstones agent `i` at its home (live) and watches the tombstone.
    async fn revoke(
        &mut self,
        swarm: &Swarm,
        i: usize,
        params: &SwarmParams,
        truth: &mut Truth,
    ) -> Result<()> {
        let agent = &params.agents[i];
        let id = agent_id(i);
        let t0 = Instant::now();
        swarm.nodes[agent.home]
            .registry
            .delete(&id)
            .await
            .with_context(|| format!("revoking {id}"))?;
        truth.revoke(&id, &agent.capabilities);
        let watch = swarm.watch(&id, t0, probe_deadline(params.nodes), is_tombstone);
        self.watches.push((Probe::Revoke, id, tokio::spawn(watch)));
        Ok(())
    }

    /// The search phase is over: the churn goes on until every probe has
    /// been played and its watch has ended (or the last one's deadline);
    /// then the nodes still down start again (their later stops are not
    /// played), the run waits until every node has its peers, plays the
    /// revocations still waiting for their homes (not at each home's
    /// start: a tombstone timed while a third of the swarm starts at once
    /// would time that mass restart, which real churn does not have), and
    /// waits until every probe's watch has ended. The
    /// restarts, the probes' arrivals and the deferred revocations go to
    /// `out`.
    async fn end(
        mut self,
        swarm: &mut Swarm,
        params: &SwarmParams,
        truth: &mut Truth,
        out: &mut SwarmOutcome,
        progress: &mut dyn FnMut(&str),
    ) -> Result<()> {
        if let Some(last) = self.last_probe() {
            // Every probe step not played yet (the searches may have run
            // past them), then second by second until every watch has
            // ended, or the last probe's deadline.
            self.until(swarm, last, params, truth, progress).await?;
            let until = last + probe_deadline(params.nodes);
            let mut at = self.t0.elapsed();
            while at < until && self.watches.iter().any(|(_, _, w)| !w.is_finished()) {
                at = (at + Duration::from_secs(1)).min(until);
                self.until(swarm, at, params, truth, progress).await?;
            }
        }
        let down: Vec<usize> = (0..swarm.nodes.len())
            .filter(|&i| swarm.is_down(i))
            .collect();
        for &i in &down {
            self.start(swarm, i, params).await?;
        }
        progress(&format!(
            "churn over: {} restarts, the {} nodes still down started again",
            self.restarts,
            down.len()
        ));
        let deadline = Duration::from_secs(60) + Duration::from_millis(300) * down.len() as u32;
        ready(&swarm.nodes, deadline, progress).await?;
        for i in std::mem::take(&mut self.deferred) {
            self.revoke(swarm, i, params, truth).await?;
        }
        for (probe, id, watch) in self.watches {
            let arrivals = watch.await.context("a probe's watch")??;
            push_arrivals(out, probe, &arrivals, &id, progress);
        }
        out.restarts = self.restarts;
        out.revocations_deferred = self.deferred_total;
        Ok(())
    }
}

/// Without churn: publishes the probes one at a time and times their
/// arrival at every node, then tombstones the revoke probes one at a time
/// and times their disappearance, while [`STALE_SEARCHERS`] other nodes
/// search for the revoked agent's capability and count it where it comes
/// back.
async fn probes_after_searches(
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

async fn run_async(
    params: &SwarmParams,
    dir: &std::path::Path,
    progress: &mut dyn FnMut(&str),
) -> Result<SwarmOutcome> {
    let started = Instant::now();
    let (rss0, _) = memory();
    let mut swarm = start(params, dir, progress).await?;
    let mut out = SwarmOutcome {
        bootstrap_s: started.elapsed().as_secs_f64(),
        ..SwarmOutcome::default()
    };

    let populating = Instant::now();
    populate(&swarm, &params.agents, progress).await?;
    let deadline = Duration::from_secs(60)
        + Duration::from_micros(200) * (params.nodes * params.agents.len()).min(1 << 30) as u32;
    match params.replication {
        Replication::All => {
            converge(&swarm, params.agents.len() as u64, deadline, progress).await;
        }
        Replication::Lookups => provided(&swarm, &params.agents, deadline, progress).await,
    }
    out.populate_s = populating.elapsed().as_secs_f64();
    let (rss, _) = memory();
    out.rss_per_node_mb = mib(rss.saturating_sub(rss0)) / params.nodes as f64;
    progress(&format!(
        "after the population wait: RSS {:.0} MiB ({:.2} MiB per node); {}",
        mib(rss),
        out.rss_per_node_mb,
        peers_line(&swarm).await?
    ));

    let mut truth = Truth::of(&params.agents);
    let shards = mesh_config(None, Vec::new(), params)?.shards;
    let empty = HashSet::new();
    let searches_started = Instant::now();
    let mut churn = Churning::new(params);
    for (k, s) in params.searches.iter().enumerate() {
        if churn.on() {
            churn
                .until(&mut swarm, s.at, params, &mut truth, progress)
                .await?;
        }
        let from = swarm.live_from(s.from);
        out.searches_moved += usize::from(from != s.from);
        let cap = normalised(std::slice::from_ref(&s.capability))
            .pop()
            .unwrap_or_default();
        let t = truth.live.get(&cap).unwrap_or(&empty);
        let at_s = started.elapsed().as_secs_f64();
        let record = search_once(
            &swarm.nodes[from],
            &s.capability,
            params.limit,
            shards,
            t,
            &truth.revoked,
            at_s,
        )
        .await
        .with_context(|| format!("search {k} from node {from}"))?;
        let record = SearchRecord {
            kind: s.kind,
            ..record
        };
        out.stale_results += record.stale;
        out.searches.push(record);
        if (k + 1) % 100 == 0 || k + 1 == params.searches.len() {
            progress(&format!(
                "searched {}/{} ({:.1} s); {}",
                k + 1,
                params.searches.len(),
                searches_started.elapsed().as_secs_f64(),
                serving_line(&swarm)
            ));
        }
    }
    if churn.on() {
        churn
            .end(&mut swarm, params, &mut truth, &mut out, progress)
            .await?;
    } else {
        probes_after_searches(&swarm, params, started, shards, &mut out, progress).await?;
    }
    let (_, peak) = memory();
    progress(&format!(
        "done in {:.1} s; peak RSS {:.0} MiB",
        started.elapsed().as_secs_f64(),
        mib(peak)
    ));
    drop(swarm);
    out.wall_s = started.elapsed().as_secs_f64();
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
    fn only_the_directories_of_dead_runs_are_removed() {
        let base = tempfile::tempdir().unwrap();
        // A process that has exited: its pid is free (until reused, and
        // then the directory is kept, which errs on the safe side).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let live = std::process::id();
        let make = |name: &str| {
            let p = base.path().join(name);
            std::fs::create_dir_all(p.join("node-00000")).unwrap();
            std::fs::write(p.join("node-00000/db"), b"x").unwrap();
            p
        };
        let stale = make(&format!("{TEMP_PREFIX}{dead}-abc123"));
        let ours = make(&format!("{TEMP_PREFIX}{live}-def456"));
        let unnamed = make(&format!("{TEMP_PREFIX}Xa9cQ1"));
        let other = make(&format!("other-{dead}-abc"));
        if !std::path::Path::new("/proc/self").exists() {
            // No way to tell a dead run from a live one: nothing goes.
            assert!(remove_stale_dirs(base.path()).is_empty());
            return;
        }
        assert_eq!(remove_stale_dirs(base.path()), vec![stale.clone()]);
        assert!(!stale.exists());
        assert!(ours.exists() && unnamed.exists() && other.exists());
    }

    #[test]
    fn node_keys_follow_the_seed() {
        assert_eq!(node_key(7, 3).to_bytes(), node_key(7, 3).to_bytes());
        assert_ne!(node_key(7, 3).to_bytes(), node_key(7, 4).to_bytes());
        assert_ne!(node_key(7, 3).to_bytes(), node_key(8, 3).to_bytes());
    }

    #[test]
    fn parameters_out_of_range_are_refused_with_their_name() {
        let ok = SwarmParams {
            nodes: 2,
            agents: vec![SwarmAgent {
                home: 1,
                capabilities: vec!["cap-1".into()],
            }],
            searches: vec![SwarmSearch {
                from: 0,
                capability: "cap-1".into(),
                at: Duration::ZERO,
                kind: SearchKind::Normal,
            }],
            publish_probes: Vec::new(),
            publish_at: Vec::new(),
            revoke_probes: 1,
            revoke_at: Duration::ZERO,
            limit: 10,
            search_timeout: Duration::from_secs(2),
            max_connections: None,
            trim_connections: true,
            security: Security::Noise,
            replication: Replication::All,
            outages: vec![Outage {
                node: 1,
                down_at: Duration::from_secs(1),
                up_at: Duration::from_secs(2),
            }],
            seed: 1,
        };
        check(&ok).unwrap();
        let bad = |f: fn(&mut SwarmParams), key: &str| {
            let mut p = ok.clone();
            f(&mut p);
            let e = check(&p).unwrap_err().to_string();
            assert!(e.starts_with(key), "{e}");
        };
        bad(|p| p.nodes = 0, "nodes");
        bad(|p| p.agents[0].home = 2, "agents[0].home");
        bad(|p| p.searches[0].from = 5, "searches[0].from");
        bad(|p| p.revoke_probes = 2, "revoke_probes");
        bad(|p| p.limit = 0, "limit");
        bad(|p| p.max_connections = Some(0), "max_connections");
        bad(
            |p| p.agents[0].capabilities.clear(),
            "agents[0].capabilities",
        );
        bad(|p| p.outages[0].node = 2, "outages: node 2 is not a node");
        bad(
            |p| p.outages[0].up_at = Duration::from_secs(1),
            "outages: node 1 comes back",
        );
        bad(
            |p| {
                p.outages.push(Outage {
                    node: 1,
                    down_at: Duration::from_millis(1500),
                    up_at: Duration::from_secs(3),
                });
            },
            "outages: node 1 stops at 1.5s, before",
        );
        bad(
            |p| p.replication = Replication::Lookups,
            "publish_probes, revoke_probes",
        );
        // Under churn each publish probe needs its time.
        bad(
            |p| {
                p.publish_probes = p.agents.clone();
            },
            "publish_at: 0 times for 1 publish probes",
        );
    }

    #[test]
    fn documents_are_valid_registrations() {
        let v = agentmesh::aidip::MetadataValidator::new();
        let doc = document(3, "sim-agent-0000003", &["cap-17".into(), "CAP-2".into()]);
        v.parse(&doc).unwrap();
        assert_eq!(
            normalised(&["CAP-2".into(), "cap-2 ".into()]),
            vec!["cap-2"]
        );
    }
}
