//! Faults a node must survive with its word kept: killed with SIGKILL in
//! the middle of registrations, an import and a crawl, it restarts with
//! every write it acknowledged and a text index that agrees with its
//! store; given no more room (`store.max_bytes`, or a real filesystem
//! that fills up), it refuses writes with 507 while reads go on, and
//! takes writes again once there is room.

use std::path::Path;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt as _;
use serde_json::{json, Value};

use crate::common::{self, agent, testbed_with_ca, wait_until, Api, TestNode, LONG_DEADLINE};

/// A word no other agent's description holds, for agent `n` of the
/// stream `prefix`: what a text search finds it by (letters only, so the
/// analyser keeps it whole).
fn word(prefix: &str, n: usize) -> String {
    let mut letters = format!("quorx{prefix}");
    let mut n = n;
    for _ in 0..4 {
        letters.push(char::from(b'a' + (n % 26) as u8));
        n /= 26;
    }
    letters
}

/// The document of agent `n` of a stream: its id and its word.
fn numbered(prefix: &str, n: usize) -> Value {
    let mut doc = agent(
        &format!("{prefix}-{n}"),
        &["translation"],
        &["fault"],
        &["en"],
    );
    doc["description"] = json!(format!("Answers {} questions.", word(prefix, n)));
    doc
}

/// Registrations, one after another, until the node stops answering;
/// each one acknowledged (201) is recorded in `acked`.
async fn register_until_gone(
    api: Api,
    prefix: &'static str,
    acked: Arc<Mutex<Vec<(String, usize)>>>,
) {
    for n in 0.. {
        let doc = numbered(prefix, n);
        let sent = api
            .request(reqwest::Method::POST, "/agents")
            .json(&doc)
            .send()
            .await;
        match sent {
            Ok(r) if r.status() == 201 => acked.lock().unwrap().push((format!("{prefix}-{n}"), n)),
            Ok(r) => panic!("registration {n} answered {}", r.status()),
            Err(_) => return,
        }
    }
}

/// An import of `lines` documents, streamed; each line whose result
/// came back `created` (sent once its batch is on disk) goes to `acked`.
async fn import_until_gone(api: Api, lines: usize, acked: Arc<Mutex<Vec<(String, usize)>>>) {
    let body: String = (0..lines)
        .map(|n| format!("{}\n", numbered("imported", 100_000 + n)))
        .collect();
    let sent = api
        .request(reqwest::Method::POST, "/admin/import")
        .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
        .timeout(LONG_DEADLINE)
        .body(body)
        .send()
        .await;
    let Ok(response) = sent else { return };
    assert_eq!(response.status(), 200, "the import starts");
    let mut stream = response.bytes_stream();
    let mut pending = Vec::new();
    while let Some(Ok(chunk)) = stream.next().await {
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let result: Value = serde_json::from_slice(&line).unwrap();
            if result["outcome"] == "created" {
                let n = 100_000 + result["line"].as_u64().unwrap() as usize - 1;
                acked.lock().unwrap().push((format!("imported-{n}"), n));
            }
        }
    }
}

/// The agents a node holds from its crawl (ADP ids).
async fn crawled_ids(api: &Api) -> Vec<String> {
    let held = api
        .search(json!({"filters": {"min_trust": "dns-verified"}, "top": 100}))
        .await;
    held.ids()
        .into_iter()
        .filter(|id| id.starts_with("agent:"))
        .collect()
}

/// Every acknowledged write is held, and the text index finds each by
/// its word: the index agrees with the store.
async fn every_acknowledged_write_is_there(api: &Api, acked: &[(String, usize)]) {
    for (id, n) in acked {
        api.get(&format!("/agents/{id}")).await.expect(200);
        let prefix = id.split('-').next().expect("a numbered id has a prefix");
        let found = api
            .search(json!({"query": word(prefix, *n), "top": 5, "scope": "local"}))
            .await
            .ids();
        assert_eq!(found, vec![id.clone()], "a text search for {id}'s word");
    }
}

/// The import's lines: far more than go in before the kill.
const IMPORT_LINES: usize = 20_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_mid_stream_keeps_every_write_it_acknowledged() {
    let (testbed, _dir, ca) = testbed_with_ca(43, 40).await;
    let mut node =
        // The rate limits are off: the check afterwards searches once per
        // acknowledged write, faster than a client is allowed to.
        tokio::task::block_in_place(|| {
            TestNode::builder()
                .crawling(&testbed, &ca)
                .env("AGENTMESH_API__LIMITS__ENABLED", "false")
                .start()
        });
    let api = node.api();
    let acked: Arc<Mutex<Vec<(String, usize)>>> = Arc::default();

    let domains: Vec<&str> = testbed
        .population()
        .agents()
        .iter()
        .map(|a| a.domain.as_str())
        .collect();
    api.post("/crawl", &json!({"domains": domains}))
        .await
        .expect(202);
    let streams = [
        tokio::spawn(register_until_gone(api.clone(), "first", acked.clone())),
        tokio::spawn(register_until_gone(api.clone(), "second", acked.clone())),
        tokio::spawn(import_until_gone(api.clone(), IMPORT_LINES, acked.clone())),
    ];
    let imported = |acked: &[(String, usize)]| {
        acked
            .iter()
            .filter(|(id, _)| id.starts_with("imported"))
            .count()
    };
    wait_until("registrations and import lines acknowledged", || {
        let acked = acked.clone();
        async move {
            let acked = acked.lock().unwrap();
            acked.len() - imported(&acked) >= 10 && imported(&acked) >= 1
        }
    })
    .await;
    tokio::task::block_in_place(|| node.kill());
    for stream in streams {
        stream.await.expect("a writer ends when the node is gone");
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        imported(&acked) < IMPORT_LINES,
        "the kill came before the import's end: the test kills mid-stream"
    );

    tokio::task::block_in_place(|| node.start_again());
    let api = node.api();
    every_acknowledged_write_is_there(&api, &acked).await;
    // What the crawl stored before the kill (if it got that far) agrees
    // with the index too: each agent held is found by its name.
    for id in &crawled_ids(&api).await {
        let summary = api
            .get(&format!("/agents/{id}/summary"))
            .await
            .expect(200)
            .clone();
        let name = summary["name"].as_str().unwrap_or_default().to_owned();
        let found = api.search(json!({"query": name, "top": 50})).await.ids();
        assert!(
            found.contains(id),
            "{id} is found by its name {name:?}: {found:?}"
        );
    }
    // The audit chain the killed node was writing still verifies.
    let verify = api.get("/admin/audit/verify").await.expect(200).clone();
    assert_eq!(verify["ok"], true, "{verify}");
    assert!(verify["checked"].as_u64().unwrap() > 0, "{verify}");
}

/// The bytes a data directory's store takes on disk.
fn store_bytes(data_dir: &Path) -> u64 {
    agentmesh::store::disk_usage(&data_dir.join("store"))
}

/// A `[store]` section setting `max_bytes`.
fn limit_config(file: &Path, max_bytes: u64) {
    std::fs::write(file, format!("[store]\nmax_bytes = {max_bytes}\n")).unwrap();
}

/// Registers numbered agents (with a long description, so the store
/// grows fast) until one is refused; answers the refusal and how many
/// went in before it.
async fn register_until_refused(api: &Api, prefix: &str, most: usize) -> (common::Reply, usize) {
    for n in 0..most {
        let mut doc = numbered(prefix, n);
        doc["description"] = json!(format!("{} {}", word(prefix, n), "padding ".repeat(200)));
        let reply = api.post("/agents", &doc).await;
        if reply.status != 201 {
            return (reply, n);
        }
    }
    panic!("{most} registrations and none refused");
}

#[tokio::test]
async fn writes_past_the_store_limit_are_refused_while_reads_go_on() {
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("node.toml");
    limit_config(&config, 1 << 40);
    let mut node = TestNode::builder()
        .args(&["--config", config.to_str().unwrap()])
        .start();
    node.api().register(&numbered("kept", 0)).await;
    node.stop();

    // Room for a little more than what is there.
    let used = store_bytes(node.data_dir());
    limit_config(&config, used + (2 << 20));
    node.start_again();
    let api = node.api();
    let (refused, went_in) = register_until_refused(&api, "filler", 5_000).await;
    refused.expect_error(507, "InsufficientStorage");
    assert!(went_in > 0, "writes below the limit went in");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_bytes"),
        "the refusal says why: {:?}",
        refused.body
    );

    // Reads go on: a document, a search, the list.
    api.get("/agents/kept-0").await.expect(200);
    assert_eq!(
        api.search(json!({"query": word("kept", 0), "top": 5}))
            .await
            .ids(),
        vec!["kept-0".to_owned()]
    );
    api.get("/agents").await.expect(200);
    // An update is a write too; a delete makes room and goes in.
    api.put("/agents/kept-0", &numbered("kept", 0))
        .await
        .expect_error(507, "InsufficientStorage");
    api.delete("/agents/filler-0").await.expect(204);
    // A record from another registry finds no room either; the sender is
    // told so, and not as a fault of its record.
    let elsewhere = common::signed_registration(
        "elsewhere-0",
        "https://weather.example/0",
        agentmesh::record::next_seq(None),
        &agentmesh::identity::generate(),
    );
    api.post_raw("/records", Some("application/cbor"), elsewhere)
        .await
        .expect_error(507, "InsufficientStorage");

    // Room again (the limit raised): writes go in.
    limit_config(&config, used * 64 + (64 << 20));
    node.restart();
    let api = node.api();
    api.register(&numbered("after", 0)).await;
    api.get("/agents/after-0").await.expect(200);
}

/// Mounts a tmpfs of `bytes` on `dir`, or says why not.
fn mount_tmpfs(dir: &Path, bytes: u64) -> Result<(), String> {
    let out = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
        .arg(dir)
        .output()
        .map_err(|e| format!("cannot run mount: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

/// Unmounts a tmpfs when dropped, after the node on it is gone.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[tokio::test]
#[ignore = "needs root, to mount a tmpfs (mount -t tmpfs)"]
async fn a_full_filesystem_is_refused_with_507_and_the_node_recovers() {
    let base = tempfile::tempdir().unwrap();
    let mount = base.path().join("small");
    std::fs::create_dir(&mount).unwrap();
    if let Err(why) = mount_tmpfs(&mount, 48 << 20) {
        panic!("cannot mount a tmpfs ({why}): run this test as root");
    }
    let _mounted = Mounted(mount.clone());
    let data = tempfile::tempdir_in(&mount).unwrap();
    let mut node = TestNode::builder().data_dir(data).start();
    let api = node.api();
    api.register(&numbered("kept", 0)).await;

    // Fill the filesystem, leaving the node a little room.
    let ballast = mount.join("ballast");
    let free = free_bytes(&mount);
    let file = std::fs::File::create(&ballast).unwrap();
    file.set_len(0).unwrap();
    drop(file);
    fill(&ballast, free.saturating_sub(1 << 20));
    let (refused, _) = register_until_refused(&api, "filler", 5_000).await;
    refused.expect_error(507, "InsufficientStorage");
    api.get("/agents/kept-0").await.expect(200);

    // Room again: the node takes writes at once, and keeps them over a
    // restart.
    std::fs::remove_file(&ballast).unwrap();
    api.register(&numbered("after", 0)).await;
    node.restart();
    let api = node.api();
    api.get("/agents/kept-0").await.expect(200);
    api.get("/agents/after-0").await.expect(200);
}

/// Free bytes on the filesystem of `dir`.
fn free_bytes(dir: &Path) -> u64 {
    let out = std::process::Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .expect("df answers the free bytes")
}

/// Writes `bytes` of zeros into `file` (real blocks: tmpfs counts them).
fn fill(file: &Path, bytes: u64) {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new().append(true).open(file).unwrap();
    let chunk = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        if f.write_all(&chunk[..n]).is_err() {
            return;
        }
        left -= n as u64;
    }
}
