//! Five real nodes in one process, joined over loopback TCP: records
//! registered on one node are found by searches on the others, deletions
//! propagate, a late joiner catches up, forged records are refused
//! everywhere and counted, and a peer that never answers does not stall a
//! search past its deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentmesh::config::Config;
use agentmesh::mesh::wire::{SearchRequest, SearchResponse};
use agentmesh::mesh::{Mesh, MeshConfig, MeshHandler, RecordOrigin, Verdict};
use agentmesh::node::Node;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde_json::{json, Value};

const DEADLINE: Duration = Duration::from_secs(10);

async fn node(bootstrap: &[String]) -> (Node, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config {
        data_dir: dir.path().join("data"),
        ..Config::default()
    };
    config.api.listen = "127.0.0.1:0".parse().unwrap();
    config.p2p.listen = vec!["/ip4/127.0.0.1/tcp/0".into()];
    config.p2p.bootstrap = bootstrap.to_vec();
    config.p2p.search_timeout = Duration::from_secs(1);
    config.crawl.follow_peers = false;
    (Node::spawn(config).await.expect("the node starts"), dir)
}

async fn mesh_of(n: usize) -> Vec<(Node, tempfile::TempDir)> {
    let first = node(&[]).await;
    let boot = first.0.listen_addrs().to_vec();
    let mut nodes = vec![first];
    for _ in 1..n {
        nodes.push(node(&boot).await);
    }
    for (n, _) in &nodes {
        wait_until("every node has a peer", || async {
            n.mesh()
                .status()
                .await
                .map(|s| s.connected_peers > 0)
                .unwrap_or(false)
        })
        .await;
    }
    nodes
}

async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let until = Instant::now() + DEADLINE;
    while !check().await {
        assert!(
            Instant::now() < until,
            "timed out after {DEADLINE:?} waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn url(n: &Node, path: &str) -> String {
    format!("http://{}{path}", n.api_addr())
}

async fn search_ids(n: &Node, body: Value) -> Vec<String> {
    let r: Value = reqwest::Client::new()
        .post(url(n, "/agents/search"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    r.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn agent(id: &str, capability: &str) -> Value {
    json!({
        "id": id, "name": format!("agent {id}"), "description": "a test agent",
        "capabilities": [capability], "endpoint": "https://agents.example/x",
        "inputs": {"type": "object"}, "outputs": {"type": "object"}
    })
}

async fn register(n: &Node, doc: &Value) {
    let status = reqwest::Client::new()
        .post(url(n, "/agents"))
        .json(doc)
        .send()
        .await
        .unwrap()
        .status();
    assert!(status.is_success(), "registration answered {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_on_one_node_is_found_everywhere_and_its_deletion_too() {
    let nodes = mesh_of(5).await;
    let (first, last) = (&nodes[0].0, &nodes[4].0);
    register(first, &agent("far-away-1", "weather_forecast")).await;
    let query = json!({"filters": {"capabilities": ["weather_forecast"]}});
    wait_until("node 5 finds the agent registered on node 1", || async {
        search_ids(last, query.clone()).await == ["far-away-1"]
    })
    .await;
    let hit: Value = reqwest::Client::new()
        .post(url(last, "/agents/search"))
        .json(&query)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(hit[0]["source"], "mesh");
    assert_eq!(hit[0]["trust"]["level"], "unverified");

    // Deleted on node 2 (where it was registered) → gone everywhere.
    register(&nodes[1].0, &agent("short-lived", "tide_tables")).await;
    let q2 = json!({"filters": {"capabilities": ["tide_tables"]}});
    for (n, _) in &nodes {
        wait_until("every node finds short-lived", || async {
            search_ids(n, q2.clone()).await == ["short-lived"]
        })
        .await;
    }
    let status = reqwest::Client::new()
        .delete(url(&nodes[1].0, "/agents/short-lived"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 204);
    for (n, _) in &nodes {
        wait_until("the tombstone reaches every node", || async {
            search_ids(n, q2.clone()).await.is_empty()
        })
        .await;
    }
    // A node that joins late finds both the live agent and nothing deleted.
    let boot = first.listen_addrs().to_vec();
    let (late, _dir) = node(&boot).await;
    wait_until(
        "the late node finds the agent through a mesh search",
        || async { search_ids(&late, query.clone()).await == ["far-away-1"] },
    )
    .await;
    assert!(search_ids(&late, q2).await.is_empty());
}

/// A peer that publishes whatever it is given and never answers searches.
struct Rogue;

impl MeshHandler for Rogue {
    fn on_record(
        &self,
        _record: Vec<u8>,
        _from: libp2p::PeerId,
        _origin: RecordOrigin,
    ) -> BoxFuture<'static, Verdict> {
        async { Verdict::Accept }.boxed()
    }
    fn on_search(
        &self,
        _request: SearchRequest,
        _from: libp2p::PeerId,
    ) -> BoxFuture<'static, SearchResponse> {
        async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            SearchResponse::default()
        }
        .boxed()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_records_are_refused_and_a_silent_peer_does_not_stall_searches() {
    let nodes = mesh_of(3).await;
    let config = MeshConfig {
        listen: vec!["/ip4/127.0.0.1/tcp/0".parse().unwrap()],
        bootstrap: nodes[0]
            .0
            .listen_addrs()
            .iter()
            .map(|a| a.parse().unwrap())
            .collect(),
        ..MeshConfig::default()
    };
    let key = agentmesh::identity::generate();
    let cancel = tokio_util::sync::CancellationToken::new();
    let (rogue, _task) = Mesh::spawn(
        config,
        agentmesh::mesh::keypair_from_signing_key(&key),
        Arc::new(Rogue),
        cancel.clone(),
    )
    .await
    .unwrap();
    wait_until("the rogue peer joins the gossip", || async {
        rogue
            .status()
            .await
            .map(|s| s.gossip_mesh_peers > 0)
            .unwrap_or(false)
    })
    .await;

    // A record with a broken signature, and garbage.
    let d = agentmesh::descriptor::Descriptor {
        id: "forged-1".into(),
        name: "forged".into(),
        description: String::new(),
        version: None,
        publisher: None,
        endpoint: None,
        capabilities: vec!["forgery".into()],
        tags: vec![],
        languages: vec![],
        status: None,
        auth: None,
        format: agentmesh::descriptor::DocumentFormat::Aidip,
    };
    let body = agentmesh::record::DescriptorRecord::new(
        d,
        "{}".into(),
        1,
        agentmesh::record::unix_now(),
        3600,
        Default::default(),
    );
    let mut bytes = agentmesh::record::SignedRecord::sign_descriptor(&body, &key)
        .unwrap()
        .encode();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    rogue
        .publish(bytes, "forged-1".into(), vec![])
        .await
        .unwrap();
    rogue
        .publish(b"not a record".to_vec(), "garbage".into(), vec![])
        .await
        .unwrap();
    for (n, _) in &nodes {
        wait_until("a node counts the forged record as refused", || async {
            let peers: Value = reqwest::get(url(n, "/peers"))
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            peers["records"]["refused"]["bad_signature"]
                .as_u64()
                .unwrap_or(0)
                >= 1
        })
        .await;
        assert!(search_ids(
            n,
            json!({"filters": {"capabilities": ["forgery"]}, "scope": "local"})
        )
        .await
        .is_empty());
    }

    // The rogue never answers searches: node 1 still answers by its deadline.
    let started = Instant::now();
    let response = reqwest::Client::new()
        .post(url(&nodes[0].0, "/agents/search"))
        .json(&json!({"query": "anything"}))
        .send()
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_secs(5),
        "the search waited {elapsed:?}"
    );
    assert_eq!(response.headers()["x-agentmesh-partial"], "true");
    let unanswered = response.headers()["x-agentmesh-unanswered"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        unanswered.contains(&rogue.peer_id().to_string()),
        "{unanswered}"
    );
    cancel.cancel();
}
