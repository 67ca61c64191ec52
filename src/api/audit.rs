//! The API's side of the audit log (`store/audit.rs`): the `trail` layer
//! that records every write route's request (who, from where, what, on
//! what, how it ended, the request id, and for an agent write the signed
//! record it left) and every request refused for its credentials; the
//! [`record`] function for what the layer does not see; and the admin
//! reads, `GET /admin/audit`, `GET /admin/audit/verify` and `GET
//! /admin/audit/{seq}`.
//!
//! The layer appends the entry after the handler answered and flushes
//! it before the answer leaves: a write the API acknowledges always has
//! a durable entry. When the entry cannot be written, a successful
//! answer becomes a 503 (the write was applied, and not acknowledged).

use axum::body::Body;
use axum::extract::{MatchedPath, Path, Query, RawPathParams, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use serde::Serialize;
use serde_json::{json, Value};

use super::caller::Caller;
use super::error::{ApiError, ErrorBody, ErrorCode, StoreFailed};
use super::guards::Admin;
use super::observe::RequestId;
use super::state::AppState;
use crate::store::audit::{AuditEntry, VerifyReport, MAX_AUDIT_PAGE};
use crate::store::{AuditAction, AuditEvent, AuditOutcome};

/// Entries a page holds unless `limit` says otherwise.
const DEFAULT_PAGE: usize = 100;

/// Records `action` on `target` by `caller` (with `count` occurrences) in
/// the audit log and makes it durable: for what the `trail` layer does
/// not see (a failed authentication on a route outside it, an import's
/// result, a key change).
///
/// # Errors
/// [`ErrorCode::Unavailable`] when the store fails.
pub async fn record(
    state: &AppState,
    caller: &Caller,
    action: AuditAction,
    target: &str,
    outcome: AuditOutcome,
    request_id: Option<&str>,
) -> Result<AuditEntry, ApiError> {
    append(
        state,
        event_of(
            caller,
            action,
            target,
            outcome,
            request_id.map(str::to_owned),
        ),
    )
    .await
}

/// The event of `caller` doing `action` on `target`.
pub(super) fn event_of(
    caller: &Caller,
    action: AuditAction,
    target: impl Into<String>,
    outcome: AuditOutcome,
    request_id: Option<String>,
) -> AuditEvent {
    let mut event = AuditEvent::new(caller.principal.to_string(), action, target, outcome);
    event.addr = caller.addr.map(|a| a.to_string());
    event.request_id = request_id;
    event
}

/// Who asks, under which request, for an entry written after the
/// handler returned (an import's result): an extractor.
pub(super) struct Who {
    store: crate::store::Store,
    caller: Caller,
    request_id: Option<String>,
}

impl axum::extract::FromRequestParts<AppState> for Who {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(Who {
            store: state.registry().store().clone(),
            caller: Caller::of(&parts.extensions),
            request_id: parts
                .extensions
                .get::<RequestId>()
                .map(|r| r.as_str().to_owned()),
        })
    }
}

impl Who {
    /// Appends `event` as this caller's (its actor, address and request
    /// id replaced); a failure is logged, the answer having left.
    pub(super) async fn record(&self, mut event: AuditEvent) {
        event.actor = self.caller.principal.to_string();
        event.addr = self.caller.addr.map(|a| a.to_string());
        event.request_id.clone_from(&self.request_id);
        if let Err(e) = self.store.audit(event).await {
            tracing::error!(error = %e, "the audit log failed");
        }
    }
}

async fn append(state: &AppState, event: AuditEvent) -> Result<AuditEntry, ApiError> {
    state.registry().store().audit(event).await.map_err(|e| {
        // A full disk is the client's 507 like any other write's: the
        // write may have gone in, and is not acknowledged.
        if e.is_out_of_space() {
            return super::error::no_room(&e);
        }
        tracing::error!(error = %e, "the audit log failed");
        ApiError::new(
            ErrorCode::Unavailable,
            "the audit log failed: the request may have been applied, and is not acknowledged",
        )
    })
}

/// What a handler says its request acted on, for its audit entry (a
/// response extension).
#[derive(Debug, Clone)]
pub(super) struct AuditTarget(pub(super) String);

/// The action a write route performs, by method and route.
fn action_of(method: &Method, route: &str) -> Option<AuditAction> {
    Some(match (method.as_str(), route) {
        ("POST", "/agents") => AuditAction::Register,
        ("PUT", "/agents/{id}") => AuditAction::Update,
        ("DELETE", "/agents/{id}") => AuditAction::Delete,
        ("POST", "/crawl") => AuditAction::CrawlRequest,
        ("PUT", "/admin/agents/{id}/suspension") => AuditAction::Suspend,
        ("DELETE", "/admin/agents/{id}/suspension") => AuditAction::Unsuspend,
        ("POST", "/admin/agents/{id}/transfer") => AuditAction::Transfer,
        ("POST", "/admin/import") => AuditAction::Import,
        ("PUT", "/agents/{id}/visibility") => AuditAction::Update,
        ("POST", "/agents/{id}/invoke" | "/agents/{id}/operations/{op}") => AuditAction::Invoke,
        _ => return None,
    })
}

/// Whether the action writes an agent's record, whose signed bytes the
/// entry then keeps (the version the trail shows).
fn keeps_record(action: AuditAction) -> bool {
    matches!(
        action,
        AuditAction::Register | AuditAction::Update | AuditAction::Delete | AuditAction::Transfer
    )
}

/// The layer: runs the handler, then records what it did (for a write
/// route) or that the credentials were refused (any route answering
/// 401).
pub(super) async fn trail(
    State(state): State<AppState>,
    matched: Option<MatchedPath>,
    // A path parameter that is not UTF-8 once decoded is the handler's to
    // refuse in its own error shape, not this layer's.
    params: Result<RawPathParams, axum::extract::rejection::RawPathParamsRejection>,
    req: Request,
    next: Next,
) -> Response {
    let route = matched.as_ref().map_or("", MatchedPath::as_str);
    let action = action_of(req.method(), route);
    let caller = Caller::of(req.extensions());
    let request_id = req
        .extensions()
        .get::<RequestId>()
        .map(|r| r.as_str().to_owned());
    let mut target = params
        .iter()
        .flat_map(RawPathParams::iter)
        .find(|(name, _)| *name == "id")
        .map(|(_, v)| v.to_owned())
        .unwrap_or_default();
    // The two writes whose target is in their (small, JSON) body.
    let req = if target.is_empty()
        && matches!(
            action,
            Some(AuditAction::Register | AuditAction::CrawlRequest)
        ) {
        let (parts, body) = req.into_parts();
        let bytes = match read_body(body, state.config().max_body_bytes).await {
            Ok(bytes) => bytes,
            Err(refused) => return refused,
        };
        target = body_target(&bytes);
        Request::from_parts(parts, Body::from(bytes))
    } else {
        req
    };
    let started = std::time::Instant::now();
    let response = next.run(req).await;
    let took = started.elapsed();
    let status = response.status();
    let action = match action {
        // An agent's own 401, passed on by the gateway, is not this
        // node refusing credentials.
        _ if status == StatusCode::UNAUTHORIZED
            && response.extensions().get::<ErrorCode>() != Some(&ErrorCode::AgentError) =>
        {
            AuditAction::AuthFailed
        }
        Some(a) => a,
        None => return response,
    };
    if target.is_empty() && action == AuditAction::Register {
        target = location_id(&response).unwrap_or_default();
    }
    // A handler may name its target better than the path does (a call's
    // operation).
    if let Some(AuditTarget(named)) = response.extensions().get::<AuditTarget>() {
        target.clone_from(named);
    }
    let mut event = event_of(&caller, action, target, outcome_of(&response), request_id);
    if action == AuditAction::Invoke {
        event.duration_ms = Some(u64::try_from(took.as_millis()).unwrap_or(u64::MAX));
    }
    if action == AuditAction::AuthFailed {
        auth_failed(&state, event).await;
        return response;
    }
    if status.is_success() && keeps_record(action) {
        event.record = match state.registry().store().get(&event.target).await {
            Ok(held) => held.map(|h| h.record.encode()),
            Err(e) => {
                tracing::error!(error = %e, "reading the record an audit entry keeps");
                None
            }
        };
    }
    match append(&state, event).await {
        Ok(_) => response,
        Err(e) if status.is_success() => e.into_response(),
        Err(_) => response,
    }
}

/// A write's body read whole (it is small JSON) so its target can be
/// named, or the answer to a client that sent too much or went quiet.
async fn read_body(body: Body, limit: usize) -> Result<axum::body::Bytes, Response> {
    match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => Ok(bytes),
        // A client that went quiet mid-body (`api.body_read_timeout`).
        Err(e) if super::serve::BodyStalled::in_chain(&e).is_some() => {
            let message = super::serve::BodyStalled::in_chain(&e)
                .map(ToString::to_string)
                .unwrap_or_default();
            Err(ApiError::new(ErrorCode::InvalidInput, message)
                .with_status(StatusCode::REQUEST_TIMEOUT)
                .into_response())
        }
        Err(_) => Err(ApiError::new(
            ErrorCode::InvalidInput,
            "the body is too large or was cut off",
        )
        .with_status(StatusCode::PAYLOAD_TOO_LARGE)
        .into_response()),
    }
}

/// Records a refused credential. Repeatable at will by anyone, so
/// aggregated per address (`store/audit.rs`): at most one entry per
/// address per minute, carrying the count.
pub(super) async fn auth_failed(state: &AppState, event: AuditEvent) {
    let key = format!("auth:{}", event.addr.as_deref().unwrap_or("-"));
    let store = state.registry().store().clone();
    if let Err(e) = store
        .run_blocking(move |s| s.audit_aggregated(&key, event))
        .await
        .and_then(|r| r)
    {
        tracing::error!(error = %e, "the audit log failed");
    }
}

/// The agent id or the domains a write's body names.
fn body_target(bytes: &[u8]) -> String {
    let Ok(v) = serde_json::from_slice::<Value>(bytes) else {
        return String::new();
    };
    if let Some(id) = v.get("id").and_then(Value::as_str) {
        return id.to_owned();
    }
    v.get("domains")
        .and_then(Value::as_array)
        .map(|ds| {
            ds.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// The agent id of a registration's `Location: /agents/{id}`.
fn location_id(response: &Response) -> Option<String> {
    let location = response.headers().get(header::LOCATION)?.to_str().ok()?;
    location.strip_prefix("/agents/").map(str::to_owned)
}

/// How an answer ended: `ok`, or its error code, refused (4xx) or error
/// (5xx).
fn outcome_of(response: &Response) -> AuditOutcome {
    let status = response.status();
    if status.is_success() {
        return AuditOutcome::Ok;
    }
    let code = response
        .extensions()
        .get::<ErrorCode>()
        .and_then(|c| serde_json::to_value(c).ok())
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| status.as_u16().to_string());
    if status.is_server_error() {
        AuditOutcome::Error(code)
    } else {
        AuditOutcome::Refused(code)
    }
}

/// A page of `GET /admin/audit`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct AuditPage {
    /// The entries after `after`, oldest first.
    #[schema(value_type = Vec<Object>)]
    entries: Vec<AuditEntry>,
    /// The `after` of the next page, when more may follow.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_after: Option<u64>,
}

fn bad_param(field: &str, message: String) -> ApiError {
    ApiError::new(ErrorCode::InvalidInput, message.clone())
        .with_details(json!([{"field": field, "message": message}]))
}

/// `GET /admin/audit`: the audit log, paged by seq.
#[utoipa::path(get, path = "/admin/audit", tag = "admin",
    params(
        ("after" = Option<u64>, Query, description = "Entries after this seq (0: from the first held)"),
        ("limit" = Option<usize>, Query, description = "Entries per page, 1 to 1000 (default 100)"),
        ("last" = Option<usize>, Query, description = "Instead of a page: the newest this many entries, 1 to 1000 (not with `after`)"),
    ),
    responses(
        (status = 200, description = "A page of entries (docs/protocol.md#audit)", body = AuditPage),
        (status = 400, description = "An unknown or malformed parameter", body = ErrorBody),
        StoreFailed,
    ))]
pub(super) async fn page(
    State(state): State<AppState>,
    _: Admin,
    params: Result<Query<Vec<(String, String)>>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<AuditPage>, ApiError> {
    let Query(pairs) = params?;
    let (mut after, mut limit, mut last) = (0u64, DEFAULT_PAGE, None);
    for (name, value) in pairs {
        match name.as_str() {
            "last" => {
                last = Some(
                    value
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_AUDIT_PAGE).contains(n))
                        .ok_or_else(|| {
                            bad_param(
                                "last",
                                format!("last must be 1 to {MAX_AUDIT_PAGE}, got {value:?}"),
                            )
                        })?,
                );
            }
            "after" => {
                after = value.parse().map_err(|_| {
                    bad_param("after", format!("after must be a seq, got {value:?}"))
                })?;
            }
            "limit" => {
                limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_AUDIT_PAGE).contains(n))
                    .ok_or_else(|| {
                        bad_param(
                            "limit",
                            format!("limit must be 1 to {MAX_AUDIT_PAGE}, got {value:?}"),
                        )
                    })?;
            }
            other => return Err(bad_param(other, format!("unknown parameter {other:?}"))),
        }
    }
    if let (Some(_), true) = (last, after > 0) {
        return Err(bad_param(
            "last",
            "last and after do not go together".to_owned(),
        ));
    }
    let entries = state
        .registry()
        .store()
        .run_blocking(move |s| match last {
            Some(n) => s.audit_tail(n),
            None => s.audit_page(after, limit),
        })
        .await
        .and_then(|r| r)
        .map_err(store_failed)?;
    let next_after =
        (last.is_none() && entries.len() == limit).then(|| entries[entries.len() - 1].seq);
    Ok(Json(AuditPage {
        entries,
        next_after,
    }))
}

fn store_failed(e: crate::store::StoreError) -> ApiError {
    tracing::error!(error = %e, "reading the audit log");
    ApiError::new(
        ErrorCode::Unavailable,
        "the store failed reading the audit log",
    )
}

/// `GET /admin/audit/verify`: the node checks its chain.
#[utoipa::path(get, path = "/admin/audit/verify", tag = "admin",
    responses(
        (status = 200, description = "The check's report: `ok`, and `broken` naming the first broken entry", body = Object),
        StoreFailed,
    ))]
pub(super) async fn verify(
    State(state): State<AppState>,
    _: Admin,
) -> Result<Json<Value>, ApiError> {
    let key = state.registry().node_key();
    let report: VerifyReport = state
        .registry()
        .store()
        .run_blocking(move |s| s.audit_verify(Some(&key)))
        .await
        .and_then(|r| r)
        .map_err(store_failed)?;
    Ok(Json(verify_json(&report)))
}

/// A report as `GET /admin/audit/verify` and `agentmesh audit verify
/// --json` show it.
pub(crate) fn verify_json(report: &VerifyReport) -> Value {
    json!({
        "ok": report.ok(),
        "checked": report.checked,
        "from": report.from,
        "last": report.last,
        "broken": report.broken,
        "message": report.broken.as_ref().map(ToString::to_string),
    })
}

/// `GET /admin/audit/{seq}`: one entry, and the version of the record it
/// names.
#[utoipa::path(get, path = "/admin/audit/{seq}", tag = "admin",
    params(("seq" = u64, Path, description = "The entry's seq")),
    responses(
        (status = 200, description = "`{entry, record}`: the entry, and when it names a record version, `{type, document, envelope}` (the document as it was, the signed envelope in base64)", body = Object),
        (status = 400, description = "Not a seq", body = ErrorBody),
        (status = 404, description = "No entry with this seq (pruned, or not yet written)", body = ErrorBody),
        StoreFailed,
    ))]
pub(super) async fn one(
    State(state): State<AppState>,
    _: Admin,
    Path(seq): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let seq: u64 = seq
        .parse()
        .map_err(|_| bad_param("seq", format!("{seq:?} is not a seq")))?;
    let found = state
        .registry()
        .store()
        .run_blocking(move |s| show(s, seq))
        .await
        .and_then(|r| r)
        .map_err(store_failed)?;
    found
        .map(Json)
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, format!("no audit entry {seq}")))
}

/// Entry `seq` and the record version it names, as `GET
/// /admin/audit/{seq}` and `agentmesh audit show` print them.
///
/// # Errors
/// The store's.
pub(crate) fn show(
    store: &crate::store::BlockingStore,
    seq: u64,
) -> Result<Option<Value>, crate::store::StoreError> {
    let Some(entry) = store.audit_entry(seq)? else {
        return Ok(None);
    };
    let hash = entry
        .record
        .as_deref()
        .and_then(|h| hex::decode(h).ok())
        .and_then(|h| <[u8; 32]>::try_from(h).ok());
    let record = match hash {
        Some(h) => store.audit_version(&h)?.map(|bytes| version_json(&bytes)),
        None => None,
    };
    Ok(Some(json!({"entry": entry, "record": record})))
}

fn version_json(bytes: &[u8]) -> Value {
    let envelope = base64::engine::general_purpose::STANDARD.encode(bytes);
    let kind = crate::record::SignedRecord::decode_trusted(bytes)
        .map(|r| r.kind().as_str().to_owned())
        .unwrap_or_default();
    let document = crate::record::SignedRecord::trusted_document(bytes)
        .ok()
        .flatten()
        .and_then(|d| serde_json::from_str::<Value>(&d).ok());
    json!({"type": kind, "document": document, "envelope": envelope})
}
