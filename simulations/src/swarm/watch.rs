//! The arrival of a probe's record (or tombstone) at the nodes: each
//! watched node's store is read every [`WATCH_EVERY`] until it holds the
//! record, and the times go into the outcome's figures.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentmesh::record::RecordBody;
use agentmesh::store::Store;
use anyhow::{Context, Result};

use super::node::Swarm;
use super::outcome::SwarmOutcome;

/// How often a watch looks at the nodes' stores.
pub const WATCH_EVERY: Duration = Duration::from_millis(2);

impl Swarm {
    /// Watches, from `t0`, the stores of the nodes live now (see
    /// [`watch`]).
    pub(super) fn watch(
        &self,
        id: &str,
        t0: Instant,
        deadline: Duration,
        holds: fn(&RecordBody) -> bool,
    ) -> impl std::future::Future<Output = Result<Vec<Option<Arrival>>>> + Send + 'static {
        let watched = (0..self.nodes.len())
            .filter(|&i| !self.is_down(i))
            .map(|i| Watched {
                node: i,
                store: self.nodes[i].store.clone(),
                starts: self.starts[i].load(Ordering::SeqCst),
            })
            .collect();
        watch(
            watched,
            self.starts.clone(),
            id.to_owned(),
            t0,
            deadline,
            holds,
        )
    }
}

/// A node a [`watch`] reads.
struct Watched {
    node: usize,
    store: Store,
    /// Its restart count when the watch began.
    starts: u32,
}

/// A record's arrival at one watched node.
#[derive(Debug, Clone, Copy)]
pub(super) struct Arrival {
    /// From the watch's `t0`.
    after: Duration,
    /// Churn had started the node again between `t0` and the arrival, so
    /// the record may have come after the restart.
    restarted: bool,
}

/// Watches the `watched` nodes' stores from `t0` until `holds` is true
/// of the agent's record at each, or `deadline`; each one's arrival,
/// `None` for the nodes never reached.
async fn watch(
    watched: Vec<Watched>,
    starts: Arc<[AtomicU32]>,
    id: String,
    t0: Instant,
    deadline: Duration,
    holds: fn(&RecordBody) -> bool,
) -> Result<Vec<Option<Arrival>>> {
    tokio::task::spawn_blocking(move || {
        let mut at: Vec<Option<Arrival>> = vec![None; watched.len()];
        let mut left = watched.len();
        while left > 0 && t0.elapsed() < deadline {
            for (i, w) in watched.iter().enumerate() {
                if at[i].is_some() {
                    continue;
                }
                if let Ok(Some(a)) = w.store.blocking().get(&id) {
                    if holds(&a.body) {
                        at[i] = Some(Arrival {
                            after: t0.elapsed(),
                            restarted: starts[w.node].load(Ordering::SeqCst) != w.starts,
                        });
                        left -= 1;
                    }
                }
            }
            std::thread::sleep(WATCH_EVERY);
        }
        at
    })
    .await
    .context("a watch task")
}

pub(super) fn is_descriptor(b: &RecordBody) -> bool {
    matches!(b, RecordBody::Descriptor(_))
}

pub(super) fn is_tombstone(b: &RecordBody) -> bool {
    matches!(b, RecordBody::Tombstone(_))
}

/// How long a probe may take to reach every node.
pub(super) fn probe_deadline(nodes: usize) -> Duration {
    Duration::from_secs(30) + Duration::from_millis(20) * nodes as u32
}

/// Which probe a watch timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Probe {
    Publish,
    Revoke,
}

/// Adds the nodes' arrival times to `out`'s figures for `probe`, the
/// nodes not reached and those reached only after a restart to its
/// counts.
pub(super) fn push_arrivals(
    out: &mut SwarmOutcome,
    probe: Probe,
    arrivals: &[Option<Arrival>],
    what: &str,
    progress: &mut dyn FnMut(&str),
) {
    let (ms, unreached, recovered) = match probe {
        Probe::Publish => (
            &mut out.propagation_ms,
            &mut out.propagation_unreached,
            &mut out.propagation_recovered,
        ),
        Probe::Revoke => (
            &mut out.revocation_ms,
            &mut out.revocation_unreached,
            &mut out.revocation_recovered,
        ),
    };
    let missing = arrivals.iter().filter(|a| a.is_none()).count();
    let late = arrivals.iter().flatten().filter(|a| a.restarted).count();
    *unreached += missing;
    *recovered += late;
    ms.extend(
        arrivals
            .iter()
            .flatten()
            .filter(|a| !a.restarted)
            .map(|a| a.after.as_secs_f64() * 1000.0),
    );
    if missing > 0 {
        progress(&format!(
            "{what}: {missing} nodes not reached by the deadline (left out of the figures)"
        ));
    }
    if late > 0 {
        progress(&format!(
            "{what}: {late} nodes got it only after churn had stopped and started them \
             (counted apart)"
        ));
    }
}
