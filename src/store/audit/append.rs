//! The audit log's appends, pages, checks and pruning, as the store's
//! methods: what [`AuditLog`] holds, used under the store's write gate.

use std::sync::atomic::Ordering;

use super::entry::{bounded, chain_hash, decode_stored, encode_stored, Body};
use super::*;
use crate::store::handles::BlockingStore;

impl BlockingStore {
    fn audit_log(&self) -> &AuditLog {
        &self.inner.audit
    }

    /// Appends `event` to the audit chain (and keeps its record's bytes
    /// by their hash); answers the entry. Durable at the next flush.
    ///
    /// # Errors
    /// [`StoreError::Sled`]; [`StoreError::OutOfSpace`] when the disk is
    /// under its reserve ([`DISK_RESERVE`](crate::store::DISK_RESERVE)).
    pub fn audit_append(&self, event: &AuditEvent) -> Result<AuditEntry, StoreError> {
        // Not past the disk's reserve: sled must never meet a full disk.
        crate::store::usage::disk_room(&self.inner.dir)?;
        let log = self.audit_log();
        let record_hash: Option<[u8; 32]> =
            event.record.as_deref().map(|b| Sha256::digest(b).into());
        let (actor, target) = (bounded(&event.actor), bounded(&event.target));
        let addr = bounded(event.addr.as_deref().unwrap_or_default());
        let request_id = bounded(event.request_id.as_deref().unwrap_or_default());
        let outcome = bounded(&event.outcome.to_wire());
        // Writes hold the gate shared, flushes exclusively (see `gate`).
        let _gate = self
            .inner
            .gate
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut head = log.lock_head();
        let seq = head.seq + 1;
        let body = Body {
            seq,
            time_ms: now_ms(),
            actor: &actor,
            addr: &addr,
            action: event.action.as_str(),
            target: &target,
            outcome: &outcome,
            request_id: &request_id,
            count: event.count,
            record: record_hash,
            duration_ms: event.duration_ms,
        }
        .encode();
        let hash = chain_hash(&head.hash, &body);
        let stored = encode_stored(&body, &head.hash, &hash);
        let mut head_value = seq.to_be_bytes().to_vec();
        head_value.extend_from_slice(&hash);
        (&log.entries, &log.versions, &log.meta)
            .transaction(|(e, v, m)| {
                e.insert(&seq.to_be_bytes()[..], stored.as_slice())?;
                if let (Some(h), Some(bytes)) = (&record_hash, &event.record) {
                    v.insert(&h[..], bytes.as_slice())?;
                }
                m.insert(HEAD_KEY, head_value.as_slice())?;
                Ok::<_, sled::transaction::ConflictableTransactionError<StoreError>>(())
            })
            .map_err(|e| match e {
                sled::transaction::TransactionError::Abort(e) => e,
                sled::transaction::TransactionError::Storage(e) => e.into(),
            })?;
        *head = Head { seq, hash };
        drop(head);
        // Counted as a write, so the group flush covers it.
        self.inner.writes.fetch_add(1, Ordering::SeqCst);
        Ok(decode_stored(&stored)
            .expect("an entry just encoded decodes")
            .entry)
    }

    /// Counts a refusal of a peer's record with code `code`, as
    /// [`BlockingStore::audit_aggregated`] does (at most one
    /// `remote_refused` entry per code per [`REFUSAL_WINDOW`]).
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn audit_refusal(&self, code: &str) -> Result<(), StoreError> {
        let event = AuditEvent::new(
            "remote",
            AuditAction::RemoteRefused,
            code,
            AuditOutcome::Refused(code.to_owned()),
        );
        self.audit_aggregated(&format!("refused:{code}"), event)
    }

    /// Appends `event` when it is the first of its `key` or the first
    /// after [`REFUSAL_WINDOW`] since the key's last entry, its `count`
    /// then how many events of the key it stands for; otherwise only
    /// counts it. For what an adversary can repeat at will (peers'
    /// refused records, failed authentications): the log grows by at
    /// most one entry per key per window. A tally still open when the
    /// node stops is not written.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn audit_aggregated(&self, key: &str, mut event: AuditEvent) -> Result<(), StoreError> {
        let count = {
            let mut tallies = self
                .audit_log()
                .refusals
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // Bounded memory: many keys (addresses) start over.
            if tallies.len() > MAX_TALLIES {
                tallies.clear();
            }
            let now = std::time::Instant::now();
            match tallies.get_mut(key) {
                Some(t) if now.duration_since(t.since) < REFUSAL_WINDOW => {
                    t.count += 1;
                    return Ok(());
                }
                Some(t) => {
                    let count = t.count + 1;
                    *t = Tally {
                        since: now,
                        count: 0,
                    };
                    count
                }
                None => {
                    tallies.insert(
                        key.to_owned(),
                        Tally {
                            since: now,
                            count: 0,
                        },
                    );
                    1
                }
            }
        };
        event.count = count;
        self.audit_append(&event).map(|_| ())
    }

    /// Up to `limit` entries (at most [`MAX_AUDIT_PAGE`]) after seq
    /// `after`, oldest first.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`] for an entry that
    /// does not decode (`agentmesh audit verify` says more).
    pub fn audit_page(&self, after: u64, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        let start = after.saturating_add(1).to_be_bytes();
        self.audit_log()
            .entries
            .range(start..)
            .take(limit.min(MAX_AUDIT_PAGE))
            .map(|item| {
                let (key, value) = item?;
                decode_stored(&value)
                    .map(|d| d.entry)
                    .map_err(|why| corrupt(&hex::encode(key), why))
            })
            .collect()
    }

    /// The newest `n` entries (at most [`MAX_AUDIT_PAGE`]), oldest first.
    ///
    /// # Errors
    /// As [`BlockingStore::audit_page`].
    pub fn audit_tail(&self, n: usize) -> Result<Vec<AuditEntry>, StoreError> {
        let mut out = self
            .audit_log()
            .entries
            .iter()
            .rev()
            .take(n.min(MAX_AUDIT_PAGE))
            .map(|item| {
                let (key, value) = item?;
                decode_stored(&value)
                    .map(|d| d.entry)
                    .map_err(|why| corrupt(&hex::encode(key), why))
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.reverse();
        Ok(out)
    }

    /// The entry at `seq`, if held.
    ///
    /// # Errors
    /// As [`BlockingStore::audit_page`].
    pub fn audit_entry(&self, seq: u64) -> Result<Option<AuditEntry>, StoreError> {
        self.audit_log()
            .entries
            .get(seq.to_be_bytes())?
            .map(|v| {
                decode_stored(&v)
                    .map(|d| d.entry)
                    .map_err(|why| corrupt(&seq.to_string(), why))
            })
            .transpose()
    }

    /// The signed record bytes kept under `hash` (an entry's `record`).
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn audit_version(&self, hash: &[u8; 32]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.audit_log().versions.get(hash)?.map(|v| v.to_vec()))
    }

    /// Checks the whole chain (see [`verify_chain`]); `node_key`, when
    /// given, must have signed the checkpoint.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`] for a head or
    /// checkpoint that does not parse.
    pub fn audit_verify(
        &self,
        node_key: Option<&VerifyingKey>,
    ) -> Result<VerifyReport, StoreError> {
        let log = self.audit_log();
        let checkpoint = read_checkpoint(&log.meta)?;
        let head = read_head(&log.meta)?;
        let entries = log.entries.iter().map(|item| {
            let (key, value) = item?;
            let key = <[u8; 8]>::try_from(key.as_ref())
                .map(u64::from_be_bytes)
                .unwrap_or(u64::MAX);
            Ok::<_, StoreError>((key, value.to_vec()))
        });
        verify_chain(checkpoint.as_ref(), node_key, head, entries)
    }

    /// The retention checkpoint, if retention pruned.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn audit_checkpoint(&self) -> Result<Option<AuditCheckpoint>, StoreError> {
        read_checkpoint(&self.audit_log().meta)
    }

    /// Prunes what `retention` no longer keeps: first a checkpoint signed
    /// with `key` naming the last pruned entry and its hash, then the
    /// entries and the record versions they alone kept. A prune that
    /// stops half-way leaves entries the checkpoint already stands for
    /// (verification skips them; the next prune removes them). Answers
    /// how many entries went.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn audit_prune(&self, retention: Retention, key: &SigningKey) -> Result<u64, StoreError> {
        let log = self.audit_log();
        let head = *log.lock_head();
        let cut = match retention {
            Retention::Count(keep) => head.seq.saturating_sub(keep),
            Retention::Age(age) => {
                let cutoff =
                    now_ms().saturating_sub(u64::try_from(age.as_millis()).unwrap_or(u64::MAX));
                let mut cut = 0;
                for item in log.entries.iter() {
                    let (_, value) = item?;
                    let d = decode_stored(&value).map_err(|why| corrupt("entry", why))?;
                    if d.entry.time_ms >= cutoff {
                        break;
                    }
                    cut = d.entry.seq;
                }
                cut
            }
        };
        let done = read_checkpoint(&log.meta)?.map_or(0, |c| c.through);
        if cut <= done {
            return Ok(0);
        }
        let Some(last) = log.entries.get(cut.to_be_bytes())? else {
            return Err(corrupt(
                &cut.to_string(),
                "the entry to prune through is missing".into(),
            ));
        };
        let last = decode_stored(&last).map_err(|why| corrupt(&cut.to_string(), why))?;
        let checkpoint = AuditCheckpoint::sign(cut, &last.hash, now_ms(), key);
        let json = serde_json::to_vec(&checkpoint).expect("a checkpoint serialises");
        log.meta.insert(CHECKPOINT_KEY, json)?;
        self.inner.db.flush()?;
        let mut pruned = 0;
        let mut batch = sled::Batch::default();
        let mut versions = sled::Batch::default();
        for item in log.entries.range(..=cut.to_be_bytes()) {
            let (k, value) = item?;
            if let Ok(d) = decode_stored(&value) {
                if let Some(h) = d.entry.record.as_deref().and_then(|h| hex::decode(h).ok()) {
                    versions.remove(h);
                }
            }
            batch.remove(k);
            pruned += 1;
        }
        log.versions.apply_batch(versions)?;
        log.entries.apply_batch(batch)?;
        self.inner.db.flush()?;
        Ok(pruned)
    }
}

impl crate::store::Store {
    /// Appends `event` and makes it durable (with every write before it,
    /// one group flush) before it returns: what the API calls before it
    /// acknowledges a write.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::TaskFailed`].
    pub async fn audit(&self, event: AuditEvent) -> Result<AuditEntry, StoreError> {
        let entry = self.run_blocking(move |s| s.audit_append(&event)).await??;
        self.flush_durable().await?;
        Ok(entry)
    }
}
