//! The witness's other side: answering peers' log requests
//! (`/agentmesh/log/1.0.0`) from this node's durable log, and keeping the
//! cosignatures witnesses hand back for its own checkpoints.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use libp2p::PeerId;
use serde_bytes::ByteBuf;

use super::{open_from, witness_name, Witness, MAX_COSIGNATURES, MAX_COSIGNED_SIZES};
use crate::mesh::log::{MAX_ENTRIES, MAX_LEAF_HASHES};
use crate::mesh::{LogRequest, LogResponse};
use crate::tlog::{cosign, Hash};

impl Witness {
    /// Answers a peer's log request: a consistency proof of this node's
    /// durable log, its leaf hashes or entries, its newest checkpoint, or
    /// a witness's cosignature on one of its checkpoints.
    pub fn on_request(
        self: &Arc<Self>,
        request: LogRequest,
        from: PeerId,
    ) -> BoxFuture<'static, LogResponse> {
        let this = self.clone();
        async move {
            match request {
                LogRequest::Consistency { from: m, to } => this.prove(m, to).await,
                LogRequest::LeafHashes { start, count } => this.leaf_hashes(start, count).await,
                LogRequest::Entries { indexes } => this.entries(indexes).await,
                LogRequest::Cosignature { note } => this.take_cosignature(&note, from).await,
                LogRequest::Checkpoint => this.newest_checkpoint().await,
            }
        }
        .boxed()
    }

    async fn prove(&self, from: u64, to: u64) -> LogResponse {
        let answer = self
            .store
            .run_blocking(
                move |s| -> Result<Result<(Hash, Vec<Hash>), String>, crate::store::StoreError> {
                    let root = match s.log_root(from)? {
                        Ok(root) => root,
                        Err(e) => return Ok(Err(e.0)),
                    };
                    Ok(s.log_consistency(from, to)?
                        .map(|p| (root, p))
                        .map_err(|e| e.0))
                },
            )
            .await;
        match answer {
            Ok(Ok(Ok((root, proof)))) => LogResponse::Consistency {
                prefix_root: ByteBuf::from(root.0.to_vec()),
                proof: proof.iter().map(|h| ByteBuf::from(h.0.to_vec())).collect(),
            },
            Ok(Ok(Err(beyond))) => LogResponse::refused(beyond),
            _ => LogResponse::refused("the store failed"),
        }
    }

    async fn newest_checkpoint(&self) -> LogResponse {
        match self.store.run_blocking(|s| s.log_head()).await {
            Ok(Ok((0, _))) => LogResponse::refused("the log is empty"),
            Ok(Ok((size, root))) => LogResponse::Checkpoint {
                note: ByteBuf::from(self.notary.sign(size, root).to_vec()),
            },
            _ => LogResponse::refused("the store failed"),
        }
    }

    async fn leaf_hashes(&self, start: u64, count: u32) -> LogResponse {
        if count > MAX_LEAF_HASHES {
            return LogResponse::refused("too many hashes asked for");
        }
        let answer = self
            .store
            .run_blocking(move |s| s.log_leaf_hashes(start, u64::from(count)))
            .await;
        match answer {
            Ok(Ok(Ok(hashes))) => LogResponse::LeafHashes {
                hashes: hashes.iter().map(|h| ByteBuf::from(h.0.to_vec())).collect(),
            },
            Ok(Ok(Err(beyond))) => LogResponse::refused(beyond.0),
            _ => LogResponse::refused("the store failed"),
        }
    }

    async fn entries(&self, indexes: Vec<u64>) -> LogResponse {
        if indexes.len() > MAX_ENTRIES {
            return LogResponse::refused("too many entries asked for");
        }
        let answer = self
            .store
            .run_blocking(move |s| {
                indexes
                    .iter()
                    .map(|i| s.log_entry(*i))
                    .collect::<Result<Option<Vec<_>>, _>>()
            })
            .await;
        match answer {
            Ok(Ok(Some(entries))) => LogResponse::Entries {
                entries: entries.into_iter().map(ByteBuf::from).collect(),
            },
            Ok(Ok(None)) => LogResponse::refused("an entry past the durable log"),
            _ => LogResponse::refused("the store failed"),
        }
    }

    async fn take_cosignature(&self, note: &[u8], from: PeerId) -> LogResponse {
        let Some(checkpoint) = open_from(&self.own, note) else {
            return LogResponse::refused("not a checkpoint of this log");
        };
        let Some(key) = crate::identity::key_of_peer_id(&from.to_string()) else {
            return LogResponse::refused("not an Ed25519 peer");
        };
        let name = witness_name(&from);
        let now = crate::record::unix_now();
        if !matches!(cosign::cosigned_at(note, &name, &key, now), Ok(Some(_))) {
            return LogResponse::refused("no cosignature of the sender");
        }
        let size = checkpoint.size;
        let root = self.store.run_blocking(move |s| s.log_root(size)).await;
        if !matches!(root, Ok(Ok(Ok(r))) if r == checkpoint.root) {
            return LogResponse::refused("not a tree this log holds");
        }
        let prefix = format!("— {name} ");
        let Some(line) = std::str::from_utf8(note)
            .ok()
            .and_then(|t| t.lines().find(|l| l.starts_with(&prefix)))
        else {
            return LogResponse::refused("no cosignature line");
        };
        let mut state = self.state();
        let entry = state
            .cosigned
            .entry(size)
            .or_insert_with(|| (checkpoint.root, BTreeMap::new()));
        if entry.1.len() < MAX_COSIGNATURES || entry.1.contains_key(&name) {
            entry.1.insert(name, line.to_owned());
        }
        while state.cosigned.len() > MAX_COSIGNED_SIZES {
            state.cosigned.pop_first();
        }
        state.counts.cosignatures_received += 1;
        LogResponse::Cosigned
    }
}
