//! `GET /admin/export` (admin): the whole store as one export
//! (docs/protocol.md#export), streamed as JSONL. The store is first
//! copied into a spool file beside it, record writes held back for that
//! copy only, so the export is one instant's records however slowly the
//! client reads; the file is unlinked at once and gone with the response.

use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use tokio_util::io::ReaderStream;

use super::auth::Admin;
use super::error::{ApiError, ErrorCode, Overloaded, TokenRefused};
use super::state::AppState;

/// The media type of an export.
const JSONL: &str = "application/jsonl";

/// `GET /admin/export`: everything this node holds, for a backup or a
/// move (`agentmesh import --format export` restores it into an empty
/// data directory).
#[utoipa::path(get, path = "/admin/export", tag = "admin",
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "The export: a header line, registrations, records, \
            the other trees' entries, a trailer (docs/protocol.md#export)",
            body = String, content_type = "application/jsonl"),
        TokenRefused,
        Overloaded,
    ))]
pub(super) async fn export(State(state): State<AppState>, _: Admin) -> Result<Response, ApiError> {
    let store = state.registry().store().blocking().clone();
    let spooled = tokio::task::spawn_blocking(move || store.export_to_spool())
        .await
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, format!("the export failed: {e}")))?;
    let (file, summary) = spooled.map_err(|e| {
        tracing::error!(error = %e, "export failed");
        ApiError::new(ErrorCode::Unavailable, format!("the export failed: {e}"))
    })?;
    tracing::info!(
        registrations = summary.registrations,
        records = summary.records,
        entries = summary.entries,
        "export written"
    );
    let stream = ReaderStream::new(tokio::fs::File::from_std(file));
    Ok(([(header::CONTENT_TYPE, JSONL)], Body::from_stream(stream)).into_response())
}
