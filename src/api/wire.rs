//! What goes over the wire that the handlers do not build with types of
//! their own: the bodies written from stored JSON or read by a parser of
//! their own, described for the OpenAPI document by the types here; the
//! schemas of a domain name and of a record's bytes; and the
//! `x-agentmesh-*` headers of a mesh search.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue};
use serde_json::Value;
use utoipa::ToSchema;

use crate::search::MeshReport;

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
    /// `max_latency_ms`, `alive_within` (seconds: the liveness probe here,
    /// or a trusted peer's signed result, found the agent `alive` that
    /// recently).
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

/// The `x-agentmesh-*` headers of a mesh search: whom it asked, who
/// answered, what came back, whether the answer is partial (and who did
/// not answer), how long the search took and whether its budget ran out.
pub(super) fn write_mesh_headers(report: &MeshReport, elapsed: Duration, headers: &mut HeaderMap) {
    let mut put = |name: &'static str, value: String| {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(name, v);
        }
    };
    put("x-agentmesh-peers-asked", report.asked.to_string());
    put("x-agentmesh-peers-answered", report.answered.to_string());
    put(
        "x-agentmesh-records-received",
        report.records_received.to_string(),
    );
    put(
        "x-agentmesh-peers-not-waited",
        report.not_waited.to_string(),
    );
    put("x-agentmesh-partial", report.partial.to_string());
    if !report.unanswered.is_empty() {
        let peers: Vec<String> = report
            .unanswered
            .iter()
            .map(|(peer, _)| peer.to_string())
            .collect();
        put("x-agentmesh-unanswered", peers.join(","));
    }
    put(
        "x-agentmesh-budget-exhausted",
        report.budget_exhausted.to_string(),
    );
    put("x-agentmesh-elapsed-ms", elapsed.as_millis().to_string());
}
