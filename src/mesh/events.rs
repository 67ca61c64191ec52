//! Swarm events, as the event loop sees them: [`EventLoop::on_swarm_event`]
//! sends connection and listener events to `connections.rs` (peer table,
//! bootstrap state, listen addresses) and handles the behaviours' events
//! here: ping (a connection whose pings fail is closed), identify (feeds
//! Kademlia addresses), Kademlia (query progress for
//! pending calls; inbound `PutRecord` and `AddProvider` under record
//! filtering), gossipsub (messages to validate) and the search protocol
//! (inbound requests, responses, failures). Anything the node must judge is
//! handed to a handler task; events we do not act on are traced, never
//! panicked on.

use libp2p::gossipsub;
use libp2p::identify;
use libp2p::kad::{self, store::RecordStore, GetProvidersOk, GetRecordOk, QueryResult};
use libp2p::ping;
use libp2p::request_response::{self, Message};
use libp2p::swarm::SwarmEvent;
use libp2p::Multiaddr;
use tracing::{debug, info, trace, warn};

use super::behaviour::{MeshBehaviourEvent, DHT_MAX_VALUE_BYTES};
use super::client::DhtOutcome;
use super::event_loop::{EventLoop, Internal};
use super::quota::Work;
use super::stats::Path;
use super::transport::{dialable, is_unspecified};
use super::wire::SearchResponse;
use super::{RecordOrigin, Verdict, KAD_PROTOCOL};
use crate::record::MAX_RECORD_BYTES;

/// Most identify listen addresses fed into Kademlia per peer.
const MAX_IDENTIFY_ADDRS: usize = 16;
/// Below this many routing-table peers, each new peer brings the next
/// re-announcement of our provider keys forward (Kademlia's k).
const REPROVIDE_WHILE_UNDER: usize = 20;
/// How soon after a new peer the re-announcement runs; arrivals within it
/// share one round.
const REPROVIDE_DEBOUNCE: std::time::Duration = std::time::Duration::from_secs(2);

/// The counter name of a query of ours.
fn query_kind(result: &QueryResult) -> &'static str {
    match result {
        QueryResult::Bootstrap(_) => "bootstrap",
        QueryResult::GetClosestPeers(_) => "get_closest_peers",
        QueryResult::GetProviders(_) => "get_providers",
        QueryResult::StartProviding(_) => "start_providing",
        QueryResult::RepublishProvider(_) => "republish_provider",
        QueryResult::GetRecord(_) => "get_record",
        QueryResult::PutRecord(_) => "put_record",
        QueryResult::RepublishRecord(_) => "republish_record",
    }
}

/// How a query of ours ended: `ok`, `timeout` (the query's own timeout,
/// `p2p` Kademlia query timeout), or `error` (not found, quorum failed).
fn query_outcome(result: &QueryResult) -> &'static str {
    fn of<T, E>(r: &Result<T, E>, timed_out: impl Fn(&E) -> bool) -> &'static str {
        match r {
            Ok(_) => "ok",
            Err(e) if timed_out(e) => "timeout",
            Err(_) => "error",
        }
    }
    match result {
        QueryResult::Bootstrap(r) => of(r, |e| matches!(e, kad::BootstrapError::Timeout { .. })),
        QueryResult::GetClosestPeers(r) => of(r, |e| {
            matches!(e, kad::GetClosestPeersError::Timeout { .. })
        }),
        QueryResult::GetProviders(r) => {
            of(r, |e| matches!(e, kad::GetProvidersError::Timeout { .. }))
        }
        QueryResult::StartProviding(r) | QueryResult::RepublishProvider(r) => {
            of(r, |e| matches!(e, kad::AddProviderError::Timeout { .. }))
        }
        QueryResult::GetRecord(r) => of(r, |e| matches!(e, kad::GetRecordError::Timeout { .. })),
        QueryResult::PutRecord(r) | QueryResult::RepublishRecord(r) => {
            of(r, |e| matches!(e, kad::PutRecordError::Timeout { .. }))
        }
    }
}

/// A bounded reason code for a failed search request.
fn failure_reason(error: &request_response::OutboundFailure) -> &'static str {
    use request_response::OutboundFailure as F;
    match error {
        F::DialFailure => "dial_failure",
        F::Timeout => "timeout",
        F::ConnectionClosed => "connection_closed",
        F::UnsupportedProtocols => "unsupported_protocols",
        F::Io(_) => "io",
    }
}

/// The counter name of a peer's Kademlia request.
fn request_kind(request: &kad::InboundRequest) -> &'static str {
    match request {
        kad::InboundRequest::FindNode { .. } => "find_node",
        kad::InboundRequest::GetProvider { .. } => "get_providers",
        kad::InboundRequest::AddProvider { .. } => "add_provider",
        kad::InboundRequest::GetRecord { .. } => "get_record",
        kad::InboundRequest::PutRecord { .. } => "put_record",
    }
}

impl EventLoop {
    pub(super) fn on_swarm_event(&mut self, event: SwarmEvent<MeshBehaviourEvent>) {
        match event {
            SwarmEvent::Behaviour(e) => self.on_behaviour(e),
            SwarmEvent::ConnectionEstablished {
                peer_id,
                connection_id,
                endpoint,
                ..
            } => self.on_connection_established(peer_id, connection_id, &endpoint),
            SwarmEvent::ConnectionClosed {
                peer_id,
                num_established,
                cause,
                ..
            } => self.on_connection_closed(peer_id, num_established, cause),
            SwarmEvent::OutgoingConnectionError {
                peer_id,
                connection_id,
                error,
            } => self.on_outgoing_error(peer_id, connection_id, &error),
            SwarmEvent::IncomingConnectionError {
                send_back_addr,
                error,
                ..
            } => self.on_incoming_error(&send_back_addr, &error),
            SwarmEvent::NewListenAddr {
                listener_id,
                address,
            } => self.on_new_listen_addr(listener_id, &address),
            SwarmEvent::ExpiredListenAddr { address, .. } => self.on_expired_listen_addr(&address),
            SwarmEvent::ListenerClosed {
                listener_id,
                addresses,
                reason,
            } => self.on_listener_closed(listener_id, &addresses, reason),
            SwarmEvent::ListenerError { listener_id, error } => {
                warn!(?listener_id, %error, "listener error");
            }
            other => trace!(event = ?other, "swarm event"),
        }
    }

    /// An event of one of the behaviours, to its own handler.
    fn on_behaviour(&mut self, event: MeshBehaviourEvent) {
        match event {
            MeshBehaviourEvent::Identify(e) => self.on_identify(e),
            MeshBehaviourEvent::Ping(e) => self.on_ping(&e),
            MeshBehaviourEvent::Kad(e) => self.on_kad(e),
            MeshBehaviourEvent::Gossipsub(e) => self.on_gossip(e),
            MeshBehaviourEvent::Search(e) => self.on_search(e),
            MeshBehaviourEvent::Log(e) => self.on_log(e),
            MeshBehaviourEvent::Limits(never) => match never {},
            MeshBehaviourEvent::PerIp(never) => match never {},
        }
    }

    /// libp2p reports a connection's ping failures from the second in a
    /// row: the peer is cut off or stalled, and the connection is closed
    /// (a peer that does not speak ping keeps it).
    fn on_ping(&mut self, event: &ping::Event) {
        match &event.result {
            Ok(_) | Err(ping::Failure::Unsupported) => {}
            Err(error) => {
                debug!(peer = %event.peer, %error, "pings failed twice in a row: connection closed");
                if self.swarm.close_connection(event.connection) {
                    self.stats.connection_dead();
                }
            }
        }
    }

    fn on_identify(&mut self, event: identify::Event) {
        let identify::Event::Received { peer_id, info, .. } = event else {
            trace!(?event, "identify event");
            return;
        };
        let speaks_kad = info.protocols.iter().any(|p| p.as_ref() == KAD_PROTOCOL);
        // Addresses the transport would refuse are not worth a routing
        // table entry.
        let policy = self.config.address_policy();
        let addrs: Vec<Multiaddr> = info
            .listen_addrs
            .into_iter()
            .filter(|a| !is_unspecified(a))
            .take(MAX_IDENTIFY_ADDRS)
            .collect();
        if speaks_kad {
            let kad = &mut self.swarm.behaviour_mut().kad;
            for addr in addrs.iter().filter(|a| dialable(policy, a)) {
                kad.add_address(&peer_id, addr.clone());
            }
        }
        let listening: Vec<Multiaddr> = self.swarm.listeners().cloned().collect();
        for addr in self
            .external
            .on_observed(peer_id, &info.observed_addr, &listening)
        {
            info!(%addr, "external address (observed by peers)");
            self.swarm.add_external_address(addr);
        }
        if let Some(state) = self.peers.get_mut(&peer_id) {
            state.listen_addrs = addrs;
            state.protocols = info.protocols.iter().map(|p| p.to_string()).collect();
            state.agent_version = Some(info.agent_version);
        }
    }

    fn on_kad(&mut self, event: kad::Event) {
        match event {
            kad::Event::OutboundQueryProgressed {
                id,
                result,
                step,
                stats,
            } => {
                if step.last {
                    self.stats.kad_query_done(
                        query_kind(&result),
                        query_outcome(&result),
                        stats.num_requests(),
                        stats.num_failures(),
                    );
                }
                // A query's first step may come from the local store before
                // any peer was asked (get_providers does that).
                let from_network = stats.num_requests() > 0;
                self.on_query(id, result, step.last, from_network)
            }
            kad::Event::InboundRequest { request } => {
                self.stats.kad_request_received(request_kind(&request));
                self.on_kad_inbound(request)
            }
            kad::Event::RoutingUpdated {
                peer, is_new_peer, ..
            } => {
                trace!(%peer, "routing table updated");
                if !self.bootstrapped {
                    self.bootstrapped = self.swarm.behaviour_mut().kad.bootstrap().is_ok();
                    // Keys announced while alone reached nobody: announce
                    // them again on the next tick.
                    self.next_reprovide = tokio::time::Instant::now();
                } else if is_new_peer && self.routing_table_size() <= REPROVIDE_WHILE_UNDER {
                    // While the network is small and still growing, a new
                    // peer may be among the closest to our keys though it
                    // was not there when they were last announced: announce
                    // again soon (one round for a burst of arrivals).
                    let soon = tokio::time::Instant::now() + REPROVIDE_DEBOUNCE;
                    self.next_reprovide = self.next_reprovide.min(soon);
                }
            }
            other => trace!(event = ?other, "kad event"),
        }
    }

    fn routing_table_size(&mut self) -> usize {
        self.swarm
            .behaviour_mut()
            .kad
            .kbuckets()
            .map(|k| k.num_entries())
            .sum()
    }

    fn on_query(&mut self, id: kad::QueryId, result: QueryResult, last: bool, from_network: bool) {
        match result {
            QueryResult::GetRecord(Ok(GetRecordOk::FoundRecord(found))) => {
                let from = found.peer.unwrap_or(self.local);
                let record = found.record;
                if self.pending.get_found(id) {
                    match self.permit(Work::Dht, from) {
                        Ok(permit) => {
                            let key = record.key.to_vec();
                            let work = self.handler.on_record(
                                record.value.clone(),
                                from,
                                RecordOrigin::DhtGet { key },
                            );
                            let value = record.value;
                            let span = tracing::debug_span!("mesh_dht_get", peer = %from);
                            self.spawn_task(permit, span, work, move |v| Internal::DhtGet {
                                query: id,
                                record: value,
                                verdict: v.unwrap_or(Verdict::Ignore("handler_timeout")),
                            });
                        }
                        Err(reason) => {
                            self.stats.verdict(Path::DhtGet, &Verdict::Ignore(reason));
                            self.pending.get_check_dropped(id);
                        }
                    }
                }
                if last {
                    self.pending.get_query_done(id);
                }
            }
            QueryResult::GetRecord(_) => self.pending.get_query_done(id),
            QueryResult::GetProviders(r) => {
                let found = match r {
                    Ok(GetProvidersOk::FoundProviders { providers, .. }) => providers,
                    _ => Default::default(),
                };
                let local = self.local;
                let answered = self
                    .pending
                    .providers_found(id, found, &local, last, from_network);
                self.providers_answered(answered);
            }
            QueryResult::PutRecord(r) => {
                let outcome = match r {
                    Ok(_) => DhtOutcome::Stored,
                    Err(kad::PutRecordError::QuorumFailed { success, .. })
                        if success.is_empty() =>
                    {
                        DhtOutcome::Failed {
                            reason: "no peer stored the record".into(),
                        }
                    }
                    Err(kad::PutRecordError::Timeout { success, .. }) if success.is_empty() => {
                        DhtOutcome::TimedOut
                    }
                    Err(_) => DhtOutcome::Stored,
                };
                self.pending.publish_result(id, outcome);
            }
            QueryResult::StartProviding(r) => {
                let outcome = match r {
                    Ok(_) => DhtOutcome::Stored,
                    Err(_) => DhtOutcome::TimedOut,
                };
                if !self.pending.publish_result(id, outcome) {
                    trace!(?id, "re-provide finished");
                }
            }
            QueryResult::RepublishRecord(r) => debug!(ok = r.is_ok(), "record republished"),
            QueryResult::RepublishProvider(r) => debug!(ok = r.is_ok(), "provider republished"),
            QueryResult::Bootstrap(r) => debug!(ok = r.is_ok(), "kad bootstrap step"),
            QueryResult::GetClosestPeers(_) => trace!(?id, "closest peers query progressed"),
        }
    }

    fn on_kad_inbound(&mut self, request: kad::InboundRequest) {
        match request {
            kad::InboundRequest::PutRecord {
                source,
                record: Some(record),
                ..
            } => {
                if record.value.len() >= DHT_MAX_VALUE_BYTES
                    || record.value.len() > MAX_RECORD_BYTES
                {
                    self.stats
                        .verdict(Path::DhtPut, &Verdict::Reject("too_large"));
                    return;
                }
                if record.key.as_ref().len() != 32 {
                    self.stats
                        .verdict(Path::DhtPut, &Verdict::Reject("bad_key"));
                    return;
                }
                // Re-replication of a record we already hold, byte for byte:
                // refresh its expiry without asking the handler again.
                let store = self.swarm.behaviour_mut().kad.store_mut();
                if store
                    .get(&record.key)
                    .is_some_and(|r| r.value == record.value)
                {
                    let _ = store.put(record);
                    self.stats
                        .verdict(Path::DhtPut, &Verdict::Ignore("duplicate"));
                    return;
                }
                let permit = match self.permit(Work::Dht, source) {
                    Ok(permit) => permit,
                    Err(reason) => {
                        self.stats.verdict(Path::DhtPut, &Verdict::Ignore(reason));
                        return;
                    }
                };
                let key = record.key.to_vec();
                let work = self.handler.on_record(
                    record.value.clone(),
                    source,
                    RecordOrigin::DhtPut { key },
                );
                let span = tracing::debug_span!("mesh_dht_put", peer = %source);
                self.spawn_task(permit, span, work, move |v| Internal::DhtPut {
                    record,
                    verdict: v.unwrap_or(Verdict::Ignore("handler_timeout")),
                });
            }
            kad::InboundRequest::AddProvider {
                record: Some(provider),
            } => {
                // Our provider keys are SHA-256 digests; anything else is
                // not an agentmesh capability key.
                if provider.key.as_ref().len() != 32 {
                    self.stats.provider(false);
                    return;
                }
                // Within the peers' share of the store and this peer's
                // share of that (`mesh/providers.rs`).
                let store = self.swarm.behaviour_mut().kad.store_mut();
                let admitted = self.provider_quota.admit(
                    &provider.key,
                    provider.provider,
                    std::time::Instant::now(),
                    |key, peer| store.providers(key).iter().any(|p| p.provider == *peer),
                );
                if let Err(reason) = admitted {
                    debug!(peer = %provider.provider, reason, "provider record refused");
                    self.stats.provider_refused(reason);
                    return;
                }
                let stored = store.add_provider(provider).is_ok();
                self.stats.provider(stored);
            }
            other => trace!(request = ?other, "kad inbound request"),
        }
    }

    /// Gossips up to [`UNSENT_PER_TURN`](super::unsent::UNSENT_PER_TURN)
    /// of the records kept for want of a subscribed peer (`unsent.rs`),
    /// oldest first; at the first that cannot go yet (still no
    /// subscribed peer) that one and the rest go back, in order, for the
    /// next turn; after full send queues, the rest.
    pub(super) fn gossip_unsent(&mut self) {
        let now = tokio::time::Instant::now();
        if let Some(dropped) = self.unsent.drops_to_warn(now) {
            warn!(
                dropped,
                total = self.unsent.dropped(),
                "records kept for gossip while no peer subscribed were dropped (over 1,024 kept, \
                 or kept ten minutes): peers get them from the DHT or their searches only"
            );
        }
        if self.unsent.is_empty() {
            return;
        }
        let batch = self.unsent.take(now, super::unsent::UNSENT_PER_TURN);
        let mut sent = 0usize;
        let mut stopped_at = None;
        for (i, (_, record)) in batch.iter().enumerate() {
            let gossip = &mut self.swarm.behaviour_mut().gossipsub;
            match gossip.publish(self.topic.clone(), record.clone()) {
                Ok(_) => sent += 1,
                // Not taken: again next turn, with the rest.
                Err(gossipsub::PublishError::NoPeersSubscribedToTopic) => {
                    stopped_at = Some(i);
                    break;
                }
                // Taken into gossipsub's message cache (IHAVE offers it,
                // and a publish of it again would be a duplicate), but
                // the send queues are full: the rest wait a turn.
                Err(gossipsub::PublishError::AllQueuesFull(_)) => {
                    stopped_at = Some(i + 1);
                    break;
                }
                Err(gossipsub::PublishError::Duplicate) => {}
                Err(e) => warn!(error = %e, "gossip of a kept record failed"),
            }
        }
        if let Some(i) = stopped_at {
            self.unsent.put_back(batch.into_iter().skip(i).collect());
        }
        if sent > 0 {
            info!(
                sent,
                left = self.unsent.len(),
                dropped = self.unsent.dropped(),
                "gossiped records issued while no peer subscribed"
            );
        }
    }

    fn on_gossip(&mut self, event: gossipsub::Event) {
        let gossipsub::Event::Message {
            propagation_source: source,
            message_id,
            message,
        } = event
        else {
            match event {
                gossipsub::Event::SlowPeer { peer_id, .. } => {
                    warn!(peer = %peer_id, "slow gossip peer")
                }
                gossipsub::Event::Subscribed { topic, .. } if topic == self.topic => {
                    self.gossip_unsent();
                }
                other => debug!(event = ?other, "gossipsub event"),
            }
            return;
        };
        if message.topic == self.checkpoints {
            return self.on_checkpoint_message(message_id, source, message);
        }
        let early = if message.topic != self.topic {
            Some(Verdict::Ignore("unknown_topic"))
        } else if message.data.len() > MAX_RECORD_BYTES {
            Some(Verdict::Reject("too_large"))
        } else {
            None
        };
        let permit = match early {
            Some(verdict) => Err(verdict),
            None => self.permit(Work::Gossip, source).map_err(Verdict::Ignore),
        };
        let permit = match permit {
            Ok(permit) => permit,
            Err(verdict) => {
                let msg = Internal::Gossip {
                    message_id,
                    source,
                    verdict,
                };
                // Reported through the same path as handler verdicts.
                return self.on_internal(msg);
            }
        };
        let origin = RecordOrigin::Gossip {
            author: message.source,
        };
        let work = self.handler.on_record(message.data, source, origin);
        let span = tracing::debug_span!("mesh_gossip", peer = %source);
        self.spawn_task(permit, span, work, move |v| Internal::Gossip {
            message_id,
            source,
            verdict: v.unwrap_or(Verdict::Ignore("handler_timeout")),
        });
    }

    fn on_search(&mut self, event: request_response::Event<super::SearchRequest, SearchResponse>) {
        match event {
            request_response::Event::Message {
                peer,
                message:
                    Message::Request {
                        request, channel, ..
                    },
                ..
            } => {
                self.peer_used(&peer);
                if let Err(e) = request.check() {
                    debug!(%peer, error = %e, "search request refused");
                    self.stats.search_refused(e.reason());
                    return;
                }
                let limit = request.bounded_limit();
                let request = super::SearchRequest { limit, ..request };
                let permit = match self.permit(Work::Search, peer) {
                    Ok(permit) => permit,
                    Err(reason) => {
                        self.stats.search_refused(reason);
                        let busy = SearchResponse {
                            records: Vec::new(),
                            truncated: true,
                        };
                        let _ = self
                            .swarm
                            .behaviour_mut()
                            .search
                            .send_response(channel, busy);
                        return;
                    }
                };
                let work = self.handler.on_search(request, peer);
                let span = tracing::debug_span!("mesh_search", %peer);
                self.spawn_task(permit, span, work, move |response| Internal::Search {
                    channel,
                    limit,
                    response,
                });
            }
            request_response::Event::Message {
                peer,
                message:
                    Message::Response {
                        request_id,
                        response,
                    },
                ..
            } => {
                self.peer_used(&peer);
                if !self.pending.search_response(request_id, response) {
                    debug!(%peer, "late search response dropped");
                }
            }
            request_response::Event::OutboundFailure {
                peer,
                request_id,
                error,
                ..
            } => {
                self.stats.request_failed(failure_reason(&error));
                if !self.pending.search_failure(request_id, error.to_string()) {
                    debug!(%peer, %error, "late search failure");
                }
            }
            request_response::Event::InboundFailure { peer, error, .. } => {
                debug!(%peer, %error, "inbound search failed");
            }
            request_response::Event::ResponseSent { .. } => {}
        }
    }
}
