//! Signed liveness results across the mesh (docs/protocol.md#probe):
//! real nodes over libp2p on loopback, node A probing the testbed's
//! invokable agents over TLS with the test CA. A public agent's result,
//! signed by A, reaches the other nodes by gossip and is shown there as
//! `checked_by` A; `alive_within` counts it on a node that trusts A and
//! not on one that does not. A private agent's result never leaves A.

use std::path::Path;
use std::time::Duration;

use agentmesh::config::Config;
use agentmesh::node::Node;
use agentmesh::testbed::agents::AidipMode;
use serde_json::{json, Value};

use crate::common::{test_agents as agents, wait_until, Api, TestAgents as Agents};

/// A node on loopback, in process; `probes` makes it probe its
/// registrations (the testbed's agents reachable); `tweak` the rest.
async fn node(dir: &Path, probes: Option<&Agents>, tweak: impl FnOnce(&mut Config)) -> Node {
    let mut config = Config {
        data_dir: dir.to_path_buf(),
        ..Config::default()
    };
    config.api.listen = "127.0.0.1:0".parse().unwrap();
    config.api.limits.enabled = false;
    config.p2p.listen = vec!["/ip4/127.0.0.1/tcp/0".into()];
    config.p2p.allow_private_addresses = true;
    config.p2p.search_timeout = Duration::from_secs(2);
    config.crawl.follow_peers = false;
    if let Some(a) = probes {
        config.crawl.allow_private_addresses = true;
        config.crawl.allowed_ports = vec![a.agents.addr().port()];
        config.crawl.ca_files = vec![a.ca_file.clone()];
        config.crawl.probe_registered = true;
        config.crawl.probe_timeout = Duration::from_secs(1);
        config.crawl.per_host_interval = Duration::from_millis(1);
        config.crawl.per_address_interval = Duration::ZERO;
    }
    tweak(&mut config);
    Node::spawn(config).await.expect("the node starts")
}

fn api(n: &Node) -> Api {
    Api::new(format!("http://{}", n.api_addr()))
}

/// Whether `n` holds a record of `id`.
async fn holds(n: &Node, id: &str) -> bool {
    n.registry().store().get(id).await.unwrap().is_some()
}

async fn connected(nodes: &[&Node]) {
    for n in nodes {
        wait_until("the node has a peer", || async {
            n.mesh().status().await.is_ok_and(|s| s.connected_peers > 0)
        })
        .await;
    }
}

/// The `checked_by` entries of `id`'s summary on `n`.
async fn checked_by(n: &Node, id: &str) -> Vec<Value> {
    let summary = api(n).get(&format!("/agents/{id}/summary")).await;
    summary.body["checked_by"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The ids a local search with `alive_within` answers on `n`.
async fn alive(n: &Node) -> Vec<String> {
    let r = api(n)
        .post(
            "/agents/search",
            &json!({"scope": "local", "filters": {"alive_within": 600}}),
        )
        .await;
    r.expect(200)
        .as_array()
        .expect("an array of results")
        .iter()
        .filter_map(|s| s["id"].as_str().map(str::to_owned))
        .collect()
}

/// The candidates `POST /resolve` answers on `n` for `intent` with
/// `policy`.
async fn resolved(n: &Node, policy: Value) -> Vec<String> {
    let body = json!({"intent": "echo some text", "policy": policy, "top": 10});
    let r = api(n).post("/resolve", &body).await;
    r.expect(200)["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["id"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_peers_signed_probe_counts_and_an_untrusted_ones_is_only_shown() {
    let a_agents = agents().await;
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = node(dirs[0].path(), Some(&a_agents), |_| {}).await;
    let boot = a.listen_addrs().to_vec();
    let a_peer = a.peer_id().to_owned();
    // B trusts A; C knows A only as a peer.
    let b = node(dirs[1].path(), None, |c| {
        c.p2p.bootstrap = boot.clone();
        c.p2p.trusted_peers = vec![a_peer.clone()];
    })
    .await;
    let c = node(dirs[2].path(), None, |c| c.p2p.bootstrap = boot).await;
    connected(&[&a, &b, &c]).await;

    let doc = a_agents
        .agents
        .aidip_document("echo-live", AidipMode::Ok, "none");
    api(&a).post("/agents", &doc).await.expect(201);
    for (n, trusted) in [(&b, true), (&c, false)] {
        wait_until("the peer shows A's signed result", || async {
            !checked_by(n, "echo-live").await.is_empty()
        })
        .await;
        let checks = checked_by(n, "echo-live").await;
        assert_eq!(checks.len(), 1, "{checks:?}");
        let check = &checks[0];
        assert_eq!(check["node"], a_peer.as_str(), "{check}");
        assert_eq!(check["state"], "alive", "{check}");
        assert_eq!(check["protocol"], "aidip", "{check}");
        assert_eq!(check["trusted"], trusted, "{check}");
        assert!(check["rtt_ms"].as_u64().is_some(), "{check}");
        // The same time as A's own result.
        let own = api(&a).get("/agents/echo-live/summary").await;
        assert_eq!(
            check["checked_at"],
            own.expect(200)["liveness"]["checked_at"]
        );
        // The peer does not probe: it has no result of its own.
        let summary = api(n).get("/agents/echo-live/summary").await;
        assert!(summary.expect(200).get("liveness").is_none());
    }
    // `alive_within` counts the trusted peer's result only.
    assert_eq!(alive(&b).await, ["echo-live"]);
    assert!(alive(&c).await.is_empty());
    // The same for resolution, once the text index has the agent.
    for n in [&b, &c] {
        wait_until("the text index has the agent", || async {
            !resolved(n, json!({})).await.is_empty()
        })
        .await;
    }
    assert_eq!(
        resolved(&b, json!({"alive_within": 600})).await,
        ["echo-live"]
    );
    assert!(resolved(&c, json!({"alive_within": 600})).await.is_empty());
    for n in [a, b, c] {
        n.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_agents_probe_result_never_leaves_the_node() {
    let a_agents = agents().await;
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = node(dir_a.path(), Some(&a_agents), |_| {}).await;
    let boot = a.listen_addrs().to_vec();
    let a_peer = a.peer_id().to_owned();
    let b = node(dir_b.path(), None, |c| {
        c.p2p.bootstrap = boot;
        c.p2p.trusted_peers = vec![a_peer];
    })
    .await;
    connected(&[&a, &b]).await;

    // The private agent first, probed by A...
    let mut private = a_agents
        .agents
        .aidip_document("echo-secret", AidipMode::Ok, "none");
    private["visibility"] = json!({"visibility": "private", "clients": ["key:0011223344556677"]});
    api(&a).post("/agents", &private).await.expect(201);
    let store = a.registry().store().clone();
    wait_until("A probed the private agent", || async {
        store
            .freshness("echo-secret")
            .await
            .unwrap()
            .is_some_and(|f| f.liveness.is_some())
    })
    .await;
    // ...then a public one: A publishes in order, so once B has the
    // public agent's result it would have had anything A sent before.
    let public = a_agents
        .agents
        .aidip_document("echo-open", AidipMode::Ok, "none");
    api(&a).post("/agents", &public).await.expect(201);
    wait_until("B shows A's result of the public agent", || async {
        !checked_by(&b, "echo-open").await.is_empty()
    })
    .await;
    let peers = api(&b).get("/peers").await;
    let liveness = &peers.expect(200)["records"]["liveness"];
    assert_eq!(
        liveness,
        &json!({"received": 1, "stored": 1, "unknown_agent": 0}),
        "B received one liveness record, the public agent's"
    );
    assert!(!holds(&b, "echo-secret").await);
    for n in [a, b] {
        n.shutdown().await.unwrap();
    }
}
