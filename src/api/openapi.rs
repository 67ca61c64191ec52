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
//! their own, are described by the doc-only types of `api/wire.rs`; the
//! error answers many operations share are declared once in
//! `api/error.rs`.
//!
//! This module assembles the document from the handlers; no handler
//! uses it.

use std::sync::OnceLock;

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::error::{ErrorBody, ErrorCode, ErrorObject};
use super::{
    agents, crawl, export, health, import, observe, records, resolve, suspend, transfer, ui,
};

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
        export::export,
        health::health,
        health::peers,
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
