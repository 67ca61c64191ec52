//! `agentmesh import --format mcp-registry`, run as users run it: a list
//! API response saved to a file goes into a data directory as `mcp:`
//! agents (active and deprecated issued, deleted ones removed, invalid
//! ones refused by reason), and importing it again changes nothing.

use crate::common;

use std::path::Path;
use std::time::Duration;

use agentmesh::descriptor::DocumentFormat;
use agentmesh::record::RecordBody;
use common::{agentmesh, run, Finished};
use serde_json::{json, Value};

const OFFICIAL: &str = "io.modelcontextprotocol.registry/official";

fn import(file: &Path, data: &Path) -> Finished {
    run(
        agentmesh()
            .arg("import")
            .arg(file)
            .arg("--format")
            .arg("mcp-registry")
            .arg("--data-dir")
            .arg(data),
        Duration::from_secs(60),
        "agentmesh import --format mcp-registry",
    )
}

/// A count of `import`'s summary table (`  label   N`).
fn count(out: &str, label: &str) -> u64 {
    out.lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .and_then(|rest| rest.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {label:?} count in:\n{out}"))
}

/// A list API item.
fn item(name: &str, status: &str, remotes: Value) -> Value {
    json!({
        "server": {
            "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
            "name": name,
            "title": format!("Title of {name}"),
            "description": "A test server.",
            "version": "1.0.0",
            "remotes": remotes,
        },
        "_meta": {OFFICIAL: {"status": status, "publishedAt": "2025-01-01T10:30:00Z", "isLatest": true}}
    })
}

/// A live descriptor's format and status; `None` for a tombstone.
type Live = Option<(DocumentFormat, Option<String>)>;

/// What the store of `data` holds for `id`, and its seq. No node runs.
fn held(data: &Path, id: &str) -> Option<(Live, u64)> {
    let store = agentmesh::store::Store::open(&data.join("store"), 8 << 20).unwrap();
    let agent = store.blocking().get(id).unwrap()?;
    let seq = agent.body.seq();
    Some(match agent.body {
        RecordBody::Descriptor(d) => (Some((d.descriptor.format, d.descriptor.status)), seq),
        RecordBody::Tombstone(_) => (None, seq),
    })
}

#[test]
fn a_list_response_imports_by_status_and_again_changes_nothing() {
    let dir = tempfile::Builder::new()
        .prefix("agentmesh-import-mcp-")
        .tempdir()
        .unwrap();
    let data = dir.path().join("data");
    let remote = json!([{"type": "streamable-http", "url": "https://live.example.com/mcp"}]);
    let mut invalid = item("io.example/bad", "active", json!([]));
    invalid["server"]["remotes"] = json!([{"type": "stdio", "url": "https://x.example.com"}]);
    let response = |live_status: &str| {
        json!({
            "servers": [
                item("io.example/live", live_status, remote.clone()),
                item("io.example/old", "deprecated", json!([])),
                item("io.example/gone", "deleted", json!([])),
                invalid.clone(),
            ],
            "metadata": {"count": 4, "nextCursor": "io.example/bad:1.0.0"}
        })
    };
    let file = dir.path().join("servers.json");
    std::fs::write(
        &file,
        serde_json::to_string_pretty(&response("active")).unwrap(),
    )
    .unwrap();

    let out = import(&file, &data);
    assert_eq!(
        out.status.code(),
        Some(3),
        "a refused item exits 3\n{}\n{}",
        out.stdout,
        out.stderr
    );
    let refused: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("item "))
        .collect();
    assert_eq!(refused.len(), 1, "{}", out.stderr);
    assert!(
        refused[0].starts_with(
            "item 4: refused (id mcp:io.example/bad): mcp_server_invalid: /server/remotes/0/type:"
        ),
        "{}",
        refused[0]
    );
    for (label, n) in [
        ("created", 2),
        ("unchanged", 0),
        ("refused", 1),
        ("mcp_server_invalid:", 1),
        ("skipped", 1),
    ] {
        assert_eq!(count(&out.stdout, label), n, "{label}\n{}", out.stdout);
    }
    let (live, live_seq) = held(&data, "mcp:io.example/live").unwrap();
    assert_eq!(
        live,
        Some((DocumentFormat::McpRegistry, Some("active".into())))
    );
    let (old, old_seq) = held(&data, "mcp:io.example/old").unwrap();
    assert_eq!(
        old,
        Some((DocumentFormat::McpRegistry, Some("deprecated".into())))
    );
    assert_eq!(
        held(&data, "mcp:io.example/gone"),
        None,
        "not held, skipped"
    );
    assert_eq!(held(&data, "mcp:io.example/bad"), None);

    // Again: nothing changes, not even a seq.
    let out = import(&file, &data);
    assert_eq!(out.status.code(), Some(3), "{}", out.stderr);
    assert_eq!(count(&out.stdout, "created"), 0, "{}", out.stdout);
    assert_eq!(count(&out.stdout, "updated"), 0, "{}", out.stdout);
    assert_eq!(count(&out.stdout, "unchanged"), 2, "{}", out.stdout);
    assert_eq!(held(&data, "mcp:io.example/live").unwrap().1, live_seq);
    assert_eq!(held(&data, "mcp:io.example/old").unwrap().1, old_seq);

    // The registry deletes a server that is held: it is deleted here.
    std::fs::write(&file, response("deleted").to_string()).unwrap();
    let out = import(&file, &data);
    assert_eq!(out.status.code(), Some(3), "{}", out.stderr);
    assert_eq!(count(&out.stdout, "deleted"), 1, "{}", out.stdout);
    let (live, seq) = held(&data, "mcp:io.example/live").unwrap();
    assert_eq!(live, None, "a tombstone");
    assert!(seq > live_seq);
}
