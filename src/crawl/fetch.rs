//! The HTTPS fetch of `agent.json` with every limit of docs/protocol.md#crawl-fetch:
//! https only, TLS 1.3 by default, at most 3 redirects to the same host,
//! a body of at most 64 KiB, `application/json` or `application/adp+json`,
//! bounded JSON depth and size, and timeouts on connect and on the whole
//! exchange. The other formats' documents (A2A cards, ARD catalogs, JSON
//! Web Key Sets, DNS-AID capability documents, MCP server cards) are fetched the same way, each [`DocumentKind`] with its
//! media types and size bounds. The caller resolves and checks the host's addresses (the SSRF
//! guard); each fetch uses a client pinned to exactly one of those
//! addresses, whose resolver refuses every other name, so the checked
//! address is the one connected to and a redirect can never reach an
//! unchecked host. The client for a host, port and address is kept a
//! few seconds (`fetch/clients.rs`), so a domain's documents in every
//! format share its connection; the liveness probe's exchanges build one
//! of their own each.
//! The addresses are tried one at a time, each attempt pinned to one
//! address and holding that address's politeness slot as well as the
//! host's ([`super::polite`]); the next address is tried only when the
//! last could not be connected to. The liveness probe's requests
//! (`fetch/exchange.rs`) go through the same guards.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{
    HeaderMap, CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH, LINK, LOCATION, RETRY_AFTER,
};
use reqwest::StatusCode;
use url::Url;

use super::error::CrawlError;
use super::polite::{self, HostLimiter};
use crate::adp::check::DocumentError;
use crate::net::AddressPolicy;
use clients::Clients;

/// Largest `agent.json` accepted, bytes.
pub const MAX_DOCUMENT_BYTES: usize = 64 * 1024;
/// Most redirects followed.
pub const MAX_REDIRECTS: usize = 3;
/// Deepest JSON nesting accepted.
pub const MAX_JSON_DEPTH: usize = 32;
/// Most JSON values (objects, arrays, scalars) accepted in one document.
pub const MAX_JSON_VALUES: usize = 20_000;

/// What is being fetched: the `Accept` header sent, the media types
/// accepted, and the bounds of the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocumentKind {
    /// What the report's failure names (`agent.json`, `agent card`...).
    pub what: &'static str,
    /// The `Accept` header.
    pub accept: &'static str,
    /// Media types (essence, lower-case) accepted in `Content-Type`.
    pub media_types: &'static [&'static str],
    /// Largest body, bytes.
    pub max_bytes: usize,
    /// Most JSON values in the body.
    pub max_values: usize,
    /// Whether the body is JSON, its depth and values bounded before it
    /// is read (`false`: text, only its size bounded).
    pub json: bool,
    /// Extra request headers.
    pub headers: &'static [(&'static str, &'static str)],
}

/// An ADP `agent.json` (docs/protocol.md#crawl-fetch).
pub const ADP_DOCUMENT: DocumentKind = DocumentKind {
    what: "agent.json",
    accept: "application/adp+json, application/json",
    media_types: &["application/json", "application/adp+json"],
    max_bytes: MAX_DOCUMENT_BYTES,
    max_values: MAX_JSON_VALUES,
    json: true,
    headers: &[],
};
/// An A2A Agent Card (the spec names no media type; servers send
/// `application/json`). `A2A-Version: 1.0` asks a server that speaks
/// both for the 1.0 card.
pub const A2A_CARD: DocumentKind = DocumentKind {
    what: "agent card",
    accept: "application/json, application/a2a+json",
    media_types: &["application/json", "application/a2a+json"],
    max_bytes: MAX_DOCUMENT_BYTES,
    max_values: MAX_JSON_VALUES,
    json: true,
    headers: &[("a2a-version", "1.0")],
};
/// An ARD `ai-catalog.json`: up to 1,000 entries, so a larger body.
pub const AI_CATALOG: DocumentKind = DocumentKind {
    what: "ai-catalog.json",
    accept: "application/ai-catalog+json, application/json",
    media_types: &["application/json", "application/ai-catalog+json"],
    max_bytes: 1024 * 1024,
    max_values: 200_000,
    json: true,
    headers: &[],
};
/// A DNS-AID capability document (the SVCB `cap` key's URL).
pub const DNS_AID_CAP: DocumentKind = DocumentKind {
    what: "capability document",
    accept: "application/json",
    media_types: &["application/json"],
    max_bytes: MAX_DOCUMENT_BYTES,
    max_values: MAX_JSON_VALUES,
    json: true,
    headers: &[],
};
/// An MCP server card (SEP-1649, `/.well-known/mcp/server-card.json`).
pub const MCP_SERVER_CARD: DocumentKind = DocumentKind {
    what: "server card",
    accept: "application/json",
    media_types: &["application/json"],
    max_bytes: MAX_DOCUMENT_BYTES,
    max_values: MAX_JSON_VALUES,
    json: true,
    headers: &[],
};
/// A JSON Web Key Set (an A2A card's `jku`).
pub const JWKS: DocumentKind = DocumentKind {
    what: "key set",
    accept: "application/jwk-set+json, application/json",
    media_types: &["application/json", "application/jwk-set+json"],
    max_bytes: 16 * 1024,
    max_values: 2_000,
    json: true,
    headers: &[],
};

/// A domain's `robots.txt` (read for ARD's `Agentmap:` lines).
pub const ROBOTS_TXT: DocumentKind = DocumentKind {
    what: "robots.txt",
    accept: "text/plain",
    media_types: &["text/plain"],
    max_bytes: 64 * 1024,
    max_values: 0,
    json: false,
    headers: &[],
};
/// A domain's home page (read for ARD's `rel="ard"` links and in-page
/// entries).
pub const HOME_PAGE: DocumentKind = DocumentKind {
    what: "home page",
    accept: "text/html",
    media_types: &["text/html", "application/xhtml+xml"],
    max_bytes: 512 * 1024,
    max_values: 0,
    json: false,
    headers: &[],
};

/// A fetched document.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The body as text (UTF-8).
    pub text: String,
    /// The URL that answered (after redirects).
    pub url: Url,
    /// The `ETag`, for conditional recrawls.
    pub etag: Option<String>,
    /// `Cache-Control: max-age`, seconds.
    pub max_age: Option<u64>,
    /// The `Link` header, when there is one (at most 4 KiB of it).
    pub link: Option<String>,
}

/// reqwest's resolver: refuses every name. Fetches are pinned to checked
/// addresses with `resolve_to_addrs`, so anything reaching this resolver
/// is a name nobody checked.
pub(crate) struct RefuseAll;

#[derive(Debug)]
struct Unchecked(String);

impl std::fmt::Display for Unchecked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} was not resolved through the address guard", self.0)
    }
}

impl std::error::Error for Unchecked {}

impl reqwest::dns::Resolve for RefuseAll {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let name = name.as_str().to_owned();
        Box::pin(async move { Err(Box::new(Unchecked(name)) as _) })
    }
}

/// The addresses of `ips` that `policy` permits, or the first refused one
/// when none is.
///
/// # Errors
/// [`CrawlError::AddressNotAllowed`].
pub fn allowed(
    host: &str,
    ips: &[IpAddr],
    policy: AddressPolicy,
) -> Result<Vec<IpAddr>, CrawlError> {
    let ok: Vec<IpAddr> = ips
        .iter()
        .copied()
        .filter(|ip| policy.check(*ip).is_ok())
        .collect();
    match (ok.is_empty(), ips.first()) {
        (true, Some(ip)) => Err(CrawlError::AddressNotAllowed {
            host: host.to_owned(),
            ip: *ip,
        }),
        (true, None) => Err(CrawlError::Dns(super::dns::DnsError::NoRecords {
            name: host.to_owned(),
            record_type: "A/AAAA",
        })),
        (false, _) => Ok(ok),
    }
}

/// Most bytes of an answer's unused body (an error status, a redirect)
/// read so its connection can serve the next fetch.
const DRAIN_BYTES: usize = 16 * 1024;

/// Reads and drops the body of an answer not used, up to [`DRAIN_BYTES`]
/// (within the fetch's own timeout): read to its end, its connection goes
/// back to the client's pool; a longer body is dropped with it.
async fn drain(mut response: reqwest::Response) {
    let mut read = 0;
    while let Ok(Some(chunk)) = response.chunk().await {
        read += chunk.len();
        if read > DRAIN_BYTES {
            break;
        }
    }
}

/// How a [`Fetcher`] connects and what it accepts.
#[derive(Debug, Clone)]
pub struct FetchOptions {
    /// Address policy.
    pub policy: AddressPolicy,
    /// TLS client configuration (roots, versions).
    pub tls: Arc<rustls::ClientConfig>,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Whole exchange (all redirects, headers and body) timeout.
    pub timeout: Duration,
    /// Per-host limits: every request (each redirect hop) takes a slot.
    pub limiter: HostLimiter,
    /// The User-Agent of every request.
    pub user_agent: String,
    /// The ports requests may go to (each redirect hop is checked too).
    pub allowed_ports: super::options::AllowedPorts,
}

/// Fetches `agent.json` documents. Cheap to clone (clones share their
/// kept clients).
#[derive(Debug, Clone)]
pub struct Fetcher {
    options: FetchOptions,
    clients: Arc<Clients>,
}

impl Fetcher {
    /// A fetcher with these options.
    pub fn new(options: FetchOptions) -> Self {
        Self {
            options,
            clients: Arc::default(),
        }
    }

    /// A client of its own for `host` on `port`, pinned to `ips`, that
    /// keeps no connection: what the liveness probe's exchanges use, so
    /// each measures a connection of its own.
    fn client(&self, host: &str, port: u16, ips: &[IpAddr]) -> Result<reqwest::Client, CrawlError> {
        self.build(host, port, ips, None)
    }

    /// The client kept for `host` on `port` at `ip` ([`Clients`]): a
    /// domain's documents share its connection.
    fn shared(&self, host: &str, port: u16, ip: IpAddr) -> Result<clients::Shared, CrawlError> {
        self.clients.get((host, port, ip), || {
            self.build(host, port, &[ip], Some(clients::IDLE))
        })
    }

    /// A client pinned to `ips`, keeping idle connections for `idle` (as
    /// many as requests may be in flight to one host; none without).
    fn build(
        &self,
        host: &str,
        port: u16,
        ips: &[IpAddr],
        idle: Option<Duration>,
    ) -> Result<reqwest::Client, CrawlError> {
        let addrs: Vec<SocketAddr> = ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect();
        let builder = reqwest::Client::builder()
            .use_preconfigured_tls((*self.options.tls).clone())
            .dns_resolver(Arc::new(RefuseAll))
            .resolve_to_addrs(host, &addrs)
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(self.options.connect_timeout)
            .timeout(self.options.timeout)
            .no_proxy()
            .user_agent(self.options.user_agent.as_str());
        let builder = match idle {
            // As many as may be in flight to the host at once.
            Some(idle) => builder
                .pool_max_idle_per_host(self.options.limiter.limits().per_host_concurrency)
                .pool_idle_timeout(idle),
            None => builder.pool_max_idle_per_host(0),
        };
        builder.build().map_err(|e| CrawlError::Setup {
            message: e.to_string(),
        })
    }

    /// Fetches `url` from the checked addresses `ips` of its host,
    /// following same-host redirects; `etag` makes the request conditional
    /// (`Ok(None)` means 304 Not Modified).
    ///
    /// # Errors
    /// The [`CrawlError`] naming the limit or failure.
    pub async fn fetch(
        &self,
        url: &Url,
        ips: &[IpAddr],
        etag: Option<&str>,
    ) -> Result<Option<Fetched>, CrawlError> {
        self.fetch_kind(url, ips, etag, ADP_DOCUMENT).await
    }

    /// As [`Fetcher::fetch`], for a document of `kind`.
    ///
    /// # Errors
    /// The [`CrawlError`] naming the limit or failure.
    pub async fn fetch_kind(
        &self,
        url: &Url,
        ips: &[IpAddr],
        etag: Option<&str>,
        kind: DocumentKind,
    ) -> Result<Option<Fetched>, CrawlError> {
        self.check_url(url)?;
        let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
        let port = url.port_or_known_default().unwrap_or(443);
        let timeout = self.options.timeout;
        let mut unreached = None;
        for ip in targets(url, ips) {
            let shared = self.shared(&host, port, ip)?;
            // A new client's first request goes alone, before anyone
            // else takes a slot of the host (`clients`).
            shared.opened().await;
            let client = &shared.client;
            // One slot per attempt, held until its body is read; its
            // redirects stay on the host and the address, so they ride the
            // same slot. Waiting for the slot does not count against the
            // fetch's own timeout.
            let _permit = self.options.limiter.acquire(&host, ip).await?;
            match tokio::time::timeout(
                timeout,
                self.fetch_following(client, url.clone(), &host, etag, kind),
            )
            .await
            {
                Ok(Err(Attempt::Unreached(e))) => unreached = Some(e),
                Ok(Err(Attempt::Failed(e))) => return Err(e),
                Ok(Ok(fetched)) => return Ok(fetched),
                Err(_) => {
                    return Err(CrawlError::Timeout {
                        stage: "fetch",
                        after: timeout,
                    })
                }
            }
        }
        Err(unreached.unwrap_or_else(|| no_address(url)))
    }

    async fn fetch_following(
        &self,
        client: &reqwest::Client,
        mut url: Url,
        origin_host: &str,
        etag: Option<&str>,
        kind: DocumentKind,
    ) -> Result<Option<Fetched>, Attempt> {
        for hop in 0..=MAX_REDIRECTS {
            // `fetch` checked the first URL; each redirect target is
            // checked here before it is requested.
            if hop > 0 {
                self.check_url(&url)?;
            }
            let mut request = client.get(url.clone()).header("accept", kind.accept);
            for (name, value) in kind.headers {
                request = request.header(*name, *value);
            }
            if let Some(tag) = etag {
                request = request.header(IF_NONE_MATCH, tag);
            }
            let response = request.send().await.map_err(|e| {
                let error = classify(&e, &url, self.options.timeout);
                if hop == 0 && e.is_connect() && !matches!(error, CrawlError::Tls { .. }) {
                    Attempt::Unreached(error)
                } else {
                    Attempt::Failed(error)
                }
            })?;
            let status = response.status();
            if let Some(e) = self.throttled(origin_host, &url, &response) {
                return Err(e.into());
            }
            if status.is_redirection() && status != StatusCode::NOT_MODIFIED {
                let location = response
                    .headers()
                    .get(LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| CrawlError::HttpStatus {
                        url: url.to_string(),
                        status: status.as_u16(),
                    })?;
                let next = url.join(location).map_err(|e| CrawlError::BadUrl {
                    url: location.to_owned(),
                    reason: e.to_string(),
                })?;
                if next.host_str().map(str::to_ascii_lowercase).as_deref() != Some(origin_host)
                    || next.port_or_known_default() != url.port_or_known_default()
                {
                    return Err(CrawlError::RedirectOtherHost {
                        from: url.to_string(),
                        to: next.to_string(),
                    }
                    .into());
                }
                if hop == MAX_REDIRECTS {
                    break;
                }
                drain(response).await;
                url = next;
                continue;
            }
            if status == StatusCode::NOT_MODIFIED && etag.is_some() {
                return Ok(None);
            }
            if !status.is_success() {
                // Nothing published here: the next document of the
                // domain (another format's) rides the same connection.
                drain(response).await;
                return Err(CrawlError::HttpStatus {
                    url: url.to_string(),
                    status: status.as_u16(),
                }
                .into());
            }
            return read_document(response, url, self.options.timeout, kind)
                .await
                .map(Some)
                .map_err(Attempt::Failed);
        }
        Err(CrawlError::RedirectLimit {
            url: url.to_string(),
            limit: MAX_REDIRECTS,
        }
        .into())
    }

    /// A 429, or a 503 with `Retry-After`: the host is held for what it
    /// asked (a 429 without one for a minute).
    fn throttled(&self, host: &str, url: &Url, response: &reqwest::Response) -> Option<CrawlError> {
        let status = response.status();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| polite::parse_retry_after(v, std::time::SystemTime::now()));
        let wait = match (status, retry_after) {
            (StatusCode::TOO_MANY_REQUESTS, None) => Duration::from_secs(60),
            (StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE, Some(d)) => d,
            _ => return None,
        };
        let held = self.options.limiter.hold(host, wait);
        Some(CrawlError::Throttled {
            url: url.to_string(),
            status: status.as_u16(),
            retry_after_secs: retry_after.map(|_| held.as_secs()),
        })
    }

    fn check_url(&self, url: &Url) -> Result<(), CrawlError> {
        if url.scheme() != "https" {
            return Err(CrawlError::InsecureUrl {
                url: url.to_string(),
            });
        }
        self.options.allowed_ports.check(url)?;
        check_literal_host(url, self.options.policy)
    }
}

/// How one address's attempt at a fetch ended, when it did not end well.
#[derive(Debug)]
enum Attempt {
    /// The address could not be connected to: the next one is tried.
    Unreached(CrawlError),
    /// The address answered, or failed after it was reached.
    Failed(CrawlError),
}

impl From<CrawlError> for Attempt {
    fn from(e: CrawlError) -> Self {
        Self::Failed(e)
    }
}

/// The addresses a request to `url` is tried at, in order: the URL's own
/// address when its host is an IP literal (checked by
/// [`check_literal_host`]; nothing is resolved for it), else the checked
/// addresses `ips` of its host name.
pub(crate) fn targets(url: &Url, ips: &[IpAddr]) -> Vec<IpAddr> {
    match url.host() {
        Some(url::Host::Ipv4(v4)) => vec![IpAddr::V4(v4)],
        Some(url::Host::Ipv6(v6)) => vec![IpAddr::V6(v6)],
        _ => ips.to_vec(),
    }
}

/// The error of a request whose host has no address to try.
pub(crate) fn no_address(url: &Url) -> CrawlError {
    CrawlError::Connect {
        url: url.to_string(),
        message: "no address".into(),
    }
}

/// A URL whose host is an IP literal is checked here, since it never
/// reaches the resolver.
pub(crate) fn check_literal_host(url: &Url, policy: AddressPolicy) -> Result<(), CrawlError> {
    let ip = match url.host() {
        Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
        Some(url::Host::Domain(_)) => return Ok(()),
        None => {
            return Err(CrawlError::BadUrl {
                url: url.to_string(),
                reason: "no host".into(),
            })
        }
    };
    policy.check(ip).map_err(|_| CrawlError::AddressNotAllowed {
        host: url.host_str().unwrap_or_default().to_owned(),
        ip,
    })
}

/// Maps a reqwest error to the crawl reason it stands for.
fn classify(e: &reqwest::Error, url: &Url, timeout: Duration) -> CrawlError {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(t) = s.downcast_ref::<rustls::Error>() {
            return CrawlError::Tls {
                url: url.to_string(),
                message: t.to_string(),
            };
        }
        message = format!("{message}: {s}");
        source = s.source();
    }
    if e.is_timeout() {
        return CrawlError::Timeout {
            stage: "fetch",
            after: timeout,
        };
    }
    CrawlError::Connect {
        url: url.to_string(),
        message,
    }
}

fn max_age(headers: &HeaderMap) -> Option<u64> {
    let cc = headers.get(CACHE_CONTROL)?.to_str().ok()?;
    cc.split(',').find_map(|d| {
        d.trim()
            .strip_prefix("max-age=")?
            .trim_matches('"')
            .parse()
            .ok()
    })
}

async fn read_document(
    mut response: reqwest::Response,
    url: Url,
    timeout: Duration,
    kind: DocumentKind,
) -> Result<Fetched, CrawlError> {
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if !kind.media_types.contains(&essence.as_str()) {
        return Err(CrawlError::WrongContentType { content_type });
    }
    if response
        .content_length()
        .is_some_and(|n| n > kind.max_bytes as u64)
    {
        return Err(CrawlError::DocumentTooLarge {
            limit: kind.max_bytes,
        });
    }
    let etag = response
        .headers()
        .get(ETAG)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let max_age = max_age(response.headers());
    let link = response
        .headers()
        .get(LINK)
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.len() <= 4096)
        .map(str::to_owned);
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| classify(&e, &url, timeout))?
    {
        if body.len() + chunk.len() > kind.max_bytes {
            return Err(CrawlError::DocumentTooLarge {
                limit: kind.max_bytes,
            });
        }
        body.extend_from_slice(&chunk);
    }
    if kind.json {
        check_json_bounds(&body, MAX_JSON_DEPTH, kind.max_values)?;
    }
    let text = String::from_utf8(body).map_err(|_| DocumentError::InvalidJson {
        message: "the body is not UTF-8".into(),
    })?;
    Ok(Fetched {
        text,
        url,
        etag,
        max_age,
        link,
    })
}

/// Bounds the JSON's nesting depth and value count before any parser
/// allocates for it.
///
/// # Errors
/// [`CrawlError::JsonTooDeep`] or [`CrawlError::JsonTooLarge`].
pub fn check_json_shape(body: &[u8]) -> Result<(), CrawlError> {
    check_json_bounds(body, MAX_JSON_DEPTH, MAX_JSON_VALUES)
}

/// As [`check_json_shape`], with the bounds given.
///
/// # Errors
/// [`CrawlError::JsonTooDeep`] or [`CrawlError::JsonTooLarge`].
pub fn check_json_bounds(
    body: &[u8],
    max_depth: usize,
    max_values: usize,
) -> Result<(), CrawlError> {
    let (mut depth, mut values, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in body {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                values += 1;
                if depth > max_depth {
                    return Err(CrawlError::JsonTooDeep { limit: max_depth });
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' | b':' => values += 1,
            _ => {}
        }
        if values > max_values {
            return Err(CrawlError::JsonTooLarge { limit: max_values });
        }
    }
    Ok(())
}

mod clients;
mod event_stream;
mod exchange;

pub use event_stream::event_data;
pub(crate) use exchange::{Answer, Ask};

#[cfg(test)]
mod tests;
