//! Backup and move: a running node exported through its API
//! (`agentmesh export --api`), the export restored into an empty data
//! directory (`agentmesh import`), a node started there holding the same
//! agents, the same records byte for byte, the same trust levels and
//! suspensions; and the restore's refusals (a store already there, an
//! export cut short, a record whose signature no longer verifies).

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{json, Value};

use crate::common::{self, agent, run, signed_registration, Api, TestNode, DEADLINE};

/// Lines of an export of the given `type`, as JSON values.
fn lines_of(export: &str, kind: &str) -> BTreeSet<String> {
    export
        .lines()
        .skip(1)
        .filter(|l| {
            serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{l:?}: {e}"))["type"]
                == kind
        })
        .map(str::to_owned)
        .collect()
}

/// The entries of one tree in an export.
fn entries_of(export: &str, tree: &str) -> BTreeSet<String> {
    lines_of(export, "entry")
        .into_iter()
        .filter(|l| serde_json::from_str::<Value>(l).unwrap()["tree"] == tree)
        .collect()
}

/// `agentmesh export --api` of a running node into `file`; its text.
fn export_through_api(node: &TestNode, file: &Path) -> String {
    run(
        common::agentmesh()
            .arg("export")
            .args(["--api", &node.base_url()])
            .arg(file),
        DEADLINE,
        "agentmesh export --api",
    )
    .assert_success("agentmesh export --api");
    std::fs::read_to_string(file).unwrap()
}

/// The trust level a node shows for `id`.
async fn trust_of(api: &Api, id: &str) -> Value {
    api.get(&format!("/agents/{id}/summary")).await.expect(200)["trust"]["level"].clone()
}

/// A word for each registration's description, that text searches find
/// it by.
const WORDS: [&str; 6] = ["aardvark", "bison", "cheetah", "dingo", "emu", "ferret"];

/// A node with registrations (one deleted), records another registry
/// signed and a suspension, exported while it runs.
/// The registration made unlisted: served by id, in no search.
const UNLISTED: usize = 2;

async fn populated_node(dir: &Path) -> (TestNode, String, Vec<String>, Vec<String>) {
    let node = TestNode::start();
    let api = node.api();
    let ours: Vec<String> = (0..6).map(|i| format!("backup-{i}")).collect();
    for (i, id) in ours.iter().enumerate() {
        let caps = if i % 2 == 0 {
            "translation"
        } else {
            "summarization"
        };
        let mut doc = agent(id, &[caps], &["moved"], &["en"]);
        doc["description"] = json!(format!("Keeps the {} ledger.", WORDS[i]));
        if i == UNLISTED {
            doc["visibility"] = json!("unlisted");
        }
        api.register(&doc).await;
    }
    api.delete("/agents/backup-5").await.expect(204);
    api.put(
        "/admin/agents/backup-1/suspension",
        &json!({"reason": "held back during the move"}),
    )
    .await
    .expect(200);
    let other = agentmesh::identity::generate();
    let theirs: Vec<String> = (0..3).map(|i| format!("elsewhere-{i}")).collect();
    for id in &theirs {
        let bytes = signed_registration(
            id,
            &format!("https://weather.example/{id}"),
            agentmesh::record::next_seq(None),
            &other,
        );
        let reply = api
            .post_raw("/records", Some("application/cbor"), bytes)
            .await;
        assert!(
            reply.status == 200 || reply.status == 201,
            "the other registry's record is taken: {reply:?}"
        );
    }
    let export = export_through_api(&node, &dir.join("node.export"));
    (node, export, ours, theirs)
}

#[tokio::test]
async fn a_node_moves_through_export_and_import_with_every_record_intact() {
    let files = tempfile::tempdir().unwrap();
    let (source, export, ours, theirs) = populated_node(files.path()).await;
    let first: Value = serde_json::from_str(export.lines().next().unwrap()).unwrap();
    assert_eq!(first["agentmesh_export"], 1, "the header line: {first}");
    assert_eq!(
        lines_of(&export, "registration").len(),
        5,
        "five live registrations, the deleted one left out"
    );
    assert_eq!(
        lines_of(&export, "record").len(),
        9,
        "every record held, the tombstone and the other registry's included"
    );

    // The new home: an empty data directory with the node's key copied.
    let target = tempfile::tempdir().unwrap();
    std::fs::copy(
        source.data_dir().join("node.key"),
        target.path().join("node.key"),
    )
    .unwrap();
    let restored = run(
        common::agentmesh()
            .arg("import")
            .arg("--data-dir")
            .arg(target.path())
            .arg(files.path().join("node.export")),
        DEADLINE,
        "agentmesh import of the export",
    );
    restored.assert_success("agentmesh import of the export");
    assert!(
        restored.stdout.contains("5 registrations, 9 records"),
        "{}",
        restored.stdout
    );

    let moved = TestNode::builder().data_dir(target).start();
    assert_eq!(moved.peer_id(), source.peer_id(), "the same node, moved");
    let (old, new) = (source.api(), moved.api());
    for id in ours.iter().take(5).chain(&theirs) {
        let path = format!("/agents/{id}");
        assert_eq!(
            new.get(&path).await.expect(200),
            old.get(&path).await.expect(200),
            "{id}'s document"
        );
        assert_eq!(trust_of(&new, id).await, trust_of(&old, id).await, "{id}");
    }
    new.get("/agents/backup-5")
        .await
        .expect_error(404, "NotFound");
    let suspension = new.get("/agents/backup-1/suspension").await;
    assert_eq!(
        suspension.expect(200)["reason"],
        "held back during the move",
        "the suspension moved"
    );
    // The text index was rebuilt from the records: each live agent that
    // is not suspended is found by its word, but the unlisted one, which
    // stays unlisted.
    for (i, id) in ours.iter().enumerate().take(5).filter(|(i, _)| *i != 1) {
        let found = new.search(json!({"query": WORDS[i], "top": 5})).await.ids();
        let expected = if i == UNLISTED {
            vec![]
        } else {
            vec![id.clone()]
        };
        assert_eq!(found, expected, "a search for {}", WORDS[i]);
    }
    let line = lines_of(&export, "registration")
        .into_iter()
        .find(|l| l.contains(&format!("\"id\":\"backup-{UNLISTED}\"")))
        .unwrap();
    assert!(line.contains("\"visibility\":\"unlisted\""), "{line}");
    // Registrations stay this node's own: it may update them.
    new.put(
        "/agents/backup-0",
        &agent("backup-0", &["translation"], &["moved", "again"], &["en"]),
    )
    .await
    .expect(200);

    // Every record byte for byte, the same signatures: nothing re-signed.
    let again = export_through_api(&moved, &files.path().join("moved.export"));
    let records = |e: &str| {
        lines_of(e, "record")
            .into_iter()
            .filter(|l| !l.contains("\"id\":\"backup-0\""))
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(records(&again), records(&export));
    assert_eq!(
        entries_of(&again, "suspended"),
        entries_of(&export, "suspended")
    );
    assert_eq!(entries_of(&again, "local"), entries_of(&export, "local"));
    let kept = entries_of(&export, "entitlements");
    assert_eq!(kept.len(), 5, "an owner for each live registration");
    assert_eq!(entries_of(&again, "entitlements"), kept);
}

#[tokio::test]
async fn a_restore_refuses_a_store_already_there_and_a_broken_export() {
    let files = tempfile::tempdir().unwrap();
    let mut node = TestNode::start();
    node.api()
        .register(&agent("kept-whole", &["translation"], &[], &["en"]))
        .await;

    // A running node's data directory is not read behind its back.
    let offline = files.path().join("offline.export");
    let refused = run(
        common::agentmesh()
            .arg("export")
            .arg("--data-dir")
            .arg(node.data_dir())
            .arg(&offline),
        DEADLINE,
        "agentmesh export of a running node's directory",
    );
    refused.assert_failure("agentmesh export of a running node's directory");
    assert!(
        refused.stderr.contains("a node is running"),
        "{}",
        refused.stderr
    );
    assert!(!offline.exists(), "no partial export left behind");

    // Stopped, the directory exports directly.
    node.stop();
    run(
        common::agentmesh()
            .arg("export")
            .arg("--data-dir")
            .arg(node.data_dir())
            .arg(&offline),
        DEADLINE,
        "agentmesh export --data-dir",
    )
    .assert_success("agentmesh export --data-dir");
    let export = std::fs::read_to_string(&offline).unwrap();
    assert_eq!(lines_of(&export, "registration").len(), 1);

    // Into the node's own directory: a store is there.
    let into_full = run(
        common::agentmesh()
            .arg("import")
            .arg("--data-dir")
            .arg(node.data_dir())
            .arg(&offline),
        DEADLINE,
        "agentmesh import into a directory with a store",
    );
    into_full.assert_failure("agentmesh import into a directory with a store");
    assert!(
        into_full.stderr.contains("is not empty"),
        "{}",
        into_full.stderr
    );

    let restore = |name: &str, text: String| {
        let file = files.path().join(name);
        std::fs::write(&file, text).unwrap();
        let target = tempfile::tempdir().unwrap();
        let done = run(
            common::agentmesh()
                .args(["import", "--format", "export", "--data-dir"])
                .arg(target.path())
                .arg(&file),
            DEADLINE,
            name,
        );
        done.assert_failure(name);
        assert!(
            !target.path().join("store").exists(),
            "{name}: a refused restore leaves no store behind"
        );
        done.stderr
    };
    // Cut short: the trailer is missing.
    let lines: Vec<&str> = export.lines().collect();
    let cut = lines[..lines.len() - 1].join("\n") + "\n";
    let said = restore("cut.export", cut);
    assert!(said.contains("incomplete"), "{said}");
    // A record whose bytes were changed no longer verifies.
    let tampered: String = lines
        .iter()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if v["type"] == "record" {
                let record = v["record"].as_str().unwrap().to_owned();
                let flipped = if record.ends_with("AA==") {
                    "AQ=="
                } else {
                    "AA=="
                };
                v["record"] = json!(format!("{}{flipped}", &record[..record.len() - 4]));
            }
            format!("{v}\n")
        })
        .collect();
    let said = restore("tampered.export", tampered);
    assert!(
        said.contains("line 3") && said.contains("kept-whole"),
        "{said}"
    );
}

#[tokio::test]
async fn an_export_needs_the_admin_token() {
    let files = tempfile::tempdir().unwrap();
    let node = TestNode::start_with_env(&[(
        "AGENTMESH_API__ADMIN_TOKEN",
        "backup-secret-of-the-operator",
    )]);
    node.api()
        .get("/admin/export")
        .await
        .expect_error(401, "Unauthorized");
    let file = files.path().join("refused.export");
    let refused = run(
        common::agentmesh()
            .arg("export")
            .args(["--api", &node.base_url()])
            .env_remove("AGENTMESH_API__ADMIN_TOKEN")
            .arg(&file),
        DEADLINE,
        "agentmesh export --api without the token",
    );
    refused.assert_failure("agentmesh export --api without the token");
    assert!(refused.stderr.contains("401"), "{}", refused.stderr);
    assert!(!file.exists() && !files.path().join("refused.export.partial").exists());
    run(
        common::agentmesh()
            .arg("export")
            .args([
                "--api",
                &node.base_url(),
                "--token",
                "backup-secret-of-the-operator",
            ])
            .arg(&file),
        DEADLINE,
        "agentmesh export --api --token",
    )
    .assert_success("agentmesh export --api --token");
    let export = std::fs::read_to_string(&file).unwrap();
    assert!(export.lines().last().unwrap().contains(r#""type":"end""#));
}
