//! What a query asks for, [`Understood`], and how much of a query is
//! read.

use crate::trust::TrustLevel;

/// Most bytes of a query that are read (the rest is dropped).
pub const MAX_QUERY_BYTES: usize = 1024;
/// Most words of a query that are read (the rest is dropped).
pub const MAX_QUERY_WORDS: usize = 64;

/// What a query asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Understood {
    /// The words left to rank with, in query order, separated by one
    /// space: stop words, filler, and language and trust phrases removed.
    pub text: String,
    /// Language constraints, canonical BCP 47, sorted and unique. A
    /// primary tag (`zh`) matches every tag with that primary subtag
    /// (`zh-Hans`, `zh-Hant`); see [`crate::understand::language_matches`].
    pub languages: Vec<String>,
    /// The capability ids the query names, sorted and unique. An agent
    /// offering all of them matches best.
    pub capabilities: Vec<String>,
    /// The lowest trust level the query accepts, when it names one.
    pub min_trust: Option<TrustLevel>,
    /// The words of `text` that did not name a capability (the subject,
    /// the objects: "legal", "contracts"), separated by one space. A
    /// ranker that matches [`Understood::capabilities`] as ids ranks these
    /// beside them, so a capability's own words do not count twice.
    pub rest: String,
    /// Terms for ranking: the words of `text`, then each capability id;
    /// unique, in that order.
    pub terms: Vec<String>,
    /// The subjects the query is about, as words of `text`: those its
    /// objects imply and subject words it says itself (`legal`), sorted.
    pub subjects: Vec<String>,
    /// Whether the query was longer than [`MAX_QUERY_BYTES`] or
    /// [`MAX_QUERY_WORDS`] and its tail was dropped.
    pub truncated: bool,
}

impl Understood {
    /// Whether nothing was understood and no text is left to rank with.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
            && self.languages.is_empty()
            && self.capabilities.is_empty()
            && self.min_trust.is_none()
    }
}
