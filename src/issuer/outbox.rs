//! Records this node issues (registrations, deletions, crawls) on their way
//! to the mesh. The [`super::Issuer`] drops each stored record into
//! an [`Outbox`] (a bounded channel: a full outbox drops the send, and the
//! DHT's republication carries the record later); the publisher task hands
//! them to the [`MeshClient`] in order, outside every request path. Each is
//! gossiped as soon as the mesh holds it: the publisher does not wait for a
//! record's DHT put and provider announcements (up to the publish timeout)
//! before handing over the next, but lets at most [`MAX_PUBLISHING`] run at
//! once. A liveness result (`Published::liveness`) is gossiped only.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::drops::Drops;
use crate::mesh::MeshClient;
use crate::record::{RecordBody, SignedRecord};

/// A record to publish.
#[derive(Debug, Clone)]
pub struct Published {
    /// The encoded `SignedRecord`.
    pub record: Vec<u8>,
    /// Its agent.
    pub agent_id: String,
    /// The capabilities to provide (none for a tombstone).
    pub capabilities: Vec<String>,
    /// Gossiped only, never put in the DHT (a liveness result: the DHT
    /// holds agent records under agent keys).
    pub gossip_only: bool,
}

impl Published {
    /// What to publish for a stored record.
    pub fn of(record: &SignedRecord, body: &RecordBody) -> Self {
        Self {
            record: record.encode(),
            agent_id: body.agent_id().to_owned(),
            capabilities: match body {
                RecordBody::Descriptor(d) => d.descriptor.capabilities.clone(),
                RecordBody::Tombstone(_) => Vec::new(),
            },
            gossip_only: false,
        }
    }

    /// What to publish for a signed liveness result about `agent_id`.
    pub fn liveness(record: &SignedRecord, agent_id: &str) -> Self {
        Self {
            record: record.encode(),
            agent_id: agent_id.to_owned(),
            capabilities: Vec::new(),
            gossip_only: true,
        }
    }
}

/// The sending side. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Published>,
    dropped: Arc<Mutex<Drops>>,
}

/// Least time between two "outbox full" warnings.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Most records whose DHT queries run at once; the next record waits for
/// one of them to end before it is handed over (and gossiped).
pub const MAX_PUBLISHING: usize = 64;

impl Outbox {
    /// A new outbox holding at most `capacity` records in flight.
    pub fn new(capacity: usize) -> (Self, mpsc::Receiver<Published>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let dropped = Arc::new(Mutex::new(Drops::new(WARN_EVERY)));
        (Self { tx, dropped }, rx)
    }

    /// Queues `p`; drops it when the outbox is full (or closed), with a
    /// warning at most every [`WARN_EVERY`] that counts what was dropped.
    pub fn send(&self, p: Published) {
        if let Err(e) = self.tx.try_send(p) {
            let mut d = self.drops();
            d.add(1);
            if let Some(dropped) = d.to_warn(tokio::time::Instant::now()) {
                tracing::warn!(
                    error = %e,
                    dropped,
                    total = d.total(),
                    "outbox full or closed: records dropped since the last warning wait for republication"
                );
            }
        }
    }

    /// Records dropped because the outbox was full, since it was made.
    pub fn dropped(&self) -> u64 {
        self.drops().total()
    }

    fn drops(&self) -> std::sync::MutexGuard<'_, Drops> {
        self.dropped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Publishes what arrives in `rx` until `cancel` fires or every sender is
/// gone.
pub fn spawn_publisher(
    mesh: MeshClient,
    mut rx: mpsc::Receiver<Published>,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let in_flight = Arc::new(Semaphore::new(MAX_PUBLISHING));
    tokio::spawn(
        async move {
            loop {
                let p = tokio::select! {
                    () = cancel.cancelled() => break,
                    p = rx.recv() => match p {
                        Some(p) => p,
                        None => break,
                    },
                };
                if p.gossip_only {
                    match mesh.gossip(p.record).await {
                        Ok(gossiped) => tracing::debug!(agent = %p.agent_id, gossiped, "gossiped"),
                        Err(crate::mesh::MeshError::Shutdown) => break,
                        Err(e) => tracing::warn!(agent = %p.agent_id, error = %e, "gossip failed"),
                    }
                    continue;
                }
                let permit = tokio::select! {
                    () = cancel.cancelled() => break,
                    permit = in_flight.clone().acquire_owned() => {
                        permit.expect("the publisher never closes its semaphore")
                    }
                };
                let publishing = match mesh
                    .start_publish(p.record, p.agent_id.clone(), p.capabilities)
                    .await
                {
                    Ok(publishing) => publishing,
                    // Records still queued when the node stops are republished
                    // at the next start.
                    Err(crate::mesh::MeshError::Shutdown) => break,
                    Err(e) => {
                        tracing::warn!(agent = %p.agent_id, error = %e, "publishing failed");
                        continue;
                    }
                };
                let agent = p.agent_id;
                tokio::spawn(
                    async move {
                        match publishing.finished().await {
                            Ok(report) => {
                                tracing::debug!(agent = %agent, gossiped = report.gossiped, "published");
                            }
                            Err(crate::mesh::MeshError::Shutdown) => {}
                            Err(e) => {
                                tracing::warn!(agent = %agent, error = %e, "publishing failed");
                            }
                        }
                        drop(permit);
                    }
                    .in_current_span(),
                );
            }
        }
        .instrument(tracing::info_span!("publisher")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn published(i: usize) -> Published {
        Published {
            record: Vec::new(),
            agent_id: format!("a{i}"),
            capabilities: Vec::new(),
            gossip_only: false,
        }
    }

    #[test]
    fn a_full_outbox_keeps_the_first_records_and_counts_what_it_drops() {
        let (outbox, mut rx) = Outbox::new(2);
        for i in 0..5 {
            outbox.send(published(i));
        }
        assert_eq!(outbox.dropped(), 3);
        assert_eq!(rx.try_recv().unwrap().agent_id, "a0");
        assert_eq!(rx.try_recv().unwrap().agent_id, "a1");
        assert!(rx.try_recv().is_err());
        // Room again: nothing more is dropped.
        outbox.send(published(5));
        assert_eq!(outbox.dropped(), 3);
        assert_eq!(rx.try_recv().unwrap().agent_id, "a5");
    }
}
