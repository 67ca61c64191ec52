//! A running node: wires the store, the registry, the crawl queue and the
//! HTTP API, and shuts them down in order (API, crawler, then a store
//! flush), each step bounded by a timeout.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::api::{self, AppState};
use crate::config::Config;
use crate::crawl::queue::{CrawlQueue, QueueOptions};
use crate::crawl::{CrawlError, Crawler, CrawlerOptions};
use crate::identity::{self, KeyError};
use crate::registry::Registry;
use crate::store::{Store, StoreError};

/// Errors starting or stopping a node.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
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
}

/// The libp2p peer id of a node key.
pub fn peer_id_of(key: &ed25519_dalek::SigningKey) -> String {
    let mut secret = key.to_bytes();
    let keypair = libp2p_identity::Keypair::ed25519_from_bytes(&mut secret)
        .expect("a 32-byte Ed25519 secret is always a valid libp2p key");
    keypair.public().to_peer_id().to_string()
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
    /// Opens the data directory and starts serving.
    ///
    /// # Errors
    /// [`NodeError`] naming the part that failed.
    pub async fn spawn(config: Config) -> Result<Self, NodeError> {
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
        let registry = Registry::new(store.clone(), key.clone(), config.store.record_ttl);
        let cancel = CancellationToken::new();

        let mut crawl_options = CrawlerOptions::from_config(&config.crawl);
        crawl_options.record_ttl = config.store.record_ttl;
        let crawler = Crawler::new(crawl_options, key, peer_id.clone())?;
        let crawl_cancel = cancel.child_token();
        let (crawl_queue, crawl_task) = CrawlQueue::spawn(
            crawler,
            store,
            QueueOptions {
                capacity: 64,
                follow_peers: config.crawl.follow_peers,
                max_domains_per_job: config.crawl.max_domains_per_job,
            },
            crawl_cancel.clone(),
        );
        if !config.crawl.seeds.is_empty() {
            let seeds: Vec<String> = config.crawl.seeds.clone();
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
        let state = AppState::new(
            registry.clone(),
            Some(crawl_queue),
            config.api.clone(),
            peer_id.clone(),
            Vec::new(),
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
        tracing::info!(api = %api_addr, peer_id = %peer_id, records = registry.store().len(), "node started");
        Ok(Self {
            api_addr,
            peer_id,
            registry,
            cancel,
            api_cancel: api_cancel_handle,
            tasks,
            crawl_cancel,
            crawl_task,
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
        self.cancel.cancel();
        let flush = self.registry.store().flush();
        match tokio::time::timeout(Duration::from_secs(30), flush).await {
            Ok(result) => result?,
            Err(_) => tracing::error!("store flush did not finish within 30 s"),
        }
        tracing::info!("node stopped");
        Ok(())
    }
}
