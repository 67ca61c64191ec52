//! [`MeshConfig`]: what the mesh listens on and joins through, and how it
//! is bounded. Plain values (no serde): the node builds it from its
//! `[p2p]` section ([`MeshConfig::from_p2p`]) and hands it to
//! [`Mesh::spawn`](super::Mesh::spawn), which calls [`MeshConfig::validate`].

use std::time::Duration;

use libp2p::multiaddr::Protocol;
use libp2p::Multiaddr;

use super::MeshError;
use crate::config::P2pConfig;
use crate::net::AddressPolicy;

/// Which transport the mesh runs over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum MeshTransport {
    /// TCP (noise, yamux) and QUIC v1, under DNS: what a node runs.
    #[default]
    TcpQuic,
    /// libp2p's in-process memory transport (`/memory/N` multiaddrs,
    /// `/memory/0` picks a free one), with the same noise and yamux
    /// upgrade and address policy (a memory address is a local one:
    /// dialled only with `allow_private_addresses`). For many swarms in
    /// one process: the simulator, tests.
    Memory,
    /// The memory transport with libp2p's plaintext handshake in place of
    /// noise: peers exchange their public keys (so peer ids hold) and
    /// nothing is encrypted. Only for many swarms in one process, to save
    /// noise's per-connection buffers and handshakes; every byte stays in
    /// the process, as with [`MeshTransport::Memory`].
    MemoryPlaintext,
}

impl MeshTransport {
    /// Whether this is one of the in-process memory transports.
    pub fn is_memory(self) -> bool {
        matches!(self, Self::Memory | Self::MemoryPlaintext)
    }
}

/// What the mesh listens on and joins through.
#[derive(Debug, Clone)]
pub struct MeshConfig {
    /// The transport (default TCP + QUIC).
    pub transport: MeshTransport,
    /// Multiaddrs to listen on (`/ip4/../tcp/..`, `/ip4/../udp/../quic-v1`;
    /// `/memory/..` with the memory transports).
    /// Empty: a client-only node (Kademlia client mode).
    pub listen: Vec<Multiaddr>,
    /// Peers to join through: multiaddrs, normally ending in
    /// `/p2p/<peer id>`; `/dns4/..` names are resolved at dial time.
    pub bootstrap: Vec<Multiaddr>,
    /// Addresses peers can reach us at, confirmed as external at start
    /// (behind NAT or a load balancer, or a `/dns4/..` name): announced in
    /// provider records and identify. Must be dialable under the address
    /// policy.
    pub external_addresses: Vec<Multiaddr>,
    /// Peers this node trusts (`p2p.trusted_peers`): with the bootstrap
    /// peers, they connect whatever the connection limits.
    pub trusted: Vec<libp2p::PeerId>,
    /// Dial loopback, private, link-local and CGNAT addresses
    /// ([`transport`](super::transport)); off by default.
    pub allow_private_addresses: bool,
    /// The number of capability shards S (docs/protocol.md#capability-shards); default 8.
    pub shards: u32,
    /// The identify agent version, e.g. `agentmesh/0.1.0`.
    pub agent_version: String,
    /// Size and count bounds.
    pub limits: MeshLimits,
    /// Deadlines and intervals.
    pub timeouts: MeshTimeouts,
}

/// Size and count bounds of the mesh.
#[derive(Debug, Clone)]
pub struct MeshLimits {
    /// Established connections in total.
    pub max_connections: u32,
    /// Established connections per peer (TCP and QUIC, simultaneous dials).
    pub max_connections_per_peer: u32,
    /// Connected peers over which the loop trims connections
    /// ([`trim`](super::trim)), so that new peers (Kademlia's dials among
    /// them) still find room below `max_connections`.
    pub connections_high_water: u32,
    /// Connected peers trimming leaves (fewer, when too many are shielded).
    pub connections_low_water: u32,
    /// Incoming connections still in their handshake.
    pub max_pending_incoming: u32,
    /// Incoming connections (in their handshake or established) from one
    /// IP address; 0: no cap (`mesh/admission.rs`).
    pub max_connections_per_ip: u32,
    /// Cap loopback addresses too (off: every node on one host shares
    /// 127.0.0.1).
    pub cap_loopback_per_ip: bool,
    /// Agent records held in the DHT store.
    pub max_dht_records: usize,
    /// Keys with provider records held in the DHT store (ours and others').
    pub max_provider_keys: usize,
    /// Providers kept per key (Kademlia's k = 20; shards spread the rest).
    pub max_providers_per_key: usize,
    /// Handler tasks (records and searches) in flight at once, split into
    /// pools of their own for searches, gossip and the DHT
    /// (`mesh/quota.rs`); over a pool, inbound items of its kind are
    /// ignored and counted as `overloaded`.
    pub max_inflight_handlers: usize,
    /// Search and DHT handler tasks one peer may hold at once (of gossip,
    /// half the gossip pool: a relay forwards everyone's records); over
    /// this its items are ignored and counted as `peer_quota`.
    pub max_inflight_per_peer: usize,
    /// Search and DHT items one peer may send over time (a token bucket
    /// per peer and kind); over it they are ignored and counted as
    /// `peer_rate`.
    pub peer_rates: super::Rates,
    /// Peers one search may ask at once.
    pub max_search_fanout: usize,
    /// Providers one [`MeshClient::providers`](super::MeshClient::providers)
    /// call returns at most.
    pub max_providers_result: usize,
    /// Capabilities one publish may provide.
    pub max_capabilities_per_publish: usize,
    /// Capacity of the command channel (and of the internal verdict channel).
    pub command_buffer: usize,
}

impl MeshLimits {
    /// Established incoming connections: all but an eighth of
    /// `max_connections`, which stays for this node's own dials (its
    /// searches, lookups and bootstrap), so peers dialling in cannot take
    /// every slot.
    pub fn max_incoming(&self) -> u32 {
        (self.max_connections - self.max_connections / 8).max(1)
    }

    /// Sets the connection limit and the trimming marks with it: the high
    /// mark at 3/4 of the limit, the low one at 5/8 (192 and 160 of the
    /// default 256).
    pub fn set_max_connections(&mut self, max: u32) {
        self.max_connections = max;
        let share = |num: u64, den: u64| u32::try_from(u64::from(max) * num / den).unwrap_or(max);
        self.connections_high_water = share(3, 4).clamp(1, max.max(1));
        self.connections_low_water = share(5, 8).min(self.connections_high_water);
    }
}

impl Default for MeshLimits {
    fn default() -> Self {
        Self {
            max_connections: 256,
            max_connections_per_peer: 3,
            connections_high_water: 192,
            connections_low_water: 160,
            max_pending_incoming: 64,
            max_connections_per_ip: 8,
            cap_loopback_per_ip: false,
            max_dht_records: 4096,
            max_provider_keys: 8192,
            max_providers_per_key: 20,
            max_inflight_handlers: 128,
            max_inflight_per_peer: 8,
            peer_rates: super::Rates::default(),
            max_search_fanout: 32,
            max_providers_result: 64,
            max_capabilities_per_publish: 64,
            command_buffer: 256,
        }
    }
}

/// Deadlines and intervals of the mesh.
#[derive(Debug, Clone)]
pub struct MeshTimeouts {
    /// Request-response timeout of one search request (a per-call
    /// deadline given to `search` usually ends it sooner).
    pub request: Duration,
    /// How long a handler call may take before it is given up.
    pub handler: Duration,
    /// Kademlia query timeout.
    pub kad_query: Duration,
    /// How long `publish` waits for its DHT puts before reporting.
    pub publish: Duration,
    /// Deadline of `get_record` and `providers`.
    pub lookup: Duration,
    /// How long `spawn` waits for the listeners to report an address.
    pub listen: Duration,
    /// A connection with no stream open for this long is closed.
    pub idle_connection: Duration,
    /// A peer connected or used (a search either way) within this long
    /// is not trimmed ([`trim`](super::trim)).
    pub connection_grace: Duration,
    /// Lifetime of a DHT record at the peers that store it.
    pub record_ttl: Duration,
    /// How often our own DHT records are re-published (< `record_ttl`).
    pub record_publication: Duration,
    /// How often stored DHT records are re-replicated (< publication).
    pub record_replication: Duration,
    /// Lifetime of a provider record.
    pub provider_ttl: Duration,
    /// How often Kademlia re-publishes our provider records.
    pub provider_publication: Duration,
    /// How often the loop re-announces every capability key it provides
    /// (reaches peers that joined since, after churn).
    pub reprovide: Duration,
    /// How often the loop runs a Kademlia bootstrap.
    pub bootstrap_interval: Duration,
    /// First re-dial delay of an unreachable bootstrap peer (doubles).
    pub bootstrap_backoff_min: Duration,
    /// Largest re-dial delay of an unreachable bootstrap peer.
    pub bootstrap_backoff_max: Duration,
    /// How long any other peer whose dial failed is not dialled again
    /// (doubles with each failure in a row; `mesh/backoff.rs`).
    pub dial_backoff_min: Duration,
    /// The longest such wait.
    pub dial_backoff_max: Duration,
    /// How often a connection is pinged, and how long a ping waits; two
    /// failures in a row close the connection.
    pub ping: Duration,
}

impl Default for MeshTimeouts {
    fn default() -> Self {
        Self {
            request: Duration::from_secs(10),
            handler: Duration::from_secs(5),
            kad_query: Duration::from_secs(30),
            publish: Duration::from_secs(10),
            lookup: Duration::from_secs(10),
            listen: Duration::from_secs(5),
            idle_connection: Duration::from_secs(120),
            connection_grace: Duration::from_secs(30),
            record_ttl: Duration::from_secs(36 * 3600),
            record_publication: Duration::from_secs(12 * 3600),
            record_replication: Duration::from_secs(3600),
            provider_ttl: Duration::from_secs(36 * 3600),
            provider_publication: Duration::from_secs(12 * 3600),
            reprovide: Duration::from_secs(3600),
            bootstrap_interval: Duration::from_secs(300),
            bootstrap_backoff_min: Duration::from_secs(1),
            bootstrap_backoff_max: Duration::from_secs(60),
            dial_backoff_min: Duration::from_secs(2),
            dial_backoff_max: Duration::from_secs(60),
            ping: Duration::from_secs(10),
        }
    }
}

impl Default for MeshConfig {
    fn default() -> Self {
        Self {
            transport: MeshTransport::default(),
            listen: Vec::new(),
            bootstrap: Vec::new(),
            external_addresses: Vec::new(),
            trusted: Vec::new(),
            allow_private_addresses: false,
            shards: 8,
            agent_version: format!("agentmesh/{}", env!("CARGO_PKG_VERSION")),
            limits: MeshLimits::default(),
            timeouts: MeshTimeouts::default(),
        }
    }
}

fn parse_addrs(list: &[String]) -> Result<Vec<Multiaddr>, MeshError> {
    list.iter()
        .map(|s| {
            s.parse::<Multiaddr>().map_err(|e| MeshError::BadAddress {
                addr: s.clone(),
                reason: e.to_string(),
            })
        })
        .collect()
}

impl MeshConfig {
    /// The peers that connect whatever the connection limits: the trusted
    /// ones and those the bootstrap addresses name.
    pub fn vouched_peers(&self) -> Vec<libp2p::PeerId> {
        let named = self
            .bootstrap
            .iter()
            .filter_map(|a| super::behaviour::split_peer(a).1);
        let mut out: Vec<libp2p::PeerId> = self.trusted.iter().copied().chain(named).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The policy the transport dials under.
    pub fn address_policy(&self) -> AddressPolicy {
        AddressPolicy {
            allow_private: self.allow_private_addresses,
        }
    }

    /// The node's `[p2p]` section, with the default limits and timeouts.
    ///
    /// # Errors
    /// [`MeshError::BadAddress`] for a string that is not a multiaddr.
    pub fn from_p2p(p2p: &P2pConfig) -> Result<Self, MeshError> {
        Ok(Self {
            listen: parse_addrs(&p2p.listen)?,
            bootstrap: parse_addrs(&p2p.bootstrap)?,
            external_addresses: parse_addrs(&p2p.external_addresses)?,
            // Config validation refused any that is not a peer id.
            trusted: p2p
                .trusted_peers
                .iter()
                .filter_map(|p| p.parse().ok())
                .collect(),
            allow_private_addresses: p2p.allow_private_addresses,
            limits: MeshLimits {
                max_connections_per_ip: p2p.max_connections_per_ip,
                ..MeshLimits::default()
            },
            timeouts: MeshTimeouts {
                ping: p2p.ping_interval,
                ..MeshTimeouts::default()
            },
            ..Self::default()
        })
    }

    /// Checks the invariants the swarm relies on.
    ///
    /// # Errors
    /// [`MeshError::Config`] naming the first broken one.
    pub fn validate(&self) -> Result<(), MeshError> {
        let fail = |reason: &str| {
            Err(MeshError::Config {
                reason: reason.to_owned(),
            })
        };
        let l = &self.limits;
        let t = &self.timeouts;
        if self.shards == 0 || self.shards > 1024 {
            return fail("shards must be in 1..=1024");
        }
        if l.max_connections == 0 || l.max_connections_per_peer == 0 {
            return fail("connection limits must be positive");
        }
        if l.connections_high_water == 0
            || l.connections_high_water > l.max_connections
            || l.connections_low_water > l.connections_high_water
        {
            return fail(
                "need connections_low_water <= connections_high_water <= max_connections, high water positive",
            );
        }
        if l.max_dht_records == 0 || l.max_provider_keys == 0 || l.max_providers_per_key == 0 {
            return fail("DHT store limits must be positive");
        }
        if l.max_inflight_handlers == 0 || l.max_inflight_per_peer == 0 || l.command_buffer == 0 {
            return fail(
                "max_inflight_handlers, max_inflight_per_peer and command_buffer must be positive",
            );
        }
        if l.max_search_fanout == 0 || l.max_providers_result == 0 {
            return fail("search fan-out and provider result bounds must be positive");
        }
        if t.record_replication >= t.record_publication || t.record_publication >= t.record_ttl {
            return fail("need record_replication < record_publication < record_ttl");
        }
        if t.provider_publication >= t.provider_ttl {
            return fail("need provider_publication < provider_ttl");
        }
        if t.bootstrap_backoff_min.is_zero() || t.bootstrap_backoff_min > t.bootstrap_backoff_max {
            return fail("need 0 < bootstrap_backoff_min <= bootstrap_backoff_max");
        }
        if t.dial_backoff_min.is_zero() || t.dial_backoff_min > t.dial_backoff_max {
            return fail("need 0 < dial_backoff_min <= dial_backoff_max");
        }
        for d in [
            t.request,
            t.handler,
            t.kad_query,
            t.publish,
            t.lookup,
            t.listen,
        ] {
            if d.is_zero() {
                return fail("timeouts must be positive");
            }
        }
        for addr in &self.bootstrap {
            if !super::transport::dialable(self.address_policy(), addr) {
                return Err(MeshError::BadAddress {
                    addr: addr.to_string(),
                    reason: "a loopback, private or unroutable address: set \
                             p2p.allow_private_addresses = true to dial it"
                        .into(),
                });
            }
            if addr
                .iter()
                .filter(|p| matches!(p, Protocol::P2p(_)))
                .count()
                > 1
            {
                return Err(MeshError::BadAddress {
                    addr: addr.to_string(),
                    reason: "more than one /p2p component".into(),
                });
            }
        }
        for addr in &self.external_addresses {
            let reason = if super::transport::is_unspecified(addr) {
                "an unspecified address cannot be dialled"
            } else if addr.iter().any(|p| matches!(p, Protocol::P2p(_))) {
                "an external address names no peer: drop the /p2p component"
            } else if !super::transport::dialable(self.address_policy(), addr) {
                "a loopback, private or unroutable address would be announced: set \
                 p2p.allow_private_addresses = true on a private mesh"
            } else {
                continue;
            };
            return Err(MeshError::BadAddress {
                addr: addr.to_string(),
                reason: reason.into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_parses_the_node_config() {
        MeshConfig::default().validate().unwrap();
        let c = MeshConfig::from_p2p(&P2pConfig::default()).unwrap();
        assert_eq!(c.listen.len(), 2);
        c.validate().unwrap();
        let bad = P2pConfig {
            listen: vec!["not an addr".into()],
            ..P2pConfig::default()
        };
        assert!(matches!(
            MeshConfig::from_p2p(&bad),
            Err(MeshError::BadAddress { .. })
        ));
    }

    #[test]
    fn validate_refuses_broken_invariants() {
        let mut c = MeshConfig {
            shards: 0,
            ..MeshConfig::default()
        };
        assert!(c.validate().is_err());
        c.shards = 8;
        c.timeouts.record_publication = c.timeouts.record_ttl;
        assert!(c.validate().is_err());
    }

    #[test]
    fn the_trimming_marks_follow_the_connection_limit_and_are_checked() {
        let mut l = MeshLimits::default();
        l.set_max_connections(256);
        let d = MeshLimits::default();
        assert_eq!(
            (l.connections_low_water, l.connections_high_water),
            (d.connections_low_water, d.connections_high_water)
        );
        l.set_max_connections(64);
        assert_eq!(
            (l.connections_low_water, l.connections_high_water),
            (40, 48)
        );
        l.set_max_connections(1);
        assert_eq!((l.connections_low_water, l.connections_high_water), (0, 1));
        let mut c = MeshConfig::default();
        c.limits.set_max_connections(1);
        c.validate().unwrap();
        c.limits.connections_high_water = 2;
        assert!(c.validate().is_err(), "high mark above the limit");
        c.limits.connections_high_water = 0;
        assert!(c.validate().is_err(), "no high mark");
        c.limits.set_max_connections(64);
        c.limits.connections_low_water = 49;
        assert!(c.validate().is_err(), "low mark above the high one");
    }
}
