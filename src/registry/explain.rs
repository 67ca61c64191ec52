//! Why a result stands where it does, for a search asked with
//! `explain: true`: the pass that placed it, its text and meaning scores,
//! the signals that weighed it, the query's terms each of its fields
//! holds, and what understanding the query did that bears on it. Made
//! on the search's own thread from what placed the page, so it says what
//! ranked it, not what a second look would find.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use super::dense::Dense;
use super::placed::{Pass, Placed};
use super::signals::Signals;
use crate::record::RecordBody;
use crate::store::{operation_texts, text_terms, BlockingStore, CompactAgent, StoreError};
use crate::understand::{language_matches, Understood};

/// Most query terms an explanation compares.
const MAX_TERMS: usize = 32;

/// Why one result stands where it does.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Explain {
    /// The pass that placed it.
    pub placed_by: Pass,
    /// The text index's score: BM25 over the query's terms, divided by
    /// the best score a record could reach, 0..1 (absent when meaning or
    /// the filters alone placed it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bm25: Option<f64>,
    /// The cosine between the query's meaning and the agent's, when a
    /// semantic model is configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub semantic: Option<f64>,
    /// The score its pass gave (with a semantic model, BM25 and meaning
    /// fused; by meaning alone, `(1 - semantic_weight) × cosine`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranked: Option<f64>,
    /// What weighed on its score, and by how much.
    pub signals: Signals,
    /// `ranked × signals`: what placed it within its pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weighted: Option<f64>,
    /// Whether the `score` answered is lower than `weighted`, capped by
    /// the one above it (an earlier pass placed that one first): the
    /// scores of a page never rise down it.
    pub capped: bool,
    /// The query's terms (as indexed: lower-cased, stemmed) found in each
    /// field of the agent that holds any (`name`, `description`,
    /// `capabilities`, `tags`, `publisher`, `operations`).
    pub matched: BTreeMap<&'static str, Vec<String>>,
    /// The query's terms found in none of its fields.
    pub unmatched: Vec<String>,
    /// What the understanding of the query did that bears on this agent,
    /// one sentence each.
    pub rules: Vec<String>,
}

/// The explanation of each record of `placed`, in order: `u` is what was
/// understood of the query, `dense` the semantic model's view of it.
///
/// # Errors
/// [`StoreError`] from reading a record or its signals.
pub(super) fn all(
    store: &BlockingStore,
    placed: &[Placed],
    u: &Understood,
    dense: Option<&Dense<'_>>,
) -> Result<Vec<Explain>, StoreError> {
    let mut terms = text_terms(&u.text, MAX_TERMS);
    for c in &u.capabilities {
        for t in text_terms(c, MAX_TERMS) {
            if !terms.contains(&t) {
                terms.push(t);
            }
        }
    }
    placed
        .iter()
        .map(|p| one(store, p, u, &terms, dense))
        .collect()
}

/// The explanation of one placed record.
fn one(
    store: &BlockingStore,
    p: &Placed,
    u: &Understood,
    terms: &[String],
    dense: Option<&Dense<'_>>,
) -> Result<Explain, StoreError> {
    let signals = match &p.signals {
        Some(s) => s.clone(),
        None => Signals::of(store, &p.agent)?,
    };
    let weighted = p.ranked.map(|r| r * signals.weight());
    let capped = matches!((p.score, weighted), (Some(s), Some(w)) if s + 1e-12 < w);
    let (publisher, operations) = match store.get(&p.agent.id)? {
        Some(stored) => match &stored.body {
            RecordBody::Descriptor(d) => {
                (d.descriptor.publisher.clone(), operation_texts(&d.document))
            }
            _ => (None, Vec::new()),
        },
        None => (None, Vec::new()),
    };
    let a = &p.agent;
    let fields: [(&'static str, Vec<String>); 6] = [
        ("name", found(terms, &a.name)),
        ("description", found(terms, &a.description)),
        ("capabilities", found(terms, &a.capabilities.join(" "))),
        ("tags", found(terms, &a.tags.join(" "))),
        (
            "publisher",
            found(terms, publisher.as_deref().unwrap_or_default()),
        ),
        ("operations", found(terms, &operations.join(" "))),
    ];
    let unmatched = terms
        .iter()
        .filter(|t| !fields.iter().any(|(_, f)| f.contains(t)))
        .cloned()
        .collect();
    let matched = fields.into_iter().filter(|(_, f)| !f.is_empty()).collect();
    Ok(Explain {
        placed_by: p.pass,
        bm25: p.bm25,
        semantic: dense.map(|d| d.similarity(a)),
        ranked: p.ranked,
        weighted,
        capped,
        matched,
        unmatched,
        rules: rules(u, a, &signals, dense),
        signals,
    })
}

/// The terms of `terms` that `text` holds once analysed.
fn found(terms: &[String], text: &str) -> Vec<String> {
    if text.is_empty() {
        return Vec::new();
    }
    let held = text_terms(text, usize::MAX);
    terms.iter().filter(|t| held.contains(t)).cloned().collect()
}

/// What the query's understanding did that bears on `a`.
fn rules(u: &Understood, a: &CompactAgent, s: &Signals, dense: Option<&Dense<'_>>) -> Vec<String> {
    let mut out = Vec::new();
    for l in &u.languages {
        if a.languages.iter().any(|held| language_matches(l, held)) {
            out.push(format!(
                "the query names language {l}: the agent supports it"
            ));
        } else {
            out.push(format!(
                "the query names language {l}: the agent does not say it supports it, \
                 so it comes after those that do"
            ));
        }
    }
    for c in &u.capabilities {
        if a.capabilities.contains(c) {
            out.push(format!(
                "the query names capability {c}: the agent offers it (matched as an id)"
            ));
        } else {
            out.push(format!(
                "the query names capability {c}: the agent does not declare it"
            ));
        }
    }
    for subject in &u.subjects {
        if a.tags.iter().any(|t| t.eq_ignore_ascii_case(subject)) {
            out.push(format!(
                "the query is about {subject}: the agent's tags say so (weighs twice a word)"
            ));
        }
    }
    if let Some(min) = u.min_trust {
        out.push(format!(
            "the query asks for {min} or above: the agent is {}",
            s.trust
        ));
    }
    if let Some(d) = dense {
        for hint in &d.hints {
            out.push(format!(
                "the model reads the query as meaning capability {hint}: ranked beside its words"
            ));
        }
    }
    if s.not_serving() {
        out.push(format!(
            "its status is {}: it comes after every agent that is serving",
            s.status.as_deref().unwrap_or_default()
        ));
    }
    if u.truncated {
        out.push("the query was longer than is read: its tail was left out".to_owned());
    }
    out
}
