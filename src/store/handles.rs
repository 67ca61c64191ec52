//! The store's two handles, [`Store`] (async) and [`BlockingStore`], and
//! the state they share (`Inner`): the sled trees, the posting lists,
//! suspensions and dropped agents in memory, the text index, the write
//! stripes, the write/flush gate and the group-commit counters. `unblock`
//! moves a blocking call off the runtime's workers.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::changes::Feeds;
use super::claims::ClaimCounts;
use super::error::StoreError;
use super::freshness::FreshIndex;
use super::postings::Postings;
use super::suspended::Suspended;
use super::text::Text;
use super::usage::Usage;

/// Write stripes: writes of agents in different stripes run at once.
pub(super) const WRITE_STRIPES: usize = 64;

/// The embedded store, its async face: sled is touched only in
/// `spawn_blocking`. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    pub(super) sync: BlockingStore,
}

/// The store's blocking face: the same operations as [`Store`], run on
/// the calling thread. Only from a blocking context (inside
/// `spawn_blocking`, a plain thread, a synchronous bench or test), never
/// on a tokio worker: a write may wait for a whole flush here. Get one
/// from [`Store::blocking`]; cheap to clone.
#[derive(Clone)]
pub struct BlockingStore {
    pub(super) inner: Arc<Inner>,
}

/// What a store's handles share.
pub(super) struct Inner {
    /// The data directory, which [`Store::close`] waits for sled to let go of.
    pub(super) dir: PathBuf,
    pub(super) db: sled::Db,
    pub(super) records: sled::Tree,
    pub(super) local: sled::Tree,
    pub(super) reports: sled::Tree,
    pub(super) reasons: sled::Tree,
    /// Agents written whose text-index entry may not be committed yet
    /// (id -> seq): see `store/text.rs`.
    pub(super) pending: sled::Tree,
    pub(super) ordinals: sled::Tree,
    pub(super) compact: sled::Tree,
    pub(super) text: Text,
    /// The filter posting lists, in memory (loaded from `compact`).
    pub(super) postings: RwLock<Postings>,
    /// Operator suspensions (`store/suspended.rs`): the tree, and in memory.
    pub(super) suspended_tree: sled::Tree,
    pub(super) suspended: RwLock<Suspended>,
    /// Who may see and change the agents registered here
    /// (`store/visibility.rs`): the tree, and in memory.
    pub(super) entitlements_tree: sled::Tree,
    pub(super) entitlements: RwLock<super::visibility::Entitlements>,
    /// Crawled agents' freshness and the recrawl schedule
    /// (`store/freshness.rs`), and the dropped agents in memory.
    pub(super) freshness: sled::Tree,
    pub(super) schedule: sled::Tree,
    pub(super) dropped: RwLock<FreshIndex>,
    /// Other nodes' signed probe results (`store/liveness.rs`), and the
    /// lock their read-modify-writes take turns under.
    pub(super) liveness: sled::Tree,
    pub(super) liveness_turn: Mutex<()>,
    /// The last document of each MCP Registry server a tombstone
    /// replaced (`store/gone.rs`).
    pub(super) gone: sled::Tree,
    /// Live claimed records by signer (`store/claims.rs`).
    pub(super) claims: Mutex<ClaimCounts>,
    /// Agent keys revoked by their own key (`store/trust.rs`): fingerprint
    /// -> the agent id and when.
    pub(super) revoked: sled::Tree,
    /// The transparency log of the records this node signs
    /// (`store/log.rs`).
    pub(super) log: super::log::Log,
    /// Transfers this node took ids over by (`store/trust.rs`): agent id
    /// -> the previous owner's signed consent, carried by every record
    /// this node issues for the id.
    pub(super) transfers: sled::Tree,
    /// `meta`: the schema version, and the trusted signers the records'
    /// evidence was last classified against (`store/trust.rs`).
    pub(super) meta: sled::Tree,
    /// The audit log (`store/audit.rs`).
    pub(super) audit: super::audit::AuditLog,
    /// The next ordinal to give an agent seen for the first time.
    pub(super) next_ord: AtomicU64,
    /// Who follows the writes besides the text index (`store/changes.rs`).
    pub(super) feeds: Feeds,
    /// Write stripes by agent id (`BlockingStore::write`).
    pub(super) stripes: Vec<Mutex<()>>,
    pub(super) live: AtomicU64,
    /// Writes whose posting lists are updated (after `writes`, which
    /// counts them before: see `BlockingStore::committed`).
    pub(super) settled: AtomicU64,
    /// sled 0.34 deadlocks when a transaction waits for its global write
    /// lock while a flush holds the read lock and waits for the log
    /// flusher (which needs a read lock the waiting writer now blocks).
    /// Writes take this gate shared, flushes exclusive, so the two never
    /// overlap; sled's own periodic flusher is off ([`Store::open`]).
    /// Both sides run only on blocking threads, so a write waiting here
    /// for a whole `db.flush()` holds a blocking-pool thread, never a
    /// runtime worker.
    pub(super) gate: RwLock<()>,
    /// `store.max_bytes` and the store's last measured size.
    pub(super) usage: Usage,
    /// Group commit: writes done, and writes known durable.
    pub(super) writes: AtomicU64,
    pub(super) flushed: AtomicU64,
    pub(super) flush_turn: tokio::sync::Mutex<()>,
    /// Runs while a flush holds the gate exclusively (tests only).
    #[cfg(test)]
    pub(super) flush_hook: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("live", &self.len()).finish()
    }
}

impl std::fmt::Debug for BlockingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingStore")
            .field("live", &self.inner.live.load(Ordering::Relaxed))
            .finish()
    }
}

/// Runs `f` on tokio's blocking pool; a panic or a cancelled task becomes
/// [`StoreError::TaskFailed`] naming `operation`.
pub(super) async fn unblock<T, F>(operation: &'static str, f: F) -> Result<T, StoreError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| task_failed(operation, e))
}

fn task_failed(operation: &'static str, e: tokio::task::JoinError) -> StoreError {
    let reason = if e.is_panic() {
        let panic = e.into_panic();
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned());
        match message {
            Some(m) => format!("panicked: {m}"),
            None => "panicked".to_owned(),
        }
    } else {
        "cancelled: the runtime is shutting down".to_owned()
    };
    StoreError::TaskFailed { operation, reason }
}
