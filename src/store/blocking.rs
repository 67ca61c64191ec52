//! The store's blocking face: [`BlockingStore`]'s operations on the
//! calling thread (sled transactions, reads, scans), the write/flush gate
//! and the group-commit flush, and the encodings of stored values. The
//! async [`Store`] runs these inside `spawn_blocking`.

use std::ops::Bound;
use std::sync::atomic::Ordering;

use sled::transaction::{ConflictableTransactionError, TransactionError};
use sled::Transactional;

use super::*;

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
            new_terms,
            origin,
            expect,
        } = write;
        let inner = &self.inner;

        let gate = inner
            .gate
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let result = (&inner.records, &inner.index, &inner.local, &inner.pending).transaction(
            |(r, i, l, p)| {
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
                let old_terms = prev.as_ref().map(body_terms).unwrap_or_default();
                let removed: Vec<Vec<u8>> = old_terms.difference(&new_terms).cloned().collect();
                let added: Vec<Vec<u8>> = new_terms.difference(&old_terms).cloned().collect();
                for p in &removed {
                    i.remove(index_key(p, &id))?;
                }
                for p in &added {
                    i.insert(index_key(p, &id), &[][..])?;
                }
                r.insert(id.as_bytes(), value.as_slice())?;
                p.insert(id.as_bytes(), &seq.to_be_bytes()[..])?;
                match (origin, kind) {
                    (Origin::Local, KIND_DESCRIPTOR) => {
                        l.insert(id.as_bytes(), &[][..])?;
                    }
                    (_, KIND_TOMBSTONE) => {
                        l.remove(id.as_bytes())?;
                    }
                    _ => {}
                }
                Ok(Change {
                    removed,
                    added,
                    was_live,
                    now_live: kind == KIND_DESCRIPTOR,
                })
            },
        );
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
            let mut counts = inner
                .counts
                .lock()
                .expect("counts lock is never poisoned: no panics while held");
            for p in change.removed {
                if let Some(n) = counts.get_mut(&p) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        counts.remove(&p);
                    }
                }
            }
            for p in change.added {
                *counts.entry(p).or_default() += 1;
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
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        let prefixes = filter.prefixes();
        if prefixes.is_empty() {
            let start = after.map_or(Bound::Unbounded, |a| Bound::Excluded(a.as_bytes().to_vec()));
            for entry in self
                .inner
                .records
                .range::<Vec<u8>, _>((start, Bound::Unbounded))
            {
                let (key, value) = entry?;
                if value.first() != Some(&KIND_DESCRIPTOR) {
                    continue;
                }
                out.push(decode_stored(&String::from_utf8_lossy(&key), &value)?);
                if out.len() == limit {
                    break;
                }
            }
            return Ok(out);
        }
        // Walk the smallest posting list; probe the others.
        let (driver, others) = {
            let counts = self
                .inner
                .counts
                .lock()
                .expect("counts lock is never poisoned: no panics while held");
            let mut sized: Vec<(u64, Vec<u8>)> = prefixes
                .into_iter()
                .map(|p| (counts.get(&p).copied().unwrap_or(0), p))
                .collect();
            sized.sort();
            if sized[0].0 == 0 {
                return Ok(out);
            }
            let driver = sized.remove(0).1;
            (
                driver,
                sized.into_iter().map(|(_, p)| p).collect::<Vec<_>>(),
            )
        };
        let start = match after {
            Some(a) => Bound::Excluded(index_key(&driver, a)),
            None => Bound::Included(driver.clone()),
        };
        let mut end = driver.clone();
        *end.last_mut().expect("a prefix ends in its 0x00 separator") = 1;
        'candidates: for key in self
            .inner
            .index
            .range::<Vec<u8>, _>((start, Bound::Excluded(end)))
            .keys()
        {
            let key = key?;
            let id = &key[driver.len()..];
            for p in &others {
                let mut probe = Vec::with_capacity(p.len() + id.len());
                probe.extend_from_slice(p);
                probe.extend_from_slice(id);
                if !self.inner.index.contains_key(probe)? {
                    continue 'candidates;
                }
            }
            let id = String::from_utf8_lossy(id).into_owned();
            if let Some(agent) = self.get(&id)? {
                if agent.record.kind() == RecordType::Descriptor {
                    out.push(agent);
                    if out.len() == limit {
                        break;
                    }
                }
            }
        }
        Ok(out)
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
