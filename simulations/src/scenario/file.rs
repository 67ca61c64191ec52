//! The scenario file's top level: [`Scenario`], as written in its file,
//! and [`Engine`], which of the two engines runs it. Its tables are in
//! the sibling `tables` module.

use agentmesh::config::Replication;
use serde::Deserialize;

use super::tables::{
    Adversarial, Capabilities, Churn, FlashCrowd, Latency, NodeOverrides, Partition, Publish,
    Revoke, SwarmOverrides,
};

/// Which engine runs a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// The discrete-event engine (10k–100k nodes, virtual time).
    Des,
    /// Real node swarms in one process (up to ~1,000 nodes, wall-clock time).
    Swarm,
}

impl Engine {
    /// The name used in scenario files and summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Des => "des",
            Engine::Swarm => "swarm",
        }
    }
}

/// A scenario as written in its file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name; the default output directory is `simulations/out/<name>`.
    pub name: String,
    /// Which engine runs it.
    pub engine: Engine,
    /// Seed of every random choice (overridden by `--seed`).
    #[serde(default = "one")]
    pub seed: u64,
    /// Registries (nodes) in the mesh.
    pub nodes: usize,
    /// Agents in the starting population.
    pub agents: usize,
    /// Capability searches, spread uniformly over `duration_s`.
    pub searches: usize,
    /// Virtual time the run covers, in seconds.
    #[serde(default = "default_duration")]
    pub duration_s: f64,
    /// Results asked per search (`top`).
    #[serde(default = "default_limit")]
    pub limit: usize,
    /// What nodes keep of gossiped records (the node's `p2p.replication`);
    /// default: the node's default.
    #[serde(default)]
    pub replication: Option<Replication>,
    /// Plain Kademlia closest-node lookups of random keys, measured beside
    /// the searches for comparison with published DHT figures.
    #[serde(default = "default_probe_lookups")]
    pub probe_lookups: usize,
    /// Capability vocabulary and popularity.
    #[serde(default)]
    pub capabilities: Capabilities,
    /// Pairwise latency and processing times.
    #[serde(default)]
    pub latency: Latency,
    /// Share of messages lost, 0..1.
    #[serde(default)]
    pub loss: f64,
    /// Share of the starting population's provider announcements that
    /// reached no holder, 0..1 (the DES only; default 0, the converged
    /// state). A swarm on a saturated machine loses some: a
    /// `start_providing` whose closest-peer phase times out sends no
    /// `ADD_PROVIDER`. Each (provider, shard key) pair is dropped with
    /// this probability, from the seed.
    #[serde(default)]
    pub lost_announcements: f64,
    /// Node churn: none when absent.
    #[serde(default)]
    pub churn: Option<Churn>,
    /// Partitions that heal.
    #[serde(default)]
    pub partitions: Vec<Partition>,
    /// A flash crowd on one capability.
    #[serde(default)]
    pub flash_crowd: Option<FlashCrowd>,
    /// Newly published agents whose propagation is timed.
    #[serde(default)]
    pub publish: Option<Publish>,
    /// Tombstoned agents whose disappearance is timed.
    #[serde(default)]
    pub revoke: Option<Revoke>,
    /// Misbehaving nodes.
    #[serde(default)]
    pub adversarial: Option<Adversarial>,
    /// Overrides of the node's constants (default: the node's own).
    #[serde(default)]
    pub node: NodeOverrides,
    /// Settings of the real-swarm engine's nodes (refused for the DES).
    #[serde(default)]
    pub swarm: SwarmOverrides,
}

fn one() -> u64 {
    1
}
fn default_duration() -> f64 {
    600.0
}
fn default_limit() -> usize {
    10
}
fn default_probe_lookups() -> usize {
    200
}
