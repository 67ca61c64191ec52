use serde_json::{json, Value};

use super::classify::*;
use crate::crawl::CrawlError;
use crate::descriptor::DocumentFormat;
use crate::formats::a2a::RpcVersion;
use crate::store::{LiveState, ProbeProtocol};

const JSON: &str = "application/json";
const SSE: &str = "text/event-stream";
const HTML: &str = "text/html; charset=utf-8";

#[test]
fn each_format_is_probed_in_its_protocol_or_not_at_all() {
    let mcp = json!({"remotes": [{"type": "streamable-http", "url": "https://m.test/mcp"}]});
    let t = target(
        DocumentFormat::McpRegistry,
        Some("https://m.test/mcp"),
        &mcp,
    )
    .unwrap();
    assert_eq!(
        (t.protocol, t.url.as_str()),
        (ProbeProtocol::Mcp, "https://m.test/mcp")
    );
    let sse = json!({"remotes": [{"type": "sse", "url": "https://m.test/sse"}]});
    assert_eq!(
        target(
            DocumentFormat::McpRegistry,
            Some("https://m.test/sse"),
            &sse
        ),
        None
    );
    // A2A: the card's JSON-RPC interface the gateway would call, in its
    // version; a card that does not read, or declares none, is not probed.
    let card = |interfaces: Value| {
        json!({"name": "n", "description": "d", "version": "1", "supportedInterfaces": interfaces,
               "capabilities": {}, "defaultInputModes": [], "defaultOutputModes": [], "skills": []})
    };
    // The card's first JSON-RPC interface of a version spoken, in its
    // order (A2A 1.0 section 8.3.2).
    let both = card(json!([
        {"url": "a.test:443", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
        {"url": "https://a.test/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": "https://a.test/v0", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
    ]));
    let t = target(DocumentFormat::A2a, Some("a.test:443"), &both).unwrap();
    assert_eq!(
        (t.protocol, t.url.as_str()),
        (ProbeProtocol::A2a, "https://a.test/v1")
    );
    assert_eq!(t.a2a.map(|i| i.version), Some(RpcVersion::V1));
    let legacy = json!({"name": "n", "description": "d", "version": "1", "url": "https://a.test/rpc",
        "capabilities": {}, "defaultInputModes": [], "defaultOutputModes": [], "skills": []});
    let t = target(DocumentFormat::A2a, Some("https://a.test/rpc"), &legacy).unwrap();
    assert_eq!(t.a2a.map(|i| i.version), Some(RpcVersion::V0));
    let grpc =
        card(json!([{"url": "a.test:443", "protocolBinding": "GRPC", "protocolVersion": "1.0"}]));
    assert_eq!(target(DocumentFormat::A2a, Some("a.test:443"), &grpc), None);
    assert_eq!(
        target(
            DocumentFormat::A2a,
            Some("https://a.test/rpc"),
            &Value::Null
        ),
        None
    );
    let t = target(
        DocumentFormat::Aidip,
        Some("https://x.test/agent"),
        &json!({}),
    )
    .unwrap();
    assert_eq!((t.protocol, t.health), (ProbeProtocol::Aidip, false));
    for format in [
        DocumentFormat::Adp,
        DocumentFormat::Ard,
        DocumentFormat::DnsAid,
        DocumentFormat::Aid,
    ] {
        assert_eq!(
            target(format, Some("https://x.test/"), &Value::Null),
            None,
            "{format:?}"
        );
    }
    assert_eq!(target(DocumentFormat::Aidip, None, &json!({})), None);
}

#[test]
fn an_aidip_health_url_counts_only_on_the_endpoints_host() {
    let endpoint = "https://x.test:8443/agent";
    let health = |doc: Value| health_url(endpoint, &doc).map(|u| u.to_string());
    assert_eq!(
        health(json!({"health": "/healthz"})),
        Some("https://x.test:8443/healthz".into())
    );
    assert_eq!(
        health(json!({"health_url": "https://X.test:8443/up"})),
        Some("https://x.test:8443/up".into())
    );
    for refused in [
        json!({"health": "https://other.test:8443/up"}),
        json!({"health": "https://x.test/up"}),
        json!({"health": "http://x.test:8443/up"}),
        json!({"health": "//other.test/up"}),
        json!({"health": 3}),
        json!({"health": "not a url"}),
    ] {
        assert_eq!(health(refused.clone()), None, "{refused}");
    }
    let t = target(
        DocumentFormat::Aidip,
        Some(endpoint),
        &json!({"health": "/h"}),
    )
    .unwrap();
    assert!(t.health);
}

#[test]
fn event_streams_are_read_event_by_event() {
    let body = b"event: message\r\nid: 1\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n: comment\n\ndata:2\n\ndata: partial";
    assert_eq!(sse_data(body), vec!["{\"a\":\n1}", "2", "partial"]);
    assert!(sse_data(b"").is_empty());
    assert!(sse_data(b"retry: 10\n\n").is_empty());
}

#[test]
fn a_json_rpc_answer_is_found_by_its_id_in_json_or_an_event() {
    let one = Value::from(1);
    let ok = br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18"}}"#;
    assert!(rpc_response(JSON, ok, &one).is_some());
    assert!(rpc_response("Application/JSON; charset=utf-8", ok, &one).is_some());
    assert!(
        rpc_response(JSON, ok, &Value::from(2)).is_none(),
        "another id"
    );
    assert!(
        rpc_response(HTML, ok, &one).is_none(),
        "not a JSON media type"
    );
    let stream = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
    assert!(rpc_response(SSE, stream, &one).is_some());
    for bad in [
        &br#"{"jsonrpc":"1.0","id":1,"result":{}}"#[..],
        br#"{"jsonrpc":"2.0","id":1}"#,
        br#"{"jsonrpc":"2.0","id":1,"error":{"message":"no code"}}"#,
        br#"{"jsonrpc":"2.0","id":1,"error":{"code":1},"result":{}}"#,
        br#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#,
        b"<html></html>",
        b"",
        &[0xff, 0xfe, b'{'],
    ] {
        assert!(
            rpc_response(JSON, bad, &one).is_none(),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    // Deep nesting is refused by the parser's recursion limit, not a
    // stack overflow.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(rpc_response(JSON, deep.as_bytes(), &one).is_none());
}

#[test]
fn mcp_answers_are_classified() {
    let init =
        br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{}}}"#;
    assert_eq!(mcp_initialize(200, JSON, init), Ok(()));
    let in_stream = [&b"data: "[..], init, b"\n\n"].concat();
    assert_eq!(mcp_initialize(200, SSE, &in_stream), Ok(()));
    assert_eq!(mcp_initialize(401, JSON, b""), Err(LiveState::AuthRequired));
    assert_eq!(
        mcp_initialize(403, HTML, b"<html>"),
        Err(LiveState::AuthRequired)
    );
    assert_eq!(
        mcp_initialize(200, HTML, b"<html>welcome</html>"),
        Err(LiveState::NotProtocol)
    );
    assert_eq!(mcp_initialize(404, JSON, init), Err(LiveState::NotProtocol));
    assert_eq!(
        mcp_initialize(500, JSON, b"{}"),
        Err(LiveState::NotProtocol)
    );
    let no_version = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
    assert_eq!(
        mcp_initialize(200, JSON, no_version),
        Err(LiveState::NotProtocol)
    );
    let refused = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#;
    assert_eq!(
        mcp_initialize(200, JSON, refused),
        Err(LiveState::NotProtocol)
    );

    let tools = br#"{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}"#;
    assert_eq!(mcp_tools_list(200, JSON, tools), LiveState::Alive);
    let no_tools = br#"{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no tools"}}"#;
    assert_eq!(mcp_tools_list(200, JSON, no_tools), LiveState::Alive);
    assert_eq!(mcp_tools_list(403, JSON, b""), LiveState::AuthRequired);
    assert_eq!(
        mcp_tools_list(200, JSON, br#"{"tools":[]}"#),
        LiveState::NotProtocol
    );
    assert_eq!(mcp_tools_list(400, JSON, tools), LiveState::NotProtocol);
}

#[test]
fn a2a_answers_are_classified() {
    let id = json!("probe-1");
    let not_found =
        br#"{"jsonrpc":"2.0","id":"probe-1","error":{"code":-32001,"message":"Task not found"}}"#;
    assert_eq!(a2a_tasks_get(200, JSON, not_found, &id), LiveState::Alive);
    let task = br#"{"jsonrpc":"2.0","id":"probe-1","result":{"kind":"task"}}"#;
    assert_eq!(a2a_tasks_get(200, JSON, task, &id), LiveState::Alive);
    let no_method = br#"{"jsonrpc":"2.0","id":"probe-1","error":{"code":-32601,"message":"?"}}"#;
    assert_eq!(
        a2a_tasks_get(200, JSON, no_method, &id),
        LiveState::NotProtocol
    );
    assert_eq!(
        a2a_tasks_get(200, HTML, b"<html></html>", &id),
        LiveState::NotProtocol
    );
    assert_eq!(
        a2a_tasks_get(404, JSON, not_found, &id),
        LiveState::NotProtocol
    );
    assert_eq!(
        a2a_tasks_get(200, JSON, br#"{"ok":true}"#, &id),
        LiveState::NotProtocol
    );
    assert_eq!(a2a_tasks_get(401, JSON, b"", &id), LiveState::AuthRequired);
    let other_id = br#"{"jsonrpc":"2.0","id":"x","error":{"code":-32001,"message":"?"}}"#;
    assert_eq!(
        a2a_tasks_get(200, JSON, other_id, &id),
        LiveState::NotProtocol
    );
}

#[test]
fn any_http_answer_of_an_aidip_endpoint_is_alive_but_auth() {
    for status in [200, 204, 301, 404, 405, 500, 503] {
        assert_eq!(aidip(status), LiveState::Alive, "{status}");
    }
    assert_eq!(aidip(401), LiveState::AuthRequired);
    assert_eq!(aidip(403), LiveState::AuthRequired);
}

#[test]
fn failures_are_unreachable_or_timeout_or_not_asked() {
    let url = "https://x.test/".to_owned();
    let connect = CrawlError::Connect {
        url: url.clone(),
        message: "refused".into(),
    };
    assert_eq!(failure(&connect), Some(LiveState::Unreachable));
    let tls = CrawlError::Tls {
        url: url.clone(),
        message: "bad certificate".into(),
    };
    assert_eq!(failure(&tls), Some(LiveState::Unreachable));
    let timeout = CrawlError::Timeout {
        stage: "probe",
        after: std::time::Duration::from_secs(1),
    };
    assert_eq!(failure(&timeout), Some(LiveState::Timeout));
    assert_eq!(failure(&CrawlError::InsecureUrl { url: url.clone() }), None);
    let port = CrawlError::PortNotAllowed { url, port: 22 };
    assert_eq!(failure(&port), None);
}

#[test]
fn an_agent_found_down_again_and_again_is_asked_less_and_less_often() {
    use super::{backoff, MAX_BACKOFF};
    use crate::store::{FreshState, Freshness, Liveness};
    let hour = std::time::Duration::from_secs(3600);
    let found = |state: LiveState, waited: u64| Freshness {
        state: FreshState::Fresh,
        checked_at: 1_000,
        seen_at: None,
        endpoint_ok: Some(state.is_up()),
        next_check_at: 1_000 + waited,
        liveness: Some(Liveness {
            state,
            checked_at: 1_000,
            rtt_ms: 5,
            protocol: ProbeProtocol::Aidip,
        }),
    };
    // First probe, or an answer: the interval.
    assert_eq!(backoff(hour, None, false), 3600);
    assert_eq!(
        backoff(hour, Some(&found(LiveState::Alive, 3600)), false),
        3600
    );
    assert_eq!(
        backoff(hour, Some(&found(LiveState::Timeout, 7200)), true),
        3600
    );
    // Down after down: twice the wait before, up to the bound.
    let down = found(LiveState::Unreachable, 3600);
    assert_eq!(backoff(hour, Some(&down), false), 7200);
    let long = found(LiveState::NotProtocol, 4 * 3600);
    assert_eq!(backoff(hour, Some(&long), false), 8 * 3600);
    let longest = found(LiveState::Timeout, MAX_BACKOFF * 3600);
    assert_eq!(backoff(hour, Some(&longest), false), MAX_BACKOFF * 3600);
}
