//! The second relevance set: real, third-party MCP server
//! descriptions, natural queries in several shapes and languages, graded
//! judgements made by reading the descriptions, scored as precision@1,
//! nDCG@10 and the queries answered with nothing though relevant servers
//! exist, for the node's search and for a plain BM25 baseline in the same
//! run.
//!
//! - `relevance/mcp.rs`: the files, the import, the three rankers, the
//!   judging pool;
//! - `relevance/mcp/`: `corpus.ndjson` (and `SOURCE.md`: where it came
//!   from, its licence, how it was trimmed, how to regenerate it),
//!   `topics.tsv`, `queries.tsv`, `grades.tsv` (what the judge gave, by
//!   reading) and `judgements.tsv` (per query, written from it by
//!   `judge.py`);
//! - `relevance/eval.rs`: the metrics, shared with `tests/relevance.rs`.
//!
//! `cargo test --test integration -- relevance_mcp:: --nocapture` prints the scores;
//! `AGENTMESH_RELEVANCE_POOL=FILE cargo test --test integration -- relevance_mcp:: --ignored`
//! writes the judging pool (the top 20 of each ranker per query) to FILE.

#[path = "relevance/mcp.rs"]
mod mcp;

use crate::relevance::eval;

use std::collections::BTreeSet;
use std::time::Instant;

use eval::{evaluate, Asked, Judged, Report};
use mcp::{Query, Server};

/// Floors measured over the 3,129 servers and 256 queries (printed by
/// `cargo test --test integration -- relevance_mcp:: --nocapture`; BENCHMARKS.md,
/// section 7): precision@1 0.688, nDCG@10 0.678 (0.680 and 0.682 before
/// the servers the vector index's answers brought were judged too, in
/// December 2026: more relevant servers known, a higher ideal), the same run after run
/// (the text index settles ties at a page's last place in a fixed order,
/// so the segment layout no longer moves them), 2 queries answered with nothing
/// though relevant servers exist, none of them among the 48 written in
/// Chinese, Japanese, Korean or Spanish. Before the translations table and
/// the correction of misspelt words: 0.520 to 0.523, 0.556 to 0.558, 35
/// empty (32 in other languages). The targets are 0.9, 0.85 and
/// none: these floors hold what is (less a margin), so that a change that
/// makes it worse fails.
const NODE_MIN_P1: f64 = 0.67;
const NODE_MIN_NDCG: f64 = 0.67;
/// Queries the node answers with nothing though relevant servers exist
/// (none of them written in Chinese, Japanese, Korean or Spanish).
const NODE_MAX_EMPTY: usize = 2;
/// The plain BM25 baseline, measured in the same run (one segment, the
/// same every run): precision@1 0.520 (133 of 256),
/// nDCG@10 0.494 (0.504 before the vector index's pool was judged), 44 empty. Its floors keep the baseline itself honest (a
/// broken baseline would make the node look good).
const BM25_MIN_P1: f64 = 0.51;
const BM25_MIN_NDCG: f64 = 0.49;

struct Set {
    corpus: Vec<Server>,
    judged: Vec<Judged<Query>>,
}

fn set() -> Set {
    let dir = mcp::dir();
    let topics = mcp::topics(&dir.join("topics.tsv")).unwrap();
    let queries = mcp::queries(&dir.join("queries.tsv"), &topics).unwrap();
    let corpus = mcp::corpus(&dir.join("corpus.ndjson")).unwrap();
    let judged = mcp::judgements(&dir.join("judgements.tsv"), queries, &corpus).unwrap();
    Set { corpus, judged }
}

#[test]
fn the_set_has_200_varied_queries_each_with_a_relevant_server() {
    let Set { corpus, judged } = set();
    assert!(corpus.len() >= 3000, "{} servers", corpus.len());
    let ids: BTreeSet<&str> = corpus.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids.len(), corpus.len(), "two servers of one name");
    assert!(judged.len() >= 200, "{} queries", judged.len());
    let mut texts = BTreeSet::new();
    for j in &judged {
        assert!(
            texts.insert((j.query.text.clone(), j.query.tags.clone())),
            "asked twice: {:?}",
            j.query
        );
    }
    for shape in mcp::SHAPES {
        let n = judged.iter().filter(|j| j.query.shape == *shape).count();
        assert!(n >= 7, "{shape}: {n} queries");
    }
    for lang in mcp::OTHER_LANGUAGES {
        let n = judged.iter().filter(|j| j.query.shape == *lang).count();
        assert!(n >= 10, "{lang}: {n} queries");
    }
    let topics = mcp::topics(&mcp::dir().join("topics.tsv")).unwrap();
    let asked: BTreeSet<&str> = judged.iter().map(|j| j.query.topic.as_str()).collect();
    let never: Vec<&String> = topics
        .keys()
        .filter(|t| !asked.contains(t.as_str()))
        .collect();
    assert!(never.is_empty(), "topics never asked: {never:?}");
    let weak: Vec<String> = judged
        .iter()
        .filter(|j| j.best < 2)
        .map(|j| format!("#{} {:?} (best grade {})", j.query.n, j.query.text, j.best))
        .collect();
    assert!(
        weak.is_empty(),
        "queries without a relevant server: {weak:#?}"
    );
    // A filtered query's relevant servers are inside its filter.
    for j in judged.iter().filter(|j| !j.query.tags.is_empty()) {
        for id in j.grades.keys() {
            let s = corpus.iter().find(|s| &s.id == id).unwrap();
            assert!(
                j.query.tags.iter().all(|t| s.tags.contains(t)),
                "#{}: {id} is graded but outside {:?}",
                j.query.n,
                j.query.tags
            );
        }
    }
}

/// Writes `text` to a fresh file and parses it with `parse`, answering the
/// error's message.
fn refusal<T: std::fmt::Debug>(
    text: &str,
    parse: impl FnOnce(&std::path::Path) -> anyhow::Result<T>,
) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("file.tsv");
    std::fs::write(&path, text).unwrap();
    format!("{:#}", parse(&path).expect_err("refused"))
}

#[test]
fn malformed_set_files_are_refused_naming_the_line() {
    let topics = mcp::topics(&mcp::dir().join("topics.tsv")).unwrap();
    let queries = |t: &str| refusal(t, |p| mcp::queries(p, &topics));
    assert!(queries("1\tweather\tplain\n").contains("file.tsv:1: 3 fields, 5 expected"));
    assert!(queries("2\tweather\tplain\t-\train\n").contains("id 2, 1 expected"));
    assert!(queries("1\tknitting\tplain\t-\tyarn\n").contains("unknown topic"));
    assert!(queries("1\tweather\tshouted\t-\tRAIN\n").contains("unknown shape"));
    assert!(queries("1\tweather\tplain\tlang=es\train\n").contains("neither - nor tags=a,b"));
    assert!(queries("1\tweather\tplain\ttags=npm\train\n").contains("a filtered query"));
    assert!(queries("1\tweather\tplain\t \train\n").contains("an empty field"));
    let long = format!("1\tweather\tplain\t-\t{}\n", "a".repeat(2000));
    assert!(queries(&long).contains("longer than 1024 bytes"));

    let corpus = vec![Server {
        id: "mcp:io.example/one".into(),
        name: "io.example/one".into(),
        title: None,
        description: "One.".into(),
        tags: vec!["mcp".into()],
    }];
    let one = || {
        vec![Query {
            n: 1,
            topic: "weather".into(),
            shape: "plain",
            tags: vec![],
            text: "rain".into(),
        }]
    };
    let judgements = |t: &str| refusal(t, |p| mcp::judgements(p, one(), &corpus).map(|_| ()));
    assert!(judgements("2\tmcp:io.example/one\t3\n").contains("no query 2"));
    assert!(judgements("1\tmcp:io.example/two\t3\n").contains("not in the corpus"));
    assert!(judgements("1\tmcp:io.example/one\t4\n").contains("grade 4 (0 to 3)"));
    assert!(judgements("1\tmcp:io.example/one\tgood\n").contains("grade \"good\""));
    assert!(
        judgements("1\tmcp:io.example/one\t3\n1\tmcp:io.example/one\t2\n").contains("judged twice")
    );
    assert!(judgements("# nothing\n").contains("queries never judged: [1]"));
}

/// The answers of the queries written in another language that came back
/// empty though relevant servers exist.
fn empty_in_other_languages(r: &Report) -> Vec<String> {
    r.outcomes
        .iter()
        .filter(|o| o.empty && mcp::OTHER_LANGUAGES.contains(&o.shape))
        .map(|o| format!("#{} {:?}", o.n, o.text))
        .collect()
}

/// Results of the node's top 10 that nobody judged (they count as 0):
/// many of them mean the ranking changed and the pool wants judging again.
fn unjudged(
    judged: &[Judged<Query>],
    answers: &[Vec<String>],
    pooled: &[BTreeSet<String>],
) -> usize {
    judged
        .iter()
        .zip(answers)
        .map(|(j, a)| {
            a.iter()
                .take(mcp::TOP)
                .filter(|id| !pooled[j.query.n - 1].contains(*id))
                .count()
        })
        .sum()
}

/// The queries whose first result a second ranking changed, better and
/// worse by its grade (an agent nobody judged, marked `?`, counts as 0):
/// what to read before trusting a change of the averages.
fn first_places_moved(
    judged: &[Judged<Query>],
    before: &[Vec<String>],
    after: &[Vec<String>],
    pooled: &[BTreeSet<String>],
) -> String {
    let grade = |j: &Judged<Query>, id: Option<&String>| -> String {
        match id {
            None => "none".to_owned(),
            Some(id) => match j.grades.get(id) {
                Some(g) => format!("{id} ({g})"),
                None if pooled[j.query.n() - 1].contains(id) => format!("{id} (0)"),
                None => format!("{id} (?)"),
            },
        }
    };
    let (mut better, mut worse) = (Vec::new(), Vec::new());
    for j in judged {
        let (b, a) = (
            before[j.query.n() - 1].first(),
            after[j.query.n() - 1].first(),
        );
        if b == a {
            continue;
        }
        let g = |id: Option<&String>| id.and_then(|id| j.grades.get(id)).copied().unwrap_or(0);
        let line = format!(
            "    #{:<3} {:?}: {} -> {}",
            j.query.n(),
            j.query.text(),
            grade(j, b),
            grade(j, a)
        );
        match g(a).cmp(&g(b)) {
            std::cmp::Ordering::Greater => better.push(line),
            std::cmp::Ordering::Less => worse.push(line),
            std::cmp::Ordering::Equal => {}
        }
    }
    format!(
        "first places the model moved: {} better, {} worse\n  better:\n{}\n  worse:\n{}",
        better.len(),
        worse.len(),
        better.join("\n"),
        worse.join("\n")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_search_scores_over_the_mcp_servers() {
    let Set { corpus, judged } = set();
    let t = Instant::now();
    let loaded = mcp::load(&mcp::dir().join("corpus.ndjson")).await.unwrap();
    let load = t.elapsed();
    assert_eq!(
        loaded.summary.created,
        corpus.len() as u64,
        "{:?}",
        loaded.summary
    );

    let qs: Vec<&Query> = judged.iter().map(|j| &j.query).collect();
    let t = Instant::now();
    let node_answers = mcp::node_all(&loaded.registry, &qs, mcp::TOP).await;
    let node_time = t.elapsed();
    let node = evaluate(&judged, |q| node_answers[q.n() - 1].clone());

    let bm25 = mcp::Bm25::new(&corpus).unwrap();
    let baseline = evaluate(&judged, |q| bm25.search(q, mcp::TOP));

    let pooled: Vec<BTreeSet<String>> =
        mcp::judged_pool(&mcp::dir().join("judgements.tsv"), judged.len()).unwrap();
    println!(
        "MCP relevance set: {} servers (imported in {:.1} s), {} queries",
        corpus.len(),
        load.as_secs_f64(),
        judged.len()
    );
    println!(
        "Registry::search_local, {:.1} ms/query (results in the top 10 nobody judged: {}):\n{node}",
        node_time.as_secs_f64() * 1000.0 / judged.len() as f64,
        unjudged(&judged, &node_answers, &pooled)
    );
    println!("plain BM25 over name, title and description:\n{baseline}");
    if let Some((model, dir, weight)) = eval::semantic_from_env() {
        let registry = eval::with_semantic(&loaded.registry, model, weight).await;
        let t = Instant::now();
        let answers = mcp::node_all(&registry, &qs, mcp::TOP).await;
        let time = t.elapsed();
        let report = evaluate(&judged, |q| answers[q.n() - 1].clone());
        println!(
            "with the semantic model {dir} (text index weight {weight}), {:.1} ms/query (results in the top 10 nobody judged: {}):\n{report}",
            time.as_secs_f64() * 1000.0 / judged.len() as f64,
            unjudged(&judged, &answers, &pooled)
        );
        println!(
            "{}",
            first_places_moved(&judged, &node_answers, &answers, &pooled)
        );
    }
    let empty_other = empty_in_other_languages(&node);
    println!(
        "queries in Chinese, Japanese, Korean or Spanish answered with nothing: {empty_other:#?} \
         (plain BM25: {})",
        empty_in_other_languages(&baseline).len()
    );

    assert!(node.precision_at_1() >= NODE_MIN_P1, "{node}");
    assert!(node.ndcg_at_10() >= NODE_MIN_NDCG, "{node}");
    assert!(node.empty_with_relevant() <= NODE_MAX_EMPTY, "{node}");
    // None written in another language is answered with nothing.
    assert!(empty_other.is_empty(), "{empty_other:#?}");
    assert!(baseline.precision_at_1() >= BM25_MIN_P1, "{baseline}");
    assert!(baseline.ndcg_at_10() >= BM25_MIN_NDCG, "{baseline}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes the judging pool for a judge to read: AGENTMESH_RELEVANCE_POOL=FILE"]
async fn write_the_judging_pool() {
    let path = std::env::var("AGENTMESH_RELEVANCE_POOL").expect("AGENTMESH_RELEVANCE_POOL=FILE");
    let dir = mcp::dir();
    let topics = mcp::topics(&dir.join("topics.tsv")).unwrap();
    let queries = mcp::queries(&dir.join("queries.tsv"), &topics).unwrap();
    let corpus = mcp::corpus(&dir.join("corpus.ndjson")).unwrap();
    let loaded = mcp::load(&dir.join("corpus.ndjson")).await.unwrap();
    let bm25 = mcp::Bm25::new(&corpus).unwrap();
    let mut pools = mcp::pool(&loaded.registry, &bm25, &corpus, &queries).await;
    // With a semantic model, what the node answers with it is pooled too.
    if let Some((model, _, weight)) = eval::semantic_from_env() {
        let registry = eval::with_semantic(&loaded.registry, model, weight).await;
        let all: Vec<&Query> = queries.iter().collect();
        let answers = mcp::node_all(&registry, &all, mcp::POOL_DEPTH).await;
        for (pool, answer) in pools.iter_mut().zip(answers) {
            for id in answer {
                if !pool.contains(&id) {
                    pool.push(id);
                }
            }
        }
    }
    let lines: Vec<String> = queries
        .iter()
        .zip(pools)
        .map(|(q, pool)| {
            serde_json::json!({
                "query": q.n,
                "topic": q.topic,
                "shape": q.shape,
                "tags": q.tags,
                "text": q.text,
                "pool": pool,
            })
            .to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    println!("{} queries' pools written to {path}", queries.len());
}
