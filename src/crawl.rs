//! Crawling DNS-anchored agents (ADP, DESIGN.md section 4): from a domain
//! name to a verified, signed descriptor record.
//!
//! [`Crawler::crawl`] runs the chain for one domain and returns a
//! [`CrawlReport`] with every step's outcome, the trust level, the evidence
//! and stable reason codes for what failed; [`Crawler::crawl_and_store`]
//! also signs and stores the record so the registry finds crawled agents
//! beside registered ones. Submodules: [`dns`] (lookups), [`fetch`] (HTTPS
//! with limits, under the [`AddressPolicy`]), [`challenge`] (WebSocket),
//! [`queue`] (the node's crawl actor).
//! Verification of what was gathered is pure code in [`crate::adp`].

pub mod challenge;
mod discover;
pub mod dns;
pub mod fetch;
mod one_hop;
mod persist;
mod pipeline;
pub mod polite;
pub mod probe;
pub mod queue;
mod report;
pub mod scheduler;
pub mod seeds;

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use one_hop::MAX_PEERS_CHECKED;
pub use pipeline::{Crawler, Held};
pub use report::{
    redact_addresses, redact_report, CrawlOutcome, CrawlReport, PeerCheck, Step, StepOutcome,
    TrustSummary, Verified, Visit, ADDRESS, CONNECTION_FAILED, REFUSED_ADDRESS,
};

use crate::adp::check::DocumentError;
use crate::adp::handshake::HandshakeError;
use crate::adp::txt::TxtError;
use crate::config::CrawlConfig;
use crate::descriptor::DocumentFormat;
use crate::identity::DomainError;
use crate::net::AddressPolicy;
use crate::verify::Reason;

/// Why a crawl (or a step of it) failed. Each variant has a stable reason
/// code ([`CrawlError::reason`]) that the API and CLI show.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CrawlError {
    /// The crawler could not be set up (TLS roots, resolver).
    #[error("crawler setup: {message}")]
    Setup {
        /// What could not be built, as the HTTP client or resolver says.
        message: String,
    },
    /// Not a domain name.
    #[error("{domain:?} is not a domain name: {reason}")]
    InvalidDomain {
        /// The name as given.
        domain: String,
        /// What makes it not a domain name.
        reason: String,
    },
    /// The TXT record is missing or unusable.
    #[error(transparent)]
    Txt(#[from] TxtError),
    /// A DNS lookup failed.
    #[error(transparent)]
    Dns(#[from] dns::DnsError),
    /// The target address is internal and this node may not connect to it.
    #[error("{host} resolves to {ip}, which this node may not connect to (see --allow-private)")]
    AddressNotAllowed {
        /// The host name being connected to.
        host: String,
        /// The address it resolved to, which the [`AddressPolicy`] refuses.
        ip: IpAddr,
    },
    /// A URL on a port the crawler does not connect to (443 and
    /// `crawl.allowed_ports` only).
    #[error(
        "{url} names port {port}, which this node does not connect to (see crawl.allowed_ports)"
    )]
    PortNotAllowed {
        /// The URL.
        url: String,
        /// Its port.
        port: u16,
    },
    /// `http://` or `ws://` where TLS is required.
    #[error("{url} does not use TLS (https/wss required)")]
    InsecureUrl {
        /// The URL without TLS.
        url: String,
    },
    /// A URL that does not parse.
    #[error("bad URL {url:?}: {reason}")]
    BadUrl {
        /// The URL as given (a `wk` value or a redirect's `Location`).
        url: String,
        /// Why it does not parse or cannot be used.
        reason: String,
    },
    /// The TLS handshake failed (untrusted certificate, old version...).
    #[error("TLS with {url} failed: {message}")]
    Tls {
        /// The URL being connected to.
        url: String,
        /// The TLS library's message.
        message: String,
    },
    /// The TCP connection failed.
    #[error("cannot connect to {url}: {message}")]
    Connect {
        /// The URL being connected to.
        url: String,
        /// The last connection error.
        message: String,
    },
    /// A stage exceeded its time.
    #[error("{stage} timed out after {after:?}")]
    Timeout {
        /// The stage that ran out of time (`fetch`).
        stage: &'static str,
        /// The time it was allowed.
        after: Duration,
    },
    /// A non-success HTTP status.
    #[error("{url} answered HTTP {status}")]
    HttpStatus {
        /// The URL that answered.
        url: String,
        /// The HTTP status code it answered with.
        status: u16,
    },
    /// The publisher asked the crawler to come back later: 429, or 503
    /// with a `Retry-After`.
    #[error("{url} answered HTTP {status}; retry after {retry_after_secs:?} s")]
    Throttled {
        /// The URL that answered.
        url: String,
        /// 429 or 503.
        status: u16,
        /// Its `Retry-After`, seconds (capped at a day), when it sent one.
        retry_after_secs: Option<u64>,
    },
    /// Not asked: the host's earlier `Retry-After` still holds.
    #[error("{host} asked to be left alone for {retry_after_secs} s more")]
    HostBackoff {
        /// The host held.
        host: String,
        /// Seconds left of the hold.
        retry_after_secs: u64,
    },
    /// More redirects than allowed.
    #[error("more than {limit} redirects from {url}")]
    RedirectLimit {
        /// The URL that redirected once too often.
        url: String,
        /// The most redirects followed.
        limit: usize,
    },
    /// A redirect to another host.
    #[error("redirect from {from} to another host ({to})")]
    RedirectOtherHost {
        /// The URL that redirected.
        from: String,
        /// Where it redirected to.
        to: String,
    },
    /// Not `application/json` or `application/adp+json`.
    #[error("content type {content_type:?} is not application/json or application/adp+json")]
    WrongContentType {
        /// The response's `Content-Type` (empty when it has none).
        content_type: String,
    },
    /// Body over the limit.
    #[error("agent.json is larger than {limit} bytes")]
    DocumentTooLarge {
        /// The largest body accepted, in bytes.
        limit: usize,
    },
    /// Nested too deep.
    #[error("agent.json nests deeper than {limit} levels")]
    JsonTooDeep {
        /// The deepest nesting accepted.
        limit: usize,
    },
    /// Too many values.
    #[error("agent.json has more than {limit} values")]
    JsonTooLarge {
        /// The most values accepted.
        limit: usize,
    },
    /// The document is not JSON, not ADP/1.x, not schema-valid, speaks
    /// for another domain, or breaks the fingerprint chain.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// No wss chat endpoint to challenge.
    #[error("no wss chat endpoint to challenge")]
    ChallengeUnavailable,
    /// The agent did not answer the challenge.
    #[error("the agent did not answer the challenge in time")]
    ChallengeNoAnswer {
        /// How long the crawler waited (zero when the agent closed the
        /// connection without answering).
        after: Duration,
    },
    /// The answer carries a signature that does not verify.
    #[error("the challenge answer's signature does not verify")]
    ChallengeBadSignature,
    /// The answer is for another nonce.
    #[error("the challenge answer is for another nonce")]
    ChallengeWrongNonce,
    /// The answer is malformed or from another key or agent.
    #[error("challenge failed: {message}")]
    ChallengeFailed {
        /// What was wrong with the answer or the exchange.
        message: String,
    },
    /// The `_agent` TXT RRset is signed and its signature does not verify
    /// (DNSSEC Bogus): forged or broken DNS.
    #[error("DNSSEC validation of {name} failed (Bogus): {detail}")]
    DnssecBogus {
        /// The name asked.
        name: String,
        /// What the validator says.
        detail: String,
    },
    /// The agent's key changed from the one held without a rotation
    /// statement signed by the held key.
    #[error("the agent's key changed without proof: {message}")]
    KeyChangedUnproven {
        /// What the rotation check found.
        message: String,
    },
    /// The document carries a key its holder revoked.
    #[error("the agent's key {fingerprint} was revoked by its holder (known here since {since}): nothing signed under it is stored")]
    KeyRevoked {
        /// The revoked key's fingerprint.
        fingerprint: String,
        /// When this node learnt of the revocation (Unix seconds).
        since: u64,
    },
    /// A document of another discovery format is refused.
    #[error(transparent)]
    Format(#[from] crate::formats::FormatError),
    /// Signing or storing the record failed.
    #[error("storing the record failed: {message}")]
    Store {
        /// The store's or issuer's error.
        message: String,
    },
}

impl CrawlError {
    /// The stable reason code.
    pub fn reason(&self) -> Reason {
        match self {
            Self::Setup { .. } => Reason::SetupFailed,
            Self::InvalidDomain { .. } => Reason::InvalidDomain,
            Self::Txt(t) => t.reason(),
            Self::Dns(dns::DnsError::NxDomain { .. }) => Reason::DnsNxdomain,
            Self::Dns(dns::DnsError::NoRecords { .. }) => Reason::DnsNoRecords,
            Self::Dns(_) => Reason::DnsFailure,
            Self::AddressNotAllowed { .. } => Reason::AddressNotAllowed,
            Self::PortNotAllowed { .. } => Reason::PortNotAllowed,
            Self::InsecureUrl { .. } => Reason::InsecureUrl,
            Self::BadUrl { .. } => Reason::BadUrl,
            Self::Tls { .. } => Reason::TlsFailure,
            Self::Connect { .. } => Reason::ConnectFailed,
            Self::Timeout { .. } => Reason::Timeout,
            Self::HttpStatus { .. } => Reason::HttpStatus,
            Self::Throttled { .. } => Reason::HttpThrottled,
            Self::HostBackoff { .. } => Reason::HostBackoff,
            Self::RedirectLimit { .. } => Reason::RedirectLimit,
            Self::RedirectOtherHost { .. } => Reason::RedirectOtherHost,
            Self::WrongContentType { .. } => Reason::WrongContentType,
            Self::DocumentTooLarge { .. } => Reason::DocumentTooLarge,
            Self::JsonTooDeep { .. } => Reason::JsonTooDeep,
            Self::JsonTooLarge { .. } => Reason::JsonTooLarge,
            Self::Document(d) => d.reason(),
            Self::ChallengeUnavailable => Reason::ChallengeUnavailable,
            Self::ChallengeNoAnswer { .. } => Reason::ChallengeNoAnswer,
            Self::ChallengeBadSignature => Reason::ChallengeBadSignature,
            Self::ChallengeWrongNonce => Reason::ChallengeWrongNonce,
            Self::ChallengeFailed { .. } => Reason::ChallengeFailed,
            Self::Format(e) => e.reason,
            Self::DnssecBogus { .. } => Reason::DnssecBogus,
            Self::KeyChangedUnproven { .. } => Reason::KeyChangedUnproven,
            Self::KeyRevoked { .. } => Reason::KeyRevoked,
            Self::Store { .. } => Reason::StoreFailed,
        }
    }
}

impl CrawlError {
    /// How long the publisher asked the crawler to wait, when it asked.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Throttled {
                retry_after_secs, ..
            } => retry_after_secs.map(Duration::from_secs),
            Self::HostBackoff {
                retry_after_secs, ..
            } => Some(Duration::from_secs(*retry_after_secs)),
            _ => None,
        }
    }
}

impl From<DomainError> for CrawlError {
    fn from(e: DomainError) -> Self {
        Self::InvalidDomain {
            domain: e.domain,
            reason: e.reason,
        }
    }
}

impl From<HandshakeError> for CrawlError {
    fn from(e: HandshakeError) -> Self {
        match e {
            HandshakeError::BadSignature => Self::ChallengeBadSignature,
            HandshakeError::WrongNonce => Self::ChallengeWrongNonce,
            other => Self::ChallengeFailed {
                message: other.to_string(),
            },
        }
    }
}

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
    /// ([`dns::anchors`]).
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
/// [`Reason::PortNotAllowed`] before anything connects, so a published
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
                per_address_concurrency: c.per_address_concurrency,
                per_address_interval: c.per_address_interval,
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
        .with_root_certificates(roots)
        .with_no_client_auth();
        Ok(Arc::new(config))
    }
}
