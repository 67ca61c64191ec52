//! The node constants a run uses ([`NodeParams`]): the node's own
//! defaults, read from the node crate, unless the scenario overrides
//! them under `[node]` or `[swarm]`.

use std::time::Duration;

use agentmesh::config::{P2pConfig, Replication};
use agentmesh::mesh::{MeshConfig, MeshLimits, MeshTimeouts};

use super::file::{Engine, Scenario};
use super::tables::{SearchChoice, Security};

/// The node constants a run uses: the node's defaults unless overridden.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NodeParams {
    /// Capability shards S (`MeshConfig::default().shards`).
    pub shards: u32,
    /// Peers one search asks: `p2p.search_fanout`, capped at
    /// `MeshLimits::max_search_fanout`.
    pub fanout: usize,
    /// One search's deadline (`p2p.search_timeout`).
    pub search_timeout_ms: u64,
    /// Whether a search stops waiting once its answer is full
    /// (`p2p.search_ends_when_full`).
    pub search_ends_when_full: bool,
    /// Whom a search asks of its providers and connected peers (the
    /// swarm engine runs the node's own, `mixed`).
    pub search_choice: SearchChoice,
    /// Kademlia's k (libp2p's `K_VALUE`, the node's `max_providers_per_key`).
    pub k: usize,
    /// Kademlia's alpha (libp2p's `ALPHA_VALUE`).
    pub alpha: usize,
    /// Providers a holder keeps per key (`MeshLimits::max_providers_per_key`).
    pub max_providers_per_key: usize,
    /// Providers one lookup call returns at most (`max_providers_result`).
    pub max_providers_result: usize,
    /// Search handlers a node runs at once (`max_inflight_handlers`).
    pub max_inflight_handlers: usize,
    /// Deadline of a provider lookup, ms (`MeshTimeouts::lookup`).
    pub lookup_timeout_ms: u64,
    /// Kademlia per-peer request timeout, ms (libp2p's default).
    pub kad_peer_timeout_ms: u64,
    /// Kademlia query timeout, ms (`MeshTimeouts::kad_query`).
    pub kad_query_timeout_ms: u64,
    /// Re-announcement interval of provider records, s (`MeshTimeouts::reprovide`).
    pub reprovide_s: u64,
    /// Known list bound (`wire::MAX_KNOWN`).
    pub max_known: usize,
    /// Gossipsub mesh degree D (libp2p's default; the node keeps it).
    pub gossip_d: usize,
    /// Gossipsub lazy-push degree.
    pub gossip_d_lazy: usize,
    /// Gossipsub heartbeat, ms (the node's 1 s).
    pub heartbeat_ms: u64,
    /// What nodes keep of gossip.
    pub replication: Replication,
    /// Established connections per node (`MeshLimits::max_connections`),
    /// swarm engine only: the DES does not model connections.
    pub max_connections: Option<u32>,
    /// Connected peers over which a node trims its connections
    /// (`MeshLimits::connections_high_water`, following the limit), swarm
    /// engine only; `None` there when `[swarm] trim_connections = false`.
    pub connections_high_water: Option<u32>,
    /// The connections' security handshake, swarm engine only.
    pub security: Option<Security>,
}

impl Scenario {
    /// The node constants this run uses.
    pub fn node(&self) -> NodeParams {
        let p2p = P2pConfig::default();
        let mesh = MeshConfig::default();
        let limits = MeshLimits::default();
        let timeouts = MeshTimeouts::default();
        let gossip = libp2p::gossipsub::Config::default();
        let fanout = self
            .node
            .search_fanout
            .unwrap_or(p2p.search_fanout)
            .min(limits.max_search_fanout);
        NodeParams {
            shards: self.node.shards.unwrap_or(mesh.shards),
            fanout,
            search_timeout_ms: self
                .node
                .search_timeout_ms
                .unwrap_or(p2p.search_timeout.as_millis() as u64),
            search_ends_when_full: self
                .node
                .search_ends_when_full
                .unwrap_or(p2p.search_ends_when_full),
            search_choice: self.node.search_choice.unwrap_or_default(),
            k: libp2p::kad::K_VALUE.get(),
            alpha: libp2p::kad::ALPHA_VALUE.get(),
            max_providers_per_key: limits.max_providers_per_key,
            max_providers_result: limits.max_providers_result,
            max_inflight_handlers: limits.max_inflight_handlers,
            lookup_timeout_ms: timeouts.lookup.as_millis() as u64,
            // rust-libp2p's ClosestPeersIterConfig::peer_timeout default;
            // the node does not change it.
            kad_peer_timeout_ms: Duration::from_secs(10).as_millis() as u64,
            kad_query_timeout_ms: timeouts.kad_query.as_millis() as u64,
            reprovide_s: timeouts.reprovide.as_secs(),
            max_known: agentmesh::mesh::wire::MAX_KNOWN,
            gossip_d: gossip.mesh_n(),
            gossip_d_lazy: gossip.gossip_lazy(),
            heartbeat_ms: 1000,
            replication: self.replication.unwrap_or(p2p.replication),
            max_connections: (self.engine == Engine::Swarm)
                .then(|| self.swarm.max_connections.unwrap_or(limits.max_connections)),
            connections_high_water: (self.engine == Engine::Swarm
                && self.swarm.trim_connections.unwrap_or(true))
            .then(|| {
                let mut l = MeshLimits::default();
                if let Some(n) = self.swarm.max_connections {
                    l.set_max_connections(n);
                }
                l.connections_high_water
            }),
            security: (self.engine == Engine::Swarm)
                .then(|| self.swarm.security.unwrap_or_default()),
        }
    }
}
