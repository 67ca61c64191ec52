//! Where a crawl connects: a URL a publisher gave (the TXT record's `wk`,
//! `endpoints.chat`, an endpoint to probe) parsed, TLS required, the SRV
//! record's target and port applied to a URL on the agent's domain that
//! names no port, the port checked against the
//! [`AllowedPorts`](super::options::AllowedPorts), and the host resolved to the
//! addresses the [`AddressPolicy`](crate::net::AddressPolicy) allows.
//! Nothing connects here.

use std::net::IpAddr;

use url::Url;

use super::dns::Dns;
use super::error::CrawlError;
use super::fetch;
use super::options::CrawlerOptions;

/// A host name resolved during a crawl, with its permitted addresses.
#[derive(Debug, Clone)]
pub(super) struct Resolved {
    /// The name asked (the SRV target, when one applied).
    pub(super) lookup_host: String,
    /// Its addresses the policy allows.
    pub(super) ips: Vec<IpAddr>,
}

/// The URL to connect to and its checked addresses. An SRV record for
/// the agent's `domain` supplies the port (and target host) of URLs on
/// the domain that name no port. `known` is a host already resolved in
/// this crawl (its addresses are reused, not asked again).
pub(super) async fn resolve(
    dns: &Dns,
    options: &CrawlerOptions,
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
    fetch::check_literal_host(&url, options.policy)?;
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
    options.allowed_ports.check(&url)?;
    let ips = match known {
        Some(k) if k.lookup_host == lookup_host => k.ips.clone(),
        _ => dns.addresses(&lookup_host).await?,
    };
    let ips = fetch::allowed(&host, &ips, options.policy)?;
    Ok((url, Resolved { lookup_host, ips }))
}

/// The addresses, for a step's detail.
pub(super) fn join(ips: &[IpAddr]) -> String {
    ips.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
