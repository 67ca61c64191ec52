//! What witnessing costs a mesh: N real nodes in one process (the mesh
//! bench's harness), each registering one agent per witness interval so
//! that every checkpoint it publishes is new, run twice in one process:
//! with witnessing at `--interval-secs`, then as the baseline with the
//! interval at a day (no checkpoint published, no witness traffic), under
//! the same registrations. Per node, over the measured window and scaled
//! to an hour: checkpoints-topic messages and bytes (published and
//! received), log-protocol messages and bytes (consistency proofs,
//! cosignatures, repair: the codec's counters), and transport bytes in
//! both directions; the witnessing run less the baseline is what
//! witnessing costs. Traffic per checkpoint does not depend on the
//! interval, so the figures are also given at the default interval
//! (60 s), scaled by checkpoints per hour.
//!
//! Run: `cargo bench --bench witness` (50 nodes, 10 s interval, 12
//! intervals), or `cargo bench --bench witness -- --nodes 50
//! --interval-secs 10 --rounds 12 --seed 7`.

#[allow(dead_code)]
#[path = "mesh/harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "common/machine.rs"]
mod machine;

use std::time::{Duration, Instant};

use agentmesh::mesh::StatsSnapshot;
use rand::SeedableRng;
use serde_json::json;

use harness::{start_nodes_with, stop_nodes, BenchNode};

/// The default `p2p.witness_interval`, seconds.
const DEFAULT_INTERVAL_SECS: f64 = 60.0;

struct Args {
    nodes: usize,
    interval_secs: u64,
    rounds: u32,
    seed: u64,
}

impl Args {
    fn parse() -> Self {
        let mut a = Self {
            nodes: 50,
            interval_secs: 10,
            rounds: 12,
            seed: 7,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || it.next().unwrap_or_default();
            match flag.as_str() {
                "--nodes" => a.nodes = value().parse().unwrap_or(a.nodes),
                "--interval-secs" => a.interval_secs = value().parse().unwrap_or(a.interval_secs),
                "--rounds" => a.rounds = value().parse().unwrap_or(a.rounds),
                "--seed" => a.seed = value().parse().unwrap_or(a.seed),
                _ => {}
            }
        }
        a
    }
}

/// One node's traffic over the window: (checkpoint messages, their
/// bytes, log messages, their bytes, transport bytes), both directions.
fn traffic(before: &StatsSnapshot, after: &StatsSnapshot) -> [f64; 5] {
    let c = |s: &StatsSnapshot| {
        let cw = &s.checkpoint_wire;
        let lw = &s.log_wire;
        [
            (cw.messages_sent + cw.messages_received) as f64,
            (cw.bytes_sent + cw.bytes_received) as f64,
            (lw.messages_sent + lw.messages_received) as f64,
            (lw.bytes_sent + lw.bytes_received) as f64,
            (s.transport.inbound + s.transport.outbound) as f64,
        ]
    };
    let (b, a) = (c(before), c(after));
    std::array::from_fn(|i| a[i] - b[i])
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the workload on `nodes` for `rounds` intervals; each figure's
/// median over the nodes, per hour, and the seconds one round took.
async fn measure(
    nodes: &[BenchNode],
    interval: Duration,
    rounds: u32,
    tag: &str,
) -> ([f64; 5], f64) {
    let before: Vec<StatsSnapshot> = nodes.iter().map(|n| n.node.mesh().stats()).collect();
    let start = Instant::now();
    for round in 0..rounds {
        for (i, n) in nodes.iter().enumerate() {
            let doc = agentmesh::testbed::synthetic_agent(i * 1000 + round as usize);
            let mut doc = doc;
            doc["id"] = json!(format!("{tag}-{i}-{round}"));
            n.node
                .registry()
                .register(doc)
                .await
                .expect("a registration");
        }
        tokio::time::sleep(interval).await;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let hours = elapsed / 3600.0;
    let per_node: Vec<[f64; 5]> = nodes
        .iter()
        .zip(&before)
        .map(|(n, b)| traffic(b, &n.node.mesh().stats()))
        .collect();
    let figures = std::array::from_fn(|k| median(per_node.iter().map(|t| t[k] / hours).collect()));
    (figures, elapsed / f64::from(rounds))
}

async fn run(args: &Args, interval: Duration, tag: &str) -> ([f64; 5], f64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    let nodes = start_nodes_with(args.nodes, &mut rng, |c| {
        c.p2p.witness_interval = interval;
    })
    .await;
    // Let the gossip mesh form before the window opens.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let figures = measure(
        &nodes,
        Duration::from_secs(args.interval_secs),
        args.rounds,
        tag,
    )
    .await;
    stop_nodes(nodes).await;
    figures
}

fn main() {
    let args = Args::parse();
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    println!("## witnessing at {} nodes", args.nodes);
    println!("{}", harness::machine());
    println!(
        "one registration per node per {} s interval, {} intervals; medians over the nodes, per node per hour",
        args.interval_secs, args.rounds
    );
    let (on, round_secs) =
        runtime.block_on(run(&args, Duration::from_secs(args.interval_secs), "on"));
    let (off, _) = runtime.block_on(run(&args, Duration::from_secs(24 * 3600), "off"));
    // A checkpoint per round measured; one per 60 s by default.
    let at_default = round_secs / DEFAULT_INTERVAL_SECS;
    println!("a round (registrations and the interval) took {round_secs:.1} s");
    let names = [
        "checkpoint messages (published + received)",
        "checkpoint message bytes",
        "log protocol messages (sent + received)",
        "log protocol bytes",
        "transport bytes (in + out)",
    ];
    println!("| per node per hour | witnessing every {} s | baseline (none) | difference | difference at 60 s |", args.interval_secs);
    println!("| --- | ---: | ---: | ---: | ---: |");
    for k in 0..5 {
        let diff = on[k] - off[k];
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} |",
            names[k],
            on[k],
            off[k],
            diff,
            diff * at_default
        );
    }
}
