//! The relevance set: natural-language queries with graded
//! judgements over a generated population, scored as precision@1, nDCG@10
//! and the queries answered with nothing though relevant agents exist.
//!
//! - `relevance/population.rs`: the seeded agents and their ground truth;
//! - `relevance/queries.rs`: the queries and `grade` (how a judgement
//!   follows from the ground truth);
//! - `relevance/eval.rs`: `evaluate` over any ranker
//!   (`FnMut(&Query) -> Vec<agent id>`);
//! - `relevance/harness.rs`: the population in a real store and registry
//!   (1,000 agents here, to stay fast in debug builds),
//!   the node's search, and `run(n)`, which
//!   `benches/relevance.rs` calls at 100,000 agents.
//!
//! `cargo test --test integration -- relevance:: --nocapture` prints the scores.

#[path = "relevance/eval.rs"]
pub(crate) mod eval;
#[path = "relevance/harness.rs"]
mod harness;
#[path = "relevance/population.rs"]
mod population;
#[path = "relevance/queries.rs"]
mod queries;

use std::collections::BTreeSet;

use eval::evaluate;
use population::{agent, population, Truth, ANCHORS, KINDS};
use queries::{capabilities_asked, grade, judge, queries, Intent, Query};

/// Floors measured over 1,000 agents (printed by `cargo test --test
/// relevance -- --nocapture`; the same in every run measured). The former
/// scan ranking measured precision@1 0.538, nDCG@10 0.583 and 6 queries
/// answered with nothing; the text index with query understanding 0.873,
/// 0.837 and 4; with capability words also ranked as text for records
/// without capability ids 0.873, 0.840, 4; with the subjects that objects
/// imply ("patient files": medical) 0.904, 0.859 and none; with ties at a
/// page's last place settled in a fixed order, misspelt words corrected,
/// the translations table and subjects weighing more in tags 0.912,
/// 0.855 and none. The targets: 0.9,
/// 0.85, none, at 100k agents.
const CURRENT_MIN_P1: f64 = 0.90;
const CURRENT_MIN_NDCG: f64 = 0.85;

#[test]
fn the_set_has_200_queries_each_with_a_fully_relevant_agent() {
    let qs = queries();
    assert!(qs.len() >= 200, "{} queries", qs.len());
    let mut texts = BTreeSet::new();
    let twice: Vec<&Query> = qs
        .iter()
        .filter(|q| !texts.insert((q.text.as_str(), format!("{:?}", q.filter))))
        .collect();
    assert!(twice.is_empty(), "asked twice: {twice:?}");
    for shape in queries::SHAPES {
        let n = qs.iter().filter(|q| q.shape == *shape).count();
        assert_eq!(n, KINDS.len(), "{shape}: one query per capability");
    }
    let asked = capabilities_asked(&qs);
    for k in KINDS {
        assert!(asked.contains(k.id), "no query asks for {}", k.id);
    }
    let judged = judge(&population(ANCHORS), qs);
    let weak: Vec<String> = judged
        .iter()
        .filter(|j| j.best < 3)
        .map(|j| format!("#{} {:?} (best grade {})", j.query.n, j.query.text, j.best))
        .collect();
    assert!(
        weak.is_empty(),
        "queries without a grade-3 agent: {weak:#?}"
    );
}

#[test]
fn the_population_is_deterministic_and_prefix_stable() {
    let a = population(50);
    let b = population(3000);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.doc, y.doc);
    }
    assert_eq!(agent(1234).doc, b[1234].doc);
    let languages: BTreeSet<&str> = b.iter().flat_map(|a| a.truth.languages.clone()).collect();
    assert!(languages.len() >= 14, "{languages:?}");
}

fn truth(caps: &[&'static str], domain: Option<&'static str>, langs: &[&'static str]) -> Truth {
    Truth {
        capabilities: caps.to_vec(),
        domain,
        languages: langs.to_vec(),
        trust: agentmesh::trust::TrustLevel::Unverified,
    }
}

#[test]
fn the_drafts_example_is_graded_as_the_issue_asks() {
    let q = queries()
        .into_iter()
        .find(|q| {
            q.text
                .starts_with("I need an agent that can summarize long legal documents in Chinese")
        })
        .expect("the draft's example is in the set");
    let chinese_legal_summariser =
        grade(&q, &truth(&["summarization"], Some("legal"), &["zh-Hant"]));
    let english_legal_summariser = grade(&q, &truth(&["summarization"], Some("legal"), &["en"]));
    let generic_summariser = grade(&q, &truth(&["summarization"], None, &["en"]));
    let chinese_translator = grade(&q, &truth(&["translation"], Some("legal"), &["zh-Hans"]));
    assert_eq!(chinese_legal_summariser, 3);
    assert!(chinese_legal_summariser > english_legal_summariser);
    assert!(english_legal_summariser > generic_summariser);
    assert_eq!(chinese_translator, 0);
}

#[test]
fn grades_follow_the_rules() {
    let q = |filter, min_trust| Query {
        n: 0,
        text: String::new(),
        filter,
        intent: Intent {
            capabilities: vec!["ocr"],
            languages: vec!["pt".into()],
            domain: Some("medical"),
            min_trust,
        },
        shape: "test",
    };
    let plain = q(None, None);
    assert_eq!(
        grade(&plain, &truth(&["ocr"], Some("medical"), &["pt-BR"])),
        3
    );
    assert_eq!(
        grade(&plain, &truth(&["ocr"], Some("legal"), &["pt-BR"])),
        2
    );
    assert_eq!(grade(&plain, &truth(&["ocr"], Some("legal"), &["en"])), 1);
    // A related capability with everything else right.
    assert_eq!(
        grade(
            &plain,
            &truth(&["document_parsing"], Some("medical"), &["pt"])
        ),
        1
    );
    assert_eq!(
        grade(&plain, &truth(&["document_parsing"], None, &["pt"])),
        0
    );
    assert_eq!(
        grade(&plain, &truth(&["chat"], Some("medical"), &["pt"])),
        0
    );
    // Outside the filter or below the trust: 0.
    let filtered = q(
        Some(queries::FilterSpec {
            capabilities: vec!["translation"],
            languages: vec![],
        }),
        None,
    );
    assert_eq!(
        grade(&filtered, &truth(&["ocr"], Some("medical"), &["pt"])),
        0
    );
    let trusted = q(None, Some(agentmesh::trust::TrustLevel::KeyVerified));
    assert_eq!(
        grade(&trusted, &truth(&["ocr"], Some("medical"), &["pt"])),
        0
    );
}

#[test]
fn the_metrics_score_an_ideal_an_empty_and_a_reversed_ranker() {
    let agents = population(ANCHORS);
    let judged = judge(&agents, queries());
    let by_grade = |q: &Query, best_first: bool| {
        let j = &judged[q.n];
        let mut ids: Vec<(&String, &u8)> = j.grades.iter().collect();
        ids.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        if !best_first {
            ids.reverse();
        }
        ids.into_iter()
            .map(|(id, _)| id.clone())
            .collect::<Vec<_>>()
    };
    let ideal = evaluate(&judged, |q| by_grade(q, true));
    assert_eq!(ideal.precision_at_1(), 1.0);
    assert!((ideal.ndcg_at_10() - 1.0).abs() < 1e-9);
    assert_eq!(ideal.empty_with_relevant(), 0);
    let reversed = evaluate(&judged, |q| by_grade(q, false));
    assert!(
        reversed.ndcg_at_10() < 0.9 * ideal.ndcg_at_10(),
        "{reversed}"
    );
    let empty = evaluate(&judged, |_| Vec::new());
    assert_eq!(empty.precision_at_1(), 0.0);
    assert_eq!(empty.ndcg_at_10(), 0.0);
    assert_eq!(empty.empty_with_relevant(), judged.len());
    // An id returned twice counts once.
    let twice = evaluate(&judged, |q| {
        let best = by_grade(q, true).remove(0);
        vec![best.clone(), best]
    });
    assert!(twice.ndcg_at_10() < ideal.ndcg_at_10());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_search_scores_over_1000_agents() {
    let run = harness::run(ANCHORS).await.unwrap();
    println!("{run}");
    let c = &run.current;
    assert!(c.precision_at_1() >= CURRENT_MIN_P1, "{c}");
    assert!(c.ndcg_at_10() >= CURRENT_MIN_NDCG, "{c}");
    assert_eq!(c.empty_with_relevant(), 0, "{c}");
    // The draft's example: the only grade-3 agents are Chinese legal
    // summarisers, so a 3 first means one ranks above English legal
    // summarisers, Chinese translators and generic summarisers.
    let draft = |r: &eval::Report| {
        r.outcomes
            .iter()
            .find(|o| {
                o.text
                    .starts_with("I need an agent that can summarize long legal")
            })
            .expect("the draft's example is in the set")
            .top
            .clone()
    };
    println!(
        "the draft's example, grades of the top results: {:?}",
        draft(c)
    );
    assert_eq!(draft(c).first(), Some(&3), "{c}");
}
