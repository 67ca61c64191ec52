//! The crawl of one domain, step by step: DNS, address check, fetch,
//! document, fingerprint chain, challenge. Nothing here writes to the
//! store (see `persist.rs`).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use ed25519_dalek::{SigningKey, VerifyingKey};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tracing::Instrument;
use url::Url;

use super::challenge::Challenger;
use super::dns::{Dns, DnsError, Dnssec, MAX_TTL};
use super::fetch::{self, FetchOptions, Fetcher};
use super::persist::verified_peers;
use super::polite::{self, HostLimiter};
use super::report::{summarise, CrawlOutcome, Run, Verified};
use super::{CrawlError, CrawlerOptions};
use crate::adp::check::{self, DocumentChecker};
use crate::adp::handshake::{self, HandshakeFrame};
use crate::adp::{txt, AgentDocument};
use crate::descriptor::DocumentFormat;
use crate::identity;
use crate::net::AddressPolicy;
use crate::record;
use crate::verify::{ChallengeProof, Evidence};

/// Crawls ADP agents. Cheap to clone.
#[derive(Clone)]
pub struct Crawler {
    pub(super) dns: Dns,
    pub(super) fetcher: Fetcher,
    challenger: Challenger,
    pub(super) policy: AddressPolicy,
    documents: Arc<DocumentChecker>,
    pub(super) key: Arc<SigningKey>,
    verifier: String,
    pub(super) options: CrawlerOptions,
}

impl std::fmt::Debug for Crawler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crawler")
            .field("verifier", &self.verifier)
            .finish()
    }
}

/// What this node holds of an agent's document from an earlier visit:
/// what a recrawl asks with (`If-None-Match`) and what a 304 stands for.
#[derive(Debug, Clone)]
pub struct Held {
    /// The document text held (what the stored record carries).
    pub text: String,
    /// Its ETag, when the publisher sent one.
    pub etag: Option<String>,
    /// Its `max-age`, seconds, when the publisher sent one.
    pub max_age_secs: Option<u64>,
    /// The held record's challenge proof, if it has one.
    pub challenge: Option<ChallengeProof>,
    /// The challenge is due again (`crawl.challenge_interval` ran out):
    /// a 304 does not spare it.
    pub challenge_due: bool,
}

/// A host name resolved during a crawl, with its permitted addresses.
#[derive(Debug, Clone)]
struct Resolved {
    lookup_host: String,
    ips: Vec<IpAddr>,
}

struct Checked {
    document: AgentDocument,
    srv: Option<(String, u16)>,
    resolved: Resolved,
    text: String,
    digest: [u8; 32],
    key: Option<VerifyingKey>,
    ttl: u64,
    /// The TXT RRset validated Secure.
    dnssec: bool,
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
        let anchors = super::dns::trust_anchors(&options.trust_anchors)?;
        let dns = Dns::with_anchors(
            &options.resolvers,
            options.dns_timeout,
            anchors,
            options.dns_cache_size,
        )?;
        let tls = options.tls_config()?;
        let limiter = HostLimiter::new(options.politeness);
        let user_agent = polite::user_agent(options.contact.as_deref());
        let fetcher = Fetcher::new(FetchOptions {
            policy: options.policy,
            tls: tls.clone(),
            connect_timeout: options.connect_timeout,
            timeout: options.fetch_timeout,
            limiter: limiter.clone(),
            user_agent: user_agent.clone(),
            allowed_ports: options.allowed_ports.clone(),
        });
        let challenger = Challenger {
            tls,
            connect_timeout: options.connect_timeout,
            timeout: options.challenge_timeout,
            limiter: limiter.clone(),
            user_agent,
            allowed_ports: options.allowed_ports.clone(),
        };
        Ok(Self {
            dns,
            fetcher,
            challenger,
            policy: options.policy,
            documents: Arc::new(DocumentChecker::new()),
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
    pub async fn crawl(&self, domain: &str) -> CrawlOutcome {
        self.crawl_with(domain, None).await
    }

    /// As [`Crawler::crawl`], as a revisit: the document is asked for
    /// with the held ETag, and a 304 keeps the held text (checked against
    /// DNS again) and, unless the challenge is due, its proof.
    pub async fn crawl_with(&self, domain: &str, held: Option<&Held>) -> CrawlOutcome {
        let span = tracing::info_span!("crawl", domain = %domain, level = tracing::field::Empty, reason = tracing::field::Empty);
        let outcome = self
            .crawl_inner(domain, held)
            .instrument(span.clone())
            .await;
        span.record("level", outcome.report.trust.level.as_str());
        if let Some(r) = outcome.report.reasons.first() {
            span.record("reason", r.as_str());
        }
        outcome
    }

    async fn crawl_inner(&self, raw: &str, held: Option<&Held>) -> CrawlOutcome {
        let normalised = identity::normalise_domain(raw);
        let domain = normalised
            .as_ref()
            .map_or_else(|_| raw.trim().to_ascii_lowercase(), Clone::clone);
        let agent_id = identity::AgentId::of_domain(&domain).into();
        let mut run = Run::new(&domain, agent_id, DocumentFormat::Adp);
        let unverified = |run: Run| CrawlOutcome {
            report: run.report,
            verified: None,
            peers: Vec::new(),
        };
        if let Err(e) = normalised {
            run.fail("domain", 0.0, CrawlError::from(e));
            return unverified(run);
        }
        let Ok(checked) = self.fetch_and_check(&domain, &mut run, held).await else {
            return unverified(run);
        };
        run.report.recrawl_after_secs = checked.ttl;
        let mut evidence = Evidence {
            fingerprint: true,
            dnssec: checked.dnssec,
            ..Evidence::default()
        };
        // An unchanged document keeps its proof until the challenge is
        // due; one whose agent says it is offline or in maintenance keeps
        // it regardless (its endpoint is not expected to answer).
        let resting = matches!(
            checked
                .document
                .availability
                .status
                .trim()
                .to_ascii_lowercase()
                .as_str(),
            "offline" | "maintenance"
        );
        let standing = held
            .filter(|h| run.report.visit.unchanged && (!h.challenge_due || resting))
            .and_then(|h| h.challenge.clone());
        if let Some(proof) = standing {
            run.pass(
                "challenge",
                0.0,
                format!(
                    "the proof of {} stands: the document is unchanged{}",
                    proof.unix_ms,
                    if resting {
                        " and the agent says it is not online"
                    } else {
                        " and the challenge is not due"
                    }
                ),
            );
            evidence.challenge = Some(proof);
        } else {
            let started = Instant::now();
            let challenge = self.challenge(&domain, &checked).await;
            run.report.visit.endpoint_ok = match &challenge {
                Ok(_) => Some(true),
                Err(CrawlError::ChallengeUnavailable) => None,
                Err(_) => Some(false),
            };
            if let Ok(proof) = run.step("challenge", started, challenge, |p| {
                format!("signed by the agent key for verifier {}", p.verifier)
            }) {
                evidence.challenge = Some(proof);
            }
        }
        run.report.trust = summarise(&evidence);
        CrawlOutcome {
            report: run.report,
            peers: verified_peers(&checked.document),
            verified: Some(Verified {
                descriptor: checked.document.to_descriptor(),
                document: checked.text,
                evidence,
            }),
        }
    }

    async fn fetch_and_check(
        &self,
        domain: &str,
        run: &mut Run,
        held: Option<&Held>,
    ) -> Result<Checked, ()> {
        // 1 and 2. TXT and SRV, asked at once.
        let started = Instant::now();
        let (txt_name, srv_name) = (format!("_agent.{domain}"), format!("_agent._tcp.{domain}"));
        let ((txt, txt_took), (srv, srv_took), (dnssec, dnssec_took)) = tokio::join!(
            async { (self.dns.txt(&txt_name).await, started.elapsed()) },
            async { (self.dns.srv(&srv_name).await, started.elapsed()) },
            async { (self.dns.txt_dnssec(&txt_name).await, started.elapsed()) },
        );
        // A Secure verdict is about the records that validated: read those,
        // not the unvalidated answer to the other query, which an attacker
        // between us and the resolver could answer differently.
        let txt = match (&dnssec, txt) {
            (Dnssec::Secure { records }, answer) => {
                let ttl = answer.map(|(_, ttl)| ttl).unwrap_or(MAX_TTL);
                Ok((records.clone(), ttl))
            }
            (_, answer) => answer,
        };
        let txt = match txt {
            Ok((records, ttl)) => txt::parse(domain, &records)
                .map(|t| (t, ttl))
                .map_err(CrawlError::from),
            Err(e @ (DnsError::NxDomain { .. } | DnsError::NoRecords { .. })) => {
                if let DnsError::NxDomain {
                    negative_ttl: Some(ttl),
                    ..
                } = e
                {
                    run.report.visit.negative_ttl_secs = Some(ttl);
                }
                Err(CrawlError::Txt(txt::TxtError::Missing {
                    domain: domain.into(),
                }))
            }
            Err(e) => Err(CrawlError::Dns(e)),
        };
        let (txt, ttl) = run.step_took("dns_txt", txt_took, txt, |(t, ttl)| {
            format!(
                "v=ADP1 pk={} wk={} (ttl {ttl}s)",
                t.fingerprint, t.well_known
            )
        })?;
        // DNSSEC: Secure earns the flag, Bogus ends the chain, anything
        // else leaves the TXT record as unsigned DNS.
        let dnssec = match dnssec {
            Dnssec::Secure { .. } => {
                run.pass(
                    "dnssec",
                    dnssec_took.as_secs_f64() * 1000.0,
                    "the TXT RRset validates Secure from the trust anchor",
                );
                true
            }
            Dnssec::Bogus { detail } => {
                let e = CrawlError::DnssecBogus {
                    name: txt_name.clone(),
                    detail,
                };
                run.fail("dnssec", dnssec_took.as_secs_f64() * 1000.0, e);
                return Err(());
            }
            Dnssec::Insecure => {
                run.skip("dnssec", "the zone is not signed (Insecure)");
                false
            }
            Dnssec::Indeterminate { detail } => {
                run.skip("dnssec", format!("not validated: {detail}"));
                false
            }
        };
        // The SRV record is optional: it supplies a port and target for
        // endpoints on the domain; a failed lookup is not fatal.
        let srv = match srv {
            Ok(Some(found)) => run
                .step_took("dns_srv", srv_took, Ok(found), |(t, p)| format!("{t}:{p}"))
                .ok(),
            Ok(None) => {
                run.skip("dns_srv", "no SRV record; the URLs are used as given");
                None
            }
            Err(e) => {
                run.skip(
                    "dns_srv",
                    format!("lookup failed ({e}); the URLs are used as given"),
                );
                None
            }
        };

        // 3. Address of the well-known URL's host, checked.
        let started = Instant::now();
        let target = self
            .target(domain, &txt.well_known, srv.as_ref(), None)
            .await;
        let (wk_url, resolved) = run.step("dns_address", started, target, |(u, r)| {
            format!("{} -> {}", u.host_str().unwrap_or_default(), join(&r.ips))
        })?;

        // 4. Fetch, conditional when a document is held: a 304 means the
        // held text stands (and is checked against DNS again below).
        let started = Instant::now();
        let etag = held.and_then(|h| h.etag.as_deref());
        let fetched = match self.fetcher.fetch(&wk_url, &resolved.ips, etag).await {
            Ok(Some(f)) => Ok(f),
            Ok(None) => {
                let h = held.expect("a conditional request is only made with a held document");
                run.report.visit.not_modified = true;
                Ok(fetch::Fetched {
                    text: h.text.clone(),
                    url: wk_url.clone(),
                    etag: h.etag.clone(),
                    max_age: h.max_age_secs,
                })
            }
            Err(e) => Err(e),
        };
        let not_modified = run.report.visit.not_modified;
        let fetched = run.step("fetch", started, fetched, |f| {
            if not_modified {
                format!(
                    "304 Not Modified from {}: the held document ({} bytes) stands",
                    f.url,
                    f.text.len()
                )
            } else {
                format!("{} bytes from {}", f.text.len(), f.url)
            }
        })?;
        run.report.visit.etag = fetched.etag.clone();
        run.report.visit.max_age_secs = fetched.max_age;
        run.report.visit.unchanged = held.is_some_and(|h| h.text == fetched.text);

        // 5. Document: JSON, protocol, schema, identity.
        let started = Instant::now();
        let document = self
            .documents
            .check(domain, &fetched.text)
            .map_err(CrawlError::from);
        let document = run.step("document", started, document, |d| {
            format!(
                "ADP document for {} ({} capabilities)",
                d.identity.id,
                d.capabilities.len()
            )
        })?;

        // 6. Fingerprint chain.
        let started = Instant::now();
        let key = check::fingerprint_chain(&txt.fingerprint, &document).map_err(CrawlError::from);
        let key = run.step("fingerprint", started, key, |k| match k {
            Some(_) => format!("{} matches the DNS pk and publicKey.full", txt.fingerprint),
            None => format!("{} matches the DNS pk (no publicKey.full)", txt.fingerprint),
        })?;

        let max_age = fetched.max_age.unwrap_or(u64::from(MAX_TTL));
        Ok(Checked {
            srv,
            resolved,
            digest: Sha256::digest(fetched.text.as_bytes()).into(),
            text: fetched.text,
            document,
            key,
            ttl: u64::from(ttl).min(max_age).min(u64::from(MAX_TTL)),
            dnssec,
        })
    }

    /// Whether a registered agent's endpoint answers (the liveness probe,
    /// `crawl::probe`): an `https` URL (a `wss` one is asked over `https`
    /// at the same host and port), resolved and checked under the address
    /// policy, asked with a `HEAD`. Any status below 500 is an answer.
    ///
    /// # Errors
    /// A [`CrawlError`] when it could not be asked at all (a bad or
    /// insecure URL, an address the policy refuses, a held host); a
    /// connection that fails or a 5xx is `Ok(false)`.
    pub async fn probe(&self, endpoint: &str) -> Result<bool, CrawlError> {
        let (mut url, resolved) = self.target("", endpoint, None, None).await?;
        if url.scheme() == "wss" {
            let _ = url.set_scheme("https");
        }
        match self.fetcher.probe(&url, &resolved.ips).await {
            Ok(status) => Ok(status < 500),
            // It answered, asking us to slow down.
            Err(CrawlError::Throttled { status: 429, .. }) => Ok(true),
            Err(
                CrawlError::Connect { .. }
                | CrawlError::Tls { .. }
                | CrawlError::Timeout { .. }
                | CrawlError::Throttled { .. },
            ) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The URL to connect to and its checked addresses. An SRV record for
    /// the agent's domain supplies the port (and target host) of URLs on
    /// the domain that name no port. `known` is a host already resolved in
    /// this crawl (its addresses are reused, not asked again).
    async fn target(
        &self,
        domain: &str,
        raw: &str,
        srv: Option<&(String, u16)>,
        known: Option<&Resolved>,
    ) -> Result<(Url, Resolved), CrawlError> {
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
        // Before any lookup: a URL (or the SRV port it took) on a port
        // this node does not connect to is refused here.
        self.options.allowed_ports.check(&url)?;
        let ips = match known {
            Some(k) if k.lookup_host == lookup_host => k.ips.clone(),
            _ => self.dns.addresses(&lookup_host).await?,
        };
        let ips = fetch::allowed(&host, &ips, self.policy)?;
        Ok((url, Resolved { lookup_host, ips }))
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
        let (url, resolved) = self
            .target(domain, chat, checked.srv.as_ref(), Some(&checked.resolved))
            .await?;
        let ips = resolved.ips;
        let unix_ms = record::next_seq(None);
        let rand: [u8; 16] = rand::random();
        let nonce = handshake::nonce(&checked.digest, &self.verifier, unix_ms, &rand);
        let frame = handshake::challenge(&self.verifier, &self.key.verifying_key(), &nonce);
        let agent_id = identity::AgentId::of_domain(domain);
        let judge = |answer: HandshakeFrame| {
            // Without publicKey.full, the answer's key stands if it hashes
            // to the fingerprint DNS published.
            let key = match checked.key {
                Some(k) => k,
                None => {
                    let k = identity::decode_public_key(&answer.public_key).map_err(|e| {
                        CrawlError::ChallengeFailed {
                            message: e.to_string(),
                        }
                    })?;
                    let fingerprint = &checked.document.identity.public_key.fingerprint;
                    if !check::has_fingerprint(&k, fingerprint) {
                        return Err(CrawlError::ChallengeFailed {
                            message: "the answer's key does not hash to the DNS fingerprint".into(),
                        });
                    }
                    k
                }
            };
            let answered =
                handshake::check_answer(&answer, &nonce, agent_id.as_str(), &self.verifier, &key)?;
            // An agent that sent a nonce of its own gets the mutual half.
            let reply = answered.agent_nonce.as_deref().map(|theirs| {
                handshake::completion(&self.verifier, &self.key, &nonce, agent_id.as_str(), theirs)
            });
            Ok((answered.signature, reply))
        };
        let signature = self.challenger.exchange(&url, &ips, &frame, judge).await?;
        Ok(ChallengeProof {
            verifier: self.verifier.clone(),
            unix_ms,
            rand: rand.to_vec(),
            signature,
        })
    }
}

fn join(ips: &[IpAddr]) -> String {
    ips.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
