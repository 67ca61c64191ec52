//! What this node counts of the records it holds: whose evidence it
//! proved (or a trusted peer attested) and whose is only claimed, and the
//! agent keys revoked by their own key.
//!
//! A record's evidence counts when this node signed it (its own crawl)
//! or a peer in `p2p.trusted_peers` did; the judge stores every other
//! peer's record as claimed ([`Origin::Claimed`]): shown with who claims
//! it, counted as `unverified` by trust filters, ranking and the resolve
//! policy. When the trusted set changes (a partner added or removed, or
//! a store written before claims existed), [`BlockingStore::reassess`]
//! classifies every live record again; it remembers the set it
//! classified against (a digest in `meta`), so a start with the same set
//! costs one read.
//!
//! A `Revoked` tombstone signed by an agent's own key is final for that
//! key: its fingerprint goes to the `revoked` tree, which survives
//! restarts, and the judge and the crawler refuse every later descriptor
//! whose document carries that key.
//!
//! An id this node took over from another registry keeps the previous
//! owner's signed consent (a [`Transfer`]) in the `transfers` tree; the
//! issuer puts it in every record it signs for the id, so a node that
//! still holds the old owner's record accepts the new one.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::record::Transfer;

use super::compact;
use super::error::StoreError;
use super::handles::{BlockingStore, Store};
use super::write::{Expect, Origin, Write};

/// The `meta` key of the trusted set's digest.
const TRUSTED_DIGEST: &str = "trusted_signers";

/// What [`BlockingStore::reassess`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reassessed {
    /// Live records read (0 when the trusted set had not changed).
    pub examined: u64,
    /// Records whose evidence now counts, or no longer does.
    pub reclassified: u64,
}

/// A revoked agent key, as the `revoked` tree keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revocation {
    /// The agent whose key it was.
    pub agent_id: String,
    /// When this node learnt of it (Unix seconds).
    pub since: u64,
}

fn digest(vouched: &BTreeSet<[u8; 32]>) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(b"agentmesh/trusted-signers/v1\n");
    for key in vouched {
        h.update(key);
    }
    h.finalize().to_vec()
}

impl BlockingStore {
    /// Classifies every live record again against `vouched` (this node's
    /// key and its trusted peers' keys): a record signed by one of them
    /// (or registered here) counts its evidence, any other is a claim.
    /// Does nothing when `vouched` is the set of the last call.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn reassess(&self, vouched: &BTreeSet<[u8; 32]>) -> Result<Reassessed, StoreError> {
        let digest = digest(vouched);
        let meta = &self.inner.meta;
        if meta.get(TRUSTED_DIGEST)?.as_deref() == Some(digest.as_slice()) {
            return Ok(Reassessed::default());
        }
        let mut out = Reassessed::default();
        for entry in self.inner.compact.iter() {
            let (key, value) = entry?;
            let key = format!("ordinal {:?}", key.as_ref());
            let Some(agent) = compact::decode(&key, &value)? else {
                continue;
            };
            out.examined += 1;
            let vouched_for = <[u8; 32]>::try_from(agent.signer.as_slice())
                .is_ok_and(|signer| vouched.contains(&signer));
            let claim = !agent.local && !vouched_for;
            if claim == agent.claimed.is_some() {
                continue;
            }
            let Some(stored) = self.get(&agent.id)? else {
                continue;
            };
            let origin = if claim {
                Origin::Claimed
            } else {
                Origin::Remote
            };
            let seq = stored.body.seq();
            match self.write(Write::new(
                &stored.record,
                &stored.body,
                origin,
                Expect::Same(seq),
            )) {
                Ok(_) => out.reclassified += 1,
                // Written meanwhile: the newer write classified it.
                Err(StoreError::Changed { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        self.reflag_peer_checks(vouched)?;
        self.flush()?;
        meta.insert(TRUSTED_DIGEST, digest)?;
        meta.flush()?;
        if out.reclassified > 0 {
            tracing::info!(
                examined = out.examined,
                reclassified = out.reclassified,
                "records classified again against the trusted peers"
            );
        }
        Ok(out)
    }

    /// Live records held as claims of `signer` (a key this node does not
    /// trust), and of every untrusted signer together.
    pub fn claims(&self, signer: &[u8; 32]) -> (u64, u64) {
        self.inner
            .claims
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .count(signer)
    }

    /// Notes that `fingerprint` (an agent key's, `ed25519:…`) was revoked
    /// by its own key for `agent_id`; on disk when this returns. `false`
    /// when it already was.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn revoke_key(&self, fingerprint: &str, agent_id: &str) -> Result<bool, StoreError> {
        let tree = &self.inner.revoked;
        if tree.contains_key(fingerprint.as_bytes())? {
            return Ok(false);
        }
        let value = serde_json::to_vec(&Revocation {
            agent_id: agent_id.to_owned(),
            since: crate::record::unix_now(),
        })
        .expect("a revocation serialises");
        tree.insert(fingerprint.as_bytes(), value)?;
        tree.flush()?;
        Ok(true)
    }

    /// Keeps `transfer` as the consent this node holds its id by; on disk
    /// when this returns.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn keep_transfer(&self, transfer: &Transfer) -> Result<(), StoreError> {
        let tree = &self.inner.transfers;
        tree.insert(transfer.agent_id.as_bytes(), transfer.to_token().as_bytes())?;
        tree.flush()?;
        Ok(())
    }

    /// The consent this node holds `agent_id` by, if it took it over.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn transfer(&self, agent_id: &str) -> Result<Option<Transfer>, StoreError> {
        let Some(v) = self.inner.transfers.get(agent_id.as_bytes())? else {
            return Ok(None);
        };
        let corrupt = |reason: String| StoreError::Corrupt {
            key: agent_id.to_owned(),
            reason: format!("a transfer: {reason}"),
        };
        let token = std::str::from_utf8(&v).map_err(|e| corrupt(e.to_string()))?;
        Transfer::from_token(token)
            .map(Some)
            .map_err(|e| corrupt(e.to_string()))
    }

    /// The revocation of `fingerprint`, if its key was revoked.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn revocation(&self, fingerprint: &str) -> Result<Option<Revocation>, StoreError> {
        match self.inner.revoked.get(fingerprint.as_bytes())? {
            None => Ok(None),
            Some(v) => serde_json::from_slice(&v)
                .map(Some)
                .map_err(|e| StoreError::Corrupt {
                    key: fingerprint.to_owned(),
                    reason: format!("a revocation: {e}"),
                }),
        }
    }
}

impl Store {
    /// As [`BlockingStore::reassess`], on a blocking thread.
    ///
    /// # Errors
    /// As [`BlockingStore::reassess`], and [`StoreError::TaskFailed`].
    pub async fn reassess(&self, vouched: BTreeSet<[u8; 32]>) -> Result<Reassessed, StoreError> {
        self.run_blocking(move |s| s.reassess(&vouched)).await?
    }

    /// As [`BlockingStore::keep_transfer`], on a blocking thread.
    ///
    /// # Errors
    /// As [`BlockingStore::keep_transfer`], and [`StoreError::TaskFailed`].
    pub async fn keep_transfer(&self, transfer: Transfer) -> Result<(), StoreError> {
        self.run_blocking(move |s| s.keep_transfer(&transfer))
            .await?
    }

    /// As [`BlockingStore::revocation`], on a blocking thread.
    ///
    /// # Errors
    /// As [`BlockingStore::revocation`], and [`StoreError::TaskFailed`].
    pub async fn revocation(&self, fingerprint: &str) -> Result<Option<Revocation>, StoreError> {
        let fingerprint = fingerprint.to_owned();
        self.run_blocking(move |s| s.revocation(&fingerprint))
            .await?
    }
}
