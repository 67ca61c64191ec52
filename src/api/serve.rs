//! The server loop: accepts connections, refuses those over the caps,
//! and serves each with hyper (HTTP/1 and HTTP/2) under the node's
//! timeouts, until the API stage's token is cancelled.
//!
//! What it adds to what a bare `axum::serve` does:
//! - caps on open connections, in all (`api.max_connections`) and per
//!   client address (`api.max_connections_per_ip`; trusted proxies are
//!   not capped): a connection over a cap is closed as it is accepted
//!   and counted (`agentmesh_http_connections_refused`);
//! - a header-read timeout (`api.header_read_timeout`, hyper's): a client
//!   trickling its request head is disconnected;
//! - an idle timeout (`api.idle_timeout`): a connection with no request
//!   in flight and no bytes either way for that long is closed;
//! - a body read timeout (`api.body_read_timeout`): a request body that
//!   sends nothing for that long fails with [`BodyStalled`];
//! - the request extension [`ClientAddr`] on every request: the TCP peer,
//!   or, when the peer is one of `api.trusted_proxies`, the right-most
//!   address of `X-Forwarded-For` that is not a trusted proxy;
//! - with `[api.tls]`, HTTPS only: the TLS handshake runs inside the
//!   connection's slot and must end within `api.header_read_timeout`
//!   (a client that connects and never finishes it is cut off), and a
//!   verified client certificate goes into every request of its
//!   connection as [`PeerCertificate`] (`api/tls.rs`).
//!
//! On shutdown it stops accepting, asks every connection to finish its
//! requests and close (hyper's graceful shutdown), and returns once they
//! have; the node's API stage bounds that wait by `api::SHUTDOWN_GRACE`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{HeaderMap, Request};
use axum::Router;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;
use tracing::Instrument as _;

use super::caller::ClientAddr;
use super::tls::PeerCertificate;
use crate::access::certs::Presented;
use crate::config::{ApiConfig, IpRange};
use crate::metrics::Metrics;

/// Most `X-Forwarded-For` entries looked at, right to left: past them
/// the client address is the last one read.
const MAX_FORWARDED_HOPS: usize = 32;

/// How long the loop pauses after a failed accept (out of file
/// descriptors, most often), so that it does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How the server treats connections: the serving keys of `[api]`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// `api.header_read_timeout`.
    pub header_read_timeout: Duration,
    /// `api.idle_timeout`.
    pub idle_timeout: Duration,
    /// `api.body_read_timeout`.
    pub body_read_timeout: Duration,
    /// `api.max_connections`.
    pub max_connections: usize,
    /// `api.max_connections_per_ip`.
    pub max_connections_per_ip: usize,
    /// `api.trusted_proxies`.
    pub trusted_proxies: Vec<IpRange>,
    /// HTTPS, from `[api.tls]` (made by `api::tls::server_config`, which
    /// reads files and can fail, so not by [`ServeOptions::from_config`]);
    /// `None`: plain HTTP.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl ServeOptions {
    /// The options `[api]` sets.
    pub fn from_config(config: &ApiConfig) -> Self {
        Self {
            header_read_timeout: config.header_read_timeout,
            idle_timeout: config.idle_timeout,
            body_read_timeout: config.body_read_timeout,
            max_connections: config.max_connections,
            max_connections_per_ip: config.max_connections_per_ip,
            trusted_proxies: config.trusted_proxies.clone(),
            tls: None,
        }
    }
}

/// The error a request body gives when its client sent nothing for
/// `api.body_read_timeout`: the request is cut off with it.
#[derive(Debug, thiserror::Error)]
#[error("no bytes of the request body arrived for {} s; the request was cut off", after.as_secs_f64())]
pub struct BodyStalled {
    /// The timeout that ran out.
    pub after: Duration,
}

impl BodyStalled {
    /// The [`BodyStalled`] somewhere in `error`'s chain of sources.
    pub fn in_chain<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a BodyStalled> {
        let mut cur = Some(error);
        while let Some(e) = cur {
            if let Some(stalled) = e.downcast_ref::<BodyStalled>() {
                return Some(stalled);
            }
            cur = e.source();
        }
        None
    }
}

/// Serves `router` on `listener` until `shutdown` is cancelled, then
/// lets open connections finish their requests and returns once they
/// have closed.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    options: ServeOptions,
    metrics: Metrics,
    shutdown: CancellationToken,
) {
    let options = Arc::new(options);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    let slots = Arc::new(Mutex::new(Slots::default()));
    let mut connections = JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "could not accept a connection");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let ip = peer.ip().to_canonical();
        let capped = !options.trusted_proxies.iter().any(|r| r.contains(ip));
        let slot = match Slot::take(&slots, ip, capped, &options) {
            Ok(slot) => slot,
            Err(cap) => {
                metrics.connection_refused(cap);
                tracing::debug!(%peer, cap, "connection refused");
                drop(stream);
                continue;
            }
        };
        let connection = Connection {
            builder: builder.clone(),
            router: router.clone(),
            options: options.clone(),
            peer: ip,
            shutdown: shutdown.clone(),
            _slot: slot,
        };
        connections.spawn(
            connection
                .run(stream)
                .instrument(tracing::debug_span!("connection", %peer)),
        );
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// Open connections, in all and per address.
#[derive(Debug, Default)]
struct Slots {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// One open connection's place in [`Slots`], given back on drop.
#[derive(Debug)]
struct Slot {
    slots: Arc<Mutex<Slots>>,
    /// The address it counts against, when capped per address.
    ip: Option<IpAddr>,
}

impl Slot {
    /// A place for a connection from `ip`, or the cap it is over
    /// (`total`, `per_ip`).
    fn take(
        slots: &Arc<Mutex<Slots>>,
        ip: IpAddr,
        capped: bool,
        options: &ServeOptions,
    ) -> Result<Slot, &'static str> {
        let mut s = slots.lock().expect("the slots lock is never poisoned");
        if s.total >= options.max_connections {
            return Err("total");
        }
        if capped {
            let n = s.per_ip.entry(ip).or_default();
            if *n >= options.max_connections_per_ip {
                return Err("per_ip");
            }
            *n += 1;
        }
        s.total += 1;
        Ok(Slot {
            slots: slots.clone(),
            ip: capped.then_some(ip),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut s = self.slots.lock().expect("the slots lock is never poisoned");
        s.total -= 1;
        if let Some(ip) = self.ip {
            if let Some(n) = s.per_ip.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    s.per_ip.remove(&ip);
                }
            }
        }
    }
}

/// One accepted connection and what serving it needs.
struct Connection {
    builder: Arc<auto::Builder<TokioExecutor>>,
    router: Router,
    options: Arc<ServeOptions>,
    peer: IpAddr,
    shutdown: CancellationToken,
    _slot: Slot,
}

impl Connection {
    /// Serves the connection until the client or the server closes it:
    /// over TLS when configured, after a handshake that must end within
    /// `api.header_read_timeout`.
    async fn run(self, stream: TcpStream) {
        let activity = Arc::new(Activity::new());
        let watched = Watched {
            inner: stream,
            activity: activity.clone(),
        };
        let Some(tls) = self.options.tls.clone() else {
            return self.serve(watched, activity, None).await;
        };
        let handshake = tokio::time::timeout(
            self.options.header_read_timeout,
            tokio_rustls::TlsAcceptor::from(tls).accept(watched),
        );
        let stream = tokio::select! {
            done = handshake => match done {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!("TLS handshake not finished in time: connection closed");
                    return;
                }
            },
            () = self.shutdown.cancelled() => return,
        };
        let certificate = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|chain| chain.first())
            .map(|leaf| PeerCertificate(Arc::new(Presented::from_der(leaf))));
        self.serve(stream, activity, certificate).await;
    }

    /// Serves HTTP on `io` (a TCP stream or a TLS one over it), every
    /// request carrying the client's address and `certificate`.
    async fn serve<I>(self, io: I, activity: Arc<Activity>, certificate: Option<PeerCertificate>)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let io = TokioIo::new(io);
        let (router, options, peer) = (self.router, self.options.clone(), self.peer);
        let watched = activity.clone();
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let client = client_addr(peer, req.headers(), &options.trusted_proxies);
            let after = options.body_read_timeout;
            let mut req = req.map(|body| {
                let timed = tower_http::timeout::TimeoutBody::new(after, body);
                Body::new(timed.map_err(move |e| {
                    if e.is::<tower_http::timeout::TimeoutError>() {
                        Box::new(BodyStalled { after }) as tower::BoxError
                    } else {
                        e
                    }
                }))
            });
            req.extensions_mut().insert(ClientAddr(client));
            if let Some(certificate) = &certificate {
                req.extensions_mut().insert(certificate.clone());
            }
            let in_flight = watched.begin();
            let router = router.clone();
            async move {
                let Ok(response) = router.oneshot(req).await;
                drop(in_flight);
                Ok::<_, Infallible>(response)
            }
        });
        let conn = self.builder.serve_connection(io, service);
        tokio::pin!(conn);
        let mut closing = false;
        loop {
            tokio::select! {
                served = conn.as_mut() => {
                    if let Err(e) = served {
                        tracing::debug!(error = %e, "connection ended");
                    }
                    return;
                }
                () = self.shutdown.cancelled(), if !closing => {
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
                () = activity.idle(self.options.idle_timeout), if !closing => {
                    tracing::debug!("idle connection closed");
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
        }
    }
}

/// What a connection did last: the time of its last byte either way and
/// the requests it has in flight.
#[derive(Debug)]
struct Activity {
    start: Instant,
    /// Milliseconds from `start` to the last byte read or written.
    last: AtomicU64,
    in_flight: AtomicUsize,
}

/// A request in flight on a connection, until dropped.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

impl Activity {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            last: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms, Ordering::Relaxed);
    }

    fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self.clone())
    }

    /// Resolves once the connection has had no request in flight and no
    /// bytes for `timeout`.
    async fn idle(&self, timeout: Duration) {
        loop {
            let last = self.start + Duration::from_millis(self.last.load(Ordering::Relaxed));
            let quiet = last.elapsed();
            if self.in_flight.load(Ordering::Relaxed) == 0 && quiet >= timeout {
                return;
            }
            tokio::time::sleep(timeout.saturating_sub(quiet).max(timeout / 8)).await;
        }
    }
}

/// A TCP stream that notes in its [`Activity`] when bytes pass.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The client address of a request that came from `peer`: `peer`
/// itself, unless it is a trusted proxy; then the right-most address of
/// `X-Forwarded-For` (each proxy appends the address it saw) that is not
/// a trusted proxy. When every listed address is trusted, the left-most
/// is the client; an entry that is not an address ends the walk at the
/// hop that appended it.
pub(super) fn client_addr(peer: IpAddr, headers: &HeaderMap, trusted: &[IpRange]) -> IpAddr {
    let is_trusted = |a: IpAddr| trusted.iter().any(|r| r.contains(a));
    if !is_trusted(peer) {
        return peer;
    }
    let values: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let mut client = peer;
    let hops = values
        .iter()
        .rev()
        .flat_map(|v| v.rsplit(','))
        .take(MAX_FORWARDED_HOPS);
    for hop in hops {
        let Some(addr) = parse_hop(hop.trim()) else {
            return client;
        };
        client = addr;
        if !is_trusted(addr) {
            return addr;
        }
    }
    client
}

/// One `X-Forwarded-For` entry: an address, bare or with a port
/// (`203.0.113.7`, `203.0.113.7:4711`, `[2001:db8::1]:4711`).
fn parse_hop(hop: &str) -> Option<IpAddr> {
    hop.parse::<IpAddr>()
        .ok()
        .or_else(|| hop.parse::<std::net::SocketAddr>().ok().map(|s| s.ip()))
        .map(|a| a.to_canonical())
}

#[cfg(test)]
mod tests;
