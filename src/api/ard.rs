//! ARD's registry API (Agentic Resource Discovery, the search interface
//! a registry serves: `spec/ard.md` section 7 and
//! `spec/schemas/ard.openapi.yaml` of `ards-project/ard-spec`), over what
//! this node finds, under `/ard/` because ARD's `GET /agents` and
//! AIDIP's share a path:
//!
//! - `POST /ard/search`: `{query: {text, filter}, federation, pageSize,
//!   pageToken}` answered `{results: [entry + score + source], referrals,
//!   pageToken}`. `federation` `auto` (the default) asks the mesh on the
//!   first page as `POST /agents/search` does; `none` and `referrals`
//!   answer from this node, `referrals` adding the registries it knows
//!   (ARD entries of type `application/ai-registry+json` it crawled, at
//!   most 10; the member is left out when there are none).
//! - `POST /ard/explore`: facet counts (`type`, `capabilities`,
//!   `publisher`, `metadata.agentmesh:trust`, `metadata.agentmesh:format`)
//!   over the matched set, counted over its first [`MAX_EXPLORED`]
//!   entries.
//! - `GET /ard/agents`: a listing (`filter`: `key = 'value'` terms joined
//!   by `AND`; `pageSize`; `pageToken`), in the order this node first saw
//!   each agent.
//! - `GET /ard/agents/{identifier}`: ARD v0.91's Retrieve, one complete
//!   entry from this node's store (`api/ard/retrieve.rs`).
//! - `GET /.well-known/ard.json` (and the legacy
//!   `/.well-known/ai-catalog.json`): this node's catalog, one entry of
//!   type `application/ai-registry+json` naming `{base}/ard/`.
//!
//! Filters take the keys `type`, `tags`, `capabilities` and `publisher`
//! (any other is refused with 400, as ARD allows): values are a string or
//! an array, OR within a key, AND across keys. `tags` and a single
//! capability narrow the search itself; `type`, `publisher` and several
//! capabilities are applied to its best [`MAX_CANDIDATES`] matches.
//! Entries are mapped from this node's summaries (`api/ard/entry.rs`).
//! Errors are ARD's `{errorCode, message}`.

mod entry;
pub(super) mod retrieve;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::state::AppState;
use super::visibility::Reader;
use crate::descriptor::DocumentFormat;
use crate::registry::{SearchQuery, Summary};
use crate::search::Scope;
use crate::store::Filter;

/// Most candidates a search or listing reads before the filters ARD
/// adds are applied, and the deepest page (`pageToken` offset plus
/// `pageSize`) a search reaches.
pub(super) const MAX_CANDIDATES: usize = 500;
/// Most matches an explore counts.
pub(super) const MAX_EXPLORED: usize = 500;
/// Most values of one filter key.
const MAX_FILTER_VALUES: usize = 16;
/// Longest `query.text`, in bytes.
const MAX_TEXT_BYTES: usize = 1024;
/// The facets an explore counts.
const FACETS: [&str; 5] = [
    "type",
    "capabilities",
    "publisher",
    "metadata.agentmesh:trust",
    "metadata.agentmesh:format",
];

/// An answer in ARD's error shape.
#[derive(Debug)]
pub(super) struct ArdError(StatusCode, &'static str, String);

impl IntoResponse for ArdError {
    fn into_response(self) -> Response {
        (
            self.0,
            Json(json!({ "errorCode": self.1, "message": self.2 })),
        )
            .into_response()
    }
}

impl From<crate::registry::RegistryError> for ArdError {
    fn from(e: crate::registry::RegistryError) -> Self {
        tracing::error!(error = %e, "serving the ARD API failed");
        Self(
            StatusCode::INTERNAL_SERVER_ERROR,
            "INTERNAL",
            "the node's store failed; try again".into(),
        )
    }
}

fn invalid(message: impl Into<String>) -> ArdError {
    ArdError(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", message.into())
}

/// The origin clients reach this node at, from the request's `Host`
/// (`http`, or `https` when the API serves TLS), and the host alone.
fn origin(state: &AppState, headers: &HeaderMap) -> Result<(String, String), ArdError> {
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    let ok = !host.is_empty()
        && host.len() <= 255
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    if !ok {
        return Err(invalid("the Host header is not a host name"));
    }
    let scheme = if state.config().tls.is_some() {
        "https"
    } else {
        "http"
    };
    let name = if host.starts_with('[') {
        host.split(']')
            .next()
            .unwrap_or(host)
            .trim_start_matches('[')
    } else {
        host.split(':').next().unwrap_or(host)
    };
    Ok((format!("{scheme}://{host}"), name.to_owned()))
}

/// ARD's query model.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryModel {
    text: Option<String>,
    #[serde(default)]
    filter: Map<String, Value>,
}

/// What a filter asks for, read and bounded.
#[derive(Debug, Default)]
struct Wanted {
    tags: Vec<String>,
    capabilities: Vec<String>,
    types: Option<Vec<DocumentFormat>>,
    publishers: Option<Vec<String>>,
}

impl Wanted {
    fn read(filter: &Map<String, Value>) -> Result<Self, ArdError> {
        let mut w = Wanted::default();
        for (key, value) in filter {
            let values: Vec<String> = match value {
                Value::String(s) => vec![s.clone()],
                Value::Array(items) => items
                    .iter()
                    .map(|v| {
                        v.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| invalid(format!("filter {key:?} holds a non-string")))
                    })
                    .collect::<Result<_, _>>()?,
                _ => {
                    return Err(invalid(format!(
                        "filter {key:?} is neither a string nor an array of strings"
                    )))
                }
            };
            if values.is_empty() || values.len() > MAX_FILTER_VALUES {
                return Err(invalid(format!(
                    "filter {key:?} has {} values; 1 to {MAX_FILTER_VALUES}",
                    values.len()
                )));
            }
            match key.as_str() {
                "type" => {
                    let formats = entry::FORMATS
                        .iter()
                        .copied()
                        .filter(|f| values.iter().any(|v| v == entry::media_type(*f)))
                        .collect();
                    w.types = Some(formats);
                }
                "tags" if values.len() == 1 => w.tags = values,
                "tags" => {
                    return Err(invalid(
                        "filter \"tags\" takes one value here (several are not supported yet)",
                    ))
                }
                "capabilities" => w.capabilities = values,
                "publisher" => w.publishers = Some(values),
                other => {
                    return Err(invalid(format!(
                        "filter key {:?} is not supported: type, tags, capabilities, publisher",
                        crate::formats::bounded(other, 64)
                    )))
                }
            }
        }
        Ok(w)
    }

    /// Whether the search can answer the filter alone (no candidate is
    /// dropped after it).
    fn is_exact(&self) -> bool {
        self.types.is_none() && self.publishers.is_none() && self.capabilities.len() <= 1
    }

    /// The store filter: the tag, and the capability when there is one.
    fn filter(&self) -> Filter {
        let caps: Vec<&str> = if self.capabilities.len() == 1 {
            vec![self.capabilities[0].as_str()]
        } else {
            Vec::new()
        };
        Filter::new(
            caps,
            self.tags.iter().map(String::as_str),
            std::iter::empty(),
        )
        .unwrap_or_default()
    }

    /// Whether `s` passes what the search did not check.
    fn keeps(&self, s: &Summary, host: &str) -> bool {
        let format_ok = self
            .types
            .as_ref()
            .is_none_or(|t| t.contains(&s.source_format));
        let caps_ok = self.capabilities.len() <= 1
            || self.capabilities.iter().any(|c| {
                let c = crate::descriptor::normalise_terms([c.as_str()]);
                c.first().is_some_and(|c| s.capabilities.contains(c))
            });
        let publisher_ok = self.publishers.as_ref().is_none_or(|p| {
            let id = entry::identifier(&s.id, s.source_format, host);
            p.iter().any(|p| p == entry::publisher_of(&id))
        });
        format_ok && caps_ok && publisher_ok
    }
}

/// The JSON body of an ARD request, refused in ARD's shape.
fn body<T: for<'de> Deserialize<'de>>(bytes: &Bytes) -> Result<T, ArdError> {
    serde_json::from_slice(bytes).map_err(|e| invalid(format!("the body: {e}")))
}

/// `POST /ard/search` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SearchRequest {
    query: QueryModel,
    federation: Option<String>,
    page_size: Option<i64>,
    page_token: Option<String>,
}

fn offset_of(token: Option<&str>) -> Result<usize, ArdError> {
    let Some(t) = token.filter(|t| !t.is_empty()) else {
        return Ok(0);
    };
    URL_SAFE_NO_PAD
        .decode(t)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.strip_prefix("o:").and_then(|n| n.parse().ok()))
        .ok_or_else(|| invalid("pageToken is not one this node gave"))
}

/// `POST /ard/search`: catalog entries ranked by relevance to
/// `query.text`, within `query.filter`.
#[utoipa::path(post, path = "/ard/search", tag = "ard",
    request_body(content = Object, description = "ARD's SearchRequest: `{query: {text, filter}, federation, pageSize, pageToken}`"),
    responses(
        (status = 200, description = "`{results: [catalog entry with score (0-100) and source], referrals, pageToken}`", body = Object),
        (status = 400, description = "A malformed request: `{errorCode, message}`", body = Object),
        (status = 500, description = "The store failed: `{errorCode, message}`", body = Object),
    ))]
pub(super) async fn search(
    State(state): State<AppState>,
    reader: Reader,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Json<Value>, ArdError> {
    let req: SearchRequest = body(&bytes)?;
    let (base, host) = origin(&state, &headers)?;
    let text = req
        .query
        .text
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| invalid("query.text is required"))?;
    if text.len() > MAX_TEXT_BYTES {
        return Err(invalid(format!(
            "query.text is longer than {MAX_TEXT_BYTES} bytes"
        )));
    }
    let wanted = Wanted::read(&req.query.filter)?;
    let scope = match req.federation.as_deref() {
        None | Some("auto") => Scope::Mesh,
        Some("none" | "referrals") => Scope::Local,
        Some(other) => {
            return Err(invalid(format!(
                "federation is {:?}: auto, referrals or none",
                crate::formats::bounded(other, 32)
            )))
        }
    };
    let page_size = match req.page_size {
        None => 10,
        Some(n) if (1..=100).contains(&n) => n as usize,
        Some(n) => return Err(invalid(format!("pageSize is {n}; 1 to 100"))),
    };
    let offset = offset_of(req.page_token.as_deref())?;
    let wanted_end = offset + page_size;
    if wanted_end > MAX_CANDIDATES {
        return Err(invalid(format!(
            "results past the first {MAX_CANDIDATES} are not answered"
        )));
    }
    let limit = if wanted.is_exact() {
        wanted_end + 1
    } else {
        MAX_CANDIDATES
    };
    let mut filter = wanted.filter();
    filter.audience = reader.audience();
    let query = SearchQuery {
        filter,
        query: Some(text),
        after: None,
        limit,
        explain: false,
    };
    // Later pages ask this node only, as `POST /agents/search` does.
    let scope = if offset > 0 { Scope::Local } else { scope };
    let outcome = state.search().search(&query, scope).await?;
    let kept: Vec<&Summary> = outcome
        .page
        .items
        .iter()
        .filter(|s| wanted.keeps(s, &host))
        .collect();
    let results: Vec<Value> = kept
        .iter()
        .skip(offset)
        .take(page_size)
        .map(|s| entry::entry(s, &base, &host, Some(entry::score(s))))
        .collect();
    let mut answer = json!({ "results": results });
    if req.federation.as_deref() == Some("referrals") {
        let referrals = retrieve::referrals(&state, reader.audience(), &host).await?;
        if !referrals.is_empty() {
            answer["referrals"] = Value::Array(referrals);
        }
    }
    if kept.len() > wanted_end && wanted_end < MAX_CANDIDATES {
        answer["pageToken"] = URL_SAFE_NO_PAD.encode(format!("o:{wanted_end}")).into();
    }
    Ok(Json(answer))
}

/// `POST /ard/explore` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExploreRequest {
    #[serde(default)]
    query: QueryModel,
    result_type: ResultType,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResultType {
    facets: Vec<FacetRequest>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FacetRequest {
    field: String,
    limit: Option<i64>,
    min_count: Option<i64>,
}

/// The values of facet `field` in the entry of `s`.
fn facet_values(field: &str, s: &Summary, host: &str) -> Vec<String> {
    match field {
        "type" => vec![entry::media_type(s.source_format).to_owned()],
        "capabilities" => s.capabilities.clone(),
        "publisher" => {
            let id = entry::identifier(&s.id, s.source_format, host);
            vec![entry::publisher_of(&id).to_owned()]
        }
        "metadata.agentmesh:trust" => vec![s.trust.level.as_str().to_owned()],
        "metadata.agentmesh:format" => vec![s.source_format.as_str().to_owned()],
        _ => Vec::new(),
    }
}

/// `POST /ard/explore`: facet counts over the entries a query matches.
#[utoipa::path(post, path = "/ard/explore", tag = "ard",
    request_body(content = Object, description = "ARD's ExploreRequest: `{query: {text, filter}, resultType: {facets: [{field, limit, minCount}]}}`"),
    responses(
        (status = 200, description = "`{resultType: \"facets\", facets: {field: {buckets: [{value, count}], otherCount}}}`", body = Object),
        (status = 400, description = "A malformed request or an unknown facet: `{errorCode, message}`", body = Object),
        (status = 500, description = "The store failed: `{errorCode, message}`", body = Object),
    ))]
pub(super) async fn explore(
    State(state): State<AppState>,
    reader: Reader,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Json<Value>, ArdError> {
    let req: ExploreRequest = body(&bytes)?;
    let (_, host) = origin(&state, &headers)?;
    if req.result_type.facets.is_empty() || req.result_type.facets.len() > FACETS.len() {
        return Err(invalid(format!(
            "resultType.facets holds 1 to {} facets",
            FACETS.len()
        )));
    }
    for f in &req.result_type.facets {
        if !FACETS.contains(&f.field.as_str()) {
            return Err(invalid(format!(
                "facet {:?} is not counted here: {}",
                crate::formats::bounded(&f.field, 64),
                FACETS.join(", ")
            )));
        }
    }
    let text = req.query.text.filter(|t| !t.trim().is_empty());
    if text.as_ref().is_some_and(|t| t.len() > MAX_TEXT_BYTES) {
        return Err(invalid(format!(
            "query.text is longer than {MAX_TEXT_BYTES} bytes"
        )));
    }
    let wanted = Wanted::read(&req.query.filter)?;
    let mut filter = wanted.filter();
    filter.audience = reader.audience();
    let query = SearchQuery {
        filter,
        query: text,
        after: None,
        limit: MAX_EXPLORED,
        explain: false,
    };
    let page = state.registry().search_local(&query).await?;
    let matched: Vec<&Summary> = page
        .items
        .iter()
        .filter(|s| wanted.keeps(s, &host))
        .collect();
    let mut facets = Map::new();
    for f in &req.result_type.facets {
        let mut counts: std::collections::BTreeMap<String, u64> = Default::default();
        for s in &matched {
            for v in facet_values(&f.field, s, &host) {
                *counts.entry(v).or_default() += 1;
            }
        }
        let min = u64::try_from(f.min_count.unwrap_or(1).max(1)).unwrap_or(1);
        let limit = usize::try_from(f.limit.unwrap_or(20).clamp(1, 1000)).unwrap_or(20);
        let mut buckets: Vec<(String, u64)> =
            counts.into_iter().filter(|(_, n)| *n >= min).collect();
        buckets.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let other: u64 = buckets.iter().skip(limit).map(|(_, n)| n).sum();
        let shown: Vec<Value> = buckets
            .into_iter()
            .take(limit)
            .map(|(value, count)| json!({ "value": value, "count": count }))
            .collect();
        let mut result = json!({ "buckets": shown });
        if other > 0 {
            result["otherCount"] = other.into();
        }
        facets.insert(f.field.clone(), result);
    }
    Ok(Json(json!({ "resultType": "facets", "facets": facets })))
}

/// A listing's `filter`: `key = 'value'` terms joined by `AND`, as a
/// filter map.
fn listing_filter(expr: &str) -> Result<Map<String, Value>, ArdError> {
    let mut out = Map::new();
    if expr.len() > 2048 {
        return Err(invalid("filter is longer than 2048 bytes"));
    }
    for term in expr.split(" AND ").map(str::trim).filter(|t| !t.is_empty()) {
        let Some((key, value)) = term.split_once('=') else {
            return Err(invalid(format!(
                "filter term {:?} is not key = 'value'",
                crate::formats::bounded(term, 64)
            )));
        };
        let value = value.trim();
        let unquoted = value
            .strip_prefix('\'')
            .and_then(|v| v.strip_suffix('\''))
            .or_else(|| value.strip_prefix('"').and_then(|v| v.strip_suffix('"')))
            .ok_or_else(|| invalid("filter values are quoted: key = 'value'"))?;
        let key = key.trim().to_owned();
        let entry = out.entry(key).or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(values) = entry {
            values.push(unquoted.into());
        }
    }
    Ok(out)
}

/// `GET /ard/agents`: a listing of catalog entries, in the order this
/// node first saw each agent.
#[utoipa::path(get, path = "/ard/agents", tag = "ard",
    params(
        ("filter" = Option<String>, Query, description = "`key = 'value'` terms joined by `AND` (type, tags, capabilities, publisher)"),
        ("orderBy" = Option<String>, Query, description = "Not supported: the order is the node's"),
        ("pageSize" = Option<i64>, Query, description = "Entries per page (20; at most 100)"),
        ("pageToken" = Option<String>, Query, description = "`pageToken` of the previous page"),
    ),
    responses(
        (status = 200, description = "`{items: [catalog entry], pageToken}`", body = Object),
        (status = 400, description = "A malformed parameter: `{errorCode, message}`", body = Object),
        (status = 500, description = "The store failed: `{errorCode, message}`", body = Object),
    ))]
pub(super) async fn list(
    State(state): State<AppState>,
    reader: Reader,
    headers: HeaderMap,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ArdError> {
    let (base, host) = origin(&state, &headers)?;
    let mut page_size = 20;
    let mut after = None;
    let mut filter = Map::new();
    for (k, v) in pairs {
        match k.as_str() {
            "filter" => filter = listing_filter(&v)?,
            "orderBy" if !v.is_empty() => {
                return Err(invalid(
                    "orderBy is not supported: entries come in the node's order",
                ))
            }
            "pageSize" => {
                page_size = v
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=100).contains(n))
                    .ok_or_else(|| invalid(format!("pageSize is {v:?}; 1 to 100")))?;
            }
            "pageToken" if !v.is_empty() => {
                let id = URL_SAFE_NO_PAD
                    .decode(&v)
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .ok_or_else(|| invalid("pageToken is not one this node gave"))?;
                after = Some(id);
            }
            _ => {}
        }
    }
    let wanted = Wanted::read(&filter)?;
    let mut store_filter = wanted.filter();
    store_filter.audience = reader.audience();
    let limit = if wanted.is_exact() {
        page_size
    } else {
        MAX_CANDIDATES
    };
    let query = SearchQuery {
        filter: store_filter,
        query: None,
        after,
        limit,
        explain: false,
    };
    let page = state.registry().search_local(&query).await?;
    let mut items = Vec::new();
    let mut last = None;
    for s in &page.items {
        if items.len() == page_size {
            break;
        }
        last = Some(s.id.clone());
        if wanted.keeps(s, &host) {
            items.push(entry::entry(s, &base, &host, None));
        }
    }
    // More may follow when the store said so, or the page filled before
    // the candidates ran out.
    let more = page.next_after.is_some() || last.as_ref() != page.items.last().map(|s| &s.id);
    let mut answer = json!({ "items": items });
    if more {
        if let Some(last) = last {
            answer["pageToken"] = URL_SAFE_NO_PAD.encode(last).into();
        }
    }
    Ok(Json(answer))
}

/// `GET /.well-known/ard.json` and `/.well-known/ai-catalog.json`: this
/// node's catalog, naming its ARD search API.
#[utoipa::path(get, path = "/.well-known/ard.json", tag = "ard",
    responses(
        (status = 200, description = "An ARD catalog with one `application/ai-registry+json` entry: this node's search API at `{base}/ard/`", body = Object),
        (status = 400, description = "A Host header that is not a host name", body = Object),
    ))]
pub(super) async fn well_known(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ArdError> {
    let (base, host) = origin(&state, &headers)?;
    let identifier = format!(
        "urn:air:{}:registry:agentmesh",
        if entry::is_urn(&format!("urn:air:{host}:x")) {
            host.as_str()
        } else {
            "localhost"
        }
    );
    Ok(Json(json!({
        "specVersion": "1.0",
        "host": { "displayName": format!("agentmesh node {}", state.peer_id()) },
        "entries": [{
            "identifier": identifier,
            "displayName": "agentmesh registry",
            "type": "application/ai-registry+json",
            "url": format!("{base}/ard/"),
            "description": "Search the agents this agentmesh node and its mesh know: ARD's POST /search, POST /explore and GET /agents under /ard/.",
            "tags": ["registry", "search", "agentmesh"],
        }],
    })))
}

/// `GET /.well-known/ai-catalog.json`: the same catalog at ARD v0.9's
/// path, for clients that look there.
#[utoipa::path(get, path = "/.well-known/ai-catalog.json", tag = "ard",
    responses(
        (status = 200, description = "The catalog of `GET /.well-known/ard.json`", body = Object),
        (status = 400, description = "A Host header that is not a host name", body = Object),
    ))]
pub(super) async fn legacy_catalog(
    state: State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ArdError> {
    well_known(state, headers).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_filter_reads_quoted_terms_joined_by_and() {
        let f = listing_filter("type = 'application/a2a-agent-card+json' AND tags = \"finance\"")
            .unwrap();
        assert_eq!(f["type"], json!(["application/a2a-agent-card+json"]));
        assert_eq!(f["tags"], json!(["finance"]));
        assert!(listing_filter("type = a2a").is_err());
        assert!(listing_filter("type").is_err());
        assert!(listing_filter("").unwrap().is_empty());
    }

    #[test]
    fn filters_take_the_keys_ard_names_and_refuse_the_rest() {
        let ok: Map<String, Value> = serde_json::from_value(json!({
            "type": ["application/mcp-server-card+json", "application/a2a-agent-card+json"],
            "tags": "finance",
            "capabilities": ["a", "b"],
            "publisher": "acme.com",
        }))
        .unwrap();
        let w = Wanted::read(&ok).unwrap();
        assert_eq!(w.types.as_ref().unwrap().len(), 2);
        assert!(!w.is_exact());
        for bad in [
            json!({"trustManifest.attestations.type": ["SOC2"]}),
            json!({"tags": [1]}),
            json!({"tags": []}),
            json!({"tags": ["a", "b"]}),
            json!({"type": {"x": 1}}),
        ] {
            let m: Map<String, Value> = serde_json::from_value(bad.clone()).unwrap();
            assert!(Wanted::read(&m).is_err(), "{bad}");
        }
    }

    #[test]
    fn page_tokens_read_back_and_foreign_ones_are_refused() {
        let t = URL_SAFE_NO_PAD.encode("o:20");
        assert_eq!(offset_of(Some(&t)).unwrap(), 20);
        assert_eq!(offset_of(None).unwrap(), 0);
        assert!(offset_of(Some("!!")).is_err());
        assert!(offset_of(Some(&URL_SAFE_NO_PAD.encode("x"))).is_err());
    }
}
