//! The invocation gateway calling an ADP agent over its chat WebSocket
//! (docs/protocol.md#gateway-adp): a testbed agent crawled for real (its
//! DNS, its document over TLS, the challenge), then called through
//! `POST /agents/{id}/invoke` with one of its chat capabilities. The
//! agent checks the node's signature on the frame it gets; each of its
//! misbehaviours (asked for with `{"misbehave": MODE}` in the input) maps
//! to its documented outcome; an unknown capability is refused before
//! anything is sent; a handshake that does not prove the key sends
//! nothing; the address policy holds without a connection.

use std::time::Duration;

use agentmesh::config::Config;
use agentmesh::node::Node;
use agentmesh::testbed::{Population, PopulationConfig, Testbed, TestbedOptions};
use serde_json::{json, Value};

use crate::common::{Api, Reply};

/// A healthy population and one of its agents with a capability offered
/// over chat: the testbed, the agent's domain, that capability.
async fn bed() -> (Testbed, String, String) {
    let population = Population::generate(&PopulationConfig::healthy(37, 8));
    let (domain, capability) = population
        .agents()
        .iter()
        .find_map(|a| {
            a.capabilities
                .iter()
                .find(|c| c.interfaces.iter().flatten().any(|i| i == "chat"))
                .map(|c| (a.domain.clone(), c.id.clone()))
        })
        .expect("the population has an agent with a chat capability");
    let testbed = Testbed::start(population, TestbedOptions::default())
        .await
        .expect("the testbed starts");
    (testbed, domain, capability)
}

/// A node crawling the testbed (its resolver, CA and port; loopback
/// allowed unless `tweak` says otherwise), its data under `dir`.
async fn node(bed: &Testbed, dir: &std::path::Path, tweak: impl FnOnce(&mut Config)) -> Node {
    let ca = dir.join("ca.pem");
    bed.write_ca(&ca).unwrap();
    let mut config = Config {
        data_dir: dir.join("data"),
        ..Config::default()
    };
    config.api.listen = "127.0.0.1:0".parse().unwrap();
    config.api.limits.enabled = false;
    config.p2p.listen = vec!["/ip4/127.0.0.1/tcp/0".into()];
    config.p2p.allow_private_addresses = true;
    config.crawl.resolvers = vec![bed.dns_addr()];
    config.crawl.ca_files = vec![ca];
    config.crawl.allow_private_addresses = true;
    config.crawl.allowed_ports = vec![bed.https_port()];
    config.crawl.follow_peers = false;
    config.crawl.recrawl = false;
    config.gateway.timeout = Duration::from_secs(3);
    tweak(&mut config);
    Node::spawn(config).await.expect("the node starts")
}

fn api(n: &Node) -> Api {
    Api::new(format!("http://{}", n.api_addr()))
}

async fn invoke(api: &Api, id: &str, body: &Value) -> Reply {
    api.post(&format!("/agents/{id}/invoke"), body).await
}

/// Crawls `domain` through the node's API and checks it was stored
/// key-verified.
async fn crawl(api: &Api, domain: &str) {
    let crawled = api
        .post("/crawl", &json!({"domains": [domain], "wait": true}))
        .await;
    let report = &crawled.expect(200)["reports"][0];
    assert_eq!(report["stored"], true, "{report}");
    assert_eq!(report["trust"]["level"], "key-verified", "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawled_adp_agent_answers_a_signed_message_and_each_misbehaviour_maps_to_its_outcome() {
    let (bed, domain, capability) = bed().await;
    let dir = tempfile::tempdir().unwrap();
    let node = node(&bed, dir.path(), |_| {}).await;
    let api = api(&node);
    crawl(&api, &domain).await;
    let id = format!("agent:{domain}");
    let site = bed.site(&domain).expect("the site serves");

    // The capability answers; the agent checked the node's signature on
    // the frame before answering.
    let before = site.counts().messages;
    let r = invoke(
        &api,
        &id,
        &json!({"operation": capability, "input": {"text": "hello"}}),
    )
    .await;
    assert_eq!(
        r.expect(200),
        &json!({"capability": capability, "echo": {"text": "hello"}}),
        "{}",
        r.text
    );
    assert_eq!(r.header("x-agentmesh-operation"), Some(capability.as_str()));
    assert_eq!(site.counts().messages, before + 1);

    // (mode, status, error code, details.reason)
    let rows = [
        ("error", 400, "AgentError", "agent_refused"),
        ("bad_signature", 502, "Upstream", "bad_signature"),
        ("unsigned", 502, "Upstream", "bad_signature"),
        ("other_id", 502, "Upstream", "agent_failed"),
        ("not_json", 502, "Upstream", "not_protocol"),
        ("huge", 502, "Upstream", "agent_failed"),
        ("close", 502, "Upstream", "agent_failed"),
        ("silent", 504, "Upstream", "timeout"),
    ];
    for (mode, status, code, reason) in rows {
        let r = invoke(
            &api,
            &id,
            &json!({"operation": capability, "input": {"misbehave": mode}}),
        )
        .await;
        let error = r.expect_error(status, code);
        assert_eq!(error["details"]["reason"], reason, "{mode}: {}", r.text);
        if mode == "error" {
            // The agent's error object, passed on.
            assert_eq!(
                error["details"]["upstream"]["body"]["error"]["code"], "Refused",
                "{}",
                r.text
            );
        } else {
            // Nothing of a reply that did not check is passed on.
            assert!(!r.text.contains("misbehave"), "{mode}: {}", r.text);
        }
    }

    // A capability the agent does not offer over chat: refused, named,
    // nothing sent.
    let before = site.counts().chat;
    let r = invoke(
        &api,
        &id,
        &json!({"operation": "no-such-capability", "input": {}}),
    )
    .await;
    let problem = r.expect_field_problem("/operation");
    assert!(
        problem["known"]
            .as_array()
            .is_some_and(|k| k.contains(&json!(capability))),
        "{}",
        r.text
    );
    // No streaming for ADP.
    let r = invoke(
        &api,
        &id,
        &json!({"operation": capability, "input": {}, "stream": true}),
    )
    .await;
    r.expect_error(400, "InvalidInput");
    assert_eq!(site.counts().chat, before, "nothing connected");

    // A handshake not signed by the agent's key: nothing is sent.
    site.set_handshake_forged(true);
    let messages = site.counts().messages;
    let r = invoke(
        &api,
        &id,
        &json!({"operation": capability, "input": {"text": "secret"}}),
    )
    .await;
    assert_eq!(
        r.expect_error(502, "Upstream")["details"]["reason"],
        "key_not_proven",
        "{}",
        r.text
    );
    assert_eq!(
        site.counts().messages,
        messages,
        "no message frame was sent"
    );
    site.set_handshake_forged(false);
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adp_agent_on_a_loopback_address_is_refused_without_connecting_by_a_node_that_forbids_it(
) {
    let (bed, domain, capability) = bed().await;
    let dir = tempfile::tempdir().unwrap();
    // Crawled (and held, key-verified) while loopback was allowed ...
    let first = node(&bed, dir.path(), |_| {}).await;
    crawl(&api(&first), &domain).await;
    first.shutdown().await.unwrap();
    // ... then the same node, restarted on the same data, forbids it.
    let strict = node(&bed, dir.path(), |c| {
        c.crawl.allow_private_addresses = false
    })
    .await;
    let site = bed.site(&domain).expect("the site serves");
    let before = site.counts().chat;
    let r = invoke(
        &api(&strict),
        &format!("agent:{domain}"),
        &json!({"operation": capability, "input": {"text": "x"}}),
    )
    .await;
    assert_eq!(
        r.expect_error(502, "Upstream")["details"]["reason"],
        "endpoint_refused",
        "{}",
        r.text
    );
    assert_eq!(site.counts().chat, before, "nothing connected to the agent");
    strict.shutdown().await.unwrap();
}

/// The summaries a local search for `capability` answers, with
/// `filters` beside the capability.
async fn summaries(api: &Api, capability: &str, filters: Value) -> Vec<Value> {
    let mut f = json!({"capabilities": [capability]});
    f.as_object_mut()
        .unwrap()
        .extend(filters.as_object().unwrap().clone());
    let body = json!({"scope": "local", "top": 100, "filters": f});
    let r = api.post("/agents/search", &body).await;
    r.expect(200).as_array().unwrap().clone()
}

/// What a search result shows of `id`'s liveness.
async fn liveness_of(api: &Api, id: &str, capability: &str) -> Value {
    let found = summaries(api, capability, json!({})).await;
    let agent = found.iter().find(|a| a["id"] == id).expect("found");
    agent["liveness"].clone()
}

/// Whether a local `alive_within` search for `id`'s capability finds it.
async fn found_alive(api: &Api, id: &str, capability: &str) -> bool {
    summaries(api, capability, json!({"alive_within": 600}))
        .await
        .iter()
        .any(|a| a["id"] == id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_challenge_of_each_visit_is_a_crawled_agent_s_liveness() {
    let (bed, domain, capability) = bed().await;
    let dir = tempfile::tempdir().unwrap();
    let node = node(&bed, dir.path(), |c| {
        c.crawl.recrawl = true;
        // Every visit challenges the agent, unchanged document or not.
        c.crawl.challenge_interval = Duration::ZERO;
    })
    .await;
    let api = api(&node);
    crawl(&api, &domain).await;
    let id = format!("agent:{domain}");
    let live = liveness_of(&api, &id, &capability).await;
    assert_eq!(live["state"], "alive", "{live}");
    assert_eq!(live["protocol"], "adp", "{live}");
    assert!(found_alive(&api, &id, &capability).await);
    // A visit whose handshake does not prove the key: the agent answers
    // the WebSocket, not the protocol; alive_within no longer finds it.
    bed.site(&domain).unwrap().set_handshake_forged(true);
    let crawled = api
        .post("/crawl", &json!({"domains": [domain], "wait": true}))
        .await;
    crawled.expect(200);
    let live = liveness_of(&api, &id, &capability).await;
    assert_eq!(live["state"], "not_protocol", "{live}");
    assert!(!found_alive(&api, &id, &capability).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_a2a_agent_a_crawl_finds_is_probed_on_its_visits_when_asked() {
    let population = Population::generate(&PopulationConfig::healthy(41, 2));
    let options = TestbedOptions {
        formats: true,
        ..TestbedOptions::default()
    };
    let bed = Testbed::start(population, options).await.unwrap();
    let domain = "a2a.formats.test";
    let id = format!("a2a:{domain}");
    for probe_crawled in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let node = node(&bed, dir.path(), |c| {
            c.crawl.recrawl = true;
            c.crawl.probe_crawled = probe_crawled;
            // Cards are read from the testbed's HTTPS port.
            c.crawl.https_port = bed.https_port();
        })
        .await;
        let api = api(&node);
        let crawled = api
            .post("/crawl", &json!({"domains": [domain], "wait": true}))
            .await;
        let reports = crawled.expect(200)["reports"].clone();
        assert!(
            reports
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["agent_id"] == id && r["stored"] == true),
            "{reports}"
        );
        let live = liveness_of(&api, &id, "route_planning").await;
        if probe_crawled {
            // The card's JSON-RPC URL is the testbed's web server, which
            // answers HTTP but not A2A there.
            assert_eq!(live["protocol"], "a2a", "{live}");
            assert_eq!(live["state"], "not_protocol", "{live}");
        } else {
            assert_eq!(live, Value::Null, "not probed unless asked");
        }
        node.shutdown().await.unwrap();
    }
}
