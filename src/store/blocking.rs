//! The store's blocking face: [`BlockingStore`]'s operations on the
//! calling thread (sled transactions, reads, scans), the write/flush gate
//! and the group-commit flush, and the encodings of stored values. The
//! async [`Store`] runs these inside `spawn_blocking`.

use std::sync::atomic::Ordering;

use sled::transaction::{ConflictableTransactionError, TransactionError, TransactionalTree};
use sled::Transactional;

use roaring::RoaringBitmap;

use super::*;
use crate::verify::TrustLevel;

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
        self.write_batch(vec![write])
            .pop()
            .expect("one outcome per write")
    }

    /// As [`Store::put_batch`], on this thread: may wait for a whole flush.
    pub fn put_batch(
        &self,
        records: &[(SignedRecord, RecordBody)],
        origin: Origin,
        expect: Expect,
    ) -> Vec<Result<PutOutcome, StoreError>> {
        self.write_batch(
            records
                .iter()
                .map(|(record, body)| Write::new(record, body, origin, expect))
                .collect(),
        )
    }

    /// Writes in one sled transaction, each checked on its own: a write
    /// refused (stale seq, another registry's agent) is left out and its
    /// error answered in its place, the others commit together. Writes of
    /// one agent apply in order.
    pub(super) fn write_batch(&self, writes: Vec<Write>) -> Vec<Result<PutOutcome, StoreError>> {
        let inner = &self.inner;
        if writes.is_empty() {
            return Vec::new();
        }
        // Writes of one agent commit and then update the in-memory posting
        // lists in the same order: two writes of an agent whose updates
        // crossed would leave the terms of the older one behind. Stripes
        // are taken in index order, so batches never deadlock.
        let mut stripes: Vec<usize> = writes
            .iter()
            .map(|w| crate::identity::stripe_of(&w.id, inner.stripes.len()))
            .collect();
        stripes.sort_unstable();
        stripes.dedup();
        let _held: Vec<_> = stripes.iter().map(|s| inner.lock_stripe(*s)).collect();
        let gate = inner
            .gate
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let trees = (
            &inner.records,
            &inner.local,
            &inner.pending,
            &inner.ordinals,
            &inner.compact,
        );
        let result = trees.transaction(|(r, l, p, o, c)| {
            let mut outcomes = Vec::with_capacity(writes.len());
            for w in &writes {
                outcomes.push(inner.apply(w, (r, l, p, o, c))?);
            }
            Ok(outcomes)
        });
        drop(gate);
        let outcomes = match result {
            Ok(outcomes) => outcomes,
            // Refusals are answered per write: only the store failing (or
            // a bug) fails the whole batch. The first write gets the error
            // itself, the others say their batch failed.
            Err(e) => {
                let cause: StoreError = match e {
                    TransactionError::Abort(e) => e,
                    TransactionError::Storage(e) => e.into(),
                };
                return failed_batch(cause, writes.len());
            }
        };
        writes
            .iter()
            .zip(outcomes)
            .map(|(w, outcome)| outcome.map(|change| inner.committed(&w.id, change)))
            .collect()
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
        if !filter.include_stale {
            matching -= self.dropped_read().ordinals();
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

    /// Makes every write so far durable, on this thread (no group commit:
    /// each call flushes).
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn flush(&self) -> Result<(), StoreError> {
        self.inner.flush_gated()?;
        self.inner.text.sync_blocking()
    }

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

    /// As [`Store::text_search`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Text`].
    pub fn text_search(&self, q: &TextQuery<'_>) -> Result<Option<Vec<(String, f64)>>, StoreError> {
        let mut ranked = self.inner.text.search(q, &self.inner.live)?;
        if let Some(ranked) = ranked.as_mut() {
            let suspended = self.suspended_read();
            ranked.retain(|(id, _)| !suspended.contains(id));
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
        Ok(ranked)
    }

    fn dropped_read(&self) -> std::sync::RwLockReadGuard<'_, super::freshness::Dropped> {
        self.inner
            .dropped
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// As [`Store::set_freshness`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn set_freshness(&self, id: &str, f: &Freshness) -> Result<(), StoreError> {
        self.inner
            .freshness
            .insert(id.as_bytes(), super::freshness::encode(f))?;
        if let Some(v) = self.inner.ordinals.get(id.as_bytes())? {
            let ord = postings::decode_ord(id, &v)?;
            self.inner
                .dropped
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .set(ord, f.state == FreshState::Dropped);
        }
        Ok(())
    }

    /// As [`Store::freshness`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn freshness(&self, id: &str) -> Result<Option<Freshness>, StoreError> {
        match self.inner.freshness.get(id.as_bytes())? {
            Some(v) => super::freshness::decode(id, &v).map(Some),
            None => Ok(None),
        }
    }

    /// As [`Store::put_schedule`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn put_schedule(&self, domain: &str, state: &[u8]) -> Result<(), StoreError> {
        if state.is_empty() {
            self.inner.schedule.remove(domain.as_bytes())?;
        } else {
            self.inner.schedule.insert(domain.as_bytes(), state)?;
        }
        Ok(())
    }

    /// As [`Store::schedules`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn schedules(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.inner
            .schedule
            .iter()
            .map(|e| {
                let (k, v) = e?;
                Ok((String::from_utf8_lossy(&k).into_owned(), v.to_vec()))
            })
            .collect()
    }

    fn suspended_read(&self) -> std::sync::RwLockReadGuard<'_, super::suspended::Suspended> {
        self.inner
            .suspended
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Suspends `id` (see [`Store::suspend`]); the reason is kept to
    /// [`MAX_REASON_CHARS`](super::suspended::MAX_REASON_CHARS).
    ///
    /// # Errors
    /// [`StoreError::NotFound`] for an agent never held, [`StoreError::Sled`].
    pub fn suspend(&self, id: &str, reason: &str) -> Result<Suspension, StoreError> {
        let ord = match self.inner.ordinals.get(id.as_bytes())? {
            Some(v) => postings::decode_ord(id, &v)?,
            None => {
                return Err(StoreError::NotFound {
                    agent_id: id.to_owned(),
                })
            }
        };
        let reason: String = reason
            .chars()
            .filter(|c| !c.is_control())
            .take(super::suspended::MAX_REASON_CHARS)
            .collect();
        let suspension = Suspension {
            reason,
            since: crate::record::unix_now(),
        };
        let value = serde_json::to_vec(&suspension).expect("a suspension serialises");
        self.inner.suspended_tree.insert(id.as_bytes(), value)?;
        self.inner.suspended_tree.flush()?;
        self.inner
            .suspended
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id, ord, suspension.clone());
        Ok(suspension)
    }

    /// Lifts `id`'s suspension; `false` when there was none.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn unsuspend(&self, id: &str) -> Result<bool, StoreError> {
        let ord = match self.inner.ordinals.get(id.as_bytes())? {
            Some(v) => Some(postings::decode_ord(id, &v)?),
            None => None,
        };
        let removed = self.inner.suspended_tree.remove(id.as_bytes())?.is_some();
        self.inner.suspended_tree.flush()?;
        let in_memory = self
            .inner
            .suspended
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(id, ord);
        Ok(removed || in_memory)
    }

    /// `id`'s suspension, if it is suspended.
    pub fn suspension(&self, id: &str) -> Option<Suspension> {
        self.suspended_read().get(id).cloned()
    }

    /// Every suspension, by agent id.
    pub fn suspensions(&self) -> Vec<(String, Suspension)> {
        self.suspended_read().all()
    }
}

impl Inner {
    /// Write stripe `stripe` (`identity::stripe_of` an agent id): held
    /// from a write's transaction to its posting-list update.
    fn lock_stripe(&self, stripe: usize) -> std::sync::MutexGuard<'_, ()> {
        self.stripes[stripe]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// One write inside a batch's transaction: the checks (`expect`, the
    /// seq), then the record, its ordinal, compact record (which the
    /// posting lists load from at open), local mark and pending mark; the
    /// terms it adds and removes, for the posting lists in memory. A refusal (the inner error) writes
    /// nothing; the outer error is sled's (the transaction retries or
    /// fails).
    #[allow(clippy::type_complexity)]
    fn apply(
        &self,
        w: &Write,
        (r, l, p, o, c): (
            &TransactionalTree,
            &TransactionalTree,
            &TransactionalTree,
            &TransactionalTree,
            &TransactionalTree,
        ),
    ) -> Result<Result<Change, StoreError>, ConflictableTransactionError<StoreError>> {
        let id = &w.id;
        let prev = match r.get(id.as_bytes())? {
            Some(bytes) => match decode_stored(id, &bytes) {
                Ok(prev) => Some(prev),
                Err(e) => return Ok(Err(e)),
            },
            None => None,
        };
        let is_local = l.get(id.as_bytes())?.is_some();
        let was_live = matches!(
            prev.as_ref().map(|p| &p.body),
            Some(RecordBody::Descriptor(_))
        );
        let prev_seq = prev.as_ref().map(|p| p.body.seq());
        let refused = match w.expect {
            Expect::LocalOrAbsent if was_live && !is_local => Some(StoreError::NotLocal {
                agent_id: id.clone(),
            }),
            Expect::LocalLive if !was_live => Some(StoreError::NotFound {
                agent_id: id.clone(),
            }),
            Expect::LocalLive if !is_local => Some(StoreError::NotLocal {
                agent_id: id.clone(),
            }),
            Expect::Held(expected) | Expect::Same(expected) if prev_seq != Some(expected) => {
                Some(StoreError::Changed {
                    agent_id: id.clone(),
                    expected,
                })
            }
            _ => None,
        };
        if let Some(e) = refused {
            return Ok(Err(e));
        }
        let in_place = matches!(w.expect, Expect::Same(_) | Expect::Revocation);
        if let Some(held) = prev_seq {
            if w.seq <= held && !in_place {
                return Ok(Err(StoreError::Record(RecordError::StaleSeq {
                    agent_id: id.clone(),
                    seq: w.seq,
                    held,
                })));
            }
        }
        // The seq the issuer reads before it signs this agent's next
        // record: never lower than one held before (a revocation may
        // stand in place of a higher seq).
        let floor = prev_seq.map_or(w.seq, |held| held.max(w.seq));
        let ord = match o.get(id.as_bytes())? {
            Some(v) => match postings::decode_ord(id, &v) {
                Ok(ord) => ord,
                Err(e) => return Ok(Err(e)),
            },
            None => match self.allocate_ord() {
                Ok(ord) => {
                    o.insert(id.as_bytes(), &ord.to_be_bytes()[..])?;
                    ord
                }
                Err(e) => return Ok(Err(e)),
            },
        };
        let old_terms = prev
            .as_ref()
            .map(|p| body_terms(&p.body, p.claimed))
            .unwrap_or_default();
        let removed: Vec<Vec<u8>> = old_terms.difference(&w.new_terms).cloned().collect();
        let added: Vec<Vec<u8>> = w.new_terms.difference(&old_terms).cloned().collect();
        r.insert(id.as_bytes(), w.value.as_slice())?;
        p.insert(id.as_bytes(), &w.seq.to_be_bytes()[..])?;
        let now_local = match (w.origin, w.kind) {
            (Origin::Local, KIND_DESCRIPTOR) => {
                l.insert(id.as_bytes(), &[][..])?;
                true
            }
            (_, KIND_TOMBSTONE) => {
                l.remove(id.as_bytes())?;
                false
            }
            // Another key's record over a registration: handed over.
            _ if prev
                .as_ref()
                .is_some_and(|p| p.record.signer().as_bytes() != &w.signer) =>
            {
                l.remove(id.as_bytes())?;
                false
            }
            _ => is_local,
        };
        let compact_value = match &w.compact {
            Some(agent) => compact::encode_live(&CompactAgent {
                local: now_local,
                ..agent.clone()
            }),
            None => compact::encode_tombstone(id, floor),
        };
        c.insert(&ord.to_be_bytes()[..], compact_value)?;
        let claim_before = prev
            .as_ref()
            .filter(|p| p.claimed && matches!(p.body, RecordBody::Descriptor(_)))
            .map(|p| p.record.signer().to_bytes());
        let claim_after = w
            .compact
            .as_ref()
            .filter(|c| c.claimed.is_some())
            .and_then(|c| <[u8; 32]>::try_from(c.signer.as_slice()).ok());
        Ok(Ok(Change {
            ord,
            removed,
            added,
            was_live,
            now_live: w.is_live(),
            claim_before,
            claim_after,
        }))
    }

    /// After a write committed: the text index is told, the write counted
    /// (for the group flush), the posting lists and the live count
    /// updated, the change feeds marked.
    fn committed(&self, id: &str, change: Change) -> PutOutcome {
        // Before the write is counted: a flush that covers it also waits
        // for the text index to have it.
        self.text.changed(id);
        self.writes.fetch_add(1, Ordering::SeqCst);
        {
            let mut postings = self
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
        if change.claim_before != change.claim_after {
            let mut claims = self
                .claims
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(s) = change.claim_before {
                claims.remove(s);
            }
            if let Some(s) = change.claim_after {
                claims.add(s);
            }
        }
        self.settled.fetch_add(1, Ordering::SeqCst);
        self.feeds.mark(change.ord);
        match (change.was_live, change.now_live) {
            (false, true) => {
                self.live.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                self.live.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
        if change.was_live {
            PutOutcome::Updated
        } else {
            PutOutcome::Created
        }
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

pub(super) fn decode_stored(id: &str, bytes: &[u8]) -> Result<StoredAgent, StoreError> {
    let record = SignedRecord::decode_trusted(stored_envelope(id, bytes)?)
        .map_err(|e| corrupt(id, e.to_string()))?;
    let body = record.body().map_err(|e| corrupt(id, e.to_string()))?;
    Ok(StoredAgent {
        record,
        body,
        claimed: bytes.first() == Some(&KIND_CLAIMED),
    })
}

/// The signed envelope of a stored record value (past its leading byte).
fn stored_envelope<'a>(id: &str, bytes: &'a [u8]) -> Result<&'a [u8], StoreError> {
    bytes
        .split_first()
        .map(|(_, rest)| rest)
        .ok_or_else(|| corrupt(id, "empty value".into()))
}

fn corrupt(id: &str, reason: String) -> StoreError {
    StoreError::Corrupt {
        key: id.to_owned(),
        reason,
    }
}
