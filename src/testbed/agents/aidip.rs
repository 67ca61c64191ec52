//! The AIDIP agent: `POST /aidip/{mode}/{operation}` (and
//! `POST /aidip/{mode}`, the operation `echo`), JSON in and out, in each
//! [`AidipMode`]; and the agent document that describes it.
//!
//! `echo` answers `{"echo": text repeated times (1 by default) joined by
//! " "}`, `count` answers `{"count": items.len()}`; an unknown operation
//! is 404 `NotFound`, a body that is not JSON or not the operation's
//! input is 400 `InvalidInput`, both as the error object
//! `{"error":{"code","message"}}`.

use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde_json::{json, Value};

use super::{
    error_object, has_bearer, json_body, parse_json, shutting_down, unauthorized, Shared, SECRET,
};

/// How long a `Slow` agent waits by default (`?ms=` changes it).
pub const SLOW_DEFAULT: Duration = Duration::from_secs(30);
/// The longest `?ms=` a `Slow` agent honours.
const SLOW_MAX: Duration = Duration::from_secs(600);
/// About how large the `Huge` answer is.
pub const HUGE_BYTES: usize = 12 * 1024 * 1024;
/// The `Huge` answer's chunks.
const HUGE_CHUNK: usize = 64 * 1024;
/// `Retry-After` of the 429 and 503 `Status` answers, in seconds.
const RETRY_AFTER: &str = "7";
/// Most `times` an `echo` repeats its text.
const MAX_TIMES: u64 = 5;

/// How the AIDIP agent behaves: the path segment `{mode}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AidipMode {
    /// Answers as the document says.
    Ok,
    /// Waits [`SLOW_DEFAULT`] (or `?ms=`, at most 600 s) then answers
    /// as `Ok`: the gateway's timeout must cut it.
    Slow,
    /// Answers this status (`status-{code}`, 200 to 999) with the error
    /// object; 429 and 503 also with `Retry-After: 7`.
    Status(u16),
    /// 200 `application/json` whose body is cut short:
    /// `{"echo": "unterminated`.
    Malformed,
    /// 200 JSON of about [`HUGE_BYTES`], streamed in 64 KiB chunks.
    Huge,
    /// 200 `{"unexpected": 1}`, which the output schemas refuse.
    WrongShape,
    /// 200 `text/event-stream`: `data: {"n":1}` to `{"n":3}`, 100 ms
    /// apart, then the end.
    Stream,
    /// 401 with `WWW-Authenticate: Bearer` unless `Authorization: Bearer
    /// agent-secret` or `X-API-Key: agent-secret`; then as `Ok`.
    Auth,
    /// Reads the request and never answers (until shutdown, 503).
    Hang,
}

impl AidipMode {
    /// Every mode but `Status`, and `Status(503)`.
    pub const ALL: [AidipMode; 9] = [
        AidipMode::Ok,
        AidipMode::Slow,
        AidipMode::Status(503),
        AidipMode::Malformed,
        AidipMode::Huge,
        AidipMode::WrongShape,
        AidipMode::Stream,
        AidipMode::Auth,
        AidipMode::Hang,
    ];

    /// The path segment: `ok`, `slow`, `status-{code}`, `malformed`,
    /// `huge`, `wrong-shape`, `stream`, `auth`, `hang`.
    pub fn as_str(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            Self::Ok => "ok",
            Self::Slow => "slow",
            Self::Status(code) => return Cow::Owned(format!("status-{code}")),
            Self::Malformed => "malformed",
            Self::Huge => "huge",
            Self::WrongShape => "wrong-shape",
            Self::Stream => "stream",
            Self::Auth => "auth",
            Self::Hang => "hang",
        })
    }

    /// The mode of a path segment, `None` for anything else.
    pub fn parse(segment: &str) -> Option<Self> {
        if let Some(code) = segment.strip_prefix("status-") {
            return code
                .parse::<u16>()
                .ok()
                .filter(|c| (200..=999).contains(c))
                .map(Self::Status);
        }
        Self::ALL
            .into_iter()
            .filter(|m| !matches!(m, Self::Status(_)))
            .find(|m| m.as_str() == segment)
    }
}

/// The input and output schemas of the two operations, as the document
/// states them and the handlers enforce them.
fn operations() -> Value {
    json!([
        {
            "name": "echo",
            "description": "Echoes the text back, repeated `times` times joined by spaces.",
            "inputs": {
                "type": "object",
                "properties": {
                    "text": { "type": "string" },
                    "times": { "type": "integer", "minimum": 1, "maximum": MAX_TIMES }
                },
                "required": ["text"]
            },
            "outputs": {
                "type": "object",
                "properties": { "echo": { "type": "string" } },
                "required": ["echo"]
            },
            "examples": [
                { "input": { "text": "hi", "times": 2 }, "output": { "echo": "hi hi" } }
            ]
        },
        {
            "name": "count",
            "description": "Counts the items of a list.",
            "inputs": {
                "type": "object",
                "properties": { "items": { "type": "array" } },
                "required": ["items"]
            },
            "outputs": {
                "type": "object",
                "properties": { "count": { "type": "integer", "minimum": 0 } },
                "required": ["count"]
            }
        }
    ])
}

/// The agent document of the agent in `mode` at `base`.
pub(super) fn document(base: &str, id: &str, mode: AidipMode, auth: &str) -> Value {
    let mode = mode.as_str();
    let mut authentication = json!({ "type": auth });
    let instructions = match auth {
        "api_key" => Some("send the agent's secret in X-API-Key".to_owned()),
        "oauth2_bearer" => Some("send the agent's secret as Authorization: Bearer".to_owned()),
        _ => None,
    };
    if let Some(instructions) = instructions {
        authentication["instructions"] = Value::String(instructions);
    }
    json!({
        "id": id,
        "name": format!("Testbed echo agent ({mode})"),
        "description": format!(
            "Echoes text and counts lists; the agentmesh testbed's invokable agent in mode {mode}."
        ),
        "version": "1.0.0",
        "publisher": "agentmesh testbed",
        "capabilities": ["echo", "counting"],
        "tags": ["testbed", mode],
        "endpoint": format!("{base}/aidip/{mode}"),
        "supported_languages": ["en"],
        "authentication": authentication,
        "status": "active",
        "operations": operations(),
    })
}

/// `POST /aidip/{mode}`: the operation `echo`.
pub(super) async fn call_echo(
    state: State<Arc<Shared>>,
    Path(mode): Path<String>,
    query: RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(state, mode, "echo", query, headers, body).await
}

/// `POST /aidip/{mode}/{operation}`.
pub(super) async fn call(
    state: State<Arc<Shared>>,
    Path((mode, operation)): Path<(String, String)>,
    query: RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(state, mode, &operation, query, headers, body).await
}

async fn answer(
    State(shared): State<Arc<Shared>>,
    mode: String,
    operation: &str,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(mode) = AidipMode::parse(&mode) else {
        let message = format!("no AIDIP agent mode {mode:?}");
        return error_object(StatusCode::NOT_FOUND, "NotFound", &message);
    };
    match mode {
        AidipMode::Ok => operate(operation, &body),
        AidipMode::Slow => {
            let wait = slow_delay(query.as_deref());
            tokio::select! {
                () = tokio::time::sleep(wait) => operate(operation, &body),
                () = shared.token.cancelled() => shutting_down(),
            }
        }
        AidipMode::Status(code) => status(code),
        AidipMode::Malformed => json_text(Body::from(r#"{"echo": "unterminated"#)),
        AidipMode::Huge => json_text(huge()),
        AidipMode::WrongShape => json_body(&json!({ "unexpected": 1 })),
        AidipMode::Stream => events(),
        AidipMode::Auth if authorised(&headers) => operate(operation, &body),
        AidipMode::Auth => unauthorized(),
        AidipMode::Hang => {
            shared.token.cancelled().await;
            shutting_down()
        }
    }
}

/// `GET` (and so `HEAD`) `/aidip/{mode}`: what a liveness probe asks.
/// `Auth` wants its credential, `Status` answers its status, `Hang`
/// never answers, `Slow` waits; every other mode answers 200
/// `{"status":"ok"}`.
pub(super) async fn status_check(
    State(shared): State<Arc<Shared>>,
    Path(mode): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let Some(mode) = AidipMode::parse(&mode) else {
        let message = format!("no AIDIP agent mode {mode:?}");
        return error_object(StatusCode::NOT_FOUND, "NotFound", &message);
    };
    let ok = || json_body(&json!({ "status": "ok" }));
    match mode {
        AidipMode::Status(code) => status(code),
        AidipMode::Auth if !authorised(&headers) => unauthorized(),
        AidipMode::Hang => {
            shared.token.cancelled().await;
            shutting_down()
        }
        AidipMode::Slow => {
            tokio::select! {
                () = tokio::time::sleep(slow_delay(query.as_deref())) => ok(),
                () = shared.token.cancelled() => shutting_down(),
            }
        }
        _ => ok(),
    }
}

/// `Authorization: Bearer agent-secret` or `X-API-Key: agent-secret`.
fn authorised(headers: &HeaderMap) -> bool {
    has_bearer(headers)
        || headers
            .get_all("x-api-key")
            .iter()
            .any(|v| v.as_bytes() == SECRET.as_bytes())
}

/// `?ms=` of a `Slow` request, else [`SLOW_DEFAULT`]; at most 600 s.
fn slow_delay(query: Option<&str>) -> Duration {
    let ms = url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(k, _)| k == "ms")
        .and_then(|(_, v)| v.parse::<u64>().ok());
    ms.map_or(SLOW_DEFAULT, Duration::from_millis).min(SLOW_MAX)
}

/// Runs `operation` on `body` as the `Ok` agent does.
fn operate(operation: &str, body: &Bytes) -> Response {
    if !matches!(operation, "echo" | "count") {
        let message = format!("no operation {operation:?}; this agent has echo and count");
        return error_object(StatusCode::NOT_FOUND, "NotFound", &message);
    }
    let Some(input) = parse_json(body) else {
        return invalid("the body is not JSON");
    };
    let output = match operation {
        "echo" => echo(&input),
        _ => count(&input),
    };
    match output {
        Ok(output) => json_body(&output),
        Err(message) => invalid(message),
    }
}

fn invalid(message: &str) -> Response {
    error_object(StatusCode::BAD_REQUEST, "InvalidInput", message)
}

fn echo(input: &Value) -> Result<Value, &'static str> {
    let text = input
        .get("text")
        .and_then(Value::as_str)
        .ok_or("\"text\" must be a string")?;
    let times = match input.get("times") {
        None => 1,
        Some(times) => times
            .as_u64()
            .filter(|t| (1..=MAX_TIMES).contains(t))
            .ok_or("\"times\" must be an integer from 1 to 5")?,
    };
    let repeated = vec![text; times as usize].join(" ");
    Ok(json!({ "echo": repeated }))
}

fn count(input: &Value) -> Result<Value, &'static str> {
    let items = input
        .get("items")
        .and_then(Value::as_array)
        .ok_or("\"items\" must be an array")?;
    Ok(json!({ "count": items.len() }))
}

/// The `Status(code)` answer.
fn status(code: u16) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let name = match status {
        StatusCode::BAD_REQUEST => "InvalidInput",
        StatusCode::UNAUTHORIZED => "Unauthorized",
        StatusCode::FORBIDDEN => "Forbidden",
        StatusCode::NOT_FOUND => "NotFound",
        StatusCode::TOO_MANY_REQUESTS => "RateLimited",
        StatusCode::SERVICE_UNAVAILABLE => "Unavailable",
        _ => "Error",
    };
    let message = format!("this agent answers {code} on request");
    let mut response = error_object(status, name, &message);
    if matches!(
        status,
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
    ) {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER));
    }
    response
}

/// 200 `application/json` with `body` as is.
fn json_text(body: Body) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// `{"echo":"xxx…"}` of about [`HUGE_BYTES`], streamed: one 64 KiB
/// chunk shared by every piece, never the whole answer in memory.
fn huge() -> Body {
    let chunk = Bytes::from(vec![b'x'; HUGE_CHUNK]);
    let pieces = std::iter::once(Bytes::from_static(br#"{"echo":""#))
        .chain(std::iter::repeat_n(chunk, HUGE_BYTES / HUGE_CHUNK))
        .chain(std::iter::once(Bytes::from_static(br#""}"#)));
    Body::from_stream(stream::iter(pieces.map(Ok::<_, Infallible>)))
}

/// Three server-sent events, 100 ms apart, then the end.
fn events() -> Response {
    let events = stream::unfold(1u8, |n| async move {
        if n > 3 {
            return None;
        }
        if n > 1 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let event = Bytes::from(format!("data: {{\"n\":{n}}}\n\n"));
        Some((Ok::<_, Infallible>(event), n + 1))
    });
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        Body::from_stream(events),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_through_their_path_segment() {
        for mode in AidipMode::ALL.into_iter().chain([AidipMode::Status(429)]) {
            assert_eq!(AidipMode::parse(&mode.as_str()), Some(mode), "{mode:?}");
        }
        for bad in ["", "OK", "status-", "status-99", "status-1000", "status-x"] {
            assert_eq!(AidipMode::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_operations_follow_their_schemas() {
        let times = json!({ "text": "hi", "times": 3 });
        assert_eq!(echo(&times), Ok(json!({ "echo": "hi hi hi" })));
        assert_eq!(echo(&json!({ "text": "" })), Ok(json!({ "echo": "" })));
        for bad in [
            json!({}),
            json!({ "text": 1 }),
            json!({ "text": "a", "times": 0 }),
            json!({ "text": "a", "times": 6 }),
            json!({ "text": "a", "times": 1.5 }),
            json!("text"),
        ] {
            assert!(echo(&bad).is_err(), "{bad}");
        }
        assert_eq!(
            count(&json!({ "items": [1, "a"] })),
            Ok(json!({ "count": 2 }))
        );
        assert!(count(&json!({ "items": {} })).is_err());
    }

    #[test]
    fn a_slow_delay_comes_from_the_query_within_bounds() {
        assert_eq!(slow_delay(None), SLOW_DEFAULT);
        assert_eq!(slow_delay(Some("ms=250")), Duration::from_millis(250));
        assert_eq!(slow_delay(Some("a=1&ms=x")), SLOW_DEFAULT);
        assert_eq!(slow_delay(Some("ms=99999999999")), SLOW_MAX);
    }
}
