//! After a restart, this node's own records go back into the DHT: a
//! restarted node's Kademlia has forgotten both the records it put and the
//! capabilities it provided.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::Published;
use crate::mesh::MeshClient;
use crate::record::RecordBody;
use crate::store::{Filter, Store};

/// Records the start-up republish puts back in the DHT per second.
const REPUBLISH_PER_SEC: u32 = 200;
/// Republish puts in flight at once.
const REPUBLISH_IN_FLIGHT: usize = 16;

/// After start, once the node has a DHT peer, puts every live record this
/// node signed (registrations and crawls) back in the DHT and provides
/// their capabilities again (a restarted node's Kademlia has forgotten
/// both); the mesh's own timers republish from then on. Paced at
/// `REPUBLISH_PER_SEC` so that a node holding 100k records does not
/// starve its API, and not gossiped: peers have seen these records.
pub fn spawn_republisher(
    store: Store,
    mesh: MeshClient,
    own: ed25519_dalek::VerifyingKey,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(
        async move {
            // Alone, a DHT put reaches nobody: wait for a peer.
            loop {
                match mesh.status().await {
                    Ok(s) if s.routing_table_peers > 0 => break,
                    Ok(_) => {}
                    Err(_) => return,
                }
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(500)) => {}
                }
            }
            let started = std::time::Instant::now();
            let mut pace = tokio::time::interval(Duration::from_secs(1) / REPUBLISH_PER_SEC);
            pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let in_flight = Arc::new(tokio::sync::Semaphore::new(REPUBLISH_IN_FLIGHT));
            let mut after: Option<String> = None;
            let mut count = 0usize;
            loop {
                let page = match store
                    .search(&Filter::default(), after.as_deref(), 256)
                    .await
                {
                    Ok(p) => p,
                    Err(e) => {
                        tracing::warn!(error = %e, "reading the store to republish failed");
                        return;
                    }
                };
                let Some(last) = page.last() else { break };
                after = Some(last.body.agent_id().to_owned());
                let own_records: Vec<Published> = page
                    .iter()
                    .filter(|a| {
                        a.record.signer() == &own && matches!(a.body, RecordBody::Descriptor(_))
                    })
                    .map(|a| Published::of(&a.record, &a.body))
                    .collect();
                for p in own_records {
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        _ = pace.tick() => {}
                    }
                    let Ok(permit) = in_flight.clone().acquire_owned().await else {
                        return;
                    };
                    let mesh = mesh.clone();
                    tokio::spawn(async move {
                        let _ = mesh.republish(p.record, p.agent_id, p.capabilities).await;
                        drop(permit);
                    });
                    count += 1;
                }
            }
            tracing::info!(
                records = count,
                secs = started.elapsed().as_secs_f64(),
                "republished own records"
            );
        }
        .instrument(tracing::info_span!("republish")),
    )
}
