//! The WebSocket side of the key challenge (docs/protocol.md#crawl-challenge): connect to the
//! agent's `endpoints.chat` (wss only) at an address the SSRF guard
//! checked, send the challenge frame, read one answer frame within a
//! deadline, hand it to the caller's judge, and send the judge's closing
//! frame when there is one (the verifier's side of a mutual handshake).
//! Judging the answer is [`crate::adp::handshake`]'s job.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::header::{HeaderValue, USER_AGENT};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};
use url::Url;

use super::error::CrawlError;
use super::polite::HostLimiter;
use crate::adp::handshake::{HandshakeFrame, MAX_FRAME_BYTES};

/// Opens challenge connections. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Challenger {
    /// TLS client configuration.
    pub tls: Arc<rustls::ClientConfig>,
    /// TCP connect timeout, per address.
    pub connect_timeout: Duration,
    /// Whole exchange timeout (TLS, upgrade, answer).
    pub timeout: Duration,
    /// Per-host limits, shared with the crawler's fetches.
    pub limiter: HostLimiter,
    /// The User-Agent of the upgrade request.
    pub user_agent: String,
    /// The ports a challenge may connect to.
    pub allowed_ports: super::options::AllowedPorts,
}

impl Challenger {
    /// Sends `challenge` to the agent at `url` (host already resolved and
    /// checked to `ips`), and gives its answer frame to `judge`, which says
    /// what the exchange proved and what frame, if any, to send back before
    /// closing.
    ///
    /// # Errors
    /// [`CrawlError::InsecureUrl`] for `ws://`, [`CrawlError::Connect`],
    /// [`CrawlError::Tls`], [`CrawlError::Timeout`],
    /// [`CrawlError::ChallengeNoAnswer`] when the agent closes or stays
    /// silent, [`CrawlError::ChallengeFailed`] for a malformed answer,
    /// [`CrawlError::HostBackoff`] while the host's `Retry-After` holds, and
    /// whatever `judge` refuses the answer with.
    pub async fn exchange<T>(
        &self,
        url: &Url,
        ips: &[IpAddr],
        challenge: &HandshakeFrame,
        judge: impl FnOnce(HandshakeFrame) -> Result<(T, Option<HandshakeFrame>), CrawlError>,
    ) -> Result<T, CrawlError> {
        if url.scheme() != "wss" {
            return Err(CrawlError::InsecureUrl {
                url: url.to_string(),
            });
        }
        self.allowed_ports.check(url)?;
        let host = url.host_str().unwrap_or_default();
        let port = url.port_or_known_default().unwrap_or(443);
        let mut last_error = None;
        // The addresses one at a time, each connection under its host's
        // and its address's slot, held for the whole session; waiting for
        // a slot counts against neither timeout.
        for ip in ips {
            let _permit = self.limiter.acquire(host, *ip).await?;
            let addr = SocketAddr::new(*ip, port);
            let stream =
                match tokio::time::timeout(self.connect_timeout, TcpStream::connect(addr)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        last_error = Some(e.to_string());
                        continue;
                    }
                    Err(_) => {
                        last_error = Some(format!("connect to {addr} timed out"));
                        continue;
                    }
                };
            let session = self.session(url, stream, challenge, judge);
            return match tokio::time::timeout(self.timeout, session).await {
                Ok(result) => result,
                Err(_) => Err(CrawlError::ChallengeNoAnswer {
                    after: self.timeout,
                }),
            };
        }
        Err(CrawlError::Connect {
            url: url.to_string(),
            message: last_error.unwrap_or_else(|| "no address".into()),
        })
    }

    /// The session on a connected `stream`: TLS, the upgrade, the
    /// challenge, its answer judged, the closing frame.
    async fn session<T>(
        &self,
        url: &Url,
        stream: TcpStream,
        challenge: &HandshakeFrame,
        judge: impl FnOnce(HandshakeFrame) -> Result<(T, Option<HandshakeFrame>), CrawlError>,
    ) -> Result<T, CrawlError> {
        let mut ws = upgrade(
            url,
            stream,
            self.tls.clone(),
            &self.user_agent,
            MAX_FRAME_BYTES,
        )
        .await?;
        let text = serde_json::to_string(challenge).expect("a handshake frame always serialises");
        ws.send(Message::text(text))
            .await
            .map_err(|e| CrawlError::ChallengeFailed {
                message: e.to_string(),
            })?;
        while let Some(message) = ws.next().await {
            let message = message.map_err(|e| CrawlError::ChallengeFailed {
                message: e.to_string(),
            })?;
            let bytes = match &message {
                Message::Text(t) => t.as_bytes(),
                Message::Binary(b) => b.as_ref(),
                Message::Close(_) => break,
                _ => continue,
            };
            let frame: HandshakeFrame =
                serde_json::from_slice(bytes).map_err(|e| CrawlError::ChallengeFailed {
                    message: format!("the answer is not a handshake frame: {e}"),
                })?;
            let (proved, reply) = match judge(frame) {
                Ok(judged) => judged,
                Err(e) => {
                    let _ = ws.close(None).await;
                    return Err(e);
                }
            };
            if let Some(reply) = reply {
                let text = serde_json::to_string(&reply).expect("a handshake frame serialises");
                // The proof stands whether or not the agent reads it.
                let _ = ws.send(Message::text(text)).await;
            }
            // Close, and wait (within the exchange's deadline) for the
            // agent's close, so a closing frame is read before the
            // connection drops.
            if ws.close(None).await.is_ok() {
                while let Some(Ok(_)) = ws.next().await {}
            }
            return Ok(proved);
        }
        Err(CrawlError::ChallengeNoAnswer {
            after: Duration::ZERO,
        })
    }
}

/// A WebSocket session over TLS.
pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The TLS handshake (verified with `tls`) and the WebSocket upgrade to
/// `url` on a connected `stream`, with `user_agent`; each message the
/// other side sends is at most `max_message` bytes (past it, reading
/// fails). Shared by the challenge and the gateway's ADP calls.
///
/// # Errors
/// [`CrawlError::BadUrl`], [`CrawlError::Tls`], [`CrawlError::Connect`]
/// (the upgrade refused).
pub async fn upgrade(
    url: &Url,
    stream: TcpStream,
    tls: Arc<rustls::ClientConfig>,
    user_agent: &str,
    max_message: usize,
) -> Result<Socket, CrawlError> {
    let _ = stream.set_nodelay(true);
    let config = WebSocketConfig::default()
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message));
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|e| CrawlError::BadUrl {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
    if let Ok(agent) = HeaderValue::from_str(user_agent) {
        request.headers_mut().insert(USER_AGENT, agent);
    }
    let (ws, _) = tokio_tungstenite::client_async_tls_with_config(
        request,
        stream,
        Some(config),
        Some(Connector::Rustls(tls)),
    )
    .await
    .map_err(|e| match e {
        tokio_tungstenite::tungstenite::Error::Tls(t) => CrawlError::Tls {
            url: url.to_string(),
            message: t.to_string(),
        },
        other => CrawlError::Connect {
            url: url.to_string(),
            message: other.to_string(),
        },
    })?;
    Ok(ws)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crawl::{AllowedPorts, CrawlerOptions};

    #[tokio::test]
    async fn a_chat_endpoint_on_a_port_not_allowed_is_refused_before_connecting() {
        // A listener on loopback that would take the connection: nothing
        // may reach it.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let challenger = Challenger {
            tls: CrawlerOptions::default().tls_config().unwrap(),
            connect_timeout: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            limiter: HostLimiter::new(crate::crawl::polite::Politeness::default()),
            user_agent: "test".into(),
            allowed_ports: AllowedPorts::default(),
        };
        let url = Url::parse(&format!("wss://agent.test:{port}/chat")).unwrap();
        let key = crate::identity::generate();
        let frame = crate::adp::handshake::challenge("v", &key.verifying_key(), "00");
        let result = challenger
            .exchange(&url, &["127.0.0.1".parse().unwrap()], &frame, |_| {
                Ok::<_, CrawlError>(((), None))
            })
            .await;
        match result {
            Err(CrawlError::PortNotAllowed { port: p, .. }) => assert_eq!(p, port),
            other => panic!("expected port_not_allowed, got {other:?}"),
        }
        let accepted = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
        assert!(accepted.is_err(), "nothing connected to the listener");
    }
}
