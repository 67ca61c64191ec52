//! Tests of the text index's life: repaired or rebuilt at open, opened
//! with the store or at the first search, and its threads' priority.

use std::sync::atomic::Ordering;

use super::*;

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
            max_bytes: None,
            log_signer: None,
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
