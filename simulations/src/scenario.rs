//! The scenario file: what one run simulates (TOML, `deny_unknown_fields`,
//! every number range-checked). [`Scenario::load`] reads and validates a
//! file; a refusal names the file, the key and the reason. The format is
//! documented in `simulations/README.md`.
//!
//! Node constants (shard count, search fan-out and deadline, Kademlia's k
//! and alpha) are not copied here: unless a scenario overrides them under
//! `[node]`, [`Scenario::node`] reads them from the node's own defaults.
//!
//! One module per part: the top level (`file`), its tables (`tables`),
//! reading a file (`load`), the ranges (`validate`) and the node
//! constants (`node`).

mod file;
mod load;
mod node;
mod tables;
mod validate;

pub use file::{Engine, Scenario};
pub use load::ScenarioError;
pub use node::NodeParams;
pub use tables::{
    Adversarial, Behaviour, Capabilities, Churn, Eclipse, EclipseProviders, FlashCrowd, JudgeRule,
    Latency, Lengths, NodeOverrides, Partition, Publish, Revoke, SearchChoice, Security,
    SwarmOverrides,
};
pub use validate::{
    MAX_AGENTS, MAX_NODES, MAX_PROBES, MAX_SEARCHES, MAX_VOCABULARY, MIN_SWARM_CONNECTIONS,
};
