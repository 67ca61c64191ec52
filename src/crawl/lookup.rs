//! The first phase of an ADP crawl: the domain's `_agent` TXT record and
//! `_agent._tcp` SRV record asked at once, and the TXT RRset again through
//! the validating resolver ([`Dns::txt_dnssec`]). It gives the next phases
//! an [`Anchored`]: the `v=ADP1` record naming the document and the key,
//! whether DNSSEC proved it, and the SRV target when there is one.

use std::time::{Duration, Instant};

use super::dns::{Dns, DnsError, Dnssec, MAX_TTL};
use super::error::CrawlError;
use super::report::{Run, StepName};
use crate::adp::txt::{self, AdpTxt};

/// What DNS says about the agent of a domain.
pub(super) struct Anchored {
    /// The `v=ADP1` record: the document's URL and the key's fingerprint.
    pub(super) txt: AdpTxt,
    /// The TXT answer's TTL, seconds.
    pub(super) ttl: u32,
    /// The TXT RRset validated Secure.
    pub(super) dnssec: bool,
    /// The DNSSEC chain that proved it, when one could be carried.
    pub(super) chain: Option<Vec<u8>>,
    /// The SRV record's target and port, when there is one.
    pub(super) srv: Option<(String, u16)>,
}

/// Asks DNS about `domain`'s agent, recording the `dns_txt`, `dnssec` and
/// `dns_srv` steps. `Err` when the chain ends here (no usable TXT record,
/// or a Bogus DNSSEC verdict); the report says why.
pub(super) async fn lookup(dns: &Dns, domain: &str, run: &mut Run) -> Result<Anchored, ()> {
    let started = Instant::now();
    let (txt_name, srv_name) = (format!("_agent.{domain}"), format!("_agent._tcp.{domain}"));
    let ((txt, txt_took), (srv, srv_took), (dnssec, dnssec_took)) = tokio::join!(
        async { (dns.txt(&txt_name).await, started.elapsed()) },
        async { (dns.srv(&srv_name).await, started.elapsed()) },
        async { (dns.txt_dnssec(&txt_name).await, started.elapsed()) },
    );
    let txt = adp_record(domain, txt, &dnssec, run);
    let (txt, ttl) = run.step_took(StepName::DnsTxt, txt_took, txt, |(t, ttl)| {
        format!(
            "v=ADP1 pk={} wk={} (ttl {ttl}s)",
            t.fingerprint, t.well_known
        )
    })?;
    let chain = match &dnssec {
        Dnssec::Secure { chain, .. } => chain.clone(),
        _ => None,
    };
    let dnssec = dnssec_verdict(dnssec, dnssec_took, &txt_name, run)?;
    let srv = srv_record(srv, srv_took, run);
    Ok(Anchored {
        txt,
        ttl,
        dnssec,
        chain,
        srv,
    })
}

/// The `v=ADP1` record of `domain` and its TTL, from the records that
/// validated when the verdict is Secure, else from the plain answer.
fn adp_record(
    domain: &str,
    answer: Result<(Vec<String>, u32), DnsError>,
    dnssec: &Dnssec,
    run: &mut Run,
) -> Result<(AdpTxt, u32), CrawlError> {
    // A Secure verdict is about the records that validated: read those,
    // not the unvalidated answer to the other query, which an attacker
    // between us and the resolver could answer differently.
    let answer = match (dnssec, answer) {
        (Dnssec::Secure { records, .. }, answer) => {
            let ttl = answer.map(|(_, ttl)| ttl).unwrap_or(MAX_TTL);
            Ok((records.clone(), ttl))
        }
        (_, answer) => answer,
    };
    match answer {
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
    }
}

/// DNSSEC: Secure earns the flag, Bogus ends the chain, anything else
/// leaves the TXT record as unsigned DNS.
fn dnssec_verdict(
    dnssec: Dnssec,
    took: Duration,
    txt_name: &str,
    run: &mut Run,
) -> Result<bool, ()> {
    let ms = took.as_secs_f64() * 1000.0;
    match dnssec {
        Dnssec::Secure { .. } => {
            run.pass(
                StepName::Dnssec,
                ms,
                "the TXT RRset validates Secure from the trust anchor",
            );
            Ok(true)
        }
        Dnssec::Bogus { detail } => {
            let e = CrawlError::DnssecBogus {
                name: txt_name.to_owned(),
                detail,
            };
            run.fail(StepName::Dnssec, ms, e);
            Err(())
        }
        Dnssec::Insecure => {
            run.skip(StepName::Dnssec, "the zone is not signed (Insecure)");
            Ok(false)
        }
        Dnssec::Indeterminate { detail } => {
            run.skip(StepName::Dnssec, format!("not validated: {detail}"));
            Ok(false)
        }
    }
}

/// The SRV record is optional: it supplies a port and target for
/// endpoints on the domain; a failed lookup is not fatal.
fn srv_record(
    srv: Result<Option<(String, u16)>, DnsError>,
    took: Duration,
    run: &mut Run,
) -> Option<(String, u16)> {
    match srv {
        Ok(Some(found)) => run
            .step_took(StepName::DnsSrv, took, Ok(found), |(t, p)| {
                format!("{t}:{p}")
            })
            .ok(),
        Ok(None) => {
            run.skip(
                StepName::DnsSrv,
                "no SRV record; the URLs are used as given",
            );
            None
        }
        Err(e) => {
            run.skip(
                StepName::DnsSrv,
                format!("lookup failed ({e}); the URLs are used as given"),
            );
            None
        }
    }
}
