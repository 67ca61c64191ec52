//! What this node knows of how fresh each crawled agent is, and the
//! recrawl scheduler's own state.
//!
//! Two sled trees:
//! - `freshness`: agent id -> JSON [`Freshness`] (state, when the chain
//!   was last confirmed, when the endpoint last answered, the next visit,
//!   and the liveness probe's last [`Liveness`]). At open the ids in
//!   state `dropped` are read into a bitmap of ordinals, which the filter
//!   walk subtracts and the text ranking filters by, unless a query asks
//!   for stale agents too; and the agents whose last probe found them
//!   `alive` into a map of ordinal -> when, which `alive_within` filters
//!   by ([`FreshIndex`]), with the agents a trusted peer's signed probe
//!   result found `alive` (`store/liveness.rs`).
//! - `schedule`: domain -> the scheduler's bytes (`crawl::scheduler`
//!   owns their meaning; the store keeps them opaque, so it does not
//!   depend on the crawler).
//!
//! Freshness is local, like a suspension: it is never gossiped. Other
//! nodes see an agent's freshness only through its record, which this
//! node re-signs while the agent keeps being confirmed and lets expire
//! when it is not. The probe's result alone also leaves the node, for a
//! public agent, as a signed `liveness` record (`crawl::probe`); what
//! other nodes' results say is kept apart (`store/liveness.rs`).

use std::collections::HashMap;

use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};

pub use crate::record::{LiveState, ProbeProtocol};

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
    /// What the liveness probe (`crawl::probe`) found at its last try,
    /// when it tried. Results show it beside `freshness` as `liveness`
    /// (the summary takes it out), so the schema leaves it out here.
    /// Values stored before the probe kept it decode without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(ignore)]
    pub liveness: Option<Liveness>,
}

/// The liveness probe's last result for one agent (`liveness` in results).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Liveness {
    /// What the probe found.
    pub state: LiveState,
    /// When, Unix seconds.
    pub checked_at: u64,
    /// How long the agent took to answer (for `unreachable` and
    /// `timeout`: until the probe gave up), milliseconds.
    pub rtt_ms: u64,
    /// The protocol the probe spoke.
    pub protocol: ProbeProtocol,
}

impl Liveness {
    /// Whether the probe found the agent `alive` at `since` or later.
    pub fn alive_since(&self, since: u64) -> bool {
        self.state == LiveState::Alive && self.checked_at >= since
    }
}

/// What searches filter by, in memory: the dropped agents' ordinals,
/// and when the probe last found each agent `alive` (only agents it
/// found alive at its last try are in the map: a few entries per
/// registration, never one per crawled agent).
#[derive(Debug, Default)]
pub(super) struct FreshIndex {
    ords: RoaringBitmap,
    alive: HashMap<u32, u64>,
    /// When a trusted peer's probe last found each agent `alive`, the
    /// newest of its checks (`store/liveness.rs`): only agents with such
    /// a check are in the map.
    trusted_alive: HashMap<u32, u64>,
}

impl FreshIndex {
    /// Reads `tree`, with each agent's ordinal from `ordinals`.
    pub(super) fn load(tree: &sled::Tree, ordinals: &sled::Tree) -> Result<Self, StoreError> {
        let mut out = Self::default();
        for entry in tree.iter() {
            let (key, value) = entry?;
            let id = String::from_utf8_lossy(&key).into_owned();
            let f = decode(&id, &value)?;
            if f.state != FreshState::Dropped
                && f.liveness.is_none_or(|l| l.state != LiveState::Alive)
            {
                continue;
            }
            if let Some(ord) = ordinals.get(id.as_bytes())? {
                out.set(postings::decode_ord(&id, &ord)?, &f);
            }
        }
        Ok(out)
    }

    /// Keeps what `f` says of the agent with ordinal `ord`.
    pub(super) fn set(&mut self, ord: u32, f: &Freshness) {
        if f.state == FreshState::Dropped {
            self.ords.insert(ord);
        } else {
            self.ords.remove(ord);
        }
        match f.liveness.filter(|l| l.state == LiveState::Alive) {
            Some(l) => {
                self.alive.insert(ord, l.checked_at);
            }
            None => {
                self.alive.remove(&ord);
            }
        }
    }

    /// Keeps when a trusted peer last found the agent with ordinal `ord`
    /// `alive` (`None`: no trusted check of it found it alive).
    pub(super) fn set_trusted_alive(&mut self, ord: u32, at: Option<u64>) {
        match at {
            Some(at) => {
                self.trusted_alive.insert(ord, at);
            }
            None => {
                self.trusted_alive.remove(&ord);
            }
        }
    }

    /// Keeps `at` for `ord` if it is later than the trusted `alive` time
    /// held.
    pub(super) fn raise_trusted_alive(&mut self, ord: u32, at: u64) {
        let held = self.trusted_alive.entry(ord).or_insert(at);
        *held = (*held).max(at);
    }

    /// Forgets every trusted peer's `alive` time.
    pub(super) fn clear_trusted(&mut self) {
        self.trusted_alive.clear();
    }

    /// The ordinals of the agents this node's probe (at its last try) or
    /// a trusted peer's found `alive` at `since` or later.
    pub(super) fn alive_since(&self, since: u64) -> RoaringBitmap {
        self.alive
            .iter()
            .chain(&self.trusted_alive)
            .filter(|(_, at)| **at >= since)
            .map(|(ord, _)| *ord)
            .collect()
    }

    /// Whether the agent with ordinal `ord` was found alive at `since`
    /// or later, by this node or a trusted peer.
    pub(super) fn is_alive_since(&self, ord: u32, since: u64) -> bool {
        self.alive.get(&ord).is_some_and(|at| *at >= since)
            || self.trusted_alive.get(&ord).is_some_and(|at| *at >= since)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_stored_before_the_probe_decode_and_new_ones_round_trip() {
        let old = br#"{"state":"fresh","checked_at":10,"seen_at":9,"endpoint_ok":true,"next_check_at":20}"#;
        let f = decode("a", old).unwrap();
        assert_eq!((f.state, f.liveness), (FreshState::Fresh, None));
        assert!(!String::from_utf8(encode(&f)).unwrap().contains("liveness"));
        let probed = Freshness {
            liveness: Some(Liveness {
                state: LiveState::AuthRequired,
                checked_at: 30,
                rtt_ms: 7,
                protocol: ProbeProtocol::Mcp,
            }),
            ..f
        };
        let bytes = encode(&probed);
        assert!(String::from_utf8_lossy(&bytes).contains(
            r#""liveness":{"state":"auth_required","checked_at":30,"rtt_ms":7,"protocol":"mcp"}"#
        ));
        assert_eq!(decode("a", &bytes).unwrap(), probed);
        assert!(decode("a", br#"{"state":"fresh"}"#).is_err());
    }

    #[test]
    fn the_index_keeps_the_agents_last_found_alive() {
        let at = |state, checked_at| Freshness {
            state: FreshState::Fresh,
            checked_at,
            seen_at: None,
            endpoint_ok: None,
            next_check_at: 0,
            liveness: Some(Liveness {
                state,
                checked_at,
                rtt_ms: 1,
                protocol: ProbeProtocol::Aidip,
            }),
        };
        let mut index = FreshIndex::default();
        index.set(1, &at(LiveState::Alive, 100));
        index.set(2, &at(LiveState::Alive, 50));
        index.set(3, &at(LiveState::Timeout, 100));
        assert_eq!(index.alive_since(60).iter().collect::<Vec<_>>(), [1]);
        assert_eq!(index.alive_since(0).iter().collect::<Vec<_>>(), [1, 2]);
        assert!(index.is_alive_since(2, 50) && !index.is_alive_since(3, 0));
        // A later probe that found it down takes it out.
        index.set(1, &at(LiveState::Unreachable, 200));
        assert!(index.alive_since(0).iter().all(|o| o != 1));
    }
}
