//! The invokable agents' connections: accepts TCP, performs the TLS
//! handshake (bounded), and serves HTTP/1.1 with hyper on the axum
//! router, one task per connection in a `JoinSet` the accept loop owns.
//! When the token is cancelled the loop stops accepting and every
//! connection shuts down gracefully (the handlers that wait, `Slow` and
//! `Hang`, watch the same token and answer at once).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{debug, debug_span, warn, Instrument};

/// Bound on the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long open connections get to finish once shutdown starts.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves `app` over TLS on `listener` until `token` is cancelled.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    token: CancellationToken,
) {
    let acceptor = TlsAcceptor::from(tls);
    let mut connections = JoinSet::new();
    loop {
        let (tcp, peer) = tokio::select! {
            () = token.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        while connections.try_join_next().is_some() {}
        let task = connection(tcp, acceptor.clone(), app.clone(), token.clone());
        connections.spawn(task.instrument(debug_span!("testbed_agents_conn", %peer)));
    }
    drop(listener);
    let drained = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(DRAIN_TIMEOUT, drained).await.is_err() {
        debug!("connections still open after the drain; aborting them");
    }
    connections.abort_all();
}

async fn connection(tcp: TcpStream, acceptor: TlsAcceptor, app: Router, token: CancellationToken) {
    let _ = tcp.set_nodelay(true);
    let stream = tokio::select! {
        () = token.cancelled() => return,
        handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)) => {
            match handshake {
                Ok(Ok(stream)) => stream,
                Ok(Err(error)) => return debug!(%error, "TLS handshake failed"),
                Err(_) => return debug!("TLS handshake timed out"),
            }
        }
    };
    let builder = auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
    tokio::pin!(conn);
    let served = tokio::select! {
        served = conn.as_mut() => served,
        () = token.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(error) = served {
        debug!(%error, "connection ended with an error");
    }
}
