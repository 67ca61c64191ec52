//! The invocation gateway's routes (docs/protocol.md#gateway):
//! `POST /agents/{id}/invoke` (`{"operation", "input"}`) and
//! `POST /agents/{id}/operations/{op}` (the input itself), both needing
//! the `invoke` scope; the [`Gateway`]'s outcomes as answers.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::audit::AuditTarget;
use super::error::{ApiError, BodyTooLarge, ErrorBody, ErrorCode, NotJson};
use super::json::JsonBody;
use super::observe::RequestId;
use super::state::AppState;
use super::visibility::Reader;
use crate::gateway::{Call, GatewayError, Invoked};

/// Body of `POST /agents/{id}/invoke`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct InvokeBody {
    /// The operation to call; may be left out when the agent has one.
    operation: Option<String>,
    /// The input, as the operation's input schema describes it.
    #[schema(value_type = Object)]
    input: Value,
}

/// `POST /agents/{id}/invoke`: calls an agent this node knows, through
/// this node.
#[utoipa::path(post, path = "/agents/{id}/invoke", tag = "agents",
    params(
        ("id" = String, Path, description = "Agent id"),
        ("agent-authorization" = Option<String>, Header, description = "Passed to the agent as `Authorization` (never logged nor kept)"),
        ("agent-api-key" = Option<String>, Header, description = "Passed to the agent as `X-API-Key` (never logged nor kept)"),
    ),
    request_body = InvokeBody,
    responses(
        (status = 200, description = "The agent's answer (its JSON)", body = Object,
            headers(
                ("x-agentmesh-operation" = String, description = "The operation called (absent for an agent's one implied operation)"),
                ("x-agentmesh-elapsed-ms" = u64, description = "The call's time through this node"),
                ("x-agentmesh-output-invalid" = String, description = "Set when the answer does not match the operation's output schema: the first problem"),
            )),
        (status = 400, description = "An unknown operation, an input the operation's schema refuses (each problem in `details`), or an agent the gateway does not call", body = ErrorBody),
        (status = 401, description = "The agent refused the caller's credentials for it (`AgentError`), or this node's", body = ErrorBody),
        (status = 403, description = "The agent refused the call, or is suspended on this node", body = ErrorBody),
        (status = 404, description = "No such agent here (or not one this client may see), or the agent answered 404", body = ErrorBody),
        (status = 409, description = "The agent answered 409", body = ErrorBody),
        (status = 422, description = "The agent answered 422", body = ErrorBody),
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
    request_id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<InvokeBody>,
) -> Response {
    let call = Call {
        agent: id,
        operation: body.operation,
        input: body.input,
        headers,
        request_id: request_id.map(|Extension(r)| r.as_str().to_owned()),
        viewer: reader.0,
    };
    answer(&state, call).await
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
    request_id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    JsonBody(input): JsonBody<Value>,
) -> Response {
    let call = Call {
        agent: id,
        operation: Some(op),
        input,
        headers,
        request_id: request_id.map(|Extension(r)| r.as_str().to_owned()),
        viewer: reader.0,
    };
    answer(&state, call).await
}

/// Runs the call and answers it, naming the call in the audit entry.
async fn answer(state: &AppState, call: Call) -> Response {
    let target = format!(
        "{}#{}",
        call.agent,
        call.operation.as_deref().unwrap_or_default()
    );
    let agent = call.agent.clone();
    let mut response = match state.gateway() {
        None => ApiError::new(
            ErrorCode::NotFound,
            "this node runs no invocation gateway (gateway.enabled = false)",
        )
        .into_response(),
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

fn success(invoked: Invoked) -> Response {
    let mut response = (StatusCode::OK, Json(invoked.output)).into_response();
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
    let error = match &e {
        GatewayError::NotFound { .. } => ApiError::new(ErrorCode::NotFound, message),
        GatewayError::Suspended { .. } => ApiError::new(ErrorCode::Forbidden, message),
        GatewayError::NotInvocable(_) | GatewayError::NoOperations => {
            ApiError::new(ErrorCode::InvalidInput, message)
        }
        GatewayError::UnknownOperation { known, .. } => {
            ApiError::new(ErrorCode::InvalidInput, message.clone())
                .with_details(json!([{"field": "/operation", "message": message, "known": known}]))
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
        GatewayError::EndpointRefused(_) => {
            ApiError::new(ErrorCode::Upstream, message).with_details(json!({"reason": e.reason()}))
        }
        GatewayError::NotProtocol(_) => {
            ApiError::new(ErrorCode::Upstream, message).with_details(json!({"reason": e.reason()}))
        }
        GatewayError::Unreachable(_) | GatewayError::AgentFailed(_) => {
            ApiError::new(ErrorCode::Upstream, message).with_details(json!({"reason": e.reason()}))
        }
    };
    let mut response = error.into_response();
    if let Some(secs) = retry_after {
        response
            .headers_mut()
            .insert(axum::http::header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}
