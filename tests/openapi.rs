//! The OpenAPI document: the copy checked in as `proto/openapi.json` is
//! what the code generates and what a node serves; every operation it
//! describes is routed; and schemathesis (from PyPI, which `.ci/run`
//! installs) fuzzes a live node from it: no server errors, no status,
//! content type, header or body that breaks the document.
//!
//! Without schemathesis the fuzzing test says so and passes, except under
//! CI, where it fails.

use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::{repo_root, testbed_with_ca, TestNode};
use serde_json::{json, Value};

const TOKEN: &str = "openapi-test-admin-token";

#[test]
fn the_checked_in_document_is_what_the_code_generates() {
    let path = repo_root().join("proto/openapi.json");
    let checked_in = std::fs::read_to_string(&path).unwrap();
    assert!(
        checked_in == agentmesh::api::openapi_json(),
        "{} differs from the document the code generates; run \
         `cargo run -- openapi > proto/openapi.json` and commit it",
        path.display()
    );
    let doc: Value = serde_json::from_str(&checked_in).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
    // The registration body is the schema registrations are validated
    // against, its references resolved inside the document.
    let aidip: Value = serde_json::from_str(agentmesh::aidip::SCHEMA).unwrap();
    let lifted = &doc["components"]["schemas"]["AidipDocument"];
    assert_eq!(lifted["required"], aidip["required"]);
    for reference in references(&doc) {
        let pointer = reference
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("{reference} is not local"));
        assert!(
            doc.pointer(&pointer.replace('~', "~0")).is_some()
                || schema_by_name(&doc, pointer).is_some(),
            "{reference} resolves"
        );
    }
}

/// `#/components/schemas/<name>`, where the name may hold a `/`-free dot.
fn schema_by_name<'a>(doc: &'a Value, pointer: &str) -> Option<&'a Value> {
    let name = pointer.strip_prefix("/components/schemas/")?;
    doc["components"]["schemas"].get(name)
}

fn references(v: &Value) -> Vec<String> {
    match v {
        Value::Object(m) => m
            .iter()
            .flat_map(|(k, v)| match (k.as_str(), v) {
                ("$ref", Value::String(r)) => vec![r.clone()],
                _ => references(v),
            })
            .collect(),
        Value::Array(a) => a.iter().flat_map(references).collect(),
        _ => Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_serves_the_document_and_routes_every_operation_in_it() {
    let node = tokio::task::block_in_place(|| {
        TestNode::start_with_env(&[("AGENTMESH_API__ADMIN_TOKEN", TOKEN)])
    });
    let api = node.api();
    let served = api.get("/openapi.json").await;
    served.expect(200);
    assert_eq!(
        served.text,
        agentmesh::api::openapi_json(),
        "the node serves the generated document"
    );
    assert!(served.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));

    // Each operation, asked with placeholder parameters and no body,
    // reaches a handler: never the router's "no route" or "not allowed".
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let doc = &served.body;
    let mut operations = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        let concrete = path
            .replace("{id}", "no-such-agent")
            .replace("{domain}", "example.org")
            .replace("{asset}", "app.js");
        for method in item.as_object().unwrap().keys() {
            let method: reqwest::Method = method.to_uppercase().parse().unwrap();
            let response = client
                .request(method.clone(), api.url(&concrete))
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let body = response.text().await.unwrap();
            assert!(
                !(status == 404 && body.contains("no route for")) && status != 405,
                "{method} {path} is documented but not routed: {status} {body}"
            );
            operations += 1;
        }
    }
    assert!(operations >= 20, "{operations} operations documented");
}

/// The schemathesis command line: `$SCHEMATHESIS`, else `st` on the
/// PATH, else the virtualenv `.ci/run` makes (`mcp_registry::interop`
/// runs it too).
pub(crate) fn schemathesis() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SCHEMATHESIS") {
        return Some(PathBuf::from(p));
    }
    common::on_path("st").or_else(|| {
        let venv = PathBuf::from("/opt/schemathesis/bin/st");
        venv.exists().then_some(venv)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs schemathesis (pip install schemathesis, or SCHEMATHESIS=path/to/st)"]
async fn schemathesis_finds_no_server_error_and_no_answer_that_breaks_the_document() {
    let st = common::needs(
        schemathesis(),
        "schemathesis",
        "pip install schemathesis, or SCHEMATHESIS=path/to/st",
    );
    // A node holding crawled agents (with reports and freshness) and
    // registrations, with an admin token, so writes are exercised too.
    let (testbed, _dir, ca) = testbed_with_ca(41, 6).await;
    let node = tokio::task::block_in_place(|| {
        TestNode::builder()
            .crawling(&testbed, &ca)
            .env("AGENTMESH_API__ADMIN_TOKEN", TOKEN)
            .start()
    });
    let api = node.api().with_token(TOKEN);
    let domains: Vec<String> = testbed
        .population()
        .agents()
        .iter()
        .map(|a| a.domain.clone())
        .collect();
    api.post("/crawl", &json!({"domains": domains, "wait": true}))
        .await
        .expect(200);
    for name in common::examples_in("aidip/valid") {
        let doc = common::example(&format!("aidip/valid/{name}"));
        let status = api.post("/agents", &doc).await.status;
        assert!(status == 201 || status == 200, "{name}: {status}");
    }

    let hooks = repo_root().join("tests/schemathesis");
    let reports = tempfile::tempdir().unwrap();
    let base = format!("http://{}", node.addr());
    let run = tokio::task::spawn_blocking(move || {
        common::run(
            Command::new(&st)
                .current_dir(reports.path())
                .env("SCHEMATHESIS_HOOKS", "agentmesh_hooks")
                .env("PYTHONPATH", &hooks)
                .args(["run", &format!("{base}/openapi.json")])
                .args(["--header", &format!("Authorization: Bearer {TOKEN}")])
                .args([
                    "--checks",
                    "not_a_server_error,status_code_conformance,content_type_conformance,\
                     response_headers_conformance,response_schema_conformance",
                ])
                .args(["--phases", "examples,coverage,fuzzing"])
                .args(["--max-examples", "40", "--seed", "1"])
                .args(["--generation-database", "none"])
                .args(["--request-timeout", "20", "--no-color"]),
            Duration::from_secs(600),
            "schemathesis",
        )
    })
    .await
    .unwrap();
    assert!(
        run.status.success(),
        "schemathesis found problems:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    // An operation it could not send (a body it cannot encode, say) is
    // listed under "Errors:" without failing the run.
    assert!(
        !run.stdout.contains("\nErrors:"),
        "schemathesis could not test every operation:\n{}",
        run.stdout
    );
}
