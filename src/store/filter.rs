//! [`Filter`]: the terms a search narrows by, normalised as descriptors
//! are, and the posting-list prefixes they select.

use super::postings::{prefix, FIELD_CAPABILITY, FIELD_LANGUAGE, FIELD_TAG};
use super::visibility::Audience;
use crate::descriptor;
use crate::trust::TrustLevel;

/// Filter terms for a search: AND across and within fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Capability ids the agent must all have.
    pub capabilities: Vec<String>,
    /// Tags the agent must all have.
    pub tags: Vec<String>,
    /// Languages the agent must all support; `zh` matches `zh-Hant`.
    pub languages: Vec<String>,
    /// Answer agents this node dropped for staleness too
    /// ([`FreshState::Dropped`](super::FreshState::Dropped)); they are left out by default.
    pub include_stale: bool,
    /// Answer only agents at this trust level or above (the walk and the
    /// text ranking both keep it, beside any floor a query names).
    pub min_trust: Option<TrustLevel>,
    /// Answer only agents the liveness probe (this node's at its last
    /// try, or a trusted peer's signed result) found `alive` at this time
    /// (Unix seconds) or later (`alive_within`).
    pub alive_since: Option<u64>,
    /// Whom the answer is for: unlisted agents, and private ones the
    /// audience is not entitled to, are left out (by default everything
    /// not public: what a peer may see).
    pub audience: Audience,
}

impl Filter {
    /// Normalises raw filter values the way descriptors are normalised.
    ///
    /// # Errors
    /// The first language value that is not a well-formed BCP 47 tag.
    pub fn new<'a>(
        capabilities: impl IntoIterator<Item = &'a str>,
        tags: impl IntoIterator<Item = &'a str>,
        languages: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, String> {
        Ok(Self {
            capabilities: descriptor::normalise_terms(capabilities),
            tags: descriptor::normalise_terms(tags),
            languages: descriptor::normalise_languages(languages)?,
            include_stale: false,
            min_trust: None,
            alive_since: None,
            audience: Audience::Public,
        })
    }

    /// Whether the filter has no terms (everything matches).
    pub fn is_empty(&self) -> bool {
        self.capabilities.is_empty() && self.tags.is_empty() && self.languages.is_empty()
    }

    /// The posting-list prefixes of the filter's terms, sorted, once each.
    pub(super) fn prefixes(&self) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        out.extend(
            self.capabilities
                .iter()
                .map(|t| prefix(FIELD_CAPABILITY, t)),
        );
        out.extend(self.tags.iter().map(|t| prefix(FIELD_TAG, t)));
        out.extend(
            self.languages
                .iter()
                .map(|t| prefix(FIELD_LANGUAGE, &t.to_ascii_lowercase())),
        );
        out.sort();
        out.dedup();
        out
    }
}
