//! The registry's use of the semantic model ([`crate::semantic`]) when
//! one is configured: a query's vector, the capability it means but does
//! not name, the agents nearest its meaning, and the re-ranking of the
//! candidates.
//!
//! The text index offers the agents that share the query's words (inside
//! the request's filters, trust floor and languages), widened by one
//! capability hint at most, and the best [`SEMANTIC_POOL`] of them are
//! re-ordered by their text score and cosine, weighted. What that leaves
//! of the page goes to the agents nearest in meaning inside the same
//! filters (the vector index, [`super::vectors`]), which may share no word
//! with the query, scored by their meaning alone: after every match by
//! words, so a page's scores fall within each part, not across the two. A
//! search without a model is untouched.

use std::path::Path;
use std::sync::Arc;

use crate::semantic::{Semantic, SemanticError};
use crate::store::{BlockingStore, CompactAgent, Filter, StoreError};
use crate::trust::TrustLevel;
use crate::understand::{Lexicon, Understood};

use super::vectors::VectorIndex;

/// How many of the text index's best candidates the model re-orders (at
/// least a page). Measured on the relevance sets: see BENCHMARKS.md.
pub const SEMANTIC_POOL: usize = 50;

/// A capability the query does not name in words is added as a ranking
/// hint (not a filter) when its vector is at least this close to the
/// query's. Measured on the relevance sets: see BENCHMARKS.md.
pub const HINT_MIN_COSINE: f32 = 0.6;

/// An agent that shares no word with a query is offered by meaning only
/// when its vector is at least this close to the query's (about, as the
/// vector index quantises). Measured on the relevance sets: see
/// BENCHMARKS.md.
pub const NEAR_MIN_COSINE: f32 = 0.2;

/// Reads the model in `dir` and embeds the query-understanding lexicon's
/// capabilities with it, ready for
/// [`Registry::with_semantic`](super::Registry::with_semantic). Reads up
/// to a few hundred MB: call it off the async runtime's workers.
///
/// # Errors
/// [`SemanticError`] from [`Semantic::load`].
pub fn load_semantic(dir: &Path) -> Result<Arc<Semantic>, SemanticError> {
    Ok(Arc::new(
        Semantic::load(dir)?.with_vocabulary(Lexicon::builtin().capabilities()),
    ))
}

/// A registry's semantic ranking: the model, the text index's weight in
/// the fusion, and the vector index of the store's agents.
pub(crate) struct SemanticRanking {
    model: Arc<Semantic>,
    lexical_weight: f64,
    vectors: VectorIndex,
}

impl SemanticRanking {
    /// Ranking with `model`, the text index's order weighing
    /// `lexical_weight` (0..1, clamped) in the fusion. Starts the vector
    /// index, which reads `store`'s agents on a thread of its own.
    pub(crate) fn start(store: &BlockingStore, model: Arc<Semantic>, lexical_weight: f64) -> Self {
        let vectors = {
            let model = model.clone();
            VectorIndex::start(store.clone(), model.dim(), move |agent| {
                model.embed(&agent_text(agent))
            })
        };
        SemanticRanking {
            model,
            lexical_weight: lexical_weight.clamp(0.0, 1.0),
            vectors,
        }
    }

    /// The semantic model.
    pub(crate) fn model(&self) -> &Arc<Semantic> {
        &self.model
    }

    /// The vector index of the store's agents.
    pub(crate) fn vectors(&self) -> &VectorIndex {
        &self.vectors
    }

    /// What the model makes of `u`, when `u` has words it knows.
    pub(crate) fn dense(&self, u: &Understood) -> Option<Dense<'_>> {
        let model = self.model.as_ref();
        let query = model.embed(&u.text);
        if query.iter().all(|x| *x == 0.0) {
            return None;
        }
        let hints = if u.capabilities.is_empty() {
            model
                .nearest(&query, 1, HINT_MIN_COSINE)
                .into_iter()
                .map(|(id, _)| id.to_owned())
                .collect()
        } else {
            Vec::new()
        };
        Some(Dense {
            model,
            lexical_weight: self.lexical_weight,
            vectors: &self.vectors,
            query,
            hints,
        })
    }
}

/// A query as the model sees it.
pub(crate) struct Dense<'a> {
    model: &'a Semantic,
    /// The text index's weight in the fusion.
    lexical_weight: f64,
    vectors: &'a VectorIndex,
    /// The query's unit vector.
    query: Vec<f32>,
    /// Capability ids the query means without naming them.
    pub(crate) hints: Vec<String>,
}

impl Dense<'_> {
    /// How many candidates to ask the text index for, for a page of
    /// `limit`.
    pub(crate) fn pool(limit: usize) -> usize {
        limit.max(SEMANTIC_POOL)
    }

    /// Whether the page's rest goes to the agents nearest in meaning: not
    /// when the operator gave meaning no weight (`semantic_weight` 1).
    pub(crate) fn fills(&self) -> bool {
        self.lexical_weight < 1.0
    }

    /// Up to `room` live, unexpired agents matching `filter` at
    /// `min_trust` or above (the store's [`BlockingStore::matching`])
    /// nearest the query's meaning, leaving out the `placed` agents `skip`
    /// says are already on the page (or examined), closest first, each
    /// scored by its meaning alone (`(1 - semantic_weight) × cosine`, as
    /// [`Dense::rank`] scores an agent no word matched). Only agents at
    /// [`NEAR_MIN_COSINE`] or closer: by the index's row to be looked at,
    /// and by the model's embedding of the record as it is now to be
    /// answered. The index is asked again for more while expired or
    /// skipped agents leave the page short, up to `4 × room + placed +
    /// 1024` neighbours.
    ///
    /// # Errors
    /// [`StoreError`] from reading a compact record.
    pub(crate) fn near(
        &self,
        store: &BlockingStore,
        (filter, min_trust): (&Filter, Option<TrustLevel>),
        now: u64,
        (room, placed): (usize, usize),
        skip: impl Fn(&str) -> bool,
    ) -> Result<Vec<(CompactAgent, f64)>, StoreError> {
        if room == 0 || !self.fills() {
            return Ok(Vec::new());
        }
        let allowed = store.matching(filter, min_trust);
        let meaning = 1.0 - self.lexical_weight;
        let most = 4 * room + placed + 1024;
        let mut ask = room + placed + 16;
        let mut read = std::collections::HashSet::new();
        // (index of arrival, agent, exact cosine)
        let mut found: Vec<(usize, CompactAgent, f32)> = Vec::new();
        'rounds: loop {
            let nearest = self.vectors.nearest(&self.query, &allowed, ask);
            let exhausted = nearest.len() < ask;
            for (ord, cosine) in nearest {
                if cosine < NEAR_MIN_COSINE {
                    break 'rounds;
                }
                if !read.insert(ord) {
                    continue;
                }
                let Some(agent) = store.compact_by_ordinal(ord)? else {
                    continue;
                };
                if agent.expires_at <= now || skip(&agent.id) {
                    continue;
                }
                // The row may be behind a write: the record as it is now
                // decides.
                let exact =
                    crate::semantic::dot(&self.query, &self.model.embed(&agent_text(&agent)));
                if exact >= NEAR_MIN_COSINE {
                    found.push((found.len(), agent, exact));
                    if found.len() == room {
                        break 'rounds;
                    }
                }
            }
            if exhausted || ask >= most {
                break;
            }
            ask = (ask * 4).min(most);
        }
        found.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
        Ok(found
            .into_iter()
            .map(|(_, agent, cosine)| (agent, meaning * f64::from(cosine)))
            .collect())
    }

    /// The cosine between the query's meaning and `agent`'s.
    pub(crate) fn similarity(&self, agent: &CompactAgent) -> f64 {
        f64::from(crate::semantic::dot(
            &self.query,
            &self.model.embed(&agent_text(agent)),
        ))
    }

    /// `candidates` (the text index's order) fused with their meaning's.
    pub(crate) fn rank(&self, candidates: Vec<(CompactAgent, f64)>) -> Vec<(CompactAgent, f64)> {
        self.model
            .rank(&self.query, candidates, agent_text, self.lexical_weight)
    }

    /// As [`Dense::rank`] over ids, each read back from `store` (an id the
    /// store no longer holds keeps its lexical place and no meaning).
    ///
    /// # Errors
    /// [`StoreError`] from reading a compact record.
    pub(crate) fn rank_ids(
        &self,
        store: &BlockingStore,
        ranked: Vec<(String, f64)>,
    ) -> Result<Vec<(String, f64)>, StoreError> {
        let mut texts = Vec::with_capacity(ranked.len());
        for (id, score) in ranked {
            let text = store.compact(&id)?.map(|a| agent_text(&a));
            texts.push(((id, text), score));
        }
        Ok(self
            .model
            .rank(
                &self.query,
                texts,
                |(_, text)| text.clone().unwrap_or_default(),
                self.lexical_weight,
            )
            .into_iter()
            .map(|((id, _), score)| (id, score))
            .collect())
    }
}

/// What an agent is embedded from: its name, description and
/// capabilities (`_` read as a space).
fn agent_text(a: &CompactAgent) -> String {
    let mut text = format!("{}. {}", a.name, a.description);
    for c in &a.capabilities {
        text.push_str(". ");
        text.push_str(&c.replace('_', " "));
    }
    text
}
