//! The crawl of one domain, step by step, and its report.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use ed25519_dalek::{SigningKey, VerifyingKey};
use futures_util::StreamExt;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tracing::Instrument;
use url::Url;

use super::challenge::Challenger;
use super::dns::{Dns, DnsError, MAX_TTL};
use super::fetch::{self, FetchOptions, Fetcher};
use super::guard::AddressPolicy;
use super::{CrawlError, CrawlerOptions};
use crate::adp::handshake;
use crate::adp::{txt, AgentDocument};
use crate::aidip::FieldProblem;
use crate::descriptor::Descriptor;
use crate::identity;
use crate::record::{self, DescriptorRecord, RecordBody, SignedRecord};
use crate::store::{Expect, Origin, Store};
use crate::verify::{ChallengeProof, Evidence, TrustLevel};

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepOutcome {
    /// It passed.
    Ok,
    /// It failed; the report's reasons say why.
    Failed,
    /// It did not apply (e.g. no SRV record).
    Skipped,
}

/// One step of the chain.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// `dns_txt`, `dns_srv`, `dns_address`, `fetch`, `document`,
    /// `fingerprint`, `challenge`, `peers`, `record`.
    pub step: &'static str,
    /// Its outcome.
    pub outcome: StepOutcome,
    /// What happened, for people.
    pub detail: String,
    /// The reason code when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// Time spent, milliseconds.
    pub ms: f64,
}

/// The trust part of a report.
#[derive(Debug, Clone, Serialize)]
pub struct TrustSummary {
    /// The level reached.
    pub level: TrustLevel,
    /// The evidence flags.
    pub evidence: EvidenceSummary,
}

/// Evidence flags as reported.
#[derive(Debug, Clone, Serialize)]
pub struct EvidenceSummary {
    /// DNSSEC-validated TXT.
    pub dnssec: bool,
    /// Fingerprint chain.
    pub fingerprint: bool,
    /// Signed challenge.
    pub challenge: bool,
    /// Mutual verified peers.
    pub mutual_peer: bool,
}

/// The outcome of crawling one domain.
#[derive(Debug, Clone, Serialize)]
pub struct CrawlReport {
    /// The domain crawled (normalised).
    pub domain: String,
    /// `agent:{domain}`.
    pub agent_id: String,
    /// Level and evidence.
    pub trust: TrustSummary,
    /// Reason codes of everything that failed, in order.
    pub reasons: Vec<&'static str>,
    /// Every step with its outcome.
    pub steps: Vec<Step>,
    /// Recrawl after this many seconds (min of DNS TTL, max-age, 3600).
    pub recrawl_after_secs: u64,
    /// Whether a record was stored (only when the document is consistent
    /// with DNS: fingerprint chain and domain).
    pub stored: bool,
    /// Agent ids of verified peers the document lists (the frontier).
    #[serde(skip)]
    pub peers: Vec<String>,
    /// The full evidence (with the challenge proof).
    #[serde(skip)]
    pub evidence: Evidence,
    /// The descriptor, when the document was read.
    #[serde(skip)]
    pub descriptor: Option<Descriptor>,
    /// The document as fetched, when it was read.
    #[serde(skip)]
    pub document_text: Option<String>,
    /// The first failure, for callers that want the error itself.
    #[serde(skip)]
    pub error: Option<CrawlError>,
}

impl CrawlReport {
    /// The trust level reached.
    pub fn level(&self) -> TrustLevel {
        self.trust.level
    }
}

/// Normalises a domain: trimmed, lower-case, no trailing dot, IDNA
/// (punycode), an optional `agent:` prefix dropped.
///
/// # Errors
/// [`CrawlError::InvalidDomain`].
pub fn normalise_domain(raw: &str) -> Result<String, CrawlError> {
    let bad = |reason: &str| CrawlError::InvalidDomain {
        domain: raw.to_owned(),
        reason: reason.into(),
    };
    let trimmed = raw.trim();
    let trimmed = trimmed
        .strip_prefix("agent:")
        .unwrap_or(trimmed)
        .trim_end_matches('.');
    if trimmed.is_empty() || trimmed.len() > 253 {
        return Err(bad("empty or longer than 253 characters"));
    }
    let host = match url::Host::parse(trimmed) {
        Ok(url::Host::Domain(d)) => d,
        Ok(_) => return Err(bad("an IP address is not an agent domain")),
        Err(e) => return Err(bad(&e.to_string())),
    };
    if !host.contains('.') {
        return Err(bad("needs at least two labels"));
    }
    for label in host.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !ok {
            return Err(bad(&format!("label {label:?} is not a DNS label")));
        }
    }
    Ok(host)
}

/// Crawls ADP agents. Cheap to clone.
#[derive(Clone)]
pub struct Crawler {
    dns: Dns,
    fetcher: Fetcher,
    challenger: Challenger,
    policy: AddressPolicy,
    schema: Arc<jsonschema::Validator>,
    key: Arc<SigningKey>,
    verifier: String,
    options: CrawlerOptions,
}

impl std::fmt::Debug for Crawler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crawler")
            .field("verifier", &self.verifier)
            .finish()
    }
}

struct Run {
    report: CrawlReport,
}

impl Run {
    fn step<T>(
        &mut self,
        step: &'static str,
        started: Instant,
        result: Result<T, CrawlError>,
        ok: impl FnOnce(&T) -> String,
    ) -> Result<T, ()> {
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        match result {
            Ok(v) => {
                self.report.steps.push(Step {
                    step,
                    outcome: StepOutcome::Ok,
                    detail: ok(&v),
                    reason: None,
                    ms,
                });
                Ok(v)
            }
            Err(e) => {
                self.fail(step, ms, e);
                Err(())
            }
        }
    }

    fn fail(&mut self, step: &'static str, ms: f64, e: CrawlError) {
        let reason = e.reason();
        self.report.steps.push(Step {
            step,
            outcome: StepOutcome::Failed,
            detail: e.to_string(),
            reason: Some(reason),
            ms,
        });
        self.report.reasons.push(reason);
        self.report.error.get_or_insert(e);
    }

    fn skip(&mut self, step: &'static str, detail: impl Into<String>) {
        self.report.steps.push(Step {
            step,
            outcome: StepOutcome::Skipped,
            detail: detail.into(),
            reason: None,
            ms: 0.0,
        });
    }
}

/// What the fetch and document steps produced.
struct Checked {
    document: AgentDocument,
    text: String,
    digest: [u8; 32],
    key: Option<VerifyingKey>,
    ttl: u64,
}

impl Crawler {
    /// A crawler signing its records with `key`; `verifier` is the id the
    /// challenge names (the node's peer id).
    ///
    /// # Errors
    /// [`CrawlError::Setup`].
    pub fn new(
        options: CrawlerOptions,
        key: Arc<SigningKey>,
        verifier: String,
    ) -> Result<Self, CrawlError> {
        let dns = Dns::new(&options.resolvers, options.dns_timeout)?;
        let tls = options.tls_config()?;
        let fetcher = Fetcher::new(FetchOptions {
            policy: options.policy,
            tls: tls.clone(),
            connect_timeout: options.connect_timeout,
            timeout: options.fetch_timeout,
        });
        let challenger = Challenger {
            tls,
            connect_timeout: options.connect_timeout,
            timeout: options.challenge_timeout,
        };
        let schema: Value = serde_json::from_str(crate::adp::SCHEMA)
            .expect("the built-in ADP schema is valid JSON");
        let schema = jsonschema::validator_for(&schema)
            .expect("the built-in ADP schema is a valid JSON Schema");
        Ok(Self {
            dns,
            fetcher,
            challenger,
            policy: options.policy,
            schema: Arc::new(schema),
            key,
            verifier,
            options,
        })
    }

    /// The options this crawler runs with.
    pub fn options(&self) -> &CrawlerOptions {
        &self.options
    }

    /// Runs the whole chain for `domain` without storing anything.
    pub async fn crawl(&self, domain: &str) -> CrawlReport {
        let span = tracing::info_span!("crawl", domain = %domain, level = tracing::field::Empty, reason = tracing::field::Empty);
        let report = self.crawl_inner(domain).instrument(span.clone()).await;
        span.record("level", report.trust.level.as_str());
        if let Some(r) = report.reasons.first() {
            span.record("reason", *r);
        }
        report
    }

    async fn crawl_inner(&self, raw: &str) -> CrawlReport {
        let domain = normalise_domain(raw).unwrap_or_else(|_| raw.trim().to_ascii_lowercase());
        let mut run = Run {
            report: CrawlReport {
                agent_id: format!("agent:{domain}"),
                domain: domain.clone(),
                trust: TrustSummary {
                    level: TrustLevel::Unverified,
                    evidence: EvidenceSummary {
                        dnssec: false,
                        fingerprint: false,
                        challenge: false,
                        mutual_peer: false,
                    },
                },
                reasons: Vec::new(),
                steps: Vec::new(),
                recrawl_after_secs: u64::from(MAX_TTL),
                stored: false,
                peers: Vec::new(),
                evidence: Evidence::default(),
                descriptor: None,
                document_text: None,
                error: None,
            },
        };
        if let Err(e) = normalise_domain(raw) {
            run.fail("domain", 0.0, e);
            return run.report;
        }
        let Ok(checked) = self.fetch_and_check(&domain, &mut run).await else {
            return run.report;
        };
        run.report.recrawl_after_secs = checked.ttl;
        let mut evidence = Evidence {
            fingerprint: true,
            ..Evidence::default()
        };
        let started = Instant::now();
        let challenge = self.challenge(&domain, &checked).await;
        if let Ok(proof) = run.step("challenge", started, challenge, |p| {
            format!("signed by the agent key for verifier {}", p.verifier)
        }) {
            evidence.challenge = Some(proof);
        }
        run.report.peers = verified_peers(&checked.document);
        run.report.descriptor = Some(checked.document.to_descriptor());
        run.report.document_text = Some(checked.text);
        run.report.evidence = evidence;
        run.report.trust = summarise(&run.report.evidence);
        run.report
    }

    async fn fetch_and_check(&self, domain: &str, run: &mut Run) -> Result<Checked, ()> {
        // 1. TXT
        let started = Instant::now();
        let name = format!("_agent.{domain}");
        let txt = match self.dns.txt(&name).await {
            Ok((records, ttl)) => txt::parse(domain, &records)
                .map(|t| (t, ttl))
                .map_err(CrawlError::from),
            Err(DnsError::NxDomain { .. } | DnsError::NoRecords { .. }) => {
                Err(CrawlError::Txt(txt::TxtError::Missing {
                    domain: domain.into(),
                }))
            }
            Err(e) => Err(CrawlError::Dns(e)),
        };
        let (txt, ttl) = run.step("dns_txt", started, txt, |(t, ttl)| {
            format!(
                "v=ADP1 pk={} wk={} (ttl {ttl}s)",
                t.fingerprint, t.well_known
            )
        })?;

        // 2. SRV (optional): a port and target for endpoints on the domain.
        let started = Instant::now();
        let srv = match self.dns.srv(&format!("_agent._tcp.{domain}")).await {
            Ok(Some(found)) => run
                .step("dns_srv", started, Ok(found), |(t, p)| format!("{t}:{p}"))
                .ok(),
            Ok(None) => {
                run.skip("dns_srv", "no SRV record; the URLs are used as given");
                None
            }
            Err(e) => {
                // Not fatal: the TXT record's URL stands on its own.
                run.skip(
                    "dns_srv",
                    format!("lookup failed ({e}); the URLs are used as given"),
                );
                None
            }
        };

        // 3. Address of the well-known URL's host, checked.
        let started = Instant::now();
        let target = self.target(domain, &txt.well_known, srv.as_ref()).await;
        let (wk_url, ips) = run.step("dns_address", started, target, |(u, ips)| {
            format!("{} -> {}", u.host_str().unwrap_or_default(), join(ips))
        })?;

        // 4. Fetch.
        let started = Instant::now();
        let fetched = self.fetcher.fetch(&wk_url, &ips, None).await.and_then(|f| {
            f.ok_or_else(|| CrawlError::HttpStatus {
                url: wk_url.to_string(),
                status: 304,
            })
        });
        let fetched = run.step("fetch", started, fetched, |f| {
            format!("{} bytes from {}", f.text.len(), f.url)
        })?;

        // 5. Document: JSON, protocol, schema, identity.
        let started = Instant::now();
        let document = self.check_document(domain, &fetched.text);
        let document = run.step("document", started, document, |d| {
            format!(
                "ADP document for {} ({} capabilities)",
                d.identity.id,
                d.capabilities.len()
            )
        })?;

        // 6. Fingerprint chain.
        let started = Instant::now();
        let key = fingerprint_chain(&txt.fingerprint, &document);
        let key = run.step("fingerprint", started, key, |k| match k {
            Some(_) => format!("{} matches the DNS pk and publicKey.full", txt.fingerprint),
            None => format!("{} matches the DNS pk (no publicKey.full)", txt.fingerprint),
        })?;

        let max_age = fetched.max_age.unwrap_or(u64::from(MAX_TTL));
        Ok(Checked {
            digest: Sha256::digest(fetched.text.as_bytes()).into(),
            text: fetched.text,
            document,
            key,
            ttl: u64::from(ttl).min(max_age).min(u64::from(MAX_TTL)),
        })
    }

    /// The URL to connect to and its checked addresses. An SRV record for
    /// the agent's domain supplies the port (and target host) of URLs on
    /// the domain that name no port.
    async fn target(
        &self,
        domain: &str,
        raw: &str,
        srv: Option<&(String, u16)>,
    ) -> Result<(Url, Vec<IpAddr>), CrawlError> {
        let mut url = Url::parse(raw).map_err(|e| CrawlError::BadUrl {
            url: raw.to_owned(),
            reason: e.to_string(),
        })?;
        if !matches!(url.scheme(), "https" | "wss") {
            return Err(CrawlError::InsecureUrl {
                url: url.to_string(),
            });
        }
        fetch::check_literal_host(&url, self.policy)?;
        let host = url
            .host_str()
            .unwrap_or_default()
            .trim_end_matches('.')
            .to_ascii_lowercase();
        let mut lookup_host = host.clone();
        if let Some((target, port)) = srv {
            if host == domain && url.port().is_none() {
                let _ = url.set_port(Some(*port));
                lookup_host = target.clone();
            }
        }
        let ips = self.dns.addresses(&lookup_host).await?;
        let ips = fetch::allowed(&host, &ips, self.policy)?;
        Ok((url, ips))
    }

    fn check_document(&self, domain: &str, text: &str) -> Result<AgentDocument, CrawlError> {
        let value: Value = serde_json::from_str(text).map_err(|e| CrawlError::InvalidJson {
            message: e.to_string(),
        })?;
        let protocol = value
            .get("protocol")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !protocol.starts_with("ADP/1.") {
            return Err(CrawlError::ProtocolUnsupported {
                protocol: protocol.to_owned(),
            });
        }
        let problems: Vec<FieldProblem> = self
            .schema
            .iter_errors(&value)
            .take(32)
            .map(|e| FieldProblem {
                field: e.instance_path.to_string(),
                message: e.to_string().chars().take(300).collect(),
            })
            .collect();
        if !problems.is_empty() {
            return Err(CrawlError::SchemaInvalid { problems });
        }
        let document: AgentDocument =
            serde_json::from_value(value).map_err(|e| CrawlError::SchemaInvalid {
                problems: vec![FieldProblem {
                    field: String::new(),
                    message: e.to_string(),
                }],
            })?;
        let expected_id = format!("agent:{domain}");
        if document
            .identity
            .domain
            .trim_end_matches('.')
            .to_ascii_lowercase()
            != domain
            || document.identity.id.to_ascii_lowercase() != expected_id
        {
            return Err(CrawlError::DomainMismatch {
                expected: domain.to_owned(),
                got: format!("{} ({})", document.identity.domain, document.identity.id),
            });
        }
        Ok(document)
    }

    async fn challenge(
        &self,
        domain: &str,
        checked: &Checked,
    ) -> Result<ChallengeProof, CrawlError> {
        let chat = checked
            .document
            .endpoints
            .get("chat")
            .and_then(Value::as_str)
            .ok_or(CrawlError::ChallengeUnavailable)?;
        let (url, ips) = self.target(domain, chat, None).await?;
        let unix_ms = record::next_seq(None);
        let rand: [u8; 16] = rand::random();
        let nonce = handshake::nonce(&checked.digest, &self.verifier, unix_ms, &rand);
        let frame = handshake::challenge(&self.verifier, &self.key.verifying_key(), &nonce);
        let answer = self.challenger.exchange(&url, &ips, &frame).await?;
        let agent_id = format!("agent:{domain}");
        // Without publicKey.full, the answer's key stands if it hashes to
        // the fingerprint DNS published.
        let key = match checked.key {
            Some(k) => k,
            None => {
                let k = identity::decode_public_key(&answer.public_key).map_err(|e| {
                    CrawlError::ChallengeFailed {
                        message: e.to_string(),
                    }
                })?;
                if identity::fingerprint(&k)
                    != checked
                        .document
                        .identity
                        .public_key
                        .fingerprint
                        .to_ascii_lowercase()
                {
                    return Err(CrawlError::ChallengeFailed {
                        message: "the answer's key does not hash to the DNS fingerprint".into(),
                    });
                }
                k
            }
        };
        let signature = handshake::check_answer(&answer, &nonce, &agent_id, &self.verifier, &key)?;
        Ok(ChallengeProof {
            verifier: self.verifier.clone(),
            unix_ms,
            rand: rand.to_vec(),
            signature,
        })
    }

    /// Crawls `domain` and, when its document is consistent with DNS,
    /// signs and stores a descriptor record with the evidence; mutual
    /// verified peers already held are upgraded on both sides.
    pub async fn crawl_and_store(&self, store: &Store, domain: &str) -> CrawlReport {
        let mut report = self.crawl(domain).await;
        if let Some(descriptor) = report.descriptor.clone() {
            self.store_verified(store, descriptor, &mut report);
        }
        let json = serde_json::to_vec(&report).expect("a report always serialises");
        if let Err(e) = store.put_report(&report.agent_id, &json) {
            tracing::warn!(agent = %report.agent_id, error = %e, "could not keep the crawl report");
        }
        report
    }

    fn store_verified(&self, store: &Store, descriptor: Descriptor, report: &mut CrawlReport) {
        let started = Instant::now();
        let mutual = match self.mutual_peers(store, report) {
            Ok(m) => m,
            Err(e) => {
                let ms = started.elapsed().as_secs_f64() * 1000.0;
                report.steps.push(Step {
                    step: "peers",
                    outcome: StepOutcome::Failed,
                    detail: e.to_string(),
                    reason: Some(e.reason()),
                    ms,
                });
                Vec::new()
            }
        };
        if !mutual.is_empty() {
            report.evidence.mutual_peer = true;
            report.trust = summarise(&report.evidence);
            report.steps.push(Step {
                step: "peers",
                outcome: StepOutcome::Ok,
                detail: format!("mutual verified peers: {}", mutual.join(", ")),
                reason: None,
                ms: started.elapsed().as_secs_f64() * 1000.0,
            });
        }
        let started = Instant::now();
        let stored = self.store_record(store, descriptor, report);
        match stored {
            Ok(()) => {
                report.stored = true;
                report.steps.push(Step {
                    step: "record",
                    outcome: StepOutcome::Ok,
                    detail: format!("signed and stored at {}", report.trust.level),
                    reason: None,
                    ms: started.elapsed().as_secs_f64() * 1000.0,
                });
                for peer in &mutual {
                    if let Err(e) = self.upgrade_peer(store, peer) {
                        tracing::warn!(peer = %peer, error = %e, "could not mark a mutual peer");
                    }
                }
            }
            Err(e) => {
                let reason = e.reason();
                report.steps.push(Step {
                    step: "record",
                    outcome: StepOutcome::Failed,
                    detail: e.to_string(),
                    reason: Some(reason),
                    ms: started.elapsed().as_secs_f64() * 1000.0,
                });
                report.reasons.push(reason);
            }
        }
    }

    fn store_record(
        &self,
        store: &Store,
        descriptor: Descriptor,
        report: &CrawlReport,
    ) -> Result<(), CrawlError> {
        let to_store = |e: &dyn std::fmt::Display| CrawlError::Store {
            message: e.to_string(),
        };
        let document = report
            .document_text
            .clone()
            .ok_or_else(|| CrawlError::Store {
                message: "the report holds no document".into(),
            })?;
        let held = store
            .get(&report.agent_id)
            .map_err(|e| to_store(&e))?
            .map(|a| a.body.seq());
        let body = DescriptorRecord::new(
            descriptor,
            document,
            record::next_seq(held),
            record::unix_now(),
            self.options.record_ttl.as_secs(),
            report.evidence.clone(),
        );
        let signed = SignedRecord::sign_descriptor(&body, &self.key).map_err(|e| to_store(&e))?;
        store
            .put(
                &signed,
                &RecordBody::Descriptor(Box::new(body)),
                Origin::Remote,
                Expect::Any,
            )
            .map_err(|e| to_store(&e))?;
        Ok(())
    }

    /// Verified peers of this report's agent that are held key-verified
    /// and list this agent back as a verified peer.
    fn mutual_peers(&self, store: &Store, report: &CrawlReport) -> Result<Vec<String>, CrawlError> {
        if report.trust.level < TrustLevel::KeyVerified {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for peer in &report.peers {
            let Some(held) = store.get(peer).map_err(|e| CrawlError::Store {
                message: e.to_string(),
            })?
            else {
                continue;
            };
            let RecordBody::Descriptor(body) = &held.body else {
                continue;
            };
            if body.evidence.level() < TrustLevel::KeyVerified {
                continue;
            }
            let Ok(doc) = serde_json::from_str::<AgentDocument>(&body.document) else {
                continue;
            };
            if verified_peers(&doc).contains(&report.agent_id) {
                out.push(peer.clone());
            }
        }
        Ok(out)
    }

    fn upgrade_peer(&self, store: &Store, peer: &str) -> Result<(), CrawlError> {
        let to_store = |e: &dyn std::fmt::Display| CrawlError::Store {
            message: e.to_string(),
        };
        let Some(held) = store.get(peer).map_err(|e| to_store(&e))? else {
            return Ok(());
        };
        let RecordBody::Descriptor(body) = held.body else {
            return Ok(());
        };
        if body.evidence.mutual_peer {
            return Ok(());
        }
        let mut evidence = body.evidence.clone();
        evidence.mutual_peer = true;
        let upgraded = DescriptorRecord::new(
            body.descriptor.clone(),
            body.document.clone(),
            record::next_seq(Some(body.seq)),
            record::unix_now(),
            self.options.record_ttl.as_secs(),
            evidence,
        );
        let signed =
            SignedRecord::sign_descriptor(&upgraded, &self.key).map_err(|e| to_store(&e))?;
        store
            .put(
                &signed,
                &RecordBody::Descriptor(Box::new(upgraded)),
                Origin::Remote,
                Expect::Any,
            )
            .map_err(|e| to_store(&e))?;
        Ok(())
    }

    /// Crawls `domains` with bounded concurrency (each domain once),
    /// storing what verifies; with `follow_peers`, peers listed by crawled
    /// agents join the frontier up to `max_domains` in all. Calls
    /// `progress` after each domain.
    pub async fn crawl_many(
        &self,
        store: &Store,
        domains: Vec<String>,
        follow_peers: bool,
        max_domains: usize,
        mut progress: impl FnMut(&CrawlReport),
    ) -> Vec<CrawlReport> {
        let mut seen = std::collections::HashSet::new();
        let mut frontier: Vec<String> = Vec::new();
        for d in domains {
            let d = normalise_domain(&d).unwrap_or(d);
            if seen.insert(d.clone()) {
                frontier.push(d);
            }
        }
        let mut reports = Vec::new();
        while !frontier.is_empty() {
            let batch = std::mem::take(&mut frontier);
            let mut results = futures_util::stream::iter(batch)
                .map(|d| async move { self.crawl_and_store(store, &d).await })
                .buffer_unordered(self.options.concurrency.max(1));
            while let Some(report) = results.next().await {
                progress(&report);
                if follow_peers {
                    for peer in &report.peers {
                        let Some(d) = peer.strip_prefix("agent:") else {
                            continue;
                        };
                        if seen.len() < max_domains && seen.insert(d.to_owned()) {
                            frontier.push(d.to_owned());
                        }
                    }
                }
                reports.push(report);
            }
        }
        if let Err(e) = store.flush().await {
            tracing::error!(error = %e, "flushing crawled records failed");
        }
        reports
    }
}

fn summarise(e: &Evidence) -> TrustSummary {
    TrustSummary {
        level: e.level(),
        evidence: EvidenceSummary {
            dnssec: e.dnssec,
            fingerprint: e.fingerprint,
            challenge: e.challenge.is_some(),
            mutual_peer: e.mutual_peer,
        },
    }
}

/// The key the fingerprint chain proves: DNS `pk` = document fingerprint,
/// and `publicKey.full` (when present) hashes to it.
fn fingerprint_chain(
    dns_pk: &str,
    doc: &AgentDocument,
) -> Result<Option<VerifyingKey>, CrawlError> {
    let doc_fp = doc.identity.public_key.fingerprint.to_ascii_lowercase();
    if doc_fp != dns_pk {
        return Err(CrawlError::FingerprintMismatch {
            dns: dns_pk.to_owned(),
            document: doc_fp,
        });
    }
    match &doc.identity.public_key.full {
        None => Ok(None),
        Some(full) => {
            let key = identity::decode_public_key(full).map_err(|_| CrawlError::KeyMismatch {
                fingerprint: doc_fp.clone(),
            })?;
            if identity::fingerprint(&key) != doc_fp {
                return Err(CrawlError::KeyMismatch {
                    fingerprint: doc_fp,
                });
            }
            Ok(Some(key))
        }
    }
}

/// Ids of the peers a document lists with `trust: verified`.
fn verified_peers(doc: &AgentDocument) -> Vec<String> {
    doc.relationships
        .iter()
        .flatten()
        .filter(|r| r.kind == "peer" && r.trust.as_deref() == Some("verified"))
        .map(|r| r.id.to_ascii_lowercase())
        .collect()
}

fn join(ips: &[IpAddr]) -> String {
    ips.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_normalised_or_refused() {
        assert_eq!(normalise_domain(" Example.ORG. ").unwrap(), "example.org");
        assert_eq!(
            normalise_domain("agent:alice.agent").unwrap(),
            "alice.agent"
        );
        assert_eq!(
            normalise_domain("bücher.example").unwrap(),
            "xn--bcher-kva.example"
        );
        for bad in [
            "",
            "localhost",
            "127.0.0.1",
            "a..b",
            "-a.b",
            "a_b.example",
            "exa mple.org",
        ] {
            assert!(
                matches!(normalise_domain(bad), Err(CrawlError::InvalidDomain { .. })),
                "{bad:?}"
            );
        }
    }
}
