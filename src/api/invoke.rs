//! The invocation gateway's routes (docs/protocol.md#gateway):
//! `POST /agents/{id}/invoke` (`{"operation", "input", "stream"}`, or an
//! array of such calls: a batch) and `POST /agents/{id}/operations/{op}`
//! (the input itself), both needing the `invoke` scope; the
//! [`Gateway`](crate::gateway::Gateway)'s outcomes as answers; a streamed
//! answer passed on as it arrives; `Idempotency-Key`.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures_util::StreamExt as _;
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::audit::AuditTarget;
use super::caller::Caller;
use super::error::{ApiError, BodyTooLarge, ErrorBody, ErrorCode, NotJson};
use super::json::JsonBody;
use super::observe::RequestId;
use super::state::AppState;
use super::visibility::Reader;
use crate::gateway::idempotency::valid_key;
use crate::gateway::{Call, Claim, GatewayError, Invoked, Kept};

/// Body of `POST /agents/{id}/invoke`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct InvokeBody {
    /// The operation to call; may be left out when the agent has one.
    operation: Option<String>,
    /// The input, as the operation's input schema describes it.
    #[schema(value_type = Object)]
    input: Value,
    /// Pass the agent's answer on as it arrives (as `Accept:
    /// text/event-stream` asks too); AIDIP agents only; not in a batch.
    #[serde(default)]
    stream: bool,
}

/// What `POST /agents/{id}/invoke` takes: one call, or a batch of them.
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // the OpenAPI document's only
pub(super) enum InvokeRequest {
    /// One call.
    One(InvokeBody),
    /// A batch: at most 32 calls, answered in order.
    Batch(Vec<InvokeBody>),
}

/// One result of a batch.
#[derive(Debug, serde::Serialize, ToSchema)]
pub(super) struct BatchResult {
    /// The call's own status.
    status: u16,
    /// The operation called.
    operation: Option<String>,
    /// The agent's answer, or the error object.
    #[schema(value_type = Object)]
    body: Value,
}

/// Most calls in one batch.
pub(super) const MAX_BATCH: usize = 32;
/// Calls of one batch in flight at once.
const BATCH_IN_FLIGHT: usize = 4;
/// Largest answer read back (to keep it for an `Idempotency-Key`, or to
/// put it in a batch's answer).
const MAX_READ_BACK: usize = 8 << 20;
/// The request header naming a call's idempotency key.
const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// A response extension: whether the call reached the agent (an answer
/// to a call that did not is not kept for its `Idempotency-Key`).
#[derive(Debug, Clone, Copy)]
struct Sent(bool);

/// `POST /agents/{id}/invoke`: calls an agent this node knows, through
/// this node.
#[utoipa::path(post, path = "/agents/{id}/invoke", tag = "agents",
    params(
        ("id" = String, Path, description = "Agent id"),
        ("agent-authorization" = Option<String>, Header, description = "Passed to the agent as `Authorization` (never logged nor kept)"),
        ("agent-api-key" = Option<String>, Header, description = "Passed to the agent as `X-API-Key` (never logged nor kept)"),
        ("idempotency-key" = Option<String>, Header, description = "A retry with the same key (and body) within `gateway.idempotency_window` gets the first answer again, with `idempotent-replayed: true`, instead of a second call"),
    ),
    request_body(content = InvokeRequest, description = "One call, or an array of at most 32 (a batch)"),
    responses(
        (status = 207, description = "A batch in which a call failed: every result in order, each with its own status", body = Vec<BatchResult>),
        (status = 200, description = "The agent's answer (its JSON; for a batch, every result in order, each with its own status); a streamed answer as the agent sends it", body = Object,
            headers(
                ("x-agentmesh-operation" = String, description = "The operation called (absent for an agent's one implied operation)"),
                ("x-agentmesh-elapsed-ms" = u64, description = "The call's time through this node"),
                ("x-agentmesh-output-invalid" = String, description = "Set when the answer does not match the operation's output schema: the first problem"),
            )),
        (status = 400, description = "An unknown operation, an input the operation's schema refuses (each problem in `details`), or an agent the gateway does not call", body = ErrorBody),
        (status = 401, description = "The agent refused the caller's credentials for it (`AgentError`), or this node's", body = ErrorBody),
        (status = 403, description = "The agent refused the call, or is suspended on this node", body = ErrorBody),
        (status = 404, description = "No such agent here (or not one this client may see), or the agent answered 404", body = ErrorBody),
        (status = 409, description = "The agent answered 409, or a call with this Idempotency-Key still runs", body = ErrorBody),
        (status = 422, description = "The agent answered 422, or this Idempotency-Key came with another body", body = ErrorBody),
        (status = 502, description = "The agent failed, could not be reached, answered what is not JSON or too much, or its endpoint is not one this node connects to", body = ErrorBody),
        (status = 503, description = "The agent or this node is busy (with `Retry-After`)", body = ErrorBody),
        (status = 504, description = "The agent did not answer in time", body = ErrorBody),
        BodyTooLarge,
        NotJson,
    ))]
pub(super) async fn invoke(
    State(state): State<AppState>,
    Path(id): Path<String>,
    reader: Reader,
    caller: Option<Extension<Caller>>,
    request_id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<Value>,
) -> Response {
    let request = Request::new(id, reader, caller, request_id, headers);
    let digest = serde_json::to_vec(&body).unwrap_or_default();
    match body {
        Value::Array(items) => {
            if items.len() > MAX_BATCH {
                let message = format!(
                    "a batch holds at most {MAX_BATCH} calls, not {}",
                    items.len()
                );
                return ApiError::new(ErrorCode::InvalidInput, message.clone())
                    .with_details(json!([{"field": "", "message": message}]))
                    .into_response();
            }
            let calls: Result<Vec<Call>, ApiError> = items
                .into_iter()
                .enumerate()
                .map(|(i, item)| request.parse(item, &format!("/{i}")).map(|(call, _)| call))
                .collect();
            match calls {
                Ok(calls) => request.keyed(&state, &digest, batch(&state, calls)).await,
                Err(e) => e.into_response(),
            }
        }
        body => match request.parse(body, "") {
            Err(e) => e.into_response(),
            Ok((call, stream)) if stream || request.wants_stream() => {
                request.streamed(&state, call).await
            }
            Ok((call, _)) => request.keyed(&state, &digest, single(&state, call)).await,
        },
    }
}

/// `POST /agents/{id}/operations/{op}`: calls one operation of an agent,
/// the body being its input (the draft's sub-resource form).
#[utoipa::path(post, path = "/agents/{id}/operations/{op}", tag = "agents",
    params(
        ("id" = String, Path, description = "Agent id"),
        ("op" = String, Path, description = "The operation"),
        ("agent-authorization" = Option<String>, Header, description = "Passed to the agent as `Authorization` (never logged nor kept)"),
        ("agent-api-key" = Option<String>, Header, description = "Passed to the agent as `X-API-Key` (never logged nor kept)"),
    ),
    request_body(content = Object, description = "The input, as the operation's input schema describes it"),
    responses(
        (status = 200, description = "The agent's answer (its JSON)", body = Object),
        (status = 400, description = "An unknown operation or an input the schema refuses", body = ErrorBody),
        (status = 401, description = "The agent refused the caller's credentials for it, or this node's", body = ErrorBody),
        (status = 403, description = "The agent refused the call, or is suspended on this node", body = ErrorBody),
        (status = 404, description = "No such agent here, or the agent answered 404", body = ErrorBody),
        (status = 409, description = "The agent answered 409", body = ErrorBody),
        (status = 422, description = "The agent answered 422", body = ErrorBody),
        (status = 502, description = "The agent failed or could not be reached", body = ErrorBody),
        (status = 503, description = "The agent or this node is busy (with `Retry-After`)", body = ErrorBody),
        (status = 504, description = "The agent did not answer in time", body = ErrorBody),
        BodyTooLarge,
        NotJson,
    ))]
pub(super) async fn operation(
    State(state): State<AppState>,
    Path((id, op)): Path<(String, String)>,
    reader: Reader,
    caller: Option<Extension<Caller>>,
    request_id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    JsonBody(input): JsonBody<Value>,
) -> Response {
    let request = Request::new(id, reader, caller, request_id, headers);
    let digest = serde_json::to_vec(&json!([op, input])).unwrap_or_default();
    let call = request.call(Some(op), input);
    if request.wants_stream() {
        return request.streamed(&state, call).await;
    }
    request.keyed(&state, &digest, single(&state, call)).await
}

/// What every call of one request shares.
struct Request {
    agent: String,
    reader: Reader,
    /// Who calls, as the idempotency keys are kept by.
    who: String,
    request_id: Option<String>,
    headers: HeaderMap,
}

impl Request {
    fn new(
        agent: String,
        reader: Reader,
        caller: Option<Extension<Caller>>,
        request_id: Option<Extension<RequestId>>,
        headers: HeaderMap,
    ) -> Self {
        Self {
            agent,
            reader,
            who: caller.map_or_else(
                || "anonymous".to_owned(),
                |Extension(c)| c.principal.to_string(),
            ),
            request_id: request_id.map(|Extension(r)| r.as_str().to_owned()),
            headers,
        }
    }

    fn call(&self, operation: Option<String>, input: Value) -> Call {
        Call {
            agent: self.agent.clone(),
            operation,
            input,
            headers: self.headers.clone(),
            request_id: self.request_id.clone(),
            viewer: self.reader.0.clone(),
        }
    }

    /// One call of the body (at `pointer` in it), and whether it asks for
    /// a streamed answer.
    fn parse(&self, item: Value, pointer: &str) -> Result<(Call, bool), ApiError> {
        let body: InvokeBody = serde_json::from_value(item).map_err(|e| {
            let message =
                format!("not a call: {e} (expected {{\"operation\", \"input\", \"stream\"}})");
            ApiError::new(ErrorCode::InvalidInput, message.clone())
                .with_details(json!([{"field": pointer, "message": message}]))
        })?;
        if body.stream && !pointer.is_empty() {
            let message = "a call in a batch cannot stream its answer".to_owned();
            return Err(
                ApiError::new(ErrorCode::InvalidInput, message.clone()).with_details(
                    json!([{"field": format!("{pointer}/stream"), "message": message}]),
                ),
            );
        }
        Ok((self.call(body.operation, body.input), body.stream))
    }

    /// Whether `Accept` asks for an event stream.
    fn wants_stream(&self) -> bool {
        self.headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/event-stream"))
    }

    /// Answers `run`'s response, or, under an `Idempotency-Key`, the first
    /// answer given to the same caller's call with that key and body.
    async fn keyed(
        &self,
        state: &AppState,
        digest: &[u8],
        run: impl std::future::Future<Output = Response>,
    ) -> Response {
        let key = match idempotency_key(&self.headers) {
            Ok(Some(key)) => key,
            Ok(None) => return run.await,
            Err(refusal) => return refusal.into_response(),
        };
        let Some(gateway) = state.gateway() else {
            return run.await;
        };
        let keys = gateway.keys();
        let refused = |status: StatusCode, message: &str| {
            let mut r = ApiError::new(ErrorCode::InvalidInput, message)
                .with_status(status)
                .with_details(json!([{"field": "Idempotency-Key", "message": message}]))
                .into_response();
            r.extensions_mut()
                .insert(AuditTarget(format!("{}#idempotency", self.agent)));
            r
        };
        match keys.claim(&self.who, &self.agent, &key, digest) {
            Claim::InFlight => refused(
                StatusCode::CONFLICT,
                "a call with this Idempotency-Key is still running",
            ),
            Claim::Mismatch => refused(
                StatusCode::UNPROCESSABLE_ENTITY,
                "this Idempotency-Key was used with another request body",
            ),
            Claim::Replay(kept) => match kept.body {
                Some(body) => replayed(&self.agent, kept.status, &kept.headers, body),
                None => refused(
                    StatusCode::CONFLICT,
                    "the call with this Idempotency-Key ran; its answer was too large to keep",
                ),
            },
            Claim::Run => {
                let response = run.await;
                let sent = response.extensions().get::<Sent>().is_some_and(|s| s.0);
                if !sent {
                    keys.forget(&self.who, &self.agent, &key);
                    return response;
                }
                let (parts, body) = response.into_parts();
                let body = axum::body::to_bytes(body, MAX_READ_BACK).await.ok();
                let kept_headers: Vec<(String, String)> = parts
                    .headers
                    .iter()
                    .filter(|(n, _)| {
                        *n == header::CONTENT_TYPE
                            || *n == header::RETRY_AFTER
                            || n.as_str().starts_with("x-agentmesh-")
                    })
                    .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
                    .collect();
                keys.done(
                    &self.who,
                    &self.agent,
                    &key,
                    Kept {
                        status: parts.status.as_u16(),
                        headers: kept_headers,
                        body: body.clone(),
                    },
                );
                Response::from_parts(parts, Body::from(body.unwrap_or_default()))
            }
        }
    }

    /// A call whose answer is passed on as it arrives.
    async fn streamed(&self, state: &AppState, call: Call) -> Response {
        if self.headers.contains_key(IDEMPOTENCY_KEY) {
            let message = "a streamed answer is not kept: call without Idempotency-Key";
            return ApiError::new(ErrorCode::InvalidInput, message)
                .with_details(json!([{"field": "Idempotency-Key", "message": message}]))
                .into_response();
        }
        let target = target_of(&call);
        let agent = call.agent.clone();
        let mut response = match state.gateway() {
            None => no_gateway(),
            Some(gateway) => match gateway.invoke_stream(call).await {
                Ok((operation, status, content_type, body)) => {
                    tracing::info!(agent = %agent, operation = ?operation, "invoked, streaming");
                    let mut r = Response::new(Body::from_stream(body));
                    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
                    if let Ok(v) = HeaderValue::from_str(&content_type) {
                        r.headers_mut().insert(header::CONTENT_TYPE, v);
                    }
                    if let Some(op) = operation
                        .as_deref()
                        .and_then(|o| HeaderValue::from_str(o).ok())
                    {
                        r.headers_mut()
                            .insert(HeaderName::from_static("x-agentmesh-operation"), op);
                    }
                    r
                }
                Err(e) => {
                    tracing::info!(agent = %agent, reason = e.reason(), error = ?e, "invocation failed");
                    failure(e)
                }
            },
        };
        response.extensions_mut().insert(AuditTarget(target));
        response
    }
}

/// The request's `Idempotency-Key`, when it has one.
///
/// # Errors
/// 400 for a key that is not 1 to 255 visible ASCII characters.
pub(super) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(v) = headers.get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    match v.to_str().ok().filter(|k| valid_key(k)) {
        Some(k) => Ok(Some(k.to_owned())),
        None => {
            let message = "Idempotency-Key must be 1 to 255 visible ASCII characters";
            Err(ApiError::new(ErrorCode::InvalidInput, message)
                .with_details(json!([{"field": "Idempotency-Key", "message": message}])))
        }
    }
}

/// `{agent}#{operation}`, what the audit entry names.
fn target_of(call: &Call) -> String {
    format!(
        "{}#{}",
        call.agent,
        call.operation.as_deref().unwrap_or_default()
    )
}

fn no_gateway() -> Response {
    ApiError::new(
        ErrorCode::NotFound,
        "this node runs no invocation gateway (gateway.enabled = false)",
    )
    .into_response()
}

/// A kept answer, again.
fn replayed(
    agent: &str,
    status: u16,
    headers: &[(String, String)],
    body: bytes::Bytes,
) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    for (name, value) in headers {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            r.headers_mut().insert(n, v);
        }
    }
    r.headers_mut().insert(
        HeaderName::from_static("idempotent-replayed"),
        HeaderValue::from_static("true"),
    );
    r.extensions_mut()
        .insert(AuditTarget(format!("{agent}#replay")));
    r
}

/// Runs one call and answers it, naming the call in the audit entry.
async fn single(state: &AppState, call: Call) -> Response {
    let target = target_of(&call);
    let agent = call.agent.clone();
    let mut response = match state.gateway() {
        None => no_gateway(),
        Some(gateway) => match gateway.invoke(call).await {
            Ok(invoked) => {
                tracing::info!(agent = %agent, operation = ?invoked.operation, ms = invoked.elapsed.as_millis() as u64, "invoked");
                success(invoked)
            }
            Err(e) => {
                tracing::info!(agent = %agent, reason = e.reason(), error = ?e, "invocation failed");
                failure(e)
            }
        },
    };
    response.extensions_mut().insert(AuditTarget(target));
    response
}

/// Runs a batch's calls, a few at a time, and answers every result in
/// order, each with its own status: 200 when all worked, else 207.
async fn batch(state: &AppState, calls: Vec<Call>) -> Response {
    let agent = calls.first().map(|c| c.agent.clone()).unwrap_or_default();
    let count = calls.len();
    let results: Vec<(u16, Option<String>, Value, bool)> = futures_util::stream::iter(calls)
        .map(|call| async move {
            let operation = call.operation.clone();
            let response = single(state, call).await;
            let status = response.status().as_u16();
            let sent = response.extensions().get::<Sent>().is_some_and(|s| s.0);
            let body = axum::body::to_bytes(response.into_body(), MAX_READ_BACK)
                .await
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or(Value::Null);
            (status, operation, body, sent)
        })
        .buffered(BATCH_IN_FLIGHT)
        .collect()
        .await;
    let all_ok = results.iter().all(|(s, ..)| (200..300).contains(s));
    let sent = results.iter().any(|r| r.3);
    let items: Vec<Value> = results
        .into_iter()
        .map(|(status, operation, body, _)| {
            json!({"status": status, "operation": operation, "body": body})
        })
        .collect();
    let status = if all_ok {
        StatusCode::OK
    } else {
        StatusCode::MULTI_STATUS
    };
    let mut response = (status, Json(Value::Array(items))).into_response();
    response.extensions_mut().insert(Sent(sent));
    response
        .extensions_mut()
        .insert(AuditTarget(format!("{agent}#batch({count})")));
    response
}

fn success(invoked: Invoked) -> Response {
    // 202: an A2A task still running when the agent answered; every other
    // result is 200.
    let status = if invoked.status == 202 {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    let mut response = (status, Json(invoked.output)).into_response();
    response.extensions_mut().insert(Sent(true));
    let h = response.headers_mut();
    if let Some(op) = invoked
        .operation
        .as_deref()
        .and_then(|o| HeaderValue::from_str(o).ok())
    {
        h.insert(HeaderName::from_static("x-agentmesh-operation"), op);
    }
    h.insert(
        HeaderName::from_static("x-agentmesh-elapsed-ms"),
        HeaderValue::from(u64::try_from(invoked.elapsed.as_millis()).unwrap_or(u64::MAX)),
    );
    if let Some(first) = invoked.output_problems.first() {
        let text = format!(
            "{} problems; first at {:?}: {}",
            invoked.output_problems.len(),
            first.field,
            first.message
        );
        let text: String = text
            .chars()
            .filter(|c| c.is_ascii() && !c.is_ascii_control())
            .take(300)
            .collect();
        if let Ok(v) = HeaderValue::from_str(&text) {
            h.insert(HeaderName::from_static("x-agentmesh-output-invalid"), v);
        }
    }
    response
}

/// A failed call as the draft's error object, with the status its cause
/// gives it; never a 2xx.
fn failure(e: GatewayError) -> Response {
    let message = e.to_string();
    let retry_after = match &e {
        GatewayError::AgentBusy { retry_after } => Some(retry_after.as_secs().max(1)),
        GatewayError::Busy(_) => Some(1),
        _ => None,
    };
    let details = |extra: Value| json!({"reason": e.reason(), "upstream": extra});
    let error =
        match &e {
            GatewayError::NotFound { .. } => ApiError::new(ErrorCode::NotFound, message),
            GatewayError::Suspended { .. } => ApiError::new(ErrorCode::Forbidden, message),
            GatewayError::NotInvocable(_) | GatewayError::NoOperations => {
                ApiError::new(ErrorCode::InvalidInput, message)
            }
            GatewayError::UnknownOperation { known, .. } => {
                ApiError::new(ErrorCode::InvalidInput, message.clone()).with_details(
                    json!([{"field": "/operation", "message": message, "known": known}]),
                )
            }
            GatewayError::InvalidInput(violations) => {
                let problems: Vec<Value> = violations
                    .iter()
                    .map(|v| json!({"field": format!("/input{}", v.field), "message": v.message}))
                    .collect();
                ApiError::new(ErrorCode::InvalidInput, message).with_details(Value::Array(problems))
            }
            GatewayError::BadSchema(_) => ApiError::new(ErrorCode::AgentError, message),
            GatewayError::AgentRefused { status, body } => {
                // The agent's own error object, when it gave one, is passed on.
                let told = body
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .map(|m| format!("the agent refused the call ({status}): {m}"))
                    .unwrap_or(message);
                let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST);
                ApiError::new(ErrorCode::AgentError, told)
                    .with_status(status)
                    .with_details(details(json!({"status": status.as_u16(), "body": body})))
            }
            GatewayError::AgentBusy { .. } | GatewayError::Busy(_) => {
                ApiError::new(ErrorCode::Unavailable, message)
            }
            GatewayError::Timeout(_) => ApiError::new(ErrorCode::Upstream, message)
                .with_status(StatusCode::GATEWAY_TIMEOUT)
                .with_details(json!({"reason": e.reason()})),
            // What went wrong with the agent stays in the log; the client is
            // told that it did and why in one word.
            GatewayError::EndpointRefused(_) => ApiError::new(ErrorCode::Upstream, message)
                .with_details(json!({"reason": e.reason()})),
            GatewayError::NotProtocol(_) => ApiError::new(ErrorCode::Upstream, message)
                .with_details(json!({"reason": e.reason()})),
            GatewayError::Unreachable(_)
            | GatewayError::AgentFailed(_)
            | GatewayError::KeyNotProven(_)
            | GatewayError::BadSignature(_) => ApiError::new(ErrorCode::Upstream, message)
                .with_details(json!({"reason": e.reason()})),
        };
    let mut response = error.into_response();
    // Whether the agent may have received the call (then a retry with
    // the same Idempotency-Key must not run it again).
    let sent = matches!(
        e,
        GatewayError::AgentRefused { .. }
            | GatewayError::AgentBusy { .. }
            | GatewayError::AgentFailed(_)
            | GatewayError::NotProtocol(_)
            | GatewayError::BadSignature(_)
            | GatewayError::Timeout(_)
    );
    response.extensions_mut().insert(Sent(sent));
    if let Some(secs) = retry_after {
        response
            .headers_mut()
            .insert(axum::http::header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}
