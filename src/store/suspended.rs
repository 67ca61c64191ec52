//! Operator suspensions (REQ-REV-2): an agent this node's operator hides
//! from every search and resolution while its history stays stored. One
//! sled tree, `suspended` (agent id -> JSON `{reason, since}`), read at
//! open into a map and a bitmap of ordinals, which the filter walk
//! subtracts and the text ranking filters by. A suspension is local: it
//! is never gossiped, and a newer record of the agent does not lift it.

use std::collections::HashMap;

use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};

use super::error::StoreError;
use super::postings;

/// Longest suspension reason kept, characters.
pub const MAX_REASON_CHARS: usize = 500;

/// Why and since when an agent is suspended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suspension {
    /// The operator's reason, as given.
    pub reason: String,
    /// Unix seconds.
    pub since: u64,
}

/// The suspensions in memory.
#[derive(Debug, Default)]
pub(super) struct Suspended {
    by_id: HashMap<String, Suspension>,
    ords: RoaringBitmap,
}

impl Suspended {
    /// Reads `tree`, with each agent's ordinal from `ordinals`.
    pub(super) fn load(tree: &sled::Tree, ordinals: &sled::Tree) -> Result<Self, StoreError> {
        let mut out = Self::default();
        for entry in tree.iter() {
            let (key, value) = entry?;
            let id = String::from_utf8_lossy(&key).into_owned();
            let suspension: Suspension =
                serde_json::from_slice(&value).map_err(|e| StoreError::Corrupt {
                    key: id.clone(),
                    reason: format!("suspension: {e}"),
                })?;
            if let Some(ord) = ordinals.get(id.as_bytes())? {
                out.ords.insert(postings::decode_ord(&id, &ord)?);
            }
            out.by_id.insert(id, suspension);
        }
        Ok(out)
    }

    pub(super) fn insert(&mut self, id: &str, ord: u32, suspension: Suspension) {
        self.ords.insert(ord);
        self.by_id.insert(id.to_owned(), suspension);
    }

    pub(super) fn remove(&mut self, id: &str, ord: Option<u32>) -> bool {
        if let Some(ord) = ord {
            self.ords.remove(ord);
        }
        self.by_id.remove(id).is_some()
    }

    pub(super) fn get(&self, id: &str) -> Option<&Suspension> {
        self.by_id.get(id)
    }

    pub(super) fn contains(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    pub(super) fn ordinals(&self) -> &RoaringBitmap {
        &self.ords
    }

    pub(super) fn all(&self) -> Vec<(String, Suspension)> {
        let mut out: Vec<(String, Suspension)> = self
            .by_id
            .iter()
            .map(|(id, s)| (id.clone(), s.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}
