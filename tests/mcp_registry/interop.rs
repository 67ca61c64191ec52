//! The registry API a node serves, judged by what others wrote:
//! schemathesis sends the requests the MCP Registry's own
//! OpenAPI document allows (`openapi.yaml`, verbatim from
//! `modelcontextprotocol/registry`, its GET operations; the publishing
//! ones are optional there and not offered here) and checks the answers
//! against it: to valid requests, a documented status, its content type,
//! its body's schema; to every request, no server error and any body the
//! document describes as it describes it (the document has no status for
//! refusing a malformed request). Then `mcp-registry-sdk` (PyPI, a typed client
//! written to that document by a third party, `sdk_client.py` driving
//! it) reads the node as it reads any registry: every page by its
//! cursors, one server, its versions, a deleted one, a missing one, and
//! the incremental pull a sub-registry makes.
//!
//! The node holds what two imports of a registry's list answer left in
//! its data directory: active servers of several shapes, a deprecated
//! one with its message, and one the registry deleted afterwards.
//!
//! Both tools come from PyPI (`.ci/run` installs them): schemathesis as
//! `tests/openapi.rs` finds it, the SDK's interpreter from
//! `$MCP_REGISTRY_SDK_PYTHON`, else `/opt/mcp-registry-sdk/bin/python`.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use super::OFFICIAL;
use crate::common::{self, agentmesh, needs, python_with, repo_root, run, TestNode};

/// How to install the SDK (it needs Python 3.13 or newer).
const SDK_INSTALL: &str = "python3.13 -m venv /opt/mcp-registry-sdk && \
                           /opt/mcp-registry-sdk/bin/pip install 'mcp-registry-sdk==0.1.0', \
                           or set MCP_REGISTRY_SDK_PYTHON";

/// The simple servers beside the three special ones: enough for pages.
const PLAIN: usize = 9;

/// A list API item the registry answers for `server`.
fn item(server: Value, status: &str, message: Option<&str>) -> Value {
    let mut official = json!({"status": status, "publishedAt": "2025-06-01T10:30:00Z",
        "updatedAt": "2025-06-02T10:30:00Z", "isLatest": true});
    if let Some(m) = message {
        official["statusMessage"] = m.into();
    }
    json!({"server": server, "_meta": {OFFICIAL: official}})
}

fn plain(name: &str, description: &str) -> Value {
    json!({
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": name,
        "description": description,
        "version": "1.0.0",
        "remotes": [{"type": "streamable-http", "url": format!("https://{}.example.com/mcp", name.replace(['/', '.'], "-"))}],
    })
}

/// A server using most of what `server.json` allows: title, repository,
/// website, icons, a package with arguments and environment, remotes of
/// both kinds with headers and variables, publisher metadata.
fn rich() -> Value {
    json!({
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": "io.example/weather",
        "title": "Weather",
        "description": "Forecasts and warnings for any place on earth.",
        "version": "2.1.0",
        "repository": {"url": "https://github.com/example/weather", "source": "github", "subfolder": "server"},
        "websiteUrl": "https://weather.example.com/docs",
        "icons": [{"src": "https://weather.example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48", "96x96"], "theme": "light"}],
        "packages": [{
            "registryType": "npm",
            "registryBaseUrl": "https://registry.npmjs.org",
            "identifier": "@example/weather-mcp",
            "version": "2.1.0",
            "runtimeHint": "npx",
            "transport": {"type": "stdio"},
            "packageArguments": [
                {"type": "positional", "valueHint": "city", "isRequired": true},
                {"type": "named", "name": "--units", "default": "metric", "choices": ["metric", "imperial"]}
            ],
            "environmentVariables": [{"name": "WEATHER_API_KEY", "isSecret": true, "isRequired": true, "description": "The API key"}]
        }],
        "remotes": [
            {"type": "streamable-http", "url": "https://{region}.weather.example.com/mcp",
             "headers": [{"name": "Authorization", "value": "Bearer {token}", "isSecret": true, "variables": {"token": {"isRequired": true}}}],
             "variables": {"region": {"default": "eu", "choices": ["eu", "us"]}}},
            {"type": "sse", "url": "https://weather.example.com/sse"}
        ],
        "_meta": {"io.modelcontextprotocol.registry/publisher-provided": {"tool": "publisher-cli", "version": "1.2.3"}}
    })
}

/// Names of the servers the node serves as active or deprecated.
fn live_names() -> Vec<String> {
    let mut names: Vec<String> = (0..PLAIN).map(|i| format!("io.example/plain{i}")).collect();
    names.extend(
        [
            "com.example/my-server",
            "io.example/weather",
            "io.example/old",
        ]
        .map(String::from),
    );
    names.sort();
    names
}

const DEPRECATED: &str = "io.example/old";
const DEPRECATION: &str = "Use io.example/weather instead";
const DELETED: &str = "io.example/gone";

/// Writes `items` as one list answer and imports it into `data`.
fn import(dir: &std::path::Path, data: &std::path::Path, items: Vec<Value>, step: &str) -> String {
    let file = dir.join(format!("{step}.json"));
    std::fs::write(
        &file,
        json!({"servers": items, "metadata": {"count": 0}}).to_string(),
    )
    .unwrap();
    let out = run(
        agentmesh()
            .arg("import")
            .arg(&file)
            .args(["--format", "mcp-registry", "--data-dir"])
            .arg(data),
        Duration::from_secs(60),
        "agentmesh import --format mcp-registry",
    );
    // 0, or 3 when some item was skipped: none is here.
    assert_eq!(
        out.status.code(),
        Some(0),
        "{step}: {}\n{}",
        out.stdout,
        out.stderr
    );
    out.stdout
}

/// A node whose data directory holds the servers: a first import of
/// every one, then a second in which the registry deleted [`DELETED`].
fn serving_node() -> (TestNode, tempfile::TempDir) {
    let files = tempfile::tempdir().unwrap();
    let data = tempfile::Builder::new()
        .prefix("agentmesh-mcp-interop-")
        .tempdir()
        .unwrap();
    let mut items: Vec<Value> = (0..PLAIN)
        .map(|i| {
            item(
                plain(
                    &format!("io.example/plain{i}"),
                    &format!("Plain server {i}"),
                ),
                "active",
                None,
            )
        })
        .collect();
    items.push(item(rich(), "active", None));
    items.push(item(
        plain("com.example/my-server", "The spec's example name"),
        "active",
        None,
    ));
    items.push(item(
        plain(DEPRECATED, "An old server"),
        "deprecated",
        Some(DEPRECATION),
    ));
    items.push(item(plain(DELETED, "A server taken down"), "active", None));
    import(files.path(), data.path(), items, "first");
    let out = import(
        files.path(),
        data.path(),
        vec![item(plain(DELETED, "A server taken down"), "deleted", None)],
        "second",
    );
    assert!(out.contains("deleted"), "{out}");
    let node = TestNode::builder()
        .data_dir(data)
        .env("AGENTMESH_API__LIMITS__ENABLED", "false")
        .start();
    (node, files)
}

/// The node answers as the imports left it, before anyone else looks.
async fn check_setup(node: &TestNode) {
    let api = node.api();
    let listed = api.get("/v0.1/servers?limit=100").await;
    let names: Vec<&str> = listed.expect(200)["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["server"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, live_names(), "what the node serves");
    let gone = api
        .get(&format!(
            "/v0.1/servers/{}/versions/latest?include_deleted=true",
            DELETED.replace('/', "%2F")
        ))
        .await;
    assert_eq!(gone.expect(200)["_meta"][OFFICIAL]["status"], "deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs schemathesis (pip install schemathesis, or SCHEMATHESIS=path/to/st)"]
async fn schemathesis_finds_no_answer_that_breaks_the_registrys_own_document() {
    let st = needs(
        crate::openapi::schemathesis(),
        "schemathesis",
        "pip install schemathesis, or SCHEMATHESIS=path/to/st",
    );
    let (node, _files) = tokio::task::block_in_place(serving_node);
    check_setup(&node).await;

    let base = node.base_url();
    // Valid requests, kept inside the bounds `registry_hooks.py` gives
    // (the document has no status for refusing a `limit` of 0 or a cursor
    // the node never gave): every answer checked against the document,
    // its status too. The coverage phase, which builds requests without
    // the hooks, runs in the second pass only.
    schemathesis_run(
        &st,
        &base,
        "positive",
        "examples,fuzzing",
        "not_a_server_error,status_code_conformance,content_type_conformance,\
         response_schema_conformance",
    )
    .await;
    // Every request, valid or not: the document gives none of these
    // operations a status for a malformed request (no 400, no 422; the
    // official registry answers 422), so a refusal cannot conform to it
    // and the status is not checked here; no server error, and every
    // answer the document describes still matches it.
    schemathesis_run(
        &st,
        &base,
        "all",
        "examples,coverage,fuzzing",
        "not_a_server_error,content_type_conformance,response_schema_conformance",
    )
    .await;
}

/// Runs schemathesis with the registry's document against `base`: its
/// GET operations only (publishing, updates, deletions and status
/// changes are optional in the document and not offered by a node), in
/// `mode` and `phases`, with `checks`; fails the test on any failure and
/// unless the three operations were tested.
async fn schemathesis_run(
    st: &std::path::Path,
    base: &str,
    mode: &str,
    phases: &str,
    checks: &str,
) {
    let document = repo_root().join("tests/mcp_registry/openapi.yaml");
    let reports = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(st);
    cmd.current_dir(reports.path())
        .arg("run")
        .arg(&document)
        .args(["--url", base])
        .args(["--include-method", "GET"])
        .args(["--mode", mode, "--phases", phases, "--checks", checks])
        .args(["--max-examples", "60", "--seed", "1"])
        .args(["--generation-database", "none"])
        .args(["--request-timeout", "20", "--no-color"]);
    if mode == "positive" {
        cmd.env("SCHEMATHESIS_HOOKS", "registry_hooks")
            .env("PYTHONPATH", repo_root().join("tests/mcp_registry"));
    }
    let what = format!("schemathesis ({mode}: {phases})");
    let run = tokio::task::spawn_blocking(move || {
        let run = common::run(&mut cmd, Duration::from_secs(600), &what);
        drop(reports);
        run
    })
    .await
    .unwrap();
    assert!(
        run.status.success(),
        "schemathesis ({mode}) found problems:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    // An operation it could not send is listed under "Errors:" without
    // failing the run.
    assert!(
        !run.stdout.contains("\nErrors:"),
        "schemathesis ({mode}) could not test every operation:\n{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("Operations:       3 selected / 8 total")
            && run.stdout.contains("Tested: 3"),
        "schemathesis ({mode}) tested the three GET operations:\n{}",
        run.stdout
    );
}

/// The interpreter with `mcp-registry-sdk`: `$MCP_REGISTRY_SDK_PYTHON`,
/// else the virtualenv `.ci/run` makes.
fn sdk_python() -> Option<PathBuf> {
    python_with(
        "MCP_REGISTRY_SDK_PYTHON",
        "/opt/mcp-registry-sdk/bin/python",
        "mcpreg, mcpreg.sync",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs mcp-registry-sdk (python3.13 -m venv /opt/mcp-registry-sdk && /opt/mcp-registry-sdk/bin/pip install 'mcp-registry-sdk==0.1.0', or MCP_REGISTRY_SDK_PYTHON)"]
async fn the_mcp_registry_sdk_reads_a_node_as_a_registry() {
    let python = needs(sdk_python(), "mcp-registry-sdk", SDK_INSTALL);
    let (node, _files) = tokio::task::block_in_place(serving_node);
    check_setup(&node).await;

    let base = node.base_url();
    let out = tokio::task::spawn_blocking(move || {
        run(
            Command::new(&python)
                .arg(repo_root().join("tests/mcp_registry/sdk_client.py"))
                .args([&base, "io.example/weather", DELETED, "3"])
                .env("PYTHONUNBUFFERED", "1"),
            Duration::from_secs(120),
            "sdk_client.py",
        )
    })
    .await
    .unwrap();
    out.assert_success("sdk_client.py");
    let seen: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("sdk_client.py printed no JSON ({e}):\n{}", out.stdout));
    let what = || serde_json::to_string_pretty(&seen).unwrap();

    // Every server, by its cursors, three a page, each once, in order.
    let live = live_names();
    let listed: Vec<String> = seen["listed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, live, "{}", what());
    assert_eq!(seen["pages"], live.len().div_ceil(3), "{}", what());
    assert_eq!(
        seen["page_counts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap())
            .sum::<u64>(),
        live.len() as u64
    );
    for s in seen["listed"].as_array().unwrap() {
        let expected = if s["name"] == DEPRECATED {
            "deprecated"
        } else {
            "active"
        };
        assert_eq!(s["status"], expected, "{}", what());
        assert_eq!(s["isLatest"], true, "{}", what());
        assert!(s["updatedAt"].is_string(), "{}", what());
    }
    let old = seen["listed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == DEPRECATED)
        .unwrap();
    assert_eq!(old["statusMessage"], DEPRECATION, "{}", what());

    // With deleted servers, the one taken down is there, as deleted.
    let with_deleted = &seen["with_deleted"];
    assert_eq!(
        with_deleted.as_array().unwrap().len(),
        live.len() + 1,
        "{}",
        what()
    );
    assert!(
        with_deleted
            .as_array()
            .unwrap()
            .contains(&json!({"name": DELETED, "status": "deleted"})),
        "{}",
        what()
    );

    // One server, latest and by its version, as published.
    let one = &seen["one"];
    assert_eq!(one["name"], "io.example/weather");
    assert_eq!(one["version"], "2.1.0");
    assert_eq!(one["status"], "active");
    assert_eq!(one["title"], "Weather");
    assert_eq!(
        one["packages"],
        json!(["@example/weather-mcp"]),
        "{}",
        what()
    );
    assert_eq!(
        one["remotes"],
        json!(["streamable-http", "sse"]),
        "{}",
        what()
    );
    assert_eq!(seen["exact"], "2.1.0", "{}", what());
    assert_eq!(seen["versions"], json!(["2.1.0"]), "{}", what());

    // A deleted server by name: not found, unless asked for with deleted.
    assert_eq!(seen["deleted_hidden"]["status_code"], 404, "{}", what());
    assert_eq!(seen["deleted_asked"], "deleted", "{}", what());
    // A server or a version not held: the SDK's NotFoundError, with the
    // registry's message.
    assert_eq!(
        seen["missing"],
        json!({"type": "NotFoundError", "status_code": 404, "error": "Server not found"}),
        "{}",
        what()
    );
    assert_eq!(
        seen["missing_version"]["error"],
        "Server version not found",
        "{}",
        what()
    );

    // A sub-registry following the node from nothing: everything to
    // upsert, the deleted server to remove, and a mark to ask from next.
    let pull = &seen["incremental"];
    let mut upserts: Vec<String> = serde_json::from_value(pull["upserts"].clone()).unwrap();
    upserts.sort();
    assert_eq!(upserts, live, "{}", what());
    assert_eq!(pull["removals"], json!([DELETED]), "{}", what());
    assert!(pull["mark"].is_string(), "{}", what());
    // Asked again from that mark (written `+00:00`): nothing changed
    // since, nor since the same instant written in another zone; since a
    // time long before, written with an offset, every server, the
    // deleted one too.
    assert_eq!(
        seen["incremental_again"],
        json!({"upserts": [], "removals": []}),
        "{}",
        what()
    );
    assert_eq!(seen["since_mark_in_india"], json!([]), "{}", what());
    let mut everything = live.clone();
    everything.push(DELETED.to_owned());
    everything.sort();
    assert_eq!(seen["since_2000_in_paris"], json!(everything), "{}", what());
}
