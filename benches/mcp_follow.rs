//! MCP follow: how long a node takes to follow an MCP registry of
//! `--servers` servers from empty, and to catch up one day of its changes
//! (`--changes`: new versions, deprecations, deletions and new servers,
//! in the proportions below), with the node's `Follower` (`crawl::follow`)
//! in this process against the testbed's registry (`testbed::upstream`,
//! HTTPS with a test CA on loopback), at the default politeness
//! (`[crawl]`: 250 ms between the starts of two requests to a host), 100
//! servers a page.
//!
//! Baseline in the same run: the bulk import of the same servers from one
//! list document (`agentmesh import --format mcp-registry`, the
//! `Importer` fed the document in memory), which fetches nothing: what is
//! left of the follow's time beyond it is the fetching and the paging.
//!
//! Each of `--runs` runs starts from an empty store; medians are printed,
//! then min and max.
//!
//! Run:
//!
//! ```sh
//! cargo bench --bench mcp_follow
//! cargo bench --bench mcp_follow -- --servers 30000 --changes 600 --runs 3
//! ```

// Only the CPU model and the load average are read here.
#[allow(dead_code)]
#[path = "common/machine.rs"]
mod machine;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentmesh::config::CrawlConfig;
use agentmesh::crawl::follow::Follower;
use agentmesh::crawl::{AllowedPorts, Crawler, CrawlerOptions};
use agentmesh::formats::mcp::{rfc3339, OFFICIAL_META};
use agentmesh::issuer::Issuer;
use agentmesh::net::AddressPolicy;
use agentmesh::registry::import::{ImportFormat, ImportLimits, Importer};
use agentmesh::registry::Registry;
use agentmesh::store::Store;
use agentmesh::testbed::certs::TestCa;
use agentmesh::testbed::upstream::UpstreamRegistry;
use anyhow::{bail, ensure, Context as _};
use serde_json::{json, Value};

/// When the upstream's servers were published (unix seconds).
const T0: u64 = 1_760_000_000;

struct Args {
    servers: usize,
    changes: usize,
    runs: usize,
}

impl Args {
    fn parse() -> anyhow::Result<Self> {
        let mut a = Self {
            servers: 30_000,
            changes: 600,
            runs: 3,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--servers" => a.servers = value()?.parse()?,
                "--changes" => a.changes = value()?.parse()?,
                "--runs" => a.runs = value()?.parse()?,
                // What `cargo bench` passes to every bench.
                "--bench" => {}
                other => bail!("unknown flag {other}"),
            }
        }
        ensure!(
            a.servers > 0 && a.runs > 0,
            "--servers and --runs must be above zero"
        );
        Ok(a)
    }
}

/// A `server.json` the size of the registry's (a remote, a package, a
/// repository, a description of 60 to 100 characters).
fn server(i: usize, version: &str) -> Value {
    let name = format!("io.github.user{:05}/server-{i}", i % 9973);
    json!({
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": name,
        "title": format!("Server {i}"),
        "description": format!("Reads and writes the records of service number {i} for agents, with search"),
        "version": version,
        "repository": {"url": format!("https://github.com/user{:05}/server-{i}", i % 9973), "source": "github"},
        "remotes": [{"type": "streamable-http", "url": format!("https://mcp{i}.example.com/mcp")}],
        "packages": [{"registryType": "npm", "identifier": format!("@user{:05}/server-{i}", i % 9973),
                      "version": version, "transport": {"type": "stdio"}}],
    })
}

fn name(i: usize) -> String {
    server(i, "1.0.0")["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// One day of changes: of every 6, 3 new versions, 1 deprecation, 1
/// deletion, 1 new server.
fn change(upstream: &UpstreamRegistry, servers: usize, k: usize, at: u64) {
    let i = (k * 7919) % servers;
    match k % 6 {
        0..=2 => upstream.publish(server(i, "1.1.0"), at),
        3 => upstream.set_status(&name(i), "deprecated", Some("use the next major"), at),
        4 => upstream.set_status(&name(i), "deleted", None, at),
        _ => upstream.publish(server(servers + k, "1.0.0"), at),
    }
}

struct Run {
    import_secs: f64,
    follow_secs: f64,
    pages: u64,
    catch_up_secs: f64,
    catch_up_pages: u64,
    held: u64,
}

fn options(ca_file: &std::path::Path, port: u16) -> CrawlerOptions {
    CrawlerOptions {
        ca_files: vec![ca_file.to_path_buf()],
        policy: AddressPolicy {
            allow_private: true,
        },
        allowed_ports: AllowedPorts::new([port]),
        ..CrawlerOptions::from_config(&CrawlConfig::default())
    }
}

fn registry_in(dir: &std::path::Path) -> anyhow::Result<Registry> {
    let store = Store::open(&dir.join("store"), 64 << 20)?;
    let key = Arc::new(agentmesh::identity::generate());
    let issuer = Issuer::new(store, key, Duration::from_secs(30 * 86_400));
    Ok(Registry::new(issuer))
}

async fn one_run(args: &Args, ca: &TestCa, ca_file: &std::path::Path) -> anyhow::Result<Run> {
    let upstream = UpstreamRegistry::start(ca).await?;
    let mut items = Vec::with_capacity(args.servers);
    for i in 0..args.servers {
        let s = server(i, "1.0.0");
        upstream.publish(s.clone(), T0 + i as u64);
        items.push(
            json!({"server": s, "_meta": {OFFICIAL_META: {"status": "active",
            "publishedAt": rfc3339(T0 + i as u64), "isLatest": true}}}),
        );
    }
    // Baseline: the bulk import of the same servers, nothing fetched.
    let dir = tempfile::tempdir()?;
    let document = serde_json::to_vec(&json!({ "servers": items }))?;
    let imported = registry_in(dir.path())?;
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    let started = Instant::now();
    let summary = Importer::new(imported, ImportLimits::default())
        .with_format(ImportFormat::McpRegistry)
        .run(std::io::Cursor::new(document), tx)
        .await;
    let import_secs = started.elapsed().as_secs_f64();
    drain.await?;
    ensure!(
        summary.created == args.servers as u64,
        "import: {summary:?}"
    );

    // The follow, from empty.
    let dir = tempfile::tempdir()?;
    let registry = registry_in(dir.path())?;
    let store = registry.store().clone();
    let crawler = Crawler::new(
        options(ca_file, upstream.addr().port()),
        Arc::new(agentmesh::identity::generate()),
        "bench".into(),
    )?;
    let follower = Follower::new(crawler, registry, Duration::from_secs(900));
    let base = upstream.base_url();
    let started = Instant::now();
    let first = follower.pass(&base).await;
    let follow_secs = started.elapsed().as_secs_f64();
    ensure!(first.last_error.is_none(), "follow: {first:?}");
    ensure!(first.created == args.servers as u64, "follow: {first:?}");

    // One day of changes, then the catch-up.
    let day = T0 + args.servers as u64 + 86_400;
    for k in 0..args.changes {
        change(&upstream, args.servers, k, day + k as u64);
    }
    let started = Instant::now();
    let caught = follower.pass(&base).await;
    let catch_up_secs = started.elapsed().as_secs_f64();
    ensure!(caught.last_error.is_none(), "catch-up: {caught:?}");
    Ok(Run {
        import_secs,
        follow_secs,
        pages: first.pages,
        catch_up_secs,
        catch_up_pages: caught.pages - first.pages,
        held: store.len(),
    })
}

fn stats(mut xs: Vec<f64>) -> (f64, f64, f64) {
    xs.sort_by(f64::total_cmp);
    (xs[xs.len() / 2], xs[0], xs[xs.len() - 1])
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse()?;
    let defaults = CrawlConfig::default();
    println!(
        "mcp_follow bench: {} servers, {} changes in the day, {} runs; default politeness \
         (per host {} at once, {:?} apart), 100 servers a page",
        args.servers,
        args.changes,
        args.runs,
        defaults.per_host_concurrency,
        defaults.per_host_interval,
    );
    let ca = TestCa::new(&["agentmesh bench CA"])?;
    let dir = tempfile::tempdir()?;
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.ca_pem())?;
    let mut runs = Vec::new();
    for _ in 0..args.runs {
        runs.push(one_run(&args, &ca, &ca_file).await?);
    }
    let row = |what: &str, xs: Vec<f64>| {
        let (median, min, max) = stats(xs);
        println!("{what:<40} median {median:>8.2} s  (min {min:.2}, max {max:.2})");
    };
    row(
        "bulk import, from one document",
        runs.iter().map(|r| r.import_secs).collect(),
    );
    row(
        "follow from empty",
        runs.iter().map(|r| r.follow_secs).collect(),
    );
    row(
        "catch up one day of changes",
        runs.iter().map(|r| r.catch_up_secs).collect(),
    );
    let r = &runs[0];
    println!(
        "pages: {} from empty, {} for the day; servers held after the day: {}",
        r.pages, r.catch_up_pages, r.held
    );
    println!(
        "machine: {} cpus, {}, load {}",
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        machine::cpu_model(),
        machine::load_average()
    );
    Ok(())
}
