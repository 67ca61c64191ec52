//! The store's reads on the calling thread ([`BlockingStore`]): records
//! and documents, the filter walk over the posting lists (suspended and
//! dropped agents subtracted) and its pages of compact records, held
//! seqs, the local set, and the text ranking with suspended and dropped
//! agents left out.

use std::sync::atomic::Ordering;

use roaring::RoaringBitmap;

use super::changes::ChangeFeed;
use super::compact::{self, CompactAgent};
use super::error::{corrupt, StoreError};
use super::filter::Filter;
use super::handles::BlockingStore;
use super::postings;
use super::stored::{decode_stored, stored_envelope, StoredAgent};
use super::text::TextQuery;
use crate::record::{RecordType, SignedRecord};
use crate::trust::TrustLevel;

/// Most results a text search asks the index for beyond its limit, to
/// make up for the hidden agents it leaves out: a node holding more
/// hidden agents than this that all rank high may answer short pages.
const MAX_HIDDEN_OVERFETCH: usize = 1024;

/// Most results a text search with `alive_since` asks the index for
/// beyond its limit, to make up for the agents not found alive that it
/// leaves out (the index knows nothing of liveness): when more than this
/// many agents not found alive rank above the alive ones, a page may be
/// short.
const MAX_ALIVE_OVERFETCH: usize = 1024;

impl BlockingStore {
    /// As [`Store::get`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn get(&self, id: &str) -> Result<Option<StoredAgent>, StoreError> {
        match self.inner.records.get(id.as_bytes())? {
            Some(bytes) => decode_stored(id, &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// As [`Store::document`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn document(&self, id: &str) -> Result<Option<String>, StoreError> {
        let Some(bytes) = self.inner.records.get(id.as_bytes())? else {
            return Ok(None);
        };
        SignedRecord::trusted_document(stored_envelope(id, &bytes)?)
            .map_err(|e| corrupt(id, e.to_string()))
    }

    /// As [`Store::is_local`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn is_local(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.inner.local.contains_key(id.as_bytes())?)
    }

    /// Up to `limit` ids of agents registered here, in id order, after
    /// `after` (from the first when `None`).
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn local_ids(&self, after: Option<&str>, limit: usize) -> Result<Vec<String>, StoreError> {
        let range = match after {
            Some(a) => self.inner.local.range::<&[u8], _>((
                std::ops::Bound::Excluded(a.as_bytes()),
                std::ops::Bound::Unbounded,
            )),
            None => self.inner.local.iter(),
        };
        range
            .keys()
            .take(limit)
            .map(|k| Ok(String::from_utf8_lossy(&k?).into_owned()))
            .collect()
    }

    /// As [`Store::search`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn search(
        &self,
        filter: &Filter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<StoredAgent>, StoreError> {
        let (page, _) = self.walk(filter, None, after, limit)?;
        let mut out = Vec::with_capacity(page.len());
        for agent in page {
            // A record replaced since the walk read its compact form is
            // read as it is now, and left out if it is gone.
            if let Some(stored) = self.get(&agent.id)? {
                if stored.record.kind() == RecordType::Descriptor {
                    out.push(stored);
                }
            }
        }
        Ok(out)
    }

    /// One page of the live descriptors matching `filter` (and
    /// at `min_trust` or above), in order of first arrival, after the
    /// agent `after` (from its first page when `None`; an id this store
    /// never held answers an empty page): their compact records, and the
    /// id to continue after when more may follow. The filter is an AND of
    /// in-memory bitmaps; each result costs one read of its compact
    /// record.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn walk(
        &self,
        filter: &Filter,
        min_trust: Option<TrustLevel>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<CompactAgent>, Option<String>), StoreError> {
        if limit == 0 {
            return Ok((Vec::new(), None));
        }
        let start = match after {
            None => 0,
            Some(id) => match self.inner.ordinals.get(id.as_bytes())? {
                Some(v) => u64::from(postings::decode_ord(id, &v)?) + 1,
                None => return Ok((Vec::new(), None)),
            },
        };
        let Ok(start) = u32::try_from(start) else {
            return Ok((Vec::new(), None));
        };
        let matching = self.matching(filter, min_trust);
        let mut out = Vec::with_capacity(limit.min(1024));
        let mut ords = matching.range(start..);
        for ord in ords.by_ref() {
            if let Some(agent) = self.compact_at(ord)? {
                out.push(agent);
                if out.len() == limit {
                    break;
                }
            }
        }
        let more = out.len() == limit && ords.next().is_some();
        let next = more.then(|| out[out.len() - 1].id.clone());
        Ok((out, next))
    }

    /// The ordinals of the live descriptors matching `filter` (and at
    /// `min_trust` or above), suspended agents left out, and dropped ones
    /// unless the filter includes stale agents: what [`BlockingStore::walk`]
    /// pages through. Expiry is not looked at (the compact record has it).
    pub fn matching(&self, filter: &Filter, min_trust: Option<TrustLevel>) -> RoaringBitmap {
        let min_trust = min_trust.max(filter.min_trust);
        let mut matching = self
            .inner
            .postings
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .select(&filter.prefixes(), min_trust);
        matching -= self.suspended_read().ordinals();
        matching -= self.entitlements_read().unseen(&filter.audience);
        if !filter.include_stale {
            matching -= self.dropped_read().ordinals();
        }
        if let Some(since) = filter.alive_since {
            matching &= self.dropped_read().alive_since(since);
        }
        matching
    }

    /// How many ordinals the store has given out: every agent it ever
    /// held has one below this.
    pub fn ordinals_seen(&self) -> u32 {
        u32::try_from(self.inner.next_ord.load(Ordering::SeqCst)).unwrap_or(u32::MAX)
    }

    /// A feed of the ordinals of the agents written from now on: see
    /// [`ChangeFeed`].
    pub fn change_feed(&self) -> ChangeFeed {
        self.inner.feeds.subscribe()
    }

    /// The compact record of the agent with ordinal `ord`, when it is a
    /// live descriptor.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn compact_by_ordinal(&self, ord: u32) -> Result<Option<CompactAgent>, StoreError> {
        self.compact_at(ord)
    }

    /// The compact record of a live agent (what a search result shows);
    /// `None` for an unknown agent or a tombstone.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn compact(&self, id: &str) -> Result<Option<CompactAgent>, StoreError> {
        match self.inner.ordinals.get(id.as_bytes())? {
            Some(v) => self.compact_at(postings::decode_ord(id, &v)?),
            None => Ok(None),
        }
    }

    /// The seq of the record held for `id` (descriptor or tombstone),
    /// read from its compact record: what the next record must exceed.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn held_seq(&self, id: &str) -> Result<Option<u64>, StoreError> {
        let Some(v) = self.inner.ordinals.get(id.as_bytes())? else {
            return Ok(None);
        };
        let ord = postings::decode_ord(id, &v)?;
        match self.inner.compact.get(ord.to_be_bytes())? {
            Some(bytes) => compact::seq_of(id, &bytes).map(Some),
            None => Ok(None),
        }
    }

    fn compact_at(&self, ord: u32) -> Result<Option<CompactAgent>, StoreError> {
        match self.inner.compact.get(ord.to_be_bytes())? {
            Some(bytes) => compact::decode(&format!("ordinal {ord}"), &bytes),
            None => Ok(None),
        }
    }

    /// As [`Store::text_search`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Text`].
    pub fn text_search(&self, q: &TextQuery<'_>) -> Result<Option<Vec<(String, f64)>>, StoreError> {
        // The index knows nothing of visibility: it is asked for as many
        // more as there are hidden agents (up to `MAX_HIDDEN_OVERFETCH`),
        // which are then left out.
        let hidden = self.entitlements_read().hidden_count();
        let mut extra = usize::try_from(hidden)
            .unwrap_or(usize::MAX)
            .min(MAX_HIDDEN_OVERFETCH);
        if q.filter.alive_since.is_some() {
            extra = extra.saturating_add(MAX_ALIVE_OVERFETCH);
        }
        let asked = TextQuery {
            limit: q.limit.saturating_add(extra),
            ..*q
        };
        let mut ranked = self.inner.text.search(&asked, &self.inner.live)?;
        if let Some(ranked) = ranked.as_mut() {
            let suspended = self.suspended_read();
            ranked.retain(|(id, _)| !suspended.contains(id));
            if hidden > 0 {
                let entitlements = self.entitlements_read();
                ranked.retain(|(id, _)| entitlements.lists(id, &q.filter.audience));
            }
        }
        if let (Some(ranked), false) = (ranked.as_mut(), q.filter.include_stale) {
            let dropped = self.dropped_read();
            if !dropped.ordinals().is_empty() {
                let mut kept = Vec::with_capacity(ranked.len());
                for (id, score) in ranked.drain(..) {
                    let ord = match self.inner.ordinals.get(id.as_bytes())? {
                        Some(v) => Some(postings::decode_ord(&id, &v)?),
                        None => None,
                    };
                    if !ord.is_some_and(|o| dropped.contains(o)) {
                        kept.push((id, score));
                    }
                }
                *ranked = kept;
            }
        }
        if let (Some(ranked), Some(since)) = (ranked.as_mut(), q.filter.alive_since) {
            let index = self.dropped_read();
            let mut kept = Vec::with_capacity(ranked.len());
            for (id, score) in ranked.drain(..) {
                if let Some(v) = self.inner.ordinals.get(id.as_bytes())? {
                    if index.is_alive_since(postings::decode_ord(&id, &v)?, since) {
                        kept.push((id, score));
                    }
                }
            }
            *ranked = kept;
        }
        if let Some(ranked) = ranked.as_mut() {
            ranked.truncate(q.limit);
        }
        Ok(ranked)
    }
}
