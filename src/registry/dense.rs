//! The registry's use of the semantic model ([`crate::semantic`]) when
//! one is configured: a query's vector, the capability it means but does
//! not name, and the re-ranking of the text index's candidates.
//!
//! The text index still decides which agents are candidates (inside the
//! request's filters, trust floor and languages); the model widens that
//! set by one capability hint at most and re-orders the best
//! [`SEMANTIC_POOL`] of it. A search without a model is untouched.

use std::path::Path;
use std::sync::Arc;

use crate::semantic::{Semantic, SemanticError};
use crate::store::{BlockingStore, CompactAgent, StoreError};
use crate::understand::{Lexicon, Understood};

use super::Registry;

/// How many of the text index's best candidates the model re-orders (at
/// least a page). Measured on the relevance sets: see BENCHMARKS.md.
pub const SEMANTIC_POOL: usize = 50;

/// A capability the query does not name in words is added as a ranking
/// hint (not a filter) when its vector is at least this close to the
/// query's. Measured on the relevance sets: see BENCHMARKS.md.
pub const HINT_MIN_COSINE: f32 = 0.6;

/// Reads the model in `dir` and embeds the query-understanding lexicon's
/// capabilities with it, ready for [`Registry::with_semantic`]. Reads up
/// to a few hundred MB: call it off the async runtime's workers.
///
/// # Errors
/// [`SemanticError`] from [`Semantic::load`].
pub fn load_semantic(dir: &Path) -> Result<Arc<Semantic>, SemanticError> {
    Ok(Arc::new(
        Semantic::load(dir)?.with_vocabulary(Lexicon::builtin().capabilities()),
    ))
}

impl Registry {
    /// The same registry, ranking free text with `model` as well, the
    /// text index's order weighing `lexical_weight` (0..1, clamped) in
    /// the fusion.
    #[must_use]
    pub fn with_semantic(mut self, model: Arc<Semantic>, lexical_weight: f64) -> Self {
        self.semantic = Some((model, lexical_weight.clamp(0.0, 1.0)));
        self
    }

    /// The semantic model, when one is configured.
    pub fn semantic(&self) -> Option<&Arc<Semantic>> {
        self.semantic.as_ref().map(|(m, _)| m)
    }

    /// What the model makes of `u`, when there is a model and `u` has
    /// words it knows.
    pub(crate) fn dense(&self, u: &Understood) -> Option<Dense<'_>> {
        let (model, lexical_weight) = self.semantic.as_ref()?;
        let (model, lexical_weight) = (model.as_ref(), *lexical_weight);
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
            lexical_weight,
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
