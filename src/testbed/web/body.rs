//! The bodies a site serves beyond its plain document: padded, nested
//! or drip-fed for the behaviours that test a crawler's limits, the HTML
//! escaping of the landing page, and `If-None-Match` matching.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap};
use tokio_util::sync::CancellationToken;

/// How a `SlowBody` agent drip-feeds its document: `bytes` every `every`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drip {
    /// Bytes per chunk (at least 1).
    pub bytes: usize,
    /// Pause before each chunk.
    pub every: Duration,
}

impl Default for Drip {
    /// One byte every 200 ms: a 3 KB document takes ten minutes.
    fn default() -> Self {
        Self {
            bytes: 1,
            every: Duration::from_millis(200),
        }
    }
}

/// `text` safe to place in HTML text or a quoted attribute.
pub(super) fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Whether `If-None-Match` names `etag` (or `*`).
pub(super) fn matches_etag(request: &HeaderMap, etag: &str) -> bool {
    request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == etag || t == "*")
}

/// Inserts a member before the document's closing brace.
fn insert_member(document: &[u8], member: &str) -> Bytes {
    let text = String::from_utf8_lossy(document);
    let Some(end) = text.rfind('}') else {
        return Bytes::copy_from_slice(document);
    };
    let mut out = String::with_capacity(text.len() + member.len() + 4);
    out.push_str(text[..end].trim_end());
    out.push_str(",\n  ");
    out.push_str(member);
    out.push_str("\n}\n");
    Bytes::from(out)
}

/// The document padded with an unknown member to `size` bytes or more.
pub(super) fn pad(document: &[u8], size: usize) -> Bytes {
    let filler = "x".repeat(size.saturating_sub(document.len()));
    insert_member(document, &format!("\"x-padding\": \"{filler}\""))
}

/// The document with an array nested `depth` deep.
pub(super) fn nest(document: &[u8], depth: usize) -> Bytes {
    let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    insert_member(document, &format!("\"x-deep\": {deep}"))
}

/// The body fed `drip.bytes` at a time, `drip.every` apart, until it is
/// all sent or the testbed shuts down.
pub(super) fn drip_body(body: Bytes, drip: Drip, shutdown: CancellationToken) -> Body {
    let step = drip.bytes.max(1);
    let stream = futures_util::stream::unfold(0usize, move |pos| {
        let (body, shutdown) = (body.clone(), shutdown.clone());
        async move {
            if pos >= body.len() {
                return None;
            }
            tokio::select! {
                () = shutdown.cancelled() => Some((
                    Err(std::io::Error::other("the testbed is shutting down")),
                    body.len(),
                )),
                () = tokio::time::sleep(drip.every) => {
                    let end = (pos + step).min(body.len());
                    Some((Ok(body.slice(pos..end)), end))
                }
            }
        }
    });
    Body::from_stream(stream)
}
