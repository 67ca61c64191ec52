//! A running node: wires the store, the registry, the crawl queue and the
//! HTTP API, and shuts them down in order (API, crawler, then a store
//! flush), each step bounded by a timeout.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::api::{self, AppState, MeshState};
use crate::config::{Config, ConfigError};
use crate::crawl::queue::{CrawlQueue, QueueOptions};
use crate::crawl::{CrawlError, Crawler, CrawlerOptions};
use crate::federation::handler::{NodeHandler, SharedHandler};
use crate::federation::outbox::{self, Outbox, Published};
use crate::federation::Judge;
use crate::identity::{self, KeyError};
use crate::mesh::{Mesh, MeshClient, MeshConfig, MeshError};
use crate::record::RecordBody;
use crate::registry::Registry;
use crate::store::Filter;
use crate::store::{Store, StoreError};

/// Errors starting or stopping a node.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// The configuration could not be completed (a seed file).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The data directory could not be created.
    #[error("data directory {path}: {source}")]
    DataDir {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The node key could not be loaded or created.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The store could not be opened or flushed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The crawler could not be set up (TLS roots, resolver).
    #[error(transparent)]
    Crawl(#[from] CrawlError),
    /// The mesh could not start.
    #[error(transparent)]
    Mesh(#[from] MeshError),
    /// The API listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// A running node. Dropping it without [`Node::shutdown`] cancels its
/// tasks without the final flush (sled still flushes on its own timer).
#[derive(Debug)]
pub struct Node {
    api_addr: SocketAddr,
    peer_id: String,
    registry: Registry,
    cancel: CancellationToken,
    api_cancel: CancellationToken,
    tasks: JoinSet<()>,
    crawl_cancel: CancellationToken,
    crawl_task: tokio::task::JoinHandle<()>,
    crawl_queue: CrawlQueue,
    mesh: MeshClient,
    mesh_cancel: CancellationToken,
    mesh_tasks: Vec<tokio::task::JoinHandle<()>>,
    listen_addrs: Vec<String>,
    flusher: tokio::task::JoinHandle<()>,
}

/// The libp2p peer id of a node key.
pub fn peer_id_of(key: &ed25519_dalek::SigningKey) -> String {
    crate::mesh::keypair_from_signing_key(key)
        .public()
        .to_peer_id()
        .to_string()
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

/// The Ed25519 keys of `peers` (peer ids of Ed25519 keys embed the key);
/// ids of other key types are skipped with a warning.
fn trusted_keys(peers: &[String]) -> Vec<ed25519_dalek::VerifyingKey> {
    peers
        .iter()
        .filter_map(|p| {
            let key = p
                .parse::<libp2p::PeerId>()
                .ok()
                .and_then(|id| {
                    libp2p::identity::PublicKey::try_decode_protobuf(id.as_ref().digest()).ok()
                })
                .and_then(|k| k.try_into_ed25519().ok())
                .and_then(|k| ed25519_dalek::VerifyingKey::from_bytes(&k.to_bytes()).ok());
            if key.is_none() {
                tracing::warn!(peer = %p, "trusted peer is not an Ed25519 peer id; ignored");
            }
            key
        })
        .collect()
}

/// Records the start-up republish puts back in the DHT per second.
const REPUBLISH_PER_SEC: u32 = 200;
/// Republish puts in flight at once.
const REPUBLISH_IN_FLIGHT: usize = 16;

/// After start, once the node has a DHT peer, puts every live record this
/// node signed (registrations and crawls) back in the DHT and provides
/// their capabilities again (a restarted node's Kademlia has forgotten
/// both); the mesh's own timers republish from then on. Paced at
/// [`REPUBLISH_PER_SEC`] so that a node holding 100k records does not
/// starve its API, and not gossiped: peers have seen these records.
fn spawn_republisher(
    store: Store,
    mesh: MeshClient,
    own: ed25519_dalek::VerifyingKey,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(
        async move {
            // Alone, a DHT put reaches nobody: wait for a peer.
            loop {
                match mesh.status().await {
                    Ok(s) if s.routing_table_peers > 0 => break,
                    Ok(_) => {}
                    Err(_) => return,
                }
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(500)) => {}
                }
            }
            let started = std::time::Instant::now();
            let mut pace = tokio::time::interval(Duration::from_secs(1) / REPUBLISH_PER_SEC);
            pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let in_flight = Arc::new(tokio::sync::Semaphore::new(REPUBLISH_IN_FLIGHT));
            let mut after: Option<String> = None;
            let mut count = 0usize;
            loop {
                let page = match store
                    .search(&Filter::default(), after.as_deref(), 256)
                    .await
                {
                    Ok(p) => p,
                    Err(e) => {
                        tracing::warn!(error = %e, "reading the store to republish failed");
                        return;
                    }
                };
                let Some(last) = page.last() else { break };
                after = Some(last.body.agent_id().to_owned());
                let own_records: Vec<Published> = page
                    .iter()
                    .filter(|a| {
                        a.record.signer() == &own && matches!(a.body, RecordBody::Descriptor(_))
                    })
                    .map(|a| Published::of(&a.record, &a.body))
                    .collect();
                for p in own_records {
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        _ = pace.tick() => {}
                    }
                    let Ok(permit) = in_flight.clone().acquire_owned().await else {
                        return;
                    };
                    let mesh = mesh.clone();
                    tokio::spawn(async move {
                        let _ = mesh.republish(p.record, p.agent_id, p.capabilities).await;
                        drop(permit);
                    });
                    count += 1;
                }
            }
            tracing::info!(
                records = count,
                secs = started.elapsed().as_secs_f64(),
                "republished own records"
            );
        }
        .instrument(tracing::info_span!("republish")),
    )
}

impl Node {
    /// Opens the data directory and starts serving.
    ///
    /// # Errors
    /// [`NodeError`] naming the part that failed.
    pub async fn spawn(config: Config) -> Result<Self, NodeError> {
        let seeds = config.crawl.seed_domains()?;
        create_data_dir(&config.data_dir)?;
        let key = identity::load_or_create(&config.node_key_path())?;
        let peer_id = peer_id_of(&key);
        let store = {
            let path = config.store_path();
            let cache = config.store.cache_bytes;
            tokio::task::spawn_blocking(move || Store::open(&path, cache))
                .await
                .expect("the store-open task does not panic")?
        };
        let key = Arc::new(key);
        let cancel = CancellationToken::new();
        let flusher_cancel = cancel.child_token();
        let flusher = store.spawn_flusher(Duration::from_secs(1), flusher_cancel);
        let (outbox, outbox_rx) = Outbox::new(4096);
        let registry = Registry::new(store.clone(), key.clone(), config.store.record_ttl)
            .with_outbox(outbox.clone());

        let mut crawl_options = CrawlerOptions::from_config(&config.crawl);
        crawl_options.record_ttl = config.store.record_ttl;
        let crawler =
            Crawler::new(crawl_options, key.clone(), peer_id.clone())?.with_outbox(outbox);
        let crawl_cancel = cancel.child_token();
        let (crawl_queue, crawl_task) = CrawlQueue::spawn(
            crawler,
            store.clone(),
            QueueOptions {
                capacity: 64,
                follow_peers: config.crawl.follow_peers,
                max_domains_per_job: config.crawl.max_domains_per_job,
            },
            crawl_cancel.clone(),
        );

        // The mesh: records from peers are judged by the handler; what this
        // node stores goes out through the outbox.
        let trusted = trusted_keys(&config.p2p.trusted_peers);
        let judge = Arc::new(
            Judge::new(store.clone(), key.verifying_key(), trusted)
                .with_replication(config.p2p.replication),
        );
        let handler = NodeHandler::new(judge.clone(), registry.clone(), Some(crawl_queue.clone()));
        let mesh_cancel = cancel.child_token();
        let mesh_config = MeshConfig::from_p2p(&config.p2p)?;
        let (mesh, mesh_task) = Mesh::spawn(
            mesh_config,
            crate::mesh::keypair_from_signing_key(&key),
            Arc::new(SharedHandler(Arc::new(handler))),
            mesh_cancel.clone(),
        )
        .await?;
        let publisher = outbox::spawn_publisher(mesh.clone(), outbox_rx, mesh_cancel.clone());
        let republisher = spawn_republisher(
            store,
            mesh.clone(),
            key.verifying_key(),
            mesh_cancel.clone(),
        );
        let listen_addrs: Vec<String> = mesh
            .listen_addrs()
            .await?
            .iter()
            .map(ToString::to_string)
            .collect();

        if !seeds.is_empty() {
            tracing::info!(count = seeds.len(), "queueing seed domains");
            if let Err(e) = crawl_queue.enqueue(seeds) {
                tracing::warn!(error = %e, "could not queue the seed domains");
            }
        }

        let listener = tokio::net::TcpListener::bind(config.api.listen)
            .await
            .map_err(|source| NodeError::Bind {
                addr: config.api.listen,
                source,
            })?;
        let api_addr = listener.local_addr().map_err(|source| NodeError::Bind {
            addr: config.api.listen,
            source,
        })?;
        let mesh_state = MeshState {
            client: mesh.clone(),
            judge,
            fanout: config.p2p.search_fanout,
            timeout: config.p2p.search_timeout,
        };
        let state = AppState::new(
            registry.clone(),
            Some(crawl_queue.clone()),
            Some(mesh_state),
            config.api.clone(),
            peer_id.clone(),
            listen_addrs.clone(),
        );
        let router = api::router(state);
        let mut tasks = JoinSet::new();
        let api_cancel = cancel.child_token();
        let api_cancel_handle = api_cancel.clone();
        let span = tracing::info_span!("api", addr = %api_addr);
        tasks.spawn(
            async move {
                let served = axum::serve(listener, router)
                    .with_graceful_shutdown(async move { api_cancel.cancelled().await })
                    .await;
                if let Err(e) = served {
                    tracing::error!(error = %e, "API server stopped");
                }
            }
            .instrument(span),
        );
        tracing::info!(api = %api_addr, peer_id = %peer_id, p2p = ?listen_addrs, records = registry.store().len(), "node started");
        Ok(Self {
            api_addr,
            peer_id,
            registry,
            cancel,
            api_cancel: api_cancel_handle,
            tasks,
            crawl_cancel,
            crawl_task,
            crawl_queue,
            mesh,
            mesh_cancel,
            mesh_tasks: vec![mesh_task, publisher, republisher],
            flusher,
            listen_addrs,
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

    /// Stops the API (in-flight requests get [`api::SHUTDOWN_GRACE`]),
    /// then the crawler, then flushes the store.
    ///
    /// # Errors
    /// [`NodeError::Store`] when the final flush fails.
    pub async fn shutdown(mut self) -> Result<(), NodeError> {
        self.api_cancel.cancel();
        let drain = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(api::SHUTDOWN_GRACE, drain)
            .await
            .is_err()
        {
            tracing::warn!("API did not drain in time; aborting open requests");
            self.tasks.abort_all();
        }
        self.crawl_cancel.cancel();
        if tokio::time::timeout(Duration::from_secs(10), &mut self.crawl_task)
            .await
            .is_err()
        {
            tracing::warn!("crawler did not stop in time; aborting it");
            self.crawl_task.abort();
        }
        self.mesh_cancel.cancel();
        for task in self.mesh_tasks.drain(..) {
            if tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .is_err()
            {
                tracing::warn!("a mesh task did not stop in time");
            }
        }
        self.cancel.cancel();
        let _ = (&mut self.flusher).await;
        let flush = self.registry.store().flush();
        match tokio::time::timeout(Duration::from_secs(30), flush).await {
            Ok(result) => result?,
            Err(_) => tracing::error!("store flush did not finish within 30 s"),
        }
        tracing::info!("node stopped");
        Ok(())
    }
}
