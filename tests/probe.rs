//! The liveness probe (`crawl.probe_registered`, docs/protocol.md#probe)
//! against the testbed's invokable agents on loopback, over TLS with the
//! test CA: each class produced by a server behaving that way (an MCP
//! server, one answering HTML, one wanting a credential; an A2A agent
//! and an HTML site claiming to be one; AIDIP agents answering, failing,
//! wanting a credential, hanging; a closed port), the MCP conversation
//! as the server saw it, and the `alive_within` filter of
//! `POST /agents/search` and `POST /resolve` on a node that probes.

use std::sync::Arc;
use std::time::Duration;

use agentmesh::config::Config;
use agentmesh::crawl::polite::Politeness;
use agentmesh::crawl::probe::Prober;
use agentmesh::crawl::scheduler::{Clock, ManualClock};
use agentmesh::crawl::{AllowedPorts, Crawler, CrawlerOptions};
use agentmesh::descriptor::{Descriptor, DocumentFormat};
use agentmesh::issuer::{DescriptorIssue, Durability, Issuer};
use agentmesh::net::AddressPolicy;
use agentmesh::node::Node;
use agentmesh::store::{Expect, LiveState, Origin, ProbeProtocol, Store};
use agentmesh::testbed::agents::{A2aMode, AidipMode, McpMode};
use serde_json::{json, Value};

use crate::common::{agentmesh, run, test_agents as agents, wait_until, Api, TestAgents as Agents};

/// A port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A registration of `format` with `document`, as `POST /agents` or
/// `agentmesh import` makes one.
async fn register(issuer: &Issuer, id: &str, format: DocumentFormat, endpoint: &str, doc: Value) {
    let descriptor = Descriptor {
        id: id.into(),
        name: id.into(),
        description: "an agent to probe".into(),
        version: None,
        publisher: None,
        endpoint: Some(endpoint.into()),
        capabilities: vec!["echo".into()],
        tags: Vec::new(),
        languages: Vec::new(),
        status: None,
        auth: None,
        format,
    };
    issuer
        .descriptor(DescriptorIssue {
            descriptor,
            document: doc.to_string(),
            evidence: agentmesh::trust::Evidence::default(),
            origin: Origin::Local,
            expect: Expect::LocalOrAbsent,
            durability: Durability::Flushed,
        })
        .await
        .unwrap();
}

/// An MCP registry's `server.json` whose first remote is `kind` at `url`.
fn server_json(url: &str, kind: &str) -> Value {
    json!({"name": "io.test/echo", "description": "echo", "version": "1.0.0",
           "remotes": [{"type": kind, "url": url}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_class_comes_from_a_server_behaving_that_way() {
    let a = agents().await;
    let base = a.agents.base_url();
    let (port, closed) = (a.agents.addr().port(), closed_port());
    let store = Store::open(&a.dir.path().join("store"), 16 << 20).unwrap();
    let key = Arc::new(agentmesh::identity::generate());
    let issuer = Issuer::new(store.clone(), key.clone(), Duration::from_secs(3600));
    let aidip = |mode: AidipMode| format!("{base}/aidip/{}", mode.as_str());
    let cases: Vec<(&str, DocumentFormat, String, Value, Option<LiveState>)> = vec![
        (
            "aidip-ok",
            DocumentFormat::Aidip,
            aidip(AidipMode::Ok),
            json!({}),
            Some(LiveState::Alive),
        ),
        (
            "aidip-500",
            DocumentFormat::Aidip,
            aidip(AidipMode::Status(500)),
            json!({}),
            Some(LiveState::Alive),
        ),
        (
            "aidip-auth",
            DocumentFormat::Aidip,
            aidip(AidipMode::Auth),
            json!({}),
            Some(LiveState::AuthRequired),
        ),
        (
            "aidip-hang",
            DocumentFormat::Aidip,
            aidip(AidipMode::Hang),
            json!({}),
            Some(LiveState::Timeout),
        ),
        // The declared health URL is asked, not the hanging endpoint.
        (
            "aidip-health",
            DocumentFormat::Aidip,
            aidip(AidipMode::Hang),
            json!({"health": "/aidip/ok"}),
            Some(LiveState::Alive),
        ),
        (
            "aidip-closed",
            DocumentFormat::Aidip,
            format!("https://127.0.0.1:{closed}/agent"),
            json!({}),
            Some(LiveState::Unreachable),
        ),
        (
            "mcp-ok",
            DocumentFormat::McpRegistry,
            a.agents.mcp_url(McpMode::Ok),
            server_json(&a.agents.mcp_url(McpMode::Ok), "streamable-http"),
            Some(LiveState::Alive),
        ),
        (
            "mcp-html",
            DocumentFormat::McpRegistry,
            a.agents.mcp_url(McpMode::NotMcp),
            server_json(&a.agents.mcp_url(McpMode::NotMcp), "streamable-http"),
            Some(LiveState::NotProtocol),
        ),
        (
            "mcp-auth",
            DocumentFormat::McpRegistry,
            a.agents.mcp_url(McpMode::Auth),
            server_json(&a.agents.mcp_url(McpMode::Auth), "streamable-http"),
            Some(LiveState::AuthRequired),
        ),
        (
            "mcp-404",
            DocumentFormat::McpRegistry,
            format!("{base}/nothing-here"),
            server_json(&format!("{base}/nothing-here"), "streamable-http"),
            Some(LiveState::NotProtocol),
        ),
        // Only a streamable-http first remote is spoken to.
        (
            "mcp-sse",
            DocumentFormat::McpRegistry,
            format!("{base}/sse"),
            server_json(&format!("{base}/sse"), "sse"),
            None,
        ),
        (
            "a2a-ok",
            DocumentFormat::A2a,
            format!("{base}/a2a/ok"),
            a.agents.a2a_card(A2aMode::Ok),
            Some(LiveState::Alive),
        ),
        (
            "a2a-v1",
            DocumentFormat::A2a,
            format!("{base}/a2a/v1"),
            a.agents.a2a_card(A2aMode::V1),
            Some(LiveState::Alive),
        ),
        (
            "a2a-html",
            DocumentFormat::A2a,
            format!("{base}/a2a/not-a2a"),
            a.agents.a2a_card(A2aMode::NotA2a),
            Some(LiveState::NotProtocol),
        ),
    ];
    for (id, format, endpoint, doc, _) in &cases {
        register(&issuer, id, *format, endpoint, doc.clone()).await;
    }
    let options = CrawlerOptions {
        ca_files: vec![a.ca_file.clone()],
        policy: AddressPolicy {
            allow_private: true,
        },
        fetch_timeout: Duration::from_secs(3),
        politeness: Politeness {
            per_host_concurrency: 2,
            per_host_interval: Duration::from_millis(1),
            per_host_burst: 1,
            per_address_concurrency: 64,
            per_address_interval: Duration::ZERO,
            per_address_burst: 1,
        },
        allowed_ports: AllowedPorts::new([port, closed]),
        ..CrawlerOptions::default()
    };
    let crawler = Crawler::new(options, key.clone(), "verifier".into()).unwrap();
    let clock = Arc::new(ManualClock::new(agentmesh::record::unix_now()));
    let hour = Duration::from_secs(3600);
    let probe_timeout = Duration::from_millis(1500);
    let prober =
        Prober::new(crawler, store.clone(), clock.clone(), hour, 100).with_timeout(probe_timeout);
    let round = prober.round().await.unwrap();
    assert_eq!((round.probed, round.skipped), (13, 1), "{round:?}");
    assert_eq!(round.answered, 8, "alive or auth_required: {round:?}");
    assert_eq!(round.count(LiveState::Alive), 6, "{round:?}");
    assert_eq!(round.count(LiveState::Timeout), 1, "{round:?}");
    for (id, format, _, _, expected) in &cases {
        let freshness = store.freshness(id).await.unwrap();
        let Some(expected) = expected else {
            assert_eq!(freshness, None, "{id} is not probed");
            continue;
        };
        let l = freshness
            .as_ref()
            .and_then(|f| f.liveness)
            .unwrap_or_else(|| panic!("{id} has no liveness: {freshness:?}"));
        assert_eq!(l.state, *expected, "{id}: {l:?}");
        assert_eq!(l.checked_at, clock.now(), "{id}");
        let protocol = match format {
            DocumentFormat::McpRegistry => ProbeProtocol::Mcp,
            DocumentFormat::A2a => ProbeProtocol::A2a,
            _ => ProbeProtocol::Aidip,
        };
        assert_eq!(l.protocol, protocol, "{id}");
        let f = freshness.unwrap();
        assert_eq!(f.endpoint_ok, Some(expected.is_up()), "{id}");
        if *expected == LiveState::Timeout {
            assert!(l.rtt_ms >= 1400, "{id} gave up at the probe timeout: {l:?}");
        }
    }

    // The MCP conversation, as the server saw it.
    let seen = a.agents.seen();
    let mcp: Vec<_> = seen.iter().filter(|r| r.path == "/mcp/ok").collect();
    let methods: Vec<String> = mcp
        .iter()
        .map(|r| {
            let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
            format!("{} {}", r.method, body["method"].as_str().unwrap_or(""))
        })
        .collect();
    assert_eq!(
        methods,
        [
            "POST initialize",
            "POST notifications/initialized",
            "POST tools/list",
            "DELETE "
        ]
    );
    assert_eq!(mcp[0].header("mcp-session-id"), None);
    let session = mcp[1]
        .header("mcp-session-id")
        .expect("the session sent back");
    for r in &mcp[1..] {
        assert_eq!(r.header("mcp-session-id"), Some(session));
        assert_eq!(r.header("mcp-protocol-version"), Some("2025-06-18"));
    }
    assert_eq!(
        mcp[0].header("accept"),
        Some("application/json, text/event-stream")
    );
    // A2A: one tasks/get, nothing sent that would make a task.
    let a2a: Vec<_> = seen.iter().filter(|r| r.path == "/a2a/ok").collect();
    assert_eq!(a2a.len(), 1);
    let body: Value = serde_json::from_slice(&a2a[0].body).unwrap();
    assert_eq!(body["method"], "tasks/get");
    assert_eq!(a2a[0].header("a2a-version"), None);
    // A 1.0 card: GetTask, in 1.0.
    let v1: Vec<_> = seen.iter().filter(|r| r.path == "/a2a/v1").collect();
    assert_eq!(v1.len(), 1);
    let body: Value = serde_json::from_slice(&v1[0].body).unwrap();
    assert_eq!(body["method"], "GetTask");
    assert_eq!(v1[0].header("a2a-version"), Some("1.0"));
    // AIDIP: a HEAD of the endpoint, a GET of a declared health URL;
    // no operation called.
    assert!(seen
        .iter()
        .filter(|r| r.path.starts_with("/aidip/"))
        .all(|r| r.method == "HEAD" || (r.method == "GET" && r.path == "/aidip/ok")));
    assert!(seen
        .iter()
        .any(|r| r.method == "GET" && r.path == "/aidip/ok"));

    // Not again before the interval.
    let again = prober.round().await.unwrap();
    assert_eq!((again.probed, again.skipped), (0, 1));
}

/// A node that probes the agents (their address and port allowed, their
/// CA trusted), on `data`.
async fn probing_node(a: &Agents, data: std::path::PathBuf) -> Node {
    let mut config = Config {
        data_dir: data,
        ..Config::default()
    };
    config.api.listen = "127.0.0.1:0".parse().unwrap();
    config.api.limits.enabled = false;
    config.p2p.listen = vec!["/ip4/127.0.0.1/tcp/0".into()];
    config.crawl.allow_private_addresses = true;
    config.crawl.allowed_ports = vec![a.agents.addr().port()];
    config.crawl.ca_files = vec![a.ca_file.clone()];
    config.crawl.probe_registered = true;
    config.crawl.probe_timeout = Duration::from_secs(1);
    config.crawl.per_host_interval = Duration::from_millis(1);
    config.crawl.per_address_interval = Duration::ZERO;
    Node::spawn(config).await.expect("the node starts")
}

fn ids(results: &Value) -> Vec<String> {
    let mut ids: Vec<String> = results
        .as_array()
        .expect("an array of results")
        .iter()
        .filter_map(|s| s["id"].as_str().map(str::to_owned))
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alive_within_keeps_only_agents_the_probe_found_alive() {
    let a = agents().await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // An MCP server imported from a registry list: a local registration.
    let list = dir.path().join("servers.json");
    let url = a.agents.mcp_url(McpMode::Ok);
    let server = json!([{"name": "io.test/echo", "description": "Echoes text.", "version": "1.0.0",
                          "remotes": [{"type": "streamable-http", "url": url}]}]);
    std::fs::write(&list, server.to_string()).unwrap();
    let imported = run(
        agentmesh()
            .arg("import")
            .arg(&list)
            .arg("--format")
            .arg("mcp-registry")
            .arg("--data-dir")
            .arg(&data),
        Duration::from_secs(60),
        "agentmesh import --format mcp-registry",
    );
    assert!(imported.status.success(), "{}", imported.stderr);
    let node = probing_node(&a, data).await;
    let api = Api::new(format!("http://{}", node.api_addr()));
    for (id, mode) in [
        ("echo-ok", AidipMode::Ok),
        ("echo-auth", AidipMode::Auth),
        ("echo-hang", AidipMode::Hang),
    ] {
        let doc = a.agents.aidip_document(id, mode, "none");
        api.post("/agents", &doc).await.expect(201);
    }
    let all = ["echo-auth", "echo-hang", "echo-ok", "mcp:io.test/echo"];
    for id in all {
        let path = format!("/agents/{}/summary", id.replace('/', "%2F"));
        wait_until(&format!("{id} was probed"), || async {
            api.get(&path).await.body["liveness"].is_object()
        })
        .await;
    }
    let summary = api.get("/agents/mcp:io.test%2Fecho/summary").await;
    let liveness = &summary.expect(200)["liveness"];
    assert_eq!(liveness["state"], "alive", "{}", summary.text);
    assert_eq!(liveness["protocol"], "mcp");
    assert!(liveness["checked_at"].as_u64().is_some() && liveness["rtt_ms"].as_u64().is_some());
    assert!(
        summary.body["freshness"].get("liveness").is_none(),
        "shown once, beside freshness"
    );
    let hang = api.get("/agents/echo-hang/summary").await;
    assert_eq!(hang.body["liveness"]["state"], "timeout");

    // Search: filters only, text, and a bad value.
    let search = |body: Value| {
        let api = &api;
        async move { api.post("/agents/search", &body).await }
    };
    let everything = search(json!({"scope": "local", "top": 50})).await;
    assert_eq!(ids(everything.expect(200)), all);
    let alive = search(json!({"scope": "local", "filters": {"alive_within": 600}})).await;
    assert_eq!(ids(alive.expect(200)), ["echo-ok", "mcp:io.test/echo"]);
    let text =
        search(json!({"scope": "local", "query": "echo text", "filters": {"alive_within": 600}}))
            .await;
    assert_eq!(ids(text.expect(200)), ["echo-ok", "mcp:io.test/echo"]);
    search(json!({"filters": {"alive_within": 0}}))
        .await
        .expect_field_problem("/filters/alive_within");

    // Resolve: the policy term, its reason, a bad value.
    let resolved = api
        .post(
            "/resolve",
            &json!({"intent": "echo some text", "policy": {"alive_within": 600}, "top": 10}),
        )
        .await;
    let body = resolved.expect(200);
    let candidates = body["candidates"].as_array().unwrap();
    assert!(!candidates.is_empty(), "{body}");
    for c in candidates {
        assert!(
            ["echo-ok", "mcp:io.test/echo"].contains(&c["id"].as_str().unwrap()),
            "{c}"
        );
        assert!(
            c["reasons"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["code"] == "policy_alive"),
            "{c}"
        );
    }
    api.post(
        "/resolve",
        &json!({"intent": "echo", "policy": {"alive_within": -1}}),
    )
    .await
    .expect_field_problem("/policy/alive_within");
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_run_at_once_but_waiting_for_a_busy_host_is_not_a_timeout() {
    let a = agents().await;
    let base = a.agents.base_url();
    let store = Store::open(&a.dir.path().join("store"), 16 << 20).unwrap();
    let key = Arc::new(agentmesh::identity::generate());
    let issuer = Issuer::new(store.clone(), key.clone(), Duration::from_secs(3600));
    // Ids in the order a round reads them: the hanging agents first, so
    // the working ones wait for the host behind them.
    let mut cases = Vec::new();
    for i in 0..4 {
        cases.push((format!("a-hang-{i}"), AidipMode::Hang, LiveState::Timeout));
    }
    for i in 0..4 {
        cases.push((format!("b-ok-{i}"), AidipMode::Slow, LiveState::Alive));
    }
    for (id, mode, _) in &cases {
        // A slow agent answers its health check after 300 ms.
        let doc = match mode {
            AidipMode::Slow => json!({"health": "/aidip/slow?ms=300"}),
            _ => json!({}),
        };
        let endpoint = format!("{base}/aidip/{}", mode.as_str());
        register(&issuer, id, DocumentFormat::Aidip, &endpoint, doc).await;
    }
    let options = CrawlerOptions {
        ca_files: vec![a.ca_file.clone()],
        policy: AddressPolicy {
            allow_private: true,
        },
        politeness: Politeness {
            per_host_concurrency: 2,
            per_host_interval: Duration::from_millis(1),
            per_host_burst: 1,
            per_address_concurrency: 64,
            per_address_interval: Duration::ZERO,
            per_address_burst: 1,
        },
        allowed_ports: AllowedPorts::new([a.agents.addr().port()]),
        ..CrawlerOptions::default()
    };
    let crawler = Crawler::new(options, key, "verifier".into()).unwrap();
    let clock = Arc::new(ManualClock::new(agentmesh::record::unix_now()));
    let prober = Prober::new(
        crawler,
        store.clone(),
        clock,
        Duration::from_secs(3600),
        100,
    )
    .with_timeout(Duration::from_secs(1))
    .with_concurrency(16);
    let round = prober.round().await.unwrap();
    assert_eq!(round.probed, 8, "{round:?}");
    for (id, _, expected) in &cases {
        let l = store.freshness(id).await.unwrap().and_then(|f| f.liveness);
        assert_eq!(l.map(|l| l.state), Some(*expected), "{id}: {l:?}");
    }
    // Probes ran side by side, never more to one host than its limit.
    assert_eq!(a.agents.max_in_flight(), 2);
}
