//! Gateway: what calling an agent through a node (`POST
//! /agents/{id}/invoke`) adds to calling the agent directly. Drives the
//! REAL `agentmesh` binary over HTTP, so the same bench measures any build.
//!
//! The testbed's AIDIP agent (`testbed::agents`, TLS with a test CA) runs
//! in this process; one node (its gateway allowed to reach loopback, the
//! CA trusted, rate limits off) has the agent registered. Then, for
//! `--seconds` each, `--concurrency` clients call the agent's `echo`
//! operation directly and through the node, the two alternating
//! `--rounds` times so both see the same machine. Prints, per way: calls,
//! calls per second, p50, p99, p99.9 and errors; then what the gateway
//! adds at p50 and p99, and the machine.
//!
//! Run:
//!
//! ```sh
//! cargo bench --bench gateway
//! cargo bench --bench gateway -- --seconds 20 --concurrency 32 --rounds 2
//! AGENTMESH_BIN=/path/to/agentmesh cargo bench --bench gateway
//! ```
//!
//! The node is killed on exit or error; every wait has a deadline.

// Only the CPU model and the load average are read here.
#[allow(dead_code)]
#[path = "common/machine.rs"]
mod machine;
#[path = "common/node.rs"]
mod node;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentmesh::testbed::agents::{AidipMode, InvokeAgents};
use agentmesh::testbed::certs::TestCa;
use anyhow::{bail, ensure, Context as _};
use serde_json::{json, Value};

struct Args {
    bin: PathBuf,
    seconds: u64,
    concurrency: usize,
    rounds: usize,
}

impl Args {
    fn parse() -> anyhow::Result<Self> {
        let mut a = Self {
            bin: std::env::var_os("AGENTMESH_BIN")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_agentmesh"))),
            seconds: 15,
            concurrency: 32,
            rounds: 2,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--bin" => a.bin = PathBuf::from(value()?),
                "--seconds" => a.seconds = value()?.parse()?,
                "--concurrency" => a.concurrency = value()?.parse()?,
                "--rounds" => a.rounds = value()?.parse()?,
                // What `cargo bench` passes to every bench.
                "--bench" => {}
                other => bail!("unknown flag {other}"),
            }
        }
        ensure!(a.bin.exists(), "no binary at {}", a.bin.display());
        ensure!(a.concurrency > 0 && a.seconds > 0 && a.rounds > 0, "zero");
        Ok(a)
    }
}

/// What one way of calling measured.
#[derive(Default)]
struct Measured {
    latencies: Vec<Duration>,
    errors: usize,
    elapsed: Duration,
}

/// `concurrency` clients POST `body` to `url` for `seconds`.
async fn load(
    http: &reqwest::Client,
    url: &str,
    body: &Value,
    concurrency: usize,
    seconds: u64,
) -> Measured {
    let until = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (http, url, body) = (http.clone(), url.to_owned(), body.clone());
        tasks.push(tokio::spawn(async move {
            let mut m = Measured::default();
            while Instant::now() < until {
                let t = Instant::now();
                let ok = match http.post(&url).json(&body).send().await {
                    Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                    Err(_) => false,
                };
                if ok {
                    m.latencies.push(t.elapsed());
                } else {
                    m.errors += 1;
                }
            }
            m
        }));
    }
    let mut all = Measured::default();
    for t in tasks {
        if let Ok(m) = t.await {
            all.latencies.extend(m.latencies);
            all.errors += m.errors;
        }
    }
    all.elapsed = started.elapsed();
    all
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// Prints a way's line; answers its p50 and p99 in ms.
fn report(name: &str, m: &mut Measured) -> (f64, f64) {
    m.latencies.sort();
    let (p50, p99, p999) = (
        percentile(&m.latencies, 0.50),
        percentile(&m.latencies, 0.99),
        percentile(&m.latencies, 0.999),
    );
    println!(
        "{name:<10} calls={:<7} {:>8.0}/s  p50={p50:>7.2} ms  p99={p99:>7.2} ms  p99.9={p999:>7.2} ms  errors={}",
        m.latencies.len(),
        m.latencies.len() as f64 / m.elapsed.as_secs_f64(),
        m.errors
    );
    (p50, p99)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse()?;
    let ca = TestCa::new(&["127.0.0.1", "localhost"])?;
    let agents = Arc::new(InvokeAgents::start(&ca).await?);
    let dir = tempfile::tempdir()?;
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.ca_pem())?;
    // The gateway may reach the agent on loopback and trusts its CA.
    let extra = format!(
        "\n[api.limits]\nenabled = false\n\n[crawl]\nallow_private_addresses = true\n\
         allowed_ports = [{}]\nca_files = [{:?}]\n\n[gateway]\nmax_concurrent_per_agent = 1024\n",
        agents.addr().port(),
        ca_file.display().to_string(),
    );
    let (_node, api) = node::start_node(&args.bin, dir.path(), &extra)?;
    let root = reqwest::Certificate::from_pem(ca.ca_pem().as_bytes())?;
    let http = reqwest::Client::builder()
        .add_root_certificate(root)
        .pool_max_idle_per_host(args.concurrency)
        .timeout(Duration::from_secs(30))
        .build()?;
    let doc = agents.aidip_document("bench-echo", AidipMode::Ok, "none");
    let status = http
        .post(format!("{api}/agents"))
        .json(&doc)
        .send()
        .await?
        .status();
    ensure!(status.is_success(), "the registration answered {status}");
    let direct_url = format!("{}/aidip/ok/echo", agents.base_url());
    let direct_body = json!({"text": "hello"});
    let gateway_url = format!("{api}/agents/bench-echo/invoke");
    let gateway_body = json!({"operation": "echo", "input": {"text": "hello"}});
    // A warm-up of each way, unmeasured.
    load(&http, &direct_url, &direct_body, args.concurrency, 2).await;
    load(&http, &gateway_url, &gateway_body, args.concurrency, 2).await;
    let (mut direct, mut gateway) = (Measured::default(), Measured::default());
    for _ in 0..args.rounds {
        let d = load(
            &http,
            &direct_url,
            &direct_body,
            args.concurrency,
            args.seconds,
        )
        .await;
        let g = load(
            &http,
            &gateway_url,
            &gateway_body,
            args.concurrency,
            args.seconds,
        )
        .await;
        for (all, one) in [(&mut direct, d), (&mut gateway, g)] {
            all.latencies.extend(one.latencies);
            all.errors += one.errors;
            all.elapsed += one.elapsed;
        }
    }
    println!(
        "gateway bench: {} clients, {} s x {} rounds per way, agent echo over TLS on loopback",
        args.concurrency, args.seconds, args.rounds
    );
    let (d50, d99) = report("direct", &mut direct);
    let (g50, g99) = report("gateway", &mut gateway);
    println!(
        "added by the gateway: p50 +{:.2} ms, p99 +{:.2} ms",
        g50 - d50,
        g99 - d99
    );
    println!(
        "machine: {} ({} cores), load {}",
        machine::cpu_model(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        machine::load_average()
    );
    Ok(())
}
