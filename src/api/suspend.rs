//! Operator suspensions (REQ-REV-2): `PUT` and `DELETE
//! /admin/agents/{id}/suspension` (admin), `GET /admin/suspensions`
//! (admin), and `GET /agents/{id}/suspension`, the public view of one
//! agent's suspension. A suspended agent stays stored, with its history,
//! and leaves every search, listing, resolution and mesh answer of this
//! node until the suspension is lifted.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::error::{
    ApiError, BodyTooLarge, ErrorBody, ErrorCode, NotJson, Overloaded, StoreFailed,
};
use super::guards::Admin;
use super::json::JsonBody;
use super::state::AppState;
use super::visibility::Reader;
use crate::store::{StoreError, Suspension, MAX_SUSPENSION_REASON_CHARS};

/// Body of `PUT /admin/agents/{id}/suspension`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SuspendBody {
    /// Why, for the agent's operator and this node's users (1 to 500
    /// characters).
    #[schema(min_length = 1, max_length = 500, pattern = r"\S")]
    reason: String,
}

/// One agent's suspension, as shown.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(super) struct SuspensionView {
    /// Agent id.
    id: String,
    /// Whether this node suspended it.
    suspended: bool,
    /// Why, when suspended.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// Since when, Unix seconds, when suspended.
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<u64>,
}

/// `GET /admin/suspensions`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(super) struct Suspensions {
    /// Every suspension of this node.
    suspensions: Vec<SuspensionView>,
}

fn view(id: &str, s: Option<&Suspension>) -> SuspensionView {
    SuspensionView {
        id: id.to_owned(),
        suspended: s.is_some(),
        reason: s.map(|s| s.reason.clone()),
        since: s.map(|s| s.since),
    }
}

fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::NotFound { agent_id } => ApiError::new(
            ErrorCode::NotFound,
            format!("agent {agent_id} is not held by this node"),
        ),
        other if other.is_out_of_space() => super::error::no_room(&other),
        other => {
            tracing::error!(error = %other, "store failure");
            ApiError::new(
                ErrorCode::Unavailable,
                "the store failed; the request was not applied",
            )
        }
    }
}

/// `PUT /admin/agents/{id}/suspension`: suspends an agent held here.
#[utoipa::path(put, path = "/admin/agents/{id}/suspension", tag = "admin",
    params(("id" = String, Path, description = "Agent id")),
    request_body = SuspendBody,
    responses(
        (status = 200, description = "Suspended", body = SuspensionView),
        (status = 400, description = "No reason, or one too long", body = ErrorBody),
        (status = 404, description = "Not held here", body = ErrorBody),
        BodyTooLarge,
        NotJson,
        StoreFailed,
    ))]
pub(super) async fn suspend(
    State(state): State<AppState>,
    Path(id): Path<String>,
    _: Admin,
    JsonBody(body): JsonBody<SuspendBody>,
) -> Result<Json<SuspensionView>, ApiError> {
    let reason = body.reason.trim();
    if reason.is_empty() || reason.chars().count() > MAX_SUSPENSION_REASON_CHARS {
        let message = format!("reason must be 1 to {MAX_SUSPENSION_REASON_CHARS} characters");
        return Err(ApiError::new(ErrorCode::InvalidInput, message.clone())
            .with_details(json!([{"field": "/reason", "message": message}])));
    }
    let store = state.registry().store();
    let suspension = store.suspend(&id, reason).await.map_err(store_error)?;
    tracing::info!(agent = %id, reason = %suspension.reason, "agent suspended");
    Ok(Json(view(&id, Some(&suspension))))
}

/// `DELETE /admin/agents/{id}/suspension`: lifts a suspension.
#[utoipa::path(delete, path = "/admin/agents/{id}/suspension", tag = "admin",
    params(("id" = String, Path, description = "Agent id")),
    responses(
        (status = 204, description = "Lifted"),
        (status = 404, description = "Not held here, or not suspended", body = ErrorBody),
        StoreFailed,
    ))]
pub(super) async fn unsuspend(
    State(state): State<AppState>,
    Path(id): Path<String>,
    _: Admin,
) -> Result<StatusCode, ApiError> {
    let lifted = state
        .registry()
        .store()
        .unsuspend(&id)
        .await
        .map_err(store_error)?;
    if lifted {
        tracing::info!(agent = %id, "suspension lifted");
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::new(
            ErrorCode::NotFound,
            format!("agent {id} is not suspended"),
        ))
    }
}

/// `GET /agents/{id}/suspension`: whether this node suspended an agent.
#[utoipa::path(get, path = "/agents/{id}/suspension", tag = "agents",
    params(("id" = String, Path, description = "Agent id")),
    responses(
        (status = 200, description = "Its suspension, if any", body = SuspensionView),
        Overloaded,
    ))]
pub(super) async fn one(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Reader(who): Reader,
) -> Json<SuspensionView> {
    // A private agent this client may not see is answered as any unknown
    // id is: not suspended.
    let suspension = match state.registry().visible_to(&id, &who) {
        Ok(()) => state.registry().store().suspension(&id),
        Err(_) => None,
    };
    Json(view(&id, suspension.as_ref()))
}

/// `GET /admin/suspensions`: every suspension.
#[utoipa::path(get, path = "/admin/suspensions", tag = "admin",
    responses(
        (status = 200, description = "Every suspension of this node", body = Suspensions),
        Overloaded,
    ))]
pub(super) async fn all(State(state): State<AppState>, _: Admin) -> Json<Suspensions> {
    let all: Vec<SuspensionView> = state
        .registry()
        .store()
        .suspensions()
        .iter()
        .map(|(id, s)| view(id, Some(s)))
        .collect();
    Json(Suspensions { suspensions: all })
}
