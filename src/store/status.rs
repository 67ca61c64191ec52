//! What this node keeps of an agent beside its record, on the calling
//! thread ([`BlockingStore`]): operator suspensions, crawled agents'
//! freshness (and the dropped ones in memory), and the recrawl
//! scheduler's state by domain.

use super::error::StoreError;
use super::freshness::{self, FreshIndex, Freshness};
use super::handles::BlockingStore;
use super::postings;
use super::suspended::{Suspended, Suspension, MAX_REASON_CHARS};

impl BlockingStore {
    /// The dropped agents, read.
    pub(super) fn dropped_read(&self) -> std::sync::RwLockReadGuard<'_, FreshIndex> {
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
            .insert(id.as_bytes(), freshness::encode(f))?;
        if let Some(v) = self.inner.ordinals.get(id.as_bytes())? {
            let ord = postings::decode_ord(id, &v)?;
            self.inner
                .dropped
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .set(ord, f);
        }
        Ok(())
    }

    /// As [`Store::freshness`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn freshness(&self, id: &str) -> Result<Option<Freshness>, StoreError> {
        match self.inner.freshness.get(id.as_bytes())? {
            Some(v) => freshness::decode(id, &v).map(Some),
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

    /// The suspended agents, read.
    pub(super) fn suspended_read(&self) -> std::sync::RwLockReadGuard<'_, Suspended> {
        self.inner
            .suspended
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Suspends `id` (see [`Store::suspend`]); the reason is kept to
    /// [`MAX_REASON_CHARS`](MAX_REASON_CHARS).
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
            .take(MAX_REASON_CHARS)
            .collect();
        let suspension = Suspension {
            reason,
            since: crate::record::unix_now(),
        };
        let value = serde_json::to_vec(&suspension).expect("a suspension serialises");
        let entry = serde_json::json!({
            "agent_id": id,
            "state": "suspended",
            "reason": suspension.reason,
            "at": suspension.since,
        });
        self.logged(id, &entry, |t| {
            t.insert(id.as_bytes(), value.as_slice())?;
            Ok(())
        })?;
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
        let removed = self.inner.suspended_tree.get(id.as_bytes())?.is_some();
        if removed {
            let entry = serde_json::json!({
                "agent_id": id,
                "state": "lifted",
                "at": crate::record::unix_now(),
            });
            self.logged(id, &entry, |t| {
                t.remove(id.as_bytes())?;
                Ok(())
            })?;
        }
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

    /// Runs `change` on the suspensions tree and, in the same
    /// transaction, appends to the transparency log the suspension entry
    /// `statement` of `id` (docs/protocol.md#log): `agentmesh/suspension/v1`,
    /// a newline and the statement's JSON, sealed for an agent that is
    /// not public. Without a log, only `change`.
    fn logged(
        &self,
        id: &str,
        statement: &serde_json::Value,
        change: impl Fn(
            &sled::transaction::TransactionalTree,
        )
            -> Result<(), sled::transaction::ConflictableTransactionError<StoreError>>,
    ) -> Result<(), StoreError> {
        use sled::transaction::{TransactionError, Transactional};
        let inner = &self.inner;
        let entry = inner.log.signer().map(|_| {
            let mut bytes = crate::tlog::SUSPENSION_PREFIX.to_vec();
            bytes.extend_from_slice(statement.to_string().as_bytes());
            let sealed = inner
                .entitlements
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(id)
                .is_some_and(super::visibility::Entitlement::hides);
            super::log::entry_for(&bytes, sealed)
        });
        let gate = inner
            .gate
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (le, lh, li) = inner.log.trees();
        let result = (&inner.suspended_tree, le, lh, li).transaction(|(t, e, h, i)| {
            change(t)?;
            match &entry {
                Some((hash, entry)) => Ok(Some(super::log::Log::append((e, h, i), hash, entry)?)),
                None => Ok(None),
            }
        });
        let size = match result {
            Ok(size) => size,
            Err(TransactionError::Abort(e)) => return Err(e),
            Err(TransactionError::Storage(e)) => return Err(e.into()),
        };
        if let Some(size) = size {
            inner.log.committed(size);
            inner
                .writes
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        drop(gate);
        Ok(())
    }
}
