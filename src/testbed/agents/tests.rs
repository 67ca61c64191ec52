//! The invokable agents over real sockets: reqwest trusting only the
//! test CA, every mode of every protocol, the MCP session handshake, the
//! request log and the in-flight count. Every wait has a deadline.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::{header, StatusCode};
use serde_json::{json, Value};

use super::*;
use crate::aidip::MetadataValidator;

const DEADLINE: Duration = Duration::from_secs(10);

/// Awaits `f`, failing the test after 10 s with what it waited for.
async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, f)
        .await
        .unwrap_or_else(|_| panic!("timed out after 10 s waiting for {what}"))
}

/// Polls `condition` until it holds, failing after 10 s.
async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let end = Instant::now() + DEADLINE;
    while !condition() {
        assert!(
            Instant::now() < end,
            "timed out after 10 s waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn start() -> (TestCa, InvokeAgents) {
    let ca = TestCa::new(&["unrelated.test"]).expect("a test CA");
    let agents = within("the agents to start", InvokeAgents::start(&ca))
        .await
        .expect("the agents start");
    (ca, agents)
}

/// A client trusting only `ca`, `localhost` pinned to `addr`.
fn client(ca: &TestCa, addr: SocketAddr) -> reqwest::Client {
    reqwest::Client::builder()
        .use_preconfigured_tls((*ca.client_config()).clone())
        .resolve("localhost", addr)
        .timeout(DEADLINE)
        .build()
        .expect("the client builds")
}

async fn post(client: &reqwest::Client, url: &str, body: &Value) -> reqwest::Response {
    within(url, client.post(url).json(body).send())
        .await
        .expect("an answer")
}

async fn json_of(response: reqwest::Response) -> Value {
    within("the body", response.json::<Value>())
        .await
        .expect("a JSON body")
}

fn error_code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn the_ok_agent_echoes_counts_and_refuses_bad_calls() {
    let (ca, agents) = start().await;
    let c = client(&ca, agents.addr());
    let base = agents.base_url();
    assert_eq!(base, format!("https://127.0.0.1:{}", agents.addr().port()));

    let r = post(
        &c,
        &format!("{base}/aidip/ok/echo"),
        &json!({"text": "hi", "times": 3}),
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(json_of(r).await, json!({"echo": "hi hi hi"}));
    let r = post(&c, &format!("{base}/aidip/ok"), &json!({"text": "plain"})).await;
    assert_eq!(json_of(r).await, json!({"echo": "plain"}));
    let r = post(
        &c,
        &format!("{base}/aidip/ok/count"),
        &json!({"items": [1, 2, 3]}),
    )
    .await;
    assert_eq!(json_of(r).await, json!({"count": 3}));

    let r = post(&c, &format!("{base}/aidip/ok/translate"), &json!({})).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(error_code(&json_of(r).await), "NotFound");
    let r = within(
        "not JSON",
        c.post(format!("{base}/aidip/ok/echo")).body("{no").send(),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(error_code(&json_of(r).await), "InvalidInput");
    let r = post(
        &c,
        &format!("{base}/aidip/ok/echo"),
        &json!({"text": "a", "times": 9}),
    )
    .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let r = post(
        &c,
        &format!("{base}/aidip/no-such-mode/echo"),
        &json!({"text": "a"}),
    )
    .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // The certificate also holds for `localhost` (with SNI).
    let port = agents.addr().port();
    let r = post(
        &c,
        &format!("https://localhost:{port}/aidip/ok"),
        &json!({"text": "x"}),
    )
    .await;
    assert_eq!(json_of(r).await, json!({"echo": "x"}));
    agents.shutdown().await;
}

#[tokio::test]
async fn status_modes_answer_their_status_and_retry_after() {
    let (ca, agents) = start().await;
    let c = client(&ca, agents.addr());
    for (code, retry) in [(503, Some("7")), (429, Some("7")), (500, None), (404, None)] {
        let url = format!(
            "{}/aidip/{}/echo",
            agents.base_url(),
            AidipMode::Status(code).as_str()
        );
        let r = post(&c, &url, &json!({"text": "a"})).await;
        assert_eq!(r.status().as_u16(), code);
        let retry_after = r
            .headers()
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap());
        assert_eq!(retry_after, retry, "{code}");
        let body = json_of(r).await;
        assert!(!error_code(&body).is_empty(), "{body}");
        assert!(body["error"]["message"].is_string());
    }
    agents.shutdown().await;
}

#[tokio::test]
async fn malformed_wrong_shape_and_huge_answers() {
    let (ca, agents) = start().await;
    let c = client(&ca, agents.addr());
    let base = agents.base_url();
    let input = json!({"text": "a"});

    let r = post(&c, &format!("{base}/aidip/malformed/echo"), &input).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
    let text = within("the malformed body", r.text()).await.unwrap();
    assert!(serde_json::from_str::<Value>(&text).is_err(), "{text}");

    let r = post(&c, &format!("{base}/aidip/wrong-shape/echo"), &input).await;
    assert_eq!(r.status(), StatusCode::OK);
    let shape = json_of(r).await;
    assert_eq!(shape, json!({"unexpected": 1}));
    let doc = agents.aidip_document("wrong-shape", AidipMode::WrongShape, "none");
    let outputs = jsonschema::validator_for(&doc["operations"][0]["outputs"]).unwrap();
    assert!(
        !outputs.is_valid(&shape),
        "the echo output schema refuses it"
    );

    let r = post(&c, &format!("{base}/aidip/huge/echo"), &input).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.content_length().is_none(),
        "streamed, no length announced"
    );
    let mut chunks = r.bytes_stream();
    let (mut total, mut pieces, mut last) = (0usize, 0usize, Vec::new());
    within("the huge body", async {
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.expect("a chunk");
            total += chunk.len();
            pieces += 1;
            last = chunk.to_vec();
        }
    })
    .await;
    assert!(total >= HUGE_BYTES, "{total} bytes");
    assert!(pieces > 1, "in more than one piece");
    assert!(last.ends_with(b"\"}"));
    agents.shutdown().await;
}

#[tokio::test]
async fn stream_sends_three_events_apart() {
    let (ca, agents) = start().await;
    let c = client(&ca, agents.addr());
    let started = Instant::now();
    let url = format!("{}/aidip/stream/echo", agents.base_url());
    let r = post(&c, &url, &json!({"text": "a"})).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()[header::CONTENT_TYPE], "text/event-stream");
    let text = within("the events", r.text()).await.unwrap();
    assert_eq!(
        text,
        "data: {\"n\":1}\n\ndata: {\"n\":2}\n\ndata: {\"n\":3}\n\n"
    );
    assert!(started.elapsed() >= Duration::from_millis(200));
    agents.shutdown().await;
}

#[tokio::test]
async fn auth_wants_the_secret_as_bearer_or_api_key() {
    let (ca, agents) = start().await;
    let c = client(&ca, agents.addr());
    let url = format!("{}/aidip/auth/echo", agents.base_url());
    let input = json!({"text": "a"});
    let r = post(&c, &url, &input).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers()[header::WWW_AUTHENTICATE], "Bearer");
    let wrong = c.post(&url).json(&input).bearer_auth("other").send();
    assert_eq!(within("wrong", wrong).await.unwrap().status(), 401);
    let bearer = c.post(&url).json(&input).bearer_auth(SECRET).send();
    let r = within("bearer", bearer).await.unwrap();
    assert_eq!(json_of(r).await, json!({"echo": "a"}));
    let key = c.post(&url).json(&input).header("x-api-key", SECRET).send();
    let r = within("api key", key).await.unwrap();
    assert_eq!(json_of(r).await, json!({"echo": "a"}));
    agents.shutdown().await;
}

#[tokio::test]
async fn slow_answers_late_and_a_timeout_cuts_it() {
    let (ca, agents) = start().await;
    let c = client(&ca, agents.addr());
    let started = Instant::now();
    let url = format!("{}/aidip/slow/echo?ms=200", agents.base_url());
    let r = post(&c, &url, &json!({"text": "late"})).await;
    assert_eq!(json_of(r).await, json!({"echo": "late"}));
    assert!(started.elapsed() >= Duration::from_millis(200));

    let url = format!("{}/aidip/slow/echo", agents.base_url());
    let cut = c
        .post(&url)
        .json(&json!({"text": "a"}))
        .timeout(Duration::from_millis(300))
        .send();
    let error = within("the timeout", cut).await.unwrap_err();
    assert!(error.is_timeout(), "{error}");
    within("shutdown", agents.shutdown()).await;
}

#[tokio::test]
async fn hanging_requests_are_counted_in_flight_until_shutdown() {
    let (ca, agents) = start().await;
    let c = client(&ca, agents.addr());
    let url = format!("{}/aidip/hang/echo", agents.base_url());
    let calls: Vec<_> = (0..3)
        .map(|_| tokio::spawn(c.post(&url).json(&json!({"text": "a"})).send()))
        .collect();
    wait_until("three requests in flight", || agents.max_in_flight() == 3).await;
    assert_eq!(agents.seen().len(), 3);
    within("shutdown", agents.shutdown()).await;
    for call in calls {
        let answer = within("the hanging request", call).await.unwrap();
        let status = answer.expect("answered at shutdown").status();
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    }
}

#[tokio::test]
async fn seen_records_methods_paths_headers_and_bounded_bodies() {
    let (ca, agents) = start().await;
    let c = client(&ca, agents.addr());
    let url = format!("{}/aidip/ok/echo?ms=1", agents.base_url());
    let call = c
        .post(&url)
        .header("X-Trace", "abc")
        .header(header::AUTHORIZATION, "Bearer t0k")
        .body(r#"{"text":"seen"}"#)
        .send();
    assert_eq!(within("a call", call).await.unwrap().status(), 200);
    let big = vec![b' '; MAX_BODY + 1];
    let call = c.post(&url).body(big).send();
    let r = within("an oversized call", call).await.unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let get = c.get(format!("{}/nowhere", agents.base_url())).send();
    assert_eq!(within("a GET", get).await.unwrap().status(), 404);

    let seen = agents.seen();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].path, "/aidip/ok/echo");
    assert_eq!(seen[0].header("x-trace"), Some("abc"));
    assert_eq!(seen[0].header("authorization"), Some("Bearer t0k"));
    assert!(seen[0]
        .headers
        .iter()
        .all(|(n, _)| *n == n.to_ascii_lowercase()));
    assert_eq!(seen[0].body, br#"{"text":"seen"}"#);
    assert!(seen[1].body.is_empty(), "an oversized body is not kept");
    assert_eq!(
        (seen[2].method.as_str(), seen[2].path.as_str()),
        ("GET", "/nowhere")
    );
    assert_eq!(agents.max_in_flight(), 1, "one at a time");
    agents.shutdown().await;
}

#[tokio::test]
async fn aidip_documents_validate_and_describe_what_the_agent_answers() {
    let (ca, agents) = start().await;
    let c = client(&ca, agents.addr());
    let validator = MetadataValidator::new();
    for mode in AidipMode::ALL.into_iter().chain([AidipMode::Status(429)]) {
        for auth in ["none", "api_key", "oauth2_bearer"] {
            let doc = agents.aidip_document("testbed-echo", mode, auth);
            let meta = validator
                .parse(&doc)
                .unwrap_or_else(|p| panic!("{mode:?} {auth}: {p:?}"));
            let endpoint = format!("{}/aidip/{}", agents.base_url(), mode.as_str());
            assert_eq!(meta.endpoint, endpoint);
            assert_eq!(meta.authentication.unwrap().kind, auth);
            let names: Vec<_> = meta
                .operations
                .unwrap()
                .into_iter()
                .map(|o| o.name)
                .collect();
            assert_eq!(names, ["echo", "count"]);
        }
    }
    // What the Ok agent answers fits the schemas it publishes.
    let doc = agents.aidip_document("testbed-echo", AidipMode::Ok, "none");
    let endpoint = doc["endpoint"].as_str().unwrap().to_owned();
    for (op, input) in [
        (0, json!({"text": "a", "times": 5})),
        (1, json!({"items": []})),
    ] {
        let operation = &doc["operations"][op];
        let inputs = jsonschema::validator_for(&operation["inputs"]).unwrap();
        assert!(inputs.is_valid(&input));
        let url = format!("{endpoint}/{}", operation["name"].as_str().unwrap());
        let output = json_of(post(&c, &url, &input).await).await;
        let outputs = jsonschema::validator_for(&operation["outputs"]).unwrap();
        assert!(outputs.is_valid(&output), "{output}");
    }
    let echo_inputs = jsonschema::validator_for(&doc["operations"][0]["inputs"]).unwrap();
    assert!(!echo_inputs.is_valid(&json!({"text": "a", "times": 6})));
    agents.shutdown().await;
}

/// A JSON-RPC POST to the MCP server, with a session id when given.
async fn mcp(
    c: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: &Value,
) -> reqwest::Response {
    let mut request = c
        .post(url)
        .header(header::ACCEPT, "application/json, text/event-stream")
        .json(body);
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", MCP_PROTOCOL_VERSION);
    }
    within(url, request.send()).await.expect("an answer")
}

fn rpc(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[tokio::test]
async fn mcp_session_handshake_then_tools() {
    let (ca, agents) = start().await;
    let c = client(&ca, agents.addr());
    let url = agents.mcp_url(McpMode::Ok);
    assert_eq!(url, format!("{}/mcp/ok", agents.base_url()));

    let init = rpc(
        1,
        "initialize",
        json!({"protocolVersion": MCP_PROTOCOL_VERSION, "capabilities": {},
               "clientInfo": {"name": "test", "version": "0"}}),
    );
    let r = mcp(&c, &url, None, &init).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
    let session = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    assert!(session.len() >= 16);
    let body = json_of(r).await;
    assert_eq!(body["id"], 1);
    assert_eq!(body["result"]["protocolVersion"], MCP_PROTOCOL_VERSION);
    assert_eq!(body["result"]["capabilities"], json!({"tools": {}}));
    assert!(body["result"]["serverInfo"]["name"].is_string());
    assert!(body["result"]["serverInfo"]["version"].is_string());
    let again = mcp(&c, &url, None, &init).await;
    assert_ne!(
        again.headers()["mcp-session-id"],
        session.as_str(),
        "random"
    );

    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = mcp(&c, &url, Some(&session), &initialized).await;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    assert!(within("202", r.bytes()).await.unwrap().is_empty());

    let list = rpc(2, "tools/list", json!({}));
    assert_eq!(mcp(&c, &url, None, &list).await.status(), 400);
    let unknown = mcp(&c, &url, Some("not-a-session"), &list).await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    let tools = json_of(mcp(&c, &url, Some(&session), &list).await).await;
    let tool = &tools["result"]["tools"][0];
    assert_eq!(tools["result"]["tools"].as_array().unwrap().len(), 1);
    assert_eq!(tool["name"], "echo");
    assert_eq!(tool["inputSchema"]["required"], json!(["text"]));
    assert_eq!(tool["outputSchema"]["type"], "object");

    let call = rpc(
        3,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hey"}}),
    );
    let result = json_of(mcp(&c, &url, Some(&session), &call).await).await["result"].clone();
    assert_eq!(result["isError"], false);
    assert_eq!(result["structuredContent"], json!({"echo": "hey"}));
    assert_eq!(result["content"][0]["type"], "text");
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, result["structuredContent"]);
    let outputs = jsonschema::validator_for(&tool["outputSchema"]).unwrap();
    assert!(outputs.is_valid(&result["structuredContent"]));

    let cases = [
        (
            rpc(4, "tools/call", json!({"name": "nope", "arguments": {}})),
            -32602,
        ),
        (rpc(5, "resources/list", json!({})), -32601),
    ];
    for (request, code) in cases {
        let body = json_of(mcp(&c, &url, Some(&session), &request).await).await;
        assert_eq!(body["error"]["code"], code, "{body}");
        assert_eq!(body["id"], request["id"]);
    }
    let pong = json_of(mcp(&c, &url, Some(&session), &rpc(6, "ping", json!({}))).await).await;
    assert_eq!(pong["result"], json!({}));

    let garbage = c
        .post(&url)
        .header("mcp-session-id", &session)
        .body("{")
        .send();
    let r = within("garbage", garbage).await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(json_of(r).await["error"]["code"], -32700);
    let get = within("GET", c.get(&url).send()).await.unwrap();
    assert_eq!(get.status(), StatusCode::METHOD_NOT_ALLOWED);

    let delete = c.delete(&url).header("mcp-session-id", &session).send();
    assert_eq!(within("DELETE", delete).await.unwrap().status(), 200);
    let closed = mcp(&c, &url, Some(&session), &list).await;
    assert_eq!(closed.status(), StatusCode::NOT_FOUND);
    agents.shutdown().await;
}

/// Initializes a session on `url`; its id.
async fn mcp_session(c: &reqwest::Client, url: &str, bearer: bool) -> String {
    let init = rpc(
        1,
        "initialize",
        json!({"protocolVersion": MCP_PROTOCOL_VERSION}),
    );
    let mut request = c.post(url).json(&init);
    if bearer {
        request = request.bearer_auth(SECRET);
    }
    let r = within("initialize", request.send()).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    r.headers()["mcp-session-id"].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn mcp_modes_tool_error_not_mcp_and_auth() {
    let (ca, agents) = start().await;
    let c = client(&ca, agents.addr());
    let call = rpc(
        2,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "a"}}),
    );

    let url = agents.mcp_url(McpMode::ToolError);
    let session = mcp_session(&c, &url, false).await;
    let body = json_of(mcp(&c, &url, Some(&session), &call).await).await;
    assert_eq!(body["result"]["isError"], true);
    assert_eq!(body["result"]["content"][0]["type"], "text");
    assert!(body["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("failed"));

    let url = agents.mcp_url(McpMode::NotMcp);
    let r = mcp(&c, &url, None, &rpc(1, "initialize", json!({}))).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers()[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    assert!(within("html", r.text())
        .await
        .unwrap()
        .starts_with("<html>"));

    let url = agents.mcp_url(McpMode::Auth);
    let r = mcp(&c, &url, None, &rpc(1, "initialize", json!({}))).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers()[header::WWW_AUTHENTICATE], "Bearer");
    let session = mcp_session(&c, &url, true).await;
    let authorised = c
        .post(&url)
        .bearer_auth(SECRET)
        .header("mcp-session-id", &session)
        .json(&call)
        .send();
    let body = json_of(within("authorised call", authorised).await.unwrap()).await;
    assert_eq!(body["result"]["structuredContent"], json!({"echo": "a"}));
    agents.shutdown().await;
}

fn send(id: u64, parts: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "message/send", "params": {
        "message": {"role": "user", "parts": parts, "messageId": format!("m{id}"), "kind": "message"}
    }})
}

#[tokio::test]
async fn a2a_card_send_and_get() {
    let (ca, agents) = start().await;
    let c = client(&ca, agents.addr());
    let base = agents.base_url();
    let card_url = format!("{base}/a2a/ok/.well-known/agent-card.json");
    let served = json_of(within("the card", c.get(&card_url).send()).await.unwrap()).await;
    let card = agents.a2a_card(A2aMode::Ok);
    assert_eq!(served, card);
    assert_eq!(card["url"], format!("{base}/a2a/ok"));
    assert_eq!(card["protocolVersion"], "0.3.0");
    assert_eq!(card["preferredTransport"], "JSONRPC");
    assert_eq!(card["skills"][0]["id"], "echo");
    let parsed = crate::formats::a2a::parse_card(&card).expect("the node reads the card");
    assert_eq!(
        parsed.to_descriptor("a2a:test").endpoint.as_deref(),
        card["url"].as_str()
    );

    let url = format!("{base}/a2a/ok");
    let text =
        json_of(post(&c, &url, &send(1, json!([{"kind": "text", "text": "hi"}]))).await).await;
    let task = &text["result"];
    assert_eq!(task["kind"], "task");
    assert_eq!(task["status"]["state"], "completed");
    assert!(task["contextId"].is_string());
    let artifact = &task["artifacts"][0];
    assert!(artifact["artifactId"].is_string());
    assert_eq!(
        artifact["parts"][0],
        json!({"kind": "data", "data": {"echo": "hi"}})
    );

    let data = json!([{"kind": "data", "data": {"n": 1}}]);
    let answer = json_of(post(&c, &url, &send(2, data)).await).await;
    let echoed = &answer["result"]["artifacts"][0]["parts"][0]["data"]["echo"];
    assert_eq!(*echoed, json!({"n": 1}));

    let get =
        json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"id": task["id"]}});
    assert_eq!(json_of(post(&c, &url, &get).await).await["result"], *task);
    let missing = json!({"jsonrpc": "2.0", "id": 4, "method": "tasks/get", "params": {"id": "x"}});
    assert_eq!(
        json_of(post(&c, &url, &missing).await).await["error"]["code"],
        -32001
    );
    let unknown = json!({"jsonrpc": "2.0", "id": 5, "method": "message/stream", "params": {}});
    assert_eq!(
        json_of(post(&c, &url, &unknown).await).await["error"]["code"],
        -32601
    );
    let no_parts = send(6, json!([]));
    assert_eq!(
        json_of(post(&c, &url, &no_parts).await).await["error"]["code"],
        -32602
    );
    agents.shutdown().await;
}

#[tokio::test]
async fn a2a_v1_mode_speaks_1_0_only() {
    let (ca, agents) = start().await;
    let c = client(&ca, agents.addr());
    let base = agents.base_url();
    let card = agents.a2a_card(A2aMode::V1);
    assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
    assert!(card.get("url").is_none());
    let parsed = crate::formats::a2a::parse_card(&card).expect("the node reads the card");
    let chosen = parsed.rpc_interface().expect("a JSON-RPC interface");
    assert_eq!(chosen.version, crate::formats::a2a::RpcVersion::V1);
    let url = format!("{base}/a2a/v1");
    assert_eq!(chosen.url, url);
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"role": "ROLE_USER", "parts": [{"data": [1, 2]}], "messageId": "m1"}
    }});
    let at_1_0 = |body: &Value| {
        within(
            "a 1.0 request",
            c.post(&url).header("a2a-version", "1.0").json(body).send(),
        )
    };
    let answer = json_of(at_1_0(&send).await.unwrap()).await;
    let task = &answer["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert!(task.get("kind").is_none());
    assert_eq!(
        task["artifacts"][0]["parts"][0],
        json!({"data": {"echo": [1, 2]}})
    );
    let get = json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}});
    assert_eq!(json_of(at_1_0(&get).await.unwrap()).await["result"], *task);
    // Without the header the request is 0.3's, which this mode refuses;
    // 0.x's method names are unknown to it.
    assert_eq!(
        json_of(post(&c, &url, &send).await).await["error"]["code"],
        -32009
    );
    let old = json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"id": "x"}});
    assert_eq!(
        json_of(at_1_0(&old).await.unwrap()).await["error"]["code"],
        -32601
    );
    agents.shutdown().await;
}

#[tokio::test]
async fn a2a_fails_and_not_a2a() {
    let (ca, agents) = start().await;
    let c = client(&ca, agents.addr());
    let base = agents.base_url();
    let url = format!("{base}/a2a/fails");
    let body =
        json_of(post(&c, &url, &send(1, json!([{"kind": "text", "text": "a"}]))).await).await;
    let status = &body["result"]["status"];
    assert_eq!(status["state"], "failed");
    assert_eq!(status["message"]["role"], "agent");
    assert!(status["message"]["parts"][0]["text"].is_string());
    assert_eq!(agents.a2a_card(A2aMode::Fails)["url"], url);

    for r in [
        within(
            "card",
            c.get(format!("{base}/a2a/not-a2a/.well-known/agent-card.json"))
                .send(),
        )
        .await,
        within(
            "rpc",
            c.post(format!("{base}/a2a/not-a2a")).body("{}").send(),
        )
        .await,
    ] {
        let r = r.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert!(r.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html"));
    }
    agents.shutdown().await;
}
