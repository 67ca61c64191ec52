//! `GET /admin/export` (admin): the whole store as one export
//! (docs/protocol.md#export), streamed as JSONL. The store is first
//! copied into a spool file beside it, record writes held back for that
//! copy only, so the export is one instant's records however slowly the
//! client reads; the file is unlinked at once and gone with the response.
//! The answer's head goes out before the copy: a failure after it ends
//! the body without the export's trailer.

use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures_util::TryStreamExt as _;
use tokio_util::io::ReaderStream;

use super::error::{ApiError, Overloaded};
use super::guards::Admin;
use super::state::AppState;

/// The media type of an export.
const JSONL: &str = "application/jsonl";

/// `GET /admin/export`: everything this node holds, for a backup or a
/// move (`agentmesh import --format export` restores it into an empty
/// data directory).
#[utoipa::path(get, path = "/admin/export", tag = "admin",
    responses(
        (status = 200, description = "The export: a header line, registrations, records, \
            the other trees' entries, a trailer (docs/protocol.md#export)",
            body = String, content_type = "application/jsonl"),
        Overloaded,
    ))]
pub(super) async fn export(State(state): State<AppState>, _: Admin) -> Result<Response, ApiError> {
    let store = state.registry().store().blocking().clone();
    // The copy runs inside the body, so a large store is not cut off by
    // `api.request_timeout` (which ends at the answer's head); an export
    // that fails there ends the body without its trailer, which the
    // reader refuses as incomplete.
    let spooled = async move {
        let spooled = tokio::task::spawn_blocking(move || store.export_to_spool())
            .await
            .map_err(std::io::Error::other)?;
        let (file, summary) = spooled.map_err(|e| {
            tracing::error!(error = %e, "export failed");
            std::io::Error::other(e)
        })?;
        tracing::info!(
            registrations = summary.registrations,
            records = summary.records,
            entries = summary.entries,
            "export written"
        );
        Ok::<_, std::io::Error>(ReaderStream::new(tokio::fs::File::from_std(file)))
    };
    let body = futures_util::stream::once(spooled).try_flatten();
    Ok(([(header::CONTENT_TYPE, JSONL)], Body::from_stream(body)).into_response())
}
