//! The invocation gateway against real agents on loopback
//! (docs/protocol.md#gateway): the testbed's AIDIP agent, over TLS with
//! the test CA, behaving as asked (slow, failing, malformed, huge, the
//! wrong shape, wanting credentials). Every row of the outcome mapping,
//! the schema check before anything is sent, the client's credentials
//! passed to the agent and nowhere else, the node's own credentials, the
//! address policy, the concurrency limit, the audit entry and the CLI.

use std::collections::HashMap;
use std::time::Duration;

use agentmesh::config::{Config, GatewayCredential};
use agentmesh::node::Node;
use agentmesh::testbed::agents::{A2aMode, AidipMode, McpMode};
use serde_json::{json, Value};

use crate::common::{
    agentmesh, run, test_agents as agents, wait_until, Api, Reply, TestAgents as Agents, TestNode,
};

/// A node that may call the agents (their loopback address and port
/// allowed, their CA trusted), its rate limits off; `tweak` changes the
/// rest.
async fn node(a: &Agents, tweak: impl FnOnce(&mut Config)) -> (Node, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config {
        data_dir: dir.path().join("data"),
        ..Config::default()
    };
    config.api.listen = "127.0.0.1:0".parse().unwrap();
    config.api.limits.enabled = false;
    config.p2p.listen = vec!["/ip4/127.0.0.1/tcp/0".into()];
    config.crawl.allow_private_addresses = true;
    config.crawl.allowed_ports = vec![a.agents.addr().port()];
    config.crawl.ca_files = vec![a.ca_file.clone()];
    config.gateway.timeout = Duration::from_secs(2);
    tweak(&mut config);
    (Node::spawn(config).await.expect("the node starts"), dir)
}

fn api(n: &Node) -> Api {
    Api::new(format!("http://{}", n.api_addr()))
}

async fn invoke(api: &Api, id: &str, body: &Value) -> Reply {
    // An id is one path segment (an MCP server's holds a `/`).
    let id = id.replace('/', "%2F");
    api.post(&format!("/agents/{id}/invoke"), body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_of_an_agent_maps_to_its_outcome_and_no_failure_is_a_2xx() {
    let a = agents().await;
    let (node, _dir) = node(&a, |_| {}).await;
    let api = api(&node);
    // (mode, status, error code or None for a result, Retry-After)
    let rows: Vec<(AidipMode, u16, Option<&str>, Option<&str>)> = vec![
        (AidipMode::Ok, 200, None, None),
        (AidipMode::WrongShape, 200, None, None),
        (AidipMode::Status(404), 404, Some("AgentError"), None),
        (AidipMode::Status(422), 422, Some("AgentError"), None),
        (AidipMode::Status(429), 503, Some("Unavailable"), Some("7")),
        (AidipMode::Status(503), 503, Some("Unavailable"), Some("7")),
        (AidipMode::Status(500), 502, Some("Upstream"), None),
        (AidipMode::Malformed, 502, Some("Upstream"), None),
        (AidipMode::Huge, 502, Some("Upstream"), None),
        (AidipMode::Slow, 504, Some("Upstream"), None),
        (AidipMode::Hang, 504, Some("Upstream"), None),
        (AidipMode::Auth, 401, Some("AgentError"), None),
    ];
    for (i, (mode, status, code, retry_after)) in rows.iter().enumerate() {
        let id = format!("agent-{i}");
        let doc = a.agents.aidip_document(&id, *mode, "none");
        api.post("/agents", &doc).await.expect(201);
        let r = invoke(
            &api,
            &id,
            &json!({"operation": "echo", "input": {"text": "hi", "times": 2}}),
        )
        .await;
        let what = format!("{mode:?}: {} {}", r.status, r.text);
        assert_eq!(r.status, *status, "{what}");
        match code {
            None => {
                assert_eq!(r.header("x-agentmesh-operation"), Some("echo"), "{what}");
                if *mode == AidipMode::Ok {
                    assert_eq!(r.body, json!({"echo": "hi hi"}), "{what}");
                    assert!(r.header("x-agentmesh-output-invalid").is_none());
                } else {
                    assert!(
                        r.header("x-agentmesh-output-invalid").is_some(),
                        "the answer that breaks the output schema is flagged: {what}"
                    );
                }
            }
            Some(code) => {
                r.expect_error(*status, code);
            }
        }
        assert_eq!(r.header("retry-after"), *retry_after, "{what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_input_is_checked_against_the_schema_before_anything_is_sent() {
    let a = agents().await;
    let (node, _dir) = node(&a, |_| {}).await;
    let api = api(&node);
    let doc = a.agents.aidip_document("checked", AidipMode::Ok, "none");
    api.post("/agents", &doc).await.expect(201);
    let before = a.agents.seen().len();
    let r = invoke(
        &api,
        "checked",
        &json!({"operation": "echo", "input": {"times": 9}}),
    )
    .await;
    r.expect_field_problem("/input");
    r.expect_field_problem("/input/times");
    let r = invoke(
        &api,
        "checked",
        &json!({"operation": "translate", "input": {}}),
    )
    .await;
    let problem = r.expect_field_problem("/operation");
    assert_eq!(problem["known"], json!(["echo", "count"]));
    invoke(&api, "checked", &json!({"input": {"text": "x"}}))
        .await
        .expect_field_problem("/operation");
    invoke(&api, "nobody", &json!({"input": {}}))
        .await
        .expect_error(404, "NotFound");
    assert_eq!(a.agents.seen().len(), before, "nothing reached the agent");
    // The sub-resource form: the body is the input.
    let r = api
        .post(
            "/agents/checked/operations/count",
            &json!({"items": [1, 2, 3]}),
        )
        .await;
    assert_eq!(r.expect(200), &json!({"count": 3}));
    let last = a.agents.seen().pop().unwrap();
    assert!(last.path.ends_with("/count"), "{}", last.path);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_reach_the_agent_and_nothing_else_and_the_node_s_own_are_used_otherwise() {
    let a = agents().await;
    let secret_dir = tempfile::tempdir().unwrap();
    let held = secret_dir.path().join("held.secret");
    std::fs::write(&held, "Bearer agent-secret\n").unwrap();
    let (node, dir) = node(&a, |c| {
        c.api.admin_token = Some("the-node-credential-of-the-gateway-test".to_owned().into());
        c.gateway.credentials = vec![GatewayCredential {
            agent: "operator-paid".into(),
            header: Some("authorization".into()),
            value_file: Some(held.clone()),
            cert_file: None,
            key_file: None,
        }];
    })
    .await;
    let admin = api(&node).with_token("the-node-credential-of-the-gateway-test");
    for id in ["client-paid", "operator-paid"] {
        let doc = a
            .agents
            .aidip_document(id, AidipMode::Auth, "oauth2_bearer");
        admin.post("/agents", &doc).await.expect(201);
    }
    let input = json!({"operation": "echo", "input": {"text": "private words"}});
    // Without credentials for it, the agent refuses: passed on.
    invoke(&admin, "client-paid", &input)
        .await
        .expect_error(401, "AgentError");
    // The client's own credentials for the agent.
    let r = admin
        .send(
            "invoke with Agent-Authorization".into(),
            admin
                .request(reqwest::Method::POST, "/agents/client-paid/invoke")
                .header("agent-authorization", "Bearer agent-secret")
                .json(&input),
        )
        .await;
    assert_eq!(r.expect(200), &json!({"echo": "private words"}));
    let seen = a.agents.seen().pop().unwrap();
    let headers: HashMap<_, _> = seen.headers.iter().cloned().collect();
    assert_eq!(headers["authorization"], "Bearer agent-secret");
    assert!(
        !seen
            .headers
            .iter()
            .any(|(_, v)| v.contains("the-node-credential")),
        "the node's credential never reaches the agent: {:?}",
        seen.headers
    );
    // The node's own credential for the agent the operator configured.
    invoke(&admin, "operator-paid", &input).await.expect(200);
    // Neither the credential nor the payload is kept by the node.
    node.shutdown().await.unwrap();
    for entry in walk(dir.path()) {
        let bytes = std::fs::read(&entry).unwrap();
        for needle in [&b"agent-secret"[..], b"private words"] {
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle),
                "{} holds {:?}",
                entry.display(),
                String::from_utf8_lossy(needle)
            );
        }
    }
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_keeps_to_the_address_policy_and_its_limits() {
    let a = agents().await;
    // A node that may not connect to private addresses.
    let (strict, _d1) = node(&a, |c| c.crawl.allow_private_addresses = false).await;
    let api_strict = api(&strict);
    let doc = a.agents.aidip_document("near", AidipMode::Ok, "none");
    api_strict.post("/agents", &doc).await.expect(201);
    let before = a.agents.seen().len();
    let r = invoke(
        &api_strict,
        "near",
        &json!({"operation": "echo", "input": {"text": "x"}}),
    )
    .await;
    assert_eq!(
        r.expect_error(502, "Upstream")["details"]["reason"],
        "endpoint_refused"
    );
    // Plain HTTP is refused too, whatever the address.
    let mut plain = a.agents.aidip_document("plain", AidipMode::Ok, "none");
    plain["endpoint"] = json!(plain["endpoint"]
        .as_str()
        .unwrap()
        .replacen("https://", "http://", 1));
    api_strict.post("/agents", &plain).await.expect(201);
    let r = invoke(
        &api_strict,
        "plain",
        &json!({"operation": "echo", "input": {"text": "x"}}),
    )
    .await;
    assert_eq!(
        r.expect_error(502, "Upstream")["details"]["reason"],
        "endpoint_refused"
    );
    assert_eq!(a.agents.seen().len(), before, "nothing was sent");

    // One call at a time per agent: a second while the first is in
    // flight is told to come back.
    let (node, _d2) = node(&a, |c| {
        c.gateway.max_concurrent_per_agent = 1;
        c.gateway.timeout = Duration::from_secs(20);
    })
    .await;
    let api = api(&node);
    let doc = a.agents.aidip_document("busy", AidipMode::Slow, "none");
    api.post("/agents", &doc).await.expect(201);
    let seen_before = a.agents.seen().len();
    let first = {
        let api = api.clone();
        tokio::spawn(async move {
            invoke(
                &api,
                "busy",
                &json!({"operation": "echo", "input": {"text": "1"}}),
            )
            .await
        })
    };
    wait_until("the first call reached the agent", || async {
        a.agents.seen().len() > seen_before
    })
    .await;
    let second = invoke(
        &api,
        "busy",
        &json!({"operation": "echo", "input": {"text": "2"}}),
    )
    .await;
    second.expect_error(503, "Unavailable");
    assert_eq!(second.header("retry-after"), Some("1"));
    first.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_call_leaves_an_audit_entry_without_its_payload_and_the_cli_invokes() {
    let a = agents().await;
    let node = tokio::task::block_in_place(|| {
        TestNode::builder()
            .calling(&[a.agents.addr().port()], &a.ca_file)
            .start()
    });
    let api = node.api();
    let doc = a.agents.aidip_document("audited", AidipMode::Ok, "none");
    api.post("/agents", &doc).await.expect(201);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.json");
    std::fs::write(&input, r#"{"text": "secret payload"}"#).unwrap();
    let done = tokio::task::block_in_place(|| {
        run(
            agentmesh()
                .args(["invoke", "audited", "--operation", "echo", "--input"])
                .arg(&input)
                .args(["--api", &node.base_url()]),
            Duration::from_secs(60),
            "agentmesh invoke",
        )
    });
    done.assert_success("agentmesh invoke");
    let answer: Value = serde_json::from_str(done.stdout.trim()).unwrap();
    assert_eq!(answer, json!({"echo": "secret payload"}));
    let page = api.get("/admin/audit?last=5").await;
    let entries = page.expect(200)["entries"].as_array().unwrap().clone();
    let call = entries
        .iter()
        .find(|e| e["action"] == "invoke")
        .unwrap_or_else(|| panic!("no invoke entry in {entries:?}"));
    assert_eq!(call["target"], "audited#echo");
    assert_eq!(call["outcome"], "ok");
    assert!(call["duration_ms"].is_u64(), "{call}");
    assert!(!page.text.contains("secret payload"), "{}", page.text);
    assert!(
        !node.stderr().contains("secret payload"),
        "the payload is not logged:\n{}",
        node.stderr()
    );
    // A refusal by the CLI: exit 1 with the error object.
    let refused = tokio::task::block_in_place(|| {
        run(
            agentmesh()
                .args(["invoke", "audited", "--operation", "nope", "--input"])
                .arg(&input)
                .args(["--api", &node.base_url()]),
            Duration::from_secs(60),
            "agentmesh invoke",
        )
    });
    assert_eq!(refused.status.code(), Some(1), "{}", refused.stderr);
    assert!(refused.stderr.contains("/operation"), "{}", refused.stderr);
}

/// An MCP Registry `server.json` whose remote is the testbed's MCP
/// server in `mode`.
fn mcp_server(a: &Agents, name: &str, mode: McpMode) -> Value {
    json!({
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": name,
        "description": "An MCP server of the gateway test.",
        "version": "1.0.0",
        "remotes": [{"type": "streamable-http", "url": a.agents.mcp_url(mode)}],
    })
}

/// The JSON-RPC method of a request to the testbed's MCP server, or its
/// HTTP method when it is not a `POST` (the session's `DELETE`).
fn method_of(s: &agentmesh::testbed::agents::SeenRequest) -> String {
    if s.method != "POST" {
        return s.method.clone();
    }
    serde_json::from_slice::<Value>(&s.body).unwrap()["method"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_server_s_tool_is_called_through_the_node_as_an_mcp_client_would() {
    let a = agents().await;
    let dir = tempfile::tempdir().unwrap();
    let servers = dir.path().join("servers.ndjson");
    let lines: Vec<String> = [
        ("io.example/ok", McpMode::Ok),
        ("io.example/tool-error", McpMode::ToolError),
        ("io.example/not-mcp", McpMode::NotMcp),
        ("io.example/auth", McpMode::Auth),
        ("io.example/hang", McpMode::Hang),
    ]
    .iter()
    .map(|(name, mode)| mcp_server(&a, name, *mode).to_string())
    .collect();
    std::fs::write(&servers, lines.join("\n") + "\n").unwrap();
    let data = tempfile::tempdir().unwrap();
    let imported = tokio::task::block_in_place(|| {
        run(
            agentmesh()
                .args(["import", "--format", "mcp-registry", "--data-dir"])
                .arg(data.path())
                .arg(&servers),
            Duration::from_secs(60),
            "agentmesh import",
        )
    });
    imported.assert_success("agentmesh import");
    let node = tokio::task::block_in_place(|| {
        TestNode::builder()
            .calling(&[a.agents.addr().port()], &a.ca_file)
            .env("AGENTMESH_API__LIMITS__ENABLED", "false")
            .env("AGENTMESH_GATEWAY__TIMEOUT", "3s")
            .data_dir(data)
            .start()
    });
    let api = node.api();
    let call = |tool: &str, input: Value| json!({"operation": tool, "input": input});
    // The tool, through a whole MCP session: its structured answer.
    let r = invoke(
        &api,
        "mcp:io.example/ok",
        &call("echo", json!({"text": "hi"})),
    )
    .await;
    assert_eq!(r.expect(200), &json!({"echo": "hi"}), "{}", r.text);
    assert_eq!(r.header("x-agentmesh-operation"), Some("echo"));
    let session: Vec<String> = a
        .agents
        .seen()
        .iter()
        .filter(|s| s.path == "/mcp/ok")
        .map(method_of)
        .collect();
    assert_eq!(
        session,
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call",
            "DELETE",
        ]
    );
    // The session was ended with the id the server gave.
    let seen = a.agents.seen();
    let opened = seen
        .iter()
        .find(|s| s.path == "/mcp/ok" && method_of(s) == "tools/call")
        .and_then(|s| s.header("mcp-session-id").map(str::to_owned));
    let ended = seen
        .iter()
        .find(|s| s.path == "/mcp/ok" && s.method == "DELETE")
        .and_then(|s| s.header("mcp-session-id").map(str::to_owned));
    assert!(opened.is_some());
    assert_eq!(opened, ended);
    // The tool's input schema, from tools/list, is checked before the
    // call; an unknown tool is named with those the server has.
    let calls_before = a.agents.seen().len();
    let r = invoke(
        &api,
        "mcp:io.example/ok",
        &call("echo", json!({"times": 2})),
    )
    .await;
    r.expect_field_problem("/input");
    let r = invoke(&api, "mcp:io.example/ok", &call("shout", json!({}))).await;
    assert_eq!(
        r.expect_field_problem("/operation")["known"],
        json!(["echo"])
    );
    let methods: Vec<String> = a.agents.seen()[calls_before..]
        .iter()
        .map(method_of)
        .collect();
    assert!(!methods.contains(&"tools/call".to_owned()), "{methods:?}");
    // A tool that reports an error failed its task; HTML is not MCP; a
    // server wanting credentials gets the client's.
    let r = invoke(
        &api,
        "mcp:io.example/tool-error",
        &call("echo", json!({"text": "x"})),
    )
    .await;
    assert_eq!(
        r.expect_error(502, "Upstream")["details"]["reason"],
        "agent_failed"
    );
    let r = invoke(
        &api,
        "mcp:io.example/not-mcp",
        &call("echo", json!({"text": "x"})),
    )
    .await;
    assert_eq!(
        r.expect_error(502, "Upstream")["details"]["reason"],
        "not_protocol"
    );
    invoke(
        &api,
        "mcp:io.example/auth",
        &call("echo", json!({"text": "x"})),
    )
    .await
    .expect_error(401, "AgentError");
    let r = api
        .send(
            "an MCP call with Agent-Authorization".into(),
            api.request(
                reqwest::Method::POST,
                "/agents/mcp:io.example%2Fauth/invoke",
            )
            .header("agent-authorization", "Bearer agent-secret")
            .json(&call("echo", json!({"text": "let in"}))),
        )
        .await;
    assert_eq!(r.expect(200), &json!({"echo": "let in"}));
    // A tool that never answers: 504 at the deadline, and the session
    // the node opened is ended all the same.
    invoke(
        &api,
        "mcp:io.example/hang",
        &call("echo", json!({"text": "x"})),
    )
    .await
    .expect_error(504, "Upstream");
    let hung = |seen: &[agentmesh::testbed::agents::SeenRequest], method: &str| {
        seen.iter()
            .find(|s| s.path == "/mcp/hang" && method_of(s) == method)
            .and_then(|s| s.header("mcp-session-id").map(str::to_owned))
    };
    let opened = hung(&a.agents.seen(), "tools/call");
    assert!(opened.is_some());
    wait_until("the cut-off session is ended", || {
        let ended = hung(&a.agents.seen(), "DELETE");
        let opened = opened.clone();
        async move { ended.is_some() && ended == opened }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_answers_each_call_with_its_own_status() {
    let a = agents().await;
    let (node, _dir) = node(&a, |_| {}).await;
    let api = api(&node);
    let doc = a.agents.aidip_document("batched", AidipMode::Ok, "none");
    api.post("/agents", &doc).await.expect(201);
    let good = |text: &str| json!({"operation": "echo", "input": {"text": text}});
    let r = invoke(&api, "batched", &json!([good("a"), good("b")])).await;
    let results = r.expect(200).as_array().unwrap().clone();
    let bodies: Vec<&Value> = results.iter().map(|x| &x["body"]).collect();
    assert_eq!(bodies, [&json!({"echo": "a"}), &json!({"echo": "b"})]);
    let r = invoke(
        &api,
        "batched",
        &json!([good("c"), {"operation": "echo", "input": {}}, {"operation": "nope", "input": {}}]),
    )
    .await;
    let results = r.expect(207).as_array().unwrap().clone();
    let statuses: Vec<u64> = results
        .iter()
        .map(|x| x["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [200, 400, 400]);
    assert_eq!(results[1]["body"]["error"]["code"], "InvalidInput");
    let too_many: Vec<Value> = (0..33).map(|i| good(&i.to_string())).collect();
    invoke(&api, "batched", &json!(too_many))
        .await
        .expect_error(400, "InvalidInput");
    invoke(
        &api,
        "batched",
        &json!([{"operation": "echo", "input": {"text": "x"}, "stream": true}]),
    )
    .await
    .expect_field_problem("/0/stream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_is_passed_on_as_it_arrives() {
    let a = agents().await;
    let (node, _dir) = node(&a, |_| {}).await;
    let api = api(&node);
    let doc = a
        .agents
        .aidip_document("streamer", AidipMode::Stream, "none");
    api.post("/agents", &doc).await.expect(201);
    for (how, request) in [
        (
            "stream: true",
            api.request(reqwest::Method::POST, "/agents/streamer/invoke")
                .json(&json!({"operation": "echo", "input": {"text": "x"}, "stream": true})),
        ),
        (
            "Accept: text/event-stream",
            api.request(reqwest::Method::POST, "/agents/streamer/invoke")
                .header("accept", "text/event-stream")
                .json(&json!({"operation": "echo", "input": {"text": "x"}})),
        ),
    ] {
        let mut response = request.send().await.unwrap();
        assert_eq!(response.status(), 200, "{how}");
        assert_eq!(
            response.headers()["content-type"].to_str().unwrap(),
            "text/event-stream",
            "{how}"
        );
        // The agent sends its three events 100 ms apart: the first comes
        // on its own, before the others were sent.
        let first = response.chunk().await.unwrap().unwrap();
        let first = String::from_utf8_lossy(&first).into_owned();
        assert!(first.contains(r#"{"n":1}"#), "{how}: {first}");
        assert!(
            !first.contains(r#"{"n":3}"#),
            "{how}: not buffered whole: {first}"
        );
        let mut rest = String::new();
        while let Some(chunk) = response.chunk().await.unwrap() {
            rest.push_str(&String::from_utf8_lossy(&chunk));
        }
        assert!(rest.contains(r#"{"n":3}"#), "{how}: {rest}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_with_the_same_idempotency_key_gets_the_first_answer_and_no_second_call() {
    let a = agents().await;
    let (node, _dir) = node(&a, |_| {}).await;
    let api = api(&node);
    let doc = a.agents.aidip_document("once", AidipMode::Ok, "none");
    api.post("/agents", &doc).await.expect(201);
    let keyed = |key: &str, body: &Value| {
        api.request(reqwest::Method::POST, "/agents/once/invoke")
            .header("idempotency-key", key)
            .json(body)
    };
    let body = json!({"operation": "echo", "input": {"text": "pay 10"}});
    let calls = || {
        a.agents
            .seen()
            .iter()
            .filter(|s| s.path.starts_with("/aidip/ok"))
            .count()
    };
    let before = calls();
    let first = api.send("first".into(), keyed("k-1", &body)).await;
    assert_eq!(first.expect(200), &json!({"echo": "pay 10"}));
    let again = api.send("retry".into(), keyed("k-1", &body)).await;
    assert_eq!(again.expect(200), &json!({"echo": "pay 10"}));
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(calls(), before + 1, "the agent was called once");
    // The same key with another body is refused; another key runs.
    let other = json!({"operation": "echo", "input": {"text": "pay 20"}});
    api.send("reuse".into(), keyed("k-1", &other))
        .await
        .expect_error(422, "InvalidInput");
    api.send("new key".into(), keyed("k-2", &other))
        .await
        .expect(200);
    assert_eq!(calls(), before + 2);
    // A call refused before it was sent is not kept: fixed, it runs.
    let bad = json!({"operation": "echo", "input": {}});
    api.send("refused".into(), keyed("k-3", &bad))
        .await
        .expect_error(400, "InvalidInput");
    api.send("bad key".into(), keyed("bad\tkey", &body))
        .await
        .expect_field_problem("Idempotency-Key");
    // A registration without an id, retried with its key, is one agent.
    let mut doc = a.agents.aidip_document("unused", AidipMode::Ok, "none");
    doc.as_object_mut().unwrap().remove("id");
    let register = || {
        api.request(reqwest::Method::POST, "/agents")
            .header("idempotency-key", "reg-1")
            .json(&doc)
    };
    let first = api.send("register".into(), register()).await;
    let id = first.expect(201)["id"].as_str().unwrap().to_owned();
    let again = api.send("register again".into(), register()).await;
    assert_eq!(again.expect(200)["id"], id.as_str());
}

/// A signed record of the testbed's A2A agent in `mode`, as a stranger
/// would hand it in through `POST /records` (stored as a claim).
fn a2a_record(a: &Agents, mode: A2aMode, key: &ed25519_dalek::SigningKey) -> (String, Vec<u8>) {
    let card = a.agents.a2a_card(mode);
    let id = format!("a2a:{}.agents.test", mode.as_str());
    let parsed = agentmesh::formats::a2a::parse_card(&card).unwrap();
    let body = agentmesh::record::DescriptorRecord::new(
        parsed.to_descriptor(&id),
        card.to_string(),
        agentmesh::record::next_seq(None),
        agentmesh::record::unix_now(),
        3600,
        agentmesh::trust::Evidence::default(),
    );
    let signed = agentmesh::record::SignedRecord::sign_descriptor(&body, key).unwrap();
    (id, signed.encode())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_a2a_agent_is_sent_the_input_as_a_message_and_its_task_answers() {
    let a = agents().await;
    let (node, _dir) = node(&a, |_| {}).await;
    let api = api(&node);
    let key = ed25519_dalek::SigningKey::from_bytes(&[42; 32]);
    let mut ids = HashMap::new();
    for mode in A2aMode::ALL {
        let (id, record) = a2a_record(&a, mode, &key);
        api.post_raw("/records", Some("application/cbor"), record)
            .await
            .expect(201);
        ids.insert(mode, id);
    }
    let ok = &ids[&A2aMode::Ok];
    // The card's one skill may go unnamed; the task's data part answers.
    let r = invoke(&api, ok, &json!({"input": {"text": "bonjour"}})).await;
    assert_eq!(
        r.expect(200)["echo"],
        json!({"text": "bonjour"}),
        "{}",
        r.text
    );
    assert_eq!(r.header("x-agentmesh-operation"), Some("echo"));
    let sent = a
        .agents
        .seen()
        .into_iter()
        .rev()
        .find(|s| s.path == "/a2a/ok")
        .unwrap();
    let message: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(message["method"], "message/send");
    assert_eq!(message["params"]["message"]["parts"][0]["kind"], "data");
    // A skill the card does not list; a task that failed; HTML.
    let r = invoke(&api, ok, &json!({"operation": "translate", "input": {}})).await;
    assert_eq!(
        r.expect_field_problem("/operation")["known"],
        json!(["echo"])
    );
    let r = invoke(&api, &ids[&A2aMode::Fails], &json!({"input": "x"})).await;
    assert_eq!(
        r.expect_error(502, "Upstream")["details"]["reason"],
        "agent_failed"
    );
    let r = invoke(&api, &ids[&A2aMode::NotA2a], &json!({"input": "x"})).await;
    assert_eq!(
        r.expect_error(502, "Upstream")["details"]["reason"],
        "not_protocol"
    );
    // A 1.0 card: spoken to in 1.0 (method, header, parts), its 1.0
    // answer mapped the same way.
    let r = invoke(&api, &ids[&A2aMode::V1], &json!({"input": "hola"})).await;
    assert_eq!(r.expect(200)["echo"], json!("hola"), "{}", r.text);
    let sent = a
        .agents
        .seen()
        .into_iter()
        .rev()
        .find(|s| s.path == "/a2a/v1")
        .unwrap();
    assert_eq!(sent.header("a2a-version"), Some("1.0"));
    let message: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(message["method"], "SendMessage");
    assert_eq!(
        message["params"]["message"]["parts"],
        json!([{"text": "hola"}])
    );
    assert_eq!(message["params"]["message"]["role"], "ROLE_USER");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_asks_for_a_client_certificate_gets_the_one_configured_for_it_only() {
    use agentmesh::testbed::agents::InvokeAgents;
    use agentmesh::testbed::certs::TestCa;
    let ca = TestCa::new(&["127.0.0.1", "localhost"]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.ca_pem()).unwrap();
    let client = ca.client_pem("node.example.test").unwrap();
    let (cert_file, key_file) = (dir.path().join("node.pem"), dir.path().join("node.key"));
    std::fs::write(&cert_file, &client.cert).unwrap();
    std::fs::write(&key_file, &client.key).unwrap();
    let a = Agents {
        agents: InvokeAgents::start_requiring_client_certificates(&ca)
            .await
            .unwrap(),
        dir,
        ca_file,
    };
    let (node, _dir) = node(&a, |c| {
        c.gateway.credentials = vec![GatewayCredential {
            agent: "with-certificate".into(),
            header: None,
            value_file: None,
            cert_file: Some(cert_file.clone()),
            key_file: Some(key_file.clone()),
        }];
    })
    .await;
    let api = api(&node);
    for id in ["with-certificate", "without-certificate"] {
        let doc = a.agents.aidip_document(id, AidipMode::Ok, "mtls");
        api.post("/agents", &doc).await.expect(201);
    }
    let input = json!({"operation": "echo", "input": {"text": "over mutual TLS"}});
    let r = invoke(&api, "with-certificate", &input).await;
    assert_eq!(r.expect(200), &json!({"echo": "over mutual TLS"}));
    assert_eq!(a.agents.seen().len(), 1, "the agent served the call");
    // The certificate is this agent's only: another agent on the same
    // server is called without it, and its handshake fails.
    invoke(&api, "without-certificate", &input)
        .await
        .expect_error(502, "Upstream");
    assert_eq!(a.agents.seen().len(), 1, "no request got through");
    // Both again, in the other order: the clients kept do not mix.
    invoke(&api, "with-certificate", &input).await.expect(200);
    invoke(&api, "without-certificate", &input)
        .await
        .expect_error(502, "Upstream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_entry_that_does_not_read_stops_the_start_named() {
    let a = agents().await;
    let dir = tempfile::tempdir().unwrap();
    let not_a_key = dir.path().join("node.key");
    std::fs::write(&not_a_key, "the-words-of-a-key-that-is-not-one").unwrap();
    let mut config = Config {
        data_dir: dir.path().join("data"),
        ..Config::default()
    };
    config.api.listen = "127.0.0.1:0".parse().unwrap();
    config.p2p.listen = vec!["/ip4/127.0.0.1/tcp/0".into()];
    config.crawl.ca_files = vec![a.ca_file.clone()];
    config.gateway.credentials = vec![GatewayCredential {
        agent: "paid".into(),
        header: None,
        value_file: None,
        cert_file: Some(a.ca_file.clone()),
        key_file: Some(not_a_key),
    }];
    let Err(err) = Node::spawn(config).await else {
        panic!("a node with a credential that does not read started");
    };
    let err = err.to_string();
    assert!(
        err.contains("gateway.credentials for paid") && err.contains("node.key"),
        "{err}"
    );
    assert!(!err.contains("the-words-of-a-key"), "{err}");
}
