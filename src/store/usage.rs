//! The store's room on disk: `store.max_bytes`, past which writes of live
//! records are refused with [`StoreError::OutOfSpace`] while reads go on,
//! and the disk's own "no space left" told the same way
//! ([`StoreError::is_out_of_space`]). The API answers both 507.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::error::StoreError;

/// How long a measurement of the store's size stands: measuring walks the
/// store's directory (sled's files and the text index's segments), a few
/// dozen `stat`s, which a write should not pay each time.
const MEASURE_EVERY: Duration = Duration::from_millis(500);

/// The limit and the last measurement of the store's size.
#[derive(Debug)]
pub(super) struct Usage {
    limit: Option<u64>,
    bytes: AtomicU64,
    measured: Mutex<Option<Instant>>,
}

impl Usage {
    pub(super) fn new(limit: Option<u64>) -> Self {
        Self {
            limit,
            bytes: AtomicU64::new(0),
            measured: Mutex::new(None),
        }
    }

    /// Whether a write that adds data may go ahead: below the limit (or
    /// without one).
    ///
    /// # Errors
    /// [`StoreError::OutOfSpace`] at or past the limit.
    pub(super) fn room(&self, dir: &Path) -> Result<(), StoreError> {
        disk_room(dir)?;
        let Some(limit) = self.limit else {
            return Ok(());
        };
        let used = self.measure(dir);
        if used >= limit {
            return Err(StoreError::OutOfSpace {
                reason: format!("the store uses {used} bytes of its store.max_bytes {limit}"),
            });
        }
        Ok(())
    }

    /// The store's size on disk, measured again once the last
    /// measurement is older than [`MEASURE_EVERY`].
    fn measure(&self, dir: &Path) -> u64 {
        let mut measured = self
            .measured
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if measured.is_none_or(|at| at.elapsed() >= MEASURE_EVERY) {
            self.bytes.store(disk_usage(dir), Ordering::Relaxed);
            *measured = Some(Instant::now());
        }
        self.bytes.load(Ordering::Relaxed)
    }
}

/// Free space kept on the store's filesystem: below it, writes are
/// refused as if the disk were full. sled fails every later operation
/// once one of its own writes has met "no space left", until a restart;
/// refusing before it gets there keeps the node taking writes again as
/// soon as space returns.
pub const DISK_RESERVE: u64 = 8 << 20;

/// Whether the filesystem holding `dir` has more than [`DISK_RESERVE`]
/// free (for unprivileged use); a filesystem that cannot be asked counts
/// as having room.
///
/// # Errors
/// [`StoreError::OutOfSpace`] under the reserve.
pub(super) fn disk_room(dir: &Path) -> Result<(), StoreError> {
    match free_bytes(dir) {
        Some(free) if free < DISK_RESERVE => Err(StoreError::OutOfSpace {
            reason: format!(
                "the disk holding the store has {free} bytes free, under the {DISK_RESERVE} kept in reserve"
            ),
        }),
        _ => Ok(()),
    }
}

/// The bytes free for unprivileged use on the filesystem of `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is a NUL-terminated string that outlives the call,
    // and `stat` is written whole by statvfs when it returns 0.
    let stat = unsafe {
        if libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) != 0 {
            return None;
        }
        stat.assume_init()
    };
    Some(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// The bytes the files under `dir` take on disk (blocks allocated, so a
/// sparse or preallocated file counts what it really holds); a file that
/// vanishes while it is walked (a merged text segment) counts nothing.
pub fn disk_usage(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(m) if m.is_dir() => disk_usage(&entry.path()),
            Ok(m) => allocated(&m),
            Err(_) => 0,
        })
        .sum()
}

#[cfg(unix)]
fn allocated(m: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    m.blocks() * 512
}

#[cfg(not(unix))]
fn allocated(m: &std::fs::Metadata) -> u64 {
    m.len()
}

impl StoreError {
    /// Whether the error means the store has no room: `store.max_bytes`
    /// reached, or the disk full (`ENOSPC` from sled or the text index).
    pub fn is_out_of_space(&self) -> bool {
        match self {
            Self::OutOfSpace { .. } => true,
            Self::Sled(sled::Error::Io(e)) => is_enospc(e),
            // The text index's and a failed batch's errors keep only
            // their cause's text.
            Self::Text { reason } | Self::BatchFailed { reason } => {
                reason.contains(OUT_OF_SPACE) || reason.contains(ENOSPC_TEXT)
            }
            _ => false,
        }
    }
}

/// What [`StoreError::OutOfSpace`] says first.
const OUT_OF_SPACE: &str = "store out of space";
/// How the C library words `ENOSPC`, which is what a flattened I/O error
/// keeps of it.
const ENOSPC_TEXT: &str = "No space left on device";

/// Whether an I/O error is the disk being full.
pub fn is_enospc(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::StorageFull || e.raw_os_error() == Some(libc::ENOSPC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_past_its_limit_refuses_and_below_it_admits() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), vec![1u8; 64 * 1024]).unwrap();
        let used = disk_usage(dir.path());
        assert!(used >= 64 * 1024, "64 KiB written, {used} counted");
        assert!(Usage::new(None).room(dir.path()).is_ok());
        assert!(Usage::new(Some(used * 2)).room(dir.path()).is_ok());
        let refused = Usage::new(Some(used)).room(dir.path()).unwrap_err();
        assert!(refused.is_out_of_space(), "{refused}");
        let batch = StoreError::BatchFailed {
            reason: refused.to_string(),
        };
        assert!(batch.is_out_of_space());
        let disk = StoreError::Sled(sled::Error::Io(std::io::Error::from_raw_os_error(
            libc::ENOSPC,
        )));
        assert!(disk.is_out_of_space());
        assert!(!StoreError::Full { reason: "x".into() }.is_out_of_space());
    }
}
