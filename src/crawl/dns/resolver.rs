//! The hickory resolver the crawler asks through: the configured servers
//! (UDP, then TCP) or the system's, the crawl's timeout and cache, and
//! for the validating half the trust anchors it validates from.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::dnssec::TrustAnchors;
use hickory_resolver::config::{NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::TokioResolver;

use super::answer::DnsError;

/// A resolver asking `servers` (the system's when empty), validating
/// DNSSEC from `anchors` when given.
pub(super) fn build(
    servers: &[SocketAddr],
    timeout: Duration,
    anchors: Option<TrustAnchors>,
    cache_size: u64,
) -> Result<TokioResolver, DnsError> {
    let mut builder = if servers.is_empty() {
        TokioResolver::builder_tokio().map_err(|e| DnsError::Setup {
            message: e.to_string(),
        })?
    } else {
        let mut config = ResolverConfig::default();
        for server in servers {
            let mut ns = NameServerConfig::udp_and_tcp(server.ip());
            for connection in &mut ns.connections {
                connection.port = server.port();
            }
            config.add_name_server(ns);
        }
        TokioResolver::builder_with_config(config, TokioRuntimeProvider::default())
    };
    let opts: &mut ResolverOpts = builder.options_mut();
    opts.timeout = timeout;
    opts.attempts = 2;
    opts.ndots = 0;
    opts.cache_size = cache_size;
    if let Some(anchors) = anchors {
        builder = builder.with_trust_anchor(Arc::new(anchors));
    }
    builder.build().map_err(|e| DnsError::Setup {
        message: e.to_string(),
    })
}
