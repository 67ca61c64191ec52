//! The MCP Registry both ways: a node follows an upstream registry
//! (`crawl.mcp_upstreams`, `crawl::follow`) and serves what it holds on
//! the registry's own `/v0.1` API. The upstream is the testbed's
//! registry on loopback over TLS (`testbed::upstream`), speaking the list
//! API as the registry's OpenAPI document describes it; the node is the
//! real binary, or the follower in process over a store on disk.
//! `mcp_registry/interop.rs` judges the served API by what others wrote:
//! the registry's own OpenAPI document and a published client.

use crate::common;

mod interop;

use std::sync::Arc;
use std::time::Duration;

use agentmesh::crawl::follow::Follower;
use agentmesh::crawl::{AllowedPorts, Crawler, CrawlerOptions};
use agentmesh::issuer::Issuer;
use agentmesh::net::AddressPolicy;
use agentmesh::registry::Registry;
use agentmesh::store::Store;
use agentmesh::testbed::upstream::UpstreamRegistry;
use agentmesh::testbed::TestCa;
use common::{wait_until, Api, TestNode};
use serde_json::{json, Value};

const OFFICIAL: &str = "io.modelcontextprotocol.registry/official";
/// A time the upstream's servers were published at (unix seconds).
const T0: u64 = 1_760_000_000;

fn server(name: &str, version: &str, description: &str) -> Value {
    json!({
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": name,
        "description": description,
        "version": version,
        "remotes": [{"type": "streamable-http", "url": format!("https://{}.example.com/mcp", name.replace('/', "-"))}],
    })
}

/// `n` servers named `io.example/s{i:03}`.
fn publish_many(upstream: &UpstreamRegistry, n: usize) {
    for i in 0..n {
        upstream.publish(
            server(
                &format!("io.example/s{i:03}"),
                "1.0.0",
                &format!("Server number {i}"),
            ),
            T0 + i as u64,
        );
    }
}

struct InProcess {
    _dir: tempfile::TempDir,
    store: Store,
    follower: Follower,
}

/// A follower over `store`, fetching from `upstream` (its CA in
/// `ca_file`) with loopback allowed, asking again after 10 s.
fn follower_over(
    store: &Store,
    upstream: &UpstreamRegistry,
    ca_file: &std::path::Path,
) -> Follower {
    let key = Arc::new(agentmesh::identity::generate());
    let issuer = Issuer::new(store.clone(), key.clone(), Duration::from_secs(3600));
    let options = CrawlerOptions {
        ca_files: vec![ca_file.to_path_buf()],
        policy: AddressPolicy {
            allow_private: true,
        },
        allowed_ports: AllowedPorts::new([upstream.addr().port()]),
        ..CrawlerOptions::default()
    };
    let crawler = Crawler::new(options, key, "follower".into()).unwrap();
    Follower::new(crawler, Registry::new(issuer), Duration::from_secs(10))
}

/// A follower over a store on disk, fetching from `upstream` (its CA in
/// `ca_file`), asking again after 10 s.
fn follower(
    dir: tempfile::TempDir,
    upstream: &UpstreamRegistry,
    ca_file: &std::path::Path,
) -> InProcess {
    let store = Store::open(&dir.path().join("store"), 16 << 20).unwrap();
    let follower = follower_over(&store, upstream, ca_file);
    InProcess {
        _dir: dir,
        store,
        follower,
    }
}

fn ca_file(ca: &TestCa, dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("ca.pem");
    std::fs::write(&path, ca.ca_pem()).unwrap();
    path
}

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("agentmesh-mcp-registry-")
        .tempdir()
        .unwrap()
}

/// What the store holds for `name`: `Some(status)` for a live server,
/// `None` for none or a tombstone.
fn held(store: &Store, name: &str) -> Option<String> {
    match store.blocking().get(&format!("mcp:{name}")).unwrap()?.body {
        agentmesh::record::RecordBody::Descriptor(d) => {
            Some(d.descriptor.status.unwrap_or_default())
        }
        agentmesh::record::RecordBody::Tombstone(_) => None,
    }
}

fn since_param(t: u64) -> String {
    format!(
        "updated_since={}",
        agentmesh::formats::mcp::rfc3339(t).replace(':', "%3A")
    )
}

#[tokio::test]
async fn a_follower_reads_everything_once_then_only_what_changed() {
    let dir = tempdir();
    let ca = TestCa::new(&["agentmesh test CA"]).unwrap();
    let ca_path = ca_file(&ca, dir.path());
    let upstream = UpstreamRegistry::start(&ca).await.unwrap();
    publish_many(&upstream, 250);
    let base = upstream.base_url();
    let node = follower(dir, &upstream, &ca_path);

    let first = node.follower.pass(&base).await;
    assert_eq!(first.last_error, None, "{first:?}");
    assert_eq!(
        (first.created, first.pages),
        (250, 3),
        "100 servers a page: {first:?}"
    );
    assert_eq!(first.since, Some(T0 + 249), "the newest updatedAt seen");
    assert!(
        first.cursor.is_none() && first.synced_at.is_some(),
        "the pass finished"
    );
    let queries = upstream.queries();
    assert!(queries[0].contains("version=latest") && !queries[0].contains("updated_since"));
    assert!(
        queries[1].contains("cursor=") && queries[2].contains("cursor="),
        "{queries:?}"
    );

    // Changes upstream: a deprecation with its message, a deletion, a new
    // version, a new server.
    upstream.set_status(
        "io.example/s001",
        "deprecated",
        Some("use io.example/s002"),
        T0 + 1000,
    );
    upstream.set_status("io.example/s002", "deleted", None, T0 + 1001);
    upstream.publish(
        server("io.example/s003", "2.0.0", "Server number 3, again"),
        T0 + 1002,
    );
    upstream.publish(server("io.example/new", "0.1.0", "A new server"), T0 + 1003);
    let asked_before = upstream.queries().len();
    let second = node.follower.pass(&base).await;
    assert_eq!(second.last_error, None, "{second:?}");
    let asked = upstream.queries()[asked_before..].to_vec();
    assert_eq!(asked.len(), 1, "one page of changes: {asked:?}");
    assert!(
        asked[0].contains(&since_param(T0 + 249)) && !asked[0].contains("version="),
        "asks only for what changed since the newest it saw: {asked:?}"
    );
    assert_eq!(
        (second.created, second.updated, second.deleted),
        (251, 2, 1),
        "counts in all: {second:?}"
    );
    assert_eq!(
        held(&node.store, "io.example/s001").as_deref(),
        Some("deprecated")
    );
    assert_eq!(
        held(&node.store, "io.example/s002"),
        None,
        "deleted here too"
    );
    assert_eq!(
        held(&node.store, "io.example/new").as_deref(),
        Some("active")
    );
    let doc = node
        .store
        .document("mcp:io.example/s003")
        .await
        .unwrap()
        .unwrap();
    assert!(
        doc.contains("\"2.0.0\""),
        "the new version replaced the old: {doc}"
    );
    let deprecated = node
        .store
        .document("mcp:io.example/s001")
        .await
        .unwrap()
        .unwrap();
    assert!(
        deprecated.contains("use io.example/s002"),
        "the status message is kept: {deprecated}"
    );
    assert_eq!(second.since, Some(T0 + 1003));

    // Nothing changed: one page, nothing written.
    let third = node.follower.pass(&base).await;
    assert_eq!((third.created, third.updated, third.deleted), (251, 2, 1));
}

#[tokio::test]
async fn a_pass_that_fails_resumes_at_its_page_after_a_restart_and_waits_longer_each_time() {
    let dir = tempdir();
    let ca = TestCa::new(&["agentmesh test CA"]).unwrap();
    let ca_path = ca_file(&ca, dir.path());
    let upstream = UpstreamRegistry::start(&ca).await.unwrap();
    publish_many(&upstream, 250);
    let base = upstream.base_url();
    let data = dir.path().to_path_buf();
    let node = follower(dir, &upstream, &ca_path);

    upstream.fail_after(1, 2);
    let stopped = node.follower.pass(&base).await;
    assert_eq!((stopped.created, stopped.failures), (100, 1), "{stopped:?}");
    let cursor = stopped
        .cursor
        .clone()
        .expect("the cursor of the page that failed");
    assert!(
        stopped
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains("500"),
        "{stopped:?}"
    );
    let interval = Duration::from_secs(10);
    let at = stopped.attempted_at.unwrap();
    assert!(
        !stopped.due(at + 10, interval),
        "a failed upstream waits twice the interval"
    );
    assert!(stopped.due(at + 20, interval));

    // A second failure doubles the wait again.
    let again = node.follower.pass(&base).await;
    assert_eq!(again.failures, 2);
    assert!(!again.due(again.attempted_at.unwrap() + 39, interval));

    // "Restart": a new follower over the same data directory.
    let InProcess {
        _dir,
        store,
        follower,
    } = node;
    drop(follower);
    store.close().await.unwrap();
    let reopened = Store::open(&data.join("store"), 16 << 20).unwrap();
    let restarted = follower_over(&reopened, &upstream, &ca_path);
    let before = upstream.queries().len();
    let done = restarted.pass(&base).await;
    assert_eq!(done.last_error, None, "{done:?}");
    let asked = upstream.queries()[before..].to_vec();
    assert_eq!(asked.len(), 2, "pages 2 and 3 only: {asked:?}");
    assert!(asked[0].contains(&format!("cursor={cursor}")), "{asked:?}");
    assert_eq!((done.created, done.failures), (250, 0), "{done:?}");
    assert_eq!(reopened.len(), 250);
}

#[tokio::test]
async fn pages_that_break_the_rules_stop_the_pass_and_change_nothing() {
    let dir = tempdir();
    let ca = TestCa::new(&["agentmesh test CA"]).unwrap();
    let ca_path = ca_file(&ca, dir.path());
    let upstream = UpstreamRegistry::start(&ca).await.unwrap();
    let base = upstream.base_url();
    let node = follower(dir, &upstream, &ca_path);
    let item = json!({"server": server("io.example/a", "1.0.0", "A"), "_meta": {OFFICIAL: {"status": "active"}}});
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "not JSON",
            "{\"servers\": [".into(),
            "not a server list page",
        ),
        ("not a list", "{\"hello\": 1}".into(), "no servers array"),
        (
            "a cursor that repeats",
            json!({"servers": [item], "metadata": {"nextCursor": "c1"}}).to_string(),
            "repeats",
        ),
        (
            "too large",
            format!("{{\"servers\": [], \"pad\": \"{}\"}}", "x".repeat(5 << 20)),
            "larger than",
        ),
    ];
    for (what, body, says) in cases {
        upstream.answer_raw(Some(body));
        let mut state = node.follower.pass(&base).await;
        if what == "a cursor that repeats" {
            // The first page is read; the second asks with c1 and gets c1.
            state = node.follower.pass(&base).await;
        }
        let error = state.last_error.clone().unwrap_or_default();
        assert!(error.contains(says), "{what}: {error:?}");
        assert!(state.failures >= 1, "{what}: {state:?}");
        assert!(state.synced_at.is_none(), "{what}: never counted as synced");
    }
    // The one server of the repeating page is all that was written.
    assert!(node.store.len() <= 1);

    // An upstream at an address the node may not reach, or over http.
    upstream.answer_raw(None);
    let store = Store::open(&tempdir().path().join("store"), 16 << 20).unwrap();
    let key = Arc::new(agentmesh::identity::generate());
    let issuer = Issuer::new(store.clone(), key.clone(), Duration::from_secs(3600));
    let strict = CrawlerOptions {
        ca_files: vec![ca_path.clone()],
        allowed_ports: AllowedPorts::new([upstream.addr().port()]),
        ..CrawlerOptions::default()
    };
    let guarded = Follower::new(
        Crawler::new(strict, key, "follower".into()).unwrap(),
        Registry::new(issuer),
        Duration::from_secs(10),
    );
    let before = upstream.queries().len();
    let refused = guarded.pass(&base).await;
    assert!(
        refused
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains("may not connect"),
        "{refused:?}"
    );
    let insecure = guarded.pass(&base.replace("https", "http")).await;
    assert!(
        insecure
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains("TLS"),
        "{insecure:?}"
    );
    assert_eq!(upstream.queries().len(), before, "nothing was asked");
}

/// Every server of `path` (a `/v0.1/servers` query), following cursors.
async fn all_pages(api: &Api, path: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = match &cursor {
            Some(c) => format!("{path}{sep}cursor={c}"),
            None => path.to_owned(),
        };
        let reply = api.get(&url).await;
        let body = reply.expect(200);
        let servers = body["servers"].as_array().unwrap().clone();
        assert_eq!(body["metadata"]["count"], servers.len(), "{url}");
        out.extend(servers);
        match body["metadata"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return out,
        }
    }
    panic!("more than 100 pages of {path}");
}

fn names(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|i| i["server"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_follows_an_upstream_and_serves_what_it_holds_as_a_registry() {
    let dir = tempdir();
    let ca = TestCa::new(&["agentmesh test CA"]).unwrap();
    let ca_path = ca_file(&ca, dir.path());
    let upstream = UpstreamRegistry::start(&ca).await.unwrap();
    publish_many(&upstream, 120);
    upstream.set_status(
        "io.example/s007",
        "deprecated",
        Some("use io.example/s008"),
        T0 + 500,
    );
    let node = TestNode::builder()
        .calling(&[upstream.addr().port()], &ca_path)
        .env(
            "AGENTMESH_CRAWL__MCP_UPSTREAMS",
            &format!("[\"{}\"]", upstream.base_url()),
        )
        .env("AGENTMESH_CRAWL__MCP_FOLLOW_INTERVAL", "10s")
        .env("AGENTMESH_API__LIMITS__ENABLED", "false")
        .start();
    let api = node.api();
    wait_until("the node has followed its upstream once", || async {
        let health = api.get("/health").await;
        health.body["mcp_upstreams"][0]["synced_at"].is_u64()
    })
    .await;
    let health = api.get("/health").await;
    let state = &health.expect(200)["mcp_upstreams"][0];
    assert_eq!(state["url"], upstream.base_url());
    assert_eq!(state["created"], 120);

    // Served as a registry: pages in name order, no server twice.
    let all = all_pages(&api, "/v0.1/servers?limit=50").await;
    let mut expected: Vec<String> = (0..120).map(|i| format!("io.example/s{i:03}")).collect();
    expected.sort();
    assert_eq!(names(&all), expected);
    let s007 = all
        .iter()
        .find(|i| i["server"]["name"] == "io.example/s007")
        .unwrap();
    assert_eq!(s007["_meta"][OFFICIAL]["status"], "deprecated");
    assert_eq!(
        s007["_meta"][OFFICIAL]["statusMessage"],
        "use io.example/s008"
    );
    assert_eq!(s007["_meta"][OFFICIAL]["isLatest"], true);
    assert!(
        s007["server"].get("_meta").is_none(),
        "the server as published: {s007}"
    );
    assert_eq!(s007["server"]["description"], "Server number 7");

    // Search, version, one server by its URL-encoded name.
    let found = api.get("/v0.1/servers?search=S11").await;
    assert_eq!(
        names(found.expect(200)["servers"].as_array().unwrap()),
        (110..120)
            .map(|i| format!("io.example/s{i:03}"))
            .collect::<Vec<_>>()
    );
    let none = api.get("/v0.1/servers?version=9.9.9").await;
    assert_eq!(none.expect(200)["servers"], json!([]));
    let one = api
        .get("/v0.1/servers/io.example%2Fs042/versions/latest")
        .await;
    assert_eq!(one.expect(200)["server"]["name"], "io.example/s042");
    let exact = api
        .get("/v0.1/servers/io.example%2Fs042/versions/1.0.0")
        .await;
    assert_eq!(exact.expect(200)["server"]["version"], "1.0.0");
    let versions = api.get("/v0.1/servers/io.example%2Fs042/versions").await;
    assert_eq!(versions.expect(200)["servers"].as_array().unwrap().len(), 1);
    let missing = api
        .get("/v0.1/servers/io.example%2Fnope/versions/latest")
        .await;
    assert_eq!(missing.expect(404)["error"], "Server not found");
    let wrong = api
        .get("/v0.1/servers/io.example%2Fs042/versions/2.0.0")
        .await;
    assert_eq!(wrong.expect(404)["error"], "Server version not found");
    for bad in [
        "/v0.1/servers?limit=0",
        "/v0.1/servers?limit=101",
        "/v0.1/servers?updated_since=yesterday",
        "/v0.1/servers?cursor=%%%",
        "/v0.1/servers?include_deleted=maybe",
    ] {
        let reply = api.get(bad).await;
        assert!(reply.expect(400)["error"].is_string(), "{bad}");
    }

    // Upstream, a server is deleted: the node deletes it, hides it from
    // the list, and answers it deleted to whoever asks for changes.
    // The newest change served so far: what a follower of this node
    // would ask for changes since.
    let asked_at = all
        .iter()
        .filter_map(|i| i["_meta"][OFFICIAL]["updatedAt"].as_str())
        .max()
        .unwrap()
        .to_owned();
    upstream.set_status("io.example/s003", "deleted", None, T0 + 600);
    wait_until("the node has followed the deletion", || async {
        api.get("/v0.1/servers/io.example%2Fs003/versions/latest")
            .await
            .status
            == 404
    })
    .await;
    let listed = all_pages(&api, "/v0.1/servers?limit=100").await;
    assert_eq!(listed.len(), 119);
    let with_deleted = all_pages(&api, "/v0.1/servers?include_deleted=true").await;
    let gone = with_deleted
        .iter()
        .find(|i| i["server"]["name"] == "io.example/s003")
        .expect("a deleted server is answered when asked for");
    assert_eq!(gone["_meta"][OFFICIAL]["status"], "deleted");
    assert_eq!(gone["server"]["description"], "Server number 3");
    let changes = api
        .get(&format!(
            "/v0.1/servers?updated_since={}",
            asked_at.replace(':', "%3A")
        ))
        .await;
    assert_eq!(
        names(changes.expect(200)["servers"].as_array().unwrap()),
        vec!["io.example/s003".to_owned()],
        "the changes since a time include the deletion"
    );
    let metrics = api.get("/metrics").await;
    assert!(
        metrics
            .text
            .contains("agentmesh_mcp_upstream_servers_total{outcome=\"created\"} 120"),
        "{}",
        metrics.text
    );
    assert!(metrics
        .text
        .contains("agentmesh_mcp_upstream_servers_total{outcome=\"deleted\"} 1"));
    assert!(metrics
        .text
        .contains("agentmesh_mcp_upstream_syncs_total{result=\"ok\"}"));
}
