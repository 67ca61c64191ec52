//! `POST /resolve`: intent resolution (see [`crate::resolve`]). The
//! handler parses and bounds the request, asks the mesh when the request
//! says `"scope": "mesh"` (with what [`Plan::mesh_query`] allows to leave
//! this node), and answers the [`crate::resolve::Resolution`].

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::error::{ApiError, ErrorBody, ErrorCode, NotJson, StoreFailed};
use super::json::JsonBody;
use super::state::AppState;
use super::visibility::Reader;
use super::wire::{write_mesh_headers, ResolveBody};
use crate::resolve::{Plan, ResolveRequest, Resolver, Scope};

/// Largest `/resolve` body, in bytes: an intent of 1 KiB, a policy of
/// bounded arrays and a context of hints fit well within it.
pub(super) const MAX_BODY_BYTES: usize = 64 * 1024;

/// `POST /resolve`: the candidates for an intent that pass a policy.
#[utoipa::path(post, path = "/resolve", tag = "resolve",
    request_body = ResolveBody,
    responses(
        (status = 200, description = "The candidates, best first", body = crate::resolve::Resolution,
            headers(
                ("x-agentmesh-peers-asked" = u32, description = "Mesh scope: peers asked"),
                ("x-agentmesh-peers-answered" = u32, description = "Mesh scope: peers that answered in time"),
                ("x-agentmesh-elapsed-ms" = u64, description = "Mesh scope: how long the mesh search took"),
            )),
        (status = 400, description = "Every problem of the request, at its JSON pointer", body = ErrorBody),
        (status = 413, description = "The body is larger than 64 KiB", body = ErrorBody),
        NotJson,
        StoreFailed,
    ))]
pub(super) async fn resolve(
    State(state): State<AppState>,
    reader: Reader,
    JsonBody(body): JsonBody<Value>,
) -> Result<Response, ApiError> {
    let request = ResolveRequest::parse(&body).map_err(|problems| {
        let message = match problems.as_slice() {
            [one] => format!("invalid resolve request: {} {}", one.field, one.message),
            many => format!("invalid resolve request ({} problems)", many.len()),
        };
        ApiError::new(ErrorCode::InvalidInput, message).with_details(json!(problems))
    })?;
    let mut plan = Plan::new(request);
    plan.audience = reader.audience();
    let started = std::time::Instant::now();
    let mut asked = None;
    let mut mesh_view = None;
    if plan.request.scope == Scope::Mesh {
        if let Some(query) = plan.mesh_query() {
            asked = state.search().ask(&query).await;
        }
        mesh_view = Some(plan.mesh_view(asked.is_some()));
    }
    let mut resolution = Resolver::new(state.registry().clone())
        .resolve(&plan)
        .await?;
    resolution.mesh = mesh_view;
    let mut response = Json(resolution).into_response();
    if let Some(report) = &asked {
        write_mesh_headers(report, started.elapsed(), response.headers_mut());
    }
    Ok(response)
}
