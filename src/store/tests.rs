//! Tests of the [`Store`]: filters and pages over the indexes, seq order
//! and tombstones, the [`Expect`] guards on other registries' records,
//! reopening, and refusing another schema version.

use super::*;
use crate::descriptor::DocumentFormat;
use crate::record::{DescriptorRecord, TombstoneReason, TombstoneRecord};
use crate::verify::Evidence;
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
    store.put(
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
    store.put(&rec, &RecordBody::Tombstone(body), Origin::Local, expect)
}

fn ids(found: &[StoredAgent]) -> Vec<&str> {
    found.iter().map(|a| a.body.agent_id()).collect()
}

fn open(dir: &Path) -> Store {
    Store::open(dir, 16 << 20).unwrap()
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
        ids(&s.search(&f, None, 100).unwrap())
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
            let page = s.search(&f, after.as_deref(), 10).unwrap();
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
        .search(&filter(&["old"], &[], &[]), None, 10)
        .unwrap()
        .is_empty());
    assert_eq!(
        s.search(&filter(&["new"], &[], &[]), None, 10)
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
        .search(&filter(&["x"], &[], &[]), None, 10)
        .unwrap()
        .is_empty());
    assert!(s.search(&Filter::default(), None, 10).unwrap().is_empty());
    assert_eq!(s.len(), 0);
    assert!(!s.is_local("a").unwrap());
    assert!(matches!(
        s.get("a").unwrap().unwrap().body,
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
    assert!(s.is_local("mine").unwrap());
    assert!(!s.is_local("remote").unwrap());
}

#[test]
fn reopening_restores_records_indexes_and_counts() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path());
        for i in 0..50 {
            put(
                &s,
                descriptor(&format!("a{i}"), &["cap"], &["t"], &["en"]),
                1,
                Origin::Local,
                Expect::Any,
            )
            .unwrap();
        }
        tombstone(&s, "a0", 2, Expect::LocalLive).unwrap();
        s.flush_blocking().unwrap();
    }
    let s = open(dir.path());
    assert_eq!(s.len(), 49);
    assert_eq!(s.term_count('c', "cap"), 49);
    assert_eq!(
        s.search(&filter(&["cap"], &["t"], &["en"]), None, 100)
            .unwrap()
            .len(),
        49
    );
    assert!(s.is_local("a1").unwrap());
}

#[test]
fn a_store_of_another_schema_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = sled::open(dir.path()).unwrap();
        db.open_tree("meta")
            .unwrap()
            .insert("schema_version", &99u32.to_be_bytes())
            .unwrap();
        db.flush().unwrap();
    }
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
