//! Tests of the [`Store`]: filters and pages over the indexes, seq order
//! and tombstones, the [`Expect`] guards on other registries' records,
//! reopening, and refusing another schema version.

use std::path::Path;

use super::open::wait_unlocked;
use super::postings::Postings;
use super::*;
use crate::descriptor::{Descriptor, DocumentFormat};
use crate::record::{
    DescriptorRecord, RecordBody, RecordError, SignedRecord, TombstoneReason, TombstoneRecord,
};
use crate::trust::{Evidence, Reason};
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

mod async_face;
mod backup;
mod batch;
mod ranking;
mod text_index;
mod walk;
