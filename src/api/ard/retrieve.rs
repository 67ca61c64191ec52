//! ARD v0.91's Retrieve (`GET /agents/{identifier}`, §5.3.4), served as
//! `GET /ard/agents/{identifier}`, and the referrals a search in
//! `referrals` mode returns.
//!
//! Retrieve: the path segment is percent-decoded exactly once and must be
//! a `urn:air:` identifier (else 400 `INVALID_ARGUMENT`). The agent is
//! found in this node's store only (never the mesh, as ARD requires): an
//! ARD entry under its own identifier; any other agent under the
//! identifier [`entry::identifier`] gives it, read back to the agentmesh
//! id it came from and checked to give the same identifier again. An ARD
//! entry is answered as its publisher wrote it (the complete entry,
//! `trustManifest` and JSON-LD terms included); any other agent as the
//! entry a search lists, without `score` and `source`. The answer carries
//! `Cache-Control` and a strong `ETag`, and `If-None-Match` gets 304; a
//! 404 is `no-cache`, so a negative answer is not kept.

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::{entry, invalid, origin, ArdError};
use crate::api::state::AppState;
use crate::api::visibility::Reader;
use crate::descriptor::DocumentFormat;
use crate::registry::{RegistryError, SearchQuery, Summary};
use crate::store::Filter;

/// How long a client or private cache may keep an answer, seconds.
const MAX_AGE_SECS: u32 = 60;
/// Most referrals a search returns.
pub(super) const MAX_REFERRALS: usize = 10;

/// `GET /ard/agents/{identifier}`: one complete ARD entry by identifier.
#[utoipa::path(get, path = "/ard/agents/{identifier}", tag = "ard",
    params(("identifier" = String, Path, description = "The entry's `urn:air:` identifier, percent-encoded as one path segment")),
    responses(
        (status = 200, description = "The complete ARD entry (an ARD publisher's entry as written; any other agent as its search entry without `score` and `source`), with `Cache-Control` and `ETag`", body = Object),
        (status = 304, description = "`If-None-Match` named the entry's `ETag`"),
        (status = 400, description = "Invalid percent-encoding, or not a `urn:air:` identifier: `{errorCode: INVALID_ARGUMENT, message}`", body = Object),
        (status = 404, description = "No entry with that identifier here: `{errorCode: NOT_FOUND, message}`", body = Object),
    ))]
pub(in crate::api) async fn retrieve(
    State(state): State<AppState>,
    Reader(who): Reader,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Result<Response, ArdError> {
    let (base, host) = origin(&state, &headers)?;
    let raw = uri.path().strip_prefix("/ard/agents/").unwrap_or_default();
    let identifier = percent_decode(raw).ok_or_else(|| {
        invalid("the identifier's percent-encoding is invalid, or it is not UTF-8 once decoded")
    })?;
    if !entry::is_urn(&identifier) {
        return Err(invalid(format!(
            "{:?} is not an ARD identifier (urn:air:<publisher>:<namespace>:<name>)",
            crate::formats::bounded(&identifier, 128)
        )));
    }
    let not_found = || {
        let mut response = ArdError(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            format!("no entry {identifier} here"),
        )
        .into_response();
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        response
    };
    let Some((summary, document)) = find(&state, &who, &identifier, &host).await? else {
        return Ok(not_found());
    };
    let body = if summary.source_format == DocumentFormat::Ard {
        serde_json::from_str::<Value>(&document)
            .ok()
            .filter(|e| e.get("identifier").and_then(Value::as_str) == Some(&*identifier))
            .unwrap_or_else(|| entry::entry(&summary, &base, &host, None))
    } else {
        entry::entry(&summary, &base, &host, None)
    };
    let bytes = serde_json::to_vec(&body).expect("a JSON value serialises");
    let etag = format!("\"{}\"", hex::encode(&Sha256::digest(&bytes)[..16]));
    let cache = HeaderValue::from_str(&format!("private, max-age={MAX_AGE_SECS}"))
        .expect("an ASCII header value");
    let etag_value = HeaderValue::from_str(&etag).expect("hex in quotes is a header value");
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|t| t.trim().trim_start_matches("W/") == etag || t.trim() == "*")
        });
    let mut response = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            bytes,
        )
            .into_response()
    };
    response.headers_mut().insert(header::CACHE_CONTROL, cache);
    response.headers_mut().insert(header::ETAG, etag_value);
    Ok(response)
}

/// `raw` percent-decoded once (RFC 3986); `None` when a `%` does not
/// start two hex digits or the bytes are not UTF-8.
fn percent_decode(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The agentmesh ids an identifier may stand for: itself (an ARD
/// entry's), then the id [`entry::identifier`] was made from.
fn candidates(identifier: &str, host: &str) -> Vec<String> {
    let mut out = vec![identifier.to_owned()];
    let rest = identifier.strip_prefix("urn:air:").unwrap_or_default();
    let parts: Vec<&str> = rest.splitn(3, ':').collect();
    if let [publisher, namespace, name] = parts[..] {
        match namespace {
            "adp" => out.push(
                crate::identity::AgentId::of_domain(publisher)
                    .as_str()
                    .to_owned(),
            ),
            "a2a" | "aid" => out.push(format!("{namespace}:{publisher}")),
            "dns-aid" => out.push(format!("dns-aid:{name}")),
            "mcp" => {
                out.push(format!("mcp:{publisher}/{name}"));
                if publisher == host {
                    out.push(format!("mcp:{name}"));
                }
            }
            "aidip" => out.push(name.to_owned()),
            _ => {}
        }
    }
    out
}

/// The agent behind `identifier` that `who` may see, with its document.
async fn find(
    state: &AppState,
    who: &crate::store::Viewer,
    identifier: &str,
    host: &str,
) -> Result<Option<(Summary, String)>, ArdError> {
    for id in candidates(identifier, host) {
        if state.registry().visible_to(&id, who).is_err() {
            continue;
        }
        let summary = match state.registry().summary(&id).await {
            Ok(s) => s,
            Err(RegistryError::NotFound { .. }) => continue,
            Err(e) => return Err(e.into()),
        };
        if entry::identifier(&summary.id, summary.source_format, host) != identifier {
            continue;
        }
        match state.registry().document(&id).await {
            Ok(document) => return Ok(Some((summary, document))),
            Err(RegistryError::NotFound { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(None)
}

/// The registries this node knows (ARD entries of type
/// `application/ai-registry+json`, held with the `registry` tag), as ARD
/// referrals, for a search in `referrals` mode.
pub(super) async fn referrals(
    state: &AppState,
    audience: crate::store::Audience,
    host: &str,
) -> Result<Vec<Value>, ArdError> {
    let mut filter =
        Filter::new(std::iter::empty(), ["registry"], std::iter::empty()).unwrap_or_default();
    filter.audience = audience;
    let query = SearchQuery {
        filter,
        query: None,
        after: None,
        limit: MAX_REFERRALS * 4,
        explain: false,
    };
    let page = state.registry().search_local(&query).await?;
    Ok(page
        .items
        .iter()
        .filter(|s| s.source_format == DocumentFormat::Ard)
        .filter_map(|s| {
            let url = s.endpoint.as_deref()?;
            Some(json!({
                "identifier": entry::identifier(&s.id, s.source_format, host),
                "displayName": entry::display_name(s),
                "type": "application/ai-registry+json",
                "url": url,
            }))
        })
        .take(MAX_REFERRALS)
        .collect())
}
