//! The embedded store (sled): the latest record per agent, secondary
//! indexes for filter search, the set of local registrations, and the
//! schema version.
//!
//! Trees:
//! - `records`: agent id -> one kind byte + the encoded [`SignedRecord`]
//!   (the latest one, descriptor or tombstone);
//! - `ordinals`: agent id -> its ordinal (`u32`, big-endian), given at
//!   the agent's first write and never reused (`store/postings.rs`);
//! - `compact`: ordinal -> the agent's [`CompactAgent`] (what a search
//!   result shows, and what its filter terms come from: capabilities,
//!   tags, languages, trust level), or its id alone once it is a
//!   tombstone (`store/compact.rs`);
//! - `local`: ids registered through this node's API;
//! - `reports`: the latest crawl report (JSON) of agents crawled here;
//! - `reasons`: the reason codes of that report (comma-separated), which
//!   summaries show without reading the report (filled from `reports` at
//!   the first open of a data directory written before it existed);
//! - `pending`: agents whose text-index entry may not be committed yet;
//! - `meta`: the schema version.
//!
//! Every write is one sled transaction across the trees, so a compact
//! record never disagrees with the record it comes from, and the seq
//! check happens inside it. The `compact` tree is read once, at open,
//! into one roaring bitmap per filter term, kept in memory
//! (`store/postings.rs`), which every commit then updates: a filter
//! search intersects bitmaps and reads one compact record per result,
//! whether the node is warm or just restarted.
//!
//! sled blocks (disk reads, transactions, flushes, and the write/flush
//! gate below), so it is touched only on blocking threads, never on the
//! runtime's workers, which the mesh loop, the crawler and the API share.
//! Two faces over one database:
//! - [`Store`], the async face the node uses (registry, crawler, API,
//!   republisher): a cheap handle, clone it freely; every sled call runs
//!   in `spawn_blocking`, and [`Store::run_blocking`] runs a whole scan
//!   there (the registry's ranked searches);
//! - [`BlockingStore`] ([`Store::blocking`], `store/blocking.rs`), the
//!   same operations run on the calling thread, for code that already is
//!   on a blocking thread (the federation `Judge`, inside the mesh
//!   handler's `spawn_blocking`) or is synchronous by nature (benches, the
//!   unit tests).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::descriptor::{self, Descriptor};
use crate::record::{RecordBody, RecordError, RecordType, SignedRecord};
use crate::verify::{Evidence, Reason, TrustLevel};

mod blocking;
mod changes;
mod compact;
mod freshness;
mod migrate;
mod postings;
mod suspended;
pub mod text;
mod trust;

use blocking::{decode_stored, fill_reasons, MAX_ENCODED_HINT};
pub use changes::ChangeFeed;
pub use compact::{Claimed, CompactAgent};
pub use freshness::{FreshState, Freshness};
use postings::{body_terms, prefix, Postings, FIELD_CAPABILITY, FIELD_LANGUAGE, FIELD_TAG};
pub use suspended::{Suspension, MAX_REASON_CHARS as MAX_SUSPENSION_REASON_CHARS};
pub use text::{TextIndexOpen, TextQuery};
pub use trust::{Reassessed, Revocation};

/// The on-disk layout version this code reads and writes. Versions 1
/// (index keys by agent id, no ordinals or compact records) and 2 (an
/// `index` tree of one key per term and ordinal; compact records without
/// tags and languages) are migrated at open (`store/migrate.rs`).
pub const SCHEMA_VERSION: u32 = 3;

/// Write stripes: writes of agents in different stripes run at once.
const WRITE_STRIPES: usize = 64;

const KIND_DESCRIPTOR: u8 = b'd';
const KIND_TOMBSTONE: u8 = b't';
/// A live descriptor whose evidence this node has not proven: signed by a
/// peer outside `p2p.trusted_peers` (see [`Origin::Claimed`]). Its
/// evidence is shown as claimed and counts as `unverified`.
const KIND_CLAIMED: u8 = b'c';

/// Errors from the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database failed.
    #[error("store I/O: {0}")]
    Sled(#[from] sled::Error),
    /// The record was refused (stale seq, malformed...).
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The store could not be closed ([`Store::close`]).
    #[error("store not closed: {reason}")]
    Close {
        /// Why: other handles are still alive, or the data directory
        /// stayed locked.
        reason: String,
    },
    /// The data directory holds another layout version.
    #[error("store schema version {found} is not the supported version {expected}")]
    SchemaVersion {
        /// The version the data directory holds.
        found: u32,
        /// The version this build reads, [`SCHEMA_VERSION`].
        expected: u32,
    },
    /// The agent belongs to another registry and cannot be changed here.
    #[error("agent {agent_id} is not registered at this node")]
    NotLocal {
        /// The agent the write was for.
        agent_id: String,
    },
    /// The agent does not exist (or was deleted).
    #[error("agent {agent_id} not found")]
    NotFound {
        /// The agent the write was for.
        agent_id: String,
    },
    /// A stored value could not be read back.
    #[error("corrupt store entry for {key}: {reason}")]
    Corrupt {
        /// The agent id the entry is stored under.
        key: String,
        /// Why it could not be decoded.
        reason: String,
    },
    /// The text index failed.
    #[error("text index: {reason}")]
    Text {
        /// What tantivy (or the index's writer thread) said.
        reason: String,
    },
    /// A batch of writes failed as a whole (another write of the batch
    /// carries the cause).
    #[error("store batch failed: {reason}")]
    BatchFailed {
        /// The cause, as the batch's first write reports it.
        reason: String,
    },
    /// The store cannot take another agent.
    #[error("store full: {reason}")]
    Full {
        /// What ran out.
        reason: String,
    },
    /// A blocking store task did not complete: it panicked (a bug), or the
    /// runtime shut down before it ran. A write may or may not have
    /// happened.
    #[error("store task {operation} did not complete: {reason}")]
    TaskFailed {
        /// The store operation that ran in the task.
        operation: &'static str,
        /// The panic message, or why the task did not run.
        reason: String,
    },
    /// The record was replaced since it was read ([`Expect::Held`]).
    #[error("agent {agent_id} changed since seq {expected} was read")]
    Changed {
        /// The agent.
        agent_id: String,
        /// The seq that was expected to be held.
        expected: u64,
    },
}

/// The outcomes of a batch of writes that failed as a whole: the first
/// carries the cause, each of the others [`StoreError::BatchFailed`].
pub fn failed_batch<T, E: From<StoreError>>(cause: StoreError, count: usize) -> Vec<Result<T, E>> {
    let reason = cause.to_string();
    let mut out = Vec::with_capacity(count.max(1));
    out.push(Err(cause.into()));
    out.extend((1..count).map(|_| {
        Err(StoreError::BatchFailed {
            reason: reason.clone(),
        }
        .into())
    }));
    out
}

/// What a write may assume about the agent it replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Anything (crawled or remote records: seq order decides).
    Any,
    /// A registration: the agent is absent, deleted, or registered here.
    LocalOrAbsent,
    /// An update or delete: the agent is live and registered here.
    LocalLive,
    /// A renewal: the record held has exactly this seq (nothing replaced
    /// it since it was read).
    Held(u64),
    /// The record held at exactly this seq, written again in place (its
    /// evidence reclassified as proven or claimed, [`Store::reassess`]):
    /// the one write whose seq is not above the held one.
    Same(u64),
    /// A revocation signed by the agent's own key: final for that key,
    /// so it replaces the descriptor held whatever the seqs (the held
    /// seq is kept as the floor for the records after it).
    Revocation,
}

/// Who a write comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Registered through this node's API.
    Local,
    /// Crawled by this node, or attested by a peer in `p2p.trusted_peers`:
    /// its evidence counts.
    Remote,
    /// Received from a peer this node does not trust: stored and shown,
    /// its evidence as *claimed* (with who claims it), never counted by
    /// trust filters, the resolve policy or ranking.
    Claimed,
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// No live descriptor was held for the agent before.
    Created,
    /// A live descriptor was replaced.
    Updated,
}

/// A record as read back from the store.
#[derive(Debug, Clone)]
pub struct StoredAgent {
    /// The signed envelope.
    pub record: SignedRecord,
    /// Its decoded payload.
    pub body: RecordBody,
    /// Its evidence is a claim this node has not proven
    /// ([`Origin::Claimed`]): it counts as `unverified`.
    pub claimed: bool,
}

impl StoredAgent {
    /// The evidence this node counts for the record: the record's own
    /// when this node proved it or a trusted peer attested it, none when
    /// it is only claimed (and none for a tombstone).
    pub fn counted_evidence(&self) -> Evidence {
        match &self.body {
            RecordBody::Descriptor(d) if !self.claimed => d.evidence.clone(),
            _ => Evidence::default(),
        }
    }

    /// The trust level this node counts for the record.
    pub fn counted_level(&self) -> TrustLevel {
        self.counted_evidence().level()
    }
}

/// Filter terms for a search: AND across and within fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Capability ids the agent must all have.
    pub capabilities: Vec<String>,
    /// Tags the agent must all have.
    pub tags: Vec<String>,
    /// Languages the agent must all support; `zh` matches `zh-Hant`.
    pub languages: Vec<String>,
    /// Answer agents this node dropped for staleness too
    /// ([`FreshState::Dropped`]); they are left out by default.
    pub include_stale: bool,
    /// Answer only agents at this trust level or above (the walk and the
    /// text ranking both keep it, beside any floor a query names).
    pub min_trust: Option<TrustLevel>,
}

impl Filter {
    /// Normalises raw filter values the way descriptors are normalised.
    ///
    /// # Errors
    /// The first language value that is not a well-formed BCP 47 tag.
    pub fn new<'a>(
        capabilities: impl IntoIterator<Item = &'a str>,
        tags: impl IntoIterator<Item = &'a str>,
        languages: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, String> {
        Ok(Self {
            capabilities: descriptor::normalise_terms(capabilities),
            tags: descriptor::normalise_terms(tags),
            languages: descriptor::normalise_languages(languages)?,
            include_stale: false,
            min_trust: None,
        })
    }

    /// Whether the filter has no terms (everything matches).
    pub fn is_empty(&self) -> bool {
        self.capabilities.is_empty() && self.tags.is_empty() && self.languages.is_empty()
    }

    fn prefixes(&self) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        out.extend(
            self.capabilities
                .iter()
                .map(|t| prefix(FIELD_CAPABILITY, t)),
        );
        out.extend(self.tags.iter().map(|t| prefix(FIELD_TAG, t)));
        out.extend(
            self.languages
                .iter()
                .map(|t| prefix(FIELD_LANGUAGE, &t.to_ascii_lowercase())),
        );
        out.sort();
        out.dedup();
        out
    }
}

/// How a store opens. The default is what `agentmesh node` runs, but for
/// the page cache, which comes from `store.cache_bytes`.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// sled's page cache, in bytes.
    pub cache_bytes: u64,
    /// When the text index opens (`store/text/opening.rs`).
    pub text_index: TextIndexOpen,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            cache_bytes: crate::config::StoreConfig::default().cache_bytes,
            text_index: TextIndexOpen::WithStore,
        }
    }
}

/// The embedded store, its async face: sled is touched only in
/// `spawn_blocking`. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    sync: BlockingStore,
}

/// The store's blocking face: the same operations as [`Store`], run on
/// the calling thread. Only from a blocking context (inside
/// `spawn_blocking`, a plain thread, a synchronous bench or test), never
/// on a tokio worker: a write may wait for a whole flush here. Get one
/// from [`Store::blocking`]; cheap to clone.
#[derive(Clone)]
pub struct BlockingStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// The data directory, which [`Store::close`] waits for sled to let go of.
    dir: std::path::PathBuf,
    db: sled::Db,
    records: sled::Tree,
    local: sled::Tree,
    reports: sled::Tree,
    reasons: sled::Tree,
    /// Agents written whose text-index entry may not be committed yet
    /// (id -> seq): see `store/text.rs`.
    pending: sled::Tree,
    ordinals: sled::Tree,
    compact: sled::Tree,
    text: text::Text,
    /// The filter posting lists, in memory (loaded from `compact`).
    postings: std::sync::RwLock<Postings>,
    /// Operator suspensions (`store/suspended.rs`): the tree, and in memory.
    suspended_tree: sled::Tree,
    suspended: std::sync::RwLock<suspended::Suspended>,
    /// Crawled agents' freshness and the recrawl schedule
    /// (`store/freshness.rs`), and the dropped agents in memory.
    freshness: sled::Tree,
    schedule: sled::Tree,
    dropped: std::sync::RwLock<freshness::Dropped>,
    /// Live claimed records by signer (`store/trust.rs`).
    claims: Mutex<trust::ClaimCounts>,
    /// Agent keys revoked by their own key (`store/trust.rs`): fingerprint
    /// -> the agent id and when.
    revoked: sled::Tree,
    /// Transfers this node took ids over by (`store/trust.rs`): agent id
    /// -> the previous owner's signed consent, carried by every record
    /// this node issues for the id.
    transfers: sled::Tree,
    /// `meta`: the schema version, and the trusted signers the records'
    /// evidence was last classified against (`store/trust.rs`).
    meta: sled::Tree,
    /// The next ordinal to give an agent seen for the first time.
    next_ord: AtomicU64,
    /// Who follows the writes besides the text index (`store/changes.rs`).
    feeds: changes::Feeds,
    /// Write stripes by agent id (`BlockingStore::write`).
    stripes: Vec<Mutex<()>>,
    live: AtomicU64,
    /// Writes whose posting lists are updated (after `writes`, which
    /// counts them before: see `BlockingStore::committed`).
    settled: AtomicU64,
    /// sled 0.34 deadlocks when a transaction waits for its global write
    /// lock while a flush holds the read lock and waits for the log
    /// flusher (which needs a read lock the waiting writer now blocks).
    /// Writes take this gate shared, flushes exclusive, so the two never
    /// overlap; sled's own periodic flusher is off ([`Store::open`]).
    /// Both sides run only on blocking threads, so a write waiting here
    /// for a whole `db.flush()` holds a blocking-pool thread, never a
    /// runtime worker.
    gate: std::sync::RwLock<()>,
    /// Group commit: writes done, and writes known durable.
    writes: AtomicU64,
    flushed: AtomicU64,
    flush_turn: tokio::sync::Mutex<()>,
    /// Runs while a flush holds the gate exclusively (tests only).
    #[cfg(test)]
    flush_hook: Mutex<Option<Box<dyn FnOnce() + Send>>>,
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

struct Change {
    ord: u32,
    removed: Vec<Vec<u8>>,
    added: Vec<Vec<u8>>,
    was_live: bool,
    now_live: bool,
    /// The signer of the live claim the write replaced, and of the one it
    /// wrote (`store/trust.rs`'s counts).
    claim_before: Option<[u8; 32]>,
    claim_after: Option<[u8; 32]>,
}

/// A write ready for sled: everything owned, so that it can move to a
/// blocking thread (the record is encoded on the caller's side).
struct Write {
    id: String,
    seq: u64,
    kind: u8,
    value: Vec<u8>,
    /// The compact record (a live descriptor's), its `local` flag set
    /// inside the transaction.
    compact: Option<CompactAgent>,
    new_terms: BTreeSet<Vec<u8>>,
    origin: Origin,
    expect: Expect,
    /// The record's signer: a record from another signer than the held
    /// one's (an id handed over by a transfer) ends a local registration.
    signer: [u8; 32],
}

impl Write {
    fn new(record: &SignedRecord, body: &RecordBody, origin: Origin, expect: Expect) -> Self {
        let claimed = origin == Origin::Claimed;
        let kind = match body {
            RecordBody::Descriptor(_) if claimed => KIND_CLAIMED,
            RecordBody::Descriptor(_) => KIND_DESCRIPTOR,
            RecordBody::Tombstone(_) => KIND_TOMBSTONE,
        };
        let mut value = Vec::with_capacity(1 + MAX_ENCODED_HINT);
        value.push(kind);
        value.extend_from_slice(&record.encode());
        let compact = match body {
            RecordBody::Descriptor(d) => Some(CompactAgent::of(record, d, false, claimed)),
            RecordBody::Tombstone(_) => None,
        };
        Self {
            id: body.agent_id().to_owned(),
            seq: body.seq(),
            kind,
            value,
            compact,
            new_terms: body_terms(body, claimed),
            origin,
            expect,
            signer: record.signer().to_bytes(),
        }
    }

    /// Whether the write stores a live descriptor.
    fn is_live(&self) -> bool {
        self.kind != KIND_TOMBSTONE
    }
}

/// Runs `f` on tokio's blocking pool; a panic or a cancelled task becomes
/// [`StoreError::TaskFailed`] naming `operation`.
async fn unblock<T, F>(operation: &'static str, f: F) -> Result<T, StoreError>
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

impl Store {
    /// Opens (or creates) the store under `dir`. Blocks (it opens the
    /// files and counts the index): from async code, call it inside
    /// `spawn_blocking`, as `Node::spawn` does.
    ///
    /// # Errors
    /// [`StoreError::Sled`], or [`StoreError::SchemaVersion`] for a data
    /// directory written by an incompatible version.
    pub fn open(dir: &Path, cache_bytes: u64) -> Result<Self, StoreError> {
        Self::open_with(
            dir,
            &StoreOptions {
                cache_bytes,
                ..StoreOptions::default()
            },
        )
    }

    /// As [`Store::open`], with `options` (the page cache, and when the
    /// text index opens).
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn open_with(dir: &Path, options: &StoreOptions) -> Result<Self, StoreError> {
        let db = sled::Config::new()
            .path(dir)
            .cache_capacity(options.cache_bytes)
            .flush_every_ms(None)
            .open()?;
        let meta = db.open_tree("meta")?;
        let found = meta.get("schema_version")?.map(|v| {
            <[u8; 4]>::try_from(v.as_ref())
                .map(u32::from_be_bytes)
                .unwrap_or(0)
        });
        if let Some(found) = found.filter(|f| !(1..=SCHEMA_VERSION).contains(f)) {
            return Err(StoreError::SchemaVersion {
                found,
                expected: SCHEMA_VERSION,
            });
        }
        let records = db.open_tree("records")?;
        let local = db.open_tree("local")?;
        let reports = db.open_tree("reports")?;
        let reasons = db.open_tree("reasons")?;
        let ordinals = db.open_tree("ordinals")?;
        let compact = db.open_tree("compact")?;
        if let Some(from) = found.filter(|f| *f < SCHEMA_VERSION) {
            let ordinals_from = if from == 1 {
                migrate::Ordinals::Assign
            } else {
                migrate::Ordinals::Keep
            };
            migrate::rebuild(&db, &records, &local, &ordinals, &compact, ordinals_from)?;
        }
        if found != Some(SCHEMA_VERSION) {
            meta.insert("schema_version", &SCHEMA_VERSION.to_be_bytes())?;
            db.flush()?;
        }
        // The `index` tree of versions 1 and 2, once the version says it
        // is no longer read.
        db.drop_tree("index")?;
        if reasons.is_empty() && !reports.is_empty() {
            fill_reasons(&reports, &reasons)?;
        }
        let (postings, claims) = Postings::load(&compact)?;
        let live = postings.live();
        let next_ord = match compact.last()? {
            Some((key, _)) => u64::from(postings::decode_ord("compact", &key)?) + 1,
            None => 0,
        };
        let pending = db.open_tree("pending")?;
        let text = text::Text::open(
            options.text_index,
            dir.to_path_buf(),
            &records,
            &pending,
            live,
        )?;
        let suspended_tree = db.open_tree("suspended")?;
        let suspended = suspended::Suspended::load(&suspended_tree, &ordinals)?;
        let freshness = db.open_tree("freshness")?;
        let schedule = db.open_tree("schedule")?;
        let dropped = freshness::Dropped::load(&freshness, &ordinals)?;
        let revoked = db.open_tree("revoked")?;
        let transfers = db.open_tree("transfers")?;
        Ok(Self {
            sync: BlockingStore {
                inner: Arc::new(Inner {
                    dir: dir.to_path_buf(),
                    db,
                    records,
                    local,
                    reports,
                    reasons,
                    pending,
                    ordinals,
                    compact,
                    text,
                    postings: std::sync::RwLock::new(postings),
                    suspended_tree,
                    suspended: std::sync::RwLock::new(suspended),
                    freshness,
                    schedule,
                    dropped: std::sync::RwLock::new(dropped),
                    claims: Mutex::new(claims),
                    revoked,
                    transfers,
                    meta,
                    next_ord: AtomicU64::new(next_ord),
                    feeds: changes::Feeds::default(),
                    stripes: (0..WRITE_STRIPES).map(|_| Mutex::new(())).collect(),
                    live: AtomicU64::new(live),
                    settled: AtomicU64::new(0),
                    gate: std::sync::RwLock::new(()),
                    writes: AtomicU64::new(0),
                    flushed: AtomicU64::new(0),
                    flush_turn: tokio::sync::Mutex::new(()),
                    #[cfg(test)]
                    flush_hook: Mutex::new(None),
                }),
            },
        })
    }

    /// Suspends the agent `id` on this node: it stays stored, and leaves
    /// every search and resolution until [`Store::unsuspend`]. On disk
    /// when this returns.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] for an agent this store never held.
    pub async fn suspend(&self, id: &str, reason: &str) -> Result<Suspension, StoreError> {
        let (id, reason) = (id.to_owned(), reason.to_owned());
        self.run_blocking(move |s| s.suspend(&id, &reason)).await?
    }

    /// Lifts a suspension; `false` when the agent was not suspended.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub async fn unsuspend(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.run_blocking(move |s| s.unsuspend(&id)).await?
    }

    /// The agent's suspension, if it is suspended.
    pub fn suspension(&self, id: &str) -> Option<Suspension> {
        self.sync.suspension(id)
    }

    /// Sets a crawled agent's freshness (a `dropped` one leaves default
    /// results).
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::TaskFailed`].
    pub async fn set_freshness(&self, id: &str, f: Freshness) -> Result<(), StoreError> {
        let (sync, id) = (self.sync.clone(), id.to_owned());
        unblock("set_freshness", move || sync.set_freshness(&id, &f)).await?
    }

    /// A crawled agent's freshness, if this node keeps one.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`], [`StoreError::TaskFailed`].
    pub async fn freshness(&self, id: &str) -> Result<Option<Freshness>, StoreError> {
        let (sync, id) = (self.sync.clone(), id.to_owned());
        unblock("freshness", move || sync.freshness(&id)).await?
    }

    /// Keeps the scheduler's `state` of `domain`; an empty `state` takes
    /// the domain out of the `schedule` tree.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::TaskFailed`].
    pub async fn put_schedule(&self, domain: &str, state: Vec<u8>) -> Result<(), StoreError> {
        let (sync, domain) = (self.sync.clone(), domain.to_owned());
        unblock("put_schedule", move || sync.put_schedule(&domain, &state)).await?
    }

    /// Every domain's scheduler state, by domain.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::TaskFailed`].
    pub async fn schedules(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let sync = self.sync.clone();
        unblock("schedules", move || sync.schedules()).await?
    }

    /// Every suspension, by agent id.
    pub fn suspensions(&self) -> Vec<(String, Suspension)> {
        self.sync.suspensions()
    }

    /// Closes the store: every write made durable and searchable, the
    /// text index's writer thread ended (after its last commit and
    /// merges), and sled's hold on the data directory released, so that
    /// the directory can be opened again at once (a restart in the same
    /// process). It takes the last handle: a clone still alive elsewhere
    /// keeps the store open.
    ///
    /// # Errors
    /// [`StoreError::Close`] when other handles are alive (the writes are
    /// flushed, nothing is closed) or sled still holds the directory
    /// after [`CLOSE_WAIT`]; [`StoreError::Sled`] and [`StoreError::Text`]
    /// from the flush; [`StoreError::TaskFailed`].
    pub async fn close(self) -> Result<(), StoreError> {
        unblock("close", move || self.sync.close()).await?
    }

    /// As [`Store::close`], on this thread: only from a blocking context.
    ///
    /// # Errors
    /// As [`Store::close`], without [`StoreError::TaskFailed`].
    pub fn close_blocking(self) -> Result<(), StoreError> {
        self.sync.close()
    }

    /// The blocking face of this store. Only from a blocking context
    /// (`spawn_blocking`, a plain thread, a synchronous bench or test).
    pub fn blocking(&self) -> &BlockingStore {
        &self.sync
    }

    /// Runs `f` with the blocking face on tokio's blocking pool: for a
    /// scan, or several reads that belong together, in one hop.
    ///
    /// # Errors
    /// [`StoreError::TaskFailed`] when `f` panics (or the runtime shuts
    /// down before it runs); `f`'s own errors are in `T`.
    pub async fn run_blocking<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(&BlockingStore) -> T + Send + 'static,
        T: Send + 'static,
    {
        let sync = self.sync.clone();
        unblock("run_blocking", move || f(&sync)).await
    }

    /// Stores `record` (already verified by the caller, with `body` its
    /// decoded payload) if its seq is above the one held. The record is
    /// encoded here; the transaction runs on a blocking thread, where it
    /// may wait for a flush in progress.
    ///
    /// # Errors
    /// [`RecordError::StaleSeq`] (as [`StoreError::Record`]) when not newer;
    /// [`StoreError::NotLocal`] / [`StoreError::NotFound`] when `expect`
    /// does not hold; [`StoreError::Sled`]; [`StoreError::TaskFailed`].
    pub async fn put(
        &self,
        record: &SignedRecord,
        body: &RecordBody,
        origin: Origin,
        expect: Expect,
    ) -> Result<PutOutcome, StoreError> {
        let write = Write::new(record, body, origin, expect);
        let sync = self.sync.clone();
        unblock("put", move || sync.write(write)).await?
    }

    /// The latest record held for `id` (descriptor or tombstone).
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`],
    /// [`StoreError::TaskFailed`].
    pub async fn get(&self, id: &str) -> Result<Option<StoredAgent>, StoreError> {
        let (sync, id) = (self.sync.clone(), id.to_owned());
        unblock("get", move || sync.get(&id)).await?
    }

    /// The document of the live descriptor held for `id`, as the JSON text
    /// it was stored as; `None` when none is held or it is a tombstone.
    /// Reads only the document out of the record (`GET /agents/{id}`).
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`],
    /// [`StoreError::TaskFailed`].
    pub async fn document(&self, id: &str) -> Result<Option<String>, StoreError> {
        let (sync, id) = (self.sync.clone(), id.to_owned());
        unblock("document", move || sync.document(&id)).await?
    }

    /// Keeps the latest crawl report of an agent (JSON, shown by
    /// `GET /crawl/{domain}`) and its reason codes (shown in the agent's
    /// `trust.reasons`).
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::TaskFailed`].
    pub async fn put_report(
        &self,
        id: &str,
        report: Vec<u8>,
        reasons: Vec<Reason>,
    ) -> Result<(), StoreError> {
        let (sync, id) = (self.sync.clone(), id.to_owned());
        unblock("put_report", move || {
            sync.put_report(&id, &report, &reasons)
        })
        .await?
    }

    /// The reason codes of the latest crawl report of an agent (empty when
    /// it was not crawled here, or everything verified).
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::TaskFailed`].
    pub async fn reasons(&self, id: &str) -> Result<Vec<Reason>, StoreError> {
        let (sync, id) = (self.sync.clone(), id.to_owned());
        unblock("reasons", move || sync.reasons(&id)).await?
    }

    /// The latest crawl report of an agent, if it was crawled here.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::TaskFailed`].
    pub async fn report(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let (sync, id) = (self.sync.clone(), id.to_owned());
        unblock("report", move || sync.report(&id)).await?
    }

    /// Whether `id` was registered through this node's API (and is live).
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::TaskFailed`].
    pub async fn is_local(&self, id: &str) -> Result<bool, StoreError> {
        let (sync, id) = (self.sync.clone(), id.to_owned());
        unblock("is_local", move || sync.is_local(&id)).await?
    }

    /// Live descriptors matching `filter`, in order of first
    /// arrival, after the agent `after`, at most `limit` (see
    /// [`BlockingStore::walk`]); on a blocking thread.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`],
    /// [`StoreError::TaskFailed`].
    pub async fn search(
        &self,
        filter: &Filter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<StoredAgent>, StoreError> {
        let sync = self.sync.clone();
        let (filter, after) = (filter.clone(), after.map(str::to_owned));
        unblock("search", move || {
            sync.search(&filter, after.as_deref(), limit)
        })
        .await?
    }

    /// Number of live descriptors held.
    pub fn len(&self) -> u64 {
        self.sync.inner.live.load(Ordering::Relaxed)
    }

    /// Whether no live descriptor is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many live descriptors are held at trust `level` (the posting
    /// lists' count: no read).
    pub fn trust_count(&self, level: TrustLevel) -> u64 {
        self.sync
            .inner
            .postings
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len(&postings::trust_prefix(level))
    }

    /// Segments the text index is searched in (each text search walks
    /// every one; merges join them in the background); `None` while the
    /// index is not open (see [`TextIndexOpen::AtFirstSearch`]).
    pub fn text_segments(&self) -> Option<usize> {
        self.sync.inner.text.segments()
    }

    /// Writes committed since the store opened, counted once the posting
    /// lists have them: when it has not moved, a walk sees what the last
    /// one saw.
    pub fn write_count(&self) -> u64 {
        self.sync.inner.settled.load(Ordering::SeqCst)
    }

    /// How many live descriptors carry each term of `filter` (for ranking
    /// and diagnostics): `(field, term, count)`.
    pub fn term_count(&self, field: char, term: &str) -> u64 {
        let field = match field {
            'c' => FIELD_CAPABILITY,
            't' => FIELD_TAG,
            _ => FIELD_LANGUAGE,
        };
        self.sync
            .inner
            .postings
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len(&prefix(field, term))
    }

    /// Makes every write so far durable, and searchable by text.
    /// Concurrent callers share one flush (group commit): a caller whose
    /// writes a flush that started after them already covered skips the
    /// flush. The flush runs on a blocking thread, holding the gate
    /// against writes; the text index commits on its own thread, once for
    /// every caller waiting at the time.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Text`],
    /// [`StoreError::TaskFailed`].
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.flush_durable().await?;
        // Every write so far searchable by text too (one commit for every
        // caller waiting at once).
        self.sync.inner.text.sync().await
    }

    /// Makes every write so far durable, as [`Store::flush`] does, without
    /// waiting for the text index: the index commits on its own cadence
    /// (and a write it has not committed yet is repaired from `pending`
    /// after a crash). For bulk work, where a commit forced per flush
    /// would leave the index in many small segments that every text
    /// search then walks.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::TaskFailed`].
    pub async fn flush_durable(&self) -> Result<(), StoreError> {
        let inner = &self.sync.inner;
        let mine = inner.writes.load(Ordering::SeqCst);
        let _turn = inner.flush_turn.lock().await;
        if inner.flushed.load(Ordering::SeqCst) < mine || mine == 0 {
            let inner = inner.clone();
            unblock("flush", move || inner.flush_gated()).await??;
        }
        Ok(())
    }

    /// Waits until every write so far is searchable by text (without
    /// making it durable: that is [`Store::flush`]).
    ///
    /// # Errors
    /// [`StoreError::Text`] when the index's writer failed or stopped.
    pub async fn sync_text(&self) -> Result<(), StoreError> {
        self.sync.inner.text.sync().await
    }

    /// Live agents matching `q.filter`, ranked by `q.text` with the text
    /// index (BM25), best first, with scores in 0..1; `None` when the text
    /// has no word to rank with (empty, only stop words or symbols). On a
    /// blocking thread.
    /// Changes are searchable once the index commits them: at the latest
    /// half a second after the write, at once after [`Store::flush`].
    ///
    /// # Errors
    /// [`StoreError::Text`], [`StoreError::TaskFailed`].
    pub async fn text_search(
        &self,
        q: &TextQuery<'_>,
    ) -> Result<Option<Vec<(String, f64)>>, StoreError> {
        let sync = self.sync.clone();
        let (text, filter) = (q.text.to_owned(), q.filter.clone());
        let (limit, now, min_trust) = (q.limit, q.now, q.min_trust);
        let (capabilities, subjects) = (q.capabilities.to_vec(), q.subjects.to_vec());
        unblock("text_search", move || {
            sync.text_search(&TextQuery {
                text: &text,
                filter: &filter,
                limit,
                now,
                min_trust,
                capabilities: &capabilities,
                subjects: &subjects,
            })
        })
        .await?
    }

    /// Flushes periodically (sled's own flusher is off, see `gate`) until
    /// `cancel` fires, for durability only ([`Store::flush_durable`]); what
    /// the API acknowledges is flushed, and searchable, at once anyway.
    pub fn spawn_flusher(
        &self,
        every: std::time::Duration,
        cancel: tokio_util::sync::CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let store = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tokio::select! {
                    () = cancel.cancelled() => break,
                    _ = tick.tick() => {
                        let inner = &store.sync.inner;
                        if inner.flushed.load(Ordering::SeqCst) < inner.writes.load(Ordering::SeqCst) {
                            // Durability only: the text index keeps its
                            // own cadence.
                            if let Err(e) = store.flush_durable().await {
                                tracing::error!(error = %e, "periodic store flush failed");
                            }
                        }
                    }
                }
            }
        })
    }
}

/// Longest [`Store::close`] waits for sled to let go of the data
/// directory once the last handle is dropped.
pub const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Waits until nobody holds the lock sled takes on its `db` file in
/// `dir` (its I/O threads let go of the file a moment after the last
/// handle is dropped), at most `wait`.
fn wait_unlocked(dir: &Path, wait: std::time::Duration) -> Result<(), StoreError> {
    let file = dir.join("db");
    let deadline = std::time::Instant::now() + wait;
    while is_locked(&file)? {
        if std::time::Instant::now() >= deadline {
            return Err(StoreError::Close {
                reason: format!("{} still locked after {wait:?}", file.display()),
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Ok(())
}

/// Whether another open file holds `file`'s lock (sled's: `flock`,
/// exclusive). Taking it here releases it at once, with the file.
#[cfg(unix)]
fn is_locked(file: &Path) -> Result<bool, StoreError> {
    use std::os::fd::AsRawFd as _;
    let f = match std::fs::File::open(file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            return Err(StoreError::Close {
                reason: format!("{}: {e}", file.display()),
            })
        }
    };
    // SAFETY: `f` is an open file this function owns for the whole call;
    // flock only takes (or fails to take) a lock on it, which closing `f`
    // releases.
    let taken = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    Ok(!taken)
}

/// Elsewhere the lock is not looked at: the drop is all there is.
#[cfg(not(unix))]
fn is_locked(_file: &Path) -> Result<bool, StoreError> {
    Ok(false)
}

#[cfg(test)]
mod tests;
