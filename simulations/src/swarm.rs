//! The real-swarm engine: N of the node's own mesh swarms in one process.
//! This file is the interface both engines agree on (see
//! `/work/notes/sim-interface.md`); the engine itself arrives with its own
//! branch, and until then [`run`] answers an error.

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
    /// Index of the node that is asked (over its own search path).
    pub from: usize,
    /// The capability searched for (one filter term).
    pub capability: String,
}

/// What the real-swarm engine runs.
#[derive(Debug, Clone)]
pub struct SwarmParams {
    /// Nodes in the swarm.
    pub nodes: usize,
    /// The starting population, registered at their home nodes before searches start.
    pub agents: Vec<SwarmAgent>,
    /// The searches, in order.
    pub searches: Vec<SwarmSearch>,
    /// Agents published after the population converged; the time from publish
    /// until each live node holds the record is measured.
    pub publish_probes: Vec<SwarmAgent>,
    /// The first `revoke_probes` agents of `agents` are tombstoned after
    /// convergence; the time until each live node no longer returns them is measured.
    pub revoke_probes: usize,
    /// Results asked per search (the `top`/limit).
    pub limit: usize,
    /// Deadline of one search.
    pub search_timeout: std::time::Duration,
    /// Seed of the run.
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
    /// Time from asking to the answer, ms.
    pub latency_ms: f64,
    /// Kademlia requests the provider lookup sent (0 when no lookup ran).
    pub lookup_requests: u32,
    /// Hops of the lookup to its first answer, if known.
    pub lookup_hops: Option<u32>,
    /// Messages the search sent in all (lookup requests + search requests + answers).
    pub messages: u32,
    /// Bytes of those messages.
    pub bytes: u64,
}

/// What the real-swarm engine measured.
#[derive(Debug, Clone, Default)]
pub struct SwarmOutcome {
    /// One per search, in order.
    pub searches: Vec<SearchSample>,
    /// One value per (probe, live node): ms from publish until that node held the record.
    pub propagation_ms: Vec<f64>,
    /// One value per (revoked agent, live node): ms from tombstone until that node stopped
    /// returning it.
    pub revocation_ms: Vec<f64>,
    /// Results still returning a revoked agent while revocation propagated.
    pub stale_results: usize,
    /// Wall-clock seconds of the run.
    pub wall_s: f64,
}

/// Runs N real node swarms in one process; `progress` gets short status lines
/// (the caller draws the progress bar on stderr).
///
/// # Errors
/// Always, until the real-swarm engine is merged.
pub fn run(params: &SwarmParams, progress: &mut dyn FnMut(&str)) -> anyhow::Result<SwarmOutcome> {
    let _ = (params, progress);
    Err(anyhow::anyhow!("the swarm engine is not built yet"))
}
