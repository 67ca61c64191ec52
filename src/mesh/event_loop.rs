//! The event loop: the one task that owns the swarm. It `select!`s over
//! swarm events (handled in `events.rs` and `connections.rs`), client
//! [`Command`]s, internal messages (handler verdicts, deadlines) and a
//! `CancellationToken`; a 500 ms tick re-dials bootstrap peers
//! (exponential backoff 1 s -> 60 s) and re-announces provided capability
//! keys.
//!
//! It never runs the [`MeshHandler`] inline: [`EventLoop::spawn_task`]
//! runs each handler call in its own task (a semaphore bounds how many are
//! in flight, a timeout bounds each, panics are caught), and the task sends
//! an [`Internal`] message back. Deadlines are small sleeping tasks that
//! send [`Internal::Deadline`]. Calls in flight live in [`Pending`].

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use libp2p::core::transport::ListenerId;
use libp2p::gossipsub::{self, MessageId};
use libp2p::identity::Keypair;
use libp2p::kad::{self, QueryId, RecordKey};
use libp2p::multiaddr::Protocol;
use libp2p::request_response::ResponseChannel;
use libp2p::swarm::dial_opts::{DialOpts, PeerCondition};
use libp2p::swarm::ConnectionId;
use libp2p::{Multiaddr, PeerId, Swarm};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn, Instrument};

use super::behaviour::{build_swarm, records_topic, split_peer, MeshBehaviour};
use super::client::{Command, MeshClient};
use super::external::ExternalAddrs;
use super::pending::{Deadline, Pending, ProvidersAnswered};
use super::stats::MeshStats;
use super::trim::{Trimmer, Use};
use super::wire::SearchResponse;
use super::{
    shard_of, MeshConfig, MeshError, MeshHandler, Verdict, MAX_PROVIDES_PEERS,
    MAX_PROVIDES_PER_PEER,
};

/// The loop re-dials a bootstrap peer it lost only while it has fewer
/// connected peers than this (IPFS's bootstrap threshold, boxo's
/// `MinPeerThreshold`, 4): a node that knows enough peers through them
/// does not keep reconnecting to a bootstrap node that trimmed it.
pub(super) const REDIAL_BOOTSTRAP_BELOW: usize = 4;

/// Messages from handler tasks and timers back to the loop.
pub(super) enum Internal {
    Gossip {
        message_id: MessageId,
        source: PeerId,
        verdict: Verdict,
    },
    DhtPut {
        record: kad::Record,
        verdict: Verdict,
    },
    DhtGet {
        query: QueryId,
        record: Vec<u8>,
        verdict: Verdict,
    },
    Search {
        channel: ResponseChannel<SearchResponse>,
        limit: u32,
        response: Option<SearchResponse>,
    },
    Checkpoint {
        message_id: MessageId,
        source: PeerId,
        verdict: Verdict,
    },
    Log {
        channel: ResponseChannel<super::log::LogResponse>,
        response: Option<super::log::LogResponse>,
    },
    Deadline(Deadline),
}

/// A configured bootstrap peer and its re-dial state.
pub(super) struct BootstrapPeer {
    pub(super) addr: Multiaddr,
    pub(super) peer: Option<PeerId>,
    pub(super) dialing: Option<ConnectionId>,
    pub(super) connected: bool,
    pub(super) backoff: Duration,
    pub(super) next_dial: Instant,
}

/// What we know of a connected peer.
pub(super) struct PeerState {
    pub(super) conn_addrs: Vec<Multiaddr>,
    pub(super) listen_addrs: Vec<Multiaddr>,
    pub(super) protocols: Vec<String>,
    pub(super) agent_version: Option<String>,
    /// Since when, and how lately, we use it: what trimming goes by.
    pub(super) usage: Use,
}

impl PeerState {
    /// A peer whose first connection was established at `now`.
    pub(super) fn new(now: Instant) -> Self {
        Self {
            conn_addrs: Vec::new(),
            listen_addrs: Vec::new(),
            protocols: Vec::new(),
            agent_version: None,
            usage: Use::new(now),
        }
    }
}

pub(super) struct EventLoop {
    pub(super) swarm: Swarm<MeshBehaviour>,
    pub(super) local: PeerId,
    pub(super) config: MeshConfig,
    pub(super) handler: Arc<dyn MeshHandler>,
    pub(super) stats: MeshStats,
    pub(super) topic: gossipsub::TopicHash,
    /// The checkpoints topic.
    pub(super) checkpoints: gossipsub::TopicHash,
    /// Log requests in flight.
    pub(super) log_pending:
        HashMap<libp2p::request_response::OutboundRequestId, super::pending::LogReply>,
    pub(super) own_shard: u32,
    quotas: super::quota::Quotas,
    /// What peers' provider announcements may hold (`mesh/providers.rs`).
    pub(super) provider_quota: super::providers::ProviderQuota,
    commands: mpsc::Receiver<Command>,
    internal_tx: mpsc::Sender<Internal>,
    internal_rx: mpsc::Receiver<Internal>,
    cancel: CancellationToken,
    pub(super) pending: Pending,
    pub(super) peers: HashMap<PeerId, PeerState>,
    pub(super) bootstrap: Vec<BootstrapPeer>,
    pub(super) bootstrapped: bool,
    pub(super) provided: HashSet<RecordKey>,
    /// Capabilities provider lookups found each peer providing (bounded).
    pub(super) provides: HashMap<PeerId, BTreeSet<String>>,
    pub(super) next_reprovide: Instant,
    pub(super) starting_listeners: HashMap<ListenerId, Multiaddr>,
    pub(super) failed_listeners: Vec<(Multiaddr, String)>,
    /// Listeners configured on an unspecified address.
    pub(super) wildcard_listeners: HashSet<ListenerId>,
    /// Every listener opened and not closed: removed when the loop stops.
    pub(super) listeners: HashSet<ListenerId>,
    pub(super) external: ExternalAddrs,
    /// Whom to disconnect over the high-water mark.
    pub(super) trim: Trimmer,
    /// Records not gossiped for want of a subscribed peer, gossiped when
    /// one subscribes.
    pub(super) unsent: super::unsent::Unsent,
}

/// Builds the swarm, starts listening and spawns the loop.
pub(super) async fn spawn(
    config: MeshConfig,
    keypair: Keypair,
    handler: Arc<dyn MeshHandler>,
    cancel: CancellationToken,
) -> Result<(MeshClient, JoinHandle<()>), MeshError> {
    let local = keypair.public().to_peer_id();
    let stats = MeshStats::default();
    let swarm = build_swarm(keypair, &config, &stats)?;
    let (cmd_tx, commands) = mpsc::channel(config.limits.command_buffer);
    let (internal_tx, internal_rx) = mpsc::channel(config.limits.command_buffer);
    let now = Instant::now();
    let policy = config.address_policy();
    let trim = Trimmer::new(
        config.limits.connections_low_water as usize,
        config.limits.connections_high_water as usize,
        config.timeouts.connection_grace,
    );
    let mut el = EventLoop {
        swarm,
        local,
        own_shard: shard_of(&local, config.shards),
        provider_quota: super::providers::ProviderQuota::new(config.limits.max_provider_keys),
        quotas: super::quota::Quotas::with_rates(
            config.limits.max_inflight_handlers,
            config.limits.max_inflight_per_peer,
            config.limits.peer_rates,
        ),
        next_reprovide: now + config.timeouts.reprovide,
        config,
        handler,
        stats: stats.clone(),
        topic: records_topic().hash(),
        checkpoints: super::behaviour::checkpoints_topic().hash(),
        log_pending: HashMap::new(),
        commands,
        internal_tx,
        internal_rx,
        cancel,
        pending: Pending::default(),
        peers: HashMap::new(),
        bootstrap: Vec::new(),
        bootstrapped: false,
        provided: HashSet::new(),
        provides: HashMap::new(),
        starting_listeners: HashMap::new(),
        failed_listeners: Vec::new(),
        wildcard_listeners: HashSet::new(),
        listeners: HashSet::new(),
        external: ExternalAddrs::new(policy),
        trim,
        unsent: super::unsent::Unsent::default(),
    };
    el.start_listening().await?;
    for addr in el.config.external_addresses.clone() {
        info!(%addr, "external address (configured)");
        el.swarm.add_external_address(addr);
    }
    el.init_bootstrap();
    let span = tracing::info_span!("mesh", peer_id = %local);
    let handle = tokio::spawn(el.run().instrument(span));
    Ok((MeshClient::new(cmd_tx, stats, local), handle))
}

impl EventLoop {
    async fn start_listening(&mut self) -> Result<(), MeshError> {
        for addr in self.config.listen.clone() {
            match self.swarm.listen_on(addr.clone()) {
                Ok(id) => {
                    if super::transport::is_unspecified(&addr) {
                        self.wildcard_listeners.insert(id);
                    }
                    self.starting_listeners.insert(id, addr);
                    self.listeners.insert(id);
                }
                Err(e) => {
                    // Some transports' errors print nothing (the memory
                    // transport's port in use): their debug form then.
                    let shown = e.to_string();
                    let reason = if shown.trim().is_empty() {
                        format!("{e:?}")
                    } else {
                        shown
                    };
                    self.failed_listeners.push((addr, reason));
                }
            }
        }
        let deadline = Instant::now() + self.config.timeouts.listen;
        while !self.starting_listeners.is_empty() {
            match tokio::time::timeout_at(deadline, self.swarm.select_next_some()).await {
                Ok(event) => self.on_swarm_event(event),
                Err(_) => break,
            }
        }
        for (addr, reason) in &self.failed_listeners {
            warn!(%addr, %reason, "listener failed");
        }
        for addr in self.starting_listeners.values() {
            warn!(%addr, "listener reported no address in time");
        }
        let listening = self.swarm.listeners().next().is_some();
        if !self.config.listen.is_empty() && !listening {
            let (addr, reason) =
                self.failed_listeners.first().cloned().unwrap_or_else(|| {
                    (self.config.listen[0].clone(), "no address reported".into())
                });
            return Err(MeshError::Listen {
                addr: addr.to_string(),
                reason,
            });
        }
        Ok(())
    }

    fn init_bootstrap(&mut self) {
        let now = Instant::now();
        for addr in self.config.bootstrap.clone() {
            let (base, peer) = split_peer(&addr);
            if peer == Some(self.local) {
                continue;
            }
            if let Some(peer) = peer {
                self.swarm.behaviour_mut().kad.add_address(&peer, base);
            }
            self.bootstrap.push(BootstrapPeer {
                addr,
                peer,
                dialing: None,
                connected: false,
                backoff: self.config.timeouts.bootstrap_backoff_min,
                next_dial: now,
            });
        }
        self.redial_bootstrap();
    }

    async fn run(mut self) {
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        info!(listen = ?self.listen_addrs(), "mesh started");
        loop {
            tokio::select! {
                _ = self.cancel.cancelled() => break,
                Some(msg) = self.internal_rx.recv() => self.on_internal(msg),
                event = self.swarm.select_next_some() => self.on_swarm_event(event),
                cmd = self.commands.recv() => match cmd {
                    Some(cmd) => self.on_command(cmd),
                    None => break,
                },
                _ = tick.tick() => self.on_tick(),
            }
        }
        // Closed, not only dropped: libp2p's memory transport frees a port
        // in `remove_listener` alone (its listener has no `Drop`), so a node
        // stopped in-process could not listen on its address again.
        for id in std::mem::take(&mut self.listeners) {
            self.swarm.remove_listener(id);
        }
        info!("mesh stopped");
    }

    fn on_tick(&mut self) {
        self.redial_bootstrap();
        self.trim_connections();
        self.gossip_unsent();
        let now = Instant::now();
        if now >= self.next_reprovide {
            self.next_reprovide = now + self.config.timeouts.reprovide;
            debug!(keys = self.provided.len(), "re-announcing provided keys");
            let keys: Vec<RecordKey> = self.provided.iter().cloned().collect();
            for key in keys {
                if let Err(e) = self.swarm.behaviour_mut().kad.start_providing(key) {
                    warn!(error = ?e, "could not re-provide a key");
                }
            }
        }
    }

    /// A search request or answer went to or came from `peer`.
    pub(super) fn peer_used(&mut self, peer: &PeerId) {
        if let Some(state) = self.peers.get_mut(peer) {
            state.usage.used(Instant::now());
        }
    }

    /// Disconnects the peers [`Trimmer::choose`] names, when over the
    /// high-water mark.
    fn trim_connections(&mut self) {
        let now = Instant::now();
        // Never trimmed: the configured bootstrap peers, and the trusted
        // peers, whom the connection limits let in whatever the count.
        let protected: HashSet<PeerId> = self
            .bootstrap
            .iter()
            .filter_map(|b| b.peer)
            .chain(self.config.trusted.iter().copied())
            .collect();
        let mesh: HashSet<PeerId> = self
            .swarm
            .behaviour()
            .gossipsub
            .mesh_peers(&self.topic)
            .copied()
            .collect();
        let chosen = self.trim.choose(
            now,
            self.peers.iter().map(|(p, s)| (p, &s.usage)),
            |p| protected.contains(p),
            |p| mesh.contains(p),
        );
        if chosen.is_empty() {
            return;
        }
        debug!(
            trimmed = chosen.len(),
            connected = self.swarm.connected_peers().count(),
            "trimming connections"
        );
        for peer in chosen {
            if let Some(state) = self.peers.get_mut(&peer) {
                state.usage.trimmed();
            }
            if self.swarm.disconnect_peer_id(peer).is_ok() {
                self.stats.connection_trimmed();
            }
        }
    }

    fn redial_bootstrap(&mut self) {
        if self.swarm.connected_peers().count() >= REDIAL_BOOTSTRAP_BELOW {
            return;
        }
        let now = Instant::now();
        let max = self.config.timeouts.bootstrap_backoff_max;
        for b in &mut self.bootstrap {
            if b.connected || b.dialing.is_some() || b.next_dial > now {
                continue;
            }
            let opts = match b.peer {
                Some(peer) => DialOpts::peer_id(peer)
                    .addresses(vec![split_peer(&b.addr).0])
                    .condition(PeerCondition::DisconnectedAndNotDialing)
                    .build(),
                None => DialOpts::unknown_peer_id().address(b.addr.clone()).build(),
            };
            let connection = opts.connection_id();
            b.next_dial = now + b.backoff;
            b.backoff = (b.backoff * 2).min(max);
            match self.swarm.dial(opts) {
                Ok(()) => {
                    b.dialing = Some(connection);
                    self.stats.bootstrap_dial();
                    debug!(addr = %b.addr, retry_in = ?b.next_dial - now, "dialling bootstrap peer");
                }
                Err(e) => debug!(addr = %b.addr, error = %e, "bootstrap dial did not start"),
            }
        }
    }

    /// A permit for one more handler task of `work` from `peer`, or why
    /// there is none (`overloaded`: the kind's pool is full; `peer_quota`:
    /// the peer holds its share of it).
    pub(super) fn permit(
        &self,
        work: super::quota::Work,
        peer: PeerId,
    ) -> Result<super::quota::Permit, &'static str> {
        self.quotas.acquire(work, peer)
    }

    /// Runs `work` (a handler call) in its own task, bounded by the handler
    /// timeout; `done` turns its result (`None`: timed out or panicked)
    /// into the message for the loop.
    pub(super) fn spawn_task<T: Send + 'static>(
        &self,
        permit: super::quota::Permit,
        span: tracing::Span,
        work: impl Future<Output = T> + Send + 'static,
        done: impl FnOnce(Option<T>) -> Internal + Send + 'static,
    ) {
        let tx = self.internal_tx.clone();
        let timeout = self.config.timeouts.handler;
        tokio::spawn(
            async move {
                let out =
                    tokio::time::timeout(timeout, AssertUnwindSafe(work).catch_unwind()).await;
                drop(permit);
                let out = match out {
                    Ok(Ok(v)) => Some(v),
                    Ok(Err(_)) => {
                        warn!("mesh handler panicked");
                        None
                    }
                    Err(_) => {
                        debug!("mesh handler timed out");
                        None
                    }
                };
                let _ = tx.send(done(out)).await;
            }
            .instrument(span),
        );
    }

    pub(super) fn schedule(&self, after: Duration, deadline: Deadline) {
        let tx = self.internal_tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let _ = tx.send(Internal::Deadline(deadline)).await;
        });
    }

    pub(super) fn listen_addrs(&self) -> Vec<Multiaddr> {
        self.swarm
            .listeners()
            .map(|a| a.clone().with(Protocol::P2p(self.local)))
            .collect()
    }

    pub(super) fn on_internal(&mut self, msg: Internal) {
        match msg {
            Internal::Gossip {
                message_id,
                source,
                verdict,
            } => {
                self.stats.verdict(super::stats::Path::Gossip, &verdict);
                self.report_validation(&message_id, &source, verdict);
            }
            Internal::DhtPut { record, verdict } => self.on_dht_put_verdict(record, verdict),
            Internal::DhtGet {
                query,
                record,
                verdict,
            } => {
                self.stats.verdict(super::stats::Path::DhtGet, &verdict);
                let accepted = matches!(verdict, Verdict::Accept).then_some(record);
                if self.pending.get_verdict(query, accepted) {
                    self.finish_query(query);
                }
            }
            Internal::Search {
                channel,
                limit,
                response,
            } => match response {
                Some(r) => {
                    let r = r.bound(limit);
                    match self.swarm.behaviour_mut().search.send_response(channel, r) {
                        Ok(()) => self.stats.search_served(),
                        Err(_) => self.stats.search_refused("requester_gone"),
                    }
                }
                None => self.stats.search_refused("handler_timeout"),
            },
            Internal::Checkpoint {
                message_id,
                source,
                verdict,
            } => self.report_validation(&message_id, &source, verdict),
            Internal::Log { channel, response } => self.on_log_answer(channel, response),
            Internal::Deadline(d) => self.on_deadline(d),
        }
    }

    /// Reports a verdict on a gossip message to gossipsub: an accepted
    /// one is forwarded, a rejected one counts against its sender.
    fn report_validation(&mut self, message_id: &MessageId, source: &PeerId, verdict: Verdict) {
        let acceptance = match verdict {
            Verdict::Accept => gossipsub::MessageAcceptance::Accept,
            Verdict::Reject(_) => gossipsub::MessageAcceptance::Reject,
            Verdict::Ignore(_) => gossipsub::MessageAcceptance::Ignore,
        };
        let g = &mut self.swarm.behaviour_mut().gossipsub;
        if !g.report_message_validation_result(message_id, source, acceptance) {
            debug!(%message_id, "validated message no longer in the cache");
        }
    }

    fn on_dht_put_verdict(&mut self, record: kad::Record, verdict: Verdict) {
        use super::stats::Path;
        use libp2p::kad::store::RecordStore;
        if verdict != Verdict::Accept {
            self.stats.verdict(Path::DhtPut, &verdict);
            return;
        }
        match self.swarm.behaviour_mut().kad.store_mut().put(record) {
            Ok(()) => self.stats.verdict(Path::DhtPut, &verdict),
            Err(e) => {
                debug!(error = ?e, "accepted DHT record not stored");
                self.stats
                    .verdict(Path::DhtPut, &Verdict::Ignore("store_full"));
            }
        }
    }

    /// Stops a providers call's remaining queries and remembers who
    /// provides what.
    pub(super) fn providers_answered(&mut self, answered: ProvidersAnswered) {
        for q in answered.stop {
            self.finish_query(q);
        }
        for peer in answered.found {
            if self.provides.len() >= MAX_PROVIDES_PEERS && !self.provides.contains_key(&peer) {
                continue;
            }
            let caps = self.provides.entry(peer).or_default();
            if caps.len() < MAX_PROVIDES_PER_PEER {
                caps.insert(answered.capability.clone());
            }
        }
    }

    fn on_deadline(&mut self, d: Deadline) {
        match d {
            Deadline::Publish(id) => self.pending.publish_deadline(id),
            Deadline::Get(query) => {
                if self.pending.get_deadline(query) {
                    self.finish_query(query);
                }
            }
            Deadline::Providers(id) => {
                let answered = self.pending.providers_answer(id);
                self.providers_answered(answered);
            }
            Deadline::Search(id) => self.pending.search_deadline(id, &self.stats),
        }
    }

    /// Stops a Kademlia query we no longer need.
    pub(super) fn finish_query(&mut self, query: QueryId) {
        if let Some(mut q) = self.swarm.behaviour_mut().kad.query_mut(&query) {
            q.finish();
        }
    }
}
