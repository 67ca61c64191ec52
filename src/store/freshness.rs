//! What this node knows of how fresh each crawled agent is, and the
//! recrawl scheduler's own state.
//!
//! Two sled trees:
//! - `freshness`: agent id -> JSON [`Freshness`] (state, when the chain
//!   was last confirmed, when the endpoint last answered, the next visit).
//!   At open the ids in state `dropped` are read into a bitmap of
//!   ordinals, which the filter walk subtracts and the text ranking
//!   filters by, unless a query asks for stale agents too.
//! - `schedule`: domain -> the scheduler's bytes (`crawl::scheduler`
//!   owns their meaning; the store keeps them opaque, so it does not
//!   depend on the crawler).
//!
//! Freshness is local, like a suspension: it is never gossiped. Other
//! nodes see an agent's freshness only through its record, which this
//! node re-signs while the agent keeps being confirmed and lets expire
//! when it is not.

use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};

use super::error::StoreError;
use super::postings;

/// How fresh an agent is, from this node's last confirmation of it
/// (ordered: fresh, stale, dropped).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum FreshState {
    /// Confirmed within `crawl.stale_after`.
    Fresh,
    /// Not confirmed for `crawl.stale_after`: still answered, marked.
    Stale,
    /// Not confirmed for `crawl.drop_after`: left out of default results.
    Dropped,
}

impl FreshState {
    /// The wire name (`fresh`, `stale`, `dropped`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fresh => "fresh",
            Self::Stale => "stale",
            Self::Dropped => "dropped",
        }
    }
}

/// A crawled agent's freshness, as results show it (`freshness`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Freshness {
    /// Fresh, stale or dropped.
    pub state: FreshState,
    /// When this node last confirmed the agent's chain (DNS record and
    /// document, fetched or answered 304), Unix seconds.
    pub checked_at: u64,
    /// When the agent was last seen working (its endpoint answered the
    /// challenge), Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_at: Option<u64>,
    /// Whether its endpoint answered the handshake correctly at the last visit that tried it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_ok: Option<bool>,
    /// When this node visits it next, Unix seconds.
    pub next_check_at: u64,
}

/// The dropped agents' ordinals.
#[derive(Debug, Default)]
pub(super) struct Dropped {
    ords: RoaringBitmap,
}

impl Dropped {
    /// Reads `tree`, with each agent's ordinal from `ordinals`.
    pub(super) fn load(tree: &sled::Tree, ordinals: &sled::Tree) -> Result<Self, StoreError> {
        let mut out = Self::default();
        for entry in tree.iter() {
            let (key, value) = entry?;
            let id = String::from_utf8_lossy(&key).into_owned();
            if decode(&id, &value)?.state != FreshState::Dropped {
                continue;
            }
            if let Some(ord) = ordinals.get(id.as_bytes())? {
                out.ords.insert(postings::decode_ord(&id, &ord)?);
            }
        }
        Ok(out)
    }

    pub(super) fn set(&mut self, ord: u32, dropped: bool) {
        if dropped {
            self.ords.insert(ord);
        } else {
            self.ords.remove(ord);
        }
    }

    pub(super) fn contains(&self, ord: u32) -> bool {
        self.ords.contains(ord)
    }

    pub(super) fn ordinals(&self) -> &RoaringBitmap {
        &self.ords
    }
}

/// A `freshness` value, named by its agent id when it does not decode.
pub(super) fn decode(id: &str, bytes: &[u8]) -> Result<Freshness, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        key: id.to_owned(),
        reason: format!("freshness: {e}"),
    })
}

/// A `freshness` value.
pub(super) fn encode(f: &Freshness) -> Vec<u8> {
    serde_json::to_vec(f).expect("freshness always serialises")
}
