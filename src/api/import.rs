//! `POST /admin/import` (admin, the bearer token of `POST /crawl`): AIDIP
//! documents as NDJSON in, one result per document line out, streamed as
//! NDJSON while the import runs, then `{"summary":{...}}`. The import
//! itself is the registry's [`Importer`], the one `agentmesh import` runs.
//!
//! The response starts (200) before the body is read: refusals of single
//! lines are result lines, and a stop (the line limit, a body that breaks
//! off, a store failure) is in the summary's `stopped`. Results are sent
//! once their batch is on disk; a response without a summary line did not
//! finish. One import runs at a time (a second is answered 429). Clients
//! must read the response while they send (curl does): results that are
//! not read hold the import, which then stops reading the body.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures_util::{StreamExt as _, TryStreamExt as _};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio_util::io::StreamReader;
use tracing::Instrument as _;

use super::error::{ApiError, ErrorBody, ErrorCode, ErrorObject, Overloaded};
use super::state::AppState;
use crate::registry::import::{ImportLimits, Importer, LineResult, SERVING_ISSUE_CHUNK};

/// Results buffered between the import and the response.
const RESULTS_BUFFER: usize = 1024;

/// The media type of the response.
const NDJSON: &str = "application/x-ndjson";

fn ndjson_line(v: &impl Serialize) -> Bytes {
    let mut line = serde_json::to_vec(v).expect("import results always serialise");
    line.push(b'\n');
    Bytes::from(line)
}

/// One line of the `POST /admin/import` answer: a line's result, and
/// last the summary.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(untagged)]
enum ImportLine {
    /// What became of one input line.
    #[allow(dead_code)]
    Line(LineResult),
    /// The last line.
    Summary {
        /// The whole import; `null` when it failed (see `error`).
        #[schema(required = true)]
        summary: Option<crate::registry::import::ImportSummary>,
        /// Why the import failed.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<ErrorObject>,
    },
}

/// How long a client refused because an import runs is told to wait.
const IMPORT_RETRY_SECS: u64 = 10;

/// The 429 of an import refused because another one runs, with
/// `Retry-After` like every other 429.
fn import_running() -> Response {
    let mut response = ApiError::new(
        ErrorCode::RateLimited,
        "an import is already running on this node; try again when it has finished",
    )
    .with_details(serde_json::json!({"limit": "import_running", "retry_after": IMPORT_RETRY_SECS}))
    .into_response();
    response.headers_mut().insert(
        axum::http::header::RETRY_AFTER,
        axum::http::HeaderValue::from(IMPORT_RETRY_SECS),
    );
    response
}

/// `POST /admin/import`: registers many documents, one JSON document per
/// line (an MCP registry dump, AIDIP documents, ...), streaming one
/// result line per input line and then the summary.
#[utoipa::path(post, path = "/admin/import", tag = "admin",
    request_body(content = String, content_type = "application/x-ndjson",
        description = "One JSON document per line"),
    responses(
        (status = 200, description = "One JSON value per line (described here as the \
            array of the lines): a result per input line, then `{\"summary\": ...}`",
            body = Vec<ImportLine>, content_type = "application/x-ndjson"),
        (status = 429, description = "An import is already running", body = ErrorBody),
        Overloaded,
    ))]
pub(super) async fn import(
    State(state): State<AppState>,
    who: super::audit::Who,
    body: Body,
) -> Result<Response, ApiError> {
    let Ok(permit) = state.import_gate().try_acquire_owned() else {
        return Ok(import_running());
    };
    let config = state.config();
    let limits = ImportLimits {
        max_line_bytes: config.import_max_line_bytes,
        max_lines: config.import_max_lines,
    };
    let input = StreamReader::new(body.into_data_stream().map_err(std::io::Error::other));
    let importer =
        Importer::new(state.registry().clone(), limits).with_issue_chunk(SERVING_ISSUE_CHUNK);
    let (tx, rx) = mpsc::channel::<LineResult>(RESULTS_BUFFER);
    // Bulk work: on a thread and runtime of its own at background
    // priority, so that the node's searches keep the CPU first.
    let job = crate::priority::spawn_background(
        "import",
        async move {
            let summary = importer.run(input, tx).await;
            who.record(summary.audit_event("", "request")).await;
            drop(permit);
            tracing::info!(
                lines = summary.lines,
                created = summary.created,
                updated = summary.updated,
                unchanged = summary.unchanged,
                refused = summary.refused,
                stopped = ?summary.stopped,
                "import finished"
            );
            summary
        }
        .instrument(tracing::info_span!("import")),
    );
    let results = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|r| (ndjson_line(&r), rx))
    });
    let summary = futures_util::stream::once(async move {
        match job.await {
            Ok(summary) => ndjson_line(&ImportLine::Summary {
                summary: Some(summary),
                error: None,
            }),
            Err(e) => {
                tracing::error!(error = %e, "the import thread failed");
                ndjson_line(&ImportLine::Summary {
                    summary: None,
                    error: Some(ErrorObject::new(
                        ErrorCode::Unavailable,
                        "the import failed; see the node's log",
                    )),
                })
            }
        }
    });
    let body = Body::from_stream(results.chain(summary).map(Ok::<_, Infallible>));
    Ok(([(header::CONTENT_TYPE, NDJSON)], body).into_response())
}
