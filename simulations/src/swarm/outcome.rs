//! What the real-swarm engine measured: [`SwarmOutcome`], filled in by
//! the run's phases and turned into a summary by the report.

use crate::model::SearchRecord;

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
