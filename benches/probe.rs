//! Probe: how many registered agents the liveness probe (`crawl::probe`)
//! asks per second at the default politeness, and what a sweep of
//! 100,000 costs. Runs the node's `Prober` in this process against the
//! testbed's invokable agents (`testbed::agents`, TLS with a test CA),
//! one server per host on `127.0.0.1` .. `127.0.0.H`, so that each is a
//! host and an address of its own to the crawler's per-host and
//! per-address limits.
//!
//! Each case registers `--agents` agents spread over its hosts and runs
//! one round of all of them (the round's budget lifted, so what limits it
//! is the politeness and the probe itself), first one probe at a time
//! (the prober before `crawl.probe_concurrency`), then with the default
//! concurrency, in the same run. The politeness is the default
//! (`[crawl]`: 2 requests to a host at once, 250 ms between the starts
//! of a host's requests, 4 per address, 100 ms apart). Two kinds of
//! agent:
//! - `aidip`: an AIDIP agent whose declared health URL answers after
//!   `--latency-ms` (standing in for the network round trips a distant
//!   agent costs; loopback has none): one `GET` per probe;
//! - `mcp`: an MCP server (streamable HTTP, answering at once):
//!   `initialize`, `notifications/initialized`, `tools/list` and the
//!   session's `DELETE`, four requests per probe.
//!
//! Prints per case: agents, hosts, probes per second one at a time and
//! at once, requests per probe; then a sweep of 100,000 agents at the
//! default budget (`crawl.probe_rate` = 2 a second), at the measured
//! rate, and the gossip a sweep of public agents sends (one signed
//! `liveness` record each).
//!
//! Run:
//!
//! ```sh
//! cargo bench --bench probe
//! cargo bench --bench probe -- --agents 400 --latency-ms 100
//! ```

// Only the CPU model and the load average are read here.
#[allow(dead_code)]
#[path = "common/machine.rs"]
mod machine;

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentmesh::config::CrawlConfig;
use agentmesh::crawl::probe::{Prober, DEFAULT_CONCURRENCY};
use agentmesh::crawl::scheduler::SystemClock;
use agentmesh::crawl::{AllowedPorts, Crawler, CrawlerOptions};
use agentmesh::descriptor::{Descriptor, DocumentFormat};
use agentmesh::issuer::{DescriptorIssue, Durability, Issuer};
use agentmesh::net::AddressPolicy;
use agentmesh::record::{LiveState, LivenessRecord, ProbeProtocol, SignedRecord};
use agentmesh::store::{Expect, Origin, Store};
use agentmesh::testbed::agents::{AidipMode, InvokeAgents, McpMode};
use agentmesh::testbed::certs::TestCa;
use anyhow::{bail, ensure, Context as _};
use serde_json::{json, Value};

/// The sweep the closing figures are for.
const SWEEP: f64 = 100_000.0;

struct Args {
    agents: usize,
    latency_ms: u64,
}

impl Args {
    fn parse() -> anyhow::Result<Self> {
        let mut a = Self {
            agents: 256,
            latency_ms: 100,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--agents" => a.agents = value()?.parse()?,
                "--latency-ms" => a.latency_ms = value()?.parse()?,
                // What `cargo bench` passes to every bench.
                "--bench" => {}
                other => bail!("unknown flag {other}"),
            }
        }
        ensure!(a.agents > 0, "--agents is zero");
        Ok(a)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Aidip,
    Mcp,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Aidip => "aidip",
            Self::Mcp => "mcp",
        }
    }
}

/// The agents' servers, one per host.
struct Hosts {
    servers: Vec<InvokeAgents>,
    ca_file: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

async fn hosts(count: u8) -> anyhow::Result<Hosts> {
    let ca = TestCa::new(&["127.0.0.1"])?;
    let dir = tempfile::tempdir()?;
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.ca_pem())?;
    let mut servers = Vec::new();
    for i in 1..=count {
        servers.push(InvokeAgents::start_at(&ca, Ipv4Addr::new(127, 0, 0, i)).await?);
    }
    Ok(Hosts {
        servers,
        ca_file,
        _dir: dir,
    })
}

/// A registration of agent `i` of `kind` on `server`.
fn registration(
    server: &InvokeAgents,
    kind: Kind,
    i: usize,
    latency_ms: u64,
) -> (Descriptor, Value) {
    let id = format!("{}-{i:06}", kind.name());
    let (format, endpoint, document) = match kind {
        Kind::Aidip => {
            let mut doc = server.aidip_document(&id, AidipMode::Ok, "none");
            doc["health"] = json!(format!("/aidip/slow?ms={latency_ms}"));
            let endpoint = doc["endpoint"].as_str().unwrap_or_default().to_owned();
            (DocumentFormat::Aidip, endpoint, doc)
        }
        Kind::Mcp => {
            let url = server.mcp_url(McpMode::Ok);
            let doc = json!({"name": format!("io.bench/{id}"), "description": "echo",
                "version": "1.0.0", "remotes": [{"type": "streamable-http", "url": url}]});
            (DocumentFormat::McpRegistry, url, doc)
        }
    };
    let descriptor = Descriptor {
        id: id.clone(),
        name: id,
        description: "an agent of the probe bench".into(),
        version: None,
        publisher: None,
        endpoint: Some(endpoint),
        capabilities: vec!["echo".into()],
        tags: Vec::new(),
        languages: Vec::new(),
        status: None,
        auth: None,
        format,
    };
    (descriptor, document)
}

/// What one round measured.
struct Round {
    probes: usize,
    alive: usize,
    secs: f64,
    requests: usize,
}

/// One round over `agents` agents of `kind` spread over `hosts`, with
/// `concurrency` probes at once, on a fresh store.
async fn round(
    hosts: &Hosts,
    kind: Kind,
    agents: usize,
    latency_ms: u64,
    concurrency: usize,
) -> anyhow::Result<Round> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path(), 64 << 20)?;
    let key = Arc::new(agentmesh::identity::generate());
    let issuer = Issuer::new(store.clone(), key.clone(), Duration::from_secs(3600));
    for i in 0..agents {
        let server = &hosts.servers[i % hosts.servers.len()];
        let (descriptor, document) = registration(server, kind, i, latency_ms);
        issuer
            .descriptor(DescriptorIssue {
                descriptor,
                document: document.to_string(),
                evidence: agentmesh::trust::Evidence::default(),
                origin: Origin::Local,
                expect: Expect::LocalOrAbsent,
                durability: Durability::Periodic,
            })
            .await?;
    }
    let defaults = CrawlConfig::default();
    let options = CrawlerOptions {
        ca_files: vec![hosts.ca_file.clone()],
        policy: AddressPolicy {
            allow_private: true,
        },
        allowed_ports: AllowedPorts::new(hosts.servers.iter().map(|s| s.addr().port())),
        ..CrawlerOptions::from_config(&defaults)
    };
    let crawler = Crawler::new(options, key, "bench".into())?;
    let prober = Prober::new(
        crawler,
        store,
        Arc::new(SystemClock),
        defaults.probe_interval,
        agents,
    )
    .with_timeout(defaults.probe_timeout)
    .with_concurrency(concurrency);
    let before: usize = hosts.servers.iter().map(|s| s.seen().len()).sum();
    let started = Instant::now();
    let r = prober.round().await?;
    let secs = started.elapsed().as_secs_f64();
    let after: usize = hosts.servers.iter().map(|s| s.seen().len()).sum();
    Ok(Round {
        probes: r.probed,
        alive: r.count(LiveState::Alive),
        secs,
        requests: after - before,
    })
}

fn hours(secs: f64) -> String {
    if secs >= 3600.0 {
        format!("{:.1} h", secs / 3600.0)
    } else {
        format!("{:.0} min", secs / 60.0)
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse()?;
    let defaults = CrawlConfig::default();
    println!(
        "probe bench: {} agents per case, aidip latency {} ms, default politeness \
         (per host {} at once, {:?} apart; per address {} at once, {:?} apart), \
         probe_concurrency {}, probe_rate {}/s",
        args.agents,
        args.latency_ms,
        defaults.per_host_concurrency,
        defaults.per_host_interval,
        defaults.per_address_concurrency,
        defaults.per_address_interval,
        DEFAULT_CONCURRENCY,
        defaults.probe_rate,
    );
    println!(
        "{:<6} {:>6} {:>6} {:>14} {:>14} {:>8} {:>10}",
        "kind", "agents", "hosts", "1 at a time/s", "at once/s", "speedup", "req/probe"
    );
    let mut spread = Vec::new();
    for (kind, host_count) in [
        (Kind::Aidip, 1u8),
        (Kind::Aidip, 16),
        (Kind::Mcp, 1),
        (Kind::Mcp, 16),
    ] {
        let hosts = hosts(host_count).await?;
        let one = round(&hosts, kind, args.agents, args.latency_ms, 1).await?;
        let many = round(
            &hosts,
            kind,
            args.agents,
            args.latency_ms,
            DEFAULT_CONCURRENCY,
        )
        .await?;
        for r in [&one, &many] {
            ensure!(
                r.probes == args.agents && r.alive == args.agents,
                "{} of {} probed, {} alive",
                r.probes,
                args.agents,
                r.alive
            );
        }
        let (a, b) = (one.probes as f64 / one.secs, many.probes as f64 / many.secs);
        if host_count > 1 {
            spread.push((kind.name(), b));
        }
        println!(
            "{:<6} {:>6} {:>6} {:>14.1} {:>14.1} {:>7.1}x {:>10.1}",
            kind.name(),
            args.agents,
            host_count,
            a,
            b,
            b / a,
            many.requests as f64 / many.probes as f64,
        );
    }
    let record = SignedRecord::sign_liveness(
        &LivenessRecord {
            agent_id: "mcp:io.example/a-typical-server-name".into(),
            seq: 1_780_000_000_000,
            state: LiveState::Alive,
            checked_at: 1_780_000_000,
            rtt_ms: 120,
            protocol: ProbeProtocol::Mcp,
        },
        &agentmesh::identity::generate(),
    )?;
    let budget = f64::from(defaults.probe_rate);
    println!(
        "a sweep of {SWEEP} agents at the default budget ({budget}/s): {}; probe_interval is \
         {:?}, so probe_rate {:.0}/s is what sweeps them once per interval",
        hours(SWEEP / budget),
        defaults.probe_interval,
        (SWEEP / defaults.probe_interval.as_secs_f64()).ceil(),
    );
    for (kind, rate) in spread {
        println!(
            "a sweep of {SWEEP} {kind} agents over 16 hosts at the rate measured: {}",
            hours(SWEEP / rate)
        );
    }
    println!(
        "gossip of a sweep of public agents: {} signed liveness records of about {} bytes \
         ({:.1} MB) sent to each gossip peer",
        SWEEP,
        record.encode().len(),
        SWEEP * record.encode().len() as f64 / 1e6,
    );
    println!(
        "machine: {}, load {}",
        machine::cpu_model(),
        machine::load_average()
    );
    Ok(())
}
