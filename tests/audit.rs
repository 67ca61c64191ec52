//! The audit log end to end: a node records registrations, updates,
//! deletions, crawl requests, suspensions and refused credentials;
//! `GET /admin/audit` and `agentmesh audit tail` read them; an old
//! version of an updated agent is readable through the trail; and once
//! the node is stopped, an entry edited, deleted or reordered in its
//! sled store is named by `agentmesh audit verify`.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{self, agent, Api, TestNode};

const TOKEN: &str = "audit-test-token";

fn node() -> TestNode {
    TestNode::builder()
        .env("AGENTMESH_API__ADMIN_TOKEN", TOKEN)
        // Nothing to resolve for real: the crawl request is only queued.
        .args(&["--resolver", "127.0.0.1:9"])
        .start()
}

/// Runs `agentmesh audit ARGS`.
fn audit(args: &[&str]) -> common::Finished {
    let mut cmd = common::agentmesh();
    cmd.arg("audit").args(args);
    common::run(&mut cmd, Duration::from_secs(60), "agentmesh audit")
}

fn actions(entries: &[Value]) -> Vec<(String, String, String)> {
    entries
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_owned(),
                e["target"].as_str().unwrap().to_owned(),
                e["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn row(action: &str, target: &str, outcome: &str) -> (String, String, String) {
    (action.to_owned(), target.to_owned(), outcome.to_owned())
}

/// Waits until no process holds sled's lock on the store in `dir`.
async fn wait_unlocked(dir: &Path) {
    use std::os::fd::AsRawFd as _;
    let file = dir.join("store").join("db");
    common::wait_until("sled lets go of the store", || {
        let file = file.clone();
        async move {
            let f = std::fs::File::open(&file).unwrap();
            // SAFETY: `f` is open for the whole call; the lock taken, if
            // any, goes with it.
            unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
        }
    })
    .await;
}

/// Runs `f` on the store's `audit` tree, then closes the database.
async fn tamper(dir: &Path, f: impl FnOnce(&sled::Tree)) {
    {
        let db = sled::open(dir.join("store")).unwrap();
        let tree = db.open_tree("audit").unwrap();
        f(&tree);
        db.flush().unwrap();
    }
    wait_unlocked(dir).await;
}

#[tokio::test]
async fn writes_are_audited_and_tampering_is_named() {
    let mut node = node();
    let api = node.api().with_token(TOKEN);
    let base = node.base_url();

    let first = agent("audit-a", &["translation"], &["nlp"], &["en"]);
    api.register(&first).await;
    let mut second = first.clone();
    second["description"] = json!("a newer description");
    api.put("/agents/audit-a", &second).await.expect(200);
    api.register(&agent("audit-b", &["summarization"], &[], &["en"]))
        .await;
    api.delete("/agents/audit-b").await.expect(204);
    api.post("/crawl", &json!({"domains": ["audit.invalid"]}))
        .await
        .expect(202);
    api.put(
        "/admin/agents/audit-a/suspension",
        &json!({"reason": "audit test"}),
    )
    .await
    .expect(200);
    // Without the token: refused, and recorded as such.
    Api::new(base.clone())
        .delete("/agents/audit-a")
        .await
        .expect_error(401, "Unauthorized");
    Api::new(base.clone())
        .get("/admin/audit")
        .await
        .expect_error(401, "Unauthorized");

    let page = api.get("/admin/audit?limit=1000").await;
    let entries = page.expect(200)["entries"].as_array().unwrap().clone();
    assert_eq!(
        actions(&entries),
        [
            row("register", "audit-a", "ok"),
            row("update", "audit-a", "ok"),
            row("register", "audit-b", "ok"),
            row("delete", "audit-b", "ok"),
            row("crawl_request", "audit.invalid", "ok"),
            row("suspend", "audit-a", "ok"),
            // The second refusal from the same client within a minute
            // is counted into its next entry, not written: a flood of
            // bad credentials does not flood the log.
            row("auth_failed", "audit-a", "refused:Unauthorized"),
        ]
    );
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(e["seq"], i + 1);
        let actor = if e["action"] == "auth_failed" {
            "anonymous"
        } else {
            "admin-token"
        };
        assert_eq!(e["actor"], actor, "{e}");
        assert!(
            e["request_id"].as_str().is_some_and(|r| !r.is_empty()),
            "{e}"
        );
        assert!(!e.to_string().contains(TOKEN), "a secret in {e}");
    }
    // Paging, and the error object on bad input.
    let second_page = api.get("/admin/audit?after=6&limit=1").await;
    let second_page = second_page.expect(200);
    assert_eq!(second_page["entries"][0]["seq"], 7);
    assert_eq!(second_page["next_after"], 7);
    api.get("/admin/audit?limit=0")
        .await
        .expect_error(400, "InvalidInput");
    api.get("/admin/audit?after=x")
        .await
        .expect_error(400, "InvalidInput");
    api.get("/admin/audit?colour=red")
        .await
        .expect_error(400, "InvalidInput");
    api.get("/admin/audit/999")
        .await
        .expect_error(404, "NotFound");

    // The version the registration left: the first description, while
    // the agent now has the second.
    let shown = api.get("/admin/audit/1").await;
    let shown = shown.expect(200);
    assert_eq!(shown["record"]["type"], "descriptor");
    assert_eq!(
        shown["record"]["document"]["description"],
        first["description"]
    );
    assert_ne!(first["description"], second["description"]);
    let updated = api.get("/admin/audit/2").await;
    assert_eq!(
        updated.expect(200)["record"]["document"]["description"],
        "a newer description"
    );

    // The CLI, through the running node; the data directory is held.
    let tail = audit(&["tail", "-n", "3", "--api", &base, "--token", TOKEN]);
    tail.assert_success("audit tail --api");
    let lines: Vec<&str> = tail.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", tail.stdout);
    assert!(
        lines[1].contains("suspend") && lines[1].contains("audit-a"),
        "{}",
        tail.stdout
    );
    audit(&["verify", "--api", &base, "--token", TOKEN]).assert_success("audit verify --api");
    let dir = node.data_dir().to_path_buf();
    let dir_arg = dir.to_str().unwrap().to_owned();
    let held = audit(&["verify", "--data-dir", &dir_arg]);
    assert_eq!(held.status.code(), Some(2), "{}", held.stderr);
    assert!(held.stderr.contains("--api"), "{}", held.stderr);

    node.stop();
    wait_unlocked(&dir).await;
    let clean = audit(&["verify", "--data-dir", &dir_arg]);
    clean.assert_success("audit verify on the stopped node's data directory");
    assert!(
        clean.stdout.starts_with("ok: 7 entries"),
        "{}",
        clean.stdout
    );
    let offline_tail = audit(&["tail", "--json", "--data-dir", &dir_arg]);
    offline_tail.assert_success("audit tail --data-dir");
    assert_eq!(offline_tail.stdout.lines().count(), 7);
    let show = audit(&["show", "1", "--data-dir", &dir_arg]);
    show.assert_success("audit show");
    assert!(show.stdout.contains(first["description"].as_str().unwrap()));

    let key = |seq: u64| seq.to_be_bytes();
    let original: Vec<(u64, Vec<u8>)> = {
        let db = sled::open(dir.join("store")).unwrap();
        let tree = db.open_tree("audit").unwrap();
        let all = (1..=7)
            .map(|s| (s, tree.get(key(s)).unwrap().unwrap().to_vec()))
            .collect();
        drop(db);
        all
    };
    wait_unlocked(&dir).await;
    let restore = |tree: &sled::Tree| {
        for (s, v) in &original {
            tree.insert(key(*s), v.as_slice()).unwrap();
        }
    };

    // Edited: entry 3's target renamed.
    tamper(&dir, |t| {
        let mut v = original[2].1.clone();
        let at = v.windows(7).position(|w| w == b"audit-b").unwrap();
        v[at + 6] = b'z';
        t.insert(key(3), v).unwrap();
    })
    .await;
    let edited = audit(&["verify", "--data-dir", &dir_arg]);
    assert_eq!(edited.status.code(), Some(1), "{}", edited.stdout);
    assert!(
        edited.stdout.contains("entry 3 was edited"),
        "{}",
        edited.stdout
    );

    // Deleted: entry 4 gone.
    tamper(&dir, |t| {
        restore(t);
        t.remove(key(4)).unwrap();
    })
    .await;
    let deleted = audit(&["verify", "--data-dir", &dir_arg]);
    assert_eq!(deleted.status.code(), Some(1), "{}", deleted.stdout);
    assert!(
        deleted.stdout.contains("entry 4 is missing"),
        "{}",
        deleted.stdout
    );

    // Reordered: entries 5 and 6 swapped.
    tamper(&dir, |t| {
        restore(t);
        t.insert(key(5), original[5].1.as_slice()).unwrap();
        t.insert(key(6), original[4].1.as_slice()).unwrap();
    })
    .await;
    let reordered = audit(&["verify", "--data-dir", &dir_arg]);
    assert_eq!(reordered.status.code(), Some(1), "{}", reordered.stdout);
    assert!(
        reordered.stdout.contains("entry 5 is out of order"),
        "{}",
        reordered.stdout
    );
    let json = audit(&["verify", "--json", "--data-dir", &dir_arg]);
    let report: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(report["broken"]["kind"], "reordered");
    assert_eq!(report["broken"]["seq"], 5);

    // Restored, it verifies again: each failure above came from the tampering.
    tamper(&dir, restore).await;
    audit(&["verify", "--data-dir", &dir_arg]).assert_success("audit verify after restoring");
}

#[tokio::test]
async fn retention_prunes_behind_a_checkpoint_the_chain_verifies_from() {
    let mut node = TestNode::builder()
        .env("AGENTMESH_API__ADMIN_TOKEN", TOKEN)
        .env("AGENTMESH_STORE__AUDIT_RETENTION", "2")
        .start();
    let api = node.api().with_token(TOKEN);
    for i in 0..5 {
        api.register(&agent(&format!("kept-{i}"), &["translation"], &[], &["en"]))
            .await;
    }
    // Retention prunes at the start (and every 10 minutes).
    node.restart();
    let api = node.api().with_token(TOKEN);
    let entries = api.get("/admin/audit").await;
    let seqs: Vec<u64> = entries.expect(200)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [4, 5]);
    let verified = api.get("/admin/audit/verify").await;
    let verified = verified.expect(200);
    assert_eq!(verified["ok"], true, "{verified}");
    assert_eq!(verified["from"], 3);
    // The chain goes on after the checkpoint.
    api.register(&agent("kept-5", &["translation"], &[], &["en"]))
        .await;
    node.stop();
    let dir = node.data_dir().to_path_buf();
    wait_unlocked(&dir).await;
    let report = audit(&["verify", "--data-dir", dir.to_str().unwrap()]);
    report.assert_success("audit verify after pruning");
    assert!(
        report
            .stdout
            .contains("from the checkpoint after entry 3 to entry 6"),
        "{}",
        report.stdout
    );
}
