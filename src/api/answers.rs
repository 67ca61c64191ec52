//! Signed answers (docs/answers.md): `proof=true` or `Accept:
//! application/agentmesh-answer+json` on a search, a list, a lookup or a
//! resolution wraps the plain answer, once its handler has made it, with
//! the request's hash, the node's log checkpoint, and for each agent the
//! record held, its inclusion proof, signed with the node key
//! ([`crate::answer`]); `GET /agents/{id}/proof` is the agent's summary,
//! always signed.

use axum::body::{to_bytes, Body};
use axum::extract::{MatchedPath, Path, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::error::{ApiError, ErrorBody, ErrorCode};
use super::state::AppState;
use super::visibility::Reader;
use crate::answer::{self, NodeInfo, Payload, RequestInfo, ResultProof, MAX_RESULTS, MEDIA_TYPE};
use crate::store::StoreError;

/// The routes a signed answer may be asked of.
const SIGNED: &[(Method, &str)] = &[
    (Method::POST, "/agents/search"),
    (Method::GET, "/agents"),
    (Method::GET, "/agents/{id}"),
    (Method::POST, "/resolve"),
];

/// The most bytes of a plain answer wrapped.
const MAX_PLAIN_BYTES: usize = 64 * 1024 * 1024;

/// The layer: a request that asks for a signed answer on a route in
/// [`SIGNED`] goes to its handler without the asking (the `proof`
/// parameter, the `Accept` type), and its 200 answer comes back signed.
pub(super) async fn sign(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned());
    let listed = route
        .as_deref()
        .is_some_and(|r| SIGNED.iter().any(|(m, p)| m == req.method() && *p == r));
    let (asked, target) = asks(&req);
    if !asked || !listed {
        return next.run(req).await;
    }
    let (mut parts, body) = req.into_parts();
    let Ok(body) = to_bytes(body, state.config().max_body_bytes).await else {
        return ApiError::new(
            ErrorCode::InvalidInput,
            "the request body is too large or broke off",
        )
        .with_status(StatusCode::PAYLOAD_TOO_LARGE)
        .into_response();
    };
    let request = RequestInfo::new(parts.method.as_str(), &target, &body);
    if let Ok(uri) = target.parse::<Uri>() {
        parts.uri = uri;
    }
    parts
        .headers
        .insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    let plain = next.run(Request::from_parts(parts, Body::from(body))).await;
    if plain.status() != StatusCode::OK {
        return plain;
    }
    let Ok(bytes) = to_bytes(plain.into_body(), MAX_PLAIN_BYTES).await else {
        return ApiError::new(ErrorCode::Unavailable, "the answer is too large to sign")
            .into_response();
    };
    let Ok(answer) = serde_json::from_slice::<Value>(&bytes) else {
        return ApiError::new(ErrorCode::Unavailable, "the answer is not JSON").into_response();
    };
    signed(&state, request, answer)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// `GET /agents/{id}/proof`: the agent's summary, signed.
#[utoipa::path(get, path = "/agents/{id}/proof", tag = "agents",
    params(("id" = String, Path, description = "Agent id")),
    responses(
        (status = 200, description = "The agent's summary as a signed answer (docs/answers.md)", body = crate::answer::Envelope, content_type = "application/agentmesh-answer+json"),
        (status = 404, description = "Not held here", body = ErrorBody),
        (status = 503, description = "The store failed", body = ErrorBody),
    ))]
pub(super) async fn proof(
    State(state): State<AppState>,
    Path(id): Path<String>,
    reader: Reader,
    uri: Uri,
) -> Result<Response, ApiError> {
    let plain = super::agents::summary(State(state.clone()), Path(id), reader).await?;
    let bytes = to_bytes(plain.into_body(), MAX_PLAIN_BYTES)
        .await
        .map_err(|_| ApiError::new(ErrorCode::Unavailable, "the summary broke off"))?;
    let answer: Value = serde_json::from_slice(&bytes)
        .map_err(|_| ApiError::new(ErrorCode::Unavailable, "the summary is not JSON"))?;
    let target = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    signed(&state, RequestInfo::new("GET", target, b""), answer).await
}

/// Whether `req` asks for a signed answer, and its target without the
/// `proof` parameter.
fn asks(req: &Request) -> (bool, String) {
    let by_accept = req
        .headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|t| t.trim().starts_with(MEDIA_TYPE)));
    let uri = req.uri();
    let (target, by_param) =
        answer::without_proof(uri.path_and_query().map_or(uri.path(), |p| p.as_str()));
    (by_accept || by_param, target)
}

/// The signed answer of `answer` to `request`.
async fn signed(
    state: &AppState,
    request: RequestInfo,
    answer: Value,
) -> Result<Response, ApiError> {
    let agents = answer::answer_agents(&answer, &request.target);
    if agents.len() > MAX_RESULTS {
        return Err(ApiError::new(
            ErrorCode::InvalidInput,
            format!("a signed answer proves at most {MAX_RESULTS} agents: ask for fewer"),
        ));
    }
    let ids: Vec<String> = agents.into_iter().map(|(id, _)| id).collect();
    let notary = state.notary();
    let node = notary.key().verifying_key().to_bytes();
    let proven = state
        .registry()
        .store()
        .run_blocking(move |s| prove(s, &ids, node))
        .await
        .and_then(|r| r)
        .map_err(|e| {
            tracing::error!(error = %e, "building a signed answer");
            ApiError::new(
                ErrorCode::Unavailable,
                "the store failed building the proof",
            )
        })?;
    let Some((size, root, results)) = proven else {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "an agent of the answer changed while it was proven: ask again",
        ));
    };
    let payload = Payload {
        v: answer::VERSION,
        node: NodeInfo {
            peer_id: state.peer_id().to_owned(),
            log_origin: notary.origin().to_owned(),
        },
        time: crate::record::unix_now(),
        request_hash: request.hash(),
        request,
        checkpoint: String::from_utf8_lossy(&notary.sign(size, root)).into_owned(),
        trusted_signers: state.trusted_signers().to_vec(),
        answer,
        results,
    };
    let bytes = serde_json::to_vec(&payload).expect("a payload serialises");
    let envelope = answer::seal(&bytes, notary.key());
    Ok((
        [(header::CONTENT_TYPE, MEDIA_TYPE)],
        serde_json::to_vec(&envelope).expect("an envelope serialises"),
    )
        .into_response())
}

/// The records of `ids` and their inclusion proofs, at the durable tree
/// (flushed first when one of the node's own records is not in it yet);
/// `None` when an agent is no longer held.
#[allow(clippy::type_complexity)]
fn prove(
    s: &crate::store::BlockingStore,
    ids: &[String],
    node: [u8; 32],
) -> Result<Option<(u64, crate::tlog::Hash, Vec<ResultProof>)>, StoreError> {
    let mut records = Vec::with_capacity(ids.len());
    let mut unlogged = false;
    for id in ids {
        let Some(held) = s.get(id)? else {
            return Ok(None);
        };
        let bytes = held.record.encode();
        unlogged |= held.record.signer().to_bytes() == node && s.log_index_of(&bytes)?.is_none();
        records.push(bytes);
    }
    if unlogged {
        s.flush()?;
    }
    let (size, root, proofs) = s.log_proofs(&records)?;
    let results = ids
        .iter()
        .zip(records)
        .zip(proofs)
        .map(|((id, bytes), proof)| ResultProof::new(id.clone(), &bytes, proof))
        .collect();
    Ok(Some((size, root, results)))
}
