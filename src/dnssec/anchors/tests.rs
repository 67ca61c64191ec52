use std::path::{Path, PathBuf};

use hickory_proto::dnssec::crypto::EcdsaSigningKey;
use hickory_proto::dnssec::rdata::{DNSKEY, DS};
use hickory_proto::dnssec::{Algorithm, DigestType, SigningKey, TrustAnchors};
use hickory_proto::rr::Name;

use super::*;

/// 2026-01-01T00:00:00Z.
const NOW: u64 = 1_767_225_600;

fn file() -> PathBuf {
    PathBuf::from("anchors.key")
}

fn parse_text(text: &str) -> Result<Vec<Anchor>, AnchorError> {
    parse(text, &file(), NOW)
}

/// A fresh ECDSA P-256 key-signing key (flags 257).
fn key() -> DNSKEY {
    let pkcs8 = EcdsaSigningKey::generate_pkcs8(Algorithm::ECDSAP256SHA256).unwrap();
    let key = EcdsaSigningKey::from_pkcs8(&pkcs8, Algorithm::ECDSAP256SHA256).unwrap();
    DNSKEY::new(true, true, false, key.to_public_key().unwrap())
}

fn name(text: &str) -> Name {
    Name::from_ascii(text).unwrap()
}

/// `key`'s DS record data for `zone` (SHA-256), as text.
fn ds_text(zone: &str, key: &DNSKEY) -> String {
    let digest = key.to_digest(&name(zone), DigestType::SHA256).unwrap();
    format!(
        "{} 13 2 {}",
        key.calculate_key_tag().unwrap(),
        hex::encode_upper(digest.as_ref())
    )
}

/// The syntax error's line and reason, or a panic.
fn syntax_at(result: Result<Vec<Anchor>, AnchorError>) -> (usize, String) {
    match result {
        Err(AnchorError::Syntax {
            line,
            reason,
            file: at,
        }) => {
            assert_eq!(at, file());
            (line, reason)
        }
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn a_dnssec_keygen_key_file_is_read() {
    let key = key();
    // What `dnssec-keygen -f KSK` writes to K<zone>+013+<tag>.key.
    let text = format!(
        "; This is a key-signing key, keyid {tag}, for org1.test.\n\
         ; Created: 20260101000000 (Thu Jan  1 00:00:00 2026)\n\
         ; Publish: 20260101000000 (Thu Jan  1 00:00:00 2026)\n\
         ; Activate: 20260101000000 (Thu Jan  1 00:00:00 2026)\n\
         org1.test. IN DNSKEY {key}\n",
        tag = key.calculate_key_tag().unwrap()
    );
    let anchors = parse_text(&text).unwrap();
    assert_eq!(
        anchors,
        vec![Anchor {
            zone: name("org1.test."),
            key: AnchorKey::Dnskey(key.clone()),
        }]
    );
    assert!(anchors[0].matches(&key));
    assert!(!anchors[0].matches(&self::key()), "another key");
}

#[test]
fn ds_records_with_ttls_classes_comments_and_parentheses_are_read() {
    let (a, b) = (key(), key());
    let text = format!(
        "$TTL 3600\n\
         \n\
         ; dnssec-dsfromkey's output, and a dsset file's\n\
         ORG1.test. IN DS {}\n\
         org2.test.\t300\tIN\tDS ( {} ) ; trailing comment\n\
         org3.test. 300 DNSKEY (\n   {}\n   )\n",
        ds_text("org1.test.", &a),
        ds_text("org2.test.", &b),
        a
    );
    let anchors = parse_text(&text).unwrap();
    assert_eq!(anchors.len(), 3);
    assert_eq!(anchors[0].zone, name("org1.test."), "lowercased");
    assert!(matches!(anchors[0].key, AnchorKey::Ds(_)));
    assert!(anchors[0].matches(&a), "the DS is a's digest");
    assert!(!anchors[0].matches(&b));
    assert!(anchors[1].matches(&b));
    assert!(matches!(anchors[2].key, AnchorKey::Dnskey(_)));
    // A DS for org1.test does not match the same key at another zone.
    let elsewhere = Anchor {
        zone: name("org2.test."),
        ..anchors[0].clone()
    };
    assert!(!elsewhere.matches(&a));
}

#[test]
fn a_ds_never_matches_a_revoked_or_non_zone_key() {
    let k = key();
    let anchor = parse_text(&format!("org1.test. DS {}", ds_text("org1.test.", &k)))
        .unwrap()
        .remove(0);
    let revoked = DNSKEY::with_flags(k.flags() | 0x80, k.public_key().clone());
    assert!(!anchor.matches(&revoked));
    let not_zone = DNSKEY::with_flags(1, k.public_key().clone());
    assert!(!anchor.matches(&not_zone));
}

#[test]
fn every_zone_file_syntax_error_names_its_line() {
    let k = key();
    let ds = ds_text("org1.test.", &k);
    let cases: Vec<(String, usize, &str)> = vec![
        (format!("org1.test IN DS {ds}"), 1, "relative"),
        (
            "\n\norg1.test. IN A 127.0.0.1".into(),
            3,
            "not a trust anchor",
        ),
        ("org1.test. CH DS 1 13 2 00".into(), 1, "only IN"),
        ("org1.test. 300 IN".into(), 1, "no record type"),
        ("org1.test. DS".into(), 1, "no key tag"),
        ("org1.test. DS 70000 13 2 00".into(), 1, "key tag"),
        ("org1.test. DS 1 13".into(), 1, "no digest type"),
        ("org1.test. DS 1 13 2".into(), 1, "no digest"),
        (
            "org1.test. DS 1 1 2 00".into(),
            1,
            "algorithm 1 is not supported",
        ),
        ("org1.test. DS 1 13 3 00".into(), 1, "digest type 3"),
        ("org1.test. DS 1 13 2 XYZ".into(), 1, "not hex"),
        ("org1.test. DS 1 13 2 ABCD".into(), 1, "is 2 bytes"),
        ("org1.test. DNSKEY 257 2 13 AAAA".into(), 1, "protocol 2"),
        ("org1.test. DNSKEY 257 3 13".into(), 1, "no public key"),
        ("org1.test. DNSKEY 257 3 13 !!!!".into(), 1, "not base64"),
        ("org1.test. DNSKEY 0 3 13 AAAA".into(), 1, "not a zone key"),
        ("org1.test. DNSKEY 385 3 13 AAAA".into(), 1, "revoked"),
        ("org1.test. DNSKEY 257 3 99 AAAA".into(), 1, "algorithm 99"),
        (format!("; ok\norg1.test. DS ( {ds}"), 2, "never closed"),
        ("org1.test. DS 1 13 2 00 )".into(), 1, "without its '('"),
        ("org1.test. DS ( 1 ( 13 ) )".into(), 1, "nested"),
        (
            "$INCLUDE /etc/passwd".into(),
            1,
            "$INCLUDE is not supported",
        ),
        ("$ORIGIN test.".into(), 1, "$ORIGIN is not supported"),
        ("org1.test. TXT \"x\"".into(), 1, "quoted"),
        (
            format!("org1.test. DS 1 13 2 {}", "00".repeat(3000)),
            1,
            "longer than",
        ),
    ];
    for (text, line, reason) in cases {
        let (at, why) = syntax_at(parse_text(&text));
        assert_eq!(at, line, "{text:?}: {why}");
        assert!(
            why.contains(reason),
            "{text:?}: {why:?} should say {reason:?}"
        );
    }
}

#[test]
fn a_file_without_an_anchor_is_refused() {
    assert!(matches!(
        parse_text("; nothing here\n\n$TTL 300\n"),
        Err(AnchorError::Empty { .. })
    ));
}

#[test]
fn more_records_than_the_limit_are_refused() {
    let k = key();
    let line = format!("org1.test. DS {}\n", ds_text("org1.test.", &k));
    assert_eq!(
        parse_text(&line.repeat(MAX_RECORDS)).unwrap().len(),
        MAX_RECORDS
    );
    assert!(matches!(
        parse_text(&line.repeat(MAX_RECORDS + 1)),
        Err(AnchorError::TooMany {
            what: "anchors",
            limit: MAX_RECORDS,
            ..
        })
    ));
}

fn write(dir: &Path, file: &str, text: &str) -> PathBuf {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn files_are_bounded_in_size_anchors_and_zones() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.key");
    assert!(matches!(
        TrustAnchorSet::load(std::slice::from_ref(&missing)),
        Err(AnchorError::Read { file, .. }) if file == missing
    ));

    let big = write(
        dir.path(),
        "big.key",
        &";".repeat(usize::try_from(MAX_FILE_BYTES).unwrap() + 1),
    );
    let err = TrustAnchorSet::load(std::slice::from_ref(&big)).unwrap_err();
    assert!(
        matches!(err, AnchorError::TooLarge { ref file, .. } if *file == big),
        "{err}"
    );
    assert!(err.to_string().contains("big.key"), "{err}");

    let binary = dir.path().join("binary.key");
    std::fs::write(&binary, [0xff, 0xfe, 0x00]).unwrap();
    assert!(matches!(
        TrustAnchorSet::load(&[binary]),
        Err(AnchorError::Syntax { line: 1, .. })
    ));

    // Zones: MAX_ZONES across files is fine, one more is not.
    let zone_file = |from: usize, to: usize| -> String {
        (from..to)
            .map(|i| {
                let k = key();
                format!(
                    "org{i}.test. DS {}\n",
                    ds_text(&format!("org{i}.test."), &k)
                )
            })
            .collect()
    };
    let half = MAX_ZONES / 2;
    let first = write(dir.path(), "first.ds", &zone_file(0, half));
    let second = write(dir.path(), "second.ds", &zone_file(half, MAX_ZONES));
    let third = write(dir.path(), "third.ds", &zone_file(MAX_ZONES, MAX_ZONES + 1));
    let set = TrustAnchorSet::load(&[first.clone(), second.clone()]).unwrap();
    assert_eq!(set.zones().len(), MAX_ZONES + 1, "and the root's");
    assert!(!set.is_builtin());
    let err = TrustAnchorSet::load(&[first.clone(), second, third.clone()]).unwrap_err();
    assert!(
        matches!(err, AnchorError::TooMany { what: "zones", ref file, .. } if *file == third),
        "{err}"
    );

    // Anchors: MAX_RECORDS across files.
    let k = key();
    let line = format!("org0.test. DS {}\n", ds_text("org0.test.", &k));
    let distinct: String = (0..MAX_RECORDS)
        .map(|_| {
            let k = key();
            format!("org0.test. DS {}\n", ds_text("org0.test.", &k))
        })
        .collect();
    let full = write(dir.path(), "full.ds", &distinct);
    let one_more = write(dir.path(), "more.ds", &line);
    let err = TrustAnchorSet::load(&[full, one_more.clone()]).unwrap_err();
    assert!(
        matches!(err, AnchorError::TooMany { what: "anchors", ref file, .. } if *file == one_more),
        "{err}"
    );
}

#[test]
fn the_closest_anchored_zone_covers_a_name() {
    let dir = tempfile::tempdir().unwrap();
    let (root, org) = (key(), key());
    let path = write(
        dir.path(),
        "anchors.key",
        &format!(
            ". DNSKEY {root}\norg1.test. DS {}\n",
            ds_text("org1.test.", &org)
        ),
    );
    let set = TrustAnchorSet::load(&[path]).unwrap();
    assert_eq!(set.zones(), vec![Name::root(), name("org1.test.")]);
    assert_eq!(
        set.anchors().len(),
        TrustAnchorSet::builtin_root().anchors().len() + 2
    );
    assert_eq!(
        set.covering(&name("_agent.a.ORG1.test.")),
        Some(name("org1.test."))
    );
    assert_eq!(set.covering(&name("org1.test.")), Some(name("org1.test.")));
    assert_eq!(set.covering(&name("_agent.org2.test.")), Some(Name::root()));
    assert_eq!(set.covering(&name("xorg1.test.")), Some(Name::root()));

    let island = TrustAnchorSet::load(&[write(
        dir.path(),
        "island.key",
        &format!("org1.test. DNSKEY {org}\n"),
    )])
    .unwrap();
    // The root's built-in anchor is always beside the files'.
    assert_eq!(
        island.covering(&name("_agent.org2.test.")),
        Some(Name::root())
    );
    assert_eq!(
        island.covering(&name("_agent.a.org1.test.")),
        Some(name("org1.test."))
    );
    assert!(island.is_builtin_zone(&Name::root()));
    assert!(!island.is_builtin_zone(&name("org1.test.")));
    assert!(
        !set.is_builtin_zone(&Name::root()),
        "the file anchors the root too"
    );
    let mut bare = TrustAnchorSet::builtin_root();
    bare.anchors.clear();
    assert_eq!(
        bare.covering(&name("_agent.org2.test.")),
        None,
        "nothing covers it"
    );
}

#[test]
fn with_no_file_the_root_key_signing_keys_hickory_ships_are_the_anchors() {
    let set = TrustAnchorSet::load(&[]).unwrap();
    assert!(set.is_builtin());
    assert_eq!(set.zones(), vec![Name::root()]);
    let shipped = TrustAnchors::default();
    assert_eq!(set.anchors().len(), shipped.len());
    for anchor in set.anchors() {
        let AnchorKey::Dnskey(key) = &anchor.key else {
            panic!("a DNSKEY anchor")
        };
        assert!(shipped.contains(key.public_key()));
        assert!(key.is_key_signing_key());
    }
}

/// IANA's root-anchors.xml as published since July 2024 (RFC 9718's
/// format: the KSK-2010 digest expired, KSK-2017 and KSK-2024 valid,
/// the optional PublicKey and Flags children left out of the first).
const ROOT_ANCHORS_XML: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<TrustAnchor id="E9724F53-1851-4F86-85E5-F1392102940B" source="http://data.iana.org/root-anchors/root-anchors.xml">
<Zone>.</Zone>
<KeyDigest id="Kjqmt7v" validFrom="2010-07-15T00:00:00+00:00" validUntil="2019-01-11T00:00:00+00:00">
<KeyTag>19036</KeyTag>
<Algorithm>8</Algorithm>
<DigestType>2</DigestType>
<Digest>49AAC11D7B6F6446702E54A1607371607A1A41855200FD2CE1CDDE32F24E8FB5</Digest>
</KeyDigest>
<KeyDigest id="Klajeyz" validFrom="2017-02-02T00:00:00+00:00">
<KeyTag>20326</KeyTag>
<Algorithm>8</Algorithm>
<DigestType>2</DigestType>
<Digest>E06D44B80B8F1D39A95C0B0D7C65D08458E880409BBC683457104237C7F8EC8D</Digest>
<Flags>257</Flags>
</KeyDigest>
<KeyDigest id="Kmyv6jo" validFrom="2024-07-18T00:00:00+00:00">
<KeyTag>38696</KeyTag>
<Algorithm>8</Algorithm>
<DigestType>2</DigestType>
<Digest>683D2D0ACB8C9B712A1948B27F741219298D0A450D612C483AF444A4C0FB2B16</Digest>
<Flags>257</Flags>
</KeyDigest>
</TrustAnchor>
"#;

#[test]
fn ianas_root_anchors_xml_is_read_within_each_digests_window() {
    let anchors = parse(ROOT_ANCHORS_XML, Path::new("root-anchors.xml"), NOW).unwrap();
    let tags: Vec<u16> = anchors.iter().filter_map(Anchor::key_tag).collect();
    assert_eq!(
        tags,
        vec![20326, 38696],
        "KSK-2010's digest expired in 2019"
    );
    assert!(anchors.iter().all(|a| a.zone.is_root()));
    // The digests are those of the root keys hickory ships.
    for (anchor, shipped) in anchors.iter().zip([20326u16, 38696]) {
        let key = TrustAnchorSet::builtin_root()
            .anchors()
            .iter()
            .find_map(|a| match &a.key {
                AnchorKey::Dnskey(k) if k.calculate_key_tag().ok() == Some(shipped) => {
                    Some(k.clone())
                }
                _ => None,
            })
            .expect("hickory ships this root key");
        assert!(anchor.matches(&key), "digest of key {shipped}");
    }

    // In 2015 only KSK-2010 was valid.
    let in_2015 = parse(
        ROOT_ANCHORS_XML,
        Path::new("root-anchors.xml"),
        1_420_070_400,
    )
    .unwrap();
    assert_eq!(in_2015.len(), 1);
    assert_eq!(in_2015[0].key_tag(), Some(19036));
    // In 2020, KSK-2017 alone.
    let in_2020 = parse(
        ROOT_ANCHORS_XML,
        Path::new("root-anchors.xml"),
        1_577_836_800,
    )
    .unwrap();
    assert_eq!(
        in_2020
            .iter()
            .filter_map(Anchor::key_tag)
            .collect::<Vec<_>>(),
        vec![20326]
    );
    // Before any digest was valid: nothing to trust.
    assert!(matches!(
        parse(
            ROOT_ANCHORS_XML,
            Path::new("root-anchors.xml"),
            1_000_000_000
        ),
        Err(AnchorError::Empty { .. })
    ));
}

#[test]
fn an_xml_anchor_for_another_zone_is_a_ds_for_that_zone() {
    let k = key();
    let digest = k
        .to_digest(&name("org1.test."), DigestType::SHA256)
        .unwrap();
    let xml = format!(
        "<TrustAnchor><Zone>org1.test.</Zone>\n<KeyDigest id=\"a\" validFrom=\"2020-01-01T00:00:00Z\">\
         <KeyTag>{}</KeyTag><Algorithm>13</Algorithm><DigestType>2</DigestType>\
         <Digest>{}</Digest></KeyDigest></TrustAnchor>",
        k.calculate_key_tag().unwrap(),
        hex::encode(digest.as_ref())
    );
    let anchors = parse(&xml, &file(), NOW).unwrap();
    assert_eq!(anchors.len(), 1);
    assert_eq!(anchors[0].zone, name("org1.test."));
    assert!(anchors[0].matches(&k));
    assert!(
        matches!(&anchors[0].key, AnchorKey::Ds(ds) if *ds == DS::new(
            k.calculate_key_tag().unwrap(),
            Algorithm::ECDSAP256SHA256,
            DigestType::SHA256,
            digest.as_ref().to_vec()
        ))
    );
}

#[test]
fn every_xml_error_names_its_line() {
    let digest = "<KeyDigest id=\"x\" validFrom=\"2017-02-02T00:00:00+00:00\">\n\
                  <KeyTag>20326</KeyTag>\n<Algorithm>8</Algorithm>\n<DigestType>2</DigestType>\n\
                  <Digest>E06D44B80B8F1D39A95C0B0D7C65D08458E880409BBC683457104237C7F8EC8D</Digest>\n\
                  </KeyDigest>";
    let cases: Vec<(String, usize, &str)> = vec![
        (
            "<?xml version=\"1.0\"?>\n<Other/>".into(),
            1,
            "no <TrustAnchor>",
        ),
        (
            format!(
                "<TrustAnchor>\n<Zone>.</Zone>{digest}</TrustAnchor>\n<TrustAnchor></TrustAnchor>"
            ),
            8,
            "more than one <TrustAnchor>",
        ),
        (
            format!("<TrustAnchor>\n{digest}</TrustAnchor>"),
            1,
            "no <Zone>",
        ),
        (
            "<TrustAnchor>\n<Zone>.</Zone>\n</TrustAnchor>".into(),
            1,
            "no <KeyDigest>",
        ),
        (
            "<TrustAnchor>\n<Zone>test</Zone>\n</TrustAnchor>".into(),
            1,
            "relative",
        ),
        (
            format!(
                "<TrustAnchor>\n<Zone>.</Zone>\n{}</TrustAnchor>",
                digest.replace("2017-02-02T", "2017-02-02 at ")
            ),
            3,
            "validFrom",
        ),
        (
            format!(
                "<TrustAnchor>\n<Zone>.</Zone>\n\n{}</TrustAnchor>",
                digest.replace("<KeyTag>20326</KeyTag>", "")
            ),
            4,
            "no <KeyTag>",
        ),
        (
            format!(
                "<TrustAnchor>\n<Zone>.</Zone>\n{}</TrustAnchor>",
                digest.replace("<DigestType>2", "<DigestType>9")
            ),
            3,
            "digest type 9",
        ),
        (
            format!(
                "<TrustAnchor>\n<Zone>.</Zone>\n{}</TrustAnchor>",
                digest.replace("<Algorithm>8", "<Algorithm>eight")
            ),
            3,
            "algorithm",
        ),
        (
            format!(
                "<TrustAnchor>\n<Zone>.</Zone>\n{}",
                digest.replace("</KeyDigest>", "")
            ),
            1,
            "without </TrustAnchor>",
        ),
        (
            "<TrustAnchor>\n<Zone>.</Zone>\n<KeyDigest id=\"x\"".into(),
            1,
            "without </TrustAnchor>",
        ),
    ];
    for (text, line, reason) in cases {
        let (at, why) = syntax_at(parse_text(&text));
        assert_eq!(at, line, "{text:?}: {why}");
        assert!(
            why.contains(reason),
            "{text:?}: {why:?} should say {reason:?}"
        );
    }
}

#[test]
fn xml_timestamps_are_read_with_their_offsets() {
    use super::xml::timestamp;
    assert_eq!(timestamp("1970-01-01T00:00:00+00:00"), Some(0));
    assert_eq!(timestamp("2017-02-02T00:00:00+00:00"), Some(1_485_993_600));
    assert_eq!(timestamp("2017-02-02T00:00:00Z"), Some(1_485_993_600));
    assert_eq!(
        timestamp("2017-02-02T02:00:00.5+02:00"),
        Some(1_485_993_600)
    );
    assert_eq!(timestamp("2017-02-01T19:00:00-05:00"), Some(1_485_993_600));
    assert_eq!(timestamp("2017-13-02T00:00:00Z"), None);
    assert_eq!(timestamp("2017-02-02"), None);
    assert_eq!(timestamp("2017-02-02T00:00:00+0000"), None);
}
