//! What a DNS-AID record's target serves, read: the capability document
//! its `cap` key names (checked against `cap-sha256`), and the metadata
//! document (an A2A Agent Card, or an MCP server card) its `well-known`
//! key names or its protocol implies; and the descriptor that DNS and
//! those documents describe together ([`DnsAidAgent::describe`]).
//!
//! The capability document is dns-aid-core's (`cap_fetcher.py`): a JSON
//! object with `capabilities` (strings), optional `description`,
//! `version` and `use_cases` (strings); other members are ignored. The
//! MCP server card is SEP-1649's `/.well-known/mcp/server-card.json`:
//! `serverInfo` (`name`, optional `title` and `version`), optional
//! `description` and `tools` (objects with a `name`, or the string
//! `"dynamic"`). An A2A card is read by [`crate::formats::a2a`].
//!
//! Pure code: the crawler fetches (`crawl/discover/dns_aid.rs`).

use base64::Engine as _;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::DnsAidAgent;
use crate::descriptor::{Descriptor, DocumentFormat};
use crate::formats::{a2a, bounded, terms, FormatError, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS};
use crate::trust::Reason;

/// Where an MCP server publishes its server card (SEP-1649), the
/// document implied at the target of an `mcp` record.
pub const MCP_SERVER_CARD_PATH: &str = "/.well-known/mcp/server-card.json";
/// Most capabilities, use cases or tools read from one document.
pub const MAX_DOCUMENT_TERMS: usize = 256;
/// Longest capability, use case or tool name read, characters.
pub const MAX_TERM_CHARS: usize = 128;

/// A capability document (the `cap` key's), as dns-aid-core publishes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapDocument {
    /// `capabilities`: capability ids.
    pub capabilities: Vec<String>,
    /// `description`.
    pub description: Option<String>,
    /// `version`.
    pub version: Option<String>,
    /// `use_cases`: read as tags.
    pub use_cases: Vec<String>,
}

/// An MCP server card, the members read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerCard {
    /// `serverInfo.title`, else `serverInfo.name`.
    pub name: String,
    /// `description`.
    pub description: Option<String>,
    /// `serverInfo.version`.
    pub version: Option<String>,
    /// The names of `tools` (none when the tools are `"dynamic"`).
    pub tools: Vec<String>,
}

/// What the record's target serves, read: the metadata document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Metadata {
    /// An A2A Agent Card.
    A2aCard(Box<a2a::AgentCard>),
    /// An MCP server card.
    ServerCard(ServerCard),
}

fn cap_invalid(message: impl Into<String>) -> FormatError {
    FormatError::new(Reason::CapInvalid, message)
}

/// Checks `body` (the bytes fetched from the `cap` URL) against the
/// record's `cap-sha256`: unpadded base64url of its SHA-256.
///
/// # Errors
/// [`Reason::CapDigestMismatch`], naming both digests.
pub fn check_cap_digest(expected: &str, body: &[u8]) -> Result<(), FormatError> {
    let got = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(body));
    if got == expected {
        return Ok(());
    }
    Err(FormatError::new(
        Reason::CapDigestMismatch,
        format!(
            "the capability document's SHA-256 is {got}, but the record's cap-sha256 is {expected}: \
             it changed since DNS was published, or it is not the publisher's"
        ),
    ))
}

/// A list of strings at `key` of `obj` (absent: empty), each trimmed and
/// bounded; `None` when the member is there and not such a list.
fn strings(obj: &serde_json::Map<String, Value>, key: &str) -> Option<Vec<String>> {
    let Some(value) = obj.get(key) else {
        return Some(Vec::new());
    };
    let items = value.as_array()?;
    if items.len() > MAX_DOCUMENT_TERMS {
        return None;
    }
    items
        .iter()
        .map(|v| v.as_str().map(|s| bounded(s.trim(), MAX_TERM_CHARS)))
        .filter(|s| s.as_ref().is_none_or(|s| !s.is_empty()))
        .collect()
}

/// An optional string member, trimmed, empty as absent; `Err` when it is
/// there and not a string.
fn opt_string(
    obj: &serde_json::Map<String, Value>,
    key: &str,
    max: usize,
) -> Result<Option<String>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            let s = bounded(s.trim(), max);
            Ok((!s.is_empty()).then_some(s))
        }
        Some(_) => Err(format!("/{key} is not a string")),
    }
}

/// Reads a capability document.
///
/// # Errors
/// [`Reason::CapInvalid`] for a document that is not an object, whose
/// `capabilities` or `use_cases` is not a list of at most
/// [`MAX_DOCUMENT_TERMS`] strings, or whose `description` or `version` is
/// not a string; a document that names no capability and has no
/// description says nothing and is refused too.
pub fn parse_cap(doc: &Value) -> Result<CapDocument, FormatError> {
    let obj = doc
        .as_object()
        .ok_or_else(|| cap_invalid("the capability document is not a JSON object"))?;
    let capabilities = strings(obj, "capabilities").ok_or_else(|| {
        cap_invalid(format!(
            "/capabilities is not a list of at most {MAX_DOCUMENT_TERMS} strings"
        ))
    })?;
    let use_cases = strings(obj, "use_cases").ok_or_else(|| {
        cap_invalid(format!(
            "/use_cases is not a list of at most {MAX_DOCUMENT_TERMS} strings"
        ))
    })?;
    let description = opt_string(obj, "description", MAX_DESCRIPTION_CHARS).map_err(cap_invalid)?;
    let version = opt_string(obj, "version", 64).map_err(cap_invalid)?;
    if capabilities.is_empty() && description.is_none() {
        return Err(cap_invalid(
            "the capability document names no capability and has no description",
        ));
    }
    Ok(CapDocument {
        capabilities,
        description,
        version,
        use_cases,
    })
}

fn server_card_invalid(message: impl Into<String>) -> FormatError {
    FormatError::new(Reason::McpServerInvalid, message)
}

/// Reads an MCP server card.
///
/// # Errors
/// [`Reason::McpServerInvalid`] for a card without `serverInfo.name`, or
/// whose members read here have the wrong type, or with more than
/// [`MAX_DOCUMENT_TERMS`] tools.
pub fn parse_server_card(doc: &Value) -> Result<ServerCard, FormatError> {
    let obj = doc
        .as_object()
        .ok_or_else(|| server_card_invalid("the server card is not a JSON object"))?;
    let info = obj
        .get("serverInfo")
        .and_then(Value::as_object)
        .ok_or_else(|| server_card_invalid("/serverInfo is missing or not an object"))?;
    let name = opt_string(info, "name", MAX_NAME_CHARS)
        .map_err(|e| server_card_invalid(format!("/serverInfo{e}")))?
        .ok_or_else(|| server_card_invalid("/serverInfo/name is missing"))?;
    let title = opt_string(info, "title", MAX_NAME_CHARS)
        .map_err(|e| server_card_invalid(format!("/serverInfo{e}")))?;
    let version = opt_string(info, "version", 64)
        .map_err(|e| server_card_invalid(format!("/serverInfo{e}")))?;
    let description =
        opt_string(obj, "description", MAX_DESCRIPTION_CHARS).map_err(server_card_invalid)?;
    let tools = match obj.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) if s == "dynamic" => Vec::new(),
        Some(Value::Array(tools)) if tools.len() <= MAX_DOCUMENT_TERMS => tools
            .iter()
            .map(|t| {
                t.get("name")
                    .and_then(Value::as_str)
                    .map(|n| bounded(n.trim(), MAX_TERM_CHARS))
                    .filter(|n| !n.is_empty())
                    .ok_or_else(|| server_card_invalid("a tool without a name"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(server_card_invalid(format!(
                "/tools is not \"dynamic\" or a list of at most {MAX_DOCUMENT_TERMS} tools"
            )))
        }
    };
    Ok(ServerCard {
        name: title.unwrap_or(name),
        description,
        version,
        tools,
    })
}

/// Reads the metadata document at a record's target by its content: an
/// A2A card when it has a card's shape, else an MCP server card when it
/// has `serverInfo`.
///
/// # Errors
/// The card reader's refusal ([`Reason::CardInvalid`],
/// [`Reason::McpServerInvalid`]); [`Reason::CardInvalid`] for a document
/// that is neither.
pub fn parse_metadata(doc: &Value) -> Result<Metadata, FormatError> {
    if a2a::classify(doc) == a2a::Shape::A2a {
        return a2a::parse_card(doc).map(|c| Metadata::A2aCard(Box::new(c)));
    }
    if doc.get("serverInfo").is_some() {
        return parse_server_card(doc).map(Metadata::ServerCard);
    }
    Err(FormatError::new(
        Reason::CardInvalid,
        "the document at the record's target is neither an A2A Agent Card nor an MCP server card",
    ))
}

impl Metadata {
    /// What the document says, as a descriptor of id `id`.
    fn descriptor(&self, id: &str) -> Descriptor {
        match self {
            Self::A2aCard(card) => card.to_descriptor(id),
            Self::ServerCard(card) => Descriptor {
                id: id.to_owned(),
                name: card.name.clone(),
                description: card.description.clone().unwrap_or_default(),
                version: card.version.clone(),
                publisher: None,
                endpoint: None,
                capabilities: terms(card.tools.iter().map(String::as_str)),
                tags: Vec::new(),
                languages: Vec::new(),
                status: None,
                auth: None,
                format: DocumentFormat::McpRegistry,
            },
        }
    }

    /// A line for the crawl report.
    pub fn summary(&self) -> String {
        match self {
            Self::A2aCard(card) => format!(
                "an A2A card \"{}\" with {} skills",
                card.name,
                card.skills.len()
            ),
            Self::ServerCard(card) => format!(
                "an MCP server card \"{}\" with {} tools",
                card.name,
                card.tools.len()
            ),
        }
    }
}

impl DnsAidAgent {
    /// The descriptor of the agent as DNS and what its target serves
    /// describe it together. The id (`dns-aid:{owner}`), the format
    /// (DNS-AID: the id space is the format's, and what vouches for the
    /// agent is the SVCB record) and the endpoint (the target DNS names,
    /// whose addresses the crawler checked) are DNS's; the name,
    /// description, version, publisher, capabilities, tags and auth are
    /// the card's when there is one. The capability document adds its
    /// capabilities, its use cases as tags, and its description and
    /// version where the card gave none. The record's protocol and alpn
    /// ids stay among the tags.
    pub fn describe(&self, metadata: Option<&Metadata>, cap: Option<&CapDocument>) -> Descriptor {
        let mut d = self.to_descriptor();
        let dns_tags = std::mem::take(&mut d.tags);
        if let Some(card) = metadata.map(|m| m.descriptor(&d.id)) {
            d.name = card.name;
            d.description = card.description;
            d.version = card.version;
            d.publisher = card.publisher;
            d.capabilities = card.capabilities;
            d.tags = card.tags;
            d.auth = card.auth;
        }
        if let Some(cap) = cap {
            if d.description.is_empty() {
                if let Some(text) = &cap.description {
                    d.description = bounded(text, MAX_DESCRIPTION_CHARS);
                }
            }
            if d.version.is_none() {
                d.version.clone_from(&cap.version);
            }
            d.capabilities = terms(
                d.capabilities
                    .iter()
                    .chain(&cap.capabilities)
                    .map(String::as_str),
            );
            d.tags = terms(d.tags.iter().chain(&cap.use_cases).map(String::as_str));
        }
        d.tags = terms(dns_tags.iter().chain(&d.tags).map(String::as_str));
        d
    }

    /// `https://{target}:{port}`: the record's port, else `default_port`
    /// (the crawler's HTTPS port), left out when it is 443.
    pub fn origin(&self, default_port: u16) -> String {
        super::base_url(&self.target, Some(self.port.unwrap_or(default_port)))
    }

    /// The metadata document to fetch from the target, and whether the
    /// record names it: the `well-known` key's document (an RFC 8615
    /// suffix under `/.well-known/`, or an absolute path), else the one
    /// the protocol implies (`a2a`: the A2A card at
    /// [`a2a::WELL_KNOWN_PATH`]; `mcp`: the server card at
    /// [`MCP_SERVER_CARD_PATH`]), else none.
    pub fn metadata_url(&self, default_port: u16) -> Option<(String, bool)> {
        let origin = self.origin(default_port);
        if let Some(wk) = self.well_known.as_deref() {
            let url = if wk.starts_with('/') {
                format!("{origin}{wk}")
            } else {
                format!("{origin}/.well-known/{wk}")
            };
            return Some((url, true));
        }
        let path = match self.protocol.as_deref()? {
            "a2a" => a2a::WELL_KNOWN_PATH,
            "mcp" => MCP_SERVER_CARD_PATH,
            _ => return None,
        };
        Some((format!("{origin}{path}"), false))
    }
}

#[cfg(test)]
mod tests;
