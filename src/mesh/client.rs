//! [`MeshClient`]: the cheap, cloneable handle the rest of the node holds.
//! Each method sends one [`Command`] with a `oneshot` reply to the event
//! loop and awaits the answer; a closed channel (loop gone) is
//! [`MeshError::Shutdown`]. Counters are read directly from the shared
//! [`MeshStats`], without a round trip.

use std::time::Duration;

use libp2p::{Multiaddr, PeerId};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use super::log::{LogRequest, LogResponse};
use super::stats::{MeshStats, StatsSnapshot};
use super::wire::{SearchRequest, SearchResponse};
use super::MeshError;

/// What a connected peer told us about itself.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct PeerInfo {
    /// Its peer id.
    #[serde(serialize_with = "display")]
    #[schema(value_type = String)]
    pub peer_id: PeerId,
    /// Its listen addresses (from identify), else the connection addresses.
    #[serde(serialize_with = "display_all")]
    #[schema(value_type = Vec<String>)]
    pub addrs: Vec<Multiaddr>,
    /// The protocols it speaks (from identify).
    pub protocols: Vec<String>,
    /// Its identify agent version, once identified.
    pub agent_version: Option<String>,
    /// Its gossipsub score as we see it, when scored.
    pub gossip_score: Option<f64>,
    /// Capabilities our provider lookups found it providing (at most
    /// [`MAX_PROVIDES_PER_PEER`](super::MAX_PROVIDES_PER_PEER), the first
    /// seen).
    pub provides: Vec<String>,
}

fn display<S: serde::Serializer, T: std::fmt::Display>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

fn display_all<S: serde::Serializer, T: std::fmt::Display>(
    v: &[T],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|x| x.to_string()))
}

/// A snapshot of the mesh's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MeshStatus {
    /// Our peer id.
    #[serde(serialize_with = "display")]
    pub peer_id: PeerId,
    /// Peers with at least one established connection.
    pub connected_peers: usize,
    /// Peers in the Kademlia routing table.
    pub routing_table_peers: usize,
    /// Connected peers subscribed to the records topic.
    pub gossip_peers: usize,
    /// Peers in our gossipsub mesh for the records topic.
    pub gossip_mesh_peers: usize,
    /// Records in the local DHT store (ours and those we hold for others).
    pub dht_records: usize,
    /// Capability keys we provide.
    pub provided_keys: usize,
    /// Capability keys we hold provider records of peers for, as the
    /// quotas admitted them (`mesh/providers.rs`; a provider the store
    /// let expire is let go of at the next reconciliation).
    pub peer_provider_keys: usize,
    /// Our confirmed external addresses: what our provider records and
    /// identify tell peers to dial (`mesh/external.rs` says which).
    #[serde(serialize_with = "display_all")]
    pub external_addresses: Vec<Multiaddr>,
}

/// How a DHT write went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum DhtOutcome {
    /// Acknowledged by the closest peers reached (at least one for a
    /// record); they keep it once their handler accepts it.
    Stored,
    /// The routing table is empty: kept locally, published once peers come.
    NoPeers,
    /// The write failed.
    Failed {
        /// What failed.
        reason: String,
    },
    /// Still running at the publish deadline (it continues in background).
    TimedOut,
    /// Already provided by this node (a republish): the loop re-announces
    /// it on its timer.
    AlreadyProvided,
}

/// What [`MeshClient::publish`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PublishReport {
    /// The gossip went out to at least one peer (false: no subscribed peers
    /// yet, or the same bytes were gossiped within the duplicate window).
    /// A fresh record with no subscribed peer yet is kept and gossiped
    /// when a peer subscribes (for up to ten minutes).
    pub gossiped: bool,
    /// The DHT put of the record under its agent key.
    pub record: DhtOutcome,
    /// The provider announcement of each capability's shard key.
    pub capabilities: Vec<(String, DhtOutcome)>,
}

/// A record the mesh holds and is publishing
/// ([`MeshClient::start_publish`]).
#[derive(Debug)]
pub struct Publishing(oneshot::Receiver<Result<PublishReport, MeshError>>);

impl Publishing {
    /// What the publication did, once its DHT queries ended (at most the
    /// publish timeout).
    ///
    /// # Errors
    /// [`MeshError::Shutdown`] when the mesh stopped first.
    pub async fn finished(self) -> Result<PublishReport, MeshError> {
        self.0.await.map_err(|_| MeshError::Shutdown)?
    }
}

/// The result of a search fan-out.
#[derive(Debug, Clone, Default)]
pub struct SearchOutcome {
    /// Peers that answered, with their (bounded) answers.
    pub responses: Vec<(PeerId, SearchResponse)>,
    /// Peers whose request failed, with the reason.
    pub failed: Vec<(PeerId, String)>,
    /// Peers that had not answered by the deadline.
    pub timed_out: Vec<PeerId>,
    /// Peers not waited for: the answer was full first ([`SearchEnd::WhenFull`]).
    pub not_waited: Vec<PeerId>,
}

/// When a search fan-out answers, besides its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchEnd {
    /// When every peer asked has answered or failed.
    AllAnswered,
    /// As [`SearchEnd::AllAnswered`], or sooner, once the answer is full:
    /// the answers hold `limit` distinct records and at least half of the
    /// peers asked have answered. The ones still out are not waited for
    /// (their answers, when they come, are dropped). What the first
    /// answers hold is a page of the mesh's matches, not always its best
    /// page: the price of not waiting for the slowest peer.
    WhenFull,
}

type Reply<T> = oneshot::Sender<Result<T, MeshError>>;

/// A request to the event loop.
pub(crate) enum Command {
    ListenAddrs {
        reply: Reply<Vec<Multiaddr>>,
    },
    Peers {
        reply: Reply<Vec<PeerInfo>>,
    },
    Status {
        reply: Reply<MeshStatus>,
    },
    Publish {
        record: Vec<u8>,
        agent_id: String,
        capabilities: Vec<String>,
        /// A new record (gossiped, every capability announced) or a
        /// republished one (DHT only, keys already announced skipped).
        fresh: bool,
        reply: Reply<PublishReport>,
    },
    Gossip {
        record: Vec<u8>,
        reply: Reply<bool>,
    },
    StopProviding {
        capabilities: Vec<String>,
        reply: Reply<()>,
    },
    GetRecord {
        agent_id: String,
        reply: Reply<Option<Vec<u8>>>,
    },
    Providers {
        capability: String,
        want: usize,
        deadline: Duration,
        reply: Reply<Vec<PeerId>>,
    },
    Search {
        peers: Vec<PeerId>,
        request: SearchRequest,
        deadline: Duration,
        end: SearchEnd,
        reply: Reply<SearchOutcome>,
    },
    Dial {
        addr: Multiaddr,
        reply: Reply<()>,
    },
    PublishCheckpoint {
        message: Vec<u8>,
        reply: Reply<bool>,
    },
    LogRequest {
        peer: PeerId,
        request: LogRequest,
        reply: Reply<Result<LogResponse, String>>,
    },
}

/// The handle to a running mesh. Clone freely; when the last clone is
/// dropped the event loop shuts down.
#[derive(Clone)]
pub struct MeshClient {
    commands: mpsc::Sender<Command>,
    stats: MeshStats,
    peer_id: PeerId,
}

impl std::fmt::Debug for MeshClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeshClient")
            .field("peer_id", &self.peer_id)
            .finish_non_exhaustive()
    }
}

impl MeshClient {
    pub(crate) fn new(commands: mpsc::Sender<Command>, stats: MeshStats, peer_id: PeerId) -> Self {
        Self {
            commands,
            stats,
            peer_id,
        }
    }

    async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, MeshError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(make(tx))
            .await
            .map_err(|_| MeshError::Shutdown)?;
        rx.await.map_err(|_| MeshError::Shutdown)?
    }

    /// Our peer id.
    pub fn peer_id(&self) -> PeerId {
        self.peer_id
    }

    /// A copy of the mesh counters.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// The live mesh counters themselves (what `GET /metrics` reads at
    /// each scrape).
    pub fn stats_handle(&self) -> &MeshStats {
        &self.stats
    }

    /// The addresses we listen on, each ending in `/p2p/<our peer id>`:
    /// what another node passes as a bootstrap address.
    ///
    /// # Errors
    /// [`MeshError::Shutdown`] when the mesh has stopped.
    pub async fn listen_addrs(&self) -> Result<Vec<Multiaddr>, MeshError> {
        self.ask(|reply| Command::ListenAddrs { reply }).await
    }

    /// The connected peers.
    ///
    /// # Errors
    /// [`MeshError::Shutdown`] when the mesh has stopped.
    pub async fn peers(&self) -> Result<Vec<PeerInfo>, MeshError> {
        self.ask(|reply| Command::Peers { reply }).await
    }

    /// Counts of peers, routing table, gossip mesh and DHT store.
    ///
    /// # Errors
    /// [`MeshError::Shutdown`] when the mesh has stopped.
    pub async fn status(&self) -> Result<MeshStatus, MeshError> {
        self.ask(|reply| Command::Status { reply }).await
    }

    /// Gossips `record` (encoded `SignedRecord` bytes) on the records
    /// topic, puts it in the DHT under [`agent_key`](super::agent_key)`(agent_id)`
    /// (quorum one), and provides the shard key of each capability. Waits
    /// for the DHT writes up to the publish timeout; an empty DHT or no
    /// gossip peers is reported, not an error. Kademlia re-publishes the
    /// record, and the loop re-announces the capabilities, on a timer.
    ///
    /// # Errors
    /// [`MeshError::TooLarge`] for a record over the record limit;
    /// [`MeshError::Shutdown`].
    pub async fn publish(
        &self,
        record: Vec<u8>,
        agent_id: String,
        capabilities: Vec<String>,
    ) -> Result<PublishReport, MeshError> {
        self.publish_as(record, agent_id, capabilities, true).await
    }

    /// Puts a record peers have already seen back in the DHT (after a
    /// restart: Kademlia forgets what it published), and provides the
    /// capabilities this node does not provide yet. Not gossiped: the
    /// record is not news. Waits like [`MeshClient::publish`].
    ///
    /// # Errors
    /// As [`MeshClient::publish`].
    pub async fn republish(
        &self,
        record: Vec<u8>,
        agent_id: String,
        capabilities: Vec<String>,
    ) -> Result<PublishReport, MeshError> {
        self.publish_as(record, agent_id, capabilities, false).await
    }

    async fn publish_as(
        &self,
        record: Vec<u8>,
        agent_id: String,
        capabilities: Vec<String>,
        fresh: bool,
    ) -> Result<PublishReport, MeshError> {
        self.hand_over(record, agent_id, capabilities, fresh)
            .await?
            .finished()
            .await
    }

    /// Hands `record` to the mesh as [`MeshClient::publish`] does, and
    /// returns as soon as the mesh holds it: it is gossiped then (or when
    /// a peer subscribes), and its DHT put and provider announcements run
    /// on; [`Publishing::finished`] waits for them. Records handed over
    /// one after another are gossiped and put in that order, so a
    /// publisher need not wait on one record's DHT queries (up to the
    /// publish timeout) before the next is gossiped.
    ///
    /// # Errors
    /// [`MeshError::TooLarge`] over [`crate::record::MAX_RECORD_BYTES`];
    /// [`MeshError::Shutdown`] when the mesh has stopped.
    pub async fn start_publish(
        &self,
        record: Vec<u8>,
        agent_id: String,
        capabilities: Vec<String>,
    ) -> Result<Publishing, MeshError> {
        self.hand_over(record, agent_id, capabilities, true).await
    }

    async fn hand_over(
        &self,
        record: Vec<u8>,
        agent_id: String,
        capabilities: Vec<String>,
        fresh: bool,
    ) -> Result<Publishing, MeshError> {
        let max = crate::record::MAX_RECORD_BYTES;
        if record.len() > max {
            return Err(MeshError::TooLarge {
                size: record.len(),
                max,
            });
        }
        let (reply, rx) = oneshot::channel();
        self.commands
            .send(Command::Publish {
                record,
                agent_id,
                capabilities,
                fresh,
                reply,
            })
            .await
            .map_err(|_| MeshError::Shutdown)?;
        Ok(Publishing(rx))
    }

    /// Gossips `record` (encoded `SignedRecord` bytes) on the records
    /// topic only: nothing goes in the DHT, which holds agent records
    /// under agent keys (a liveness result). `true` when it was
    /// gossiped; with no gossip peer yet it waits for one (as
    /// [`MeshClient::publish`]'s gossip does) and answers `false`.
    ///
    /// # Errors
    /// [`MeshError::TooLarge`] for a record over the record limit;
    /// [`MeshError::Shutdown`].
    pub async fn gossip(&self, record: Vec<u8>) -> Result<bool, MeshError> {
        let max = crate::record::MAX_RECORD_BYTES;
        if record.len() > max {
            return Err(MeshError::TooLarge {
                size: record.len(),
                max,
            });
        }
        self.ask(|reply| Command::Gossip { record, reply }).await
    }

    /// Stops providing (and re-announcing) the shard keys of these
    /// capabilities; other nodes forget us when the records expire.
    ///
    /// # Errors
    /// [`MeshError::Shutdown`] when the mesh has stopped.
    pub async fn stop_providing(&self, capabilities: Vec<String>) -> Result<(), MeshError> {
        self.ask(|reply| Command::StopProviding {
            capabilities,
            reply,
        })
        .await
    }

    /// Looks `agent_id` up in the DHT: every record found (the local store
    /// first) goes to the handler as [`RecordOrigin::DhtGet`](super::RecordOrigin::DhtGet);
    /// the first it accepts is returned. `None` when nothing acceptable was
    /// found by the lookup deadline.
    ///
    /// # Errors
    /// [`MeshError::Shutdown`] when the mesh has stopped.
    pub async fn get_record(&self, agent_id: &str) -> Result<Option<Vec<u8>>, MeshError> {
        let agent_id = agent_id.to_owned();
        self.ask(|reply| Command::GetRecord { agent_id, reply })
            .await
    }

    /// Peers providing `capability`, from all S shards, merged, at most
    /// `max_providers_result`, within the lookup deadline.
    ///
    /// # Errors
    /// [`MeshError::Shutdown`] when the mesh has stopped.
    pub async fn providers(&self, capability: &str) -> Result<Vec<PeerId>, MeshError> {
        self.providers_up_to(capability, usize::MAX, Duration::MAX)
            .await
    }

    /// As [`MeshClient::providers`], answering as soon as `want` providers
    /// are known (a search that asks at most `want` peers need not wait
    /// for, nor pay for, the rest of the lookup) or at `deadline` (if
    /// sooner than the lookup timeout) with those found so far; the shard
    /// queries still running are stopped.
    ///
    /// # Errors
    /// [`MeshError::Shutdown`] when the mesh has stopped.
    pub async fn providers_up_to(
        &self,
        capability: &str,
        want: usize,
        deadline: Duration,
    ) -> Result<Vec<PeerId>, MeshError> {
        let capability = capability.to_owned();
        self.ask(|reply| Command::Providers {
            capability,
            want,
            deadline,
            reply,
        })
        .await
    }

    /// Sends `request` to `peers` at once (duplicates and our own id
    /// dropped, at most `max_search_fanout`) and returns when `end` says
    /// (all answered, or the answer full) or `deadline` passed, whichever
    /// is first; every peer ends up in exactly one of `responses`,
    /// `failed`, `timed_out`, `not_waited`.
    ///
    /// # Errors
    /// [`MeshError::Shutdown`] when the mesh has stopped.
    pub async fn search(
        &self,
        peers: Vec<PeerId>,
        request: SearchRequest,
        deadline: Duration,
        end: SearchEnd,
    ) -> Result<SearchOutcome, MeshError> {
        self.ask(|reply| Command::Search {
            peers,
            request,
            deadline,
            end,
            reply,
        })
        .await
    }

    /// Publishes `message` on the checkpoints topic: `true` when some
    /// peer subscribed to it was there to take it.
    ///
    /// # Errors
    /// [`MeshError::TooLarge`] over
    /// [`MAX_CHECKPOINT_MESSAGE_BYTES`](super::log::MAX_CHECKPOINT_MESSAGE_BYTES);
    /// [`MeshError::Shutdown`].
    pub async fn publish_checkpoint(&self, message: Vec<u8>) -> Result<bool, MeshError> {
        let max = super::log::MAX_CHECKPOINT_MESSAGE_BYTES;
        if message.len() > max {
            return Err(MeshError::TooLarge {
                size: message.len(),
                max,
            });
        }
        self.ask(|reply| Command::PublishCheckpoint { message, reply })
            .await
    }

    /// Asks `peer`'s log (`/agentmesh/log/1.0.0`). The inner `Err` says
    /// why no answer came (no connection, a timeout, an answer out of
    /// bounds); it is bounded by the request timeout.
    ///
    /// # Errors
    /// [`MeshError::Shutdown`] when the mesh has stopped.
    pub async fn log_request(
        &self,
        peer: PeerId,
        request: LogRequest,
    ) -> Result<Result<LogResponse, String>, MeshError> {
        self.ask(|reply| Command::LogRequest {
            peer,
            request,
            reply,
        })
        .await
    }

    /// Starts a dial (it completes in the background).
    ///
    /// # Errors
    /// [`MeshError::Dial`] when the dial cannot start; [`MeshError::Shutdown`].
    pub async fn dial(&self, addr: Multiaddr) -> Result<(), MeshError> {
        self.ask(|reply| Command::Dial { addr, reply }).await
    }
}
