//! The node's transparency log, read-only, as C2SP tlog-tiles lays it
//! out under the prefix `/log/` (docs/protocol.md#log), so that existing
//! tlog clients can read it: `GET /log/checkpoint` (a signed note),
//! `GET /log/tile/<L>/<N>[.p/<W>]` (hash tiles), `GET
//! /log/tile/entries/<N>[.p/<W>]` (entry bundles); beside them the
//! verifier key (`GET /log/key`) and the proofs a client need not build
//! from tiles (`GET /log/proof/inclusion`, `GET /log/proof/consistency`).
//! Everything served is the tree at its durable size.

use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::error::{ApiError, ErrorBody, ErrorCode};
use super::state::AppState;
use crate::store::{BeyondLog, StoreError};
use crate::tlog::{encode_hash, TilePath};

/// Tiles and bundles never change once served: a year, immutable.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// `GET /log/checkpoint`: the log's latest durable tree head, signed; or,
/// with `witnesses=N`, the newest one N witnesses cosigned.
#[utoipa::path(get, path = "/log/checkpoint", tag = "log",
    params(("witnesses" = Option<u32>, Query, description = "Answer the newest checkpoint at least this many peers witnessed, with their cosignatures (at most 256)")),
    responses(
        (status = 200, description = "A C2SP checkpoint, a signed note (docs/protocol.md#log), with witness cosignature lines when asked", body = String, content_type = "text/plain; charset=utf-8"),
        (status = 400, description = "`witnesses` is not a number from 0 to 256", body = ErrorBody),
        (status = 404, description = "No checkpoint held has that many cosignatures yet", body = ErrorBody),
        (status = 503, description = "The store failed", body = ErrorBody),
    ))]
pub(super) async fn checkpoint(
    State(state): State<AppState>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let mut witnesses = None;
    for (name, value) in &pairs {
        if name != "witnesses" {
            return Err(bad_param(name, format!("{name} is not a parameter here")));
        }
        let n = value
            .parse::<usize>()
            .map_err(|_| bad_param("witnesses", "witnesses must be a number".into()))?;
        witnesses = Some(n);
    }
    let note = match witnesses {
        None | Some(0) => {
            let (size, root) = read(&state, |s| s.log_head()).await?;
            state.notary().sign(size, root).to_vec()
        }
        Some(n) if n > crate::witness::MAX_COSIGNATURES => {
            return Err(bad_param("witnesses", "witnesses is at most 256".into()))
        }
        Some(n) => state
            .witness()
            .and_then(|w| w.cosigned_checkpoint(n))
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::NotFound,
                    format!("no checkpoint held has {n} witness cosignatures yet"),
                )
            })?,
    };
    Ok((
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        note,
    )
        .into_response())
}

/// `GET /log/equivocations`: the proofs this node's witness holds that a
/// peer's log signed two histories, each checkable offline
/// (docs/protocol.md#witnessing).
#[utoipa::path(get, path = "/log/equivocations", tag = "log",
    responses((status = 200, description = "`{equivocations: [...]}`, one proof per peer", body = serde_json::Value)))]
pub(super) async fn equivocations(State(state): State<AppState>) -> Json<serde_json::Value> {
    let held = state
        .witness()
        .map(|w| w.equivocations())
        .unwrap_or_default();
    Json(json!({ "equivocations": held }))
}

/// `GET /log/key`: the key checkpoints are signed with, as a note
/// verifier key.
#[utoipa::path(get, path = "/log/key", tag = "log",
    responses((status = 200, description = "`<origin>+<key id>+<key>`, one line", body = String, content_type = "text/plain; charset=utf-8")))]
pub(super) async fn key(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{}\n", state.notary().verifier_key()),
    )
        .into_response()
}

/// `GET /log/tile/{path}`: a hash tile or an entry bundle.
#[utoipa::path(get, path = "/log/tile/{path}", tag = "log",
    params(("path" = String, Path, description = "`<L>/<N>[.p/<W>]` or `entries/<N>[.p/<W>]`, as tlog-tiles spells them")),
    responses(
        (status = 200, description = "The tile's hashes, or the bundle's length-prefixed entries", body = Vec<u8>, content_type = "application/octet-stream"),
        (status = 400, description = "Not a tile path", body = ErrorBody),
        (status = 404, description = "The durable tree does not hold that tile", body = ErrorBody),
        (status = 503, description = "The store failed", body = ErrorBody),
    ))]
pub(super) async fn tile(
    State(state): State<AppState>,
    Path(path): Path<String>,
) -> Result<Response, ApiError> {
    let tile = TilePath::parse(&path).map_err(|m| bad_param("path", m))?;
    let data = read(&state, move |s| s.log_tile(tile))
        .await?
        .map_err(beyond)?;
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream"),
            (header::CACHE_CONTROL, IMMUTABLE),
        ],
        data,
    )
        .into_response())
}

/// `GET /log/proof/inclusion`: the RFC 6962 audit path of one entry.
#[utoipa::path(get, path = "/log/proof/inclusion", tag = "log",
    params(
        ("index" = u64, Query, description = "The entry's index"),
        ("size" = Option<u64>, Query, description = "The tree's size (default: the durable tree's)"),
    ),
    responses(
        (status = 200, description = "`{index, size, root, leaf, proof}`, hashes in base64", body = serde_json::Value),
        (status = 400, description = "A missing or malformed parameter", body = ErrorBody),
        (status = 404, description = "Outside the durable tree", body = ErrorBody),
        (status = 503, description = "The store failed", body = ErrorBody),
    ))]
pub(super) async fn inclusion(
    State(state): State<AppState>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let (index, size) = numbers(&pairs, "index")?;
    let index = index.ok_or_else(|| bad_param("index", "index is required".into()))?;
    let answer = read(&state, move |s| {
        let size = size.unwrap_or(s.log_head()?.0);
        let proof = match s.log_inclusion(index, size)? {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        let root = s.log_root(size)?.expect("a size the proof was made in");
        let leaf = s
            .log_entry(index)?
            .map(|e| crate::tlog::leaf_hash(&e))
            .ok_or_else(|| crate::store::StoreError::Corrupt {
                key: "log".into(),
                reason: format!("entry {index} is missing"),
            })?;
        Ok::<_, StoreError>(Ok(json!({
            "index": index,
            "size": size,
            "root": encode_hash(&root),
            "leaf": encode_hash(&leaf),
            "proof": proof.iter().map(encode_hash).collect::<Vec<_>>(),
        })))
    })
    .await?
    .map_err(beyond)?;
    Ok(Json(answer))
}

/// `GET /log/proof/consistency`: that the tree of `from` entries is a
/// prefix of the tree of `size`.
#[utoipa::path(get, path = "/log/proof/consistency", tag = "log",
    params(
        ("from" = u64, Query, description = "The older tree's size"),
        ("size" = Option<u64>, Query, description = "The newer tree's size (default: the durable tree's)"),
    ),
    responses(
        (status = 200, description = "`{from, size, from_root, root, proof}`, hashes in base64", body = serde_json::Value),
        (status = 400, description = "A missing or malformed parameter", body = ErrorBody),
        (status = 404, description = "Outside the durable tree", body = ErrorBody),
        (status = 503, description = "The store failed", body = ErrorBody),
    ))]
pub(super) async fn consistency(
    State(state): State<AppState>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let (from, size) = numbers(&pairs, "from")?;
    let from = from.ok_or_else(|| bad_param("from", "from is required".into()))?;
    let answer = read(&state, move |s| {
        let size = size.unwrap_or(s.log_head()?.0);
        let proof = match s.log_consistency(from, size)? {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        let root = s.log_root(size)?.expect("a size the proof was made in");
        let from_root = s.log_root(from)?.expect("a prefix of that size");
        Ok::<_, StoreError>(Ok(json!({
            "from": from,
            "size": size,
            "from_root": encode_hash(&from_root),
            "root": encode_hash(&root),
            "proof": proof.iter().map(encode_hash).collect::<Vec<_>>(),
        })))
    })
    .await?
    .map_err(beyond)?;
    Ok(Json(answer))
}

/// The query's `first` parameter and `size`, both optional numbers; any
/// other parameter is refused.
fn numbers(
    pairs: &[(String, String)],
    first: &str,
) -> Result<(Option<u64>, Option<u64>), ApiError> {
    let (mut a, mut size) = (None, None);
    for (name, value) in pairs {
        let slot = if name == first {
            &mut a
        } else if name == "size" {
            &mut size
        } else {
            return Err(bad_param(name, format!("unknown parameter {name:?}")));
        };
        *slot = Some(value.parse::<u64>().map_err(|_| {
            bad_param(
                name,
                format!("{name} must be a whole number, got {value:?}"),
            )
        })?);
    }
    Ok((a, size))
}

/// Runs a log read on a blocking thread; a store failure is a 503.
async fn read<T: Send + 'static>(
    state: &AppState,
    f: impl FnOnce(&crate::store::BlockingStore) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, ApiError> {
    state
        .registry()
        .store()
        .run_blocking(f)
        .await
        .and_then(|r| r)
        .map_err(|e| {
            tracing::error!(error = %e, "reading the transparency log");
            ApiError::new(ErrorCode::Unavailable, "the store failed reading the log")
        })
}

fn beyond(e: BeyondLog) -> ApiError {
    ApiError::new(ErrorCode::NotFound, e.0)
}

fn bad_param(field: &str, message: String) -> ApiError {
    ApiError::new(ErrorCode::InvalidInput, message.clone())
        .with_details(json!([{"field": field, "message": message}]))
}
