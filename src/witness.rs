//! Witnessing peers' transparency logs over the mesh
//! (docs/protocol.md#witnessing).
//!
//! Every node publishes its log's checkpoint on the checkpoints topic
//! (`agentmesh/checkpoints/v1`) when it changed, at most once per
//! `log.witness_interval`, and again every ten intervals. Every node
//! witnesses the checkpoints it receives: opened under the publisher's
//! key (its peer id), each is compared with the last one held from that
//! peer:
//! - the same: nothing to do;
//! - larger: the peer is asked (`/agentmesh/log/1.0.0`) for the root of
//!   its tree at the size held and the consistency proof from there; a
//!   proven extension is kept, cosigned (C2SP tlog-cosignature, witness
//!   name `agentmesh/<own peer id>`) and the cosignature handed back to
//!   the peer; a proof that leads nowhere proves nothing (`unproven`,
//!   asked again at the next checkpoint);
//! - smaller: asked the other way round; a consistent one is a late copy;
//! - two roots for one size, or a proven prefix that is not the one held:
//!   an [`Equivocation`], kept (one per peer, in the store), gossiped on
//!   the same topic, shown by `GET /peers` and `GET /log/equivocations`.
//!   Received proofs are verified before they are kept or forwarded.
//!
//! **Repair from the log.** A proven extension also tells a node which
//! of the peer's records it may have missed: it asks the peer for the
//! leaf hashes of the new entries (up to [`MAX_REPAIR`] a checkpoint; the
//! rest at the next one), compares them with the hashes of the records
//! it received lately ([`Witness::note_record`], the last
//! [`MAX_RECENT`]), fetches the missing entries and hands each to the
//! node's judge as if gossiped ([`Witness::set_repair`]). A record lost in
//! gossip is so repaired by the peer's next checkpoint, within about one
//! `p2p.witness_interval`. At the first checkpoint held from a peer (a
//! node that just joined, or a peer never witnessed) the last
//! [`MAX_REPAIR`] entries are looked at; a repair that stopped at
//! [`MAX_REPAIR`] goes on at the next checkpoint, changed or not.
//!
//! The other way round (`witness/serve.rs`), the node answers its
//! peers' log requests and keeps the cosignatures witnesses hand it
//! for its own recent checkpoints (in memory, for the last
//! [`MAX_COSIGNED_SIZES`] sizes), and `GET /log/checkpoint?witnesses=N`
//! serves the newest checkpoint with at least N of them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use libp2p::PeerId;
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;
use tokio_util::sync::CancellationToken;

use crate::mesh::log::{MAX_ENTRIES, MAX_LEAF_HASHES};
use crate::mesh::{LogRequest, LogResponse, MeshClient, Verdict};
use crate::store::witness::{EQUIVOCATION, SEEN};
use crate::store::Store;
use crate::tlog::witness::{relate, Equivocation, Relation};
use crate::tlog::{cosign, note::verifier_key, Checkpoint, Hash, Notary};

mod catch_up;
mod serve;

/// Peers whose last checkpoint is held (a peer beyond it is not
/// witnessed until restart frees room).
pub const MAX_WITNESSED_PEERS: usize = 4096;
/// Equivocation proofs kept (a node that equivocates with many keys
/// fills no more).
pub const MAX_EQUIVOCATIONS: usize = 4096;
/// Own checkpoint sizes whose cosignatures are kept.
pub const MAX_COSIGNED_SIZES: usize = 16;
/// Cosignatures kept per checkpoint.
pub const MAX_COSIGNATURES: usize = 256;
/// Most entries of a peer's log looked at per checkpoint for repair.
pub const MAX_REPAIR: u64 = 1024;
/// Hashes of records received lately, kept to tell what a peer's log
/// holds that this node missed.
pub const MAX_RECENT: usize = 65_536;
/// A checkpoint unchanged is published again after this many intervals.
const HEARTBEAT_INTERVALS: u32 = 10;

/// A message of the checkpoints topic (CBOR).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TopicMessage {
    /// A log's checkpoint, the signed note.
    Checkpoint {
        /// The note.
        note: ByteBuf,
    },
    /// Evidence that a log signed two histories.
    Equivocation(Equivocation),
}

impl TopicMessage {
    /// A message from its CBOR bytes (at most
    /// [`MAX_CHECKPOINT_MESSAGE_BYTES`](crate::mesh::log::MAX_CHECKPOINT_MESSAGE_BYTES)).
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() > crate::mesh::log::MAX_CHECKPOINT_MESSAGE_BYTES {
            return None;
        }
        ciborium::from_reader(bytes).ok()
    }

    /// The CBOR bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        ciborium::into_writer(self, &mut out).expect("a topic message encodes");
        out
    }
}

/// What the witness has done, for `GET /peers`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct WitnessCounts {
    /// Checkpoints received from peers.
    pub checkpoints: u64,
    /// Of those, cosigned (a proven extension, or a first one).
    pub cosigned: u64,
    /// Of those, whose peer did not prove its log (no answer, or a proof
    /// that leads nowhere).
    pub unproven: u64,
    /// Cosignatures other witnesses handed this node, kept.
    pub cosignatures_received: u64,
    /// Equivocation proofs kept (found here or received).
    pub equivocations: u64,
    /// Entries of peers' logs fetched because no record with their hash
    /// had arrived, and handed to the judge.
    pub repaired: u64,
}

/// Where repaired records go: the node's judge, as for a gossiped record.
pub type Repair = Arc<dyn Fn(Vec<u8>, PeerId) -> BoxFuture<'static, ()> + Send + Sync>;

/// The witness's settings.
#[derive(Debug, Clone)]
pub struct WitnessOptions {
    /// How often the node's own checkpoint is published when it changed.
    pub interval: Duration,
    /// Test hook (feature `testbed` only): publish each checkpoint twice,
    /// the second with another root, as a log showing two histories would.
    pub split_view: bool,
}

struct Seen {
    checkpoint: Checkpoint,
    note: String,
    /// Entries before this index were looked at for repair.
    fetched: u64,
}

/// Hashes of the records received lately, oldest first out.
#[derive(Default)]
struct Recent {
    order: std::collections::VecDeque<[u8; 32]>,
    set: std::collections::HashSet<[u8; 32]>,
}

impl State {
    /// Keeps a verified equivocation proof (whose peer id therefore
    /// carries an Ed25519 key).
    fn hold(&mut self, e: Equivocation) {
        if let Some(key) = crate::identity::key_of_peer_id(&e.peer) {
            self.equivocated_keys.insert(key.to_bytes());
        }
        self.equivocations.insert(e.peer.clone(), e);
    }
}

impl Recent {
    fn insert(&mut self, hash: [u8; 32]) {
        if self.set.insert(hash) {
            self.order.push_back(hash);
            if self.order.len() > MAX_RECENT {
                if let Some(old) = self.order.pop_front() {
                    self.set.remove(&old);
                }
            }
        }
    }
}

#[derive(Default)]
struct State {
    seen: HashMap<PeerId, Seen>,
    /// One check at a time per peer: its checkpoints wait their turn.
    turns: HashMap<PeerId, Arc<tokio::sync::Mutex<()>>>,
    /// Own checkpoints' cosignatures: size -> (root, witness -> line).
    cosigned: BTreeMap<u64, (Hash, BTreeMap<String, String>)>,
    equivocations: BTreeMap<String, Equivocation>,
    /// The keys of `equivocations`' peers: what the judge asks about each
    /// record it judges.
    equivocated_keys: std::collections::HashSet<[u8; 32]>,
    recent: Recent,
    counts: WitnessCounts,
}

/// The node's witness. Cheap to share behind an `Arc`.
pub struct Witness {
    store: Store,
    notary: Arc<Notary>,
    own: PeerId,
    name: String,
    options: WitnessOptions,
    mesh: OnceLock<MeshClient>,
    repair: OnceLock<Repair>,
    state: Mutex<State>,
}

impl std::fmt::Debug for Witness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Witness").field("name", &self.name).finish()
    }
}

/// The witness name of a peer: `agentmesh/<peer id>`.
pub fn witness_name(peer: &PeerId) -> String {
    Notary::default_origin(&peer.to_string())
}

/// Opens a checkpoint note signed by `peer`'s key for the origin it
/// names.
fn open_from(peer: &PeerId, note: &[u8]) -> Option<Checkpoint> {
    let key = crate::identity::key_of_peer_id(&peer.to_string())?;
    let origin = std::str::from_utf8(note).ok()?.lines().next()?;
    Checkpoint::open(note, &verifier_key(origin, &key), Some(origin)).ok()
}

impl Witness {
    /// A witness for the node of `notary` (whose key is the node's peer
    /// identity), keeping its state in `store`; what it held before a
    /// restart is read back.
    ///
    /// # Errors
    /// The store's, reading the kept state.
    pub fn new(
        store: Store,
        notary: Arc<Notary>,
        options: WitnessOptions,
    ) -> Result<Self, crate::store::StoreError> {
        let own_id = crate::identity::peer_id_of(notary.key());
        let own: PeerId = own_id.parse().expect("a node key makes a peer id");
        let mut state = State::default();
        for (peer, note) in store.blocking().witnessed(SEEN)? {
            let Ok(peer) = peer.parse::<PeerId>() else {
                continue;
            };
            if let Some(checkpoint) = open_from(&peer, &note) {
                let note = String::from_utf8_lossy(&note).into_owned();
                let fetched = checkpoint.size;
                state.seen.insert(
                    peer,
                    Seen {
                        checkpoint,
                        note,
                        fetched,
                    },
                );
            }
        }
        for (_, json) in store.blocking().witnessed(EQUIVOCATION)? {
            if let Ok(e) = serde_json::from_slice::<Equivocation>(&json) {
                if e.verify().is_ok() {
                    state.hold(e);
                }
            }
        }
        Ok(Self {
            store,
            notary,
            name: witness_name(&own),
            own,
            options,
            mesh: OnceLock::new(),
            repair: OnceLock::new(),
            state: Mutex::new(state),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Gives the witness the mesh it asks and publishes through (the mesh
    /// is started after the handler that holds the witness).
    pub fn set_mesh(&self, mesh: MeshClient) {
        let _ = self.mesh.set(mesh);
    }

    /// Hands repaired records to `repair` (the node's judge).
    pub fn set_repair(&self, repair: Repair) {
        let _ = self.repair.set(repair);
    }

    /// Notes that a record (its encoded bytes) arrived from the mesh: a
    /// peer's log entry with its hash need not be fetched.
    pub fn note_record(&self, record: &[u8]) {
        let hash = crate::tlog::leaf_hash(record);
        self.state().recent.insert(hash.0);
    }

    /// What the witness has done.
    pub fn counts(&self) -> WitnessCounts {
        let state = self.state();
        WitnessCounts {
            equivocations: state.equivocations.len() as u64,
            ..state.counts
        }
    }

    /// The equivocation proofs kept, by peer.
    pub fn equivocations(&self) -> Vec<Equivocation> {
        self.state().equivocations.values().cloned().collect()
    }

    /// Whether the key of `peer` was caught equivocating.
    pub fn equivocated_key(&self, key: &ed25519_dalek::VerifyingKey) -> bool {
        self.state().equivocated_keys.contains(key.as_bytes())
    }

    /// The newest own checkpoint with at least `n` witness cosignatures:
    /// the signed note with their lines added.
    pub fn cosigned_checkpoint(&self, n: usize) -> Option<Vec<u8>> {
        let state = self.state();
        let (size, (root, lines)) = state
            .cosigned
            .iter()
            .rev()
            .find(|(_, (_, lines))| lines.len() >= n)?;
        let mut note = self.notary.sign(*size, *root).to_vec();
        for line in lines.values() {
            note.extend_from_slice(line.as_bytes());
            note.push(b'\n');
        }
        Some(note)
    }

    /// Publishes the node's checkpoint every `interval` while it changes
    /// (and every ten intervals anyway), until `cancel`.
    pub fn spawn_publisher(
        self: &Arc<Self>,
        cancel: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut last: Option<(u64, Hash)> = None;
            let mut quiet = 0u32;
            let mut met = catch_up::Met::default();
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(this.options.interval) => {}
                }
                let Some(mesh) = this.mesh.get() else {
                    continue;
                };
                this.ask_peers_met(mesh, &mut met).await;
                let head = this.store.run_blocking(|s| s.log_head()).await;
                let Ok(Ok((size, root))) = head else { continue };
                quiet += 1;
                if size == 0 || (last == Some((size, root)) && quiet < HEARTBEAT_INTERVALS) {
                    continue;
                }
                let note = this.notary.sign(size, root);
                let message = TopicMessage::Checkpoint {
                    note: ByteBuf::from(note.to_vec()),
                };
                if matches!(mesh.publish_checkpoint(message.encode()).await, Ok(true)) {
                    last = Some((size, root));
                    quiet = 0;
                }
                if this.options.split_view {
                    this.publish_split_view(mesh, size, root).await;
                }
            }
        })
    }

    /// The test hook: the same size signed again with another root.
    async fn publish_split_view(&self, mesh: &MeshClient, size: u64, root: Hash) {
        use sha2::{Digest, Sha256};
        let mut other = Sha256::new();
        other.update(b"agentmesh/test/split-view");
        other.update(root.0);
        let note = self.notary.sign(size, Hash(other.finalize().into()));
        let message = TopicMessage::Checkpoint {
            note: ByteBuf::from(note.to_vec()),
        };
        let _ = mesh.publish_checkpoint(message.encode()).await;
    }

    /// Judges a message of the checkpoints topic (see the module doc).
    pub fn on_message(
        self: &Arc<Self>,
        message: Vec<u8>,
        author: PeerId,
    ) -> BoxFuture<'static, Verdict> {
        let this = self.clone();
        async move {
            let Some(message) = TopicMessage::decode(&message) else {
                return Verdict::Reject("malformed");
            };
            match message {
                TopicMessage::Checkpoint { note } => {
                    this.on_checkpoint(note.into_vec(), author).await
                }
                TopicMessage::Equivocation(e) => this.on_equivocation(e).await,
            }
        }
        .boxed()
    }

    async fn on_checkpoint(&self, note: Vec<u8>, author: PeerId) -> Verdict {
        if author == self.own {
            return Verdict::Ignore("own");
        }
        let Some(new) = open_from(&author, &note) else {
            return Verdict::Reject("bad_checkpoint");
        };
        let note = String::from_utf8_lossy(&note).into_owned();
        let turn = {
            let mut state = self.state();
            state.counts.checkpoints += 1;
            if !state.seen.contains_key(&author) && state.seen.len() >= MAX_WITNESSED_PEERS {
                return Verdict::Ignore("witness_full");
            }
            if state.turns.len() >= MAX_WITNESSED_PEERS && !state.turns.contains_key(&author) {
                state.turns.retain(|_, t| Arc::strong_count(t) > 1);
            }
            state.turns.entry(author).or_default().clone()
        };
        let _turn = turn.lock().await;
        let old = self
            .state()
            .seen
            .get(&author)
            .map(|s| (s.checkpoint.clone(), s.note.clone(), s.fetched));
        self.check(author, old, new, note).await
    }

    /// Compares `new` with `old` (see the module doc) and acts on it.
    async fn check(
        &self,
        author: PeerId,
        old: Option<(Checkpoint, String, u64)>,
        new: Checkpoint,
        note: String,
    ) -> Verdict {
        let peer = author.to_string();
        let relation = match &old {
            None => Some(Relation::Extends),
            Some((o, o_note, _)) if new.size >= o.size => {
                let answer = self.ask_consistency(author, o.size, new.size).await;
                answer.and_then(|(prefix, proof)| {
                    relate(&peer, (o, o_note), (&new, &note), prefix, &proof)
                })
            }
            Some((o, o_note, _)) => {
                // A smaller one: a late copy, if the held one extends it.
                let answer = self.ask_consistency(author, new.size, o.size).await;
                return match answer.and_then(|(prefix, proof)| {
                    relate(&peer, (&new, &note), (o, o_note), prefix, &proof)
                }) {
                    Some(Relation::Forked(e)) => self.keep_equivocation(e, true).await,
                    Some(_) => Verdict::Ignore("stale"),
                    None => self.unproven(),
                };
            }
        };
        match relation {
            Some(relation @ (Relation::Same | Relation::Extends)) => {
                let size = new.size;
                // A first checkpoint: its last entries; else from where
                // the last repair stopped, also at an unchanged one.
                let from = old
                    .as_ref()
                    .map_or(size.saturating_sub(MAX_REPAIR), |o| o.2);
                let to = size.min(from.saturating_add(MAX_REPAIR));
                let extends = matches!(relation, Relation::Extends);
                if extends || from < to {
                    self.keep_seen(author, new, note.clone(), to).await;
                }
                if extends {
                    self.cosign_and_hand_back(author, note).await;
                }
                if from < to {
                    self.repair_from(author, from, to).await;
                }
                Verdict::Accept
            }
            Some(Relation::Forked(e)) => self.keep_equivocation(e, true).await,
            None => self.unproven(),
        }
    }

    fn unproven(&self) -> Verdict {
        self.state().counts.unproven += 1;
        Verdict::Ignore("unproven")
    }

    /// The peer's root at `from` and its proof to `to`, if it answers.
    async fn ask_consistency(&self, peer: PeerId, from: u64, to: u64) -> Option<(Hash, Vec<Hash>)> {
        if from == to {
            return Some((Hash([0; 32]), Vec::new()));
        }
        let mesh = self.mesh.get()?;
        let answer = mesh
            .log_request(peer, LogRequest::Consistency { from, to })
            .await
            .ok()?
            .ok()?;
        let LogResponse::Consistency { prefix_root, proof } = answer else {
            return None;
        };
        let hash = |b: &ByteBuf| Some(Hash(b.as_slice().try_into().ok()?));
        Some((
            hash(&prefix_root)?,
            proof.iter().map(hash).collect::<Option<_>>()?,
        ))
    }

    async fn keep_seen(&self, peer: PeerId, checkpoint: Checkpoint, note: String, fetched: u64) {
        let bytes = note.clone().into_bytes();
        let key = peer.to_string();
        let kept = self
            .store
            .run_blocking(move |s| s.put_witnessed(SEEN, &key, &bytes))
            .await;
        if !matches!(kept, Ok(Ok(()))) {
            tracing::warn!(%peer, "could not keep a witnessed checkpoint");
        }
        self.state().seen.insert(
            peer,
            Seen {
                checkpoint,
                note,
                fetched,
            },
        );
    }

    /// Fetches the entries `from .. to` of `peer`'s log whose hashes no
    /// record received lately has, and hands them to the judge.
    async fn repair_from(&self, peer: PeerId, from: u64, to: u64) {
        let (Some(mesh), Some(repair)) = (self.mesh.get(), self.repair.get()) else {
            return;
        };
        let count = u32::try_from(to - from).unwrap_or(MAX_LEAF_HASHES);
        let request = LogRequest::LeafHashes { start: from, count };
        let Ok(Ok(LogResponse::LeafHashes { hashes })) = mesh.log_request(peer, request).await
        else {
            return;
        };
        let missing: Vec<(u64, Hash)> = {
            let state = self.state();
            (from..)
                .zip(&hashes)
                .filter_map(|(i, h)| Some((i, Hash(h.as_slice().try_into().ok()?))))
                .filter(|(_, h)| !state.recent.set.contains(&h.0))
                .collect()
        };
        for chunk in missing.chunks(MAX_ENTRIES) {
            let indexes = chunk.iter().map(|(i, _)| *i).collect();
            let request = LogRequest::Entries { indexes };
            let Ok(Ok(LogResponse::Entries { entries })) = mesh.log_request(peer, request).await
            else {
                return;
            };
            for ((_, hash), entry) in chunk.iter().zip(entries) {
                let entry = entry.into_vec();
                // What the peer proved it logged, and a record: not a
                // sealed entry nor a suspension.
                if crate::tlog::leaf_hash(&entry) != *hash
                    || entry.starts_with(crate::tlog::SEALED_PREFIX)
                    || entry.starts_with(crate::tlog::SUSPENSION_PREFIX)
                {
                    continue;
                }
                self.state().counts.repaired += 1;
                repair(entry, peer).await;
            }
        }
    }

    async fn cosign_and_hand_back(&self, peer: PeerId, note: String) {
        let now = crate::record::unix_now();
        let Ok(cosigned) = cosign::cosign(note.as_bytes(), &self.name, self.notary.key(), now)
        else {
            return;
        };
        self.state().counts.cosigned += 1;
        let Some(mesh) = self.mesh.get() else { return };
        let request = LogRequest::Cosignature {
            note: ByteBuf::from(cosigned),
        };
        match mesh.log_request(peer, request).await {
            Ok(Ok(LogResponse::Cosigned)) => {}
            other => tracing::debug!(%peer, answer = ?other, "cosignature not taken"),
        }
    }

    /// Keeps `e` if it is the first for its peer and holds; gossips it
    /// when `spread`.
    async fn keep_equivocation(&self, e: Equivocation, spread: bool) -> Verdict {
        if e.verify().is_err() {
            return Verdict::Reject("bad_equivocation");
        }
        {
            let mut state = self.state();
            if state.equivocations.contains_key(&e.peer) {
                return Verdict::Accept;
            }
            if state.equivocations.len() >= MAX_EQUIVOCATIONS {
                return Verdict::Ignore("equivocations_full");
            }
            state.hold(e.clone());
        }
        tracing::warn!(peer = %e.peer, "a peer's log equivocates: two checkpoints that cannot both be true");
        let json = serde_json::to_vec(&e).expect("an equivocation serialises");
        let key = e.peer.clone();
        let _ = self
            .store
            .run_blocking(move |s| s.put_witnessed(EQUIVOCATION, &key, &json))
            .await;
        if spread {
            if let Some(mesh) = self.mesh.get() {
                let _ = mesh
                    .publish_checkpoint(TopicMessage::Equivocation(e).encode())
                    .await;
            }
        }
        Verdict::Accept
    }

    async fn on_equivocation(&self, e: Equivocation) -> Verdict {
        // Received: kept and forwarded by gossipsub itself on Accept.
        self.keep_equivocation(e, false).await
    }
}
