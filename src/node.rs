//! A running node: only the wiring. [`Node::spawn`] starts the parts in
//! steps (store, issuer, crawler, mesh, API), each a stage with its own
//! child cancellation token and its tasks in one [`JoinSet`];
//! [`Node::shutdown`] stops the stages in order (API, crawler, mesh, store
//! flusher), each bounded by a timeout, then flushes the store.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ed25519_dalek::SigningKey;
use tokio::task::{AbortHandle, JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::api::{self, AppState, AppStateParts, MeshState};
use crate::config::Config;
use crate::crawl::follow::Follower;
use crate::crawl::probe::Prober;
use crate::crawl::queue::{CrawlQueue, QueueOptions};
use crate::crawl::scheduler::{SchedulePolicy, Scheduler, SystemClock};
use crate::crawl::{Crawler, CrawlerOptions};
use crate::gateway::{Gateway, GatewayOptions};
use crate::identity;
use crate::issuer::{Issuer, Outbox, Published};
use crate::mesh::{MeshClient, MeshConfig};
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::search::FederatedSearch;
use crate::store::Store;

mod access;
mod error;
mod wiring;

pub use error::NodeError;
pub use wiring::{start_mesh, MeshParts, MeshWiring};

/// How often this node's registrations are checked for renewal.
const RENEW_EVERY: Duration = Duration::from_secs(600);

/// How often the follower of `crawl.mcp_upstreams` looks for an upstream
/// that is due (the first look is one tick after the start).
const FOLLOW_TICK: Duration = Duration::from_secs(5);

/// How often the recrawl scheduler looks for due domains.
const RECRAWL_TICK: Duration = Duration::from_secs(5);

/// A running node. Dropping it without [`Node::shutdown`] cancels its
/// tasks without the final flush (the last second of crawled records may
/// be lost; acknowledged registrations are already on disk).
#[derive(Debug)]
pub struct Node {
    api_addr: SocketAddr,
    peer_id: String,
    listen_addrs: Vec<String>,
    store: Store,
    registry: Registry,
    crawl_queue: CrawlQueue,
    mesh: MeshClient,
    search: FederatedSearch,
    stages: Stages,
}

/// The parts of a node in shutdown order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The HTTP API: stops taking requests, drains open ones.
    Api,
    /// The crawl queue.
    Crawl,
    /// The mesh event loop, the publisher and the republisher.
    Mesh,
    /// The periodic store flusher.
    Store,
}

impl Stage {
    const ORDER: [Stage; 4] = [Stage::Api, Stage::Crawl, Stage::Mesh, Stage::Store];

    fn name(self) -> &'static str {
        match self {
            Stage::Api => "api",
            Stage::Crawl => "crawl",
            Stage::Mesh => "mesh",
            Stage::Store => "store",
        }
    }

    /// How long the stage may take to stop before its tasks are aborted.
    fn grace(self) -> Duration {
        match self {
            Stage::Api => api::SHUTDOWN_GRACE,
            Stage::Crawl | Stage::Mesh | Stage::Store => Duration::from_secs(10),
        }
    }
}

/// Every task of the node in one [`JoinSet`], each belonging to a stage
/// with a child token of the root.
#[derive(Debug)]
struct Stages {
    root: CancellationToken,
    tokens: [CancellationToken; 4],
    set: JoinSet<()>,
    /// Per stage: the ids of its tasks in `set`, and the abort handles of
    /// the tasks they watch.
    tasks: [(HashSet<tokio::task::Id>, Vec<AbortHandle>); 4],
}

impl Drop for Stages {
    fn drop(&mut self) {
        self.root.cancel();
        for (_, inner) in &self.tasks {
            inner.iter().for_each(AbortHandle::abort);
        }
    }
}

impl Stages {
    fn new() -> Self {
        let root = CancellationToken::new();
        Self {
            tokens: Stage::ORDER.map(|_| root.child_token()),
            root,
            set: JoinSet::new(),
            tasks: Default::default(),
        }
    }

    /// The token that stops `stage`.
    fn token(&self, stage: Stage) -> CancellationToken {
        self.tokens[stage as usize].clone()
    }

    /// Adds a task started elsewhere to `stage`.
    fn adopt(&mut self, stage: Stage, task: &'static str, handle: JoinHandle<()>) {
        let inner = handle.abort_handle();
        let watcher = self.set.spawn(async move {
            match handle.await {
                Err(e) if e.is_panic() => tracing::error!(task, "task panicked"),
                _ => tracing::debug!(task, "task ended"),
            }
        });
        let (ids, aborts) = &mut self.tasks[stage as usize];
        ids.insert(watcher.id());
        aborts.push(inner);
    }

    /// Stops the stages in order, each within its grace.
    async fn shutdown(&mut self) {
        for stage in Stage::ORDER {
            self.tokens[stage as usize].cancel();
            let drained = tokio::time::timeout(stage.grace(), self.drain(stage)).await;
            if drained.is_err() {
                tracing::warn!(stage = stage.name(), "did not stop in time; aborting it");
                self.tasks[stage as usize]
                    .1
                    .iter()
                    .for_each(AbortHandle::abort);
                self.drain(stage).await;
            }
        }
        self.root.cancel();
    }

    /// Waits until every task of `stage` has ended.
    async fn drain(&mut self, stage: Stage) {
        while !self.tasks[stage as usize].0.is_empty() {
            let Some(done) = self.set.join_next_with_id().await else {
                return;
            };
            let id = match done {
                Ok((id, ())) => id,
                Err(e) => e.id(),
            };
            for (ids, _) in &mut self.tasks {
                ids.remove(&id);
            }
        }
    }
}

/// Creates the data directory (mode 0700) if it does not exist.
///
/// # Errors
/// [`NodeError::DataDir`].
pub fn create_data_dir(path: &std::path::Path) -> Result<(), NodeError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(path).map_err(|source| NodeError::DataDir {
        path: path.to_owned(),
        source,
    })
}

impl Node {
    /// Opens the data directory and starts serving: the store, the
    /// registry, the crawler and its schedules, the mesh, then the API,
    /// each step below in this order.
    ///
    /// # Errors
    /// [`NodeError`] naming the part that failed.
    pub async fn spawn(config: Config) -> Result<Self, NodeError> {
        let seeds = crate::crawl::seeds::seed_domains(&config.crawl)?;
        let tls = access::build_tls(&config)?;
        let mut stages = Stages::new();
        let (store, key) = start_store(&config, &mut stages).await?;
        let access = access::build_access(&config)?;
        let peer_id = identity::peer_id_of(&key);
        let (issuer, outbox_rx) = build_issuer(&config, &store, &key);
        let registry = build_registry(&config, &issuer).await?;
        let metrics = Metrics::new();
        start_renewer(&issuer, &mut stages);
        let crawling = start_crawling(
            &config,
            CrawlParts {
                store: &store,
                registry: &registry,
                issuer,
                key: &key,
                peer_id: &peer_id,
                metrics: &metrics,
            },
            &mut stages,
        )
        .await?;
        let crawl_queue = crawling.queue;
        let seeds = unscheduled(seeds, crawling.scheduler.as_ref());
        let notary = Arc::new(notary(&config, &key, &peer_id)?);
        let witness = wiring::build_witness(&config.p2p, &store, &notary)?;
        let (mesh_state, search) = start_mesh_stage(
            MeshWiring {
                p2p: &config.p2p,
                mesh: MeshConfig::from_p2p(&config.p2p)?,
                key: &key,
                store: &store,
                registry: &registry,
                crawl_queue: Some(crawl_queue.clone()),
                outbox: outbox_rx,
                republish: true,
                witness: Some(witness.clone()),
                cancel: stages.token(Stage::Mesh),
            },
            &mut stages,
        )
        .await?;
        let mesh = mesh_state.client.clone();
        let listen_addrs = p2p_addrs(&mesh).await?;
        queue_seeds(&crawl_queue, seeds);

        let search = search.with_metrics(metrics.clone());
        metrics.watch(
            registry.clone(),
            key.verifying_key().to_bytes(),
            Some(mesh.clone()),
        );
        let gateway = if config.gateway.enabled {
            let mut options = GatewayOptions::from_config(&config)?;
            options.signer = Some(crate::gateway::NodeSigner {
                id: peer_id.clone(),
                key: key.clone(),
            });
            Some(Gateway::new(registry.clone(), options))
        } else {
            None
        };
        let state = AppState::new(AppStateParts {
            registry: registry.clone(),
            crawl_queue: Some(crawl_queue.clone()),
            mesh: Some(mesh_state),
            search: search.clone(),
            metrics,
            config: config.api.clone(),
            access,
            peer_id: peer_id.clone(),
            listen_addrs: listen_addrs.clone(),
            gateway,
            notary,
            witness: Some(witness),
            trusted_signers: wiring::trusted_keys(&config.p2p.trusted_peers)
                .iter()
                .map(crate::identity::encode_public_key)
                .collect(),
        });
        let api_addr = start_api(&config, state, tls, &mut stages).await?;
        tracing::info!(api = %api_addr, peer_id = %peer_id, p2p = ?listen_addrs, records = store.len(), "node started");
        Ok(Self {
            api_addr,
            peer_id,
            listen_addrs,
            store,
            registry,
            crawl_queue,
            mesh,
            search,
            stages,
        })
    }

    /// Where the HTTP API listens.
    pub fn api_addr(&self) -> SocketAddr {
        self.api_addr
    }

    /// The node's libp2p peer id.
    pub fn peer_id(&self) -> &str {
        &self.peer_id
    }

    /// The node's mesh client.
    pub fn mesh(&self) -> &MeshClient {
        &self.mesh
    }

    /// The node's p2p addresses, each ending in `/p2p/<peer id>`: what
    /// another node passes to `--bootstrap`.
    pub fn listen_addrs(&self) -> &[String] {
        &self.listen_addrs
    }

    /// The node's crawl queue (what `POST /crawl` feeds).
    pub fn crawl_queue(&self) -> &CrawlQueue {
        &self.crawl_queue
    }

    /// The node's registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The node's search (what `POST /agents/search` runs): local, or
    /// over the mesh within `p2p.search_timeout`.
    pub fn search(&self) -> &FederatedSearch {
        &self.search
    }

    /// Stops the API (in-flight requests get [`api::SHUTDOWN_GRACE`]),
    /// then the crawler, then the mesh, then flushes the store.
    ///
    /// # Errors
    /// [`NodeError::Store`] when the final flush fails.
    pub async fn shutdown(mut self) -> Result<(), NodeError> {
        self.stages.shutdown().await;
        match tokio::time::timeout(Duration::from_secs(30), self.store.flush()).await {
            Ok(result) => result?,
            Err(_) => tracing::error!("store flush did not finish within 30 s"),
        }
        tracing::info!("node stopped");
        Ok(())
    }
}

/// Step 1: the store, opened, and its periodic flusher started.
async fn start_store(
    config: &Config,
    stages: &mut Stages,
) -> Result<(Store, Arc<SigningKey>), NodeError> {
    let (store, key) = open_store(config).await?;
    stages.adopt(
        Stage::Store,
        "flusher",
        store.spawn_flusher(Duration::from_secs(1), stages.token(Stage::Store)),
    );
    if let Some(retention) = config.store.audit_retention {
        stages.adopt(
            Stage::Store,
            "audit-retention",
            start_audit_pruner(&store, &key, retention, stages.token(Stage::Store)).await,
        );
    }
    Ok((store, key))
}

/// How often retention prunes the audit log (and once at the start).
const AUDIT_PRUNE_EVERY: Duration = Duration::from_secs(600);

/// Prunes the audit log to `retention` once, before the node serves,
/// then every [`AUDIT_PRUNE_EVERY`], behind checkpoints signed with `key`.
async fn start_audit_pruner(
    store: &Store,
    key: &Arc<SigningKey>,
    retention: crate::config::AuditRetention,
    cancel: tokio_util::sync::CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let retention = match retention {
        crate::config::AuditRetention::Entries(n) => crate::store::Retention::Count(n),
        crate::config::AuditRetention::Age(d) => crate::store::Retention::Age(d),
    };
    let prune = {
        let (store, key) = (store.clone(), key.clone());
        move || {
            let (store, key) = (store.clone(), key.clone());
            async move {
                match store
                    .run_blocking(move |s| s.audit_prune(retention, &key))
                    .await
                {
                    Ok(Ok(0)) => {}
                    Ok(Ok(n)) => tracing::info!(pruned = n, "audit log pruned"),
                    Ok(Err(e)) | Err(e) => tracing::error!(error = %e, "audit pruning failed"),
                }
            }
        }
    };
    prune().await;
    crate::periodic::every(AUDIT_PRUNE_EVERY, cancel, prune)
}

/// The data directory, the node key and the store.
async fn open_store(config: &Config) -> Result<(Store, Arc<SigningKey>), NodeError> {
    create_data_dir(&config.data_dir)?;
    let key = identity::load_or_create(&config.node_key_path())?;
    let path = config.store_path();
    let options = crate::store::StoreOptions {
        log_signer: Some(key.verifying_key().to_bytes()),
        ..crate::store::StoreOptions::of(&config.store)
    };
    let store = tokio::task::spawn_blocking(move || Store::open_with(&path, &options))
        .await
        .expect("the store-open task does not panic")?;
    // The evidence held counts only from this node and its trusted peers:
    // classified again whenever that set changed since the last start.
    let mut vouched: std::collections::BTreeSet<[u8; 32]> =
        wiring::trusted_keys(&config.p2p.trusted_peers)
            .iter()
            .map(|k| k.to_bytes())
            .collect();
    vouched.insert(key.verifying_key().to_bytes());
    store.reassess(vouched).await?;
    Ok((store, Arc::new(key)))
}

/// What signs the transparency log's checkpoints: the node key, under
/// `store.log_origin` or `agentmesh/<peer id>`.
fn notary(
    config: &Config,
    key: &Arc<SigningKey>,
    peer_id: &str,
) -> Result<crate::tlog::Notary, NodeError> {
    let origin = config
        .store
        .log_origin
        .clone()
        .unwrap_or_else(|| crate::tlog::Notary::default_origin(peer_id));
    crate::tlog::Notary::new(&origin, key.clone()).map_err(|e| {
        NodeError::Config(crate::config::ConfigError::Invalid {
            key: "store.log_origin",
            message: e.to_string(),
        })
    })
}

/// Step 2: the issuer. Everything this node signs goes through it, then
/// the outbox (the receiver returned), then, once the mesh runs, the
/// publisher.
fn build_issuer(
    config: &Config,
    store: &Store,
    key: &Arc<SigningKey>,
) -> (Issuer, tokio::sync::mpsc::Receiver<Published>) {
    let (outbox, outbox_rx) = Outbox::new(4096);
    let issuer =
        Issuer::new(store.clone(), key.clone(), config.store.record_ttl).with_outbox(outbox);
    (issuer, outbox_rx)
}

/// The renewal of this node's registrations, in the crawl stage.
fn start_renewer(issuer: &Issuer, stages: &mut Stages) {
    stages.adopt(
        Stage::Crawl,
        "renew",
        crate::issuer::spawn_renewer(issuer.clone(), RENEW_EVERY, stages.token(Stage::Crawl)),
    );
}

/// Step 3: the registry over the issuer, with the semantic model when
/// `search.semantic_model` names one (loaded on a blocking thread).
async fn build_registry(config: &Config, issuer: &Issuer) -> Result<Registry, NodeError> {
    let registry = Registry::new(issuer.clone());
    let Some(dir) = config.search.semantic_model.clone() else {
        return Ok(registry);
    };
    let model = tokio::task::spawn_blocking(move || crate::registry::load_semantic(&dir))
        .await
        .expect("loading the semantic model does not panic")?;
    tracing::info!(
        dim = model.dim(),
        lexical_weight = config.search.semantic_weight,
        "semantic ranking on"
    );
    Ok(registry.with_semantic(model, config.search.semantic_weight))
}

/// What the crawl step is built from.
struct CrawlParts<'a> {
    store: &'a Store,
    registry: &'a Registry,
    issuer: Issuer,
    key: &'a Arc<SigningKey>,
    peer_id: &'a str,
    metrics: &'a Metrics,
}

/// The crawl stage's running parts.
struct Crawling {
    /// What `POST /crawl`, the seeds and the re-verifier feed.
    queue: CrawlQueue,
    /// The recrawl scheduler, when `crawl.recrawl` is on.
    scheduler: Option<Scheduler>,
}

/// Step 4: the crawler, the recrawl scheduler (`crawl.recrawl`), the
/// liveness probe (`crawl.probe_registered`) and the crawl queue.
async fn start_crawling(
    config: &Config,
    parts: CrawlParts<'_>,
    stages: &mut Stages,
) -> Result<Crawling, NodeError> {
    let crawler = Crawler::new(
        CrawlerOptions::from_config(&config.crawl),
        parts.key.clone(),
        parts.peer_id.to_owned(),
    )?;
    let scheduler = if config.crawl.recrawl {
        let scheduler = Scheduler::load(
            crawler.clone(),
            parts.issuer.clone(),
            SchedulePolicy::from_config(&config.crawl),
            Arc::new(SystemClock),
        )
        .await?;
        scheduler.count_in(parts.metrics.clone());
        if config.crawl.probe_crawled {
            scheduler.probe_found(config.crawl.probe_timeout);
        }
        stages.adopt(
            Stage::Crawl,
            "recrawl",
            scheduler.spawn(RECRAWL_TICK, stages.token(Stage::Crawl)),
        );
        Some(scheduler)
    } else {
        None
    };
    if config.crawl.probe_registered {
        start_prober(config, &crawler, &parts, stages);
    }
    if !config.crawl.mcp_upstreams.is_empty() {
        let follower = Follower::new(
            crawler.clone(),
            parts.registry.clone(),
            config.crawl.mcp_follow_interval,
        )
        .counting_in(parts.metrics.clone());
        stages.adopt(
            Stage::Crawl,
            "mcp_follow",
            follower.spawn(
                config.crawl.mcp_upstreams.clone(),
                FOLLOW_TICK,
                stages.token(Stage::Crawl),
            ),
        );
    }
    let (queue, crawl_task) = CrawlQueue::spawn(
        crawler,
        parts.issuer,
        QueueOptions {
            capacity: 64,
            follow_peers: config.crawl.follow_peers,
            max_domains_per_job: config.crawl.max_domains_per_job,
        },
        scheduler.clone(),
        parts.metrics.clone(),
        stages.token(Stage::Crawl),
    );
    stages.adopt(Stage::Crawl, "crawl_queue", crawl_task);
    Ok(Crawling { queue, scheduler })
}

/// The liveness probe of registered agents' endpoints, at
/// `crawl.probe_rate` probes a second.
fn start_prober(config: &Config, crawler: &Crawler, parts: &CrawlParts<'_>, stages: &mut Stages) {
    let per_round = config.crawl.probe_rate as u64 * RECRAWL_TICK.as_secs();
    let prober = Prober::new(
        crawler.clone(),
        parts.store.clone(),
        Arc::new(SystemClock),
        config.crawl.probe_interval,
        usize::try_from(per_round).unwrap_or(usize::MAX),
    )
    .with_timeout(config.crawl.probe_timeout)
    .with_concurrency(config.crawl.probe_concurrency)
    .publishing(parts.issuer.clone());
    prober.count_in(parts.metrics.clone());
    stages.adopt(
        Stage::Crawl,
        "probe",
        prober.spawn(RECRAWL_TICK, stages.token(Stage::Crawl)),
    );
}

/// The seeds the recrawl scheduler does not keep already (those come
/// back on its schedule).
fn unscheduled(seeds: Vec<String>, scheduler: Option<&Scheduler>) -> Vec<String> {
    match scheduler {
        Some(s) => seeds.into_iter().filter(|d| s.state(d).is_none()).collect(),
        None => seeds,
    }
}

/// Step 5: the mesh. Records from peers are judged by the node's
/// handler; what the issuer stores goes out through the publisher; after
/// a restart the republisher puts this node's records back in the DHT.
/// Its tasks join the mesh stage.
async fn start_mesh_stage(
    wiring: MeshWiring<'_>,
    stages: &mut Stages,
) -> Result<(MeshState, FederatedSearch), NodeError> {
    let parts = start_mesh(wiring).await?;
    stages.adopt(Stage::Mesh, "mesh", parts.event_loop);
    for (name, task) in parts.tasks {
        stages.adopt(Stage::Mesh, name, task);
    }
    let mesh = MeshState {
        client: parts.mesh,
        judge: parts.judge,
        reverify: parts.reverify,
    };
    Ok((mesh, parts.search))
}

/// The node's p2p listen addresses, each ending in `/p2p/<peer id>`.
async fn p2p_addrs(mesh: &MeshClient) -> Result<Vec<String>, NodeError> {
    Ok(mesh
        .listen_addrs()
        .await?
        .iter()
        .map(ToString::to_string)
        .collect())
}

/// Queues the seed domains for a first crawl; a full queue is logged,
/// not fatal.
fn queue_seeds(crawl_queue: &CrawlQueue, seeds: Vec<String>) {
    if seeds.is_empty() {
        return;
    }
    tracing::info!(count = seeds.len(), "queueing seed domains");
    if let Err(e) = crawl_queue.enqueue(seeds) {
        tracing::warn!(error = %e, "could not queue the seed domains");
    }
}

/// Step 6: the HTTP API, served until its stage stops: over HTTPS with
/// `tls` (`[api.tls]`, read in step 0).
async fn start_api(
    config: &Config,
    state: AppState,
    tls: Option<Arc<rustls::ServerConfig>>,
    stages: &mut Stages,
) -> Result<SocketAddr, NodeError> {
    let bind = |source| NodeError::Bind {
        addr: config.api.listen,
        source,
    };
    let listener = tokio::net::TcpListener::bind(config.api.listen)
        .await
        .map_err(bind)?;
    let api_addr = listener.local_addr().map_err(bind)?;
    let metrics = state.metrics().clone();
    let router = api::router(state);
    let options = api::ServeOptions {
        tls,
        ..api::ServeOptions::from_config(&config.api)
    };
    let cancel = stages.token(Stage::Api);
    let task = tokio::spawn(
        api::serve(listener, router, options, metrics, cancel)
            .instrument(tracing::info_span!("api", addr = %api_addr)),
    );
    stages.adopt(Stage::Api, "api", task);
    Ok(api_addr)
}
