//! Five real nodes in one process, joined over loopback TCP: records
//! registered on one node are found by searches on the others, deletions
//! propagate, a late joiner catches up, forged records are refused
//! everywhere and counted, and a peer that never answers does not stall a
//! search past its deadline.

use crate::common::{wait_until, DEADLINE};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentmesh::config::{Config, Replication};
use agentmesh::mesh::wire::{SearchRequest, SearchResponse};
use agentmesh::mesh::{Mesh, MeshConfig, MeshHandler, RecordOrigin, Verdict};
use agentmesh::node::Node;
use agentmesh::registry::SearchQuery;
use agentmesh::search::{Asked, Scope, Unanswered};
use agentmesh::store::Filter;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde_json::{json, Value};

/// How long a wait may take (a wait ends as soon as its condition holds).
async fn node(bootstrap: &[String]) -> (Node, tempfile::TempDir) {
    node_with(bootstrap, |_| {}).await
}

async fn node_with(
    bootstrap: &[String],
    tweak: impl FnOnce(&mut Config),
) -> (Node, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config {
        data_dir: dir.path().join("data"),
        ..Config::default()
    };
    config.api.listen = "127.0.0.1:0".parse().unwrap();
    config.p2p.listen = vec!["/ip4/127.0.0.1/tcp/0".into()];
    config.p2p.bootstrap = bootstrap.to_vec();
    config.p2p.allow_private_addresses = true;
    config.p2p.search_timeout = Duration::from_secs(1);
    config.crawl.follow_peers = false;
    tweak(&mut config);
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

fn url(n: &Node, path: &str) -> String {
    format!("http://{}{path}", n.api_addr())
}

async fn search_ids(n: &Node, body: Value) -> Vec<String> {
    search_received(n, &body).await.0
}

/// A search's result ids and its `x-agentmesh-records-received` header
/// (0 when absent: a local search).
async fn search_received(n: &Node, body: &Value) -> (Vec<String>, u64) {
    let r = reqwest::Client::new()
        .post(url(n, "/agents/search"))
        .json(body)
        .send()
        .await
        .unwrap();
    let received = r
        .headers()
        .get("x-agentmesh-records-received")
        .map_or(0, |v| v.to_str().unwrap().parse().unwrap());
    let items: Value = r.json().await.unwrap();
    let ids = items
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["id"].as_str().map(str::to_owned))
        .collect();
    (ids, received)
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
    // The provider lookup behind the search is what GET /peers reports.
    let peers: Value = reqwest::get(url(last, "/peers"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let provider = peers["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["peer_id"] == first.peer_id())
        .unwrap_or_else(|| panic!("node 5 is not connected to node 1: {peers}"));
    assert_eq!(
        provider["provides"],
        json!(["weather_forecast"]),
        "{provider}"
    );

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookups_node_caches_what_it_searched_and_follows_its_tombstone() {
    let nodes = mesh_of(2).await;
    let boot = nodes[0].0.listen_addrs().to_vec();
    let (cache, _dir) = node_with(&boot, |c| c.p2p.replication = Replication::Lookups).await;
    wait_until("the lookups node joins the gossip mesh", || async {
        cache
            .mesh()
            .status()
            .await
            .is_ok_and(|s| s.gossip_mesh_peers >= 1)
    })
    .await;
    let before = cache.mesh().stats().gossip.accepted;
    register(&nodes[1].0, &agent("looked-up", "carbon_accounting")).await;
    wait_until("the lookups node validates the gossiped record", || async {
        cache.mesh().stats().gossip.accepted > before
    })
    .await;
    let local = json!({"filters": {"capabilities": ["carbon_accounting"]}, "scope": "local"});
    let mesh = json!({"filters": {"capabilities": ["carbon_accounting"]}});
    assert!(
        search_ids(&cache, local.clone()).await.is_empty(),
        "a lookups node does not store what it was merely offered"
    );
    let (ids, received) = search_received(&cache, &mesh).await;
    assert_eq!(ids, ["looked-up"]);
    assert!(received >= 1, "the peers sent the record");
    assert_eq!(
        search_ids(&cache, local.clone()).await,
        ["looked-up"],
        "what it looked up is cached"
    );
    // Asked again, the peers leave out what the node now holds.
    let (ids, received) = search_received(&cache, &mesh).await;
    assert_eq!(ids, ["looked-up"]);
    assert_eq!(received, 0, "a record the asker listed as known was sent");
    let status = reqwest::Client::new()
        .delete(url(&nodes[1].0, "/agents/looked-up"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 204);
    wait_until("the tombstone removes the cached agent", || async {
        search_ids(&cache, local.clone()).await.is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_announces_its_records_again() {
    let mut nodes = mesh_of(2).await;
    register(&nodes[1].0, &agent("comes-back", "bird_watching")).await;
    let (node, dir) = nodes.pop().unwrap();
    let peer = node.peer_id().to_owned();
    node.shutdown().await.unwrap();
    let boot = nodes[0].0.listen_addrs().to_vec();
    let data = dir.path().join("data");
    let again = Node::spawn({
        let mut c = Config {
            data_dir: data,
            ..Config::default()
        };
        c.api.listen = "127.0.0.1:0".parse().unwrap();
        c.p2p.listen = vec!["/ip4/127.0.0.1/tcp/0".into()];
        c.p2p.bootstrap = boot;
        c.p2p.allow_private_addresses = true;
        c
    })
    .await
    .unwrap();
    assert_eq!(again.peer_id(), peer, "the node keeps its identity");
    wait_until(
        "the restarted node provides its capability again",
        || async {
            again
                .mesh()
                .status()
                .await
                .is_ok_and(|s| s.provided_keys >= 1)
        },
    )
    .await;
    again.shutdown().await.unwrap();
}

/// An AIDIP descriptor record for `id` at `seq`, signed by `key`.
fn aidip_record(id: &str, capability: &str, seq: u64, key: &ed25519_dalek::SigningKey) -> Vec<u8> {
    let d = agentmesh::descriptor::Descriptor {
        id: id.into(),
        name: "forged".into(),
        description: String::new(),
        version: None,
        publisher: None,
        endpoint: None,
        capabilities: vec![capability.into()],
        tags: vec![],
        languages: vec![],
        status: None,
        auth: None,
        format: agentmesh::descriptor::DocumentFormat::Aidip,
    };
    let body = agentmesh::record::DescriptorRecord::new(
        d,
        "{}".into(),
        seq,
        agentmesh::record::unix_now(),
        3600,
        Default::default(),
    );
    agentmesh::record::SignedRecord::sign_descriptor(&body, key)
        .unwrap()
        .encode()
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

/// A [`Rogue`] mesh peer bootstrapped to `boot`, its key, and the token
/// that stops it.
async fn spawn_rogue(
    boot: &[String],
) -> (
    agentmesh::mesh::MeshClient,
    ed25519_dalek::SigningKey,
    tokio_util::sync::CancellationToken,
) {
    let config = MeshConfig {
        listen: vec!["/ip4/127.0.0.1/tcp/0".parse().unwrap()],
        bootstrap: boot.iter().map(|a| a.parse().unwrap()).collect(),
        allow_private_addresses: true,
        ..MeshConfig::default()
    };
    let key = agentmesh::identity::generate();
    let cancel = tokio_util::sync::CancellationToken::new();
    let (rogue, _task) = Mesh::spawn(
        config,
        agentmesh::identity::libp2p_keypair(&key),
        Arc::new(Rogue),
        cancel.clone(),
    )
    .await
    .unwrap();
    (rogue, key, cancel)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_records_are_refused_and_a_silent_peer_does_not_stall_searches() {
    let nodes = mesh_of(5).await;
    let (rogue, key, cancel) = spawn_rogue(nodes[0].0.listen_addrs()).await;
    wait_until("the rogue peer joins the gossip", || async {
        rogue
            .status()
            .await
            .map(|s| s.gossip_mesh_peers > 0)
            .unwrap_or(false)
    })
    .await;

    // A record with a broken signature, and garbage.
    let mut bytes = aidip_record("forged-1", "forgery", 1, &key);
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

    // An agent every node holds, then, from the rogue: an older seq of it
    // and a tombstone for it that neither its key nor its attester signed.
    register(&nodes[1].0, &agent("targeted", "valuation")).await;
    let q = json!({"filters": {"capabilities": ["valuation"]}, "scope": "local"});
    for (n, _) in &nodes {
        wait_until("every node holds the targeted agent", || async {
            search_ids(n, q.clone()).await == ["targeted"]
        })
        .await;
    }
    rogue
        .publish(
            aidip_record("targeted", "valuation", 1, &key),
            "targeted".into(),
            vec![],
        )
        .await
        .unwrap();
    let tombstone = agentmesh::record::TombstoneRecord {
        agent_id: "targeted".into(),
        seq: agentmesh::record::next_seq(None),
        issued_at: agentmesh::record::unix_now(),
        reason: agentmesh::record::TombstoneReason::Revoked,
    };
    let tombstone = agentmesh::record::SignedRecord::sign_tombstone(&tombstone, &key)
        .unwrap()
        .encode();
    rogue
        .publish(tombstone, "targeted".into(), vec![])
        .await
        .unwrap();

    for (i, (n, _)) in nodes.iter().enumerate() {
        wait_until(
            &format!("node {} counts every forgery as refused", i + 1),
            || async {
                let peers: Value = reqwest::get(url(n, "/peers"))
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                let refused = &peers["records"]["refused"];
                ["bad_signature", "stale_seq", "tombstone_not_authorised"]
                    .iter()
                    .all(|r| refused[r].as_u64().unwrap_or(0) >= 1)
            },
        )
        .await;
        assert!(search_ids(
            n,
            json!({"filters": {"capabilities": ["forgery"]}, "scope": "local"})
        )
        .await
        .is_empty());
        assert_eq!(
            search_ids(n, q.clone()).await,
            ["targeted"],
            "node {}: the forged tombstone removed nothing",
            i + 1
        );
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
    assert_eq!(response.headers()["x-agentmesh-budget-exhausted"], "true");
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

/// A filter of capabilities only.
fn capabilities(caps: &[&str]) -> Filter {
    Filter::new(caps.iter().copied(), [], []).unwrap()
}

/// Waits until `asker` finds `helper` and `rogue` providing `capability`
/// and is connected to the rogue (so the search asks it, and it is silent).
async fn knows_both_providers(
    asker: &Node,
    capability: &str,
    helper: libp2p::PeerId,
    rogue: libp2p::PeerId,
) {
    wait_until("the asker finds both providers", || async {
        let found = asker.mesh().providers(capability).await.unwrap();
        found.contains(&helper) && found.contains(&rogue)
    })
    .await;
    wait_until("the asker is connected to the rogue", || async {
        let peers = asker.mesh().peers().await.unwrap();
        peers.iter().any(|p| p.peer_id == rogue)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_provider_costs_a_search_no_more_than_its_budget() {
    // The compose case: a provider that never answers (there, a killed
    // node) used to cost the lookup's half budget, then the whole budget
    // of the fan-out, then judging. Now one deadline bounds them all.
    let budget = Duration::from_secs(2);
    let tweak = |c: &mut Config| c.p2p.search_timeout = budget;
    let (asker, _d1) = node_with(&[], tweak).await;
    let boot = asker.listen_addrs().to_vec();
    let (helper, _d2) = node_with(&boot, tweak).await;
    let (rogue, key, cancel) = spawn_rogue(&boot).await;

    // Both provide the capability: the helper holds a registered agent,
    // the rogue announces one of its own.
    register(&helper, &agent("counted", "budgeting")).await;
    rogue
        .publish(
            aidip_record("rogue-agent", "budgeting", 1, &key),
            "rogue-agent".into(),
            vec!["budgeting".into()],
        )
        .await
        .unwrap();
    let (helper_id, rogue_id) = (helper.mesh().peer_id(), rogue.peer_id());
    knows_both_providers(&asker, "budgeting", helper_id, rogue_id).await;

    let query = SearchQuery {
        filter: capabilities(&["budgeting"]),
        limit: 10,
        ..SearchQuery::default()
    };
    let outcome = asker.search().search(&query, Scope::Mesh).await.unwrap();
    let report = outcome.mesh.expect("a mesh search reports on the mesh");
    assert_eq!(report.whom, Asked::Providers, "{report:?}");
    assert_eq!(report.asked, 2, "{report:?}");
    assert_eq!(report.answered, 1, "the helper answers: {report:?}");
    assert_eq!(report.unanswered, [(rogue_id, Unanswered::TimedOut)]);
    assert!(report.partial && report.budget_exhausted, "{report:?}");
    assert_eq!(report.budget, budget);
    // The whole search, lookup, fan-out, judging and ranking, ends near
    // its budget; before, this took the fan-out's budget plus half of it
    // for the lookup. (Twice the budget: a margin for a loaded machine,
    // not a wait anything relies on.)
    assert!(
        outcome.elapsed < budget * 2,
        "the search took {:?}",
        outcome.elapsed
    );
    let ids: Vec<&str> = outcome.page.items.iter().map(|s| s.id.as_str()).collect();
    assert!(ids.contains(&"counted"), "{ids:?}");
    cancel.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_whose_answer_is_full_does_not_wait_for_a_silent_provider() {
    // Two askers, one stopping once its answer is full (the default), one
    // waiting for every peer asked; a helper holding a page of matches
    // and a provider that never answers. No node keeps what it only saw
    // gossiped, so the askers must ask for the helper's agents.
    let budget = Duration::from_secs(2);
    let lookups = |c: &mut Config| {
        c.p2p.search_timeout = budget;
        c.p2p.replication = Replication::Lookups;
    };
    let (when_full, _d1) = node_with(&[], lookups).await;
    let boot = when_full.listen_addrs().to_vec();
    let (all_answered, _d2) = node_with(&boot, |c| {
        lookups(c);
        c.p2p.search_ends_when_full = false;
    })
    .await;
    let (helper, _d3) = node_with(&boot, lookups).await;
    let both: Vec<String> = boot
        .iter()
        .chain(all_answered.listen_addrs())
        .cloned()
        .collect();
    let (rogue, key, cancel) = spawn_rogue(&both).await;
    for name in ["page-1", "page-2", "page-3"] {
        register(&helper, &agent(name, "quorum")).await;
    }
    rogue
        .publish(
            aidip_record("rogue-agent", "quorum", 1, &key),
            "rogue-agent".into(),
            vec!["quorum".into()],
        )
        .await
        .unwrap();
    let (helper_id, rogue_id) = (helper.mesh().peer_id(), rogue.peer_id());
    for asker in [&when_full, &all_answered] {
        knows_both_providers(asker, "quorum", helper_id, rogue_id).await;
    }

    let query = SearchQuery {
        filter: capabilities(&["quorum"]),
        limit: 3,
        ..SearchQuery::default()
    };
    // A mesh search from `asker`: its report, and the page's ids in order.
    let search = |asker: &Node| {
        let (search, query) = (asker.search().clone(), query.clone());
        async move {
            let outcome = search.search(&query, Scope::Mesh).await.unwrap();
            let report = outcome.mesh.expect("a mesh search reports on the mesh");
            let mut ids: Vec<String> = outcome.page.items.into_iter().map(|s| s.id).collect();
            ids.sort();
            (report, ids)
        }
    };
    // Each asker asks both providers and, of its own choice, the other
    // asker. Two of the three answered, one with a page: the rogue is not
    // waited for, and the answer is whole.
    let (report, ids) = search(&when_full).await;
    assert_eq!((report.asked, report.answered), (3, 2), "{report:?}");
    assert_eq!(report.not_waited, 1, "{report:?}");
    assert!(report.unanswered.is_empty(), "{report:?}");
    assert!(!report.partial && !report.budget_exhausted, "{report:?}");
    assert_eq!(ids, ["page-1", "page-2", "page-3"]);

    // The node that waits for everyone waits for the rogue until the
    // fan-out's share of the budget ends.
    let (report, ids) = search(&all_answered).await;
    assert_eq!((report.asked, report.answered), (3, 2), "{report:?}");
    assert_eq!(report.not_waited, 0, "{report:?}");
    assert_eq!(report.unanswered, [(rogue_id, Unanswered::TimedOut)]);
    assert!(report.partial && report.budget_exhausted, "{report:?}");
    assert_eq!(ids, ["page-1", "page-2", "page-3"]);

    // Over HTTP, on a fresh query (the first asker now holds the page):
    // the header counts the peer not waited for.
    register(&helper, &agent("page-4", "quorum-http")).await;
    wait_until(
        "the asker finds the helper for the new capability",
        || async {
            let found = when_full.mesh().providers("quorum-http").await.unwrap();
            found.contains(&helper_id)
        },
    )
    .await;
    let r = reqwest::Client::new()
        .post(url(&when_full, "/agents/search"))
        .json(&json!({"filters": {"capabilities": ["quorum-http"]}, "top": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-agentmesh-partial"], "false");
    let not_waited: usize = r.headers()["x-agentmesh-peers-not-waited"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let asked: usize = r.headers()["x-agentmesh-peers-asked"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(not_waited < asked, "{:?}", r.headers());
    cancel.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_with_nobody_to_ask_asks_nobody() {
    let (alone, _dir) = node(&[]).await;
    register(&alone, &agent("solo", "solitaire")).await;
    let query = SearchQuery {
        filter: capabilities(&["solitaire"]),
        limit: 10,
        ..SearchQuery::default()
    };
    let outcome = alone.search().search(&query, Scope::Mesh).await.unwrap();
    let report = outcome.mesh.expect("a mesh search reports on the mesh");
    assert_eq!(report.whom, Asked::Nobody);
    assert_eq!((report.asked, report.answered), (0, 0));
    assert!(!report.partial && !report.budget_exhausted, "{report:?}");
    assert_eq!(outcome.page.items.len(), 1);
    // Nothing went out: no provider lookup, no request.
    let stats = alone.mesh().stats();
    assert_eq!(stats.requests_sent, 0);

    // Over HTTP: the same, in the headers.
    let r = reqwest::Client::new()
        .post(url(&alone, "/agents/search"))
        .json(&json!({"filters": {"capabilities": ["solitaire"]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-agentmesh-peers-asked"], "0");
    assert_eq!(r.headers()["x-agentmesh-partial"], "false");
    assert_eq!(r.headers()["x-agentmesh-budget-exhausted"], "false");
    assert!(r.headers().contains_key("x-agentmesh-elapsed-ms"));
    // A local search says nothing about the mesh.
    let r = reqwest::Client::new()
        .post(url(&alone, "/agents/search"))
        .json(&json!({"filters": {"capabilities": ["solitaire"]}, "scope": "local"}))
        .send()
        .await
        .unwrap();
    assert!(!r.headers().contains_key("x-agentmesh-peers-asked"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversize_record_from_a_raw_peer_is_refused_everywhere() {
    use futures_util::StreamExt as _;
    use libp2p::swarm::SwarmEvent;
    let nodes = mesh_of(5).await;
    // A peer that speaks the protocols but skips the client's size check:
    // a bare swarm driven by hand.
    let key = agentmesh::identity::generate();
    let mut swarm = agentmesh::mesh::behaviour::build_swarm(
        agentmesh::identity::libp2p_keypair(&key),
        &MeshConfig {
            allow_private_addresses: true,
            ..MeshConfig::default()
        },
        &agentmesh::mesh::MeshStats::default(),
    )
    .unwrap();
    swarm
        .dial(
            nodes[0].0.listen_addrs()[0]
                .parse::<libp2p::Multiaddr>()
                .unwrap(),
        )
        .unwrap();
    let until = Instant::now() + DEADLINE;
    // Under the gossip frame limit, over the 16 KiB record limit.
    let oversize = aidip_record("too-big", "bulk", 1, &key)
        .into_iter()
        .chain(std::iter::repeat_n(0u8, 17 * 1024))
        .collect::<Vec<u8>>();
    let topic = agentmesh::mesh::behaviour::records_topic();
    let mut published = false;
    while !published {
        let event = tokio::time::timeout_at(until.into(), swarm.select_next_some())
            .await
            .expect("node 1 subscribes to the records topic in time");
        if let SwarmEvent::Behaviour(agentmesh::mesh::behaviour::MeshBehaviourEvent::Gossipsub(
            libp2p::gossipsub::Event::Subscribed { .. },
        )) = event
        {
            swarm
                .behaviour_mut()
                .gossipsub
                .publish(topic.clone(), oversize.clone())
                .unwrap();
            published = true;
        }
    }
    // Keep the raw peer's connection alive while node 1 judges the record.
    let drive = tokio::spawn(async move {
        loop {
            swarm.select_next_some().await;
        }
    });
    let (first, _) = &nodes[0];
    wait_until("node 1 rejects the oversize record", || async {
        first.mesh().stats().gossip.rejected.get("too_large") == Some(&1)
    })
    .await;
    // Refused records are not forwarded: no other node stores it.
    for (n, _) in &nodes {
        assert!(search_ids(
            n,
            json!({"filters": {"capabilities": ["bulk"]}, "scope": "local"})
        )
        .await
        .is_empty());
    }
    drive.abort();
}
