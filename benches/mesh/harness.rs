//! Arguments, the machine line, process figures (RSS, threads, file
//! descriptors), percentiles, a deadline-bound wait, and the N-node mesh
//! itself: start, settle, stop.

use std::time::{Duration, Instant};

use agentmesh::config::Config;
use agentmesh::node::Node;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

/// Command-line knobs (`cargo bench --bench mesh -- --nodes 5,50 ...`).
#[derive(Debug, Clone)]
pub(super) struct Args {
    pub nodes: Vec<usize>,
    pub trials: usize,
    pub searches: usize,
    pub agents_per_node: usize,
    pub poll_ms: u64,
    pub seed: u64,
    pub churn: bool,
    /// Searches of the latency phase as free text (the capability's
    /// words, `"query"`) instead of a capability filter.
    pub text: bool,
    pub watchdog_secs: u64,
    /// Set in the child process that runs one N.
    pub child: Option<usize>,
}

impl Args {
    /// Parses the flags; unknown ones (cargo passes `--bench`) are ignored.
    pub(super) fn parse(args: impl Iterator<Item = String>) -> Self {
        let mut a = Self {
            nodes: vec![5, 50],
            trials: 30,
            searches: 200,
            agents_per_node: 4,
            poll_ms: 25,
            seed: 7,
            churn: false,
            text: false,
            watchdog_secs: 1200,
            child: None,
        };
        let mut it = args.peekable();
        while let Some(flag) = it.next() {
            let mut value = || it.next().unwrap_or_default();
            match flag.as_str() {
                "--nodes" => {
                    a.nodes = value()
                        .split(',')
                        .filter_map(|v| v.trim().parse().ok())
                        .collect()
                }
                "--trials" => a.trials = value().parse().unwrap_or(a.trials),
                "--searches" => a.searches = value().parse().unwrap_or(a.searches),
                "--agents-per-node" => {
                    a.agents_per_node = value().parse().unwrap_or(a.agents_per_node)
                }
                "--poll-ms" => a.poll_ms = value().parse().unwrap_or(a.poll_ms),
                "--seed" => a.seed = value().parse().unwrap_or(a.seed),
                "--watchdog-secs" => a.watchdog_secs = value().parse().unwrap_or(a.watchdog_secs),
                "--churn" => a.churn = true,
                "--text" => a.text = true,
                "--child" => a.child = value().parse().ok(),
                _ => {}
            }
        }
        a
    }

    /// The flags of the child that runs `n` nodes.
    pub(super) fn child_args(&self, n: usize) -> Vec<String> {
        let mut v = vec![
            "--child".into(),
            n.to_string(),
            "--trials".into(),
            self.trials.to_string(),
            "--searches".into(),
            self.searches.to_string(),
            "--agents-per-node".into(),
            self.agents_per_node.to_string(),
            "--poll-ms".into(),
            self.poll_ms.to_string(),
            "--seed".into(),
            self.seed.to_string(),
        ];
        if self.churn {
            v.push("--churn".into());
        }
        if self.text {
            v.push("--text".into());
        }
        v
    }
}

/// One line: cores, CPU model, memory, load average.
pub(super) fn machine() -> String {
    let mem = proc_field("/proc/meminfo", "MemTotal:").map_or(0.0, |kb| kb / 1024.0 / 1024.0);
    format!(
        "machine: {} cores, {}, {mem:.1} GiB; load average {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        crate::machine::cpu_model(),
        load_average()
    )
}

pub(super) use crate::machine::load_average;

fn proc_field(file: &str, key: &str) -> Option<f64> {
    std::fs::read_to_string(file).ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
    })
}

/// Resident memory of this process, MiB.
pub(super) fn rss_mib() -> f64 {
    proc_field("/proc/self/status", "VmRSS:").map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Peak resident memory of this process, MiB.
pub(super) fn peak_rss_mib() -> f64 {
    proc_field("/proc/self/status", "VmHWM:").map_or(f64::NAN, |kb| kb / 1024.0)
}

/// CPU time (user + system) this process has used, seconds.
pub(super) fn cpu_secs() -> f64 {
    crate::machine::cpu_secs_of("/proc/self/stat")
}

/// Threads of this process.
pub(super) fn threads() -> u64 {
    proc_field("/proc/self/status", "Threads:").map_or(0, |t| t as u64)
}

/// Open file descriptors of this process.
pub(super) fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// The soft limit on open files.
pub(super) fn fd_limit() -> String {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3).map(str::to_owned))
        })
        .unwrap_or_else(|| "?".into())
}

/// The `p` quantile (nearest rank) of sorted values.
pub(super) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

pub(super) fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

pub(super) fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.iter().sum::<f64>() / v.len() as f64
}

/// Polls `check` every 50 ms until it holds or `deadline` passes; returns
/// the time it took, or `None` at the deadline.
pub(super) async fn wait_until<F, Fut>(deadline: Duration, mut check: F) -> Option<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if check().await {
            return Some(started.elapsed());
        }
        if started.elapsed() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A node and its data directory (removed on drop).
pub(super) struct BenchNode {
    pub node: Node,
    pub _dir: tempfile::TempDir,
}

/// Most earlier nodes one new node bootstraps to.
pub(super) const BOOTSTRAP_PEERS: usize = 3;
/// sled page cache of each node.
pub(super) const CACHE_BYTES: u64 = 4 << 20;

/// Starts `n` nodes one after the other; node i bootstraps to up to
/// [`BOOTSTRAP_PEERS`] random earlier nodes.
pub(super) async fn start_nodes(n: usize, rng: &mut StdRng) -> Vec<BenchNode> {
    start_nodes_with(n, rng, |_| {}).await
}

/// As [`start_nodes`], each node's configuration changed by `tweak`.
pub(super) async fn start_nodes_with(
    n: usize,
    rng: &mut StdRng,
    tweak: impl Fn(&mut Config),
) -> Vec<BenchNode> {
    let mut nodes: Vec<BenchNode> = Vec::with_capacity(n);
    for i in 0..n {
        let mut earlier: Vec<usize> = (0..i).collect();
        earlier.shuffle(rng);
        let bootstrap: Vec<String> = earlier
            .iter()
            .take(BOOTSTRAP_PEERS)
            .flat_map(|&j| nodes[j].node.listen_addrs().iter().take(1).cloned())
            .collect();
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config {
            data_dir: dir.path().join("data"),
            ..Config::default()
        };
        config.api.listen = "127.0.0.1:0".parse().expect("an address");
        config.p2p.listen = vec!["/ip4/127.0.0.1/tcp/0".into()];
        config.p2p.bootstrap = bootstrap;
        // Every address here is loopback.
        config.p2p.allow_private_addresses = true;
        config.crawl.follow_peers = false;
        config.store.cache_bytes = CACHE_BYTES;
        tweak(&mut config);
        let node = Node::spawn(config).await.expect("the node starts");
        nodes.push(BenchNode { node, _dir: dir });
    }
    nodes
}

/// Min, median and max of one status figure over all nodes.
pub(super) fn spread(mut v: Vec<usize>) -> String {
    v.sort_unstable();
    if v.is_empty() {
        return "-".into();
    }
    format!("{}/{}/{}", v[0], v[v.len() / 2], v[v.len() - 1])
}

/// The status of every node: (connected, routing table, gossip mesh).
pub(super) async fn statuses(nodes: &[BenchNode]) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::with_capacity(nodes.len());
    for n in nodes {
        let s = n.node.mesh().status().await.expect("mesh status");
        out.push((
            s.connected_peers,
            s.routing_table_peers,
            s.gossip_mesh_peers,
        ));
    }
    out
}

pub(super) fn describe(st: &[(usize, usize, usize)]) -> String {
    format!(
        "connected peers {}, routing table {}, gossip mesh {} (min/median/max)",
        spread(st.iter().map(|s| s.0).collect()),
        spread(st.iter().map(|s| s.1).collect()),
        spread(st.iter().map(|s| s.2).collect()),
    )
}

/// Shuts every node down, all at once, each bounded by 30 s.
pub(super) async fn stop_nodes(nodes: Vec<BenchNode>) {
    let mut set = tokio::task::JoinSet::new();
    for BenchNode { node, _dir } in nodes {
        set.spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(30), node.shutdown()).await;
            drop(_dir);
        });
    }
    while set.join_next().await.is_some() {}
}
