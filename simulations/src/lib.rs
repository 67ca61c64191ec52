//! `agentmesh-sim`: the population simulator's engines.
//!
//! - [`swarm`]: real node swarms in one process over libp2p's memory
//!   transport (wall-clock time).

pub mod swarm;
