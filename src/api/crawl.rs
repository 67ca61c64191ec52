//! `POST /crawl` (admin): queue domains for the crawler, or crawl and wait
//! for the reports; `GET /crawl/{domain}`: the latest report of a domain.
//!
//! A report goes out in full only to a request with this node's admin
//! token (`api.admin_token`); anyone else (every caller of a node without
//! a token) gets it redacted by [`crate::crawl::redact_report`]: no IP
//! address, no connection error text, the reason codes kept. The store
//! keeps the full report and the log the full detail.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{ApiError, BodyTooLarge, ErrorBody, ErrorCode, NotJson, StoreFailed};
use super::guards::Operator;
use super::json::JsonBody;
use super::state::AppState;
use super::wire::{CrawlReportView, DomainName};
use crate::crawl::queue::QueueError;

/// Most domains in one request.
const MAX_DOMAINS: usize = 1000;

/// Body of `POST /crawl`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CrawlBody {
    /// Domain names whose `_agent` records are crawled (1 to 1,000).
    #[schema(value_type = Vec<DomainName>, min_items = 1, max_items = 1000)]
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

/// What `POST /crawl` answers.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub(super) enum CrawlStarted {
    /// `wait: true`: a report per domain crawled (peers followed included).
    Reports {
        /// The reports.
        reports: Vec<crate::crawl::CrawlReport>,
    },
    /// `wait: false`: how many domains were queued.
    Queued {
        /// Domains queued.
        queued: usize,
    },
}

/// `POST /crawl`: crawls domains, at once (`wait`) or in the background.
#[utoipa::path(post, path = "/crawl", tag = "crawl",
    request_body = CrawlBody,
    responses(
        (status = 200, description = "`wait: true`: the crawl reports", body = CrawlStarted),
        (status = 202, description = "Queued", body = CrawlStarted),
        (status = 400, description = "No domains, too many, or names that are not domain names", body = ErrorBody),
        BodyTooLarge,
        NotJson,
        (status = 429, description = "The crawl queue is full", body = ErrorBody),
        (status = 503, description = "This node does not crawl, or is overloaded", body = ErrorBody),
    ))]
pub(super) async fn start(
    State(state): State<AppState>,
    Operator(operator): Operator,
    JsonBody(body): JsonBody<CrawlBody>,
) -> Result<Response, ApiError> {
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
        let mut answer = serde_json::to_value(CrawlStarted::Reports { reports })
            .expect("crawl reports serialise");
        if !operator {
            if let Some(reports) = answer.get_mut("reports").and_then(Value::as_array_mut) {
                reports.iter_mut().for_each(crate::crawl::redact_report);
            }
        }
        return Ok(Json(answer).into_response());
    }
    let queued = domains.len();
    queue.enqueue(domains)?;
    Ok((StatusCode::ACCEPTED, Json(CrawlStarted::Queued { queued })).into_response())
}

/// `GET /crawl/{domain}`: the last crawl of a domain.
#[utoipa::path(get, path = "/crawl/{domain}", tag = "crawl",
    params(("domain" = DomainName, Path, description = "A domain name")),
    responses(
        (status = 200, description = "The report of its last crawl; without the admin token (and on a node without one) each step's detail is redacted: no IP address, no connection error text", body = CrawlReportView),
        (status = 400, description = "Not a domain name", body = ErrorBody),
        (status = 404, description = "Not crawled by this node", body = ErrorBody),
        StoreFailed,
    ))]
pub(super) async fn report(
    State(state): State<AppState>,
    Operator(operator): Operator,
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
    match serde_json::from_slice::<serde_json::Value>(&report) {
        Ok(mut report @ serde_json::Value::Object(_)) => {
            if !operator {
                crate::crawl::redact_report(&mut report);
            }
            if let (Some(schedule), Some(map)) = (schedule, report.as_object_mut()) {
                map.insert(
                    "schedule".into(),
                    serde_json::to_value(schedule).expect("a domain state serialises"),
                );
            }
            Ok(Json(report).into_response())
        }
        // Not a report this node can read: shown only to its operator.
        _ if operator => Ok((
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            report,
        )
            .into_response()),
        _ => Err(ApiError::new(
            ErrorCode::Unavailable,
            format!("the report of {domain} cannot be read"),
        )),
    }
}
