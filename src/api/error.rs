//! The one error type of the HTTP API: the draft's error object
//! `{"error":{"code","message","details"}}` with the matching status;
//! and the error answers many operations share, declared once for the
//! OpenAPI document (each handler's `#[utoipa::path]` lists them by name
//! beside the answers of its own).

use std::collections::BTreeMap;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::{json, Value};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder, ResponsesBuilder};

use crate::registry::RegistryError;

/// The error codes of docs/protocol.md#api-errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[non_exhaustive]
pub enum ErrorCode {
    /// 400, 413, 405.
    InvalidInput,
    /// 401.
    Unauthorized,
    /// 403.
    Forbidden,
    /// 404.
    NotFound,
    /// 429.
    RateLimited,
    /// The agent answered with an error.
    AgentError,
    /// 502/504: the upstream failed.
    Upstream,
    /// 503.
    Unavailable,
    /// 507: the store has no room for the write (`store.max_bytes`
    /// reached, or the disk full); reads go on.
    InsufficientStorage,
}

impl ErrorCode {
    fn status(self) -> StatusCode {
        match self {
            Self::InvalidInput => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            Self::AgentError | Self::Upstream => StatusCode::BAD_GATEWAY,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::InsufficientStorage => StatusCode::INSUFFICIENT_STORAGE,
        }
    }
}

/// An API error: status, code, message and optional details.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: ErrorCode,
    message: String,
    details: Option<Value>,
}

impl ApiError {
    /// An error with the code's usual status.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            status: code.status(),
            code,
            message: message.into(),
            details: None,
        }
    }

    /// Overrides the status.
    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// Attaches details.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }
}

/// The body of every error answer: `{"error": {...}}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorBody {
    /// What went wrong.
    error: ErrorObject,
}

/// The draft's error object.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorObject {
    /// Machine-readable.
    code: ErrorCode,
    /// For people.
    message: String,
    /// Where it applies: for invalid input, a list of
    /// `{"field": JSON pointer or parameter, "message"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<Value>,
}

impl ErrorObject {
    /// An error object without details (for a body that is not an error
    /// answer, such as the last line of an import).
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorObject {
                code: self.code,
                message: self.message,
                details: self.details,
            },
        };
        let mut response = (self.status, Json(body)).into_response();
        // For the layers after the handler (the audit log's outcome).
        response.extensions_mut().insert(self.code);
        response
    }
}

impl From<RegistryError> for ApiError {
    fn from(e: RegistryError) -> Self {
        match e {
            RegistryError::Invalid { message, problems } => {
                Self::new(ErrorCode::InvalidInput, message).with_details(json!(problems))
            }
            RegistryError::NotFound { .. } => Self::new(ErrorCode::NotFound, e.to_string()),
            RegistryError::AlreadyPublished { .. } => {
                Self::new(ErrorCode::InvalidInput, e.to_string()).with_status(StatusCode::CONFLICT)
            }
            RegistryError::NotLocal { .. }
            | RegistryError::NotOwner { .. }
            | RegistryError::TransferRefused { .. } => {
                Self::new(ErrorCode::Forbidden, e.to_string())
            }
            RegistryError::TooLarge(_) => Self::new(ErrorCode::InvalidInput, e.to_string())
                .with_status(StatusCode::PAYLOAD_TOO_LARGE),
            RegistryError::Store(e) if e.is_out_of_space() => no_room(&e),
            RegistryError::Store(_) => {
                tracing::error!(error = %e, "store failure");
                Self::new(
                    ErrorCode::Unavailable,
                    "the store failed; the request was not applied",
                )
            }
        }
    }
}

/// The answer to a write the store has no room for: 507, saying why.
/// Past `store.max_bytes` nothing was written; on a full disk the write
/// may have reached the store without being made durable, which its
/// client, told 507, retries.
pub(crate) fn no_room(e: &crate::store::StoreError) -> ApiError {
    tracing::warn!(error = %e, "write refused: the store has no room");
    ApiError::new(
        ErrorCode::InsufficientStorage,
        format!("{e}; the write is not acknowledged, reads go on"),
    )
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        // A body whose client went quiet is cut off by the server
        // (`api.body_read_timeout`): 408, saying so.
        if let Some(stalled) = super::serve::BodyStalled::in_chain(&r) {
            return Self::new(ErrorCode::InvalidInput, stalled.to_string())
                .with_status(StatusCode::REQUEST_TIMEOUT);
        }
        // Syntax and shape errors are plain 400s (axum's 422 for a
        // well-formed body of the wrong shape is not in the AIDIP draft);
        // size (413) and content-type (415) keep their own statuses.
        let status = match &r {
            JsonRejection::JsonDataError(_) | JsonRejection::JsonSyntaxError(_) => {
                StatusCode::BAD_REQUEST
            }
            other if other.status().is_client_error() => other.status(),
            _ => StatusCode::BAD_REQUEST,
        };
        Self::new(ErrorCode::InvalidInput, r.body_text()).with_status(status)
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        Self::new(ErrorCode::InvalidInput, r.body_text())
    }
}

/// One error answer of the OpenAPI document: `status`, described, with
/// the error object as its JSON body (what `body = ErrorBody` declares).
fn error_answer(
    status: &str,
    description: &str,
) -> BTreeMap<String, RefOr<utoipa::openapi::Response>> {
    let content = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("ErrorBody")))
        .build();
    ResponsesBuilder::new()
        .response(
            status,
            ResponseBuilder::new()
                .description(description)
                .content("application/json", content),
        )
        .build()
        .into()
}

/// Declares an error answer that many operations give, by name, for the
/// `responses(...)` of their `#[utoipa::path]`.
macro_rules! shared_error_answer {
    ($(#[$doc:meta])* $name:ident, $status:literal, $description:literal) => {
        $(#[$doc])*
        pub(super) struct $name;

        impl utoipa::IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<utoipa::openapi::Response>> {
                error_answer($status, $description)
            }
        }
    };
}

shared_error_answer!(
    /// 413: a body over `api.max_body_bytes`.
    BodyTooLarge,
    "413",
    "The body is too large"
);
shared_error_answer!(
    /// 415: a JSON operation's body sent as something else.
    NotJson,
    "415",
    "The body is not `application/json`"
);
shared_error_answer!(
    /// 503: the store failed, or the concurrency limit or the request
    /// timeout turned the request away.
    StoreFailed,
    "503",
    "The store failed or the node is overloaded"
);
shared_error_answer!(
    /// 507: the store has no room for the write (`store.max_bytes`
    /// reached, or the disk full).
    NoRoom,
    "507",
    "The store has no room for the write; reads go on"
);
shared_error_answer!(
    /// 503: the concurrency limit or the request timeout turned the
    /// request away (an operation that writes nothing to the store).
    Overloaded,
    "503",
    "The node is overloaded"
);

/// The `Retry-After` header of an answer, described.
fn retry_after_header(description: &str) -> utoipa::openapi::header::Header {
    utoipa::openapi::header::HeaderBuilder::new()
        .schema(
            utoipa::openapi::ObjectBuilder::new()
                .schema_type(utoipa::openapi::schema::Type::Integer)
                .minimum(Some(1)),
        )
        .description(Some(description))
        .build()
}

/// Adds the answers of the rate limits (429) and of load shedding (503),
/// both with `Retry-After`, to every operation of `doc`: every route is
/// limited and shed alike. An operation that already gives one of these
/// statuses for a reason of its own keeps its description, extended,
/// and gains the header.
pub(super) fn add_limit_answers(doc: &mut utoipa::openapi::OpenApi) {
    const LIMITED: &str = "Over a rate limit of `api.limits` or the daily quota of its key: \
                           try again after `Retry-After` seconds";
    const SHED: &str = "The node is handling as many requests as it allows \
                        (`api.max_concurrent_requests`): try again after `Retry-After` seconds";
    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            let responses = &mut operation.responses.responses;
            for (status, description, header) in [
                (
                    "429",
                    LIMITED,
                    "Seconds until the client's budget has a request again",
                ),
                ("503", SHED, "When the request was shed: seconds to wait"),
            ] {
                match responses.get_mut(status) {
                    Some(RefOr::T(answer)) => {
                        answer.description = format!("{}; or: {description}", answer.description);
                        answer
                            .headers
                            .insert("Retry-After".into(), retry_after_header(header));
                    }
                    Some(RefOr::Ref(_)) => {}
                    None => {
                        let mut answer = error_answer(status, description);
                        if let Some(RefOr::T(answer)) = answer.get_mut(status) {
                            answer
                                .headers
                                .insert("Retry-After".into(), retry_after_header(header));
                        }
                        responses.extend(answer);
                    }
                }
            }
        }
    }
}
