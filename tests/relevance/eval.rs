//! Scoring a ranker against the judgements: precision@1, nDCG@10, and the
//! queries answered with nothing although relevant agents exist.
//!
//! A ranker is any `FnMut(&Q) -> Vec<String>`: agent ids, best first
//! (the current `Registry::search_local`, a new index, a mesh search). `Q` is a
//! set's query type ([`Asked`]): both relevance sets (the generated
//! population of `tests/relevance.rs` and the MCP servers of
//! `tests/relevance_mcp.rs`) are scored here.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use agentmesh::registry::{Registry, SearchQuery};
use agentmesh::semantic::Semantic;

/// The ids `registry` answers `search` with, best first: the node's
/// search as the API calls it.
pub(crate) async fn search_ids(registry: &Registry, search: &SearchQuery) -> Vec<String> {
    registry
        .search_local(search)
        .await
        .expect("a search over a healthy store succeeds")
        .items
        .into_iter()
        .map(|s| s.id)
        .collect()
}

/// The semantic model `AGENTMESH_SEMANTIC_MODEL` names (a build with
/// `--features semantic`), its directory, and `AGENTMESH_SEMANTIC_WEIGHT`
/// or the node's default weight; `None` when unset. Both sets score the
/// node's search with it beside the search without.
pub(crate) fn semantic_from_env() -> Option<(Arc<Semantic>, String, f64)> {
    let dir = std::env::var("AGENTMESH_SEMANTIC_MODEL").ok()?;
    let model = agentmesh::registry::load_semantic(dir.as_ref())
        .unwrap_or_else(|e| panic!("AGENTMESH_SEMANTIC_MODEL: {e}"));
    let weight = std::env::var("AGENTMESH_SEMANTIC_WEIGHT")
        .ok()
        .map(|w| w.parse().expect("AGENTMESH_SEMANTIC_WEIGHT is a number"))
        .unwrap_or(agentmesh::config::DEFAULT_SEMANTIC_WEIGHT);
    Some((model, dir, weight))
}

/// `registry` with the model, once its vector index has read the store
/// (at most five minutes: a hang, not a measurement, ends it).
pub(crate) async fn with_semantic(
    registry: &agentmesh::registry::Registry,
    model: Arc<Semantic>,
    weight: f64,
) -> agentmesh::registry::Registry {
    let registry = registry.clone().with_semantic(model, weight);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while registry.semantic_ready() != Some(true) {
        assert!(
            std::time::Instant::now() < deadline,
            "the vector index did not read the store in five minutes"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    registry
}

/// What the scores need of a set's query.
pub(crate) trait Asked {
    /// Its number in the set.
    fn n(&self) -> usize;
    /// The text a user types.
    fn text(&self) -> &str;
    /// How it is worded (for the per-shape breakdown).
    fn shape(&self) -> &'static str;
}

/// The cut-off of nDCG.
pub(crate) const K: usize = 10;

/// A query with the grade of every agent that has one above 0.
pub(crate) struct Judged<Q> {
    pub(crate) query: Q,
    pub(crate) grades: HashMap<String, u8>,
    /// The highest grade any agent has for it.
    pub(crate) best: u8,
    /// The ideal DCG@K (every graded agent, best first).
    ideal: f64,
}

impl<Q> Judged<Q> {
    /// `query` with its graded agents (grades of 0 are left out).
    pub(crate) fn new(query: Q, mut grades: HashMap<String, u8>) -> Self {
        grades.retain(|_, g| *g > 0);
        let mut sorted: Vec<u8> = grades.values().copied().collect();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let best = sorted.first().copied().unwrap_or(0);
        let ideal = dcg(sorted.into_iter().take(K));
        Self {
            query,
            grades,
            best,
            ideal,
        }
    }
}

fn gain(g: u8) -> f64 {
    f64::from((1u32 << g) - 1)
}

fn dcg(grades: impl Iterator<Item = u8>) -> f64 {
    grades
        .enumerate()
        .fold(0.0, |sum, (i, g)| sum + gain(g) / ((i + 2) as f64).log2())
}

/// One query's outcome.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    pub(crate) n: usize,
    pub(crate) text: String,
    pub(crate) shape: &'static str,
    /// The first result is of the best grade any agent has.
    pub(crate) hit_at_1: bool,
    pub(crate) ndcg: f64,
    /// Nothing came back although some agent is relevant.
    pub(crate) empty: bool,
    /// The grades of the first results.
    pub(crate) top: Vec<u8>,
}

/// The scores of a ranker over a judged set.
#[derive(Debug, Clone)]
pub(crate) struct Report {
    pub(crate) outcomes: Vec<Outcome>,
}

impl Report {
    pub(crate) fn precision_at_1(&self) -> f64 {
        mean(
            self.outcomes
                .iter()
                .map(|o| f64::from(u8::from(o.hit_at_1))),
        )
    }

    pub(crate) fn ndcg_at_10(&self) -> f64 {
        mean(self.outcomes.iter().map(|o| o.ndcg))
    }

    /// Queries answered with nothing although relevant agents exist.
    pub(crate) fn empty_with_relevant(&self) -> usize {
        self.outcomes.iter().filter(|o| o.empty).count()
    }

    /// `(queries, precision@1, nDCG@10)` per shape.
    pub(crate) fn by_shape(&self) -> BTreeMap<&'static str, (usize, f64, f64)> {
        let mut out: BTreeMap<&'static str, Vec<&Outcome>> = BTreeMap::new();
        for o in &self.outcomes {
            out.entry(o.shape).or_default().push(o);
        }
        out.into_iter()
            .map(|(shape, os)| {
                let p1 = mean(os.iter().map(|o| f64::from(u8::from(o.hit_at_1))));
                let ndcg = mean(os.iter().map(|o| o.ndcg));
                (shape, (os.len(), p1, ndcg))
            })
            .collect()
    }
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// Runs `ranker` on every judged query and scores what it answers. Ids
/// it returns twice count once, at their first place.
pub(crate) fn evaluate<Q: Asked>(
    judged: &[Judged<Q>],
    mut ranker: impl FnMut(&Q) -> Vec<String>,
) -> Report {
    let outcomes = judged
        .iter()
        .map(|j| {
            let mut ranked = ranker(&j.query);
            let mut seen = std::collections::HashSet::new();
            ranked.retain(|id| seen.insert(id.clone()));
            let top: Vec<u8> = ranked
                .iter()
                .take(K)
                .map(|id| j.grades.get(id).copied().unwrap_or(0))
                .collect();
            let ndcg = if j.ideal > 0.0 {
                dcg(top.iter().copied()) / j.ideal
            } else {
                1.0
            };
            Outcome {
                n: j.query.n(),
                text: j.query.text().to_owned(),
                shape: j.query.shape(),
                hit_at_1: j.best > 0 && top.first() == Some(&j.best),
                ndcg,
                empty: ranked.is_empty() && j.best > 0,
                top,
            }
        })
        .collect();
    Report { outcomes }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} queries: precision@1 {:.3}, nDCG@10 {:.3}, answered with nothing though relevant agents exist: {}",
            self.outcomes.len(),
            self.precision_at_1(),
            self.ndcg_at_10(),
            self.empty_with_relevant()
        )?;
        writeln!(
            f,
            "  {:<20} {:>7} {:>7} {:>8}",
            "shape", "queries", "p@1", "nDCG@10"
        )?;
        for (shape, (n, p1, ndcg)) in self.by_shape() {
            writeln!(f, "  {shape:<20} {n:>7} {p1:>7.3} {ndcg:>8.3}")?;
        }
        let mut worst: Vec<&Outcome> = self.outcomes.iter().collect();
        worst.sort_by(|a, b| a.ndcg.total_cmp(&b.ndcg).then(a.n.cmp(&b.n)));
        writeln!(f, "  lowest nDCG@10:")?;
        for o in worst.iter().take(12) {
            writeln!(
                f,
                "    {:.3} #{:<3} {:?} top grades {:?}",
                o.ndcg, o.n, o.text, o.top
            )?;
        }
        Ok(())
    }
}
