//! How a crawler is set up: [`CrawlerOptions`] (resolvers, trust roots and
//! anchors, timeouts, concurrency, politeness, formats) from the `[crawl]`
//! section, the [`AllowedPorts`] it connects to, and its TLS client
//! configuration.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::error::CrawlError;
use super::{dns, polite};
use crate::config::CrawlConfig;
use crate::descriptor::DocumentFormat;
use crate::net::AddressPolicy;

/// How the crawler connects and what it waits for.
#[derive(Debug, Clone)]
pub struct CrawlerOptions {
    /// DNS servers (empty: the system's).
    pub resolvers: Vec<std::net::SocketAddr>,
    /// Extra PEM trust roots.
    pub ca_files: Vec<PathBuf>,
    /// Which addresses may be connected to.
    pub policy: AddressPolicy,
    /// Accept TLS 1.2 as well as 1.3 (ADP 7.3 requires 1.3; off by default).
    pub allow_tls12: bool,
    /// Per-query DNS timeout.
    pub dns_timeout: Duration,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Whole `agent.json` fetch timeout (redirects, headers, body).
    pub fetch_timeout: Duration,
    /// Whole challenge timeout.
    pub challenge_timeout: Duration,
    /// Domains crawled at once by `crawl_many`.
    pub concurrency: usize,
    /// DNSSEC trust anchors beside the root's built-in one: files of DS or
    /// DNSKEY records (zone-file syntax) or IANA's `root-anchors.xml`
    /// ([`crate::dnssec::anchors`]).
    pub trust_anchors: Vec<PathBuf>,
    /// The formats a crawl of a domain reads ([`DocumentFormat::CRAWLED`]
    /// by default).
    pub formats: Vec<DocumentFormat>,
    /// The port of the other formats' well-known documents (443).
    pub https_port: u16,
    /// Per-host and per-address concurrency and request rate.
    pub politeness: polite::Politeness,
    /// How publishers reach this node's operator (a URL or mail
    /// address), added to the User-Agent.
    pub contact: Option<String>,
    /// DNS answers cached for their TTL ([`dns::CACHE_SIZE`]; 0: none).
    pub dns_cache_size: u64,
    /// The ports fetches and challenges may connect to ([`AllowedPorts`]:
    /// 443 and these).
    pub allowed_ports: AllowedPorts,
}

/// The ports the crawler connects to: 443 always, and the ones configured
/// (`crawl.allowed_ports`, and `crawl.https_port`, which names where the
/// other formats' documents are). A URL on any other port (the TXT `wk`,
/// an SRV record's port, a redirect, `endpoints.chat`) is refused with
/// [`crate::trust::Reason::PortNotAllowed`] before anything connects, so a published
/// record cannot aim the crawler at an arbitrary service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedPorts(Vec<u16>);

impl Default for AllowedPorts {
    /// 443 only.
    fn default() -> Self {
        Self(vec![443])
    }
}

impl AllowedPorts {
    /// 443 and `ports`.
    pub fn new(ports: impl IntoIterator<Item = u16>) -> Self {
        let mut all: Vec<u16> = std::iter::once(443).chain(ports).collect();
        all.sort_unstable();
        all.dedup();
        Self(all)
    }

    /// Whether `port` may be connected to.
    pub fn allows(&self, port: u16) -> bool {
        self.0.contains(&port)
    }

    /// The ports, ascending.
    pub fn ports(&self) -> &[u16] {
        &self.0
    }

    /// `Ok` when `url`'s port (its scheme's default when it names none)
    /// may be connected to.
    ///
    /// # Errors
    /// [`CrawlError::PortNotAllowed`].
    pub fn check(&self, url: &url::Url) -> Result<(), CrawlError> {
        let port = url.port_or_known_default().unwrap_or(443);
        if self.allows(port) {
            Ok(())
        } else {
            Err(CrawlError::PortNotAllowed {
                url: url.to_string(),
                port,
            })
        }
    }
}

impl Default for CrawlerOptions {
    fn default() -> Self {
        Self {
            resolvers: Vec::new(),
            ca_files: Vec::new(),
            policy: AddressPolicy::default(),
            allow_tls12: false,
            dns_timeout: Duration::from_secs(3),
            connect_timeout: Duration::from_secs(5),
            fetch_timeout: Duration::from_secs(10),
            challenge_timeout: Duration::from_secs(5),
            concurrency: 64,
            trust_anchors: Vec::new(),
            formats: DocumentFormat::CRAWLED.to_vec(),
            https_port: 443,
            politeness: polite::Politeness::default(),
            contact: None,
            dns_cache_size: dns::CACHE_SIZE,
            allowed_ports: AllowedPorts::default(),
        }
    }
}

impl CrawlerOptions {
    /// Options from the `[crawl]` config section.
    pub fn from_config(c: &CrawlConfig) -> Self {
        Self {
            resolvers: c.resolvers.clone(),
            ca_files: c.ca_files.clone(),
            policy: AddressPolicy {
                allow_private: c.allow_private_addresses,
            },
            concurrency: c.concurrency,
            trust_anchors: c.dnssec_trust_anchors.clone(),
            formats: c.formats.clone(),
            https_port: c.https_port,
            politeness: polite::Politeness {
                per_host_concurrency: c.per_host_concurrency,
                per_host_interval: c.per_host_interval,
                per_host_burst: c.per_host_burst,
                per_address_concurrency: c.per_address_concurrency,
                per_address_interval: c.per_address_interval,
                per_address_burst: c.per_address_burst,
            },
            contact: c.contact.clone(),
            allowed_ports: AllowedPorts::new(
                c.allowed_ports
                    .iter()
                    .copied()
                    .chain(std::iter::once(c.https_port)),
            ),
            ..Self::default()
        }
    }

    /// The TLS client configuration: the public web roots plus `ca_files`,
    /// TLS 1.3 only unless `allow_tls12`.
    ///
    /// # Errors
    /// [`CrawlError::Setup`] for an unreadable or empty CA file.
    pub fn tls_config(&self) -> Result<Arc<rustls::ClientConfig>, CrawlError> {
        self.tls_config_presenting(None)
    }

    /// As [`CrawlerOptions::tls_config`], presenting `identity` (a
    /// certificate chain, the leaf first, and its key) to a server that
    /// asks for a client certificate: the invocation gateway's to an
    /// agent whose operator gave it one.
    ///
    /// # Errors
    /// [`CrawlError::Setup`] for an unreadable or empty CA file, or a
    /// key rustls cannot use.
    pub fn tls_config_presenting(
        &self,
        identity: Option<(
            Vec<rustls::pki_types::CertificateDer<'static>>,
            rustls::pki_types::PrivateKeyDer<'static>,
        )>,
    ) -> Result<Arc<rustls::ClientConfig>, CrawlError> {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for path in &self.ca_files {
            let setup = |message: String| CrawlError::Setup {
                message: format!("CA file {}: {message}", path.display()),
            };
            let pem = std::fs::read(path).map_err(|e| setup(e.to_string()))?;
            let mut added = 0;
            use rustls::pki_types::pem::PemObject;
            for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| setup(e.to_string()))?;
                roots.add(cert).map_err(|e| setup(e.to_string()))?;
                added += 1;
            }
            if added == 0 {
                return Err(setup("no PEM certificates in it".into()));
            }
        }
        let versions: &[&rustls::SupportedProtocolVersion] = if self.allow_tls12 {
            &[&rustls::version::TLS13, &rustls::version::TLS12]
        } else {
            &[&rustls::version::TLS13]
        };
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_protocol_versions(versions)
        .map_err(|e| CrawlError::Setup {
            message: e.to_string(),
        })?
        .with_root_certificates(roots);
        let config = match identity {
            None => config.with_no_client_auth(),
            Some((chain, key)) => {
                config
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| CrawlError::Setup {
                        message: format!("client certificate: {e}"),
                    })?
            }
        };
        Ok(Arc::new(config))
    }
}
