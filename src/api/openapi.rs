//! The OpenAPI 3.1 description of the HTTP API, served at
//! `GET /openapi.json` and checked in as `proto/openapi.json`.
//!
//! It is generated from the code: each handler carries a
//! `#[utoipa::path]` with its parameters, statuses and headers, and the
//! bodies are the types the handlers serialise (`ToSchema` derives on
//! [`Summary`](crate::registry::Summary), the crawl report, the
//! resolution, ...). The AIDIP document schema is the one registrations
//! are validated against (`proto/aidip-agent.schema.json`), its `$defs`
//! lifted into `components.schemas` as `AidipDocument.*`. Only the
//! bodies the handlers write from stored JSON, or read with a parser of
//! their own, are described by the doc-only types below.

use std::sync::OnceLock;

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

use super::error::{ErrorBody, ErrorCode, ErrorObject};
use super::{agents, crawl, import, observe, records, resolve, suspend, transfer, ui};

/// The name the AIDIP document schema has in `components.schemas`.
const AIDIP_SCHEMA: &str = "AidipDocument";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "agentmesh",
        description = "The HTTP API of an agentmesh node: the AIDIP registry \
                       endpoints (register, update, list, search, resolve) and \
                       agentmesh's extensions (crawl, records, suspensions, \
                       import, health, peers, metrics, explorer). Errors are \
                       the draft's `{\"error\": {\"code\", \"message\", \
                       \"details\"}}` object. Writes need `Authorization: Bearer` \
                       when the node has an admin token.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    paths(
        agents::register,
        agents::list,
        agents::search,
        agents::get_one,
        agents::update,
        agents::delete,
        agents::summary,
        resolve::resolve,
        crawl::start,
        crawl::report,
        records::submit,
        suspend::one,
        suspend::suspend,
        suspend::unsuspend,
        suspend::all,
        transfer::hand_over,
        import::import,
        super::health,
        super::peers,
        observe::render,
        serve,
        ui::index,
        ui::asset,
    ),
    components(schemas(ErrorBody, ErrorObject, ErrorCode)),
    modifiers(&Bearer),
    tags(
        (name = "agents", description = "The AIDIP registry"),
        (name = "resolve", description = "Intent resolution with policy"),
        (name = "crawl", description = "Crawling agents anchored in DNS"),
        (name = "mesh", description = "Signed records from other nodes"),
        (name = "admin", description = "Operator actions"),
        (name = "node", description = "What the node is and holds"),
        (name = "explorer", description = "The web explorer"),
    ),
)]
struct ApiDoc;

/// Adds the bearer scheme the write operations name.
struct Bearer;

impl Modify for Bearer {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "The node's admin token (`api.admin_token`); needed for \
                         writes only when the node has one",
                    ))
                    .build(),
            ),
        );
    }
}

/// The whole document, as JSON.
pub fn openapi_document() -> Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).expect("the OpenAPI document serialises");
    lift_aidip_schema(&mut doc);
    doc
}

/// The document as served and checked in: pretty JSON with a final newline.
pub fn openapi_json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        let mut s = serde_json::to_string_pretty(&openapi_document())
            .expect("the OpenAPI document serialises");
        s.push('\n');
        s
    })
}

/// Puts the AIDIP document schema and its `$defs` into
/// `components.schemas`, rewriting its `#/$defs/x` references.
fn lift_aidip_schema(doc: &mut Value) {
    let mut schema: Value =
        serde_json::from_str(crate::aidip::SCHEMA).expect("the AIDIP schema is JSON");
    let object = schema
        .as_object_mut()
        .expect("the AIDIP schema is an object");
    object.remove("$schema");
    object.remove("$id");
    let defs = object.remove("$defs").unwrap_or_default();
    let schemas = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
        .expect("the document has component schemas");
    for (name, mut def) in defs.as_object().cloned().unwrap_or_default() {
        rewrite_refs(&mut def);
        schemas.insert(format!("{AIDIP_SCHEMA}.{name}"), def);
    }
    rewrite_refs(&mut schema);
    schemas.insert(AIDIP_SCHEMA.to_owned(), schema);
}

fn rewrite_refs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get_mut("$ref") {
                if let Some(name) = r.strip_prefix("#/$defs/") {
                    *r = format!("#/components/schemas/{AIDIP_SCHEMA}.{name}");
                }
            }
            m.values_mut().for_each(rewrite_refs);
        }
        Value::Array(a) => a.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

/// `GET /openapi.json`.
#[utoipa::path(get, path = "/openapi.json", tag = "node",
    responses((status = 200, description = "This document", content_type = "application/json",
        body = Object)))]
pub(super) async fn serve() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        openapi_json(),
    )
        .into_response()
}

/// `GET /agents/{id}/summary`: the search result of an agent and the
/// record held for it.
#[derive(Debug, serde::Serialize, ToSchema)]
pub(super) struct AgentSummary {
    #[serde(flatten)]
    summary: crate::registry::Summary,
    /// The descriptor record this node holds; `null` for a tombstone.
    record: Option<HeldRecord>,
}

impl AgentSummary {
    pub(super) fn new(summary: crate::registry::Summary, record: Option<HeldRecord>) -> Self {
        Self { summary, record }
    }
}

/// The signed record behind a summary.
#[derive(Debug, serde::Serialize, ToSchema)]
pub(super) struct HeldRecord {
    /// Its sequence number.
    pub(super) seq: u64,
    /// When it was signed, Unix seconds.
    pub(super) issued_at: u64,
    /// When it expires, Unix seconds.
    pub(super) expires_at: u64,
    /// Fingerprint of the key that signed it.
    pub(super) signer: String,
}

/// `GET /crawl/{domain}`: the report of the last crawl, and the domain's
/// revisit schedule when the node recrawls. The report is stored as
/// JSON and served as stored.
#[derive(Debug, serde::Serialize, ToSchema)]
pub(super) struct CrawlReportView {
    #[serde(flatten)]
    report: crate::crawl::CrawlReport,
    /// When the domain is visited next, and what the last visits found.
    schedule: Option<crate::crawl::scheduler::DomainState>,
}

/// The body of `POST /resolve` (read by a parser of its own, which
/// reports every problem at its JSON pointer).
#[derive(Debug, serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub(super) struct ResolveBody {
    /// What the caller wants done, in its own words (at most 1,024 bytes).
    #[schema(min_length = 1, max_length = 1024)]
    intent: String,
    /// Candidates answered, 1..=50 (10).
    #[schema(value_type = u32, required = false, minimum = 1, maximum = 50)]
    top: Option<u32>,
    /// `mesh` (default) also asks peers; `local` answers from this node.
    #[schema(value_type = crate::search::Scope, required = false)]
    scope: Option<String>,
    /// `language`, `languages`, `domain` and other members of the draft's
    /// context; unknown members are ignored.
    #[schema(value_type = Object, required = false)]
    context: Option<Value>,
    /// Constraints every candidate must pass: `min_trust`,
    /// `dnssec_required`, `share_intent`, `languages`, `protocols`,
    /// `interfaces`, `status`, `exclude`, `jurisdiction`, `max_price`,
    /// `max_latency_ms`.
    #[schema(value_type = Object, required = false)]
    policy: Option<Value>,
}

/// A domain name, as `POST /crawl` and `GET /crawl/{domain}` take it
/// (an IP address is not an agent domain).
pub(super) struct DomainName;

impl utoipa::PartialSchema for DomainName {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .min_length(Some(1))
            .max_length(Some(253))
            .pattern(Some(
                r"^([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.?$",
            ))
            .description(Some("A domain name (an IP address is not an agent domain)"))
            .into()
    }
}

impl ToSchema for DomainName {}

/// One signed record, CBOR-encoded (`proto/records.cddl`).
pub(super) struct RecordBytes;

impl utoipa::PartialSchema for RecordBytes {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                utoipa::openapi::KnownFormat::Binary,
            )))
            .content_media_type("application/cbor")
            .max_length(Some(crate::record::MAX_RECORD_BYTES))
            .description(Some(
                "One signed record, CBOR-encoded (proto/records.cddl), at most 16 KiB",
            ))
            .into()
    }
}

impl ToSchema for RecordBytes {}
