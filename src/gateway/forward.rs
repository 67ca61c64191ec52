//! The call itself: a JSON `POST` to the agent's endpoint under the
//! crawler's rules. HTTPS only; the endpoint's port one this node
//! connects to (`crawl.allowed_ports`); its host resolved through the
//! crawler's resolver and every address checked by the address policy
//! (no private or loopback target unless `crawl.allow_private_addresses`);
//! the connection pinned to a checked address, one at a time, with no
//! proxy and no redirect; the TLS roots of the crawler (`crawl.ca_files`
//! beside the web's); a connect timeout per address and one deadline for
//! the whole exchange; the answer read up to a size limit.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use tokio::time::Instant;
use url::Url;

use super::error::GatewayError;
use crate::crawl::dns::Dns;
use crate::crawl::fetch::{self, RefuseAll};
use crate::crawl::AllowedPorts;
use crate::net::AddressPolicy;

/// Longest `Retry-After` passed on from an agent.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// How the gateway connects to agents.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// The crawler's resolver.
    pub dns: Dns,
    /// TLS roots and versions.
    pub tls: Arc<rustls::ClientConfig>,
    /// Which addresses may be connected to.
    pub policy: AddressPolicy,
    /// Which ports.
    pub ports: AllowedPorts,
    /// TCP connect timeout, per address.
    pub connect_timeout: Duration,
    /// The whole exchange: connect, send, the answer's head and body.
    pub timeout: Duration,
    /// Largest answer read, bytes.
    pub max_response_bytes: usize,
    /// The User-Agent of every call.
    pub user_agent: String,
    /// The clients made so far, one per host, checked address and client
    /// certificate, whose connections are kept for the next call.
    pub clients: Clients,
    /// The agent whose client certificate `tls` presents
    /// (`[[gateway.credentials]]`), if any.
    pub presenting: Option<Arc<str>>,
}

/// Most clients kept; past it the table starts again.
const MAX_CLIENTS: usize = 1024;
/// How long an idle connection to an agent is kept.
const IDLE_CONNECTION: Duration = Duration::from_secs(30);
/// Idle connections kept per agent address.
const IDLE_PER_ADDRESS: usize = 16;

/// The gateway's HTTP clients, one per (host, checked address): each is
/// pinned to that address (its resolver refuses every other name), so a
/// kept connection goes where the policy allowed, and a call to the same
/// agent reuses it instead of a new TCP and TLS handshake.
#[derive(Debug, Clone, Default)]
pub struct Clients(Arc<std::sync::Mutex<std::collections::HashMap<ClientKey, reqwest::Client>>>);

/// What a kept client is for: the host, the checked address, and the
/// agent whose client certificate it presents.
type ClientKey = (String, SocketAddr, Option<Arc<str>>);

/// The body of a streamed answer, chunk by chunk.
pub type BodyStream =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Send>>;

/// An answer as [`Upstream::open`] gives it.
pub enum Opened {
    /// A failure, read whole.
    Whole(Answer),
    /// A 2xx whose body streams.
    Streaming {
        /// Its status.
        status: u16,
        /// Its `Content-Type`, as sent.
        content_type: String,
        /// Its body.
        body: BodyStream,
    },
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Whole(a) => f.debug_tuple("Whole").field(a).finish(),
            Self::Streaming {
                status,
                content_type,
                ..
            } => f
                .debug_struct("Streaming")
                .field("status", status)
                .field("content_type", content_type)
                .finish_non_exhaustive(),
        }
    }
}

/// An agent's answer, read whole.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Its status.
    pub status: u16,
    /// Its `Content-Type`, lower-case essence.
    pub content_type: Option<String>,
    /// Its `Retry-After`, bounded by [`MAX_RETRY_AFTER`].
    pub retry_after: Option<Duration>,
    /// Its headers (hyper bounds their number and size).
    pub headers: HeaderMap,
    /// Its body.
    pub body: Bytes,
}

impl Upstream {
    /// The same rules, presenting `agent`'s client certificate through
    /// `tls` (the crawler's roots, with that identity); its clients are
    /// kept apart from those presenting none.
    pub fn presenting(&self, agent: &str, tls: Arc<rustls::ClientConfig>) -> Self {
        Self {
            tls,
            presenting: Some(Arc::from(agent)),
            ..self.clone()
        }
    }

    /// Checks `endpoint` and the addresses of its host: where the call
    /// may go.
    ///
    /// # Errors
    /// [`GatewayError::EndpointRefused`], [`GatewayError::Unreachable`]
    /// (the name does not resolve).
    pub async fn target(&self, endpoint: &str) -> Result<(Url, Vec<IpAddr>), GatewayError> {
        self.target_of(endpoint, "https").await
    }

    /// As [`Upstream::target`], for an ADP agent's chat WebSocket
    /// (`wss` only).
    ///
    /// # Errors
    /// As [`Upstream::target`].
    pub async fn chat_target(&self, endpoint: &str) -> Result<(Url, Vec<IpAddr>), GatewayError> {
        self.target_of(endpoint, "wss").await
    }

    /// `endpoint` checked, its scheme `scheme`, and its host's addresses.
    async fn target_of(
        &self,
        endpoint: &str,
        scheme: &str,
    ) -> Result<(Url, Vec<IpAddr>), GatewayError> {
        let url = Url::parse(endpoint).map_err(|e| {
            GatewayError::EndpointRefused(format!("{endpoint:?} is not a URL: {e}"))
        })?;
        if url.scheme() != scheme {
            return Err(GatewayError::EndpointRefused(format!(
                "{url} is not {scheme} (the gateway calls agents over TLS only)"
            )));
        }
        let refused = |e: crate::crawl::CrawlError| GatewayError::EndpointRefused(e.to_string());
        fetch::check_literal_host(&url, self.policy).map_err(refused)?;
        self.ports.check(&url).map_err(refused)?;
        let host = url
            .host_str()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase();
        let ips = match url.host() {
            Some(url::Host::Domain(_)) => {
                let ips = self
                    .dns
                    .addresses(&host)
                    .await
                    .map_err(|e| GatewayError::Unreachable(e.to_string()))?;
                fetch::allowed(&host, &ips, self.policy).map_err(refused)?
            }
            _ => fetch::targets(&url, &[]),
        };
        Ok((url, ips))
    }

    /// `POST`s `body` (JSON) with `headers` to `url`, trying the checked
    /// addresses `ips` one at a time until one connects, all within
    /// [`Upstream::timeout`] (a protocol that takes several requests puts
    /// them all under one deadline itself, with [`Upstream::post_once`]).
    ///
    /// # Errors
    /// [`GatewayError::Unreachable`], [`GatewayError::Timeout`],
    /// [`GatewayError::AgentFailed`] for an answer over the size limit.
    pub async fn post(
        &self,
        url: &Url,
        ips: &[IpAddr],
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Answer, GatewayError> {
        let deadline = Instant::now() + self.timeout;
        match tokio::time::timeout_at(deadline, self.post_any(url, ips, headers, body)).await {
            Ok(answer) => answer,
            Err(_) => Err(GatewayError::Timeout(self.timeout)),
        }
    }

    /// [`Upstream::post`] without its own deadline.
    ///
    /// # Errors
    /// As [`Upstream::post`], but for the deadline.
    pub async fn post_once(
        &self,
        url: &Url,
        ips: &[IpAddr],
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Answer, GatewayError> {
        self.post_any(url, ips, headers, body).await
    }

    /// `POST`s as [`Upstream::post`] does, but answers the agent's status
    /// and headers as soon as they come, its body left to stream (up to
    /// the size limit and the deadline) when it is a 2xx; any other
    /// answer is read whole.
    ///
    /// # Errors
    /// As [`Upstream::post`].
    pub async fn open(
        &self,
        url: &Url,
        ips: &[IpAddr],
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Opened, GatewayError> {
        let deadline = Instant::now() + self.timeout;
        let sent = tokio::time::timeout_at(
            deadline,
            self.send_any(reqwest::Method::POST, url, ips, headers, Some(body)),
        )
        .await
        .map_err(|_| GatewayError::Timeout(self.timeout))??;
        if !sent.status().is_success() {
            let answer = tokio::time::timeout_at(deadline, self.read(sent))
                .await
                .map_err(|_| GatewayError::Timeout(self.timeout))??;
            return Ok(Opened::Whole(answer));
        }
        let content_type = sent
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/octet-stream")
            .to_owned();
        let status = sent.status().as_u16();
        let limit = self.max_response_bytes;
        let timeout = self.timeout;
        // The body as it arrives: cut at the size limit or the deadline
        // (the stream then ends with an error, which ends the client's
        // answer without its end).
        let stream = futures_util::stream::unfold(
            (sent, 0usize, false),
            move |(mut response, read, done)| async move {
                if done {
                    return None;
                }
                let next = tokio::time::timeout_at(deadline, response.chunk()).await;
                match next {
                    Err(_) => Some((
                        Err(std::io::Error::other(format!(
                            "the agent's stream passed gateway.timeout ({} s)",
                            timeout.as_secs_f64()
                        ))),
                        (response, read, true),
                    )),
                    Ok(Ok(Some(chunk))) if read + chunk.len() > limit => Some((
                        Err(std::io::Error::other(format!(
                            "the agent's stream passed gateway.max_response_bytes ({limit})"
                        ))),
                        (response, read, true),
                    )),
                    Ok(Ok(Some(chunk))) => {
                        let read = read + chunk.len();
                        Some((Ok(chunk), (response, read, false)))
                    }
                    Ok(Ok(None)) => None,
                    Ok(Err(e)) => Some((
                        Err(std::io::Error::other(error_chain(&e))),
                        (response, read, true),
                    )),
                }
            },
        );
        Ok(Opened::Streaming {
            status,
            content_type,
            body: Box::pin(stream),
        })
    }

    async fn post_any(
        &self,
        url: &Url,
        ips: &[IpAddr],
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Answer, GatewayError> {
        let response = self
            .send_any(reqwest::Method::POST, url, ips, headers, Some(body))
            .await?;
        self.read(response).await
    }

    /// A `DELETE` of `url` (an MCP session's end), under the same rules
    /// and, like [`Upstream::post_once`], without its own deadline.
    ///
    /// # Errors
    /// As [`Upstream::post_once`].
    pub async fn delete_once(
        &self,
        url: &Url,
        ips: &[IpAddr],
        headers: HeaderMap,
    ) -> Result<Answer, GatewayError> {
        let response = self
            .send_any(reqwest::Method::DELETE, url, ips, headers, None)
            .await?;
        self.read(response).await
    }

    /// Sends `method` to `url` (with `body` as JSON when there is one) at
    /// the first of `ips` that connects; the response with its body
    /// unread.
    async fn send_any(
        &self,
        method: reqwest::Method,
        url: &Url,
        ips: &[IpAddr],
        headers: HeaderMap,
        body: Option<Bytes>,
    ) -> Result<reqwest::Response, GatewayError> {
        let port = url.port_or_known_default().unwrap_or(443);
        let host = url.host_str().unwrap_or_default();
        let mut last = String::from("no address");
        for ip in ips {
            let client = self.client(host, SocketAddr::new(*ip, port))?;
            let mut request = client
                .request(method.clone(), url.clone())
                .headers(headers.clone());
            if let Some(body) = &body {
                request = request
                    .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                    .body(body.clone());
            }
            let sent = request.send().await;
            match sent {
                Ok(response) => return Ok(response),
                // Only a connection that never opened moves on to the
                // next address: a request the agent may have received is
                // never sent twice.
                Err(e) if e.is_connect() => last = error_chain(&e),
                Err(e) if e.is_timeout() => return Err(GatewayError::Timeout(self.timeout)),
                Err(e) => return Err(GatewayError::Unreachable(error_chain(&e))),
            }
        }
        Err(GatewayError::Unreachable(last))
    }

    /// The client pinned to `addr` for `host`: the one kept, or a new one.
    fn client(&self, host: &str, addr: SocketAddr) -> Result<reqwest::Client, GatewayError> {
        let key = (host.to_owned(), addr, self.presenting.clone());
        let mut clients = self
            .clients
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(client) = clients.get(&key) {
            return Ok(client.clone());
        }
        let client = reqwest::Client::builder()
            .use_preconfigured_tls((*self.tls).clone())
            .dns_resolver(Arc::new(RefuseAll))
            .resolve_to_addrs(host, &[addr])
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(self.connect_timeout)
            .pool_max_idle_per_host(IDLE_PER_ADDRESS)
            .pool_idle_timeout(IDLE_CONNECTION)
            .no_proxy()
            .user_agent(self.user_agent.as_str())
            .build()
            .map_err(|e| GatewayError::Unreachable(format!("client setup: {e}")))?;
        if clients.len() >= MAX_CLIENTS {
            clients.clear();
        }
        clients.insert(key, client.clone());
        Ok(client)
    }

    /// Reads the answer up to the size limit.
    async fn read(&self, mut response: reqwest::Response) -> Result<Answer, GatewayError> {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_ascii_lowercase()
            });
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|s| Duration::from_secs(s).min(MAX_RETRY_AFTER));
        if response
            .content_length()
            .is_some_and(|n| n > self.max_response_bytes as u64)
        {
            return Err(self.too_large());
        }
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > self.max_response_bytes {
                        return Err(self.too_large());
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) if e.is_timeout() => return Err(GatewayError::Timeout(self.timeout)),
                Err(e) => {
                    return Err(GatewayError::AgentFailed(format!(
                        "the answer broke off: {}",
                        error_chain(&e)
                    )))
                }
            }
        }
        Ok(Answer {
            status,
            content_type,
            retry_after,
            headers,
            body: body.into(),
        })
    }

    fn too_large(&self) -> GatewayError {
        GatewayError::AgentFailed(format!(
            "the answer is larger than {} bytes (gateway.max_response_bytes)",
            self.max_response_bytes
        ))
    }
}

/// The names of request headers a client sends for the agent, and the
/// header each becomes on the way (the client's own `Authorization` is
/// the node's credential and is never passed on).
pub const PASSED_THROUGH: [(&str, &str); 2] = [
    ("agent-authorization", "authorization"),
    ("agent-api-key", "x-api-key"),
];

/// The headers to send the agent: the client's credentials for it
/// (`Agent-Authorization`, `Agent-Api-Key`), else the node's own for this
/// agent from the configuration, and the request id.
pub fn outgoing(
    client: &HeaderMap,
    node_held: Option<(&HeaderName, &HeaderValue)>,
    request_id: Option<&str>,
) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (from, to) in PASSED_THROUGH {
        if let Some(v) = client.get(from) {
            let mut v = v.clone();
            v.set_sensitive(true);
            out.insert(HeaderName::from_static(to), v);
        }
    }
    if out.is_empty() {
        if let Some((name, value)) = node_held {
            out.insert(name.clone(), value.clone());
        }
    }
    if let Some(id) = request_id.and_then(|id| HeaderValue::from_str(id).ok()) {
        out.insert(HeaderName::from_static("x-request-id"), id);
    }
    out
}

/// An error and its sources, for the log.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_s_credentials_for_the_agent_go_on_and_its_own_never() {
        let mut client = HeaderMap::new();
        client.insert("authorization", HeaderValue::from_static("Bearer node-key"));
        client.insert(
            "agent-authorization",
            HeaderValue::from_static("Bearer agent-token"),
        );
        let held = (
            HeaderName::from_static("x-api-key"),
            HeaderValue::from_static("operator-key"),
        );
        let out = outgoing(&client, Some((&held.0, &held.1)), Some("req-1"));
        assert_eq!(out["authorization"], "Bearer agent-token");
        assert!(out.get("x-api-key").is_none(), "the client's own win");
        assert_eq!(out["x-request-id"], "req-1");
        assert!(out["authorization"].is_sensitive());
        // Without the client's, the node's own for the agent.
        let mut bare = HeaderMap::new();
        bare.insert("authorization", HeaderValue::from_static("Bearer node-key"));
        let out = outgoing(&bare, Some((&held.0, &held.1)), None);
        assert_eq!(out["x-api-key"], "operator-key");
        assert!(out.get("authorization").is_none(), "the node's key stays");
    }
}
