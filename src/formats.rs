//! The discovery formats beside ADP and AIDIP, read into the normalised
//! [`Descriptor`](crate::descriptor::Descriptor) with their provenance
//! ([`DocumentFormat`](crate::descriptor::DocumentFormat)). Pure code: the
//! crawler fetches within its limits and hands the bytes here; nothing in
//! this module touches the network or the store. Each parser bounds what
//! it reads and refuses with a [`FormatError`] whose [`Reason`] code the
//! crawl report and the import summary show. Versions implemented are in
//! `proto/README.md` ("Other discovery formats").
//!
//! - [`a2a`]: A2A Agent Cards (1.0 and the 0.2.x / 0.3 shape) and their
//!   JWS signatures.
//! - [`aid`]: the AID `_agent.{domain}` TXT record (`v=aid2`, `v=aid1`).
//! - [`ard`]: ARD v0.9 `ai-catalog.json` catalogs and their entries.
//! - [`dns_aid`]: DNS-AID SVCB records under `_agents.{domain}` and its
//!   agent index.
//! - [`mcp`]: MCP Registry `server.json` (schema 2025-12-11) and the
//!   registry's list API responses.

pub mod a2a;
pub mod aid;
pub mod ard;
pub mod dns_aid;
pub mod mcp;

use crate::trust::Reason;

/// Why a document of one of these formats is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct FormatError {
    /// The stable reason code.
    pub reason: Reason,
    /// What is wrong, for people (names the member when there is one).
    pub message: String,
}

impl FormatError {
    /// A refusal with `reason`.
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

/// Most characters kept of a name.
pub const MAX_NAME_CHARS: usize = 200;
/// Most characters kept of a description.
pub const MAX_DESCRIPTION_CHARS: usize = 4000;
/// Most capability ids or tags kept from one document.
pub const MAX_TERMS: usize = 64;

/// `text` cut to at most `max` characters (on a character boundary).
pub fn bounded(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => text[..at].to_owned(),
        None => text.to_owned(),
    }
}

/// Normalised terms (capability ids, tags) from `raw`: sorted, unique, at
/// most [`MAX_TERMS`].
pub fn terms<'a>(raw: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out = crate::descriptor::normalise_terms(raw);
    out.truncate(MAX_TERMS);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_cuts_on_characters_and_terms_normalise() {
        assert_eq!(bounded("héllo", 2), "hé");
        assert_eq!(bounded("ab", 5), "ab");
        assert_eq!(
            terms(["Route Planning", "maps", "MAPS", " "]),
            ["maps", "route_planning"]
        );
        let many: Vec<String> = (0..100).map(|i| format!("t{i:03}")).collect();
        assert_eq!(terms(many.iter().map(String::as_str)).len(), MAX_TERMS);
    }
}
