//! Tests of the text ranking: BM25 with filters, the filter sets read
//! before, ties, expired records, corrections, subject words, and what
//! the index follows.

use super::*;

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
