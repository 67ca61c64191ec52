//! What the crawler's lookups give back and within which bounds: the TTL
//! cap, how many records and addresses are read, the cache's size,
//! DNSSEC's verdict on an RRset ([`Dnssec`]), and why a lookup failed
//! ([`DnsError`]). Both the resolver and its validating half use them.

/// DNS TTLs are capped here (ADP 10.1).
pub const MAX_TTL: u32 = 3600;
/// Most TXT records read from one RRset.
pub const MAX_TXT_RECORDS: usize = 16;
/// Most SVCB records read from one RRset (DNS-AID).
pub const MAX_SVCB_RECORDS: usize = 16;
/// Most addresses used for one host.
pub const MAX_ADDRESSES: usize = 8;

/// Answers the crawler's resolver caches by default.
pub const CACHE_SIZE: u64 = 4096;

/// What DNSSEC validation says of an RRset (RFC 4035 4.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dnssec {
    /// A chain of signed DNSKEY and DS records from a trust anchor to
    /// the RRset, and its signature verifies.
    Secure {
        /// The records that validated: TXT records with each record's
        /// strings joined (at most [`MAX_TXT_RECORDS`]), SVCB records in
        /// presentation format (at most [`MAX_SVCB_RECORDS`]): what the
        /// crawl reads, or checks its answer against, rather than an
        /// unvalidated answer to another query.
        records: Vec<String>,
        /// The chain of signed records proving the RRset from the trust
        /// anchor ([`crate::dnssec::chain`]), carried with the record
        /// the crawl signs; `None` when it could not be built within its
        /// limits.
        chain: Option<Vec<u8>>,
    },
    /// Provably unsigned (a zone without DNSSEC, or under one).
    Insecure,
    /// It should validate and does not: a signature that fails, or
    /// DNSSEC records the chain says exist are missing. Possibly an attack.
    Bogus {
        /// What failed, as the validator says.
        detail: String,
    },
    /// Not validated: no trust anchor covers the name, or (with the
    /// built-in root anchor only) the resolvers serve no root key to
    /// start a chain from.
    Indeterminate {
        /// Why, as the validator says.
        detail: String,
    },
}

/// Errors from lookups.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum DnsError {
    /// The name does not exist.
    #[error("{name}: no such domain (NXDOMAIN)")]
    NxDomain {
        /// The name looked up.
        name: String,
        /// How long the answer may be cached (RFC 2308: the SOA's
        /// minimum, bounded by its TTL), when the answer carried an SOA.
        negative_ttl: Option<u32>,
    },
    /// The name exists but has no records of the type.
    #[error("{name}: no {record_type} records")]
    NoRecords {
        /// The name looked up.
        name: String,
        /// The record type asked for (`TXT`, `SRV`, `A/AAAA`...).
        record_type: &'static str,
    },
    /// The lookup failed (timeout, SERVFAIL, unreachable server...).
    #[error("{name}: DNS lookup failed: {message}")]
    Failed {
        /// The name looked up.
        name: String,
        /// The resolver's message.
        message: String,
    },
    /// The resolver could not be built.
    #[error("DNS resolver setup: {message}")]
    Setup {
        /// Why the resolver could not be built (the system configuration
        /// could not be read, for one).
        message: String,
    },
}

/// A TXT record's strings, joined.
pub(super) fn joined(txt: &hickory_proto::rr::rdata::TXT) -> String {
    let bytes: Vec<u8> = txt
        .txt_data
        .iter()
        .flat_map(|s| s.iter().copied())
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
