//! A free-text search made into tantivy queries: [`TextQuery`], the
//! ranked clauses of its words (each word in `all` and in `tags`, a
//! misspelt one corrected to the indexed words an edit or two away,
//! capability ids matched exactly) with the best score they can reach,
//! and the filter's terms as one conjunction.

use tantivy::query::{
    BoostQuery, ConstScoreQuery, FuzzyTermQuery, Occur, Query, RangeQuery, TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{Searcher, Term};

use super::schema::{text_err, trust_rank, Fields};
use crate::store::error::StoreError;
use crate::store::filter::Filter;
use crate::trust::TrustLevel;

/// Most distinct query terms ranked; the rest of a long query is ignored.
pub const MAX_QUERY_TERMS: usize = 32;
/// The weight of a capability id the query names, matched exactly.
const CAPABILITY_BOOST: f32 = 3.0;
/// The weight of a subject word of the query found in an agent's tags.
const SUBJECT_BOOST: f32 = 2.0;
/// Shortest query word (in characters) that is corrected when no record
/// has it: shorter words have too many neighbours one edit away.
const CORRECT_MIN_CHARS: usize = 5;
/// Shortest query word corrected up to two edits away (the stemmer can
/// turn one misspelling into two: "databse" is "databs", "database"
/// indexed as "databas"; "postgress" stays, but "postgres" is "postgr",
/// three edits away, and is not found).
const CORRECT_TWO_MIN_CHARS: usize = 8;
/// Most indexed words a misspelt query word is corrected to.
const MAX_CORRECTIONS: usize = 3;
/// Most dictionary words one correction looks at, over all segments.
const MAX_CORRECTION_SCAN: usize = 256;
/// The weight of a corrected word beside a word matched as typed.
const CORRECTION_BOOST: f32 = 0.8;

/// A free-text search: `text` ranks, `filter` narrows, records expired at
/// `now` (Unix seconds) are left out.
#[derive(Debug, Clone, Copy)]
pub struct TextQuery<'a> {
    /// The words to rank with.
    pub text: &'a str,
    /// Terms every result must carry.
    pub filter: &'a Filter,
    /// Most results.
    pub limit: usize,
    /// The time against which expiry is judged, in Unix seconds.
    pub now: u64,
    /// The lowest trust level answered, if any.
    pub min_trust: Option<TrustLevel>,
    /// Capability ids that rank (matched exactly, weighted like a word
    /// found in the capabilities), beside the text's words; not required.
    pub capabilities: &'a [String],
    /// Words of `text` that name the subject the query is about
    /// (`legal`, `travel`): found in an agent's tags they weigh
    /// [`SUBJECT_BOOST`] times a word, so an agent built for the subject
    /// ranks above one whose capability merely shares the word
    /// (`travel_planning`).
    pub subjects: &'a [String],
}

/// The words of `field` one edit away from `word` (a letter added,
/// dropped, changed, or two neighbours swapped; two edits for words of
/// [`CORRECT_TWO_MIN_CHARS`] or more), the most frequent first, at most
/// [`MAX_CORRECTIONS`]; read from each segment's term dictionary.
pub(super) fn corrections(
    searcher: &Searcher,
    field: Field,
    word: &str,
) -> Result<Vec<String>, StoreError> {
    let edits = if word.chars().count() >= CORRECT_TWO_MIN_CHARS {
        2
    } else {
        1
    };
    let automaton = FuzzyTermQuery::new(Term::from_field_text(field, word), edits, true)
        .automaton()
        .map_err(text_err)?;
    let mut found: std::collections::HashMap<Vec<u8>, u64> = std::collections::HashMap::new();
    'segments: for segment in searcher.segment_readers() {
        let index = segment.inverted_index(field).map_err(text_err)?;
        let mut stream = index
            .terms()
            .search(&automaton)
            .into_stream()
            .map_err(text_err)?;
        while stream.advance() {
            if found.len() >= MAX_CORRECTION_SCAN && !found.contains_key(stream.key()) {
                break 'segments;
            }
            *found.entry(stream.key().to_vec()).or_default() += u64::from(stream.value().doc_freq);
        }
    }
    let mut found: Vec<(Vec<u8>, u64)> = found
        .into_iter()
        .filter(|(k, _)| k != word.as_bytes())
        .collect();
    found.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(found
        .into_iter()
        .take(MAX_CORRECTIONS)
        .filter_map(|(k, _)| String::from_utf8(k).ok())
        .collect())
}

/// BM25's inverse document frequency, as tantivy computes it.
fn idf(doc_freq: u64, docs: u64) -> f64 {
    let (n, d) = (doc_freq as f64, docs as f64);
    (1.0 + (d - n + 0.5) / (n + 0.5)).ln()
}

/// The ranked clauses of a query: what the page is scored by.
pub(super) struct Ranked {
    /// Term queries, boosted: one flat union of them lets tantivy skip
    /// whole blocks of documents that cannot reach the top (block-max
    /// WAND) when no filter narrows.
    pub(super) clauses: Vec<Box<dyn Query>>,
    /// The best score a record can reach, which scores are divided by.
    pub(super) ceiling: f64,
    /// The postings the ranked terms hold, all told.
    pub(super) postings: u64,
}

/// Builds [`Ranked`] over one searcher.
struct Clauses<'a> {
    searcher: &'a Searcher,
    /// Documents in the index (at least 1).
    docs: u64,
    ranked: Ranked,
}

impl Clauses<'_> {
    /// Adds `text` in `field` at `boost` when some record has it; its
    /// best score (0 when no record has it).
    fn add(&mut self, field: Field, text: &str, boost: f32) -> Result<f64, StoreError> {
        let term = Term::from_field_text(field, text);
        let df = self.searcher.doc_freq(&term).map_err(text_err)?;
        self.ranked.postings += df;
        if df > 0 {
            self.ranked.clauses.push(Box::new(BoostQuery::new(
                Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)),
                boost,
            )));
        }
        Ok(if df > 0 {
            f64::from(boost) * idf(df, self.docs)
        } else {
            0.0
        })
    }
}

/// The ranked clauses of `terms` (each in `all`, and in `tags` weighing
/// [`SUBJECT_BOOST`] for the `subjects`; a word no record has replaced by
/// its corrections) and of `capabilities` (exactly, in `cap`), with the
/// ceiling they reach: a word no agent has still counts against every
/// result, so an agent matching half of the query scores about half.
pub(super) fn ranked(
    searcher: &Searcher,
    f: Fields,
    terms: &[String],
    subjects: &[String],
    capabilities: &[String],
) -> Result<Ranked, StoreError> {
    let docs = searcher.num_docs().max(1);
    // A capability id (its field keeps no term frequencies) makes tantivy
    // walk the plain union instead of block-max WAND, which measured
    // faster at a million agents (BENCHMARKS.md, section 8).
    let mut clauses = Clauses {
        searcher,
        docs,
        ranked: Ranked {
            clauses: Vec::new(),
            ceiling: 0.0,
            postings: 0,
        },
    };
    let mut ceiling = 0.0f64;
    for t in terms {
        let mut best = 0.0f64;
        best = best.max(clauses.add(f.all, t, 1.0)?);
        let tag_boost = if subjects.contains(t) {
            SUBJECT_BOOST
        } else {
            1.0
        };
        best = best.max(clauses.add(f.tags, t, tag_boost)?);
        // A word no record has is likely misspelt ("scaner",
        // "brwoser"): the indexed words an edit or two away rank instead,
        // weighing a little less than a word matched as typed.
        if best == 0.0 && t.chars().count() >= CORRECT_MIN_CHARS {
            // The ceiling counts the word at its full weight, so a
            // record matching only the correction scores less.
            let full = f64::from(CORRECTION_BOOST);
            for c in corrections(searcher, f.all, t)? {
                best = best.max(clauses.add(f.all, &c, CORRECTION_BOOST)? / full);
                best = best.max(clauses.add(f.tags, &c, CORRECTION_BOOST)? / full);
            }
        }
        // A word no agent has still counts against every result: an
        // agent matching half of the query scores about half.
        ceiling += if best > 0.0 { best } else { idf(0, docs) };
    }
    for c in capabilities {
        let best = clauses.add(f.cap, c, CAPABILITY_BOOST)?;
        ceiling += if best > 0.0 { best } else { idf(0, docs) };
    }
    let mut ranked = clauses.ranked;
    ranked.ceiling = ceiling;
    Ok(ranked)
}

/// The filter's terms (and the trust floor `min_trust`) as the clauses
/// of one conjunction, scoring nothing; empty when nothing narrows.
pub(super) fn filter_clauses(
    f: Fields,
    filter: &Filter,
    min_trust: Option<TrustLevel>,
) -> Vec<(Occur, Box<dyn Query>)> {
    let exact = |field: Field, value: &str| -> (Occur, Box<dyn Query>) {
        let q = TermQuery::new(
            Term::from_field_text(field, value),
            IndexRecordOption::Basic,
        );
        (
            Occur::Must,
            Box::new(ConstScoreQuery::new(Box::new(q), 0.0)),
        )
    };
    let mut must: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    for c in &filter.capabilities {
        must.push(exact(f.cap, c));
    }
    for t in &filter.tags {
        must.push(exact(f.tag, t));
    }
    for l in &filter.languages {
        must.push(exact(f.lang, &l.to_ascii_lowercase()));
    }
    if let Some(min) = min_trust {
        let trusted = RangeQuery::new(
            std::ops::Bound::Included(Term::from_field_u64(f.trust, trust_rank(min))),
            std::ops::Bound::Unbounded,
        );
        must.push((
            Occur::Must,
            Box::new(ConstScoreQuery::new(Box::new(trusted), 0.0)),
        ));
    }
    must
}

/// The filter's name among the sets read before (`page::KeepCache`): its
/// terms and trust floor.
pub(super) fn filter_key(filter: &Filter, min_trust: Option<TrustLevel>) -> String {
    format!(
        "{:?}\u{0}{:?}\u{0}{:?}\u{0}{:?}",
        filter.capabilities,
        filter.tags,
        filter.languages,
        min_trust.map(trust_rank)
    )
}
