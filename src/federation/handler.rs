//! The node's side of the mesh ([`MeshHandler`]): records from peers go
//! through the [`Judge`]; searches from peers are answered by the
//! answering half of federated search ([`crate::search::answer`]: this
//! node's index, signed records the asker verifies itself); checkpoints
//! and log requests go to the node's [`Witness`], when it has one.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use libp2p::PeerId;

use super::reverify::Reverifier;
use super::{Judge, Judgement};
use crate::mesh::wire::{SearchRequest, SearchResponse};
use crate::mesh::{LogRequest, LogResponse, MeshHandler, RecordOrigin, Verdict};
use crate::registry::Registry;
use crate::witness::Witness;

/// Judges inbound records and answers peers' searches.
pub struct NodeHandler {
    judge: Arc<Judge>,
    registry: Registry,
    reverify: Arc<Reverifier>,
    witness: Option<Arc<Witness>>,
    /// Test hook: the share, in percent, of the records the mesh offers
    /// (gossip, DHT puts) dropped unjudged, so that only repair from
    /// peers' logs brings them.
    drop_offered: u8,
    /// Mixed into the hook's choice, so nodes drop different records.
    drop_salt: u64,
}

impl NodeHandler {
    /// A handler storing through `judge`, answering from `registry`; ADP
    /// agents vouched for by untrusted attesters are handed to `reverify`
    /// (rate-limited per peer and per signer).
    pub fn new(judge: Arc<Judge>, registry: Registry, reverify: Arc<Reverifier>) -> Self {
        Self {
            judge,
            registry,
            reverify,
            witness: None,
            drop_offered: 0,
            drop_salt: rand::random(),
        }
    }

    /// The test hook (feature `testbed`, `AGENTMESH_TEST_DROP_OFFERED`):
    /// drop `percent` of the records the mesh offers (gossip, DHT puts),
    /// chosen by a hash of the record and of a salt of this handler's, so
    /// every offer of a dropped record is dropped here and other nodes
    /// drop other records.
    pub fn dropping_offered(mut self, percent: u8) -> Self {
        self.drop_offered = percent.min(100);
        self
    }

    fn drops(&self, bytes: &[u8]) -> bool {
        use sha2::{Digest, Sha256};
        if self.drop_offered == 0 {
            return false;
        }
        let mut h = Sha256::new();
        h.update(self.drop_salt.to_be_bytes());
        h.update(bytes);
        let draw = u32::from(h.finalize()[0]) * 100 / 256;
        draw < u32::from(self.drop_offered)
    }

    /// Judges a record fetched from `from`'s log for repair, as a gossiped
    /// one.
    pub fn repaired(&self, bytes: &[u8], from: PeerId) -> Verdict {
        let verdict = self.act(bytes, from, &RecordOrigin::Gossip { author: Some(from) });
        self.note_arrived(bytes, &verdict);
        verdict
    }

    /// A record that arrived (held now, or valid) needs no repair from
    /// any peer's log: the witness notes its hash.
    fn note_arrived(&self, bytes: &[u8], verdict: &Verdict) {
        let arrived = matches!(
            verdict,
            Verdict::Accept | Verdict::Ignore("duplicate" | "stale_seq" | "outranked")
        );
        if let (true, Some(witness)) = (arrived, &self.witness) {
            witness.note_record(bytes);
        }
    }

    /// Hands the checkpoints topic and the log protocol to `witness`.
    pub fn with_witness(mut self, witness: Option<Arc<Witness>>) -> Self {
        self.witness = witness;
        self
    }

    fn handle(&self, bytes: &[u8], from: PeerId, origin: &RecordOrigin) -> Verdict {
        if !matches!(origin, RecordOrigin::DhtGet { .. }) && self.drops(bytes) {
            return Verdict::Ignore("test_drop");
        }
        let verdict = self.act(bytes, from, origin);
        self.note_arrived(bytes, &verdict);
        verdict
    }

    fn act(&self, bytes: &[u8], from: PeerId, origin: &RecordOrigin) -> Verdict {
        // A DHT value must sit under its agent's key.
        let dht_key = match origin {
            RecordOrigin::DhtPut { key } | RecordOrigin::DhtGet { key } => Some(key.as_slice()),
            RecordOrigin::Gossip { .. } => None,
        };
        // What we looked up is always kept; what peers offer, as configured.
        let judgement = match origin {
            RecordOrigin::DhtGet { .. } => self.judge.judge_under(bytes, dht_key),
            _ => self.judge.judge_offered(bytes, dht_key),
        };
        match judgement {
            Judgement::Stored {
                reverify, signer, ..
            } => {
                if let Some(domain) = reverify {
                    self.reverify.request(domain, Some(from), signer);
                }
                Verdict::Accept
            }
            // Valid, but this node holds the agent as it verified it (or a
            // trusted peer did): not stored, not an offence; a document
            // that changed is looked at by this node's own crawler.
            Judgement::Outranked { reverify, signer } => {
                if let Some(domain) = reverify {
                    self.reverify.request(domain, Some(from), signer);
                }
                Verdict::Ignore("outranked")
            }
            // Already held: valid, but gossip need not carry it further.
            Judgement::Duplicate => match origin {
                RecordOrigin::Gossip { .. } => Verdict::Ignore("duplicate"),
                _ => Verdict::Accept,
            },
            // Valid: pass it on (and let the DHT hold it), without storing.
            Judgement::NotKept => Verdict::Accept,
            Judgement::Stale => Verdict::Ignore("stale_seq"),
            Judgement::Unverifiable(reason) => Verdict::Ignore(reason.as_str()),
            // Over a quota, no room here, or a liveness result too old
            // or with no room: valid, and no fault of the relay.
            Judgement::Refused(
                reason @ (super::Refusal::SignerQuota
                | super::Refusal::ClaimsFull
                | super::Refusal::NoRoom
                | super::Refusal::Equivocated
                | super::Refusal::LivenessTooOld
                | super::Refusal::LivenessFull),
            ) => Verdict::Ignore(reason.as_str()),
            Judgement::Refused(reason) => Verdict::Reject(reason.as_str()),
        }
    }
}

/// The shared handler, as the mesh takes it.
pub struct SharedHandler(pub Arc<NodeHandler>);

impl MeshHandler for SharedHandler {
    fn on_record(
        &self,
        record: Vec<u8>,
        from: PeerId,
        origin: RecordOrigin,
    ) -> BoxFuture<'static, Verdict> {
        let handler = self.0.clone();
        // sled and signature checks are short and blocking: keep them off
        // the async workers.
        async move {
            tokio::task::spawn_blocking(move || handler.handle(&record, from, &origin))
                .await
                .unwrap_or(Verdict::Ignore("handler_panicked"))
        }
        .boxed()
    }

    fn on_search(
        &self,
        request: SearchRequest,
        _from: PeerId,
    ) -> BoxFuture<'static, SearchResponse> {
        let handler = self.0.clone();
        async move { crate::search::answer(&handler.registry, &request).await }.boxed()
    }

    fn on_checkpoint(
        &self,
        message: Vec<u8>,
        author: PeerId,
        _from: PeerId,
    ) -> BoxFuture<'static, Verdict> {
        match &self.0.witness {
            Some(w) => w.on_message(message, author),
            None => std::future::ready(Verdict::Ignore("no_witness")).boxed(),
        }
    }

    fn on_log_request(&self, request: LogRequest, from: PeerId) -> BoxFuture<'static, LogResponse> {
        match &self.0.witness {
            Some(w) => w.on_request(request, from),
            None => std::future::ready(LogResponse::refused("no log here")).boxed(),
        }
    }
}
