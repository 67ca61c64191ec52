use hickory_proto::rr::rdata::svcb::{SvcParamKey, SvcParamValue, Unknown, SVCB};
use hickory_proto::rr::Name;
use serde_json::json;

use super::*;
use crate::formats::dns_aid::{from_svcb, Binding};

/// The agent of `_a2a._agents.example.com`'s record with these params.
fn agent(owner: &str, params: Vec<(SvcParamKey, SvcParamValue)>) -> DnsAidAgent {
    let record = SVCB::new(1, Name::from_ascii("agents.example.com.").unwrap(), params);
    match from_svcb(owner, &record).unwrap() {
        Binding::Service(agent) => agent,
        Binding::Alias { target } => panic!("alias to {target}"),
    }
}

fn key(n: u16, value: &str) -> (SvcParamKey, SvcParamValue) {
    (
        SvcParamKey::from(n),
        SvcParamValue::Unknown(Unknown(value.as_bytes().to_vec())),
    )
}

fn card() -> Value {
    json!({
        "name": "Tide Forecaster",
        "description": "Predicts tides.",
        "version": "2.0.0",
        "provider": {"organization": "Harbour Co", "url": "https://example.com/"},
        "supportedInterfaces": [
            {"url": "https://agents.example.com/a2a/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "tide_prediction", "name": "Tides", "description": "Tides.", "tags": ["ocean"]}],
    })
}

#[test]
fn the_cap_digest_is_unpadded_base64url_sha256_of_the_bytes() {
    // SHA-256 of "abc", as RFC 4648 base64url without padding.
    let abc = "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0";
    check_cap_digest(abc, b"abc").unwrap();
    let e = check_cap_digest(abc, b"abd").unwrap_err();
    assert_eq!(e.reason, Reason::CapDigestMismatch);
    assert!(e.message.contains(abc), "{}", e.message);
    // The padded or standard alphabet of the same digest is not it.
    assert!(check_cap_digest(&format!("{abc}="), b"abc").is_err());
}

#[test]
fn a_capability_document_reads_and_a_broken_one_is_refused() {
    let doc = json!({
        "capabilities": ["travel", " booking ", ""],
        "version": "1.0.0",
        "description": "Books trips.",
        "use_cases": ["flight-booking"],
        "contact": "ops@example.com",
    });
    let cap = parse_cap(&doc).unwrap();
    assert_eq!(cap.capabilities, ["travel", "booking"]);
    assert_eq!(cap.use_cases, ["flight-booking"]);
    assert_eq!(cap.description.as_deref(), Some("Books trips."));
    assert_eq!(cap.version.as_deref(), Some("1.0.0"));
    for bad in [
        json!([]),
        json!("text"),
        json!({"capabilities": "travel"}),
        json!({"capabilities": [1, 2]}),
        json!({"capabilities": ["a"], "description": 3}),
        json!({"capabilities": ["a"], "use_cases": {}}),
        json!({"capabilities": vec!["x"; MAX_DOCUMENT_TERMS + 1]}),
        json!({"version": "1"}),
    ] {
        let e = parse_cap(&bad).unwrap_err();
        assert_eq!(e.reason, Reason::CapInvalid, "{bad}");
    }
}

#[test]
fn an_mcp_server_card_reads_and_a_broken_one_is_refused() {
    let doc = json!({
        "serverInfo": {"name": "ledger-mcp", "title": "Ledger Tools", "version": "2.1.0"},
        "description": "Reconciles ledgers.",
        "tools": [{"name": "reconcile_ledger"}, {"name": "export_journal", "inputSchema": {}}],
    });
    let card = parse_server_card(&doc).unwrap();
    assert_eq!(card.name, "Ledger Tools");
    assert_eq!(card.tools, ["reconcile_ledger", "export_journal"]);
    assert_eq!(card.version.as_deref(), Some("2.1.0"));
    let dynamic = json!({"serverInfo": {"name": "x"}, "tools": "dynamic"});
    assert!(parse_server_card(&dynamic).unwrap().tools.is_empty());
    for bad in [
        json!({"serverInfo": {}}),
        json!({"serverInfo": "x"}),
        json!({"serverInfo": {"name": 3}}),
        json!({"serverInfo": {"name": "x"}, "tools": "all"}),
        json!({"serverInfo": {"name": "x"}, "tools": [{"title": "no name"}]}),
    ] {
        let e = parse_server_card(&bad).unwrap_err();
        assert_eq!(e.reason, Reason::McpServerInvalid, "{bad}");
    }
}

#[test]
fn the_metadata_document_is_told_by_its_content() {
    assert!(matches!(
        parse_metadata(&card()).unwrap(),
        Metadata::A2aCard(_)
    ));
    let server = json!({"serverInfo": {"name": "x"}});
    assert!(matches!(
        parse_metadata(&server).unwrap(),
        Metadata::ServerCard(_)
    ));
    let mut no_skills = card();
    no_skills["skills"] = json!("none");
    for neither in [json!({"name": "x"}), no_skills, json!(null)] {
        let e = parse_metadata(&neither).unwrap_err();
        assert_eq!(e.reason, Reason::CardInvalid, "{neither}");
    }
}

#[test]
fn the_descriptor_keeps_dns_identity_and_takes_the_card_description() {
    let a = agent(
        "_a2a._agents.example.com",
        vec![(SvcParamKey::Port, SvcParamValue::Port(8443))],
    );
    let metadata = parse_metadata(&card()).unwrap();
    let cap = parse_cap(&json!({
        "capabilities": ["tide_forecast"],
        "description": "ignored: the card has one",
        "use_cases": ["sailing"],
    }))
    .unwrap();
    let d = a.describe(Some(&metadata), Some(&cap));
    assert_eq!(d.id, "dns-aid:_a2a._agents.example.com");
    assert_eq!(d.format, DocumentFormat::DnsAid);
    assert_eq!(
        d.endpoint.as_deref(),
        Some("https://agents.example.com:8443")
    );
    assert_eq!(d.name, "Tide Forecaster");
    assert_eq!(d.description, "Predicts tides.");
    assert_eq!(d.publisher.as_deref(), Some("Harbour Co"));
    assert_eq!(d.capabilities, ["tide_forecast", "tide_prediction"]);
    assert_eq!(d.tags, ["a2a", "ocean", "sailing"]);

    // The capability document alone gives its description; nothing but
    // DNS gives the owner's name.
    let d = a.describe(None, Some(&cap));
    assert_eq!(d.name, "example.com");
    assert_eq!(d.description, "ignored: the card has one");
    assert_eq!(d.capabilities, ["tide_forecast"]);
    assert_eq!(a.describe(None, None), a.to_descriptor());

    // An MCP server card's tools are its capabilities.
    let server = parse_metadata(&json!({
        "serverInfo": {"name": "files"},
        "description": "Files over MCP.",
        "tools": [{"name": "read_file"}],
    }))
    .unwrap();
    let d = a.describe(Some(&server), None);
    assert_eq!(
        (d.name.as_str(), d.format),
        ("files", DocumentFormat::DnsAid)
    );
    assert_eq!(d.capabilities, ["read_file"]);
}

#[test]
fn the_metadata_url_is_the_well_known_key_else_the_protocol_card() {
    let suffix = agent(
        "_mcp._agents.example.com",
        vec![key(65409, "agent-card.json")],
    );
    assert_eq!(
        suffix.metadata_url(443),
        Some((
            "https://agents.example.com/.well-known/agent-card.json".into(),
            true
        ))
    );
    let path = agent(
        "_mcp._agents.example.com",
        vec![
            (SvcParamKey::Port, SvcParamValue::Port(8443)),
            key(65409, "/mcp/card.json"),
        ],
    );
    assert_eq!(
        path.metadata_url(443),
        Some(("https://agents.example.com:8443/mcp/card.json".into(), true))
    );
    let a2a = agent("_a2a._agents.example.com", vec![]);
    assert_eq!(
        a2a.metadata_url(9443),
        Some((
            "https://agents.example.com:9443/.well-known/agent-card.json".into(),
            false
        ))
    );
    let mcp = agent("_mcp._agents.example.com", vec![]);
    assert_eq!(
        mcp.metadata_url(443),
        Some((
            "https://agents.example.com/.well-known/mcp/server-card.json".into(),
            false
        ))
    );
    let other = agent("_mcp._agents.example.com", vec![key(65402, "openapi")]);
    assert_eq!(other.protocol.as_deref(), Some("openapi"));
    assert_eq!(other.metadata_url(443), None);
}
