//! What a node knows of the upstream registries it follows
//! (`crawl/follow.rs`): one JSON value per upstream URL, in the `meta`
//! tree under `upstream/{url}`, so that a restarted node resumes where it
//! was instead of fetching everything again.

use super::error::StoreError;
use super::handles::BlockingStore;

/// The key prefix of upstream states in the `meta` tree.
const PREFIX: &str = "upstream/";

impl BlockingStore {
    /// Keeps the state of the upstream at `url` (opaque bytes: the
    /// follower's JSON), durably.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn put_upstream(&self, url: &str, state: &[u8]) -> Result<(), StoreError> {
        self.inner
            .meta
            .insert(format!("{PREFIX}{url}").as_bytes(), state)?;
        self.inner.meta.flush()?;
        Ok(())
    }

    /// The state kept for the upstream at `url`.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn upstream(&self, url: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .inner
            .meta
            .get(format!("{PREFIX}{url}").as_bytes())?
            .map(|v| v.to_vec()))
    }

    /// Every upstream state kept, by URL.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn upstreams(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.meta_under(PREFIX)
    }

    /// Every value of the `meta` tree under `prefix`, by the rest of its
    /// key.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub(super) fn meta_under(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.inner
            .meta
            .scan_prefix(prefix.as_bytes())
            .map(|entry| {
                let (k, v) = entry?;
                let rest = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
                Ok((rest, v.to_vec()))
            })
            .collect()
    }
}
