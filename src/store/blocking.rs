//! The store's blocking face: [`BlockingStore`]'s operations on the
//! calling thread (sled transactions, reads, scans), the write/flush gate
//! and the group-commit flush, and the encodings of stored values. The
//! async [`Store`] runs these inside `spawn_blocking`.

use std::sync::atomic::Ordering;

use sled::transaction::{ConflictableTransactionError, TransactionError};
use sled::Transactional;

use super::*;
use crate::verify::TrustLevel;
use postings::index_key;

impl BlockingStore {
    /// As [`Store::put`], on this thread: may wait for a whole flush.
    ///
    /// # Errors
    /// As [`Store::put`], without [`StoreError::TaskFailed`].
    pub fn put(
        &self,
        record: &SignedRecord,
        body: &RecordBody,
        origin: Origin,
        expect: Expect,
    ) -> Result<PutOutcome, StoreError> {
        self.write(Write::new(record, body, origin, expect))
    }

    pub(super) fn write(&self, write: Write) -> Result<PutOutcome, StoreError> {
        let Write {
            id,
            seq,
            kind,
            value,
            compact,
            new_terms,
            origin,
            expect,
        } = write;
        let inner = &self.inner;

        // Writes of one agent commit and then update the in-memory posting
        // lists in the same order: two writes of an agent whose updates
        // crossed would leave the terms of the older one behind.
        let _agent = inner.stripe(&id);
        let gate = inner
            .gate
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let trees = (
            &inner.records,
            &inner.index,
            &inner.local,
            &inner.pending,
            &inner.ordinals,
            &inner.compact,
        );
        let result = trees.transaction(|(r, i, l, p, o, c)| {
            let abort = |e: StoreError| ConflictableTransactionError::Abort(e);
            let prev = match r.get(id.as_bytes())? {
                Some(bytes) => Some(decode_value(&id, &bytes).map_err(abort)?),
                None => None,
            };
            let is_local = l.get(id.as_bytes())?.is_some();
            let was_live = matches!(prev, Some(RecordBody::Descriptor(_)));
            match expect {
                Expect::Any => {}
                Expect::LocalOrAbsent if was_live && !is_local => {
                    return Err(abort(StoreError::NotLocal {
                        agent_id: id.clone(),
                    }));
                }
                Expect::LocalLive if !was_live => {
                    return Err(abort(StoreError::NotFound {
                        agent_id: id.clone(),
                    }));
                }
                Expect::LocalLive if !is_local => {
                    return Err(abort(StoreError::NotLocal {
                        agent_id: id.clone(),
                    }));
                }
                _ => {}
            }
            if let Some(prev) = &prev {
                if seq <= prev.seq() {
                    return Err(abort(StoreError::Record(RecordError::StaleSeq {
                        agent_id: id.clone(),
                        seq,
                        held: prev.seq(),
                    })));
                }
            }
            let ord = match o.get(id.as_bytes())? {
                Some(v) => postings::decode_ord(&id, &v).map_err(abort)?,
                None => {
                    let ord = inner.allocate_ord().map_err(abort)?;
                    o.insert(id.as_bytes(), &ord.to_be_bytes()[..])?;
                    ord
                }
            };
            let old_terms = prev.as_ref().map(body_terms).unwrap_or_default();
            let removed: Vec<Vec<u8>> = old_terms.difference(&new_terms).cloned().collect();
            let added: Vec<Vec<u8>> = new_terms.difference(&old_terms).cloned().collect();
            for p in &removed {
                i.remove(index_key(p, ord))?;
            }
            for p in &added {
                i.insert(index_key(p, ord), &[][..])?;
            }
            r.insert(id.as_bytes(), value.as_slice())?;
            p.insert(id.as_bytes(), &seq.to_be_bytes()[..])?;
            let now_local = match (origin, kind) {
                (Origin::Local, KIND_DESCRIPTOR) => {
                    l.insert(id.as_bytes(), &[][..])?;
                    true
                }
                (_, KIND_TOMBSTONE) => {
                    l.remove(id.as_bytes())?;
                    false
                }
                _ => is_local,
            };
            let compact_value = match &compact {
                Some(agent) => compact::encode_live(&CompactAgent {
                    local: now_local,
                    ..agent.clone()
                }),
                None => compact::encode_tombstone(&id, seq),
            };
            c.insert(&ord.to_be_bytes()[..], compact_value)?;
            Ok(Change {
                ord,
                removed,
                added,
                was_live,
                now_live: kind == KIND_DESCRIPTOR,
            })
        });
        drop(gate);
        let change = match result {
            Ok(c) => c,
            Err(TransactionError::Abort(e)) => return Err(e),
            Err(TransactionError::Storage(e)) => return Err(e.into()),
        };
        // Before the write is counted: a flush that covers it also waits
        // for the text index to have it.
        inner.text.changed(&id);
        inner.writes.fetch_add(1, Ordering::SeqCst);
        {
            let mut postings = inner
                .postings
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for p in &change.removed {
                postings.remove(p, change.ord);
            }
            for p in change.added {
                postings.insert(p, change.ord);
            }
        }
        match (change.was_live, change.now_live) {
            (false, true) => {
                inner.live.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                inner.live.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
        Ok(if change.was_live {
            PutOutcome::Updated
        } else {
            PutOutcome::Created
        })
    }

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

    /// As [`Store::put_report`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn put_report(
        &self,
        id: &str,
        report: &[u8],
        reasons: &[Reason],
    ) -> Result<(), StoreError> {
        self.inner
            .reasons
            .insert(id.as_bytes(), encode_reasons(reasons))?;
        self.inner.reports.insert(id.as_bytes(), report)?;
        Ok(())
    }

    /// As [`Store::reasons`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn reasons(&self, id: &str) -> Result<Vec<Reason>, StoreError> {
        Ok(self
            .inner
            .reasons
            .get(id.as_bytes())?
            .map(|v| decode_reasons(&v))
            .unwrap_or_default())
    }

    /// As [`Store::report`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn report(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.inner.reports.get(id.as_bytes())?.map(|v| v.to_vec()))
    }

    /// As [`Store::is_local`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn is_local(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.inner.local.contains_key(id.as_bytes())?)
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
        let matching = self
            .inner
            .postings
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .select(&filter.prefixes(), min_trust);
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

    /// Makes every write so far durable, on this thread (no group commit:
    /// each call flushes).
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn flush(&self) -> Result<(), StoreError> {
        self.inner.flush_gated()?;
        self.inner.text.sync_blocking()
    }

    /// As [`Store::text_search`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Text`].
    pub fn text_search(&self, q: &TextQuery<'_>) -> Result<Option<Vec<(String, f64)>>, StoreError> {
        self.inner.text.search(q)
    }
}

impl Inner {
    /// The write stripe of agent `id`: held from a write's transaction to
    /// its posting-list update.
    fn stripe(&self, id: &str) -> std::sync::MutexGuard<'_, ()> {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let h =
            BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(id);
        self.stripes[(h as usize) % self.stripes.len()]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The next ordinal, for an agent seen for the first time.
    fn allocate_ord(&self) -> Result<u32, StoreError> {
        let n = self.next_ord.fetch_add(1, Ordering::SeqCst);
        u32::try_from(n).map_err(|_| StoreError::Full {
            reason: format!("{n} agents seen: the ordinal space (u32) is spent"),
        })
    }

    pub(super) fn flush_gated(&self) -> Result<(), StoreError> {
        let _exclusive = self
            .gate
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        #[cfg(test)]
        if let Some(hook) = self
            .flush_hook
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            hook();
        }
        let upto = self.writes.load(Ordering::SeqCst);
        self.db.flush()?;
        self.flushed.fetch_max(upto, Ordering::SeqCst);
        Ok(())
    }
}

/// Reason codes as stored: their stable codes, comma-separated.
fn encode_reasons(reasons: &[Reason]) -> Vec<u8> {
    reasons
        .iter()
        .map(|r| r.as_str())
        .collect::<Vec<_>>()
        .join(",")
        .into_bytes()
}

/// The stored reason codes; a code this version does not know (written by
/// a newer one) is skipped.
fn decode_reasons(bytes: &[u8]) -> Vec<Reason> {
    String::from_utf8_lossy(bytes)
        .split(',')
        .filter_map(|code| code.parse().ok())
        .collect()
}

/// Fills `reasons` from the reports of a data directory written before
/// the reasons were kept on their own (their JSON's `reasons` member).
pub(super) fn fill_reasons(reports: &sled::Tree, reasons: &sled::Tree) -> Result<(), StoreError> {
    #[derive(serde::Deserialize)]
    struct Codes {
        #[serde(default)]
        reasons: Vec<String>,
    }
    for entry in reports.iter() {
        let (id, json) = entry?;
        let codes: Vec<Reason> = serde_json::from_slice::<Codes>(&json)
            .map(|c| c.reasons.iter().filter_map(|r| r.parse().ok()).collect())
            .unwrap_or_default();
        reasons.insert(id, encode_reasons(&codes))?;
    }
    Ok(())
}

/// A typical encoded record size, to size buffers.
pub(super) const MAX_ENCODED_HINT: usize = 2048;

fn decode_value(id: &str, bytes: &[u8]) -> Result<RecordBody, StoreError> {
    decode_stored(id, bytes).map(|a| a.body)
}

pub(super) fn decode_stored(id: &str, bytes: &[u8]) -> Result<StoredAgent, StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt {
        key: id.to_owned(),
        reason,
    };
    let (_, rest) = bytes
        .split_first()
        .ok_or_else(|| corrupt("empty value".into()))?;
    let record = SignedRecord::decode_trusted(rest).map_err(|e| corrupt(e.to_string()))?;
    let body = record.body().map_err(|e| corrupt(e.to_string()))?;
    Ok(StoredAgent { record, body })
}
