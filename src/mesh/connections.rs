//! Connection and listener events, as the event loop sees them: a peer
//! connects or goes (the peer table, the bootstrap peers' dial state), a
//! dial or an incoming connection fails (counted in [`MeshStats`]), a
//! listener gets, loses or closes an address (external addresses, the
//! listeners [`Mesh::spawn`] waits for). `events.rs` dispatches to these.
//!
//! [`MeshStats`]: super::MeshStats
//! [`Mesh::spawn`]: super::Mesh::spawn

use libp2p::core::transport::ListenerId;
use libp2p::core::ConnectedPoint;
use libp2p::swarm::{ConnectionError, ConnectionId, DialError, ListenError};
use libp2p::{Multiaddr, PeerId};
use tracing::{debug, info, warn};

use super::admission::PerIpExceeded;
use super::event_loop::{EventLoop, PeerState};

impl EventLoop {
    /// A connection is up: the peer enters the table with the address it
    /// is reached at, and a bootstrap peer it answers for counts as
    /// connected (its backoff reset).
    pub(super) fn on_connection_established(
        &mut self,
        peer_id: PeerId,
        connection_id: ConnectionId,
        endpoint: &ConnectedPoint,
    ) {
        let addr = match endpoint {
            ConnectedPoint::Dialer { address, .. } => address.clone(),
            ConnectedPoint::Listener { send_back_addr, .. } => send_back_addr.clone(),
        };
        debug!(peer = %peer_id, %addr, "connected");
        let state = self
            .peers
            .entry(peer_id)
            .or_insert_with(|| PeerState::new(tokio::time::Instant::now()));
        if !state.conn_addrs.contains(&addr) {
            state.conn_addrs.push(addr);
        }
        let min = self.config.timeouts.bootstrap_backoff_min;
        for b in &mut self.bootstrap {
            if b.peer == Some(peer_id) || b.dialing == Some(connection_id) {
                b.peer = Some(peer_id);
                b.connected = true;
                b.dialing = None;
                b.backoff = min;
            }
        }
    }

    /// A connection closed: when it was the peer's last, the peer leaves
    /// the table and a bootstrap peer is re-dialled after its backoff.
    pub(super) fn on_connection_closed(
        &mut self,
        peer_id: PeerId,
        num_established: u32,
        cause: Option<ConnectionError>,
    ) {
        debug!(peer = %peer_id, ?cause, remaining = num_established, "connection closed");
        if num_established == 0 {
            self.peers.remove(&peer_id);
            let now = tokio::time::Instant::now();
            for b in &mut self.bootstrap {
                if b.peer == Some(peer_id) {
                    b.connected = false;
                    b.next_dial = now + b.backoff;
                }
            }
        }
    }

    /// A dial of ours failed: counted, and a bootstrap dial it ends is no
    /// longer in progress. (A dial the back-off held back fails before it
    /// starts, with no event here: `mesh/backoff.rs` counts it.)
    pub(super) fn on_outgoing_error(
        &mut self,
        peer_id: Option<PeerId>,
        connection_id: ConnectionId,
        error: &DialError,
    ) {
        self.stats.dial_failure();
        for b in &mut self.bootstrap {
            if b.dialing == Some(connection_id) {
                b.dialing = None;
                debug!(addr = %b.addr, error = %error, "bootstrap dial failed");
            }
        }
        debug!(peer = ?peer_id, error = %error, "outgoing connection failed");
    }

    /// An incoming connection failed or was refused: counted by reason.
    pub(super) fn on_incoming_error(&mut self, send_back_addr: &Multiaddr, error: &ListenError) {
        self.stats.incoming_failure(refusal_reason(error));
        debug!(addr = %send_back_addr, %error, "incoming connection failed");
    }

    /// A listener has an address: the listener has started, and the
    /// address may be one to announce.
    pub(super) fn on_new_listen_addr(&mut self, listener_id: ListenerId, address: &Multiaddr) {
        info!(%address, "listening");
        self.starting_listeners.remove(&listener_id);
        let wildcard = self.wildcard_listeners.contains(&listener_id);
        if let Some(addr) = self.external.on_listen(address, wildcard) {
            debug!(%addr, "external address (listening)");
            self.swarm.add_external_address(addr);
        }
    }

    /// A listener lost an address: no longer announced.
    pub(super) fn on_expired_listen_addr(&mut self, address: &Multiaddr) {
        if self.external.on_listen_expired(address) {
            self.swarm.remove_external_address(address);
        }
    }

    /// A listener closed: one still starting is remembered as failed, with
    /// why, for [`Mesh::spawn`] to report.
    ///
    /// [`Mesh::spawn`]: super::Mesh::spawn
    pub(super) fn on_listener_closed(
        &mut self,
        listener_id: ListenerId,
        addresses: &[Multiaddr],
        reason: Result<(), std::io::Error>,
    ) {
        warn!(?addresses, ?reason, "listener closed");
        self.listeners.remove(&listener_id);
        if let Some(addr) = self.starting_listeners.remove(&listener_id) {
            let reason = match reason {
                Ok(()) => "closed".to_owned(),
                Err(e) => e.to_string(),
            };
            self.failed_listeners.push((addr, reason));
        }
    }
}

/// Why this node refused an incoming connection (`None`: it failed, as a
/// handshake that did not complete).
fn refusal_reason(error: &ListenError) -> Option<&'static str> {
    let ListenError::Denied { cause } = error else {
        return None;
    };
    if cause.downcast_ref::<PerIpExceeded>().is_some() {
        Some("per_ip")
    } else if cause
        .downcast_ref::<libp2p::connection_limits::Exceeded>()
        .is_some()
    {
        Some("connection_limit")
    } else {
        Some("other")
    }
}
