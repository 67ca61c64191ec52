//! The invocation gateway against MCP software others wrote:
//! `tests/gateway.rs` calls the testbed's own MCP server, whose authors
//! share the node's reading of the spec; here the node calls a server
//! written with the official MCP Python SDK (`mcp` on PyPI, its
//! `MCPServer` under uvicorn, `gateway_interop/mcp_server.py`), over
//! streamable HTTP with TLS from the test CA, in both of the SDK's
//! answer modes (an event stream, its default, and JSON), stateful (every
//! request after `initialize` must carry the `Mcp-Session-Id` it gave).
//!
//! Through the node: a structured tool's answer is its structured
//! content (checked against an output schema with `$ref`s); a text
//! tool's answer is its content; an input the tool's schema refuses, and
//! an unknown tool, are 400 before any tool is called; a tool that raises
//! is a 502 `agent_failed`; a tool that logs to the client before it
//! answers (events before the response on the stream) is read; and every
//! session the node opens it ends, so a server that holds few sessions
//! keeps answering.
//!
//! The tests need the SDK in a virtualenv (`.ci/run` makes it):
//! `$MCP_SDK_PYTHON`, else `/opt/mcp-sdk/bin/python`.

use std::path::PathBuf;
use std::time::Duration;

use agentmesh::testbed::certs::TestCa;
use serde_json::{json, Value};

use crate::common::{agentmesh, needs, python_with, run, Api, PythonServer, Reply, TestNode};

/// How to install what these tests need.
const INSTALL: &str = "python3 -m venv /opt/mcp-sdk && /opt/mcp-sdk/bin/pip install \
                       'mcp==2.3.0' 'uvicorn==0.55.0', or set MCP_SDK_PYTHON";

/// The most sessions each server holds at once: fewer than the calls
/// one test makes, so a session left open shows as a refusal.
const MAX_SESSIONS: usize = 2;

/// The Python interpreter that has the MCP SDK and uvicorn:
/// `$MCP_SDK_PYTHON`, else the virtualenv `.ci/run` makes.
fn sdk_python() -> Option<PathBuf> {
    python_with(
        "MCP_SDK_PYTHON",
        "/opt/mcp-sdk/bin/python",
        "mcp.server.mcpserver, uvicorn",
    )
}

/// The URL of an SDK server's MCP endpoint.
fn mcp_url(server: &PythonServer) -> String {
    format!("https://127.0.0.1:{}/mcp", server.port)
}

/// Starts `mcp_server.py` in `mode` (`sse` or `json`) with a leaf of
/// `ca` for 127.0.0.1 written in `dir`; waits for the port it prints.
fn start_server(
    python: &std::path::Path,
    ca: &TestCa,
    dir: &std::path::Path,
    mode: &str,
) -> PythonServer {
    PythonServer::start(
        python,
        "tests/gateway_interop/mcp_server.py",
        &[mode.to_owned(), MAX_SESSIONS.to_string()],
        ca,
        dir,
        mode,
        &format!("the MCP SDK server ({mode})"),
    )
}

/// The two SDK servers (event stream, JSON) imported from an MCP
/// registry's `server.json`s into a node that may call them.
struct Setup {
    servers: Vec<(&'static str, PythonServer)>,
    node: TestNode,
    _dir: tempfile::TempDir,
}

fn setup(python: &std::path::Path) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new::<&str>(&[]).unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.ca_pem()).unwrap();
    let servers: Vec<(&'static str, PythonServer)> = ["sse", "json"]
        .into_iter()
        .map(|mode| (mode, start_server(python, &ca, dir.path(), mode)))
        .collect();
    let lines: Vec<String> = servers
        .iter()
        .map(|(mode, server)| {
            json!({
                "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
                "name": format!("io.example/sdk-{mode}"),
                "description": "An MCP server written with the MCP Python SDK.",
                "version": "1.0.0",
                "remotes": [{"type": "streamable-http", "url": mcp_url(server)}],
            })
            .to_string()
        })
        .collect();
    let listing = dir.path().join("servers.ndjson");
    std::fs::write(&listing, lines.join("\n") + "\n").unwrap();
    let data = tempfile::tempdir().unwrap();
    run(
        agentmesh()
            .args(["import", "--format", "mcp-registry", "--data-dir"])
            .arg(data.path())
            .arg(&listing),
        Duration::from_secs(60),
        "agentmesh import",
    )
    .assert_success("agentmesh import");
    let ports: Vec<u16> = servers.iter().map(|(_, s)| s.port).collect();
    let node = TestNode::builder()
        .calling(&ports, &ca_file)
        .env("AGENTMESH_API__LIMITS__ENABLED", "false")
        // The SDK's server is Python on a shared 2-core machine.
        .env("AGENTMESH_GATEWAY__TIMEOUT", "20s")
        .data_dir(data)
        .start();
    Setup {
        servers,
        node,
        _dir: dir,
    }
}

async fn invoke(api: &Api, server: &str, tool: &str, input: Value) -> Reply {
    let id = format!("mcp:io.example%2Fsdk-{server}");
    api.post(
        &format!("/agents/{id}/invoke"),
        &json!({"operation": tool, "input": input}),
    )
    .await
}

/// Everything the module documentation lists, against one server.
async fn check_server(api: &Api, mode: &str, server: &PythonServer) {
    let what = |r: &Reply| {
        format!(
            "{mode}: {} {}; the server said: {}",
            r.status,
            r.text,
            server.stderr.text()
        )
    };
    // A structured tool: its structured content, which fits the output
    // schema the SDK derived (a nested model, `$defs` and `$ref`).
    let r = invoke(api, mode, "forecast", json!({"city": "Oslo", "days": 2})).await;
    assert_eq!(r.status, 200, "{}", what(&r));
    assert_eq!(
        r.body,
        json!({
            "city": "Oslo",
            "days": 2,
            "readings": [
                {"celsius": 20.5, "sky": "clear"},
                {"celsius": 21.5, "sky": "clear"},
            ],
        }),
        "{}",
        what(&r)
    );
    assert_eq!(r.header("x-agentmesh-operation"), Some("forecast"));
    assert!(
        r.header("x-agentmesh-output-invalid").is_none(),
        "{}",
        what(&r)
    );
    // A tool without structured output: its content.
    let r = invoke(api, mode, "echo", json!({"text": "hello"})).await;
    assert_eq!(r.status, 200, "{}", what(&r));
    assert_eq!(
        r.body,
        json!({"content": [{"type": "text", "text": "hello"}]}),
        "{}",
        what(&r)
    );
    // An input the tool's schema (from tools/list) refuses, and a tool
    // the server does not have: the client's errors, before any call.
    let r = invoke(api, mode, "forecast", json!({"city": "Oslo", "days": 30})).await;
    r.expect_field_problem("/input/days");
    let r = invoke(api, mode, "forecast", json!({"days": 1})).await;
    r.expect_field_problem("/input");
    let r = invoke(api, mode, "rain", json!({})).await;
    let mut known: Vec<String> =
        serde_json::from_value(r.expect_field_problem("/operation")["known"].clone()).unwrap();
    known.sort();
    assert_eq!(
        known,
        ["called", "chatty", "echo", "explode", "forecast"],
        "{}",
        what(&r)
    );
    // A tool that raises: the SDK answers isError, a failed task.
    let r = invoke(api, mode, "explode", json!({"reason": "on purpose"})).await;
    assert_eq!(
        r.expect_error(502, "Upstream")["details"]["reason"],
        "agent_failed",
        "{}",
        what(&r)
    );
    // A tool that logs to the client before it answers: in the event
    // stream, two notifications before the response.
    let r = invoke(api, mode, "chatty", json!({"text": "psst"})).await;
    assert_eq!(r.status, 200, "{}", what(&r));
    assert_eq!(r.body, json!({"result": "PSST"}), "{}", what(&r));
    // More sessions than the server holds at once, one after the other:
    // each is ended, so none is refused.
    for i in 0..=MAX_SESSIONS {
        let r = invoke(api, mode, "echo", json!({"text": format!("again {i}")})).await;
        assert_eq!(r.status, 200, "session {i}: {}", what(&r));
    }
    // What reached the tools: never the refused inputs or the unknown
    // tool.
    let r = invoke(api, mode, "called", json!({})).await;
    assert_eq!(r.status, 200, "{}", what(&r));
    let mut expected = vec!["forecast", "echo", "explode", "chatty"];
    expected.extend(std::iter::repeat_n("echo", MAX_SESSIONS + 1));
    assert_eq!(r.body, json!({"result": expected}), "{}", what(&r));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the MCP Python SDK (python3 -m venv /opt/mcp-sdk && /opt/mcp-sdk/bin/pip install 'mcp==2.3.0' 'uvicorn==0.55.0', or MCP_SDK_PYTHON)"]
async fn the_tools_of_an_mcp_python_sdk_server_are_called_through_the_node() {
    let python = needs(sdk_python(), "the MCP Python SDK", INSTALL);
    let setup = tokio::task::block_in_place(|| setup(&python));
    let api = setup.node.api();
    for (mode, server) in &setup.servers {
        check_server(&api, mode, server).await;
    }
}
