//! Everything this node signs goes through one [`Issuer`]: registrations,
//! updates and deletions (the registry), crawled agents and mutual-peer
//! upgrades (the crawler), and the liveness probe's results of public
//! agents ([`Issuer::liveness`], gossiped only, not stored: the probe
//! keeps its own result in the agent's freshness). It reads the held seq under the agent's write
//! lock, signs the record with the node key for the configured lifetime
//! (`store.record_ttl`), stores it, flushes the store when the record is
//! one the API acknowledges ([`Durability`]), and hands the record to the
//! [`Outbox`] on its way to the mesh.
//!
//! Submodules: [`outbox`] (the bounded queue to the mesh and its publisher
//! task), [`republish`] (after a restart, this node's own records go back
//! into the DHT).

pub mod outbox;
mod renew;
pub mod republish;

pub use renew::spawn_renewer;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ed25519_dalek::SigningKey;

pub use outbox::{Outbox, Published};

use crate::descriptor::Descriptor;
use crate::record::{
    self, DescriptorRecord, LivenessRecord, RecordBody, RecordError, SignedRecord, TombstoneReason,
    TombstoneRecord, Transfer,
};
use crate::store::{
    failed_batch, BlockingStore, Expect, Liveness, Origin, PutOutcome, Store, StoreError,
};
use crate::trust::Evidence;

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

/// A descriptor to issue, and how: what [`Issuer::descriptor`] takes.
#[derive(Debug, Clone)]
pub struct DescriptorIssue {
    /// The normalised descriptor; its `id` names the agent.
    pub descriptor: Descriptor,
    /// The document as published, kept beside it.
    pub document: String,
    /// What was verified of the agent.
    pub evidence: Evidence,
    /// Whose record it is in the store: this node's registration, a
    /// crawl or a peer's counted record.
    pub origin: Origin,
    /// What the store must hold for the write to go ahead.
    pub expect: Expect,
    /// When the record must be on disk.
    pub durability: Durability,
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

    /// Issues a descriptor of `descriptor.id` above the seq held, valid
    /// for the issuer's lifetime from now.
    ///
    /// # Errors
    /// [`IssueError::TooLarge`]; [`IssueError::Store`] when `expect` does
    /// not hold or the store fails.
    pub async fn descriptor(&self, issue: DescriptorIssue) -> Result<Issued, IssueError> {
        let DescriptorIssue {
            descriptor,
            document,
            evidence,
            origin,
            expect,
            durability,
        } = issue;
        self.descriptors(
            vec![(descriptor, document, evidence)],
            origin,
            expect,
            durability,
        )
        .await
        .pop()
        .expect("one result per descriptor")
    }

    /// Issues several descriptors at once (a bulk import's run of
    /// agents): one hop to the blocking pool that reads every held seq,
    /// signs, and stores them in one store transaction; one flush when
    /// `durability` asks. Each gets its own result, in order: a refusal
    /// (another registry's agent, a record over the size limit) leaves the
    /// others issued. Two descriptors of one agent are issued in order.
    pub async fn descriptors(
        &self,
        items: Vec<(Descriptor, String, Evidence)>,
        origin: Origin,
        expect: Expect,
        durability: Durability,
    ) -> Vec<Result<Issued, IssueError>> {
        let (ttl, key) = (self.ttl.as_secs(), self.key.clone());
        let signers = items
            .into_iter()
            .map(|(descriptor, document, evidence)| {
                let key = key.clone();
                let id = descriptor.id.clone();
                let sign: Signer = Box::new(move |seq, transfer| {
                    let mut body = DescriptorRecord::new(
                        descriptor,
                        document,
                        seq,
                        record::unix_now(),
                        ttl,
                        evidence,
                    );
                    body.transfer = transfer;
                    let signed = match SignedRecord::sign_descriptor(&body, &key) {
                        // A record the DNSSEC chain makes too large is
                        // signed without it: the flag then rests on the
                        // signer's word, as it did before chains.
                        Err(RecordError::TooLarge { .. })
                            if body.evidence.dnssec_chain.is_some() =>
                        {
                            body.evidence.dnssec_chain = None;
                            SignedRecord::sign_descriptor(&body, &key)?
                        }
                        signed => signed?,
                    };
                    Ok((signed, RecordBody::Descriptor(Box::new(body))))
                });
                (id, sign)
            })
            .collect();
        self.issue(signers, origin, expect, durability).await
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
        let (key, agent_id) = (self.key.clone(), id.to_owned());
        let sign: Signer = Box::new(move |seq, _| {
            let body = TombstoneRecord {
                agent_id,
                seq,
                issued_at: record::unix_now(),
                reason,
            };
            let signed = SignedRecord::sign_tombstone(&body, &key)?;
            Ok((signed, RecordBody::Tombstone(body)))
        });
        self.issue(vec![(id.to_owned(), sign)], origin, expect, durability)
            .await
            .pop()
            .expect("one result per record")
    }

    /// Signs this node's probe result of `agent_id` as a `liveness`
    /// record (docs/protocol.md#probe), naming the seq of the descriptor
    /// held, and drops it into the outbox to be gossiped; `true` when it
    /// did. Nothing is signed for an agent that is private or unlisted
    /// (it never leaves the node), not held as a live descriptor, or
    /// when nothing is published (no outbox). Never waits for the mesh: a
    /// full outbox drops the result (the next probe makes another).
    ///
    /// # Errors
    /// [`IssueError::Store`] when the held record cannot be read;
    /// [`IssueError::TooLarge`] for an id too long for the record.
    pub async fn liveness(&self, agent_id: &str, found: Liveness) -> Result<bool, IssueError> {
        let Some(outbox) = &self.outbox else {
            return Ok(false);
        };
        let (key, id) = (self.key.clone(), agent_id.to_owned());
        let signed = self
            .store
            .run_blocking(move |store| -> Result<Option<Published>, IssueError> {
                if store.is_hidden(&id) {
                    return Ok(None);
                }
                let seq = match store.get(&id)? {
                    Some(held) if matches!(held.body, RecordBody::Descriptor(_)) => held.body.seq(),
                    _ => return Ok(None),
                };
                let body = LivenessRecord {
                    agent_id: id,
                    seq,
                    state: found.state,
                    checked_at: found.checked_at,
                    rtt_ms: found.rtt_ms,
                    protocol: found.protocol,
                };
                let record =
                    SignedRecord::sign_liveness(&body, &key).map_err(IssueError::TooLarge)?;
                // Every record the node signs is in its log, probe results too.
                store.log_record(&record.encode())?;
                Ok(Some(Published::liveness(&record, &body.agent_id)))
            })
            .await??;
        Ok(match signed {
            Some(published) => {
                outbox.send(published);
                true
            }
            None => false,
        })
    }

    /// The one path: lock the agents (their stripes, in order), then on a
    /// blocking thread read each held seq, sign, and store them all in one
    /// transaction; unlock, flush (when `durability` asks), publish.
    async fn issue(
        &self,
        items: Vec<(String, Signer)>,
        origin: Origin,
        expect: Expect,
        durability: Durability,
    ) -> Vec<Result<Issued, IssueError>> {
        let count = items.len();
        let mut stripes: Vec<usize> = items
            .iter()
            .map(|(id, _)| crate::identity::stripe_of(id, WRITE_LOCK_STRIPES))
            .collect();
        stripes.sort_unstable();
        stripes.dedup();
        let mut guards = Vec::with_capacity(stripes.len());
        for s in stripes {
            guards.push(self.write_locks[s].lock().await);
        }
        let stored = self
            .store
            .run_blocking(move |store| sign_and_store(store, items, origin, expect))
            .await;
        drop(guards);
        let results = match stored {
            Ok(results) => results,
            Err(e) => return failed_batch(e, count),
        };
        if durability == Durability::Flushed && results.iter().any(Result::is_ok) {
            if let Err(e) = self.store.flush().await {
                // Nothing is acknowledged that is not on disk.
                return failed_batch(e, count);
            }
        }
        results
            .into_iter()
            .map(|r| {
                r.map(|(issued, published)| {
                    if let (Some(outbox), Some(published)) = (&self.outbox, published) {
                        outbox.send(published);
                    }
                    issued
                })
            })
            .collect()
    }
}

/// What signs one record at the seq it is given, with the transfer this
/// node holds its id by, if it took the id over (descriptors carry it).
type Signer = Box<
    dyn FnOnce(u64, Option<Transfer>) -> Result<(SignedRecord, RecordBody), RecordError> + Send,
>;

/// A signer with its seq and transfer, or why it cannot sign.
type ToSign = Result<(u64, Option<Transfer>, Signer), IssueError>;

/// An issued record and what goes to the outbox for it (nothing for a
/// hidden agent).
type Stored = Result<(Issued, Option<Published>), IssueError>;

/// Reads each held seq, signs (on every core, for a batch), and stores
/// what signed in one batch (on a blocking thread, under the agents'
/// locks).
fn sign_and_store(
    store: &BlockingStore,
    items: Vec<(String, Signer)>,
    origin: Origin,
    expect: Expect,
) -> Vec<Stored> {
    // Seqs first, in order: a second record of one agent in the batch
    // goes above the first.
    let mut assigned: HashMap<String, u64> = HashMap::new();
    let mut to_sign: Vec<ToSign> = Vec::with_capacity(items.len());
    for (id, sign) in items {
        let held = match assigned.get(&id) {
            Some(seq) => Ok(Some(*seq)),
            None => store.held_seq(&id),
        };
        let read = held.and_then(|held| Ok((held, store.transfer(&id)?)));
        let (held, transfer) = match read {
            Ok(read) => read,
            Err(e) => {
                to_sign.push(Err(e.into()));
                continue;
            }
        };
        let seq = record::next_seq(held);
        assigned.insert(id, seq);
        to_sign.push(Ok((seq, transfer, sign)));
    }
    let signed = sign_all(to_sign);
    let ready: Vec<(SignedRecord, RecordBody)> = signed
        .iter()
        .filter_map(|r| r.as_ref().ok().cloned())
        .collect();
    let mut puts = store.put_batch(&ready, origin, expect).into_iter();
    signed
        .into_iter()
        .map(|r| {
            let (record, body) = r?;
            let outcome = puts.next().expect("one put result per signed record")?;
            // An unlisted or private agent never leaves the node: not its
            // descriptors, not its tombstone (docs/protocol.md#visibility).
            let published =
                (!store.is_hidden(body.agent_id())).then(|| Published::of(&record, &body));
            Ok((
                Issued {
                    outcome,
                    seq: body.seq(),
                },
                published,
            ))
        })
        .collect()
}

/// Batches at least this large are signed on every core.
const PARALLEL_SIGNING: usize = 32;

/// Signs each record at its seq, in order; a large batch is split over
/// scoped threads (which inherit the caller's priority).
fn sign_all(items: Vec<ToSign>) -> Vec<Result<(SignedRecord, RecordBody), IssueError>> {
    let sign_one = |item: ToSign| {
        let (seq, transfer, sign) = item?;
        sign(seq, transfer).map_err(IssueError::TooLarge)
    };
    // A crawl signs a record or two at a time: asking for the cores
    // reads the cgroup's files, so a small batch does not ask.
    if items.len() < PARALLEL_SIGNING {
        return items.into_iter().map(sign_one).collect();
    }
    let parts = std::thread::available_parallelism().map_or(1, |n| n.get());
    if parts < 2 {
        return items.into_iter().map(sign_one).collect();
    }
    let per_part = items.len().div_ceil(parts);
    let mut items = items.into_iter();
    let chunks: Vec<Vec<_>> = std::iter::from_fn(|| {
        let chunk: Vec<_> = items.by_ref().take(per_part).collect();
        (!chunk.is_empty()).then_some(chunk)
    })
    .collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| scope.spawn(move || chunk.into_iter().map(sign_one).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("signing does not panic"))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::sample_descriptor;

    /// A flushed local registration of `d`.
    fn local(d: &Descriptor) -> DescriptorIssue {
        DescriptorIssue {
            descriptor: d.clone(),
            document: "{}".into(),
            evidence: Evidence::default(),
            origin: Origin::Local,
            expect: Expect::Any,
            durability: Durability::Flushed,
        }
    }

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
        let first = issuer.descriptor(local(&d)).await.unwrap();
        assert_eq!(first.outcome, PutOutcome::Created);
        let again = issuer.descriptor(local(&d)).await.unwrap();
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
    async fn a_probe_result_the_node_signs_is_in_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let key = Arc::new(SigningKey::from_bytes(&[5u8; 32]));
        let options = crate::store::StoreOptions {
            cache_bytes: 8 << 20,
            log_signer: Some(key.verifying_key().to_bytes()),
            ..crate::store::StoreOptions::default()
        };
        let store = Store::open_with(dir.path(), &options).unwrap();
        let (outbox, mut rx) = Outbox::new(8);
        let issuer = Issuer::new(store, key, Duration::from_secs(3600)).with_outbox(outbox);
        let d = sample_descriptor("probed");
        issuer.descriptor(local(&d)).await.unwrap();
        let found = crate::store::Liveness {
            state: crate::record::LiveState::Alive,
            checked_at: crate::record::unix_now(),
            rtt_ms: 12,
            protocol: crate::record::ProbeProtocol::Aidip,
        };
        assert!(issuer.liveness(&d.id, found).await.unwrap());
        let _descriptor = rx.recv().await.unwrap();
        let published = rx.recv().await.unwrap();
        assert!(published.gossip_only);
        issuer.store().flush().await.unwrap();
        let s = issuer.store().blocking();
        assert_eq!(
            s.log_head().unwrap().0,
            2,
            "the descriptor, then the result"
        );
        assert_eq!(s.log_entry(1).unwrap(), Some(published.record.clone()));
        // Logged once, however often it is handed in.
        let again = published.record.clone();
        let store = issuer.store();
        store
            .run_blocking(move |s| s.log_record(&again))
            .await
            .unwrap()
            .unwrap();
        store.flush().await.unwrap();
        assert_eq!(store.blocking().log_head().unwrap().0, 2);
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
                        .descriptor(DescriptorIssue {
                            descriptor: d,
                            document: "{}".into(),
                            evidence: Evidence::default(),
                            origin: Origin::Remote,
                            expect: Expect::Any,
                            durability: Durability::Periodic,
                        })
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

    #[tokio::test]
    async fn a_batch_issues_each_record_on_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let (outbox, mut rx) = Outbox::new(64);
        let issuer = issuer(&dir, Duration::from_secs(3600)).with_outbox(outbox);
        // "remote" is held as another registry's agent.
        issuer
            .descriptor(DescriptorIssue {
                descriptor: sample_descriptor("remote"),
                document: "{}".into(),
                evidence: Evidence::default(),
                origin: Origin::Remote,
                expect: Expect::Any,
                durability: Durability::Flushed,
            })
            .await
            .unwrap();
        assert_eq!(rx.recv().await.unwrap().agent_id, "remote");
        let items = ["a", "remote", "b", "a"]
            .iter()
            .map(|id| (sample_descriptor(id), "{}".to_owned(), Evidence::default()))
            .collect();
        let results = issuer
            .descriptors(
                items,
                Origin::Local,
                Expect::LocalOrAbsent,
                Durability::Flushed,
            )
            .await;
        assert_eq!(results.len(), 4);
        let first_a = results[0].as_ref().unwrap();
        assert_eq!(first_a.outcome, PutOutcome::Created);
        assert!(matches!(
            results[1],
            Err(IssueError::Store(StoreError::NotLocal { .. }))
        ));
        assert_eq!(results[2].as_ref().unwrap().outcome, PutOutcome::Created);
        let second_a = results[3].as_ref().unwrap();
        assert_eq!(second_a.outcome, PutOutcome::Updated);
        assert!(
            second_a.seq > first_a.seq,
            "the later record of a goes above"
        );
        assert_eq!(
            issuer.store().blocking().held_seq("a").unwrap(),
            Some(second_a.seq)
        );
        // What was issued went to the outbox, in order; the refusal did not.
        let sent: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|p| p.agent_id)
            .collect();
        assert_eq!(sent, ["a", "b", "a"]);
    }
}
