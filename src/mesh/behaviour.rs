//! The swarm: transports and the combined [`MeshBehaviour`], with every
//! limit chosen here. Built once by the event loop ([`build_swarm`]), which
//! then owns it; nothing else touches it.
//!
//! Transports: TCP (nodelay) and QUIC v1, noise + yamux on TCP, DNS
//! resolution of `/dns*` multiaddrs (system resolver configuration); or,
//! with [`MeshTransport::Memory`](super::MeshTransport::Memory), the
//! in-process memory transport with noise (or, for the simulator's
//! largest swarms, plaintext) + yamux and no DNS;
//! libp2p's bandwidth metrics count the bytes of every connection
//! ([`MeshStats`]).
//!
//! Behaviours and limits (numbers and why):
//! - ping (`/ipfs/ping/1.0.0`) every `timeouts.ping` (10 s), each ping
//!   waiting as long: libp2p reports a connection's second failure in a
//!   row and the loop closes it, so a peer cut off silently (no RST, no
//!   FIN) is let go within about three intervals instead of the kernel's
//!   retransmission timeout (minutes), and searches stop waiting on it.
//!   A peer that does not speak ping keeps its connection.
//! - identify, protocol version `/agentmesh/id/1.0.0`. The loop feeds every
//!   listen address a peer reports into Kademlia (only for peers that speak
//!   our Kademlia protocol); rust-libp2p does not do this by itself.
//! - Kademlia on `/agentmesh/kad/1.0.0`, server mode set explicitly when
//!   the node listens (auto mode would wait for a confirmed external
//!   address, which a loopback or private mesh never gets), client mode
//!   otherwise. Record filtering `FilterBoth`: inbound `PutRecord` and
//!   `AddProvider` come to the loop, which asks the handler before storing.
//!   `MemoryStore` limits: `max_value_bytes` = 16 KiB record
//!   ([`MAX_RECORD_BYTES`]) + 1 KiB (the store refuses values `>=` the
//!   limit, and leaves room should the envelope grow); `max_records` 4096
//!   (config) — with k = 20 replication a node holds about 20/N of all
//!   agent records, so 4096 covers ~10k agents on a 50-node mesh, and the
//!   worst case is 4096 x 17 KiB = 68 MiB, typical descriptors (2-4 KiB)
//!   use a fifth of that; `max_provided_keys` 8192 (config; in
//!   `MemoryStore` this bounds all keys with provider records, ours and
//!   others') and `max_providers_per_key` 20 (= k; capability shards
//!   spread popular capabilities past it): worst case 8192 x 20 provider
//!   records of ~200 B = 32 MiB. Max packet 64 KiB (default 16 KiB): a
//!   `GetRecord` answer carries a 16 KiB record *and* up to 20 closer
//!   peers with their addresses (~20 x 0.5 KiB), which overflows 16 KiB.
//! - gossipsub on `agentmesh/records/v1`: signed messages (strict
//!   validation), `validate_messages()` (nothing is forwarded before the
//!   handler accepts it), message id = SHA-256 of the data (the same record
//!   gossiped twice, by anyone, is one message), max transmit size
//!   16 KiB plus 4 KiB (the protobuf frame adds the signature, public key,
//!   source, seqno and topic, ~200 B; the rest is margin), heartbeat 1 s
//!   with a 500 ms initial delay (the default 5 s delays the first mesh),
//!   peer scoring (see [`score_params`]).
//! - request-response `/agentmesh/search/1.0.0` with the cbor codec:
//!   requests <= 16 KiB, responses <= 2 MiB (see [`super::wire`]), request
//!   timeout from the config (10 s default), at most 64 concurrent streams
//!   per connection; the codec counts its messages and bytes
//!   (`mesh::codec`).
//! - gossipsub also on `agentmesh/checkpoints/v1`: the log checkpoints
//!   nodes witness and the equivocation proofs they find (at most 16 KiB,
//!   [`super::log`]), scored like the records topic.
//! - request-response `/agentmesh/log/1.0.0` with the cbor codec:
//!   consistency proofs and witness cosignatures (requests <= 20 KiB,
//!   responses <= 16 KiB), the same timeout, at most 8 concurrent streams
//!   per connection.
//! - connection limits (config): 256 established in total, 3 per peer (TCP
//!   and QUIC, plus a simultaneous dial), 64 pending incoming.

// The `NetworkBehaviour` derive generates the public `MeshBehaviourEvent`
// (tests/federation.rs matches on it) with one undocumented variant per
// field of `MeshBehaviour`; a derive's output cannot be given docs.
#![allow(missing_docs)]

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use libp2p::identity::Keypair;
use libp2p::kad::store::{MemoryStore, MemoryStoreConfig};
use libp2p::request_response::{self, ProtocolSupport};
use libp2p::swarm::NetworkBehaviour;
use libp2p::{
    connection_limits, gossipsub, identify, kad, ping, StreamProtocol, Swarm, SwarmBuilder,
};
use sha2::{Digest, Sha256};

use super::codec::CountingCodec;
use super::log::{LogRequest, LogResponse};
use super::stats::MeshStats;
use super::wire::{SearchRequest, SearchResponse};
use super::{
    MeshConfig, MeshError, CHECKPOINTS_TOPIC, IDENTIFY_PROTOCOL, KAD_PROTOCOL, LOG_PROTOCOL,
    RECORDS_TOPIC, SEARCH_PROTOCOL,
};
use crate::record::MAX_RECORD_BYTES;

/// Largest value the DHT store keeps (it refuses values `>=` this).
pub const DHT_MAX_VALUE_BYTES: usize = MAX_RECORD_BYTES + 1024;
/// Largest Kademlia message.
pub const KAD_MAX_PACKET_BYTES: usize = 64 * 1024;
/// Largest gossipsub message on the wire.
pub const GOSSIP_MAX_TRANSMIT_BYTES: usize = MAX_RECORD_BYTES + 4 * 1024;
/// Concurrent search streams per connection.
const SEARCH_MAX_STREAMS: usize = 64;
/// Concurrent log streams per connection.
const LOG_MAX_STREAMS: usize = 8;

/// The search protocol's behaviour (the CBOR codec, counted).
pub type SearchBehaviour =
    request_response::Behaviour<CountingCodec<SearchRequest, SearchResponse>>;
/// The log protocol's behaviour.
pub type LogBehaviour = request_response::Behaviour<CountingCodec<LogRequest, LogResponse>>;

/// Every protocol the mesh speaks.
#[derive(NetworkBehaviour)]
pub struct MeshBehaviour {
    /// Connection limits (first: it denies before others set up state).
    pub limits: connection_limits::Behaviour,
    /// Incoming connections per IP address (`mesh/admission.rs`).
    pub per_ip: super::admission::PerIp,
    /// Peers whose dial failed are not dialled again at once
    /// (`mesh/backoff.rs`).
    pub backoff: super::backoff::DialBackoff,
    /// Peer information exchange; feeds Kademlia addresses.
    pub identify: identify::Behaviour,
    /// Liveness: a connection whose pings fail twice in a row is closed.
    pub ping: ping::Behaviour,
    /// The DHT: agent records and capability providers.
    pub kad: kad::Behaviour<MemoryStore>,
    /// Record propagation.
    pub gossipsub: gossipsub::Behaviour,
    /// Search requests.
    pub search: SearchBehaviour,
    /// Log requests: consistency proofs, witness cosignatures.
    pub log: LogBehaviour,
}

/// The records topic.
pub fn records_topic() -> gossipsub::IdentTopic {
    gossipsub::IdentTopic::new(RECORDS_TOPIC)
}

/// The checkpoints topic.
pub fn checkpoints_topic() -> gossipsub::IdentTopic {
    gossipsub::IdentTopic::new(CHECKPOINTS_TOPIC)
}

/// Peer scoring: what a peer gains for useful deliveries and loses for
/// invalid messages, and where it is cut off.
///
/// - P4 (invalid messages, the one that matters): weight -10 on a topic of
///   weight 1, squared counter, decay 0.99 per second (half-life ~70 s):
///   one rejected record costs -10, three cost -90 and put the peer under
///   the graylist threshold (-80) until it decays.
/// - P1 (time in mesh) +0.01 per second, capped at +1; P2 (first
///   deliveries) +1 each, capped at 50, decay 0.9/s. P3/P3b (mesh delivery
///   rate) are off: records are published sporadically, so a delivery-rate
///   expectation would penalise honest, quiet peers.
/// - IP colocation: -5 per peer beyond 10 on one IP, except loopback
///   (tests, simulations and the demo run many nodes on 127.0.0.1).
/// - Thresholds: gossip -10 (no IHAVE exchange), publish -50, graylist -80,
///   accept PX 10 (PX is off anyway), opportunistic graft 1.
pub fn score_params() -> (gossipsub::PeerScoreParams, gossipsub::PeerScoreThresholds) {
    let topic = gossipsub::TopicScoreParams {
        topic_weight: 1.0,
        time_in_mesh_weight: 0.01,
        time_in_mesh_quantum: Duration::from_secs(1),
        time_in_mesh_cap: 100.0,
        first_message_deliveries_weight: 1.0,
        first_message_deliveries_decay: 0.9,
        first_message_deliveries_cap: 50.0,
        mesh_message_deliveries_weight: 0.0,
        mesh_failure_penalty_weight: 0.0,
        invalid_message_deliveries_weight: -10.0,
        invalid_message_deliveries_decay: 0.99,
        ..Default::default()
    };
    let mut params = gossipsub::PeerScoreParams {
        topic_score_cap: 50.0,
        app_specific_weight: 1.0,
        ip_colocation_factor_weight: -5.0,
        ip_colocation_factor_threshold: 10.0,
        ip_colocation_factor_whitelist: HashSet::from([
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ]),
        ..Default::default()
    };
    params.topics.insert(records_topic().hash(), topic.clone());
    params.topics.insert(checkpoints_topic().hash(), topic);
    let thresholds = gossipsub::PeerScoreThresholds {
        gossip_threshold: -10.0,
        publish_threshold: -50.0,
        graylist_threshold: -80.0,
        accept_px_threshold: 10.0,
        opportunistic_graft_threshold: 1.0,
    };
    (params, thresholds)
}

fn behaviour_error(reason: impl ToString) -> MeshError {
    MeshError::Behaviour {
        reason: reason.to_string(),
    }
}

fn gossipsub(key: &Keypair) -> Result<gossipsub::Behaviour, MeshError> {
    let config = gossipsub::ConfigBuilder::default()
        .validation_mode(gossipsub::ValidationMode::Strict)
        .validate_messages()
        .message_id_fn(|m: &gossipsub::Message| {
            gossipsub::MessageId::from(Sha256::digest(&m.data).to_vec())
        })
        .max_transmit_size(GOSSIP_MAX_TRANSMIT_BYTES)
        .heartbeat_interval(Duration::from_secs(1))
        .heartbeat_initial_delay(Duration::from_millis(500))
        .duplicate_cache_time(Duration::from_secs(120))
        .build()
        .map_err(behaviour_error)?;
    let mut g =
        gossipsub::Behaviour::new(gossipsub::MessageAuthenticity::Signed(key.clone()), config)
            .map_err(behaviour_error)?;
    let (params, thresholds) = score_params();
    g.with_peer_score(params, thresholds)
        .map_err(behaviour_error)?;
    g.subscribe(&records_topic()).map_err(behaviour_error)?;
    g.subscribe(&checkpoints_topic()).map_err(behaviour_error)?;
    Ok(g)
}

fn kademlia(key: &Keypair, config: &MeshConfig) -> kad::Behaviour<MemoryStore> {
    let t = &config.timeouts;
    let l = &config.limits;
    let peer = key.public().to_peer_id();
    let mut kc = kad::Config::new(StreamProtocol::new(KAD_PROTOCOL));
    kc.set_record_filtering(kad::StoreInserts::FilterBoth)
        .set_max_packet_size(KAD_MAX_PACKET_BYTES)
        .set_query_timeout(t.kad_query)
        .set_record_ttl(Some(t.record_ttl))
        .set_publication_interval(Some(t.record_publication))
        .set_replication_interval(Some(t.record_replication))
        .set_provider_record_ttl(Some(t.provider_ttl))
        .set_provider_publication_interval(Some(t.provider_publication))
        .set_periodic_bootstrap_interval(Some(t.bootstrap_interval));
    let store = MemoryStore::with_config(
        peer,
        MemoryStoreConfig {
            max_records: l.max_dht_records,
            max_value_bytes: DHT_MAX_VALUE_BYTES,
            max_provided_keys: l.max_provider_keys,
            max_providers_per_key: l.max_providers_per_key,
        },
    );
    let mut kad = kad::Behaviour::with_config(peer, store, kc);
    kad.set_mode(Some(if config.listen.is_empty() {
        kad::Mode::Client
    } else {
        kad::Mode::Server
    }));
    kad
}

fn search(config: &MeshConfig, stats: &MeshStats) -> SearchBehaviour {
    let codec = CountingCodec::bounded(stats.clone());
    let rc = request_response::Config::default()
        .with_request_timeout(config.timeouts.request)
        .with_max_concurrent_streams(SEARCH_MAX_STREAMS);
    request_response::Behaviour::with_codec(
        codec,
        [(StreamProtocol::new(SEARCH_PROTOCOL), ProtocolSupport::Full)],
        rc,
    )
}

fn log(config: &MeshConfig, stats: &MeshStats) -> LogBehaviour {
    let codec = CountingCodec::bounded_log(stats.clone());
    let rc = request_response::Config::default()
        .with_request_timeout(config.timeouts.request)
        .with_max_concurrent_streams(LOG_MAX_STREAMS);
    request_response::Behaviour::with_codec(
        codec,
        [(StreamProtocol::new(LOG_PROTOCOL), ProtocolSupport::Full)],
        rc,
    )
}

impl MeshBehaviour {
    fn new(key: &Keypair, config: &MeshConfig, stats: &MeshStats) -> Result<Self, MeshError> {
        let l = &config.limits;
        let limits = connection_limits::ConnectionLimits::default()
            .with_max_established(Some(l.max_connections))
            .with_max_established_incoming(Some(l.max_incoming()))
            .with_max_established_per_peer(Some(l.max_connections_per_peer))
            .with_max_pending_incoming(Some(l.max_pending_incoming));
        let mut limits = connection_limits::Behaviour::new(limits);
        // Trusted and bootstrap peers get in whatever the count: a node
        // full of strangers still hears its partners.
        for peer in &config.vouched_peers() {
            limits.bypass_peer_id(peer);
        }
        let identify = identify::Behaviour::new(
            identify::Config::new(IDENTIFY_PROTOCOL.to_owned(), key.public())
                .with_agent_version(config.agent_version.clone())
                .with_push_listen_addr_updates(true),
        );
        Ok(Self {
            limits,
            per_ip: super::admission::PerIp::new(l.max_connections_per_ip, l.cap_loopback_per_ip),
            backoff: super::backoff::DialBackoff::new(
                config.timeouts.dial_backoff_min,
                config.timeouts.dial_backoff_max,
                config.vouched_peers().into_iter().collect(),
                stats.clone(),
            ),
            identify,
            ping: ping::Behaviour::new(
                ping::Config::new()
                    .with_interval(config.timeouts.ping)
                    .with_timeout(config.timeouts.ping),
            ),
            kad: kademlia(key, config),
            gossipsub: gossipsub(key)?,
            search: search(config, stats),
            log: log(config, stats),
        })
    }
}

/// Builds the swarm (TCP + QUIC + DNS, noise, yamux; or memory, noise or
/// plaintext, yamux, as `config.transport` says) with [`MeshBehaviour`].
/// The transport's byte counters (libp2p bandwidth metrics) and the search
/// codec's counters go to `stats`.
///
/// # Errors
/// [`MeshError::Transport`] when a transport cannot be set up (e.g. no
/// system DNS configuration), [`MeshError::Behaviour`] for a behaviour.
pub fn build_swarm(
    key: Keypair,
    config: &MeshConfig,
    stats: &MeshStats,
) -> Result<Swarm<MeshBehaviour>, MeshError> {
    let transport_error = |e: &dyn std::fmt::Display| MeshError::Transport {
        reason: e.to_string(),
    };
    let idle = config.timeouts.idle_connection;
    let mut registry = libp2p::metrics::Registry::default();
    let policy = config.address_policy();
    let kind = config.transport;
    let behaviour =
        |key: &Keypair| MeshBehaviour::new(key, config, stats).map_err(|e| Box::new(e) as Box<_>);
    let builder = SwarmBuilder::with_existing_identity(key)
        .with_tokio()
        .with_other_transport(|key| super::transport::build(key, policy, kind))
        .map_err(|e| transport_error(&e))?;
    // The memory transport has no names to resolve: no DNS layer.
    let swarm = if kind.is_memory() {
        builder
            .with_bandwidth_metrics(&mut registry)
            .with_behaviour(behaviour)
            .map_err(behaviour_error)?
            .with_swarm_config(|c| c.with_idle_connection_timeout(idle))
            .build()
    } else {
        builder
            .with_dns()
            .map_err(|e| transport_error(&e))?
            .with_bandwidth_metrics(&mut registry)
            .with_behaviour(behaviour)
            .map_err(behaviour_error)?
            .with_swarm_config(|c| c.with_idle_connection_timeout(idle))
            .build()
    };
    stats.set_bandwidth(registry);
    Ok(swarm)
}

/// The bootstrap and kad address of a peer are the multiaddr without its
/// trailing `/p2p/..`.
pub fn split_peer(addr: &libp2p::Multiaddr) -> (libp2p::Multiaddr, Option<libp2p::PeerId>) {
    let mut base = addr.clone();
    match base.pop() {
        Some(libp2p::multiaddr::Protocol::P2p(peer)) => (base, Some(peer)),
        _ => (addr.clone(), None),
    }
}
