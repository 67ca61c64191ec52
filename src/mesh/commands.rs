//! Client commands, as the event loop executes them: listen addresses,
//! peers and status read from the swarm; `publish` (gossip + DHT put +
//! provider announcements), `get_record`, `providers` over the S shards and
//! the `search` fan-out start their work here and register it in
//! [`Pending`](super::pending::Pending) with a deadline; `events.rs` and
//! the verdicts in `event_loop.rs` finish it.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use libp2p::gossipsub::PublishError;
use libp2p::kad::{self, Quorum, RecordKey};
use libp2p::PeerId;
use tokio::sync::oneshot;
use tracing::warn;

use super::behaviour::records_topic;
use super::client::{
    Command, DhtOutcome, MeshStatus, PeerInfo, PublishReport, SearchEnd, SearchOutcome,
};
use super::event_loop::EventLoop;
use super::pending::{Deadline, PendingPublish, Slot};
use super::wire::{SearchRequest, MAX_TERM_BYTES};
use super::{agent_key, capability_key, MeshError};

impl EventLoop {
    pub(super) fn on_command(&mut self, cmd: Command) {
        match cmd {
            Command::ListenAddrs { reply } => {
                let _ = reply.send(Ok(self.listen_addrs()));
            }
            Command::Peers { reply } => {
                let _ = reply.send(Ok(self.peer_infos()));
            }
            Command::Status { reply } => {
                let _ = reply.send(Ok(self.status()));
            }
            Command::Publish {
                record,
                agent_id,
                capabilities,
                fresh,
                reply,
            } => self.publish(record, &agent_id, capabilities, fresh, reply),
            Command::Gossip { record, reply } => {
                let _ = reply.send(Ok(self.gossip(record)));
            }
            Command::StopProviding {
                capabilities,
                reply,
            } => {
                for c in capabilities {
                    let key = RecordKey::new(&capability_key(&c, self.own_shard));
                    self.swarm.behaviour_mut().kad.stop_providing(&key);
                    self.provided.remove(&key);
                }
                let _ = reply.send(Ok(()));
            }
            Command::GetRecord { agent_id, reply } => {
                let key = RecordKey::new(&agent_key(&agent_id));
                let query = self.swarm.behaviour_mut().kad.get_record(key);
                self.pending.add_get(query, reply);
                self.schedule(self.config.timeouts.lookup, Deadline::Get(query));
            }
            Command::Providers {
                capability,
                want,
                deadline,
                reply,
            } => {
                let id = self.pending.next_id();
                let kad = &mut self.swarm.behaviour_mut().kad;
                let queries = (0..self.config.shards)
                    .map(|s| kad.get_providers(RecordKey::new(&capability_key(&capability, s))))
                    .collect();
                let limit = want.clamp(1, self.config.limits.max_providers_result);
                self.pending
                    .add_providers(id, capability, queries, limit, reply);
                let deadline = deadline.min(self.config.timeouts.lookup);
                self.schedule(deadline, Deadline::Providers(id));
            }
            Command::Search {
                peers,
                request,
                deadline,
                end,
                reply,
            } => self.search(peers, request, deadline, end, reply),
            Command::PublishCheckpoint { message, reply } => {
                let _ = reply.send(Ok(self.publish_checkpoint(message)));
            }
            Command::LogRequest {
                peer,
                request,
                reply,
            } => self.send_log_request(peer, request, reply),
            Command::Dial { addr, reply } => {
                let r = self.swarm.dial(addr.clone()).map_err(|e| MeshError::Dial {
                    addr: addr.to_string(),
                    reason: dial_reason(&e),
                });
                let _ = reply.send(r);
            }
        }
    }

    fn peer_infos(&mut self) -> Vec<PeerInfo> {
        let gossip = &self.swarm.behaviour().gossipsub;
        let mut out: Vec<PeerInfo> = self
            .peers
            .iter()
            .map(|(peer, s)| PeerInfo {
                peer_id: *peer,
                addrs: if s.listen_addrs.is_empty() {
                    s.conn_addrs.clone()
                } else {
                    s.listen_addrs.clone()
                },
                protocols: s.protocols.clone(),
                agent_version: s.agent_version.clone(),
                gossip_score: gossip.peer_score(peer),
                provides: self
                    .provides
                    .get(peer)
                    .map(|c| c.iter().cloned().collect())
                    .unwrap_or_default(),
            })
            .collect();
        out.sort_by_key(|p| p.peer_id);
        out
    }

    fn status(&mut self) -> MeshStatus {
        use libp2p::kad::store::RecordStore;
        let connected_peers = self.swarm.network_info().num_peers();
        let b = self.swarm.behaviour_mut();
        let routing_table_peers = b.kad.kbuckets().map(|k| k.num_entries()).sum();
        let gossip_peers = b
            .gossipsub
            .all_peers()
            .filter(|(_, topics)| topics.contains(&&self.topic))
            .count();
        let gossip_mesh_peers = b.gossipsub.mesh_peers(&self.topic).count();
        let dht_records = b.kad.store_mut().records().count();
        let mut external_addresses: Vec<libp2p::Multiaddr> =
            self.swarm.external_addresses().cloned().collect();
        external_addresses.sort();
        MeshStatus {
            peer_id: self.local,
            connected_peers,
            routing_table_peers,
            gossip_peers,
            gossip_mesh_peers,
            dht_records,
            provided_keys: self.provided.len(),
            peer_provider_keys: self.provider_quota.keys_admitted(),
            external_addresses,
        }
    }

    fn routing_table_empty(&mut self) -> bool {
        self.swarm
            .behaviour_mut()
            .kad
            .kbuckets()
            .all(|k| k.num_entries() == 0)
    }

    /// Gossips `record` on the records topic, or keeps it for the first
    /// peer that subscribes (`unsent.rs`); `true` when it was gossiped.
    fn gossip(&mut self, record: Vec<u8>) -> bool {
        let topic = records_topic();
        match self
            .swarm
            .behaviour_mut()
            .gossipsub
            .publish(topic, record.clone())
        {
            Ok(_) => true,
            Err(PublishError::NoPeersSubscribedToTopic) => {
                self.unsent.push(tokio::time::Instant::now(), record);
                false
            }
            Err(PublishError::Duplicate) => false,
            Err(e) => {
                warn!(error = %e, "gossip publish failed");
                false
            }
        }
    }

    fn publish(
        &mut self,
        record: Vec<u8>,
        agent_id: &str,
        capabilities: Vec<String>,
        fresh: bool,
        reply: oneshot::Sender<Result<PublishReport, MeshError>>,
    ) {
        let topic = records_topic();
        let gossip = &mut self.swarm.behaviour_mut().gossipsub;
        let gossiped = fresh
            && match gossip.publish(topic, record.clone()) {
                Ok(_) => true,
                Err(PublishError::NoPeersSubscribedToTopic) => {
                    // Gossiped when a peer subscribes (`unsent.rs`).
                    self.unsent
                        .push(tokio::time::Instant::now(), record.clone());
                    false
                }
                Err(PublishError::Duplicate) => false,
                Err(e) => {
                    warn!(agent_id, error = %e, "gossip publish failed");
                    false
                }
            };
        let no_peers = self.routing_table_empty();
        let mut queries = Vec::new();
        let kad = &mut self.swarm.behaviour_mut().kad;
        let dht = kad::Record::new(RecordKey::new(&agent_key(agent_id)), record);
        let record = match kad.put_record(dht, Quorum::One) {
            Ok(_) if no_peers => Some(DhtOutcome::NoPeers),
            Ok(q) => {
                queries.push((q, Slot::Record));
                None
            }
            Err(e) => Some(DhtOutcome::Failed {
                reason: format!("local DHT store: {e:?}"),
            }),
        };
        let mut seen = HashSet::new();
        let mut caps = Vec::new();
        for cap in capabilities {
            if !seen.insert(cap.clone()) {
                continue;
            }
            let outcome = if caps.len() >= self.config.limits.max_capabilities_per_publish {
                Some(DhtOutcome::Failed {
                    reason: "over the per-publish capability bound".into(),
                })
            } else if cap.is_empty() || cap.len() > MAX_TERM_BYTES {
                Some(DhtOutcome::Failed {
                    reason: "capability empty or too long".into(),
                })
            } else {
                let key = RecordKey::new(&capability_key(&cap, self.own_shard));
                if !self.provided.insert(key.clone()) && !fresh {
                    caps.push((cap, Some(DhtOutcome::AlreadyProvided)));
                    continue;
                }
                match kad.start_providing(key) {
                    Ok(_) if no_peers => Some(DhtOutcome::NoPeers),
                    Ok(q) => {
                        queries.push((q, Slot::Capability(caps.len())));
                        None
                    }
                    Err(e) => Some(DhtOutcome::Failed {
                        reason: format!("local provider store: {e:?}"),
                    }),
                }
            };
            caps.push((cap, outcome));
        }
        let id = self.pending.next_id();
        let p = PendingPublish {
            reply,
            gossiped,
            record,
            capabilities: caps,
        };
        if self.pending.add_publish(id, p, queries) {
            self.schedule(self.config.timeouts.publish, Deadline::Publish(id));
        }
    }

    fn search(
        &mut self,
        peers: Vec<PeerId>,
        request: SearchRequest,
        deadline: Duration,
        end: SearchEnd,
        reply: oneshot::Sender<Result<SearchOutcome, MeshError>>,
    ) {
        if let Err(e) = request.check() {
            let _ = reply.send(Err(MeshError::InvalidRequest {
                reason: e.to_string(),
            }));
            return;
        }
        let limit = request.bounded_limit();
        let request = SearchRequest { limit, ..request };
        let mut outcome = SearchOutcome::default();
        let mut waiting = HashMap::new();
        let mut seen = HashSet::new();
        for peer in peers {
            if !seen.insert(peer) {
                continue;
            }
            if peer == self.local {
                outcome.failed.push((peer, "the local node".into()));
            } else if waiting.len() >= self.config.limits.max_search_fanout {
                outcome
                    .failed
                    .push((peer, "over the search fan-out bound".into()));
            } else {
                let id = self
                    .swarm
                    .behaviour_mut()
                    .search
                    .send_request(&peer, request.clone());
                self.peer_used(&peer);
                waiting.insert(id, peer);
            }
        }
        self.stats.requests_sent(waiting.len() as u64);
        let id = self.pending.next_id();
        if self
            .pending
            .add_search(id, waiting, outcome, (limit, end), reply)
        {
            self.schedule(deadline, Deadline::Search(id));
        }
    }
}

/// Why a dial failed, in words: a denial says by whom and why (libp2p
/// prints only "Dial error" for it).
fn dial_reason(error: &libp2p::swarm::DialError) -> String {
    match error {
        libp2p::swarm::DialError::Denied { cause } => match std::error::Error::source(cause) {
            Some(why) => format!("denied: {why}"),
            None => format!("denied: {cause}"),
        },
        other => other.to_string(),
    }
}
