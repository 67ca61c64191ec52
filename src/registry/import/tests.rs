use std::sync::Arc;
use std::time::Duration;

use ed25519_dalek::SigningKey;
use serde_json::json;

use super::*;
use crate::issuer::Issuer;
use crate::store::Store;
use crate::trust::Reason;

/// A valid document, `demo-{i:05}` (the testbed's generator is behind a
/// feature).
fn synthetic_agent(i: usize) -> Value {
    json!({
        "id": format!("demo-{i:05}"),
        "name": format!("Agent {i}"),
        "description": format!("Test agent {i}."),
        "version": "1.0.0",
        "capabilities": ["translation"],
        "tags": ["nlp"],
        "endpoint": format!("https://agents.example.net/{i}"),
        "supported_languages": ["en"],
        "authentication": {"type": "api_key"},
        "inputs": {"type": "object"},
        "outputs": {"type": "object"}
    })
}

fn registry(dir: &tempfile::TempDir, ttl: Duration) -> Registry {
    let store = Store::open(dir.path(), 8 << 20).unwrap();
    Registry::new(Issuer::new(
        store,
        Arc::new(SigningKey::from_bytes(&[9u8; 32])),
        ttl,
    ))
}

async fn import(importer: &Importer, input: &str) -> (Vec<LineResult>, ImportSummary) {
    let (tx, mut rx) = mpsc::channel(16);
    let input = input.as_bytes().to_vec();
    let run = {
        let importer = importer.clone();
        tokio::spawn(async move { importer.run(&input[..], tx).await })
    };
    let mut results = Vec::new();
    while let Some(r) = rx.recv().await {
        results.push(r);
    }
    (results, run.await.unwrap())
}

fn lines(docs: &[Value]) -> String {
    docs.iter().map(|d| format!("{d}\n")).collect()
}

async fn read_all(input: &[u8], max: usize) -> Vec<Read> {
    let mut reader = LineReader::new(input, max);
    let mut out = Vec::new();
    while let Some(line) = reader.next_line().await.unwrap() {
        out.push(line);
    }
    out
}

#[tokio::test]
async fn lines_are_split_bounded_and_skipped_past_the_limit() {
    let line = |s: &str| Read::Line(s.as_bytes().to_vec());
    assert_eq!(
        read_all(b"ab\r\n\ncd", 4).await,
        [line("ab"), line(""), line("cd")]
    );
    assert_eq!(read_all(b"", 4).await, []);
    assert_eq!(read_all(b"\n", 4).await, [line("")]);
    // Exactly the limit passes, with or without `\r`; one byte more does
    // not, and the next line is read whole.
    assert_eq!(
        read_all(b"abcd\nabcd\r\nabcde\nxy\n", 4).await,
        [
            line("abcd"),
            line("abcd"),
            Read::TooLong { bytes: 5 },
            line("xy")
        ]
    );
    // A long line across many buffer fills is skipped without being held.
    let long = [vec![b'x'; 100_000], b"\nok".to_vec()].concat();
    let reader = tokio::io::BufReader::with_capacity(64, &long[..]);
    let mut lines = LineReader::new(reader, 1000);
    assert_eq!(
        lines.next_line().await.unwrap(),
        Some(Read::TooLong { bytes: 100_000 })
    );
    assert_eq!(lines.next_line().await.unwrap(), Some(line("ok")));
    assert_eq!(lines.next_line().await.unwrap(), None);
}

#[test]
fn derived_ids_ignore_member_order_and_the_id_member() {
    let a = json!({"name": "x", "tags": ["b", "a"], "auth": {"k": 1, "j": 2}});
    let b = json!({"auth": {"j": 2, "k": 1}, "tags": ["b", "a"], "name": "x", "id": null});
    let c = json!({"name": "x", "tags": ["a", "b"], "auth": {"k": 1, "j": 2}});
    assert_eq!(derived_id(&a), derived_id(&b));
    assert_ne!(derived_id(&a), derived_id(&c), "array order counts");
    let id = derived_id(&a);
    assert!(id.starts_with("agent-") && id.len() == 6 + 32, "{id}");
}

#[tokio::test]
async fn good_lines_go_in_and_bad_ones_are_reported_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(&dir, Duration::from_secs(3600));
    let importer = Importer::new(reg.clone(), ImportLimits::default());
    let mut no_name = synthetic_agent(3);
    no_name.as_object_mut().unwrap().remove("name");
    let mut no_id = synthetic_agent(4);
    no_id.as_object_mut().unwrap().remove("id");
    let input = format!(
        "{}\n{{not json\n\n{}\n[1,2]\n{}\n{}\n",
        synthetic_agent(1),
        no_name,
        json!({"id": 7}),
        no_id
    );
    let (results, summary) = import(&importer, &input).await;
    let outcomes: Vec<(u64, Outcome)> = results.iter().map(|r| (r.line, r.outcome)).collect();
    assert_eq!(
        outcomes,
        [
            (1, Outcome::Created),
            (2, Outcome::Refused),
            (4, Outcome::Refused),
            (5, Outcome::Refused),
            (6, Outcome::Refused),
            (7, Outcome::Created),
        ]
    );
    assert!(results[1].problems[0].message.contains("not JSON"));
    assert!(results[2].problems.iter().any(|p| p.field == "/name"));
    assert_eq!(results[2].id.as_deref(), Some("demo-00003"));
    assert_eq!(results[3].problems[0].field, "");
    assert_eq!(results[4].problems[0].field, "/id");
    let assigned = results[5].id.clone().unwrap();
    assert!(assigned.starts_with("agent-"));
    assert_eq!(
        summary,
        ImportSummary {
            lines: 7,
            blank: 1,
            created: 2,
            updated: 0,
            unchanged: 0,
            refused: 4,
            stopped: None,
            ..ImportSummary::default()
        }
    );
    assert!(reg.store().is_local("demo-00001").await.unwrap());
    assert!(reg.store().is_local(&assigned).await.unwrap());
    assert_eq!(reg.store().len(), 2);
}

/// A long import leaves the text index to commit on its own cadence
/// (every batch is flushed to disk, not to the index), yet every line is
/// searchable by text once the run answers: the last batch's too.
#[tokio::test]
async fn every_imported_line_is_searchable_by_text_when_the_import_answers() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(&dir, Duration::from_secs(3600));
    let importer = Importer::new(reg.clone(), ImportLimits::default());
    let n = 2 * BATCH_LINES + 500;
    let docs: Vec<Value> = (0..n).map(synthetic_agent).collect();
    let (results, summary) = import(&importer, &lines(&docs)).await;
    assert_eq!(summary.created, n as u64, "{summary:?}");
    assert_eq!(results.len(), n);
    // The first line, one of the middle batch and the last: each found by
    // the number only its description holds.
    for i in [0, BATCH_LINES + 7, n - 1] {
        let page = reg
            .search_local(&crate::registry::SearchQuery {
                filter: crate::store::Filter::default(),
                query: Some(i.to_string()),
                after: None,
                limit: 3,
                explain: false,
            })
            .await
            .unwrap();
        let want = format!("demo-{i:05}");
        assert_eq!(
            page.items.first().map(|a| a.id.as_str()),
            Some(want.as_str()),
            "a text search for {i}: {:?}",
            page.items.iter().map(|a| &a.id).collect::<Vec<_>>()
        );
    }
}

#[tokio::test]
async fn re_importing_changes_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(&dir, Duration::from_secs(3600));
    let importer = Importer::new(reg.clone(), ImportLimits::default());
    let mut docs: Vec<Value> = (0..5).map(synthetic_agent).collect();
    docs[4].as_object_mut().unwrap().remove("id");
    let (first, _) = import(&importer, &lines(&docs)).await;
    assert!(first.iter().all(|r| r.outcome == Outcome::Created));
    let seq_of = |id: String| {
        let store = reg.store().clone();
        async move { store.get(&id).await.unwrap().unwrap().body.seq() }
    };
    let seqs_before = [
        seq_of("demo-00000".into()).await,
        seq_of("demo-00001".into()).await,
    ];

    // Member order differs, one document changed: one update.
    let mut again = docs.clone();
    let reordered: serde_json::Map<String, Value> = docs[0]
        .as_object()
        .unwrap()
        .iter()
        .rev()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    again[0] = Value::Object(reordered);
    again[1]["description"] = json!("Changed.");
    let (second, summary) = import(&importer, &lines(&again)).await;
    let outcomes: Vec<Outcome> = second.iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Unchanged,
            Outcome::Updated,
            Outcome::Unchanged,
            Outcome::Unchanged,
            Outcome::Unchanged
        ]
    );
    assert_eq!(
        second[4].id, first[4].id,
        "the id-less document keeps its id"
    );
    assert_eq!((summary.unchanged, summary.updated), (4, 1));
    assert_eq!(seq_of("demo-00000".into()).await, seqs_before[0]);
    assert!(seq_of("demo-00001".into()).await > seqs_before[1]);
    assert_eq!(reg.store().len(), 5);
}

#[tokio::test]
async fn a_record_past_half_its_lifetime_is_re_signed() {
    let dir = tempfile::tempdir().unwrap();
    // A lifetime under a second: half of it is 0 s, and a second later
    // the record has less than that left.
    let reg = registry(&dir, Duration::from_secs(1));
    let importer = Importer::new(reg.clone(), ImportLimits::default());
    let input = lines(&[synthetic_agent(1)]);
    import(&importer, &input).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (results, _) = import(&importer, &input).await;
        if results[0].outcome == Outcome::Updated {
            break;
        }
        assert_eq!(results[0].outcome, Outcome::Unchanged);
        assert!(
            std::time::Instant::now() < deadline,
            "the record was never re-signed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn repeated_ids_land_in_line_order() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(&dir, Duration::from_secs(3600));
    let importer = Importer::new(reg.clone(), ImportLimits::default());
    let mut docs = Vec::new();
    for i in 0..30 {
        let mut d = synthetic_agent(i % 3);
        d["description"] = json!(format!("version {i}"));
        docs.push(d);
    }
    let (results, summary) = import(&importer, &lines(&docs)).await;
    assert_eq!((summary.created, summary.updated), (3, 27));
    assert!(results.windows(2).all(|w| w[0].line < w[1].line));
    for (id, last) in [("demo-00000", 27), ("demo-00001", 28), ("demo-00002", 29)] {
        let doc: Value = serde_json::from_str(&reg.document(id).await.unwrap()).unwrap();
        assert_eq!(doc["description"], format!("version {last}"));
    }
}

#[tokio::test]
async fn limits_refuse_long_lines_and_stop_at_the_line_count() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(&dir, Duration::from_secs(3600));
    let limits = ImportLimits {
        max_line_bytes: 2000,
        max_lines: 3,
    };
    let importer = Importer::new(reg.clone(), limits);
    let mut long = synthetic_agent(1);
    long["description"] = json!("x".repeat(3000));
    let docs = [
        synthetic_agent(0),
        long,
        synthetic_agent(2),
        synthetic_agent(3),
    ];
    let (results, summary) = import(&importer, &lines(&docs)).await;
    assert_eq!(results.len(), 3);
    assert_eq!(results[1].outcome, Outcome::Refused);
    assert!(results[1].problems[0].message.contains("at most 2000"));
    assert_eq!(summary.lines, 3);
    assert_eq!(
        summary.stopped,
        Some(Stopped::TooManyLines { max_lines: 3 })
    );
    assert_eq!(reg.store().len(), 2, "lines before the limit went in");
}

#[tokio::test]
async fn ids_held_from_elsewhere_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(&dir, Duration::from_secs(3600));
    let doc = synthetic_agent(1);
    let prepared = reg.prepare("demo-00001", &doc).unwrap();
    reg.issuer
        .descriptor(crate::issuer::DescriptorIssue {
            descriptor: prepared.descriptor,
            document: prepared.document,
            evidence: Evidence::default(),
            origin: Origin::Remote,
            expect: Expect::Any,
            durability: Durability::Flushed,
        })
        .await
        .unwrap();
    let importer = Importer::new(reg, ImportLimits::default());
    let (results, _) = import(&importer, &lines(&[doc])).await;
    assert_eq!(results[0].outcome, Outcome::Refused);
    assert_eq!(results[0].problems[0].field, "/id");
}

#[tokio::test]
async fn a_closed_result_channel_stops_the_import() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(&dir, Duration::from_secs(3600));
    let importer = Importer::new(reg, ImportLimits::default());
    let (tx, rx) = mpsc::channel(1);
    drop(rx);
    let input = lines(&[synthetic_agent(1)]);
    let summary = importer.run(input.as_bytes(), tx).await;
    assert_eq!(summary.stopped, Some(Stopped::Cancelled));
}

#[tokio::test]
async fn a_failing_input_stops_the_import_keeping_what_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(&dir, Duration::from_secs(3600));
    let importer = Importer::new(reg.clone(), ImportLimits::default());
    let chunks = vec![
        Ok(std::io::Cursor::new(
            lines(&[synthetic_agent(1)]).into_bytes(),
        )),
        Err(std::io::Error::other("connection reset")),
    ];
    let input = tokio_util::io::StreamReader::new(futures_util::stream::iter(chunks));
    let (tx, mut rx) = mpsc::channel(16);
    let summary = importer.run(input, tx).await;
    assert_eq!(rx.recv().await.unwrap().outcome, Outcome::Created);
    assert_eq!(summary.created, 1);
    match summary.stopped {
        Some(Stopped::Read { message }) => {
            assert!(
                message.contains("line 2") && message.contains("connection reset"),
                "{message}"
            )
        }
        other => panic!("expected a read stop, got {other:?}"),
    }
    assert!(reg.store().is_local("demo-00001").await.unwrap());
}

/// A valid server.json, `io.github.test/{name}`, with one remote.
fn server(name: &str, version: &str) -> Value {
    json!({
        "name": format!("io.github.test/{name}"),
        "description": format!("Server {name}."),
        "version": version,
        "remotes": [{"type": "streamable-http", "url": format!("https://{name}.example.com/mcp")}]
    })
}

/// A list API item of `server` with `status`.
fn item(server: Value, status: &str, latest: bool) -> Value {
    json!({"server": server, "_meta": {crate::formats::mcp::OFFICIAL_META: {
        "status": status, "publishedAt": "2025-01-01T10:30:00Z", "isLatest": latest}}})
}

fn mcp_importer(reg: &Registry) -> Importer {
    Importer::new(reg.clone(), ImportLimits::default()).with_format(ImportFormat::McpRegistry)
}

async fn held_descriptor(reg: &Registry, id: &str) -> Option<crate::descriptor::Descriptor> {
    match reg.store().get(id).await.unwrap()?.body {
        RecordBody::Descriptor(d) => Some(d.descriptor),
        RecordBody::Tombstone(_) => None,
    }
}

#[tokio::test]
async fn mcp_inputs_of_every_shape_import_alike() {
    let (a, b) = (server("a", "1.0.0"), server("b", "2.0.0"));
    let items = json!([
        item(a.clone(), "active", true),
        item(b.clone(), "active", true)
    ]);
    let response = json!({"servers": items, "metadata": {"count": 2}});
    let seed = json!([a, b]);
    let shapes = [
        (
            "a list response, pretty",
            serde_json::to_string_pretty(&response).unwrap(),
        ),
        ("a list response on one line", format!("\n{response}\n\n")),
        (
            "an array of items, pretty",
            serde_json::to_string_pretty(&items).unwrap(),
        ),
        (
            "the seed file",
            serde_json::to_string_pretty(&seed).unwrap(),
        ),
        ("NDJSON of items", lines(items.as_array().unwrap())),
        ("NDJSON of server.json", lines(seed.as_array().unwrap())),
    ];
    for (shape, input) in shapes {
        let dir = tempfile::tempdir().unwrap();
        let reg = registry(&dir, Duration::from_secs(3600));
        let (results, summary) = import(&mcp_importer(&reg), &input).await;
        assert_eq!(summary.stopped, None, "{shape}");
        assert_eq!(summary.created, 2, "{shape}: {results:?}");
        let ids: Vec<&str> = results.iter().filter_map(|r| r.id.as_deref()).collect();
        assert_eq!(
            ids,
            ["mcp:io.github.test/a", "mcp:io.github.test/b"],
            "{shape}"
        );
        let d = held_descriptor(&reg, "mcp:io.github.test/b").await.unwrap();
        assert_eq!(d.format, crate::descriptor::DocumentFormat::McpRegistry);
        assert_eq!(d.endpoint.as_deref(), Some("https://b.example.com/mcp"));
        // The document is the server.json (with what the registry said
        // of it inside, which serving it takes out again).
        let doc = reg.document("mcp:io.github.test/b").await.unwrap();
        let official = crate::formats::mcp::Official {
            status: crate::formats::mcp::Status::Active,
            updated_at: 0,
            deleted_at: None,
        };
        let served = crate::formats::mcp::served_item(&doc, &official).unwrap();
        assert_eq!(served["server"], seed[1], "{shape}");
    }
    // One server.json, as a publisher keeps it.
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(&dir, Duration::from_secs(3600));
    let input = serde_json::to_string_pretty(&server("one", "1.0.0")).unwrap();
    let (results, _) = import(&mcp_importer(&reg), &input).await;
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].outcome, Outcome::Created);
}

#[tokio::test]
async fn mcp_status_is_issued_deleted_or_skipped_and_reruns_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(&dir, Duration::from_secs(3600));
    let importer = mcp_importer(&reg);
    let mut bad = server("bad", "1.0.0");
    bad["description"] = json!("d".repeat(101));
    let list = |a: &str, d: &str| {
        json!({"servers": [
            item(server("live", "1.0.0"), a, true),
            item(server("old", "1.0.0"), d, true),
            item(server("gone", "1.0.0"), "deleted", true),
            item(bad.clone(), "active", true),
        ]})
        .to_string()
    };
    let outcomes = |results: &[LineResult]| -> Vec<Outcome> {
        results.iter().map(|r| r.outcome).collect::<Vec<_>>()
    };
    let (results, summary) = import(&importer, &list("active", "deprecated")).await;
    use Outcome::*;
    assert_eq!(outcomes(&results), [Created, Created, Skipped, Refused]);
    assert_eq!(results[3].id.as_deref(), Some("mcp:io.github.test/bad"));
    assert_eq!(results[3].reason, Some(Reason::McpServerInvalid));
    assert_eq!(results[3].problems[0].field, "/server/description");
    assert_eq!(
        summary.refused_reasons.get(&Reason::McpServerInvalid),
        Some(&1)
    );
    let json = serde_json::to_value(&summary).unwrap();
    assert_eq!(json["refused_reasons"], json!({"mcp_server_invalid": 1}));
    assert_eq!(
        (json["skipped"].clone(), json.get("deleted")),
        (json!(1), None)
    );
    let status = |id: &'static str| {
        let reg = reg.clone();
        async move { held_descriptor(&reg, id).await.and_then(|d| d.status) }
    };
    assert_eq!(
        status("mcp:io.github.test/live").await.as_deref(),
        Some("active")
    );
    assert_eq!(
        status("mcp:io.github.test/old").await.as_deref(),
        Some("deprecated")
    );
    assert!(reg
        .store()
        .get("mcp:io.github.test/gone")
        .await
        .unwrap()
        .is_none());
    let seq = |id: &'static str| {
        let store = reg.store().clone();
        async move { store.get(id).await.unwrap().unwrap().body.seq() }
    };
    let before = seq("mcp:io.github.test/live").await;

    let (results, _) = import(&importer, &list("active", "deprecated")).await;
    assert_eq!(outcomes(&results), [Unchanged, Unchanged, Skipped, Refused]);
    assert_eq!(seq("mcp:io.github.test/live").await, before);

    // Only the status changed (the document is the same): re-issued.
    let (results, _) = import(&importer, &list("deprecated", "deprecated")).await;
    assert_eq!(outcomes(&results), [Updated, Unchanged, Skipped, Refused]);
    assert_eq!(
        status("mcp:io.github.test/live").await.as_deref(),
        Some("deprecated")
    );

    // Deleted by the registry: a tombstone here.
    let (results, summary) = import(&importer, &list("deleted", "deprecated")).await;
    assert_eq!(outcomes(&results), [Deleted, Unchanged, Skipped, Refused]);
    assert_eq!(summary.deleted, 1);
    let held = reg
        .store()
        .get("mcp:io.github.test/live")
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(held.body, RecordBody::Tombstone(_)));
    let (results, _) = import(&importer, &list("deleted", "deprecated")).await;
    assert_eq!(outcomes(&results)[0], Skipped, "deleted once only");
}

#[tokio::test]
async fn mcp_documents_keep_the_latest_version_of_a_name() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(&dir, Duration::from_secs(3600));
    let importer = mcp_importer(&reg);
    // The list API: every version, the registry says which is latest.
    let listed = json!({"servers": [
        item(server("x", "2.0.0"), "active", true),
        item(server("x", "1.0.0"), "deprecated", false),
    ]})
    .to_string();
    let (results, _) = import(&importer, &listed).await;
    let outcomes: Vec<Outcome> = results.iter().map(|r| r.outcome).collect();
    assert_eq!(outcomes, [Outcome::Created, Outcome::Skipped]);
    assert!(results[1].problems[0].message.contains("not the latest"));
    let (again, _) = import(&importer, &listed).await;
    assert_eq!(again[0].outcome, Outcome::Unchanged);
    // The seed file says nothing: the later entry of a name is kept.
    let seed = json!([server("y", "1.0.0"), server("y", "1.1.0")]).to_string();
    for run in 0..2 {
        let (results, _) = import(&importer, &seed).await;
        assert_eq!(results[0].outcome, Outcome::Skipped, "run {run}");
        assert!(results[0].problems[0].message.contains("item 2"));
        let expected = if run == 0 {
            Outcome::Created
        } else {
            Outcome::Unchanged
        };
        assert_eq!(results[1].outcome, expected, "run {run}");
    }
    let d = held_descriptor(&reg, "mcp:io.github.test/y").await.unwrap();
    assert_eq!(d.version.as_deref(), Some("1.1.0"));
}

#[tokio::test]
async fn mcp_input_that_is_no_server_list_stops_or_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(&dir, Duration::from_secs(3600));
    let importer = mcp_importer(&reg);
    for (input, says) in [
        ("{\n  \"servers\": {}\n}\n", "/servers is not an array"),
        (
            "[\n  {\"name\": \"io.github.test/x\",\n",
            "neither one JSON document",
        ),
        ("[]\n[]\n", "more input follows the server list on line 1"),
    ] {
        let (results, summary) = import(&importer, input).await;
        assert!(results.is_empty(), "{input}");
        match summary.stopped {
            Some(Stopped::Invalid { message }) => {
                assert!(message.contains(says), "{message} should say {says:?}")
            }
            other => panic!("{input}: expected an invalid stop, got {other:?}"),
        }
    }
    // NDJSON: a bad line is refused, the others go in.
    let input = format!(
        "{}\n{{not json\n[{}]\n{}\n",
        server("a", "1"),
        server("b", "1"),
        json!({"server": {"name": "io.github.test/c"}})
    );
    let (results, summary) = import(&importer, &input).await;
    let outcomes: Vec<(u64, Outcome)> = results.iter().map(|r| (r.line, r.outcome)).collect();
    use Outcome::*;
    assert_eq!(
        outcomes,
        [(1, Created), (2, Refused), (3, Refused), (4, Refused)]
    );
    assert!(results[2].problems[0]
        .message
        .contains("a server list on one line"));
    assert_eq!(results[3].problems[0].field, "/server/description");
    assert_eq!(
        summary.refused_reasons.get(&Reason::McpServerInvalid),
        Some(&2)
    );
    // A first line past the document limit.
    let huge =
        tokio::io::AsyncReadExt::take(tokio::io::repeat(b' '), MAX_DOCUMENT_BYTES as u64 + 1);
    let (tx, _rx) = mpsc::channel(16);
    let summary = importer
        .run(tokio::io::BufReader::with_capacity(1 << 20, huge), tx)
        .await;
    match summary.stopped {
        Some(Stopped::Invalid { message }) => assert!(message.contains("NDJSON"), "{message}"),
        other => panic!("expected an invalid stop, got {other:?}"),
    }
}
