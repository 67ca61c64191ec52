//! What a crawl returns: a [`CrawlOutcome`], the user-facing
//! [`CrawlReport`] (each step with its outcome and time, the trust level
//! with its evidence flags, the reason codes of what failed: what
//! `verify --json`, `crawl --json` and `GET /crawl/{domain}` print) and,
//! when the document was read and is consistent with DNS, the
//! [`Verified`] material the crawler signs and stores.

use std::time::Instant;

use serde::Serialize;

use super::error::CrawlError;
use crate::descriptor::{Descriptor, DocumentFormat};
use crate::trust::{Evidence, EvidenceFlags, Reason, TrustLevel};

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum StepOutcome {
    /// It passed.
    Ok,
    /// It failed; the report's reasons say why.
    Failed,
    /// It did not apply (e.g. no SRV record).
    Skipped,
}

/// Which step of a crawl a [`Step`] reports. Its name (`as_str`) is what
/// reports show, in JSON and on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StepName {
    /// The name given is a domain name.
    Domain,
    /// The `_agent` TXT record (ADP), or an AID record.
    DnsTxt,
    /// DNSSEC validation of the TXT RRset.
    Dnssec,
    /// The optional `_agent._tcp` SRV record.
    DnsSrv,
    /// A host's addresses, checked under the address policy.
    DnsAddress,
    /// The document fetched over HTTPS.
    Fetch,
    /// The ADP document checked: JSON, protocol, schema, identity.
    Document,
    /// The fingerprint chain from DNS to the document's key.
    Fingerprint,
    /// The challenge over WebSocket, or the held proof that stands.
    Challenge,
    /// The key is not one its holder revoked.
    Revocation,
    /// The key is the one held, or a rotation from it signed by it.
    Rotation,
    /// The record signed and stored, or the held one left standing.
    Record,
    /// Mutual verified peers.
    Peers,
    /// An A2A Agent Card read (or, behind a DNS-AID record, the A2A card
    /// or MCP server card its target serves).
    Card,
    /// An A2A Agent Card's signature checked.
    Signature,
    /// An ARD catalog read.
    Catalog,
    /// One entry of an ARD catalog.
    Entry,
    /// An ARD entry's trust manifest: its claims, and its signature
    /// checked when it has one.
    TrustManifest,
    /// A DNS-AID SVCB record.
    DnsSvcb,
    /// A DNS-AID record's capability document (its `cap` key): fetched,
    /// its `cap-sha256` checked, read.
    Capability,
}

impl StepName {
    /// The name reports show.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Domain => "domain",
            Self::DnsTxt => "dns_txt",
            Self::Dnssec => "dnssec",
            Self::DnsSrv => "dns_srv",
            Self::DnsAddress => "dns_address",
            Self::Fetch => "fetch",
            Self::Document => "document",
            Self::Fingerprint => "fingerprint",
            Self::Challenge => "challenge",
            Self::Revocation => "revocation",
            Self::Rotation => "rotation",
            Self::Record => "record",
            Self::Peers => "peers",
            Self::Card => "card",
            Self::Signature => "signature",
            Self::Catalog => "catalog",
            Self::Entry => "entry",
            Self::TrustManifest => "trust_manifest",
            Self::DnsSvcb => "dns_svcb",
            Self::Capability => "capability",
        }
    }
}

impl std::fmt::Display for StepName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, so that width and alignment apply (the CLI's columns).
        f.pad(self.as_str())
    }
}

impl Serialize for StepName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl PartialEq<str> for StepName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for StepName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// One step of the chain.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Step {
    /// `dns_txt`, `dns_srv`, `dns_address`, `fetch`, `document`,
    /// `fingerprint`, `challenge`, `peers`, `record`.
    #[schema(value_type = String)]
    pub step: StepName,
    /// Its outcome.
    pub outcome: StepOutcome,
    /// What happened, for people.
    pub detail: String,
    /// The reason code when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    /// Time spent, milliseconds.
    pub ms: f64,
}

/// The trust part of a report.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct TrustSummary {
    /// The level reached.
    pub level: TrustLevel,
    /// The evidence flags.
    pub evidence: EvidenceFlags,
}

/// What crawling one domain gives its caller: the report, and what the
/// crawler may sign when the document is consistent with DNS.
#[derive(Debug, Clone)]
pub struct CrawlOutcome {
    /// What users see.
    pub report: CrawlReport,
    /// The material to sign and store; `None` when the chain broke before
    /// the document was read and checked against DNS.
    pub verified: Option<Verified>,
    /// Agent ids of the peers the document lists with `trust: verified`
    /// (the crawl frontier, and the candidates for mutual-peer upgrades).
    pub peers: Vec<String>,
}

/// A document consistent with DNS (fingerprint chain and domain), with
/// everything this node proved about it.
#[derive(Debug, Clone)]
pub struct Verified {
    /// The normalised descriptor.
    pub descriptor: Descriptor,
    /// The document as fetched.
    pub document: String,
    /// The full evidence (with the challenge proof when it passed).
    pub evidence: Evidence,
}

/// The report of crawling one domain.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CrawlReport {
    /// The domain crawled (normalised).
    pub domain: String,
    /// The agent's id: `agent:{domain}` for ADP, the format's id otherwise.
    pub agent_id: String,
    /// The format the agent is published in.
    pub source_format: DocumentFormat,
    /// Level and evidence.
    pub trust: TrustSummary,
    /// Reason codes of everything that failed, in order.
    pub reasons: Vec<Reason>,
    /// Every step with its outcome.
    pub steps: Vec<Step>,
    /// Recrawl after this many seconds (min of DNS TTL, max-age, 3600).
    pub recrawl_after_secs: u64,
    /// Whether a record was stored (only when the document is consistent
    /// with DNS: fingerprint chain and domain).
    pub stored: bool,
    /// The listed verified peers checked one hop out, with their own
    /// reports (`agentmesh verify` only; empty otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub peer_checks: Vec<PeerCheck>,
    /// What this visit learnt for the next one.
    pub visit: Visit,
}

/// What a visit learnt for the next one: the recrawl scheduler's input
/// (`crawl::scheduler`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Visit {
    /// The ADP document's ETag, for the next conditional request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// The document's `Cache-Control: max-age`, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_age_secs: Option<u64>,
    /// The document answered 304: the held one still stands.
    pub not_modified: bool,
    /// The document is the held one: a 304, or the same bytes again (a
    /// publisher that sends no ETag). Its challenge proof stands until
    /// the challenge is due.
    pub unchanged: bool,
    /// The challenge ran in this visit and the endpoint answered it
    /// correctly (`Some(true)`) or not (`Some(false)`); `None` when it was
    /// not tried (a held proof stood, or there is no endpoint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint_ok: Option<bool>,
    /// What the challenge showed of the agent's liveness, when it ran
    /// and its outcome tells (the agent's [`crate::store::Liveness`] on
    /// its visits; not part of the report's JSON).
    #[serde(skip)]
    #[schema(ignore)]
    pub liveness: Option<crate::store::Liveness>,
    /// How long the publisher asked the crawler to wait (`Retry-After`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_secs: Option<u64>,
    /// The name does not exist, for this long (the SOA minimum of the
    /// NXDOMAIN answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub negative_ttl_secs: Option<u32>,
}

/// A peer the verified agent lists, crawled to see whether the
/// relationship is mutual.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct PeerCheck {
    /// The peer's id, `agent:{domain}`.
    pub agent_id: String,
    /// It is key-verified and lists the agent back as a verified peer.
    pub mutual: bool,
    /// It lists the agent back (whatever its own trust).
    pub lists_back: bool,
    /// Its own crawl report, step by step.
    #[schema(no_recursion)]
    pub report: CrawlReport,
}

impl CrawlReport {
    /// The trust level reached.
    pub fn level(&self) -> TrustLevel {
        self.trust.level
    }

    /// Adds a step that passed; `detail` says what it found.
    pub(super) fn passed(&mut self, step: StepName, ms: f64, detail: impl Into<String>) {
        self.steps.push(Step {
            step,
            outcome: StepOutcome::Ok,
            detail: detail.into(),
            reason: None,
            ms,
        });
    }

    /// Adds a step that did not apply; `detail` says why.
    pub(super) fn skipped(&mut self, step: StepName, ms: f64, detail: impl Into<String>) {
        self.steps.push(Step {
            step,
            outcome: StepOutcome::Skipped,
            detail: detail.into(),
            reason: None,
            ms,
        });
    }

    /// Adds a step that failed with `e`, and its reason code to the
    /// report's reasons.
    pub(super) fn failed(&mut self, step: StepName, ms: f64, e: &CrawlError) {
        self.failed_aside(step, ms, e);
        self.reasons.push(e.reason());
    }

    /// Adds a step that failed with `e` without adding its reason code to
    /// the report's reasons: a failure beside a crawl whose outcome stands
    /// (the mutual-peer lookup after the record was stored).
    pub(super) fn failed_aside(&mut self, step: StepName, ms: f64, e: &CrawlError) {
        self.steps.push(Step {
            step,
            outcome: StepOutcome::Failed,
            detail: e.to_string(),
            reason: Some(e.reason()),
            ms,
        });
    }
}

/// A crawl in progress: the report being written.
pub(super) struct Run {
    pub(super) report: CrawlReport,
}

impl Run {
    /// A crawl of an agent of `format` with id `agent_id`, found at
    /// `domain`, with nothing proven yet.
    pub(super) fn new(domain: &str, agent_id: String, format: DocumentFormat) -> Self {
        Self {
            report: CrawlReport {
                domain: domain.to_owned(),
                agent_id,
                source_format: format,
                trust: summarise(&Evidence::default()),
                reasons: Vec::new(),
                steps: Vec::new(),
                recrawl_after_secs: u64::from(super::dns::MAX_TTL),
                stored: false,
                peer_checks: Vec::new(),
                visit: Visit::default(),
            },
        }
    }

    /// The outcome of a crawl that ends with nothing to store.
    pub(super) fn unverified(self) -> CrawlOutcome {
        CrawlOutcome {
            report: self.report,
            verified: None,
            peers: Vec::new(),
        }
    }

    /// Records a step that started at `started` and ends now.
    pub(super) fn step<T>(
        &mut self,
        step: StepName,
        started: Instant,
        result: Result<T, CrawlError>,
        ok: impl FnOnce(&T) -> String,
    ) -> Result<T, ()> {
        self.step_took(step, started.elapsed(), result, ok)
    }

    /// Records a step that took `took` (for steps run concurrently).
    pub(super) fn step_took<T>(
        &mut self,
        step: StepName,
        took: std::time::Duration,
        result: Result<T, CrawlError>,
        ok: impl FnOnce(&T) -> String,
    ) -> Result<T, ()> {
        let ms = took.as_secs_f64() * 1000.0;
        match result {
            Ok(v) => {
                self.report.passed(step, ms, ok(&v));
                Ok(v)
            }
            Err(e) => {
                self.fail(step, ms, e);
                Err(())
            }
        }
    }

    /// Records a step that failed with `e`; what the error says about the
    /// next visit (`Retry-After`, an NXDOMAIN's negative TTL) goes to the
    /// report's [`Visit`].
    pub(super) fn fail(&mut self, step: StepName, ms: f64, e: CrawlError) {
        if let Some(wait) = e.retry_after() {
            self.report.visit.retry_after_secs = Some(wait.as_secs());
        }
        if let CrawlError::Dns(super::dns::DnsError::NxDomain {
            negative_ttl: Some(ttl),
            ..
        }) = &e
        {
            self.report.visit.negative_ttl_secs = Some(*ttl);
        }
        let reason = e.reason();
        // The full detail, addresses included, stays in the log; what a
        // public report shows of it is redacted ([`redact_report`]).
        tracing::info!(step = step.as_str(), reason = reason.as_str(), detail = %e, "crawl step failed");
        self.report.failed(step, ms, &e);
    }

    /// Records a step that passed without a value to show (`detail` says
    /// what it found).
    pub(super) fn pass(&mut self, step: StepName, ms: f64, detail: impl Into<String>) {
        self.report.passed(step, ms, detail);
    }

    /// Records a step that did not apply (`detail` says why).
    pub(super) fn skip(&mut self, step: StepName, detail: impl Into<String>) {
        self.report.skipped(step, 0.0, detail);
    }
}

/// What a public report says instead of the detail of a step refused for
/// its address.
pub const REFUSED_ADDRESS: &str = "an address this node may not connect to";

/// What a public report says instead of a connection error's text.
pub const CONNECTION_FAILED: &str = "the connection failed";

/// What stands for an IP address in a public report.
pub const ADDRESS: &str = "[address]";

/// Redacts a report (the JSON of a [`CrawlReport`], as stored and as
/// served) for someone who is not this node's operator, in place: each
/// step's `detail` (the peer checks' reports too) loses every IP address;
/// a step refused for its address (`address_not_allowed`) says
/// [`REFUSED_ADDRESS`], and a failed connection (`connect_failed`) says
/// [`CONNECTION_FAILED`] without the error's text (which tells an open
/// port from a closed one). Reason codes, outcomes and everything else
/// stay. Otherwise the node would be a port scanner and an oracle of
/// internal DNS for whoever can name a domain.
pub fn redact_report(report: &mut serde_json::Value) {
    if let Some(steps) = report.get_mut("steps").and_then(|s| s.as_array_mut()) {
        for step in steps {
            let reason = step
                .get("reason")
                .and_then(|r| r.as_str())
                .map(str::to_owned);
            let Some(detail) = step.get_mut("detail") else {
                continue;
            };
            let redacted = match reason.as_deref() {
                Some("address_not_allowed") => REFUSED_ADDRESS.to_owned(),
                Some("connect_failed") => CONNECTION_FAILED.to_owned(),
                _ => redact_addresses(detail.as_str().unwrap_or_default()),
            };
            *detail = serde_json::Value::String(redacted);
        }
    }
    if let Some(peers) = report.get_mut("peer_checks").and_then(|p| p.as_array_mut()) {
        for peer in peers {
            if let Some(r) = peer.get_mut("report") {
                redact_report(r);
            }
        }
    }
}

/// `text` with every IPv4 or IPv6 address (with or without a port) in it
/// replaced by [`ADDRESS`].
pub fn redact_addresses(text: &str) -> String {
    fn address_like(c: char) -> bool {
        c.is_ascii_hexdigit() || c == '.' || c == ':'
    }
    fn is_address(run: &str) -> bool {
        let run = run.trim_end_matches('.');
        if run.parse::<std::net::IpAddr>().is_ok() {
            return true;
        }
        // `1.2.3.4:443`: an address and its port.
        run.rsplit_once(':').is_some_and(|(ip, port)| {
            port.parse::<u16>().is_ok() && ip.parse::<std::net::Ipv4Addr>().is_ok()
        })
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(address_like) {
        out.push_str(&rest[..start]);
        let run_len = rest[start..]
            .find(|c: char| !address_like(c))
            .unwrap_or(rest.len() - start);
        let run = &rest[start..start + run_len];
        // Only a whole word: not the digits inside a name or a key.
        let glued = out
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_');
        if !glued && is_address(run) {
            out.push_str(ADDRESS);
            if run.ends_with('.') && !run.trim_end_matches('.').contains(':') {
                out.push('.');
            }
        } else {
            out.push_str(run);
        }
        rest = &rest[start + run_len..];
    }
    out.push_str(rest);
    out
}

/// The trust summary of `e`.
pub(super) fn summarise(e: &Evidence) -> TrustSummary {
    TrustSummary {
        level: e.level(),
        evidence: EvidenceFlags::from(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn addresses_are_redacted_and_names_and_keys_are_not() {
        for (text, want) in [
            (
                "agent.test -> 10.1.2.3, 2001:db8::1",
                "agent.test -> [address], [address]",
            ),
            (
                "cannot connect to https://10.0.0.7:8443/x: refused",
                "cannot connect to https://[address]/x: refused",
            ),
            ("wss://[::1]:9000/chat", "wss://[[address]]:9000/chat"),
            ("it resolves to 192.168.1.1.", "it resolves to [address]."),
            (
                "v=ADP1 pk=ed25519:00aa11bb wk=https://a1.test/x (ttl 300s)",
                "v=ADP1 pk=ed25519:00aa11bb wk=https://a1.test/x (ttl 300s)",
            ),
            (
                "4096 bytes from https://b2c3.test/",
                "4096 bytes from https://b2c3.test/",
            ),
            ("host-10.0.0.1.test", "host-10.0.0.1.test"),
        ] {
            assert_eq!(redact_addresses(text), want, "{text}");
        }
    }

    #[test]
    fn a_public_report_names_no_address_and_keeps_its_reasons() {
        let mut report = json!({
            "domain": "victim.test",
            "reasons": ["address_not_allowed"],
            "steps": [
                {"step": "dns_txt", "outcome": "ok", "detail": "v=ADP1 pk=ed25519:ab wk=https://victim.test/x"},
                {"step": "dns_address", "outcome": "failed", "reason": "address_not_allowed",
                 "detail": "victim.test resolves to 10.9.8.7, which this node may not connect to (see --allow-private)"},
            ],
            "peer_checks": [{"agent_id": "agent:p.test", "report": {"steps": [
                {"step": "fetch", "outcome": "failed", "reason": "connect_failed",
                 "detail": "cannot connect to https://p.test:8443/x: tcp connect error: Connection refused (os error 111)"},
                {"step": "dns_address", "outcome": "ok", "detail": "p.test -> 203.0.113.9"},
            ]}}],
        });
        redact_report(&mut report);
        let text = report.to_string();
        for gone in ["10.9.8.7", "203.0.113.9", "Connection refused", "os error"] {
            assert!(!text.contains(gone), "{gone} in {text}");
        }
        assert_eq!(report["steps"][1]["detail"], REFUSED_ADDRESS);
        assert_eq!(report["steps"][1]["reason"], "address_not_allowed");
        assert_eq!(
            report["steps"][0]["detail"],
            "v=ADP1 pk=ed25519:ab wk=https://victim.test/x"
        );
        let peer = &report["peer_checks"][0]["report"]["steps"];
        assert_eq!(peer[0]["detail"], CONNECTION_FAILED);
        assert_eq!(peer[0]["reason"], "connect_failed");
        assert_eq!(peer[1]["detail"], "p.test -> [address]");
        assert_eq!(report["reasons"], json!(["address_not_allowed"]));
    }
}
