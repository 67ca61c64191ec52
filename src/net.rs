//! The network address policy (docs/protocol.md#address-policy): which addresses the crawler
//! and the mesh may connect to. A leaf: it imports nothing of the crate.
//!
//! By default a crawler never connects to loopback, private, link-local,
//! CGNAT, multicast, broadcast, documentation or unspecified addresses (nor
//! to IPv4 addresses hidden in IPv6 mapped or compatible forms). Names are
//! resolved once and the checked address is the one connected to, so a
//! second resolution cannot rebind the name to an internal address.
//! `allow_private` (tests, the demo, private deployments) permits loopback,
//! private, link-local and CGNAT ranges; never the unspecified, multicast
//! or broadcast addresses.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Which addresses may be connected to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    /// Permit loopback, private, link-local and CGNAT targets.
    pub allow_private: bool,
}

/// Why an address is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Loopback, private, link-local, CGNAT, unique-local: internal.
    Internal,
    /// Unspecified, multicast, broadcast, documentation or reserved:
    /// never a real peer.
    NotRoutable,
}

impl AddressPolicy {
    /// Checks one address.
    ///
    /// # Errors
    /// The [`Refusal`] when the address may not be connected to.
    pub fn check(&self, ip: IpAddr) -> Result<(), Refusal> {
        let class = match ip {
            IpAddr::V4(v4) => classify_v4(v4),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped().or_else(|| compatible_v4(v6)) {
                Some(v4) => classify_v4(v4),
                None => classify_v6(v6),
            },
        };
        match class {
            Class::Public => Ok(()),
            Class::Internal if self.allow_private => Ok(()),
            Class::Internal => Err(Refusal::Internal),
            Class::NotRoutable => Err(Refusal::NotRoutable),
        }
    }
}

enum Class {
    Public,
    Internal,
    NotRoutable,
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], bits: u32) -> bool {
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    (u32::from(ip) & mask) == (u32::from(Ipv4Addr::from(net)) & mask)
}

fn classify_v4(ip: Ipv4Addr) -> Class {
    const INTERNAL: [([u8; 4], u32); 6] = [
        ([127, 0, 0, 0], 8),    // loopback
        ([10, 0, 0, 0], 8),     // private
        ([172, 16, 0, 0], 12),  // private
        ([192, 168, 0, 0], 16), // private
        ([169, 254, 0, 0], 16), // link-local (cloud metadata lives here)
        ([100, 64, 0, 0], 10),  // CGNAT
    ];
    const NOT_ROUTABLE: [([u8; 4], u32); 8] = [
        ([0, 0, 0, 0], 8),       // "this network", unspecified
        ([224, 0, 0, 0], 4),     // multicast
        ([240, 0, 0, 0], 4),     // reserved and broadcast
        ([192, 0, 0, 0], 24),    // IETF protocol assignments
        ([192, 0, 2, 0], 24),    // TEST-NET-1
        ([198, 51, 100, 0], 24), // TEST-NET-2
        ([203, 0, 113, 0], 24),  // TEST-NET-3
        ([198, 18, 0, 0], 15),   // benchmarking
    ];
    if NOT_ROUTABLE.iter().any(|(n, b)| in_v4(ip, *n, *b)) {
        Class::NotRoutable
    } else if INTERNAL.iter().any(|(n, b)| in_v4(ip, *n, *b)) {
        Class::Internal
    } else {
        Class::Public
    }
}

fn compatible_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    // ::a.b.c.d (deprecated IPv4-compatible) and the NAT64 well-known prefix.
    let s = ip.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    let compatible = s[..6].iter().all(|x| *x == 0)
        && !tail.is_unspecified()
        && tail != Ipv4Addr::new(0, 0, 0, 1);
    let nat64 = s[0] == 0x64 && s[1] == 0xff9b && s[2..6].iter().all(|x| *x == 0);
    (compatible || nat64).then_some(tail)
}

fn classify_v6(ip: Ipv6Addr) -> Class {
    let first = ip.segments()[0];
    if ip.is_unspecified() || ip.is_multicast() || (first == 0x2001 && ip.segments()[1] == 0x0db8) {
        Class::NotRoutable
    } else if ip.is_loopback()
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || (first & 0xffc0) == 0xfec0
    {
        Class::Internal
    } else {
        Class::Public
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_default_refuses_every_internal_range() {
        let strict = AddressPolicy::default();
        for internal in [
            "127.0.0.1",
            "127.255.0.9",
            "10.0.0.1",
            "10.255.255.255",
            "172.16.0.1",
            "172.31.9.9",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::10.1.2.3",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert_eq!(
                strict.check(ip(internal)),
                Err(Refusal::Internal),
                "{internal}"
            );
        }
        for never in [
            "0.0.0.0",
            "::",
            "224.0.0.1",
            "255.255.255.255",
            "ff02::1",
            "192.0.2.7",
            "2001:db8::1",
        ] {
            assert_eq!(
                strict.check(ip(never)),
                Err(Refusal::NotRoutable),
                "{never}"
            );
        }
        for public in [
            "1.1.1.1",
            "93.184.216.34",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(strict.check(ip(public)), Ok(()), "{public}");
        }
    }

    #[test]
    fn the_opt_in_permits_internal_but_never_unroutable_targets() {
        let open = AddressPolicy {
            allow_private: true,
        };
        for ok in ["127.0.0.1", "10.0.0.1", "::1", "169.254.169.254"] {
            assert_eq!(open.check(ip(ok)), Ok(()), "{ok}");
        }
        for never in ["0.0.0.0", "::", "224.0.0.1"] {
            assert_eq!(open.check(ip(never)), Err(Refusal::NotRoutable), "{never}");
        }
    }
}
