use rcgen::{CertificateParams, DnType, KeyPair, SanType};

use super::*;

/// A self-signed certificate's DER with `sans` (DNS names, or URIs when
/// they hold "://") and the common name `cn`.
fn cert(sans: &[&str], cn: &str) -> Vec<u8> {
    let mut params = CertificateParams::default();
    params.subject_alt_names = sans
        .iter()
        .map(|s| {
            if s.contains("://") {
                SanType::URI((*s).try_into().unwrap())
            } else {
                SanType::DnsName((*s).try_into().unwrap())
            }
        })
        .collect();
    params.distinguished_name.push(DnType::CommonName, cn);
    let key = KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().der().to_vec()
}

fn entry(
    name: &str,
    subject: Option<&str>,
    fingerprint: Option<&str>,
    scopes: &[&str],
) -> TlsClientConfig {
    TlsClientConfig {
        name: name.into(),
        subject: subject.map(Into::into),
        fingerprint: fingerprint.map(Into::into),
        scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
    }
}

fn table(entries: &[TlsClientConfig]) -> ClientCertificates {
    ClientCertificates::from_config(entries).unwrap()
}

#[test]
fn fingerprints_read_with_or_without_colons_in_either_case() {
    let bytes: [u8; 32] = std::array::from_fn(|i| (i as u8).wrapping_mul(7).wrapping_add(0xa0));
    let plain = hex::encode(bytes);
    let colons = ColonHex(&bytes).to_string();
    assert_eq!(colons.len(), 32 * 3 - 1);
    assert_eq!(parse_fingerprint(&plain), Ok(bytes));
    assert_eq!(parse_fingerprint(&plain.to_uppercase()), Ok(bytes));
    assert_eq!(parse_fingerprint(&colons), Ok(bytes));
    assert_eq!(
        parse_fingerprint(&format!("  {}\n", colons.to_uppercase())),
        Ok(bytes)
    );
    for bad in [
        "",
        "ab",
        &plain[..62],
        &format!("{plain}00"),
        &plain.replace('a', "g"),
        &colons.replacen(':', "", 1),
        &colons.replacen(':', "::", 1),
        "é",
    ] {
        assert!(parse_fingerprint(bad).is_err(), "{bad:?} was read");
    }
}

#[test]
fn a_subject_matches_a_dns_or_uri_alt_name_and_the_common_name_only_without_any() {
    let with_sans = Presented::from_der(&cert(
        &["registry.example.org", "spiffe://example.org/registry"],
        "the-common-name",
    ));
    let without = Presented::from_der(&cert(&[], "peer.example.net"));
    let certs = table(&[
        entry("dns", Some("Registry.EXAMPLE.org"), None, &["register"]),
        entry("cn", Some("peer.example.net"), None, &["read"]),
    ]);
    assert_eq!(
        certs.identify(&with_sans),
        Some(("dns", Scopes::from_iter([Scope::Register])))
    );
    assert_eq!(
        certs.identify(&without),
        Some(("cn", Scopes::from_iter([Scope::Read])))
    );

    let uri = table(&[entry(
        "uri",
        Some("spiffe://example.org/registry"),
        None,
        &["read"],
    )]);
    assert_eq!(uri.identify(&with_sans).map(|m| m.0), Some("uri"));
    let uri_case = table(&[entry(
        "uri",
        Some("spiffe://example.org/REGISTRY"),
        None,
        &["read"],
    )]);
    assert_eq!(
        uri_case.identify(&with_sans),
        None,
        "a URI is compared exactly"
    );
    let by_cn = table(&[entry("cn", Some("the-common-name"), None, &["read"])]);
    assert_eq!(
        by_cn.identify(&with_sans),
        None,
        "a certificate with alt names is not known by its common name"
    );
    let wildcard = Presented::from_der(&cert(&["*.example.org"], "x"));
    let certs = table(&[entry("w", Some("a.example.org"), None, &["read"])]);
    assert_eq!(
        certs.identify(&wildcard),
        None,
        "a wildcard is not expanded"
    );
}

#[test]
fn a_fingerprint_matches_that_certificate_only_and_both_ways_must_match_when_given() {
    let der = cert(&["registry.example.org"], "x");
    let presented = Presented::from_der(&der);
    let other = Presented::from_der(&cert(&["registry.example.org"], "x"));
    let digest = ColonHex(presented.fingerprint()).to_string();
    let certs = table(&[entry("pinned", None, Some(&digest), &["records"])]);
    assert_eq!(certs.identify(&presented).map(|m| m.0), Some("pinned"));
    assert_eq!(certs.identify(&other), None);

    let both = table(&[
        entry(
            "both",
            Some("registry.example.org"),
            Some(&digest),
            &["read"],
        ),
        entry("later", Some("registry.example.org"), None, &["crawl"]),
    ]);
    assert_eq!(
        both.identify(&presented).map(|m| m.0),
        Some("both"),
        "the first entry that matches"
    );
    assert_eq!(
        both.identify(&other).map(|m| m.0),
        Some("later"),
        "same name, another key: the pinned entry does not match"
    );
}

#[test]
fn a_certificate_that_does_not_parse_shows_its_fingerprint_only() {
    for der in [&b""[..], b"\x30\x03\x02\x01\x01", &[0xff; 300]] {
        let presented = Presented::from_der(der);
        assert!(presented.names.is_empty());
        let digest = hex::encode(presented.fingerprint());
        let certs = table(&[
            entry("by-name", Some("x"), None, &["read"]),
            entry("by-digest", None, Some(&digest), &["read"]),
        ]);
        assert_eq!(certs.identify(&presented).map(|m| m.0), Some("by-digest"));
    }
}

#[test]
fn entries_that_cannot_be_used_are_refused_naming_them() {
    let ok = entry("peer", Some("p.example"), None, &["read"]);
    let cases = [
        (vec![entry("", Some("p"), None, &["read"])], "#1", "empty"),
        (
            vec![entry("a b", Some("p"), None, &["read"])],
            "#1",
            "spaces",
        ),
        (
            vec![
                ok.clone(),
                entry(&"n".repeat(65), Some("p"), None, &["read"]),
            ],
            "#2",
            "longer",
        ),
        (vec![ok.clone(), ok.clone()], "\"peer\"", "earlier entry"),
        (
            vec![entry("x", None, None, &["read"])],
            "\"x\"",
            "subject, fingerprint",
        ),
        (
            vec![entry("x", Some(" "), None, &["read"])],
            "\"x\"",
            "subject is empty",
        ),
        (
            vec![entry("x", None, Some("abcd"), &["read"])],
            "\"x\"",
            "SHA-256",
        ),
        (
            vec![entry("x", Some("p"), None, &["reed"])],
            "\"x\"",
            "not a scope",
        ),
        (
            vec![entry("x", Some("p"), None, &[])],
            "\"x\"",
            "at least one scope",
        ),
    ];
    for (entries, who, what) in cases {
        let e = ClientCertificates::from_config(&entries).expect_err(what);
        assert!(e.entry.starts_with(who), "{e}");
        assert!(e.to_string().contains(what), "{e}");
    }
    assert!(ClientCertificates::from_config(&[]).unwrap().is_empty());
}
