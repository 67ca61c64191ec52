//! The API's limits against the real `agentmesh node` binary: rate
//! limits per address and per principal (429 with `Retry-After`, served
//! again once the bucket refills), a search charged by its cost, a
//! slowloris client cut off while others are served, a connection flood
//! from one address refused while another address is served, a stalled
//! body cut off (a JSON request and an import), load shedding at the
//! concurrency limit (503 with `Retry-After`), and the metrics that count
//! each refusal. Clients on other addresses bind 127.0.0.2 and up (all of
//! 127.0.0.0/8 is loopback).

use crate::common;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use common::{minimal_agent, Api, Reply, TestNode, DEADLINE};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const TOKEN: &str = "limits-test-admin-token";

/// A client of `node` whose connections come from `ip`.
fn api_from(node: &TestNode, ip: &str) -> reqwest::Client {
    let _ = node;
    reqwest::Client::builder()
        .local_address(ip.parse::<IpAddr>().expect("an address"))
        .timeout(DEADLINE)
        .build()
        .expect("a client builds")
}

/// `GET path` from `client`: the status, `Retry-After` and the body.
async fn get(
    client: &reqwest::Client,
    node: &TestNode,
    path: &str,
) -> (u16, Option<String>, Value) {
    let response = client
        .get(format!("{}{path}", node.base_url()))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().expect("an ASCII header").to_owned());
    let body = response.json().await.unwrap_or(Value::Null);
    (status, retry_after, body)
}

/// A TCP connection to `node` from `ip`.
async fn connect_from(node: &TestNode, ip: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("a socket");
    socket
        .bind(SocketAddr::new(ip.parse().expect("an address"), 0))
        .expect("a loopback address binds");
    socket.connect(node.addr()).await.expect("the node accepts")
}

/// Reads until the server closes the connection (end of stream or a
/// reset), within [`DEADLINE`]; what it sent before.
async fn read_until_closed(stream: &mut TcpStream, what: &str) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let read = tokio::time::timeout(DEADLINE, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "{what}: the server did not close the connection within {DEADLINE:?}"
    );
    String::from_utf8_lossy(&got).into_owned()
}

/// The value of the sample `name` (with its labels, as rendered) in the
/// node's metrics, scraped from `ip`; 0 when absent.
async fn metric(node: &TestNode, ip: &str, sample: &str) -> f64 {
    let text = api_from(node, ip)
        .get(format!("{}/metrics", node.base_url()))
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("the metrics text");
    text.lines()
        .find_map(|l| l.strip_prefix(sample).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

/// Sends requests with `send` until one is refused with 429; that one.
async fn until_refused<F, Fut>(what: &str, mut send: F) -> Reply
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Reply>,
{
    for _ in 0..50 {
        let reply = send().await;
        if reply.status == 429 {
            return reply;
        }
        assert!(
            reply.status < 400,
            "{what}: {} {}",
            reply.status,
            reply.body
        );
    }
    panic!("{what}: 50 requests and none refused");
}

#[tokio::test]
async fn a_client_over_its_budget_gets_429_with_retry_after_and_is_served_again_after_it() {
    let node = TestNode::start_with_env(&[
        ("AGENTMESH_API__LIMITS__WINDOW", "3s"),
        ("AGENTMESH_API__LIMITS__READS", "3"),
        ("AGENTMESH_API__LIMITS__MESH_SEARCH", "1"),
        ("AGENTMESH_API__ADMIN_TOKEN", TOKEN),
    ]);
    let api = node.api();
    let refused = until_refused("GET /agents", || api.get("/agents")).await;
    let body = refused.expect_error(429, "RateLimited");
    assert_eq!(body["details"]["limit"], "reads", "{body}");
    let retry_after: u64 = refused
        .header("retry-after")
        .expect("a 429 carries Retry-After")
        .parse()
        .expect("Retry-After in whole seconds");
    assert!((1..=3).contains(&retry_after), "Retry-After {retry_after}");

    // Meanwhile, another address and the admin token (a principal, with
    // buckets of its own) are served.
    let (status, _, _) = get(&api_from(&node, "127.0.0.2"), &node, "/agents").await;
    assert_eq!(status, 200, "another address has its own bucket");
    api.with_token(TOKEN).get("/agents").await.expect(200);

    // Once the bucket refills, the client is served again.
    common::wait_until("the refused client is served again", || async {
        api.get("/agents").await.status == 200
    })
    .await;

    // A mesh search is charged to its own, smaller budget: a second one
    // is refused while a local filter search (a read) is still served.
    let search = json!({"query": "translate"});
    let refused = until_refused("mesh searches", || api.search(search.clone())).await;
    let body = refused.expect_error(429, "RateLimited");
    assert_eq!(body["details"]["limit"], "mesh_search", "{body}");
    common::wait_until("a local filter search is served", || async {
        api.search(json!({"scope": "local"})).await.status == 200
    })
    .await;

    let reads = metric(
        &node,
        "127.0.0.3",
        "agentmesh_http_rate_limited_total{limit=\"reads\"}",
    )
    .await;
    let mesh = metric(
        &node,
        "127.0.0.3",
        "agentmesh_http_rate_limited_total{limit=\"mesh_search\"}",
    )
    .await;
    assert!(
        reads >= 1.0 && mesh >= 1.0,
        "reads {reads}, mesh_search {mesh}"
    );
}

#[tokio::test]
async fn limits_can_be_turned_off() {
    let node = TestNode::start_with_env(&[
        ("AGENTMESH_API__LIMITS__ENABLED", "false"),
        ("AGENTMESH_API__LIMITS__READS", "1"),
    ]);
    let api = node.api();
    for _ in 0..5 {
        api.get("/agents").await.expect(200);
    }
}

#[tokio::test]
async fn a_slowloris_client_is_cut_off_and_does_not_hold_up_another() {
    let node = TestNode::start_with_env(&[("AGENTMESH_API__HEADER_READ_TIMEOUT", "1s")]);
    let stream = connect_from(&node, "127.0.0.2").await;
    let (mut reader, mut writer) = stream.into_split();
    // One header byte every 100 ms: the head never ends.
    let trickle = tokio::spawn(async move {
        let _ = writer
            .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            .await;
        for _ in 0..600 {
            if writer.write_all(b"X").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    // Another client is served meanwhile.
    let (status, _, _) = get(&api_from(&node, "127.0.0.3"), &node, "/health").await;
    assert_eq!(status, 200);
    let mut got = Vec::new();
    let closed = tokio::time::timeout(DEADLINE, reader.read_to_end(&mut got)).await;
    assert!(
        closed.is_ok(),
        "the slow client was not cut off within {DEADLINE:?}"
    );
    let got = String::from_utf8_lossy(&got);
    assert!(!got.contains(" 200 "), "the slow client was served: {got}");
    trickle.abort();
    // And the node still serves.
    node.api().get("/health").await.expect(200);
}

#[tokio::test]
async fn a_connection_flood_from_one_address_is_refused_while_another_is_served() {
    let node = TestNode::start_with_env(&[
        ("AGENTMESH_API__MAX_CONNECTIONS_PER_IP", "4"),
        ("AGENTMESH_API__HEADER_READ_TIMEOUT", "60s"),
    ]);
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(connect_from(&node, "127.0.0.2").await);
    }
    // The fifth from the same address is closed as it is accepted.
    let mut fifth = connect_from(&node, "127.0.0.2").await;
    let _ = fifth
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    let answer = read_until_closed(&mut fifth, "the fifth connection").await;
    assert!(
        answer.is_empty(),
        "the fifth connection was served: {answer}"
    );
    // Another address is served.
    let (status, _, _) = get(&api_from(&node, "127.0.0.3"), &node, "/health").await;
    assert_eq!(status, 200);
    // A held connection is still served: the cap refused only the flood.
    let first = &mut held[0];
    first
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("the held connection is open");
    let answer = read_until_closed(first, "a held connection").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let refused = metric(
        &node,
        "127.0.0.4",
        "agentmesh_http_connections_refused_total{cap=\"per_ip\"}",
    )
    .await;
    assert!(refused >= 1.0, "refused connections counted: {refused}");
}

#[tokio::test]
async fn a_stalled_body_is_cut_off_with_408() {
    let node = TestNode::start_with_env(&[("AGENTMESH_API__BODY_READ_TIMEOUT", "1s")]);
    let mut stream = connect_from(&node, "127.0.0.2").await;
    stream
        .write_all(
            b"POST /agents HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
              Content-Length: 100\r\n\r\n{\"id\":",
        )
        .await
        .expect("the request is sent");
    let answer = read_until_closed(&mut stream, "the stalled request").await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.contains("no bytes of the request body arrived"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_stalled_import_stops_and_says_why() {
    let node = TestNode::start_with_env(&[("AGENTMESH_API__BODY_READ_TIMEOUT", "1s")]);
    let mut stream = connect_from(&node, "127.0.0.2").await;
    let line = format!("{}\n", minimal_agent("stalled-import-1"));
    let head = "POST /admin/import HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\n\
                Transfer-Encoding: chunked\r\n\r\n";
    let chunk = format!("{:x}\r\n{line}\r\n", line.len());
    stream
        .write_all(format!("{head}{chunk}").as_bytes())
        .await
        .expect("the import starts");
    // No more chunks, and no end: the import must stop on its own.
    let answer = read_until_closed(&mut stream, "the stalled import").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains("\"summary\""),
        "the import ends with its summary: {answer}"
    );
    assert!(
        answer.contains("no bytes of the request body arrived"),
        "{answer}"
    );
    // What arrived before the stall was imported.
    node.api().get("/agents/stalled-import-1").await.expect(200);
}

/// A request from 127.0.0.2 that stays in flight: its body never comes.
async fn hold(node: &TestNode) -> TcpStream {
    let mut stream = connect_from(node, "127.0.0.2").await;
    stream
        .write_all(
            b"POST /agents HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
              Content-Length: 100\r\n\r\n{",
        )
        .await
        .expect("the request is sent");
    stream
}

#[tokio::test]
async fn past_the_concurrency_limit_requests_are_shed_with_503_and_retry_after() {
    let node = TestNode::start_with_env(&[
        ("AGENTMESH_API__MAX_CONCURRENT_REQUESTS", "2"),
        ("AGENTMESH_API__BODY_READ_TIMEOUT", "60s"),
    ]);
    // Requests whose bodies never come hold both places. A probe may
    // take a place just as a holder arrives, and that holder is shed:
    // it is sent again until two hold.
    let client = api_from(&node, "127.0.0.4");
    let mut holders: Vec<TcpStream> = Vec::new();
    let until = tokio::time::Instant::now() + DEADLINE;
    let shed = loop {
        holders.retain(|h| {
            let mut buf = [0u8; 1];
            matches!(h.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        });
        while holders.len() < 2 {
            holders.push(hold(&node).await);
        }
        let answer = get(&client, &node, "/health").await;
        if answer.0 == 503 {
            break answer;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "no request was shed within {DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (_, retry_after, body) = shed;
    assert_eq!(body["error"]["code"], "Unavailable", "{body}");
    assert_eq!(retry_after.as_deref(), Some("1"));
    // Once the holders go, the node serves again, and counted the shed.
    drop(holders);
    common::wait_until("the node serves again", || async {
        get(&client, &node, "/health").await.0 == 200
    })
    .await;
    let sheds = metric(&node, "127.0.0.5", "agentmesh_http_shed_total").await;
    assert!(sheds >= 1.0, "sheds counted: {sheds}");
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_forwarded_address_is_the_client() {
    // Loopback is the proxy: each forwarded address gets its own bucket.
    let node = TestNode::start_with_env(&[
        ("AGENTMESH_API__TRUSTED_PROXIES", "[\"127.0.0.1\"]"),
        ("AGENTMESH_API__LIMITS__WINDOW", "1h"),
        ("AGENTMESH_API__LIMITS__READS", "2"),
    ]);
    let api = Api::new(node.base_url());
    let from = |client: &'static str| {
        let request = api
            .request(reqwest::Method::GET, "/agents")
            .header("x-forwarded-for", format!("{client}, 127.0.0.1"));
        api.send(format!("GET /agents for {client}"), request)
    };
    from("203.0.113.1").await.expect(200);
    from("203.0.113.1").await.expect(200);
    from("203.0.113.1").await.expect_error(429, "RateLimited");
    from("203.0.113.2").await.expect(200);
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    // The head timeout is long: what closes the connection is idleness.
    let node = TestNode::start_with_env(&[
        ("AGENTMESH_API__IDLE_TIMEOUT", "1s"),
        ("AGENTMESH_API__HEADER_READ_TIMEOUT", "60s"),
    ]);
    let mut stream = connect_from(&node, "127.0.0.2").await;
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("the request is sent");
    let answer = read_until_closed(&mut stream, "the idle connection").await;
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "served before it went idle: {answer}"
    );
}
