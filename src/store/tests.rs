//! Tests of the [`Store`]: filters and pages over the indexes, seq order
//! and tombstones, the [`Expect`] guards on other registries' records,
//! reopening, and refusing another schema version.

use super::*;
use crate::descriptor::DocumentFormat;
use crate::record::{DescriptorRecord, TombstoneReason, TombstoneRecord};
use crate::verify::{Evidence, Reason};
use ed25519_dalek::SigningKey;

fn key() -> SigningKey {
    SigningKey::from_bytes(&[9; 32])
}

fn descriptor(id: &str, caps: &[&str], tags: &[&str], langs: &[&str]) -> Descriptor {
    Descriptor {
        id: id.into(),
        name: format!("agent {id}"),
        description: String::new(),
        version: None,
        publisher: None,
        endpoint: None,
        capabilities: caps.iter().map(|s| s.to_string()).collect(),
        tags: tags.iter().map(|s| s.to_string()).collect(),
        languages: langs.iter().map(|s| s.to_string()).collect(),
        status: None,
        auth: None,
        format: DocumentFormat::Aidip,
    }
}

fn put(
    store: &Store,
    d: Descriptor,
    seq: u64,
    origin: Origin,
    expect: Expect,
) -> Result<PutOutcome, StoreError> {
    let body = DescriptorRecord::new(d, "{}".into(), seq, 1, 3600, Evidence::default());
    let rec = SignedRecord::sign_descriptor(&body, &key()).unwrap();
    store.blocking().put(
        &rec,
        &RecordBody::Descriptor(Box::new(body)),
        origin,
        expect,
    )
}

fn tombstone(store: &Store, id: &str, seq: u64, expect: Expect) -> Result<PutOutcome, StoreError> {
    let body = TombstoneRecord {
        agent_id: id.into(),
        seq,
        issued_at: 1,
        reason: TombstoneReason::Deleted,
    };
    let rec = SignedRecord::sign_tombstone(&body, &key()).unwrap();
    store
        .blocking()
        .put(&rec, &RecordBody::Tombstone(body), Origin::Local, expect)
}

fn ids(found: &[StoredAgent]) -> Vec<&str> {
    found.iter().map(|a| a.body.agent_id()).collect()
}

/// Opens the store in `dir`.
fn open(dir: &Path) -> Store {
    Store::open(dir, 16 << 20).expect("the store opens")
}

/// Closes `store`, so that its directory can be opened again at once.
fn close(store: Store) {
    store.close_blocking().expect("the store closes");
}

fn filter(caps: &[&str], tags: &[&str], langs: &[&str]) -> Filter {
    Filter::new(
        caps.iter().copied(),
        tags.iter().copied(),
        langs.iter().copied(),
    )
    .unwrap()
}

#[test]
fn filters_are_and_across_and_within_fields() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    put(
        &s,
        descriptor("a", &["translation"], &["nlp"], &["en", "zh-Hant"]),
        1,
        Origin::Local,
        Expect::Any,
    )
    .unwrap();
    put(
        &s,
        descriptor("b", &["translation", "summarization"], &["nlp"], &["en"]),
        1,
        Origin::Local,
        Expect::Any,
    )
    .unwrap();
    put(
        &s,
        descriptor("c", &["summarization"], &["legal"], &["fr"]),
        1,
        Origin::Local,
        Expect::Any,
    )
    .unwrap();

    let all = |f: Filter| {
        ids(&s.blocking().search(&f, None, 100).unwrap())
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert_eq!(all(filter(&["Translation"], &[], &[])), ["a", "b"]);
    assert_eq!(
        all(filter(&["translation", "summarization"], &[], &[])),
        ["b"]
    );
    assert_eq!(
        all(filter(&["translation"], &["nlp"], &["zh"])),
        ["a"],
        "zh matches zh-Hant"
    );
    assert_eq!(all(filter(&[], &[], &["zh-hant"])), ["a"]);
    assert_eq!(all(filter(&[], &[], &["zh-Hans"])), Vec::<String>::new());
    assert_eq!(all(filter(&["weather"], &[], &[])), Vec::<String>::new());
    assert_eq!(all(Filter::default()), ["a", "b", "c"]);
    assert_eq!(s.len(), 3);
}

#[test]
fn pages_continue_after_the_cursor_id() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    for i in 0..25 {
        put(
            &s,
            descriptor(&format!("id-{i:02}"), &["x"], &[], &[]),
            1,
            Origin::Local,
            Expect::Any,
        )
        .unwrap();
    }
    for f in [Filter::default(), filter(&["x"], &[], &[])] {
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = s.blocking().search(&f, after.as_deref(), 10).unwrap();
            if page.is_empty() {
                break;
            }
            after = Some(page.last().unwrap().body.agent_id().to_owned());
            seen.extend(ids(&page).into_iter().map(String::from));
        }
        let expected: Vec<String> = (0..25).map(|i| format!("id-{i:02}")).collect();
        assert_eq!(seen, expected);
    }
}

#[test]
fn stale_seqs_are_refused_and_updates_reindex() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    assert_eq!(
        put(
            &s,
            descriptor("a", &["old"], &[], &[]),
            5,
            Origin::Remote,
            Expect::Any
        )
        .unwrap(),
        PutOutcome::Created
    );
    let stale = put(
        &s,
        descriptor("a", &["new"], &[], &[]),
        5,
        Origin::Remote,
        Expect::Any,
    )
    .unwrap_err();
    assert!(
        matches!(
            stale,
            StoreError::Record(RecordError::StaleSeq {
                seq: 5,
                held: 5,
                ..
            })
        ),
        "{stale}"
    );
    assert_eq!(
        put(
            &s,
            descriptor("a", &["new"], &[], &[]),
            6,
            Origin::Remote,
            Expect::Any
        )
        .unwrap(),
        PutOutcome::Updated
    );
    assert!(s
        .blocking()
        .search(&filter(&["old"], &[], &[]), None, 10)
        .unwrap()
        .is_empty());
    assert_eq!(
        s.blocking()
            .search(&filter(&["new"], &[], &[]), None, 10)
            .unwrap()
            .len(),
        1
    );
    assert_eq!(s.term_count('c', "old"), 0);
    assert_eq!(s.term_count('c', "new"), 1);
}

#[test]
fn tombstones_remove_from_search_and_beat_lower_seqs() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    put(
        &s,
        descriptor("a", &["x"], &[], &[]),
        1,
        Origin::Local,
        Expect::Any,
    )
    .unwrap();
    tombstone(&s, "a", 2, Expect::LocalLive).unwrap();
    assert!(s
        .blocking()
        .search(&filter(&["x"], &[], &[]), None, 10)
        .unwrap()
        .is_empty());
    assert!(s
        .blocking()
        .search(&Filter::default(), None, 10)
        .unwrap()
        .is_empty());
    assert_eq!(s.len(), 0);
    assert!(!s.blocking().is_local("a").unwrap());
    assert!(matches!(
        s.blocking().get("a").unwrap().unwrap().body,
        RecordBody::Tombstone(_)
    ));
    let late = put(
        &s,
        descriptor("a", &["x"], &[], &[]),
        2,
        Origin::Remote,
        Expect::Any,
    )
    .unwrap_err();
    assert!(matches!(
        late,
        StoreError::Record(RecordError::StaleSeq { .. })
    ));
    assert!(matches!(
        tombstone(&s, "a", 3, Expect::LocalLive),
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn a_change_feed_sees_every_write_by_ordinal_and_matching_is_the_walks_selection() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let b = s.blocking();
    put(
        &s,
        descriptor("early", &["x"], &[], &[]),
        1,
        Origin::Local,
        Expect::Any,
    )
    .unwrap();
    let feed = b.change_feed();
    assert!(
        feed.take(std::time::Duration::ZERO).is_empty(),
        "made after"
    );
    put(
        &s,
        descriptor("a", &["x"], &[], &["fr"]),
        1,
        Origin::Local,
        Expect::Any,
    )
    .unwrap();
    put(
        &s,
        descriptor("b", &["y"], &[], &[]),
        1,
        Origin::Local,
        Expect::Any,
    )
    .unwrap();
    put(
        &s,
        descriptor("a", &["x"], &[], &["en"]),
        2,
        Origin::Local,
        Expect::Any,
    )
    .unwrap();
    let ord = |id: &str| {
        (0..b.ordinals_seen())
            .find(|o| {
                b.compact_by_ordinal(*o)
                    .unwrap()
                    .is_some_and(|c| c.id == id)
            })
            .unwrap()
    };
    let (early, a, bee) = (ord("early"), ord("a"), ord("b"));
    assert_eq!(b.ordinals_seen(), 3);
    let taken = feed.take(std::time::Duration::ZERO);
    assert_eq!(
        taken.iter().collect::<Vec<_>>(),
        [a, bee],
        "one mark for a's two writes"
    );
    // The walk's selection: filters, languages, suspensions.
    let sel = |f: &Filter| b.matching(f, None).iter().collect::<Vec<_>>();
    assert_eq!(sel(&filter(&["x"], &[], &[])), [early, a]);
    assert_eq!(sel(&filter(&["x"], &[], &["en"])), [a]);
    assert_eq!(sel(&Filter::default()), [early, a, bee]);
    b.suspend("early", "spam").unwrap();
    assert_eq!(sel(&filter(&["x"], &[], &[])), [a]);
    assert!(
        feed.take(std::time::Duration::ZERO).is_empty(),
        "a suspension is no write"
    );
    // A tombstone is marked, and its ordinal has no compact record.
    tombstone(&s, "b", 2, Expect::LocalLive).unwrap();
    assert_eq!(
        feed.take(std::time::Duration::ZERO)
            .iter()
            .collect::<Vec<_>>(),
        [bee]
    );
    assert!(b.compact_by_ordinal(bee).unwrap().is_none());
    assert_eq!(sel(&Filter::default()), [a]);
    assert!(b.compact_by_ordinal(99).unwrap().is_none());
}

#[test]
fn local_expectations_protect_other_registries_records() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    put(
        &s,
        descriptor("remote", &["x"], &[], &[]),
        1,
        Origin::Remote,
        Expect::Any,
    )
    .unwrap();
    assert!(matches!(
        put(
            &s,
            descriptor("remote", &["x"], &[], &[]),
            2,
            Origin::Local,
            Expect::LocalOrAbsent
        ),
        Err(StoreError::NotLocal { .. })
    ));
    assert!(matches!(
        put(
            &s,
            descriptor("remote", &["x"], &[], &[]),
            2,
            Origin::Local,
            Expect::LocalLive
        ),
        Err(StoreError::NotLocal { .. })
    ));
    assert!(matches!(
        put(
            &s,
            descriptor("nobody", &["x"], &[], &[]),
            2,
            Origin::Local,
            Expect::LocalLive
        ),
        Err(StoreError::NotFound { .. })
    ));
    put(
        &s,
        descriptor("mine", &["x"], &[], &[]),
        1,
        Origin::Local,
        Expect::LocalOrAbsent,
    )
    .unwrap();
    assert!(s.blocking().is_local("mine").unwrap());
    assert!(!s.blocking().is_local("remote").unwrap());
}

/// A store's posting lists, cloned: to compare what commits built with
/// what an open loads.
pub(super) fn postings_of(s: &Store) -> Postings {
    s.sync
        .inner
        .postings
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// Writes agents whose terms change on the way: updates that swap tags,
/// languages (mixed case, with and without a region) and trust level, a
/// tombstone, and an agent deleted and registered again.
pub(super) fn write_changing_terms(s: &Store) {
    for i in 0..50 {
        put(
            s,
            descriptor(&format!("a{i}"), &["cap"], &["t"], &["en"]),
            1,
            Origin::Local,
            Expect::Any,
        )
        .unwrap();
    }
    for i in (0..50).step_by(3) {
        put(
            s,
            descriptor(
                &format!("a{i}"),
                &["cap", "ocr"],
                &["u"],
                &["EN-us", "zh-Hans"],
            ),
            2,
            Origin::Local,
            Expect::Any,
        )
        .unwrap();
    }
    let evidence = Evidence {
        dnssec: true,
        ..Evidence::default()
    };
    let body = DescriptorRecord::new(
        descriptor("a4", &["cap"], &[], &["fr"]),
        "{}".into(),
        3,
        1,
        3600,
        evidence,
    );
    let rec = SignedRecord::sign_descriptor(&body, &key()).unwrap();
    s.blocking()
        .put(
            &rec,
            &RecordBody::Descriptor(Box::new(body)),
            Origin::Local,
            Expect::Any,
        )
        .unwrap();
    tombstone(s, "a0", 3, Expect::LocalLive).unwrap();
    tombstone(s, "a1", 2, Expect::LocalLive).unwrap();
    put(
        s,
        descriptor("a1", &["ocr"], &["t"], &["de"]),
        3,
        Origin::Local,
        Expect::Any,
    )
    .unwrap();
}

#[test]
fn reopening_restores_records_indexes_and_counts() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let s = open(dir.path());
        write_changing_terms(&s);
        let postings = postings_of(&s);
        close(s);
        postings
    };
    let s = open(dir.path());
    // The lists loaded from the compact records are the ones the commits
    // built, term for term.
    assert_eq!(postings_of(&s), before);
    assert_eq!(s.len(), 49);
    assert_eq!(s.term_count('c', "cap"), 48);
    assert_eq!(s.term_count('c', "ocr"), 17);
    assert_eq!(s.term_count('l', "en-us"), 16);
    assert_eq!(s.term_count('l', "en"), 47);
    assert_eq!(s.term_count('l', "fr"), 1);
    assert_eq!(
        s.blocking()
            .search(&filter(&["cap"], &["t"], &["en"]), None, 100)
            .unwrap()
            .len(),
        31
    );
    assert!(s.blocking().is_local("a2").unwrap());
}

#[test]
fn a_store_of_another_schema_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    {
        // No periodic flusher: its thread would hold the database (and its
        // file lock) for a moment after the drop.
        let db = sled::Config::new()
            .path(dir.path())
            .flush_every_ms(None)
            .open()
            .unwrap();
        db.open_tree("meta")
            .unwrap()
            .insert("schema_version", &99u32.to_be_bytes())
            .unwrap();
        db.flush().unwrap();
    }
    // sled's threads let go of the directory a moment after the drop.
    wait_unlocked(dir.path(), CLOSE_WAIT).unwrap();
    let err = Store::open(dir.path(), 1 << 20).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::SchemaVersion {
                found: 99,
                expected: SCHEMA_VERSION
            }
        ),
        "{err}"
    );
}

/// A closed store's directory opens again at once, with every write;
/// a store with another handle alive is flushed but not closed.
#[test]
fn a_closed_store_opens_again_at_once_and_a_shared_one_stays_open() {
    let dir = tempfile::tempdir().unwrap();
    for seq in 1..=5 {
        let s = open(dir.path());
        put(
            &s,
            descriptor("a", &["ocr"], &[], &[]),
            seq,
            Origin::Local,
            Expect::Any,
        )
        .unwrap();
        close(s);
    }
    let s = open(dir.path());
    assert_eq!(s.blocking().get("a").unwrap().unwrap().body.seq(), 5);
    let other = s.clone();
    let err = s.close_blocking().unwrap_err();
    assert!(matches!(err, StoreError::Close { .. }), "{err}");
    assert_eq!(other.blocking().get("a").unwrap().unwrap().body.seq(), 5);
    close(other);
}

fn signed(d: Descriptor, seq: u64) -> (SignedRecord, RecordBody) {
    let body = DescriptorRecord::new(d, "{}".into(), seq, 1, 3600, Evidence::default());
    let rec = SignedRecord::sign_descriptor(&body, &key()).unwrap();
    (rec, RecordBody::Descriptor(Box::new(body)))
}

#[tokio::test]
async fn the_async_face_writes_reads_and_searches() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let (rec, body) = signed(descriptor("a", &["x"], &[], &[]), 1);
    assert_eq!(
        s.put(&rec, &body, Origin::Local, Expect::LocalOrAbsent)
            .await
            .unwrap(),
        PutOutcome::Created
    );
    assert_eq!(s.get("a").await.unwrap().unwrap().body.seq(), 1);
    assert!(s.get("b").await.unwrap().is_none());
    assert!(s.is_local("a").await.unwrap());
    let found = s.search(&filter(&["x"], &[], &[]), None, 10).await.unwrap();
    assert_eq!(ids(&found), ["a"]);
    s.put_report(
        "a",
        b"{}".to_vec(),
        vec![Reason::Timeout, Reason::TxtMissing],
    )
    .await
    .unwrap();
    assert_eq!(s.report("a").await.unwrap().as_deref(), Some(&b"{}"[..]));
    assert_eq!(
        s.reasons("a").await.unwrap(),
        [Reason::Timeout, Reason::TxtMissing]
    );
    assert!(s.reasons("b").await.unwrap().is_empty());
    s.flush().await.unwrap();
}

#[tokio::test]
async fn a_panic_in_a_blocking_task_is_a_store_error() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let err = s
        .run_blocking(|_| -> u8 { panic!("scan invariant broken") })
        .await
        .unwrap_err();
    match err {
        StoreError::TaskFailed { operation, reason } => {
            assert_eq!(operation, "run_blocking");
            assert!(reason.contains("scan invariant broken"), "{reason}");
        }
        other => panic!("expected TaskFailed, got {other}"),
    }
    // The store still works afterwards.
    assert!(s.get("a").await.unwrap().is_none());
}

/// A write that waits for a flush (the gate held exclusively for a whole
/// `db.flush()`) waits on a blocking thread: on a one-thread runtime,
/// other tasks keep running meanwhile. Were the write done on the runtime
/// thread, it would block the only worker until the flush ends.
#[tokio::test(flavor = "current_thread")]
async fn a_write_waiting_for_a_flush_does_not_block_the_runtime() {
    const DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());

    // A flush that holds the gate until released (or for 10 s at most, so
    // that a blocked runtime fails the test instead of hanging it).
    let (held_tx, held_rx) = tokio::sync::oneshot::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    *s.sync.inner.flush_hook.lock().unwrap() = Some(Box::new(move || {
        let _ = held_tx.send(());
        let _ = release_rx.recv_timeout(DEADLINE);
    }));
    let flush = tokio::spawn({
        let s = s.clone();
        async move { s.flush().await }
    });
    tokio::time::timeout(DEADLINE, held_rx)
        .await
        .expect("the flush to take the gate within 10 s")
        .unwrap();

    // A write now waits for the gate.
    let started = std::time::Instant::now();
    let (put_started_tx, put_started_rx) = tokio::sync::oneshot::channel::<()>();
    let put = tokio::spawn({
        let s = s.clone();
        async move {
            let _ = put_started_tx.send(());
            let (rec, body) = signed(descriptor("a", &["x"], &[], &[]), 1);
            s.put(&rec, &body, Origin::Remote, Expect::Any).await
        }
    });
    put_started_rx.await.unwrap();
    // Another task on this runtime still makes progress.
    let (pong_tx, pong_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = pong_tx.send(());
    });
    pong_rx.await.unwrap();
    let waited = started.elapsed();
    assert!(
        !put.is_finished(),
        "the write finished while the flush held the gate: it blocked the runtime for {waited:?}"
    );
    assert!(
        waited < std::time::Duration::from_secs(5),
        "the runtime was blocked for {waited:?} while a write waited for the flush"
    );

    release_tx.send(()).unwrap();
    tokio::time::timeout(DEADLINE, flush)
        .await
        .expect("the flush to end within 10 s once released")
        .unwrap()
        .unwrap();
    let outcome = tokio::time::timeout(DEADLINE, put)
        .await
        .expect("the write to go through within 10 s once the flush ended")
        .unwrap()
        .unwrap();
    assert_eq!(outcome, PutOutcome::Created);
}

/// A data directory written before reason codes were kept on their own:
/// the first open fills them from the reports' JSON.
#[test]
fn reasons_of_older_data_directories_are_filled_from_their_reports() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = sled::Config::new().path(dir.path()).open().unwrap();
        db.open_tree("meta")
            .unwrap()
            .insert("schema_version", &super::SCHEMA_VERSION.to_be_bytes())
            .unwrap();
        let reports = db.open_tree("reports").unwrap();
        reports
            .insert(
                "agent:a.test",
                &br#"{"reasons":["challenge_no_answer","a_code_from_a_newer_version"],"steps":[]}"#
                    [..],
            )
            .unwrap();
        reports
            .insert("agent:b.test", &br#"{"reasons":[]}"#[..])
            .unwrap();
        db.flush().unwrap();
    }
    wait_unlocked(dir.path(), CLOSE_WAIT).unwrap();
    let s = open(dir.path());
    let b = s.blocking();
    assert_eq!(
        b.reasons("agent:a.test").unwrap(),
        [Reason::ChallengeNoAnswer]
    );
    assert!(b.reasons("agent:b.test").unwrap().is_empty());
    assert!(b.report("agent:a.test").unwrap().is_some());
}

// The text index.

/// Stores a live descriptor (expiring in an hour) with this name,
/// description and capabilities.
fn put_text(store: &Store, id: &str, seq: u64, name: &str, description: &str, caps: &[&str]) {
    let mut d = descriptor(id, caps, &[], &["en"]);
    d.name = name.into();
    d.description = description.into();
    let now = crate::record::unix_now();
    let body = DescriptorRecord::new(d, "{}".into(), seq, now, 3600, Evidence::default());
    let rec = SignedRecord::sign_descriptor(&body, &key()).unwrap();
    store
        .blocking()
        .put(
            &rec,
            &RecordBody::Descriptor(Box::new(body)),
            Origin::Remote,
            Expect::Any,
        )
        .unwrap();
}

fn ranked(store: &Store, text: &str, f: &Filter) -> Vec<(String, f64)> {
    ranked_top(store, text, f, 10)
}

/// The best `limit` of `text` inside `f`, with their scores.
fn ranked_top(store: &Store, text: &str, f: &Filter, limit: usize) -> Vec<(String, f64)> {
    store
        .blocking()
        .text_search(&TextQuery {
            text,
            filter: f,
            limit,
            now: crate::record::unix_now(),
            min_trust: None,
            capabilities: &[],
            subjects: &[],
        })
        .unwrap()
        .expect("the query has words")
}

fn ranked_ids(store: &Store, text: &str) -> Vec<String> {
    ranked(store, text, &Filter::default())
        .into_iter()
        .map(|(id, _)| id)
        .collect()
}

#[test]
fn text_search_ranks_with_bm25_and_filters_narrow() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    put_text(
        &store,
        "agent:legal.test",
        1,
        "Legal summariser",
        "Summarizes long legal contracts",
        &["summarization"],
    );
    put_text(
        &store,
        "agent:mail.test",
        1,
        "Inbox helper",
        "Summarizes emails and drafts replies",
        &["summarization", "email"],
    );
    put_text(
        &store,
        "agent:weather.test",
        1,
        "Weather",
        "Forecasts for any city",
        &["weather"],
    );
    put_text(
        &store,
        "agent:zh.test",
        1,
        "法律助手",
        "总结法律文件",
        &["summarization"],
    );
    store.blocking().flush().unwrap();

    // Stemming: "summarize emails" finds "Summarizes emails".
    let r = ranked(&store, "summarize emails", &Filter::default());
    assert_eq!(r[0].0, "agent:mail.test");
    assert!(r.iter().all(|(_, s)| (0.0..=1.0).contains(s)), "{r:?}");
    assert!(r[0].1 > r[1].1, "{r:?}");
    assert!(!r.iter().any(|(id, _)| id == "agent:weather.test"));
    // CJK text is searchable.
    assert_eq!(ranked_ids(&store, "法律文件"), ["agent:zh.test"]);
    // A filter narrows what the text ranks.
    let email = filter(&["email"], &[], &[]);
    assert_eq!(
        ranked(&store, "summarize", &email)
            .into_iter()
            .map(|(id, _)| id)
            .collect::<Vec<_>>(),
        ["agent:mail.test"]
    );
    // Nothing matches: an empty answer, not an error.
    assert!(ranked_ids(&store, "astronomy").is_empty());
    // Only stop words: nothing to rank with.
    let none = store
        .blocking()
        .text_search(&TextQuery {
            text: "the of and",
            filter: &Filter::default(),
            limit: 10,
            now: 0,
            min_trust: None,
            capabilities: &[],
            subjects: &[],
        })
        .unwrap();
    assert!(none.is_none());
}

#[test]
fn a_filtered_text_search_ranks_as_the_whole_ranking_narrowed_by_the_filter() {
    // 240 agents over four commits (four segments), some replaced (their
    // old documents deleted in earlier segments). Each way the filtered
    // ranking takes: "rare" on 3 agents (visited one by one), "sixth" on
    // a sixth (the postings walked, the kept ones scored), "common" on
    // half (block-max WAND, each hit checked).
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let words = ["invoice", "contract", "weather", "travel"];
    let caps_of = |i: usize| -> Vec<&'static str> {
        let mut caps = vec![if i.is_multiple_of(2) {
            "common"
        } else {
            "other"
        }];
        if i % 80 == 5 {
            caps.push("rare");
        }
        if i % 6 == 1 {
            caps.push("sixth");
        }
        caps
    };
    let put = |i: usize, seq: u64, text: &str| {
        put_text(
            &store,
            &format!("agent:{i:03}.test"),
            seq,
            "Agent",
            text,
            &caps_of(i),
        );
    };
    for chunk in 0..4 {
        for i in chunk * 60..(chunk + 1) * 60 {
            let text = format!(
                "Reads {} {} and {} files",
                words[i % 4],
                words[(i / 4) % 4],
                words[(i / 16) % 4]
            );
            put(i, 1, &text);
        }
        // Agents of the chunk before, replaced with other words.
        if chunk > 0 {
            for i in ((chunk - 1) * 60..chunk * 60).step_by(7) {
                let text = format!("Plans {} trips", words[(i + 1) % 4]);
                put(i, 2, &text);
            }
        }
        store.blocking().flush().unwrap();
    }
    for cap in ["rare", "sixth", "common"] {
        for text in ["invoice", "contract travel", "weather trips invoice"] {
            let kept = ranked(&store, text, &filter(&[cap], &[], &[]));
            let mut expected: Vec<(String, f64)> =
                ranked_top(&store, text, &Filter::default(), 1000)
                    .into_iter()
                    .filter(|(id, _)| {
                        let i: usize = id["agent:".len()..][..3].parse().unwrap();
                        caps_of(i).contains(&cap)
                    })
                    .collect();
            expected.truncate(10);
            assert!(!expected.is_empty(), "{cap} {text}");
            assert_eq!(kept.len(), expected.len(), "{cap} {text}: {kept:?}");
            for ((id, score), (want_id, want)) in kept.iter().zip(&expected) {
                assert!(
                    (score - want).abs() < 1e-6,
                    "{cap} {text}: {kept:?} {expected:?}"
                );
                // Equal scores may come in either order only at a tie.
                if id != want_id {
                    assert!(expected
                        .iter()
                        .any(|(e, s)| e == id && (s - score).abs() < 1e-6));
                }
            }
        }
    }
    // A filter that no ranked document meets answers nothing.
    assert!(ranked(&store, "invoice", &filter(&["absent"], &[], &[])).is_empty());
}

#[test]
fn a_filtered_search_after_writes_sees_them_though_its_filter_sets_were_read_before() {
    // The sets a filter keeps are kept per segment between searches
    // (page::KeepCache). Writes after a filtered search must still show in
    // the next one: an agent that left the filter (its old document
    // deleted in a segment whose set was kept), one that joined it (in a
    // new segment), one deleted outright.
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for i in 0..30 {
        let cap = if i % 3 == 0 { "kept" } else { "other" };
        put_text(
            &store,
            &format!("agent:{i:02}.test"),
            1,
            "Agent",
            "ledger files",
            &[cap],
        );
    }
    store.blocking().flush().unwrap();
    let kept = filter(&["kept"], &[], &[]);
    let ids = |store: &Store| -> Vec<String> {
        let mut ids: Vec<String> = ranked_top(store, "ledger", &kept, 100)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        ids.sort();
        ids
    };
    let before = ids(&store);
    assert_eq!(before.len(), 10, "{before:?}");
    assert!(before.contains(&"agent:03.test".to_owned()));

    put_text(
        &store,
        "agent:03.test",
        2,
        "Agent",
        "ledger files",
        &["other"],
    );
    put_text(
        &store,
        "agent:04.test",
        2,
        "Agent",
        "ledger files",
        &["kept"],
    );
    tombstone(&store, "agent:06.test", 2, Expect::Any).unwrap();
    store.blocking().flush().unwrap();

    let after = ids(&store);
    assert_eq!(after.len(), 9, "{after:?}");
    assert!(!after.contains(&"agent:03.test".to_owned()), "{after:?}");
    assert!(!after.contains(&"agent:06.test".to_owned()), "{after:?}");
    assert!(after.contains(&"agent:04.test".to_owned()), "{after:?}");
}

#[test]
fn a_tie_at_the_last_place_is_settled_the_same_whatever_the_segments() {
    // 40 agents alike in every ranked word, written into two stores in
    // opposite orders over four commits each (four segments), so the
    // indexes' own orders are each other's reverse.
    let ids: Vec<String> = (0..40).map(|i| format!("agent:{i:02}.test")).collect();
    let page = |reversed: bool| {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let mut order = ids.clone();
        if reversed {
            order.reverse();
        }
        for chunk in order.chunks(10) {
            for id in chunk {
                put_text(&store, id, 1, "Translator", "Translates documents", &[]);
            }
            store.blocking().flush().unwrap();
        }
        ranked(&store, "translates documents", &Filter::default())
    };
    let (forward, backward) = (page(false), page(true));
    assert_eq!(forward.len(), 10);
    assert!(forward.windows(2).all(|w| w[0].1 == w[1].1), "{forward:?}");
    assert_eq!(forward, backward);
    // The page is the tie's first ten by order, in that order.
    let mut by_order = ids.clone();
    by_order.sort_by_key(|id| text::tie_order(id));
    let page_ids: Vec<&String> = forward.iter().map(|(id, _)| id).collect();
    assert_eq!(page_ids, by_order.iter().take(10).collect::<Vec<_>>());
}

#[test]
fn expired_records_that_outrank_the_live_ones_do_not_shorten_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    // 40 expired records matching better (the word twice, short text)
    // than 12 live ones, in one segment and in a second.
    for i in 0..40 {
        let mut d = descriptor(&format!("agent:old{i:02}.test"), &[], &[], &["en"]);
        d.name = "Meetings".into();
        d.description = "meetings".into();
        put(&store, d, 1, Origin::Remote, Expect::Any).unwrap();
        if i == 19 {
            store.blocking().flush().unwrap();
        }
    }
    for i in 0..12 {
        let id = format!("agent:live{i:02}.test");
        put_text(
            &store,
            &id,
            1,
            "Notes",
            "Takes notes in long meetings and calls",
            &[],
        );
    }
    store.blocking().flush().unwrap();
    let page = ranked_ids(&store, "meetings");
    assert_eq!(page.len(), 10, "{page:?}");
    assert!(
        page.iter().all(|id| id.starts_with("agent:live")),
        "{page:?}"
    );
}

#[test]
fn a_word_no_record_has_ranks_as_the_indexed_words_an_edit_or_two_away() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    put_text(
        &store,
        "agent:scan.test",
        1,
        "Vulnerability scanner",
        "Scans hosts",
        &[],
    );
    put_text(
        &store,
        "agent:web.test",
        1,
        "Browser",
        "Headless browser control",
        &[],
    );
    put_text(
        &store,
        "agent:map.test",
        1,
        "Maps",
        "Directions and routes",
        &[],
    );
    store.blocking().flush().unwrap();
    // Misspelt words (a letter dropped, two swapped) still find the record.
    assert_eq!(
        ranked_ids(&store, "vulnerability scaner"),
        ["agent:scan.test"]
    );
    assert_eq!(ranked_ids(&store, "brwoser"), ["agent:web.test"]);
    // A corrected word weighs less than the same word typed right.
    let typed = ranked(&store, "scanner", &Filter::default());
    let misspelt = ranked(&store, "scaner", &Filter::default());
    assert!(misspelt[0].1 < typed[0].1, "{misspelt:?} {typed:?}");
    // A word some record has is not corrected ("routes" is not "router"),
    // and short words have too many neighbours to be corrected at all.
    assert_eq!(ranked_ids(&store, "routes"), ["agent:map.test"]);
    assert!(ranked_ids(&store, "mops").is_empty());
    // Two edits away is not a correction of a word under eight letters,
    // and is of a longer one.
    assert!(ranked_ids(&store, "skaner").is_empty());
    assert_eq!(ranked_ids(&store, "hedless brwser"), ["agent:web.test"]);
}

#[test]
fn a_subject_word_in_an_agents_tags_outranks_the_word_in_its_capabilities() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    // One agent built for travel teams (its tag), one whose second
    // capability has the word.
    let mut d = descriptor(
        "agent:for-travel.test",
        &["code_generation"],
        &["travel"],
        &["en"],
    );
    d.description = "Writes code. Built for travel teams.".into();
    let now = crate::record::unix_now();
    let body = DescriptorRecord::new(d, "{}".into(), 1, now, 3600, Evidence::default());
    let rec = SignedRecord::sign_descriptor(&body, &key()).unwrap();
    let b = store.blocking();
    b.put(
        &rec,
        &RecordBody::Descriptor(Box::new(body)),
        Origin::Remote,
        Expect::Any,
    )
    .unwrap();
    put_text(
        &store,
        "agent:plans-travel.test",
        1,
        "Planner",
        "Writes code. Plans travel and trips from travel guides.",
        &["code_generation", "travel_planning"],
    );
    b.flush().unwrap();
    let search = |subjects: &[String]| -> Vec<String> {
        b.text_search(&TextQuery {
            text: "travel guides",
            filter: &Filter::default(),
            limit: 10,
            now,
            min_trust: None,
            capabilities: &[],
            subjects,
        })
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect()
    };
    // As a plain word, the capability's repeated word wins.
    assert_eq!(search(&[])[0], "agent:plans-travel.test");
    // As the query's subject, the agent built for it does.
    assert_eq!(search(&["travel".into()])[0], "agent:for-travel.test");
}

#[test]
fn the_text_index_follows_updates_tombstones_and_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    put_text(
        &store,
        "agent:a.test",
        1,
        "Translator",
        "Translates documents",
        &["translation"],
    );
    store.blocking().flush().unwrap();
    assert_eq!(ranked_ids(&store, "translates"), ["agent:a.test"]);

    // An update replaces what the old version said.
    put_text(
        &store,
        "agent:a.test",
        2,
        "Transcriber",
        "Transcribes meetings",
        &["speech_to_text"],
    );
    store.blocking().flush().unwrap();
    assert!(ranked_ids(&store, "translates").is_empty());
    assert_eq!(ranked_ids(&store, "meetings"), ["agent:a.test"]);

    // A tombstone removes it.
    tombstone(&store, "agent:a.test", 3, Expect::Any).unwrap();
    store.blocking().flush().unwrap();
    assert!(ranked_ids(&store, "meetings").is_empty());

    // An expired record is not answered (the default helper's records
    // expired long ago).
    put(
        &store,
        descriptor("agent:old.test", &["meetings"], &[], &[]),
        1,
        Origin::Remote,
        Expect::Any,
    )
    .unwrap();
    store.blocking().flush().unwrap();
    assert!(ranked_ids(&store, "meetings").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_flush_makes_writes_searchable_by_text() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..40 {
        let store = store.clone();
        tasks.spawn(async move {
            let d = {
                let mut d = descriptor(&format!("agent:{i}.test"), &["translation"], &[], &[]);
                d.description = format!("translates letters number{i}");
                d
            };
            let (rec, body) = signed(d, 1);
            store
                .put(&rec, &body, Origin::Local, Expect::Any)
                .await
                .unwrap();
            store.flush().await.unwrap();
            // What the caller wrote is searchable once its flush returns.
            let hits = store
                .text_search(&TextQuery {
                    text: &format!("number{i}"),
                    filter: &Filter::default(),
                    limit: 5,
                    now: 0,
                    min_trust: None,
                    capabilities: &[],
                    subjects: &[],
                })
                .await
                .unwrap()
                .unwrap();
            assert_eq!(hits.len(), 1, "agent {i}: {hits:?}");
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
}

#[test]
fn a_crash_between_the_store_and_the_index_is_repaired_at_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path());
        put_text(
            &store,
            "agent:a.test",
            1,
            "Translator",
            "Translates documents",
            &["translation"],
        );
        put_text(
            &store,
            "agent:b.test",
            1,
            "Forecaster",
            "Weather forecasts",
            &["weather"],
        );
        store.blocking().flush().unwrap();
        // From here the store's writes never reach the index, as when the
        // process dies after a store write and before the index commits.
        store
            .sync
            .inner
            .text
            .index()
            .lose_changes
            .store(true, Ordering::SeqCst);
        put_text(
            &store,
            "agent:a.test",
            2,
            "Transcriber",
            "Transcribes meetings",
            &["speech_to_text"],
        );
        tombstone(&store, "agent:b.test", 2, Expect::Any).unwrap();
        put_text(
            &store,
            "agent:b.test",
            3,
            "Forecaster",
            "Storm warnings",
            &["weather"],
        );
        store.blocking().flush().unwrap();
        assert_eq!(
            ranked_ids(&store, "translates"),
            ["agent:a.test"],
            "the index is behind"
        );
        close(store);
    }
    // Same number of documents, so the agents still marked pending are
    // re-applied.
    let store = open(dir.path());
    assert!(ranked_ids(&store, "translates").is_empty());
    assert_eq!(ranked_ids(&store, "meetings"), ["agent:a.test"]);
    assert_eq!(ranked_ids(&store, "storm"), ["agent:b.test"]);
    assert!(store.sync.inner.pending.is_empty());
    assert_eq!(store.sync.inner.text.index().len(), 2);
}

#[test]
fn a_missing_or_disagreeing_text_index_is_rebuilt_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path());
        put_text(
            &store,
            "agent:a.test",
            1,
            "Translator",
            "Translates documents",
            &["translation"],
        );
        store.blocking().flush().unwrap();
        store
            .sync
            .inner
            .text
            .index()
            .lose_changes
            .store(true, Ordering::SeqCst);
        put_text(
            &store,
            "agent:c.test",
            1,
            "Chef",
            "Recipes and menus",
            &["cooking"],
        );
        close(store);
    }
    // A new agent the index never saw: the counts differ, so it is rebuilt.
    {
        let store = open(dir.path());
        assert_eq!(ranked_ids(&store, "recipes"), ["agent:c.test"]);
        assert_eq!(ranked_ids(&store, "translates"), ["agent:a.test"]);
        close(store);
    }
    // The index deleted: rebuilt too.
    std::fs::remove_dir_all(dir.path().join("text-index")).unwrap();
    let store = open(dir.path());
    assert_eq!(ranked_ids(&store, "recipes"), ["agent:c.test"]);
    assert_eq!(store.sync.inner.text.index().len(), 2);
}

fn open_lazy(dir: &Path) -> Store {
    Store::open_with(
        dir,
        &StoreOptions {
            cache_bytes: 16 << 20,
            text_index: TextIndexOpen::AtFirstSearch,
        },
    )
    .unwrap()
}

#[test]
fn the_text_index_opens_with_the_store_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    assert!(store.sync.inner.text.is_open());
    assert!(dir.path().join("text-index").is_dir());
}

#[test]
fn a_text_index_opened_at_the_first_search_is_absent_until_then_and_has_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_lazy(dir.path());
    put_text(
        &store,
        "agent:a.test",
        1,
        "Translator",
        "Translates documents",
        &["translation"],
    );
    put_text(
        &store,
        "agent:b.test",
        1,
        "Forecaster",
        "Weather forecasts",
        &["weather"],
    );
    tombstone(&store, "agent:b.test", 2, Expect::Any).unwrap();
    // Flushes and filter searches do not open it.
    store.blocking().flush().unwrap();
    let by_filter = store
        .blocking()
        .search(&filter(&["translation"], &[], &[]), None, 10)
        .unwrap();
    assert_eq!(ids(&by_filter), ["agent:a.test"]);
    assert!(!store.sync.inner.text.is_open());
    assert!(!dir.path().join("text-index").exists());

    // The first text search builds it from the records: the live agent
    // ranks, the tombstoned one does not.
    assert_eq!(ranked_ids(&store, "translates"), ["agent:a.test"]);
    assert!(ranked_ids(&store, "forecasts").is_empty());
    assert!(store.sync.inner.text.is_open());
    assert_eq!(store.sync.inner.text.index().len(), 1);

    // From then on writes reach it as in a store opened with its index.
    put_text(
        &store,
        "agent:c.test",
        1,
        "Chef",
        "Recipes and menus",
        &["cooking"],
    );
    store.blocking().flush().unwrap();
    assert_eq!(ranked_ids(&store, "recipes"), ["agent:c.test"]);
    assert!(store.sync.inner.pending.is_empty());

    // A store reopened with its index at open finds the same.
    close(store);
    let store = open(dir.path());
    assert_eq!(ranked_ids(&store, "recipes"), ["agent:c.test"]);
    assert_eq!(ranked_ids(&store, "translates"), ["agent:a.test"]);
}

#[test]
fn writes_while_the_first_search_opens_the_text_index_all_reach_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_lazy(dir.path());
    const AGENTS: usize = 300;
    for i in 0..AGENTS / 2 {
        put_text(
            &store,
            &format!("agent:{i}.test"),
            1,
            "Scribe",
            "Writes minutes",
            &["notes"],
        );
    }
    let writer = {
        let store = store.clone();
        std::thread::spawn(move || {
            for i in AGENTS / 2..AGENTS {
                put_text(
                    &store,
                    &format!("agent:{i}.test"),
                    1,
                    "Scribe",
                    "Writes minutes",
                    &["notes"],
                );
            }
        })
    };
    // Opens the index while the writer runs (the opening builds from
    // the records the writer is adding to).
    let first = ranked(&store, "minutes", &Filter::default());
    assert_eq!(first.len(), 10, "the agents written before rank at once");
    writer.join().unwrap();
    store.blocking().flush().unwrap();
    let all = store
        .blocking()
        .text_search(&TextQuery {
            text: "minutes",
            filter: &Filter::default(),
            limit: 1000,
            now: crate::record::unix_now(),
            min_trust: None,
            capabilities: &[],
            subjects: &[],
        })
        .unwrap()
        .unwrap();
    assert_eq!(all.len(), AGENTS, "every write is searchable");
    assert_eq!(store.sync.inner.text.index().len(), AGENTS as u64);
}

mod batch;
mod walk;

/// Linux: the nice value of each of this process's threads whose name
/// starts with one of `prefixes` (`/proc/self/task/*/stat`, field 19).
#[cfg(target_os = "linux")]
fn nice_of_threads(prefixes: &[&str]) -> Vec<(String, i32)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let (Ok(comm), Ok(stat)) = (
            std::fs::read_to_string(task.path().join("comm")),
            std::fs::read_to_string(task.path().join("stat")),
        ) else {
            continue; // the thread ended meanwhile
        };
        let comm = comm.trim().to_owned();
        if !prefixes.iter().any(|p| comm.starts_with(p)) {
            continue;
        }
        // After the name in parentheses: state is field 3, nice field 19.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let nice = after.split(' ').nth(16).unwrap().parse().unwrap();
        out.push((comm, nice));
    }
    out
}

/// The text index's bulk work (tantivy's indexing worker, its segment
/// updater and merge threads) runs at background priority, so that on a
/// busy machine a search is run before a merge: those threads keep the
/// priority of the thread that made the writer.
#[cfg(target_os = "linux")]
#[test]
fn the_text_index_threads_run_at_background_priority() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for i in 0..20 {
        put(
            &store,
            descriptor(&format!("nice-{i}"), &["translation"], &[], &[]),
            1,
            Origin::Local,
            Expect::Any,
        )
        .unwrap();
    }
    store.blocking().flush().unwrap();
    // Every store open in this process made such threads (tests run side
    // by side): all of them must be lowered. tantivy ends its indexing
    // workers at each commit and starts new ones, so one may be missing
    // for a moment: look again until one is there (10 s at most).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let threads = loop {
        let threads = nice_of_threads(&["thrd-tantivy", "segment_update", "merge_thread"]);
        if threads
            .iter()
            .any(|(name, _)| name.starts_with("thrd-tantivy"))
        {
            break threads;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no tantivy indexing thread found: {threads:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    for (name, nice) in &threads {
        assert_eq!(
            *nice,
            crate::priority::BACKGROUND_NICE,
            "thread {name} runs at nice {nice}"
        );
    }
    drop(store);
}
