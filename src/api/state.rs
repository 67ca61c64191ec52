//! What the handlers share: [`AppState`], built once by the node from
//! [`AppStateParts`], cheap to clone (one `Arc`), read by every handler
//! through its accessors.

use std::sync::Arc;

use super::credentials::Access;
use crate::config::ApiConfig;
use crate::crawl::queue::CrawlQueue;
use crate::federation::reverify::Reverifier;
use crate::federation::Judge;
use crate::gateway::Gateway;
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
    pub reverify: Arc<Reverifier>,
}

/// What [`AppState`] is made of: the node's parts the API reads and
/// calls, and what it says about the node.
pub struct AppStateParts {
    /// The registry every `/agents` handler calls.
    pub registry: Registry,
    /// The crawl queue, when the node crawls (`POST /crawl`).
    pub crawl_queue: Option<CrawlQueue>,
    /// The mesh, when the node runs one.
    pub mesh: Option<MeshState>,
    /// What `POST /agents/search` runs.
    pub search: FederatedSearch,
    /// Where requests are counted, and what `GET /metrics` renders.
    pub metrics: Metrics,
    /// The `[api]` section: limits and the admin token.
    pub config: ApiConfig,
    /// The credentials the API accepts.
    pub access: Access,
    /// The node's libp2p peer id.
    pub peer_id: String,
    /// Its listen multiaddrs, with `/p2p/<peer id>`.
    pub listen_addrs: Vec<String>,
    /// The invocation gateway, when `gateway.enabled`.
    pub gateway: Option<Gateway>,
    /// Signs the transparency log's checkpoints (`GET /log/checkpoint`).
    pub notary: Arc<crate::tlog::Notary>,
    /// Witnesses peers' logs and keeps the cosignatures of this node's
    /// checkpoints (`GET /log/checkpoint?witnesses=N`,
    /// `GET /log/equivocations`, `GET /peers`); none without a mesh.
    pub witness: Option<Arc<crate::witness::Witness>>,
    /// The keys whose evidence the node counts beside its own
    /// (`p2p.trusted_peers`), base64url: signed answers name them.
    pub trusted_signers: Vec<String>,
}

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<StateInner>,
}

struct StateInner {
    parts: AppStateParts,
    /// One `POST /admin/import` at a time.
    import_gate: Arc<tokio::sync::Semaphore>,
}

impl AppState {
    /// The state of a node made of `parts`.
    pub fn new(parts: AppStateParts) -> Self {
        Self {
            inner: Arc::new(StateInner {
                parts,
                import_gate: Arc::new(tokio::sync::Semaphore::new(1)),
            }),
        }
    }

    pub(crate) fn registry(&self) -> &Registry {
        &self.inner.parts.registry
    }

    pub(crate) fn crawl_queue(&self) -> Option<&CrawlQueue> {
        self.inner.parts.crawl_queue.as_ref()
    }

    pub(crate) fn mesh(&self) -> Option<&MeshState> {
        self.inner.parts.mesh.as_ref()
    }

    pub(crate) fn search(&self) -> &FederatedSearch {
        &self.inner.parts.search
    }

    pub(crate) fn metrics(&self) -> &Metrics {
        &self.inner.parts.metrics
    }

    pub(crate) fn config(&self) -> &ApiConfig {
        &self.inner.parts.config
    }

    pub(crate) fn gateway(&self) -> Option<&Gateway> {
        self.inner.parts.gateway.as_ref()
    }

    pub(crate) fn notary(&self) -> &crate::tlog::Notary {
        &self.inner.parts.notary
    }

    pub(crate) fn witness(&self) -> Option<&crate::witness::Witness> {
        self.inner.parts.witness.as_deref()
    }

    pub(crate) fn trusted_signers(&self) -> &[String] {
        &self.inner.parts.trusted_signers
    }

    pub(crate) fn access(&self) -> &Access {
        &self.inner.parts.access
    }

    pub(crate) fn peer_id(&self) -> &str {
        &self.inner.parts.peer_id
    }

    /// The listen addresses the node started with.
    pub(crate) fn listen_addrs(&self) -> &[String] {
        &self.inner.parts.listen_addrs
    }

    pub(crate) fn import_gate(&self) -> Arc<tokio::sync::Semaphore> {
        self.inner.import_gate.clone()
    }
}
