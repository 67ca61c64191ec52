//! A mesh cut in two (docs/protocol.md#mesh-protocols and #witnessing):
//! four nodes, each in a network namespace of its own, split into two
//! halves by dropping every packet between them. Each half keeps
//! answering with what it holds; once the link is back, every node holds
//! what both halves registered while apart, within a bounded time, with
//! nothing but the nodes' own mechanisms (pings letting dead connections
//! go, bootstrap re-dials, the checkpoint asked of each peer met, repair
//! from its log).

use std::time::Duration;

use serde_json::json;

use crate::common::netns::{self, Network};
use crate::common::{agent, needs, wait_until, wait_until_within, Api, TestNode};

/// The nodes' API listens beyond loopback (on the bridge), which a node
/// allows only with a credential.
const TOKEN: &str = "partition-test-admin-token-7f3a9c2e51b84d06";
const ENV: [(&str, &str); 5] = [
    ("AGENTMESH_API__ADMIN_TOKEN", TOKEN),
    ("AGENTMESH_P2P__ALLOW_PRIVATE_ADDRESSES", "true"),
    ("AGENTMESH_P2P__WITNESS_INTERVAL", "200ms"),
    ("AGENTMESH_P2P__PING_INTERVAL", "500ms"),
    ("AGENTMESH_API__LIMITS__ENABLED", "false"),
];
/// How long a healed mesh may take to converge: re-dials of bootstrap
/// peers back off up to 16 s while the halves are apart, and each dial
/// that meets the cut waits out the 10 s handshake timeout.
const HEAL_BOUND: Duration = Duration::from_secs(60);

async fn holds(api: &Api, ids: &[String]) -> bool {
    let held = api.get("/agents?limit=100").await.ids();
    ids.iter().all(|id| held.contains(id))
}

/// The `put_record` queries of a node that ended, whatever their outcome.
async fn put_queries_ended(api: &Api) -> u64 {
    let metrics = api.get("/metrics").await.text;
    metrics
        .lines()
        .filter(|l| l.starts_with("agentmesh_dht_queries_total{kind=\"put_record\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

async fn connected_to(api: &Api, peer: &str) -> bool {
    api.get("/peers").await.text.contains(peer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: network namespaces (iproute2, iptables)"]
async fn a_mesh_cut_in_two_keeps_answering_and_converges_once_healed() {
    needs(
        netns::available().then_some(()),
        "root and network namespaces",
        "run as root with iproute2 and iptables",
    );
    let net = Network::new(4);
    // a0 a1 | b0 b1; each node bootstraps from every node started before
    // it, so each half is connected within itself.
    let mut nodes: Vec<TestNode> = Vec::new();
    let mut addrs: Vec<String> = Vec::new();
    for i in 0..4 {
        let mut builder = ENV
            .iter()
            .fold(TestNode::builder().in_netns(net.host(i)), |b, (k, v)| {
                b.env(k, v)
            });
        for addr in &addrs {
            builder = builder.args(&["--bootstrap", addr]);
        }
        let node = builder.start();
        let listen = node
            .api()
            .with_token(TOKEN)
            .get("/health")
            .await
            .expect(200)["listen_addrs"][0]
            .as_str()
            .expect("a listen address")
            .to_owned();
        addrs.push(listen);
        nodes.push(node);
    }
    let apis: Vec<Api> = nodes.iter().map(|n| n.api().with_token(TOKEN)).collect();
    let register = |api: &Api, id: String| {
        let api = api.clone();
        async move {
            api.post("/agents", &agent(&id, &["translation"], &[], &["en"]))
                .await
                .expect(201);
            id
        }
    };

    // Together: what each side registers reaches every node, and every
    // node witnesses both registering nodes' logs.
    let before = vec![
        register(&apis[0], "before-a".into()).await,
        register(&apis[2], "before-b".into()).await,
    ];
    for (n, api) in apis.iter().enumerate() {
        wait_until(&format!("node {n} to hold both early agents"), || {
            holds(api, &before)
        })
        .await;
    }
    for n in [0, 2] {
        wait_until(
            &format!("node {n}'s log to be witnessed by the three others"),
            || async { apis[n].get("/log/checkpoint?witnesses=3").await.status == 200 },
        )
        .await;
    }

    net.cut(&[0, 1], &[2, 3]);
    // The cut is silent; the pings find it and let the peers go.
    for (n, far) in [(0, 2), (0, 3), (1, 2), (1, 3), (2, 0), (3, 1)] {
        wait_until(&format!("node {n} to let node {far} go"), || async {
            !connected_to(&apis[n], nodes[far].peer_id()).await
        })
        .await;
    }
    let metrics = apis[0].get("/metrics").await.text;
    assert!(
        !metrics.contains("agentmesh_mesh_connections_dead_total 0\n"),
        "no connection was closed for its failed pings:\n{metrics}"
    );

    // Apart: each half registers, and answers with what it holds.
    let mut side_a = Vec::new();
    let mut side_b = Vec::new();
    for i in 0..4 {
        side_a.push(register(&apis[0], format!("apart-a-{i}")).await);
        side_b.push(register(&apis[2], format!("apart-b-{i}")).await);
    }
    for (n, own, other) in [(1, &side_a, &side_b), (3, &side_b, &side_a)] {
        wait_until(&format!("node {n} to hold its half's agents"), || {
            holds(&apis[n], own)
        })
        .await;
        let found = apis[n]
            .post(
                "/agents/search",
                &json!({"filters": {"capabilities": ["translation"]}}),
            )
            .await
            .ids();
        assert!(own.iter().all(|id| found.contains(id)), "{found:?}");
        assert!(!other.iter().any(|id| found.contains(id)), "{found:?}");
    }

    // Every DHT put made while apart has ended (its dials to the other
    // half failed): nothing in flight carries a record over once healed.
    for n in [0, 2] {
        wait_until_within(
            HEAL_BOUND,
            &format!("node {n}'s five DHT puts to end"),
            || async { put_queries_ended(&apis[n]).await >= 5 },
        )
        .await;
    }

    net.heal();
    let everything: Vec<String> = side_a.iter().chain(&side_b).cloned().collect();
    let mut took = Duration::ZERO;
    for (n, api) in apis.iter().enumerate() {
        let waited = wait_until_within(
            HEAL_BOUND.saturating_sub(took),
            &format!("node {n} to hold what both halves registered apart"),
            || holds(api, &everything),
        )
        .await;
        took += waited;
    }
    eprintln!("the healed mesh converged {took:?} after the heal");
}
