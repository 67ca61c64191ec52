use super::*;
use serde_json::json;

/// The notes' minimal 1.0 card: every required member, non-empty arrays.
pub(super) fn minimal_v1() -> Value {
    json!({"name": "Echo Agent", "description": "Echoes text back.", "version": "1.0.0",
        "supportedInterfaces": [{"url": "https://echo.example.com/a2a",
            "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {}, "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "Returns the input text.",
            "tags": ["echo"]}]})
}

/// A 0.2.5-shaped card: `url`, `protocolVersion`, `preferredTransport`,
/// `additionalInterfaces` (repeating the main one), a `type` scheme.
fn legacy_v0() -> Value {
    json!({"name": "Weather", "description": "Forecasts.", "version": "0.4.1",
        "url": "https://weather.example.com/a2a", "protocolVersion": "0.2.5",
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [
            {"url": "https://weather.example.com/a2a", "transport": "JSONRPC"},
            {"url": "https://weather.example.com/rest", "transport": "HTTP+JSON"}],
        "provider": {"organization": "Example Weather", "url": "https://example.com"},
        "capabilities": {"streaming": true, "stateTransitionHistory": false},
        "securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Key"}},
        "security": [{"key": []}],
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["application/json"],
        "skills": [{"id": "Forecast", "name": "Forecast", "description": "Daily forecast.",
            "tags": ["Weather", "forecast"], "examples": ["Rain in Oslo tomorrow?"]}]})
}

/// What a2a-python serves: the 1.0 members merged with the 0.3 ones.
pub(super) fn python_hybrid() -> Value {
    json!({"name": "Complex Agent", "description": "Agent with many interfaces",
        "version": "1.2.3",
        "supportedInterfaces": [
            {"url": "http://jsonrpc.v10.com", "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0"},
            {"url": "http://jsonrpc.v03.com", "protocolBinding": "JSONRPC",
                "protocolVersion": "0.3.0"},
            {"url": "http://grpc.v03.com", "protocolBinding": "GRPC",
                "protocolVersion": "0.3.0"}],
        "url": "http://jsonrpc.v03.com", "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3.0",
        "additionalInterfaces": [{"url": "http://grpc.v03.com", "transport": "GRPC"}],
        "capabilities": {"extensions": [{"uri": "https://example.com/ext", "required": false}]},
        "securitySchemes": {"bearer": {
            "httpAuthSecurityScheme": {"scheme": "Bearer"}, "type": "http", "scheme": "Bearer"}},
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
        "security": [{"bearer": []}],
        "defaultInputModes": [], "defaultOutputModes": [], "skills": []})
}

fn refused(doc: &Value) -> String {
    let err = parse_card(doc).expect_err("the card must be refused");
    assert_eq!(err.reason, Reason::CardInvalid, "{}", err.message);
    err.message
}

#[test]
fn classify_tells_adp_from_a2a_by_content() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/proto/examples/adp/valid");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(classify(&doc), Shape::Adp, "{}", path.display());
        seen += 1;
    }
    assert!(seen >= 3, "the ADP examples are there");
    for card in [minimal_v1(), legacy_v0(), python_hybrid()] {
        assert_eq!(classify(&card), Shape::A2a);
    }
    let mut no_endpoint = minimal_v1();
    no_endpoint
        .as_object_mut()
        .unwrap()
        .remove("supportedInterfaces");
    let mut capability_list = minimal_v1();
    capability_list["capabilities"] = json!([{"id": "echo"}]);
    let others = [
        json!({"name": "x", "skills": []}),
        json!([minimal_v1()]),
        json!({"name": "io.example/weather", "version": "1.0.0",
            "remotes": [{"type": "streamable-http", "url": "https://x/mcp"}]}),
        json!({"skills": [], "capabilities": {}, "url": 7}),
        no_endpoint,
        capability_list,
    ];
    for other in &others {
        assert_eq!(classify(other), Shape::Unknown, "{other}");
    }
}

#[test]
fn a_minimal_v1_card_is_read() {
    let card = parse_card(&minimal_v1()).unwrap();
    assert_eq!(card.spec, SpecVersion::V1);
    assert_eq!(card.name, "Echo Agent");
    assert_eq!(card.version, "1.0.0");
    assert_eq!(
        card.interfaces,
        [Interface {
            url: "https://echo.example.com/a2a".into(),
            protocol_binding: "JSONRPC".into(),
            protocol_version: Some("1.0".into()),
            tenant: None,
        }]
    );
    assert_eq!(card.skills.len(), 1);
    assert_eq!(card.skills[0].id, "echo");
    assert_eq!(card.skills[0].tags, ["echo"]);
    assert_eq!(card.default_input_modes, ["text/plain"]);
    assert!(card.provider.is_none() && card.signatures.is_empty());
}

#[test]
fn a_legacy_card_maps_its_url_and_transports_into_interfaces() {
    let card = parse_card(&legacy_v0()).unwrap();
    assert_eq!(card.spec, SpecVersion::V0);
    let got: Vec<(&str, &str, Option<&str>)> = card
        .interfaces
        .iter()
        .map(|i| {
            let version = i.protocol_version.as_deref();
            (i.url.as_str(), i.protocol_binding.as_str(), version)
        })
        .collect();
    assert_eq!(
        got,
        [
            ("https://weather.example.com/a2a", "JSONRPC", Some("0.2.5")),
            (
                "https://weather.example.com/rest",
                "HTTP+JSON",
                Some("0.2.5")
            ),
        ]
    );
    assert_eq!(
        card.security_schemes,
        [SecurityScheme {
            name: "key".into(),
            kind: SchemeKind::ApiKey
        }]
    );
    assert_eq!(card.skills[0].examples, ["Rain in Oslo tomorrow?"]);
    assert_eq!(card.provider.unwrap().organization, "Example Weather");

    // 0.2.0-0.2.3: no protocolVersion, no preferredTransport.
    let mut old = legacy_v0();
    let obj = old.as_object_mut().unwrap();
    for key in [
        "protocolVersion",
        "preferredTransport",
        "additionalInterfaces",
    ] {
        obj.remove(key);
    }
    let card = parse_card(&old).unwrap();
    assert_eq!(card.interfaces.len(), 1);
    assert_eq!(card.interfaces[0].protocol_binding, "JSONRPC");
    assert_eq!(card.interfaces[0].protocol_version, None);
}

#[test]
fn a_python_hybrid_is_read_as_v1() {
    let card = parse_card(&python_hybrid()).unwrap();
    assert_eq!(card.spec, SpecVersion::V1);
    assert_eq!(card.interfaces.len(), 3);
    assert_eq!(card.interfaces[0].url, "http://jsonrpc.v10.com");
    assert_eq!(card.interfaces[0].protocol_version.as_deref(), Some("1.0"));
    assert_eq!(card.security_schemes[0].kind, SchemeKind::Http);
    assert!(card.skills.is_empty());
    assert_eq!(card.to_descriptor("a2a:x").auth.as_deref(), Some("http"));
}

/// The card `a2a-sdk` 1.3.0 serves at its well-known path, byte for byte
/// (`tests/a2a_interop/a2a_agent.py`'s, its port fixed): the 1.0 members
/// and the 0.3 ones merged, one JSON-RPC URL at both versions.
const SDK_1_3_CARD: &str = r#"{"name":"Interop agent","description":"An A2A agent written with the A2A Python SDK.","supportedInterfaces":[{"url":"https://127.0.0.1:35921/a2a/jsonrpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"},{"url":"https://127.0.0.1:35921/a2a/jsonrpc","protocolBinding":"JSONRPC","protocolVersion":"0.3"}],"version":"1.0.0","capabilities":{"streaming":false,"pushNotifications":false},"defaultInputModes":["text/plain","application/json"],"defaultOutputModes":["text/plain"],"skills":[{"id":"upper","name":"Upper","description":"Answers the input text in capitals.","tags":["interop"]},{"id":"fail","name":"Fail","description":"Always fails.","tags":["interop"]},{"id":"ask","name":"Ask","description":"Always asks a question back.","tags":["interop"]}],"preferredTransport":"JSONRPC","protocolVersion":"0.3","url":"https://127.0.0.1:35921/a2a/jsonrpc"}"#;

#[test]
fn the_python_sdks_card_is_read_and_spoken_to_in_1x() {
    let doc: Value = serde_json::from_str(SDK_1_3_CARD).unwrap();
    assert_eq!(classify(&doc), Shape::A2a);
    let card = parse_card(&doc).unwrap();
    assert_eq!(card.spec, SpecVersion::V1);
    let versions: Vec<_> = card
        .interfaces
        .iter()
        .map(|i| i.protocol_version.as_deref())
        .collect();
    assert_eq!(versions, [Some("1.0"), Some("0.3")]);
    let skills: Vec<_> = card.skills.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(skills, ["upper", "fail", "ask"]);
    let chosen = card.rpc_interface().unwrap();
    assert_eq!(chosen.url, "https://127.0.0.1:35921/a2a/jsonrpc");
    assert_eq!(chosen.version, RpcVersion::V1);
    let descriptor = card.to_descriptor("a2a:sdk");
    assert_eq!(descriptor.capabilities, ["ask", "fail", "upper"]);
}

#[test]
fn scheme_kinds_are_read_from_both_forms() {
    let mut doc = minimal_v1();
    doc["securitySchemes"] = json!({
        "custom": {"type": "somethingNew"},
        "oidc": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://x/.well-known"}},
        "tls": {"mtlsSecurityScheme": {}},
        "old-oauth": {"type": "oauth2", "flows": {}},
        "old-tls": {"type": "mutualTLS"},
        "key": {"apiKeySecurityScheme": {"location": "header", "name": "K"}}});
    let card = parse_card(&doc).unwrap();
    let kinds: Vec<SchemeKind> = card.security_schemes.iter().map(|s| s.kind).collect();
    use SchemeKind::*;
    assert_eq!(
        kinds,
        [Other, OpenIdConnect, MutualTls, OAuth2, MutualTls, ApiKey]
    );
    // The first scheme of a known kind gives `auth`.
    assert_eq!(
        card.to_descriptor("a2a:x").auth.as_deref(),
        Some("openidconnect")
    );
}

#[test]
fn every_refusal_names_the_member() {
    let edit = |f: &dyn Fn(&mut Map<String, Value>)| {
        let mut doc = minimal_v1();
        f(doc.as_object_mut().unwrap());
        doc
    };
    let cases: Vec<(Value, &str)> = vec![
        (
            edit(&|c| drop(c.remove("name"))),
            "/name: required member missing",
        ),
        (
            edit(&|c| drop(c.insert("name".into(), Value::Null))),
            "/name: required",
        ),
        (
            edit(&|c| drop(c.insert("name".into(), json!(7)))),
            "/name: not a string",
        ),
        (edit(&|c| drop(c.remove("version"))), "/version: required"),
        (
            edit(&|c| drop(c.remove("description"))),
            "/description: required",
        ),
        (
            edit(&|c| drop(c.insert("skills".into(), json!({})))),
            "/skills: not an array",
        ),
        (
            edit(&|c| drop(c["skills"][0].as_object_mut().unwrap().remove("id"))),
            "/skills/0/id: required",
        ),
        (
            edit(&|c| drop(c["skills"][0].as_object_mut().unwrap().remove("tags"))),
            "/skills/0/tags: required",
        ),
        (
            edit(&|c| c["skills"][0]["tags"] = json!(["ok", 1])),
            "/skills/0/tags/1: not a string",
        ),
        (
            edit(&|c| c["skills"] = json!(["echo"])),
            "/skills/0: the entry is not an object",
        ),
        (
            edit(&|c| {
                drop(
                    c["supportedInterfaces"][0]
                        .as_object_mut()
                        .unwrap()
                        .remove("url"),
                )
            }),
            "/supportedInterfaces/0/url: required",
        ),
        (
            edit(&|c| c["supportedInterfaces"][0]["url"] = json!(" ")),
            "/supportedInterfaces/0/url: empty",
        ),
        (
            edit(&|c| {
                drop(
                    c["supportedInterfaces"][0]
                        .as_object_mut()
                        .unwrap()
                        .remove("protocolVersion"),
                )
            }),
            "/supportedInterfaces/0/protocolVersion: required",
        ),
        (
            edit(&|c| c["supportedInterfaces"] = json!([])),
            "/supportedInterfaces: no interface",
        ),
        (
            edit(&|c| c["supportedInterfaces"] = json!("https://x")),
            "/supportedInterfaces: not an array",
        ),
        (
            edit(&|c| drop(c.remove("supportedInterfaces"))),
            "/url: required",
        ),
        (
            edit(&|c| drop(c.remove("capabilities"))),
            "/capabilities: required",
        ),
        (
            edit(&|c| c["capabilities"] = json!([])),
            "/capabilities: the member is not an object",
        ),
        (
            edit(&|c| drop(c.remove("defaultOutputModes"))),
            "/defaultOutputModes: required",
        ),
        (
            edit(&|c| drop(c.insert("provider".into(), json!({"url": "https://x"})))),
            "/provider/organization: required",
        ),
        (
            edit(&|c| drop(c.insert("documentationUrl".into(), json!(["x"])))),
            "/documentationUrl: not a string",
        ),
        (
            edit(&|c| drop(c.insert("securitySchemes".into(), json!({"a/b": "bearer"})))),
            "/securitySchemes/a~1b: the member is not an object",
        ),
        (
            edit(&|c| c["skills"][0]["id"] = json!("x".repeat(MAX_VALUE_CHARS + 1))),
            "/skills/0/id: longer than",
        ),
        (
            edit(&|c| drop(c.insert("signatures".into(), json!({})))),
            "/signatures: not an array",
        ),
        (
            edit(&|c| drop(c.insert("signatures".into(), json!([{"signature": "AA"}])))),
            "/signatures/0/protected: required",
        ),
    ];
    for (doc, expected) in cases {
        let message = refused(&doc);
        assert!(
            message.starts_with(expected),
            "{message:?} for {expected:?}"
        );
    }
    assert!(refused(&json!("card")).contains("not an object"));
    let adp = include_str!("../../../proto/examples/adp/valid/minimal-required-only.json");
    assert!(refused(&serde_json::from_str(adp).unwrap()).contains("ADP"));
    // A legacy card's extra interfaces need both members.
    let mut legacy = legacy_v0();
    legacy["additionalInterfaces"][1]
        .as_object_mut()
        .unwrap()
        .remove("transport");
    assert!(refused(&legacy).starts_with("/additionalInterfaces/1/transport: required"));
}

#[test]
fn counts_over_their_bounds_are_refused() {
    let skill = json!({"id": "s", "name": "S", "description": "d", "tags": []});
    let mut doc = minimal_v1();
    doc["skills"] = Value::Array(vec![skill.clone(); MAX_SKILLS]);
    assert_eq!(parse_card(&doc).unwrap().skills.len(), MAX_SKILLS);
    doc["skills"] = Value::Array(vec![skill; MAX_SKILLS + 1]);
    assert!(refused(&doc).starts_with("/skills: more than 256 entries"));

    let mut doc = minimal_v1();
    doc["skills"][0]["tags"] = json!(vec!["t"; MAX_TAGS_PER_SKILL + 1]);
    assert!(refused(&doc).starts_with("/skills/0/tags: more than"));

    let mut doc = minimal_v1();
    let interface = doc["supportedInterfaces"][0].clone();
    doc["supportedInterfaces"] = Value::Array(vec![interface; MAX_INTERFACES + 1]);
    assert!(refused(&doc).starts_with("/supportedInterfaces: more than"));

    // A legacy card's `url` counts with its additional interfaces.
    let mut legacy = legacy_v0();
    let extra: Vec<Value> = (0..MAX_INTERFACES)
        .map(|i| json!({"url": format!("https://x/{i}"), "transport": "GRPC"}))
        .collect();
    legacy["additionalInterfaces"] = Value::Array(extra);
    assert!(refused(&legacy).starts_with("/additionalInterfaces: more than"));

    let mut doc = minimal_v1();
    doc["signatures"] = Value::Array(vec![json!({}); MAX_SIGNATURES + 1]);
    assert!(refused(&doc).starts_with("/signatures: more than"));

    let mut doc = minimal_v1();
    let schemes: Map<String, Value> = (0..=MAX_SECURITY_SCHEMES)
        .map(|i| (format!("s{i}"), json!({"type": "http"})))
        .collect();
    doc["securitySchemes"] = Value::Object(schemes);
    assert!(refused(&doc).starts_with("/securitySchemes: more than"));
}

#[test]
fn text_for_people_is_cut_not_refused() {
    let mut doc = minimal_v1();
    doc["name"] = json!("n".repeat(MAX_NAME_CHARS + 10));
    doc["skills"][0]["description"] = json!("d".repeat(MAX_DESCRIPTION_CHARS + 10));
    doc["x-unknown"] = json!({"ignored": true});
    let card = parse_card(&doc).unwrap();
    assert_eq!(card.name.chars().count(), MAX_NAME_CHARS);
    assert_eq!(
        card.skills[0].description.chars().count(),
        MAX_DESCRIPTION_CHARS
    );
}

#[test]
fn the_descriptor_takes_skills_provider_endpoint_and_auth() {
    let mut doc = legacy_v0();
    doc["skills"].as_array_mut().unwrap().push(
        json!({"id": "Air Quality", "name": "AQ", "description": "Air.",
            "tags": ["weather", "Air  Quality"]}),
    );
    let d = parse_card(&doc)
        .unwrap()
        .to_descriptor("a2a:weather.example.com");
    assert_eq!(d.id, "a2a:weather.example.com");
    assert_eq!(d.name, "Weather");
    assert_eq!(d.description, "Forecasts.");
    assert_eq!(d.version.as_deref(), Some("0.4.1"));
    assert_eq!(d.publisher.as_deref(), Some("Example Weather"));
    assert_eq!(
        d.endpoint.as_deref(),
        Some("https://weather.example.com/a2a")
    );
    assert_eq!(d.capabilities, ["air_quality", "forecast"]);
    assert_eq!(d.tags, ["air_quality", "forecast", "weather"]);
    assert!(d.languages.is_empty());
    assert_eq!(d.status, None);
    assert_eq!(d.auth.as_deref(), Some("apikey"));
    assert_eq!(d.format, DocumentFormat::A2a);

    // No name: the id stands in. No schemes: no auth.
    let mut doc = minimal_v1();
    doc["name"] = json!("  ");
    let d = parse_card(&doc)
        .unwrap()
        .to_descriptor("a2a:echo.example.com");
    assert_eq!(d.name, "a2a:echo.example.com");
    assert_eq!(d.auth, None);
    assert_eq!(d.publisher, None);
}
