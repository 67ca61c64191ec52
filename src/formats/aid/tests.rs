use super::*;

/// The PKA vector's key (`protocol/pka_vectors.json`), base64url.
const V2_KEY: &str = "ebVWLo_mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ";
/// The same 32 bytes as multibase base58btc (the aid1 form).
const V1_KEY: &str = "z9C6hybhQ6Aycep9jaUnP6uL9ZYvDjUp1aSkFWPUFJtpj";
const KEY_BYTES: [u8; 32] = [
    121, 181, 86, 46, 143, 230, 84, 249, 64, 120, 177, 18, 232, 169, 139, 167, 144, 31, 133, 58,
    230, 149, 190, 215, 224, 227, 145, 11, 173, 4, 150, 100,
];

fn reason(record: &str) -> &'static str {
    parse(record).unwrap_err().reason.as_str()
}

fn set(records: &[&str]) -> Option<Result<AidRecord, FormatError>> {
    select(&records.iter().map(|r| r.to_string()).collect::<Vec<_>>())
}

#[test]
fn golden_valid_records_parse() {
    // golden.json `records`.
    let r = parse("v=aid1;uri=https://api.example.com/mcp;p=mcp").unwrap();
    assert_eq!(
        (r.version, r.uri.as_str(), r.proto.as_str()),
        (AidVersion::Aid1, "https://api.example.com/mcp", "mcp")
    );
    let r = parse("v=aid1;uri=docker://myimage;proto=local;desc=Local Docker Agent").unwrap();
    assert_eq!(
        (r.proto.as_str(), r.desc.as_deref()),
        ("local", Some("Local Docker Agent"))
    );
    let r = parse("v=aid1;uri=https://api.example.com/mcp;p=mcp;d=https://docs.example.com/agent;e=2099-01-01T00:00:00Z").unwrap();
    assert_eq!(r.docs.as_deref(), Some("https://docs.example.com/agent"));
    assert_eq!(r.dep.as_deref(), Some("2099-01-01T00:00:00Z"));
    let r = parse("v=aid1;p=ucp;u=https://shop.example.com/ucp").unwrap();
    assert_eq!(r.proto, "ucp");
    let r = parse("v=aid2;u=https://api.example.com/mcp;p=mcp;a=oauth2_code").unwrap();
    assert_eq!(
        (r.version, r.auth.as_deref()),
        (AidVersion::Aid2, Some("oauth2_code"))
    );
    // v2-with-pka: the key decodes to the vector's 32 bytes.
    let r = parse(&format!(
        "v=aid2;u=https://api.example.com/mcp;p=mcp;k={V2_KEY}"
    ))
    .unwrap();
    assert_eq!(r.pka, Some(KEY_BYTES));
    assert_eq!(r.kid, None);
    let r = parse(&format!(
        "v=aid2;u=https://[2001:db8::1]:8443/mcp;p=mcp;k={V2_KEY}"
    ))
    .unwrap();
    assert_eq!(r.uri, "https://[2001:db8::1]:8443/mcp");
}

#[test]
fn an_aid1_key_is_base58btc_of_the_same_32_bytes() {
    let r = parse(&format!(
        "v=aid1;u=https://api.example.com/mcp;p=mcp;k={V1_KEY};i=g1"
    ))
    .unwrap();
    assert_eq!(r.pka, Some(KEY_BYTES));
    assert_eq!(r.kid.as_deref(), Some("g1"));
    // Leading `1`s are zero bytes.
    assert_eq!(base58btc(&"1".repeat(32)), Some(vec![0; 32]));
    assert_eq!(base58btc("1112"), Some(vec![0, 0, 0, 1]));
    assert_eq!(base58btc("0OIl"), None);
    // golden `v1.1-with-pka-kid` carries a placeholder key of 31 bytes:
    // the reference parser defers the check to the PKA handshake,
    // which refuses it; this parser refuses it at once.
    assert_eq!(
        reason("v=aid1;uri=https://api.example.com/mcp;p=mcp;k=z7rW8rTq8o4mM6vVf7w1k3m4uQn9p2YxCAbcDeFgHiJ;i=g1"),
        "aid_malformed"
    );
}

#[test]
fn keys_are_case_insensitive_trimmed_and_aliased() {
    let long = parse(
        " version = aid2 ; URI=https://a.test/mcp ;Proto=a2a; AUTH=pat; desc=Hi; docs=https://a.test/d; dep=2030-01-01T00:00:00Z ",
    )
    .unwrap();
    let short = parse(
        "v=aid2;u=https://a.test/mcp;p=a2a;a=pat;s=Hi;d=https://a.test/d;e=2030-01-01T00:00:00Z",
    )
    .unwrap();
    assert_eq!(long, short);
    assert_eq!(short.proto, "a2a");
    // Empty pairs are skipped, unknown keys ignored, the value is
    // everything after the first `=`.
    let r = parse("v=aid2;;u=https://a.test/x?q=1;p=mcp;future=yes;").unwrap();
    assert_eq!(r.uri, "https://a.test/x?q=1");
    // The other protocols and their schemes.
    for (proto, uri) in [
        ("websocket", "wss://a.test/ws"),
        ("local", "npx:some-agent"),
        ("local", "pip:agent"),
        ("zeroconf", "zeroconf:_mcp._tcp"),
        ("grpc", "https://a.test"),
        ("graphql", "https://a.test/graphql"),
        ("openapi", "https://a.test/openapi.json"),
    ] {
        let r = parse(&format!("v=aid2;u={uri};p={proto}")).unwrap();
        assert_eq!((r.proto.as_str(), r.uri.as_str()), (proto, uri));
    }
}

#[test]
fn golden_invalid_records_are_refused() {
    // golden.json `invalid`, all ERR_INVALID_TXT there except
    // unsupported-proto (ERR_UNSUPPORTED_PROTO); here aid_malformed,
    // and aid_unsupported_version for a version this node does not read.
    let k = V2_KEY;
    for (name, raw) in [
        ("pka-missing-kid", "v=aid1;uri=https://api.example.com/mcp;p=mcp;k=z111".to_owned()),
        ("duplicate-proto-fields", "v=aid1;uri=https://api.example.com/mcp;proto=mcp;p=mcp".to_owned()),
        ("unsupported-proto", "v=aid1;uri=https://api.example.com/mcp;proto=unknown".to_owned()),
        ("remote-non-https", "v=aid1;uri=http://api.example.com/mcp;proto=mcp".to_owned()),
        ("v2-stale-kid", format!("v=aid2;uri=https://api.example.com/mcp;proto=mcp;k={k};i=g1")),
        ("v2-legacy-multibase-pka", "v=aid2;uri=https://api.example.com/mcp;proto=mcp;k=z1111111111111111111111111111111111111111111".to_owned()),
        ("v2-padded-pka", format!("v=aid2;uri=https://api.example.com/mcp;proto=mcp;k={k}=")),
        ("v2-invalid-base64url-character", "v=aid2;uri=https://api.example.com/mcp;proto=mcp;k=ebVWLo_mVPlAeLES6KmLp5AfhTrmlb7X4OORC60Elm+".to_owned()),
        ("v2-pka-decodes-to-31-bytes", "v=aid2;uri=https://api.example.com/mcp;proto=mcp;k=AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHw".to_owned()),
        ("v2-pka-decodes-to-33-bytes", "v=aid2;uri=https://api.example.com/mcp;proto=mcp;k=AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAh".to_owned()),
        ("v2-duplicate-pka-alias", format!("v=aid2;uri=https://api.example.com/mcp;proto=mcp;k={k};pka={k}")),
        ("malformed-pair-missing-equals", "v=aid2;garbage;u=https://x/mcp;p=mcp".to_owned()),
        ("empty-key-in-pair", "=foo;v=aid2;u=https://x/mcp;p=mcp".to_owned()),
        ("empty-value-in-pair", "v=;u=https://x/mcp;p=mcp".to_owned()),
        ("duplicate-canonical-key", "v=aid1;v=aid2;u=https://x/mcp;p=mcp".to_owned()),
    ] {
        assert_eq!(reason(&raw), "aid_malformed", "{name}");
    }
    assert_eq!(
        reason("v=aid3;uri=https://api.example.com/mcp;proto=mcp"),
        "aid_unsupported_version",
        "unknown-future-version"
    );
    let e = parse("v=aid1;uri=https://api.example.com/mcp;proto=unknown").unwrap_err();
    assert!(e.message.contains("\"unknown\""), "{}", e.message);
}

#[test]
fn every_other_refusal_has_its_reason() {
    for raw in [
        // Required keys.
        "u=https://a.test/;p=mcp",
        "v=aid2;p=mcp",
        "v=aid2;u=https://a.test/",
        // A key and its long form.
        "v=aid2;version=aid2;u=https://a.test/;p=mcp",
        "v=aid2;u=https://a.test/;uri=https://a.test/;p=mcp",
        "v=aid2;u=https://a.test/;p=mcp;a=pat;auth=pat",
        "v=aid2;u=https://a.test/;p=mcp;s=x;desc=x",
        "v=aid2;u=https://a.test/;p=mcp;d=https://a.test/;D=https://a.test/",
        "v=aid2;u=https://a.test/;p=mcp;e=2030-01-01T00:00:00Z;dep=2030-01-01T00:00:00Z",
        // Values.
        "v=aid2;u=https://a.test/;p=mcp;a=password",
        "v=aid2;u=https://a.test/;p=MCP",
        "v=aid2;u=https:///mcp;p=mcp",
        "v=aid2;u=https://a.test/a b;p=mcp",
        "v=aid2;u=https://a.test/;p=websocket",
        "v=aid2;u=ws://a.test/;p=websocket",
        "v=aid2;u=docker;p=local",
        "v=aid2;u=curl:x;p=local",
        "v=aid2;u=zeroconf:;p=zeroconf",
        "v=aid2;u=https://a.test/;p=mcp;d=http://a.test/docs",
        "v=aid2;u=https://a.test/;p=mcp;e=2030-01-01",
        "v=aid2;u=https://a.test/;p=mcp;e=2030-01-01T00:00:00+01:00",
        "v=aid2;u=https://a.test/;p=mcp;kid=g1",
        // aid1 keys.
        &format!("v=aid1;u=https://a.test/;p=mcp;k={V1_KEY}"),
        &format!("v=aid1;u=https://a.test/;p=mcp;k={V1_KEY};i=toolong"),
        &format!("v=aid1;u=https://a.test/;p=mcp;k={V1_KEY};i=G1"),
        &format!("v=aid1;u=https://a.test/;p=mcp;k={V2_KEY};i=g1"),
        "v=aid1;u=https://a.test/;p=mcp;k=z;i=g1",
    ] {
        assert_eq!(reason(raw), "aid_malformed", "{raw}");
    }
    assert_eq!(
        reason("v=AID2;u=https://a.test/;p=mcp"),
        "aid_unsupported_version"
    );
    // desc: 60 bytes pass, 61 do not (bytes, not characters).
    let ok = format!("v=aid2;u=https://a.test/;p=mcp;s={}", "é".repeat(30));
    assert!(parse(&ok).is_ok());
    let over = format!("v=aid2;u=https://a.test/;p=mcp;s={}x", "é".repeat(30));
    assert_eq!(reason(&over), "aid_malformed");
    // Bounds: record length and pair count.
    let long = format!(
        "v=aid2;u=https://a.test/;p=mcp;x={}",
        "a".repeat(MAX_RECORD_BYTES)
    );
    assert_eq!(reason(&long), "aid_malformed");
    let at_limit = format!(
        "v=aid2;u=https://a.test/;p=mcp;{}",
        (3..MAX_PAIRS)
            .map(|i| format!("x{i}=1;"))
            .collect::<String>()
    );
    assert!(parse(&at_limit).is_ok());
    assert_eq!(reason(&format!("{at_limit}y=1")), "aid_malformed");
}

#[test]
fn is_aid_recognises_aid_records_only() {
    assert!(is_aid("v=aid2;u=https://a.test/;p=mcp"));
    assert!(is_aid(" p=mcp ; V = AID1 "));
    assert!(is_aid("version=aid2;u=x"));
    assert!(is_aid("v=aid3"));
    assert!(!is_aid("v=ADP1; pk=ed25519:00; wk=https://a.test/"));
    assert!(!is_aid("google-site-verification=aid"));
    assert!(!is_aid("kv=aid2"));
    assert!(!is_aid("v=ai"));
}

#[test]
fn select_follows_the_multi_record_rule() {
    // golden.json `recordSets`.
    let pick = |records: &[&str]| set(records).unwrap().unwrap();
    let r = pick(&[
        "v=aid1;u=https://v1.example.com/mcp;p=mcp",
        "v=aid2;u=https://v2.example.com/mcp;p=mcp",
    ]);
    assert_eq!(
        (r.version, r.uri.as_str()),
        (AidVersion::Aid2, "https://v2.example.com/mcp")
    );
    let r = pick(&[
        "v=aid3;u=https://future.example.com/mcp;p=mcp",
        "v=aid2;u=https://v2.example.com/mcp;p=mcp",
    ]);
    assert_eq!(r.uri, "https://v2.example.com/mcp");
    let r = pick(&[
        "v=aid2;u=http://bad.example.com/mcp;p=mcp",
        "v=aid2;u=https://v2.example.com/mcp;p=mcp",
    ]);
    assert_eq!(r.uri, "https://v2.example.com/mcp");
    let r = pick(&[
        "v=aid2;u=http://bad.example.com/mcp;p=mcp",
        "v=aid1;u=https://v1.example.com/mcp;p=mcp",
    ]);
    assert_eq!(
        (r.version, r.uri.as_str()),
        (AidVersion::Aid1, "https://v1.example.com/mcp")
    );
    // unknown-future-version-only / only-malformed-aid-like-txt: an
    // error, not "no record" (so no .well-known fallback).
    let e = set(&["v=aid3;u=https://future.example.com/mcp;p=mcp"])
        .unwrap()
        .unwrap_err();
    assert_eq!(e.reason.as_str(), "aid_unsupported_version");
    // No valid record: the first error.
    let e = set(&["v=aid2;p=mcp", "v=aid9;u=https://a.test/;p=mcp"])
        .unwrap()
        .unwrap_err();
    assert_eq!(e.reason.as_str(), "aid_malformed");
    // Two valid records of the chosen version: ambiguous, never
    // chosen by order.
    let e = set(&[
        "v=aid2;u=https://a.example.com/mcp;p=mcp",
        "v=aid2;u=https://b.example.com/mcp;p=mcp",
        "v=aid1;u=https://c.example.com/mcp;p=mcp",
    ])
    .unwrap()
    .unwrap_err();
    assert_eq!(e.reason.as_str(), "aid_malformed");
    assert!(e.message.contains("ambiguous"), "{}", e.message);
    let e = set(&[
        "v=aid1;u=https://a.example.com/mcp;p=mcp",
        "v=aid1;u=https://b.example.com/mcp;p=mcp",
    ])
    .unwrap()
    .unwrap_err();
    assert!(
        e.message.contains("ambiguous") && e.message.contains("aid1"),
        "{}",
        e.message
    );
    // No AID record at all.
    assert!(set(&[]).is_none());
    assert!(set(&["v=spf1 -all", "v=ADP1; pk=x; wk=y"]).is_none());
    // Bounded.
    let many: Vec<String> = (0..=MAX_RECORDS)
        .map(|i| format!("v=aid2;u=https://{i}.test/;p=mcp"))
        .collect();
    assert_eq!(
        select(&many).unwrap().unwrap_err().reason.as_str(),
        "aid_malformed"
    );
}

#[test]
fn an_adp_record_and_an_aid_record_coexist_at_one_name() {
    let fp = "ed25519:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    let rrset = vec![
        format!("v=ADP1; pk={fp}; wk=https://a.test/.well-known/agent.json"),
        "v=aid2;u=https://a.test/mcp;p=mcp".to_owned(),
    ];
    let aid = select(&rrset).unwrap().unwrap();
    assert_eq!(aid.uri, "https://a.test/mcp");
    let adp = crate::adp::txt::parse("a.test", &rrset).unwrap();
    assert_eq!(adp.fingerprint, fp);
    assert_eq!(adp.well_known, "https://a.test/.well-known/agent.json");
}

#[test]
fn the_descriptor_carries_the_record() {
    let r = parse("v=aid2;u=https://api.example.com/mcp;p=mcp;a=oauth2_code;s=Weather").unwrap();
    let d = r.to_descriptor("Example.COM.");
    assert_eq!(d.id, "aid:example.com");
    assert_eq!(d.name, "example.com");
    assert_eq!(d.description, "Weather");
    assert_eq!(d.endpoint.as_deref(), Some("https://api.example.com/mcp"));
    assert_eq!(d.tags, ["mcp"]);
    assert!(d.capabilities.is_empty());
    assert_eq!(d.auth.as_deref(), Some("oauth2_code"));
    assert_eq!(d.format, DocumentFormat::Aid);
    assert_eq!(r.to_descriptor("").name, "aid:");
    let bare = parse("v=aid1;u=https://a.test/;p=a2a")
        .unwrap()
        .to_descriptor("a.test");
    assert_eq!((bare.description.as_str(), bare.auth), ("", None));
}
