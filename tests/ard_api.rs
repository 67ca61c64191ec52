//! ARD's registry API served by a node (`/ard/search`, `/ard/explore`,
//! `/ard/agents`, `/.well-known/ard.json`): what an ARD client asks, the
//! catalog entries it gets back, and what it is refused, against the
//! real binary.

use crate::common;

use common::{repo_root, Api, TestNode};
use serde_json::{json, Value};

fn agent(id: &str, name: &str, description: &str, capabilities: &[&str], tags: &[&str]) -> Value {
    json!({
        "id": id,
        "name": name,
        "description": description,
        "capabilities": capabilities,
        "tags": tags,
        "endpoint": format!("https://agents.example.net/{id}"),
        "supported_languages": ["en"],
        "status": "active",
        "inputs": {"type": "object"},
        "outputs": {"type": "object"},
    })
}

async fn registered(api: &Api) {
    for doc in [
        agent(
            "translator-fr",
            "French Translator",
            "Translates documents between French and English.",
            &["translation"],
            &["language"],
        ),
        agent(
            "translator-de",
            "German Translator",
            "Translates documents between German and English.",
            &["translation"],
            &["language"],
        ),
        agent(
            "summarizer",
            "Legal Summarizer",
            "Summarizes legal documents and contracts.",
            &["summarization"],
            &["legal"],
        ),
        agent(
            "weather",
            "Weather Forecaster",
            "Forecasts the weather of any city.",
            &["forecast"],
            &["weather"],
        ),
    ] {
        api.register(&doc).await;
    }
}

async fn post(api: &Api, path: &str, body: Value) -> common::Reply {
    api.send(
        format!("POST {path}"),
        api.request(reqwest::Method::POST, path).json(&body),
    )
    .await
}

fn ids(entries: &Value) -> Vec<String> {
    entries
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["metadata"]["agentmesh:id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn an_ard_client_finds_the_node_searches_it_and_reads_the_documents_it_names() {
    let node = TestNode::start();
    let api = node.api();
    registered(&api).await;
    let base = node.base_url();

    // The node's catalog names its search API.
    for path in ["/.well-known/ard.json", "/.well-known/ai-catalog.json"] {
        let catalog = api.get(path).await;
        let entry = &catalog.expect(200)["entries"][0];
        assert_eq!(entry["type"], "application/ai-registry+json", "{path}");
        assert_eq!(entry["url"], format!("{base}/ard/"), "{path}");
        assert!(entry["identifier"]
            .as_str()
            .unwrap()
            .starts_with("urn:air:127.0.0.1:"));
    }

    let found = post(
        &api,
        "/ard/search",
        json!({"query": {"text": "translate french documents"}, "federation": "none"}),
    )
    .await;
    let results = &found.expect(200)["results"];
    let got = ids(results);
    let mut top: Vec<&str> = got.iter().take(2).map(String::as_str).collect();
    top.sort_unstable();
    assert_eq!(top, ["translator-de", "translator-fr"], "{results}");
    let first = results
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metadata"]["agentmesh:id"] == "translator-fr")
        .unwrap();
    assert_eq!(first["displayName"], "French Translator");
    assert_eq!(first["type"], "application/aidip+json");
    assert_eq!(first["source"], format!("{base}/ard/"));
    assert_eq!(first["capabilities"], json!(["translation"]));
    assert_eq!(first["metadata"]["agentmesh:trust"], "unverified");
    let identifier = first["identifier"].as_str().unwrap();
    assert_eq!(identifier, "urn:air:127.0.0.1:aidip:translator-fr");
    let scores: Vec<i64> = results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["score"].as_i64().unwrap())
        .collect();
    assert!(scores.iter().all(|s| (0..=100).contains(s)), "{scores:?}");
    assert!(
        scores.windows(2).all(|w| w[0] >= w[1]),
        "best first: {scores:?}"
    );
    // The url is the document, as this node serves it.
    let url = first["url"].as_str().unwrap();
    let doc: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    assert_eq!(doc["id"], "translator-fr");

    // Filters: type, one capability, several (OR), a tag, the publisher.
    let cases = [
        (json!({"type": "application/mcp-server-card+json"}), vec![]),
        (json!({"capabilities": "summarization"}), vec!["summarizer"]),
        (
            json!({"capabilities": ["summarization", "forecast"]}),
            vec!["summarizer", "weather"],
        ),
        (json!({"tags": ["weather"]}), vec!["weather"]),
        (
            json!({"publisher": ["127.0.0.1"], "capabilities": "forecast"}),
            vec!["weather"],
        ),
        (json!({"publisher": "elsewhere.example"}), vec![]),
    ];
    for (filter, want) in cases {
        let r = post(&api, "/ard/search", json!({"query": {"text": "documents weather legal translate", "filter": filter}, "federation": "none"})).await;
        let mut got = ids(&r.expect(200)["results"]);
        got.sort();
        assert_eq!(got, want, "{filter}");
    }

    // Pages: one at a time, each once, then no token.
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..10 {
        let mut body =
            json!({"query": {"text": "translates documents"}, "pageSize": 1, "federation": "none"});
        if let Some(t) = &token {
            body["pageToken"] = t.clone().into();
        }
        let r = post(&api, "/ard/search", body).await;
        let page = r.expect(200);
        seen.extend(ids(&page["results"]));
        match page["pageToken"].as_str() {
            Some(t) => token = Some(t.to_owned()),
            None => break,
        }
    }
    let mut unique = seen.clone();
    unique.dedup();
    assert_eq!(unique.len(), seen.len(), "{seen:?}");
    assert!(
        seen.starts_with(&["translator-de".to_owned()])
            || seen.starts_with(&["translator-fr".to_owned()]),
        "{seen:?}"
    );
    assert!(seen.len() >= 2, "{seen:?}");

    let referred = post(
        &api,
        "/ard/search",
        json!({"query": {"text": "weather"}, "federation": "referrals"}),
    )
    .await;
    // No registry is held, so there is nothing to refer to.
    assert!(referred.expect(200).get("referrals").is_none());
}

#[tokio::test]
async fn explore_counts_facets_and_the_listing_pages_through_every_entry() {
    let node = TestNode::start();
    let api = node.api();
    registered(&api).await;

    let explored = post(&api, "/ard/explore", json!({"resultType": {"facets": [{"field": "type"}, {"field": "capabilities", "limit": 1}]}})).await;
    let facets = &explored.expect(200)["facets"];
    assert_eq!(explored.body["resultType"], "facets");
    assert_eq!(
        facets["type"]["buckets"],
        json!([{"value": "application/aidip+json", "count": 4}])
    );
    assert_eq!(
        facets["capabilities"]["buckets"],
        json!([{"value": "translation", "count": 2}])
    );
    assert_eq!(facets["capabilities"]["otherCount"], 2);
    let narrowed = post(&api, "/ard/explore", json!({"query": {"text": "legal contracts"}, "resultType": {"facets": [{"field": "capabilities"}]}})).await;
    assert_eq!(
        narrowed.expect(200)["facets"]["capabilities"]["buckets"][0]["value"],
        "summarization"
    );

    let mut all = Vec::new();
    let mut path = "/ard/agents?pageSize=3".to_owned();
    for _ in 0..5 {
        let page = api.get(&path).await;
        let body = page.expect(200);
        all.extend(ids(&body["items"]));
        match body["pageToken"].as_str() {
            Some(t) => path = format!("/ard/agents?pageSize=3&pageToken={t}"),
            None => break,
        }
    }
    all.sort();
    assert_eq!(
        all,
        ["summarizer", "translator-de", "translator-fr", "weather"]
    );
    let filtered = api
        .get("/ard/agents?filter=capabilities%20%3D%20%27translation%27")
        .await;
    let mut got = ids(&filtered.expect(200)["items"]);
    got.sort();
    assert_eq!(got, ["translator-de", "translator-fr"]);
}

#[tokio::test]
async fn what_ard_does_not_allow_is_refused_in_its_error_shape() {
    let node = TestNode::start();
    let api = node.api();
    registered(&api).await;
    let refused = [
        ("/ard/search", json!({"query": {}})),
        ("/ard/search", json!({"query": {"text": "x"}, "extra": 1})),
        (
            "/ard/search",
            json!({"query": {"text": "x", "filter": {"trustManifest.attestations.type": ["SOC2"]}}}),
        ),
        (
            "/ard/search",
            json!({"query": {"text": "x"}, "federation": "sideways"}),
        ),
        (
            "/ard/search",
            json!({"query": {"text": "x"}, "pageSize": 0}),
        ),
        (
            "/ard/search",
            json!({"query": {"text": "x"}, "pageToken": "not-ours"}),
        ),
        ("/ard/search", json!({"query": {"text": "x".repeat(2000)}})),
        (
            "/ard/explore",
            json!({"resultType": {"facets": [{"field": "secrets"}]}}),
        ),
        ("/ard/explore", json!({"resultType": {"facets": []}})),
    ];
    for (path, body) in refused {
        let r = post(&api, path, body.clone()).await;
        let e = r.expect(400);
        assert_eq!(e["errorCode"], "INVALID_ARGUMENT", "{path} {body}");
        assert!(e["message"].is_string());
    }
    for path in [
        "/ard/agents?orderBy=displayName",
        "/ard/agents?pageSize=500",
        "/ard/agents?filter=type",
    ] {
        let r = api.get(path).await;
        assert_eq!(r.expect(400)["errorCode"], "INVALID_ARGUMENT", "{path}");
    }
    let not_json = api
        .send(
            "POST /ard/search".into(),
            api.request(reqwest::Method::POST, "/ard/search")
                .header("content-type", "application/json")
                .body("{"),
        )
        .await;
    assert_eq!(not_json.expect(400)["errorCode"], "INVALID_ARGUMENT");
    let _ = repo_root();
}

/// ARD v0.91's Retrieve and referrals, over what a node crawled from the
/// testbed's ARD publisher and what was registered with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrieve_answers_complete_entries_and_referrals_name_the_registries_held() {
    use agentmesh::testbed::formats::ARD_SOURCES_DOMAIN;
    use agentmesh::testbed::{Population, PopulationConfig, Testbed, TestbedOptions};
    let testbed = Testbed::start(
        Population::generate(&PopulationConfig::healthy(5, 1)),
        TestbedOptions {
            formats: true,
            ..TestbedOptions::default()
        },
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    testbed.write_ca(&ca).unwrap();
    let port = testbed.https_port().to_string();
    let node = tokio::task::block_in_place(|| {
        TestNode::builder()
            .crawling(&testbed, &ca)
            .env("AGENTMESH_CRAWL__HTTPS_PORT", &port)
            .env("AGENTMESH_API__LIMITS__ENABLED", "false")
            .start()
    });
    let api = node.api();
    registered(&api).await;
    let adp = testbed.population().agents()[0].domain.clone();
    api.post(
        "/crawl",
        &json!({"domains": [ARD_SOURCES_DOMAIN, adp], "wait": true}),
    )
    .await
    .expect(200);

    // An ARD publisher's entry comes back whole, as written: its trust
    // manifest and representative queries too, no score or source.
    let ledger = format!("urn:air:{ARD_SOURCES_DOMAIN}:ledger");
    let encoded = ledger.replace(':', "%3A");
    let got = api.get(&format!("/ard/agents/{encoded}")).await;
    let entry = got.expect(200).clone();
    assert_eq!(entry["identifier"], ledger.as_str());
    assert_eq!(entry["type"], "application/mcp-server-card+json");
    assert!(entry["trustManifest"]["signature"].is_string(), "{entry}");
    assert_eq!(entry["representativeQueries"].as_array().unwrap().len(), 2);
    assert!(entry.get("score").is_none() && entry.get("source").is_none());
    assert_eq!(got.header("cache-control"), Some("private, max-age=60"));
    let etag = got.header("etag").expect("an ETag").to_owned();
    let again = api
        .send(
            "GET with If-None-Match".into(),
            api.request(reqwest::Method::GET, &format!("/ard/agents/{encoded}"))
                .header("if-none-match", &etag),
        )
        .await;
    assert_eq!(again.status, 304, "{}", again.text);
    // Colons need no encoding in a path segment: the same entry.
    let plain = api.get(&format!("/ard/agents/{ledger}")).await;
    assert_eq!(plain.expect(200), &entry);

    // Agents of other formats under the identifier a search gives them.
    for (identifier, id) in [
        (
            "urn:air:127.0.0.1:aidip:translator-fr".to_owned(),
            "translator-fr".to_owned(),
        ),
        (format!("urn:air:{adp}:adp:agent"), format!("agent:{adp}")),
    ] {
        let got = api
            .get(&format!("/ard/agents/{}", identifier.replace(':', "%3A")))
            .await;
        let e = got.expect(200);
        assert_eq!(e["identifier"], identifier.as_str());
        assert_eq!(e["metadata"]["agentmesh:id"], id.as_str());
        assert!(e.get("score").is_none(), "{e}");
    }

    // Refused: bad percent-encoding, not an identifier; unknown: 404,
    // not kept by caches.
    for bad in [
        "urn%ZZair%3Ax%3Ay",
        "not-an-identifier",
        "urn%3Aair%3A%3Ax",
        "%FF%FE",
    ] {
        let r = api.get(&format!("/ard/agents/{bad}")).await;
        assert_eq!(r.expect(400)["errorCode"], "INVALID_ARGUMENT", "{bad}");
    }
    for unknown in [
        format!("urn:air:{ARD_SOURCES_DOMAIN}:nobody"),
        format!("urn:air:{ARD_SOURCES_DOMAIN}:forger"),
        "urn:air:127.0.0.1:aidip:nobody".to_owned(),
    ] {
        let r = api.get(&format!("/ard/agents/{unknown}")).await;
        assert_eq!(r.expect(404)["errorCode"], "NOT_FOUND", "{unknown}");
        assert_eq!(r.header("cache-control"), Some("no-cache"));
    }

    // A search in referrals mode names the registry the publisher runs;
    // in the other modes, no referrals.
    let referred = post(
        &api,
        "/ard/search",
        json!({"query": {"text": "expense reports"}, "federation": "referrals"}),
    )
    .await;
    let referrals = referred.expect(200)["referrals"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(referrals.len(), 1, "{referrals:?}");
    assert_eq!(
        referrals[0]["identifier"],
        format!("urn:air:{ARD_SOURCES_DOMAIN}:finder")
    );
    assert_eq!(referrals[0]["type"], "application/ai-registry+json");
    assert!(referrals[0]["url"].as_str().unwrap().ends_with("/ard/"));
    let none = post(
        &api,
        "/ard/search",
        json!({"query": {"text": "expense reports"}, "federation": "none"}),
    )
    .await;
    assert!(none.expect(200).get("referrals").is_none());
}

/// Schemathesis with ARD's own OpenAPI document of the search API
/// (`tests/ard_api/spec/schemas/ard.openapi.yaml`, with the catalog schema its results
/// refer to beside it) against a node's `/ard/`: every operation, valid
/// and invalid requests, no server error, and every answer's status,
/// content type and body as the document describes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs schemathesis (pip install schemathesis, or SCHEMATHESIS=path/to/st)"]
async fn schemathesis_finds_no_answer_that_breaks_ards_own_document() {
    let st = common::needs(
        crate::openapi::schemathesis(),
        "schemathesis",
        "pip install schemathesis, or SCHEMATHESIS=path/to/st",
    );
    let node = TestNode::builder()
        .env("AGENTMESH_API__LIMITS__ENABLED", "false")
        .start();
    let api = node.api();
    registered(&api).await;
    let document = repo_root().join("tests/ard_api/spec/schemas/ard.openapi.yaml");
    let base = format!("{}/ard", node.base_url());
    let reports = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(st);
    cmd.current_dir(reports.path())
        .arg("run")
        .arg(&document)
        .args(["--url", &base])
        .args(["--mode", "all", "--phases", "examples,coverage,fuzzing"])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,\
             response_schema_conformance",
        ])
        .args(["--max-examples", "60", "--seed", "1"])
        .args(["--generation-database", "none"])
        .args(["--request-timeout", "20", "--no-color"]);
    let run = tokio::task::spawn_blocking(move || {
        let run = common::run(
            &mut cmd,
            std::time::Duration::from_secs(600),
            "schemathesis with ARD's document",
        );
        drop(reports);
        run
    })
    .await
    .unwrap();
    assert!(
        run.status.success(),
        "schemathesis found problems:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    assert!(
        !run.stdout.contains("\nErrors:"),
        "schemathesis could not test every operation:\n{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("Tested: 3"),
        "schemathesis tested the three operations:\n{}",
        run.stdout
    );
}

/// ARD's own conformance tester (`tests/ard_api/conformance/bin/`, from
/// the specification's repository) run against a node: its registry mode
/// probes `GET /agents`, `POST /search` and `POST /explore` under
/// `/ard`, its manifest mode reads the node's `/.well-known/ard.json`
/// against ARD's catalog schema (with jsonschema) and its URN rules; both
/// must report PASS with no warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Python with jsonschema (python3 -m venv /opt/ard-conformance && /opt/ard-conformance/bin/pip install jsonschema, or ARD_CONFORMANCE_PYTHON)"]
async fn ards_conformance_tester_passes_the_node() {
    let python = common::needs(
        common::python_with(
            "ARD_CONFORMANCE_PYTHON",
            "/opt/ard-conformance/bin/python",
            "jsonschema",
        ),
        "a Python with jsonschema",
        "python3 -m venv /opt/ard-conformance && /opt/ard-conformance/bin/pip install jsonschema",
    );
    let node = TestNode::builder()
        .env("AGENTMESH_API__LIMITS__ENABLED", "false")
        .start();
    let api = node.api();
    registered(&api).await;
    let base = node.base_url();
    let tester = repo_root().join("tests/ard_api/conformance/bin/conformance-test");
    for (mode, target) in [
        ("registry", format!("{base}/ard")),
        ("manifest", format!("{base}/.well-known/ard.json")),
    ] {
        let (python, tester) = (python.clone(), tester.clone());
        let run = tokio::task::spawn_blocking(move || {
            common::run(
                std::process::Command::new(&python)
                    .arg(&tester)
                    .args([mode, target.as_str()]),
                std::time::Duration::from_secs(120),
                "ARD's conformance tester",
            )
        })
        .await
        .unwrap();
        assert!(
            run.status.success() && run.stdout.contains("CONFORMANCE STATUS: PASS"),
            "{mode}:\n{}\n{}",
            run.stdout,
            run.stderr
        );
        assert!(
            run.stdout
                .contains("0 critical specification errors and 0 warnings"),
            "{mode}: warnings:\n{}",
            run.stdout
        );
        if mode == "manifest" {
            assert!(
                run.stdout.contains("Strict JSON Schema validation passed"),
                "{mode}: the catalog schema was not applied:\n{}",
                run.stdout
            );
        }
    }
}
