//! The MCP Registry's read API (`/v0.1`, the generic registry API every
//! sub-registry speaks), served over the MCP servers this node holds
//! ([`Registry::mcp_servers`](crate::registry::Registry::mcp_servers)):
//! `GET /v0.1/servers` (`cursor`, `limit`, `search`, `updated_since`,
//! `version`, `include_deleted`), `GET /v0.1/servers/{serverName}/versions`
//! and `GET /v0.1/servers/{serverName}/versions/{version}` (`latest` for
//! the version held), in the registry's own JSON shapes, so that MCP
//! clients and other sub-registries can follow a node as they follow the
//! official registry. Publishing through these paths is not offered (the
//! node's own API registers and imports).
//!
//! Errors are the registry's shape, `{"error": "..."}`: 404 for a server
//! or version not served, 400 for a malformed parameter. Parameters the
//! API does not define are ignored, as the official registry ignores
//! them.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Value};

use super::state::AppState;
use crate::registry::{McpQuery, RegistryError};

/// Servers per page when `limit` is not given (the official registry's).
pub(super) const DEFAULT_LIMIT: usize = 30;
/// Most servers per page.
pub(super) const MAX_LIMIT: usize = 100;
/// Longest `search` text, in bytes.
const MAX_SEARCH_BYTES: usize = 256;
/// Longest `cursor` or `version`, in bytes.
const MAX_PARAM_BYTES: usize = 1024;

/// An answer in the registry's error shape.
#[derive(Debug)]
pub(super) struct McpError(StatusCode, String);

impl IntoResponse for McpError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

impl From<RegistryError> for McpError {
    fn from(e: RegistryError) -> Self {
        tracing::error!(error = %e, "serving the MCP registry API failed");
        Self(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the node's store failed; try again".into(),
        )
    }
}

fn bad(message: impl Into<String>) -> McpError {
    McpError(StatusCode::BAD_REQUEST, message.into())
}

fn not_found(message: &str) -> McpError {
    McpError(StatusCode::NOT_FOUND, message.to_owned())
}

/// The query pairs of a request, each at most once.
fn params(pairs: Vec<(String, String)>) -> Result<Vec<(String, String)>, McpError> {
    let mut seen = std::collections::HashSet::new();
    for (k, _) in &pairs {
        if !seen.insert(k.as_str()) {
            return Err(bad(format!("{k} is given more than once")));
        }
    }
    Ok(pairs)
}

fn boolean(name: &str, value: &str) -> Result<bool, McpError> {
    match value {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(bad(format!("{name} is {value:?}; true or false"))),
    }
}

fn bounded<'a>(name: &str, value: &'a str, max: usize) -> Result<&'a str, McpError> {
    if value.len() > max {
        return Err(bad(format!("{name} is longer than {max} bytes")));
    }
    Ok(value)
}

/// `updated_since`: an RFC 3339 date-time, as unix seconds (before 1970:
/// 0). The registry's document says only "RFC3339 datetime", and clients
/// send what their libraries write: `Z` or any numeric offset (Python's
/// `isoformat()` writes `+02:00` for a local time), a fraction of a
/// second, `t` and `z` in lower case (RFC 3339 section 5.6 allows them).
fn since(value: &str) -> Result<u64, McpError> {
    let refused = |why: &str| {
        bad(format!(
            "updated_since is {:?}: {why} (an RFC 3339 date-time, e.g. 2025-08-07T13:15:04Z \
             or 2025-08-07T15:15:04+02:00)",
            crate::formats::bounded(value, 64)
        ))
    };
    let upper = value.to_ascii_uppercase();
    // The offset: `Z`, or `+HH:MM` / `-HH:MM` at the end, in seconds east.
    let (local, east) = if let Some(local) = upper.strip_suffix('Z') {
        (local, 0)
    } else {
        let split = upper
            .len()
            .checked_sub(6)
            .filter(|&i| upper.is_char_boundary(i));
        let Some((local, offset)) = split.map(|i| upper.split_at(i)) else {
            return Err(refused("no time zone offset"));
        };
        let b = offset.as_bytes();
        let digits = |s: &[u8]| -> Option<i64> {
            s.iter()
                .all(u8::is_ascii_digit)
                .then(|| s.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')))
        };
        let sign = match b[0] {
            b'+' => 1,
            b'-' => -1,
            _ => return Err(refused("no time zone offset")),
        };
        match (digits(&b[1..3]), b[3], digits(&b[4..6])) {
            (Some(h), b':', Some(m)) if h < 24 && m < 60 => (local, sign * (h * 3600 + m * 60)),
            _ => return Err(refused("a malformed time zone offset")),
        }
    };
    let time =
        humantime::parse_rfc3339(&format!("{local}Z")).map_err(|e| refused(&e.to_string()))?;
    let utc = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    Ok(u64::try_from(utc.saturating_sub(east)).unwrap_or(0))
}

/// `GET /v0.1/servers`: one page of the MCP servers this node serves, in
/// name order; `metadata.nextCursor` continues.
#[utoipa::path(get, path = "/v0.1/servers", tag = "mcp-registry",
    params(
        ("cursor" = Option<String>, Query, description = "`metadata.nextCursor` of the previous page"),
        ("limit" = Option<usize>, Query, minimum = 1, maximum = 100, description = "Servers per page (30; at most 100)"),
        ("search" = Option<String>, Query, description = "Only servers whose name contains this (case-insensitive)"),
        ("updated_since" = Option<String>, Query, description = "Only servers changed after this RFC 3339 time; deleted servers included"),
        ("version" = Option<String>, Query, description = "`latest` (the version held) or an exact version"),
        ("include_deleted" = Option<bool>, Query, description = "Include deleted servers (false; true with updated_since)"),
    ),
    responses(
        (status = 200, description = "`{servers: [{server, _meta}], metadata: {nextCursor, count}}`", body = Object),
        (status = 400, description = "A malformed parameter: `{error}`", body = Object),
        (status = 500, description = "The store failed: `{error}`", body = Object),
    ))]
pub(super) async fn list(
    State(state): State<AppState>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, McpError> {
    let mut query = McpQuery {
        limit: DEFAULT_LIMIT,
        ..McpQuery::default()
    };
    for (k, v) in params(pairs)? {
        match k.as_str() {
            "cursor" if !v.is_empty() => {
                let raw = URL_SAFE_NO_PAD
                    .decode(bounded("cursor", &v, MAX_PARAM_BYTES)?)
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .ok_or_else(|| bad("cursor is not one this node gave"))?;
                query.after = Some(raw);
            }
            "limit" => {
                query.limit = v
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| bad(format!("limit is {v:?}; 1 to {MAX_LIMIT}")))?;
            }
            "search" if !v.is_empty() => {
                query.search = Some(bounded("search", &v, MAX_SEARCH_BYTES)?.to_owned());
            }
            "updated_since" if !v.is_empty() => query.updated_since = Some(since(&v)?),
            "version" if !v.is_empty() => {
                query.version = Some(bounded("version", &v, MAX_PARAM_BYTES)?.to_owned());
            }
            "include_deleted" => query.include_deleted = boolean("include_deleted", &v)?,
            _ => {}
        }
    }
    let page = state.registry().mcp_servers(query).await?;
    let mut metadata = json!({ "count": page.servers.len() });
    if let Some(after) = page.next_after {
        metadata["nextCursor"] = URL_SAFE_NO_PAD.encode(after).into();
    }
    Ok(Json(
        json!({ "servers": page.servers, "metadata": metadata }),
    ))
}

/// `include_deleted` of a request that takes no other parameter.
fn include_deleted(pairs: Vec<(String, String)>) -> Result<bool, McpError> {
    let mut include = false;
    for (k, v) in params(pairs)? {
        if k == "include_deleted" {
            include = boolean("include_deleted", &v)?;
        }
    }
    Ok(include)
}

/// The list item of the server `name` a request for one server names
/// (a deleted one when its `include_deleted` asks), or 404.
async fn held(
    state: &AppState,
    name: String,
    pairs: Vec<(String, String)>,
) -> Result<Value, McpError> {
    let include = include_deleted(pairs)?;
    state
        .registry()
        .mcp_server(name, include)
        .await?
        .ok_or_else(|| not_found("Server not found"))
}

/// `GET /v0.1/servers/{serverName}/versions`: the versions of a server
/// this node serves (the one it holds).
#[utoipa::path(get, path = "/v0.1/servers/{serverName}/versions", tag = "mcp-registry",
    params(
        ("serverName" = String, Path, description = "The server name, URL-encoded (`com.example%2Fweather`)"),
        ("include_deleted" = Option<bool>, Query, description = "Answer a deleted server too (false)"),
    ),
    responses(
        (status = 200, description = "`{servers: [{server, _meta}], metadata: {count}}`", body = Object),
        (status = 400, description = "A malformed parameter: `{error}`", body = Object),
        (status = 404, description = "Not served here: `{error}`", body = Object),
    ))]
pub(super) async fn versions(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, McpError> {
    let item = held(&state, name, pairs).await?;
    Ok(Json(
        json!({ "servers": [item], "metadata": { "count": 1 } }),
    ))
}

/// `GET /v0.1/servers/{serverName}/versions/{version}`: one version of a
/// server (`latest`: the one held).
#[utoipa::path(get, path = "/v0.1/servers/{serverName}/versions/{version}", tag = "mcp-registry",
    params(
        ("serverName" = String, Path, description = "The server name, URL-encoded (`com.example%2Fweather`)"),
        ("version" = String, Path, description = "A version, URL-encoded, or `latest`"),
        ("include_deleted" = Option<bool>, Query, description = "Answer a deleted server too (false)"),
    ),
    responses(
        (status = 200, description = "`{server, _meta}`", body = Object),
        (status = 400, description = "A malformed parameter: `{error}`", body = Object),
        (status = 404, description = "Not served here: `{error}`", body = Object),
    ))]
pub(super) async fn version(
    State(state): State<AppState>,
    Path((name, version)): Path<(String, String)>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, McpError> {
    let item = held(&state, name, pairs).await?;
    if version != "latest" && item["server"]["version"].as_str() != Some(version.as_str()) {
        return Err(not_found("Server version not found"));
    }
    Ok(Json(item))
}

#[cfg(test)]
mod tests {
    use super::since;

    #[test]
    fn updated_since_reads_every_offset_rfc_3339_allows() {
        let utc = 1_754_572_504; // 2025-08-07T13:15:04Z
        for value in [
            "2025-08-07T13:15:04Z",
            "2025-08-07T13:15:04.280Z",
            "2025-08-07t13:15:04z",
            "2025-08-07T13:15:04+00:00",
            "2025-08-07T15:15:04+02:00",
            "2025-08-07T07:45:04.5-05:30",
            "2025-08-07T13:15:04-00:00",
        ] {
            assert_eq!(since(value).unwrap(), utc, "{value}");
        }
        assert_eq!(
            since("1970-01-01T01:00:00+02:00").unwrap(),
            0,
            "before 1970"
        );
    }

    #[test]
    fn updated_since_refuses_what_is_not_a_date_time() {
        for value in [
            "yesterday",
            "2025-08-07T13:15:04",
            "2025-08-07T13:15:04+2:00",
            "2025-08-07T13:15:04+24:00",
            "2025-08-07T13:15:04+02:60",
            "2025-08-07T13:15:04+0200",
            "2025-08-07 13:15:04Z",
            "2025-08-07T13:15:04\u{e9}:00",
            "",
        ] {
            assert!(since(value).is_err(), "{value}");
        }
    }
}
