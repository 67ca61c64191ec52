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
//! ([`TEMP_PREFIX`]); removed when the run ends, also when its
//! cancellation token stops it ([`Cancelled`]: the CLI cancels it on a
//! SIGINT or SIGTERM). A run first removes the
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
//! from its two usual peers and `RESTART_BOOTSTRAP_LIVE` live ones, and
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
//!
//! The run's parts, one module each: the node and the swarm of them
//! (`node`), the phases before the searches (`phases`), what is measured
//! (`measure`, and the probes' arrivals in `watch`), the churn
//! (`churn`), the probes without churn (`probes`), the parameters'
//! bounds (`check`) and the stores' directory (`tempdir`). The types
//! both engines share are in [`model`](crate::model).
//!
//! [`Store`]: agentmesh::store::Store
//! [`Issuer`]: agentmesh::issuer::Issuer
//! [`Registry`]: agentmesh::registry::Registry
//! [`MeshTransport::Memory`]: agentmesh::mesh::MeshTransport::Memory
//! [`TextIndexOpen::AtFirstSearch`]: agentmesh::store::TextIndexOpen::AtFirstSearch
//! [`SwarmParams::max_connections`]: crate::model::SwarmParams::max_connections
//! [`SwarmParams::outages`]: crate::model::SwarmParams::outages
//! [`SwarmParams::publish_at`]: crate::model::SwarmParams::publish_at
//! [`SwarmParams::revoke_at`]: crate::model::SwarmParams::revoke_at
//! [`Outage`]: crate::model::Outage

mod agents;
mod check;
mod churn;
mod measure;
mod node;
mod outcome;
mod phases;
mod probes;
mod tempdir;
mod watch;

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use agentmesh::config::Replication;
use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

pub use check::{MAX_LIMIT, MAX_NODES};
pub use measure::memory;
pub use node::STORE_CACHE_BYTES;
pub use outcome::SwarmOutcome;
pub use phases::{READY_GOSSIP_PEERS, READY_ROUTING_PEERS};
pub use tempdir::{remove_stale_dirs, temp_base, TEMP_PREFIX};
pub use watch::WATCH_EVERY;

use agents::normalised;
use churn::Churning;
use measure::{mib, peers_line, search_once, serving_line, Truth};
use node::{mesh_config, Swarm};
use phases::{converge, populate, provided, start};
use probes::probes_after_searches;
use tempdir::temp_root;

use crate::model::{SearchRecord, SwarmParams};

/// Runs N real node swarms in one process; `progress` gets short status
/// lines (the caller draws the progress bar on stderr). The run watches
/// `cancel`: once it is cancelled the nodes stop, their stores are
/// removed and the run answers [`Cancelled`].
///
/// # Errors
/// Parameters out of range (which one and why), a node that cannot start,
/// the swarm not bootstrapping by its deadline, or [`Cancelled`] (`cancel`
/// was cancelled while it ran; the stores are removed all the same).
pub fn run(
    params: &SwarmParams,
    cancel: &CancellationToken,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<SwarmOutcome> {
    check::check(params)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("swarm")
        .build()
        .context("starting the swarm's runtime")?;
    let dir = temp_root(progress)?;
    // Cancelling drops the run (and so cancels every node) instead of
    // leaving the process with the stores still in memory.
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = run_async(params, dir.path(), progress) => outcome,
            () = cancel.cancelled() => Err(anyhow::Error::new(Cancelled)),
        }
    });
    // Blocking-pool threads parked in sled or tantivy are not waited for.
    runtime.shutdown_timeout(Duration::from_secs(5));
    // Only now that the nodes' tasks are gone can their directories go.
    drop(dir);
    // Cancelled after the searches ended but before the stores were
    // removed: the caller asked to stop, so the outcome is not reported.
    match outcome {
        Ok(_) if cancel.is_cancelled() => Err(anyhow::Error::new(Cancelled)),
        outcome => outcome,
    }
}

/// A run stopped by its cancellation token: its node stores were
/// removed. The CLI cancels a run on SIGINT (Ctrl-C) or SIGTERM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the swarm run was cancelled; the node stores are removed")
    }
}

impl std::error::Error for Cancelled {}

/// The run in order: the nodes, the population, the searches (with the
/// churn and its probes, or the probes after them).
async fn run_async(
    params: &SwarmParams,
    dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<SwarmOutcome> {
    let started = Instant::now();
    let (rss0, _) = memory();
    let mut swarm = start(params, dir, progress).await?;
    let mut out = SwarmOutcome {
        bootstrap_s: started.elapsed().as_secs_f64(),
        ..SwarmOutcome::default()
    };
    hold_population(&swarm, params, rss0, &mut out, progress).await?;
    search_phase(&mut swarm, params, started, &mut out, progress).await?;
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

/// Registers the population and waits until every node holds it (under
/// `"lookups"`: until its capabilities are announced); the time it took
/// and the memory per node then go to `out`.
async fn hold_population(
    swarm: &Swarm,
    params: &SwarmParams,
    rss0: u64,
    out: &mut SwarmOutcome,
    progress: &mut dyn FnMut(&str),
) -> Result<()> {
    let populating = Instant::now();
    populate(swarm, &params.agents, progress).await?;
    let deadline = Duration::from_secs(60)
        + Duration::from_micros(200) * (params.nodes * params.agents.len()).min(1 << 30) as u32;
    match params.replication {
        Replication::All => {
            converge(swarm, params.agents.len() as u64, deadline, progress).await;
        }
        Replication::Lookups => provided(swarm, &params.agents, deadline, progress).await,
    }
    out.populate_s = populating.elapsed().as_secs_f64();
    let (rss, _) = memory();
    out.rss_per_node_mb = mib(rss.saturating_sub(rss0)) / params.nodes as f64;
    progress(&format!(
        "after the population wait: RSS {:.0} MiB ({:.2} MiB per node); {}",
        mib(rss),
        out.rss_per_node_mb,
        peers_line(swarm).await?
    ));
    Ok(())
}

/// Runs the searches one at a time, with the churn if any, then the
/// probes: under churn those still to play and their watches, without
/// it all of them, after the searches.
async fn search_phase(
    swarm: &mut Swarm,
    params: &SwarmParams,
    started: Instant,
    out: &mut SwarmOutcome,
    progress: &mut dyn FnMut(&str),
) -> Result<()> {
    let mut truth = Truth::of(&params.agents);
    let shards = mesh_config(None, Vec::new(), params)?.shards;
    let empty = HashSet::new();
    let searches_started = Instant::now();
    let mut churn = Churning::new(params);
    for (k, s) in params.searches.iter().enumerate() {
        if churn.on() {
            churn
                .until(swarm, s.at, params, &mut truth, progress)
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
                serving_line(swarm)
            ));
        }
    }
    if churn.on() {
        churn.end(swarm, params, &mut truth, out, progress).await
    } else {
        probes_after_searches(swarm, params, started, shards, out, progress).await
    }
}
