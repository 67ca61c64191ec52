use std::sync::Arc;
use std::time::Duration;

use ed25519_dalek::SigningKey;
use serde_json::json;

use super::*;
use crate::store::Store;

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
        }
    );
    assert!(reg.store().is_local("demo-00001").await.unwrap());
    assert!(reg.store().is_local(&assigned).await.unwrap());
    assert_eq!(reg.store().len(), 2);
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
        .descriptor(
            prepared.descriptor,
            prepared.document,
            Evidence::default(),
            Origin::Remote,
            Expect::Any,
            Durability::Flushed,
        )
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
