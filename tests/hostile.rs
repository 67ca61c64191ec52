//! The hostile peer, from outside, against the real `agentmesh node`
//! binary: a stranger with a fresh key who reaches a node's open
//! `POST /records`, and a second registry that joins a mesh with an id
//! already registered there. Each test reproduces a finding of the
//! hostile-peer review (SECURITY.md) that held against earlier versions:
//! forged evidence shown as proven, a registration taken over or pinned,
//! a revocation undone.

use crate::common;

use agentmesh::identity;
use agentmesh::record::{self, SignedRecord, TombstoneReason, TombstoneRecord};
use agentmesh::testbed::{Population, Ports};
use common::{claim_everything, signed_registration, wait_until, with_key, Api, Reply, TestNode};
use ed25519_dalek::SigningKey;
use serde_json::{json, Value};

/// A testbed agent's document as its domain publishes it, its id, its
/// key and its first capability.
struct RealAgent {
    id: String,
    document: String,
    key: SigningKey,
    capability: String,
}

fn real_agent() -> RealAgent {
    let population = Population::healthy(77, 1);
    let agent = &population.agents()[0];
    let doc = population.document(
        agent,
        Ports {
            https: 443,
            http: 80,
        },
    );
    RealAgent {
        id: agent.id(),
        capability: doc.to_descriptor().capabilities[0].clone(),
        document: serde_json::to_string(&doc).unwrap(),
        key: agent.key.clone(),
    }
}

fn tombstone(id: &str, seq: u64, reason: TombstoneReason, signer: &SigningKey) -> Vec<u8> {
    let body = TombstoneRecord {
        agent_id: id.into(),
        seq,
        issued_at: record::unix_now(),
        reason,
    };
    SignedRecord::sign_tombstone(&body, signer)
        .unwrap()
        .encode()
}

async fn submit(api: &Api, bytes: Vec<u8>) -> Reply {
    api.post_raw("/records", Some("application/cbor"), bytes)
        .await
}

/// The refusal code a `POST /records` answer carries.
fn refusal(reply: &Reply, status: u16) -> String {
    let body = reply.expect(status);
    body["error"]["details"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn local_search(api: &Api, filters: Value) -> Vec<Value> {
    let body = api
        .search(json!({"filters": filters, "scope": "local"}))
        .await;
    body.expect(200).as_array().cloned().unwrap_or_default()
}

fn a_registration(id: &str, endpoint: &str) -> Value {
    let mut doc = common::agent(id, &["weather-forecast"], &[], &["en"]);
    doc["endpoint"] = json!(endpoint);
    doc
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_forged_evidence_is_shown_as_a_claim_and_never_counted() {
    let node = TestNode::start();
    let api = node.api();
    let agent = real_agent();
    let stranger = identity::generate();
    let forged_doc = with_key(&agent.document, &stranger);

    // Pinned for a century, or a seq no clock will reach: refused.
    let century = claim_everything(&forged_doc, 10, 100 * 365 * 86_400, &stranger, &stranger);
    assert_eq!(
        refusal(&submit(&api, century).await, 400),
        "lifetime_too_long"
    );
    let pinned = claim_everything(&forged_doc, u64::MAX, 3600, &stranger, &stranger);
    assert_eq!(refusal(&submit(&api, pinned).await, 400), "seq_ahead");

    // Within the window: kept, as the stranger's claim.
    let forged = claim_everything(
        &forged_doc,
        record::next_seq(None),
        3600,
        &stranger,
        &stranger,
    );
    submit(&api, forged).await.expect(201);
    let found = local_search(&api, json!({"capabilities": [agent.capability]})).await;
    assert_eq!(found.len(), 1, "{found:?}");
    let trust = &found[0]["trust"];
    assert_eq!(trust["level"], "unverified", "{trust}");
    assert_eq!(trust["claimed"]["level"], "peer-verified", "{trust}");
    assert_eq!(
        trust["claimed"]["by"],
        identity::fingerprint(&stranger.verifying_key())
    );
    for level in ["dns-verified", "key-verified", "peer-verified"] {
        let at_level = local_search(
            &api,
            json!({"capabilities": [agent.capability], "min_trust": level}),
        )
        .await;
        assert!(at_level.is_empty(), "min_trust {level}: {at_level:?}");
    }
    // The resolver sends nobody to the stranger's endpoint on the claim.
    for policy in [
        json!({"min_trust": "key-verified"}),
        json!({"dnssec_required": true}),
    ] {
        let resolved = api
            .post(
                "/resolve",
                &json!({"intent": agent.capability, "policy": policy}),
            )
            .await;
        let candidates = resolved.expect(200)["candidates"].clone();
        assert_eq!(candidates, json!([]), "policy {policy}");
    }
    // With no policy the agent is a candidate, at the level counted.
    let open = api
        .post("/resolve", &json!({"intent": agent.capability}))
        .await;
    let open = open.expect(200)["candidates"].clone();
    assert_eq!(open[0]["id"], agent.id.as_str(), "{open}");
    assert_eq!(open[0]["trust"]["level"], "unverified", "{open}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_cannot_take_over_pin_or_delete_a_registration() {
    let node = TestNode::start();
    let api = node.api();
    api.post(
        "/agents",
        &a_registration("weather-bot", "https://weather.example/api"),
    )
    .await
    .expect(201);
    let stranger = identity::generate();
    let takeover = signed_registration(
        "weather-bot",
        "https://evil.example/api",
        record::next_seq(None) + 1000,
        &stranger,
    );
    assert_eq!(
        refusal(&submit(&api, takeover).await, 403),
        "local_registration"
    );
    let pinned = signed_registration(
        "weather-bot",
        "https://evil.example/api",
        u64::MAX,
        &stranger,
    );
    assert_eq!(refusal(&submit(&api, pinned).await, 400), "seq_ahead");
    let deletion = tombstone(
        "weather-bot",
        record::next_seq(None),
        TombstoneReason::Deleted,
        &stranger,
    );
    assert_eq!(
        refusal(&submit(&api, deletion).await, 403),
        "tombstone_not_authorised"
    );

    let found = local_search(&api, json!({"capabilities": ["weather-forecast"]})).await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["endpoint"], "https://weather.example/api");
    assert_eq!(found[0]["source"], "local");
    // The owner's client still updates and deletes it.
    api.put(
        "/agents/weather-bot",
        &a_registration("weather-bot", "https://weather.example/v2"),
    )
    .await
    .expect(200);
    let found = local_search(&api, json!({"capabilities": ["weather-forecast"]})).await;
    assert_eq!(found[0]["endpoint"], "https://weather.example/v2");
    api.delete("/agents/weather-bot").await.expect(204);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_by_the_agent_key_sticks_across_a_restart() {
    let mut node = TestNode::start();
    let api = node.api();
    let agent = real_agent();
    let gossiper = identity::generate();
    // The real agent, as an (untrusted) node attested it.
    let held = claim_everything(
        &agent.document,
        record::next_seq(None) + 60_000,
        3600,
        &agent.key,
        &gossiper,
    );
    submit(&api, held).await.expect(201);
    // The agent revokes its key (`agentmesh revoke`): a seq below the
    // held one, which a revocation by the agent key still beats.
    let revocation = tombstone(
        &agent.id,
        record::next_seq(None),
        TombstoneReason::Revoked,
        &agent.key,
    );
    submit(&api, revocation).await.expect(201);
    assert!(
        local_search(&api, json!({"capabilities": [agent.capability]}))
            .await
            .is_empty()
    );
    // Whoever holds the compromised key, or replays it, cannot bring the
    // agent back with a higher seq; nor after a restart.
    let back = || {
        claim_everything(
            &agent.document,
            record::next_seq(None) + 120_000,
            3600,
            &agent.key,
            &identity::generate(),
        )
    };
    assert_eq!(refusal(&submit(&api, back()).await, 400), "key_revoked");
    node.restart();
    let api = node.api();
    assert_eq!(refusal(&submit(&api, back()).await, 400), "key_revoked");
    assert!(
        local_search(&api, json!({"capabilities": [agent.capability]}))
            .await
            .is_empty()
    );
}

async fn refused(api: &Api, reason: &str) -> u64 {
    let peers = api.get("/peers").await;
    peers.expect(200)["records"]["refused"][reason]
        .as_u64()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_joining_with_a_taken_id_takes_over_nothing() {
    // As a new user runs it: two nodes, the public API.
    let private = ("AGENTMESH_P2P__ALLOW_PRIVATE_ADDRESSES", "true");
    let a = TestNode::start_with_env(&[private]);
    let a_api = a.api();
    a_api
        .post(
            "/agents",
            &a_registration("weather-bot", "https://a.example/api"),
        )
        .await
        .expect(201);
    // B registers the same id for its own client before it joins A's mesh
    // (its record is the newer one).
    let mut b = TestNode::start_with_env(&[private]);
    b.api()
        .post(
            "/agents",
            &a_registration("weather-bot", "https://b.example/api"),
        )
        .await
        .expect(201);
    let health = a_api.get("/health").await;
    let a_addr = health.expect(200)["listen_addrs"][0]
        .as_str()
        .unwrap()
        .to_owned();
    b.restart_with_args(&["--bootstrap", &a_addr]);
    let b_api = b.api();

    // Each hears the other's record and refuses it.
    wait_until("A to refuse B's record of weather-bot", || async {
        refused(&a_api, "local_registration").await >= 1
    })
    .await;
    // A's record is the older one: B counts it stale before it asks whose
    // it is.
    wait_until("B to refuse A's record of weather-bot", || async {
        refused(&b_api, "stale_seq").await + refused(&b_api, "local_registration").await >= 1
    })
    .await;
    for (api, own) in [
        (&a_api, "https://a.example/api"),
        (&b_api, "https://b.example/api"),
    ] {
        let found = local_search(api, json!({"capabilities": ["weather-forecast"]})).await;
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0]["endpoint"], own);
        assert_eq!(found[0]["source"], "local");
    }
    // And A's client still owns its registration.
    a_api
        .put(
            "/agents/weather-bot",
            &a_registration("weather-bot", "https://a.example/v2"),
        )
        .await
        .expect(200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_hands_an_agent_to_another_and_a_stranger_cannot() {
    let private = ("AGENTMESH_P2P__ALLOW_PRIVATE_ADDRESSES", "true");
    let a = TestNode::start_with_env(&[private]);
    let a_api = a.api();
    a_api
        .post(
            "/agents",
            &a_registration("weather-bot", "https://a.example/api"),
        )
        .await
        .expect(201);
    let health = a_api.get("/health").await;
    let a_addr = health.expect(200)["listen_addrs"][0]
        .as_str()
        .unwrap()
        .to_owned();
    let mut b = TestNode::start_with_env(&[private]);
    b.restart_with_args(&["--bootstrap", &a_addr]);
    let b_api = b.api();
    let b_peer = b_api.get("/health").await.expect(200)["peer_id"]
        .as_str()
        .unwrap()
        .to_owned();
    wait_until("B to hold A's weather-bot", || async {
        local_search(&b_api, json!({"capabilities": ["weather-forecast"]}))
            .await
            .len()
            == 1
    })
    .await;

    // Without A's consent B cannot register the id; with a consent a
    // stranger signed, neither.
    let b_doc = a_registration("weather-bot", "https://b.example/api");
    b_api.post("/agents", &b_doc).await.expect(403);
    let forged = record::Transfer::sign(
        "weather-bot",
        &identity::key_of_peer_id(&b_peer).unwrap(),
        u64::MAX,
        &identity::generate(),
    );
    let with_token = |token: String| {
        b_api
            .request(reqwest::Method::POST, "/agents")
            .header("agentmesh-transfer", token)
            .json(&b_doc)
    };
    let reply = b_api
        .send(
            "POST /agents (forged)".into(),
            with_token(forged.to_token()),
        )
        .await;
    reply.expect(403);
    let reply = b_api
        .send("POST /agents (junk)".into(), with_token("junk!".into()))
        .await;
    reply.expect(400);
    // Only the owner's node signs a hand-over of it.
    b_api
        .post("/admin/agents/weather-bot/transfer", &json!({"to": b_peer}))
        .await
        .expect(403);

    // A hands it over; B registers it with the token.
    let handed = a_api
        .post("/admin/agents/weather-bot/transfer", &json!({"to": b_peer}))
        .await;
    let token = handed.expect(200)["token"].as_str().unwrap().to_owned();
    let reply = b_api
        .send("POST /agents (transfer)".into(), with_token(token))
        .await;
    reply.expect(201);
    // A now serves B's registration, as B's, and A's client no longer
    // writes it.
    wait_until("A to take B's record of weather-bot", || async {
        let found = local_search(&a_api, json!({"capabilities": ["weather-forecast"]})).await;
        found.len() == 1 && found[0]["endpoint"] == "https://b.example/api"
    })
    .await;
    let found = local_search(&a_api, json!({"capabilities": ["weather-forecast"]})).await;
    assert_ne!(found[0]["source"], "local", "{found:?}");
    a_api
        .put(
            "/agents/weather-bot",
            &a_registration("weather-bot", "https://a.example/v2"),
        )
        .await
        .expect(403);
    // B's own later update needs no token and reaches A.
    b_api
        .put(
            "/agents/weather-bot",
            &a_registration("weather-bot", "https://b.example/v2"),
        )
        .await
        .expect(200);
    wait_until("A to take B's update", || async {
        let found = local_search(&a_api, json!({"capabilities": ["weather-forecast"]})).await;
        found.len() == 1 && found[0]["endpoint"] == "https://b.example/v2"
    })
    .await;
}
