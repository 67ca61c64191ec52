//! The store's async face: each [`Store`] method runs its
//! [`BlockingStore`] twin on tokio's blocking pool (`unblock`), so sled
//! never blocks a runtime worker; the counts read from memory; the
//! group-commit flush and the periodic flusher.

use std::sync::atomic::Ordering;

use super::error::StoreError;
use super::filter::Filter;
use super::freshness::Freshness;
use super::handles::{unblock, BlockingStore, Store};
use super::postings::{self, prefix, FIELD_CAPABILITY, FIELD_LANGUAGE, FIELD_TAG};
use super::stored::StoredAgent;
use super::suspended::Suspension;
use super::text::TextQuery;
use super::visibility::Entitlement;
use super::write::{Expect, Origin, PutOutcome, Write};
use crate::record::{RecordBody, SignedRecord};
use crate::trust::{Reason, TrustLevel};

impl Store {
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

    /// Sets who may see and change `id` (see `store/visibility.rs`); on
    /// disk when this returns.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::TaskFailed`].
    pub async fn set_entitlement(&self, id: &str, ent: Entitlement) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.run_blocking(move |s| s.set_entitlement(&id, &ent))
            .await?
    }

    /// Forgets who may see `id`; `false` when nothing was kept.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::TaskFailed`].
    pub async fn remove_entitlement(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.run_blocking(move |s| s.remove_entitlement(&id))
            .await?
    }

    /// Who may see and change `id`, when it was registered here through
    /// the API.
    pub fn entitlement(&self, id: &str) -> Option<Entitlement> {
        self.sync.entitlement(id)
    }

    /// Every suspension, by agent id.
    pub fn suspensions(&self) -> Vec<(String, Suspension)> {
        self.sync.suspensions()
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
