//! The store's write path: [`Write`] (a record made ready for sled on the
//! caller's side), one sled transaction per batch across the `records`,
//! `local`, `pending`, `ordinals` and `compact` trees with each write's
//! checks inside it (`Inner::apply`), then the in-memory posting lists,
//! claim counts, live count and change feeds (`Inner::committed`); the
//! write stripes and the write/flush gate, and the flush that makes the
//! writes durable.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use sled::transaction::{ConflictableTransactionError, TransactionError, TransactionalTree};
use sled::Transactional;

use super::compact::{self, CompactAgent};
use super::error::{failed_batch, StoreError};
use super::handles::{BlockingStore, Inner};
use super::postings::{self, body_terms};
use super::stored::{
    decode_stored, StoredAgent, KIND_CLAIMED, KIND_DESCRIPTOR, KIND_TOMBSTONE, MAX_ENCODED_HINT,
};
use crate::record::{RecordBody, RecordError, SignedRecord};

/// What a write may assume about the agent it replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Anything (crawled or remote records: seq order decides).
    Any,
    /// A registration: the agent is absent, deleted, or registered here.
    LocalOrAbsent,
    /// An update or delete: the agent is live and registered here.
    LocalLive,
    /// A renewal: the record held has exactly this seq (nothing replaced
    /// it since it was read).
    Held(u64),
    /// The record held at exactly this seq, written again in place (its
    /// evidence reclassified as proven or claimed,
    /// [`Store::reassess`](super::Store::reassess)):
    /// the one write whose seq is not above the held one.
    Same(u64),
    /// A revocation signed by the agent's own key: final for that key,
    /// so it replaces the descriptor held whatever the seqs (the held
    /// seq is kept as the floor for the records after it).
    Revocation,
}

/// Who a write comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Registered through this node's API.
    Local,
    /// Crawled by this node, or attested by a peer in `p2p.trusted_peers`:
    /// its evidence counts.
    Remote,
    /// Received from a peer this node does not trust: stored and shown,
    /// its evidence as *claimed* (with who claims it), never counted by
    /// trust filters, the resolve policy or ranking.
    Claimed,
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// No live descriptor was held for the agent before.
    Created,
    /// A live descriptor was replaced.
    Updated,
}

/// What a committed write changes in memory.
struct Change {
    ord: u32,
    removed: Vec<Vec<u8>>,
    added: Vec<Vec<u8>>,
    was_live: bool,
    now_live: bool,
    /// The signer of the live claim the write replaced, and of the one it
    /// wrote (`store/trust.rs`'s counts).
    claim_before: Option<[u8; 32]>,
    claim_after: Option<[u8; 32]>,
    /// What the write does to the `gone` tree (`store/gone.rs`).
    gone: super::gone::GoneChange,
}

/// A write ready for sled: everything owned, so that it can move to a
/// blocking thread (the record is encoded on the caller's side).
pub(super) struct Write {
    id: String,
    seq: u64,
    /// When the record was signed (unix seconds).
    issued_at: u64,
    kind: u8,
    value: Vec<u8>,
    /// The compact record (a live descriptor's), its `local` flag set
    /// inside the transaction.
    compact: Option<CompactAgent>,
    new_terms: BTreeSet<Vec<u8>>,
    origin: Origin,
    expect: Expect,
    /// The record's signer: a record from another signer than the held
    /// one's (an id handed over by a transfer) ends a local registration.
    signer: [u8; 32],
}

impl Write {
    /// The write of `record` (with `body` its decoded payload).
    pub(super) fn new(
        record: &SignedRecord,
        body: &RecordBody,
        origin: Origin,
        expect: Expect,
    ) -> Self {
        let claimed = origin == Origin::Claimed;
        let kind = match body {
            RecordBody::Descriptor(_) if claimed => KIND_CLAIMED,
            RecordBody::Descriptor(_) => KIND_DESCRIPTOR,
            RecordBody::Tombstone(_) => KIND_TOMBSTONE,
        };
        let mut value = Vec::with_capacity(1 + MAX_ENCODED_HINT);
        value.push(kind);
        value.extend_from_slice(&record.encode());
        let compact = match body {
            RecordBody::Descriptor(d) => Some(CompactAgent::of(record, d, false, claimed)),
            RecordBody::Tombstone(_) => None,
        };
        Self {
            id: body.agent_id().to_owned(),
            seq: body.seq(),
            issued_at: match body {
                RecordBody::Descriptor(d) => d.issued_at,
                RecordBody::Tombstone(t) => t.issued_at,
            },
            kind,
            value,
            compact,
            new_terms: body_terms(body, claimed),
            origin,
            expect,
            signer: record.signer().to_bytes(),
        }
    }

    /// Whether the write stores a live descriptor.
    fn is_live(&self) -> bool {
        self.kind != KIND_TOMBSTONE
    }
}

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
        // Past the size limit only tombstones go in: they take less room
        // than the descriptors they replace, and are how room is made.
        if writes.iter().any(Write::is_live) {
            if let Err(e) = inner.usage.room(&inner.dir) {
                return failed_batch(e, writes.len());
            }
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
        // The records this node signed go into its transparency log in
        // the same transaction (`store/log.rs`).
        let logged: Vec<Option<([u8; 32], Vec<u8>)>> =
            writes.iter().map(|w| inner.log_entry(w)).collect();
        let (log_entries, log_hashes, log_index) = inner.log.trees();
        let trees = (
            &inner.records,
            &inner.local,
            &inner.pending,
            &inner.ordinals,
            &inner.compact,
            log_entries,
            log_hashes,
            log_index,
        );
        let result = trees.transaction(|(r, l, p, o, c, le, lh, li)| {
            let mut outcomes = Vec::with_capacity(writes.len());
            let mut log_size = None;
            for (w, entry) in writes.iter().zip(&logged) {
                let outcome = inner.apply(w, (r, l, p, o, c))?;
                if let (Ok(_), Some((hash, entry))) = (&outcome, entry) {
                    log_size = Some(super::log::Log::append((le, lh, li), hash, entry)?);
                }
                outcomes.push(outcome);
            }
            Ok((outcomes, log_size))
        });
        if let Ok((_, Some(size))) = &result {
            inner.log.committed(*size);
        }
        drop(gate);
        let outcomes = match result {
            Ok((outcomes, _)) => outcomes,
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

    /// Makes every write so far durable, on this thread (no group commit:
    /// each call flushes).
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn flush(&self) -> Result<(), StoreError> {
        self.inner.flush_gated()?;
        self.inner.text.sync_blocking()
    }
}

impl Inner {
    /// Write stripe `stripe` (`identity::stripe_of` an agent id): held
    /// from a write's transaction to its posting-list update.
    pub(super) fn lock_stripe(&self, stripe: usize) -> std::sync::MutexGuard<'_, ()> {
        self.stripes[stripe]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// One write inside a batch's transaction: the checks (`expect`, the
    /// seq), then the record, its ordinal, compact record (which the
    /// posting lists load from at open), local mark and pending mark; the
    /// terms it adds and removes, for the posting lists in memory. A
    /// refusal (the inner error) writes nothing; the outer error is
    /// sled's (the transaction retries or fails).
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
        if let Err(e) = admit(w, prev_seq, was_live, is_local) {
            return Ok(Err(e));
        }
        // The seq the issuer reads before it signs this agent's next
        // record: never lower than one held before (a revocation may
        // stand in place of a higher seq).
        let floor = prev_seq.map_or(w.seq, |held| held.max(w.seq));
        let ord = match self.ordinal(o, id)? {
            Ok(ord) => ord,
            Err(e) => return Ok(Err(e)),
        };
        let old_terms = prev
            .as_ref()
            .map(|p| body_terms(&p.body, p.claimed))
            .unwrap_or_default();
        let removed: Vec<Vec<u8>> = old_terms.difference(&w.new_terms).cloned().collect();
        let added: Vec<Vec<u8>> = w.new_terms.difference(&old_terms).cloned().collect();
        r.insert(id.as_bytes(), w.value.as_slice())?;
        p.insert(id.as_bytes(), &w.seq.to_be_bytes()[..])?;
        let now_local = mark_local(l, w, prev.as_ref(), is_local)?;
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
        let gone = super::gone::change(
            prev.as_ref(),
            w.compact.as_ref().map(CompactAgent::source_format),
            w.issued_at,
        );
        Ok(Ok(Change {
            ord,
            removed,
            added,
            was_live,
            now_live: w.is_live(),
            claim_before,
            claim_after,
            gone,
        }))
    }

    /// The agent's ordinal, given it now (in the `ordinals` tree, inside
    /// the transaction) when it is seen for the first time. The inner
    /// error refuses the write; the outer one is sled's.
    fn ordinal(
        &self,
        o: &TransactionalTree,
        id: &str,
    ) -> Result<Result<u32, StoreError>, ConflictableTransactionError<StoreError>> {
        Ok(match o.get(id.as_bytes())? {
            Some(v) => postings::decode_ord(id, &v),
            None => match self.allocate_ord() {
                Ok(ord) => {
                    o.insert(id.as_bytes(), &ord.to_be_bytes()[..])?;
                    Ok(ord)
                }
                Err(e) => Err(e),
            },
        })
    }

    /// After a write committed: the text index is told, the write counted
    /// (for the group flush), the posting lists and the live count
    /// updated, the change feeds marked.
    fn committed(&self, id: &str, change: Change) -> PutOutcome {
        // Before the write is counted: a flush that covers it also waits
        // for the text index to have it.
        self.text.changed(id);
        self.writes.fetch_add(1, Ordering::SeqCst);
        // A hidden agent's ordinal is in the bitmap searches subtract
        // before the posting lists can answer it.
        self.entitlements
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .written(id, change.ord);
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
        self.keep_gone(id, change.gone);
        // A deleted agent's checks by other nodes go with it.
        if change.was_live && !change.now_live {
            if let Err(e) = self.drop_peer_checks(change.ord) {
                tracing::error!(agent = %id, error = %e, "dropping the agent's liveness checks failed");
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

    /// The transparency-log entry of a write, and the hash of its record,
    /// when the node signed the record: sealed for an agent that is not
    /// public (its entitlement is set before its first write).
    fn log_entry(&self, w: &Write) -> Option<([u8; 32], Vec<u8>)> {
        if !self.log.logs(&w.signer) {
            return None;
        }
        let record = w.value.get(1..)?;
        let sealed = self
            .entitlements
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&w.id)
            .is_some_and(super::visibility::Entitlement::hides);
        Some(super::log::entry_for(record, sealed))
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
        let log_upto = self.log.appended();
        self.db.flush()?;
        self.flushed.fetch_max(upto, Ordering::SeqCst);
        self.log.flushed(log_upto);
        Ok(())
    }
}

/// The checks a write passes before anything is written: what its
/// `expect` assumes of the record held (`prev_seq`, live or not,
/// registered here or not), and a seq above the held one but for a
/// write in place ([`Expect::Same`], [`Expect::Revocation`]).
fn admit(
    w: &Write,
    prev_seq: Option<u64>,
    was_live: bool,
    is_local: bool,
) -> Result<(), StoreError> {
    let id = &w.id;
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
        return Err(e);
    }
    let in_place = matches!(w.expect, Expect::Same(_) | Expect::Revocation);
    if let Some(held) = prev_seq {
        if w.seq <= held && !in_place {
            return Err(StoreError::Record(RecordError::StaleSeq {
                agent_id: id.clone(),
                seq: w.seq,
                held,
            }));
        }
    }
    Ok(())
}

/// Marks the agent in the `local` tree for a registration here, clears
/// the mark for a tombstone or for another key's record over a
/// registration (an id handed over); whether the agent is local after
/// write `w` over `prev`.
fn mark_local(
    l: &TransactionalTree,
    w: &Write,
    prev: Option<&StoredAgent>,
    is_local: bool,
) -> Result<bool, ConflictableTransactionError<StoreError>> {
    let id = w.id.as_bytes();
    Ok(match (w.origin, w.kind) {
        (Origin::Local, KIND_DESCRIPTOR) => {
            l.insert(id, &[][..])?;
            true
        }
        (_, KIND_TOMBSTONE) => {
            l.remove(id)?;
            false
        }
        // Another key's record over a registration: handed over.
        _ if prev.is_some_and(|p| p.record.signer().as_bytes() != &w.signer) => {
            l.remove(id)?;
            false
        }
        _ => is_local,
    })
}

impl BlockingStore {
    /// Appends to the transparency log a record this node signed and
    /// does not store as an agent's record (a liveness result of its
    /// probe, docs/protocol.md#log); nothing when the store logs nothing.
    /// Durable, and so signed in a checkpoint, at the next flush.
    ///
    /// # Errors
    /// [`StoreError::Sled`] when the transaction fails.
    pub fn log_record(&self, record: &[u8]) -> Result<(), StoreError> {
        let inner = &self.inner;
        if inner.log.signer().is_none() {
            return Ok(());
        }
        let (hash, entry) = super::log::entry_for(record, false);
        let gate = inner
            .gate
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let result = inner
            .log
            .trees()
            .transaction(|(e, h, i)| super::log::Log::append((e, h, i), &hash, &entry));
        let size = match result {
            Ok(size) => size,
            Err(TransactionError::Abort(e)) => return Err(e),
            Err(TransactionError::Storage(e)) => return Err(e.into()),
        };
        inner.log.committed(size);
        // A write for the flushers to cover, as a record's is.
        inner.writes.fetch_add(1, Ordering::SeqCst);
        drop(gate);
        Ok(())
    }
}
