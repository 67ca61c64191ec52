//! Everything this node signs goes through one [`Issuer`]: registrations,
//! updates and deletions (the registry), crawled agents and mutual-peer
//! upgrades (the crawler). It reads the held seq under the agent's write
//! lock, signs the record with the node key for the configured lifetime
//! (`store.record_ttl`), stores it, flushes the store when the record is
//! one the API acknowledges ([`Durability`]), and hands the record to the
//! [`Outbox`] on its way to the mesh.
//!
//! Submodules: [`outbox`] (the bounded queue to the mesh and its publisher
//! task), [`republish`] (after a restart, this node's own records go back
//! into the DHT).

pub mod outbox;
pub mod republish;

use std::sync::Arc;
use std::time::Duration;

use ed25519_dalek::SigningKey;

pub use outbox::{Outbox, Published};

use crate::descriptor::Descriptor;
use crate::record::{
    self, DescriptorRecord, RecordBody, RecordError, SignedRecord, TombstoneReason, TombstoneRecord,
};
use crate::store::{Expect, Origin, PutOutcome, Store, StoreError};
use crate::verify::Evidence;

/// Why a record could not be issued.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IssueError {
    /// The signed record would be over the size limit.
    #[error("record too large: {0}")]
    TooLarge(RecordError),
    /// The store refused the record or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// When an issued record must be on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Flushed before the issue returns and before it is published: what
    /// the API acknowledges (registrations, updates, deletions).
    Flushed,
    /// Stored and published at once; the store's periodic flusher makes
    /// it durable within a second. For crawled agents: a crash loses at
    /// most the last second of them, and the next crawl issues them again
    /// at a higher seq. Waiting for a flush per crawled record would put
    /// every crawl in the registrations' group-commit queue.
    Periodic,
}

/// Number of write-lock stripes.
const WRITE_LOCK_STRIPES: usize = 64;

/// Signs, stores, flushes and publishes this node's records. Cheap to
/// clone.
#[derive(Clone)]
pub struct Issuer {
    key: Arc<SigningKey>,
    store: Store,
    ttl: Duration,
    outbox: Option<Outbox>,
    /// Striped per-agent locks: an issue reads the held seq, signs and
    /// stores under its agent's lock, so concurrent writes to one agent
    /// get increasing seqs instead of refusing each other.
    write_locks: Arc<[tokio::sync::Mutex<()>]>,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer")
            .field("ttl", &self.ttl)
            .field("publishes", &self.outbox.is_some())
            .finish_non_exhaustive()
    }
}

/// A record that was issued.
#[derive(Debug, Clone)]
pub struct Issued {
    /// Whether it created the agent here or replaced a live descriptor.
    pub outcome: PutOutcome,
    /// The seq it was issued at.
    pub seq: u64,
}

impl Issuer {
    /// An issuer signing with `key` into `store`; its records are valid
    /// for `ttl`. Without [`Issuer::with_outbox`] nothing is published
    /// (`agentmesh crawl` on its own).
    pub fn new(store: Store, key: Arc<SigningKey>, ttl: Duration) -> Self {
        Self {
            key,
            store,
            ttl,
            outbox: None,
            write_locks: (0..WRITE_LOCK_STRIPES)
                .map(|_| tokio::sync::Mutex::new(()))
                .collect(),
        }
    }

    /// Publishes every record issued through `outbox`.
    #[must_use]
    pub fn with_outbox(mut self, outbox: Outbox) -> Self {
        self.outbox = Some(outbox);
        self
    }

    /// The store records are written to.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The node key.
    pub fn key(&self) -> &Arc<SigningKey> {
        &self.key
    }

    /// How long the records issued here are valid.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    async fn lock_agent(&self, id: &str) -> tokio::sync::MutexGuard<'_, ()> {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let hash =
            BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(id);
        self.write_locks[(hash % WRITE_LOCK_STRIPES as u64) as usize]
            .lock()
            .await
    }

    /// Issues a descriptor of `descriptor.id` above the seq held, valid
    /// for the issuer's lifetime from now.
    ///
    /// # Errors
    /// [`IssueError::TooLarge`]; [`IssueError::Store`] when `expect` does
    /// not hold or the store fails.
    pub async fn descriptor(
        &self,
        descriptor: Descriptor,
        document: String,
        evidence: Evidence,
        origin: Origin,
        expect: Expect,
        durability: Durability,
    ) -> Result<Issued, IssueError> {
        let id = descriptor.id.clone();
        self.issue(&id, origin, expect, durability, |seq| {
            let body = DescriptorRecord::new(
                descriptor,
                document,
                seq,
                record::unix_now(),
                self.ttl.as_secs(),
                evidence,
            );
            let signed = SignedRecord::sign_descriptor(&body, &self.key)?;
            Ok((signed, RecordBody::Descriptor(Box::new(body))))
        })
        .await
    }

    /// Issues a tombstone for `id` above the seq held.
    ///
    /// # Errors
    /// As [`Issuer::descriptor`].
    pub async fn tombstone(
        &self,
        id: &str,
        reason: TombstoneReason,
        origin: Origin,
        expect: Expect,
        durability: Durability,
    ) -> Result<Issued, IssueError> {
        self.issue(id, origin, expect, durability, |seq| {
            let body = TombstoneRecord {
                agent_id: id.to_owned(),
                seq,
                issued_at: record::unix_now(),
                reason,
            };
            let signed = SignedRecord::sign_tombstone(&body, &self.key)?;
            Ok((signed, RecordBody::Tombstone(body)))
        })
        .await
    }

    /// The one path: lock, read the held seq, sign, store, unlock, flush
    /// (when `durability` asks), publish.
    async fn issue(
        &self,
        id: &str,
        origin: Origin,
        expect: Expect,
        durability: Durability,
        sign: impl FnOnce(u64) -> Result<(SignedRecord, RecordBody), RecordError>,
    ) -> Result<Issued, IssueError> {
        let guard = self.lock_agent(id).await;
        let held = self.store.held_seq(id).await?;
        let seq = record::next_seq(held);
        let (signed, body) = sign(seq).map_err(IssueError::TooLarge)?;
        let outcome = self.store.put(&signed, &body, origin, expect).await?;
        drop(guard);
        if durability == Durability::Flushed {
            self.store.flush().await?;
        }
        if let Some(outbox) = &self.outbox {
            outbox.send(Published::of(&signed, &body));
        }
        Ok(Issued { outcome, seq })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::sample_descriptor;

    fn issuer(dir: &tempfile::TempDir, ttl: Duration) -> Issuer {
        let store = Store::open(dir.path(), 8 << 20).unwrap();
        Issuer::new(store, Arc::new(SigningKey::from_bytes(&[5u8; 32])), ttl)
    }

    #[tokio::test]
    async fn records_carry_the_configured_lifetime_and_rising_seqs() {
        let dir = tempfile::tempdir().unwrap();
        let ttl = Duration::from_secs(3 * 24 * 3600);
        let (outbox, mut rx) = Outbox::new(8);
        let issuer = issuer(&dir, ttl).with_outbox(outbox);
        let d = sample_descriptor("a");
        let first = issuer
            .descriptor(
                d.clone(),
                "{}".into(),
                Evidence::default(),
                Origin::Local,
                Expect::Any,
                Durability::Flushed,
            )
            .await
            .unwrap();
        assert_eq!(first.outcome, PutOutcome::Created);
        let again = issuer
            .descriptor(
                d.clone(),
                "{}".into(),
                Evidence::default(),
                Origin::Local,
                Expect::Any,
                Durability::Flushed,
            )
            .await
            .unwrap();
        assert!(again.seq > first.seq);
        assert_eq!(again.outcome, PutOutcome::Updated);

        let held = issuer.store().get(&d.id).await.unwrap().unwrap();
        let RecordBody::Descriptor(body) = &held.body else {
            panic!("a descriptor was issued");
        };
        assert_eq!(body.expires_at - body.issued_at, ttl.as_secs());
        assert_eq!(body.seq, again.seq);
        assert_eq!(held.record.signer(), &issuer.key().verifying_key());

        // Both went to the outbox, in order.
        assert_eq!(rx.recv().await.unwrap().agent_id, d.id);
        let second = rx.recv().await.unwrap();
        let decoded = SignedRecord::decode(&second.record).unwrap();
        assert_eq!(decoded.body().unwrap().seq(), again.seq);

        let gone = issuer
            .tombstone(
                &d.id,
                TombstoneReason::Deleted,
                Origin::Local,
                Expect::LocalLive,
                Durability::Flushed,
            )
            .await
            .unwrap();
        assert!(gone.seq > again.seq);
        assert!(matches!(
            issuer.store().get(&d.id).await.unwrap().unwrap().body,
            RecordBody::Tombstone(_)
        ));
        assert!(rx.recv().await.unwrap().capabilities.is_empty());
    }

    #[tokio::test]
    async fn concurrent_issues_for_one_agent_all_land_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let issuer = issuer(&dir, Duration::from_secs(3600));
        let d = sample_descriptor("b");
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let (issuer, d) = (issuer.clone(), d.clone());
                tokio::spawn(async move {
                    issuer
                        .descriptor(
                            d,
                            "{}".into(),
                            Evidence::default(),
                            Origin::Remote,
                            Expect::Any,
                            Durability::Periodic,
                        )
                        .await
                })
            })
            .collect();
        let mut seqs = Vec::new();
        for t in tasks {
            seqs.push(t.await.unwrap().unwrap().seq);
        }
        seqs.sort_unstable();
        seqs.dedup();
        assert_eq!(seqs.len(), 16, "every issue got its own seq");
        let held = issuer.store().get(&d.id).await.unwrap().unwrap();
        assert_eq!(held.body.seq(), *seqs.last().unwrap());
    }
}
