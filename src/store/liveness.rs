//! What other nodes' liveness probes found of the agents this node holds:
//! their signed `liveness` records as the federation judge took them
//! (docs/protocol.md#probe), at most [`MAX_CHECKS_PER_AGENT`] per agent,
//! one per signer (the newest by `checked_at`).
//!
//! Tree `liveness`: agent ordinal (`u32`, big-endian) + the signer's key
//! (32 bytes) -> JSON [`PeerCheck`]. Keyed by ordinal, an agent's checks
//! are one prefix: read for its summary, dropped with its tombstone. A
//! check from a signer this node counts (its trusted peers, as
//! [`BlockingStore::reassess`] last classified them) that found the agent
//! `alive` is also in memory ([`FreshIndex`]'s trusted map), which
//! `alive_within` filters by beside this node's own probe; a check from
//! any other signer is shown and never counted.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::error::StoreError;
use super::freshness::{FreshIndex, LiveState, Liveness, ProbeProtocol};
use super::handles::{BlockingStore, Inner};
use super::postings;

/// Most checks kept per agent, one per signer: when full, a new signer's
/// check evicts the oldest check of a signer this node does not trust
/// (a trusted signer's only when every check held is trusted and so is
/// the new one).
pub const MAX_CHECKS_PER_AGENT: usize = 8;

/// One other node's latest probe result for an agent, as kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerCheck {
    /// The seq of the agent's descriptor the signer probed.
    pub seq: u64,
    /// What its probe found.
    pub state: LiveState,
    /// When, Unix seconds.
    pub checked_at: u64,
    /// The round trip, milliseconds.
    pub rtt_ms: u64,
    /// The protocol it spoke.
    pub protocol: ProbeProtocol,
    /// Whether the signer is one this node counts (`p2p.trusted_peers`).
    pub trusted: bool,
}

impl PeerCheck {
    /// The check as a [`Liveness`] (what results show of a probe).
    pub fn liveness(&self) -> Liveness {
        Liveness {
            state: self.state,
            checked_at: self.checked_at,
            rtt_ms: self.rtt_ms,
            protocol: self.protocol,
        }
    }
}

/// What [`BlockingStore::put_peer_check`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckPut {
    /// Kept (a new signer's check, or newer than the one held from it).
    Stored,
    /// The signer's check held has the same `checked_at`.
    Same,
    /// The signer's check held is newer.
    Older,
    /// The agent's checks are full and none could make room for this one.
    Full,
    /// No agent of that id is held.
    UnknownAgent,
}

/// A check's key: the agent's ordinal, then the signer.
fn key(ord: u32, signer: &[u8; 32]) -> [u8; 36] {
    let mut k = [0u8; 36];
    k[..4].copy_from_slice(&ord.to_be_bytes());
    k[4..].copy_from_slice(signer);
    k
}

fn decode(key: &[u8], value: &[u8]) -> Result<([u8; 32], PeerCheck), StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt {
        key: format!("liveness {key:?}"),
        reason,
    };
    let signer: [u8; 32] = key
        .get(4..)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| corrupt("key is not an ordinal and a signer".into()))?;
    let check = serde_json::from_slice(value).map_err(|e| corrupt(e.to_string()))?;
    Ok((signer, check))
}

/// The newest `alive` check of a trusted signer among `checks`.
fn trusted_alive(checks: &[([u8; 32], PeerCheck)]) -> Option<u64> {
    checks
        .iter()
        .filter(|(_, c)| c.trusted && c.state == LiveState::Alive)
        .map(|(_, c)| c.checked_at)
        .max()
}

impl Inner {
    /// The checks held for the agent with ordinal `ord`.
    fn checks_of(&self, ord: u32) -> Result<Vec<([u8; 32], PeerCheck)>, StoreError> {
        self.liveness
            .scan_prefix(ord.to_be_bytes())
            .map(|e| {
                let (k, v) = e?;
                decode(&k, &v)
            })
            .collect()
    }

    /// The index's trusted `alive` time of `ord`, from `checks`.
    fn index_checks(&self, ord: u32, checks: &[([u8; 32], PeerCheck)]) {
        self.dropped
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .set_trusted_alive(ord, trusted_alive(checks));
    }

    /// Drops every check of the agent with ordinal `ord` (its tombstone
    /// was written).
    pub(super) fn drop_peer_checks(&self, ord: u32) -> Result<(), StoreError> {
        let _turn = self
            .liveness_turn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for entry in self.liveness.scan_prefix(ord.to_be_bytes()).keys() {
            self.liveness.remove(entry?)?;
        }
        self.index_checks(ord, &[]);
        Ok(())
    }
}

impl BlockingStore {
    /// Keeps `check`, signed by `signer`, for agent `id`: one check per
    /// signer (a newer one replaces it), at most
    /// [`MAX_CHECKS_PER_AGENT`] per agent (see there for what makes
    /// room). Whether the agent may have checks at all (held, live, its
    /// seq, not hidden) is the caller's judgement.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn put_peer_check(
        &self,
        id: &str,
        signer: &[u8; 32],
        check: PeerCheck,
    ) -> Result<CheckPut, StoreError> {
        let inner = &self.inner;
        let Some(v) = inner.ordinals.get(id.as_bytes())? else {
            return Ok(CheckPut::UnknownAgent);
        };
        let ord = postings::decode_ord(id, &v)?;
        let _turn = inner
            .liveness_turn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut checks = inner.checks_of(ord)?;
        if let Some(i) = checks.iter().position(|(s, _)| s == signer) {
            let held = checks[i].1;
            if check.checked_at < held.checked_at {
                return Ok(CheckPut::Older);
            }
            if check.checked_at == held.checked_at {
                return Ok(CheckPut::Same);
            }
            checks.remove(i);
        } else if checks.len() >= MAX_CHECKS_PER_AGENT {
            let oldest = |trusted: bool| {
                checks
                    .iter()
                    .enumerate()
                    .filter(|(_, (_, c))| c.trusted == trusted)
                    .min_by_key(|(_, (_, c))| c.checked_at)
                    .map(|(i, (_, c))| (i, c.checked_at))
            };
            let evict = match oldest(false) {
                // An untrusted check goes first, but not for an untrusted
                // one older than it.
                Some((i, at)) if check.trusted || at < check.checked_at => Some(i),
                Some(_) => None,
                None if check.trusted => oldest(true).map(|(i, _)| i),
                None => None,
            };
            let Some(i) = evict else {
                return Ok(CheckPut::Full);
            };
            let (gone, _) = checks.remove(i);
            inner.liveness.remove(key(ord, &gone))?;
        }
        let value = serde_json::to_vec(&check).expect("a check serialises");
        inner.liveness.insert(key(ord, signer), value)?;
        checks.push((*signer, check));
        inner.index_checks(ord, &checks);
        Ok(CheckPut::Stored)
    }

    /// The checks other nodes' probes made of agent `id`, newest first,
    /// with their signers' keys.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn peer_checks(&self, id: &str) -> Result<Vec<([u8; 32], PeerCheck)>, StoreError> {
        let Some(v) = self.inner.ordinals.get(id.as_bytes())? else {
            return Ok(Vec::new());
        };
        let mut checks = self.inner.checks_of(postings::decode_ord(id, &v)?)?;
        checks.sort_by(|a, b| b.1.checked_at.cmp(&a.1.checked_at).then(a.0.cmp(&b.0)));
        Ok(checks)
    }

    /// The liveness `alive_within` counts for agent `id`: the newest
    /// `alive` result of this node's own probe or of a trusted signer's,
    /// else this node's own last result (whatever it found), else none.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn counted_liveness(&self, id: &str) -> Result<Option<Liveness>, StoreError> {
        let own = self.freshness(id)?.and_then(|f| f.liveness);
        let best = self
            .peer_checks(id)?
            .into_iter()
            .filter(|(_, c)| c.trusted)
            .map(|(_, c)| c.liveness())
            .chain(own)
            .filter(|l| l.state == LiveState::Alive)
            .max_by_key(|l| l.checked_at);
        Ok(best.or(own))
    }

    /// Marks each check held trusted or not against `vouched` (what
    /// [`BlockingStore::reassess`] classifies against), and the index
    /// with it.
    pub(super) fn reflag_peer_checks(
        &self,
        vouched: &BTreeSet<[u8; 32]>,
    ) -> Result<(), StoreError> {
        let inner = &self.inner;
        let _turn = inner
            .liveness_turn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for entry in inner.liveness.iter() {
            let (k, v) = entry?;
            let (signer, mut check) = decode(&k, &v)?;
            let trusted = vouched.contains(&signer);
            if trusted != check.trusted {
                check.trusted = trusted;
                let value = serde_json::to_vec(&check).expect("a check serialises");
                inner.liveness.insert(k, value)?;
            }
        }
        let mut index = inner
            .dropped
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        index.load_trusted(&inner.liveness)
    }
}

impl FreshIndex {
    /// Reads the trusted signers' `alive` checks of `tree` (the
    /// `liveness` tree) into the index, in place of what it held of them.
    pub(super) fn load_trusted(&mut self, tree: &sled::Tree) -> Result<(), StoreError> {
        self.clear_trusted();
        for entry in tree.iter() {
            let (k, v) = entry?;
            let (_, check) = decode(&k, &v)?;
            let ord: [u8; 4] = k[..4].try_into().expect("a decoded key has its ordinal");
            if check.trusted && check.state == LiveState::Alive {
                self.raise_trusted_alive(u32::from_be_bytes(ord), check.checked_at);
            }
        }
        Ok(())
    }
}
