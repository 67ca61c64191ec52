//! Tests of the store's async face: writes, reads and searches through
//! `spawn_blocking`, a panic in a blocking task, and a write waiting for
//! a flush without blocking the runtime.

use super::*;

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
