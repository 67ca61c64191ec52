//! ARD (Agentic Resource Discovery) manifests, v0.91 and its predecessor
//! v0.9: the manifest a domain serves at [`ARD_JSON_PATH`] (v0.91's), at
//! the URLs its `robots.txt` and home page name ([`sources`]), or at
//! [`WELL_KNOWN_PATH`] (the `ai-catalog.json` of v0.9, read when the
//! domain publishes none of the others), read into its [`Entry`]s and
//! each entry into a [`Descriptor`]. The crawler fetches within its limits
//! and hands the parsed JSON here with the domain it was fetched for;
//! nothing here touches the network.
//!
//! What is checked: the manifest's shape, its `specVersion` when present
//! (major 1; v0.91's `ard.json` needs none), at most [`MAX_ENTRIES`]
//! entries; each entry's `urn:air:` identifier (the JSON Schema's
//! pattern, checked by hand), `displayName`, `type` (or `mediaType`,
//! required by both versions, and a well-formed media type), exactly one
//! of `url` (https) and `data` (an object), that the identifier's
//! publisher is the catalog's domain or a subdomain of it (ARD: the
//! publisher is a domain the catalog's host backs), and its
//! `trustManifest` when present ([`trust`]: an identity whose domain
//! aligns with the publisher, bounded claims, a well-formed signature).
//! One bad entry is an `Err` among the entries; the others still count.
//!
//! Leniency, where the spec is strict or its sources disagree: unknown
//! members (top level and entry, JSON-LD `@context` and namespaced terms
//! among them) are ignored here and kept in the stored entry; the media
//! type is read from `type` (ARD) or `mediaType` (the upstream
//! ai-catalog); an empty `entries` array is accepted; a missing or short
//! `representativeQueries` is not an error (ARD: a warning).

use serde_json::{Map, Value};

use crate::descriptor::{Descriptor, DocumentFormat};
use crate::formats::{
    bounded, terms, FormatError, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, MAX_TERMS,
};
use crate::trust::Reason;

pub mod sources;
pub mod trust;

/// Where a domain serves its catalog (ARD section 6).
pub const WELL_KNOWN_PATH: &str = "/.well-known/ai-catalog.json";
/// Where ARD v0.91 puts a domain's catalog: read before
/// [`WELL_KNOWN_PATH`], which v0.91 keeps as the legacy path.
pub const ARD_JSON_PATH: &str = "/.well-known/ard.json";
/// Most entries read from one catalog; a catalog with more is refused.
pub const MAX_ENTRIES: usize = 1000;
/// Longest `urn:air:` identifier accepted, in characters.
pub const MAX_IDENTIFIER_CHARS: usize = 256;
/// Longest `url` accepted, in characters.
pub const MAX_URL_CHARS: usize = 2048;
/// Longest `version` or `updatedAt` accepted, in characters.
pub const MAX_VERSION_CHARS: usize = 255;
/// The identifiers' URN prefix.
const URN_PREFIX: &str = "urn:air:";

/// A parsed catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    /// `host.displayName`, when the catalog names its host.
    pub host: Option<String>,
    /// Each entry, in catalog order: the valid ones and why the others
    /// were refused ([`Reason::CatalogEntryInvalid`]).
    pub entries: Vec<Result<Entry, FormatError>>,
}

/// One valid catalog entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The `urn:air:` identifier, as written.
    pub identifier: String,
    /// `displayName`, bounded to [`MAX_NAME_CHARS`].
    pub display_name: String,
    /// The media type of the artifact (`type`, or `mediaType`).
    pub media_type: Option<String>,
    /// Where the artifact is (https), when it is referenced.
    pub url: Option<String>,
    /// The artifact itself, when it is inline.
    pub data: Option<Value>,
    /// `description`, bounded to [`MAX_DESCRIPTION_CHARS`].
    pub description: Option<String>,
    /// `tags`, normalised ([`terms`]).
    pub tags: Vec<String>,
    /// `capabilities`, normalised ([`terms`]).
    pub capabilities: Vec<String>,
    /// `version`.
    pub version: Option<String>,
    /// `updatedAt`, as written (ISO 8601).
    pub updated_at: Option<String>,
    /// `trustManifest`, read and bound to the publisher.
    pub trust: Option<trust::TrustManifest>,
}

/// What an entry's artifact is, from its media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// An A2A Agent Card (`application/a2a-agent-card+json`,
    /// `application/agent-card+json`).
    A2aCard,
    /// An MCP server card (`application/mcp-server-card+json`, or the
    /// older `application/mcp-server+json`).
    McpServer,
    /// A nested catalog (`application/ai-catalog+json`).
    Catalog,
    /// A registry's REST API (`application/ai-registry`,
    /// `application/ai-registry+json`).
    Registry,
    /// An agent skill (`application/ai-skill+md`, `+json` or `+zip`).
    Skill,
    /// Anything else (datasets, vendor types).
    Other,
}

impl EntryKind {
    /// The tag a descriptor of this kind carries (`a2a`, `mcp`,
    /// `catalog`, `registry`); none for [`EntryKind::Other`].
    pub fn tag(self) -> Option<&'static str> {
        match self {
            Self::A2aCard => Some("a2a"),
            Self::McpServer => Some("mcp"),
            Self::Catalog => Some("catalog"),
            Self::Registry => Some("registry"),
            Self::Skill => Some("skill"),
            Self::Other => None,
        }
    }
}

impl Entry {
    /// What the artifact is: the media type without its parameters,
    /// compared case-insensitively.
    pub fn kind(&self) -> EntryKind {
        let Some(media_type) = &self.media_type else {
            return EntryKind::Other;
        };
        let essence = media_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match essence.as_str() {
            "application/a2a-agent-card+json" | "application/agent-card+json" => EntryKind::A2aCard,
            "application/mcp-server-card+json" | "application/mcp-server+json" => {
                EntryKind::McpServer
            }
            "application/ai-catalog+json" => EntryKind::Catalog,
            "application/ai-registry" | "application/ai-registry+json" => EntryKind::Registry,
            "application/ai-skill+md"
            | "application/ai-skill+json"
            | "application/ai-skill+zip" => EntryKind::Skill,
            _ => EntryKind::Other,
        }
    }

    /// The identifier's publisher domain (the segment after `urn:air:`),
    /// lower-cased, without a trailing dot.
    pub fn publisher(&self) -> String {
        publisher_of(&self.identifier)
    }

    /// The entry's tags and its kind's tag, which is kept when the tags
    /// are at their bound.
    fn descriptor_tags(&self) -> Vec<String> {
        let mut tags = terms(self.tags.iter().map(String::as_str));
        if let Some(kind) = self.kind().tag() {
            if let Err(at) = tags.binary_search_by(|t| t.as_str().cmp(kind)) {
                if tags.len() >= MAX_TERMS {
                    tags.pop();
                }
                tags.insert(at.min(tags.len()), kind.to_owned());
            }
        }
        tags
    }

    /// The normalised descriptor: the identifier as id, `displayName` as
    /// name, the entry's capabilities, its tags and its kind's tag, `url`
    /// as endpoint, the URN's publisher.
    pub fn to_descriptor(&self) -> Descriptor {
        let name = if self.display_name.trim().is_empty() {
            bounded(&self.identifier, MAX_NAME_CHARS)
        } else {
            self.display_name.clone()
        };
        Descriptor {
            id: self.identifier.clone(),
            name,
            description: self.description.clone().unwrap_or_default(),
            version: self.version.clone(),
            publisher: Some(self.publisher()),
            endpoint: self.url.clone(),
            capabilities: terms(self.capabilities.iter().map(String::as_str)),
            tags: self.descriptor_tags(),
            languages: Vec::new(),
            status: None,
            auth: None,
            format: DocumentFormat::Ard,
        }
    }
}

/// Reads a catalog fetched from `domain`.
///
/// # Errors
/// [`Reason::CatalogInvalid`] when `doc` is not an object, has a
/// `specVersion` that is not a string or whose major version is not 1,
/// has no `entries` array, or more than [`MAX_ENTRIES`] entries. A bad
/// entry is not an error of the catalog: it is an `Err` in
/// [`Catalog::entries`].
pub fn parse_catalog(doc: &Value, domain: &str) -> Result<Catalog, FormatError> {
    let invalid = |message: String| FormatError::new(Reason::CatalogInvalid, message);
    let Some(top) = doc.as_object() else {
        return Err(invalid("the catalog is not a JSON object".into()));
    };
    match top.get("specVersion") {
        None => {}
        Some(Value::String(v)) if major_is_one(v) => {}
        Some(Value::String(v)) => {
            return Err(invalid(format!(
                "/specVersion {:?} is not a 1.x version",
                bounded(v, 32)
            )))
        }
        Some(_) => return Err(invalid("/specVersion is not a string".into())),
    }
    let raw = match top.get("entries") {
        None => return Err(invalid("/entries is missing".into())),
        Some(Value::Array(raw)) => raw,
        Some(_) => return Err(invalid("/entries is not an array".into())),
    };
    if raw.len() > MAX_ENTRIES {
        return Err(invalid(format!(
            "/entries has {} entries; at most {MAX_ENTRIES} are read",
            raw.len()
        )));
    }
    let host = top
        .get("host")
        .and_then(|h| h.get("displayName"))
        .and_then(Value::as_str)
        .map(|n| bounded(n.trim(), MAX_NAME_CHARS))
        .filter(|n| !n.is_empty());
    Ok(Catalog {
        host,
        entries: parse_entries(raw, "/entries", domain),
    })
}

/// Reads `raw` entries (at the JSON pointer `at`, one per index) of a
/// manifest or page fetched for `domain`; an identifier seen before in
/// `raw` is refused.
pub fn parse_entries(raw: &[Value], at: &str, domain: &str) -> Vec<Result<Entry, FormatError>> {
    let domain = canonical_domain(domain);
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    raw.iter()
        .enumerate()
        .map(|(i, raw)| {
            let entry = parse_entry(raw, &format!("{at}/{i}"), &domain)?;
            if let Some(first) = seen.get(entry_identifier(raw)) {
                return Err(FormatError::new(
                    Reason::CatalogEntryInvalid,
                    format!("{at}/{i}/identifier: the identifier of {at}/{first} again"),
                ));
            }
            seen.insert(entry_identifier(raw), i);
            Ok(entry)
        })
        .collect()
}

/// Whether `media_type` is `type/subtype` of RFC 6838 restricted names,
/// with parameters after `;` allowed.
fn is_media_type(media_type: &str) -> bool {
    let essence = media_type.split(';').next().unwrap_or_default();
    let name = |s: &str| {
        let mut bytes = s.bytes();
        bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
            && s.len() <= 127
            && bytes.all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b))
    };
    essence
        .split_once('/')
        .is_some_and(|(t, sub)| name(t) && name(sub))
}

/// The identifier of an entry already parsed (so it is a string).
fn entry_identifier(raw: &Value) -> &str {
    raw.get("identifier")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Whether a `specVersion` ("Major.Minor") has major version 1.
fn major_is_one(v: &str) -> bool {
    let mut parts = v.trim().split('.');
    let major = parts.next().unwrap_or_default();
    let digits = |s: &str| !s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit());
    digits(major) && major.parse::<u32>() == Ok(1) && parts.all(digits)
}

/// A domain lower-cased, without a trailing dot.
fn canonical_domain(domain: &str) -> String {
    domain.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// The publisher segment of a `urn:air:` identifier, canonical.
fn publisher_of(identifier: &str) -> String {
    let rest = identifier.strip_prefix(URN_PREFIX).unwrap_or(identifier);
    canonical_domain(rest.split(':').next().unwrap_or_default())
}

/// Whether `identifier` matches `^urn:air:[a-zA-Z0-9.-]+(:[a-zA-Z0-9._-]+)+$`.
fn is_urn_air(identifier: &str) -> bool {
    let Some(rest) = identifier.strip_prefix(URN_PREFIX) else {
        return false;
    };
    let mut segments = rest.split(':');
    let publisher = segments.next().unwrap_or_default();
    let publisher_ok = !publisher.is_empty()
        && publisher
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
    let mut names = 0;
    let names_ok = segments.all(|s| {
        names += 1;
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    });
    publisher_ok && names_ok && names > 0
}

/// Reads the entry at `at` (a JSON pointer) of a catalog from `domain`
/// (canonical).
fn parse_entry(raw: &Value, at: &str, domain: &str) -> Result<Entry, FormatError> {
    let invalid = |member: &str, what: &str| {
        FormatError::new(Reason::CatalogEntryInvalid, format!("{at}{member}: {what}"))
    };
    let Some(entry) = raw.as_object() else {
        return Err(invalid("", "the entry is not an object"));
    };
    let identifier =
        string(entry, "identifier", at)?.ok_or_else(|| invalid("/identifier", "missing"))?;
    if identifier.chars().count() > MAX_IDENTIFIER_CHARS {
        return Err(invalid(
            "/identifier",
            &format!("longer than {MAX_IDENTIFIER_CHARS} characters"),
        ));
    }
    if !is_urn_air(identifier) {
        return Err(invalid(
            "/identifier",
            "not a urn:air:<publisher>:<name> identifier (publisher of [A-Za-z0-9.-], segments of [A-Za-z0-9._-])",
        ));
    }
    let publisher = publisher_of(identifier);
    if publisher != domain && !publisher.ends_with(&format!(".{domain}")) {
        return Err(invalid(
            "/identifier",
            &format!("its publisher {publisher:?} is not {domain:?} nor a subdomain of it"),
        ));
    }
    let display_name =
        string(entry, "displayName", at)?.ok_or_else(|| invalid("/displayName", "missing"))?;
    // ARD (v0.9 and v0.91) requires `type`; `mediaType` is the upstream
    // ai-catalog's name for it.
    let media_type = match string(entry, "type", at)? {
        Some(t) => Some(t),
        None => string(entry, "mediaType", at)?,
    }
    .filter(|t| !t.trim().is_empty())
    .ok_or_else(|| invalid("/type", "missing: an entry names its artifact's media type"))?;
    if !is_media_type(media_type.trim()) {
        return Err(invalid(
            "/type",
            "not a media type (type/subtype of letters, digits and !#$&^_.+-)",
        ));
    }
    let media_type = Some(media_type);
    let url = string(entry, "url", at)?;
    let data = entry.get("data");
    match (url, data) {
        (None, None) => return Err(invalid("", "neither url nor data")),
        (Some(_), Some(_)) => return Err(invalid("", "both url and data (one of them only)")),
        (None, Some(d)) if !d.is_object() => return Err(invalid("/data", "not an object")),
        _ => {}
    }
    if let Some(url) = url {
        if url.chars().count() > MAX_URL_CHARS {
            return Err(invalid(
                "/url",
                &format!("longer than {MAX_URL_CHARS} characters"),
            ));
        }
        let https = url::Url::parse(url)
            .is_ok_and(|u| u.scheme() == "https" && u.host_str().is_some_and(|h| !h.is_empty()));
        if !https {
            return Err(invalid("/url", "not an https URL"));
        }
    }
    let short = |key: &str| -> Result<Option<String>, FormatError> {
        match string(entry, key, at)? {
            Some(v) if v.chars().count() > MAX_VERSION_CHARS => Err(invalid(
                &format!("/{key}"),
                &format!("longer than {MAX_VERSION_CHARS} characters"),
            )),
            v => Ok(v.map(str::to_owned)),
        }
    };
    Ok(Entry {
        identifier: identifier.to_owned(),
        display_name: bounded(display_name.trim(), MAX_NAME_CHARS),
        media_type: media_type.map(|t| bounded(t.trim(), MAX_NAME_CHARS)),
        url: url.map(str::to_owned),
        data: data.cloned(),
        description: string(entry, "description", at)?
            .map(|d| bounded(d.trim(), MAX_DESCRIPTION_CHARS)),
        tags: string_list(entry, "tags", at)?,
        capabilities: string_list(entry, "capabilities", at)?,
        version: short("version")?,
        updated_at: short("updatedAt")?,
        trust: match entry.get("trustManifest") {
            None | Some(Value::Null) => None,
            Some(raw) => Some(trust::parse(raw, at, &publisher)?),
        },
    })
}

/// The member `key` when it is a string; `None` when absent or null.
fn string<'a>(
    entry: &'a Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<&'a str>, FormatError> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(FormatError::new(
            Reason::CatalogEntryInvalid,
            format!("{at}/{key}: not a string"),
        )),
    }
}

/// The member `key` as normalised terms, when it is an array of strings.
fn string_list(
    entry: &Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Vec<String>, FormatError> {
    let not_strings = || {
        FormatError::new(
            Reason::CatalogEntryInvalid,
            format!("{at}/{key}: not an array of strings"),
        )
    };
    match entry.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => {
            let raw = items
                .iter()
                .map(|v| v.as_str().ok_or_else(not_strings))
                .collect::<Result<Vec<&str>, _>>()?;
            Ok(terms(raw))
        }
        Some(_) => Err(not_strings()),
    }
}

#[cfg(test)]
mod tests;
