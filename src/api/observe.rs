//! What the API shows about itself: a request id on every request (the
//! caller's `X-Request-Id` when it is a sane short token, else a new one),
//! carried by the request's tracing span and returned as `X-Request-Id`
//! on every response, errors included; every answered request counted by
//! route template, method and status ([`Metrics::request`]); and
//! `GET /metrics`.

use axum::extract::{MatchedPath, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::state::AppState;
use crate::metrics::{self, Metrics};

/// The request id header, both ways.
pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// Longest incoming request id kept, in bytes; a longer one is replaced.
pub const MAX_REQUEST_ID_BYTES: usize = 64;

/// A request's id, in its extensions (the tracing span reads it there).
#[derive(Debug, Clone)]
pub struct RequestId(HeaderValue);

impl RequestId {
    /// The id as text.
    pub fn as_str(&self) -> &str {
        // Only ever built from visible ASCII (`sane`, `generate`).
        self.0.to_str().unwrap_or_default()
    }
}

/// Whether an incoming id may be kept: 1 to [`MAX_REQUEST_ID_BYTES`]
/// bytes of ASCII letters, digits, `-`, `_`, `.` and `:` (what tracing
/// systems and proxies send: UUIDs, hex, `trace:span`), nothing a log
/// line or a header could be confused by.
fn sane(value: &HeaderValue) -> bool {
    let bytes = value.as_bytes();
    (1..=MAX_REQUEST_ID_BYTES).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// A new id: 16 random bytes, hex.
fn generate() -> HeaderValue {
    let id = hex::encode(rand::random::<[u8; 16]>());
    HeaderValue::from_str(&id).expect("hex digits are a valid header value")
}

/// The outermost layer: gives the request its id, runs it, counts the
/// answer and returns the id with it.
pub(super) async fn observe(
    State(metrics): State<Metrics>,
    mut req: Request,
    next: Next,
) -> Response {
    let id = match req.headers().get(&REQUEST_ID_HEADER) {
        Some(v) if sane(v) => v.clone(),
        _ => generate(),
    };
    req.extensions_mut().insert(RequestId(id.clone()));
    let method = req.method().clone();
    let route = req.extensions().get::<MatchedPath>().cloned();
    let mut response = next.run(req).await;
    metrics.request(
        route.as_ref().map(MatchedPath::as_str),
        &method,
        response.status().as_u16(),
    );
    response.headers_mut().insert(REQUEST_ID_HEADER, id);
    response
}

/// The span of one request: method, path, route template and request id.
pub(super) fn span(req: &Request) -> tracing::Span {
    let id = req
        .extensions()
        .get::<RequestId>()
        .map_or("", RequestId::as_str);
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str);
    tracing::info_span!(
        "request",
        method = %req.method(),
        uri = %req.uri().path(),
        route,
        request_id = id,
    )
}

/// `GET /metrics`: the node's metrics in the OpenMetrics text format.
/// Needs no token: it holds counts, never a token, key or request content.
#[utoipa::path(get, path = "/metrics", tag = "node",
    responses((status = 200, description = "The metrics", body = String,
        content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8")))]
pub(super) async fn render(State(state): State<AppState>) -> Response {
    let text = state.metrics().render().await;
    (
        [(
            CONTENT_TYPE,
            HeaderValue::from_static(metrics::CONTENT_TYPE),
        )],
        text,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sane_ids_are_short_plain_tokens() {
        for ok in [
            "a",
            "0f9e-22",
            "trace:span.1_x",
            &"x".repeat(MAX_REQUEST_ID_BYTES),
        ] {
            assert!(sane(&HeaderValue::from_str(ok).unwrap()), "{ok}");
        }
        for bad in [
            "",
            "has space",
            "semi;colon",
            "quote\"",
            "new\tline",
            &"x".repeat(MAX_REQUEST_ID_BYTES + 1),
        ] {
            assert!(!sane(&HeaderValue::from_str(bad).unwrap()), "{bad:?}");
        }
        assert!(!sane(&HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap()));
    }

    #[test]
    fn generated_ids_are_sane_and_differ() {
        let (a, b) = (generate(), generate());
        assert!(sane(&a) && sane(&b));
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
    }
}
