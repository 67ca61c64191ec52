//! The text index (tantivy): what a free-text search ranks. BM25 over one
//! field holding an agent's name, description, capabilities (twice),
//! tags, publisher and operations, and over its tags alone (two posting
//! lists per query word); English stemming and CJK bigrams; filter terms, the
//! trust level and the record's expiry are indexed beside them so that
//! filters narrow and the text ranks in one query (expired records are
//! left out of the hits).
//!
//! The index follows the store's `records` tree exactly, and lives in
//! `text-index/` inside the store's directory:
//! - every store write marks its agent in the `pending` tree (id -> seq,
//!   in the write's own transaction) and then sends the id here;
//! - one writer thread applies what it is sent by reading the agent's
//!   *current* record (so the order in which concurrent writers' ids
//!   arrive does not matter: the last one applied reads the last write),
//!   commits in groups (at once when someone waits on `TextIndex::sync`,
//!   else every `COMMIT_EVERY`, `COMMIT_EVERY_BULK` while a bulk of
//!   changes keeps coming (see `Cadence`), or `COMMIT_OPS` changes),
//!   and only then clears the agents it committed from `pending`
//!   (compare-and-swap on the seq, so a newer write stays marked);
//! - at open, an index that is missing, of another `TEXT_VERSION`, or
//!   whose document count differs from the store's live count is rebuilt
//!   from `records`; otherwise the agents still in `pending` (a crash
//!   between a store write and the index commit) are re-applied.
//!
//! Nothing here runs on the async runtime's workers: the writer is its own
//! thread, and searches run on the caller's blocking thread.
//!
//! Its parts: `schema.rs` (the fields, where the index lives, its
//! version), `analysis.rs` (words, CJK bigrams, stemming), `query.rs`
//! (a search made into ranked clauses and a filter), `index.rs` (the open
//! index: searches, and the channel to the writer), `page.rs` (the page
//! filled in one pass over the segments), `writer.rs` (the writer thread,
//! the repair at open), `opening.rs` (when the index opens).

mod analysis;
mod index;
mod opening;
mod page;
mod query;
mod schema;
mod writer;

pub(super) use opening::Text;
pub use opening::TextIndexOpen;
pub use query::{TextQuery, MAX_QUERY_TERMS};

/// The names and descriptions of a document's operations (AIDIP
/// `operations`, A2A `skills`), as the index reads them.
pub fn operation_texts(document: &str) -> Vec<String> {
    writer::operations(document)
}

/// The terms `text` is indexed and searched as (words and CJK bigrams,
/// lower-cased, folded, stop words dropped, stemmed), distinct, in order,
/// at most `limit`: what an explanation compares a query's words with a
/// field's by.
pub fn terms(text: &str, limit: usize) -> Vec<String> {
    analysis::analyse(&mut analysis::analyzer(), text, limit)
}
#[cfg(test)]
pub(super) use schema::tie_order;

#[cfg(test)]
mod tests;
