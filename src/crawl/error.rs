//! Why a crawl, or a step of it, failed: [`CrawlError`], each variant with
//! the stable reason code the API and the CLI show.

use std::net::IpAddr;
use std::time::Duration;

use super::dns::DnsError;
use crate::adp::check::DocumentError;
use crate::adp::handshake::HandshakeError;
use crate::adp::txt::TxtError;
use crate::identity::DomainError;
use crate::trust::Reason;

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
    Dns(#[from] DnsError),
    /// The target address is internal and this node may not connect to it.
    #[error("{host} resolves to {ip}, which this node may not connect to (see --allow-private)")]
    AddressNotAllowed {
        /// The host name being connected to.
        host: String,
        /// The address it resolved to, which the
        /// [`crate::net::AddressPolicy`] refuses.
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
            Self::Dns(DnsError::NxDomain { .. }) => Reason::DnsNxdomain,
            Self::Dns(DnsError::NoRecords { .. }) => Reason::DnsNoRecords,
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
