//! The front door of the sites' listeners: accepts TCP connections,
//! performs the TLS handshake (when configured), reads the first request
//! head, and hands the connection, with the head put back in front of it,
//! either to the challenge responder (a WebSocket upgrade of
//! `/agent/chat` for a known site) or to axum.
//!
//! Every connection gets its own task (handshakes run concurrently) in a
//! `JoinSet` owned by the accept loop, so stopping the loop ends them.
//! axum receives connections through a channel that implements its
//! `Listener` trait.

use std::future::IntoFuture;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_util::either::Either;
use tokio_util::sync::CancellationToken;
use tracing::{debug, debug_span, warn, Instrument};

use super::{chat, router, Sites};
use crate::adp::CHAT_PATH;

/// Bound on the TLS handshake and on reading the first request head.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request head looked at.
const MAX_HEAD: usize = 16 * 1024;
/// Connections waiting for axum.
const BACKLOG: usize = 1024;

type Transport = Either<TcpStream, Box<TlsStream<TcpStream>>>;
/// A connection as axum and the chat responder see it.
type Conn = Rewind<Transport>;

/// Serves `sites` on `listener` (HTTPS and WSS with `tls`, plain HTTP and
/// WS without) until `sites.shutdown()` is cancelled; then lets axum
/// finish its open requests.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    sites: Arc<Sites>,
) {
    let local = match listener.local_addr() {
        Ok(addr) => addr,
        Err(error) => return warn!(%error, "listener has no local address"),
    };
    let token = sites.shutdown().clone();
    let (tx, rx) = mpsc::channel(BACKLOG);
    let http = axum::serve(ChannelListener { rx, local }, router(sites.clone()))
        .with_graceful_shutdown(token.clone().cancelled_owned());
    let accept = accept_loop(listener, tls.map(TlsAcceptor::from), sites, tx, token);
    let ((), served) = tokio::join!(accept, http.into_future());
    if let Err(error) = served {
        warn!(%error, "HTTP server stopped with an error");
    }
}

async fn accept_loop(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    sites: Arc<Sites>,
    tx: mpsc::Sender<(Conn, SocketAddr)>,
    token: CancellationToken,
) {
    let mut connections = JoinSet::new();
    loop {
        let (tcp, peer) = tokio::select! {
            () = token.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: back off.
                    warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        while connections.try_join_next().is_some() {}
        let span = debug_span!("testbed_conn", %peer);
        let task = connection(tcp, peer, tls.clone(), sites.clone(), tx.clone());
        connections.spawn(task.instrument(span));
    }
}

async fn connection(
    tcp: TcpStream,
    peer: SocketAddr,
    tls: Option<TlsAcceptor>,
    sites: Arc<Sites>,
    tx: mpsc::Sender<(Conn, SocketAddr)>,
) {
    let _ = tcp.set_nodelay(true);
    let mut transport: Transport = match tls {
        None => {
            sites.connected();
            Either::Left(tcp)
        }
        Some(acceptor) => {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => {
                    sites.connected();
                    Either::Right(Box::new(stream))
                }
                Ok(Err(error)) => return debug!(%error, "TLS handshake failed"),
                Err(_) => return debug!("TLS handshake timed out"),
            }
        }
    };
    let head = match tokio::time::timeout(HANDSHAKE_TIMEOUT, read_head(&mut transport)).await {
        Ok(Ok(head)) if !head.is_empty() => head,
        Ok(Ok(_)) => return,
        Ok(Err(error)) => return debug!(%error, "reading the request failed"),
        Err(_) => return debug!("no request within 10 s"),
    };
    let upgrade = Head::parse(&head)
        .filter(|h| h.websocket && h.path == CHAT_PATH)
        .and_then(|h| sites.for_host(&h.host).cloned());
    let conn = Rewind::new(Bytes::from(head), transport);
    match upgrade {
        Some(site) => chat::serve(conn, site, sites.shutdown().clone()).await,
        None => {
            let _ = tx.send((conn, peer)).await;
        }
    }
}

/// Reads until the end of the first request head (or `MAX_HEAD` bytes, or
/// end of stream).
async fn read_head<S: AsyncRead + Unpin>(io: &mut S) -> io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = io.read(&mut chunk).await?;
        if n == 0 {
            return Ok(buf);
        }
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if buf[from..].windows(4).any(|w| w == b"\r\n\r\n") || buf.len() >= MAX_HEAD {
            return Ok(buf);
        }
    }
}

/// What the front door needs from a request head.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    path: String,
    host: String,
    websocket: bool,
}

impl Head {
    /// Parses a `GET` request head; `None` for anything else.
    fn parse(buf: &[u8]) -> Option<Self> {
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
        let text = std::str::from_utf8(&buf[..end]).ok()?;
        let mut lines = text.split("\r\n");
        let mut request = lines.next()?.split(' ');
        if request.next()? != "GET" {
            return None;
        }
        let target = request.next()?;
        let path = target
            .split(['?', '#'])
            .next()
            .unwrap_or_default()
            .to_owned();
        let mut head = Self {
            path,
            host: String::new(),
            websocket: false,
        };
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("host") {
                head.host = value.to_owned();
            } else if name.eq_ignore_ascii_case("upgrade") {
                head.websocket = value
                    .split(',')
                    .any(|p| p.trim().eq_ignore_ascii_case("websocket"));
            }
        }
        Some(head)
    }
}

/// A stream with bytes already read from it put back in front.
pub(crate) struct Rewind<S> {
    prefix: Bytes,
    inner: S,
}

impl<S> Rewind<S> {
    fn new(prefix: Bytes, inner: S) -> Self {
        Self { prefix, inner }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            let bytes = self.prefix.split_to(n);
            buf.put_slice(&bytes);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// axum's side of the hand-over channel.
struct ChannelListener {
    rx: mpsc::Receiver<(Conn, SocketAddr)>,
    local: SocketAddr,
}

impl axum::serve::Listener for ChannelListener {
    type Io = Conn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(conn) => conn,
            // The accept loop has stopped: no more connections, ever.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_websocket_upgrade_head_is_recognised() {
        let head = b"GET /agent/chat?x=1 HTTP/1.1\r\nHost: a.org1.test:8443\r\n\
            Connection: Upgrade\r\nUpgrade: WebSocket\r\nSec-WebSocket-Version: 13\r\n\r\n";
        let parsed = Head::parse(head).unwrap();
        assert_eq!(parsed.path, "/agent/chat");
        assert_eq!(parsed.host, "a.org1.test:8443");
        assert!(parsed.websocket);
        let plain = b"GET / HTTP/1.1\r\nhost: a.org1.test\r\n\r\n";
        assert!(!Head::parse(plain).unwrap().websocket);
        assert!(Head::parse(b"POST / HTTP/1.1\r\n\r\n").is_none());
        assert!(Head::parse(b"GET / HTTP/1.1\r\nHost: incomplete").is_none());
    }

    #[tokio::test]
    async fn rewind_replays_the_head_then_the_rest() {
        let (mut a, b) = tokio::io::duplex(64);
        tokio::io::AsyncWriteExt::write_all(&mut a, b" world")
            .await
            .unwrap();
        drop(a);
        let mut r = Rewind::new(Bytes::from_static(b"hello"), b);
        let mut out = String::new();
        r.read_to_string(&mut out).await.unwrap();
        assert_eq!(out, "hello world");
    }
}
