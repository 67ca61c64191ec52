//! `GET /health` (what this node is and holds) and `GET /peers` (the
//! connected peers and what was judged of what they sent).

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use super::error::{ApiError, ErrorBody, ErrorCode};
use super::state::AppState;
use crate::crawl::queue::CrawlQueue;

/// `GET /health`: what this node is and holds.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(super) struct Health {
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
    /// The MCP registries this node follows (`crawl.mcp_upstreams`):
    /// where each pass stands, when the last one finished, what it read,
    /// and the last error (absent when it follows none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    mcp_upstreams: Vec<crate::crawl::follow::UpstreamState>,
}

/// The vector index that semantic search finds agents by meaning in.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(super) struct SemanticHealth {
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
pub(super) struct Peers {
    /// The connected peers.
    peers: Vec<crate::mesh::PeerInfo>,
    /// Records received from peers.
    records: PeerRecords,
    /// What this node's witness did with its peers' log checkpoints.
    witness: Option<PeerWitness>,
}

/// The witness's side of `GET /peers` (docs/protocol.md#witnessing).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(super) struct PeerWitness {
    /// Checkpoints received, cosigned, unproven; cosignatures received;
    /// equivocations kept.
    counts: crate::witness::WitnessCounts,
    /// The peers caught signing two histories of their log (the proofs:
    /// `GET /log/equivocations`).
    equivocated: Vec<String>,
}

/// Counts of the records peers sent.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(super) struct PeerRecords {
    /// Stored.
    accepted: u64,
    /// Refused, by reason.
    refused: std::collections::BTreeMap<&'static str, u64>,
    /// Re-verifications records asked for: queued, and dropped by reason
    /// (`recent`, `peer_rate`, `signer_rate`, `node_rate`,
    /// `too_many_sources`, `queue_full`).
    reverify: crate::federation::reverify::ReverifyCounts,
    /// Other nodes' signed liveness results: received, kept, and about
    /// an agent this node does not show.
    liveness: crate::federation::LivenessCounts,
}

#[utoipa::path(get, path = "/health", tag = "node",
    responses((status = 200, description = "The node is up", body = Health)))]
pub(super) async fn health(State(state): State<AppState>) -> Json<Health> {
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
            _ => state.listen_addrs().to_vec(),
        },
        None => state.listen_addrs().to_vec(),
    };
    Json(Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
        peer_id: state.peer_id().to_owned(),
        listen_addrs,
        external_addrs: external,
        records: state.registry().store().len(),
        records_by_trust: records_by_trust(state.registry().store()),
        peers,
        crawl: state.crawl_queue().map(CrawlQueue::status),
        semantic: semantic_health(state.registry()),
        mcp_upstreams: upstreams(state.registry().store()).await,
    })
}

/// The kept state of every upstream registry followed (none when the
/// store cannot say: health still answers).
async fn upstreams(store: &crate::store::Store) -> Vec<crate::crawl::follow::UpstreamState> {
    let kept = store
        .run_blocking(|s| s.upstreams())
        .await
        .and_then(|r| r)
        .unwrap_or_default();
    kept.into_iter()
        .filter_map(|(_, bytes)| serde_json::from_slice(&bytes).ok())
        .collect()
}

/// Live descriptors by trust level, from the in-memory indexes (no read).
fn records_by_trust(store: &crate::store::Store) -> serde_json::Map<String, Value> {
    crate::trust::TrustLevel::ALL
        .iter()
        .map(|&level| (level.as_str().to_owned(), json!(store.trust_count(level))))
        .collect()
}

#[utoipa::path(get, path = "/peers", tag = "node",
    responses(
        (status = 200, description = "The connected peers", body = Peers),
        (status = 503, description = "This node runs no mesh", body = ErrorBody),
    ))]
pub(super) async fn peers(State(state): State<AppState>) -> Result<Json<Peers>, ApiError> {
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
            liveness: mesh.judge.liveness_counts(),
        },
        witness: state.witness().map(|w| PeerWitness {
            counts: w.counts(),
            equivocated: w.equivocations().into_iter().map(|e| e.peer).collect(),
        }),
    }))
}
