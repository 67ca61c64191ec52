//! `POST /records`: a signed record from outside the mesh (an agent's own
//! revocation, a record another registry signed), as raw CBOR
//! (`application/cbor`, at most 16 KiB). Records authenticate themselves,
//! so no token is asked: the node judges it exactly as a record gossiped by
//! a peer (signature, canonical form, window, seq, evidence, who may
//! tombstone an agent) and, when it stores it, publishes it to the mesh.
//! An agent revokes itself with `agentmesh revoke`, which signs a
//! tombstone with the agent's key.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::Json;
use serde_json::{json, Value};

use super::{ApiError, AppState, ErrorCode};
use crate::federation::Judgement;
use crate::record::MAX_RECORD_BYTES;

pub(super) async fn submit(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let cbor = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().unwrap_or_default().trim() == "application/cbor");
    if !cbor {
        return Err(ApiError::new(
            ErrorCode::InvalidInput,
            "a record is sent as its CBOR bytes, Content-Type: application/cbor",
        )
        .with_status(StatusCode::UNSUPPORTED_MEDIA_TYPE));
    }
    if body.len() > MAX_RECORD_BYTES {
        return Err(ApiError::new(
            ErrorCode::InvalidInput,
            format!("a record is at most {MAX_RECORD_BYTES} bytes"),
        )
        .with_status(StatusCode::PAYLOAD_TOO_LARGE));
    }
    let mesh = state
        .mesh()
        .ok_or_else(|| ApiError::new(ErrorCode::Unavailable, "this node runs no mesh"))?
        .clone();
    let judge = mesh.judge.clone();
    let bytes = body.to_vec();
    let judged = state
        .registry()
        .store()
        .run_blocking(move |_| judge.judge(&bytes))
        .await
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, e.to_string()))?;
    match judged {
        Judgement::Stored { agent_id, .. } => {
            state.registry().store().flush().await.map_err(|e| {
                ApiError::new(ErrorCode::Unavailable, format!("the store failed: {e}"))
            })?;
            let publish = mesh
                .client
                .publish(body.to_vec(), agent_id.clone(), Vec::new());
            if let Err(e) = publish.await {
                tracing::warn!(agent = %agent_id, error = %e, "publishing a submitted record failed");
            }
            Ok((
                StatusCode::CREATED,
                Json(json!({"stored": true, "agent_id": agent_id})),
            ))
        }
        Judgement::Duplicate => Ok((
            StatusCode::OK,
            Json(json!({"stored": false, "duplicate": true})),
        )),
        Judgement::Stale => Err(ApiError::new(
            ErrorCode::InvalidInput,
            "stale_seq: this node holds a newer record of the agent",
        )
        .with_status(StatusCode::CONFLICT)),
        Judgement::NotKept => Ok((
            StatusCode::OK,
            Json(json!({"stored": false, "kept": false})),
        )),
        Judgement::Unverifiable(reason) | Judgement::Refused(reason) => Err(ApiError::new(
            ErrorCode::InvalidInput,
            format!("refused: {reason}"),
        )
        .with_details(json!([{"field": "", "message": reason.as_str()}]))),
    }
}
