//! The HTTP API (AIDIP registry endpoints plus agentmesh's extensions),
//! served by axum. Handlers are thin: they parse and bound the request,
//! call the [`Registry`], and map errors to the draft's error object
//! through [`ApiError`].
//!
//! `POST /admin/import` streams: its response starts at once and the
//! request timeout does not cover the body (see `api/import.rs`).
//!
//! Layers, outermost first: the request id and the request counters
//! (`api/observe.rs`), tracing (one span per request, carrying its id),
//! a concurrency limit, a per-request timeout and the body size limit;
//! unknown routes and methods answer the error object too. `GET /metrics`
//! (no token) renders [`Metrics`].

mod agents;
mod crawl;
mod error;
mod import;
mod observe;
mod openapi;
mod records;
mod resolve;
mod suspend;
mod transfer;
mod ui;

use std::sync::Arc;
use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::extract::{DefaultBodyLimit, State};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use tower::ServiceBuilder;
use tower_http::trace::TraceLayer;

#[doc(hidden)]
pub use agents::parse_search_body;
pub use error::{ApiError, ErrorCode};
pub use observe::{RequestId, MAX_REQUEST_ID_BYTES, REQUEST_ID_HEADER};
pub use openapi::{openapi_document, openapi_json};

use crate::config::ApiConfig;
use crate::crawl::queue::CrawlQueue;
use crate::federation::Judge;
use crate::mesh::MeshClient;
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::search::FederatedSearch;

/// The mesh as the API uses it beyond search (which goes through
/// [`FederatedSearch`]): the client (`GET /health`, `GET /peers`, DHT
/// lookups of `GET /agents/{id}`) and the judge's counters.
#[derive(Clone)]
pub struct MeshState {
    /// The mesh client.
    pub client: MeshClient,
    /// Judges records from peers (its counters are shown by `GET /peers`).
    pub judge: Arc<Judge>,
    /// Queues the re-verifications records ask for, within its limits.
    pub reverify: Arc<crate::federation::reverify::Reverifier>,
}

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<StateInner>,
}

struct StateInner {
    registry: Registry,
    crawl_queue: Option<CrawlQueue>,
    mesh: Option<MeshState>,
    search: FederatedSearch,
    metrics: Metrics,
    config: ApiConfig,
    peer_id: String,
    listen_addrs: Vec<String>,
    /// One `POST /admin/import` at a time.
    import_gate: Arc<tokio::sync::Semaphore>,
}

impl AppState {
    /// State for a node with `registry` (and `crawl_queue`, when it
    /// crawls), searching with `search`, counting into `metrics`,
    /// identified by `peer_id` and reachable at `listen_addrs` (multiaddrs
    /// with `/p2p/<peer id>`).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        registry: Registry,
        crawl_queue: Option<CrawlQueue>,
        mesh: Option<MeshState>,
        search: FederatedSearch,
        metrics: Metrics,
        config: ApiConfig,
        peer_id: String,
        listen_addrs: Vec<String>,
    ) -> Self {
        Self {
            inner: Arc::new(StateInner {
                registry,
                crawl_queue,
                mesh,
                search,
                metrics,
                config,
                peer_id,
                listen_addrs,
                import_gate: Arc::new(tokio::sync::Semaphore::new(1)),
            }),
        }
    }

    pub(crate) fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    pub(crate) fn crawl_queue(&self) -> Option<&CrawlQueue> {
        self.inner.crawl_queue.as_ref()
    }

    pub(crate) fn mesh(&self) -> Option<&MeshState> {
        self.inner.mesh.as_ref()
    }

    pub(crate) fn search(&self) -> &FederatedSearch {
        &self.inner.search
    }

    pub(crate) fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    pub(crate) fn config(&self) -> &ApiConfig {
        &self.inner.config
    }

    pub(crate) fn import_gate(&self) -> Arc<tokio::sync::Semaphore> {
        self.inner.import_gate.clone()
    }
}

/// The whole router.
pub fn router(state: AppState) -> Router {
    let config = state.config().clone();
    let metrics = state.metrics().clone();
    Router::new()
        .route("/agents", get(agents::list).post(agents::register))
        .route("/agents/search", axum::routing::post(agents::search))
        .route("/agents/{id}/summary", get(agents::summary))
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
        .route(
            "/admin/agents/{id}/transfer",
            axum::routing::post(transfer::hand_over),
        )
        .route("/agents/{id}/suspension", get(suspend::one))
        .route("/health", get(health))
        .route("/peers", get(peers))
        .route("/metrics", get(observe::render))
        .route("/openapi.json", get(openapi::serve))
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
        .method_not_allowed_fallback(method_not_allowed)
        .layer(
            ServiceBuilder::new()
                .layer(TraceLayer::new_for_http().make_span_with(observe::span))
                .layer(HandleErrorLayer::new(overloaded))
                .concurrency_limit(config.max_concurrent_requests)
                .timeout(config.request_timeout),
        )
        .layer(axum::middleware::from_fn_with_state(
            metrics,
            observe::observe,
        ))
        .with_state(state)
}

/// Most bytes of a refused body read before the answer: enough that a
/// client still sending a body somewhat over the limit reads the 413
/// instead of a reset connection.
const DRAIN_BYTES: usize = 4 << 20;
/// Longest time spent reading a refused body.
const DRAIN_TIME: Duration = Duration::from_secs(2);

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

/// `GET /health`: what this node is and holds.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct Health {
    /// Always `ok` when the node answers.
    status: &'static str,
    /// The node's version.
    version: &'static str,
    /// Its libp2p peer id.
    peer_id: String,
    /// Its listen multiaddrs, with `/p2p/<peer id>`.
    listen_addrs: Vec<String>,
    /// Addresses confirmed as external.
    external_addrs: Vec<String>,
    /// Records held (descriptors and tombstones).
    records: u64,
    /// Live descriptors by trust level.
    #[schema(value_type = std::collections::BTreeMap<String, u64>)]
    records_by_trust: serde_json::Map<String, Value>,
    /// Connected peers.
    peers: usize,
    /// The crawl queue, when the node crawls.
    crawl: Option<crate::crawl::queue::QueueStatus>,
    /// The vector index, when a semantic model is configured.
    semantic: Option<SemanticHealth>,
}

/// The vector index that semantic search finds agents by meaning in.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct SemanticHealth {
    /// Whether it has read the store whole since the node started (until
    /// then, searches find by meaning among the agents read so far).
    ready: bool,
    /// Agents it holds.
    agents: u64,
    /// Whether its thread has stopped (a panic, in the node's log):
    /// searches by meaning then answer from what it held, which no longer
    /// follows the store, until the node restarts.
    stopped: bool,
}

fn semantic_health(registry: &crate::registry::Registry) -> Option<SemanticHealth> {
    Some(SemanticHealth {
        ready: registry.semantic_ready()?,
        agents: registry.semantic_agents()?,
        stopped: registry.semantic_stopped()?,
    })
}

/// `GET /peers`: the connected peers and what was judged of what they sent.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct Peers {
    /// The connected peers.
    peers: Vec<crate::mesh::PeerInfo>,
    /// Records received from peers.
    records: PeerRecords,
}

/// Counts of the records peers sent.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct PeerRecords {
    /// Stored.
    accepted: u64,
    /// Refused, by reason.
    refused: std::collections::BTreeMap<&'static str, u64>,
    /// Re-verifications records asked for: queued, and dropped by reason
    /// (`recent`, `peer_rate`, `signer_rate`, `node_rate`,
    /// `too_many_sources`, `queue_full`).
    reverify: crate::federation::reverify::ReverifyCounts,
}

#[utoipa::path(get, path = "/health", tag = "node",
    responses((status = 200, description = "The node is up", body = Health)))]
async fn health(State(state): State<AppState>) -> Json<Health> {
    let status = match state.mesh() {
        Some(m) => m.client.status().await.ok(),
        None => None,
    };
    let peers = status.as_ref().map_or(0, |s| s.connected_peers);
    let external: Vec<String> = status
        .iter()
        .flat_map(|s| s.external_addresses.iter().map(ToString::to_string))
        .collect();
    // The listeners as they are now: a wildcard listener reports each
    // interface's address as it comes up, some after the node started.
    let listen_addrs: Vec<String> = match state.mesh() {
        Some(m) => match m.client.listen_addrs().await {
            Ok(addrs) if !addrs.is_empty() => addrs.iter().map(ToString::to_string).collect(),
            _ => state.inner.listen_addrs.clone(),
        },
        None => state.inner.listen_addrs.clone(),
    };
    Json(Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
        peer_id: state.inner.peer_id.clone(),
        listen_addrs,
        external_addrs: external,
        records: state.registry().store().len(),
        records_by_trust: records_by_trust(state.registry().store()),
        peers,
        crawl: state.crawl_queue().map(CrawlQueue::status),
        semantic: semantic_health(state.registry()),
    })
}

/// Live descriptors by trust level, from the in-memory indexes (no read).
fn records_by_trust(store: &crate::store::Store) -> serde_json::Map<String, Value> {
    crate::verify::TrustLevel::ALL
        .iter()
        .map(|&level| (level.as_str().to_owned(), json!(store.trust_count(level))))
        .collect()
}

#[utoipa::path(get, path = "/peers", tag = "node",
    responses(
        (status = 200, description = "The connected peers", body = Peers),
        (status = 503, description = "This node runs no mesh", body = error::ErrorBody),
    ))]
async fn peers(State(state): State<AppState>) -> Result<Json<Peers>, ApiError> {
    let mesh = state
        .mesh()
        .ok_or_else(|| ApiError::new(ErrorCode::Unavailable, "this node runs no mesh"))?;
    let peers = mesh
        .client
        .peers()
        .await
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, e.to_string()))?;
    Ok(Json(Peers {
        peers,
        records: PeerRecords {
            accepted: mesh.judge.accepted(),
            refused: mesh.judge.refusals(),
            reverify: mesh.reverify.counts(),
        },
    }))
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
