use hickory_proto::rr::rdata::svcb::{Alpn, Mandatory, Unknown};
use hickory_proto::rr::{Name, RData, RecordType};
use hickory_proto::serialize::binary::{BinDecoder, BinEncodable, Restrict};

use super::*;

fn name(s: &str) -> Name {
    Name::from_ascii(s).unwrap()
}

fn alpn(ids: &[&str]) -> (SvcParamKey, SvcParamValue) {
    (
        SvcParamKey::Alpn,
        SvcParamValue::Alpn(Alpn(ids.iter().map(|s| s.to_string()).collect())),
    )
}

fn port(p: u16) -> (SvcParamKey, SvcParamValue) {
    (SvcParamKey::Port, SvcParamValue::Port(p))
}

fn mandatory(keys: &[SvcParamKey]) -> (SvcParamKey, SvcParamValue) {
    (
        SvcParamKey::Mandatory,
        SvcParamValue::Mandatory(Mandatory(keys.to_vec())),
    )
}

/// A generic `keyNNNNN="..."` param, as hickory reads it.
fn key(n: u16, value: &[u8]) -> (SvcParamKey, SvcParamValue) {
    (
        SvcParamKey::from(n),
        SvcParamValue::Unknown(Unknown(value.to_vec())),
    )
}

/// The record after a trip through the wire format, so the test sees
/// what hickory hands the crawler.
fn svcb(priority: u16, target: &str, params: Vec<(SvcParamKey, SvcParamValue)>) -> SVCB {
    let record = SVCB::new(priority, name(target), params);
    let bytes = record.to_bytes().unwrap();
    let mut decoder = BinDecoder::new(&bytes);
    let len = u16::try_from(bytes.len()).unwrap();
    match RData::read(&mut decoder, RecordType::SVCB, Restrict::new(len)).unwrap() {
        RData::SVCB(read) => {
            assert_eq!(read, record);
            read
        }
        other => panic!("not SVCB: {other:?}"),
    }
}

fn service(owner: &str, record: &SVCB) -> DnsAidAgent {
    match from_svcb(owner, record).unwrap() {
        Binding::Service(agent) => agent,
        Binding::Alias { target } => panic!("alias to {target}"),
    }
}

fn refused(owner: &str, record: &SVCB) -> String {
    let e = from_svcb(owner, record).unwrap_err();
    assert_eq!(e.reason.as_str(), "dns_aid_malformed", "{}", e.message);
    e.message
}

fn basic(params: Vec<(SvcParamKey, SvcParamValue)>) -> SVCB {
    SVCB::new(1, name("agent.example.com."), params)
}

#[test]
fn the_names_to_query() {
    assert_eq!(index_name("Example.com."), "_index._agents.example.com");
    assert_eq!(
        protocol_names("example.com"),
        ["_mcp._agents.example.com", "_a2a._agents.example.com"]
    );
    assert_eq!(
        agent_names("Chat", "A2A", "example.com."),
        [
            "chat.example.com",
            "chat._agents.example.com",
            "_chat._a2a._agents.example.com"
        ]
    );
}

#[test]
fn every_name_a_crawl_queries_leads_back_to_its_domain() {
    let names =
        protocol_names("example.com")
            .into_iter()
            .chain(agent_names("chat", "a2a", "example.com"));
    for owner in names {
        assert_eq!(
            published_domain(&owner).as_deref(),
            Some("example.com"),
            "{owner}"
        );
    }
    assert_eq!(
        published_domain("_A2A._agents.Sub.Example.com.").as_deref(),
        Some("sub.example.com")
    );
    // Nothing that is a domain of two labels is left.
    for owner in [
        "_a2a._agents.com",
        "_agents",
        "chat.com",
        "_chat._a2a.example.com",
        "_a2a._agents.under_score.example",
    ] {
        assert_eq!(published_domain(owner), None, "{owner}");
    }
}

#[test]
fn the_02_testbed_zone_reads() {
    // assistant.orga.test. SVCB 1 assistant.orga.test. mandatory=alpn,port alpn="mcp" port=443
    let record = svcb(
        1,
        "assistant.orga.test.",
        vec![
            mandatory(&[SvcParamKey::Alpn, SvcParamKey::Port]),
            alpn(&["mcp"]),
            port(443),
        ],
    );
    let agent = service("assistant.orga.test.", &record);
    assert_eq!(agent.owner, "assistant.orga.test");
    assert_eq!(agent.target, "assistant.orga.test");
    assert_eq!(agent.protocol.as_deref(), Some("mcp"));
    assert_eq!(
        (agent.port, agent.alpn.as_slice()),
        (Some(443), &["mcp".to_owned()][..])
    );
    assert_eq!(agent.endpoint(), "https://assistant.orga.test");
    let d = agent.to_descriptor();
    assert_eq!(d.id, "dns-aid:assistant.orga.test");
    assert_eq!(d.name, "assistant");
    assert_eq!(d.tags, ["mcp"]);
    assert_eq!(d.endpoint.as_deref(), Some("https://assistant.orga.test"));
    assert_eq!(d.format, DocumentFormat::DnsAid);
    // assistant._agents.orga.test. SVCB 0 assistant.orga.test.
    let alias = svcb(0, "assistant.orga.test.", vec![]);
    assert_eq!(
        from_svcb("assistant._agents.orga.test.", &alias).unwrap(),
        Binding::Alias {
            target: "assistant.orga.test".into()
        }
    );
}

#[test]
fn the_01_testbed_zone_reads() {
    // _assistant._mcp._agents.orga.test. SVCB 1 assistant.orga.test. mandatory=alpn,port alpn="mcp" port=443
    let record = svcb(
        1,
        "assistant.orga.test.",
        vec![
            mandatory(&[SvcParamKey::Alpn, SvcParamKey::Port]),
            alpn(&["mcp"]),
            port(443),
        ],
    );
    let agent = service("_assistant._mcp._agents.orga.test", &record);
    assert_eq!(agent.name(), "assistant");
    assert_eq!(agent.protocol.as_deref(), Some("mcp"));
    assert_eq!(
        agent.to_descriptor().id,
        "dns-aid:_assistant._mcp._agents.orga.test"
    );
    // The protocol comes from the owner's `_{proto}` label when neither
    // bap nor alpn names it.
    let h2 = svcb(
        1,
        "chat.example.com.",
        vec![alpn(&["h2", "h3"]), port(8443)],
    );
    let agent = service("_chat._a2a._agents.example.com", &h2);
    assert_eq!(agent.protocol.as_deref(), Some("a2a"));
    assert_eq!(agent.endpoint(), "https://chat.example.com:8443");
    assert_eq!(agent.to_descriptor().tags, ["a2a", "h2", "h3"]);
}

#[test]
fn the_02_generic_key_example_reads() {
    // ABNF Example 3, with a real digest for the abbreviated key65401.
    let digest = "RehGNbxIA8XMXUVseYoT03p_0YT3awErAcAWdtXORsA";
    let record = svcb(
        1,
        "booking.example.com.",
        vec![
            mandatory(&[SvcParamKey::Alpn, SvcParamKey::Port]),
            alpn(&["h2"]),
            port(443),
            key(KEY_CAP, b"https://booking.example.com/cap.json"),
            key(KEY_CAP_SHA256, digest.as_bytes()),
            key(KEY_BAP, b"mcp"),
            key(KEY_POLICY, b"https://example.com/agent-policy.json"),
            key(KEY_REALM, b"production"),
            key(KEY_WELL_KNOWN, b"agent-card.json"),
        ],
    );
    assert!(matches!(record.svc_params[3].0, SvcParamKey::Key(65400)));
    let agent = service("booking.example.com.", &record);
    assert_eq!(
        agent,
        DnsAidAgent {
            owner: "booking.example.com".into(),
            protocol: Some("mcp".into()),
            target: "booking.example.com".into(),
            port: Some(443),
            alpn: vec!["h2".into()],
            well_known: Some("agent-card.json".into()),
            cap: Some("https://booking.example.com/cap.json".into()),
            cap_sha256: Some(digest.into()),
            policy: Some("https://example.com/agent-policy.json".into()),
            realm: Some("production".into()),
        }
    );
    assert_eq!(
        agent.well_known_url().as_deref(),
        Some("https://booking.example.com/.well-known/agent-card.json")
    );
    assert_eq!(agent.to_descriptor().tags, ["h2", "mcp"]);
    // The example's own key65401 value is abbreviated: refused.
    let placeholder = svcb(
        1,
        "booking.example.com.",
        vec![key(KEY_CAP_SHA256, b"dGVzdGhhc2g...")],
    );
    assert!(refused("booking.example.com", &placeholder).contains("cap-sha256"));
}

#[test]
fn protocol_scoped_names_and_a_root_target_read() {
    // dns-aid-core parser test: `1 mcp.example.com. alpn="mcp" port="443" key65409="agent-card.json"`.
    let record = svcb(
        1,
        "mcp.example.com.",
        vec![
            alpn(&["mcp"]),
            port(443),
            key(KEY_WELL_KNOWN, b"agent-card.json"),
        ],
    );
    let agent = service("_mcp._agents.example.com", &record);
    assert_eq!(agent.protocol.as_deref(), Some("mcp"));
    assert_eq!(agent.well_known.as_deref(), Some("agent-card.json"));
    assert_eq!(agent.to_descriptor().name, "example.com");
    // TargetName "." is the owner.
    let dot = svcb(
        1,
        ".",
        vec![alpn(&["a2a"]), key(KEY_WELL_KNOWN, b"/cards/chat.json")],
    );
    let agent = service("Chat.Example.com.", &dot);
    assert_eq!(agent.target, "chat.example.com");
    assert_eq!(
        agent.well_known_url().as_deref(),
        Some("https://chat.example.com/cards/chat.json")
    );
    assert_eq!(agent.port, None);
    // bap wins over the label and alpn; a legacy list gives its first
    // token; a versioned token its protocol.
    for (value, protocol) in [("a2a", "a2a"), ("mcp/1,a2a/1", "mcp"), ("a2a=1.0", "a2a")] {
        let r = svcb(
            1,
            "x.example.com.",
            vec![alpn(&["mcp"]), key(KEY_BAP, value.as_bytes())],
        );
        let agent = service("_mcp._agents.example.com", &r);
        assert_eq!(agent.protocol.as_deref(), Some(protocol), "{value}");
    }
    // Nothing names a protocol.
    let bare = svcb(1, "x.example.com.", vec![alpn(&["h2"])]);
    assert_eq!(service("x.example.com", &bare).protocol, None);
}

#[test]
fn the_02_index_record_names_a_host() {
    // _index._agents.example.com. SVCB 1 agent-index.example.com. ( alpn="h2" port="443" )
    let record = svcb(
        1,
        "agent-index.example.com.",
        vec![alpn(&["h2"]), port(443)],
    );
    let Binding::Service(host) = index_from_svcb(&index_name("example.com"), &record).unwrap()
    else {
        panic!("not a service");
    };
    assert_eq!(host.target, "agent-index.example.com");
    assert_eq!(
        host.urls()[0],
        "https://agent-index.example.com/.well-known/agents-index.json"
    );
    assert_eq!(host.urls().len(), HTTP_INDEX_PATHS.len());
    let alias = svcb(0, "index.example.net.", vec![]);
    assert_eq!(
        index_from_svcb("_index._agents.example.com", &alias).unwrap(),
        Binding::Alias {
            target: "index.example.net".into()
        }
    );
    let underscore = SVCB::new(1, name("_index.example.com."), vec![]);
    let e = index_from_svcb("_index._agents.example.com", &underscore).unwrap_err();
    assert_eq!(e.reason.as_str(), "dns_aid_malformed");
}

#[test]
fn each_bad_record_is_refused() {
    // No target: AliasMode to ".".
    assert!(refused("a._agents.example.com", &SVCB::new(0, Name::root(), vec![])).contains("'.'"));
    // A ServiceMode "." target at an underscore name has no usable host.
    refused(
        "_chat._a2a._agents.example.com",
        &SVCB::new(1, Name::root(), vec![]),
    );
    // Targets with underscores, in either mode.
    refused(
        "x.example.com",
        &SVCB::new(1, name("_x.example.com."), vec![]),
    );
    refused(
        "x._agents.example.com",
        &SVCB::new(0, name("a_b.example.com."), vec![]),
    );
    // Owners that are not names.
    refused("", &basic(vec![]));
    refused("a b.example.com", &basic(vec![]));
    refused(&format!("{}.example.com", "a".repeat(64)), &basic(vec![]));
    // Port 0.
    refused("x.example.com", &basic(vec![port(0)]));
    // Too many alpn ids, a non-printable one.
    let many: Vec<String> = (0..=MAX_ALPN_IDS).map(|i| format!("p{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    refused("x.example.com", &basic(vec![alpn(&many)]));
    refused("x.example.com", &basic(vec![alpn(&["h 2"])]));
    // mandatory: a key not in the record, a key not supported (ech).
    refused(
        "x.example.com",
        &basic(vec![mandatory(&[SvcParamKey::Port]), alpn(&["h2"])]),
    );
    let ech = (
        SvcParamKey::EchConfigList,
        SvcParamValue::EchConfigList(hickory_proto::rr::rdata::svcb::EchConfigList(vec![1])),
    );
    assert!(refused(
        "x.example.com",
        &basic(vec![mandatory(&[SvcParamKey::EchConfigList]), ech])
    )
    .contains("does not support"));
    // A key twice, too many params (only a built record can do this:
    // the wire decoder refuses it first).
    refused("x.example.com", &basic(vec![port(443), port(8443)]));
    let params: Vec<_> = (0..=MAX_PARAMS as u16)
        .map(|i| key(65300 + i, b"x"))
        .collect();
    refused("x.example.com", &basic(params));
    // A DNS-AID key with a value of another type.
    refused(
        "x.example.com",
        &basic(vec![(SvcParamKey::Key(KEY_BAP), SvcParamValue::Port(1))]),
    );
    // Bad values.
    for (k, value) in [
        (KEY_BAP, &b"MCP"[..]),
        (KEY_BAP, b"mcp=1 0"),
        (KEY_BAP, b"9p"),
        (KEY_BAP, b""),
        (KEY_REALM, b"prod.eu"),
        (KEY_REALM, &[b'r'; 64][..]),
        (KEY_CAP, &[b'c'; MAX_URI_BYTES + 1][..]),
        (KEY_CAP, b"https://a.test/\"x"),
        (KEY_CAP, b"https://a.test/\\x"),
        (KEY_CAP, b"https://a.test/\nx"),
        (KEY_CAP, &[0xff, 0xfe]),
        (KEY_POLICY, b"  "),
        (
            KEY_CAP_SHA256,
            b"RehGNbxIA8XMXUVseYoT03p_0YT3awErAcAWdtXORs",
        ),
        (
            KEY_CAP_SHA256,
            b"RehGNbxIA8XMXUVseYoT03p_0YT3awErAcAWdtXORs+",
        ),
        (KEY_WELL_KNOWN, b"card.json?x=1"),
        (KEY_WELL_KNOWN, b"cards/chat.json"),
        (KEY_WELL_KNOWN, b"//evil.example/x"),
    ] {
        let r = svcb(1, "x.example.com.", vec![key(k, value)]);
        refused("x.example.com", &r);
    }
}

#[test]
fn unknown_and_unused_params_are_ignored() {
    let record = svcb(
        1,
        "x.example.com.",
        vec![
            mandatory(&[SvcParamKey::Ipv4Hint]),
            alpn(&["h2"]),
            (SvcParamKey::NoDefaultAlpn, SvcParamValue::NoDefaultAlpn),
            (
                SvcParamKey::Ipv4Hint,
                SvcParamValue::Ipv4Hint(hickory_proto::rr::rdata::svcb::IpHint(vec![
                    hickory_proto::rr::rdata::A::new(192, 0, 2, 1),
                ])),
            ),
            // The sig key (dns-aid-core only), an older bap number, an
            // unassigned private key.
            key(65010, b"a2a"),
            key(65405, b"\"anything\\"),
            key(65500, &[0xff]),
        ],
    );
    let agent = service("x.example.com", &record);
    assert_eq!((agent.protocol, agent.alpn), (None, vec!["h2".to_owned()]));
}

#[test]
fn the_txt_index_reads() {
    let index =
        |records: &[&str]| parse_index(&records.iter().map(|r| r.to_string()).collect::<Vec<_>>());
    let agent = |name: &str, proto: &str| IndexedAgent {
        name: name.into(),
        proto: proto.into(),
    };
    // Both testbed zones.
    assert_eq!(
        index(&["agents=assistant:mcp"]).unwrap(),
        [agent("assistant", "mcp")]
    );
    // Trimmed, lower-cased, other records skipped, bad entries skipped
    // (no ':', a 64-character name, an underscore, a protocol that
    // does not start with a letter), duplicates dropped, merged.
    let long = "a".repeat(64);
    let got = index(&[
        "v=spf1 -all",
        &format!("agents=chat:mcp, Billing:A2A ,broken,{long}:mcp,a_b:mcp,x:1mcp,chat:mcp"),
        " AGENTS = help:x-custom",
    ])
    .unwrap();
    assert_eq!(
        got,
        [
            agent("chat", "mcp"),
            agent("billing", "a2a"),
            agent("help", "x-custom")
        ]
    );
    // Empty.
    assert!(index(&["agents="]).unwrap().is_empty());
    assert!(index(&["hello"]).unwrap().is_empty());
    assert!(index(&[]).unwrap().is_empty());
    // Bounds.
    let full: String = (0..MAX_INDEX_AGENTS)
        .map(|i| format!("a{i}:mcp,"))
        .collect();
    assert_eq!(
        index(&[&format!("agents={full}")]).unwrap().len(),
        MAX_INDEX_AGENTS
    );
    let e = index(&[&format!("agents={full}one:mcp")]).unwrap_err();
    assert_eq!(e.reason.as_str(), "dns_aid_malformed");
    let e = index(&[&format!("agents={full}"), "agents=one:mcp"]).unwrap_err();
    assert_eq!(e.reason.as_str(), "dns_aid_malformed");
    let padded = format!("agents=a:mcp,{}", " ".repeat(MAX_INDEX_BYTES));
    assert_eq!(
        index(&[&padded]).unwrap_err().reason.as_str(),
        "dns_aid_malformed"
    );
}
