//! The mesh with N real nodes in one process (`agentmesh::node::Node`,
//! each with its own data directory, its API on 127.0.0.1:0 and libp2p on
//! `/ip4/127.0.0.1/tcp/0`; node i bootstraps to up to 3 random earlier
//! nodes). After the mesh settles it measures, per N:
//!
//! 1. propagation: a fresh agent registered over HTTP on a random node,
//!    until a local-scope search on every other node finds it (and, apart,
//!    until a mesh-scope search on one other node does);
//! 2. search latency: mesh-scope searches from random nodes for a
//!    capability held on other nodes, with a local-scope baseline;
//! 3. wire cost per mesh search, summed over all nodes: search messages
//!    and bytes (the codec's counters), Kademlia requests by kind, and
//!    transport bytes less a quiet interval of the same length;
//! 4. memory (RSS before and after the nodes start, after the workload)
//!    and threads.
//!
//! Each N runs in a child process (a fresh heap for the RSS figures, and a
//! watchdog). Both ends share this machine's cores.
//!
//! Run: `cargo bench --bench mesh` (N = 5 and 50), or
//! `cargo bench --bench mesh -- --nodes 5,50 --trials 30 --searches 200`.
//! Other flags: `--agents-per-node 4`, `--poll-ms 25`, `--seed 7`,
//! `--churn` (a second propagation run after one node is shut down),
//! `--text` (the latency phase searches by free text: the capability's
//! words as the query, not a filter).

#[path = "mesh/harness.rs"]
mod harness;
#[path = "common/machine.rs"]
mod machine;
#[path = "mesh/workload.rs"]
mod workload;

use std::process::Command;
use std::time::{Duration, Instant};

use harness::{machine, Args};

fn main() {
    let args = Args::parse(std::env::args().skip(1));
    if let Some(n) = args.child {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(workload::run(n, &args));
        // Dropping the runtime would wait for sled's and libp2p's
        // background threads; the child is done.
        std::process::exit(0);
    }
    println!(
        "mesh benchmark: nodes {:?}, {} propagation trials, {} searches, {} agents per node, poll every {} ms, seed {}",
        args.nodes, args.trials, args.searches, args.agents_per_node, args.poll_ms, args.seed
    );
    println!("{}", machine());
    for &n in &args.nodes {
        let started = Instant::now();
        let mut cmd = Command::new(std::env::current_exe().expect("own path"));
        cmd.args(args.child_args(n));
        let mut child = cmd.spawn().expect("start the child");
        let limit = Duration::from_secs(args.watchdog_secs);
        let status = loop {
            if let Some(s) = child.try_wait().expect("child status") {
                break Some(s);
            }
            if started.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        match status {
            Some(s) if s.success() => {}
            Some(s) => println!("N = {n}: the child failed ({s})"),
            None => println!("N = {n}: HUNG, killed after {limit:?}"),
        }
    }
}
