//! [`NodeError`]: what can go wrong starting or stopping a node, by
//! the part that failed.

use std::net::SocketAddr;

use crate::config::ConfigError;
use crate::crawl::CrawlError;
use crate::identity::KeyError;
use crate::mesh::MeshError;
use crate::store::StoreError;

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
        /// The data directory.
        path: std::path::PathBuf,
        /// Why it could not be created.
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
    /// `search.semantic_model` could not be loaded.
    #[error(transparent)]
    Semantic(#[from] crate::semantic::SemanticError),
    /// The API's credentials could not be set up (the JWT issuer's
    /// settings, the key file, the node's own admin token, an
    /// `[[api.tls.clients]]` entry).
    #[error("API access: {0}")]
    Access(String),
    /// `[api.tls]` could not be set up (a certificate, key or CA file).
    #[error(transparent)]
    Tls(#[from] crate::api::TlsError),
    /// The invocation gateway could not be set up (its resolver, a CA
    /// file, a credential file).
    #[error("gateway: {0}")]
    Gateway(#[from] crate::gateway::SetupError),
    /// The API listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The configured `api.listen` address.
        addr: SocketAddr,
        /// Why it could not be bound.
        #[source]
        source: std::io::Error,
    },
}
