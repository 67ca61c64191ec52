//! Scope: what `"scope":"mesh"` (the default) costs a node that has
//! nobody to ask, against `"scope":"local"`. Drives the REAL `agentmesh`
//! binary over HTTP, so the same bench measures any build (before and
//! after a change).
//!
//! One node on loopback, no peers: `agentmesh import` loads `--agents`
//! generated AIDIP agents (`testbed::synthetic_agent`) into a fresh data
//! directory, then `agentmesh node` serves it. After a warm-up, every
//! query of the set (free-text queries, and capability filters) is sent
//! `--rounds` times in each scope, the two scopes alternating query by
//! query so both see the same machine. Both scopes must answer the same
//! ids (checked). Prints count, p50, p95, p99 and max per scope and kind,
//! and the machine.
//!
//! Run:
//!
//! ```sh
//! cargo bench --bench scope                                  # the binary of this tree
//! cargo bench --bench scope -- --bin /path/to/agentmesh --agents 4600 --rounds 20
//! AGENTMESH_BIN=/path/to/agentmesh cargo bench --bench scope
//! ```
//!
//! The node is killed on exit or error; every wait has a deadline.

// Only the CPU model and the load average are read here.
#[allow(dead_code)]
#[path = "common/machine.rs"]
mod machine;
#[path = "common/node.rs"]
mod node;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use serde_json::{json, Value};

/// Free-text queries (words of the generated population, and not).
const TEXT_QUERIES: [&str; 8] = [
    "summarize emails",
    "translate legal documents",
    "speech to text for medical notes",
    "code review",
    "finance sentiment analysis",
    "schedule travel",
    "extract data from invoices in Chinese",
    "caption images for retail",
];
/// Capability filters (no text).
const FILTERS: [&[&str]; 4] = [
    &["translation"],
    &["summarization", "search"],
    &["code_review"],
    &["teleportation"],
];

struct Args {
    bin: PathBuf,
    agents: usize,
    rounds: usize,
}

impl Args {
    fn parse() -> anyhow::Result<Self> {
        let mut a = Self {
            bin: std::env::var_os("AGENTMESH_BIN")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_agentmesh"))),
            agents: 4600,
            rounds: 20,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--bin" => a.bin = PathBuf::from(value()?),
                "--agents" => a.agents = value()?.parse()?,
                "--rounds" => a.rounds = value()?.parse()?,
                // What `cargo bench` passes to every bench.
                "--bench" => {}
                other => bail!("unknown flag {other}"),
            }
        }
        ensure!(a.bin.exists(), "no binary at {}", a.bin.display());
        Ok(a)
    }
}

fn import(bin: &Path, dir: &Path, agents: usize) -> anyhow::Result<Duration> {
    let file = dir.join("agents.jsonl");
    let mut out = BufWriter::new(File::create(&file)?);
    for i in 0..agents {
        serde_json::to_writer(&mut out, &agentmesh::testbed::synthetic_agent(i))?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    let started = Instant::now();
    let status = Command::new(bin)
        .args(["import", &file.display().to_string(), "--data-dir"])
        .arg(dir.join("data"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .status()?;
    ensure!(status.success(), "agentmesh import exited with {status}");
    Ok(started.elapsed())
}

/// One search: its latency, the ids answered and the peers-asked header.
async fn search(
    http: &reqwest::Client,
    url: &str,
    body: &Value,
) -> anyhow::Result<(Duration, Vec<String>, Option<String>)> {
    let started = Instant::now();
    let r = http
        .post(format!("{url}/agents/search"))
        .json(body)
        .timeout(Duration::from_secs(30))
        .send()
        .await?
        .error_for_status()?;
    let asked = r
        .headers()
        .get("x-agentmesh-peers-asked")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let items: Value = r.json().await?;
    let took = started.elapsed();
    let ids = items
        .as_array()
        .context("a search answers an array")?
        .iter()
        .filter_map(|s| s["id"].as_str().map(str::to_owned))
        .collect();
    Ok((took, ids, asked))
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{name:<14} n={:<5} p50={:>8.2} ms  p95={:>8.2} ms  p99={:>8.2} ms  max={:>8.2} ms",
        samples.len(),
        percentile(&samples, 0.50),
        percentile(&samples, 0.95),
        percentile(&samples, 0.99),
        percentile(&samples, 1.0),
    );
}

async fn run(args: Args) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let took = import(&args.bin, dir.path(), args.agents)?;
    println!(
        "imported {} agents in {:.1} s ({})",
        args.agents,
        took.as_secs_f64(),
        args.bin.display()
    );
    let (_node, url) = node::start_node(&args.bin, dir.path(), "")?;
    let http = reqwest::Client::new();

    let mut bodies: Vec<(&str, Value)> = TEXT_QUERIES
        .iter()
        .map(|q| ("text", json!({"query": q, "top": 10})))
        .collect();
    bodies.extend(
        FILTERS
            .iter()
            .map(|c| ("filter", json!({"filters": {"capabilities": c}, "top": 10}))),
    );
    let scoped = |body: &Value, scope: &str| {
        let mut b = body.clone();
        b["scope"] = json!(scope);
        b
    };
    // Warm-up: caches, the index's readers, the connection.
    for (_, body) in &bodies {
        for scope in ["local", "mesh"] {
            search(&http, &url, &scoped(body, scope)).await?;
        }
    }
    let mut samples: BTreeMap<(&str, &str), Vec<Duration>> = BTreeMap::new();
    for round in 0..args.rounds {
        for (kind, body) in &bodies {
            let kind: &'static str = if *kind == "text" { "text" } else { "filter" };
            // Alternate which scope goes first.
            let order = if round % 2 == 0 {
                ["local", "mesh"]
            } else {
                ["mesh", "local"]
            };
            let mut ids = Vec::new();
            for scope in order {
                let (took, found, asked) = search(&http, &url, &scoped(body, scope)).await?;
                if scope == "mesh" {
                    ensure!(
                        asked.as_deref() == Some("0"),
                        "a node without peers asked {asked:?} peers"
                    );
                }
                ids.push(found);
                let scope: &'static str = if scope == "mesh" { "mesh" } else { "local" };
                samples.entry((kind, scope)).or_default().push(took);
            }
            ensure!(ids[0] == ids[1], "the scopes answered differently: {body}");
        }
    }
    println!(
        "\n{} agents, {} rounds of {} queries per scope",
        args.agents,
        args.rounds,
        bodies.len()
    );
    for ((kind, scope), v) in samples {
        report(&format!("{kind}/{scope}"), v);
    }
    println!(
        "\nmachine: {} ({} cores), load average {}",
        machine::cpu_model(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        machine::load_average()
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse()?;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?
        .block_on(run(args))
}
