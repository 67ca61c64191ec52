//! The testbed (docs/protocol.md#testbed): a synthetic population of ADP agents
//! served over real protocols on loopback, in process.
//!
//! [`Testbed::start`] binds, on 127.0.0.1 by default:
//! - an authoritative DNS server (hickory-server, UDP and TCP on one port)
//!   answering `TXT _agent.{d}`, `SRV _agent._tcp.{d}` and `A {d}` for
//!   every agent ([`dns`]);
//! - one HTTPS port for all agents, with a test CA made at start
//!   ([`certs`]), serving each agent's `/.well-known/agent.json`, its
//!   landing page and its `/agent/chat` WebSocket challenge by Host/SNI
//!   ([`web`]);
//! - a plain-HTTP port serving the same sites (for [`Behaviour::PlainHttp`]).
//!
//! Populations come from [`population`]: generated from a seed, `N`
//! healthy agents plus any number of agents that misbehave in exactly one
//! way ([`Behaviour`]). [`publish`] renders what each agent publishes once
//! the ports are known. [`synthetic_agent`] makes generated AIDIP
//! registrations (the benchmarks' population). [`agents`] serves, on a
//! listener of its own, invokable AIDIP, MCP and A2A agents that
//! misbehave on request (for the invocation gateway's tests).
//!
//! Users: the crawler's integration tests, `agentmesh demo`, the
//! simulations, and `agentmesh agent-host` (which serves one agent's
//! site with [`web::serve`] and [`web::AgentSite`], without the rest).
//!
//! The handle is a drop guard: dropping a [`Testbed`] aborts its tasks;
//! [`Testbed::shutdown`] stops it gracefully.

pub mod agents;
pub mod certs;
pub mod dns;
pub mod dnssec;
pub mod formats;
pub mod population;
pub mod publish;
mod synthetic;
pub mod upstream;
pub(crate) mod vocab;
pub mod web;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{info, info_span, warn, Instrument};

pub use certs::TestCa;
pub use population::{Agent, Behaviour, Population, PopulationConfig, Rotation};
pub use publish::Ports;
pub use synthetic::{
    synthetic_agent, SYNTHETIC_CAPABILITIES, SYNTHETIC_DOMAINS, SYNTHETIC_LANGUAGES,
};
pub use web::{agent_router, AgentSite, Drip, SiteCounts, Sites};

use crate::adp::AgentDocument;

/// How long [`Testbed::shutdown`] waits for each part to stop.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the testbed could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestbedError {
    /// A listener could not be bound.
    #[error("cannot bind the testbed's {what} listener on {addr}: {source}")]
    Bind {
        /// `dns`, `https` or `http`.
        what: &'static str,
        /// The address asked for.
        addr: SocketAddr,
        /// The socket error.
        #[source]
        source: io::Error,
    },
    /// A test certificate could not be made.
    #[error("test certificate: {reason}")]
    Certificate {
        /// What failed.
        reason: String,
    },
    /// A name could not be put in the DNS zone.
    #[error("DNS record for {name}: {reason}")]
    Dns {
        /// The owner name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
}

/// Where the testbed listens, the address its agents resolve to, and how
/// slow agents drip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestbedOptions {
    /// DNS, UDP and TCP on the same port (port 0: ephemeral).
    pub dns: SocketAddr,
    /// HTTPS and WSS for all agents.
    pub https: SocketAddr,
    /// Plain HTTP (the `PlainHttp` agents' `wk` points here).
    pub http: SocketAddr,
    /// The address every agent's A record points to (default 127.0.0.1):
    /// where crawlers reach the HTTPS listener. A testbed listening on
    /// `0.0.0.0` in a container advertises the container's address.
    /// `PrivateTarget` agents still resolve to 10.0.0.1.
    pub advertise: Ipv4Addr,
    /// The drip rate of `SlowBody` agents.
    pub drip: Drip,
    /// Also serve the formats organisation (`formats.test`,
    /// [`formats`]): publishers of every other discovery format.
    pub formats: bool,
}

impl Default for TestbedOptions {
    fn default() -> Self {
        let any = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        Self {
            dns: any,
            https: any,
            http: any,
            advertise: publish::AGENT_ADDRESS,
            drip: Drip::default(),
            formats: false,
        }
    }
}

/// A running testbed; dropping it aborts its tasks.
pub struct Testbed {
    population: Arc<Population>,
    ports: Ports,
    dns_addr: SocketAddr,
    https_addr: SocketAddr,
    http_addr: SocketAddr,
    advertise: Ipv4Addr,
    ca: TestCa,
    sites: Arc<Sites>,
    formats: Option<formats::FormatsOrg>,
    dns: Option<dns::DnsServer>,
    token: CancellationToken,
    tasks: JoinSet<()>,
}

impl std::fmt::Debug for Testbed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Testbed")
            .field("agents", &self.population.len())
            .field("dns_addr", &self.dns_addr)
            .field("https_addr", &self.https_addr)
            .field("http_addr", &self.http_addr)
            .finish_non_exhaustive()
    }
}

async fn bind_tcp(what: &'static str, addr: SocketAddr) -> Result<TcpListener, TestbedError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| TestbedError::Bind { what, addr, source })
}

fn local_addr(
    what: &'static str,
    addr: SocketAddr,
    l: &TcpListener,
) -> Result<SocketAddr, TestbedError> {
    l.local_addr()
        .map_err(|source| TestbedError::Bind { what, addr, source })
}

impl Testbed {
    /// Binds the listeners, renders what every agent publishes, and serves
    /// it until [`Testbed::shutdown`] or drop. Must run inside a tokio
    /// runtime.
    ///
    /// # Errors
    /// [`TestbedError::Bind`] when a port is taken; the other variants
    /// only for names or certificates that cannot be made.
    pub async fn start(
        population: Population,
        options: TestbedOptions,
    ) -> Result<Self, TestbedError> {
        let started = std::time::Instant::now();
        let https = bind_tcp("https", options.https).await?;
        let http = bind_tcp("http", options.http).await?;
        let https_addr = local_addr("https", options.https, &https)?;
        let http_addr = local_addr("http", options.http, &http)?;
        let ports = Ports {
            https: https_addr.port(),
            http: http_addr.port(),
        };

        let mut zone = population.zone(ports, options.advertise)?;
        let mut names: Vec<String> = population
            .zones()
            .into_iter()
            .map(|z| format!("*.{z}"))
            .collect();
        let formats = options.formats.then(|| {
            let beside = population.healthy_agents().next().map(|a| a.domain.clone());
            formats::formats_org(ports, options.advertise, beside.as_deref())
        });
        if let Some(org) = &formats {
            for (owner, rdata) in &org.records {
                zone.add(owner, rdata.clone())?;
            }
            names.push(format!("*.{}", formats::ZONE));
        }
        names.extend(["127.0.0.1".to_owned(), "::1".to_owned()]);
        let ca = TestCa::new(&names)?;

        let population = Arc::new(population);
        let token = CancellationToken::new();
        let documents = formats.iter().flat_map(|f| f.documents.clone());
        let sites = Arc::new(
            Sites::new(population.sites(ports, options.drip), token.clone())
                .with_documents(documents),
        );
        let dns = dns::DnsServer::start(options.dns, zone).await?;
        let dns_addr = dns.local_addr();

        let mut tasks = JoinSet::new();
        let span = info_span!("testbed_https", addr = %https_addr);
        tasks.spawn(web::serve(https, Some(ca.server_config()), sites.clone()).instrument(span));
        let span = info_span!("testbed_http", addr = %http_addr);
        tasks.spawn(web::serve(http, None, sites.clone()).instrument(span));
        info!(
            agents = population.len(),
            dns = %dns_addr,
            https = %https_addr,
            http = %http_addr,
            advertise = %options.advertise,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "testbed started"
        );
        Ok(Self {
            population,
            ports,
            dns_addr,
            https_addr,
            http_addr,
            advertise: options.advertise,
            ca,
            sites,
            formats,
            dns: Some(dns),
            token,
            tasks,
        })
    }

    /// The DNS server (UDP and TCP): what `--resolver` takes.
    pub fn dns_addr(&self) -> SocketAddr {
        self.dns_addr
    }

    /// The HTTPS/WSS listener.
    pub fn https_addr(&self) -> SocketAddr {
        self.https_addr
    }

    /// The HTTPS/WSS port (also the SRV port and the port in every URL).
    pub fn https_port(&self) -> u16 {
        self.https_addr.port()
    }

    /// The plain-HTTP listener.
    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    /// The address the agents' A records point to.
    pub fn advertise(&self) -> Ipv4Addr {
        self.advertise
    }

    /// Both ports.
    pub fn ports(&self) -> Ports {
        self.ports
    }

    /// The test CA's certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        self.ca.ca_pem()
    }

    /// The test CA.
    pub fn ca(&self) -> &TestCa {
        &self.ca
    }

    /// Writes the CA certificate (PEM) to `path`, for `--ca-file`.
    ///
    /// # Errors
    /// [`TestbedError::Io`].
    pub fn write_ca(&self, path: &Path) -> Result<(), TestbedError> {
        std::fs::write(path, self.ca.ca_pem()).map_err(|source| TestbedError::Io {
            path: path.to_owned(),
            source,
        })
    }

    /// A rustls client configuration (ring provider, TLS 1.3 and 1.2)
    /// that trusts only the test CA.
    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        self.ca.client_config()
    }

    /// The population served.
    pub fn population(&self) -> &Population {
        &self.population
    }

    /// A shared handle on the population served.
    pub fn population_arc(&self) -> Arc<Population> {
        self.population.clone()
    }

    /// The canonical `https://{domain}:{port}/.well-known/agent.json`.
    pub fn well_known_url(&self, domain: &str) -> Option<String> {
        let agent = self.population.get(domain)?;
        Some(self.population.well_known_url(agent, self.ports))
    }

    /// The `agent.json` the agent at `domain` publishes (before any
    /// misbehaviour mangles its bytes).
    pub fn document(&self, domain: &str) -> Option<AgentDocument> {
        let agent = self.population.get(domain)?;
        Some(self.population.document(agent, self.ports))
    }

    /// The TXT records at `_agent.{domain}`, each one's strings joined.
    pub fn txt_records(&self, domain: &str) -> Vec<String> {
        self.population
            .get(domain)
            .map(|a| {
                self.population
                    .txt_records(a, self.ports)
                    .into_iter()
                    .map(|r| r.concat())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The site of the agent at `domain`: what it served, and the
    /// switches a test turns while it serves (`refuse_with`,
    /// `set_chat_down`).
    pub fn site(&self, domain: &str) -> Option<&Arc<web::AgentSite>> {
        self.sites.get(domain)
    }

    /// What the agent at `domain` has served so far.
    pub fn site_counts(&self, domain: &str) -> Option<SiteCounts> {
        self.sites.get(domain).map(|s| s.counts())
    }

    /// What the formats organisation publishes and what a crawl of it
    /// should report (with [`TestbedOptions::formats`]).
    pub fn formats(&self) -> Option<&formats::FormatsOrg> {
        self.formats.as_ref()
    }

    /// How many times the document at `host` and `path` was fetched.
    pub fn document_fetches(&self, host: &str, path: &str) -> u64 {
        self.sites.document_fetches(host, path)
    }

    /// HTTP requests for paths other than the agents' well-known
    /// documents, landing pages and chat (the other formats' documents,
    /// served or 404).
    pub fn other_requests(&self) -> u64 {
        self.sites.other_requests()
    }

    /// Connections the sites' server accepted so far (over TLS, each a
    /// handshake completed), the chat's included.
    pub fn web_connections(&self) -> u64 {
        self.sites.connections()
    }

    /// DNS queries answered so far.
    pub fn dns_queries(&self) -> u64 {
        self.dns.as_ref().map_or(0, |d| d.queries())
    }

    /// Stops accepting, ends slow bodies and open challenges, and waits
    /// (at most 10 s per part) for the servers to stop.
    pub async fn shutdown(mut self) {
        self.token.cancel();
        if let Some(mut dns) = self.dns.take() {
            if tokio::time::timeout(SHUTDOWN_TIMEOUT, dns.shutdown())
                .await
                .is_err()
            {
                warn!("testbed DNS server did not stop within 10 s");
            }
        }
        let tasks = &mut self.tasks;
        let all = async { while tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(SHUTDOWN_TIMEOUT, all).await.is_err() {
            warn!("testbed web servers did not stop within 10 s; aborting them");
        }
        self.tasks.abort_all();
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        self.token.cancel();
        self.tasks.abort_all();
    }
}

#[cfg(test)]
mod tests;
