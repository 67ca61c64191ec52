//! Where a domain says its ARD entries are, besides `/.well-known/ard.json`
//! (ARD v0.91 §5.1): the `Agentmap:` lines of its `robots.txt`, the
//! `rel="ard"` links of its home page (in the HTML `<head>` or an HTTP
//! `Link` header; the predecessor's `ai-catalog` relation is read the same
//! way), and entries embedded in the page as JSON-LD. Pure text reading:
//! the crawler fetches, bounds and follows.
//!
//! The readers are lenient where HTML is (attribute order, quoting, case)
//! and bounded: at most [`MAX_SOURCES`] URLs and [`MAX_INLINE_BLOCKS`]
//! JSON-LD blocks from one document, whatever it holds.

use serde_json::Value;

/// Most entry-source URLs read from one document (robots.txt, a page).
pub const MAX_SOURCES: usize = 4;
/// Most `<script type="application/ld+json">` blocks read from one page.
pub const MAX_INLINE_BLOCKS: usize = 16;
/// The link relations naming an entry source: v0.91's and its
/// predecessor's.
const RELATIONS: [&str; 2] = ["ard", "ai-catalog"];

/// The `Agentmap:` URLs of a robots.txt, in order, without duplicates:
/// the field name matched case-insensitively, `#` comments dropped.
pub fn agentmaps(robots: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in robots.lines() {
        let line = line.split_once('#').map_or(line, |(before, _)| before);
        let Some((field, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if field.trim().eq_ignore_ascii_case("agentmap")
            && !value.is_empty()
            && !out.iter().any(|u| u == value)
        {
            out.push(value.to_owned());
            if out.len() == MAX_SOURCES {
                break;
            }
        }
    }
    out
}

/// The targets of an HTTP `Link` header's `rel="ard"` (or `ai-catalog`)
/// links, as written.
pub fn link_header(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    for link in value.split(',') {
        let mut parts = link.split(';');
        let Some(target) = parts
            .next()
            .map(str::trim)
            .and_then(|t| t.strip_prefix('<'))
            .and_then(|t| t.strip_suffix('>'))
        else {
            continue;
        };
        let names_ard = parts.any(|param| {
            param.split_once('=').is_some_and(|(k, v)| {
                k.trim().eq_ignore_ascii_case("rel") && has_relation(v.trim().trim_matches('"'))
            })
        });
        if names_ard && out.len() < MAX_SOURCES {
            out.push(target.to_owned());
        }
    }
    out
}

/// What a page says about ARD entries.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Page {
    /// The `href`s of its `<link rel="ard">` (or `ai-catalog`) tags, as
    /// written (relative ones too), at most [`MAX_SOURCES`].
    pub links: Vec<String>,
    /// Entries embedded as JSON-LD: each object with a string
    /// `identifier` found at the top of a block, in an array there, in
    /// its `@graph`, or in its `entries` (a manifest inlined whole).
    pub entries: Vec<Value>,
}

/// Reads a page: its link tags and JSON-LD blocks. Comments are skipped;
/// a block that is not JSON is skipped.
pub fn page(html: &str) -> Page {
    let mut found = Page::default();
    let lower = html.to_ascii_lowercase();
    let mut at = 0;
    let mut blocks = 0;
    while let Some(offset) = lower[at..].find('<') {
        let start = at + offset;
        let rest = &lower[start..];
        if rest.starts_with("<!--") {
            at = rest.find("-->").map_or(lower.len(), |end| start + end + 3);
            continue;
        }
        let Some(end) = tag_end(&lower, start) else {
            break;
        };
        let tag = &html[start..end];
        at = end;
        if let Some(attrs) = tag_attributes(tag, "link") {
            let rel = attribute(&attrs, "rel").unwrap_or_default();
            if let Some(href) = attribute(&attrs, "href") {
                if rel.split_ascii_whitespace().any(has_relation)
                    && found.links.len() < MAX_SOURCES
                    && !found.links.contains(&href)
                {
                    found.links.push(href);
                }
            }
        } else if let Some(attrs) = tag_attributes(tag, "script") {
            let Some(close) = lower[end..].find("</script") else {
                break;
            };
            let body = &html[end..end + close];
            at = end + close;
            let json_ld = attribute(&attrs, "type").is_some_and(|t| {
                t.split(';')
                    .next()
                    .is_some_and(|e| e.trim().eq_ignore_ascii_case("application/ld+json"))
            });
            if json_ld && blocks < MAX_INLINE_BLOCKS {
                blocks += 1;
                if let Ok(block) = serde_json::from_str::<Value>(body.trim()) {
                    collect_entries(&block, &mut found.entries);
                }
            }
        }
    }
    found
}

/// Whether a relation token is one naming an entry source.
fn has_relation(rel: &str) -> bool {
    RELATIONS.iter().any(|r| rel.eq_ignore_ascii_case(r))
}

/// Where the tag opening at `start` ends (after its `>`), quotes
/// respected.
fn tag_end(lower: &str, start: usize) -> Option<usize> {
    let mut quote = None;
    for (i, c) in lower[start..].char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '>') => return Some(start + i + 1),
            _ => {}
        }
    }
    None
}

/// A tag's attributes (names lower-cased, values unquoted) when it is an
/// opening `<{name} ...>` tag.
fn tag_attributes(tag: &str, name: &str) -> Option<Vec<(String, String)>> {
    let inner = tag
        .strip_prefix('<')?
        .trim_end_matches('>')
        .trim_end_matches('/');
    let head_len = inner
        .find(|c: char| c.is_ascii_whitespace())
        .unwrap_or(inner.len());
    if !inner[..head_len].eq_ignore_ascii_case(name) {
        return None;
    }
    let mut attrs = Vec::new();
    let mut rest = inner[head_len..].trim_start();
    while !rest.is_empty() {
        let name_len = rest
            .find(|c: char| c.is_ascii_whitespace() || c == '=')
            .unwrap_or(rest.len());
        let key = rest[..name_len].to_ascii_lowercase();
        rest = rest[name_len..].trim_start();
        let value = if let Some(after) = rest.strip_prefix('=') {
            let after = after.trim_start();
            let (value, remaining) = match after.chars().next() {
                Some(q @ ('"' | '\'')) => {
                    let body = &after[1..];
                    let close = body.find(q).unwrap_or(body.len());
                    (&body[..close], body.get(close + 1..).unwrap_or_default())
                }
                _ => {
                    let close = after
                        .find(|c: char| c.is_ascii_whitespace())
                        .unwrap_or(after.len());
                    (&after[..close], &after[close..])
                }
            };
            rest = remaining.trim_start();
            value.to_owned()
        } else {
            String::new()
        };
        if !key.is_empty() {
            attrs.push((key, decode_entities(&value)));
        }
    }
    Some(attrs)
}

fn attribute(attrs: &[(String, String)], name: &str) -> Option<String> {
    attrs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.trim().to_owned())
}

/// The few character references a URL in an attribute uses.
fn decode_entities(value: &str) -> String {
    value
        .replace("&amp;", "&")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
}

/// The ARD entries of a JSON-LD block, appended to `out` (bounded by the
/// catalog's entry limit, so a page yields no more than a manifest).
fn collect_entries(block: &Value, out: &mut Vec<Value>) {
    let push = |v: &Value, out: &mut Vec<Value>| {
        if v.get("identifier").is_some_and(Value::is_string) && out.len() < super::MAX_ENTRIES {
            out.push(v.clone());
        }
    };
    match block {
        Value::Array(items) => items.iter().for_each(|v| push(v, out)),
        Value::Object(o) => {
            for key in ["@graph", "entries"] {
                if let Some(Value::Array(items)) = o.get(key) {
                    items.iter().for_each(|v| push(v, out));
                }
            }
            push(block, out);
        }
        _ => {}
    }
}
