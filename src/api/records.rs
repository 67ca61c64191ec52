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
use serde_json::json;

use super::error::{ApiError, ErrorBody, ErrorCode, NoRoom};
use super::state::{AppState, MeshState};
use super::wire::RecordBytes;
use crate::federation::{Judgement, Refusal};
use crate::record::MAX_RECORD_BYTES;

/// What `POST /records` answers when the record was not refused.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(super) struct Submitted {
    /// Whether it was stored (and published).
    stored: bool,
    /// The agent, when stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_id: Option<String>,
    /// Set when this node already held the same record.
    #[serde(skip_serializing_if = "Option::is_none")]
    duplicate: Option<bool>,
    /// `false` when it verified but this node does not keep such records.
    #[serde(skip_serializing_if = "Option::is_none")]
    kept: Option<bool>,
}

impl Submitted {
    /// Stored as the record of `agent_id` (and published).
    fn stored(agent_id: String) -> Self {
        Self {
            stored: true,
            agent_id: Some(agent_id),
            duplicate: None,
            kept: None,
        }
    }

    /// This node already held the same record.
    fn duplicate() -> Self {
        Self {
            stored: false,
            agent_id: None,
            duplicate: Some(true),
            kept: None,
        }
    }

    /// Valid, but not kept by this node.
    fn not_kept() -> Self {
        Self {
            stored: false,
            agent_id: None,
            duplicate: None,
            kept: Some(false),
        }
    }
}

/// `POST /records`: a signed record (CBOR, `proto/records.cddl`), judged
/// as one from a peer, stored and gossiped when valid.
#[utoipa::path(post, path = "/records", tag = "mesh",
    request_body(content = RecordBytes, content_type = "application/cbor",
        description = "One signed record, at most 16 KiB"),
    responses(
        (status = 201, description = "Stored and published", body = Submitted),
        (status = 200, description = "Already held, or not kept", body = Submitted),
        (status = 400, description = "Refused (the reason code in `details`)", body = ErrorBody),
        (status = 403, description = "The agent belongs to another key (`not_owner`, `local_registration`, `tombstone_not_authorised`)", body = ErrorBody),
        (status = 409, description = "This node holds a newer record of the agent", body = ErrorBody),
        (status = 413, description = "Larger than a record may be", body = ErrorBody),
        (status = 415, description = "Not `application/cbor`", body = ErrorBody),
        (status = 503, description = "This node runs no mesh, or is overloaded", body = ErrorBody),
        NoRoom,
    ))]
pub(super) async fn submit(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Submitted>), ApiError> {
    check_record_body(&headers, &body)?;
    let mesh = state
        .mesh()
        .ok_or_else(|| ApiError::new(ErrorCode::Unavailable, "this node runs no mesh"))?
        .clone();
    let judged = judge(&state, &mesh, &body).await?;
    answer(&state, &mesh, judged, body).await
}

/// Refuses a body that is not sent as CBOR (415) or is larger than a
/// record may be (413).
fn check_record_body(headers: &HeaderMap, body: &Bytes) -> Result<(), ApiError> {
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
    Ok(())
}

/// The judge's verdict on the record, reached on a blocking thread (it
/// reads and may write the store).
async fn judge(state: &AppState, mesh: &MeshState, body: &Bytes) -> Result<Judgement, ApiError> {
    let judge = mesh.judge.clone();
    let bytes = body.to_vec();
    state
        .registry()
        .store()
        .run_blocking(move |_| judge.judge(&bytes))
        .await
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, e.to_string()))
}

/// The answer to a judged record: what was stored is flushed and
/// published, a claim this node has not proven is handed to the
/// re-verifier, and a refusal is told with its reason code.
async fn answer(
    state: &AppState,
    mesh: &MeshState,
    judged: Judgement,
    body: Bytes,
) -> Result<(StatusCode, Json<Submitted>), ApiError> {
    match judged {
        Judgement::Stored {
            agent_id,
            reverify,
            signer,
            ..
        } => {
            // A claim this node has not proven: it looks for itself,
            // within the same limits as for the mesh's records.
            if let Some(domain) = reverify {
                mesh.reverify.request(domain, None, signer);
            }
            store_and_publish(state, mesh, &agent_id, body).await?;
            Ok((StatusCode::CREATED, Json(Submitted::stored(agent_id))))
        }
        Judgement::Duplicate => Ok((StatusCode::OK, Json(Submitted::duplicate()))),
        Judgement::Stale => Err(ApiError::new(
            ErrorCode::InvalidInput,
            "stale_seq: this node holds a newer record of the agent",
        )
        .with_status(StatusCode::CONFLICT)),
        kept_out @ (Judgement::NotKept | Judgement::Outranked { .. }) => {
            // Valid, not kept: this node holds the agent as it verified
            // it; a document that differs is looked at by its crawler.
            if let Judgement::Outranked {
                reverify: Some(domain),
                signer,
            } = kept_out
            {
                mesh.reverify.request(domain, None, signer);
            }
            Ok((StatusCode::OK, Json(Submitted::not_kept())))
        }
        // Someone else's agent: the record is well-formed, its signer may
        // not write it.
        Judgement::Refused(
            reason @ (Refusal::NotOwner
            | Refusal::LocalRegistration
            | Refusal::TombstoneNotAuthorised),
        ) => Err(ApiError::new(
            ErrorCode::Forbidden,
            format!("refused: {reason}: the agent belongs to another key"),
        )
        .with_details(json!([{"field": "", "message": reason.as_str()}]))),
        Judgement::Refused(Refusal::NoRoom) => Err(ApiError::new(
            ErrorCode::InsufficientStorage,
            "no_room: the store has no room for the record (store.max_bytes reached, or the \
             disk full); reads go on",
        )),
        Judgement::Unverifiable(reason) | Judgement::Refused(reason) => Err(ApiError::new(
            ErrorCode::InvalidInput,
            format!("refused: {reason}"),
        )
        .with_details(json!([{"field": "", "message": reason.as_str()}]))),
    }
}

/// Flushes the stored record to disk, then gossips it (and puts an agent
/// record in the DHT; a liveness result is only gossiped); a failed
/// publish is logged, not answered (the record is stored).
async fn store_and_publish(
    state: &AppState,
    mesh: &MeshState,
    agent_id: &str,
    body: Bytes,
) -> Result<(), ApiError> {
    state
        .registry()
        .store()
        .flush()
        .await
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, format!("the store failed: {e}")))?;
    let liveness = crate::record::SignedRecord::decode_trusted(&body)
        .is_ok_and(|r| r.kind() == crate::record::RecordType::Liveness);
    let publish = if liveness {
        mesh.client.gossip(body.to_vec()).await.map(|_| ())
    } else {
        mesh.client
            .publish(body.to_vec(), agent_id.to_owned(), Vec::new())
            .await
            .map(|_| ())
    };
    if let Err(e) = publish {
        tracing::warn!(agent = %agent_id, error = %e, "publishing a submitted record failed");
    }
    Ok(())
}
