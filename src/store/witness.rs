//! What this node's witness keeps across restarts (`crate::witness`):
//! the last checkpoint it holds from each peer and the equivocation proofs
//! it found or was shown, as opaque JSON in the `meta` tree under
//! `witness/seen/{peer}` and `witness/equivocation/{peer}`.

use super::error::StoreError;
use super::handles::BlockingStore;

/// The key prefix of the last checkpoint held from each peer.
pub const SEEN: &str = "witness/seen/";
/// The key prefix of equivocation proofs, one per peer.
pub const EQUIVOCATION: &str = "witness/equivocation/";

impl BlockingStore {
    /// Keeps `value` under `prefix` + `peer` (one of [`SEEN`],
    /// [`EQUIVOCATION`]), durably.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn put_witnessed(&self, prefix: &str, peer: &str, value: &[u8]) -> Result<(), StoreError> {
        self.inner
            .meta
            .insert(format!("{prefix}{peer}").as_bytes(), value)?;
        self.inner.meta.flush()?;
        Ok(())
    }

    /// Every value kept under `prefix`, by peer.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn witnessed(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.meta_under(prefix)
    }
}
