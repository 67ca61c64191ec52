//! Moving a registration to another registry: `POST
//! /admin/agents/{id}/transfer` (admin) signs the hand-over of an agent
//! registered here to another node, named by its peer id; that node's
//! operator registers the agent there with `POST /agents` and the token
//! in the [`TRANSFER_HEADER`] header.

use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::HeaderMap;
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::error::{ApiError, BodyTooLarge, ErrorBody, ErrorCode, NotJson, StoreFailed};
use super::guards::Admin;
use super::json::JsonBody;
use super::state::AppState;
use crate::identity;
use crate::record::Transfer;

/// The header of `POST /agents` that carries a transfer token.
pub(super) const TRANSFER_HEADER: &str = "agentmesh-transfer";

/// Body of `POST /admin/agents/{id}/transfer`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TransferBody {
    /// The peer id of the node that takes the agent over
    /// (`agentmesh peer-id` on that node).
    to: String,
}

/// A signed hand-over.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(super) struct TransferView {
    /// The agent id.
    agent_id: String,
    /// This node's peer id (the owner).
    from: String,
    /// The new owner's peer id.
    to: String,
    /// The registration's seq it covers: an update here after it ends it.
    up_to_seq: u64,
    /// What the new owner sends in the `agentmesh-transfer` header of its
    /// `POST /agents`.
    token: String,
}

/// `POST /admin/agents/{id}/transfer`: hands an agent registered here to
/// another node.
#[utoipa::path(post, path = "/admin/agents/{id}/transfer", tag = "admin",
    params(("id" = String, Path, description = "Agent id")),
    request_body = TransferBody,
    responses(
        (status = 200, description = "The signed hand-over", body = TransferView),
        (status = 400, description = "`to` is not an Ed25519 peer id", body = ErrorBody),
        (status = 403, description = "The agent was not registered here", body = ErrorBody),
        (status = 404, description = "No live agent with this id", body = ErrorBody),
        BodyTooLarge,
        NotJson,
        StoreFailed,
    ))]
pub(super) async fn hand_over(
    State(state): State<AppState>,
    Path(id): Path<String>,
    _: Admin,
    JsonBody(body): JsonBody<TransferBody>,
) -> Result<Json<TransferView>, ApiError> {
    let to = identity::key_of_peer_id(body.to.trim()).ok_or_else(|| {
        let message = "to must be the Ed25519 peer id of the node taking the agent over";
        ApiError::new(ErrorCode::InvalidInput, message)
            .with_details(json!([{"field": "/to", "message": message}]))
    })?;
    let transfer = state.registry().hand_over(&id, &to).await?;
    tracing::info!(agent = %id, to = %body.to, up_to_seq = transfer.up_to_seq, "agent handed over");
    Ok(Json(TransferView {
        agent_id: id,
        from: identity::peer_id_of_public(&state.registry().node_key()),
        to: identity::peer_id_of_public(&to),
        up_to_seq: transfer.up_to_seq,
        token: transfer.to_token(),
    }))
}

/// The transfer a `POST /agents` carries in [`TRANSFER_HEADER`], if any;
/// a header that is not a transfer token is refused (400).
pub(super) struct OfferedTransfer(pub(super) Option<Transfer>);

impl<S: Send + Sync> FromRequestParts<S> for OfferedTransfer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        from_headers(&parts.headers).map(OfferedTransfer)
    }
}

/// The transfer in [`TRANSFER_HEADER`], if any.
fn from_headers(headers: &HeaderMap) -> Result<Option<Transfer>, ApiError> {
    let Some(value) = headers.get(TRANSFER_HEADER) else {
        return Ok(None);
    };
    let bad = |reason: String| {
        let message = format!("the {TRANSFER_HEADER} header is not a transfer token: {reason}");
        ApiError::new(ErrorCode::InvalidInput, message.clone())
            .with_details(json!([{"field": TRANSFER_HEADER, "message": message}]))
    };
    let token = value.to_str().map_err(|e| bad(e.to_string()))?;
    Transfer::from_token(token)
        .map(Some)
        .map_err(|e| bad(e.to_string()))
}
