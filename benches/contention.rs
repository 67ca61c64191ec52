//! Contention: does a node keep answering reads and mesh searches while it
//! takes a registration burst and runs a crawl? Drives the REAL
//! `agentmesh` binary over HTTP, so the same bench measures any build.
//!
//! Each run starts, on loopback only:
//! - `agentmesh testbed` with `--testbed-agents` healthy ADP agents (DNS,
//!   HTTPS and WSS, its test CA);
//! - node A, crawling through the testbed's resolver and CA, and node B,
//!   bootstrapped to A (`p2p.allow_private_addresses = true`; B has the
//!   same crawl settings, for the re-verification of what A gossips);
//! - `--preload` registrations on A (`POST /agents`), and `--b-agents` on
//!   B with a capability no other agent has, so a mesh search on A for it
//!   asks B.
//!
//! Then, once A, B and the testbed are quiet, two windows of
//! `--window-secs` each, measuring on A:
//! - `GET /agents/{id}` of random preloaded ids, `--get-concurrency`
//!   workers, each paced at `--get-rate` requests/s;
//! - `POST /agents/search` (`scope: mesh`, B's capability),
//!   `--search-concurrency` workers, each paced at `--search-rate`/s;
//!
//! 1. **idle**: nothing else;
//! 2. **loaded**: meanwhile a registration burst on A (`POST /agents` of
//!    new agents, `--burst-concurrency` in flight, back to back) and a crawl
//!    on A of every testbed domain (`POST /crawl`).
//!
//! It prints per phase the count, p50, p95, p99 and max of both probes,
//! the registrations acknowledged and the agents crawled in the loaded
//! window, the CPU each process used, and the machine; then the medians
//! over the runs. Everything, every run, goes to a JSON file too.
//!
//! Run:
//!
//! ```sh
//! cargo bench --bench contention                                  # the binary of this tree
//! cargo bench --bench contention -- --bin /path/to/agentmesh --runs 3
//! AGENTMESH_BIN=/path/to/agentmesh cargo bench --bench contention
//! ```
//!
//! Other flags (defaults): `--window-secs 20`, `--testbed-agents 5000`,
//! `--preload 3000`, `--b-agents 300`, `--get-concurrency 8`,
//! `--get-rate 50`, `--search-concurrency 2`, `--search-rate 10`,
//! `--burst-concurrency 64`, `--burst-rate 0` (registrations per second
//! in all, 0: back to back; a fixed rate keeps the offered load the same
//! for builds that register at different speeds), `--burst-max 200000`, `--no-burst`,
//! `--no-crawl`, `--seed 1`, `--json PATH` (default
//! `target/contention/<unix time>.json`), `--keep` (keep the work
//! directory: node logs and data).
//!
//! Children are killed on exit, error or Ctrl-C; every wait has a
//! deadline; every loop is bounded by its window and a count.

#[path = "contention/load.rs"]
mod load;
#[path = "common/machine.rs"]
mod machine;
#[path = "contention/procs.rs"]
mod procs;
#[path = "contention/report.rs"]
mod report;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde_json::{json, Value};

use load::{ProbeResult, ProbeSetup, Samples};
use procs::{Node, NodeSetup, Testbed};
use report::{cpu_json, cpu_now, load_average, machine, medians, print_run, sha256_of};

/// Command-line knobs.
#[derive(Debug, Clone)]
struct Args {
    bin: PathBuf,
    runs: usize,
    window: Duration,
    testbed_agents: usize,
    preload: usize,
    b_agents: usize,
    get_concurrency: usize,
    get_rate: f64,
    search_concurrency: usize,
    search_rate: f64,
    burst_concurrency: usize,
    /// Registrations per second, all burst workers together (0: back to
    /// back).
    burst_rate: f64,
    burst_max: usize,
    burst: bool,
    crawl: bool,
    seed: u64,
    json: PathBuf,
    keep: bool,
}

/// Most requests one probe worker sends in a window, whatever its pace.
const MAX_PROBES_PER_WORKER: usize = 1_000_000;
/// Organisations the testbed splits its agents into (each one a
/// `POST /crawl` of at most 1000 domains when the population allows).
fn orgs_for(agents: usize) -> usize {
    agents.div_ceil(1000).max(1)
}

impl Args {
    fn parse() -> anyhow::Result<Self> {
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut a = Self {
            bin: std::env::var_os("AGENTMESH_BIN")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_agentmesh"))),
            runs: 1,
            window: Duration::from_secs(20),
            testbed_agents: 5000,
            preload: 3000,
            b_agents: 300,
            get_concurrency: 8,
            get_rate: 50.0,
            search_concurrency: 2,
            search_rate: 10.0,
            burst_concurrency: 64,
            burst_rate: 0.0,
            burst_max: 200_000,
            burst: true,
            crawl: true,
            seed: 1,
            json: PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("target/contention")
                .join(format!("{unix}.json")),
            keep: false,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--bin" => a.bin = PathBuf::from(value()?),
                "--runs" => a.runs = value()?.parse()?,
                "--window-secs" => a.window = Duration::from_secs(value()?.parse()?),
                "--testbed-agents" => a.testbed_agents = value()?.parse()?,
                "--preload" => a.preload = value()?.parse()?,
                "--b-agents" => a.b_agents = value()?.parse()?,
                "--get-concurrency" => a.get_concurrency = value()?.parse()?,
                "--get-rate" => a.get_rate = value()?.parse()?,
                "--search-concurrency" => a.search_concurrency = value()?.parse()?,
                "--search-rate" => a.search_rate = value()?.parse()?,
                "--burst-concurrency" => a.burst_concurrency = value()?.parse()?,
                "--burst-rate" => a.burst_rate = value()?.parse()?,
                "--burst-max" => a.burst_max = value()?.parse()?,
                "--no-burst" => a.burst = false,
                "--no-crawl" => a.crawl = false,
                "--seed" => a.seed = value()?.parse()?,
                "--json" => a.json = PathBuf::from(value()?),
                "--keep" => a.keep = true,
                // cargo bench passes it to every bench.
                "--bench" => {}
                other => bail!("unknown flag {other} (see the top of benches/contention.rs)"),
            }
        }
        if a.runs == 0 || a.window.is_zero() || a.preload == 0 || a.b_agents == 0 {
            bail!("--runs, --window-secs, --preload and --b-agents must be above zero");
        }
        if !a.bin.is_file() {
            bail!("no binary at {} (--bin or AGENTMESH_BIN)", a.bin.display());
        }
        Ok(a)
    }

    fn settings(&self) -> Value {
        json!({
            "window_secs": self.window.as_secs(),
            "testbed_agents": self.testbed_agents,
            "preload": self.preload,
            "b_agents": self.b_agents,
            "get_concurrency": self.get_concurrency,
            "get_rate_per_worker": self.get_rate,
            "search_concurrency": self.search_concurrency,
            "search_rate_per_worker": self.search_rate,
            "burst_concurrency": self.burst_concurrency,
            "burst_rate": self.burst_rate,
            "burst_max": self.burst_max,
            "burst": self.burst,
            "crawl": self.crawl,
            "seed": self.seed,
        })
    }
}

fn probe_json(p: &ProbeResult, window: Duration) -> (Value, Value) {
    let mut search = p.search.summary(window);
    search["partial"] = json!(p.search_partial);
    search["no_peer_asked"] = json!(p.search_no_peer_asked);
    search["empty"] = json!(p.search_empty);
    (p.get.summary(window), search)
}

/// How many "crawl job done" lines node A has logged (a job is one
/// `POST /crawl`, grown by the peers its agents list).
fn crawl_jobs_done(a: &Node) -> usize {
    a.proc
        .stderr_tail(usize::MAX)
        .lines()
        .filter(|l| l.contains("crawl job done"))
        .count()
}

/// The warning and error lines a node has logged so far.
fn warnings(n: &Node) -> Vec<String> {
    n.proc
        .stderr_tail(usize::MAX)
        .lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .map(str::to_owned)
        .collect()
}

/// The warnings logged since `before` of them were: their count and the
/// first one, without its timestamp.
fn new_warnings(n: &Node, before: usize) -> Value {
    let all = warnings(n);
    let first = all.get(before).map(|l| {
        l.split_once(' ')
            .map_or(l.as_str(), |(_, rest)| rest.trim())
    });
    json!({"count": all.len().saturating_sub(before), "first": first})
}

/// One run: fresh processes and data, setup, the idle window, the loaded
/// window. Everything it started is killed when it returns.
async fn run_once(args: &Args, run: usize) -> anyhow::Result<Value> {
    let load_at_start = load_average();
    println!("== run {run}: load average {load_at_start} at start");
    let work = tempfile::Builder::new()
        .prefix("agentmesh-contention-")
        .tempdir()?;
    let dir = work.path().to_owned();
    let http = load::client();
    let setup_started = Instant::now();

    let testbed = Testbed::start(
        &args.bin,
        &dir,
        args.testbed_agents,
        orgs_for(args.testbed_agents),
    )
    .await
    .context("starting the testbed")?;
    println!(
        "testbed: {} agents, dns {}, up in {:.1} s",
        testbed.domains.len(),
        testbed.dns,
        setup_started.elapsed().as_secs_f64()
    );
    let mut a = Node::start(
        &args.bin,
        &dir,
        NodeSetup {
            name: "node-a",
            bootstrap: Vec::new(),
            crawl: Some(&testbed),
        },
    )
    .await
    .context("starting node A")?;
    let a_addr = a.p2p_addr(&http).await?;
    let mut b = Node::start(
        &args.bin,
        &dir,
        NodeSetup {
            name: "node-b",
            bootstrap: vec![a_addr],
            crawl: Some(&testbed),
        },
    )
    .await
    .context("starting node B")?;
    let connected = |h: &Value| h["peers"].as_u64().unwrap_or(0) >= 1;
    let t = a
        .wait_health(&http, Duration::from_secs(30), "B as a peer", connected)
        .await?;
    b.wait_health(&http, Duration::from_secs(30), "A as a peer", connected)
        .await?;
    println!(
        "nodes: A {} and B {} connected after {:.2} s",
        a.url,
        b.url,
        t.as_secs_f64()
    );

    let preload_started = Instant::now();
    load::register_all(&http, &a.url, args.preload, 16, |i| {
        load::document(&format!("pre-{i:06}"), i, None)
    })
    .await
    .context("preloading node A")?;
    let a_preload_secs = preload_started.elapsed().as_secs_f64();
    load::register_all(&http, &b.url, args.b_agents, 8, |i| {
        load::document(&format!("b-{i:06}"), i, Some(load::B_CAPABILITY))
    })
    .await
    .context("registering B's agents")?;
    println!(
        "preload: {} agents on A in {a_preload_secs:.1} s, {} on B",
        args.preload, args.b_agents
    );
    // B's agents reach A by gossip (replication `all`); wait for them so
    // that the idle window does not judge them.
    let want = (args.preload + args.b_agents) as u64;
    let gossip = a
        .wait_health(
            &http,
            Duration::from_secs(120),
            "every agent of A and B",
            |h| h["records"].as_u64().unwrap_or(0) >= want,
        )
        .await?;
    // The mesh search must work before it is measured.
    let r = http
        .post(format!("{}/agents/search", a.url))
        .json(
            &json!({"filters": {"capabilities": [load::B_CAPABILITY]}, "scope": "mesh", "top": 10}),
        )
        .send()
        .await?;
    let asked = r
        .headers()
        .get("x-agentmesh-peers-answered")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    let status = r.status();
    let found = r.json::<Value>().await?.as_array().map_or(0, Vec::len);
    if status != reqwest::StatusCode::OK || asked == 0 || found == 0 {
        bail!("a mesh search on A for B's capability: status {status}, {asked} peers answered, {found} agents");
    }
    let quiet = procs::wait_quiet(
        &[&a.proc, &b.proc, &testbed.proc],
        0.05,
        Duration::from_secs(120),
    )
    .await;
    match quiet {
        Some(d) => println!(
            "settled: A holds B's agents after {:.1} s; quiet after {:.1} s more",
            gossip.as_secs_f64(),
            d.as_secs_f64()
        ),
        None => println!("warning: the processes were still busy after 120 s; measuring anyway"),
    }

    let ids: Arc<Vec<String>> =
        Arc::new((0..args.preload).map(|i| format!("pre-{i:06}")).collect());
    let probe_setup = |phase: u64| ProbeSetup {
        url: a.url.clone(),
        ids: ids.clone(),
        get_concurrency: args.get_concurrency,
        get_rate_per_worker: args.get_rate,
        search_concurrency: args.search_concurrency,
        search_rate_per_worker: args.search_rate,
        seed: args
            .seed
            .wrapping_mul(100)
            .wrapping_add(run as u64 * 10 + phase),
    };

    // 1. idle
    let load_idle = load_average();
    let cpu0 = cpu_now(&a, &b, &testbed);
    let warned0 = (warnings(&a).len(), warnings(&b).len());
    let probes = load::spawn_probes(probe_setup(1), args.window, MAX_PROBES_PER_WORKER);
    let timeline_idle = load::monitor(a.url.clone(), args.window).await;
    let idle = tokio::task::spawn_blocking(move || probes.join())
        .await?
        .map_err(|_| anyhow::anyhow!("the probe thread panicked"))?;
    let cpu1 = cpu_now(&a, &b, &testbed);
    let idle_warnings =
        json!({"node_a": new_warnings(&a, warned0.0), "node_b": new_warnings(&b, warned0.1)});
    let (idle_get, idle_search) = probe_json(&idle, args.window);

    // 2. loaded
    let load_loaded = load_average();
    let records_before = a.health(&http).await?["records"].as_u64().unwrap_or(0);
    let b_records_before = b.health(&http).await?["records"].as_u64().unwrap_or(0);
    let cpu2 = cpu_now(&a, &b, &testbed);
    let warned2 = (warnings(&a).len(), warnings(&b).len());
    let burst = args.burst.then(|| {
        load::Burst::start(
            &a.url,
            run,
            args.burst_concurrency,
            args.burst_rate,
            args.burst_max,
            args.window + Duration::from_secs(5),
        )
    });
    let queued = if args.crawl {
        load::queue_crawl(&http, &a.url, &testbed.domains)
            .await
            .context("queueing the crawl")?
    } else {
        0
    };
    let loaded_started = Instant::now();
    let probes = load::spawn_probes(probe_setup(2), args.window, MAX_PROBES_PER_WORKER);
    let timeline_loaded = load::monitor(a.url.clone(), args.window).await;
    let loaded = tokio::task::spawn_blocking(move || probes.join())
        .await?
        .map_err(|_| anyhow::anyhow!("the probe thread panicked"))?;
    let loaded_secs = loaded_started.elapsed().as_secs_f64();
    let created = burst
        .as_ref()
        .map_or(0, |b| b.created.load(Ordering::Relaxed));
    let records_after = a
        .health(&http)
        .await
        .ok()
        .and_then(|h| h["records"].as_u64());
    let b_records_after = b
        .health(&http)
        .await
        .ok()
        .and_then(|h| h["records"].as_u64());
    let jobs_done = crawl_jobs_done(&a);
    let cpu3 = cpu_now(&a, &b, &testbed);
    let loaded_warnings =
        json!({"node_a": new_warnings(&a, warned2.0), "node_b": new_warnings(&b, warned2.1)});
    let registrations = match burst {
        Some(b) => b.finish().await,
        None => Samples::default(),
    };
    let (loaded_get, loaded_search) = probe_json(&loaded, args.window);
    // What A stored in the window besides the registrations: the crawl
    // (give or take the registrations in flight at either end).
    let crawled = records_after.map(|n| n.saturating_sub(records_before).saturating_sub(created));
    let mut reg = registrations.summary(Duration::from_secs_f64(loaded_secs));
    reg["acknowledged_in_window"] = json!(created);
    reg["acknowledged_per_sec"] = json!(created as f64 / loaded_secs);

    let result = json!({
        "run": run,
        "load_average_at_start": load_at_start,
        "binary": args.bin.display().to_string(),
        "setup": {
            "secs": setup_started.elapsed().as_secs_f64(),
            "a_preload_secs": a_preload_secs,
            "a_preload_per_sec": args.preload as f64 / a_preload_secs,
            "quiet": quiet.is_some(),
        },
        "idle": {
            "load_average": load_idle,
            "get": idle_get,
            "mesh_search": idle_search,
            "cpu_cores": cpu_json(&cpu0, &cpu1),
            "warnings": idle_warnings,
            "records_timeline": timeline_idle,
        },
        "loaded": {
            "load_average": load_loaded,
            "get": loaded_get,
            "mesh_search": loaded_search,
            "registrations": reg,
            "crawl": {
                "queued": queued,
                "stored_in_window": crawled,
                "stored_per_sec": crawled.map(|c| c as f64 / loaded_secs),
                "jobs_done": jobs_done,
                "jobs_queued": queued.div_ceil(1000),
            },
            "records_before": records_before,
            "records_after": records_after,
            // What reached B meanwhile (gossip of the registrations and
            // of the crawled agents).
            "b_records_before": b_records_before,
            "b_records_after": b_records_after,
            "cpu_cores": cpu_json(&cpu2, &cpu3),
            "warnings": loaded_warnings,
            "records_timeline": timeline_loaded,
        },
    });
    print_run(&result);
    if args.keep {
        let kept = work.keep();
        println!("kept {}", kept.display());
    }
    // The nodes and the testbed are killed here (drop), then the work
    // directory removed.
    drop((a, b, testbed));
    Ok(result)
}

async fn run_all(args: &Args) -> anyhow::Result<Value> {
    let binary_sha256 = sha256_of(&args.bin)?;
    let machine = machine();
    println!(
        "contention bench: {} ({}), {} run(s) of 2 x {} s; machine: {} cores, {}, load average {}",
        args.bin.display(),
        &binary_sha256[..12],
        args.runs,
        args.window.as_secs(),
        machine["nproc"],
        machine["cpu"].as_str().unwrap_or(""),
        machine["load_average"].as_str().unwrap_or(""),
    );
    println!(
        "probes: GET {} x {}/s, mesh search {} x {}/s; load: burst {} ({} in flight, {}), crawl {} ({} domains)",
        args.get_concurrency,
        args.get_rate,
        args.search_concurrency,
        args.search_rate,
        if args.burst { "on" } else { "off" },
        args.burst_concurrency,
        if args.burst_rate > 0.0 {
            format!("{}/s in all", args.burst_rate)
        } else {
            "back to back".into()
        },
        if args.crawl { "on" } else { "off" },
        args.testbed_agents,
    );
    let mut runs = Vec::new();
    for run in 1..=args.runs {
        runs.push(
            run_once(args, run)
                .await
                .with_context(|| format!("run {run}"))?,
        );
    }
    let med = medians(&runs);
    if args.runs > 1 {
        println!("== medians over {} runs", args.runs);
        print_run(&med);
    }
    Ok(json!({
        "bench": "contention",
        "binary": args.bin.display().to_string(),
        "binary_sha256": binary_sha256,
        "machine": machine,
        "load_average_at_end": load_average(),
        "settings": args.settings(),
        "runs": runs,
        "medians": med,
    }))
}

fn main() -> ExitCode {
    let args = match Args::parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime builds");
    let outcome = runtime.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        // On a signal the run's future is dropped, which kills its children.
        tokio::select! {
            r = run_all(&args) => r,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
            _ = term.recv() => Err(anyhow::anyhow!("terminated")),
        }
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    match outcome {
        Ok(report) => {
            let write = || -> anyhow::Result<()> {
                if let Some(parent) = args.json.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&args.json, serde_json::to_string_pretty(&report)?)?;
                Ok(())
            };
            match write() {
                Ok(()) => {
                    println!("wrote {}", args.json.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: cannot write {}: {e:#}", args.json.display());
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
