//! The mesh on real swarms: several nodes in one test process on
//! `/ip4/127.0.0.1/tcp/0`, each with a [`TestHandler`] standing in for the
//! node (it accepts records whose bytes start with `ok`, keeps them in a
//! map, and answers searches from it). Every wait has a 30 s deadline and
//! says what it waited for.
//!
//! Test records are `ok|<agent id>|<capability>,...` (or `bad|...`).

use crate::common::{wait_until, DEADLINE};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentmesh::mesh::{
    agent_key, shard_of, DhtOutcome, Mesh, MeshClient, MeshConfig, MeshError, MeshHandler,
    MeshTransport, Multiaddr, PeerId, RecordOrigin, SearchEnd, SearchRequest, SearchResponse,
    Verdict, KAD_PROTOCOL, SEARCH_PROTOCOL,
};
use futures_util::future::BoxFuture;
use libp2p::identity::Keypair;
use libp2p::multiaddr::Protocol;
use serde_bytes::ByteBuf;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

fn parse(record: &[u8]) -> Option<(String, Vec<String>)> {
    let text = std::str::from_utf8(record).ok()?;
    let mut parts = text.split('|');
    let _tag = parts.next()?;
    let agent = parts.next()?.to_owned();
    let caps = parts
        .next()
        .unwrap_or("")
        .split(',')
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect();
    Some((agent, caps))
}

fn record(tag: &str, agent: &str, caps: &[&str]) -> Vec<u8> {
    format!("{tag}|{agent}|{}", caps.join(",")).into_bytes()
}

/// The node stand-in: accepts `ok...` records (checking the DHT key),
/// rejects the rest, answers searches by capability.
#[derive(Default)]
struct TestHandler {
    records: Mutex<HashMap<String, Vec<u8>>>,
    search_delay: Option<Duration>,
    record_delay: Option<Duration>,
}

impl TestHandler {
    fn holds(&self, agent: &str) -> bool {
        self.records.lock().unwrap().contains_key(agent)
    }

    fn insert(&self, bytes: Vec<u8>) {
        let (agent, _) = parse(&bytes).expect("a test record");
        self.records.lock().unwrap().insert(agent, bytes);
    }

    fn judge(&self, record: &[u8], origin: &RecordOrigin) -> Verdict {
        if !record.starts_with(b"ok") {
            return Verdict::Reject("not_ok");
        }
        let Some((agent, _)) = parse(record) else {
            return Verdict::Reject("malformed");
        };
        if let RecordOrigin::DhtPut { key } | RecordOrigin::DhtGet { key } = origin {
            if key[..] != agent_key(&agent) {
                return Verdict::Reject("key_mismatch");
            }
        }
        self.records.lock().unwrap().insert(agent, record.to_vec());
        Verdict::Accept
    }
}

impl MeshHandler for TestHandler {
    fn on_record(
        &self,
        record: Vec<u8>,
        _from: PeerId,
        origin: RecordOrigin,
    ) -> BoxFuture<'static, Verdict> {
        let verdict = self.judge(&record, &origin);
        let delay = self.record_delay;
        Box::pin(async move {
            if let Some(d) = delay {
                tokio::time::sleep(d).await;
            }
            verdict
        })
    }

    fn on_search(
        &self,
        request: SearchRequest,
        _from: PeerId,
    ) -> BoxFuture<'static, SearchResponse> {
        let mut records: Vec<ByteBuf> = self
            .records
            .lock()
            .unwrap()
            .values()
            .filter(|r| {
                let caps = parse(r).map(|(_, c)| c).unwrap_or_default();
                request.capabilities.iter().all(|c| caps.contains(c))
            })
            .map(|r| ByteBuf::from(r.clone()))
            .collect();
        records.sort();
        let delay = self.search_delay;
        Box::pin(async move {
            if let Some(d) = delay {
                tokio::time::sleep(d).await;
            }
            SearchResponse {
                records,
                truncated: false,
            }
        })
    }
}

/// A loopback node's config: `/ip4/127.0.0.1/tcp/0`, the given bootstrap,
/// loopback peers permitted.
fn config(bootstrap: Vec<Multiaddr>) -> MeshConfig {
    MeshConfig {
        listen: vec!["/ip4/127.0.0.1/tcp/0".parse().unwrap()],
        bootstrap,
        allow_private_addresses: true,
        ..MeshConfig::default()
    }
}

/// One running mesh; cancels it on drop.
struct TestNode {
    client: MeshClient,
    handler: Arc<TestHandler>,
    cancel: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl Drop for TestNode {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl TestNode {
    async fn start(bootstrap: Vec<Multiaddr>, handler: TestHandler) -> Self {
        let key = Keypair::generate_ed25519();
        Self::start_config(key, config(bootstrap), handler).await
    }

    async fn start_config(key: Keypair, config: MeshConfig, handler: TestHandler) -> Self {
        let handler = Arc::new(handler);
        let cancel = CancellationToken::new();
        let (client, task) = Mesh::spawn(config, key, handler.clone(), cancel.clone())
            .await
            .expect("the mesh starts");
        Self {
            client,
            handler,
            cancel,
            task: Some(task),
        }
    }

    fn peer(&self) -> PeerId {
        self.client.peer_id()
    }

    async fn addr(&self) -> Multiaddr {
        self.client.listen_addrs().await.unwrap()[0].clone()
    }

    async fn connected_to(&self, other: &TestNode) -> bool {
        let peers = self.client.peers().await.unwrap();
        peers.iter().any(|p| p.peer_id == other.peer())
    }
}

/// `n` nodes; node `i > 0` bootstraps from node `hub(i)`.
async fn topology(
    n: usize,
    hub: impl Fn(usize) -> usize,
    handlers: Vec<TestHandler>,
) -> Vec<TestNode> {
    let mut nodes: Vec<TestNode> = Vec::new();
    let mut handlers = handlers.into_iter();
    for i in 0..n {
        let bootstrap = if i == 0 {
            Vec::new()
        } else {
            vec![nodes[hub(i)].addr().await]
        };
        let handler = handlers.next().unwrap_or_default();
        nodes.push(TestNode::start(bootstrap, handler).await);
    }
    nodes
}

/// Every node has a DHT neighbour and at least `degree(i)` gossip mesh peers.
async fn wait_ready(nodes: &[TestNode], degree: impl Fn(usize) -> usize) {
    for (i, node) in nodes.iter().enumerate() {
        let want = degree(i);
        wait_until(
            &format!("node {i} to have {want} gossip mesh peers and a DHT peer"),
            || async {
                let s = node.client.status().await.unwrap();
                s.gossip_mesh_peers >= want && s.routing_table_peers >= 1
            },
        )
        .await;
    }
}

fn line_degree(n: usize) -> impl Fn(usize) -> usize {
    move |i| if i == 0 || i == n - 1 { 1 } else { 2 }
}

fn star_degree(n: usize) -> impl Fn(usize) -> usize {
    move |i| if i == 0 { n - 1 } else { 1 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gossip_crosses_a_five_node_line() {
    init_tracing();
    let nodes = topology(5, |i| i - 1, Vec::new()).await;
    wait_ready(&nodes, line_degree(5)).await;

    let bytes = record("ok", "agent-a", &["translation"]);
    let report = nodes[0]
        .client
        .publish(bytes.clone(), "agent-a".into(), vec!["translation".into()])
        .await
        .unwrap();
    assert!(report.gossiped, "{report:?}");

    let last = &nodes[4];
    wait_until(
        "node 5's handler to accept the record from gossip",
        || async { last.handler.holds("agent-a") && last.client.stats().gossip.accepted >= 1 },
    )
    .await;
    assert_eq!(last.handler.records.lock().unwrap()["agent-a"], bytes);
    for (i, node) in nodes.iter().enumerate().skip(1) {
        wait_until(&format!("node {i} to hold the record"), || async {
            node.handler.holds("agent-a")
        })
        .await;
    }
}

/// A peer whose address answers TCP and then says nothing (a host that
/// went dark behind a port that still accepts) holds every DHT query of
/// its node for the query's per-peer timeout. The node's publisher hands
/// records to the mesh without waiting for one record's DHT put and
/// provider announcements before the next: a burst of eight reaches a
/// peer by gossip while the puts still wait (handed over one at a time,
/// they would reach it eight per-peer timeouts later, past the deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_never_answers_does_not_hold_back_the_next_records_gossip() {
    use agentmesh::issuer::outbox::{spawn_publisher, Outbox, Published};
    init_tracing();
    // Accepts connections and keeps them open, silent.
    let dark = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dark_addr = dark.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = dark.accept().await {
            open.push(socket);
        }
    });
    let dark_peer = Keypair::generate_ed25519().public().to_peer_id();
    let dark: Multiaddr = format!("/ip4/127.0.0.1/tcp/{}/p2p/{dark_peer}", dark_addr.port())
        .parse()
        .unwrap();
    let listener = TestNode::start(Vec::new(), TestHandler::default()).await;
    let mut slow = config(vec![listener.addr().await, dark]);
    slow.timeouts.publish = Duration::from_secs(300);
    slow.timeouts.kad_query = Duration::from_secs(300);
    let publisher =
        TestNode::start_config(Keypair::generate_ed25519(), slow, TestHandler::default()).await;
    wait_until("the publisher to reach the listener", || async {
        publisher.connected_to(&listener).await
    })
    .await;
    let (outbox, rx) = Outbox::new(64);
    let cancel = CancellationToken::new();
    let task = spawn_publisher(publisher.client.clone(), rx, cancel.clone());
    let agents: Vec<String> = (0..8).map(|i| format!("agent-burst-{i}")).collect();
    for agent in &agents {
        outbox.send(Published {
            record: record("ok", agent, &["translation"]),
            agent_id: agent.clone(),
            capabilities: vec!["translation".into()],
            gossip_only: false,
        });
    }
    wait_until(
        "the listener to hold the whole burst from gossip",
        || async { agents.iter().all(|a| listener.handler.holds(a)) },
    )
    .await;
    cancel.cancel();
    task.await.unwrap();
    held.abort();
}

/// A record issued while no peer subscribes to the records topic (a node
/// alone, or just started) is gossiped once one does: gossipsub itself
/// keeps nothing, and a tombstone lost this way would leave the agent at
/// every node that stores it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_issued_while_alone_is_gossiped_when_a_peer_subscribes() {
    init_tracing();
    let alone = TestNode::start(Vec::new(), TestHandler::default()).await;
    let bytes = record("ok", "agent-alone", &["translation"]);
    let report = alone
        .client
        .publish(
            bytes.clone(),
            "agent-alone".into(),
            vec!["translation".into()],
        )
        .await
        .unwrap();
    assert!(!report.gossiped, "nobody to gossip to yet: {report:?}");

    let newcomer = TestNode::start(vec![alone.addr().await], TestHandler::default()).await;
    wait_until("the newcomer to accept the record from gossip", || async {
        newcomer.handler.holds("agent-alone") && newcomer.client.stats().gossip.accepted >= 1
    })
    .await;
    assert_eq!(
        newcomer.handler.records.lock().unwrap()["agent-alone"],
        bytes
    );
}

/// A backlog larger than what a peer judges at once from one peer (24
/// records: half its gossip pool) reaches
/// a slow newcomer whole: the kept records go out a few at a time, not in
/// one burst the peer would ignore in part (and gossipsub never send
/// again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_issued_while_alone_reaches_a_newcomer_whole() {
    init_tracing();
    const BACKLOG: usize = 150;
    let alone = TestNode::start(Vec::new(), TestHandler::default()).await;
    for i in 0..BACKLOG {
        let agent = format!("agent-backlog-{i}");
        let report = alone
            .client
            .publish(record("ok", &agent, &["translation"]), agent, Vec::new())
            .await
            .unwrap();
        assert!(!report.gossiped);
    }
    // The newcomer takes 50 ms to judge a record, so a burst would hold
    // all the judging slots it gives one peer and it would ignore the rest.
    let slow = TestHandler {
        record_delay: Some(Duration::from_millis(50)),
        ..TestHandler::default()
    };
    let newcomer = TestNode::start(vec![alone.addr().await], slow).await;
    wait_until(
        "the newcomer to accept the whole backlog from gossip",
        || async { newcomer.client.stats().gossip.accepted >= BACKLOG as u64 },
    )
    .await;
    assert_eq!(newcomer.handler.records.lock().unwrap().len(), BACKLOG);
    assert_eq!(newcomer.client.stats().gossip.accepted, BACKLOG as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_records_are_counted_penalised_and_not_stored() {
    init_tracing();
    let nodes = topology(5, |i| i - 1, Vec::new()).await;
    wait_ready(&nodes, line_degree(5)).await;

    let bad = record("bad", "agent-x", &["translation"]);
    let report = nodes[0]
        .client
        .publish(bad, "agent-x".into(), vec![])
        .await
        .unwrap();
    assert!(report.gossiped);
    let second = &nodes[1];
    wait_until("node 2 to count the gossip rejection", || async {
        second.client.stats().gossip.rejected.get("not_ok") == Some(&1)
    })
    .await;
    wait_until("a DHT peer to refuse the put", || async {
        nodes[1..]
            .iter()
            .map(|n| {
                n.client
                    .stats()
                    .dht_put
                    .rejected
                    .get("not_ok")
                    .copied()
                    .unwrap_or(0)
            })
            .sum::<u64>()
            >= 1
    })
    .await;

    // A good record published after the bad one crosses the whole line, so
    // the bad one had every chance to travel too.
    let good = record("ok", "agent-y", &["translation"]);
    nodes[0]
        .client
        .publish(good, "agent-y".into(), vec![])
        .await
        .unwrap();
    for (i, node) in nodes.iter().enumerate().skip(1) {
        wait_until(&format!("node {i} to hold the good record"), || async {
            node.handler.holds("agent-y")
        })
        .await;
    }
    for node in &nodes[1..] {
        assert!(
            !node.handler.holds("agent-x"),
            "a rejected record was stored"
        );
        let stats = node.client.stats();
        assert_eq!(stats.gossip.ignored_total(), 0, "{stats:?}");
    }
    // The peer that sent an invalid message is penalised by gossipsub.
    let seen = second.client.peers().await.unwrap();
    let publisher = seen.iter().find(|p| p.peer_id == nodes[0].peer()).unwrap();
    let score = publisher.gossip_score.expect("peer scoring is on");
    assert!(
        score < 0.0,
        "publisher score {score} after an invalid message"
    );

    // The publisher's own DHT copy is refused when another node looks it up.
    let found = nodes[4].client.get_record("agent-x").await.unwrap();
    assert_eq!(found, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn providers_find_the_publisher_of_a_capability() {
    init_tracing();
    let nodes = topology(5, |_| 0, Vec::new()).await;
    wait_ready(&nodes, star_degree(5)).await;

    let report = nodes[2]
        .client
        .publish(
            record("ok", "agent-c", &["translation"]),
            "agent-c".into(),
            vec!["translation".into(), "translation".into()],
        )
        .await
        .unwrap();
    assert_eq!(report.record, DhtOutcome::Stored, "{report:?}");
    assert_eq!(
        report.capabilities,
        vec![("translation".to_owned(), DhtOutcome::Stored)]
    );
    assert_eq!(nodes[2].client.status().await.unwrap().provided_keys, 1);

    let target = nodes[2].peer();
    let asker = &nodes[4];
    wait_until("node 5 to find node 3 providing translation", || async {
        asker.client.providers("translation").await.unwrap() == vec![target]
    })
    .await;
    let none = asker.client.providers("astrology").await.unwrap();
    assert!(none.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_request_to_an_unreachable_peer_fails_as_a_dial_failure() {
    init_tracing();
    let nodes = topology(1, |_| 0, vec![TestHandler::default()]).await;
    // A peer nobody knows an address of: the request cannot be sent.
    let stranger = Keypair::generate_ed25519().public().to_peer_id();
    let request = SearchRequest {
        capabilities: vec!["search".into()],
        limit: 10,
        ..SearchRequest::default()
    };
    let outcome = nodes[0]
        .client
        .search(
            vec![stranger],
            request,
            Duration::from_secs(5),
            SearchEnd::AllAnswered,
        )
        .await
        .unwrap();
    assert_eq!(outcome.failed.len(), 1, "{outcome:?}");
    assert_eq!(outcome.failed[0].0, stranger);
    assert!(outcome.timed_out.is_empty());
    let stats = nodes[0].client.stats();
    assert_eq!(stats.requests_failed, 1);
    assert_eq!(
        stats.requests_failed_by.get("dial_failure"),
        Some(&1),
        "{:?}",
        stats.requests_failed_by
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_whose_dial_failed_is_not_dialled_again_at_once() {
    init_tracing();
    let hub = TestNode::start(Vec::new(), TestHandler::default()).await;
    let mut gone = TestNode::start(vec![hub.addr().await], TestHandler::default()).await;
    wait_until("the peer to connect to the hub", || async {
        hub.connected_to(&gone).await
    })
    .await;
    let at = gone.addr().await;
    gone.cancel.cancel();
    tokio::time::timeout(DEADLINE, gone.task.take().unwrap())
        .await
        .expect("the loop stops on cancel")
        .unwrap();
    wait_until("the hub to see the peer go", || async {
        !hub.connected_to(&gone).await
    })
    .await;

    // The hub dials the peer at its last address, and the port refuses
    // (the hub may have dialled it already, on its own): after that, it
    // is held back.
    let held_back = |e: &MeshError| e.to_string().contains("not dialled again");
    wait_until("the hub to hold the peer back", || async {
        hub.client
            .dial(at.clone())
            .await
            .is_err_and(|e| held_back(&e))
    })
    .await;
    let before = hub.client.stats();
    assert!(before.dial_failures >= 1, "a dial failed first: {before:?}");
    assert!(before.dials_backed_off >= 1);

    // Dialled again at once, as lookups running side by side would be,
    // each having met the address: refused here, before any connection.
    let again = hub.client.dial(at).await.expect_err("held back");
    assert!(held_back(&again), "{again}");
    let after = hub.client.stats();
    assert_eq!(after.dials_backed_off, before.dials_backed_off + 1);
    assert_eq!(
        after.dial_failures, before.dial_failures,
        "no second dial went out"
    );
}

/// Node 1 and four peers connected to it, each holding `agent-i` (a
/// `search` record) and what `more(i)` adds; the fifth never answers a
/// search.
async fn three_answer_and_one_is_silent(more: impl Fn(usize) -> Vec<u8>) -> Vec<TestNode> {
    init_tracing();
    let mut handlers: Vec<TestHandler> = (0..4).map(|_| TestHandler::default()).collect();
    handlers.push(TestHandler {
        search_delay: Some(Duration::from_secs(30)),
        ..TestHandler::default()
    });
    let nodes = topology(5, |_| 0, handlers).await;
    for (i, node) in nodes.iter().enumerate().skip(1) {
        wait_until(&format!("node 1 to connect to node {}", i + 1), || async {
            nodes[0].connected_to(node).await
        })
        .await;
        node.handler
            .insert(record("ok", &format!("agent-{i}"), &["search"]));
        node.handler.insert(more(i));
    }
    nodes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_fan_out_returns_at_the_deadline() {
    let nodes =
        three_answer_and_one_is_silent(|i| record("ok", &format!("other-{i}"), &["other"])).await;

    let peers: Vec<PeerId> = nodes[1..].iter().map(TestNode::peer).collect();
    let request = SearchRequest {
        capabilities: vec!["search".into()],
        limit: 10,
        ..SearchRequest::default()
    };
    let deadline = Duration::from_millis(1500);
    let started = Instant::now();
    let outcome = nodes[0]
        .client
        .search(peers, request, deadline, SearchEnd::AllAnswered)
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(took >= deadline - Duration::from_millis(50), "{took:?}");
    assert!(took < deadline + Duration::from_secs(1), "{took:?}");

    assert_eq!(outcome.timed_out, vec![nodes[4].peer()]);
    assert!(outcome.failed.is_empty(), "{:?}", outcome.failed);
    assert_eq!(outcome.responses.len(), 3);
    for (i, node) in nodes.iter().enumerate().take(4).skip(1) {
        let (_, response) = outcome
            .responses
            .iter()
            .find(|(p, _)| *p == node.peer())
            .unwrap_or_else(|| panic!("no response from node {}", i + 1));
        let expected = record("ok", &format!("agent-{i}"), &["search"]);
        assert_eq!(response.records, vec![ByteBuf::from(expected)]);
        assert!(!response.truncated);
    }
    let stats = nodes[0].client.stats();
    assert_eq!(stats.requests_sent, 4);
    assert_eq!(stats.requests_timed_out, 1);
    wait_until("the answering nodes to count their searches", || async {
        nodes[1..4]
            .iter()
            .all(|n| n.client.stats().searches_served == 1)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_fan_out_ends_once_half_the_peers_answered_with_a_page() {
    // Besides its own, the same record, byte for byte, at every peer.
    let nodes = three_answer_and_one_is_silent(|_| record("ok", "everywhere", &["dup"])).await;
    let peers: Vec<PeerId> = nodes[1..].iter().map(TestNode::peer).collect();
    let deadline = Duration::from_secs(20);
    let ask = |capability: &str, limit: u32| {
        let request = SearchRequest {
            capabilities: vec![capability.into()],
            limit,
            ..SearchRequest::default()
        };
        nodes[0]
            .client
            .search(peers.clone(), request, deadline, SearchEnd::WhenFull)
    };

    // Three of the four answer with a record each: a page of three; the
    // silent peer is not waited for.
    let outcome = ask("search", 3).await.unwrap();
    assert_eq!(outcome.responses.len(), 3, "{outcome:?}");
    assert_eq!(outcome.not_waited, [nodes[4].peer()]);
    assert!(outcome.timed_out.is_empty() && outcome.failed.is_empty());

    // A page of one is full at the first answer, but half of the peers
    // asked must have answered: two answers, the rest not waited for.
    let outcome = ask("search", 1).await.unwrap();
    assert_eq!(outcome.responses.len(), 2, "{outcome:?}");
    assert_eq!(outcome.not_waited.len(), 2, "{outcome:?}");
    assert!(outcome.not_waited.contains(&nodes[4].peer()));

    // Three copies of one record are one record: a page of two is never
    // full, and the search waits for the silent peer until its deadline.
    let short = Duration::from_millis(1500);
    let request = SearchRequest {
        capabilities: vec!["dup".into()],
        limit: 2,
        ..SearchRequest::default()
    };
    let outcome = nodes[0]
        .client
        .search(peers.clone(), request, short, SearchEnd::WhenFull)
        .await
        .unwrap();
    assert_eq!(outcome.responses.len(), 3, "{outcome:?}");
    assert!(outcome.not_waited.is_empty(), "{outcome:?}");
    assert_eq!(outcome.timed_out, [nodes[4].peer()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_joiner_gets_the_record_from_the_dht() {
    init_tracing();
    let mut nodes = topology(4, |_| 0, Vec::new()).await;
    wait_ready(&nodes, star_degree(4)).await;

    let bytes = record("ok", "agent-e", &["lookup"]);
    let report = nodes[0]
        .client
        .publish(bytes.clone(), "agent-e".into(), vec![])
        .await
        .unwrap();
    assert_eq!(report.record, DhtOutcome::Stored, "{report:?}");
    for (i, node) in nodes.iter().enumerate().skip(1) {
        wait_until(
            &format!("node {} to store the DHT record", i + 1),
            || async { node.client.status().await.unwrap().dht_records >= 1 },
        )
        .await;
    }

    let late = TestNode::start(vec![nodes[1].addr().await], TestHandler::default()).await;
    wait_until("the late node to have DHT peers", || async {
        late.client.status().await.unwrap().routing_table_peers >= 1
    })
    .await;
    let found = late.client.get_record("agent-e").await.unwrap();
    assert_eq!(found, Some(bytes));
    let stats = late.client.stats();
    assert_eq!(stats.gossip.accepted, 0, "the late node saw the gossip");
    assert!(stats.dht_get.accepted >= 1, "{stats:?}");
    assert!(late.handler.holds("agent-e"));
    assert_eq!(late.client.get_record("agent-none").await.unwrap(), None);
    nodes.push(late);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_addrs_name_the_peer_and_bootstrap_another_node() {
    init_tracing();
    let a = TestNode::start(Vec::new(), TestHandler::default()).await;
    let addrs = a.client.listen_addrs().await.unwrap();
    assert!(!addrs.is_empty());
    for addr in &addrs {
        let parts: Vec<Protocol> = addr.iter().collect();
        assert_eq!(parts.last(), Some(&Protocol::P2p(a.peer())), "{addr}");
        assert!(
            parts
                .iter()
                .any(|p| matches!(p, Protocol::Tcp(port) if *port != 0)),
            "{addr} has no real TCP port"
        );
    }

    let b = TestNode::start(vec![addrs[0].clone()], TestHandler::default()).await;
    wait_until("b to identify a as an agentmesh peer", || async {
        let peers = b.client.peers().await.unwrap();
        peers.iter().any(|p| {
            p.peer_id == a.peer()
                && p.agent_version
                    .as_deref()
                    .is_some_and(|v| v.starts_with("agentmesh/"))
                && p.protocols.iter().any(|x| x == KAD_PROTOCOL)
                && p.protocols.iter().any(|x| x == SEARCH_PROTOCOL)
        })
    })
    .await;
    wait_until("a to see b", || async { a.connected_to(&b).await }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_is_retried_until_the_peer_comes_up() {
    init_tracing();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let a_key = Keypair::generate_ed25519();
    let a_peer = a_key.public().to_peer_id();
    let a_addr: Multiaddr = format!("/ip4/127.0.0.1/tcp/{port}").parse().unwrap();

    let b = TestNode::start(
        vec![a_addr.clone().with(Protocol::P2p(a_peer))],
        TestHandler::default(),
    )
    .await;
    wait_until("b's first dial of a to fail", || async {
        b.client.stats().dial_failures >= 1
    })
    .await;

    let mut a_config = config(Vec::new());
    a_config.listen = vec![a_addr];
    let a = TestNode::start_config(a_key, a_config, TestHandler::default()).await;
    wait_until("b to reach a on a later dial", || async {
        b.connected_to(&a).await
    })
    .await;
    assert!(b.client.stats().bootstrap_dials >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_stops_on_cancel_and_when_clients_are_gone() {
    init_tracing();
    let mut node = TestNode::start(Vec::new(), TestHandler::default()).await;
    let client = node.client.clone();
    node.cancel.cancel();
    let task = node.task.take().unwrap();
    tokio::time::timeout(DEADLINE, task)
        .await
        .expect("the loop stops on cancel")
        .unwrap();
    assert!(matches!(client.status().await, Err(MeshError::Shutdown)));

    let cancel = CancellationToken::new();
    let key = Keypair::generate_ed25519();
    let handler = Arc::new(TestHandler::default());
    let (client, task) = Mesh::spawn(config(Vec::new()), key, handler, cancel.clone())
        .await
        .unwrap();
    drop(client);
    tokio::time::timeout(DEADLINE, task)
        .await
        .expect("the loop stops when its clients are dropped")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_handlers_are_bounded_and_timed_out() {
    init_tracing();
    let a = TestNode::start(Vec::new(), TestHandler::default()).await;
    let mut config = config(vec![a.addr().await]);
    config.limits.max_inflight_handlers = 1;
    config.timeouts.handler = Duration::from_millis(300);
    let slow = TestHandler {
        record_delay: Some(Duration::from_secs(5)),
        ..TestHandler::default()
    };
    let b = TestNode::start_config(Keypair::generate_ed25519(), config, slow).await;
    let nodes = [a, b];
    wait_ready(&nodes, |_| 1).await;
    let [a, b] = &nodes;
    for i in 0..3 {
        let agent = format!("agent-s{i}");
        let bytes = record("ok", &agent, &[]);
        a.client.publish(bytes, agent, vec![]).await.unwrap();
    }
    wait_until(
        "b to give up on a slow verdict and to shed load",
        || async {
            let s = b.client.stats();
            let ignored = |reason| {
                s.gossip.ignored.get(reason).copied().unwrap_or(0)
                    + s.dht_put.ignored.get(reason).copied().unwrap_or(0)
            };
            ignored("handler_timeout") >= 1 && ignored("overloaded") >= 1
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_policy_never_dials_loopback_peers() {
    init_tracing();
    let open = TestNode::start(Vec::new(), TestHandler::default()).await;
    let open_addr = open.addr().await;

    // A configured loopback bootstrap peer is a start-up error that names
    // the setting, not a node that silently never joins.
    let strict_config = |bootstrap| MeshConfig {
        allow_private_addresses: false,
        ..config(bootstrap)
    };
    let refused = Mesh::spawn(
        strict_config(vec![open_addr.clone()]),
        Keypair::generate_ed25519(),
        Arc::new(TestHandler::default()),
        CancellationToken::new(),
    )
    .await;
    match refused {
        Err(MeshError::BadAddress { reason, .. }) => {
            assert!(reason.contains("allow_private_addresses"), "{reason}");
        }
        other => panic!("expected BadAddress, got {:?}", other.map(|_| ())),
    }

    // Dials of a loopback address, literal or behind a name, fail in the
    // transport: no connection reaches the open node.
    let strict = TestNode::start_config(
        Keypair::generate_ed25519(),
        strict_config(Vec::new()),
        TestHandler::default(),
    )
    .await;
    let port = open_addr
        .iter()
        .find_map(|p| match p {
            Protocol::Tcp(port) => Some(port),
            _ => None,
        })
        .unwrap();
    let by_name: Multiaddr = format!("/dns4/localhost/tcp/{port}").parse().unwrap();
    for addr in [open_addr.clone(), by_name] {
        let failures = strict.client.stats().dial_failures;
        strict.client.dial(addr).await.unwrap();
        wait_until("the refused dial to fail", || async {
            strict.client.stats().dial_failures > failures
        })
        .await;
    }
    assert!(!strict.connected_to(&open).await);
    assert!(open.client.peers().await.unwrap().is_empty());

    // Inbound connections are accepted, but the peer's loopback listen
    // addresses do not enter the strict node's routing table.
    let joiner = TestNode::start(vec![strict.addr().await], TestHandler::default()).await;
    wait_until("the strict node to identify the joiner", || async {
        strict
            .client
            .peers()
            .await
            .unwrap()
            .iter()
            .any(|p| p.peer_id == joiner.peer() && p.agent_version.is_some())
    })
    .await;
    assert_eq!(strict.client.status().await.unwrap().routing_table_peers, 0);
}

/// Node b (of a, b, c joined through a) publishes a record of `agent`
/// with `capability`: it reaches c by gossip, c finds b providing the
/// capability, and c's search to b answers the record.
async fn b_publishes_and_c_finds_it(nodes: &[TestNode; 3], agent: &str, capability: &str) {
    let rec = record("ok", agent, &[capability]);
    nodes[1].handler.insert(rec.clone());
    nodes[1]
        .client
        .publish(rec.clone(), agent.into(), vec![capability.into()])
        .await
        .unwrap();
    wait_until("the record to reach node c", || async {
        nodes[2].handler.holds(agent)
    })
    .await;
    let want = vec![nodes[1].peer()];
    wait_until("node c to find node b providing the capability", || async {
        nodes[2].client.providers(capability).await.unwrap() == want
    })
    .await;
    let request = SearchRequest {
        capabilities: vec![capability.into()],
        limit: 10,
        ..SearchRequest::default()
    };
    let outcome = nodes[2]
        .client
        .search(
            want,
            request,
            Duration::from_secs(5),
            SearchEnd::AllAnswered,
        )
        .await
        .unwrap();
    assert_eq!(outcome.responses.len(), 1, "{outcome:?}");
    assert_eq!(outcome.responses[0].1.records, vec![ByteBuf::from(rec)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_gossip_and_search_over_quic() {
    init_tracing();
    let quic = |bootstrap| MeshConfig {
        listen: vec!["/ip4/127.0.0.1/udp/0/quic-v1".parse().unwrap()],
        ..config(bootstrap)
    };
    let start = |bootstrap| {
        TestNode::start_config(
            Keypair::generate_ed25519(),
            quic(bootstrap),
            TestHandler::default(),
        )
    };
    let a = start(Vec::new()).await;
    let a_addr = a.addr().await;
    assert!(
        a_addr.iter().any(|p| matches!(p, Protocol::QuicV1)),
        "{a_addr} is not a QUIC address"
    );
    let b = start(vec![a_addr.clone()]).await;
    let c = start(vec![a_addr]).await;
    let nodes = [a, b, c];
    wait_ready(&nodes, |i| if i == 0 { 2 } else { 1 }).await;

    b_publishes_and_c_finds_it(&nodes, "agent-q", "quic_cap").await;
}

/// The in-process memory transport (what the simulator runs hundreds of
/// swarms on): the same gossip, provider lookup and search as over TCP,
/// and a memory address is a local one, dialled only under
/// `allow_private_addresses`.
/// A node stopped in-process (its loop cancelled and ended) and started
/// again with the same key on the same address, as the simulator's
/// churn does: the address is free again, and a peer that knew it
/// reconnects to the new incarnation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_listens_on_its_memory_address_again() {
    init_tracing();
    let memory = |listen: &str, bootstrap| MeshConfig {
        transport: MeshTransport::Memory,
        listen: vec![listen.parse().unwrap()],
        ..config(bootstrap)
    };
    let key = Keypair::generate_ed25519();
    let mut first = TestNode::start_config(
        key.clone(),
        memory("/memory/0", Vec::new()),
        TestHandler::default(),
    )
    .await;
    let addr = first.addr().await;
    let (port, _) = agentmesh::mesh::behaviour::split_peer(&addr);
    let peer = TestNode::start_config(
        Keypair::generate_ed25519(),
        memory("/memory/0", vec![addr.clone()]),
        TestHandler::default(),
    )
    .await;
    wait_until("the peer to connect to the first incarnation", || async {
        peer.connected_to(&first).await
    })
    .await;

    first.cancel.cancel();
    tokio::time::timeout(DEADLINE, first.task.take().unwrap())
        .await
        .expect("the loop stops on cancel")
        .unwrap();
    let again = TestNode::start_config(
        key,
        memory(&port.to_string(), Vec::new()),
        TestHandler::default(),
    )
    .await;
    assert_eq!(again.addr().await, addr, "the same address as before");
    peer.client.dial(addr).await.unwrap();
    wait_until("the peer to connect to the second incarnation", || async {
        peer.connected_to(&again).await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_gossip_and_search_over_the_memory_transport() {
    init_tracing();
    let memory = |bootstrap| MeshConfig {
        transport: MeshTransport::Memory,
        listen: vec!["/memory/0".parse().unwrap()],
        ..config(bootstrap)
    };
    let start = |bootstrap| {
        TestNode::start_config(
            Keypair::generate_ed25519(),
            memory(bootstrap),
            TestHandler::default(),
        )
    };
    let a = start(Vec::new()).await;
    let a_addr = a.addr().await;
    assert!(
        matches!(a_addr.iter().next(), Some(Protocol::Memory(p)) if p != 0),
        "{a_addr} is not a memory address with a port"
    );
    let strict_config = |bootstrap| MeshConfig {
        allow_private_addresses: false,
        ..memory(bootstrap)
    };
    let refused = Mesh::spawn(
        strict_config(vec![a_addr.clone()]),
        Keypair::generate_ed25519(),
        Arc::new(TestHandler::default()),
        CancellationToken::new(),
    )
    .await;
    assert!(
        matches!(refused, Err(MeshError::BadAddress { .. })),
        "a memory bootstrap address without allow_private_addresses must be refused"
    );
    let strict = TestNode::start_config(
        Keypair::generate_ed25519(),
        strict_config(Vec::new()),
        TestHandler::default(),
    )
    .await;
    let failures = strict.client.stats().dial_failures;
    strict.client.dial(a_addr.clone()).await.unwrap();
    wait_until("the strict node's memory dial to fail", || async {
        strict.client.stats().dial_failures > failures
    })
    .await;
    assert!(!strict.connected_to(&a).await);

    let b = start(vec![a_addr.clone()]).await;
    let c = start(vec![a_addr]).await;
    let nodes = [a, b, c];
    wait_ready(&nodes, |i| if i == 0 { 2 } else { 1 }).await;
    b_publishes_and_c_finds_it(&nodes, "agent-m", "memory_cap").await;
    let bytes = nodes[2].client.stats().transport;
    assert!(bytes.inbound > 0 && bytes.outbound > 0, "{bytes:?}");
}

/// The compose mesh's start-up race: a node that announced its capability
/// while alone, and an asker whose own provider store holds another
/// provider of it (announced after the asker joined) but not the first.
/// The asker must find both: what its own store holds never ends a lookup,
/// and a node re-announces its keys as peers join a small network.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_announced_alone_is_found_past_the_askers_own_store() {
    init_tracing();
    let a = TestNode::start(Vec::new(), TestHandler::default()).await;
    let report = a
        .client
        .publish(
            record("ok", "agent-a", &["fraud"]),
            "agent-a".into(),
            vec!["fraud".into()],
        )
        .await
        .unwrap();
    assert_eq!(report.record, DhtOutcome::NoPeers, "{report:?}");

    // A announces again once it has a peer: B stores A's announcement.
    // B provides under the same shard key as A, so that the asker's own
    // store answers that key's lookup with B alone.
    let shards = MeshConfig::default().shards;
    let b_key = std::iter::repeat_with(Keypair::generate_ed25519)
        .find(|k| shard_of(&k.public().to_peer_id(), shards) == shard_of(&a.peer(), shards))
        .expect("one key in eight has a's shard");
    let b =
        TestNode::start_config(b_key, config(vec![a.addr().await]), TestHandler::default()).await;
    wait_until("b to store a's provider announcement", || async {
        b.client.stats().providers_stored >= 1
    })
    .await;

    // C joins after that announcement, through B.
    let c = TestNode::start(vec![b.addr().await], TestHandler::default()).await;
    for (name, node) in [("b", &b), ("c", &c)] {
        wait_until(
            &format!("{name} to have the two others in its routing table"),
            || async { node.client.status().await.unwrap().routing_table_peers >= 2 },
        )
        .await;
    }
    // B announces now: its announcement reaches C's own provider store.
    let report = b
        .client
        .publish(
            record("ok", "agent-b", &["fraud"]),
            "agent-b".into(),
            vec!["fraud".into()],
        )
        .await
        .unwrap();
    assert_eq!(
        report.capabilities,
        vec![("fraud".to_owned(), DhtOutcome::Stored)]
    );
    wait_until("c to find both a and b providing fraud", || async {
        let found = c.client.providers("fraud").await.unwrap();
        found.contains(&a.peer()) && found.contains(&b.peer())
    })
    .await;
}

/// A hub at its connection limit, and a newcomer that dials it: with the
/// trimming marks below the limit, the hub disconnects its least used
/// peers (never its configured bootstrap peer, nor its trusted peer) and
/// the newcomer gets in;
/// with the marks at the limit (no trimming, the node before `trim.rs`),
/// the hub stays full and refuses it, as it refuses Kademlia's dials.
/// The leaves dial the hub once (no bootstrap config, so no re-dials):
/// the only dials the hub sees at the end are the newcomer's.
async fn newcomer_reaches_a_hub_of_leaves(trim: bool) -> bool {
    const LIMIT: u32 = 8;
    const LEAVES: usize = 10;
    let anchor = TestNode::start(Vec::new(), TestHandler::default()).await;
    let mut hub_config = config(vec![anchor.addr().await]);
    hub_config.limits.set_max_connections(LIMIT);
    if !trim {
        let l = &mut hub_config.limits;
        (l.connections_low_water, l.connections_high_water) = (LIMIT, LIMIT);
    }
    hub_config.timeouts.connection_grace = Duration::from_millis(500);
    // A trusted peer, the first to come and never used: the least
    // recently used, so the first to go were it not protected.
    let trusted = TestNode::start(Vec::new(), TestHandler::default()).await;
    hub_config.trusted = vec![trusted.peer()];
    let hub = TestNode::start_config(
        Keypair::generate_ed25519(),
        hub_config,
        TestHandler::default(),
    )
    .await;
    wait_until("the hub to reach its bootstrap peer", || async {
        hub.connected_to(&anchor).await
    })
    .await;
    let hub_addr = hub.addr().await;
    trusted.client.dial(hub_addr.clone()).await.unwrap();
    wait_until("the trusted peer to reach the hub", || async {
        hub.connected_to(&trusted).await
    })
    .await;
    let mut leaves = Vec::new();
    for _ in 0..LEAVES {
        let leaf = TestNode::start(Vec::new(), TestHandler::default()).await;
        leaf.client.dial(hub_addr.clone()).await.unwrap();
        leaves.push(leaf);
    }
    if trim {
        wait_until("the hub to trim over its high-water mark", || async {
            hub.client.stats().connections_trimmed > 0
        })
        .await;
    } else {
        wait_until("the hub to refuse a leaf at its limit", || async {
            hub.client.stats().incoming_failures > 0
        })
        .await;
    }
    let newcomer = TestNode::start(Vec::new(), TestHandler::default()).await;
    let end = Instant::now() + DEADLINE;
    let reached = loop {
        let refused = hub.client.stats().incoming_failures;
        newcomer.client.dial(hub_addr.clone()).await.unwrap();
        // Until the hub has taken this dial in or refused it.
        let tried = Instant::now() + Duration::from_secs(2);
        while Instant::now() < tried {
            if hub.connected_to(&newcomer).await {
                break;
            }
            if hub.client.stats().incoming_failures > refused {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if hub.connected_to(&newcomer).await {
            break true;
        }
        if !trim && hub.client.stats().incoming_failures > refused {
            break false;
        }
        assert!(
            Instant::now() < end,
            "timed out after {DEADLINE:?}: the hub neither took the newcomer in nor refused it"
        );
    };
    let connected = hub.client.status().await.unwrap().connected_peers;
    assert!(
        connected <= LIMIT as usize,
        "{connected} peers over a limit of {LIMIT}"
    );
    assert!(
        hub.connected_to(&anchor).await,
        "the hub must keep its configured bootstrap peer"
    );
    assert!(
        hub.connected_to(&trusted).await,
        "the hub must keep its trusted peer"
    );
    if !trim {
        assert_eq!(hub.client.stats().connections_trimmed, 0);
    }
    reached
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_over_its_high_water_mark_trims_and_still_lets_a_newcomer_in() {
    init_tracing();
    assert!(
        newcomer_reaches_a_hub_of_leaves(true).await,
        "a trimming hub must make room for a newcomer"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_hub_that_does_not_trim_refuses_a_newcomer() {
    init_tracing();
    assert!(
        !newcomer_reaches_a_hub_of_leaves(false).await,
        "a hub at its limit without trimming refuses new connections"
    );
}

/// Waits until `node` has counted `n` incoming connections refused for
/// `reason`.
async fn refused_for(node: &TestNode, reason: &str, n: u64) {
    wait_until(
        &format!("{n} incoming connections refused as {reason}"),
        || async {
            node.client
                .stats()
                .incoming_refused_by
                .get(reason)
                .is_some_and(|c| *c >= n)
        },
    )
    .await;
}

async fn connected_count(node: &TestNode, others: &[TestNode]) -> usize {
    let peers = node.client.peers().await.unwrap();
    others
        .iter()
        .filter(|o| peers.iter().any(|p| p.peer_id == o.peer()))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_cannot_take_more_than_its_share_of_a_nodes_connections() {
    init_tracing();
    // Every swarm of this test dials from 127.0.0.1, so the hub caps
    // loopback as a public node caps a Sybil host's address.
    let mut hub_config = config(Vec::new());
    hub_config.limits.max_connections_per_ip = 3;
    hub_config.limits.cap_loopback_per_ip = true;
    let hub = TestNode::start_config(
        Keypair::generate_ed25519(),
        hub_config,
        TestHandler::default(),
    )
    .await;
    let hub_addr = hub.addr().await;
    let mut sybils = Vec::new();
    for _ in 0..6 {
        let s = TestNode::start(Vec::new(), TestHandler::default()).await;
        s.client.dial(hub_addr.clone()).await.unwrap();
        sybils.push(s);
    }
    refused_for(&hub, "per_ip", 3).await;
    wait_until("three of the six to be connected", || async {
        connected_count(&hub, &sybils).await == 3
    })
    .await;
    assert_eq!(connected_count(&hub, &sybils).await, 3);
    // The cap is on what comes in: the hub's own dials still go out.
    let other = TestNode::start(Vec::new(), TestHandler::default()).await;
    hub.client.dial(other.addr().await).await.unwrap();
    wait_until("the hub to reach a peer it dials", || async {
        hub.connected_to(&other).await
    })
    .await;
    // One that leaves gives its place back to the address.
    let mut inside = None;
    for (i, s) in sybils.iter().enumerate() {
        if hub.connected_to(s).await {
            inside = Some(i);
        }
    }
    drop(sybils.remove(inside.expect("three are connected")));
    let late = TestNode::start(Vec::new(), TestHandler::default()).await;
    wait_until(
        "a newcomer from the address to get the freed place",
        || async {
            let _ = late.client.dial(hub_addr.clone()).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            hub.connected_to(&late).await
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_full_of_strangers_still_dials_out_and_lets_its_partners_in() {
    init_tracing();
    const LIMIT: u32 = 8;
    let partner_key = Keypair::generate_ed25519();
    let mut hub_config = config(Vec::new());
    hub_config.limits.set_max_connections(LIMIT);
    let l = &mut hub_config.limits;
    (l.connections_low_water, l.connections_high_water) = (LIMIT, LIMIT);
    hub_config.trusted = vec![partner_key.public().to_peer_id()];
    let hub = TestNode::start_config(
        Keypair::generate_ed25519(),
        hub_config,
        TestHandler::default(),
    )
    .await;
    let hub_addr = hub.addr().await;
    // Strangers dial in until the hub refuses them: they get all but an
    // eighth of its connections (7 of 8).
    let mut strangers = Vec::new();
    for _ in 0..LIMIT + 1 {
        let s = TestNode::start(Vec::new(), TestHandler::default()).await;
        s.client.dial(hub_addr.clone()).await.unwrap();
        strangers.push(s);
    }
    refused_for(&hub, "connection_limit", 1).await;
    wait_until("seven strangers to be connected", || async {
        connected_count(&hub, &strangers).await == 7
    })
    .await;
    // The slot kept for the hub's own dials.
    let other = TestNode::start(Vec::new(), TestHandler::default()).await;
    hub.client.dial(other.addr().await).await.unwrap();
    wait_until("the full hub to reach a peer it dials", || async {
        hub.connected_to(&other).await
    })
    .await;
    // A trusted partner gets in over the limit.
    let partner =
        TestNode::start_config(partner_key, config(Vec::new()), TestHandler::default()).await;
    partner.client.dial(hub_addr.clone()).await.unwrap();
    wait_until("the hub to let its trusted partner in", || async {
        hub.connected_to(&partner).await
    })
    .await;
    assert_eq!(connected_count(&hub, &strangers).await, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_flooding_provider_announcements_gets_its_quarter_and_the_node_keeps_room() {
    init_tracing();
    // A small provider store: 64 keys, 16 for any one peer, 16 kept for
    // the node's own.
    let mut victim_config = config(Vec::new());
    victim_config.limits.max_provider_keys = 64;
    let victim = TestNode::start_config(
        Keypair::generate_ed25519(),
        victim_config,
        TestHandler::default(),
    )
    .await;
    let flooder = TestNode::start(vec![victim.addr().await], TestHandler::default()).await;
    wait_until("the flooder to reach the node", || async {
        flooder.connected_to(&victim).await
            && flooder.client.status().await.unwrap().routing_table_peers >= 1
    })
    .await;
    // The flooder announces 120 capabilities: the node is the closest
    // peer to every key (it is the only one).
    for batch in 0..2 {
        let caps: Vec<String> = (0..60).map(|i| format!("junk-{batch}-{i}")).collect();
        let agent = format!("junk-{batch}");
        let refs: Vec<&str> = caps.iter().map(String::as_str).collect();
        let _ = flooder
            .client
            .publish(record("ok", &agent, &refs), agent.clone(), caps)
            .await;
    }
    wait_until(
        "the node to refuse the flood past the flooder's quarter",
        || async {
            victim
                .client
                .stats()
                .providers_refused_by
                .get("peer_quota")
                .is_some_and(|n| *n > 0)
        },
    )
    .await;
    // Keys held, not announcements stored: a key announced again by the
    // same peer is stored again without holding more.
    let held = victim.client.status().await.unwrap().peer_provider_keys;
    assert!(
        (1..=16).contains(&held),
        "one peer holds at most a quarter: {held} keys, {:?}",
        victim.client.stats()
    );
    // The node's own announcement still finds room.
    let report = victim
        .client
        .publish(
            record("ok", "own", &["translation"]),
            "own".into(),
            vec!["translation".into()],
        )
        .await
        .unwrap();
    assert!(
        !matches!(report.capabilities[0].1, DhtOutcome::Failed { .. }),
        "{report:?}"
    );
    assert_eq!(victim.client.status().await.unwrap().provided_keys, 1);
}
