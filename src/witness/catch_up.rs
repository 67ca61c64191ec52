//! Catching up with the peers a node meets: every interval the witness
//! asks each peer connected since the last one (speaking the log
//! protocol) for its newest checkpoint ([`LogRequest::Checkpoint`]) and
//! judges the answer as a checkpoint from the topic: a first one has it
//! look at the peer's last entries, a larger one has it repair what it
//! missed. Gossip alone would leave a mesh healed after a partition
//! waiting: gossipsub does not send again a message it saw in the last
//! 120 s (a checkpoint published while the halves were apart), and an
//! unchanged checkpoint is published again only every ten intervals.

use std::collections::HashSet;
use std::sync::Arc;

use libp2p::PeerId;

use super::Witness;
use crate::mesh::{LogRequest, LogResponse, MeshClient, LOG_PROTOCOL};

/// Most peers met asked per interval; the rest are asked at the next.
pub(super) const MAX_ASKED_PER_INTERVAL: usize = 64;

/// The peers connected at the last interval.
#[derive(Default)]
pub(super) struct Met(HashSet<PeerId>);

impl Witness {
    /// Asks each peer connected since the last call for its newest
    /// checkpoint, each in a task of its own.
    pub(super) async fn ask_peers_met(self: &Arc<Self>, mesh: &MeshClient, met: &mut Met) {
        let Ok(peers) = mesh.peers().await else {
            return;
        };
        let now: HashSet<PeerId> = peers
            .into_iter()
            .filter(|p| p.protocols.iter().any(|s| s == LOG_PROTOCOL))
            .map(|p| p.peer_id)
            .collect();
        let new: Vec<PeerId> = now
            .difference(&met.0)
            .take(MAX_ASKED_PER_INTERVAL)
            .copied()
            .collect();
        // A peer not asked this time is still new at the next.
        met.0 = now
            .into_iter()
            .filter(|p| met.0.contains(p) || new.contains(p))
            .collect();
        for peer in new {
            let (this, mesh) = (self.clone(), mesh.clone());
            tokio::spawn(async move {
                let answer = mesh.log_request(peer, LogRequest::Checkpoint).await;
                if let Ok(Ok(LogResponse::Checkpoint { note })) = answer {
                    let verdict = this.on_checkpoint(note.into_vec(), peer).await;
                    tracing::debug!(%peer, ?verdict, "the checkpoint of a peer met");
                }
            });
        }
    }
}
