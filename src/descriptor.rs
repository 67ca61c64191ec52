//! The normalised view of an agent that both document formats map into.
//!
//! AIDIP registrations ([`crate::aidip`]) and ADP `agent.json` documents
//! ([`crate::adp`]) become one [`Descriptor`]: capability ids lower-cased
//! and trimmed, tags lower-cased, languages as canonical BCP 47 tags. The
//! store indexes these fields; the original document travels beside it in
//! the record, byte for byte.

use serde::{Deserialize, Serialize};

/// Which document format a descriptor was made from: its provenance
/// (`source_format` in results). The wire names are in
/// `proto/records.cddl` (`document-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
pub enum DocumentFormat {
    /// An AIDIP agent metadata document (registered through the API).
    #[serde(rename = "aidip")]
    Aidip,
    /// An ADP `agent.json` document (crawled from DNS).
    #[serde(rename = "adp")]
    Adp,
    /// An A2A Agent Card (crawled from `/.well-known/agent-card.json`, or
    /// the older `/.well-known/agent.json` form).
    #[serde(rename = "a2a")]
    A2a,
    /// An entry of an ARD `ai-catalog.json` (crawled).
    #[serde(rename = "ard")]
    Ard,
    /// A DNS-AID SVCB record under `_agents.{domain}` (crawled).
    #[serde(rename = "dns-aid")]
    DnsAid,
    /// An AID `_agent.{domain}` TXT record (`v=aid1`), crawled.
    #[serde(rename = "aid")]
    Aid,
    /// An MCP Registry `server.json` (imported).
    #[serde(rename = "mcp-registry")]
    McpRegistry,
}

impl DocumentFormat {
    /// Every format.
    pub const ALL: [DocumentFormat; 7] = [
        Self::Aidip,
        Self::Adp,
        Self::A2a,
        Self::Ard,
        Self::DnsAid,
        Self::Aid,
        Self::McpRegistry,
    ];

    /// The formats a crawl of a domain reads (the others are registered
    /// or imported).
    pub const CRAWLED: [DocumentFormat; 5] =
        [Self::Adp, Self::A2a, Self::Ard, Self::DnsAid, Self::Aid];

    /// The wire name (`aidip`, `adp`, `a2a`, `ard`, `dns-aid`, `aid`,
    /// `mcp-registry`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Aidip => "aidip",
            Self::Adp => "adp",
            Self::A2a => "a2a",
            Self::Ard => "ard",
            Self::DnsAid => "dns-aid",
            Self::Aid => "aid",
            Self::McpRegistry => "mcp-registry",
        }
    }

    /// The id prefix reserved for agents of this format: ids that only a
    /// crawl (or, for `mcp:`, an import) gives. `None` for AIDIP
    /// registrations (any other id) and ARD entries (`urn:air:` ids their
    /// publishers assign).
    pub fn id_prefix(self) -> Option<&'static str> {
        match self {
            Self::Adp => Some("agent:"),
            Self::A2a => Some("a2a:"),
            Self::DnsAid => Some("dns-aid:"),
            Self::Aid => Some("aid:"),
            Self::McpRegistry => Some("mcp:"),
            Self::Aidip | Self::Ard => None,
        }
    }

    /// The format a legacy record's id implies (records written before the
    /// other formats existed are ADP or AIDIP).
    pub fn of_legacy_id(id: &str) -> Self {
        if id.starts_with("agent:") {
            Self::Adp
        } else {
            Self::Aidip
        }
    }
}

impl std::fmt::Display for DocumentFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The id prefixes only crawls and imports give (`agent:`, `a2a:`,
/// `dns-aid:`, `aid:`, `mcp:`): an AIDIP registration may not use them.
pub fn reserved_prefix(id: &str) -> Option<&'static str> {
    DocumentFormat::ALL
        .iter()
        .filter_map(|f| f.id_prefix())
        .find(|p| id.starts_with(p))
}

/// The normalised agent descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Descriptor {
    /// The agent id: `agent:{domain}` for DNS-anchored agents, the
    /// registry id otherwise.
    pub id: String,
    /// Human-readable name.
    pub name: String,
    /// Natural-language description.
    #[serde(default)]
    pub description: String,
    /// Version of the agent or its metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Publisher or owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,
    /// Invocation endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Normalised capability ids, sorted and unique.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Normalised tags, sorted and unique.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Canonical BCP 47 language tags, sorted and unique.
    #[serde(default)]
    pub languages: Vec<String>,
    /// Operational status (`active`, `online`, ...), lower-cased.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The authentication type the agent asks for, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<String>,
    /// The format of the original document.
    pub format: DocumentFormat,
}

/// Normalises a capability id or tag: trimmed, lower-cased, control
/// characters dropped, inner runs of white space collapsed to one `_`.
/// Returns `None` for an empty result.
pub fn normalise_term(raw: &str) -> Option<String> {
    let clean: String = raw
        .chars()
        .filter(|c| !c.is_control() || c.is_whitespace())
        .collect();
    let words: Vec<&str> = clean.split_whitespace().collect();
    if words.is_empty() {
        return None;
    }
    Some(words.join("_").to_lowercase())
}

/// Canonicalises a BCP 47 tag: language lower-case, script title-case,
/// region upper-case, others lower-case (RFC 5646 section 2.1.1). Returns
/// `None` when the tag is not well-formed at the subtag level.
pub fn normalise_language(raw: &str) -> Option<String> {
    let raw = raw.trim().replace('_', "-");
    let mut out = Vec::new();
    for (i, sub) in raw.split('-').enumerate() {
        if sub.is_empty() || sub.len() > 8 || !sub.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return None;
        }
        let canonical = if i == 0 {
            if !(2..=8).contains(&sub.len()) || !sub.bytes().all(|b| b.is_ascii_alphabetic()) {
                return None;
            }
            sub.to_ascii_lowercase()
        } else if sub.len() == 4 && sub.bytes().all(|b| b.is_ascii_alphabetic()) {
            let mut s = sub.to_ascii_lowercase();
            s[..1].make_ascii_uppercase();
            s
        } else if sub.len() == 2 && sub.bytes().all(|b| b.is_ascii_alphabetic()) {
            sub.to_ascii_uppercase()
        } else {
            sub.to_ascii_lowercase()
        };
        out.push(canonical);
    }
    Some(out.join("-"))
}

/// The primary language subtag of a canonical tag (`zh` for `zh-Hant-TW`).
pub fn primary_language(tag: &str) -> &str {
    tag.split('-').next().unwrap_or(tag)
}

/// Normalises a list of terms: sorted, unique, empties dropped.
pub fn normalise_terms<'a>(raw: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut v: Vec<String> = raw.into_iter().filter_map(normalise_term).collect();
    v.sort();
    v.dedup();
    v
}

/// Normalises a list of language tags; returns the first malformed one as
/// the error.
///
/// # Errors
/// The offending raw tag.
pub fn normalise_languages<'a>(
    raw: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<String>, String> {
    let mut v = Vec::new();
    for tag in raw {
        v.push(normalise_language(tag).ok_or_else(|| tag.to_owned())?);
    }
    v.sort();
    v.dedup();
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_trimmed_lowered_and_deduplicated() {
        assert_eq!(normalise_term("  Translation "), Some("translation".into()));
        assert_eq!(
            normalise_term("Text  Generation"),
            Some("text_generation".into())
        );
        assert_eq!(normalise_term("   "), None);
        assert_eq!(normalise_term("a\u{0}b"), Some("ab".into()));
        assert_eq!(
            normalise_terms(["b", "A", " a ", ""]),
            vec!["a".to_string(), "b".to_string()]
        );
    }

    #[test]
    fn language_tags_are_canonical() {
        assert_eq!(normalise_language("EN").as_deref(), Some("en"));
        assert_eq!(
            normalise_language("zh-hant-tw").as_deref(),
            Some("zh-Hant-TW")
        );
        assert_eq!(normalise_language("en_us").as_deref(), Some("en-US"));
        assert_eq!(normalise_language("es-419").as_deref(), Some("es-419"));
        assert_eq!(primary_language("zh-Hant-TW"), "zh");
        for bad in ["", "e", "1a", "en--us", "en-toolongsubtag", "en us"] {
            assert_eq!(normalise_language(bad), None, "{bad:?} must be refused");
        }
        assert_eq!(normalise_languages(["en", "x y"]), Err("x y".to_string()));
    }
}
