//! One domain, every other format: what a domain publishes besides ADP
//! (an A2A Agent Card, an ARD catalog, DNS-AID SVCB records, an AID TXT
//! record), each agent read into its own [`CrawlOutcome`] with its source
//! format, under the same address policy, TLS, limits and timeouts as ADP;
//! the crawler runs these beside the ADP chain and [`merge`]s the two.
//!
//! Absence is not a failure: a domain that publishes no card (no HTTPS
//! server, an error status, a redirect elsewhere, an HTML page where the
//! card would be), no catalog or no record gets no report for that
//! format. A publisher whose JSON document is there but broken (too
//! large, too deep, not the format) gets a report with the reason code.
//!
//! None of these formats proves a key the way ADP does (no challenge), so
//! what they give earns at most what DNS proves: a DNS-AID record whose
//! SVCB RRset validates Secure is stored with the `dnssec` flag
//! (dns-verified, [`dns_aid`], which also follows each record to what its
//! target serves), and a card whose signature verifies with the key the
//! domain's AID record publishes with `fingerprint`, and `dnssec` when
//! that record validates ([`anchor`]). Everything else is stored
//! `unverified`: a card signed with a key DNS does not name (its
//! signature is checked and reported, a forged one refused), ARD entries,
//! AID records.

use serde_json::Value;
use url::Url;

use super::dns::{Dns, DnsError};
use super::error::CrawlError;
use super::fetch::{self, DocumentKind, Fetched, Fetcher, A2A_CARD, JWKS};
use super::options::CrawlerOptions;
use super::report::{summarise, CrawlOutcome, Run, StepName, Verified};
use crate::descriptor::{Descriptor, DocumentFormat};
use crate::formats::{a2a, aid, FormatError};
use crate::trust::{Evidence, Reason};

mod anchor;
mod catalog;
mod dns_aid;

/// Most DNS-AID names looked up for one domain (the index's entries and
/// the protocol names).
pub(super) const MAX_DNS_AID_NAMES: usize = 16;

/// The readers of the formats besides ADP, over the crawler's DNS and
/// HTTPS clients and under its options.
pub(super) struct OtherFormats<'a> {
    /// The crawler's resolver.
    pub(super) dns: &'a Dns,
    /// The crawler's HTTPS client.
    pub(super) fetcher: &'a Fetcher,
    /// Which formats are read, the address policy, the HTTPS port.
    pub(super) options: &'a CrawlerOptions,
}

/// A domain's outcomes in every format: the ADP one first, left out when
/// the domain publishes no ADP record but something in another format.
pub(super) fn merge(adp: Option<CrawlOutcome>, others: Vec<CrawlOutcome>) -> Vec<CrawlOutcome> {
    let mut out = Vec::with_capacity(others.len() + 1);
    if let Some(adp) = adp {
        let absent = matches!(
            adp.report.reasons.first(),
            Some(Reason::TxtMissing | Reason::DnsNxdomain | Reason::DnsNoRecords)
        );
        if !absent || others.is_empty() {
            out.push(adp);
        }
    }
    out.extend(others);
    out
}

impl OtherFormats<'_> {
    /// Every agent `domain` publishes in the formats besides ADP that the
    /// options name, read at once: the card, the catalog's entries, the
    /// DNS-AID records, the AID record, in that order.
    pub(super) async fn read(&self, domain: &str) -> Vec<CrawlOutcome> {
        let wants = |f: DocumentFormat| self.options.formats.contains(&f);
        let (card, catalog, records, aid) = tokio::join!(
            async {
                if wants(DocumentFormat::A2a) {
                    self.card(domain).await
                } else {
                    None
                }
            },
            async {
                if wants(DocumentFormat::Ard) {
                    self.catalog(domain).await
                } else {
                    Vec::new()
                }
            },
            async {
                if wants(DocumentFormat::DnsAid) {
                    self.dns_aid(domain).await
                } else {
                    Vec::new()
                }
            },
            async {
                if wants(DocumentFormat::Aid) {
                    self.aid(domain).await
                } else {
                    None
                }
            },
        );
        card.into_iter()
            .chain(catalog)
            .chain(records)
            .chain(aid)
            .collect()
    }

    /// The domain's addresses under the policy; `None` when the name has
    /// none (nothing is published there over HTTPS).
    async fn https_addresses(
        &self,
        domain: &str,
    ) -> Option<Result<Vec<std::net::IpAddr>, CrawlError>> {
        match self.dns.addresses(domain).await {
            Ok(ips) => Some(fetch::allowed(domain, &ips, self.options.policy)),
            Err(DnsError::NxDomain { .. } | DnsError::NoRecords { .. }) => None,
            Err(e) => Some(Err(e.into())),
        }
    }

    /// `host`'s addresses that the address policy allows.
    async fn allowed_addresses(&self, host: &str) -> Result<Vec<std::net::IpAddr>, CrawlError> {
        match self.dns.addresses(host).await {
            Ok(ips) => fetch::allowed(host, &ips, self.options.policy),
            Err(e) => Err(CrawlError::Dns(e)),
        }
    }

    /// `https://{domain}{path}` on the HTTPS port.
    fn published_url(&self, domain: &str, path: &str) -> Result<Url, CrawlError> {
        let text = match self.options.https_port {
            443 => format!("https://{domain}{path}"),
            port => format!("https://{domain}:{port}{path}"),
        };
        Url::parse(&text).map_err(|e| CrawlError::BadUrl {
            url: text,
            reason: e.to_string(),
        })
    }

    /// Whether this crawl reads ADP and the domain's ADP record names
    /// `https://{domain}{path}` as its document: that document is then
    /// ADP's, fetched by the ADP chain, and not asked for again. The
    /// record comes from the resolver's cache (the ADP chain asked for it
    /// at the same time).
    async fn adp_document_at(&self, domain: &str, path: &str) -> bool {
        if !self.options.formats.contains(&DocumentFormat::Adp) {
            return false;
        }
        let Ok((records, _)) = self.dns.txt(&format!("_agent.{domain}")).await else {
            return false;
        };
        let Ok(record) = crate::adp::txt::parse(domain, &records) else {
            return false;
        };
        match (
            Url::parse(&record.well_known),
            self.published_url(domain, path),
        ) {
            (Ok(named), Ok(here)) => named == here,
            _ => false,
        }
    }

    /// GETs `https://{domain}{path}`: `None` when nothing is published
    /// there; a JSON document that is served but breaks a limit is an
    /// error.
    async fn get_published(
        &self,
        domain: &str,
        ips: &[std::net::IpAddr],
        path: &str,
        kind: DocumentKind,
    ) -> Option<Result<Fetched, CrawlError>> {
        let url = match self.published_url(domain, path) {
            Ok(u) => u,
            Err(e) => return Some(Err(e)),
        };
        match self.fetcher.fetch_kind(&url, ips, None, kind).await {
            Ok(Some(fetched)) => Some(Ok(fetched)),
            // A JSON answer that breaks a limit: published, and broken.
            Err(
                e @ (CrawlError::DocumentTooLarge { .. }
                | CrawlError::JsonTooDeep { .. }
                | CrawlError::JsonTooLarge { .. }
                | CrawlError::Document(_)),
            ) => Some(Err(e)),
            // No server, an error status, a redirect elsewhere, an HTML
            // page (a site that answers every path): nothing published.
            Ok(None) | Err(_) => None,
        }
    }

    /// The domain's A2A Agent Card: `/.well-known/agent-card.json`, else
    /// a 0.2 card at `/.well-known/agent.json`, unless the domain's ADP
    /// record names that URL (an ADP document there is ADP's, and left
    /// alone; one that is not an A2A card is too).
    async fn card(&self, domain: &str) -> Option<CrawlOutcome> {
        let agent_id = format!("a2a:{domain}");
        let mut run = Run::new(domain, agent_id.clone(), DocumentFormat::A2a);
        let started = std::time::Instant::now();
        let ips = match self.https_addresses(domain).await? {
            Ok(ips) => ips,
            Err(e) => {
                run.fail(StepName::DnsAddress, ms(started), e);
                return Some(run.unverified());
            }
        };
        let (fetched, legacy) = match self
            .get_published(domain, &ips, a2a::WELL_KNOWN_PATH, A2A_CARD)
            .await
        {
            Some(r) => (r, false),
            None if self
                .adp_document_at(domain, a2a::LEGACY_WELL_KNOWN_PATH)
                .await =>
            {
                return None;
            }
            None => (
                self.get_published(domain, &ips, a2a::LEGACY_WELL_KNOWN_PATH, A2A_CARD)
                    .await?,
                true,
            ),
        };
        let fetched = run
            .step(StepName::Fetch, started, fetched, |f| {
                format!("{} bytes from {}", f.text.len(), f.url)
            })
            .ok();
        let fetched = match fetched {
            Some(f) => f,
            None => return Some(run.unverified()),
        };
        let started = std::time::Instant::now();
        let doc: Value = match serde_json::from_str(&fetched.text) {
            Ok(v) => v,
            Err(e) => {
                let e = FormatError::new(Reason::InvalidJson, e.to_string());
                run.fail(StepName::Card, ms(started), e.into());
                return Some(run.unverified());
            }
        };
        if legacy && a2a::classify(&doc) != a2a::Shape::A2a {
            // Not a card: ADP's document (or nothing we read).
            return None;
        }
        let parsed = a2a::parse_card(&doc).map_err(CrawlError::from);
        let Ok(card) = run.step(StepName::Card, started, parsed, |c| {
            format!("an A2A card \"{}\" with {} skills", c.name, c.skills.len())
        }) else {
            return Some(run.unverified());
        };
        let mut evidence = Evidence::default();
        if let Some(signature) = card.signatures.first() {
            let started = std::time::Instant::now();
            match self.check_signature(domain, &ips, &doc, signature).await {
                Ok(signed) => {
                    evidence = self.anchor(domain, &signed, ms(started), &mut run).await;
                }
                Err(e) => {
                    let forged = e.reason == Reason::CardSignatureBad;
                    run.fail(StepName::Signature, ms(started), e.into());
                    if forged {
                        return Some(run.unverified());
                    }
                }
            }
        }
        Some(proven(
            run,
            card.to_descriptor(&agent_id),
            fetched.text,
            evidence,
        ))
    }

    /// Checks a card's signature with the key set its `jku` names, which
    /// must be on the card's own host over HTTPS (a key set anywhere else
    /// is the signer nominating its own trust root); answers the key it
    /// verified with, for [`OtherFormats::anchor`] to look for in DNS.
    async fn check_signature(
        &self,
        domain: &str,
        ips: &[std::net::IpAddr],
        doc: &Value,
        signature: &a2a::CardSignature,
    ) -> Result<anchor::Signed, FormatError> {
        let unchecked = |why: String| FormatError::new(Reason::CardSignatureUnchecked, why);
        let jku = signature
            .header
            .jku
            .as_deref()
            .ok_or_else(|| unchecked("the signature names no key set (jku)".into()))?;
        let url = Url::parse(jku).map_err(|e| unchecked(format!("jku {jku:?}: {e}")))?;
        let same_host = url.scheme() == "https"
            && url
                .host_str()
                .is_some_and(|h| h.eq_ignore_ascii_case(domain));
        if !same_host {
            return Err(unchecked(format!(
                "the key set {jku} is not on {domain} over HTTPS"
            )));
        }
        let keys = match self.fetcher.fetch_kind(&url, ips, None, JWKS).await {
            Ok(Some(f)) => f,
            Ok(None) => return Err(unchecked(format!("{jku} answered nothing"))),
            Err(e) => return Err(unchecked(format!("{jku}: {e}"))),
        };
        let jwks: Value = serde_json::from_str(&keys.text)
            .map_err(|e| unchecked(format!("{jku} is not JSON: {e}")))?;
        a2a::signing_key(doc, signature, &jwks)
            .map(|key| anchor::Signed {
                alg: signature.header.alg.clone(),
                kid: signature.header.kid.clone(),
                jku: jku.to_owned(),
                key,
            })
            .map_err(|e| FormatError::new(e.reason(), format!("{e:?}")))
    }

    /// The domain's AID record (`v=aid1`/`aid2` at `_agent.{domain}`,
    /// beside any ADP record there).
    async fn aid(&self, domain: &str) -> Option<CrawlOutcome> {
        let started = std::time::Instant::now();
        let (records, _) = self.dns.txt(&format!("_agent.{domain}")).await.ok()?;
        let selected = aid::select(&records)?;
        let agent_id = format!("aid:{domain}");
        let mut run = Run::new(domain, agent_id, DocumentFormat::Aid);
        let text = records
            .iter()
            .find(|r| aid::is_aid(r))
            .cloned()
            .unwrap_or_default();
        let parsed = selected.map_err(CrawlError::from);
        match run.step(StepName::DnsTxt, started, parsed, |r| {
            format!("AID record for {} over {}", r.uri, r.proto)
        }) {
            Ok(record) => Some(found(run, record.to_descriptor(domain), text)),
            Err(()) => Some(run.unverified()),
        }
    }
}

/// `text` as JSON, or why not ([`Reason::InvalidJson`]).
fn json(text: &str) -> Result<Value, FormatError> {
    serde_json::from_str(text).map_err(|e| FormatError::new(Reason::InvalidJson, e.to_string()))
}

/// An unconditional request answered 304.
fn not_modified(url: &Url) -> CrawlError {
    CrawlError::HttpStatus {
        url: url.to_string(),
        status: 304,
    }
}

fn ms(started: std::time::Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}

/// An agent found with nothing proven about it, to be stored with no
/// evidence (unverified, as the report already says from [`Run::new`]):
/// an ARD entry, an AID record, and a card or DNS-AID record that earned
/// no flag go through [`proven`] with none.
fn found(run: Run, descriptor: Descriptor, document: String) -> CrawlOutcome {
    proven(run, descriptor, document, Evidence::default())
}

/// An agent found, to be stored with the `evidence` this crawl proved: a
/// DNS-AID record's Secure SVCB RRset ([`dns_aid`]), a card key the
/// domain's AID record anchors ([`anchor`]). The report's trust follows.
fn proven(
    mut run: Run,
    descriptor: Descriptor,
    document: String,
    evidence: Evidence,
) -> CrawlOutcome {
    run.report.agent_id.clone_from(&descriptor.id);
    run.report.trust = summarise(&evidence);
    CrawlOutcome {
        report: run.report,
        verified: Some(Verified {
            descriptor,
            document,
            evidence,
        }),
        peers: Vec::new(),
    }
}
