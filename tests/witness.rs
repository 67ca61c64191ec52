//! Witnessing over the mesh (docs/protocol.md#witnessing): nodes check
//! each other's log checkpoints, cosign the ones that extend what they
//! saw, hand the cosignatures back, and catch a log that shows two
//! histories with a proof anyone can check offline.

use agentmesh::tlog::witness::{Equivocation, Fork};
use agentmesh::tlog::{cosign, note::verifier_key, Checkpoint, Notary};
use serde_json::Value;

use crate::common::{agent, wait_until, Api, TestNode};

const PRIVATE: (&str, &str) = ("AGENTMESH_P2P__ALLOW_PRIVATE_ADDRESSES", "true");
const QUICK: (&str, &str) = ("AGENTMESH_P2P__WITNESS_INTERVAL", "200ms");
const UNLIMITED: (&str, &str) = ("AGENTMESH_API__LIMITS__ENABLED", "false");

async fn p2p_addr(api: &Api) -> String {
    api.get("/health").await.expect(200)["listen_addrs"][0]
        .as_str()
        .expect("a listen address")
        .to_owned()
}

/// A node with private addresses allowed and the quick witness interval,
/// joined to the mesh through `bootstrap`.
fn quick_peer(bootstrap: &str) -> TestNode {
    TestNode::builder()
        .env(PRIVATE.0, PRIVATE.1)
        .env(QUICK.0, QUICK.1)
        .args(&["--bootstrap", bootstrap])
        .start()
}

/// Registers agents `w-{i}` for each `i` of `range` on `api`.
async fn register(api: &Api, range: std::ops::Range<u32>) {
    for i in range {
        api.post(
            "/agents",
            &agent(&format!("w-{i}"), &["translation"], &[], &["en"]),
        )
        .await
        .expect(201);
    }
}

/// The checkpoint of `node`'s log that at least `n` witnesses cosigned,
/// when there is one.
async fn cosigned(api: &Api, n: usize) -> Option<String> {
    let reply = api.get(&format!("/log/checkpoint?witnesses={n}")).await;
    (reply.status == 200).then(|| reply.text.clone())
}

/// Opens `note` as a checkpoint of `peer`'s log.
fn open(note: &str, peer: &str) -> Checkpoint {
    let key = agentmesh::identity::key_of_peer_id(peer).expect("an Ed25519 peer id");
    let vkey = verifier_key(&Notary::default_origin(peer), &key);
    Checkpoint::open(note.as_bytes(), &vkey, None)
        .unwrap_or_else(|e| panic!("not a checkpoint of {peer}: {e}\n{note}"))
}

/// When `witness` cosigned `note` (a C2SP tlog-cosignature under the
/// witness name `agentmesh/<peer id>`).
fn cosigned_by(note: &str, witness: &str) -> Option<u64> {
    let key = agentmesh::identity::key_of_peer_id(witness).expect("an Ed25519 peer id");
    let now = agentmesh::record::unix_now();
    cosign::cosigned_at(note.as_bytes(), &Notary::default_origin(witness), &key, now)
        .expect("a well-formed cosignature")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_witness_a_growing_log_and_its_checkpoint_carries_their_cosignatures() {
    let a = TestNode::start_with_env(&[PRIVATE, QUICK, UNLIMITED]);
    let a_api = a.api();
    let b = quick_peer(&p2p_addr(&a_api).await);
    let b_api = b.api();
    // Nothing witnessed yet: asked for a cosigned checkpoint, A says so.
    a_api
        .get("/log/checkpoint?witnesses=1")
        .await
        .expect_error(404, "NotFound");
    register(&a_api, 0..3).await;
    wait_until("B to cosign A's checkpoint", || async {
        cosigned(&a_api, 1).await.is_some()
    })
    .await;
    let first = cosigned(&a_api, 1).await.unwrap();
    let first_size = open(&first, a.peer_id()).size;
    assert!(first_size >= 1, "{first}");
    assert!(cosigned_by(&first, b.peer_id()).is_some(), "{first}");

    // A grows: B checks the consistency proof from what it saw before it
    // cosigns again.
    register(&a_api, 3..6).await;
    wait_until("B to cosign A's grown log", || async {
        match cosigned(&a_api, 1).await {
            Some(note) => open(&note, a.peer_id()).size >= 6,
            None => false,
        }
    })
    .await;
    let grown = cosigned(&a_api, 1).await.unwrap();
    assert!(cosigned_by(&grown, b.peer_id()).is_some(), "{grown}");
    let peers = b_api.get("/peers").await;
    let witness = &peers.expect(200)["witness"];
    assert!(
        witness["counts"]["cosigned"].as_u64().unwrap() >= 2,
        "{witness}"
    );
    assert_eq!(witness["counts"]["equivocations"], 0, "{witness}");
    assert_eq!(witness["equivocated"], Value::Array(vec![]), "{witness}");
    // Nobody asked for two cosignatures has them.
    a_api
        .get("/log/checkpoint?witnesses=2")
        .await
        .expect_error(404, "NotFound");
    a_api
        .get("/log/checkpoint?witnesses=many")
        .await
        .expect_error(400, "InvalidInput");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_showing_two_histories_is_caught_and_the_proof_holds_offline() {
    // A's test hook signs each checkpoint twice, with two roots.
    let a = TestNode::start_with_env(&[PRIVATE, QUICK, ("AGENTMESH_TEST_SPLIT_VIEW", "1")]);
    let a_api = a.api();
    let a_addr = p2p_addr(&a_api).await;
    let b = quick_peer(&a_addr);
    let b_api = b.api();
    // C only reports what it catches.
    let c = TestNode::builder()
        .env(PRIVATE.0, PRIVATE.1)
        .env(QUICK.0, QUICK.1)
        .env("AGENTMESH_P2P__ON_EQUIVOCATION", "report")
        .args(&["--bootstrap", &p2p_addr(&b_api).await])
        .start();
    let c_api = c.api();
    a_api
        .post("/agents", &agent("split", &["translation"], &[], &["en"]))
        .await
        .expect(201);

    for (name, api) in [("B", &b_api), ("C", &c_api)] {
        wait_until(&format!("{name} to hold A's equivocation"), || async {
            let held = api.get("/log/equivocations").await;
            held.expect(200)["equivocations"]
                .as_array()
                .is_some_and(|e| e.iter().any(|e| e["peer"] == a.peer_id()))
        })
        .await;
    }
    let held = b_api.get("/log/equivocations").await;
    let proof: Equivocation =
        serde_json::from_value(held.expect(200)["equivocations"][0].clone()).unwrap();
    // Offline: the proof alone convicts A.
    assert!(matches!(proof.verify(), Ok(Fork::SameSize { .. })));
    let first = open(&proof.first, a.peer_id());
    let second = open(&proof.second, a.peer_id());
    assert_eq!(first.size, second.size);
    assert_ne!(first.root, second.root);
    let peers = b_api.get("/peers").await;
    let equivocated = &peers.expect(200)["witness"]["equivocated"];
    assert_eq!(equivocated, &serde_json::json!([a.peer_id()]));

    // Distrusted (p2p.on_equivocation's default): what A signs from now
    // on is refused, not stored.
    a_api
        .post("/agents", &agent("after", &["translation"], &[], &["en"]))
        .await
        .expect(201);
    wait_until("B to refuse A's new record", || async {
        let peers = b_api.get("/peers").await;
        peers.expect(200)["records"]["refused"]["equivocated"]
            .as_u64()
            .is_some_and(|n| n >= 1)
    })
    .await;
    b_api.get("/agents/after").await.expect(404);
    wait_until("C, which only reports, to hold A's new record", || async {
        c_api.get("/agents/after").await.status == 200
    })
    .await;

    // Kept: B still holds it after a restart.
    let mut b = b;
    b.restart();
    let held = b.api().get("/log/equivocations").await;
    assert_eq!(
        held.expect(200)["equivocations"][0]["peer"],
        a.peer_id(),
        "the proof is gone after a restart"
    );
    // A forged proof is refused by the check: swap in an honest peer.
    let mut forged = proof;
    forged.peer = b.peer_id().to_owned();
    assert!(forged.verify().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_lost_in_gossip_is_repaired_from_its_signers_log() {
    let a = TestNode::start_with_env(&[PRIVATE, QUICK, UNLIMITED]);
    let a_api = a.api();
    // B's test hook drops every record the mesh offers it (gossip, DHT
    // puts): only A's log can bring them.
    let b = TestNode::builder()
        .env(PRIVATE.0, PRIVATE.1)
        .env(QUICK.0, QUICK.1)
        .env("AGENTMESH_TEST_DROP_OFFERED", "1")
        .args(&["--bootstrap", &p2p_addr(&a_api).await])
        .start();
    let b_api = b.api();
    register(&a_api, 0..1).await;
    wait_until("B to witness A's first checkpoint", || async {
        cosigned(&a_api, 1).await.is_some()
    })
    .await;
    // What A signs from now on reaches B through A's log alone.
    register(&a_api, 1..4).await;
    // What B holds, from its store alone (GET /agents/{id} would ask the
    // DHT for what it lacks).
    let held = || async { b_api.get("/agents?limit=100").await.ids() };
    // w-0 was in A's log before B's first checkpoint of it: B looked at
    // A's last entries then.
    wait_until("B to repair w-0 to w-3 from A's log", || async {
        let held = held().await;
        (0..4).all(|i| held.contains(&format!("w-{i}")))
    })
    .await;
    let peers = b_api.get("/peers").await;
    let repaired = peers.expect(200)["witness"]["counts"]["repaired"]
        .as_u64()
        .unwrap();
    assert!(repaired >= 4, "{repaired} entries repaired");
}

/// Gossip that loses records on purpose, at three nodes of four: each of
/// B, C and D drops half of what the mesh offers it (each its own half,
/// every offer of a record it drops), and every one of them still ends up
/// holding everything A registered once it witnessed A's log, repaired
/// from that log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_converges_when_gossip_drops_half_of_what_it_offers() {
    let a = TestNode::start_with_env(&[PRIVATE, QUICK, UNLIMITED]);
    let a_api = a.api();
    let bootstrap = p2p_addr(&a_api).await;
    let lossy: Vec<TestNode> = (0..3)
        .map(|_| {
            TestNode::builder()
                .env(PRIVATE.0, PRIVATE.1)
                .env(QUICK.0, QUICK.1)
                .env("AGENTMESH_TEST_DROP_OFFERED", "50%")
                .args(&["--bootstrap", &bootstrap])
                .start()
        })
        .collect();
    register(&a_api, 0..1).await;
    wait_until("all three to witness A's first checkpoint", || async {
        cosigned(&a_api, 3).await.is_some()
    })
    .await;
    register(&a_api, 1..13).await;
    for (n, node) in lossy.iter().enumerate() {
        let api = node.api();
        // From the store alone (GET /agents/{id} would ask the DHT).
        wait_until(&format!("lossy node {n} to hold w-1 to w-12"), || async {
            let held = api.get("/agents?limit=100").await.ids();
            (1..13).all(|i| held.contains(&format!("w-{i}")))
        })
        .await;
    }
    let mut repaired = 0;
    for node in &lossy {
        let peers = node.api().get("/peers").await;
        repaired += peers.expect(200)["witness"]["counts"]["repaired"]
            .as_u64()
            .unwrap();
    }
    // 36 offers at even odds: the log, not gossip, brought some of them.
    assert!(
        repaired > 0,
        "nothing was repaired: the drop hook dropped nothing"
    );
}

/// A node that joins after A gossiped its agents to the peers it had
/// holds them all once it witnessed A's log: its first checkpoint from A
/// has it look at A's last entries and fetch those no record brought.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_joins_late_catches_up_from_its_first_checkpoint() {
    let a = TestNode::start_with_env(&[PRIVATE, QUICK, UNLIMITED]);
    let a_api = a.api();
    let bootstrap = p2p_addr(&a_api).await;
    let holds_all = |api: Api| async move {
        let held = api.get("/agents?limit=100").await.ids();
        (0..8).all(|i| held.contains(&format!("w-{i}")))
    };
    // B is there when A registers: the records are gossiped, not kept
    // back for a first peer.
    let b = quick_peer(&bootstrap);
    register(&a_api, 100..101).await;
    wait_until("B to subscribe to A's records (and hold w-100)", || async {
        b.api()
            .get("/agents?limit=100")
            .await
            .ids()
            .contains(&"w-100".to_owned())
    })
    .await;
    register(&a_api, 0..8).await;
    wait_until("B to hold w-0 to w-7", || holds_all(b.api())).await;
    let late = quick_peer(&bootstrap);
    wait_until("the late node to see A", || async {
        let peers = late.api().get("/peers").await;
        peers.text.contains(a.peer_id())
    })
    .await;
    // A's log grows: its next checkpoint is the late node's first.
    register(&a_api, 8..9).await;
    wait_until("the late node to hold w-0 to w-7", || holds_all(late.api())).await;
    let peers = late.api().get("/peers").await;
    let repaired = peers.expect(200)["witness"]["counts"]["repaired"]
        .as_u64()
        .unwrap();
    assert!(repaired >= 8, "{repaired} records repaired");
}
