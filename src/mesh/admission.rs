//! Who may connect: at most `max_connections_per_ip` incoming
//! connections (in their handshake or established) from one IP address,
//! so that a few hundred Sybil identities on one host cannot fill every
//! slot of a node; `connection_limits` beside it keeps an eighth of the
//! connections for this node's own dials (reserved outbound slots) and
//! lets the configured trusted and bootstrap peers in whatever the count.
//!
//! A refusal here happens before the handshake (no noise work for the
//! refused), and is counted as `per_ip` among the refused incoming
//! connections. Loopback connections are not capped by default: on one
//! host every node shares 127.0.0.1 (tests, benchmarks, a demo), and a
//! peer there is the operator's own. Memory-transport addresses carry no
//! IP and are not capped either.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::IpAddr;
use std::task::{Context, Poll};

use libp2p::core::multiaddr::Protocol;
use libp2p::core::transport::PortUse;
use libp2p::core::{Endpoint, Multiaddr};
use libp2p::swarm::{
    dummy, ConnectionClosed, ConnectionDenied, ConnectionId, FromSwarm, ListenFailure,
    NetworkBehaviour, THandler, THandlerInEvent, THandlerOutEvent, ToSwarm,
};
use libp2p::PeerId;

/// The refusal [`PerIp`] gives; what the event loop counts as `per_ip`.
#[derive(Debug, thiserror::Error)]
#[error("{ip} already has {held} incoming connections (the most one address may hold)")]
pub struct PerIpExceeded {
    /// The address.
    pub ip: IpAddr,
    /// Its connections when it was refused.
    pub held: u32,
}

/// Caps incoming connections per remote IP address.
#[derive(Debug)]
pub struct PerIp {
    max: u32,
    cap_loopback: bool,
    by_ip: HashMap<IpAddr, u32>,
    ip_of: HashMap<ConnectionId, IpAddr>,
}

impl PerIp {
    /// At most `max` incoming connections per address (0: no cap);
    /// loopback addresses too when `cap_loopback`.
    pub fn new(max: u32, cap_loopback: bool) -> Self {
        Self {
            max,
            cap_loopback,
            by_ip: HashMap::new(),
            ip_of: HashMap::new(),
        }
    }

    /// The IP address a multiaddr starts with, if it is capped.
    fn capped_ip(&self, addr: &Multiaddr) -> Option<IpAddr> {
        let ip = match addr.iter().next()? {
            Protocol::Ip4(ip) => IpAddr::V4(ip),
            Protocol::Ip6(ip) => IpAddr::V6(ip),
            _ => return None,
        };
        // An IPv4-mapped IPv6 address is the IPv4 host it maps.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        (self.max > 0 && (self.cap_loopback || !ip.is_loopback())).then_some(ip)
    }

    fn release(&mut self, connection: ConnectionId) {
        let Some(ip) = self.ip_of.remove(&connection) else {
            return;
        };
        if let Some(n) = self.by_ip.get_mut(&ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.by_ip.remove(&ip);
            }
        }
    }

    /// Incoming connections `ip` holds now.
    pub fn held(&self, ip: &IpAddr) -> u32 {
        self.by_ip.get(ip).copied().unwrap_or(0)
    }
}

/// What a behaviour that only admits or denies connections has to say of
/// the rest: no connection handler of its own (libp2p's `dummy`), no
/// events. [`PerIp`] and `backoff::DialBackoff` share it.
macro_rules! gate_plumbing {
    () => {
        fn handle_established_inbound_connection(
            &mut self,
            _connection_id: ConnectionId,
            _peer: PeerId,
            _local_addr: &Multiaddr,
            _remote_addr: &Multiaddr,
        ) -> Result<THandler<Self>, ConnectionDenied> {
            Ok(dummy::ConnectionHandler)
        }

        fn handle_established_outbound_connection(
            &mut self,
            _connection_id: ConnectionId,
            _peer: PeerId,
            _addr: &Multiaddr,
            _role_override: Endpoint,
            _port_use: PortUse,
        ) -> Result<THandler<Self>, ConnectionDenied> {
            Ok(dummy::ConnectionHandler)
        }

        fn on_connection_handler_event(
            &mut self,
            _peer: PeerId,
            _connection: ConnectionId,
            event: THandlerOutEvent<Self>,
        ) {
            libp2p::core::util::unreachable(event)
        }

        fn poll(
            &mut self,
            _: &mut Context<'_>,
        ) -> Poll<ToSwarm<Self::ToSwarm, THandlerInEvent<Self>>> {
            Poll::Pending
        }
    };
}
pub(super) use gate_plumbing;

impl NetworkBehaviour for PerIp {
    type ConnectionHandler = dummy::ConnectionHandler;
    type ToSwarm = Infallible;

    fn handle_pending_inbound_connection(
        &mut self,
        connection_id: ConnectionId,
        _local_addr: &Multiaddr,
        remote_addr: &Multiaddr,
    ) -> Result<(), ConnectionDenied> {
        let Some(ip) = self.capped_ip(remote_addr) else {
            return Ok(());
        };
        let held = self.held(&ip);
        if held >= self.max {
            return Err(ConnectionDenied::new(PerIpExceeded { ip, held }));
        }
        *self.by_ip.entry(ip).or_default() += 1;
        self.ip_of.insert(connection_id, ip);
        Ok(())
    }

    fn on_swarm_event(&mut self, event: FromSwarm) {
        match event {
            // Counted from the pending handshake until the connection
            // closes, or until the handshake fails or another behaviour
            // refuses it.
            FromSwarm::ConnectionClosed(ConnectionClosed { connection_id, .. })
            | FromSwarm::ListenFailure(ListenFailure { connection_id, .. }) => {
                self.release(connection_id);
            }
            _ => {}
        }
    }

    gate_plumbing!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> Multiaddr {
        s.parse().unwrap()
    }

    fn pending(p: &mut PerIp, id: usize, remote: &str) -> bool {
        let local = addr("/ip4/0.0.0.0/tcp/7701");
        p.handle_pending_inbound_connection(ConnectionId::new_unchecked(id), &local, &addr(remote))
            .is_ok()
    }

    #[test]
    fn one_address_holds_at_most_its_cap_and_gets_its_place_back() {
        let mut p = PerIp::new(2, false);
        assert!(pending(&mut p, 1, "/ip4/203.0.113.5/tcp/4001"));
        assert!(pending(&mut p, 2, "/ip4/203.0.113.5/tcp/4002"));
        assert!(
            !pending(&mut p, 3, "/ip4/203.0.113.5/tcp/4003"),
            "third refused"
        );
        // The same host over IPv6-mapped form is the same address.
        assert!(!pending(&mut p, 4, "/ip6/::ffff:203.0.113.5/tcp/4004"));
        // Another address is not affected.
        assert!(pending(&mut p, 5, "/ip4/198.51.100.7/tcp/4001"));
        // Loopback and memory addresses are not capped here.
        for id in 10..20 {
            assert!(pending(&mut p, id, "/ip4/127.0.0.1/tcp/5000"));
            assert!(pending(&mut p, id + 100, "/memory/77"));
        }
        // A connection that closes gives its place back.
        let ip: IpAddr = "203.0.113.5".parse().unwrap();
        p.release(ConnectionId::new_unchecked(1));
        assert_eq!(p.held(&ip), 1);
        assert!(pending(&mut p, 6, "/ip4/203.0.113.5/tcp/4005"));
        p.release(ConnectionId::new_unchecked(2));
        p.release(ConnectionId::new_unchecked(6));
        assert_eq!(p.held(&ip), 0);
        assert!(!p.by_ip.contains_key(&ip), "no entry left behind");
    }

    #[test]
    fn loopback_is_capped_when_asked_and_zero_means_no_cap() {
        let mut p = PerIp::new(1, true);
        assert!(pending(&mut p, 1, "/ip4/127.0.0.1/tcp/5000"));
        assert!(!pending(&mut p, 2, "/ip4/127.0.0.1/tcp/5001"));
        let mut none = PerIp::new(0, true);
        for id in 0..50 {
            assert!(pending(&mut none, id, "/ip4/203.0.113.5/tcp/4001"));
        }
    }
}
