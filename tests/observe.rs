//! What a node shows about itself, against the real `agentmesh node`
//! binary: `GET /metrics` (scraped, parsed, and checked to move by what
//! the node was made to do: registrations, searches, a crawl of the
//! testbed, requests that fail, a peer's records), the `X-Request-Id` of
//! every response, and `--log-format json`.

use crate::common;

use std::collections::BTreeMap;
use std::time::Instant;

use agentmesh::testbed::{Behaviour, Population, PopulationConfig, Testbed, TestbedOptions};
use common::{minimal_agent, Api, Reply, TestNode, DEADLINE};
use serde_json::{json, Value};

// ------------------------------------------------------------------ parsing

/// A sample's labels, sorted by name.
type Labels = BTreeMap<String, String>;

/// One scrape, parsed: every sample by name and labels, and each family's
/// declared type.
#[derive(Debug)]
struct Scrape {
    samples: BTreeMap<(String, Labels), f64>,
    types: BTreeMap<String, String>,
    text: String,
}

/// Parses an OpenMetrics text exposition: `# TYPE`/`# HELP`/`# UNIT`
/// lines, samples `name{a="x",b="y"} value`, label values with `\"`,
/// `\\` and `\n` escapes, and the closing `# EOF` (which must be last).
fn parse(text: &str) -> Scrape {
    let mut samples = BTreeMap::new();
    let mut types = BTreeMap::new();
    let mut lines = text.lines().peekable();
    let mut saw_eof = false;
    while let Some(line) = lines.next() {
        if line == "# EOF" {
            assert!(
                lines.peek().is_none(),
                "# EOF is not the last line:\n{text}"
            );
            saw_eof = true;
            break;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name type");
            types.insert(name.to_owned(), kind.to_owned());
            continue;
        }
        if line.starts_with("# HELP ") || line.starts_with("# UNIT ") {
            continue;
        }
        assert!(!line.starts_with('#'), "an unknown comment line: {line}");
        let (name, labels, rest) = match line.find('{') {
            Some(open) => {
                let (labels, after) = parse_labels(&line[open + 1..]);
                (&line[..open], labels, after)
            }
            None => {
                let (name, rest) = line.split_once(' ').expect("a sample has a value");
                (name, Labels::new(), rest)
            }
        };
        let value: f64 = rest
            .trim()
            .split(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no number in {line}"));
        let previous = samples.insert((name.to_owned(), labels), value);
        assert!(previous.is_none(), "a sample is repeated: {line}");
    }
    assert!(saw_eof, "the exposition does not end with # EOF:\n{text}");
    Scrape {
        samples,
        types,
        text: text.to_owned(),
    }
}

/// The labels after `{`, and what follows the closing `}`.
fn parse_labels(s: &str) -> (Labels, &str) {
    let mut labels = Labels::new();
    let mut rest = s;
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return (labels, after);
        }
        let (name, after) = rest.split_once("=\"").expect("label=\"value\"");
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next().expect("a label value ends with a quote") {
                (_, '\\') => match chars.next().expect("an escape has a character").1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        labels.insert(name.to_owned(), value);
        rest = &after[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

impl Scrape {
    /// The sample `name` with exactly `labels` (0 when absent: a counter
    /// that has not counted yet).
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let labels: Labels = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.samples
            .get(&(name.to_owned(), labels))
            .copied()
            .unwrap_or(0.0)
    }

    /// The sum of every sample `name` whose labels include `labels`.
    fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|((n, l), _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|(_, v)| *v)
            .sum()
    }
}

#[test]
fn the_parser_reads_labels_escapes_and_eof() {
    let s = parse(
        "# HELP a_total A.\n# TYPE a counter\n\
         a_total{route=\"/agents/{id}\",m=\"x\\\"y\\\\z\"} 3\n\
         b 1.5\n# EOF\n",
    );
    assert_eq!(
        s.value("a_total", &[("route", "/agents/{id}"), ("m", "x\"y\\z")]),
        3.0
    );
    assert_eq!(s.value("b", &[]), 1.5);
    assert_eq!(s.types["a"], "counter");
    assert_eq!(s.value("a_total", &[("route", "/agents")]), 0.0);
}

// ----------------------------------------------------------------- helpers

async fn scrape(api: &Api) -> Scrape {
    let reply = api.get("/metrics").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        reply.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    parse(&reply.text)
}

/// Scrapes until `done` holds, within the deadline.
async fn scrape_until(api: &Api, what: &str, done: impl Fn(&Scrape) -> bool) -> Scrape {
    let start = Instant::now();
    loop {
        let s = scrape(api).await;
        if done(&s) {
            return s;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "timed out after {DEADLINE:?} waiting for {what}; last scrape:\n{}",
            s.text
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

fn requests(route: &str, method: &str, status: &str) -> [(&'static str, String); 3] {
    [
        ("route", route.to_owned()),
        ("method", method.to_owned()),
        ("status", status.to_owned()),
    ]
}

fn requests_of(s: &Scrape, route: &str, method: &str, status: &str) -> f64 {
    let l = requests(route, method, status);
    let l: Vec<(&str, &str)> = l.iter().map(|(k, v)| (*k, v.as_str())).collect();
    s.value("agentmesh_http_requests_total", &l)
}

const TOKEN: &str = "metrics-test-secret-token-4711";

// ----------------------------------------------------------------- metrics

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_move_with_what_the_node_does() {
    let population = Population::generate(&PopulationConfig {
        misbehaving: vec![Behaviour::FingerprintMismatch],
        ..PopulationConfig::healthy(41, 2)
    });
    let testbed = Testbed::start(population, TestbedOptions::default())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    testbed.write_ca(&ca).unwrap();
    let node = tokio::task::block_in_place(|| {
        TestNode::builder()
            .crawling(&testbed, &ca)
            .env("AGENTMESH_API__ADMIN_TOKEN", TOKEN)
            .start()
    });
    let api = node.api();
    let admin = api.with_token(TOKEN);

    // (A family without samples yet is left out of the text.)
    let before = scrape(&api).await;
    assert_eq!(before.types["agentmesh_records_by_trust"], "gauge");
    assert_eq!(before.types["agentmesh_peers_connected"], "gauge");
    assert_eq!(before.types["agentmesh_text_index_segments"], "gauge");

    // A registration, a 404 on a route and one on no route, searches.
    admin.register(&minimal_agent("metrics-agent")).await;
    api.get("/agents/no-such-agent")
        .await
        .expect_error(404, "NotFound");
    api.get("/no/such/route")
        .await
        .expect_error(404, "NotFound");
    api.post(
        "/agents/search",
        &json!({"query": "translation", "scope": "local"}),
    )
    .await
    .expect(200);
    api.post("/agents/search", &json!({"query": "translation"}))
        .await
        .expect(200);
    api.get("/agents?capabilities=translation")
        .await
        .expect(200);

    // A crawl of a healthy agent and of one whose chain is broken.
    let healthy = testbed.population().agents()[0].domain.clone();
    let broken = testbed
        .population()
        .domain_of(Behaviour::FingerprintMismatch)
        .unwrap()
        .to_owned();
    let crawl = admin
        .post(
            "/crawl",
            &json!({"domains": [healthy, broken], "wait": true}),
        )
        .await;
    let reports = crawl.expect(200)["reports"].as_array().unwrap().clone();
    let stored = reports.iter().filter(|r| r["stored"] == true).count() as f64;
    let not_stored = reports.len() as f64 - stored;
    assert!(stored >= 1.0 && not_stored >= 1.0, "{reports:?}");
    let mut reasons: BTreeMap<String, f64> = BTreeMap::new();
    for r in &reports {
        for code in r["reasons"].as_array().unwrap() {
            *reasons
                .entry(code.as_str().unwrap().to_owned())
                .or_default() += 1.0;
        }
    }
    assert!(reasons.contains_key("fingerprint_mismatch"), "{reports:?}");

    let after = scrape(&api).await;
    for (family, kind) in [
        ("agentmesh_http_requests", "counter"),
        ("agentmesh_search_duration_seconds", "histogram"),
        ("agentmesh_crawl_job_duration_seconds", "histogram"),
        ("agentmesh_crawls", "counter"),
        ("agentmesh_crawl_reasons", "counter"),
        ("agentmesh_records_by_source", "gauge"),
        ("agentmesh_mesh_records", "counter"),
    ] {
        assert_eq!(
            after.types.get(family).map(String::as_str),
            Some(kind),
            "{family}"
        );
    }
    let delta = |f: &dyn Fn(&Scrape) -> f64| f(&after) - f(&before);

    // Requests, by route template and status (the scrape before counts).
    assert_eq!(delta(&|s| requests_of(s, "/agents", "POST", "201")), 1.0);
    assert_eq!(
        delta(&|s| requests_of(s, "/agents/{id}", "GET", "404")),
        1.0
    );
    assert_eq!(delta(&|s| requests_of(s, "unmatched", "GET", "404")), 1.0);
    assert_eq!(
        delta(&|s| requests_of(s, "/agents/search", "POST", "200")),
        2.0
    );
    assert_eq!(delta(&|s| requests_of(s, "/crawl", "POST", "200")), 1.0);
    assert_eq!(delta(&|s| requests_of(s, "/metrics", "GET", "200")), 1.0);
    assert!(
        !after.text.contains("/no/such/route") && !after.text.contains("no-such-agent"),
        "a raw path became a label:\n{}",
        after.text
    );

    // Searches by scope: a local search, GET /agents, a mesh search.
    let count = "agentmesh_search_duration_seconds_count";
    assert_eq!(delta(&|s| s.value(count, &[("scope", "local")])), 2.0);
    assert_eq!(delta(&|s| s.value(count, &[("scope", "mesh")])), 1.0);
    assert_eq!(
        after.value(
            "agentmesh_search_duration_seconds_bucket",
            &[("scope", "local"), ("le", "+Inf")]
        ),
        after.value(count, &[("scope", "local")]),
    );

    // Crawl outcomes and reasons: what the reports said, one job timed.
    assert_eq!(
        delta(&|s| s.value("agentmesh_crawls_total", &[("outcome", "stored")])),
        stored
    );
    assert_eq!(
        delta(&|s| s.value("agentmesh_crawls_total", &[("outcome", "not_stored")])),
        not_stored
    );
    for (code, n) in &reasons {
        assert_eq!(
            delta(&|s| s.value("agentmesh_crawl_reasons_total", &[("reason", code)])),
            *n,
            "reason {code}"
        );
    }
    assert_eq!(
        delta(&|s| s.value("agentmesh_crawl_job_duration_seconds_count", &[])),
        1.0
    );

    // Records held: the registration is local, the healthy crawl is this
    // node's; by trust they add up to what the node holds.
    let by_source =
        |s: &Scrape, source: &str| s.value("agentmesh_records_by_source", &[("source", source)]);
    assert_eq!(delta(&|s| by_source(s, "local")), 1.0);
    assert_eq!(delta(&|s| by_source(s, "crawl")), stored);
    assert_eq!(by_source(&after, "mesh"), 0.0);
    let held = api.get("/health").await.expect(200)["records"]
        .as_f64()
        .unwrap();
    assert_eq!(after.sum("agentmesh_records_by_trust", &[]), held);
    assert_eq!(held, 1.0 + stored);

    // The registration was committed to the text index before the text
    // search answered: it sits in a segment.
    assert!(after.value("agentmesh_text_index_segments", &[]) >= 1.0);

    // No peers; and nothing secret in the text.
    assert_eq!(after.value("agentmesh_peers_connected", &[]), 0.0);
    assert!(!after.text.contains(TOKEN), "the admin token is exposed");
    assert!(!after.text.to_ascii_lowercase().contains("bearer"));

    // A suspension writes no record, yet the agent leaves the listings
    // and the count by source with them; it is still held.
    admin
        .put(
            "/admin/agents/metrics-agent/suspension",
            &json!({"reason": "metrics test"}),
        )
        .await
        .expect(200);
    let suspended = scrape(&api).await;
    assert_eq!(
        by_source(&suspended, "local"),
        by_source(&after, "local") - 1.0
    );
    assert_eq!(suspended.sum("agentmesh_records_by_trust", &[]), held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_peers_their_records_and_dht_queries() {
    // Both on loopback: the mesh's address policy must allow it.
    let private = "AGENTMESH_P2P__ALLOW_PRIVATE_ADDRESSES";
    let first = tokio::task::block_in_place(|| TestNode::builder().env(private, "true").start());
    let api1 = first.api();
    let addr = api1.get("/health").await.expect(200)["listen_addrs"][0]
        .as_str()
        .unwrap()
        .to_owned();
    let second = tokio::task::block_in_place(|| {
        TestNode::builder()
            .env(private, "true")
            .args(&["--bootstrap", &addr])
            .start()
    });
    let api2 = second.api();

    for api in [&api1, &api2] {
        scrape_until(api, "a connected peer", |s| {
            s.value("agentmesh_peers_connected", &[]) == 1.0
        })
        .await;
    }

    // A record registered on the second node reaches the first one
    // (gossip or a DHT put): the first node's judge accepts it.
    api2.register(&minimal_agent("from-the-second-node")).await;
    let s = scrape_until(&api1, "a record from the peer accepted", |s| {
        s.sum("agentmesh_mesh_records_total", &[("verdict", "accepted")]) >= 1.0
    })
    .await;
    assert_eq!(s.types["agentmesh_mesh_records"], "counter");
    // (A scrape reads the records before the mesh counters: the record
    // may have arrived in between.)
    let s = scrape_until(&api1, "the peer's record held as from the mesh", |s| {
        s.value("agentmesh_records_by_source", &[("source", "mesh")]) == 1.0
    })
    .await;
    assert_eq!(
        s.value("agentmesh_records_by_source", &[("source", "local")]),
        0.0
    );

    // The second node's publish ran Kademlia queries, which ended, and
    // their requests to the first node are counted by kind.
    let s = scrape_until(&api2, "a finished put_record query that sent", |s| {
        s.sum("agentmesh_dht_queries_total", &[("kind", "put_record")]) >= 1.0
            && s.sum(
                "agentmesh_dht_requests_sent_total",
                &[("kind", "put_record")],
            ) >= 1.0
    })
    .await;
    for family in [
        "agentmesh_dht_requests_sent",
        "agentmesh_dht_requests_failed",
    ] {
        assert_eq!(s.types[family], "counter", "{}", s.text);
    }
    for (name, labels) in s.samples.keys() {
        if name == "agentmesh_dht_queries_total" {
            assert!(
                ["ok", "error", "timeout"].contains(&labels["outcome"].as_str()),
                "{labels:?}"
            );
        }
    }

    // libp2p counted the bytes both ways.
    for direction in ["Inbound", "Outbound"] {
        assert!(
            s.sum("libp2p_bandwidth_bytes_total", &[("direction", direction)]) > 0.0,
            "no {direction} bytes:\n{}",
            s.text
        );
    }
}

// ------------------------------------------------------------- request ids

fn request_id(reply: &Reply) -> String {
    reply
        .header("x-request-id")
        .unwrap_or_else(|| panic!("{}: no X-Request-Id", reply.request))
        .to_owned()
}

async fn get_with_id(api: &Api, path: &str, id: &[u8]) -> Reply {
    let value = reqwest::header::HeaderValue::from_bytes(id).unwrap();
    api.send(
        format!("GET {path} with X-Request-Id {id:?}"),
        api.request(reqwest::Method::GET, path)
            .header("x-request-id", value),
    )
    .await
}

#[tokio::test]
async fn every_response_carries_a_request_id() {
    let node = TestNode::start();
    let api = node.api();
    let replies = [
        api.get("/health").await,
        api.get("/health").await,
        api.get("/agents/nobody").await,
        api.get("/no/route").await,
        api.delete("/health").await,
        api.post("/agents", &json!({"not": "an agent"})).await,
    ];
    assert_eq!(
        replies.iter().map(|r| r.status).collect::<Vec<_>>(),
        [200, 200, 404, 404, 405, 400]
    );
    let ids: Vec<String> = replies.iter().map(request_id).collect();
    let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len(), "ids repeat: {ids:?}");
    for id in &ids {
        assert!(
            id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "a generated id is 32 hex digits: {id}"
        );
    }
}

#[tokio::test]
async fn a_sane_incoming_request_id_is_echoed_and_others_replaced() {
    let node = TestNode::start();
    let api = node.api();
    let sane = "3f2a9c1e-trace.42:span_7";
    assert_eq!(
        request_id(&get_with_id(&api, "/health", sane.as_bytes()).await),
        sane
    );
    // On an error too.
    assert_eq!(
        request_id(&get_with_id(&api, "/nowhere", sane.as_bytes()).await),
        sane
    );
    let longest = "a".repeat(agentmesh::api::MAX_REQUEST_ID_BYTES);
    assert_eq!(
        request_id(&get_with_id(&api, "/health", longest.as_bytes()).await),
        longest
    );

    let oversized = "a".repeat(agentmesh::api::MAX_REQUEST_ID_BYTES + 1);
    for weird in [
        oversized.as_bytes(),
        b"two words".as_slice(),
        b"semi;colon",
        b"<script>",
        b"caf\xc3\xa9",
        b"",
    ] {
        let reply = get_with_id(&api, "/health", weird).await;
        assert_eq!(reply.status, 200);
        let id = request_id(&reply);
        assert_ne!(id.as_bytes(), weird, "kept {weird:?}");
        assert_eq!(id.len(), 32, "replaced by a generated id: {id}");
    }
}

// -------------------------------------------------------------------- logs

/// Whether a JSON log line carries `request_id` = `id` in its span or in
/// one of the spans around it.
fn carries_request_id(line: &Value, id: &str) -> bool {
    let in_span = |s: &Value| s["request_id"] == id;
    in_span(&line["span"])
        || line["spans"]
            .as_array()
            .is_some_and(|a| a.iter().any(in_span))
}

#[tokio::test]
async fn json_logs_are_json_lines_carrying_the_request_id() {
    let node = TestNode::builder()
        .args(&["--log-format", "json"])
        .env("RUST_LOG", "info,tower_http=debug")
        .start();
    let api = node.api();
    let id = "json-log-request-1";
    get_with_id(&api, "/agents/nobody", id.as_bytes())
        .await
        .expect_error(404, "NotFound");

    let start = Instant::now();
    let lines: Vec<Value> = loop {
        let text = node.stderr();
        let lines: Vec<Value> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}"))
            })
            .collect();
        if lines.iter().any(|l| carries_request_id(l, id)) {
            break lines;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "timed out after {DEADLINE:?} waiting for a log line with request_id {id}:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let line = lines.iter().find(|l| carries_request_id(l, id)).unwrap();
    assert!(
        line["timestamp"].is_string() && line["level"].is_string(),
        "{line}"
    );
    let span = if line["span"]["request_id"] == id {
        &line["span"]
    } else {
        line["spans"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["request_id"] == id)
            .unwrap()
    };
    assert_eq!(span["name"], "request");
    assert_eq!(span["route"], "/agents/{id}");
    assert!(
        lines
            .iter()
            .any(|l| l["fields"]["message"] == "node started"),
        "the node's own lines are JSON too"
    );
}

#[tokio::test]
async fn the_log_format_can_come_from_the_environment() {
    let node = TestNode::builder()
        .env("AGENTMESH_LOG_FORMAT", "json")
        .start();
    let start = Instant::now();
    loop {
        let text = node.stderr();
        if let Some(line) = text.lines().find(|l| l.contains("node started")) {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            assert_eq!(v["fields"]["message"], "node started");
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "no 'node started' line:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // The default is text.
    let plain = TestNode::start();
    let start = Instant::now();
    loop {
        let text = plain.stderr();
        if let Some(line) = text.lines().find(|l| l.contains("node started")) {
            assert!(serde_json::from_str::<Value>(line).is_err(), "{line}");
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "no 'node started' line:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
