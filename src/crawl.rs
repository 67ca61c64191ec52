//! Crawling DNS-anchored agents (ADP, docs/protocol.md#crawl): from a domain
//! name to a verified, signed descriptor record, which the registry finds
//! beside registered ones. [`Crawler`] is the one handle; its entry points
//! are [`Crawler::crawl`] (one domain, nothing stored),
//! [`Crawler::crawl_and_store`], [`Crawler::verify_with_peers`] (`agentmesh
//! verify`) and [`Crawler::crawl_many`] (the node's [`queue`] and
//! `agentmesh crawl`); the recrawl [`scheduler`] and the liveness
//! [`probe`] use it inside the crate.
//!
//! The path of one domain through the phases, in order:
//! 1. `frontier.rs`: in a crawl of many, the domain is taken in once,
//!    from the request or from a peer an agent crawled before lists.
//! 2. `discover.rs`: the ADP chain (3 to 7) runs beside the readers of
//!    the other formats (A2A card, ARD catalog, DNS-AID, AID), each agent
//!    found an outcome of its own.
//! 3. `lookup.rs`: `_agent` TXT and SRV, and the TXT RRset through the
//!    validating resolver: the `v=ADP1` record, DNSSEC's verdict.
//! 4. `target.rs`: the `wk` URL's host resolved, its port and addresses
//!    checked (TLS only, [`AllowedPorts`], the address policy).
//! 5. `document.rs`: `agent.json` fetched ([`fetch`]), conditionally on
//!    a held ETag, read as an ADP document and its key chained to DNS.
//! 6. `proof.rs`: a held proof that stands, or the agent challenged over
//!    WebSocket ([`challenge`]) to sign a nonce; the trust level follows.
//! 7. `persist.rs`: what verified signed and stored through the issuer
//!    (after the key's revocation and rotation checks), the report kept,
//!    mutual verified peers upgraded on both sides.
//!
//! Every step's outcome goes into the domain's [`CrawlReport`]
//! (`report.rs`) with the reason code of what failed ([`CrawlError`],
//! `error.rs`). `one_hop.rs` is `verify`'s look at the listed peers,
//! nothing stored. Verification of what was gathered is pure code in
//! [`crate::adp`].

pub mod challenge;
mod clock;
mod discover;
pub mod dns;
mod document;
mod error;
pub mod fetch;
pub mod follow;
mod frontier;
mod lookup;
mod one_hop;
mod options;
mod persist;
pub mod polite;
pub mod probe;
mod proof;
pub mod queue;
mod report;
pub mod scheduler;
pub mod seeds;
mod target;

use std::sync::Arc;
use std::time::Instant;

use ed25519_dalek::SigningKey;
use futures_util::StreamExt;
use tracing::Instrument;

pub(crate) use document::Held;
pub use error::CrawlError;
pub use one_hop::MAX_PEERS_CHECKED;
pub use options::{AllowedPorts, CrawlerOptions};
pub use report::{
    redact_addresses, redact_report, CrawlOutcome, CrawlReport, PeerCheck, Step, StepName,
    StepOutcome, TrustSummary, Verified, Visit, ADDRESS, CONNECTION_FAILED, REFUSED_ADDRESS,
};

use challenge::Challenger;
use discover::OtherFormats;
use dns::{Dns, MAX_TTL};
use document::Checked;
use fetch::{FetchOptions, Fetcher};
use frontier::Frontier;
use lookup::Anchored;
use polite::HostLimiter;
use proof::Prover;
use report::{summarise, Run};
use target::Resolved;

use crate::adp::check::DocumentChecker;
use crate::descriptor::DocumentFormat;
use crate::identity;
use crate::issuer::Issuer;
use crate::trust::{ChallengeProof, Evidence};

/// Crawls agents. Cheap to clone.
#[derive(Clone)]
pub struct Crawler {
    dns: Dns,
    fetcher: Fetcher,
    prover: Prover,
    documents: Arc<DocumentChecker>,
    options: CrawlerOptions,
}

impl std::fmt::Debug for Crawler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crawler")
            .field("verifier", &self.prover.verifier)
            .finish()
    }
}

/// What the ADP chain found before the challenge: the DNS records, the
/// document's address, the document.
struct Found {
    anchored: Anchored,
    resolved: Resolved,
    checked: Checked,
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
        let anchors = dns::trust_anchors(&options.trust_anchors)?;
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
            prover: Prover {
                challenger,
                key,
                verifier,
            },
            documents: Arc::new(DocumentChecker::new()),
            options,
        })
    }

    /// The options this crawler runs with.
    pub(crate) fn options(&self) -> &CrawlerOptions {
        &self.options
    }

    /// Runs the ADP chain for `domain` without storing anything.
    pub async fn crawl(&self, domain: &str) -> CrawlOutcome {
        self.crawl_with(domain, None).await
    }

    /// Crawls `domain` and, when its document is consistent with DNS,
    /// signs and stores a descriptor record with the evidence; mutual
    /// verified peers already held are upgraded on both sides.
    pub async fn crawl_and_store(&self, issuer: &Issuer, domain: &str) -> CrawlOutcome {
        let outcome = self.crawl(domain).await;
        persist::store_outcome(issuer, outcome).await
    }

    /// Crawls `domain`, then, when it is key-verified, the verified peers
    /// its document lists (the first [`MAX_PEERS_CHECKED`]); a peer that is
    /// key-verified and lists the agent back makes it `peer-verified`.
    /// Each peer's own report is in the agent's `peer_checks`, and a
    /// `peers` step says what was found. Nothing is stored.
    pub async fn verify_with_peers(&self, domain: &str) -> CrawlOutcome {
        let mut outcome = self.crawl(domain).await;
        let started = Instant::now();
        let candidates = match one_hop::candidates(&outcome) {
            Ok(candidates) => candidates,
            Err(why) => {
                outcome.report.skipped(StepName::Peers, ms(started), why);
                return outcome;
            }
        };
        let partners: Vec<CrawlOutcome> = futures_util::stream::iter(candidates)
            .map(|d| async move { self.crawl(&d).await })
            .buffered(one_hop::PEER_CONCURRENCY)
            .collect()
            .await;
        one_hop::conclude(&mut outcome, partners, ms(started));
        outcome
    }

    /// Crawls `domains` with bounded concurrency (each domain once, in
    /// every format), storing what verifies; with `follow_peers`, peers
    /// listed by crawled agents join the frontier up to `max_domains` in
    /// all. Calls `progress` after each agent.
    pub async fn crawl_many(
        &self,
        issuer: &Issuer,
        domains: Vec<String>,
        follow_peers: bool,
        max_domains: usize,
        mut progress: impl FnMut(&CrawlReport),
    ) -> Vec<CrawlReport> {
        let mut frontier = Frontier::new(domains, max_domains);
        let mut reports = Vec::new();
        while let Some(round) = frontier.next_round() {
            let mut results = futures_util::stream::iter(round)
                .map(|d| async move {
                    futures_util::stream::iter(self.discover_and_store_with(issuer, &d, None).await)
                })
                .buffer_unordered(self.options.concurrency.max(1))
                .flatten();
            while let Some(outcome) = results.next().await {
                progress(&outcome.report);
                if follow_peers {
                    frontier.add_peers(&outcome.peers);
                }
                reports.push(outcome.report);
            }
        }
        // Crawled records ride the periodic flush (`Durability::Periodic`);
        // a finished crawl is on disk before it reports (`agentmesh crawl`
        // runs no flusher).
        if let Err(e) = issuer.store().flush().await {
            tracing::error!(error = %e, "flushing crawled records failed");
        }
        reports
    }

    /// Every agent `domain` publishes, in every format this crawler reads
    /// (`CrawlerOptions::formats`), each stored as
    /// [`Crawler::crawl_and_store`] does. With `held`, a revisit of the
    /// ADP document ([`Crawler::crawl_with`]): a 304 whose evidence did
    /// not change re-signs nothing until the held record is past half its
    /// lifetime.
    pub(crate) async fn discover_and_store_with(
        &self,
        issuer: &Issuer,
        domain: &str,
        held: Option<&Held>,
    ) -> Vec<CrawlOutcome> {
        let mut out = Vec::new();
        for outcome in self.discover_with(domain, held).await {
            out.push(persist::store_outcome(issuer, outcome).await);
        }
        out
    }

    /// Every agent `domain` publishes in the formats this crawler reads.
    /// The ADP outcome comes first; it is left out when the domain
    /// publishes no ADP record but something in another format.
    async fn discover_with(&self, domain: &str, held: Option<&Held>) -> Vec<CrawlOutcome> {
        let adp = async {
            if self.options.formats.contains(&DocumentFormat::Adp) {
                Some(self.crawl_with(domain, held).await)
            } else {
                None
            }
        };
        let others = OtherFormats {
            dns: &self.dns,
            fetcher: &self.fetcher,
            options: &self.options,
        };
        let (adp, others) = tokio::join!(adp, others.read(domain));
        discover::merge(adp, others)
    }

    /// As [`Crawler::crawl`], as a revisit when a document is `held`: the
    /// document is asked for with the held ETag, and a 304 keeps the held
    /// text (checked against DNS again) and, unless the challenge is due,
    /// its proof.
    async fn crawl_with(&self, domain: &str, held: Option<&Held>) -> CrawlOutcome {
        let span = tracing::info_span!("crawl", domain = %domain, level = tracing::field::Empty, reason = tracing::field::Empty);
        let outcome = self.adp_chain(domain, held).instrument(span.clone()).await;
        span.record("level", outcome.report.trust.level.as_str());
        if let Some(r) = outcome.report.reasons.first() {
            span.record("reason", r.as_str());
        }
        outcome
    }

    /// The ADP chain of one domain: the phases in order, each recording
    /// its steps, the first that fails ending it.
    async fn adp_chain(&self, raw: &str, held: Option<&Held>) -> CrawlOutcome {
        let normalised = identity::normalise_domain(raw);
        let domain = normalised
            .as_ref()
            .map_or_else(|_| raw.trim().to_ascii_lowercase(), Clone::clone);
        let agent_id = identity::AgentId::of_domain(&domain).into();
        let mut run = Run::new(&domain, agent_id, DocumentFormat::Adp);
        if let Err(e) = normalised {
            run.fail(StepName::Domain, 0.0, CrawlError::from(e));
            return run.unverified();
        }
        let Ok(found) = self.find(&domain, held, &mut run).await else {
            return run.unverified();
        };
        let max_age = found.checked.max_age.unwrap_or(u64::from(MAX_TTL));
        run.report.recrawl_after_secs = u64::from(found.anchored.ttl)
            .min(max_age)
            .min(u64::from(MAX_TTL));
        let mut evidence = Evidence {
            fingerprint: true,
            dnssec: found.anchored.dnssec,
            dnssec_chain: found.anchored.chain.clone(),
            ..Evidence::default()
        };
        evidence.challenge = match proof::standing(held, &found.checked.document, &mut run) {
            Some(proof) => Some(proof),
            None => self.prove(&domain, &found, &mut run).await,
        };
        run.report.trust = summarise(&evidence);
        CrawlOutcome {
            report: run.report,
            peers: persist::verified_peers(&found.checked.document),
            verified: Some(Verified {
                descriptor: found.checked.document.to_descriptor(),
                document: found.checked.text,
                evidence,
            }),
        }
    }

    /// The phases up to a document consistent with DNS: the records,
    /// the document's address, the document fetched and checked.
    async fn find(&self, domain: &str, held: Option<&Held>, run: &mut Run) -> Result<Found, ()> {
        let anchored = lookup::lookup(&self.dns, domain, run).await?;
        let started = Instant::now();
        let wk = &anchored.txt.well_known;
        let srv = anchored.srv.as_ref();
        let address = target::resolve(&self.dns, &self.options, domain, wk, srv, None).await;
        let (url, resolved) = run.step(StepName::DnsAddress, started, address, |(u, r)| {
            let host = u.host_str().unwrap_or_default();
            format!("{host} -> {}", target::join(&r.ips))
        })?;
        let fetched = document::fetch(&self.fetcher, &url, &resolved.ips, held, run).await?;
        let fingerprint = &anchored.txt.fingerprint;
        let checked = document::check(&self.documents, domain, fingerprint, fetched, run)?;
        Ok(Found {
            anchored,
            resolved,
            checked,
        })
    }

    /// Challenges the agent at the document's chat endpoint, recording the
    /// `challenge` step and whether the endpoint answered; the proof when
    /// it passed.
    async fn prove(&self, domain: &str, found: &Found, run: &mut Run) -> Option<ChallengeProof> {
        let started = Instant::now();
        let challenge = self.challenge(domain, found).await;
        run.report.visit.endpoint_ok = match &challenge {
            Ok(_) => Some(true),
            Err(CrawlError::ChallengeUnavailable) => None,
            Err(_) => Some(false),
        };
        let state = match &challenge {
            Ok(_) => Some(crate::store::LiveState::Alive),
            Err(e) => probe::challenge_state(e),
        };
        run.report.visit.liveness = state.map(|state| crate::store::Liveness {
            state,
            checked_at: crate::record::unix_now(),
            rtt_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            protocol: crate::store::ProbeProtocol::Adp,
        });
        run.step(StepName::Challenge, started, challenge, |p| {
            format!("signed by the agent key for verifier {}", p.verifier)
        })
        .ok()
    }

    async fn challenge(&self, domain: &str, found: &Found) -> Result<ChallengeProof, CrawlError> {
        let chat = proof::chat_endpoint(&found.checked.document)?;
        let srv = found.anchored.srv.as_ref();
        let known = Some(&found.resolved);
        let (url, resolved) =
            target::resolve(&self.dns, &self.options, domain, chat, srv, known).await?;
        let checked = &found.checked;
        self.prover
            .challenge(domain, &url, &resolved.ips, checked)
            .await
    }
}

fn ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}
