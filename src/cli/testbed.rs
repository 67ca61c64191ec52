//! `agentmesh testbed`: serve a generated ADP population (DNS, HTTPS, WSS)
//! until SIGINT or SIGTERM, for a mesh of nodes to crawl: the
//! docker-compose mesh runs it in its own container.
//!
//! With `--out DIR` it writes what the nodes need: `ca.pem` (the test CA,
//! for `crawl.ca_files`), `org{n}.domains` (one domain per line, for
//! `crawl.seed_files`) and, last, `ready`, which it removes again when it
//! stops. Each file is written to a temporary name and renamed, so a
//! reader never sees half of one.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;

use crate::testbed::{Behaviour, Population, PopulationConfig, Testbed, TestbedOptions};

/// The misbehaving agents served when `--broken` is not given: failures
/// a crawler reports without waiting for a timeout, and none that points
/// at an address outside the testbed.
pub(super) const DEFAULT_BROKEN: [Behaviour; 4] = [
    Behaviour::TxtMissing,
    Behaviour::FingerprintMismatch,
    Behaviour::WrongDomain,
    Behaviour::ChallengeBadSignature,
];

/// Flags of `testbed`.
#[derive(Debug, Clone, Args)]
pub struct TestbedArgs {
    /// Healthy agents.
    #[arg(long, default_value_t = 30, value_name = "N")]
    pub agents: usize,
    /// Organisation zones (org1.test, org2.test, ...) the agents are split
    /// into, ceil(total / K) agents each; broken agents come last.
    #[arg(long, default_value_t = 3, value_name = "K")]
    pub orgs: usize,
    /// Every domain, key and name derives from the seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Misbehaving agents, one per behaviour named (comma-separated or
    /// repeated), or `none` [default: txt_missing, fingerprint_mismatch,
    /// wrong_domain, challenge_bad_signature].
    #[arg(long, value_delimiter = ',', value_name = "BEHAVIOUR", value_parser = parse_broken)]
    pub broken: Option<Vec<Broken>>,
    /// DNS listener, UDP and TCP (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0", value_name = "IP:PORT")]
    pub dns: SocketAddr,
    /// HTTPS and WSS listener for every agent.
    #[arg(long, default_value = "127.0.0.1:0", value_name = "IP:PORT")]
    pub https: SocketAddr,
    /// Plain-HTTP listener (for `plain_http` agents).
    #[arg(long, default_value = "127.0.0.1:0", value_name = "IP:PORT")]
    pub http: SocketAddr,
    /// The address every agent's A record points to: where crawlers reach
    /// the HTTPS listener.
    #[arg(long, default_value = "127.0.0.1", value_name = "IPV4")]
    pub advertise: Ipv4Addr,
    /// Write ca.pem, org1.domains, ... and, last, `ready` here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Also serve the formats organisation (`formats.test`): A2A cards,
    /// an ARD catalog, AID and DNS-AID records, healthy and broken.
    #[arg(long)]
    pub formats: bool,
}

/// One `--broken` value: a misbehaviour, or `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Broken(Option<Behaviour>);

fn parse_broken(s: &str) -> Result<Broken, String> {
    if s.trim().eq_ignore_ascii_case("none") {
        return Ok(Broken(None));
    }
    let names = || {
        Behaviour::misbehaviours()
            .map(Behaviour::name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match s.parse::<Behaviour>() {
        Ok(Behaviour::Healthy) => Err(format!(
            "healthy is not broken (--agents sets the healthy count); one of: {}, none",
            names()
        )),
        Ok(b) => Ok(Broken(Some(b))),
        Err(e) => Err(format!("{e}; one of: {}, none", names())),
    }
}

impl TestbedArgs {
    fn broken(&self) -> Vec<Behaviour> {
        match &self.broken {
            None => DEFAULT_BROKEN.to_vec(),
            Some(list) => list.iter().filter_map(|b| b.0).collect(),
        }
    }

    /// The population to generate, or why the flags do not make one.
    fn population(&self) -> Result<PopulationConfig, String> {
        let broken = self.broken();
        let total = self.agents + broken.len();
        if total == 0 {
            return Err("no agents: give --agents N or some --broken behaviours".into());
        }
        if self.orgs == 0 || self.orgs > total {
            return Err(format!(
                "--orgs must be between 1 and the number of agents ({total})"
            ));
        }
        let agents_per_org = total.div_ceil(self.orgs);
        let filled = total.div_ceil(agents_per_org);
        if filled != self.orgs {
            return Err(format!(
                "{total} agents at {agents_per_org} per org fill {filled} orgs, not {}: \
                 choose another --orgs or --agents",
                self.orgs
            ));
        }
        if self.advertise.is_unspecified() || self.advertise.is_broadcast() {
            return Err(format!(
                "--advertise {} is not an address a crawler can connect to",
                self.advertise
            ));
        }
        let https = self.https.ip();
        if !https.is_unspecified() && https != std::net::IpAddr::V4(self.advertise) {
            return Err(format!(
                "the agents resolve to --advertise {}, but --https listens on {https} only",
                self.advertise
            ));
        }
        Ok(PopulationConfig {
            agents_per_org,
            misbehaving: broken,
            ..PopulationConfig::healthy(self.seed, self.agents)
        })
    }
}

/// Writes `bytes` to `dir/name` through a temporary file and a rename.
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path)
        .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))?;
    Ok(path)
}

/// Removes `path`; a file that is not there is fine.
fn remove_if_present(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// The domains of each organisation, `org1` first, in agent order.
fn domains_by_org(population: &Population) -> Vec<(String, Vec<&str>)> {
    let mut orgs: Vec<(usize, String, Vec<&str>)> = Vec::new();
    for agent in population.agents() {
        match orgs.iter_mut().find(|(_, org, _)| *org == agent.org) {
            Some((_, _, domains)) => domains.push(&agent.domain),
            None => {
                let n = agent
                    .org
                    .strip_prefix("org")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(usize::MAX);
                orgs.push((n, agent.org.clone(), vec![&agent.domain]));
            }
        }
    }
    orgs.sort_by_key(|(n, _, _)| *n);
    orgs.into_iter().map(|(_, org, d)| (org, d)).collect()
}

/// Writes ca.pem, the domain lists and `ready` into `dir`; answers what
/// it wrote, for the summary.
fn write_out(dir: &Path, testbed: &Testbed) -> anyhow::Result<Vec<String>> {
    let mut wrote = Vec::new();
    let ca = write_atomically(dir, "ca.pem", testbed.ca_pem().as_bytes())?;
    wrote.push(ca.display().to_string());
    for (org, domains) in domains_by_org(testbed.population()) {
        let mut text = domains.join("\n");
        text.push('\n');
        let path = write_atomically(dir, &format!("{org}.domains"), text.as_bytes())?;
        wrote.push(format!("{} ({} domains)", path.display(), domains.len()));
    }
    if let Some(org) = testbed.formats() {
        let mut domains: Vec<&str> = org.expected.iter().map(|e| e.domain.as_str()).collect();
        domains.dedup();
        let text: String = domains.iter().map(|d| format!("{d}\n")).collect();
        let path = write_atomically(dir, "formats.domains", text.as_bytes())?;
        wrote.push(format!("{} ({} domains)", path.display(), domains.len()));
    }
    let ready = write_atomically(dir, "ready", b"ready\n")?;
    wrote.push(ready.display().to_string());
    Ok(wrote)
}

/// Runs `testbed` until Ctrl-C or SIGTERM; exit 2 for flags that make no
/// population.
///
/// # Errors
/// When a listener cannot be bound or `--out` cannot be written.
pub(super) async fn run(args: TestbedArgs) -> anyhow::Result<ExitCode> {
    let signal = super::shutdown_signal();
    let config = match args.population() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    // A `ready` left by an earlier run must not announce this one early.
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        remove_if_present(&dir.join("ready"))?;
    }
    let population = Population::generate(&config);
    let options = TestbedOptions {
        dns: args.dns,
        https: args.https,
        http: args.http,
        advertise: args.advertise,
        formats: args.formats,
        ..TestbedOptions::default()
    };
    let testbed = Testbed::start(population, options)
        .await
        .context("starting the testbed")?;
    let wrote = match &args.out {
        Some(dir) => write_out(dir, &testbed)?,
        None => Vec::new(),
    };
    print_summary(&args, &config, &testbed, &wrote);

    signal.await;
    if let Some(dir) = &args.out {
        if let Err(e) = remove_if_present(&dir.join("ready")) {
            tracing::warn!(error = %e, "could not remove the ready file");
        }
    }
    testbed.shutdown().await;
    println!("testbed stopped");
    Ok(ExitCode::SUCCESS)
}

fn print_summary(
    args: &TestbedArgs,
    config: &PopulationConfig,
    testbed: &Testbed,
    wrote: &[String],
) {
    let broken: Vec<&str> = config.misbehaving.iter().map(|b| b.name()).collect();
    println!(
        "testbed: {} agents in {} orgs ({} healthy, {} broken{}{}), seed {}",
        testbed.population().len(),
        args.orgs,
        config.healthy,
        broken.len(),
        if broken.is_empty() { "" } else { ": " },
        broken.join(", "),
        config.seed
    );
    println!("dns:       {} (udp and tcp)", testbed.dns_addr());
    println!("https:     {}", testbed.https_addr());
    println!("http:      {}", testbed.http_addr());
    println!(
        "advertise: {} (every agent's A record)",
        testbed.advertise()
    );
    for w in wrote {
        println!("wrote:     {w}");
    }
    // Where a crawler on another host reaches the DNS server.
    let dns = testbed.dns_addr();
    let resolver = if dns.ip().is_unspecified() {
        SocketAddr::from((testbed.advertise(), dns.port()))
    } else {
        dns
    };
    let ca = match &args.out {
        Some(dir) => dir.join("ca.pem").display().to_string(),
        None => "<ca.pem>".into(),
    };
    if let Some(agent) = testbed.population().healthy_agents().next() {
        println!(
            "try:       agentmesh verify {} --resolver {resolver} --ca-file {ca} --allow-private{}",
            agent.domain,
            match testbed.https_port() {
                443 => String::new(),
                port => format!(" --allow-port {port}"),
            }
        );
    }
    println!("serving until Ctrl-C or SIGTERM");
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn parse(args: &[&str]) -> Result<TestbedArgs, clap::Error> {
        crate::cli::Cli::try_parse_from(["agentmesh", "testbed"].iter().chain(args)).map(
            |c| match c.command {
                crate::cli::Command::Testbed(a) => a,
                other => panic!("parsed as {other:?}"),
            },
        )
    }

    #[test]
    fn defaults_serve_healthy_agents_and_a_few_local_failures() {
        let args = parse(&[]).unwrap();
        let config = args.population().unwrap();
        assert_eq!(config.healthy, 30);
        assert_eq!(config.misbehaving, DEFAULT_BROKEN);
        assert_eq!(config.agents_per_org, 12);
        for b in [Behaviour::PrivateTarget, Behaviour::LoopbackTarget] {
            assert!(!config.misbehaving.contains(&b), "{b} is never a default");
        }
    }

    #[test]
    fn broken_takes_names_lists_and_none() {
        let args = parse(&["--broken", "txt-missing,oversized", "--broken", "slow_body"]).unwrap();
        assert_eq!(
            args.broken(),
            [
                Behaviour::TxtMissing,
                Behaviour::Oversized,
                Behaviour::SlowBody
            ]
        );
        assert!(parse(&["--broken", "none"]).unwrap().broken().is_empty());
        for bad in ["bogus", "healthy"] {
            let e = parse(&["--broken", bad]).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains("txt_missing"), "{e}");
        }
    }

    #[test]
    fn orgs_split_the_agents_evenly_or_are_refused() {
        let config = parse(&["--agents", "6", "--orgs", "2", "--broken", "none"])
            .unwrap()
            .population()
            .unwrap();
        let p = Population::generate(&config);
        let orgs = domains_by_org(&p);
        assert_eq!(orgs.len(), 2);
        assert_eq!(orgs[0].0, "org1");
        assert!(orgs.iter().all(|(_, d)| d.len() == 3));
        for args in [
            &["--orgs", "0"][..],
            &["--agents", "2", "--broken", "none", "--orgs", "3"],
            &["--agents", "0", "--broken", "none"],
            // 10 agents at 2 per org fill 5 orgs, not 6.
            &["--agents", "10", "--broken", "none", "--orgs", "6"],
            &["--advertise", "0.0.0.0"],
            &["--advertise", "10.1.2.3", "--https", "127.0.0.1:0"],
        ] {
            assert!(parse(args).unwrap().population().is_err(), "{args:?}");
        }
        let ok = parse(&["--advertise", "10.1.2.3", "--https", "0.0.0.0:443"]).unwrap();
        assert!(ok.population().is_ok());
    }
}
