//! The mesh's transport: TCP (noise, yamux) or QUIC, under an address
//! policy, under DNS; or, as a config choice ([`MeshTransport::Memory`]),
//! libp2p's in-process memory transport (`/memory/N`, noise or, for the
//! simulator's largest swarms, plaintext; yamux) under the same policy, so
//! that many swarms run in one process (the simulator).
//!
//! [`AddressFilter`] sits below the DNS layer, so it sees the address a
//! name resolved to, and refuses to dial what the node's
//! [`AddressPolicy`] refuses (docs/protocol.md#address-policy, the same policy the crawler
//! uses): by default loopback, private, link-local, CGNAT, multicast and
//! unspecified addresses, whether a peer advertised them (identify,
//! Kademlia, provider records) or a `/dns4/` name resolved to them.
//! `p2p.allow_private_addresses` opts a node in (tests, the demo, a
//! federation on a private network). A `/memory/N` address counts as a
//! local one: dialled only under that opt-in. Listening is never filtered.

use std::net::IpAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use libp2p::core::muxing::StreamMuxerBox;
use libp2p::core::transport::{
    Boxed, DialOpts, ListenerId, MemoryTransport, Transport, TransportError, TransportEvent,
};
use libp2p::core::upgrade;
use libp2p::identity::Keypair;
use libp2p::multiaddr::Protocol;
use libp2p::{noise, plaintext, quic, tcp, yamux, Multiaddr, PeerId};

use super::MeshTransport;
use crate::net::AddressPolicy;

/// Whether an address names the unspecified IP (`0.0.0.0` or `::`): a
/// wildcard to listen on, never an address to dial or to announce.
pub(super) fn is_unspecified(addr: &Multiaddr) -> bool {
    addr.iter().any(|p| match p {
        Protocol::Ip4(ip) => ip.is_unspecified(),
        Protocol::Ip6(ip) => ip.is_unspecified(),
        _ => false,
    })
}

/// The IP an address dials first, if it starts with one.
pub(crate) fn first_ip(addr: &Multiaddr) -> Option<IpAddr> {
    match addr.iter().next()? {
        Protocol::Ip4(ip) => Some(IpAddr::V4(ip)),
        Protocol::Ip6(ip) => Some(IpAddr::V6(ip)),
        _ => None,
    }
}

/// Whether `addr` starts with an IP address `policy` permits, or is an
/// in-process `/memory/N` address and the policy permits local ones (what
/// the transport checks, below DNS).
fn ip_permitted(policy: AddressPolicy, addr: &Multiaddr) -> bool {
    match addr.iter().next() {
        Some(Protocol::Memory(_)) => policy.allow_private,
        _ => first_ip(addr).is_some_and(|ip| policy.check(ip).is_ok()),
    }
}

/// Whether `policy` lets the mesh dial `addr`: an IP address the policy
/// permits, or a name (checked again once resolved).
pub(crate) fn dialable(policy: AddressPolicy, addr: &Multiaddr) -> bool {
    ip_permitted(policy, addr)
        || matches!(
            addr.iter().next(),
            Some(Protocol::Dns(_) | Protocol::Dns4(_) | Protocol::Dns6(_) | Protocol::Dnsaddr(_))
        )
}

/// A transport that refuses to dial addresses its policy refuses.
#[derive(Debug)]
pub struct AddressFilter<T> {
    inner: T,
    policy: AddressPolicy,
}

impl<T> AddressFilter<T> {
    /// Wraps `inner`.
    pub fn new(inner: T, policy: AddressPolicy) -> Self {
        Self { inner, policy }
    }
}

impl<T: Transport + Unpin> Transport for AddressFilter<T> {
    type Output = T::Output;
    type Error = T::Error;
    type ListenerUpgrade = T::ListenerUpgrade;
    type Dial = T::Dial;

    fn listen_on(
        &mut self,
        id: ListenerId,
        addr: Multiaddr,
    ) -> Result<(), TransportError<Self::Error>> {
        self.inner.listen_on(id, addr)
    }

    fn remove_listener(&mut self, id: ListenerId) -> bool {
        self.inner.remove_listener(id)
    }

    fn dial(
        &mut self,
        addr: Multiaddr,
        opts: DialOpts,
    ) -> Result<Self::Dial, TransportError<Self::Error>> {
        if !ip_permitted(self.policy, &addr) {
            tracing::debug!(%addr, "not dialling: the address policy refuses it");
            return Err(TransportError::MultiaddrNotSupported(addr));
        }
        self.inner.dial(addr, opts)
    }

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<TransportEvent<Self::ListenerUpgrade, Self::Error>> {
        Pin::new(&mut self.inner).poll(cx)
    }
}

/// How long a TCP connection may take from connect to a multiplexed,
/// authenticated connection, either way. Without it a peer whose port
/// accepts and then says nothing holds the dial (and every DHT query
/// waiting on that peer) for as long as the socket stays open. QUIC's
/// handshake has its own timeout.
pub(crate) const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The transport `kind` names, filtered by `policy`: TCP (noise, yamux)
/// or QUIC, on which the swarm builder puts DNS; or the memory transport
/// with the same upgrade (noise, yamux), or with plaintext in place of
/// noise, without DNS (no names to resolve in a process).
///
/// # Errors
/// When the noise configuration cannot be made from `key`.
pub(crate) fn build(
    key: &Keypair,
    policy: AddressPolicy,
    kind: MeshTransport,
) -> Result<Boxed<(PeerId, StreamMuxerBox)>, Box<dyn std::error::Error + Send + Sync>> {
    match kind {
        MeshTransport::Memory => {
            let memory = MemoryTransport::default()
                .upgrade(upgrade::Version::V1Lazy)
                .authenticate(noise::Config::new(key)?)
                .multiplex(yamux::Config::default())
                .map(|(peer, muxer), _| (peer, StreamMuxerBox::new(muxer)));
            return Ok(AddressFilter::new(memory, policy).boxed());
        }
        MeshTransport::MemoryPlaintext => {
            let memory = MemoryTransport::default()
                .upgrade(upgrade::Version::V1Lazy)
                .authenticate(plaintext::Config::new(key))
                .multiplex(yamux::Config::default())
                .map(|(peer, muxer), _| (peer, StreamMuxerBox::new(muxer)));
            return Ok(AddressFilter::new(memory, policy).boxed());
        }
        MeshTransport::TcpQuic => {}
    }
    let tcp = tcp::tokio::Transport::new(tcp::Config::default().nodelay(true))
        .upgrade(upgrade::Version::V1Lazy)
        .authenticate(noise::Config::new(key)?)
        .multiplex(yamux::Config::default())
        .timeout(HANDSHAKE_TIMEOUT)
        .map(|(peer, muxer), _| (peer, StreamMuxerBox::new(muxer)));
    let quic = quic::tokio::Transport::new(quic::Config::new(key))
        .map(|(peer, muxer), _| (peer, StreamMuxerBox::new(muxer)));
    let either = tcp.or_transport(quic).map(|e, _| e.into_inner());
    Ok(AddressFilter::new(either, policy).boxed())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> Multiaddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_default_policy_dials_only_public_addresses_and_names() {
        let strict = AddressPolicy::default();
        for refused in [
            "/ip4/127.0.0.1/tcp/4001",
            "/ip4/10.1.2.3/tcp/4001",
            "/ip4/172.20.0.5/udp/4001/quic-v1",
            "/ip4/192.168.1.1/tcp/1",
            "/ip4/169.254.169.254/tcp/80",
            "/ip4/100.64.0.1/tcp/1",
            "/ip4/0.0.0.0/tcp/1",
            "/ip6/::1/tcp/4001",
            "/ip6/::ffff:10.0.0.1/tcp/1",
            "/ip6/fd00::1/tcp/1",
            "/unix/tmp%2Fsock",
            "/memory/1234",
        ] {
            assert!(
                !dialable(strict, &addr(refused)),
                "{refused} must be refused"
            );
        }
        for permitted in [
            "/ip4/1.2.3.4/tcp/4001",
            "/ip4/8.8.8.8/udp/4001/quic-v1",
            "/ip6/2a00:1450::1/tcp/4001",
            "/dns4/node1.example/tcp/4001",
        ] {
            assert!(
                dialable(strict, &addr(permitted)),
                "{permitted} must be permitted"
            );
        }
    }

    #[test]
    fn allow_private_permits_internal_ranges_but_never_unroutable_ones() {
        let open = AddressPolicy {
            allow_private: true,
        };
        assert!(dialable(open, &addr("/ip4/127.0.0.1/tcp/4001")));
        assert!(dialable(open, &addr("/ip4/172.20.0.5/tcp/4001")));
        assert!(dialable(open, &addr("/memory/1234")));
        assert!(!dialable(open, &addr("/ip4/0.0.0.0/tcp/4001")));
        assert!(!dialable(open, &addr("/ip4/224.0.0.1/tcp/4001")));
    }

    /// A port that accepts and then says nothing: the dial fails at the
    /// handshake timeout instead of waiting on the silent socket.
    #[tokio::test]
    async fn a_dial_to_a_silent_port_fails_at_the_handshake_timeout() {
        use libp2p::core::transport::PortUse;
        use libp2p::core::Endpoint;
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = silent.local_addr().unwrap().port();
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((socket, _)) = silent.accept().await {
                open.push(socket);
            }
        });
        let open = AddressPolicy {
            allow_private: true,
        };
        let mut dialer = build(&Keypair::generate_ed25519(), open, MeshTransport::TcpQuic).unwrap();
        let opts = DialOpts {
            role: Endpoint::Dialer,
            port_use: PortUse::New,
        };
        let started = tokio::time::Instant::now();
        let dialled = dialer
            .dial(addr(&format!("/ip4/127.0.0.1/tcp/{port}")), opts)
            .unwrap();
        let outcome = tokio::time::timeout(HANDSHAKE_TIMEOUT * 3, dialled)
            .await
            .expect("the dial ends by itself");
        assert!(outcome.is_err(), "a silent port is no peer");
        assert!(
            started.elapsed() >= HANDSHAKE_TIMEOUT,
            "it waited for the handshake"
        );
        held.abort();
    }

    /// The peer id a node of `dial` ends with when it dials a listener of
    /// `listen` over memory, or why it failed.
    async fn dial_to(listen: MeshTransport, dial: MeshTransport) -> Result<PeerId, String> {
        use libp2p::core::transport::PortUse;
        use libp2p::core::Endpoint;
        let open = AddressPolicy {
            allow_private: true,
        };
        let (a, b) = (Keypair::generate_ed25519(), Keypair::generate_ed25519());
        let mut listener = build(&a, open, listen).unwrap();
        listener
            .listen_on(ListenerId::next(), addr("/memory/0"))
            .unwrap();
        let at = loop {
            let event = std::future::poll_fn(|cx| Pin::new(&mut listener).poll(cx)).await;
            if let TransportEvent::NewAddress { listen_addr, .. } = event {
                break listen_addr;
            }
        };
        // The listener's side runs on its own; the dialler's outcome is
        // what is compared.
        let accepting = tokio::spawn(async move {
            loop {
                let event = std::future::poll_fn(|cx| Pin::new(&mut listener).poll(cx)).await;
                if let TransportEvent::Incoming { upgrade, .. } = event {
                    let _ = upgrade.await;
                }
            }
        });
        let mut dialer = build(&b, open, dial).unwrap();
        let opts = DialOpts {
            role: Endpoint::Dialer,
            port_use: PortUse::New,
        };
        let dialled = dialer.dial(at, opts).unwrap();
        let outcome = tokio::time::timeout(std::time::Duration::from_secs(20), dialled)
            .await
            .expect("the dial ends")
            .map(|(peer, _)| peer)
            .map_err(|e| e.to_string());
        accepting.abort();
        if let Ok(peer) = &outcome {
            assert_eq!(*peer, a.public().to_peer_id(), "the listener's own id");
        }
        outcome
    }

    /// The simulator's plaintext memory transport speaks plaintext, not
    /// noise: its nodes connect to each other, learning each other's ids,
    /// and a noise node cannot connect to one, nor one to a noise node.
    #[tokio::test]
    async fn the_plaintext_memory_transport_speaks_plaintext_and_only_to_its_kind() {
        use MeshTransport::{Memory, MemoryPlaintext};
        for same in [Memory, MemoryPlaintext] {
            let outcome = dial_to(same, same).await;
            assert!(outcome.is_ok(), "{same:?}: {outcome:?}");
        }
        for (listen, dial) in [(MemoryPlaintext, Memory), (Memory, MemoryPlaintext)] {
            let outcome = dial_to(listen, dial).await;
            assert!(
                outcome.is_err(),
                "{dial:?} dialling {listen:?} must fail: {outcome:?}"
            );
        }
        assert!(MemoryPlaintext.is_memory() && Memory.is_memory());
        assert!(!MeshTransport::TcpQuic.is_memory());
    }
}
