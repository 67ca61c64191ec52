//! The MCP servers a node holds, as the MCP Registry's API answers them
//! (`GET /v0.1/servers` and `/v0.1/servers/{name}/versions/...`), so that
//! MCP clients and other sub-registries can read a node as a registry.
//!
//! What is answered: the live `mcp-registry` records this node counts
//! (imported or followed here, or from a trusted peer; never a claimed
//! one), public (not private or unlisted) and not suspended, in name
//! order; and, when asked for deleted servers (or for changes since a
//! time, which always includes them), the servers a tombstone replaced
//! whose last `server.json` the store kept (`store/gone.rs`). A node
//! holds one version of a server, its latest.

use serde_json::Value;

use super::{Registry, RegistryError};
use crate::descriptor::DocumentFormat;
use crate::formats::mcp::{self, Official, Status};
use crate::record::RecordBody;
use crate::store::{BlockingStore, StoreError, StoredAgent};

/// A list request, already bounded by the caller.
#[derive(Debug, Clone, Default)]
pub struct McpQuery {
    /// Only servers whose name contains this (case-insensitive).
    pub search: Option<String>,
    /// Only servers whose record changed after this (unix seconds);
    /// deleted servers are included.
    pub updated_since: Option<u64>,
    /// Only this version (`None` or `latest`: the version held).
    pub version: Option<String>,
    /// Include deleted servers.
    pub include_deleted: bool,
    /// Continue after this server name.
    pub after: Option<String>,
    /// Most servers.
    pub limit: usize,
}

/// One page of servers.
#[derive(Debug, Clone, Default)]
pub struct McpPage {
    /// The list items (`{server, _meta}`), in name order.
    pub servers: Vec<Value>,
    /// The name to continue after, when more follow.
    pub next_after: Option<String>,
}

impl Registry {
    /// One page of the MCP servers this node serves.
    ///
    /// # Errors
    /// [`RegistryError::Store`].
    pub async fn mcp_servers(&self, query: McpQuery) -> Result<McpPage, RegistryError> {
        self.store
            .run_blocking(move |s| list(s, &query))
            .await?
            .map_err(RegistryError::from)
    }

    /// The server named `name`, as a list item, when this node serves it
    /// (a deleted one only with `include_deleted`).
    ///
    /// # Errors
    /// [`RegistryError::Store`].
    pub async fn mcp_server(
        &self,
        name: String,
        include_deleted: bool,
    ) -> Result<Option<Value>, RegistryError> {
        let query = McpQuery {
            include_deleted,
            ..McpQuery::default()
        };
        self.store
            .run_blocking(move |s| {
                let id = format!("{}{name}", mcp::ID_PREFIX);
                match s.get(&id)? {
                    Some(stored) => served(s, &id, &stored, &query),
                    None => Ok(None),
                }
            })
            .await?
            .map_err(RegistryError::from)
    }
}

/// A page of [`McpQuery`], on a blocking thread.
fn list(s: &BlockingStore, q: &McpQuery) -> Result<McpPage, StoreError> {
    let after = q.after.as_ref().map(|n| format!("{}{n}", mcp::ID_PREFIX));
    let search = q.search.as_ref().map(|t| t.to_lowercase());
    let mut page = McpPage::default();
    let mut last = None;
    s.scan_prefix(mcp::ID_PREFIX, after.as_deref(), |stored| {
        let id = stored.body.agent_id().to_owned();
        let name = &id[mcp::ID_PREFIX.len()..];
        if search
            .as_ref()
            .is_some_and(|t| !name.to_lowercase().contains(t.as_str()))
        {
            return Ok(true);
        }
        let Some(item) = served(s, &id, &stored, q)? else {
            return Ok(true);
        };
        if page.servers.len() == q.limit {
            // One more matches: the page ends before it.
            page.next_after = last.take();
            return Ok(false);
        }
        page.servers.push(item);
        last = Some(name.to_owned());
        Ok(true)
    })?;
    Ok(page)
}

/// The list item of `stored` when the query answers it.
fn served(
    s: &BlockingStore,
    id: &str,
    stored: &StoredAgent,
    q: &McpQuery,
) -> Result<Option<Value>, StoreError> {
    let (document, official) = match &stored.body {
        RecordBody::Descriptor(d) => {
            if stored.claimed
                || d.descriptor.format != DocumentFormat::McpRegistry
                || s.is_hidden(id)
                || s.suspension(id).is_some()
                || q.updated_since.is_some_and(|t| d.issued_at <= t)
            {
                return Ok(None);
            }
            let status = match d.descriptor.status.as_deref() {
                Some("deprecated") => Status::Deprecated,
                _ => Status::Active,
            };
            let official = Official {
                status,
                updated_at: d.issued_at,
                deleted_at: None,
            };
            (d.document.clone(), official)
        }
        RecordBody::Tombstone(t) => {
            if !(q.include_deleted || q.updated_since.is_some())
                || q.updated_since.is_some_and(|since| t.issued_at <= since)
            {
                return Ok(None);
            }
            let Some(gone) = s.gone(id)? else {
                return Ok(None);
            };
            let official = Official {
                status: Status::Deleted,
                updated_at: gone.deleted_at,
                deleted_at: Some(gone.deleted_at),
            };
            (gone.document, official)
        }
    };
    let item = match mcp::served_item(&document, &official) {
        Ok(item) => item,
        Err(e) => {
            tracing::debug!(agent = %id, error = %e, "an MCP server not served");
            return Ok(None);
        }
    };
    let wanted = q.version.as_deref().filter(|v| *v != "latest");
    if wanted.is_some_and(|v| item["server"]["version"].as_str() != Some(v)) {
        return Ok(None);
    }
    Ok(Some(item))
}
