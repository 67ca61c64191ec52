//! The libp2p mesh: the transport layer that moves signed records between
//! nodes and answers searches, without knowing what a record means.
//!
//! What it owns: one [`libp2p::Swarm`] (TCP + QUIC, noise, yamux, DNS, or
//! the in-process memory transport as [`MeshTransport::Memory`], or with
//! plaintext for the simulator as [`MeshTransport::MemoryPlaintext`];
//! identify, Kademlia, gossipsub, the `/agentmesh/search/1.0.0`
//! request-response protocol and connection limits; see [`behaviour`]),
//! driven by one event-loop task. Everything else talks to it through a
//! cheap, cloneable [`MeshClient`] (an `mpsc::Sender` of commands with
//! `oneshot` replies) returned by [`Mesh::spawn`].
//!
//! What it asks of the node: a [`MeshHandler`]. Every record that arrives
//! from outside (a gossip message, an inbound Kademlia `PutRecord`, a record
//! found by [`MeshClient::get_record`]) and every inbound search goes to
//! the handler, which decodes, verifies, stores and answers. The event loop
//! never runs the handler inline: it spawns one task per inbound item,
//! bounded by a semaphore ([`MeshLimits::max_inflight_handlers`]), and the
//! task sends its [`Verdict`] back to the loop, which then reports the
//! gossip validation result, stores the Kademlia record, or answers the
//! search. Everything is counted in [`MeshStats`].
//!
//! Keys (docs/protocol.md#dht-keys): an agent's record lives in the DHT under
//! [`agent_key`]; a node that holds agents with capability `c` provides
//! [`capability_key`]`(c, shard)` with `shard =` [`shard_of`]`(own peer id)`.
//!
//! Files, one idea each:
//! - `mesh/admission.rs`: who may connect (incoming connections per IP).
//! - `mesh/backoff.rs`: a peer whose dial failed is not dialled again at
//!   once (exponential back-off, for every dial that names it).
//! - `mesh/behaviour.rs`: the swarm and its combined behaviour, with every
//!   limit chosen there.
//! - `mesh/client.rs`: [`MeshClient`], the handle, and the commands it sends.
//! - `mesh/codec.rs`: the search protocol's CBOR codec, counting what it
//!   writes and reads.
//! - `mesh/commands.rs`: the client's commands as the event loop runs them.
//! - `mesh/config.rs`: [`MeshConfig`], its limits and timeouts, and their
//!   validation.
//! - `mesh/connections.rs`: connection and listener events (the peer table,
//!   bootstrap dials, listen addresses).
//! - `mesh/event_loop.rs`: the loop that owns the swarm, its state, and the
//!   handler tasks it spawns.
//! - `mesh/events.rs`: behaviour events (identify, Kademlia, gossipsub,
//!   search) as the loop handles them.
//! - `mesh/external.rs`: which of our addresses are confirmed external.
//! - `mesh/log_events.rs`: the checkpoints topic and the log protocol as
//!   the loop runs them.
//! - `mesh/log.rs`: the log protocol's and the checkpoints topic's wire
//!   types and their bounds (what witnesses exchange).
//! - `mesh/pending.rs`: client calls in flight (publishes, lookups,
//!   searches).
//! - `mesh/providers.rs`: quotas on the provider records peers announce to
//!   us.
//! - `mesh/quota.rs`: fair shares of the handler tasks per peer and per
//!   kind of work ([`Rates`]).
//! - `mesh/stats.rs`: [`MeshStats`], the counters.
//! - `mesh/transport.rs`: TCP, QUIC or memory transports under the address
//!   policy, and address helpers.
//! - `mesh/trim.rs`: which connections to close over the high-water mark.
//! - `mesh/unsent.rs`: records that could not be gossiped yet, retried.
//! - `mesh/wire.rs`: the search protocol's wire types and their bounds.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use libp2p::identity::Keypair;
use sha2::{Digest, Sha256};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub mod admission;
pub mod backoff;
pub mod behaviour;
mod client;
mod codec;
mod commands;
mod config;
mod connections;
mod event_loop;
mod events;
mod external;
pub mod log;
mod log_events;
mod pending;
mod providers;
mod quota;
mod stats;
pub mod transport;
mod trim;
mod unsent;
pub mod wire;

pub use client::{
    DhtOutcome, MeshClient, MeshStatus, PeerInfo, PublishReport, Publishing, SearchEnd,
    SearchOutcome,
};
#[doc(hidden)]
pub use codec::{read_request, read_response};
pub use config::{MeshConfig, MeshLimits, MeshTimeouts, MeshTransport};
pub use libp2p::{Multiaddr, PeerId};
pub use log::{LogRequest, LogResponse};
pub use quota::{Rate, Rates};
pub use stats::{MeshStats, StatsSnapshot, TransportBytes, VerdictCounts, WireSnapshot};
pub use wire::{SearchRequest, SearchResponse};

/// The gossipsub topic that carries descriptors and tombstones (contract).
pub const RECORDS_TOPIC: &str = "agentmesh/records/v1";
/// The gossipsub topic that carries log checkpoints and equivocation
/// proofs (contract).
pub const CHECKPOINTS_TOPIC: &str = "agentmesh/checkpoints/v1";
/// The log request-response protocol name (contract).
pub const LOG_PROTOCOL: &str = "/agentmesh/log/1.0.0";
/// The Kademlia protocol name (contract).
pub const KAD_PROTOCOL: &str = "/agentmesh/kad/1.0.0";
/// The search request-response protocol name (contract).
pub const SEARCH_PROTOCOL: &str = "/agentmesh/search/1.0.0";
/// The identify protocol version string.
pub const IDENTIFY_PROTOCOL: &str = "/agentmesh/id/1.0.0";
/// Capabilities remembered per peer from provider lookups (`GET /peers`).
pub const MAX_PROVIDES_PER_PEER: usize = 32;
/// Peers whose provided capabilities are remembered.
pub const MAX_PROVIDES_PEERS: usize = 1024;

/// Errors from starting and using the mesh.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MeshError {
    /// A configured multiaddr does not parse.
    #[error("invalid multiaddr {addr:?}: {reason}")]
    BadAddress {
        /// The multiaddr as configured.
        addr: String,
        /// Why it does not parse or may not be used.
        reason: String,
    },
    /// The configuration breaks an invariant.
    #[error("invalid mesh config: {reason}")]
    Config {
        /// The invariant broken.
        reason: String,
    },
    /// The transport stack could not be built.
    #[error("transport setup failed: {reason}")]
    Transport {
        /// The transport builder's error.
        reason: String,
    },
    /// A behaviour could not be built.
    #[error("behaviour setup failed: {reason}")]
    Behaviour {
        /// The behaviour builder's error.
        reason: String,
    },
    /// No listener could be started.
    #[error("could not listen on {addr}: {reason}")]
    Listen {
        /// The first listen multiaddr that failed.
        addr: String,
        /// Why it failed (or that it reported no address in time).
        reason: String,
    },
    /// A dial could not be started.
    #[error("could not dial {addr}: {reason}")]
    Dial {
        /// The multiaddr dialled.
        addr: String,
        /// The swarm's dial error.
        reason: String,
    },
    /// A search request breaks the wire bounds.
    #[error("invalid search request: {reason}")]
    InvalidRequest {
        /// The bound it breaks.
        reason: String,
    },
    /// The record is over the size the mesh carries.
    #[error("record is {size} bytes, over the {max}-byte limit")]
    TooLarge {
        /// The record's size in bytes.
        size: usize,
        /// The largest record the mesh carries, in bytes.
        max: usize,
    },
    /// The event loop has stopped (shutdown or cancellation).
    #[error("the mesh has shut down")]
    Shutdown,
}

/// What the node decided about a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Valid: forward the gossip, store the DHT record, return the lookup.
    Accept,
    /// Invalid: do not forward or store; the gossip sender is penalised.
    /// The reason is a short stable code (counted in [`MeshStats`]).
    Reject(&'static str),
    /// Neither: drop without penalty (duplicate, not interesting, busy).
    Ignore(&'static str),
}

/// Where a record handed to [`MeshHandler::on_record`] came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordOrigin {
    /// A gossipsub message; `author` is the signed message source.
    Gossip {
        /// The peer that signed the message, when it is signed.
        author: Option<PeerId>,
    },
    /// A peer asked us to store it in the DHT under `key`. The handler must
    /// check `key == agent_key(<the record's agent id>)`.
    DhtPut {
        /// The DHT key the peer asks to store it under.
        key: Vec<u8>,
    },
    /// Found under `key` by our own [`MeshClient::get_record`] (from the
    /// local DHT store when `from` is our own peer id). Same key check.
    DhtGet {
        /// The DHT key it was found under.
        key: Vec<u8>,
    },
}

/// The node's side of the mesh: judges records and answers searches.
///
/// Both methods are called from spawned tasks, never from the swarm loop,
/// and are bounded by [`MeshTimeouts::handler`]; a future that does not
/// finish in time counts as `Ignore("handler_timeout")` (records) or an
/// unanswered request (searches).
pub trait MeshHandler: Send + Sync + 'static {
    /// Judges `record` (the encoded `SignedRecord` bytes) received from the
    /// peer `from`; on `Accept` the handler has stored it.
    fn on_record(
        &self,
        record: Vec<u8>,
        from: PeerId,
        origin: RecordOrigin,
    ) -> BoxFuture<'static, Verdict>;

    /// Answers a search from `from`. The request is already bounded
    /// ([`SearchRequest::check`]); the mesh truncates an oversized answer.
    fn on_search(&self, request: SearchRequest, from: PeerId)
        -> BoxFuture<'static, SearchResponse>;

    /// Judges a message of the checkpoints topic (at most
    /// [`log::MAX_CHECKPOINT_MESSAGE_BYTES`]) signed by `author` and
    /// relayed by `from`. A node that witnesses nothing ignores it.
    fn on_checkpoint(
        &self,
        _message: Vec<u8>,
        _author: PeerId,
        _from: PeerId,
    ) -> BoxFuture<'static, Verdict> {
        Box::pin(std::future::ready(Verdict::Ignore("no_witness")))
    }

    /// Answers a log request from `from`. A node without a log refuses.
    fn on_log_request(
        &self,
        _request: LogRequest,
        _from: PeerId,
    ) -> BoxFuture<'static, LogResponse> {
        Box::pin(std::future::ready(LogResponse::refused("no log here")))
    }
}

/// The DHT key of an agent's record: `sha256("agentmesh/agent/v1/" + id)`.
pub fn agent_key(agent_id: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"agentmesh/agent/v1/");
    h.update(agent_id.as_bytes());
    h.finalize().into()
}

/// The provider key of a capability shard:
/// `sha256("agentmesh/cap/v1/" + capability + "/" + shard)`, the shard in
/// decimal.
pub fn capability_key(capability: &str, shard: u32) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"agentmesh/cap/v1/");
    h.update(capability.as_bytes());
    h.update(b"/");
    h.update(shard.to_string().as_bytes());
    h.finalize().into()
}

/// The capability shard a peer provides under: the first 8 bytes of
/// `sha256(peer id bytes)`, big-endian, modulo `shards` (at least 1).
pub fn shard_of(peer: &PeerId, shards: u32) -> u32 {
    let digest = Sha256::digest(peer.to_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(first) % u64::from(shards.max(1))) as u32
}

/// Starts the mesh.
pub struct Mesh;

impl Mesh {
    /// Builds the swarm, starts the listeners (returning once each has an
    /// address, so [`MeshClient::listen_addrs`] is meaningful at once, with
    /// the real port for `/tcp/0`), and spawns the event loop, which dials
    /// the bootstrap peers and runs until `cancel` fires or every
    /// [`MeshClient`] is dropped.
    ///
    /// # Errors
    /// [`MeshError::Config`] for an invalid config, `Transport`/`Behaviour`
    /// when the swarm cannot be built, `Listen` when no listener starts.
    pub async fn spawn(
        config: MeshConfig,
        keypair: Keypair,
        handler: Arc<dyn MeshHandler>,
        cancel: CancellationToken,
    ) -> Result<(MeshClient, JoinHandle<()>), MeshError> {
        config.validate()?;
        event_loop::spawn(config, keypair, handler, cancel).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_domain_separated_sha256() {
        let expected: [u8; 32] = Sha256::digest(b"agentmesh/agent/v1/agent:example.com").into();
        assert_eq!(agent_key("agent:example.com"), expected);
        let expected: [u8; 32] = Sha256::digest(b"agentmesh/cap/v1/translation/3").into();
        assert_eq!(capability_key("translation", 3), expected);
        assert_ne!(
            capability_key("translation", 3),
            capability_key("translation", 4)
        );
    }

    #[test]
    fn shard_is_stable_and_in_range() {
        let peer = Keypair::generate_ed25519().public().to_peer_id();
        let s = shard_of(&peer, 8);
        assert!(s < 8);
        assert_eq!(s, shard_of(&peer, 8));
        assert_eq!(shard_of(&peer, 1), 0);
        assert_eq!(shard_of(&peer, 0), 0);
        let digest = Sha256::digest(peer.to_bytes());
        let first = u64::from_be_bytes(digest[..8].try_into().unwrap());
        assert_eq!(u64::from(s), first % 8);
    }
}
