//! `/agents` handlers: register, get, update, delete, list and search.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{ApiError, AppState, ErrorCode, MeshState};
use crate::mesh::wire::{known_digest, SearchRequest, MAX_KNOWN};
use crate::registry::RegistryError;
use crate::registry::{Page, SearchQuery};
use crate::store::{Filter, PutOutcome};

/// Header carrying the cursor of the next page.
pub(super) const NEXT_CURSOR_HEADER: &str = "x-next-cursor";

pub(super) fn authorize(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(token) = &state.config().admin_token else {
        return Ok(());
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::Unauthorized,
                "this node requires 'Authorization: Bearer <token>' for writes",
            )
        })?;
    if constant_time_eq(presented.as_bytes(), token.as_bytes()) {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::Unauthorized,
            "the bearer token is not valid",
        ))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(super) async fn register(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    authorize(&state, &headers)?;
    let Json(doc) = body?;
    let (outcome, stored) = state.registry().register(doc).await?;
    let status = match outcome {
        PutOutcome::Created => StatusCode::CREATED,
        PutOutcome::Updated => StatusCode::OK,
    };
    let mut response = (status, Json(stored.clone())).into_response();
    if let Some(location) = stored
        .get("id")
        .and_then(Value::as_str)
        .and_then(|id| HeaderValue::from_str(&format!("/agents/{id}")).ok())
    {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

pub(super) async fn get_one(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let document = match state.registry().document(&id).await {
        Err(RegistryError::NotFound { .. }) if state.mesh().is_some() => {
            // Not held here: ask the DHT; what comes back is judged (and
            // stored) by the mesh handler before it can be shown.
            let mesh = state.mesh().expect("checked above");
            let _ = mesh.client.get_record(&id).await;
            state.registry().document(&id).await?
        }
        other => other?,
    };
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        document,
    )
        .into_response())
}

pub(super) async fn update(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    authorize(&state, &headers)?;
    let Json(doc) = body?;
    Ok(Json(state.registry().update(&id, doc).await?))
}

pub(super) async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    authorize(&state, &headers)?;
    state.registry().delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Query string of `GET /agents`. `capabilities`, `tags` and `language`
/// may repeat: `capabilities=a&capabilities=b` means `capabilities=a,b`
/// (DESIGN.md section 7); `limit` and `cursor` may appear once.
#[derive(Debug, Default)]
struct ListParams {
    capabilities: Vec<String>,
    tags: Vec<String>,
    language: Vec<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

impl ListParams {
    /// Reads the decoded `key=value` pairs in order; an unknown key, a
    /// repeated `limit` or `cursor`, or a `limit` that is not a number is
    /// refused.
    fn parse(pairs: Vec<(String, String)>) -> Result<Self, ApiError> {
        let mut p = Self::default();
        let invalid = |field: &str, message: String| {
            ApiError::new(ErrorCode::InvalidInput, message.clone())
                .with_details(json!([{"field": field, "message": message}]))
        };
        for (key, value) in pairs {
            match key.as_str() {
                "capabilities" => p.capabilities.extend(split_csv(&value)),
                "tags" => p.tags.extend(split_csv(&value)),
                "language" => p.language.extend(split_csv(&value)),
                "limit" | "cursor" if p.seen(&key) => {
                    return Err(invalid(&key, format!("{key} may be given once")));
                }
                "limit" => {
                    p.limit = Some(value.trim().parse().map_err(|_| {
                        invalid(
                            "limit",
                            format!("limit must be a whole number, got {value:?}"),
                        )
                    })?);
                }
                "cursor" => p.cursor = Some(value),
                _ => {
                    return Err(invalid(
                        &key,
                        format!(
                            "unknown query parameter {key:?}; expected capabilities, tags, \
                             language, limit or cursor"
                        ),
                    ));
                }
            }
        }
        for (field, terms) in [
            ("capabilities", &p.capabilities),
            ("tags", &p.tags),
            ("language", &p.language),
        ] {
            check_term_count(field, terms.len())?;
        }
        Ok(p)
    }

    fn seen(&self, key: &str) -> bool {
        match key {
            "limit" => self.limit.is_some(),
            _ => self.cursor.is_some(),
        }
    }
}

fn split_csv(v: &str) -> impl Iterator<Item = String> + '_ {
    v.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
}

/// Refuses more than [`MAX_FILTER_TERMS`] terms in one filter field.
fn check_term_count(field: &str, n: usize) -> Result<(), ApiError> {
    if n <= MAX_FILTER_TERMS {
        return Ok(());
    }
    let message = format!("{field} has {n} terms; at most {MAX_FILTER_TERMS} are allowed");
    Err(ApiError::new(ErrorCode::InvalidInput, message.clone())
        .with_details(json!([{"field": field, "message": message}])))
}

fn bounded_limit(state: &AppState, asked: Option<usize>, field: &str) -> Result<usize, ApiError> {
    let max = state.config().max_limit;
    match asked {
        None => Ok(state.config().default_limit),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(n) => Err(ApiError::new(
            ErrorCode::InvalidInput,
            format!("{field} must be between 1 and {max}, got {n}"),
        )),
    }
}

fn decode_cursor(cursor: Option<&str>) -> Result<Option<String>, ApiError> {
    let bad = || {
        ApiError::new(
            ErrorCode::InvalidInput,
            "cursor is not one this server issued",
        )
    };
    cursor
        .map(|c| {
            let bytes = URL_SAFE_NO_PAD.decode(c).map_err(|_| bad())?;
            String::from_utf8(bytes).map_err(|_| bad())
        })
        .transpose()
}

/// The filter of a search. Every language that is not a well-formed BCP
/// 47 tag is reported in `details`, at `language_field` (a query
/// parameter's name, or a JSON pointer to the array element).
fn filter_from<'a>(
    capabilities: impl IntoIterator<Item = &'a str>,
    tags: impl IntoIterator<Item = &'a str>,
    languages: &[&'a str],
    language_field: impl Fn(usize) -> String,
) -> Result<Filter, ApiError> {
    let problems: Vec<Value> = languages
        .iter()
        .enumerate()
        .filter(|(_, tag)| crate::descriptor::normalise_language(tag).is_none())
        .map(|(i, tag)| {
            json!({
                "field": language_field(i),
                "message": format!("{tag:?} is not a well-formed BCP 47 language tag"),
            })
        })
        .collect();
    let refused = |problems: Vec<Value>| {
        ApiError::new(
            ErrorCode::InvalidInput,
            format!(
                "{} language filter value(s) are not well-formed BCP 47 tags",
                problems.len()
            ),
        )
        .with_details(Value::Array(problems))
    };
    if !problems.is_empty() {
        return Err(refused(problems));
    }
    Filter::new(capabilities, tags, languages.iter().copied()).map_err(|bad| {
        refused(vec![json!({
            "field": language_field(0),
            "message": format!("{bad:?} is not a well-formed BCP 47 language tag"),
        })])
    })
}

fn page_response(page: Page) -> Response {
    let mut response = Json(page.items).into_response();
    if let Some(after) = page.next_after {
        if let Ok(v) = HeaderValue::from_str(&URL_SAFE_NO_PAD.encode(after)) {
            response.headers_mut().insert(NEXT_CURSOR_HEADER, v);
        }
    }
    response
}

pub(super) async fn list(
    State(state): State<AppState>,
    params: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(pairs) = params?;
    let p = ListParams::parse(pairs)?;
    let languages: Vec<&str> = p.language.iter().map(String::as_str).collect();
    let query = SearchQuery {
        filter: filter_from(
            p.capabilities.iter().map(String::as_str),
            p.tags.iter().map(String::as_str),
            &languages,
            |_| "language".to_owned(),
        )?,
        query: None,
        after: decode_cursor(p.cursor.as_deref())?,
        limit: bounded_limit(&state, p.limit, "limit")?,
    };
    Ok(page_response(state.registry().search(&query).await?))
}

/// Body of `POST /agents/search`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SearchBody {
    #[serde(default)]
    filters: Filters,
    query: Option<String>,
    top: Option<usize>,
    scope: Option<Scope>,
    cursor: Option<String>,
}

/// `filters` of a search body. Languages come as `supported_languages`
/// (an array: the agent must support all of them) or as the draft's
/// singular `supported_language` (one tag, its search-flow example); a
/// body giving both is refused, whatever they hold, rather than guessing
/// whether the one is meant to be added to the others.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Filters {
    #[serde(default)]
    capabilities: Vec<String>,
    supported_languages: Option<Vec<String>>,
    supported_language: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
}

impl Filters {
    /// The language terms and the JSON pointer of each one's source.
    fn languages(&self) -> Result<(Vec<&str>, &'static str), ApiError> {
        match (&self.supported_languages, &self.supported_language) {
            (Some(_), Some(_)) => {
                let message = "give filters.supported_language (one tag) or \
                               filters.supported_languages (an array), not both";
                Err(
                    ApiError::new(ErrorCode::InvalidInput, message).with_details(json!([
                        {"field": "/filters/supported_language", "message": message},
                    ])),
                )
            }
            (Some(many), None) => Ok((
                many.iter().map(String::as_str).collect(),
                "/filters/supported_languages",
            )),
            (None, Some(one)) => Ok((vec![one.as_str()], "/filters/supported_language")),
            (None, None) => Ok((Vec::new(), "/filters/supported_languages")),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Scope {
    Local,
    Mesh,
}

/// Longest free-text query, in bytes.
const MAX_QUERY_BYTES: usize = 1024;
/// Most terms in one filter field.
const MAX_FILTER_TERMS: usize = 32;

pub(super) async fn search(
    State(state): State<AppState>,
    body: Result<Json<SearchBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(b) = body?;
    let f = &b.filters;
    let (languages, language_pointer) = f.languages()?;
    for (name, n) in [
        ("/filters/capabilities", f.capabilities.len()),
        (language_pointer, languages.len()),
        ("/filters/tags", f.tags.len()),
    ] {
        check_term_count(name, n)?;
    }
    if b.query.as_ref().is_some_and(|q| q.len() > MAX_QUERY_BYTES) {
        return Err(ApiError::new(
            ErrorCode::InvalidInput,
            format!("query is longer than {MAX_QUERY_BYTES} bytes"),
        ));
    }
    let scope = b.scope.unwrap_or(Scope::Mesh);
    let query = SearchQuery {
        filter: filter_from(
            f.capabilities.iter().map(String::as_str),
            f.tags.iter().map(String::as_str),
            &languages,
            |i| match f.supported_language {
                Some(_) => language_pointer.to_owned(),
                None => format!("{language_pointer}/{i}"),
            },
        )?,
        query: b.query.filter(|q| !q.trim().is_empty()),
        after: decode_cursor(b.cursor.as_deref())?,
        limit: bounded_limit(
            &state,
            b.top.or(Some(10.min(state.config().max_limit))),
            "top",
        )?,
    };
    // A mesh search asks peers first (first page only) and caches what
    // verifies, so the local search below ranks everything together.
    let asked = match (scope, state.mesh()) {
        (Scope::Mesh, Some(mesh)) if query.after.is_none() => {
            Some(ask_mesh(&state, mesh, &query).await)
        }
        _ => None,
    };
    let started = std::time::Instant::now();
    let mut response = page_response(state.registry().search(&query).await?);
    tracing::debug!(ms = started.elapsed().as_millis() as u64, "local search");
    if let Some(asked) = asked {
        asked.write_headers(response.headers_mut());
    }
    Ok(response)
}

/// Who a mesh search asked and who answered.
pub(super) struct Asked {
    asked: usize,
    answered: usize,
    unanswered: Vec<String>,
    records: usize,
}

impl Asked {
    pub(super) fn write_headers(&self, headers: &mut HeaderMap) {
        let mut put = |name: &'static str, value: String| {
            if let Ok(v) = HeaderValue::from_str(&value) {
                headers.insert(name, v);
            }
        };
        put("x-agentmesh-peers-asked", self.asked.to_string());
        put("x-agentmesh-peers-answered", self.answered.to_string());
        put("x-agentmesh-records-received", self.records.to_string());
        put(
            "x-agentmesh-partial",
            (!self.unanswered.is_empty()).to_string(),
        );
        if !self.unanswered.is_empty() {
            put("x-agentmesh-unanswered", self.unanswered.join(","));
        }
    }
}

/// Asks the providers of the most selective capability (or, without one,
/// the connected peers), at most `fanout`, within the search timeout, and
/// judges every record they send back.
pub(super) async fn ask_mesh(state: &AppState, mesh: &MeshState, query: &SearchQuery) -> Asked {
    let store = state.registry().store();
    let work = async {
        let rarest = query
            .filter
            .capabilities
            .iter()
            .min_by_key(|c| store.term_count('c', c));
        let started = std::time::Instant::now();
        let mut peers = match rarest {
            // Half the budget at most: a lookup that waits on a dead peer
            // must leave time to ask the live ones.
            Some(cap) => mesh
                .client
                .providers_up_to(cap, mesh.fanout, mesh.timeout / 2)
                .await
                .unwrap_or_default(),
            None => Vec::new(),
        };
        tracing::debug!(
            capability = ?rarest,
            providers = peers.len(),
            ms = started.elapsed().as_millis() as u64,
            "mesh search: provider lookup"
        );
        if peers.is_empty() {
            peers = mesh
                .client
                .peers()
                .await
                .map(|ps| ps.into_iter().map(|p| p.peer_id).collect())
                .unwrap_or_default();
        }
        peers.truncate(mesh.fanout);
        // What this node already holds of the answer: peers leave it out.
        let held = SearchQuery {
            limit: MAX_KNOWN,
            after: None,
            ..query.clone()
        };
        let known = state
            .registry()
            .find(&held)
            .await
            .map(|(found, _)| {
                found
                    .iter()
                    .map(|(_, a)| (known_digest(a.body.agent_id()), a.body.seq()))
                    .collect()
            })
            .unwrap_or_default();
        let request = SearchRequest {
            capabilities: query.filter.capabilities.clone(),
            tags: query.filter.tags.clone(),
            languages: query.filter.languages.clone(),
            query: query.query.clone(),
            limit: u32::try_from(query.limit).unwrap_or(u32::MAX),
            known,
        };
        let asked = peers.len();
        let outcome = mesh
            .client
            .search(peers, request, mesh.timeout)
            .await
            .unwrap_or_default();
        let mut unanswered: Vec<String> =
            outcome.timed_out.iter().map(ToString::to_string).collect();
        unanswered.extend(outcome.failed.iter().map(|(p, _)| p.to_string()));
        let records: Vec<Vec<u8>> = outcome
            .responses
            .iter()
            .flat_map(|(_, r)| r.records.iter().map(|b| b.to_vec()))
            .collect();
        let received = records.len();
        tracing::debug!(
            asked,
            answered = outcome.responses.len(),
            records = received,
            ms = started.elapsed().as_millis() as u64,
            "mesh search: answers"
        );
        let judge = mesh.judge.clone();
        let _ = tokio::task::spawn_blocking(move || {
            for bytes in records {
                judge.judge(&bytes);
            }
        })
        .await;
        // What verified is ranked below with the rest: make it searchable.
        if received > 0 {
            if let Err(e) = store.sync_text().await {
                tracing::warn!(error = %e, "mesh search: text index not caught up");
            }
        }
        tracing::debug!(
            ms = started.elapsed().as_millis() as u64,
            "mesh search: judged"
        );
        Asked {
            asked,
            answered: outcome.responses.len(),
            unanswered,
            records: received,
        }
    };
    // Provider lookups and the search share one deadline (plus a margin
    // for judging what arrived).
    tokio::time::timeout(mesh.timeout * 2, work)
        .await
        .unwrap_or(Asked {
            asked: 0,
            answered: 0,
            unanswered: vec!["deadline".into()],
            records: 0,
        })
}
