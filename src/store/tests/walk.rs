//! Tests of the filter walk over the in-memory posting lists: order of
//! first arrival and cursors, trust floors, compact records, concurrent
//! writers, and the migration of version 1 and 2 data directories.

use super::super::stored::KIND_DESCRIPTOR;
use super::*;
use crate::trust::TrustLevel;

fn put_with(store: &Store, d: Descriptor, seq: u64, origin: Origin, evidence: Evidence) {
    let body = DescriptorRecord::new(d, "{}".into(), seq, 1, 3600, evidence);
    let rec = SignedRecord::sign_descriptor(&body, &key()).unwrap();
    store
        .blocking()
        .put(
            &rec,
            &RecordBody::Descriptor(Box::new(body)),
            origin,
            Expect::Any,
        )
        .unwrap();
}

fn walk_ids(
    s: &Store,
    f: &Filter,
    after: Option<&str>,
    limit: usize,
) -> (Vec<String>, Option<String>) {
    let (page, next) = s.blocking().walk(f, None, after, limit).unwrap();
    (page.into_iter().map(|a| a.id).collect(), next)
}

#[test]
fn pages_follow_first_arrival_and_an_agent_arriving_mid_walk_lands_on_a_later_page() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    for id in ["c", "a", "b"] {
        put(
            &s,
            descriptor(id, &["x"], &[], &[]),
            1,
            Origin::Local,
            Expect::Any,
        )
        .unwrap();
    }
    let f = filter(&["x"], &[], &[]);
    let (first, next) = walk_ids(&s, &f, None, 2);
    assert_eq!(first, ["c", "a"]);
    assert_eq!(next.as_deref(), Some("a"));
    // While the client holds its cursor: a newcomer, and an update of an
    // agent it already read.
    put(
        &s,
        descriptor("0-new", &["x"], &[], &[]),
        1,
        Origin::Local,
        Expect::Any,
    )
    .unwrap();
    put(
        &s,
        descriptor("c", &["x"], &[], &[]),
        2,
        Origin::Local,
        Expect::Any,
    )
    .unwrap();
    let (second, next) = walk_ids(&s, &f, next.as_deref(), 2);
    assert_eq!(
        second,
        ["b", "0-new"],
        "the update keeps its place, the newcomer comes last"
    );
    assert_eq!(next, None, "a full last page says no more follow");
    assert_eq!(walk_ids(&s, &f, Some("never-seen"), 2), (vec![], None));
    // A deleted agent's cursor still continues the walk.
    tombstone(&s, "a", 2, Expect::LocalLive).unwrap();
    assert_eq!(walk_ids(&s, &f, Some("a"), 10).0, ["b", "0-new"]);
    assert_eq!(
        walk_ids(&s, &Filter::default(), None, 10).0,
        ["c", "b", "0-new"]
    );
}

#[test]
fn a_trust_floor_fills_the_page_with_agents_at_or_above_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    for i in 0..30 {
        let evidence = Evidence {
            dnssec: i % 3 == 0,
            ..Evidence::default()
        };
        put_with(
            &s,
            descriptor(&format!("a{i:02}"), &["x"], &[], &[]),
            1,
            Origin::Remote,
            evidence,
        );
    }
    let (page, next) = s
        .blocking()
        .walk(
            &filter(&["x"], &[], &[]),
            Some(TrustLevel::DnsVerified),
            None,
            5,
        )
        .unwrap();
    let got: Vec<&str> = page.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(got, ["a00", "a03", "a06", "a09", "a12"]);
    assert!(page.iter().all(|a| a.level == TrustLevel::DnsVerified));
    assert_eq!(next.as_deref(), Some("a12"));
    // The floor drops out when the record loses its evidence.
    put_with(
        &s,
        descriptor("a00", &["x"], &[], &[]),
        2,
        Origin::Remote,
        Evidence::default(),
    );
    let (page, _) = s
        .blocking()
        .walk(&Filter::default(), Some(TrustLevel::DnsVerified), None, 100)
        .unwrap();
    assert_eq!(page.len(), 9);
    assert!(page.iter().all(|a| a.id != "a00"));
}

#[test]
fn compact_records_follow_updates_tombstones_and_the_local_mark() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let mut d = descriptor("mine", &["ocr"], &[], &[]);
    put(&s, d.clone(), 1, Origin::Local, Expect::Any).unwrap();
    put(
        &s,
        descriptor("theirs", &["ocr"], &[], &[]),
        1,
        Origin::Remote,
        Expect::Any,
    )
    .unwrap();
    let c = s.blocking().compact("mine").unwrap().unwrap();
    assert!(c.local);
    assert_eq!((c.name.as_str(), c.seq), ("agent mine", 1));
    assert_eq!(c.signer, key().verifying_key().as_bytes());
    assert!(!s.blocking().compact("theirs").unwrap().unwrap().local);
    // A remote write of a local agent keeps its mark.
    d.name = "renamed".into();
    d.capabilities = vec!["translation".into()];
    put(&s, d, 2, Origin::Remote, Expect::Any).unwrap();
    let c = s.blocking().compact("mine").unwrap().unwrap();
    assert!(c.local);
    assert_eq!((c.name.as_str(), c.seq), ("renamed", 2));
    assert_eq!(c.capabilities, ["translation"]);
    tombstone(&s, "mine", 3, Expect::LocalLive).unwrap();
    assert_eq!(s.blocking().compact("mine").unwrap(), None);
    assert_eq!(s.blocking().compact("nobody").unwrap(), None);
    close(s);
    let s = open(dir.path());
    assert_eq!(s.blocking().compact("mine").unwrap(), None);
    assert_eq!(
        walk_ids(&s, &filter(&["ocr"], &[], &[]), None, 10).0,
        ["theirs"]
    );
    // Ordinals carry on after a reopen: a newcomer comes after everyone.
    put(
        &s,
        descriptor("0-late", &["ocr"], &[], &[]),
        1,
        Origin::Remote,
        Expect::Any,
    )
    .unwrap();
    assert_eq!(
        walk_ids(&s, &filter(&["ocr"], &[], &[]), None, 10).0,
        ["theirs", "0-late"]
    );
}

#[test]
fn concurrent_writes_of_one_agent_leave_its_terms_as_its_last_record_says() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                for k in 0..50u64 {
                    let seq = k * 4 + t + 1;
                    let cap = format!("cap{}", seq % 7);
                    let (rec, body) = signed(descriptor("a", &[&cap], &[], &[]), seq);
                    // Stale seqs are refused; the rest land in some order.
                    let _ = s.blocking().put(&rec, &body, Origin::Remote, Expect::Any);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let held = s.blocking().get("a").unwrap().unwrap();
    let RecordBody::Descriptor(d) = held.body else {
        panic!("a descriptor is held")
    };
    for k in 0..7 {
        let cap = format!("cap{k}");
        let listed = walk_ids(&s, &filter(&[&cap], &[], &[]), None, 10).0;
        let expected: Vec<String> = if d.descriptor.capabilities == [cap.clone()] {
            vec!["a".into()]
        } else {
            vec![]
        };
        assert_eq!(
            listed, expected,
            "{cap} (the held record has {:?})",
            d.descriptor.capabilities
        );
    }
    assert_eq!(s.len(), 1);
}

/// Writes a data directory in layout version 1: records by id, index keys
/// by id, the local marks, schema version 1.
fn write_v1(dir: &Path, agents: &[(&str, &[&str], bool)]) {
    let db = sled::Config::new()
        .path(dir)
        .flush_every_ms(None)
        .open()
        .unwrap();
    let records = db.open_tree("records").unwrap();
    let index = db.open_tree("index").unwrap();
    let local = db.open_tree("local").unwrap();
    for (id, caps, is_local) in agents {
        let (rec, body) = signed(descriptor(id, caps, &[], &["en"]), 1);
        let mut value = vec![KIND_DESCRIPTOR];
        value.extend_from_slice(&rec.encode());
        records.insert(id.as_bytes(), value).unwrap();
        let RecordBody::Descriptor(d) = &body else {
            unreachable!()
        };
        for p in postings::terms_of(&d.descriptor) {
            let mut k = p.clone();
            k.extend_from_slice(id.as_bytes());
            index.insert(k, &[][..]).unwrap();
        }
        if *is_local {
            local.insert(id.as_bytes(), &[][..]).unwrap();
        }
    }
    db.open_tree("meta")
        .unwrap()
        .insert("schema_version", &1u32.to_be_bytes())
        .unwrap();
    db.flush().unwrap();
    // Every handle gone (the trees hold the database too), sled's threads
    // let go of the directory a moment later.
    drop((db, records, index, local));
    wait_unlocked(dir, CLOSE_WAIT).unwrap();
}

#[test]
fn a_version_1_data_directory_is_migrated_at_open_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_v1(
        dir.path(),
        &[
            ("b", &["ocr"], true),
            ("a", &["ocr", "translation"], false),
            ("c", &["translation"], false),
        ],
    );
    let s = open(dir.path());
    assert_eq!(s.len(), 3);
    assert_eq!(s.term_count('c', "ocr"), 2);
    // Ordinals in id order: version 1's listing order is kept.
    assert_eq!(
        walk_ids(&s, &Filter::default(), None, 10).0,
        ["a", "b", "c"]
    );
    assert_eq!(
        walk_ids(&s, &filter(&["ocr"], &[], &["en"]), None, 10).0,
        ["a", "b"]
    );
    assert!(s.blocking().compact("b").unwrap().unwrap().local);
    assert!(!s.blocking().compact("a").unwrap().unwrap().local);
    assert!(s.blocking().is_local("b").unwrap());
    assert_eq!(s.blocking().get("c").unwrap().unwrap().body.seq(), 1);
    // Text search still finds them (the text index is rebuilt from the
    // records, which the migration did not touch).
    s.blocking().flush().unwrap();
    put(
        &s,
        descriptor("d", &["ocr"], &[], &[]),
        1,
        Origin::Local,
        Expect::Any,
    )
    .unwrap();
    assert_eq!(
        walk_ids(&s, &filter(&["ocr"], &[], &[]), None, 10).0,
        ["a", "b", "d"]
    );
    close(s);
    // Migrated once: the next open reads the current version as it is.
    let s = open(dir.path());
    assert_eq!(
        walk_ids(&s, &filter(&["ocr"], &[], &[]), None, 10).0,
        ["a", "b", "d"]
    );
}

/// Turns a data directory of this version back into version 2: compact
/// records without tags and languages, an `index` tree, schema version 2.
fn downgrade_to_v2(dir: &Path) {
    let db = sled::Config::new()
        .path(dir)
        .flush_every_ms(None)
        .open()
        .expect("the closed store's directory opens");
    let compact = db.open_tree("compact").unwrap();
    for entry in compact.iter() {
        let (key, value) = entry.unwrap();
        if let Some(mut agent) = super::super::compact::decode("test", &value).unwrap() {
            agent.tags.clear();
            agent.languages.clear();
            compact
                .insert(key, super::super::compact::encode_live(&agent))
                .unwrap();
        }
    }
    db.open_tree("index")
        .unwrap()
        .insert(b"c\x00ocr\x00\x00\x00\x00\x01", &[][..])
        .unwrap();
    db.open_tree("meta")
        .unwrap()
        .insert("schema_version", &2u32.to_be_bytes())
        .unwrap();
    db.flush().unwrap();
    // Every handle gone (the trees hold the database too), sled's threads
    // let go of the directory a moment later.
    drop((db, compact));
    wait_unlocked(dir, CLOSE_WAIT).unwrap();
}

#[test]
fn a_version_2_data_directory_is_migrated_at_open_and_its_filters_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (before, order) = {
        let s = open(dir.path());
        write_changing_terms(&s);
        let before = (
            postings_of(&s),
            walk_ids(&s, &Filter::default(), None, 100).0,
        );
        close(s);
        before
    };
    downgrade_to_v2(dir.path());
    let s = open(dir.path());
    // Tags and languages came back from the records: every list is as the
    // commits built it, ordinals (and so the listing order) unchanged.
    assert_eq!(postings_of(&s), before);
    assert_eq!(walk_ids(&s, &Filter::default(), None, 100).0, order);
    assert_eq!(
        s.blocking().compact("a3").unwrap().unwrap().languages,
        ["EN-us", "zh-Hans"]
    );
    assert!(s.blocking().compact("a3").unwrap().unwrap().local);
    let names: Vec<Vec<u8>> = s
        .sync
        .inner
        .db
        .tree_names()
        .into_iter()
        .map(|n| n.to_vec())
        .collect();
    assert!(
        !names.contains(&b"index".to_vec()),
        "the index tree is dropped"
    );
    close(s);
    let s = open(dir.path());
    assert_eq!(postings_of(&s), before);
    assert_eq!(
        s.sync
            .inner
            .db
            .open_tree("meta")
            .unwrap()
            .get("schema_version")
            .unwrap()
            .as_deref(),
        Some(&SCHEMA_VERSION.to_be_bytes()[..])
    );
}

#[test]
fn a_filters_trust_floor_narrows_the_walk_and_the_text_ranking() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let now = crate::record::unix_now();
    for (id, dnssec) in [("plain", false), ("signed", true)] {
        let mut d = descriptor(id, &["x"], &[], &[]);
        d.description = "translates contracts".into();
        let evidence = Evidence {
            dnssec,
            ..Evidence::default()
        };
        let body = DescriptorRecord::new(d, "{}".into(), 1, now, 3600, evidence);
        let rec = SignedRecord::sign_descriptor(&body, &key()).unwrap();
        s.blocking()
            .put(
                &rec,
                &RecordBody::Descriptor(Box::new(body)),
                Origin::Remote,
                Expect::Any,
            )
            .unwrap();
    }
    s.blocking().flush().unwrap();
    let mut floor = filter(&["x"], &[], &[]);
    floor.min_trust = Some(TrustLevel::DnsVerified);
    let (page, _) = s.blocking().walk(&floor, None, None, 10).unwrap();
    let walked: Vec<&str> = page.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(walked, ["signed"]);
    let ranked: Vec<String> = super::ranked(&s, "contracts", &floor)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(ranked, ["signed"]);
    // Without the floor both answer; a floor at unverified is no floor.
    floor.min_trust = Some(TrustLevel::Unverified);
    assert_eq!(
        s.blocking().walk(&floor, None, None, 10).unwrap().0.len(),
        2
    );
    assert_eq!(super::ranked(&s, "contracts", &floor).len(), 2);
}
