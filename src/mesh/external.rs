//! Which of our addresses the swarm confirms as external: the addresses
//! Kademlia puts into our provider records (ADD_PROVIDER) and peer
//! entries. rust-libp2p announces only confirmed external addresses, and
//! a third-party client (go-libp2p, py-libp2p) drops a provider record
//! without addresses, so a node must confirm some. Three sources, each
//! under the address policy, so a public node never announces a private
//! address:
//!
//! - `p2p.external_addresses`: the operator says so (checked against the
//!   policy by [`MeshConfig::validate`](super::MeshConfig::validate));
//! - our listen addresses: a concrete one as configured, and the interface
//!   addresses a wildcard listener expands to, except loopback ones (a
//!   peer on another host would dial itself);
//! - observed addresses: the address a peer's identify says it sees us at,
//!   with our listen port put in (the peer saw our outbound port), once
//!   [`OBSERVERS_TO_CONFIRM`] different peers report it.

use std::collections::HashSet;

use libp2p::multiaddr::Protocol;
use libp2p::{Multiaddr, PeerId};

use super::transport::{dialable, first_ip};
use crate::net::AddressPolicy;

/// Different peers that must report one observed address before it is
/// confirmed: one peer alone could lie about what it sees.
pub(super) const OBSERVERS_TO_CONFIRM: usize = 2;
/// Most observed addresses tracked before confirmation (a peer can make
/// up any address; the oldest candidates give way).
pub(super) const MAX_CANDIDATES: usize = 32;

/// The external-address bookkeeping of one swarm.
#[derive(Debug)]
pub(super) struct ExternalAddrs {
    policy: AddressPolicy,
    /// Confirmed because we listen there (withdrawn when the listen
    /// address expires).
    from_listeners: HashSet<Multiaddr>,
    /// Confirmed from peers' observations.
    observed: HashSet<Multiaddr>,
    /// Observed, not yet confirmed: who reported each, in arrival order.
    candidates: Vec<(Multiaddr, HashSet<PeerId>)>,
}

impl ExternalAddrs {
    pub(super) fn new(policy: AddressPolicy) -> Self {
        Self {
            policy,
            from_listeners: HashSet::new(),
            observed: HashSet::new(),
            candidates: Vec::new(),
        }
    }

    /// A listener reported `addr`; `wildcard` when it was configured on an
    /// unspecified address. Returns the address to confirm, if any.
    pub(super) fn on_listen(&mut self, addr: &Multiaddr, wildcard: bool) -> Option<Multiaddr> {
        let loopback = first_ip(addr).is_some_and(|ip| ip.is_loopback());
        if !dialable(self.policy, addr) || (wildcard && loopback) {
            return None;
        }
        self.from_listeners
            .insert(addr.clone())
            .then(|| addr.clone())
    }

    /// A listen address expired: whether to withdraw it.
    pub(super) fn on_listen_expired(&mut self, addr: &Multiaddr) -> bool {
        self.from_listeners.remove(addr) && !self.observed.contains(addr)
    }

    /// `peer` says it sees us at `observed`; `listening` are our listen
    /// addresses. Returns the addresses this observation confirms.
    pub(super) fn on_observed(
        &mut self,
        peer: PeerId,
        observed: &Multiaddr,
        listening: &[Multiaddr],
    ) -> Vec<Multiaddr> {
        let mut confirm = Vec::new();
        for addr in translate(observed, listening) {
            if !dialable(self.policy, &addr)
                || self.observed.contains(&addr)
                || self.from_listeners.contains(&addr)
            {
                continue;
            }
            let at = match self.candidates.iter().position(|(a, _)| *a == addr) {
                Some(at) => at,
                None => {
                    if self.candidates.len() == MAX_CANDIDATES {
                        self.candidates.remove(0);
                    }
                    self.candidates.push((addr.clone(), HashSet::new()));
                    self.candidates.len() - 1
                }
            };
            self.candidates[at].1.insert(peer);
            if self.candidates[at].1.len() >= OBSERVERS_TO_CONFIRM {
                self.candidates.remove(at);
                self.observed.insert(addr.clone());
                confirm.push(addr);
            }
        }
        confirm
    }
}

/// Our listen addresses with their IP replaced by the observed one, for
/// each listener on the observed address's transport (TCP, or QUIC over
/// UDP): the peer saw our IP, and the port we listen on is the one to
/// dial.
fn translate(observed: &Multiaddr, listening: &[Multiaddr]) -> Vec<Multiaddr> {
    let mut parts = observed.iter();
    let Some(ip @ (Protocol::Ip4(_) | Protocol::Ip6(_))) = parts.next() else {
        return Vec::new();
    };
    let transport = parts.next();
    let mut out: Vec<Multiaddr> = Vec::new();
    for listen in listening {
        let mut rest = listen.iter();
        let same_family = matches!(
            (rest.next(), &ip),
            (Some(Protocol::Ip4(_)), Protocol::Ip4(_)) | (Some(Protocol::Ip6(_)), Protocol::Ip6(_))
        );
        let rest: Vec<Protocol> = rest.collect();
        let same_transport = matches!(
            (rest.first(), &transport),
            (Some(Protocol::Tcp(_)), Some(Protocol::Tcp(_)))
                | (Some(Protocol::Udp(_)), Some(Protocol::Udp(_)))
        );
        if !same_family || !same_transport {
            continue;
        }
        let addr: Multiaddr = std::iter::once(ip.clone())
            .chain(rest.into_iter().filter(|p| !matches!(p, Protocol::P2p(_))))
            .collect();
        if !out.contains(&addr) {
            out.push(addr);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Multiaddr {
        s.parse().unwrap()
    }

    const PUBLIC: AddressPolicy = AddressPolicy {
        allow_private: false,
    };
    const PRIVATE: AddressPolicy = AddressPolicy {
        allow_private: true,
    };

    #[test]
    fn a_public_node_confirms_public_listen_addresses_only() {
        let mut e = ExternalAddrs::new(PUBLIC);
        assert_eq!(e.on_listen(&a("/ip4/10.0.0.5/tcp/7701"), true), None);
        assert_eq!(e.on_listen(&a("/ip4/127.0.0.1/tcp/7701"), true), None);
        assert_eq!(e.on_listen(&a("/ip4/127.0.0.1/tcp/7701"), false), None);
        let public = a("/ip4/93.184.216.34/tcp/7701");
        assert_eq!(e.on_listen(&public, true), Some(public.clone()));
        assert_eq!(e.on_listen(&public, true), None, "once");
        assert!(e.on_listen_expired(&public));
        assert!(!e.on_listen_expired(&public));
    }

    #[test]
    fn a_private_mesh_confirms_private_and_configured_loopback_addresses() {
        let mut e = ExternalAddrs::new(PRIVATE);
        let lan = a("/ip4/172.18.0.3/tcp/7701");
        assert_eq!(e.on_listen(&lan, true), Some(lan.clone()));
        let lo = a("/ip4/127.0.0.1/tcp/7701");
        assert_eq!(e.on_listen(&lo, true), None, "not from a wildcard");
        assert_eq!(e.on_listen(&lo, false), Some(lo.clone()), "as configured");
    }

    #[test]
    fn an_observed_address_takes_two_peers_and_our_listen_port() {
        let mut e = ExternalAddrs::new(PUBLIC);
        let listening = [
            a("/ip4/10.0.0.5/tcp/7701"),
            a("/ip4/10.0.0.5/udp/7701/quic-v1"),
            a("/ip6/::1/tcp/7702"),
        ];
        let seen = a("/ip4/81.2.69.142/tcp/53122");
        let (p1, p2) = (PeerId::random(), PeerId::random());
        assert!(e.on_observed(p1, &seen, &listening).is_empty());
        assert!(
            e.on_observed(p1, &seen, &listening).is_empty(),
            "one peer twice"
        );
        assert_eq!(
            e.on_observed(p2, &seen, &listening),
            vec![a("/ip4/81.2.69.142/tcp/7701")],
            "TCP only, with the port we listen on"
        );
        assert!(e
            .on_observed(PeerId::random(), &seen, &listening)
            .is_empty());

        let quic = a("/ip4/81.2.69.142/udp/40000/quic-v1");
        e.on_observed(p1, &quic, &listening);
        assert_eq!(
            e.on_observed(p2, &quic, &listening),
            vec![a("/ip4/81.2.69.142/udp/7701/quic-v1")]
        );
    }

    #[test]
    fn private_observations_are_never_confirmed_on_a_public_node_and_candidates_are_bounded() {
        let mut e = ExternalAddrs::new(PUBLIC);
        let listening = [a("/ip4/10.0.0.5/tcp/7701")];
        let lan = a("/ip4/192.168.1.4/tcp/5000");
        for _ in 0..5 {
            assert!(e.on_observed(PeerId::random(), &lan, &listening).is_empty());
        }
        for i in 0..(MAX_CANDIDATES as u8 + 10) {
            let made_up = a(&format!("/ip4/81.2.{i}.1/tcp/1"));
            e.on_observed(PeerId::random(), &made_up, &listening);
        }
        assert_eq!(e.candidates.len(), MAX_CANDIDATES);
    }
}
