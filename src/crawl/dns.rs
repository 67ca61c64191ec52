//! DNS lookups for the crawler (hickory-resolver): the `_agent` TXT RRset,
//! the optional `_agent._tcp` SRV record, and a host's addresses; the TXT
//! RRset's DNSSEC validation ([`dnssec`], from the trust anchors of
//! [`crate::dnssec::anchors`]) and the chain of signed records it rests on.
//!
//! The resolver asks the configured servers (`crawl.resolvers`, over UDP
//! and TCP) or the system's. Answers carry their TTL so the scheduler can
//! recrawl at min(TTL, 3600 s) (ADP 10.1).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::rr::{RData, RecordType};
use hickory_resolver::TokioResolver;

mod answer;
mod dnssec;
mod resolver;

pub use crate::dnssec::anchors::{AnchorError, TrustAnchorSet};
pub use answer::{
    DnsError, Dnssec, CACHE_SIZE, MAX_ADDRESSES, MAX_SVCB_RECORDS, MAX_TTL, MAX_TXT_RECORDS,
};
pub use dnssec::RETRY_PRIMING;

use answer::joined;
use resolver::build;

/// The crawler's resolver. Cheap to clone.
///
/// Two resolvers ask the same servers: one for every lookup, and a
/// validating one (hickory's own DNSSEC validation, from the configured
/// trust anchors, the root's by default) that the `_agent` TXT RRset is
/// asked again through ([`Dns::txt_dnssec`]). A resolver's AD bit never
/// counts. When a trust anchor covers the name, a Bogus verdict is a
/// failure whatever any other lookup says; [`dnssec`] gives the rule.
#[derive(Clone)]
pub struct Dns {
    resolver: Arc<TokioResolver>,
    validator: Arc<dnssec::Validator>,
}

impl std::fmt::Debug for Dns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Dns")
    }
}

/// The trust anchors `files` hold (DS or DNSKEY records in zone-file
/// syntax, or IANA's `root-anchors.xml`), or the root's built-in anchor
/// when there are none.
///
/// # Errors
/// [`DnsError::Setup`] naming the file (and the line) that cannot be read
/// or parsed.
pub fn trust_anchors(files: &[PathBuf]) -> Result<TrustAnchorSet, DnsError> {
    TrustAnchorSet::load(files).map_err(|e| DnsError::Setup {
        message: e.to_string(),
    })
}

impl Dns {
    /// A resolver asking `servers` (UDP, then TCP for truncated answers), or
    /// the system's configured servers when `servers` is empty; DNSSEC is
    /// validated from the root's built-in trust anchor.
    ///
    /// # Errors
    /// [`DnsError::Setup`] when the system configuration cannot be read.
    pub fn new(servers: &[SocketAddr], timeout: Duration) -> Result<Self, DnsError> {
        Self::with_anchors(servers, timeout, TrustAnchorSet::builtin_root(), CACHE_SIZE)
    }

    /// As [`Dns::new`], validating DNSSEC from `anchors`.
    ///
    /// # Errors
    /// [`DnsError::Setup`] when the system configuration cannot be read.
    /// `cache_size` answers are cached for their TTL (0: none).
    pub fn with_anchors(
        servers: &[SocketAddr],
        timeout: Duration,
        anchors: TrustAnchorSet,
        cache_size: u64,
    ) -> Result<Self, DnsError> {
        let resolver = Arc::new(build(servers, timeout, None, cache_size)?);
        let validator =
            dnssec::Validator::new(servers, timeout, anchors, cache_size, resolver.clone());
        Ok(Self {
            resolver,
            validator: Arc::new(validator),
        })
    }

    /// Asks for the TXT RRset at `name` again, through the validator
    /// ([`dnssec`] says when a verdict counts).
    pub async fn txt_dnssec(&self, name: &str) -> Dnssec {
        self.validator.txt(name).await
    }

    /// Asks for the SVCB RRset at `name` again, through the validator
    /// (DNS-AID; [`dnssec`] says when a verdict counts).
    pub async fn svcb_dnssec(&self, name: &str) -> Dnssec {
        self.validator.svcb(name).await
    }

    async fn lookup(
        &self,
        name: &str,
        record_type: RecordType,
    ) -> Result<hickory_resolver::lookup::Lookup, DnsError> {
        let fqdn = format!("{}.", name.trim_end_matches('.'));
        self.resolver
            .lookup(fqdn.as_str(), record_type)
            .await
            .map_err(|e| {
                if e.is_nx_domain() {
                    DnsError::NxDomain {
                        name: name.to_owned(),
                        negative_ttl: negative_ttl(&e),
                    }
                } else if e.is_no_records_found() {
                    DnsError::NoRecords {
                        name: name.to_owned(),
                        record_type: record_type_name(record_type),
                    }
                } else {
                    DnsError::Failed {
                        name: name.to_owned(),
                        message: e.to_string(),
                    }
                }
            })
    }

    /// The TXT records at `name`, each record's strings joined, and the
    /// smallest TTL (capped at [`MAX_TTL`]).
    ///
    /// # Errors
    /// [`DnsError`].
    pub async fn txt(&self, name: &str) -> Result<(Vec<String>, u32), DnsError> {
        let lookup = self.lookup(name, RecordType::TXT).await?;
        let mut ttl = MAX_TTL;
        let mut out = Vec::new();
        for record in lookup.answers() {
            if let RData::TXT(txt) = &record.data {
                ttl = ttl.min(record.ttl);
                out.push(joined(txt));
                if out.len() == MAX_TXT_RECORDS {
                    break;
                }
            }
        }
        Ok((out, ttl))
    }

    /// Whether the name `name` exists: `false` only when DNS says
    /// NXDOMAIN, which holds for every name below it too (RFC 8020); a
    /// name with no records of its own (an empty non-terminal) exists.
    ///
    /// # Errors
    /// [`DnsError::Failed`].
    pub async fn exists(&self, name: &str) -> Result<bool, DnsError> {
        match self.lookup(name, RecordType::TXT).await {
            Ok(_) | Err(DnsError::NoRecords { .. }) => Ok(true),
            Err(DnsError::NxDomain { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The preferred SRV target and port at `name`, if any.
    ///
    /// # Errors
    /// [`DnsError::Failed`]; a missing record is `Ok(None)`.
    pub async fn srv(&self, name: &str) -> Result<Option<(String, u16)>, DnsError> {
        match self.lookup(name, RecordType::SRV).await {
            Ok(lookup) => Ok(lookup
                .answers()
                .iter()
                .filter_map(|r| match &r.data {
                    RData::SRV(srv) => Some((
                        srv.priority,
                        std::cmp::Reverse(srv.weight),
                        srv.target.to_ascii(),
                        srv.port,
                    )),
                    _ => None,
                })
                .min()
                .map(|(_, _, target, port)| {
                    (target.trim_end_matches('.').to_ascii_lowercase(), port)
                })),
            Err(DnsError::NxDomain { .. } | DnsError::NoRecords { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The SVCB records at `name` (DNS-AID), at most [`MAX_SVCB_RECORDS`],
    /// in answer order; none when the name or the type does not exist.
    ///
    /// # Errors
    /// [`DnsError::Failed`].
    pub async fn svcb(&self, name: &str) -> Result<Vec<hickory_proto::rr::rdata::SVCB>, DnsError> {
        match self.lookup(name, RecordType::SVCB).await {
            Ok(lookup) => Ok(lookup
                .answers()
                .iter()
                .filter_map(|r| match &r.data {
                    RData::SVCB(svcb) => Some(svcb.clone()),
                    _ => None,
                })
                .take(MAX_SVCB_RECORDS)
                .collect()),
            Err(DnsError::NxDomain { .. } | DnsError::NoRecords { .. }) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// The addresses of `host` (A and AAAA), at most [`MAX_ADDRESSES`].
    ///
    /// # Errors
    /// [`DnsError`] when there is none.
    pub async fn addresses(&self, host: &str) -> Result<Vec<IpAddr>, DnsError> {
        if let Ok(ip) = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            return Ok(vec![ip]);
        }
        // A and AAAA in parallel: one round trip, not two.
        let (v4, v6) = tokio::join!(
            self.lookup(host, RecordType::A),
            self.lookup(host, RecordType::AAAA)
        );
        let mut out = Vec::new();
        let mut first_error = None;
        for answer in [v4, v6] {
            match answer {
                Ok(lookup) => out.extend(lookup.answers().iter().filter_map(|r| match &r.data {
                    RData::A(a) => Some(IpAddr::V4(a.0)),
                    RData::AAAA(a) => Some(IpAddr::V6(a.0)),
                    _ => None,
                })),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        out.truncate(MAX_ADDRESSES);
        match (out.is_empty(), first_error) {
            (false, _) => Ok(out),
            (true, Some(e)) => Err(e),
            (true, None) => Err(DnsError::NoRecords {
                name: host.to_owned(),
                record_type: "A/AAAA",
            }),
        }
    }
}

fn record_type_name(t: RecordType) -> &'static str {
    match t {
        RecordType::TXT => "TXT",
        RecordType::SRV => "SRV",
        RecordType::A => "A",
        RecordType::AAAA => "AAAA",
        _ => "other",
    }
}

/// The negative-caching time of an NXDOMAIN or NODATA answer (RFC 2308
/// 5: the SOA's MINIMUM, bounded by the SOA record's own TTL).
fn negative_ttl(e: &hickory_resolver::net::NetError) -> Option<u32> {
    use hickory_resolver::net::{DnsError as Semantic, NetError};
    match e {
        NetError::Dns(Semantic::NoRecordsFound(nr)) => nr
            .negative_ttl
            .or_else(|| nr.soa.as_ref().map(|soa| soa.data.minimum.min(soa.ttl))),
        _ => None,
    }
}
