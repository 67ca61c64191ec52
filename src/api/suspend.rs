//! Operator suspensions (REQ-REV-2): `PUT` and `DELETE
//! /admin/agents/{id}/suspension` (admin), `GET /admin/suspensions`
//! (admin), and `GET /agents/{id}/suspension`, the public view of one
//! agent's suspension. A suspended agent stays stored, with its history,
//! and leaves every search, listing, resolution and mesh answer of this
//! node until the suspension is lifted.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::agents::authorize;
use super::{ApiError, AppState, ErrorCode};
use crate::store::{StoreError, Suspension, MAX_SUSPENSION_REASON_CHARS};

/// Body of `PUT /admin/agents/{id}/suspension`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SuspendBody {
    reason: String,
}

fn view(id: &str, s: Option<&Suspension>) -> Value {
    match s {
        Some(s) => json!({"id": id, "suspended": true, "reason": s.reason, "since": s.since}),
        None => json!({"id": id, "suspended": false}),
    }
}

fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::NotFound { agent_id } => ApiError::new(
            ErrorCode::NotFound,
            format!("agent {agent_id} is not held by this node"),
        ),
        other => {
            tracing::error!(error = %other, "store failure");
            ApiError::new(
                ErrorCode::Unavailable,
                "the store failed; the request was not applied",
            )
        }
    }
}

pub(super) async fn suspend(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Result<Json<SuspendBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    authorize(&state, &headers)?;
    let Json(body) = body?;
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

pub(super) async fn unsuspend(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    authorize(&state, &headers)?;
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

pub(super) async fn one(State(state): State<AppState>, Path(id): Path<String>) -> Json<Value> {
    Json(view(&id, state.registry().store().suspension(&id).as_ref()))
}

pub(super) async fn all(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    authorize(&state, &headers)?;
    let all: Vec<Value> = state
        .registry()
        .store()
        .suspensions()
        .iter()
        .map(|(id, s)| view(id, Some(s)))
        .collect();
    Ok(Json(json!({ "suspensions": all })))
}
