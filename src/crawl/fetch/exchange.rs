//! One request of the liveness probe ([`crate::crawl::probe`]): any
//! method, headers and body, under the fetch's guards (https only, the
//! allowed ports, the address policy, pinned addresses tried one at a
//! time, the host's and the address's politeness slots, no redirect
//! followed, no proxy), and the answer read to at most
//! [`MAX_PROBE_BYTES`], or until the caller says it has what it needs (an
//! event stream that stays open after the JSON-RPC answer).

use std::net::IpAddr;
use std::time::{Duration, Instant};

use reqwest::header::CONTENT_TYPE;
use reqwest::Method;
use url::Url;

use super::{classify, no_address, targets, Attempt, CrawlError, Fetcher};

/// Most bytes of an answer a probe reads.
pub(crate) const MAX_PROBE_BYTES: usize = 64 * 1024;
/// Longest `Mcp-Session-Id` kept to send back.
const MAX_SESSION_BYTES: usize = 256;

/// What a probe sends.
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    /// `HEAD`, `GET`, `POST`, `DELETE`.
    pub(crate) method: Method,
    /// Request headers.
    pub(crate) headers: Vec<(&'static str, String)>,
    /// The body, if any.
    pub(crate) body: Option<Vec<u8>>,
}

/// What came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    /// The status.
    pub(crate) status: u16,
    /// `Content-Type`, lower-case, empty when absent.
    pub(crate) content_type: String,
    /// `Mcp-Session-Id`, when it is visible ASCII of a sane length.
    pub(crate) session: Option<String>,
    /// The body, at most [`MAX_PROBE_BYTES`] of it.
    pub(crate) body: Vec<u8>,
    /// From the request sent to the answer read.
    pub(crate) rtt: Duration,
}

impl Fetcher {
    /// Sends `ask` to `url` (its host resolved and checked to `ips`) and
    /// reads the answer: at most [`MAX_PROBE_BYTES`], until the body ends
    /// or `complete(content_type, body so far)` says it has enough, all
    /// within `timeout` (waiting for the politeness slots aside). A 3xx
    /// is an answer like any other: no redirect is followed.
    ///
    /// # Errors
    /// [`CrawlError::InsecureUrl`], [`CrawlError::PortNotAllowed`],
    /// [`CrawlError::AddressNotAllowed`], [`CrawlError::HostBackoff`]
    /// (nothing was sent); [`CrawlError::Connect`], [`CrawlError::Tls`],
    /// [`CrawlError::Timeout`]; [`CrawlError::Throttled`] for a 429 or a
    /// 503 with `Retry-After` (the host is then held).
    pub(crate) async fn exchange<F>(
        &self,
        url: &Url,
        ips: &[IpAddr],
        ask: &Ask,
        timeout: Duration,
        complete: F,
    ) -> Result<Answer, CrawlError>
    where
        F: Fn(&str, &[u8]) -> bool,
    {
        self.check_url(url)?;
        let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
        let port = url.port_or_known_default().unwrap_or(443);
        let mut unreached = None;
        for ip in targets(url, ips) {
            let client = self.client(&host, port, &[ip])?;
            let _permit = self.options.limiter.acquire(&host, ip).await?;
            let attempt = self.attempt(&client, url, &host, ask, timeout, &complete);
            match tokio::time::timeout(timeout, attempt).await {
                Err(_) => {
                    return Err(CrawlError::Timeout {
                        stage: "probe",
                        after: timeout,
                    })
                }
                Ok(Err(Attempt::Unreached(e))) => unreached = Some(e),
                Ok(Err(Attempt::Failed(e))) => return Err(e),
                Ok(Ok(answer)) => return Ok(answer),
            }
        }
        Err(unreached.unwrap_or_else(|| no_address(url)))
    }

    async fn attempt<F>(
        &self,
        client: &reqwest::Client,
        url: &Url,
        host: &str,
        ask: &Ask,
        timeout: Duration,
        complete: &F,
    ) -> Result<Answer, Attempt>
    where
        F: Fn(&str, &[u8]) -> bool,
    {
        let started = Instant::now();
        let mut request = client.request(ask.method.clone(), url.clone());
        for (name, value) in &ask.headers {
            request = request.header(*name, value.as_str());
        }
        if let Some(body) = &ask.body {
            request = request.body(body.clone());
        }
        let mut response = request.send().await.map_err(|e| {
            let error = classify(&e, url, timeout);
            if e.is_connect() && !matches!(error, CrawlError::Tls { .. }) {
                Attempt::Unreached(error)
            } else {
                Attempt::Failed(error)
            }
        })?;
        if let Some(e) = self.throttled(host, url, &response) {
            return Err(e.into());
        }
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let session = response
            .headers()
            .get("mcp-session-id")
            .map(|v| v.as_bytes())
            .filter(|v| {
                !v.is_empty()
                    && v.len() <= MAX_SESSION_BYTES
                    && v.iter().all(|b| (0x21..=0x7e).contains(b))
            })
            .map(|v| String::from_utf8_lossy(v).into_owned());
        let mut body = Vec::new();
        if ask.method != Method::HEAD {
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|e| Attempt::Failed(classify(&e, url, timeout)))?
            {
                let room = MAX_PROBE_BYTES - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if body.len() == MAX_PROBE_BYTES || complete(&content_type, &body) {
                    break;
                }
            }
        }
        Ok(Answer {
            status,
            content_type,
            session,
            body,
            rtt: started.elapsed(),
        })
    }
}
