//! `POST /crawl` (admin): queue domains for the crawler, or crawl and wait
//! for the reports; `GET /crawl/{domain}`: the latest report of a domain.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::agents::authorize;
use super::{ApiError, AppState, ErrorCode};
use crate::crawl::queue::QueueError;

/// Most domains in one request.
const MAX_DOMAINS: usize = 1000;

/// Body of `POST /crawl`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CrawlBody {
    domains: Vec<String>,
    #[serde(default)]
    wait: bool,
}

impl From<QueueError> for ApiError {
    fn from(e: QueueError) -> Self {
        match e {
            QueueError::Full => ApiError::new(
                ErrorCode::RateLimited,
                "the crawl queue is full; try again later",
            ),
            QueueError::Stopped => ApiError::new(ErrorCode::Unavailable, "the crawler has stopped"),
        }
    }
}

pub(super) async fn start(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Json<CrawlBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    authorize(&state, &headers)?;
    let Json(body) = body?;
    let queue = state
        .crawl_queue()
        .ok_or_else(|| ApiError::new(ErrorCode::Unavailable, "this node does not crawl"))?;
    if body.domains.is_empty() || body.domains.len() > MAX_DOMAINS {
        return Err(ApiError::new(
            ErrorCode::InvalidInput,
            format!(
                "domains must hold 1 to {MAX_DOMAINS} names, got {}",
                body.domains.len()
            ),
        ));
    }
    let mut domains = Vec::with_capacity(body.domains.len());
    let mut problems = Vec::new();
    for (i, d) in body.domains.iter().enumerate() {
        match crate::identity::normalise_domain(d) {
            Ok(d) => domains.push(d),
            Err(e) => {
                problems.push(json!({"field": format!("/domains/{i}"), "message": e.to_string()}))
            }
        }
    }
    if !problems.is_empty() {
        return Err(
            ApiError::new(ErrorCode::InvalidInput, "some domains are not domain names")
                .with_details(Value::Array(problems)),
        );
    }
    if body.wait {
        let reports = queue.crawl(domains).await?;
        return Ok(Json(json!({ "reports": reports })).into_response());
    }
    let queued = domains.len();
    queue.enqueue(domains)?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "queued": queued }))).into_response())
}

pub(super) async fn report(
    State(state): State<AppState>,
    Path(domain): Path<String>,
) -> Result<Response, ApiError> {
    let domain = crate::identity::normalise_domain(&domain)
        .map_err(|e| ApiError::new(ErrorCode::InvalidInput, e.to_string()))?;
    let id = crate::identity::AgentId::of_domain(&domain);
    let report = state
        .registry()
        .store()
        .report(id.as_str())
        .await
        .map_err(crate::registry::RegistryError::from)?
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::NotFound,
                format!("{domain} has not been crawled by this node"),
            )
        })?;
    let schedule = state.crawl_queue().and_then(|q| q.schedule(&domain));
    match (
        schedule,
        serde_json::from_slice::<serde_json::Value>(&report),
    ) {
        (Some(schedule), Ok(serde_json::Value::Object(mut report))) => {
            report.insert(
                "schedule".into(),
                serde_json::to_value(schedule).expect("a domain state serialises"),
            );
            Ok(Json(report).into_response())
        }
        _ => Ok((
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            report,
        )
            .into_response()),
    }
}
