//! Renewal of this node's own registrations. A record this node signs
//! expires after `store.record_ttl`; a registered agent that is never
//! updated would leave every search (and every other node) when it runs
//! out. Records of agents registered here are re-signed, unchanged, once
//! less than half their lifetime is left, and published like any update.
//! Crawled agents are renewed by their revisits (`crawl::scheduler`), and
//! only while they are confirmed; mesh records are their signers' to
//! renew.
//!
//! A renewal must never undo an update that landed after it read the
//! record: it writes with [`Expect::Held`], so a record replaced in
//! between is left as it is.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{DescriptorIssue, Durability, IssueError, Issuer};
use crate::record::RecordBody;
use crate::store::{Expect, Origin, StoreError};

/// Agents looked at per store hop.
const PAGE: usize = 512;

/// One page of registrations: those due (id and held seq), and the last
/// id looked at (where the next page starts; `None` at the end).
type DuePage = (Vec<(String, u64)>, Option<String>);

impl Issuer {
    /// Re-signs every record of an agent registered here that has less
    /// than half of this issuer's lifetime left at `now` (Unix seconds).
    /// Returns how many were renewed.
    ///
    /// # Errors
    /// The first [`IssueError`] other than a record replaced meanwhile.
    pub async fn renew_local(&self, now: u64) -> Result<usize, IssueError> {
        let half = self.ttl.as_secs() / 2;
        let mut renewed = 0;
        let mut after: Option<String> = None;
        loop {
            let from = after.clone();
            let due = self
                .store
                .run_blocking(move |s| -> Result<DuePage, StoreError> {
                    let ids = s.local_ids(from.as_deref(), PAGE)?;
                    let last = ids.last().cloned();
                    let mut due = Vec::new();
                    for id in ids {
                        if let Some(c) = s.compact(&id)? {
                            if c.expires_at < now.saturating_add(half) {
                                due.push((id, c.seq));
                            }
                        }
                    }
                    Ok((due, last))
                })
                .await??;
            let (due, last) = due;
            for (id, seq) in due {
                let Some(held) = self.store.get(&id).await? else {
                    continue;
                };
                let RecordBody::Descriptor(body) = held.body else {
                    continue;
                };
                let body = *body;
                match self
                    .descriptor(DescriptorIssue {
                        descriptor: body.descriptor,
                        document: body.document,
                        evidence: body.evidence,
                        origin: Origin::Local,
                        expect: Expect::Held(seq),
                        durability: Durability::Periodic,
                    })
                    .await
                {
                    Ok(_) => renewed += 1,
                    // Updated or deleted since it was read: nothing to renew.
                    Err(IssueError::Store(StoreError::Changed { .. })) => {}
                    Err(e) => return Err(e),
                }
            }
            match last {
                Some(l) => after = Some(l),
                None => break,
            }
        }
        Ok(renewed)
    }
}

/// Renews this node's registrations every `every` until `cancel` fires.
pub fn spawn_renewer(
    issuer: Issuer,
    every: Duration,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    crate::periodic::every(every, cancel, move || {
        let issuer = issuer.clone();
        async move {
            match issuer.renew_local(crate::record::unix_now()).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(renewed = n, "re-signed registrations nearing expiry"),
                Err(e) => tracing::warn!(error = %e, "renewing registrations failed"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::record::tests::sample_descriptor;
    use crate::store::Store;
    use crate::trust::Evidence;

    async fn registered(issuer: &Issuer, id: &str, name: &str) -> u64 {
        let mut d = sample_descriptor(id);
        d.name = name.into();
        let issued = issuer
            .descriptor(DescriptorIssue {
                descriptor: d,
                document: "{}".into(),
                evidence: Evidence::default(),
                origin: Origin::Local,
                expect: Expect::LocalOrAbsent,
                durability: Durability::Periodic,
            })
            .await
            .unwrap();
        issued.seq
    }

    async fn held(issuer: &Issuer, id: &str) -> crate::record::DescriptorRecord {
        match issuer.store().get(id).await.unwrap().unwrap().body {
            RecordBody::Descriptor(d) => *d,
            RecordBody::Tombstone(_) => panic!("a tombstone"),
        }
    }

    #[tokio::test]
    async fn registrations_past_half_their_lifetime_are_re_signed_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 8 << 20).unwrap();
        let key = Arc::new(ed25519_dalek::SigningKey::from_bytes(&[3u8; 32]));
        let issuer = Issuer::new(store, key, Duration::from_secs(3600));
        let first = registered(&issuer, "a1", "First").await;
        registered(&issuer, "a2", "Second").await;
        let now = crate::record::unix_now();
        assert_eq!(issuer.renew_local(now).await.unwrap(), 0, "all fresh");
        let before = held(&issuer, "a1").await;

        assert_eq!(issuer.renew_local(now + 1801).await.unwrap(), 2);
        let after = held(&issuer, "a1").await;
        assert!(after.seq > first);
        assert_eq!(after.descriptor, before.descriptor);
        assert_eq!(after.document, before.document);
        assert!(
            issuer.store().blocking().is_local("a1").unwrap(),
            "still registered here"
        );
    }

    #[tokio::test]
    async fn a_renewal_never_undoes_an_update_made_after_it_read_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 8 << 20).unwrap();
        let key = Arc::new(ed25519_dalek::SigningKey::from_bytes(&[4u8; 32]));
        let issuer = Issuer::new(store, key, Duration::from_secs(3600));
        let read = registered(&issuer, "a1", "Old name").await;
        // The update lands between the renewal's read and its write.
        let mut d = sample_descriptor("a1");
        d.name = "New name".into();
        issuer
            .descriptor(DescriptorIssue {
                descriptor: d,
                document: "{}".into(),
                evidence: Evidence::default(),
                origin: Origin::Local,
                expect: Expect::LocalLive,
                durability: Durability::Periodic,
            })
            .await
            .unwrap();
        let old = held(&issuer, "a1").await;
        let refused = issuer
            .descriptor(DescriptorIssue {
                descriptor: sample_descriptor("a1"),
                document: "{}".into(),
                evidence: Evidence::default(),
                origin: Origin::Local,
                expect: Expect::Held(read),
                durability: Durability::Periodic,
            })
            .await;
        assert!(
            matches!(refused, Err(IssueError::Store(StoreError::Changed { expected, .. })) if expected == read),
            "{refused:?}"
        );
        assert_eq!(held(&issuer, "a1").await.descriptor.name, "New name");
        assert_eq!(held(&issuer, "a1").await.seq, old.seq);
    }
}
