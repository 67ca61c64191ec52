//! The MCP Registry's shapes on the way out: what a node keeps of a
//! server (its `server.json`, with what the registry it came from said
//! about it), and the list item it answers for it on its own sub-registry
//! API (`GET /v0.1/servers`, a `{server, _meta}` object).
//!
//! The registry's metadata of a server (`status`, `statusMessage`,
//! `publishedAt`, `statusChangedAt`) lives in the list item, not in
//! `server.json`. A node keeps what the upstream said inside the stored
//! `server.json`, under `_meta["io.modelcontextprotocol.registry/official"]`
//! (the same key, in the server's own `_meta`, which the schema leaves
//! open), so that it travels with the signed record; [`served_item`] takes
//! it out again and builds the item's `_meta` from it and from this
//! node's own record: its status, and its `updatedAt` (when this node's
//! record was signed, which is what `updated_since` compares).

use serde_json::{Map, Value};

use super::{parse_server, Status, MAX_STATUS_MESSAGE_CHARS, OFFICIAL_META};
use crate::formats::{bounded, FormatError};

/// The members of the registry's metadata a node keeps from an upstream
/// item (the others are its own: `updatedAt`, `isLatest`).
const KEPT_META: [&str; 4] = ["status", "statusMessage", "publishedAt", "statusChangedAt"];
/// Longest timestamp kept, in characters.
const MAX_TIME_CHARS: usize = 40;

/// What a node says about a server it serves, beyond the server itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Official {
    /// The status this node holds: the descriptor's, or `deleted` for a
    /// server a tombstone replaced.
    pub status: Status,
    /// When this node's record of the server was signed (unix seconds).
    pub updated_at: u64,
    /// For a deleted server: when it was deleted (unix seconds).
    pub deleted_at: Option<u64>,
}

/// The `server.json` a node stores for a list item (or a bare
/// `server.json`): the server, with the kept members of the item's
/// registry metadata inside its `_meta` under [`OFFICIAL_META`] (strings
/// only, bounded); the server alone when the item has none.
pub fn stored_document(server: &Value, meta: Option<&Value>) -> Value {
    let mut server = server.clone();
    let kept: Map<String, Value> = meta
        .and_then(|m| m.get(OFFICIAL_META))
        .and_then(Value::as_object)
        .map(|official| {
            KEPT_META
                .iter()
                .filter_map(|k| {
                    let v = official.get(*k)?.as_str()?;
                    let limit = if *k == "statusMessage" {
                        MAX_STATUS_MESSAGE_CHARS
                    } else {
                        MAX_TIME_CHARS
                    };
                    Some(((*k).to_owned(), Value::String(bounded(v, limit))))
                })
                .collect()
        })
        .unwrap_or_default();
    if let Some(obj) = server.as_object_mut() {
        let meta = obj
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.remove(OFFICIAL_META);
            if !kept.is_empty() {
                meta.insert(OFFICIAL_META.to_owned(), Value::Object(kept));
            }
            if meta.is_empty() {
                obj.remove("_meta");
            }
        }
    }
    server
}

/// The list item a node answers for a stored `document`: `{server,
/// _meta}` with the server as published (the kept metadata taken out of
/// its `_meta`) and the registry metadata the MCP Registry API defines
/// (`status`, `statusMessage`, `publishedAt`, `updatedAt`,
/// `statusChangedAt`, `isLatest`: a node holds one version of a server,
/// its latest).
///
/// The status message kept is answered only while the upstream's status
/// is the one this node holds (a message about a deprecation does not
/// describe a server active again). A deleted server's `statusChangedAt`
/// is when it was deleted.
///
/// # Errors
/// [`Reason::McpServerInvalid`](crate::trust::Reason::McpServerInvalid)
/// when the document is not JSON or not a valid `server.json`: such a
/// record is not answered.
pub fn served_item(document: &str, official: &Official) -> Result<Value, FormatError> {
    let mut server: Value = serde_json::from_str(document).map_err(|e| {
        FormatError::new(
            crate::trust::Reason::McpServerInvalid,
            format!("the stored server.json is not JSON: {e}"),
        )
    })?;
    let kept = server
        .get_mut("_meta")
        .and_then(Value::as_object_mut)
        .and_then(|meta| meta.remove(OFFICIAL_META))
        .and_then(|v| match v {
            Value::Object(map) => Some(map),
            _ => None,
        })
        .unwrap_or_default();
    if server
        .get("_meta")
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
    {
        if let Some(obj) = server.as_object_mut() {
            obj.remove("_meta");
        }
    }
    parse_server(&server, None)?;
    let text = |k: &str| kept.get(k).and_then(Value::as_str).map(str::to_owned);
    let mut meta = Map::new();
    meta.insert("status".into(), official.status.as_str().into());
    if text("status").as_deref() == Some(official.status.as_str()) {
        if let Some(message) = text("statusMessage") {
            meta.insert("statusMessage".into(), message.into());
        }
    }
    if let Some(published) = text("publishedAt") {
        meta.insert("publishedAt".into(), published.into());
    }
    meta.insert("updatedAt".into(), rfc3339(official.updated_at).into());
    let changed = match official.deleted_at {
        Some(at) => Some(rfc3339(at)),
        None => text("statusChangedAt")
            .filter(|_| text("status").as_deref() == Some(official.status.as_str())),
    };
    if let Some(changed) = changed {
        meta.insert("statusChangedAt".into(), changed.into());
    }
    meta.insert("isLatest".into(), true.into());
    let mut item_meta = Map::new();
    item_meta.insert(OFFICIAL_META.to_owned(), Value::Object(meta));
    let mut item = Map::new();
    item.insert("server".into(), server);
    item.insert("_meta".into(), Value::Object(item_meta));
    Ok(Value::Object(item))
}

/// Unix seconds as RFC 3339 (UTC, whole seconds).
pub fn rfc3339(secs: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
        .to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn server() -> Value {
        json!({"name": "io.example/weather", "description": "Forecasts", "version": "1.2.0",
               "_meta": {"io.modelcontextprotocol.registry/publisher-provided": {"tool": "cli"}}})
    }

    #[test]
    fn what_the_upstream_said_travels_inside_the_stored_server_and_comes_out_in_the_item() {
        let meta = json!({OFFICIAL_META: {"status": "deprecated", "statusMessage": "use v2",
            "publishedAt": "2025-01-01T00:00:00Z", "updatedAt": "2025-02-01T00:00:00Z",
            "isLatest": true, "statusChangedAt": "2025-03-01T00:00:00Z", "extra": 1}});
        let stored = stored_document(&server(), Some(&meta));
        let kept = &stored["_meta"][OFFICIAL_META];
        assert_eq!(kept["statusMessage"], "use v2");
        assert!(
            kept.get("updatedAt").is_none(),
            "updatedAt is this node's own"
        );
        assert!(kept.get("extra").is_none());
        let official = Official {
            status: Status::Deprecated,
            updated_at: 1_700_000_000,
            deleted_at: None,
        };
        let item = served_item(&stored.to_string(), &official).unwrap();
        assert_eq!(item["server"], server(), "the server as published");
        let meta = &item["_meta"][OFFICIAL_META];
        assert_eq!(meta["status"], "deprecated");
        assert_eq!(meta["statusMessage"], "use v2");
        assert_eq!(meta["publishedAt"], "2025-01-01T00:00:00Z");
        assert_eq!(meta["updatedAt"], "2023-11-14T22:13:20Z");
        assert_eq!(meta["statusChangedAt"], "2025-03-01T00:00:00Z");
        assert_eq!(meta["isLatest"], true);
    }

    #[test]
    fn a_message_about_another_status_is_not_answered() {
        let meta = json!({OFFICIAL_META: {"status": "deprecated", "statusMessage": "use v2"}});
        let stored = stored_document(&server(), Some(&meta));
        let official = Official {
            status: Status::Active,
            updated_at: 0,
            deleted_at: None,
        };
        let item = served_item(&stored.to_string(), &official).unwrap();
        assert_eq!(item["_meta"][OFFICIAL_META]["status"], "active");
        assert!(item["_meta"][OFFICIAL_META].get("statusMessage").is_none());
    }

    #[test]
    fn a_deleted_server_says_when() {
        let official = Official {
            status: Status::Deleted,
            updated_at: 0,
            deleted_at: Some(86_400),
        };
        let item = served_item(&server().to_string(), &official).unwrap();
        assert_eq!(item["_meta"][OFFICIAL_META]["status"], "deleted");
        assert_eq!(
            item["_meta"][OFFICIAL_META]["statusChangedAt"],
            "1970-01-02T00:00:00Z"
        );
    }

    #[test]
    fn a_server_without_registry_metadata_is_stored_as_it_came() {
        let plain = json!({"name": "io.example/a", "description": "d", "version": "1"});
        assert_eq!(stored_document(&plain, None), plain);
        assert_eq!(
            stored_document(&plain, Some(&json!({OFFICIAL_META: {"isLatest": true}}))),
            plain
        );
    }

    #[test]
    fn a_stored_document_that_is_not_a_valid_server_is_not_served() {
        let official = Official {
            status: Status::Active,
            updated_at: 0,
            deleted_at: None,
        };
        assert!(served_item("{", &official).is_err());
        assert!(served_item(r#"{"name":"x"}"#, &official).is_err());
    }
}
