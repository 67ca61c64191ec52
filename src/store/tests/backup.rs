//! The export and its restore at the store's level: records byte for
//! byte, the kind each is held as, suspensions, and a tree the store
//! does not know of (a later version's, such as the audit log's) all come
//! back; a line that lies about its record is refused with its number.

use super::*;

fn export_of(store: &Store) -> String {
    let mut out = Vec::new();
    store
        .blocking()
        .export(&mut out)
        .expect("the export is written");
    String::from_utf8(out).unwrap()
}

#[test]
fn a_restored_store_holds_every_record_kind_and_tree_as_exported() {
    let from = tempfile::tempdir().unwrap();
    let store = open(from.path());
    put(
        &store,
        descriptor("ours", &["translation"], &[], &["en"]),
        1,
        Origin::Local,
        Expect::LocalOrAbsent,
    )
    .unwrap();
    put(
        &store,
        descriptor("claimed", &["weather"], &[], &[]),
        1,
        Origin::Claimed,
        Expect::Any,
    )
    .unwrap();
    put(
        &store,
        descriptor("gone", &["weather"], &[], &[]),
        1,
        Origin::Local,
        Expect::LocalOrAbsent,
    )
    .unwrap();
    tombstone(&store, "gone", 2, Expect::LocalLive).unwrap();
    store.blocking().suspend("claimed", "reported").unwrap();
    // A tree a later version writes travels without a change to export.
    let audit = store.sync.inner.db.open_tree("audit").unwrap();
    audit
        .insert(b"\x00\x00\x00\x01", b"entry one".to_vec())
        .unwrap();
    drop(audit);
    let export = export_of(&store);
    let before: Vec<_> = ["ours", "claimed", "gone"]
        .iter()
        .map(|id| store.blocking().get(id).unwrap().unwrap())
        .collect();
    close(store);

    let to = tempfile::tempdir().unwrap();
    let dir = to.path().join("store");
    let summary = restore(&dir, &mut export.as_bytes(), &StoreOptions::default()).unwrap();
    assert_eq!(
        summary,
        BackupSummary {
            registrations: 1,
            records: 3,
            entries: summary.entries
        }
    );
    let store = open(&dir);
    for old in before {
        let id = old.body.agent_id().to_owned();
        let new = store.blocking().get(&id).unwrap().unwrap();
        assert_eq!(new.record.encode(), old.record.encode(), "{id}'s bytes");
        assert_eq!(new.claimed, old.claimed, "{id}'s kind");
    }
    assert!(store.suspension("claimed").is_some());
    assert_eq!(store.len(), 2, "two live agents");
    let audit = store.sync.inner.db.open_tree("audit").unwrap();
    assert_eq!(
        audit.get(b"\x00\x00\x00\x01").unwrap().as_deref(),
        Some(&b"entry one"[..])
    );
    drop(audit);
    // Exported again, the same lines but the header's time.
    assert_eq!(
        export_of(&store).lines().skip(1).collect::<Vec<_>>(),
        export.lines().skip(1).collect::<Vec<_>>()
    );
    close(store);

    // Into a directory that holds a store: refused.
    let refused = restore(&dir, &mut export.as_bytes(), &StoreOptions::default()).unwrap_err();
    assert!(matches!(refused, BackupError::NotEmpty { .. }), "{refused}");
}

#[test]
fn a_record_under_another_id_or_a_bad_header_is_refused_with_its_line() {
    let from = tempfile::tempdir().unwrap();
    let store = open(from.path());
    put(
        &store,
        descriptor("a", &["x"], &[], &[]),
        1,
        Origin::Local,
        Expect::LocalOrAbsent,
    )
    .unwrap();
    let export = export_of(&store);
    close(store);
    let to = tempfile::tempdir().unwrap();
    let dir = to.path().join("store");

    let moved = export.replace(r#""type":"record","id":"a""#, r#""type":"record","id":"b""#);
    let refused = restore(&dir, &mut moved.as_bytes(), &StoreOptions::default()).unwrap_err();
    assert!(
        matches!(&refused, BackupError::Format { line: 3, reason } if reason.contains("is for a")),
        "{refused}"
    );
    assert!(!dir.exists(), "a refused restore leaves nothing behind");

    let later = export.replacen(
        &format!(r#""schema":{SCHEMA_VERSION}"#),
        &format!(r#""schema":{}"#, SCHEMA_VERSION + 1),
        1,
    );
    let refused = restore(&dir, &mut later.as_bytes(), &StoreOptions::default()).unwrap_err();
    assert!(matches!(refused, BackupError::Schema { .. }), "{refused}");

    let extra = format!("{export}{{\"type\":\"end\",\"lines\":1}}\n");
    let refused = restore(&dir, &mut extra.as_bytes(), &StoreOptions::default()).unwrap_err();
    assert!(matches!(refused, BackupError::Format { .. }), "{refused}");
    assert!(!is_export_header("{\"id\":\"x\"}"));
    assert!(is_export_header(export.lines().next().unwrap()));
}
