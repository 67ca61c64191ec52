//! The types both engines share: what a run is asked to do (the agents,
//! the searches and the outages, and the real-swarm engine's parameters
//! built from them by [`Population::swarm_params`]) and what each search
//! measured ([`SearchRecord`], the rows of both engines' CSV and plots).
//! [`population`] builds them, [`des`] and [`swarm`] run them, [`report`]
//! sums them up; this module uses none of those.
//!
//! [`Population::swarm_params`]: crate::population::Population::swarm_params
//! [`population`]: crate::population
//! [`des`]: crate::des
//! [`swarm`]: crate::swarm
//! [`report`]: crate::report

use std::time::Duration;

use agentmesh::config::Replication;

use crate::scenario::Security;

/// What a search is for (the report splits recall by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchKind {
    /// The base workload.
    Normal,
    /// Inside a flash crowd, for its capability.
    Flash,
    /// For the eclipsed capability.
    Eclipsed,
    /// For a revoked agent's capability, while revocation propagates.
    Revoked,
}

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
    /// Whether a search stops waiting once its answer is full
    /// (`p2p.search_ends_when_full`).
    pub search_ends_when_full: bool,
    /// Established connections per node (`MeshLimits::max_connections`);
    /// `None`: the node's default. The trimming marks follow it
    /// (`MeshLimits::set_max_connections`).
    pub max_connections: Option<u32>,
    /// Whether nodes trim connections over the high-water mark (the
    /// node's behaviour); false keeps every connection up to the limit.
    pub trim_connections: bool,
    /// The connections' security handshake: noise, as the node, or
    /// plaintext ([`MeshTransport::MemoryPlaintext`](agentmesh::mesh::MeshTransport::MemoryPlaintext)).
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
