//! Tests of batched writes: one transaction, each write checked on its
//! own.

use super::*;

#[test]
fn a_refused_write_in_a_batch_leaves_the_others_stored() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    put(
        &s,
        descriptor("theirs", &["x"], &[], &[]),
        1,
        Origin::Remote,
        Expect::Any,
    )
    .unwrap();
    put(
        &s,
        descriptor("old", &["x"], &[], &[]),
        9,
        Origin::Local,
        Expect::Any,
    )
    .unwrap();
    let batch = vec![
        signed(descriptor("new", &["x"], &[], &[]), 1),
        signed(descriptor("theirs", &["y"], &[], &[]), 2),
        signed(descriptor("old", &["y"], &[], &[]), 5),
        signed(descriptor("new-2", &["y"], &[], &[]), 1),
    ];
    let results = s
        .blocking()
        .put_batch(&batch, Origin::Local, Expect::LocalOrAbsent);
    assert!(
        matches!(results[0], Ok(PutOutcome::Created)),
        "{:?}",
        results[0]
    );
    assert!(
        matches!(results[1], Err(StoreError::NotLocal { .. })),
        "{:?}",
        results[1]
    );
    assert!(
        matches!(
            results[2],
            Err(StoreError::Record(RecordError::StaleSeq {
                seq: 5,
                held: 9,
                ..
            }))
        ),
        "{:?}",
        results[2]
    );
    assert!(
        matches!(results[3], Ok(PutOutcome::Created)),
        "{:?}",
        results[3]
    );
    // What was refused is as it was; what went in is indexed and counted.
    let ids_with = |cap: &str| {
        let (page, _) = s
            .blocking()
            .walk(&filter(&[cap], &[], &[]), None, None, 10)
            .unwrap();
        page.into_iter().map(|a| a.id).collect::<Vec<_>>()
    };
    assert_eq!(ids_with("x"), ["theirs", "old", "new"]);
    assert_eq!(ids_with("y"), ["new-2"]);
    assert_eq!(s.len(), 4);
    assert!(s.blocking().is_local("new").unwrap());
    assert!(!s.blocking().is_local("theirs").unwrap());
    assert_eq!(s.blocking().held_seq("old").unwrap(), Some(9));
}

#[test]
fn two_writes_of_one_agent_in_a_batch_apply_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let batch = vec![
        signed(descriptor("a", &["first"], &[], &[]), 1),
        signed(descriptor("a", &["second"], &[], &[]), 2),
        signed(descriptor("a", &["stale"], &[], &[]), 2),
    ];
    let results = s.blocking().put_batch(&batch, Origin::Remote, Expect::Any);
    assert!(matches!(results[0], Ok(PutOutcome::Created)));
    assert!(matches!(results[1], Ok(PutOutcome::Updated)));
    assert!(matches!(
        results[2],
        Err(StoreError::Record(RecordError::StaleSeq { .. }))
    ));
    assert_eq!(s.blocking().held_seq("a").unwrap(), Some(2));
    assert_eq!(s.term_count('c', "first"), 0);
    assert_eq!(s.term_count('c', "second"), 1);
    assert_eq!(s.len(), 1);
    assert!(s
        .blocking()
        .put_batch(&[], Origin::Remote, Expect::Any)
        .is_empty());
}
