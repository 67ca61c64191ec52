//! DNS-AID read in full: the SVCB records under `_agents.{domain}`, and
//! for each agent what its target serves, fetched like every other
//! document of the crawl (the address policy on every host, https only,
//! the allowed ports, size, depth and time limits, reason codes).
//!
//! For each ServiceMode record:
//! 1. `dnssec`: the SVCB RRset it was read from, asked again through the
//!    validating resolver ([`record_dnssec`] says what counts).
//! 2. `dns_address`: the target's addresses, under the address policy. A
//!    target that has none, or only addresses the policy refuses, ends
//!    the agent: nothing is stored for an endpoint this node may not
//!    connect to.
//! 3. `capability`: the document the `cap` key names, when it is a URL:
//!    https only, its host's addresses under the policy, its bytes checked
//!    against `cap-sha256` when the record has one, then read. A URN is
//!    not fetched (the step is skipped).
//! 4. `card`: the metadata document: the `well-known` key's, else the
//!    A2A card (`a2a`) or MCP server card (`mcp`) the protocol implies.
//!
//! What is stored: the record's agent as DNS and those documents describe
//! it together ([`dns_aid::DnsAidAgent::describe`]), id `dns-aid:{owner}`
//! and format DNS-AID whatever the card's format, with the `dnssec` flag
//! (dns-verified) when its SVCB RRset validated Secure; what the target
//! serves earns nothing (the card's name and skills are the publisher's
//! claim, fetched over HTTPS like any other card). A document the record
//! names (`cap`, `well-known`) that cannot be fetched, or is refused, ends
//! the agent with that step's reason: the publisher said where its
//! description is, and a description that is not there, not the one DNS
//! committed to (`cap_digest_mismatch`), or not safe to fetch is not
//! replaced by a guess. The same holds for an implied card that is served
//! but broken (too large, too deep, not JSON, not a card, or so slow the
//! fetch times out). An implied card that is not published at all (no
//! server, an error status, a page that is not JSON) is skipped, and the
//! agent is stored as DNS alone describes it: its name from the owner,
//! its endpoint and protocol.
//!
//! A -02 SVCB index at `_index._agents.{domain}` leads to the ARD
//! catalog on the host it names ([`OtherFormats::svcb_index`]).
//!
//! Every name read is under `_agents.{domain}`; it is asked for first,
//! and when DNS says it does not exist (NXDOMAIN, which covers every name
//! below it: RFC 8020) nothing else is: a domain without DNS-AID costs
//! one query.
//!
//! The document kept with the record is the card when one was read, else
//! the capability document, else the SVCB record's presentation text.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use url::Url;

use super::{json, not_modified, proven, OtherFormats, MAX_DNS_AID_NAMES};
use crate::crawl::dns::Dnssec;
use crate::crawl::error::CrawlError;
use crate::crawl::fetch::{DocumentKind, A2A_CARD, AI_CATALOG, DNS_AID_CAP, MCP_SERVER_CARD};
use crate::crawl::report::{CrawlOutcome, Run, StepName};
use crate::descriptor::DocumentFormat;
use crate::formats::dns_aid::{self, CapDocument, DnsAidAgent, Metadata};
use crate::formats::{ard, FormatError};
use crate::trust::{Evidence, Reason};

/// Most DNS-AID agents of one domain followed to their targets (each
/// costs up to two fetches); the records past it are refused.
const MAX_DNS_AID_FOLLOWED: usize = 32;

/// How one of the documents behind a record ended.
enum Part<T> {
    /// Nothing to fetch, or nothing published where it was implied: why.
    Skipped(String),
    /// Read: the value, the report's line, the document's text.
    Read(T, String, String),
    /// Named or served, and refused.
    Failed(CrawlError),
}

impl OtherFormats<'_> {
    /// The domain's DNS-AID records: the protocol names and the names the
    /// index lists, each SVCB record one agent (an AliasMode record is
    /// followed one hop), each followed to what its target serves.
    pub(super) async fn dns_aid(&self, domain: &str) -> Vec<CrawlOutcome> {
        // Every DNS-AID name is under `_agents.{domain}`: when DNS says
        // that name does not exist, nothing below it does (RFC 8020), and
        // the protocol names, the index and its SVCB are not asked.
        let agents_name = format!("{}.{}", dns_aid::AGENTS_LABEL, domain.trim_end_matches('.'));
        if matches!(self.dns.exists(&agents_name).await, Ok(false)) {
            return Vec::new();
        }
        let mut names = dns_aid::protocol_names(domain);
        if let Ok((index, _)) = self.dns.txt(&dns_aid::index_name(domain)).await {
            if let Ok(agents) = dns_aid::parse_index(&index) {
                for agent in agents {
                    names.extend(dns_aid::agent_names(&agent.name, &agent.proto, domain));
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        names.retain(|n| seen.insert(n.clone()));
        names.truncate(MAX_DNS_AID_NAMES);
        let lookups = names.iter().map(|name| async move {
            let started = Instant::now();
            let records = self.dns_aid_records(name).await;
            (name, records, started.elapsed())
        });
        let mut agents = Vec::new();
        let mut out = Vec::new();
        for (name, records, took) in futures_util::future::join_all(lookups).await {
            let agent_id = format!("dns-aid:{name}");
            match records {
                Ok(records) => {
                    for (record, parsed) in records {
                        let mut run = Run::new(domain, agent_id.clone(), DocumentFormat::DnsAid);
                        let parsed = parsed.and_then(|agent| {
                            if agents.len() < MAX_DNS_AID_FOLLOWED {
                                Ok(agent)
                            } else {
                                Err(FormatError::new(
                                    Reason::DnsAidMalformed,
                                    format!(
                                        "more than {MAX_DNS_AID_FOLLOWED} agents under {domain}: \
                                         the rest are not followed"
                                    ),
                                ))
                            }
                        });
                        let parsed = parsed.map_err(CrawlError::from);
                        if let Ok(agent) = run.step_took(StepName::DnsSvcb, took, parsed, |a| {
                            format!("SVCB {name}: {}", a.endpoint())
                        }) {
                            agents.push((run, agent, record));
                        } else {
                            out.push(run.unverified());
                        }
                    }
                }
                Err(e) => {
                    let mut run = Run::new(domain, agent_id, DocumentFormat::DnsAid);
                    run.fail(StepName::DnsSvcb, took.as_secs_f64() * 1000.0, e);
                    out.push(run.unverified());
                }
            }
        }
        let (verdicts, index) = tokio::join!(self.validate(&agents), self.svcb_index(domain));
        out.extend(index);
        let followed = agents.into_iter().filter_map(|(mut run, agent, record)| {
            let (verdict, took) = verdicts.get(&agent.owner)?;
            match record_dnssec(&mut run, &agent.owner, &record, verdict, *took) {
                Ok(evidence) => Some(futures_util::future::Either::Left(
                    self.follow(run, agent, record, evidence),
                )),
                Err(()) => Some(futures_util::future::Either::Right(std::future::ready(
                    run.unverified(),
                ))),
            }
        });
        out.extend(futures_util::future::join_all(followed).await);
        out
    }

    /// The ARD catalog a -02 SVCB index record (at `_index._agents`)
    /// leads to: the first of [`dns_aid::HTTP_INDEX_PATHS`] on the host it
    /// names that is an ARD catalog, its entries read for `domain` as the
    /// domain's own catalog is (the domain's DNS names the host, so the
    /// catalog speaks for the domain). Nothing published there, or only
    /// another index format, is no report; a host the address policy
    /// refuses, a document served broken, or a document at ARD's own path
    /// that is not a catalog, is.
    async fn svcb_index(&self, domain: &str) -> Vec<CrawlOutcome> {
        let name = dns_aid::index_name(domain);
        let Ok(records) = self.dns.svcb(&name).await else {
            return Vec::new();
        };
        let Some(index) = records
            .iter()
            .find_map(|r| match dns_aid::index_from_svcb(&name, r) {
                Ok(dns_aid::Binding::Service(index)) => Some(index),
                _ => None,
            })
        else {
            return Vec::new();
        };
        let started = Instant::now();
        let where_ = format!("{}{}", index.target, dns_aid::HTTP_INDEX_PATHS[0]);
        let mut run = Run::new(domain, where_, DocumentFormat::Ard);
        let ips = self.allowed_addresses(&index.target).await;
        let Ok(ips) = run.step(StepName::DnsAddress, started, ips, |ips| {
            format!(
                "SVCB {name}: {} has {} address(es) the policy allows",
                index.target,
                ips.len()
            )
        }) else {
            return vec![run.unverified()];
        };
        let origin = index.origin(self.options.https_port);
        let own = format!(
            "{}{}",
            base_origin(domain, self.options.https_port),
            ard::WELL_KNOWN_PATH
        );
        for path in dns_aid::HTTP_INDEX_PATHS {
            let text = format!("{origin}{path}");
            // The domain's own catalog is read beside this, once.
            if text == own {
                continue;
            }
            let Ok(url) = Url::parse(&text) else {
                continue;
            };
            let started = Instant::now();
            let fetched = match self.fetcher.fetch_kind(&url, &ips, None, AI_CATALOG).await {
                Ok(Some(fetched)) => fetched,
                Err(e) if served_and_broken(&e) => {
                    run.fail(StepName::Fetch, started.elapsed().as_secs_f64() * 1000.0, e);
                    return vec![run.unverified()];
                }
                Ok(None) | Err(_) => continue,
            };
            let where_ = format!("{}{}", index.target, url.path());
            let parsed = json(&fetched.text)
                .and_then(|doc| ard::parse_catalog(&doc, domain).map(|c| (doc, c)));
            let (doc, catalog) = match parsed {
                Ok(read) => read,
                // ARD's own path: a broken catalog is reported.
                Err(e) if path == ard::WELL_KNOWN_PATH => {
                    run.report.agent_id.clone_from(&where_);
                    run.fail(
                        StepName::Catalog,
                        started.elapsed().as_secs_f64() * 1000.0,
                        e.into(),
                    );
                    return vec![run.unverified()];
                }
                // Another index format (dns-aid-core's own): not read.
                Err(_) => continue,
            };
            run.report.agent_id.clone_from(&where_);
            run.pass(
                StepName::Catalog,
                started.elapsed().as_secs_f64() * 1000.0,
                format!(
                    "an ARD catalog of {} entries at {url}, named by SVCB {name}",
                    catalog.entries.len()
                ),
            );
            let took = started.elapsed().as_secs_f64() * 1000.0;
            return self
                .manifest_entries(domain, &where_, doc, catalog, took)
                .await;
        }
        Vec::new()
    }

    /// DNSSEC's verdict on the SVCB RRset of each owner the agents were
    /// read at, asked once per owner through the validating resolver.
    async fn validate(
        &self,
        agents: &[(Run, DnsAidAgent, String)],
    ) -> HashMap<String, (Dnssec, Duration)> {
        let mut owners: Vec<&str> = agents.iter().map(|(_, a, _)| a.owner.as_str()).collect();
        owners.sort_unstable();
        owners.dedup();
        let asked = owners.into_iter().map(|owner| async move {
            let (verdict, took) = timed(self.dns.svcb_dnssec(owner)).await;
            (owner.to_owned(), (verdict, took))
        });
        futures_util::future::join_all(asked)
            .await
            .into_iter()
            .collect()
    }

    /// The SVCB records at `name` as DNS-AID agents, each with its
    /// presentation text; an AliasMode record is followed once.
    async fn dns_aid_records(
        &self,
        name: &str,
    ) -> Result<Vec<(String, Result<DnsAidAgent, FormatError>)>, CrawlError> {
        let mut out = Vec::new();
        for svcb in self.dns.svcb(name).await? {
            match dns_aid::from_svcb(name, &svcb) {
                Ok(dns_aid::Binding::Service(agent)) => out.push((svcb.to_string(), Ok(agent))),
                Ok(dns_aid::Binding::Alias { target }) => {
                    for aliased in self.dns.svcb(&target).await? {
                        let parsed = match dns_aid::from_svcb(&target, &aliased) {
                            Ok(dns_aid::Binding::Service(agent)) => Ok(agent),
                            Ok(dns_aid::Binding::Alias { target: next }) => Err(FormatError::new(
                                Reason::DnsAidMalformed,
                                format!("{name} aliases {target}, which aliases {next}: one hop is followed"),
                            )),
                            Err(e) => Err(e),
                        };
                        out.push((aliased.to_string(), parsed));
                    }
                }
                Err(e) => out.push((svcb.to_string(), Err(e))),
            }
        }
        Ok(out)
    }

    /// One agent's record followed to its target (the module doc says
    /// what is fetched and what is stored), stored with the `evidence`
    /// its SVCB RRset earned.
    async fn follow(
        &self,
        mut run: Run,
        agent: DnsAidAgent,
        record: String,
        evidence: Evidence,
    ) -> CrawlOutcome {
        let started = Instant::now();
        let ips = self.allowed_addresses(&agent.target).await;
        let Ok(ips) = run.step(StepName::DnsAddress, started, ips, |ips| {
            format!(
                "{} has {} address(es) the policy allows",
                agent.target,
                ips.len()
            )
        }) else {
            return run.unverified();
        };
        let ((cap, cap_took), (card, card_took)) = tokio::join!(
            timed(self.cap_document(&agent, &ips)),
            timed(self.target_card(&agent, &ips))
        );
        let cap = record_part(&mut run, StepName::Capability, cap_took, cap);
        let card = record_part(&mut run, StepName::Card, card_took, card);
        let (Ok(cap), Ok(card)) = (cap, card) else {
            return run.unverified();
        };
        let descriptor =
            agent.describe(card.as_ref().map(|(m, _)| m), cap.as_ref().map(|(c, _)| c));
        let document = card
            .map(|(_, text)| text)
            .or_else(|| cap.map(|(_, text)| text))
            .unwrap_or(record);
        proven(run, descriptor, document, evidence)
    }

    /// The capability document the `cap` key names, its digest checked.
    async fn cap_document(&self, agent: &DnsAidAgent, target_ips: &[IpAddr]) -> Part<CapDocument> {
        let Some(cap) = agent.cap.as_deref() else {
            return Part::Skipped("the record has no cap key".into());
        };
        let url = match Url::parse(cap) {
            Ok(url) if url.scheme() == "urn" => {
                return Part::Skipped(format!("cap {cap} is a URN: it names, nothing is fetched"))
            }
            Ok(url) => url,
            Err(e) => {
                return Part::Failed(CrawlError::BadUrl {
                    url: cap.to_owned(),
                    reason: e.to_string(),
                })
            }
        };
        if url.scheme() != "https" {
            return Part::Failed(CrawlError::InsecureUrl { url: url.into() });
        }
        let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
        let ips = if host == agent.target {
            target_ips.to_vec()
        } else {
            match self.allowed_addresses(&host).await {
                Ok(ips) => ips,
                Err(e) => return Part::Failed(e),
            }
        };
        let fetched = match self.fetcher.fetch_kind(&url, &ips, None, DNS_AID_CAP).await {
            Ok(Some(fetched)) => fetched,
            Ok(None) => return Part::Failed(not_modified(&url)),
            Err(e) => return Part::Failed(e),
        };
        let checked = agent
            .cap_sha256
            .as_deref()
            .map(|expected| dns_aid::check_cap_digest(expected, fetched.text.as_bytes()))
            .transpose();
        if let Err(e) = checked {
            return Part::Failed(e.into());
        }
        let digest = if agent.cap_sha256.is_some() {
            ", cap-sha256 matches"
        } else {
            ", no cap-sha256 to check"
        };
        match json(&fetched.text).and_then(|doc| dns_aid::parse_cap(&doc)) {
            Ok(doc) => {
                let line = format!(
                    "{} bytes from {}{digest}: {} capabilities",
                    fetched.text.len(),
                    fetched.url,
                    doc.capabilities.len()
                );
                Part::Read(doc, line, fetched.text)
            }
            Err(e) => Part::Failed(e.into()),
        }
    }

    /// The metadata document at the target: the `well-known` key's, else
    /// the card the protocol implies.
    async fn target_card(&self, agent: &DnsAidAgent, ips: &[IpAddr]) -> Part<Metadata> {
        let Some((text, named)) = agent.metadata_url(self.options.https_port) else {
            return Part::Skipped(format!(
                "no well-known key, and protocol {} implies no card",
                agent.protocol.as_deref().unwrap_or("(none)")
            ));
        };
        let url = match Url::parse(&text) {
            Ok(url) => url,
            Err(e) => {
                return Part::Failed(CrawlError::BadUrl {
                    url: text,
                    reason: e.to_string(),
                })
            }
        };
        let kind: DocumentKind = match agent.protocol.as_deref() {
            Some("mcp") => MCP_SERVER_CARD,
            _ => A2A_CARD,
        };
        let fetched = match self.fetcher.fetch_kind(&url, ips, None, kind).await {
            Ok(Some(fetched)) => fetched,
            Ok(None) => return Part::Failed(not_modified(&url)),
            Err(e) if named || served_and_broken(&e) => return Part::Failed(e),
            Err(e) => return Part::Skipped(format!("nothing published at {url}: {e}")),
        };
        match json(&fetched.text).and_then(|doc| dns_aid::parse_metadata(&doc)) {
            Ok(metadata) => {
                let line = format!(
                    "{} bytes from {}: {}",
                    fetched.text.len(),
                    fetched.url,
                    metadata.summary()
                );
                Part::Read(metadata, line, fetched.text)
            }
            Err(e) => Part::Failed(e.into()),
        }
    }
}

/// Records the `dnssec` step of an agent read from `record` at `owner`:
/// the evidence the record earns, `Err` when the verdict refuses it.
/// Secure, when the record is among those that validated, earns the
/// `dnssec` flag (dns-verified, as ADP's `_agent` TXT RRset does), when
/// `owner` is under a domain ([`dns_aid::published_domain`]) that a peer
/// holding the record can re-verify it on (docs/protocol.md#record-types);
/// Bogus (under a trust anchor, a signature that fails or is missing)
/// refuses it, as it refuses an ADP record; Insecure and Indeterminate
/// skip the step and earn nothing.
fn record_dnssec(
    run: &mut Run,
    owner: &str,
    record: &str,
    verdict: &Dnssec,
    took: Duration,
) -> Result<Evidence, ()> {
    let took_ms = took.as_secs_f64() * 1000.0;
    let bogus = |detail: String| CrawlError::DnssecBogus {
        name: owner.to_owned(),
        detail,
    };
    match verdict {
        Dnssec::Secure { records, chain } if records.iter().any(|r| r == record) => {
            let Some(domain) = dns_aid::published_domain(owner) else {
                run.pass(
                    StepName::Dnssec,
                    took_ms,
                    format!(
                        "the SVCB RRset validates Secure from the trust anchor, but {owner} is under \
                         no domain a peer could re-verify it on: no dnssec flag"
                    ),
                );
                return Ok(Evidence::default());
            };
            run.pass(
                StepName::Dnssec,
                took_ms,
                format!(
                    "the SVCB RRset validates Secure from the trust anchor: the dnssec flag \
                     (published under {domain})"
                ),
            );
            Ok(Evidence {
                dnssec: true,
                dnssec_chain: chain.clone(),
                ..Evidence::default()
            })
        }
        Dnssec::Secure { .. } => {
            run.fail(
                StepName::Dnssec,
                took_ms,
                bogus("the SVCB record read is not among the records that validated".into()),
            );
            Err(())
        }
        Dnssec::Bogus { detail } => {
            run.fail(StepName::Dnssec, took_ms, bogus(detail.clone()));
            Err(())
        }
        Dnssec::Insecure => {
            run.skip(StepName::Dnssec, "the zone is not signed (Insecure)");
            Ok(Evidence::default())
        }
        Dnssec::Indeterminate { detail } => {
            run.skip(StepName::Dnssec, format!("not validated: {detail}"));
            Ok(Evidence::default())
        }
    }
}

/// `https://{host}:{port}`, the port left out when it is 443 (as
/// [`dns_aid::IndexHost::origin`] writes it).
fn base_origin(host: &str, port: u16) -> String {
    match port {
        443 => format!("https://{host}"),
        port => format!("https://{host}:{port}"),
    }
}

/// A fetch error that says the document is there and broken, not absent
/// (the card the protocol implies, which a publisher need not serve).
fn served_and_broken(e: &CrawlError) -> bool {
    matches!(
        e,
        CrawlError::DocumentTooLarge { .. }
            | CrawlError::JsonTooDeep { .. }
            | CrawlError::JsonTooLarge { .. }
            | CrawlError::Document(_)
            | CrawlError::Timeout { .. }
            | CrawlError::Throttled { .. }
            | CrawlError::HostBackoff { .. }
            | CrawlError::AddressNotAllowed { .. }
            | CrawlError::PortNotAllowed { .. }
    )
}

async fn timed<T>(f: impl std::future::Future<Output = T>) -> (T, Duration) {
    let started = Instant::now();
    let out = f.await;
    (out, started.elapsed())
}

/// Records a part's step; `Ok` with what was read (`None` when skipped),
/// `Err` when it failed.
fn record_part<T>(
    run: &mut Run,
    step: StepName,
    took: Duration,
    part: Part<T>,
) -> Result<Option<(T, String)>, ()> {
    let took_ms = took.as_secs_f64() * 1000.0;
    match part {
        Part::Skipped(why) => {
            run.skip(step, why);
            Ok(None)
        }
        Part::Read(value, line, text) => {
            run.pass(step, took_ms, line);
            Ok(Some((value, text)))
        }
        Part::Failed(e) => {
            run.fail(step, took_ms, e);
            Err(())
        }
    }
}
