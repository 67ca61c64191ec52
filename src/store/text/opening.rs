//! When the store's text index opens: with the store (what `agentmesh
//! node` does), or at the first text search ([`TextIndexOpen`]). The
//! store holds a [`Text`] and goes through it for every change, sync and
//! search; nothing else here knows which of the two it is.
//!
//! An index not opened yet costs nothing: no tantivy writer (its memory
//! arena and hash table, 12 MB and more while it holds uncommitted
//! documents), no writer or merge threads, no files. Writes still mark
//! their agent in the `pending` tree (that is in the write's own sled
//! transaction), and the first text search builds the index from the
//! `records` tree exactly as an index found missing at open is built
//! (`store/text.rs`). A write that commits while that build runs waits
//! in [`Text::changed`] until the index is open and then tells it, so
//! no write falls between the build's read of `records` and the first
//! change the writer applies.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use super::index::TextIndex;
use super::query::TextQuery;
use crate::store::error::StoreError;

/// When a store's text index opens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TextIndexOpen {
    /// With the store, repaired or rebuilt at once: the node's default,
    /// so the first text search is as fast as the others.
    #[default]
    WithStore,
    /// At the first text search (or never, for a store that only answers
    /// filter searches, such as capability searches): built then from the
    /// records, as a missing index is at open. For many stores in one
    /// process (the simulator's real swarms), each of which would
    /// otherwise hold its own tantivy writer and threads.
    AtFirstSearch,
}

/// The store's text index, opened now or at its first search.
pub(in crate::store) struct Text {
    index: OnceLock<TextIndex>,
    /// Held while the index opens (see the module documentation).
    opening: Mutex<()>,
    store_dir: PathBuf,
    records: sled::Tree,
    pending: sled::Tree,
}

impl Text {
    /// The text index of the store in `store_dir`; opened here under
    /// [`TextIndexOpen::WithStore`]. `live` is the store's count of live
    /// descriptors.
    pub(in crate::store) fn open(
        when: TextIndexOpen,
        store_dir: PathBuf,
        records: &sled::Tree,
        pending: &sled::Tree,
        live: u64,
    ) -> Result<Self, StoreError> {
        let text = Self {
            index: OnceLock::new(),
            opening: Mutex::new(()),
            store_dir,
            records: records.clone(),
            pending: pending.clone(),
        };
        if when == TextIndexOpen::WithStore {
            let index = TextIndex::open(&text.store_dir, records, pending, live)?;
            let _ = text.index.set(index);
        }
        Ok(text)
    }

    fn lock_opening(&self) -> MutexGuard<'_, ()> {
        self.opening
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The index, opened now if it was not yet. Blocks (the open may
    /// build the whole index): blocking threads only.
    fn get_or_open(&self, live: &AtomicU64) -> Result<&TextIndex, StoreError> {
        if let Some(index) = self.index.get() {
            return Ok(index);
        }
        let _opening = self.lock_opening();
        if let Some(index) = self.index.get() {
            return Ok(index);
        }
        let index = TextIndex::open(
            &self.store_dir,
            &self.records,
            &self.pending,
            live.load(Ordering::SeqCst),
        )?;
        tracing::info!(dir = %self.store_dir.display(), "text index opened at its first search");
        Ok(self.index.get_or_init(|| index))
    }

    /// Whether the index is open.
    #[cfg(test)]
    pub(in crate::store) fn is_open(&self) -> bool {
        self.index.get().is_some()
    }

    /// Tells the index that `id`'s record changed (after the write
    /// committed). An index not open has nothing to be told; one opening
    /// is told once it is open.
    pub(in crate::store) fn changed(&self, id: &str) {
        if let Some(index) = self.index.get() {
            return index.changed(id);
        }
        let _opening = self.lock_opening();
        if let Some(index) = self.index.get() {
            index.changed(id);
        }
    }

    /// Waits until every change told so far is searchable. An index not
    /// open has none: the first search builds it from the records.
    pub(in crate::store) async fn sync(&self) -> Result<(), StoreError> {
        match self.index.get() {
            Some(index) => index.sync().await,
            None => Ok(()),
        }
    }

    /// As [`Text::sync`], on this (blocking) thread.
    pub(in crate::store) fn sync_blocking(&self) -> Result<(), StoreError> {
        match self.index.get() {
            Some(index) => index.sync_blocking(),
            None => Ok(()),
        }
    }

    /// [`TextIndex::search`], opening the index first if needed (on this
    /// blocking thread).
    pub(in crate::store) fn search(
        &self,
        q: &TextQuery<'_>,
        live: &AtomicU64,
    ) -> Result<Option<Vec<(String, f64)>>, StoreError> {
        self.get_or_open(live)?.search(q)
    }

    /// [`TextIndex::segments`]; `None` while the index is not open.
    pub(in crate::store) fn segments(&self) -> Option<usize> {
        self.index.get().map(TextIndex::segments)
    }

    /// The open index, for tests that look inside it.
    #[cfg(test)]
    pub(in crate::store) fn index(&self) -> &TextIndex {
        self.index.get().expect("the test opened the index")
    }
}
