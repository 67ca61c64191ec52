//! What a search placed on its page: each record with the pass that
//! placed it and the scores it was placed by, which the page's last step
//! (`find.rs`, `settle`) and its explanation (`explain.rs`) both read.

use serde::Serialize;
use utoipa::ToSchema;

use super::signals::Signals;
use crate::store::CompactAgent;

/// The pass of a search that placed a result, in the order they fill a
/// page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Pass {
    /// The query's words and the capability ids it names, ranked by the
    /// text index inside the request's filters and the languages the
    /// query names.
    Words,
    /// The same, without the languages the query names: what filled the
    /// page when too few agents support them.
    WordsAnyLanguage,
    /// Every word of the query as text (capability words too), for agents
    /// that declare no capability ids.
    AllWords,
    /// Nearest in meaning (a semantic model is configured): shares no word
    /// with the query.
    Meaning,
    /// No word to rank with: the filter walk, in order of first arrival.
    Filters,
}

/// One record a search picked, where it was placed from.
pub(super) struct Placed {
    /// Its score, when the search ranks.
    pub(super) score: Option<f64>,
    pub(super) agent: CompactAgent,
    /// The pass that placed it.
    pub(super) pass: Pass,
    /// The text index's own score, before any fusion with meaning.
    pub(super) bm25: Option<f64>,
    /// The score its pass gave, before the signals weighed it.
    pub(super) ranked: Option<f64>,
    /// The signals that weighed it (ranked searches only).
    pub(super) signals: Option<Signals>,
}

impl Placed {
    /// `agent` placed by `pass` at `score` (the text index's own `bm25`),
    /// not yet weighed by its signals.
    pub(super) fn new(
        score: Option<f64>,
        agent: CompactAgent,
        pass: Pass,
        bm25: Option<f64>,
    ) -> Self {
        Self {
            score,
            agent,
            pass,
            bm25,
            ranked: score,
            signals: None,
        }
    }
}
