use super::entry::{chain_hash, decode_stored, encode_stored};
use super::*;
use crate::store::Store;

fn open(dir: &std::path::Path) -> Store {
    Store::open(dir, 8 << 20).unwrap()
}

fn event(i: u64) -> AuditEvent {
    let mut e = AuditEvent::new(
        "key:ops",
        AuditAction::Register,
        format!("agent-{i}"),
        AuditOutcome::Ok,
    );
    e.addr = Some("127.0.0.1".into());
    e.request_id = Some(format!("req-{i}"));
    e
}

fn filled(n: u64) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    for i in 1..=n {
        let entry = s.blocking().audit_append(&event(i)).unwrap();
        assert_eq!(entry.seq, i);
    }
    (dir, s)
}

fn raw(s: &Store, seq: u64) -> Vec<u8> {
    s.blocking()
        .inner
        .audit
        .entries
        .get(seq.to_be_bytes())
        .unwrap()
        .unwrap()
        .to_vec()
}

fn put_raw(s: &Store, seq: u64, value: &[u8]) {
    s.blocking()
        .inner
        .audit
        .entries
        .insert(seq.to_be_bytes(), value)
        .unwrap();
}

#[test]
fn an_untouched_chain_verifies_and_links_each_entry_to_the_one_before() {
    let (_dir, s) = filled(5);
    let report = s.blocking().audit_verify(None).unwrap();
    assert!(report.ok(), "{report:?}");
    assert_eq!((report.checked, report.last), (5, 5));
    let page = s.blocking().audit_page(0, 10).unwrap();
    assert_eq!(page.len(), 5);
    assert_eq!(page[0].prev, hex::encode(GENESIS));
    for pair in page.windows(2) {
        assert_eq!(pair[1].prev, pair[0].hash);
    }
    assert_eq!(page[2].target, "agent-3");
    assert_eq!(page[2].actor, "key:ops");
    assert_eq!(page[2].request_id.as_deref(), Some("req-3"));
    assert_eq!(s.blocking().audit_page(3, 10).unwrap()[0].seq, 4);
    let tail = s.blocking().audit_tail(2).unwrap();
    assert_eq!(tail.iter().map(|e| e.seq).collect::<Vec<_>>(), [4, 5]);
}

#[test]
fn the_chain_continues_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.blocking().audit_append(&event(1)).unwrap();
    s.close_blocking().unwrap();
    let s = open(dir.path());
    assert_eq!(s.blocking().audit_append(&event(2)).unwrap().seq, 2);
    assert!(s.blocking().audit_verify(None).unwrap().ok());
}

#[test]
fn an_edited_entry_is_named() {
    let (_dir, s) = filled(5);
    let mut value = raw(&s, 3);
    // Somewhere inside the actor's bytes: "key:ops" becomes "key:opz".
    let at = value.windows(7).position(|w| w == b"key:ops").unwrap();
    value[at + 6] = b'z';
    put_raw(&s, 3, &value);
    let broken = s.blocking().audit_verify(None).unwrap().broken.unwrap();
    assert!(matches!(broken, Broken::Edited { seq: 3, .. }), "{broken}");
}

#[test]
fn an_entry_edited_and_rehashed_breaks_the_next_link() {
    let (_dir, s) = filled(5);
    let d = decode_stored(&raw(&s, 3)).unwrap();
    let mut body = d.body.clone();
    let at = body.windows(7).position(|w| w == b"agent-3").unwrap();
    body[at + 6] = b'9';
    let hash = chain_hash(&d.prev, &body);
    put_raw(&s, 3, &encode_stored(&body, &d.prev, &hash));
    let broken = s.blocking().audit_verify(None).unwrap().broken.unwrap();
    assert_eq!(broken, Broken::Unlinked { seq: 4 });
}

#[test]
fn a_deleted_entry_is_named_in_the_middle_and_at_the_end() {
    let (_dir, s) = filled(5);
    s.blocking()
        .inner
        .audit
        .entries
        .remove(3u64.to_be_bytes())
        .unwrap();
    let broken = s.blocking().audit_verify(None).unwrap().broken.unwrap();
    assert_eq!(broken, Broken::Missing { first: 3, last: 3 });

    let (_dir, s) = filled(5);
    s.blocking()
        .inner
        .audit
        .entries
        .remove(5u64.to_be_bytes())
        .unwrap();
    let broken = s.blocking().audit_verify(None).unwrap().broken.unwrap();
    assert_eq!(broken, Broken::Missing { first: 5, last: 5 });
}

#[test]
fn reordered_entries_are_named() {
    let (_dir, s) = filled(5);
    let (two, three) = (raw(&s, 2), raw(&s, 3));
    put_raw(&s, 2, &three);
    put_raw(&s, 3, &two);
    let broken = s.blocking().audit_verify(None).unwrap().broken.unwrap();
    assert_eq!(broken, Broken::Reordered { seq: 2, holds: 3 });
    assert!(broken.to_string().contains("entry 2"));
}

#[test]
fn pruning_leaves_a_signed_checkpoint_the_chain_verifies_from() {
    let (_dir, s) = filled(10);
    let key = SigningKey::from_bytes(&[7; 32]);
    assert_eq!(
        s.blocking().audit_prune(Retention::Count(4), &key).unwrap(),
        6
    );
    assert_eq!(s.blocking().audit_page(0, 100).unwrap().len(), 4);
    let report = s
        .blocking()
        .audit_verify(Some(&key.verifying_key()))
        .unwrap();
    assert!(report.ok(), "{report:?}");
    assert_eq!((report.from, report.last, report.checked), (6, 10, 4));
    // Nothing more to prune; appends go on from the head.
    assert_eq!(
        s.blocking().audit_prune(Retention::Count(4), &key).unwrap(),
        0
    );
    assert_eq!(s.blocking().audit_append(&event(11)).unwrap().seq, 11);
    assert!(s.blocking().audit_verify(None).unwrap().ok());
    // Deleting the first entry after the checkpoint is still seen.
    s.blocking()
        .inner
        .audit
        .entries
        .remove(7u64.to_be_bytes())
        .unwrap();
    let broken = s.blocking().audit_verify(None).unwrap().broken.unwrap();
    assert_eq!(broken, Broken::Missing { first: 7, last: 7 });
}

#[test]
fn a_checkpoint_from_another_key_or_forged_does_not_verify() {
    let (_dir, s) = filled(6);
    let key = SigningKey::from_bytes(&[7; 32]);
    s.blocking().audit_prune(Retention::Count(2), &key).unwrap();
    let other = SigningKey::from_bytes(&[8; 32]).verifying_key();
    let broken = s
        .blocking()
        .audit_verify(Some(&other))
        .unwrap()
        .broken
        .unwrap();
    assert!(matches!(broken, Broken::Checkpoint { .. }), "{broken}");
    // Moving the checkpoint further (hiding entries) breaks its signature.
    let mut c = s.blocking().audit_checkpoint().unwrap().unwrap();
    c.through = 5;
    s.blocking()
        .inner
        .audit
        .meta
        .insert(CHECKPOINT_KEY, serde_json::to_vec(&c).unwrap())
        .unwrap();
    let broken = s.blocking().audit_verify(None).unwrap().broken.unwrap();
    assert!(matches!(broken, Broken::Checkpoint { .. }), "{broken}");
}

#[test]
fn pruning_by_age_keeps_young_entries() {
    let (_dir, s) = filled(3);
    let key = SigningKey::from_bytes(&[7; 32]);
    let kept = Retention::Age(Duration::from_secs(3600));
    assert_eq!(s.blocking().audit_prune(kept, &key).unwrap(), 0);
    assert_eq!(s.blocking().audit_page(0, 10).unwrap().len(), 3);
}

#[test]
fn a_record_version_stays_readable_by_its_hash() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let mut e = event(1);
    e.record = Some(b"signed bytes".to_vec());
    let entry = s.blocking().audit_append(&e).unwrap();
    let hash: [u8; 32] = hex::decode(entry.record.unwrap())
        .unwrap()
        .try_into()
        .unwrap();
    assert_eq!(
        s.blocking().audit_version(&hash).unwrap().unwrap(),
        b"signed bytes"
    );
}

#[test]
fn refusals_are_aggregated_per_code() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    for _ in 0..1000 {
        s.blocking().audit_refusal("bad_signature").unwrap();
    }
    s.blocking().audit_refusal("stale_seq").unwrap();
    let page = s.blocking().audit_page(0, 100).unwrap();
    assert_eq!(page.len(), 2, "{page:?}");
    assert_eq!(page[0].action, "remote_refused");
    assert_eq!(page[0].outcome, "refused:bad_signature");
}

#[test]
fn long_fields_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let mut e = event(1);
    e.target = "é".repeat(10_000);
    let entry = s.blocking().audit_append(&e).unwrap();
    assert!(entry.target.len() <= MAX_FIELD_BYTES);
    assert!(s.blocking().audit_verify(None).unwrap().ok());
}

#[test]
fn actions_read_back_from_their_strings() {
    for a in AuditAction::ALL {
        assert_eq!(AuditAction::parse(a.as_str()), Some(a));
    }
    for o in [
        AuditOutcome::Ok,
        AuditOutcome::Refused("not_found".into()),
        AuditOutcome::Error("store".into()),
    ] {
        assert_eq!(AuditOutcome::from_wire(&o.to_wire()), o);
    }
}

#[test]
fn a_call_s_duration_is_kept_hashed_and_entries_without_one_encode_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.blocking().audit_append(&event(1)).unwrap();
    let mut call = AuditEvent::new(
        "key:ops",
        AuditAction::Invoke,
        "agent-1#echo",
        AuditOutcome::Ok,
    );
    call.duration_ms = Some(0x0102_0304);
    s.blocking().audit_append(&call).unwrap();
    s.blocking().audit_append(&event(3)).unwrap();
    let page = s.blocking().audit_page(0, 10).unwrap();
    assert_eq!(page[1].duration_ms, Some(0x0102_0304));
    assert_eq!((page[0].duration_ms, page[2].duration_ms), (None, None));
    assert!(s.blocking().audit_verify(None).unwrap().ok());
    // An entry without a duration ends with its record flag, as entries
    // did before durations were kept (their hashes unchanged).
    let before = decode_stored(&raw(&s, 1)).unwrap();
    assert_eq!(before.body.last(), Some(&0));
    // The duration is covered by the hash: changed, the entry is named.
    let mut value = raw(&s, 2);
    let at = value.windows(4).position(|w| w == [1, 2, 3, 4]).unwrap();
    value[at + 3] = 5;
    put_raw(&s, 2, &value);
    let broken = s.blocking().audit_verify(None).unwrap().broken.unwrap();
    assert!(matches!(broken, Broken::Edited { seq: 2, .. }), "{broken}");
}
