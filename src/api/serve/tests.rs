use super::*;

fn ranges(list: &[&str]) -> Vec<IpRange> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

fn forwarded(values: &[&str]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for v in values {
        headers.append("x-forwarded-for", v.parse().unwrap());
    }
    headers
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
    let headers = forwarded(&["203.0.113.9"]);
    assert_eq!(
        client_addr(ip("198.51.100.1"), &headers, &[]),
        ip("198.51.100.1")
    );
    let trusted = ranges(&["10.0.0.0/8"]);
    assert_eq!(
        client_addr(ip("198.51.100.1"), &headers, &trusted),
        ip("198.51.100.1")
    );
}

#[test]
fn behind_trusted_proxies_the_right_most_untrusted_hop_is_the_client() {
    let trusted = ranges(&["10.0.0.0/8", "192.0.2.7"]);
    // The client forged the first entry; the edge proxy appended what it
    // saw, then the inner proxy appended the edge's address.
    let headers = forwarded(&["1.1.1.1, 203.0.113.9", "192.0.2.7"]);
    assert_eq!(
        client_addr(ip("10.1.2.3"), &headers, &trusted),
        ip("203.0.113.9")
    );
    // No header: the proxy itself.
    assert_eq!(
        client_addr(ip("10.1.2.3"), &HeaderMap::new(), &trusted),
        ip("10.1.2.3")
    );
    // Every hop trusted: the left-most.
    let headers = forwarded(&["10.9.9.9, 192.0.2.7"]);
    assert_eq!(
        client_addr(ip("10.1.2.3"), &headers, &trusted),
        ip("10.9.9.9")
    );
    // Garbage ends the walk at the hop that appended it.
    let headers = forwarded(&["203.0.113.9, nonsense, 10.4.4.4"]);
    assert_eq!(
        client_addr(ip("10.1.2.3"), &headers, &trusted),
        ip("10.4.4.4")
    );
    // Ports and IPv4-mapped IPv6 are read as the address.
    let headers = forwarded(&["[2001:db8::1]:4711, 203.0.113.9:80"]);
    assert_eq!(
        client_addr(ip("::ffff:10.1.2.3"), &headers, &trusted),
        ip("203.0.113.9")
    );
}

#[test]
fn ip_ranges_parse_addresses_and_cidrs_and_show_them_as_written() {
    for (text, inside, outside) in [
        ("10.0.0.0/8", "10.200.1.1", "11.0.0.1"),
        ("192.0.2.7", "192.0.2.7", "192.0.2.8"),
        ("fd00::/8", "fd12::1", "fe80::1"),
    ] {
        let range: IpRange = text.parse().unwrap();
        assert_eq!(range.to_string(), text);
        assert!(range.contains(ip(inside)), "{text} holds {inside}");
        assert!(
            !range.contains(ip(outside)),
            "{text} does not hold {outside}"
        );
    }
    assert!("10.0.0.0/8"
        .parse::<IpRange>()
        .unwrap()
        .contains(ip("::ffff:10.0.0.1")));
    assert!("10.0.0.1/33".parse::<IpRange>().is_err());
    assert!("proxy.example".parse::<IpRange>().is_err());
}

#[test]
fn slots_cap_connections_in_all_and_per_address_and_come_back_on_drop() {
    let options = ServeOptions {
        header_read_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(1),
        body_read_timeout: Duration::from_secs(1),
        max_connections: 3,
        max_connections_per_ip: 2,
        trusted_proxies: Vec::new(),
        tls: None,
    };
    let slots = Arc::new(Mutex::new(Slots::default()));
    let a = ip("127.0.0.2");
    let first = Slot::take(&slots, a, true, &options).unwrap();
    let _second = Slot::take(&slots, a, true, &options).unwrap();
    assert_eq!(Slot::take(&slots, a, true, &options).unwrap_err(), "per_ip");
    let _other = Slot::take(&slots, ip("127.0.0.3"), true, &options).unwrap();
    assert_eq!(
        Slot::take(&slots, ip("127.0.0.4"), false, &options).unwrap_err(),
        "total"
    );
    drop(first);
    let _again = Slot::take(&slots, a, true, &options).unwrap();
    drop(_again);
    drop(_second);
    assert!(
        !slots.lock().unwrap().per_ip.contains_key(&a),
        "an address with no connection is forgotten"
    );
}
