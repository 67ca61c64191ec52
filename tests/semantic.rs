//! Semantic ranking (`--features semantic`) with a tiny model this test
//! builds: a Model2Vec directory (a word-level `tokenizer.json`, a
//! `model.safetensors` whose rows are hand-made concept vectors, a
//! `config.json`), loaded by the real `agentmesh node` through
//! `AGENTMESH_SEARCH__SEMANTIC_MODEL`, searched over HTTP. A node without
//! the model answers the same requests, for comparison. Also: every way a
//! model directory can be refused.
//!
//! `cargo test --features semantic --test integration -- semantic::` (CI runs it; without
//! the feature this file is empty).
#![cfg(feature = "semantic")]

use crate::common;

use std::path::Path;

use agentmesh::semantic::{Semantic, SemanticError};
use common::{Api, TestNode};
use serde_json::{json, Value};

/// The concepts of the tiny model, one dimension each.
const SPEECH: usize = 0;
const TRANSCRIBE: usize = 1;
const SUMMARY: usize = 2;
const GENERIC: usize = 3;
const FOOD: usize = 4;
const LEGAL: usize = 5;
const TRANSLATION: usize = 6;
const MEETING: usize = 7;
const DIM: usize = 8;

/// The tiny model's vocabulary: each word and its concepts' weights.
/// "spoken" and "memos" are known to the model and to no phrase of the
/// query-understanding lexicon.
const WORDS: &[(&str, &[(usize, f32)])] = &[
    ("spoken", &[(SPEECH, 0.5), (TRANSCRIBE, 1.0)]),
    ("memos", &[(TRANSCRIBE, 0.8), (GENERIC, 0.2)]),
    ("speech", &[(SPEECH, 1.0)]),
    ("voice", &[(SPEECH, 1.0)]),
    ("audio", &[(SPEECH, 1.0)]),
    ("recordings", &[(SPEECH, 0.5), (TRANSCRIBE, 0.5)]),
    ("transcribe", &[(TRANSCRIBE, 1.0)]),
    ("transcription", &[(TRANSCRIBE, 1.0)]),
    ("transcript", &[(TRANSCRIBE, 1.0)]),
    ("dictation", &[(TRANSCRIBE, 1.0)]),
    ("dictate", &[(TRANSCRIBE, 1.0)]),
    ("meetings", &[(MEETING, 1.0)]),
    ("summarize", &[(SUMMARY, 1.0)]),
    ("summarization", &[(SUMMARY, 1.0)]),
    ("summary", &[(SUMMARY, 1.0)]),
    ("digest", &[(SUMMARY, 1.0)]),
    ("notes", &[(GENERIC, 1.0)]),
    ("archived", &[(GENERIC, 1.0)]),
    ("text", &[(GENERIC, 1.0)]),
    ("shopping", &[(FOOD, 1.0)]),
    ("grocery", &[(FOOD, 1.0)]),
    ("recipe", &[(FOOD, 1.0)]),
    ("legal", &[(LEGAL, 1.0)]),
    ("contracts", &[(LEGAL, 1.0)]),
    ("translate", &[(TRANSLATION, 1.0)]),
    ("translation", &[(TRANSLATION, 1.0)]),
];

fn tokenizer_json() -> Value {
    let mut vocab = serde_json::Map::new();
    vocab.insert("[UNK]".into(), json!(0));
    for (i, (word, _)) in WORDS.iter().enumerate() {
        vocab.insert((*word).into(), json!(i + 1));
    }
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [{
            "id": 0, "content": "[UNK]", "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": true
        }],
        "normalizer": {"type": "Lowercase"},
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null,
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
    })
}

/// A safetensors file holding `rows` × `dim` little-endian f32s under
/// `embeddings` (the header padded with spaces to 8 bytes, as the format
/// allows).
fn safetensors(rows: usize, dim: usize, values: &[f32]) -> Vec<u8> {
    let mut header = json!({
        "embeddings": {
            "dtype": "F32",
            "shape": [rows, dim],
            "data_offsets": [0, values.len() * 4]
        }
    })
    .to_string();
    while !header.len().is_multiple_of(8) {
        header.push(' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Writes the tiny model into `dir`.
fn write_model(dir: &Path) {
    let mut rows = vec![0.0f32; DIM]; // [UNK]
    for (_, concepts) in WORDS {
        let mut row = [0.0f32; DIM];
        for (c, w) in *concepts {
            row[*c] = *w;
        }
        rows.extend_from_slice(&row);
    }
    std::fs::write(dir.join("tokenizer.json"), tokenizer_json().to_string()).unwrap();
    std::fs::write(
        dir.join("model.safetensors"),
        safetensors(WORDS.len() + 1, DIM, &rows),
    )
    .unwrap();
    std::fs::write(
        dir.join("config.json"),
        json!({"model_type": "model2vec", "normalize": true, "hidden_dim": DIM}).to_string(),
    )
    .unwrap();
}

fn model_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_model(dir.path());
    dir
}

#[test]
fn the_tiny_model_loads_and_means_what_it_was_built_to() {
    let dir = model_dir();
    let model = agentmesh::registry::load_semantic(dir.path()).unwrap();
    assert_eq!(model.dim(), DIM);
    let spoken = model.embed("spoken memos");
    let speech = model.embed("Transcribe voice recordings");
    let food = model.embed("grocery shopping");
    assert!(agentmesh::semantic::dot(&spoken, &speech) > 0.8);
    assert!(agentmesh::semantic::dot(&spoken, &food).abs() < 1e-6);
    // Words it does not know make a zero vector, not an error.
    assert!(model.embed("zzz qqq").iter().all(|x| *x == 0.0));
    // The lexicon's capabilities were embedded: speech_to_text's phrases
    // ("transcribe", "dictation", ...) are the nearest to "spoken memos".
    let nearest = model.nearest(&spoken, 3, agentmesh::registry::HINT_MIN_COSINE);
    assert_eq!(
        nearest.first().map(|n| n.0),
        Some("speech_to_text"),
        "{nearest:?}"
    );
}

/// Writes the tiny model, then replaces `file` with `bytes`.
fn broken(file: &str, bytes: &[u8]) -> SemanticError {
    let dir = model_dir();
    std::fs::write(dir.path().join(file), bytes).unwrap();
    Semantic::load(dir.path()).unwrap_err()
}

#[test]
fn a_broken_model_directory_is_refused_with_what_is_wrong() {
    let cases: Vec<(SemanticError, &str)> = vec![
        (broken("tokenizer.json", b"{not json"), "tokenizer"),
        (broken("config.json", b"[1"), "config.json"),
        (
            broken("model.safetensors", b"short"),
            "shorter than its header",
        ),
        (
            broken("model.safetensors", &safetensors(2, 2, &[0.0; 3])),
            "safetensors",
        ),
        (
            broken("model.safetensors", &safetensors(1, 5000, &[])),
            "5000 wide",
        ),
        (
            broken("model.safetensors", &safetensors(0, DIM, &[])),
            "0 embedding rows",
        ),
    ];
    for (err, says) in cases {
        assert!(
            matches!(err, SemanticError::Invalid { .. }),
            "{err:?} should be Invalid"
        );
        assert!(err.to_string().contains(says), "{err} should say {says:?}");
    }
    // A file past its limit is refused before it is read (a sparse file).
    let dir = model_dir();
    let f = std::fs::File::create(dir.path().join("config.json")).unwrap();
    f.set_len(2 << 20).unwrap();
    match Semantic::load(dir.path()).unwrap_err() {
        SemanticError::TooLarge { bytes, max, .. } => assert_eq!((bytes, max), (2 << 20, 1 << 20)),
        other => panic!("{other:?}"),
    }
    // A missing file is named.
    let dir = model_dir();
    std::fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    let err = Semantic::load(dir.path()).unwrap_err();
    assert!(err.to_string().contains("model.safetensors"), "{err}");
}

fn agent(id: &str, name: &str, description: &str, capabilities: &[&str]) -> Value {
    json!({
        "id": id,
        "name": name,
        "description": description,
        "capabilities": capabilities,
        "endpoint": format!("https://agents.example.net/{id}"),
        "supported_languages": ["en"],
        "inputs": {"type": "object", "properties": {"text": {"type": "string"}}},
        "outputs": {"type": "object"},
    })
}

/// The agents both nodes hold.
fn agents() -> Vec<Value> {
    vec![
        agent(
            "scribe",
            "Scribe",
            "Speech to text of voice recordings.",
            &["speech_to_text"],
        ),
        agent(
            "groceries",
            "Notes digest",
            "Summarize notes: shopping notes, grocery notes, recipe notes.",
            &["summarization"],
        ),
        agent(
            "meetings",
            "Meeting notes",
            "Summarize notes of voice recordings and meetings.",
            &["summarization"],
        ),
        agent(
            "archive",
            "Archive",
            "Summarize archived notes.",
            &["summarization"],
        ),
        agent(
            "counsel",
            "Counsel",
            "Reviews legal contracts.",
            &["legal_review"],
        ),
        agent("babel", "Babel", "Translate text.", &["translation"]),
    ]
}

async fn search(api: &Api, query: &str) -> Vec<(String, f64)> {
    let r = api
        .search(json!({"query": query, "top": 10, "scope": "local"}))
        .await;
    r.expect(200)
        .as_array()
        .expect("a list of results")
        .iter()
        .map(|i| {
            (
                i["id"].as_str().unwrap().to_owned(),
                i["score"].as_f64().unwrap(),
            )
        })
        .collect()
}

fn ids(results: &[(String, f64)]) -> Vec<&str> {
    results.iter().map(|(id, _)| id.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_the_model_finds_and_ranks_by_meaning() {
    let dir = model_dir();
    let plain = TestNode::start();
    let semantic = TestNode::start_with_env(&[(
        "AGENTMESH_SEARCH__SEMANTIC_MODEL",
        dir.path().to_str().unwrap(),
    )]);
    for node in [&plain, &semantic] {
        let api = node.api();
        for a in agents() {
            api.register(&a).await;
        }
    }
    let (plain, semantic) = (plain.api(), semantic.api());

    // No word of the query is in any agent, nor a phrase of the lexicon:
    // the text index alone finds nothing; with the model the query
    // means speech_to_text, and Scribe is found.
    assert!(search(&plain, "spoken memos").await.is_empty());
    let found = search(&semantic, "spoken memos").await;
    assert_eq!(ids(&found).first(), Some(&"scribe"), "{found:?}");

    // Three summarizers share the word "notes". By words the grocery one
    // leads (it says "notes" four times); by meaning the one about voice
    // recordings is the closest to "spoken" and the grocery one the
    // farthest: fused, the meetings summarizer comes first.
    let lexical = search(&plain, "summarize notes spoken").await;
    assert_eq!(
        ids(&lexical)[..3],
        ["groceries", "meetings", "archive"],
        "the premise: the text index's own order ({lexical:?})"
    );
    let fused = search(&semantic, "summarize notes spoken").await;
    assert_eq!(ids(&fused).first(), Some(&"meetings"), "{fused:?}");
    for (_, score) in &fused {
        assert!((0.0..=1.0).contains(score), "{fused:?}");
    }

    // A query the model knows nothing of ranks as the text index does.
    assert_eq!(
        ids(&search(&semantic, "Counsel").await),
        ids(&search(&plain, "Counsel").await)
    );

    // /health and /metrics say how the vector index is: read, holding
    // every agent, running; a node without a model says nothing of one.
    let n = agents().len() as u64;
    index_holds(&semantic, n, "the index reads every agent").await;
    // `ready` is set just after the first read's last rows.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let health = loop {
        let health = semantic.get("/health").await.expect(200).clone();
        if health["semantic"]["ready"] == json!(true) || std::time::Instant::now() > deadline {
            break health;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(
        health["semantic"],
        json!({"ready": true, "agents": n, "stopped": false}),
        "{health}"
    );
    assert!(plain.get("/health").await.expect(200)["semantic"].is_null());
    // The family is exported, at 0 while the index runs (the unit test in
    // `registry/vectors.rs` makes one stop).
    let metrics = semantic.get("/metrics").await.text;
    assert!(
        metrics
            .lines()
            .any(|l| l == "agentmesh_semantic_index_stopped 0"),
        "{metrics}"
    );

    // /resolve ranks through the same model.
    let r = semantic
        .post("/resolve", &json!({"intent": "spoken memos", "top": 3}))
        .await;
    let candidates = common::ids(&r.expect(200)["candidates"]);
    assert_eq!(
        candidates.first().map(String::as_str),
        Some("scribe"),
        "{candidates:?}"
    );
}

/// Searches `query` on `api` until `ok` holds of the results, for at most
/// 20 s (the vector index takes each write from the store on its own
/// thread, moments after the write answers).
async fn search_until(
    api: &Api,
    query: &str,
    what: &str,
    ok: impl Fn(&[(String, f64)]) -> bool,
) -> Vec<(String, f64)> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let found = search(api, query).await;
        if ok(&found) {
            return found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: {query:?} still answers {found:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vector_index_finds_an_agent_that_shares_no_word_and_follows_its_changes() {
    let dir = model_dir();
    let plain = TestNode::start();
    let mut semantic_node = TestNode::start_with_env(&[(
        "AGENTMESH_SEARCH__SEMANTIC_MODEL",
        dir.path().to_str().unwrap(),
    )]);
    // Dictaphone shares no word with "spoken memos" and declares no
    // capability the lexicon knows, so neither the text index nor the
    // capability the query means (speech_to_text) reaches it.
    let speech = agent(
        "dictaphone",
        "Dictaphone",
        "Transcription of dictation.",
        &["audio_pipeline"],
    );
    let groceries = agent(
        "dictaphone",
        "Dictaphone",
        "Grocery shopping.",
        &["audio_pipeline"],
    );
    for node in [&plain, &semantic_node] {
        let api = node.api();
        api.register(&speech).await;
        api.register(&agent(
            "babel",
            "Babel",
            "Translate text.",
            &["translation"],
        ))
        .await;
        api.register(&agent(
            "counsel",
            "Counsel",
            "Reviews legal contracts.",
            &["legal_review"],
        ))
        .await;
    }
    let (plain, semantic) = (plain.api(), semantic_node.api());
    assert!(
        search(&plain, "spoken memos").await.is_empty(),
        "the premise: no word in common"
    );

    let found = search_until(&semantic, "spoken memos", "found by meaning", |f| {
        !f.is_empty()
    })
    .await;
    assert_eq!(ids(&found), ["dictaphone"], "the others mean nothing close");
    assert!((0.0..=1.0).contains(&found[0].1), "{found:?}");
    // Inside the request's filters only.
    let r = semantic
        .search(json!({"query": "spoken memos", "top": 10, "scope": "local",
                       "filters": {"capabilities": ["translation"]}}))
        .await;
    assert!(r.ids().is_empty(), "{:?}", r.ids());
    // /resolve finds it the same way.
    let r = semantic
        .post("/resolve", &json!({"intent": "spoken memos", "top": 3}))
        .await;
    assert_eq!(common::ids(&r.expect(200)["candidates"]), ["dictaphone"]);

    // Rewritten to mean something else, it is no longer found by meaning;
    // written back, found again; deleted, gone.
    semantic.post("/agents", &groceries).await.expect(200);
    search_until(&semantic, "spoken memos", "the update followed", |f| {
        f.is_empty()
    })
    .await;
    semantic.post("/agents", &speech).await.expect(200);
    search_until(&semantic, "spoken memos", "found again", |f| !f.is_empty()).await;
    // Deleted: gone from the answers at once (read back from the store),
    // and from the index (the operator's gauge: Babel and Counsel left).
    semantic.delete("/agents/dictaphone").await.expect(204);
    assert!(search(&semantic, "spoken memos").await.is_empty());
    index_holds(&semantic, 2, "the deletion").await;
    // After a restart the index is read from the store again.
    semantic.post("/agents", &speech).await.expect(201);
    drop(semantic);
    semantic_node.restart();
    let semantic = semantic_node.api();
    search_until(&semantic, "spoken memos", "read again at start", |f| {
        ids(f) == ["dictaphone"]
    })
    .await;
    semantic.delete("/agents/dictaphone").await.expect(204);
    index_holds(&semantic, 2, "the deletion after the restart").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meaning_fills_the_page_past_the_agents_the_words_already_placed() {
    let dir = model_dir();
    let node = TestNode::start_with_env(&[(
        "AGENTMESH_SEARCH__SEMANTIC_MODEL",
        dir.path().to_str().unwrap(),
    )]);
    let api = node.api();
    // Seventy agents say the query's words, and mean exactly what it
    // means: they lead by words, and they are also the nearest in
    // meaning, ahead of Dictaphone, which shares no word with it.
    for i in 0..70 {
        api.register(&agent(
            &format!("memo-{i:02}"),
            &format!("Memo {i}"),
            "Spoken memos.",
            &["memo_keeping"],
        ))
        .await;
    }
    api.register(&agent(
        "dictaphone",
        "Dictaphone",
        "Transcription of dictation.",
        &["audio_pipeline"],
    ))
    .await;
    index_holds(&api, 71, "every agent embedded").await;
    // The words fill 70 places; the one left goes to meaning, past the 70
    // nearest that are already on the page (more than the 50 the
    // vector index was asked for when it was first written).
    let r = api
        .search(json!({"query": "spoken memos", "top": 71, "scope": "local"}))
        .await;
    let found = r.ids();
    assert_eq!(found.len(), 71, "{found:?}");
    assert_eq!(found.last().map(String::as_str), Some("dictaphone"));
    assert!(found[..70].iter().all(|id| id.starts_with("memo-")));
    // Explained: the words placed the memos (BM25 and the cosine both
    // said), meaning alone placed Dictaphone.
    let r = api
        .search(json!({"query": "spoken memos", "top": 71, "scope": "local", "explain": true}))
        .await;
    let items = r.expect(200).as_array().unwrap();
    let (first, last) = (&items[0]["explain"], &items[70]["explain"]);
    assert_eq!(first["placed_by"], "words", "{first}");
    assert!(first["bm25"].as_f64().is_some() && first["semantic"].as_f64().is_some());
    assert_eq!(last["placed_by"], "meaning", "{last}");
    assert!(last.get("bm25").is_none(), "{last}");
    assert!(last["semantic"].as_f64().is_some_and(|c| c > 0.0), "{last}");
}

/// Waits (20 s at most) until the node's vector index holds `n` agents, as
/// its `/metrics` say.
async fn index_holds(api: &Api, n: u64, what: &str) {
    let line = format!("agentmesh_semantic_index_agents {n}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let metrics = api.get("/metrics").await.text;
        if metrics.lines().any(|l| l == line) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: no {line:?} in {metrics}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[test]
fn a_node_with_a_broken_model_refuses_to_start_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let out = common::run(
        common::agentmesh()
            .args(["node", "--data-dir"])
            .arg(data.path())
            .args([
                "--listen",
                "127.0.0.1:0",
                "--p2p-listen",
                "/ip4/127.0.0.1/tcp/0",
            ])
            .env("AGENTMESH_SEARCH__SEMANTIC_MODEL", dir.path()),
        std::time::Duration::from_secs(60),
        "a node with a missing model",
    );
    out.assert_failure("a node with a missing model");
    assert!(
        out.stderr.contains("tokenizer.json"),
        "the missing file is named: {}",
        out.stderr
    );
}
