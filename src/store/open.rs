//! Opening and closing a store: [`StoreOptions`], the trees opened and
//! an older layout migrated, what is kept in memory read, the text index
//! opened; [`Store::close`], which returns once the data directory can be
//! opened again.

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, RwLock};

use super::changes::Feeds;
use super::error::StoreError;
use super::freshness::FreshIndex;
use super::handles::{unblock, BlockingStore, Inner, Store, WRITE_STRIPES};
use super::migrate::{self, SCHEMA_VERSION};
use super::postings::{self, Postings};
use super::reports::fill_reasons;
use super::suspended::Suspended;
use super::text::{Text, TextIndexOpen};
use super::usage::Usage;
use super::visibility::Entitlements;

/// How a store opens. The default is what `agentmesh node` runs, but for
/// the page cache, which comes from `store.cache_bytes`.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// sled's page cache, in bytes.
    pub cache_bytes: u64,
    /// When the text index opens (`store/text/opening.rs`).
    pub text_index: TextIndexOpen,
    /// The store's size on disk past which writes of live records are
    /// refused (`store.max_bytes`); `None`: no limit but the disk's.
    pub max_bytes: Option<u64>,
    /// The key whose records go into the transparency log: the node's
    /// own (`store/log.rs`); `None` logs nothing.
    pub log_signer: Option<[u8; 32]>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            cache_bytes: crate::config::StoreConfig::default().cache_bytes,
            text_index: TextIndexOpen::WithStore,
            max_bytes: None,
            log_signer: None,
        }
    }
}

impl StoreOptions {
    /// The options of a node's store under `config` (`[store]`): its page
    /// cache and its size limit.
    pub fn of(config: &crate::config::StoreConfig) -> Self {
        Self {
            cache_bytes: config.cache_bytes,
            max_bytes: config.max_bytes,
            ..Self::default()
        }
    }
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
        let found = layout_version(&meta)?;
        let trees = Trees::open(&db, meta)?;
        upgrade(&db, &trees, found)?;
        let (postings, claims) = Postings::load(&trees.compact)?;
        let live = postings.live();
        let next_ord = match trees.compact.last()? {
            Some((key, _)) => u64::from(postings::decode_ord("compact", &key)?) + 1,
            None => 0,
        };
        let text = Text::open(
            options.text_index,
            dir.to_path_buf(),
            &trees.records,
            &trees.pending,
            live,
        )?;
        let suspended = Suspended::load(&trees.suspended, &trees.ordinals)?;
        let entitlements = Entitlements::load(&trees.entitlements, &trees.ordinals)?;
        let mut dropped = FreshIndex::load(&trees.freshness, &trees.ordinals)?;
        dropped.load_trusted(&trees.liveness)?;
        let audit = super::audit::AuditLog::open(&db)?;
        let log = super::log::Log::open(&db, options.log_signer)?;
        let Trees {
            meta,
            records,
            local,
            reports,
            reasons,
            ordinals,
            compact,
            pending,
            suspended: suspended_tree,
            entitlements: entitlements_tree,
            freshness,
            schedule,
            revoked,
            transfers,
            liveness,
            gone,
        } = trees;
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
                    postings: RwLock::new(postings),
                    suspended_tree,
                    suspended: RwLock::new(suspended),
                    entitlements_tree,
                    entitlements: RwLock::new(entitlements),
                    freshness,
                    schedule,
                    dropped: RwLock::new(dropped),
                    liveness,
                    liveness_turn: Mutex::new(()),
                    gone,
                    claims: Mutex::new(claims),
                    revoked,
                    log,
                    transfers,
                    meta,
                    audit,
                    next_ord: AtomicU64::new(next_ord),
                    feeds: Feeds::default(),
                    stripes: (0..WRITE_STRIPES).map(|_| Mutex::new(())).collect(),
                    live: AtomicU64::new(live),
                    settled: AtomicU64::new(0),
                    gate: RwLock::new(()),
                    usage: Usage::new(options.max_bytes),
                    writes: AtomicU64::new(0),
                    flushed: AtomicU64::new(0),
                    flush_turn: tokio::sync::Mutex::new(()),
                    #[cfg(test)]
                    flush_hook: Mutex::new(None),
                }),
            },
        })
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

    /// Whether a store in `dir` is open (a node runs on it): sled's lock
    /// on its database file is held.
    ///
    /// # Errors
    /// [`StoreError::Close`] when the file cannot be opened to look.
    pub fn is_in_use(dir: &Path) -> Result<bool, StoreError> {
        is_locked(&dir.join("db"))
    }

    /// As [`Store::close`], on this thread: only from a blocking context.
    ///
    /// # Errors
    /// As [`Store::close`], without [`StoreError::TaskFailed`].
    pub fn close_blocking(self) -> Result<(), StoreError> {
        self.sync.close()
    }
}

impl BlockingStore {
    /// As [`Store::close`], on this thread.
    ///
    /// # Errors
    /// As [`Store::close`], without [`StoreError::TaskFailed`].
    pub fn close(self) -> Result<(), StoreError> {
        self.flush()?;
        let inner = Arc::try_unwrap(self.inner).map_err(|inner| StoreError::Close {
            reason: format!(
                "{} other handles to the store are alive",
                Arc::strong_count(&inner) - 1
            ),
        })?;
        let dir = inner.dir.clone();
        // Dropping the text index joins its writer thread (after a last
        // commit and the merges), which releases tantivy's writer lock;
        // dropping the trees and the database closes sled's side.
        drop(inner);
        wait_unlocked(&dir, CLOSE_WAIT)
    }
}

/// The store's sled trees (see the module documentation of `store`).
struct Trees {
    meta: sled::Tree,
    records: sled::Tree,
    local: sled::Tree,
    reports: sled::Tree,
    reasons: sled::Tree,
    ordinals: sled::Tree,
    compact: sled::Tree,
    pending: sled::Tree,
    suspended: sled::Tree,
    entitlements: sled::Tree,
    freshness: sled::Tree,
    schedule: sled::Tree,
    revoked: sled::Tree,
    transfers: sled::Tree,
    liveness: sled::Tree,
    gone: sled::Tree,
}

impl Trees {
    /// Opens (or creates) every tree but `meta`, already open.
    fn open(db: &sled::Db, meta: sled::Tree) -> Result<Self, StoreError> {
        Ok(Self {
            meta,
            records: db.open_tree("records")?,
            local: db.open_tree("local")?,
            reports: db.open_tree("reports")?,
            reasons: db.open_tree("reasons")?,
            ordinals: db.open_tree("ordinals")?,
            compact: db.open_tree("compact")?,
            pending: db.open_tree("pending")?,
            suspended: db.open_tree("suspended")?,
            entitlements: db.open_tree("entitlements")?,
            freshness: db.open_tree("freshness")?,
            schedule: db.open_tree("schedule")?,
            revoked: db.open_tree("revoked")?,
            transfers: db.open_tree("transfers")?,
            liveness: db.open_tree("liveness")?,
            gone: db.open_tree("gone")?,
        })
    }
}

/// The layout version a data directory holds (`None` for a new one).
///
/// # Errors
/// [`StoreError::SchemaVersion`] for a version this build does not read.
fn layout_version(meta: &sled::Tree) -> Result<Option<u32>, StoreError> {
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
    Ok(found)
}

/// Brings a data directory found at layout version `found` to
/// [`SCHEMA_VERSION`] (`store/migrate.rs`), drops the old `index` tree,
/// and fills the reason codes of a directory written before they were
/// kept apart from the reports.
fn upgrade(db: &sled::Db, trees: &Trees, found: Option<u32>) -> Result<(), StoreError> {
    if let Some(from) = found.filter(|f| *f < SCHEMA_VERSION) {
        let ordinals_from = if from == 1 {
            migrate::Ordinals::Assign
        } else {
            migrate::Ordinals::Keep
        };
        migrate::rebuild(
            db,
            &trees.records,
            &trees.local,
            &trees.ordinals,
            &trees.compact,
            ordinals_from,
        )?;
    }
    if found != Some(SCHEMA_VERSION) {
        trees
            .meta
            .insert("schema_version", &SCHEMA_VERSION.to_be_bytes())?;
        db.flush()?;
    }
    // The `index` tree of versions 1 and 2, once the version says it
    // is no longer read.
    db.drop_tree("index")?;
    if trees.reasons.is_empty() && !trees.reports.is_empty() {
        fill_reasons(&trees.reports, &trees.reasons)?;
    }
    Ok(())
}

/// Longest [`Store::close`] waits for sled to let go of the data
/// directory once the last handle is dropped.
pub const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Waits until nobody holds the lock sled takes on its `db` file in
/// `dir` (its I/O threads let go of the file a moment after the last
/// handle is dropped), at most `wait`.
pub(super) fn wait_unlocked(dir: &Path, wait: std::time::Duration) -> Result<(), StoreError> {
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
