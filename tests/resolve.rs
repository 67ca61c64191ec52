//! `POST /resolve` on the real `agentmesh node` binary, over HTTP on
//! loopback, with agents registered through the API (and, for trust,
//! crawled from a testbed): each policy term keeps out a well-matching
//! agent that fails it while a compliant one is answered; the reasons;
//! the invocation metadata; the bounds and every refusal.

use crate::common;

use agentmesh::testbed::Testbed;
use common::{testbed_with_ca, Api, TestNode};
use serde_json::{json, Value};

const INTENT: &str = "summarize legal documents";

/// A summarizer; `extra`'s members replace or add to the document's.
fn summarizer(id: &str, name: &str, description: &str, extra: Value) -> Value {
    let mut doc = json!({
        "id": id,
        "name": name,
        "description": description,
        "capabilities": ["summarization"],
        "endpoint": format!("https://agents.example.net/{id}"),
        "supported_languages": ["en"],
        "status": "active",
        "authentication": {"type": "api_key"},
        "inputs": {"type": "object", "properties": {"text": {"type": "string"}}},
        "outputs": {"type": "object"}
    });
    for (k, v) in extra.as_object().expect("extra is an object") {
        doc[k] = v.clone();
    }
    doc
}

/// The best match for [`INTENT`]: its name and description say it twice.
fn strong(id: &str, extra: Value) -> Value {
    summarizer(
        id,
        "Legal Document Summarizer",
        "Summarizes legal documents: contracts, briefs and other legal documents.",
        extra,
    )
}

/// A weaker match for [`INTENT`].
fn plain(id: &str, extra: Value) -> Value {
    summarizer(id, "Text helper", "Summarizes text.", extra)
}

/// Resolves `body`; every resolution's candidate scores never rise down
/// the list (sorting by score keeps the node's order).
async fn resolve(api: &Api, body: Value) -> Value {
    let r = api.post("/resolve", &body).await.expect(200).clone();
    let scores: Vec<f64> = r["candidates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["score"].as_f64())
        .collect();
    assert!(
        scores.windows(2).all(|w| w[0] >= w[1]),
        "scores rise down the candidates: {scores:?}"
    );
    r
}

fn candidate_ids(r: &Value) -> Vec<String> {
    common::ids(&r["candidates"])
}

fn codes(candidate: &Value) -> Vec<String> {
    candidate["reasons"]
        .as_array()
        .unwrap_or_else(|| panic!("no reasons in {candidate}"))
        .iter()
        .map(|r| {
            assert!(r["detail"].as_str().is_some_and(|d| !d.is_empty()), "{r}");
            r["code"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// Registers `failing` (the best match, failing the term) and
/// `compliant`; without `policy` both are answered, the failing one
/// first; with it only the compliant one, with a reason `code`.
async fn term_keeps_out(failing: Value, compliant: Value, policy: Value, code: &str) -> Value {
    let node = TestNode::start();
    let api = node.api();
    api.register(&failing).await;
    api.register(&compliant).await;
    let (bad, good) = (
        failing["id"].as_str().unwrap(),
        compliant["id"].as_str().unwrap(),
    );

    let open = resolve(&api, json!({"intent": INTENT})).await;
    assert_eq!(
        candidate_ids(&open),
        [bad, good],
        "without the policy: {open}"
    );

    let r = resolve(&api, json!({"intent": INTENT, "policy": policy})).await;
    assert_eq!(candidate_ids(&r), [good], "with {policy}: {r}");
    assert!(codes(&r["candidates"][0]).iter().any(|c| c == code), "{r}");
    // Languages are terms of the index query: the failing agent is not
    // even examined. Other terms are checked on each record examined.
    let refused = if code == "policy_language" {
        Value::Null
    } else {
        json!(1)
    };
    assert_eq!(r["refused"][code], refused, "{r}");
    r
}

/// The language the context prefers places a weaker match that supports
/// it first; the stronger match after it scores no higher, so the
/// candidates' scores say what their order says.
#[tokio::test]
async fn a_preferred_language_comes_first_and_scores_follow_the_order() {
    let node = TestNode::start();
    let api = node.api();
    for doc in [
        strong("strong-en", json!({})),
        plain("plain-de", json!({"supported_languages": ["de"]})),
    ] {
        api.post("/agents", &doc).await.expect(201);
    }
    let r = resolve(
        &api,
        json!({"intent": INTENT, "context": {"language": "de"}}),
    )
    .await;
    assert_eq!(candidate_ids(&r), ["plain-de", "strong-en"]);
    let scores: Vec<f64> = r["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["score"].as_f64().unwrap())
        .collect();
    assert!(scores[0] >= scores[1], "{scores:?}");
}

/// With no policy on status, a candidate whose document says it is not
/// serving is answered, after the weaker match that is, at a quarter of
/// its match: as a search page places it.
#[tokio::test]
async fn a_candidate_not_serving_comes_after_the_rest() {
    let node = TestNode::start();
    let api = node.api();
    for doc in [
        strong("strong-old", json!({"status": "deprecated"})),
        plain("plain-active", json!({})),
    ] {
        api.post("/agents", &doc).await.expect(201);
    }
    let r = resolve(&api, json!({"intent": INTENT})).await;
    assert_eq!(candidate_ids(&r), ["plain-active", "strong-old"], "{r}");
    let search = api.search(json!({"query": INTENT, "scope": "local"})).await;
    assert_eq!(
        search.ids(),
        ["plain-active", "strong-old"],
        "{}",
        search.text
    );
}

// ------------------------------------------------------------ policy terms

#[tokio::test]
async fn languages_keep_out_an_agent_without_one_of_them() {
    let r = term_keeps_out(
        strong("bad", json!({})),
        plain("good", json!({"supported_languages": ["en", "zh-Hant"]})),
        json!({"languages": ["zh", "en"]}),
        "policy_language",
    )
    .await;
    let details: Vec<&str> = r["candidates"][0]["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["code"] == "policy_language")
        .map(|x| x["detail"].as_str().unwrap())
        .collect();
    assert_eq!(
        details,
        [
            "language en supported (en)",
            "language zh supported (zh-Hant)"
        ]
    );
}

#[tokio::test]
async fn status_keeps_out_an_agent_in_another_state() {
    // Under maintenance, a strong match keeps its place (at three
    // quarters of its score) until the policy asks for `active`; one not
    // serving comes last anyway (a_candidate_not_serving_comes_after_the_rest).
    term_keeps_out(
        strong("bad", json!({"status": "maintenance"})),
        plain("good", json!({})),
        json!({"status": ["active"]}),
        "policy_status",
    )
    .await;
}

#[tokio::test]
async fn exclude_keeps_out_the_ids_it_lists() {
    term_keeps_out(
        strong("bad", json!({})),
        plain("good", json!({})),
        json!({"exclude": ["bad", "someone-else"]}),
        "policy_exclude",
    )
    .await;
}

#[tokio::test]
async fn protocols_keep_out_an_agent_offering_none_of_them() {
    term_keeps_out(
        strong("bad", json!({"protocols": ["mcp"]})),
        plain("good", json!({"protocols": ["A2A"]})),
        json!({"protocols": ["a2a", "grpc"]}),
        "policy_protocol",
    )
    .await;
}

#[tokio::test]
async fn interfaces_keep_out_an_agent_offering_none_of_them() {
    // Without an `interfaces` member an AIDIP agent offers `api` only.
    term_keeps_out(
        strong("bad", json!({})),
        plain(
            "good",
            json!({"interfaces": {"chat": "https://agents.example.net/good/chat"}}),
        ),
        json!({"interfaces": ["chat"]}),
        "policy_interface",
    )
    .await;
}

#[tokio::test]
async fn jurisdiction_keeps_out_an_agent_declaring_another_or_none() {
    let node = TestNode::start();
    let api = node.api();
    api.register(&strong("elsewhere", json!({"jurisdiction": ["DE", "US"]})))
        .await;
    api.register(&strong("undeclared", json!({}))).await;
    api.register(&plain("good", json!({"jurisdiction": "de"})))
        .await;
    let open = resolve(&api, json!({"intent": INTENT})).await;
    assert_eq!(candidate_ids(&open).len(), 3, "{open}");
    let r = resolve(
        &api,
        json!({"intent": INTENT, "policy": {"jurisdiction": ["EU", "DE", "FR"]}}),
    )
    .await;
    assert_eq!(candidate_ids(&r), ["good"], "{r}");
    assert_eq!(r["refused"]["policy_jurisdiction"], 2, "{r}");
    let reason = r["candidates"][0]["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["code"] == "policy_jurisdiction")
        .unwrap()
        .clone();
    assert_eq!(reason["detail"], "declares DE, within EU, DE, FR");
}

#[tokio::test]
async fn max_price_keeps_out_dearer_other_currency_and_unpriced_agents() {
    let node = TestNode::start();
    let api = node.api();
    let per_call = |amount: f64, currency: &str| json!({"pricing": {"model": "per_call", "details": {"amount": amount, "currency": currency}}});
    api.register(&strong("dear", per_call(0.5, "USD"))).await;
    api.register(&strong("euro", per_call(0.001, "EUR"))).await;
    api.register(&strong("unpriced", json!({}))).await;
    api.register(&plain("cheap", per_call(0.001, "USD"))).await;
    api.register(&plain("free", json!({"pricing": {"model": "free"}})))
        .await;
    let open = resolve(&api, json!({"intent": INTENT})).await;
    assert_eq!(candidate_ids(&open).len(), 5, "{open}");
    let r = resolve(
        &api,
        json!({"intent": INTENT, "policy": {"max_price": {"amount": 0.01, "currency": "USD"}}}),
    )
    .await;
    let mut ids = candidate_ids(&r);
    ids.sort();
    assert_eq!(ids, ["cheap", "free"], "{r}");
    assert_eq!(r["refused"]["policy_max_price"], 3, "{r}");
    // A bare number compares amounts in whatever currency is declared.
    let bare = resolve(
        &api,
        json!({"intent": INTENT, "policy": {"max_price": 0.01}}),
    )
    .await;
    let mut ids = candidate_ids(&bare);
    ids.sort();
    assert_eq!(ids, ["cheap", "euro", "free"], "{bare}");
}

#[tokio::test]
async fn max_latency_keeps_out_slower_and_undeclared_agents() {
    let node = TestNode::start();
    let api = node.api();
    api.register(&strong("slow", json!({"latency_ms": 3000})))
        .await;
    api.register(&strong("silent", json!({}))).await;
    api.register(&plain("fast", json!({"latency_ms": 120})))
        .await;
    let r = resolve(
        &api,
        json!({"intent": INTENT, "policy": {"max_latency_ms": 500}}),
    )
    .await;
    assert_eq!(candidate_ids(&r), ["fast"], "{r}");
    assert_eq!(r["refused"]["policy_max_latency"], 2, "{r}");
}

/// A testbed of healthy agents and its CA written to `<dir>/ca.pem`,
/// and a node that trusts both; one agent crawled (key-verified).
async fn node_with_a_crawled_agent() -> (Testbed, TestNode, tempfile::TempDir, String, String) {
    let (testbed, dir, ca) = testbed_with_ca(31, 3).await;
    let node = tokio::task::block_in_place(|| TestNode::builder().crawling(&testbed, &ca).start());
    let agent = &testbed.population().agents()[0];
    let (id, domain) = (agent.id(), agent.domain.clone());
    let capability = agent.capabilities[0].id.clone();
    let reply = node
        .api()
        .post("/crawl", &json!({"domains": [domain], "wait": true}))
        .await;
    let level = reply.expect(200)["reports"][0]["trust"]["level"].clone();
    assert_eq!(level, "key-verified", "{}", reply.text);
    (testbed, node, dir, id, capability)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_trust_keeps_out_unverified_agents_however_well_they_match() {
    let (_testbed, node, _dir, crawled, capability) = node_with_a_crawled_agent().await;
    let api = node.api();
    // Registered here: unverified, and its name is the intent word for word.
    let intent = format!("{capability} agent");
    api.register(&summarizer(
        "registered",
        &format!("{capability} {capability}"),
        &format!("The {capability} agent, for {capability}."),
        json!({"capabilities": [capability.clone()]}),
    ))
    .await;
    let open = resolve(&api, json!({"intent": intent, "top": 50})).await;
    let ids = candidate_ids(&open);
    assert_eq!(ids[0], "registered", "{open}");
    assert!(ids.contains(&crawled), "{open}");

    let r = resolve(
        &api,
        json!({"intent": intent, "top": 50, "policy": {"min_trust": "key-verified"}}),
    )
    .await;
    assert_eq!(candidate_ids(&r), [crawled.as_str()], "{r}");
    let c = &r["candidates"][0];
    assert_eq!(c["trust"]["level"], "key-verified");
    let reason = c["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["code"] == "policy_min_trust")
        .unwrap_or_else(|| panic!("no policy_min_trust reason in {c}"));
    assert_eq!(reason["detail"], "trust key-verified ≥ key-verified");
    assert_eq!(c["invocation"]["protocol"], "adp");

    // Nothing crawled here validated under DNSSEC: that policy leaves no
    // candidate (the agent answered when DNSSEC is proven is tested
    // beside the resolver, where the evidence can be set).
    let dnssec = resolve(
        &api,
        json!({"intent": intent, "top": 50, "policy": {"dnssec_required": true}}),
    )
    .await;
    assert_eq!(candidate_ids(&dnssec), Vec::<String>::new(), "{dnssec}");
    assert_eq!(dnssec["refused"]["policy_dnssec"], 2, "{dnssec}");
}

// ------------------------------------------------- reasons and invocation

#[tokio::test]
async fn reasons_name_what_matched_and_each_term_passed() {
    let node = TestNode::start();
    let api = node.api();
    api.register(&strong(
        "zh-legal",
        json!({"supported_languages": ["zh-Hans", "en"]}),
    ))
    .await;
    let r = resolve(
        &api,
        json!({
            "intent": "I need an agent that can summarize long legal documents in Chinese.",
            "context": {"domain": "legal", "channel": "email"},
            "policy": {"min_trust": "unverified", "languages": ["en"], "status": ["active"],
                       "exclude": ["other"]},
            "top": 3
        }),
    )
    .await;
    assert_eq!(r["understood"]["capabilities"], json!(["summarization"]));
    assert_eq!(r["understood"]["languages"], json!(["zh"]));
    assert_eq!(r["understood"]["context_ignored"], json!(["channel"]));
    let c = &r["candidates"][0];
    assert_eq!(c["id"], "zh-legal");
    assert!(
        c["score"].as_f64().is_some_and(|s| s > 0.0 && s <= 1.0),
        "{c}"
    );
    assert_eq!(
        codes(c),
        [
            "intent_matched",
            "capability_matched",
            "language_supported",
            "policy_exclude",
            "policy_min_trust",
            "policy_language",
            "policy_status",
        ]
    );
    let details: Vec<&str> = c["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["detail"].as_str().unwrap())
        .collect();
    assert!(
        details.contains(&"capability summarization matched"),
        "{details:?}"
    );
    assert!(
        details.contains(&"language zh supported (zh-Hans)"),
        "{details:?}"
    );
    assert!(
        details.contains(&"trust unverified ≥ unverified"),
        "{details:?}"
    );
    assert_eq!(c["trust"]["level"], "unverified");
    assert_eq!(c["source"], "local");
    assert_eq!(c["endpoint"], "https://agents.example.net/zh-legal");
}

#[tokio::test]
async fn invocation_names_the_operation_its_schema_and_auth() {
    let node = TestNode::start();
    let api = node.api();
    api.register(&json!({
        "id": "lingo",
        "name": "Lingo",
        "description": "Translation and language detection.",
        "capabilities": ["translation", "language_detection"],
        "endpoint": "https://lingo.example.net/invoke",
        "authentication": {"type": "oauth2_bearer", "scopes": ["lingo.use"]},
        "operations": [
            {"name": "translateText", "description": "Translates text between languages.",
             "inputs": {"type": "object", "required": ["text", "target_language"]},
             "outputs": {"type": "object"}},
            {"name": "detectLanguage", "description": "Detects the language a text is written in.",
             "inputs": {"type": "object", "required": ["text"],
                        "properties": {"text": {"type": "string"}}},
             "outputs": {"type": "object"}}
        ]
    }))
    .await;
    let r = resolve(&api, json!({"intent": "detect the language of a message"})).await;
    let inv = &r["candidates"][0]["invocation"];
    assert_eq!(inv["operation"], "detectLanguage", "{r}");
    assert_eq!(
        inv["input_schema"],
        json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}})
    );
    assert_eq!(inv["auth"], "oauth2_bearer");
    assert_eq!(inv["auth_scopes"], json!(["lingo.use"]));
    assert_eq!(inv["protocol"], "aidip");
    assert_eq!(inv["method"], "POST");
    assert_eq!(inv["endpoint"], "https://lingo.example.net/invoke");

    let r = resolve(&api, json!({"intent": "translate this into French"})).await;
    assert_eq!(
        r["candidates"][0]["invocation"]["operation"],
        "translateText"
    );
}

// ------------------------------------------------------------- the bounds

#[tokio::test]
async fn the_over_fetch_bound_is_reported_when_it_ends_the_walk() {
    let node = TestNode::start();
    let api = node.api();
    for i in 0..12 {
        api.register(&strong(
            &format!("off-{i:02}"),
            json!({"status": "inactive"}),
        ))
        .await;
    }
    // top 1: ten records examined, all refused, more left.
    let r = resolve(
        &api,
        json!({"intent": INTENT, "top": 1, "policy": {"status": ["active"]}}),
    )
    .await;
    assert_eq!(candidate_ids(&r), Vec::<String>::new());
    assert_eq!(
        (r["examined"].clone(), r["examine_limit"].clone()),
        (json!(10), json!(10))
    );
    assert_eq!(r["bound_reached"], true, "{r}");
    // top 2: twenty may be examined; all twelve were, nothing is left.
    let r = resolve(
        &api,
        json!({"intent": INTENT, "top": 2, "policy": {"status": ["active"]}}),
    )
    .await;
    assert_eq!(r["examined"], 12, "{r}");
    assert_eq!(r["bound_reached"], false, "{r}");
    assert_eq!(r["refused"]["policy_status"], 12, "{r}");
}

#[tokio::test]
async fn refusals_name_every_problem_and_nothing_is_guessed() {
    let node = TestNode::start();
    let api = node.api();
    api.register(&strong("any", json!({}))).await;
    let post = |body: Value| {
        let api = api.clone();
        async move { api.post("/resolve", &body).await }
    };
    // A misspelt policy term is refused, never ignored.
    let r = post(json!({"intent": INTENT, "policy": {"min_trsut": "key-verified"}})).await;
    let p = r.expect_field_problem("/policy/min_trsut");
    assert!(p["message"].as_str().unwrap().contains("min_trust"), "{p}");

    for (body, field) in [
        (json!({}), "/intent"),
        (json!({"intent": ""}), "/intent"),
        (json!({"intent": "x".repeat(1025)}), "/intent"),
        (json!({"intent": INTENT, "top": 51}), "/top"),
        (json!({"intent": INTENT, "top": 0}), "/top"),
        (json!({"intent": INTENT, "scope": "everywhere"}), "/scope"),
        (json!({"intent": INTENT, "filters": {}}), "/filters"),
        (
            json!({"intent": INTENT, "policy": {"min_trust": "trusted"}}),
            "/policy/min_trust",
        ),
        (
            json!({"intent": INTENT, "policy": {"languages": ["en", "not a tag"]}}),
            "/policy/languages/1",
        ),
        (
            json!({"intent": INTENT, "policy": {"exclude": (0..33).map(|i| i.to_string()).collect::<Vec<_>>()}}),
            "/policy/exclude",
        ),
        (
            json!({"intent": INTENT, "policy": {"status": []}}),
            "/policy/status",
        ),
        (
            json!({"intent": INTENT, "policy": {"max_price": "cheap"}}),
            "/policy/max_price",
        ),
        (
            json!({"intent": INTENT, "policy": {"max_price": {"amount": 1, "currency": "dollars"}}}),
            "/policy/max_price/currency",
        ),
        (
            json!({"intent": INTENT, "policy": {"jurisdiction": ["E U"]}}),
            "/policy/jurisdiction/0",
        ),
        (
            json!({"intent": INTENT, "policy": {"max_latency_ms": -1}}),
            "/policy/max_latency_ms",
        ),
        (
            json!({"intent": INTENT, "policy": {"dnssec_required": "yes"}}),
            "/policy/dnssec_required",
        ),
        (json!({"intent": INTENT, "policy": []}), "/policy"),
        (
            json!({"intent": INTENT, "context": {"language": "??"}}),
            "/context/language",
        ),
    ] {
        post(body).await.expect_field_problem(field);
    }
    // Several problems at once are all reported.
    let r = post(json!({"top": 99, "policy": {"nope": 1}})).await;
    assert_eq!(r.expect_problems().len(), 3, "{}", r.text);

    // Not JSON, not JSON's content type, too large.
    let raw = api
        .post_raw(
            "/resolve",
            Some("application/json"),
            b"{\"intent\":".to_vec(),
        )
        .await;
    raw.expect_error(400, "InvalidInput");
    let raw = api
        .post_raw(
            "/resolve",
            Some("text/plain"),
            br#"{"intent":"x"}"#.to_vec(),
        )
        .await;
    raw.expect_error(415, "InvalidInput");
    let huge = json!({"intent": INTENT, "context": {"notes": "x".repeat(70 * 1024)}});
    post(huge).await.expect_error(413, "InvalidInput");
    let r = api.get("/resolve").await;
    r.expect_error(405, "InvalidInput");
}

// ----------------------------------------------------------------- the mesh

#[tokio::test]
async fn a_mesh_resolution_says_what_left_the_node() {
    let node = TestNode::start();
    let api = node.api();
    api.register(&strong("local", json!({}))).await;
    let r = resolve(&api, json!({"intent": INTENT, "scope": "mesh"})).await;
    assert_eq!(candidate_ids(&r), ["local"]);
    assert_eq!(
        r["mesh"],
        json!({"asked": true, "intent_shared": false,
               "capabilities": ["summarization"], "languages": []}),
        "{r}"
    );
    let r = resolve(
        &api,
        json!({"intent": "something for the ACME merger", "scope": "mesh"}),
    )
    .await;
    assert_eq!(r["mesh"]["asked"], false, "{r}");
    assert!(r["mesh"]["note"].is_string(), "{r}");
    // Local is the default: no mesh member.
    let r = resolve(&api, json!({"intent": INTENT})).await;
    assert!(r.get("mesh").is_none(), "{r}");
}
