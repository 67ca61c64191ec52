//! `/agents` handlers: register, get, update, delete, list and search.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::error::{ApiError, BodyTooLarge, ErrorBody, ErrorCode, NoRoom, NotJson, StoreFailed};
use super::invoke::idempotency_key;
use super::json::JsonBody;
use super::state::AppState;
use super::transfer::OfferedTransfer;
use super::visibility::{take_visibility, Reader};
use super::wire::{write_mesh_headers, AgentSummary, HeldRecord};
use crate::registry::RegistryError;
use crate::registry::{Page, SearchQuery, Summary};
use crate::search::Scope;
use crate::store::{Filter, PutOutcome};
use crate::trust::TrustLevel;

/// Header carrying the cursor of the next page.
pub(super) const NEXT_CURSOR_HEADER: &str = "x-next-cursor";

/// `POST /agents`: registers an AIDIP document.
#[utoipa::path(post, path = "/agents", tag = "agents",
    params(("agentmesh-transfer" = Option<String>, Header,
        description = "A transfer token from the agent's owner (`POST /admin/agents/{id}/transfer` on its node): registers an agent another registry hands to this one"),
        ("idempotency-key" = Option<String>, Header,
        description = "For a document without an id: the id is derived from the caller and this key, so a retried registration updates the agent its first try made (200) instead of making another")),
    request_body(content = ref("#/components/schemas/AidipDocument"),
        description = "An AIDIP agent metadata document; `id` is assigned when absent"),
    responses(
        (status = 201, description = "Registered", body = ref("#/components/schemas/AidipDocument"),
            headers(("location" = String, description = "`/agents/{id}`"))),
        (status = 200, description = "An agent registered here with this id was updated",
            body = ref("#/components/schemas/AidipDocument"),
            headers(("location" = String, description = "`/agents/{id}`"))),
        (status = 400, description = "Not a valid document (every problem in `details`), or an `agentmesh-transfer` header that is not a transfer token", body = ErrorBody),
        (status = 403, description = "The id belongs to an agent this node did not register, and no transfer its owner signed for this node came with it", body = ErrorBody),
        BodyTooLarge,
        NotJson,
        StoreFailed,
        NoRoom,
    ))]
pub(super) async fn register(
    State(state): State<AppState>,
    OfferedTransfer(transfer): OfferedTransfer,
    Reader(who): Reader,
    headers: axum::http::HeaderMap,
    JsonBody(mut doc): JsonBody<Value>,
) -> Result<Response, ApiError> {
    let asked = take_visibility(&mut doc)?;
    // A document without an id and with an `Idempotency-Key` gets the id
    // the caller and the key derive: a retried registration updates the
    // agent its first try made instead of making another.
    if let (Some(object), Some(key)) = (doc.as_object_mut(), idempotency_key(&headers)?) {
        if object.get("id").is_none_or(Value::is_null) {
            object.insert("id".into(), Value::String(keyed_id(&who.principal, &key)));
        }
    }
    let (outcome, stored) = match transfer {
        None => state.registry().register_as(doc, &who, asked).await?,
        Some(_) if asked.is_some() => {
            return Err(ApiError::new(
                ErrorCode::InvalidInput,
                "an agent handed over by another registry is public: register it without \
                 visibility, then change it with PUT /agents/{id}/visibility",
            ))
        }
        Some(t) => {
            let taken = state.registry().take_over(doc, t).await?;
            if let Some(id) = taken.1.get("id").and_then(Value::as_str) {
                state.registry().adopt(id, &who).await?;
            }
            taken
        }
    };
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

/// The id a registration without one gets under an `Idempotency-Key`:
/// `agent-` and 32 hex digits of the SHA-256 of the caller and the key.
fn keyed_id(principal: &str, key: &str) -> String {
    use sha2::{Digest as _, Sha256};
    let digest = Sha256::digest(format!("agentmesh/registration-key/v1\n{principal}\n{key}"));
    format!("agent-{}", hex::encode(&digest[..16]))
}

/// `GET /agents/{id}`: the agent's document, as published (AIDIP, ADP,
/// A2A, ...), from this node or, failing that, the DHT.
#[utoipa::path(get, path = "/agents/{id}", tag = "agents",
    params(("id" = String, Path, description = "Agent id")),
    responses(
        (status = 200, description = "The document in its own format", body = Object,
            headers(
                ("x-agentmesh-suspended" = u64, description = "Set when this node suspended the agent: since when, Unix seconds"),
                ("x-agentmesh-suspension-reason" = String, description = "The suspension's reason"),
            )),
        (status = 404, description = "Neither this node nor the DHT holds it", body = ErrorBody),
        StoreFailed,
    ))]
pub(super) async fn get_one(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Reader(who): Reader,
) -> Result<Response, ApiError> {
    state.registry().visible_to(&id, &who)?;
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
    let mut response = (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        document,
    )
        .into_response();
    // A suspended agent's record is still served, saying so: the reason
    // (when it fits a header) and where its suspension is shown whole.
    if let Some(s) = state.registry().store().suspension(&id) {
        let h = response.headers_mut();
        h.insert("x-agentmesh-suspended", HeaderValue::from(s.since));
        if let Ok(reason) = HeaderValue::from_str(&s.reason) {
            h.insert("x-agentmesh-suspension-reason", reason);
        }
    }
    Ok(response)
}

/// `GET /agents/{id}/summary`: what a search answers for the agent, and
/// the record this node holds for it (seq, when it was signed and until
/// when, by whom). What the explorer's agent page shows.
#[utoipa::path(get, path = "/agents/{id}/summary", tag = "agents",
    params(("id" = String, Path, description = "Agent id")),
    responses(
        (status = 200, description = "Its search result and record", body = AgentSummary),
        (status = 404, description = "Not held here", body = ErrorBody),
        StoreFailed,
    ))]
pub(super) async fn summary(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Reader(who): Reader,
) -> Result<Response, ApiError> {
    state.registry().visible_to(&id, &who)?;
    let summary = state.registry().summary(&id).await?;
    let held = state
        .registry()
        .store()
        .get(&id)
        .await
        .map_err(RegistryError::from)?;
    let record = held.and_then(|h| match h.body {
        crate::record::RecordBody::Descriptor(d) => Some(HeldRecord {
            seq: d.seq,
            issued_at: d.issued_at,
            expires_at: d.expires_at,
            signer: crate::identity::fingerprint(h.record.signer()),
        }),
        crate::record::RecordBody::Tombstone(_) => None,
    });
    Ok(Json(AgentSummary::new(summary, record)).into_response())
}

/// `PUT /agents/{id}`: replaces the document of an agent registered here.
#[utoipa::path(put, path = "/agents/{id}", tag = "agents",
    params(("id" = String, Path, description = "Agent id")),
    request_body(content = ref("#/components/schemas/AidipDocument"),
        description = "The whole new document; its `id`, if any, must be the path's"),
    responses(
        (status = 200, description = "Updated", body = ref("#/components/schemas/AidipDocument")),
        (status = 400, description = "Not a valid document (every problem in `details`)", body = ErrorBody),
        (status = 403, description = "This node did not register the agent", body = ErrorBody),
        (status = 404, description = "No such agent", body = ErrorBody),
        BodyTooLarge,
        NotJson,
        StoreFailed,
        NoRoom,
    ))]
pub(super) async fn update(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Reader(who): Reader,
    JsonBody(mut doc): JsonBody<Value>,
) -> Result<Json<Value>, ApiError> {
    let asked = take_visibility(&mut doc)?;
    Ok(Json(
        state.registry().update_as(&id, doc, &who, asked).await?,
    ))
}

/// `DELETE /agents/{id}`: deregisters an agent registered here (a signed
/// tombstone replaces its record and is gossiped).
#[utoipa::path(delete, path = "/agents/{id}", tag = "agents",
    params(("id" = String, Path, description = "Agent id")),
    responses(
        (status = 204, description = "Deregistered"),
        (status = 403, description = "This node did not register the agent", body = ErrorBody),
        (status = 404, description = "No such agent", body = ErrorBody),
        StoreFailed,
    ))]
pub(super) async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Reader(who): Reader,
) -> Result<StatusCode, ApiError> {
    state.registry().delete_as(&id, &who).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Query string of `GET /agents`. `capabilities`, `tags` and `language`
/// may repeat: `capabilities=a&capabilities=b` means `capabilities=a,b`
/// (docs/protocol.md#api-agents); `limit` and `cursor` may appear once.
#[derive(Debug, Default)]
struct ListParams {
    capabilities: Vec<String>,
    tags: Vec<String>,
    language: Vec<String>,
    limit: Option<usize>,
    cursor: Option<String>,
    include_stale: Option<bool>,
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
                "limit" | "cursor" | "include_stale" if p.seen(&key) => {
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
                "include_stale" => {
                    p.include_stale = Some(match value.trim() {
                        "true" | "1" => true,
                        "false" | "0" => false,
                        _ => {
                            return Err(invalid(
                                "include_stale",
                                format!("include_stale must be true or false, got {value:?}"),
                            ))
                        }
                    });
                }
                _ => {
                    return Err(invalid(
                        &key,
                        format!(
                            "unknown query parameter {key:?}; expected capabilities, tags, \
                             language, limit, cursor or include_stale"
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
            "include_stale" => self.include_stale.is_some(),
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

fn bounded_limit(
    config: &crate::config::ApiConfig,
    asked: Option<usize>,
    field: &str,
) -> Result<usize, ApiError> {
    let max = config.max_limit;
    match asked {
        None => Ok(config.default_limit),
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

/// `GET /agents`: a filter search, one page at a time, in id order.
#[utoipa::path(get, path = "/agents", tag = "agents",
    params(
        ("capabilities" = Option<Vec<String>>, Query, explode = true, description = "Capability ids the agent must all offer; repeat or separate with commas"),
        ("tags" = Option<Vec<String>>, Query, explode = true, description = "Tags the agent must all carry"),
        ("language" = Option<Vec<String>>, Query, explode = true, description = "BCP 47 tags the agent must all support"),
        ("limit" = Option<usize>, Query, minimum = 1, description = "Page size (`api.default_limit`; at most `api.max_limit`)"),
        ("cursor" = Option<String>, Query, description = "`x-next-cursor` of the previous page"),
        ("include_stale" = Option<bool>, Query, description = "Answer agents dropped for staleness too"),
    ),
    responses(
        (status = 200, description = "One page of summaries", body = Vec<Summary>,
            headers(("x-next-cursor" = String, description = "Set when more pages follow"))),
        (status = 400, description = "An unknown or malformed parameter", body = ErrorBody),
        StoreFailed,
    ))]
pub(super) async fn list(
    State(state): State<AppState>,
    reader: Reader,
    params: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(pairs) = params?;
    let p = ListParams::parse(pairs)?;
    let languages: Vec<&str> = p.language.iter().map(String::as_str).collect();
    let mut filter = filter_from(
        p.capabilities.iter().map(String::as_str),
        p.tags.iter().map(String::as_str),
        &languages,
        |_| "language".to_owned(),
    )?;
    filter.include_stale = p.include_stale.unwrap_or(false);
    filter.audience = reader.audience();
    let query = SearchQuery {
        filter,
        query: None,
        after: decode_cursor(p.cursor.as_deref())?,
        limit: bounded_limit(state.config(), p.limit, "limit")?,
        explain: false,
    };
    let started = std::time::Instant::now();
    let page = state.registry().search_local(&query).await?;
    state.metrics().searched(false, started.elapsed());
    Ok(page_response(page))
}

/// Body of `POST /agents/search`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SearchBody {
    /// Terms every result must match.
    #[serde(default)]
    filters: Filters,
    /// Free text, ranked (at most 1,024 bytes).
    query: Option<String>,
    /// Results per page (10; at most `api.max_limit`).
    #[schema(minimum = 1)]
    top: Option<usize>,
    /// `mesh` (default) also asks peers, on the first page; `local` does not.
    scope: Option<Scope>,
    /// `x-next-cursor` of the previous page.
    cursor: Option<String>,
    /// Answer agents this node dropped for staleness too (false).
    #[serde(default)]
    include_stale: bool,
    /// Say, per result, why it stands where it does (`explain` in each
    /// summary: the pass that placed it, BM25 and semantic scores, the
    /// signals that weighed it, the fields that matched, the query
    /// understanding that bears on it). False.
    #[serde(default)]
    explain: bool,
}

/// `filters` of a search body. Languages come as `supported_languages`
/// (an array: the agent must support all of them) or as the draft's
/// singular `supported_language` (one tag, its search-flow example); a
/// body giving both is refused, whatever they hold, rather than guessing
/// whether the one is meant to be added to the others.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct Filters {
    /// Capability ids the agent must all offer (at most 32).
    #[serde(default)]
    capabilities: Vec<String>,
    /// BCP 47 tags the agent must all support (at most 32).
    supported_languages: Option<Vec<String>>,
    /// One BCP 47 tag (the draft's form); not with `supported_languages`.
    supported_language: Option<String>,
    /// Tags the agent must all carry (at most 32).
    #[serde(default)]
    tags: Vec<String>,
    /// Only agents at this trust level or above (`dns-verified`, ...).
    min_trust: Option<TrustLevel>,
    /// Only agents whose last liveness probe here, or a signed result of
    /// one of `p2p.trusted_peers`, found them `alive` within this many
    /// seconds (1 to 31,536,000); other peers' results are shown
    /// (`checked_by`), never counted; agents nobody counted probes never
    /// match.
    #[schema(minimum = 1, maximum = 31_536_000)]
    alive_within: Option<u64>,
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

/// Longest free-text query, in bytes.
const MAX_QUERY_BYTES: usize = 1024;
/// Longest `filters.alive_within`, seconds (a year).
pub(crate) const MAX_ALIVE_WITHIN: u64 = 365 * 24 * 3600;

/// The time `filters.alive_within` seconds before `now`.
fn alive_since(alive_within: Option<u64>, now: u64) -> Result<Option<u64>, ApiError> {
    match alive_within {
        None => Ok(None),
        Some(s) if (1..=MAX_ALIVE_WITHIN).contains(&s) => Ok(Some(now.saturating_sub(s))),
        Some(_) => {
            let message = format!("must be between 1 and {MAX_ALIVE_WITHIN} seconds");
            Err(ApiError::new(ErrorCode::InvalidInput, message.clone())
                .with_details(json!([{"field": "/filters/alive_within", "message": message}])))
        }
    }
}
/// Most terms in one filter field.
const MAX_FILTER_TERMS: usize = 32;

/// `POST /agents/search`: filters and free text, ranked, from this node
/// and (scope `mesh`) its peers.
#[utoipa::path(post, path = "/agents/search", tag = "agents",
    request_body = SearchBody,
    responses(
        (status = 200, description = "One page of summaries, best first", body = Vec<Summary>,
            headers(
                ("x-next-cursor" = String, description = "Set when more pages follow"),
                ("x-agentmesh-peers-asked" = u32, description = "Mesh scope: peers asked"),
                ("x-agentmesh-peers-answered" = u32, description = "Mesh scope: peers that answered in time"),
                ("x-agentmesh-records-received" = u32, description = "Mesh scope: records peers sent"),
                ("x-agentmesh-peers-not-waited" = u32, description = "Mesh scope: peers asked but not waited for, the answer being full first"),
                ("x-agentmesh-partial" = bool, description = "Mesh scope: whether someone did not answer"),
                ("x-agentmesh-unanswered" = String, description = "Mesh scope: peer ids that did not answer, comma-separated"),
                ("x-agentmesh-budget-exhausted" = bool, description = "Mesh scope: whether the deadline ran out"),
                ("x-agentmesh-elapsed-ms" = u64, description = "Mesh scope: how long the search took"),
            )),
        (status = 400, description = "A malformed body", body = ErrorBody),
        BodyTooLarge,
        NotJson,
        StoreFailed,
    ))]
pub(super) async fn search(
    State(state): State<AppState>,
    reader: Reader,
    JsonBody(b): JsonBody<SearchBody>,
) -> Result<Response, ApiError> {
    let (mut query, scope) = search_query(b, state.config())?;
    query.filter.audience = reader.audience();
    // The search asks the mesh first (a first page in mesh scope) and
    // ranks everything this node then holds.
    let outcome = state.search().search(&query, scope).await?;
    let mut response = page_response(outcome.page);
    if let Some(report) = &outcome.mesh {
        write_mesh_headers(report, outcome.elapsed, response.headers_mut());
    }
    Ok(response)
}

/// Reads a `POST /agents/search` body as the handler does (the JSON
/// extractor, then [`search_query`]), without a node: for the fuzz target
/// `fuzz/fuzz_targets/aidip_bodies.rs`.
///
/// # Errors
/// The [`ApiError`] the handler would answer with.
#[doc(hidden)]
pub fn parse_search_body(
    bytes: &[u8],
    config: &crate::config::ApiConfig,
) -> Result<(SearchQuery, Scope), ApiError> {
    let Json(b) = Json::<SearchBody>::from_bytes(bytes)?;
    search_query(b, config)
}

/// The query and scope a search body asks for, every bound checked.
fn search_query(
    b: SearchBody,
    config: &crate::config::ApiConfig,
) -> Result<(SearchQuery, Scope), ApiError> {
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
    let scope = b.scope.unwrap_or_default();
    let mut filter = filter_from(
        f.capabilities.iter().map(String::as_str),
        f.tags.iter().map(String::as_str),
        &languages,
        |i| match f.supported_language {
            Some(_) => language_pointer.to_owned(),
            None => format!("{language_pointer}/{i}"),
        },
    )?;
    filter.include_stale = b.include_stale;
    filter.min_trust = f.min_trust;
    filter.alive_since = alive_since(f.alive_within, crate::record::unix_now())?;
    let query = SearchQuery {
        filter,
        query: b.query.filter(|q| !q.trim().is_empty()),
        after: decode_cursor(b.cursor.as_deref())?,
        limit: bounded_limit(config, b.top.or(Some(10.min(config.max_limit))), "top")?,
        explain: b.explain,
    };
    Ok((query, scope))
}
