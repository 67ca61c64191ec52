//! Records this node issues (registrations, deletions, crawls) on their way
//! to the mesh. The [`super::Issuer`] drops each stored record into
//! an [`Outbox`] (a bounded channel: a full outbox drops the send, and the
//! DHT's republication carries the record later); the publisher task hands
//! them to the [`MeshClient`] one by one, outside every request path.

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

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
        }
    }
}

/// The sending side. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Outbox(mpsc::Sender<Published>);

impl Outbox {
    /// A new outbox holding at most `capacity` records in flight.
    pub fn new(capacity: usize) -> (Self, mpsc::Receiver<Published>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (Self(tx), rx)
    }

    /// Queues `p`; drops it (with a warning) when the outbox is full.
    pub fn send(&self, p: Published) {
        if let Err(e) = self.0.try_send(p) {
            tracing::warn!(error = %e, "outbox full or closed; the record waits for republication");
        }
    }
}

/// Publishes what arrives in `rx` until `cancel` fires or every sender is
/// gone.
pub fn spawn_publisher(
    mesh: MeshClient,
    mut rx: mpsc::Receiver<Published>,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
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
                match mesh.publish(p.record, p.agent_id.clone(), p.capabilities).await {
                    Ok(report) => tracing::debug!(agent = %p.agent_id, gossiped = report.gossiped, "published"),
                    // Records still queued when the node stops are republished
                    // at the next start.
                    Err(crate::mesh::MeshError::Shutdown) => break,
                    Err(e) => {
                        tracing::warn!(agent = %p.agent_id, error = %e, "publishing failed");
                    }
                }
            }
        }
        .instrument(tracing::info_span!("publisher")),
    )
}
