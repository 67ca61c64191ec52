//! `[api.limits]`: the API's rate limits and daily quotas, and the
//! address ranges of `api.trusted_proxies`. The limits themselves are
//! enforced by the API (`api/limits.rs`); this is only what they are.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[api.limits]`: token buckets per client and per address, one per
/// kind of request, each holding its budget and refilled over `window`;
/// and a daily quota per API key or token subject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Enforce the limits below (on by default).
    pub enabled: bool,
    /// The time a budget refills in: each bucket holds its whole budget
    /// and gains it back evenly over this time.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    /// Reads (`GET` of agents, summaries, health, peers, metrics, the
    /// explorer; filter-only local searches) per window.
    pub reads: u32,
    /// Local free-text searches per window.
    pub text_search: u32,
    /// Local searches ranked by meaning (a node with a semantic model)
    /// per window.
    pub semantic_search: u32,
    /// Searches in mesh scope (the default scope's first page), which ask
    /// peers, per window.
    pub mesh_search: u32,
    /// `POST /resolve` per window.
    pub resolve: u32,
    /// Writes (register, update, delete, suspend, transfer, crawl) per
    /// window.
    pub writes: u32,
    /// `POST /records` per window.
    pub records: u32,
    /// `POST /admin/import` per window.
    pub import: u32,
    /// Requests one API key, token subject or client certificate entry
    /// may make per UTC day; 0: no quota. Counted in memory: a restart starts the day's counts again.
    pub daily_quota: u64,
    /// Most clients and addresses tracked per budget. Buckets idle for a
    /// window are forgotten (they are full again); when the table is
    /// still full, new clients share one overflow bucket.
    pub max_tracked: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            window: Duration::from_secs(60),
            reads: 6000,
            text_search: 1200,
            semantic_search: 600,
            mesh_search: 300,
            resolve: 600,
            writes: 600,
            records: 1200,
            import: 10,
            daily_quota: 1_000_000,
            max_tracked: 100_000,
        }
    }
}

impl LimitsConfig {
    /// The budgets by their dotted key, for validation.
    pub(super) fn budgets(&self) -> [(&'static str, u32); 8] {
        [
            ("api.limits.reads", self.reads),
            ("api.limits.text_search", self.text_search),
            ("api.limits.semantic_search", self.semantic_search),
            ("api.limits.mesh_search", self.mesh_search),
            ("api.limits.resolve", self.resolve),
            ("api.limits.writes", self.writes),
            ("api.limits.records", self.records),
            ("api.limits.import", self.import),
        ]
    }
}

/// An address or a CIDR range (`10.0.0.1`, `10.0.0.0/8`, `fd00::/8`), as
/// `api.trusted_proxies` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct IpRange(ipnet::IpNet);

impl IpRange {
    /// Whether `addr` is in the range (an IPv4 address mapped into IPv6
    /// counts as the IPv4 address).
    pub fn contains(&self, addr: IpAddr) -> bool {
        let addr = match addr {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
            v4 => v4,
        };
        self.0.contains(&addr)
    }
}

impl FromStr for IpRange {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if let Ok(net) = s.parse::<ipnet::IpNet>() {
            return Ok(Self(net.trunc()));
        }
        s.parse::<IpAddr>()
            .map(|a| Self(ipnet::IpNet::from(a)))
            .map_err(|_| format!("{s:?} is neither an IP address nor a CIDR range"))
    }
}

impl TryFrom<String> for IpRange {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<IpRange> for String {
    fn from(r: IpRange) -> String {
        r.to_string()
    }
}

impl fmt::Display for IpRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A single address is shown as written: without its full-length
        // prefix.
        if self.0.prefix_len() == self.0.max_prefix_len() {
            write!(f, "{}", self.0.addr())
        } else {
            write!(f, "{}", self.0)
        }
    }
}
