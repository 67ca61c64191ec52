//! The HTTP API (AIDIP registry endpoints plus agentmesh's extensions),
//! served by axum. Handlers are thin: they parse and bound the request,
//! call the [`Registry`](crate::registry::Registry), and map errors to
//! the draft's error object through [`ApiError`].
//!
//! The handlers live by resource (`api/agents.rs`, `api/crawl.rs`, ...)
//! and take what they share from modules that use no handler: the state
//! (`api/state.rs`), the admin token as an extractor (`api/auth.rs`), the
//! JSON body as an extractor (`api/json.rs`), the error object and the
//! error answers the OpenAPI document shares (`api/error.rs`), and the
//! wire types and headers (`api/wire.rs`). `api/openapi.rs` assembles
//! the document from the handlers, and this file the router.
//!
//! `POST /admin/import` streams: its response starts at once and the
//! request timeout does not cover the body (see `api/import.rs`).
//!
//! Layers, outermost first: the request id and the request counters
//! (`api/observe.rs`), the caller (`api/auth.rs`), the rate limits
//! (`api/limits.rs`), tracing (one span per request, carrying its id),
//! load shedding at one concurrency limit for the whole router
//! (`api/limits.rs`), a per-request timeout and the body size limit;
//! unknown routes and methods answer the error object too. `GET /metrics`
//! (no token) renders [`Metrics`](crate::metrics::Metrics).
//!
//! [`serve`] (`api/serve.rs`) is the server loop under the router: the
//! connection caps and timeouts, the body read timeout, the client's
//! address, and with `[api.tls]` HTTPS and the client's certificate
//! (`api/tls.rs`).

mod agents;
mod answers;
mod ard;
mod audit;
mod auth;
mod caller;
mod crawl;
mod credentials;
mod error;
mod export;
mod guards;
mod health;
mod import;
mod invoke;
mod json;
mod limits;
mod log;
mod mcp_registry;
mod observe;
mod openapi;
mod records;
mod resolve;
mod serve;
mod state;
mod suspend;
mod tls;
mod transfer;
mod ui;
mod visibility;
mod wire;

use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::extract::{DefaultBodyLimit, State};
use axum::routing::get;
use axum::Router;
use tower::ServiceBuilder;
use tower_http::trace::TraceLayer;

#[doc(hidden)]
pub use agents::parse_search_body;
pub use audit::record as audit_record;
pub(crate) use audit::{show as audit_show, verify_json as audit_verify_json};
pub use auth::{route_scope, ROUTE_SCOPES};
pub use caller::{Caller, ClientAddr, Principal};
pub use credentials::{Access, Granted};
pub use error::{ApiError, ErrorCode};
pub use observe::{RequestId, MAX_REQUEST_ID_BYTES, REQUEST_ID_HEADER};
pub use openapi::{openapi_document, openapi_json};
pub use serve::{serve, BodyStalled, ServeOptions};
pub use state::{AppState, AppStateParts, MeshState};
pub use tls::{server_config as tls_server_config, PeerCertificate, TlsError, MAX_PEM_BYTES};

/// The whole router.
pub fn router(state: AppState) -> Router {
    let config = state.config().clone();
    let metrics = state.metrics().clone();
    let limits = std::sync::Arc::new(limits::Limits::new(
        &config,
        state.registry().semantic().is_some(),
        metrics.clone(),
    ));
    let shed = std::sync::Arc::new(limits::Shed::new(
        config.max_concurrent_requests,
        metrics.clone(),
    ));
    routes()
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(config.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            config.max_body_bytes,
            refuse_oversized,
        ))
        // The streaming import reads its body itself, with limits of its
        // own (lines, line length): added after the body limits, which do
        // not wrap it.
        .route("/admin/import", axum::routing::post(import::import))
        .route("/admin/audit", get(audit::page))
        .route("/admin/audit/verify", get(audit::verify))
        .route("/admin/audit/{seq}", get(audit::one))
        // Signed answers wrap what the handler answered, inside the
        // scope check.
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            answers::sign,
        ))
        // After every route: the scope check runs on each matched one,
        // inside the audit trail, which records its refusals.
        .route_layer(axum::middleware::from_fn(auth::require_scope))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            audit::trail,
        ))
        .method_not_allowed_fallback(method_not_allowed)
        .layer(
            ServiceBuilder::new()
                .layer(TraceLayer::new_for_http().make_span_with(observe::span))
                .layer(axum::middleware::from_fn_with_state(shed, limits::shed))
                .layer(HandleErrorLayer::new(overloaded))
                .timeout(config.request_timeout),
        )
        .layer(axum::middleware::from_fn_with_state(
            limits,
            limits::enforce,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::identify,
        ))
        .layer(axum::middleware::from_fn_with_state(
            metrics,
            observe::observe,
        ))
        .with_state(state)
}

/// The route table, under the body limits: [`router`] adds the streaming
/// import (which reads its body under limits of its own) and the audit
/// pages after them.
fn routes() -> Router<AppState> {
    Router::new()
        .route("/agents", get(agents::list).post(agents::register))
        .route("/agents/search", axum::routing::post(agents::search))
        .route("/agents/{id}/summary", get(agents::summary))
        .route("/agents/{id}/proof", get(answers::proof))
        .route("/", get(ui::index))
        .route("/ui/{asset}", get(ui::asset))
        .route(
            "/agents/{id}",
            get(agents::get_one)
                .put(agents::update)
                .delete(agents::delete),
        )
        .route(
            "/resolve",
            axum::routing::post(resolve::resolve)
                .layer(DefaultBodyLimit::max(resolve::MAX_BODY_BYTES)),
        )
        .route("/crawl", axum::routing::post(crawl::start))
        .route("/crawl/{domain}", get(crawl::report))
        .route("/records", axum::routing::post(records::submit))
        .route(
            "/admin/agents/{id}/suspension",
            axum::routing::put(suspend::suspend).delete(suspend::unsuspend),
        )
        .route("/admin/suspensions", get(suspend::all))
        .route("/admin/export", get(export::export))
        .route(
            "/admin/agents/{id}/transfer",
            axum::routing::post(transfer::hand_over),
        )
        .route("/agents/{id}/suspension", get(suspend::one))
        .route("/agents/{id}/invoke", axum::routing::post(invoke::invoke))
        .route(
            "/agents/{id}/operations/{op}",
            axum::routing::post(invoke::operation),
        )
        .route(
            "/agents/{id}/visibility",
            get(visibility::get).put(visibility::put),
        )
        .route("/ard/search", axum::routing::post(ard::search))
        .route("/ard/explore", axum::routing::post(ard::explore))
        .route("/ard/agents", get(ard::list))
        .route("/ard/agents/{identifier}", get(ard::retrieve::retrieve))
        .route("/.well-known/ard.json", get(ard::well_known))
        .route("/.well-known/ai-catalog.json", get(ard::legacy_catalog))
        .route("/v0.1/servers", get(mcp_registry::list))
        .route(
            "/v0.1/servers/{serverName}/versions",
            get(mcp_registry::versions),
        )
        .route(
            "/v0.1/servers/{serverName}/versions/{version}",
            get(mcp_registry::version),
        )
        .route("/health", get(health::health))
        .route("/peers", get(health::peers))
        .route("/metrics", get(observe::render))
        .route("/openapi.json", get(openapi::serve))
        .route("/log/checkpoint", get(log::checkpoint))
        .route("/log/key", get(log::key))
        .route("/log/equivocations", get(log::equivocations))
        .route("/log/tile/{*path}", get(log::tile))
        .route("/log/proof/inclusion", get(log::inclusion))
        .route("/log/proof/consistency", get(log::consistency))
}

/// Most bytes of a refused body read before the answer: enough that a
/// client still sending a body somewhat over the limit reads the 413
/// instead of a reset connection.
const DRAIN_BYTES: usize = 4 << 20;
/// Longest time spent reading a refused body (a loaded 2-core machine
/// took more than 2 s to carry a 300 KiB body once, and the client saw a
/// reset; the connection caps bound what a slow sender holds meanwhile).
const DRAIN_TIME: Duration = Duration::from_secs(10);

/// A request whose `Content-Length` is over `api.max_body_bytes` is
/// answered 413 before any handler runs. The server closing while the
/// client is still sending makes the client's kernel see a reset instead
/// of the answer, so up to [`DRAIN_BYTES`] of the body are read (within
/// [`DRAIN_TIME`]) and dropped first, and the connection is then closed.
/// It does not wrap the streaming import (`POST /admin/import`), which
/// has limits of its own.
async fn refuse_oversized(
    State(limit): State<usize>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    use futures_util::StreamExt;
    let declared = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let Some(declared) = declared.filter(|n| *n > limit as u64) else {
        return next.run(request).await;
    };
    let mut body = request.into_body().into_data_stream();
    let drain = async {
        let mut read = 0;
        while let Some(Ok(chunk)) = body.next().await {
            read += chunk.len();
            if read > DRAIN_BYTES {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, drain).await;
    let mut response = ApiError::new(
        ErrorCode::InvalidInput,
        format!("the request body is {declared} bytes; at most {limit} are accepted"),
    )
    .with_status(axum::http::StatusCode::PAYLOAD_TOO_LARGE)
    .into_response();
    response.headers_mut().insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    response
}

async fn overloaded(err: tower::BoxError) -> ApiError {
    if err.is::<tower::timeout::error::Elapsed>() {
        ApiError::new(
            ErrorCode::Unavailable,
            "the request took longer than the server allows",
        )
        .with_status(axum::http::StatusCode::SERVICE_UNAVAILABLE)
    } else {
        ApiError::new(
            ErrorCode::Unavailable,
            format!("the server could not handle the request: {err}"),
        )
    }
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no route for {}", uri.path()))
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        ErrorCode::InvalidInput,
        format!("{method} is not allowed on {}", uri.path()),
    )
    .with_status(axum::http::StatusCode::METHOD_NOT_ALLOWED)
}

/// How long graceful shutdown waits for in-flight requests.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
