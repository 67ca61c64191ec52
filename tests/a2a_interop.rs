//! The gateway's A2A path and the liveness probe against A2A software
//! others wrote: `tests/gateway.rs` and `tests/probe.rs` call
//! the testbed's own A2A agent, whose authors share the node's reading of
//! the spec; here the node calls an agent written with the official A2A
//! Python SDK (`a2a-sdk` on PyPI: an `AgentExecutor` behind the SDK's
//! request handler, card and JSON-RPC routes, under uvicorn,
//! `a2a_interop/a2a_agent.py`), over HTTPS with a certificate from the
//! test CA, on loopback.
//!
//! The SDK serves its card at the well-known path, declaring JSON-RPC at
//! A2A 1.0 and at 0.3 on one URL, and answers both (its 0.3
//! compatibility on). The node holds that card as the SDK serves it (so
//! it speaks 1.0: `SendMessage`, `A2A-Version: 1.0`), the same card as a
//! 0.3 card (its 1.0 `supportedInterfaces` taken out: `message/send`),
//! and the card pointing at a plain web page on the same server. Through
//! `POST /agents/{id}/invoke`, in both versions: a completed task answers
//! 200 with its text (a text input and a data input); a failed task is a
//! 502 `agent_failed`; a task wanting input is a 409 with the agent's
//! question; a skill the card lacks is the client's 400; the plain page is a
//! 502 `not_protocol`. The probe finds both versions `alive` and the page
//! `not_protocol`.
//!
//! The test needs the SDK in a virtualenv (`.ci/run` makes it):
//! `$A2A_SDK_PYTHON`, else `/opt/a2a-sdk/bin/python`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentmesh::crawl::polite::Politeness;
use agentmesh::crawl::probe::Prober;
use agentmesh::crawl::scheduler::ManualClock;
use agentmesh::crawl::{AllowedPorts, Crawler, CrawlerOptions};
use agentmesh::formats::a2a::parse_card;
use agentmesh::issuer::{DescriptorIssue, Durability, Issuer};
use agentmesh::net::AddressPolicy;
use agentmesh::store::{Expect, LiveState, Origin, ProbeProtocol, Store};
use agentmesh::testbed::certs::TestCa;
use serde_json::{json, Value};

use crate::common::{needs, python_with, Api, PythonServer, Reply, TestNode, DEADLINE};

/// How to install what this test needs.
const INSTALL: &str = "python3 -m venv /opt/a2a-sdk && /opt/a2a-sdk/bin/pip install \
                       'a2a-sdk[http-server]==1.3.0' 'uvicorn==0.55.0', or set A2A_SDK_PYTHON";

/// The Python interpreter that has the A2A SDK (with its HTTP server
/// extra) and uvicorn: `$A2A_SDK_PYTHON`, else the virtualenv `.ci/run`
/// makes.
fn sdk_python() -> Option<PathBuf> {
    python_with(
        "A2A_SDK_PYTHON",
        "/opt/a2a-sdk/bin/python",
        "a2a.server.routes, starlette, uvicorn",
    )
}

/// Starts `a2a_agent.py` with a leaf of `ca` for 127.0.0.1 written in
/// `dir`; waits for the port it prints.
fn start_agent(python: &Path, ca: &TestCa, dir: &Path) -> PythonServer {
    PythonServer::start(
        python,
        "tests/a2a_interop/a2a_agent.py",
        &[],
        ca,
        dir,
        "agent",
        "the A2A SDK agent",
    )
}

/// The card the SDK serves at its well-known path, fetched as any client
/// would (trusting the test CA).
async fn served_card(port: u16, ca: &TestCa) -> Value {
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.ca_pem().as_bytes()).unwrap())
        .timeout(DEADLINE)
        .build()
        .unwrap();
    let url = format!("https://127.0.0.1:{port}/.well-known/agent-card.json");
    let answer = client.get(&url).send().await.unwrap();
    assert_eq!(answer.status(), 200, "{url}");
    answer.json().await.unwrap()
}

/// The three cards the node holds, by agent id: the SDK's as served
/// (1.0 first), the same as a 0.3 card, and one pointing at the plain
/// page.
fn cards(served: &Value) -> Vec<(&'static str, Value)> {
    let mut v0 = served.clone();
    v0.as_object_mut().unwrap().remove("supportedInterfaces");
    assert_eq!(
        v0["protocolVersion"], "0.3",
        "the SDK's 0.3 members: {served}"
    );
    let rpc = served["url"].as_str().unwrap().to_owned();
    let plain = serde_json::from_str(
        &served
            .to_string()
            .replace(&rpc, &rpc.replace("/a2a/jsonrpc", "/plain")),
    )
    .unwrap();
    vec![
        ("a2a:sdk-v1.test", served.clone()),
        ("a2a:sdk-v0.test", v0),
        ("a2a:sdk-plain.test", plain),
    ]
}

/// `card` as a signed record a stranger hands in through `POST /records`.
fn record(id: &str, card: &Value, key: &ed25519_dalek::SigningKey) -> Vec<u8> {
    let descriptor = parse_card(card).unwrap().to_descriptor(id);
    let body = agentmesh::record::DescriptorRecord::new(
        descriptor,
        card.to_string(),
        agentmesh::record::next_seq(None),
        agentmesh::record::unix_now(),
        3600,
        agentmesh::trust::Evidence::default(),
    );
    agentmesh::record::SignedRecord::sign_descriptor(&body, key)
        .unwrap()
        .encode()
}

async fn invoke(api: &Api, id: &str, body: Value) -> Reply {
    api.post(&format!("/agents/{id}/invoke"), &body).await
}

/// What the module documentation lists for one version's card.
async fn check_calls(node: &TestNode, id: &str, agent: &PythonServer) {
    let api = &node.api();
    let what = |r: &Reply| {
        format!(
            "{id}: {} {}; the agent said: {}; the node said: {}",
            r.status,
            r.text,
            agent.stderr.text(),
            node.stderr()
        )
    };
    let r = invoke(api, id, json!({"operation": "upper", "input": "hello a2a"})).await;
    assert_eq!(r.status, 200, "{}", what(&r));
    assert_eq!(r.body, json!({"text": "HELLO A2A"}), "{}", what(&r));
    assert_eq!(r.header("x-agentmesh-operation"), Some("upper"));
    // A JSON input travels as a data part: the agent read it as data.
    let r = invoke(
        api,
        id,
        json!({"operation": "upper", "input": {"city": "oslo"}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", what(&r));
    assert_eq!(
        r.body,
        json!({"text": "[{\"CITY\": \"OSLO\"}]"}),
        "{}",
        what(&r)
    );
    // A failed task: the agent's failure (its reason goes to the
    // node's log, not to the client).
    let r = invoke(api, id, json!({"operation": "fail", "input": "x"})).await;
    assert_eq!(
        r.expect_error(502, "Upstream")["details"]["reason"],
        "agent_failed",
        "{}",
        what(&r)
    );
    // A task that wants more input: 409, the agent's question told.
    let r = invoke(api, id, json!({"operation": "ask", "input": "x"})).await;
    r.expect_error(409, "AgentError");
    assert!(r.text.contains("which language?"), "{}", what(&r));
    // A skill the card does not list: the client's, never sent.
    let r = invoke(api, id, json!({"operation": "translate", "input": "x"})).await;
    assert_eq!(
        r.expect_field_problem("/operation")["known"],
        json!(["upper", "fail", "ask"]),
        "{}",
        what(&r)
    );
}

/// The probe, in process, over the three cards: registered here as
/// `agentmesh import` or `POST /agents` would hold them.
async fn probe(cards: &[(&'static str, Value)], port: u16, ca_file: &Path, dir: &Path) {
    let store = Store::open(&dir.join("probe-store"), 16 << 20).unwrap();
    let key = Arc::new(agentmesh::identity::generate());
    let issuer = Issuer::new(store.clone(), key.clone(), Duration::from_secs(3600));
    for (id, card) in cards {
        issuer
            .descriptor(DescriptorIssue {
                descriptor: parse_card(card).unwrap().to_descriptor(id),
                document: card.to_string(),
                evidence: agentmesh::trust::Evidence::default(),
                origin: Origin::Local,
                expect: Expect::LocalOrAbsent,
                durability: Durability::Flushed,
            })
            .await
            .unwrap();
    }
    let options = CrawlerOptions {
        ca_files: vec![ca_file.to_owned()],
        policy: AddressPolicy {
            allow_private: true,
        },
        fetch_timeout: Duration::from_secs(10),
        politeness: Politeness {
            per_host_concurrency: 2,
            per_host_interval: Duration::from_millis(1),
            per_host_burst: 1,
            per_address_concurrency: 8,
            per_address_interval: Duration::ZERO,
            per_address_burst: 1,
        },
        allowed_ports: AllowedPorts::new([port]),
        ..CrawlerOptions::default()
    };
    let crawler = Crawler::new(options, key, "verifier".into()).unwrap();
    let clock = Arc::new(ManualClock::new(agentmesh::record::unix_now()));
    // The SDK's server is Python on a shared 2-core machine.
    let prober = Prober::new(
        crawler,
        store.clone(),
        clock,
        Duration::from_secs(3600),
        100,
    )
    .with_timeout(Duration::from_secs(20));
    let round = prober.round().await.unwrap();
    assert_eq!(round.probed, 3, "{round:?}");
    for (id, expected) in [
        ("a2a:sdk-v1.test", LiveState::Alive),
        ("a2a:sdk-v0.test", LiveState::Alive),
        ("a2a:sdk-plain.test", LiveState::NotProtocol),
    ] {
        let liveness = store
            .freshness(id)
            .await
            .unwrap()
            .and_then(|f| f.liveness)
            .unwrap_or_else(|| panic!("{id} has no liveness"));
        assert_eq!(
            (liveness.state, liveness.protocol),
            (expected, ProbeProtocol::A2a),
            "{id}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the A2A Python SDK (python3 -m venv /opt/a2a-sdk && /opt/a2a-sdk/bin/pip install 'a2a-sdk[http-server]==1.3.0' 'uvicorn==0.55.0', or A2A_SDK_PYTHON)"]
async fn an_a2a_python_sdk_agent_is_called_in_1x_and_0x_and_probed() {
    let python = needs(sdk_python(), "the A2A Python SDK", INSTALL);
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new::<&str>(&[]).unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.ca_pem()).unwrap();
    let agent = tokio::task::block_in_place(|| start_agent(&python, &ca, dir.path()));
    let served = served_card(agent.port, &ca).await;
    let cards = cards(&served);

    let node = tokio::task::block_in_place(|| {
        TestNode::builder()
            .calling(&[agent.port], &ca_file)
            .env("AGENTMESH_API__LIMITS__ENABLED", "false")
            // The SDK's server is Python on a shared 2-core machine.
            .env("AGENTMESH_GATEWAY__TIMEOUT", "20s")
            .start()
    });
    let api = node.api();
    let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    for (id, card) in &cards {
        api.post_raw("/records", Some("application/cbor"), record(id, card, &key))
            .await
            .expect(201);
    }
    check_calls(&node, "a2a:sdk-v1.test", &agent).await;
    check_calls(&node, "a2a:sdk-v0.test", &agent).await;
    let r = invoke(
        &api,
        "a2a:sdk-plain.test",
        json!({"operation": "upper", "input": "x"}),
    )
    .await;
    assert_eq!(
        r.expect_error(502, "Upstream")["details"]["reason"],
        "not_protocol",
        "{}",
        r.text
    );

    probe(&cards, agent.port, &ca_file, dir.path()).await;
}
