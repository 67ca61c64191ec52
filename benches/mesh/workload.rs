//! One N: start the mesh, settle, populate, then the four measurements.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use agentmesh::mesh::StatsSnapshot;
use agentmesh::node::Node;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::harness::{self, mean, percentile, sorted, Args, BenchNode};

/// How long the mesh may take to settle.
const SETTLE_DEADLINE: Duration = Duration::from_secs(120);
/// How long one propagation trial may take.
const TRIAL_DEADLINE: Duration = Duration::from_secs(15);
/// Peers one mesh search asks (the node default, `p2p.search_fanout`).
const SEARCH_FANOUT: usize = 16;

fn url(n: &Node, path: &str) -> String {
    format!("http://{}{path}", n.api_addr())
}

/// A valid AIDIP document: `testbed::synthetic_agent(i)` with its id and,
/// when given, one capability replaced.
fn agent(i: usize, id: &str, capability: Option<&str>) -> Value {
    let mut doc = agentmesh::testbed::synthetic_agent(i);
    doc["id"] = json!(id);
    if let Some(c) = capability {
        doc["capabilities"] = json!([c]);
    }
    doc
}

async fn register(http: &reqwest::Client, n: &Node, doc: &Value) {
    let r = http
        .post(url(n, "/agents"))
        .json(doc)
        .send()
        .await
        .expect("POST /agents");
    let status = r.status();
    assert!(
        status.is_success(),
        "registration answered {status}: {}",
        r.text().await.unwrap_or_default()
    );
}

/// What one search answered.
struct Searched {
    ids: usize,
    asked: Option<f64>,
    answered: Option<f64>,
    records: Option<f64>,
    partial: bool,
}

/// Kinds of search: by capability filter, or by the capability's words
/// as free text (`--text`).
#[derive(Clone, Copy)]
enum Kind {
    Filter,
    Text,
}

async fn search(
    http: &reqwest::Client,
    n: &Node,
    capability: &str,
    scope: &str,
    kind: Kind,
) -> Searched {
    let body = match kind {
        Kind::Filter => json!({"filters": {"capabilities": [capability]}, "scope": scope}),
        Kind::Text => json!({"query": capability.replace('_', " "), "top": 10, "scope": scope}),
    };
    let r = http
        .post(url(n, "/agents/search"))
        .json(&body)
        .send()
        .await
        .expect("POST /agents/search");
    let header = |name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<f64>().ok())
    };
    let (asked, answered, records) = (
        header("x-agentmesh-peers-asked"),
        header("x-agentmesh-peers-answered"),
        header("x-agentmesh-records-received"),
    );
    let partial = r
        .headers()
        .get("x-agentmesh-partial")
        .is_some_and(|v| v == "true");
    let body: Value = r.json().await.expect("a JSON answer");
    Searched {
        ids: body.as_array().map_or(0, Vec::len),
        asked,
        answered,
        records,
        partial,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Sum of every node's counters.
#[derive(Debug, Default, Clone)]
struct Totals {
    search_msgs: u64,
    search_bytes: u64,
    search_requests: u64,
    kad_sent: BTreeMap<String, u64>,
    kad_received: u64,
    transport_out: u64,
    transport_in: u64,
    gossip_accepted: u64,
}

fn totals(nodes: &[BenchNode]) -> Totals {
    let mut t = Totals::default();
    for n in nodes {
        let s: StatsSnapshot = n.node.mesh().stats();
        t.search_msgs += s.search_wire.messages_sent;
        t.search_bytes += s.search_wire.bytes_sent;
        t.search_requests += s.requests_sent;
        for (k, v) in s.kad_requests_sent {
            *t.kad_sent.entry(k).or_default() += v;
        }
        t.kad_received += s.kad_requests_received.values().sum::<u64>();
        t.transport_out += s.transport.outbound;
        t.transport_in += s.transport.inbound;
        t.gossip_accepted += s.gossip.accepted;
    }
    t
}

impl Totals {
    fn minus(&self, before: &Totals) -> Totals {
        let mut kad_sent = self.kad_sent.clone();
        for (k, v) in kad_sent.iter_mut() {
            *v -= before.kad_sent.get(k).copied().unwrap_or(0);
        }
        kad_sent.retain(|_, v| *v > 0);
        Totals {
            search_msgs: self.search_msgs - before.search_msgs,
            search_bytes: self.search_bytes - before.search_bytes,
            search_requests: self.search_requests - before.search_requests,
            kad_sent,
            kad_received: self.kad_received - before.kad_received,
            transport_out: self.transport_out - before.transport_out,
            transport_in: self.transport_in - before.transport_in,
            gossip_accepted: self.gossip_accepted - before.gossip_accepted,
        }
    }

    fn kad_total(&self) -> u64 {
        self.kad_sent.values().sum()
    }
}

/// One propagation trial: registered on `origin` at time zero; the time
/// until each other node's local search finds it (`None`: not within the
/// deadline), and until a mesh search on `mesh_node` does.
async fn trial(
    http: &reqwest::Client,
    nodes: &[BenchNode],
    origin: usize,
    mesh_node: usize,
    i: usize,
    poll: Duration,
) -> (Duration, Vec<Option<Duration>>, Option<Duration>) {
    let cap = format!("benchprop{i}");
    let doc = agent(i, &format!("bench-prop-{i:04}"), Some(&cap));
    let t0 = Instant::now();
    register(http, &nodes[origin].node, &doc).await;
    let registered = t0.elapsed();
    let pollers = nodes
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != origin)
        .map(|(_, n)| {
            let cap = cap.clone();
            async move {
                loop {
                    if search(http, &n.node, &cap, "local", Kind::Filter).await.ids > 0 {
                        return Some(t0.elapsed());
                    }
                    if t0.elapsed() > TRIAL_DEADLINE {
                        return None;
                    }
                    tokio::time::sleep(poll).await;
                }
            }
        });
    let mesh = async {
        loop {
            if search(http, &nodes[mesh_node].node, &cap, "mesh", Kind::Filter)
                .await
                .ids
                > 0
            {
                return Some(t0.elapsed());
            }
            if t0.elapsed() > TRIAL_DEADLINE {
                return None;
            }
            tokio::time::sleep(poll).await;
        }
    };
    let (arrivals, mesh) = tokio::join!(futures_util::future::join_all(pollers), mesh);
    (registered, arrivals, mesh)
}

/// Propagation trials over `nodes`; prints the rows.
async fn propagation(
    http: &reqwest::Client,
    nodes: &[BenchNode],
    args: &Args,
    rng: &mut StdRng,
    first_trial: usize,
    label: &str,
) {
    let poll = Duration::from_millis(args.poll_ms);
    let mut pooled = Vec::new();
    let mut all = Vec::new();
    let mut mesh = Vec::new();
    let mut reg = Vec::new();
    let mut missing = 0usize;
    let mut mesh_missing = 0usize;
    let started = Instant::now();
    for t in 0..args.trials {
        let origin = rng.gen_range(0..nodes.len());
        let mut mesh_node = rng.gen_range(0..nodes.len() - 1);
        if mesh_node >= origin {
            mesh_node += 1;
        }
        let (registered, arrivals, m) =
            trial(http, nodes, origin, mesh_node, first_trial + t, poll).await;
        reg.push(ms(registered));
        let mut worst = Some(Duration::ZERO);
        for a in arrivals {
            match a {
                Some(d) => {
                    pooled.push(ms(d));
                    worst = worst.map(|w| w.max(d));
                }
                None => {
                    missing += 1;
                    worst = None;
                }
            }
        }
        if let Some(w) = worst {
            all.push(ms(w));
        }
        match m {
            Some(d) => mesh.push(ms(d)),
            None => mesh_missing += 1,
        }
    }
    let (pooled, all, mesh, reg) = (sorted(pooled), sorted(all), sorted(mesh), sorted(reg));
    println!(
        "  propagation{label} ({} trials in {:.1} s; poll every {} ms; time zero = POST /agents sent):",
        args.trials,
        started.elapsed().as_secs_f64(),
        args.poll_ms
    );
    let row = |name: &str, v: &[f64], extra: String| {
        println!(
            "    {name:<44} p50 {:>7.1} ms  p95 {:>7.1} ms  max {:>7.1} ms  (n = {}){extra}",
            percentile(v, 0.5),
            percentile(v, 0.95),
            v.last().copied().unwrap_or(f64::NAN),
            v.len()
        )
    };
    row(
        "POST /agents answered (sign + store + flush)",
        &reg,
        String::new(),
    );
    row(
        "found by one node, local scope (pooled)",
        &pooled,
        format!(", {missing} arrivals missing at {TRIAL_DEADLINE:?}"),
    );
    row(
        "found by ALL other nodes, local scope",
        &all,
        format!(", {} trials incomplete", args.trials - all.len()),
    );
    row(
        "found by one node, mesh scope",
        &mesh,
        format!(", {mesh_missing} missing"),
    );
}

/// Capabilities held by agents registered on nodes other than `from`.
fn foreign_capability(rng: &mut StdRng, from: usize, n: usize, per_node: usize) -> String {
    let mut owner = rng.gen_range(0..n - 1);
    if owner >= from {
        owner += 1;
    }
    let k = owner * per_node + rng.gen_range(0..per_node);
    let doc = agentmesh::testbed::synthetic_agent(k);
    doc["capabilities"][0]
        .as_str()
        .expect("a capability")
        .to_owned()
}

pub(super) async fn run(n: usize, args: &Args) {
    let mut rng = StdRng::seed_from_u64(args.seed ^ n as u64);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .expect("HTTP client");
    println!(
        "\nN = {n} nodes (bootstrap to up to {} random earlier nodes; sled cache {} MiB each; open-files limit {}; load average {})",
        harness::BOOTSTRAP_PEERS,
        harness::CACHE_BYTES >> 20,
        harness::fd_limit(),
        harness::load_average()
    );
    let (rss0, threads0) = (harness::rss_mib(), harness::threads());
    let started = Instant::now();
    let nodes = harness::start_nodes(n, &mut rng).await;
    let start_time = started.elapsed();
    let (rss1, threads1) = (harness::rss_mib(), harness::threads());

    // Settle: every node connected, then every gossip mesh and routing
    // table filled to what N allows.
    let connected = harness::wait_until(SETTLE_DEADLINE, || async {
        harness::statuses(&nodes).await.iter().all(|s| s.0 >= 1)
    })
    .await;
    let want_mesh = (n - 1).min(3);
    let want_routing = (n - 1).min(8);
    let settled = harness::wait_until(SETTLE_DEADLINE, || async {
        harness::statuses(&nodes)
            .await
            .iter()
            .all(|s| s.2 >= want_mesh && s.1 >= want_routing)
    })
    .await;
    let settle_total = started.elapsed();
    let show = |d: Option<Duration>| {
        d.map_or("NOT within the deadline".to_owned(), |d| {
            format!("{:.2} s", d.as_secs_f64())
        })
    };
    println!(
        "  start {n} nodes: {:.2} s ({:.0} ms per node); every node connected {} later; settled (gossip mesh >= {want_mesh}, routing table >= {want_routing} on every node) {} after that",
        start_time.as_secs_f64(),
        ms(start_time) / n as f64,
        show(connected),
        show(settled)
    );
    println!(
        "  at settle: {}",
        harness::describe(&harness::statuses(&nodes).await)
    );
    let _ = settle_total;

    // Population: agents_per_node agents registered on each node, then
    // wait until gossip has carried them everywhere.
    let per = args.agents_per_node;
    let populate = Instant::now();
    let cpu0 = harness::cpu_secs();
    let pop_before = totals(&nodes);
    let mut posts = Vec::new();
    for (i, bn) in nodes.iter().enumerate() {
        for j in 0..per {
            let k = i * per + j;
            let t = Instant::now();
            register(&http, &bn.node, &agent(k, &format!("bench-{k:05}"), None)).await;
            posts.push(ms(t.elapsed()));
        }
    }
    let registering = populate.elapsed();
    let posts = sorted(posts);
    let cpu_populate = harness::cpu_secs() - cpu0;
    let pop = totals(&nodes).minus(&pop_before);
    let want = (n * per) as u64;
    let replicated = harness::wait_until(Duration::from_secs(120), || async {
        nodes
            .iter()
            .all(|b| b.node.registry().store().len() >= want)
    })
    .await;
    println!(
        "  population: {want} agents ({per} per node) registered over HTTP one at a time in {:.2} s; every node held all of them {} after the first",
        registering.as_secs_f64(),
        show(replicated.map(|_| populate.elapsed())),
    );
    println!(
        "    each POST /agents of that burst: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; process CPU {:.1} s ({:.0} ms per registration, all nodes)",
        percentile(&posts, 0.5),
        percentile(&posts, 0.99),
        posts.last().copied().unwrap_or(f64::NAN),
        cpu_populate,
        cpu_populate * 1000.0 / want as f64
    );
    let kinds: Vec<String> = pop
        .kad_sent
        .iter()
        .map(|(k, v)| format!("{k} {:.0}", *v as f64 / want as f64))
        .collect();
    println!(
        "    per registration, all nodes: {:.0} gossip records accepted, {:.0} Kademlia requests ({}), {:.0} KiB written by the transport",
        pop.gossip_accepted as f64 / want as f64,
        pop.kad_total() as f64 / want as f64,
        kinds.join(", "),
        pop.transport_out as f64 / want as f64 / 1024.0
    );

    // 1. Propagation.
    propagation(&http, &nodes, args, &mut rng, 0, "").await;

    // 2. Search latency: local baseline, then mesh; 3. counters around
    // the mesh phase and a quiet interval of the same length.
    let kind = if args.text { Kind::Text } else { Kind::Filter };
    let mut local = Vec::new();
    let mut local_empty = 0;
    let cpu0 = harness::cpu_secs();
    for _ in 0..args.searches {
        let from = rng.gen_range(0..n);
        let cap = foreign_capability(&mut rng, from, n, per);
        let t = Instant::now();
        let s = search(&http, &nodes[from].node, &cap, "local", kind).await;
        local.push(ms(t.elapsed()));
        local_empty += usize::from(s.ids == 0);
    }
    let cpu_local = harness::cpu_secs() - cpu0;
    let before = totals(&nodes);
    let cpu0 = harness::cpu_secs();
    let mesh_started = Instant::now();
    let (mut lat, mut asked, mut answered, mut records) = (vec![], vec![], vec![], vec![]);
    let (mut empty, mut partial) = (0, 0);
    for _ in 0..args.searches {
        let from = rng.gen_range(0..n);
        let cap = foreign_capability(&mut rng, from, n, per);
        let t = Instant::now();
        let s = search(&http, &nodes[from].node, &cap, "mesh", kind).await;
        lat.push(ms(t.elapsed()));
        asked.extend(s.asked);
        answered.extend(s.answered);
        records.extend(s.records);
        empty += usize::from(s.ids == 0);
        partial += usize::from(s.partial);
    }
    let mesh_time = mesh_started.elapsed();
    let cpu_mesh = harness::cpu_secs() - cpu0;
    let during = totals(&nodes).minus(&before);
    let quiet_before = totals(&nodes);
    let cpu0 = harness::cpu_secs();
    tokio::time::sleep(mesh_time).await;
    let quiet = totals(&nodes).minus(&quiet_before);
    let cpu_quiet = harness::cpu_secs() - cpu0;

    // Providers lookup alone (what a mesh search does first: up to the
    // search fan-out), from the node's own client: the part of the
    // latency that is Kademlia.
    let mut lookups = Vec::new();
    for _ in 0..args.searches.min(50) {
        let from = rng.gen_range(0..n);
        let cap = foreign_capability(&mut rng, from, n, per);
        let t = Instant::now();
        let _ = nodes[from]
            .node
            .mesh()
            .providers_up_to(&cap, SEARCH_FANOUT, Duration::from_secs(1))
            .await;
        lookups.push(ms(t.elapsed()));
    }

    let (local, lat, lookups) = (sorted(local), sorted(lat), sorted(lookups));
    println!(
        "  search latency ({} searches each, one at a time, random node, a capability held by agents registered on other nodes, {}):",
        args.searches,
        if args.text { "asked as free text, its words as the query" } else { "asked as a filter" }
    );
    for (name, v) in [
        ("baseline: scope local (HTTP + local search)", &local),
        ("scope mesh (providers + ask peers + judge)", &lat),
        ("providers lookup alone (MeshClient::providers)", &lookups),
    ] {
        println!(
            "    {name:<48} p50 {:>7.1} ms  p90 {:>7.1} ms  p99 {:>7.1} ms  max {:>7.1} ms",
            percentile(v, 0.5),
            percentile(v, 0.9),
            percentile(v, 0.99),
            v.last().copied().unwrap_or(f64::NAN)
        );
    }
    println!(
        "    mesh: peers asked {:.1}, answered {:.1}, records received {:.1} (means); {empty} empty, {partial} partial; local: {local_empty} empty",
        mean(&asked),
        mean(&answered),
        mean(&records)
    );
    let s = args.searches as f64;
    println!(
        "    process CPU per search (all nodes and the client): local {:.2} ms, mesh {:.1} ms; idle mesh {:.2} cores over the quiet interval",
        cpu_local * 1000.0 / s,
        cpu_mesh * 1000.0 / s,
        cpu_quiet / mesh_time.as_secs_f64()
    );

    // 3. Wire cost per mesh search (all nodes summed), less the quiet
    // interval for the transport bytes.
    let s = args.searches as f64;
    println!(
        "  wire cost per mesh search (sum over all nodes; mesh phase {:.1} s, quiet interval of the same length after it):",
        mesh_time.as_secs_f64()
    );
    println!(
        "    search protocol: {:.1} requests sent, {:.1} messages (requests + responses), {:.1} KiB of CBOR",
        during.search_requests as f64 / s,
        during.search_msgs as f64 / s,
        during.search_bytes as f64 / s / 1024.0
    );
    let kinds: Vec<String> = during
        .kad_sent
        .iter()
        .map(|(k, v)| format!("{k} {:.1}", *v as f64 / s))
        .collect();
    println!(
        "    Kademlia requests sent by finished queries: {:.1} ({}); requests received {:.1}; quiet interval: {:.1} sent",
        during.kad_total() as f64 / s,
        kinds.join(", "),
        during.kad_received as f64 / s,
        quiet.kad_total() as f64 / s,
    );
    let transport = (during.transport_out as f64 - quiet.transport_out as f64) / s;
    println!(
        "    transport bytes written, all protocols: {:.1} KiB per search (mesh phase {:.0} KiB, quiet interval {:.0} KiB); of which search CBOR {:.1} KiB, the rest (Kademlia, multistream, identify, gossip) {:.1} KiB",
        transport / 1024.0,
        during.transport_out as f64 / 1024.0,
        quiet.transport_out as f64 / 1024.0,
        during.search_bytes as f64 / s / 1024.0,
        (transport - during.search_bytes as f64 / s) / 1024.0
    );

    // 4. Memory.
    let (rss2, threads2) = (harness::rss_mib(), harness::threads());
    println!(
        "  memory: RSS {rss0:.0} MiB before, {rss1:.0} MiB after starting (+{:.1} MiB per node), {rss2:.0} MiB after the workload (+{:.1} MiB per node); peak {:.0} MiB",
        (rss1 - rss0) / n as f64,
        (rss2 - rss0) / n as f64,
        harness::peak_rss_mib()
    );
    println!(
        "  threads: {threads0} before, {threads1} after starting, {threads2} after the workload; open files {}",
        harness::open_fds()
    );
    println!(
        "  after the workload: {}",
        harness::describe(&harness::statuses(&nodes).await)
    );

    let mut nodes = nodes;
    if args.churn && n > 2 {
        let victim = 1 + rng.gen_range(0..n - 1);
        let gone = nodes.remove(victim);
        let _ = tokio::time::timeout(Duration::from_secs(30), gone.node.shutdown()).await;
        println!("  churn: node {victim} shut down");
        propagation(&http, &nodes, args, &mut rng, args.trials, " after churn").await;
    }
    println!("  load average at the end {}", harness::load_average());
    harness::stop_nodes(nodes).await;
}
