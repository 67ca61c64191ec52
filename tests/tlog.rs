//! The node's transparency log over HTTP (docs/protocol.md#log): what
//! `/log/` serves is every record the node signed, checkpoints signed
//! with the node's own key, tiles and proofs that check, and a log that
//! a crash never rolls back below a checkpoint it handed out. An
//! independent reader, written in Go with the Go team's
//! `golang.org/x/mod/sumdb/{tlog,note}` from the C2SP texts
//! (`tests/tlog_interop/reader.go`), reads the whole log and checks it.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use agentmesh::record::SignedRecord;
use agentmesh::tlog::{self, Checkpoint, Notary};
use serde_json::Value;

use crate::common::{agent, needs, on_path, run, Api, TestNode};

/// A node whose registrations are not rate-limited (the tests register
/// a few hundred agents).
fn node() -> TestNode {
    TestNode::start_with_env(&[("AGENTMESH_API__LIMITS__ENABLED", "false")])
}

/// The verifier key of the node's log, from its peer id alone: what a
/// client that knows the node's identity checks checkpoints with.
fn vkey_of(node: &TestNode) -> String {
    let key = agentmesh::identity::key_of_peer_id(node.peer_id()).expect("an Ed25519 peer id");
    tlog::note::verifier_key(&Notary::default_origin(node.peer_id()), &key)
}

async fn checkpoint(api: &Api, vkey: &str) -> (Checkpoint, String) {
    let reply = api.get("/log/checkpoint").await;
    reply.expect(200);
    assert_eq!(
        reply.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    let opened = Checkpoint::open(reply.text.as_bytes(), vkey, None)
        .unwrap_or_else(|e| panic!("the checkpoint does not open: {e}\n{}", reply.text));
    (opened, reply.text.clone())
}

async fn register_many(api: &Api, prefix: &str, n: usize) {
    for i in 0..n {
        api.register(&agent(
            &format!("{prefix}-{i:03}"),
            &["logged"],
            &[],
            &["en"],
        ))
        .await;
    }
}

fn decode_hash(v: &Value) -> tlog::Hash {
    tlog::decode_hash(v.as_str().expect("a base64 hash")).expect("a hash")
}

/// The hashes of a proof answer's `proof` member.
fn proof_path(answer: &Value) -> Vec<tlog::Hash> {
    answer["proof"]
        .as_array()
        .expect("a proof is a list")
        .iter()
        .map(decode_hash)
        .collect()
}

#[tokio::test]
async fn the_log_serves_every_record_the_node_signed_under_its_own_key() {
    let node = node();
    let api = node.api();
    let vkey = vkey_of(&node);
    assert_eq!(api.get("/log/key").await.text.trim(), vkey);
    let (empty, _) = checkpoint(&api, &vkey).await;
    assert_eq!(empty.size, 0);
    assert_eq!(empty.origin, format!("agentmesh/{}", node.peer_id()));

    register_many(&api, "served", 5).await;
    let mut unlisted = agent("served-unlisted", &["logged"], &[], &["en"]);
    unlisted["visibility"] = serde_json::json!("unlisted");
    api.post("/agents", &unlisted).await.expect(201);
    api.delete("/agents/served-004").await.expect(204);
    let (head, _) = checkpoint(&api, &vkey).await;
    assert_eq!(head.size, 7, "six registrations and a deletion");

    let bundle = api.get("/log/tile/entries/000.p/7").await;
    bundle.expect(200);
    assert_eq!(
        bundle.header("content-type"),
        Some("application/octet-stream")
    );
    assert!(bundle
        .header("cache-control")
        .is_some_and(|c| c.contains("immutable")));
    let bytes = api
        .request(reqwest::Method::GET, "/log/tile/entries/000.p/7")
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    // The unlisted agent's record is sealed: the log shows neither it
    // nor its id.
    assert!(!bytes.windows(15).any(|w| w == b"served-unlisted"));
    let mut rest = &bytes[..];
    let mut ids = Vec::new();
    while !rest.is_empty() {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
        let entry = &rest[2..2 + len];
        rest = &rest[2 + len..];
        if entry.starts_with(tlog::SEALED_PREFIX) {
            assert_eq!(entry.len(), tlog::SEALED_PREFIX.len() + 32);
            ids.push("(sealed)".to_owned());
            continue;
        }
        let record = SignedRecord::decode(entry).expect("an entry is a signed record");
        assert_eq!(
            agentmesh::identity::peer_id_of_public(record.signer()),
            node.peer_id(),
            "signed by the node"
        );
        ids.push(record.body().unwrap().agent_id().to_owned());
    }
    assert_eq!(
        ids,
        [
            "served-000",
            "served-001",
            "served-002",
            "served-003",
            "served-004",
            "(sealed)",
            "served-004"
        ]
    );

    // Each entry's inclusion proof checks against the checkpoint's root.
    for index in 0..7u64 {
        let proof = api
            .get(&format!("/log/proof/inclusion?index={index}&size=7"))
            .await
            .expect(200)
            .clone();
        assert_eq!(decode_hash(&proof["root"]), head.root);
        let path = proof_path(&proof);
        tlog::check_record(&path, 7, head.root, index, decode_hash(&proof["leaf"]))
            .unwrap_or_else(|e| panic!("entry {index}: {e}"));
    }
    let consistency = api
        .get("/log/proof/consistency?from=2")
        .await
        .expect(200)
        .clone();
    assert_eq!(consistency["size"], 7);
    let path = proof_path(&consistency);
    tlog::check_tree(
        &path,
        7,
        head.root,
        2,
        decode_hash(&consistency["from_root"]),
    )
    .unwrap();
}

#[tokio::test]
async fn bad_log_requests_get_clear_errors() {
    let node = node();
    let api = node.api();
    register_many(&api, "errors", 2).await;
    let (bad, beyond) = ((400, "InvalidInput"), (404, "NotFound"));
    for (path, (status, code)) in [
        ("/log/tile/0/1", bad),
        ("/log/tile/00/000", bad),
        ("/log/tile/0/000.p/256", bad),
        ("/log/tile/data/000", bad),
        ("/log/tile/0/x000/001", bad),
        ("/log/tile/0/000", beyond),
        ("/log/tile/0/000.p/3", beyond),
        ("/log/tile/1/000.p/1", beyond),
        ("/log/tile/entries/001.p/1", beyond),
        ("/log/proof/inclusion", bad),
        ("/log/proof/inclusion?index=x", bad),
        ("/log/proof/inclusion?index=0&other=1", bad),
        ("/log/proof/consistency?size=2", bad),
        ("/log/proof/inclusion?index=2", beyond),
        ("/log/proof/inclusion?index=0&size=3", beyond),
        ("/log/proof/consistency?from=3", beyond),
        ("/log/proof/consistency?from=2&size=1", beyond),
    ] {
        api.get(path).await.expect_error(status, code);
    }
    api.get("/log/tile/0/000.p/2").await.expect(200);
    // Every tree extends the empty one.
    let empty = api.get("/log/proof/consistency?from=0").await;
    assert_eq!(empty.expect(200)["proof"], serde_json::json!([]));
}

#[tokio::test]
async fn a_crash_never_rolls_the_log_back_below_a_checkpoint_it_served() {
    let mut node = node();
    let vkey = vkey_of(&node);
    register_many(&node.api(), "crash", 20).await;
    let (before, _) = checkpoint(&node.api(), &vkey).await;
    assert_eq!(before.size, 20);
    node.crash_and_restart();
    let api = node.api();
    let (after, _) = checkpoint(&api, &vkey).await;
    assert_eq!((after.size, after.root), (before.size, before.root));
    register_many(&api, "after", 3).await;
    node.crash_and_restart();
    let api = node.api();
    let (grown, _) = checkpoint(&api, &vkey).await;
    assert_eq!(grown.size, 23);
    let proof = api
        .get(&format!(
            "/log/proof/consistency?from={}&size=23",
            before.size
        ))
        .await
        .expect(200)
        .clone();
    let path = proof_path(&proof);
    tlog::check_tree(&path, grown.size, grown.root, before.size, before.root)
        .expect("the log after two crashes extends the one before");
}

/// Builds the Go reader (GOPATH mode over Debian's golang.org/x/mod).
fn go_reader(dir: &std::path::Path) -> PathBuf {
    let go = needs(
        on_path("go"),
        "go and golang.org/x/mod",
        "apt-get install golang-go golang-golang-x-mod-dev",
    );
    let out = dir.join("tlogreader");
    let reader = crate::common::repo_root().join("tests/tlog_interop/reader.go");
    run(
        Command::new(go)
            .args(["build", "-o"])
            .arg(&out)
            .arg(reader)
            .env("GO111MODULE", "off")
            .env("GOPATH", "/usr/share/gocode")
            .env("GOCACHE", dir.join("gocache"))
            .env("GOFLAGS", ""),
        Duration::from_secs(300),
        "go build of the tlog reader",
    )
    .assert_success("go build of the tlog reader");
    out
}

#[tokio::test]
#[ignore = "needs go and golang.org/x/mod (apt-get install golang-go golang-golang-x-mod-dev)"]
async fn the_go_tlog_packages_read_the_served_log_and_its_proofs_check() {
    let work = tempfile::tempdir().unwrap();
    let reader = go_reader(work.path());
    let node = node();
    let api = node.api();
    let vkey = vkey_of(&node);
    let origin = Notary::default_origin(node.peer_id());
    let saved = work.path().join("checkpoint");
    let read = |extra: Vec<String>| {
        let mut cmd = Command::new(&reader);
        cmd.args(["-url", &node.base_url(), "-vkey", &vkey, "-origin", &origin])
            .args(extra);
        let done = run(&mut cmd, Duration::from_secs(120), "the Go tlog reader");
        done.assert_success("the Go tlog reader");
        serde_json::from_str::<Value>(done.stdout.trim()).expect("one JSON line")
    };
    // 300 entries: a full level-0 tile, partial tiles at levels 0 and 1.
    register_many(&api, "go", 299).await;
    api.delete("/agents/go-000").await.expect(204);
    let first = read(vec!["-save".into(), saved.display().to_string()]);
    assert_eq!(first["size"], 300);
    assert_eq!(first["entries_checked"], 300);

    register_many(&api, "more", 40).await;
    let second = read(vec!["-old".into(), saved.display().to_string()]);
    assert_eq!(second["size"], 340);
    assert_eq!(second["consistency_checked"], true);
    assert!(second["inclusion_checked"].as_u64().unwrap() >= 64);
}
