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

use super::auth::route_scope;
use super::error::{ErrorBody, ErrorCode, ErrorObject};
use super::{
    agents, answers, ard, audit, crawl, export, health, import, invoke, log, mcp_registry, observe,
    records, resolve, suspend, transfer, ui, visibility,
};
use crate::access::Scope;

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
                       when the node has an admin token. Every operation is rate \
                       limited (429) and shed when the node is full (503), both \
                       with `Retry-After`.",
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
        visibility::get,
        visibility::put,
        invoke::invoke,
        invoke::operation,
        resolve::resolve,
        crawl::start,
        crawl::report,
        records::submit,
        suspend::one,
        suspend::suspend,
        suspend::unsuspend,
        suspend::all,
        audit::page,
        audit::verify,
        audit::one,
        transfer::hand_over,
        import::import,
        export::export,
        ard::search,
        ard::explore,
        ard::list,
        ard::retrieve::retrieve,
        ard::well_known,
        ard::legacy_catalog,
        mcp_registry::list,
        mcp_registry::versions,
        mcp_registry::version,
        health::health,
        health::peers,
        answers::proof,
        log::checkpoint,
        log::key,
        log::equivocations,
        log::tile,
        log::inclusion,
        log::consistency,
        observe::render,
        serve,
        ui::index,
        ui::asset,
    ),
    components(schemas(ErrorBody, ErrorObject, ErrorCode)),
    modifiers(&Bearer, &Limited),
    tags(
        (name = "agents", description = "The AIDIP registry"),
        (name = "resolve", description = "Intent resolution with policy"),
        (name = "crawl", description = "Crawling agents anchored in DNS"),
        (name = "mesh", description = "Signed records from other nodes"),
        (name = "admin", description = "Operator actions"),
        (name = "ard", description = "ARD's registry search API (Agentic Resource Discovery) under /ard/, and the node's ARD catalog"),
        (name = "mcp-registry", description = "The MCP Registry's read API (/v0.1) over the MCP servers this node holds"),
        (name = "node", description = "What the node is and holds"),
        (name = "log", description = "The node's transparency log of every record it signs, as C2SP tlog-tiles serves it"),
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
                        "An API key (`amk_...`, from `agentmesh keys create`), a JWT \
                         from the issuer in `[api.jwt]`, or the node's admin token \
                         (`api.admin_token`). Each operation names the scope it \
                         needs (docs/protocol.md#api-access); a node with no \
                         credentials configured (loopback only) needs none.",
                    ))
                    .build(),
            ),
        );
    }
}

/// Adds the rate limits' and load shedding's answers to every operation.
struct Limited;

impl Modify for Limited {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        super::error::add_limit_answers(openapi);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::api::ROUTE_SCOPES;

    #[test]
    fn every_documented_operation_is_in_the_scope_table_and_back() {
        let doc = openapi_document();
        let mut documented = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                documented.insert((method.to_uppercase(), path.clone()));
            }
        }
        let table: BTreeSet<(String, String)> = ROUTE_SCOPES
            .iter()
            .map(|(m, r, _)| ((*m).to_owned(), (*r).to_owned()))
            .collect();
        assert_eq!(documented, table);
    }

    #[test]
    fn scoped_operations_name_their_scope_and_the_refusals() {
        let doc = openapi_document();
        let op = &doc["paths"]["/admin/import"]["post"];
        assert_eq!(op["security"], serde_json::json!([{"bearer": ["import"]}]));
        assert!(op["responses"]["401"].is_object());
        assert!(op["responses"]["403"]["description"]
            .as_str()
            .unwrap()
            .contains("`import` scope"));
        let read = &doc["paths"]["/agents"]["get"];
        assert_eq!(
            read["security"],
            serde_json::json!([{}, {"bearer": ["read"]}])
        );
        assert_eq!(
            doc["paths"]["/health"]["get"]["security"],
            serde_json::json!([{}])
        );
    }
}

/// The whole document, as JSON.
pub fn openapi_document() -> Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).expect("the OpenAPI document serialises");
    lift_aidip_schema(&mut doc);
    describe_access(&mut doc);
    doc
}

/// Gives every operation the security requirement of its route's scope
/// ([`route_scope`]) and, where a scope is needed, the 401 and 403
/// answers: one table says who may do what, and the document follows it.
/// A read may also be made without credentials (`api.public_reads`,
/// on by default).
fn describe_access(doc: &mut Value) {
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    let error = |description: &str| {
        serde_json::json!({
            "description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
        })
    };
    for (path, item) in paths.iter_mut() {
        let Some(operations) = item.as_object_mut() else {
            continue;
        };
        for (method, operation) in operations.iter_mut() {
            let Ok(parsed) = method.to_uppercase().parse::<axum::http::Method>() else {
                continue;
            };
            let Some(operation) = operation.as_object_mut() else {
                continue;
            };
            let Some(scope) = route_scope(&parsed, path) else {
                operation.insert("security".into(), serde_json::json!([{}]));
                continue;
            };
            let bearer = serde_json::json!({"bearer": [scope.as_str()]});
            let security = if scope == Scope::Read {
                serde_json::json!([{}, bearer])
            } else {
                serde_json::json!([bearer])
            };
            operation.insert("security".into(), security);
            let responses = operation
                .entry("responses")
                .or_insert_with(|| serde_json::json!({}));
            if let Some(responses) = responses.as_object_mut() {
                let answers = [
                    (
                        "401",
                        "Credentials are missing, or not valid (`WWW-Authenticate` says which)"
                            .to_owned(),
                    ),
                    ("403", format!("The credentials lack the `{scope}` scope")),
                ];
                for (status, description) in answers {
                    match responses.get_mut(status) {
                        // The operation gives this status for a reason of
                        // its own too: both are named.
                        Some(Value::Object(existing)) => {
                            let before = existing
                                .get("description")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_owned();
                            existing.insert(
                                "description".into(),
                                Value::String(format!("{before}; or: {description}")),
                            );
                        }
                        _ => {
                            responses.insert(status.into(), error(&description));
                        }
                    }
                }
                let mut sorted: Vec<(String, Value)> =
                    std::mem::take(responses).into_iter().collect();
                sorted.sort_by(|a, b| a.0.cmp(&b.0));
                responses.extend(sorted);
            }
        }
    }
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
