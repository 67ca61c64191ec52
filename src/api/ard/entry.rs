//! What an agent is in ARD's terms: a search result or listing item as
//! ARD's catalog entry (`identifier`, `displayName`, `type`, `url`, ...),
//! read from the summary this node answers on its own API.
//!
//! - `identifier`: an ARD catalog's own `urn:air:` id when the agent came
//!   from one; else `urn:air:{publisher}:{format}:{name}`, the publisher
//!   the agent's domain (ADP, A2A, AID, DNS-AID), the MCP server's
//!   namespace, or this node's host for a registration here, every
//!   segment kept to the characters the URN allows. The agentmesh id is
//!   in `metadata["agentmesh:id"]`.
//! - `type`: the media type of the document the agent was published in
//!   ([`media_type`]).
//! - `url`: the document as this node serves it, `GET /agents/{id}`.
//! - `score`: the relevance, 0 to 100; relevance only, never trust, as
//!   ARD requires. This node's trust level is in
//!   `metadata["agentmesh:trust"]`.

use serde_json::{json, Map, Value};

use crate::descriptor::DocumentFormat;
use crate::registry::Summary;

/// The media type an agent of `format` is listed under (the `type` of
/// its entry, and what a `type` filter matches).
pub(super) fn media_type(format: DocumentFormat) -> &'static str {
    match format {
        DocumentFormat::Adp => "application/adp+json",
        DocumentFormat::A2a => "application/a2a-agent-card+json",
        DocumentFormat::McpRegistry => "application/mcp-server-card+json",
        DocumentFormat::Ard => "application/ai-catalog+json",
        DocumentFormat::Aidip => "application/aidip+json",
        DocumentFormat::DnsAid => "application/dns-aid+json",
        DocumentFormat::Aid => "application/aid+json",
    }
}

/// Every format, for reading a `type` filter back.
pub(super) const FORMATS: [DocumentFormat; 7] = [
    DocumentFormat::Adp,
    DocumentFormat::A2a,
    DocumentFormat::McpRegistry,
    DocumentFormat::Ard,
    DocumentFormat::Aidip,
    DocumentFormat::DnsAid,
    DocumentFormat::Aid,
];

/// A URN segment: the characters `[A-Za-z0-9._-]` (`.` and `-` only for
/// the publisher), anything else as `-`; never empty.
fn segment(raw: &str, publisher: bool) -> String {
    let s: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' || (c == '_' && !publisher) {
                c
            } else {
                '-'
            }
        })
        .collect();
    let s = s.trim_matches(|c| c == '.' || c == '-').to_owned();
    if s.is_empty() {
        "unnamed".to_owned()
    } else {
        s
    }
}

/// The `urn:air:` identifier of the agent `id` of `format`, `host` this
/// node's.
pub(super) fn identifier(id: &str, format: DocumentFormat, host: &str) -> String {
    if format == DocumentFormat::Ard && is_urn(id) {
        return id.to_owned();
    }
    let (publisher, name) = match (format, id.split_once(':')) {
        (DocumentFormat::McpRegistry, Some((_, rest))) => match rest.split_once('/') {
            Some((ns, name)) => (ns.to_owned(), name.to_owned()),
            None => (host.to_owned(), rest.to_owned()),
        },
        (DocumentFormat::DnsAid, Some((_, owner))) => {
            let domain = owner.rsplit_once("._agents.").map_or(owner, |(_, d)| d);
            (domain.to_owned(), owner.to_owned())
        }
        (DocumentFormat::Adp | DocumentFormat::A2a | DocumentFormat::Aid, Some((_, domain))) => {
            (domain.to_owned(), "agent".to_owned())
        }
        _ => (host.to_owned(), id.to_owned()),
    };
    let namespace = match format {
        DocumentFormat::McpRegistry => "mcp",
        other => other.as_str(),
    };
    format!(
        "urn:air:{}:{}:{}",
        segment(&publisher, true),
        segment(namespace, false),
        segment(&name, false)
    )
}

/// Whether `s` has the shape ARD's schema gives identifiers.
pub(super) fn is_urn(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("urn:air:") else {
        return false;
    };
    let mut parts = rest.split(':');
    let publisher_ok = parts.next().is_some_and(|p| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
    });
    let rest: Vec<&str> = parts.collect();
    publisher_ok
        && !rest.is_empty()
        && rest.iter().all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-')
        })
}

/// The publisher segment of an entry's identifier (what ARD's
/// `publisher` filter key matches).
pub(super) fn publisher_of(identifier: &str) -> &str {
    identifier
        .strip_prefix("urn:air:")
        .and_then(|r| r.split(':').next())
        .unwrap_or_default()
}

/// The catalog entry of `s`, its document at `{base}/agents/{id}`, with
/// `score` when given (search results).
pub(super) fn entry(s: &Summary, base: &str, host: &str, score: Option<u8>) -> Value {
    let mut e = Map::new();
    e.insert(
        "identifier".into(),
        identifier(&s.id, s.source_format, host).into(),
    );
    e.insert("displayName".into(), display_name(s).into());
    e.insert("type".into(), media_type(s.source_format).into());
    let id: String = url::form_urlencoded::byte_serialize(s.id.as_bytes()).collect();
    e.insert(
        "url".into(),
        format!("{base}/agents/{}", id.replace('+', "%20")).into(),
    );
    if !s.description.is_empty() {
        e.insert("description".into(), s.description.clone().into());
    }
    if !s.capabilities.is_empty() {
        e.insert("capabilities".into(), json!(s.capabilities));
    }
    e.insert(
        "metadata".into(),
        json!({
            "agentmesh:id": s.id,
            "agentmesh:format": s.source_format.as_str(),
            "agentmesh:trust": s.trust.level.as_str(),
        }),
    );
    if let Some(score) = score {
        e.insert("score".into(), score.into());
        e.insert("source".into(), format!("{base}/ard/").into());
    }
    Value::Object(e)
}

/// The `displayName` of `s`: its name, or its id when it has none.
pub(super) fn display_name(s: &Summary) -> &str {
    if s.name.trim().is_empty() {
        s.id.as_str()
    } else {
        s.name.as_str()
    }
}

/// A summary's score (0 to 1) as ARD's 0 to 100.
pub(super) fn score(s: &Summary) -> u8 {
    let v = s.score.unwrap_or(0.0);
    if v.is_finite() {
        (v.clamp(0.0, 1.0) * 100.0).round() as u8
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_have_the_shape_ard_requires() {
        let cases = [
            (
                "agent:example.com",
                DocumentFormat::Adp,
                "urn:air:example.com:adp:agent",
            ),
            (
                "a2a:shop.example",
                DocumentFormat::A2a,
                "urn:air:shop.example:a2a:agent",
            ),
            (
                "mcp:io.github.user/weather",
                DocumentFormat::McpRegistry,
                "urn:air:io.github.user:mcp:weather",
            ),
            (
                "dns-aid:_a2a._agents.example.org",
                DocumentFormat::DnsAid,
                "urn:air:example.org:dns-aid:_a2a._agents.example.org",
            ),
            (
                "agent-0f3a",
                DocumentFormat::Aidip,
                "urn:air:node.test:aidip:agent-0f3a",
            ),
            (
                "weird id/ü",
                DocumentFormat::Aidip,
                "urn:air:node.test:aidip:weird-id",
            ),
            (
                "urn:air:acme.com:server:weather",
                DocumentFormat::Ard,
                "urn:air:acme.com:server:weather",
            ),
        ];
        for (id, format, want) in cases {
            let got = identifier(id, format, "node.test");
            assert_eq!(got, want, "{id}");
            assert!(is_urn(&got), "{got}");
        }
        assert_eq!(publisher_of("urn:air:acme.com:server:weather"), "acme.com");
        assert!(!is_urn("urn:air:acme.com"));
        assert!(!is_urn("urn:air:a_b:x"));
    }

    #[test]
    fn every_format_has_a_type_and_reads_back() {
        for f in FORMATS {
            let t = media_type(f);
            assert_eq!(
                FORMATS.iter().filter(|g| media_type(**g) == t).count(),
                1,
                "{t}"
            );
        }
    }
}
