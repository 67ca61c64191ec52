//! The last document of each MCP Registry server a tombstone replaced.
//!
//! A tombstone holds no document, yet the MCP sub-registry API answers a
//! deleted server whole (`GET /v0.1/servers?include_deleted=true`, and
//! every `updated_since` page, so that a registry following this node
//! learns of the deletion). The `gone` tree keeps, by agent id, the
//! `server.json` the deleted record held, when it was last updated and
//! when it was deleted. It is written after the tombstone's transaction
//! commits (a crash in between loses the entry, never the tombstone),
//! cleared when the server is registered again, and kept only for
//! records this node counted (a claimed record's document is not served).
//! A tree added without a layout change: a data directory without it
//! gets it empty.

use serde::{Deserialize, Serialize};

use super::error::StoreError;
use super::handles::{BlockingStore, Inner};
use super::stored::StoredAgent;
use crate::descriptor::DocumentFormat;
use crate::record::RecordBody;

/// A deleted MCP Registry server, as the `gone` tree keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoneServer {
    /// The `server.json` the last live record held.
    pub document: String,
    /// When that record was signed (unix seconds).
    pub updated_at: u64,
    /// When the tombstone was signed (unix seconds).
    pub deleted_at: u64,
}

/// What a write does to the `gone` tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum GoneChange {
    /// Nothing: not an MCP Registry server.
    Nothing,
    /// A tombstone replaced a counted MCP Registry server: keep this.
    Keep(Vec<u8>),
    /// An MCP Registry server is live again: forget it was deleted.
    Clear,
}

/// The change a write makes: `prev` the record it replaces, `written`
/// the format of the live descriptor it writes (`None` for a tombstone),
/// `issued_at` when the written record was signed.
pub(super) fn change(
    prev: Option<&StoredAgent>,
    written: Option<DocumentFormat>,
    issued_at: u64,
) -> GoneChange {
    match written {
        Some(DocumentFormat::McpRegistry) => GoneChange::Clear,
        Some(_) => GoneChange::Nothing,
        None => match prev {
            Some(StoredAgent {
                body: RecordBody::Descriptor(d),
                claimed: false,
                ..
            }) if d.descriptor.format == DocumentFormat::McpRegistry => {
                let gone = GoneServer {
                    document: d.document.clone(),
                    updated_at: d.issued_at,
                    deleted_at: issued_at,
                };
                GoneChange::Keep(serde_json::to_vec(&gone).expect("a GoneServer serialises"))
            }
            _ => GoneChange::Nothing,
        },
    }
}

impl Inner {
    /// Applies a committed write's [`GoneChange`]; a failure is logged
    /// (the write itself stands).
    pub(super) fn keep_gone(&self, id: &str, change: GoneChange) {
        let result = match change {
            GoneChange::Nothing => return,
            GoneChange::Keep(value) => self.gone.insert(id.as_bytes(), value).map(drop),
            GoneChange::Clear => self.gone.remove(id.as_bytes()).map(drop),
        };
        if let Err(e) = result {
            tracing::error!(agent = %id, error = %e, "keeping a deleted MCP server's document failed");
        }
    }
}

impl BlockingStore {
    /// The deleted MCP Registry server kept for `id`, if any.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn gone(&self, id: &str) -> Result<Option<GoneServer>, StoreError> {
        let Some(bytes) = self.inner.gone.get(id.as_bytes())? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| super::error::corrupt(id, format!("its deleted server: {e}")))
    }

    /// The records (live descriptors and tombstones) whose ids start with
    /// `prefix`, in id order, after the id `after` (from the first when
    /// `None`), each handed to `visit` until it answers `false`.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn scan_prefix(
        &self,
        prefix: &str,
        after: Option<&str>,
        mut visit: impl FnMut(StoredAgent) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        let start = match after {
            Some(a) if a.as_bytes() >= prefix.as_bytes() => {
                std::ops::Bound::Excluded(a.as_bytes().to_vec())
            }
            _ => std::ops::Bound::Included(prefix.as_bytes().to_vec()),
        };
        for entry in self
            .inner
            .records
            .range::<Vec<u8>, _>((start, std::ops::Bound::Unbounded))
        {
            let (key, value) = entry?;
            if !key.starts_with(prefix.as_bytes()) {
                break;
            }
            let id = String::from_utf8_lossy(&key);
            if !visit(super::stored::decode_stored(&id, &value)?)? {
                break;
            }
        }
        Ok(())
    }
}
