//! What a run reports: the [`Summary`] (`summary.json`, and the last line
//! of stdout under `--json`) made the same way from either engine's
//! outcome, the CSV series, the published reference figures printed beside
//! the simulated ones, and [`side_by_side`] for two summaries (a DES run
//! and a swarm run of one calibration scenario).

use std::io::Write;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::des::{Counters, DesOutcome, LookupRecord};
use crate::model::{SearchKind, SearchRecord, SearchSample};
use crate::scenario::{Behaviour, NodeParams, Scenario};
use crate::swarm::SwarmOutcome;

/// What the CSV series and the plots are drawn from, either engine's.
#[derive(Debug, Clone, Copy)]
pub struct Series<'a> {
    /// The searches, in order.
    pub searches: &'a [SearchRecord],
    /// The plain Kademlia lookups; `None`: the engine does not run them
    /// (the swarm), so `lookups.csv` is not written.
    pub lookups: Option<&'a [LookupRecord]>,
    /// Per (probe, node reached): ms until it held the record.
    pub propagation_ms: &'a [f64],
    /// Per (revoked agent, node reached): ms until it held the tombstone.
    pub revocation_ms: &'a [f64],
    /// What a search's `at_s` counts, as a plot's axis says it.
    pub clock: &'static str,
}

impl<'a> From<&'a DesOutcome> for Series<'a> {
    fn from(o: &'a DesOutcome) -> Self {
        Self {
            searches: &o.searches,
            lookups: Some(&o.lookups),
            propagation_ms: &o.propagation_ms,
            revocation_ms: &o.revocation_ms,
            clock: "virtual time (s)",
        }
    }
}

impl<'a> From<&'a SwarmOutcome> for Series<'a> {
    fn from(o: &'a SwarmOutcome) -> Self {
        Self {
            searches: &o.searches,
            lookups: None,
            propagation_ms: &o.propagation_ms,
            revocation_ms: &o.revocation_ms,
            clock: "wall-clock time since the run started (s)",
        }
    }
}

/// Three percentiles of a series.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// Nearest-rank percentile `p` (0..100) of sorted `v` (0 when empty).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Percentiles {
    /// Of `values` (any order).
    pub fn of(values: &[f64]) -> Self {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        Self {
            p50: percentile(&v, 50.0),
            p95: percentile(&v, 95.0),
            p99: percentile(&v, 99.0),
        }
    }
}

/// The plain Kademlia lookups measured beside the searches.
#[derive(Debug, Clone, Serialize)]
pub struct LookupSummary {
    /// Lookups run.
    pub count: usize,
    /// Share that reached the node closest to the key.
    pub reached_closest: f64,
    /// Hops to the closest node.
    pub hops: Percentiles,
    /// Mean requests per lookup (until the iterator finished).
    pub requests_mean: f64,
    /// Time until the closest node answered, ms.
    pub closest_ms: Percentiles,
    /// Share of lookups whose closest node answered within 500 ms.
    pub closest_under_500ms: f64,
    /// Time until the lookup finished, ms.
    pub finished_ms: Percentiles,
}

/// A published figure and where it comes from.
#[derive(Debug, Clone, Serialize)]
pub struct Reference {
    /// What is compared.
    pub metric: &'static str,
    /// The published value.
    pub published: &'static str,
    /// The source.
    pub source: &'static str,
    /// The simulated value (this run), if it has one.
    pub simulated: Option<f64>,
}

/// One run's summary (the `--json` object).
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// `des` or `swarm`.
    pub engine: &'static str,
    /// The scenario's name.
    pub scenario: String,
    /// The seed.
    pub seed: u64,
    /// Nodes.
    pub nodes: usize,
    /// Agents in the starting population.
    pub agents: usize,
    /// Searches run.
    pub searches: usize,
    /// Results asked per search.
    pub limit: usize,
    /// Mean over searches of found / min(expected, limit), 0..1.
    pub recall: f64,
    /// Recall of the base workload, a flash crowd's, the eclipsed
    /// capability's and the revocation window's searches (null: none ran).
    pub recall_by_kind: serde_json::Map<String, Value>,
    /// Search latency, ms.
    pub latency_ms: Percentiles,
    /// Mean Kademlia requests of a search's provider lookup (all shards),
    /// over searches that ran one.
    pub requests_per_lookup: f64,
    /// Of those, the mean that failed (no answer in time, a refused dial,
    /// a closed connection).
    pub failed_requests_per_lookup: f64,
    /// Hops of the provider lookup to its first providers; `None` (JSON
    /// `null`) when no search recorded them (the swarm engine cannot see
    /// a libp2p lookup's hops).
    pub lookup_hops: Option<Percentiles>,
    /// Mean messages per search (lookup requests + search requests + answers).
    pub messages_per_search: f64,
    /// Mean bytes per search.
    pub bytes_per_search: f64,
    /// Publish probes: ms until each node live at publication got the record.
    pub propagation_ms: Percentiles,
    /// Share of (probe, live node) pairs reached.
    pub propagation_coverage: Option<f64>,
    /// Revocation: ms until each live node had the tombstone.
    pub revocation_ms: Percentiles,
    /// Share of (revoked, live node) pairs reached.
    pub revocation_coverage: Option<f64>,
    /// Results that were revoked agents.
    pub stale_results: usize,
    /// Id takeover (`adversarial.behaviour = "takeover"`, DES only; else
    /// null): the share of all results (page entries) that were a
    /// forger's version of the agent. `recall` counts the owners'
    /// versions only.
    pub taken_over: Option<f64>,
    /// The same share per kind of search (null: none ran).
    pub taken_over_by_kind: Option<serde_json::Map<String, Value>>,
    /// Id takeover: the share of searches with at least one forger's
    /// version among their results.
    pub searches_taken_over: Option<f64>,
    /// Plain Kademlia lookups (DES only).
    pub lookups: Option<LookupSummary>,
    /// Messages per node per simulated hour (DES only).
    pub messages_per_node_per_hour: Option<f64>,
    /// Bytes per node per simulated hour (DES only).
    pub bytes_per_node_per_hour: Option<f64>,
    /// Message counters (DES only).
    pub counters: Option<Counters>,
    /// The node constants used.
    pub node: NodeParams,
    /// Published figures beside this run's.
    pub reference: Vec<Reference>,
    /// Events processed (DES only).
    pub events: Option<u64>,
    /// Seconds spent placing the converged state (DES only).
    pub setup_s: Option<f64>,
    /// Seconds spent making the nodes' Ed25519 keys and peer ids.
    pub keygen_s: Option<f64>,
    /// Seconds spent starting the nodes until every one has its routing
    /// and gossip peers (swarm only).
    pub bootstrap_s: Option<f64>,
    /// Seconds spent registering the population until every node holds
    /// it (swarm only).
    pub populate_s: Option<f64>,
    /// Resident memory per node once the population is held, MiB (swarm
    /// only).
    pub rss_per_node_mb: Option<f64>,
    /// Nodes stopped and started again by churn (swarm only).
    pub restarts: Option<usize>,
    /// Searches planned at a node that was down, asked of the next live
    /// node (swarm only).
    pub searches_moved: Option<usize>,
    /// (probe, node) pairs, of nodes live at publication, that got the
    /// record only after churn had stopped and started the node: counted
    /// as not reached in `propagation_coverage`, which means the share
    /// reached while up in both engines (swarm only; the DES delivers
    /// gossip to live nodes only).
    pub propagation_recovered: Option<usize>,
    /// The same for the tombstones (swarm only).
    pub revocation_recovered: Option<usize>,
    /// Revoked agents whose home was down at the revocation's time,
    /// tombstoned when it started again (swarm only: the DES tombstones
    /// at the next live node).
    pub revocations_deferred: Option<usize>,
    /// Wall-clock seconds of the whole run.
    pub wall_s: f64,
    /// Peak resident memory of the process, MiB (VmHWM).
    pub peak_rss_mb: f64,
}

/// The process's peak resident set, MiB, from `/proc/self/status` (0 elsewhere).
pub fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        s / n as f64
    }
}

/// Recall of one sample: found / min(expected, limit) (1 when nothing was expected).
pub fn recall_of(s: &SearchSample) -> f64 {
    if s.expected == 0 {
        1.0
    } else {
        (s.found as f64 / s.expected as f64).min(1.0)
    }
}

fn coverage(reached: usize, unreached: usize) -> Option<f64> {
    let all = reached + unreached;
    (all > 0).then(|| reached as f64 / all as f64)
}

/// The kinds of search, as the summary names them.
const KINDS: [(&str, SearchKind); 4] = [
    ("normal", SearchKind::Normal),
    ("flash", SearchKind::Flash),
    ("eclipsed", SearchKind::Eclipsed),
    ("revoked", SearchKind::Revoked),
];

struct Common<'a> {
    samples: Vec<(&'a SearchSample, Option<SearchKind>)>,
    propagation: &'a [f64],
    revocation: &'a [f64],
}

fn base(
    engine: &'static str,
    sc: &Scenario,
    seed: u64,
    c: Common<'_>,
    stale: usize,
    wall_s: f64,
) -> Summary {
    let samples = &c.samples;
    let mut by_kind = serde_json::Map::new();
    for (name, kind) in KINDS {
        let v: Vec<f64> = samples
            .iter()
            .filter(|(_, k)| *k == Some(kind))
            .map(|(s, _)| recall_of(s))
            .collect();
        let value = if v.is_empty() {
            Value::Null
        } else {
            serde_json::json!(mean(v.into_iter()))
        };
        by_kind.insert(name.into(), value);
    }
    let latencies: Vec<f64> = samples.iter().map(|(s, _)| s.latency_ms).collect();
    let hops: Vec<f64> = samples
        .iter()
        .filter_map(|(s, _)| s.lookup_hops.map(f64::from))
        .collect();
    Summary {
        engine,
        scenario: sc.name.clone(),
        seed,
        nodes: sc.nodes,
        agents: sc.agents,
        searches: samples.len(),
        limit: sc.limit,
        recall: mean(samples.iter().map(|(s, _)| recall_of(s))),
        recall_by_kind: by_kind,
        latency_ms: Percentiles::of(&latencies),
        requests_per_lookup: mean(
            samples
                .iter()
                .filter(|(s, _)| s.lookup_requests > 0)
                .map(|(s, _)| f64::from(s.lookup_requests)),
        ),
        failed_requests_per_lookup: mean(
            samples
                .iter()
                .filter(|(s, _)| s.lookup_requests > 0)
                .map(|(s, _)| f64::from(s.lookup_failed)),
        ),
        lookup_hops: (!hops.is_empty()).then(|| Percentiles::of(&hops)),
        messages_per_search: mean(samples.iter().map(|(s, _)| f64::from(s.messages))),
        bytes_per_search: mean(samples.iter().map(|(s, _)| s.bytes as f64)),
        propagation_ms: Percentiles::of(c.propagation),
        propagation_coverage: None,
        revocation_ms: Percentiles::of(c.revocation),
        revocation_coverage: None,
        stale_results: stale,
        taken_over: None,
        taken_over_by_kind: None,
        searches_taken_over: None,
        lookups: None,
        messages_per_node_per_hour: None,
        bytes_per_node_per_hour: None,
        counters: None,
        node: sc.node(),
        reference: Vec::new(),
        events: None,
        setup_s: None,
        keygen_s: None,
        bootstrap_s: None,
        populate_s: None,
        rss_per_node_mb: None,
        restarts: None,
        searches_moved: None,
        propagation_recovered: None,
        revocation_recovered: None,
        revocations_deferred: None,
        wall_s,
        peak_rss_mb: peak_rss_mb(),
    }
}

impl Summary {
    /// The summary of a DES run.
    pub fn from_des(sc: &Scenario, seed: u64, o: &DesOutcome, wall_s: f64) -> Self {
        let common = Common {
            samples: o
                .searches
                .iter()
                .map(|r| (&r.sample, Some(r.kind)))
                .collect(),
            propagation: &o.propagation_ms,
            revocation: &o.revocation_ms,
        };
        let mut s = base("des", sc, seed, common, o.stale_results, wall_s);
        s.propagation_coverage = coverage(o.propagation_ms.len(), o.propagation_unreached);
        s.revocation_coverage = coverage(o.revocation_ms.len(), o.revocation_unreached);
        let c = &o.counters;
        let messages = c.kad_requests * 2
            + c.search_requests
            + c.search_answers
            + c.gossip_messages
            + c.gossip_control;
        let node_hours = sc.nodes as f64 * o.virtual_s / 3600.0;
        s.messages_per_node_per_hour = Some(messages as f64 / node_hours);
        s.bytes_per_node_per_hour = Some(c.bytes as f64 / node_hours);
        s.counters = Some(c.clone());
        s.events = Some(o.events);
        s.setup_s = Some(o.setup_s);
        if !o.lookups.is_empty() {
            let hops: Vec<f64> = o
                .lookups
                .iter()
                .filter_map(|l| l.hops.map(f64::from))
                .collect();
            let closest: Vec<f64> = o.lookups.iter().filter_map(|l| l.closest_ms).collect();
            let n = o.lookups.len() as f64;
            s.lookups = Some(LookupSummary {
                count: o.lookups.len(),
                reached_closest: closest.len() as f64 / n,
                hops: Percentiles::of(&hops),
                requests_mean: mean(o.lookups.iter().map(|l| f64::from(l.requests))),
                closest_ms: Percentiles::of(&closest),
                closest_under_500ms: closest.iter().filter(|&&x| x <= 500.0).count() as f64 / n,
                finished_ms: Percentiles::of(
                    &o.lookups.iter().map(|l| l.latency_ms).collect::<Vec<_>>(),
                ),
            });
        }
        let takeover = sc
            .adversarial
            .as_ref()
            .is_some_and(|a| a.behaviour == Behaviour::Takeover);
        if takeover {
            let share = |rs: &mut dyn Iterator<Item = &SearchRecord>| {
                let (over, all) = rs.fold((0usize, 0usize), |(o, a), r| {
                    (
                        o + r.taken_over,
                        a + r.taken_over + r.sample.found + r.stale,
                    )
                });
                (all > 0).then(|| over as f64 / all as f64)
            };
            s.taken_over = share(&mut o.searches.iter());
            let mut by_kind = serde_json::Map::new();
            for (name, kind) in KINDS {
                let v = share(&mut o.searches.iter().filter(|r| r.kind == kind));
                by_kind.insert(name.into(), v.map_or(Value::Null, |x| serde_json::json!(x)));
            }
            s.taken_over_by_kind = Some(by_kind);
            s.searches_taken_over = (!o.searches.is_empty()).then(|| {
                o.searches.iter().filter(|r| r.taken_over > 0).count() as f64
                    / o.searches.len() as f64
            });
        }
        s.reference = references(&s);
        s
    }

    /// The summary of a swarm run.
    pub fn from_swarm(sc: &Scenario, seed: u64, o: &SwarmOutcome) -> Self {
        let common = Common {
            samples: o
                .searches
                .iter()
                .map(|r| (&r.sample, Some(r.kind)))
                .collect(),
            propagation: &o.propagation_ms,
            revocation: &o.revocation_ms,
        };
        let mut s = base("swarm", sc, seed, common, o.stale_results, o.wall_s);
        s.propagation_coverage = coverage(
            o.propagation_ms.len(),
            o.propagation_unreached + o.propagation_recovered,
        );
        s.revocation_coverage = coverage(
            o.revocation_ms.len(),
            o.revocation_unreached + o.revocation_recovered,
        );
        s.propagation_recovered = Some(o.propagation_recovered);
        s.revocation_recovered = Some(o.revocation_recovered);
        s.revocations_deferred = Some(o.revocations_deferred);
        s.bootstrap_s = Some(o.bootstrap_s);
        s.populate_s = Some(o.populate_s);
        s.rss_per_node_mb = Some(o.rss_per_node_mb);
        s.restarts = Some(o.restarts);
        s.searches_moved = Some(o.searches_moved);
        s.reference = references(&s);
        s
    }

    /// A short human-readable report, with the published figures beside.
    pub fn text(&self) -> String {
        let mut t = String::new();
        let p = |x: &Percentiles| format!("p50 {:.0} / p95 {:.0} / p99 {:.0}", x.p50, x.p95, x.p99);
        t += &format!(
            "{} [{}] {} nodes, {} agents, {} searches (limit {})\n",
            self.scenario, self.engine, self.nodes, self.agents, self.searches, self.limit
        );
        t += &format!("  recall               {:.4}\n", self.recall);
        for (k, v) in &self.recall_by_kind {
            if let Some(x) = v.as_f64() {
                t += &format!("    {k:<18} {x:.4}\n");
            }
        }
        t += &format!("  search latency ms    {}\n", p(&self.latency_ms));
        t += &format!(
            "  provider lookup      {:.1} requests ({:.1} failed; all {} shards), hops to first providers {}\n",
            self.requests_per_lookup,
            self.failed_requests_per_lookup,
            self.node.shards,
            self.lookup_hops.as_ref().map_or("not measured".into(), p)
        );
        t += &format!(
            "  per search           {:.1} messages, {:.0} bytes\n",
            self.messages_per_search, self.bytes_per_search
        );
        let probes = |x: &Percentiles, coverage: Option<f64>| {
            if coverage.is_none() && x.p99 == 0.0 {
                "no probes".to_owned()
            } else {
                format!(
                    "{} (coverage {})",
                    p(x),
                    coverage.map_or("-".into(), |c| format!("{c:.4}"))
                )
            }
        };
        t += &format!(
            "  propagation ms       {}\n",
            probes(&self.propagation_ms, self.propagation_coverage)
        );
        t += &format!(
            "  revocation ms        {}, stale results {}\n",
            probes(&self.revocation_ms, self.revocation_coverage),
            self.stale_results
        );
        if let (Some(share), Some(n)) = (self.taken_over, self.searches_taken_over) {
            t += &format!(
                "  taken over           {share:.4} of the results a forger's version ({n:.4} of the searches had one)\n"
            );
            for (k, v) in self.taken_over_by_kind.iter().flatten() {
                if let Some(x) = v.as_f64() {
                    t += &format!("    {k:<18} {x:.4}\n");
                }
            }
        }
        if let Some(l) = &self.lookups {
            t += &format!(
                "  Kademlia lookups     {}: hops to closest {}, {:.1} requests, closest answered in {} ms ({:.0} % within 500 ms)\n",
                l.count,
                p(&l.hops),
                l.requests_mean,
                p(&l.closest_ms),
                l.closest_under_500ms * 100.0
            );
        }
        if let (Some(m), Some(b)) = (
            self.messages_per_node_per_hour,
            self.bytes_per_node_per_hour,
        ) {
            t += &format!(
                "  per node per hour    {m:.0} messages, {:.1} KiB\n",
                b / 1024.0
            );
        }
        t += &format!(
            "  simulator            {:.1} s wall, {:.0} MiB peak RSS\n",
            self.wall_s, self.peak_rss_mb
        );
        if let (Some(b), Some(p), Some(m)) =
            (self.bootstrap_s, self.populate_s, self.rss_per_node_mb)
        {
            t += &format!(
                "  swarm                bootstrap {b:.1} s, population held after {p:.1} s more, {m:.2} MiB per node\n"
            );
        }
        if let (Some(r), Some(m)) = (self.restarts, self.searches_moved) {
            if r > 0 {
                t += &format!(
                    "  churn                {r} restarts, {m} searches asked of the next live node\n"
                );
            }
        }
        let recovered = (self.propagation_recovered, self.revocation_recovered);
        if let (Some(p), Some(r)) = recovered {
            if p + r > 0 {
                t += &format!(
                    "  after a restart      {p} probe and {r} tombstone arrivals (not in the times; not reached in the coverage)\n"
                );
            }
        }
        if let Some(d) = self.revocations_deferred.filter(|&d| d > 0) {
            t += &format!(
                "  deferred             {d} revocations waited for their home to start again\n"
            );
        }
        t += "  published figures:\n";
        for r in &self.reference {
            t += &format!(
                "    {:<44} published {:<22} simulated {:<10} ({})\n",
                r.metric,
                r.published,
                r.simulated.map_or("-".into(), |v| format!("{v:.2}")),
                r.source
            );
        }
        t
    }
}

/// Published DHT figures, each beside this run's value.
fn references(s: &Summary) -> Vec<Reference> {
    let l = s.lookups.as_ref();
    vec![
        Reference {
            metric: "Kademlia hops to the closest node, median",
            published: "about 2-3 (10k-100k nodes)",
            source: "Maymounkov & Mazieres 2002: log2(N)/b hops; measured Kad/IPFS lookups",
            simulated: l.map(|l| l.hops.p50),
        },
        Reference {
            metric: "Kademlia hops to the closest node, p95",
            published: "<= 5",
            source: "as above",
            simulated: l.map(|l| l.hops.p95),
        },
        Reference {
            metric: "requests per Kademlia lookup",
            published: "25-50",
            source: "libp2p/IPFS DHT lookups (k = 20, alpha = 3)",
            simulated: l.map(|l| l.requests_mean),
        },
        Reference {
            metric: "share of lookups under 500 ms",
            published: "80 %",
            source: "Trautwein et al., Design and Evaluation of IPFS, SIGCOMM 2022",
            simulated: l.map(|l| l.closest_under_500ms * 100.0),
        },
        Reference {
            metric: "lookup latency median, ms",
            published: "100-200 (after fixes)",
            source: "BitTorrent mainline DHT: Jimenez et al. 2011, Sub-second lookups on a large-scale Kademlia-based overlay",
            simulated: l.map(|l| l.closest_ms.p50),
        },
    ]
}

/// Writes the CSV series of a run into `dir`: `searches.csv`,
/// `convergence.csv` and, when the engine ran plain lookups,
/// `lookups.csv`.
///
/// # Errors
/// An I/O error writing a file.
pub fn write_csv(dir: &Path, o: &Series<'_>) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("searches.csv"))?);
    writeln!(
        f,
        "at_s,kind,found,expected,recall,latency_ms,lookup_requests,lookup_failed,lookup_hops,messages,bytes,stale,asked,answered,asked_providers,taken_over"
    )?;
    for r in o.searches {
        let s = &r.sample;
        writeln!(
            f,
            "{:.6},{:?},{},{},{:.4},{:.3},{},{},{},{},{},{},{},{},{},{}",
            r.at_s,
            r.kind,
            s.found,
            s.expected,
            recall_of(s),
            s.latency_ms,
            s.lookup_requests,
            s.lookup_failed,
            s.lookup_hops.map_or(String::new(), |h| h.to_string()),
            s.messages,
            s.bytes,
            r.stale,
            r.asked,
            r.answered,
            r.asked_providers,
            r.taken_over
        )?;
    }
    f.flush()?;
    if let Some(lookups) = o.lookups {
        let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("lookups.csv"))?);
        writeln!(f, "requests,hops,closest_ms,finished_ms")?;
        for l in lookups {
            writeln!(
                f,
                "{},{},{},{:.3}",
                l.requests,
                l.hops.map_or(String::new(), |h| h.to_string()),
                l.closest_ms.map_or(String::new(), |m| format!("{m:.3}")),
                l.latency_ms
            )?;
        }
        f.flush()?;
    }
    // Convergence as quantiles (every 0.5 %, then 99.9 % and the last):
    // a 100,000-node run has a value per (probe, node).
    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("convergence.csv"))?);
    writeln!(f, "kind,share,ms")?;
    for (kind, values) in [("publish", o.propagation_ms), ("revoke", o.revocation_ms)] {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            continue;
        }
        let shares = (1..=200).map(|i| f64::from(i) * 0.5).chain([99.9]);
        let mut shares: Vec<f64> = shares.collect();
        shares.sort_by(f64::total_cmp);
        for p in shares {
            writeln!(f, "{kind},{:.4},{:.3}", p / 100.0, percentile(&v, p))?;
        }
    }
    f.flush()
}

/// Two summaries (e.g. the DES and the swarm run of one calibration
/// scenario) side by side, with the difference of each shared metric.
pub fn side_by_side(a: &Value, b: &Value) -> String {
    let rows = [
        ("engine", "/engine"),
        ("scenario", "/scenario"),
        ("nodes", "/nodes"),
        ("agents", "/agents"),
        ("searches", "/searches"),
        ("recall", "/recall"),
        ("  normal", "/recall_by_kind/normal"),
        ("  eclipsed", "/recall_by_kind/eclipsed"),
        ("taken over", "/taken_over"),
        ("searches taken over", "/searches_taken_over"),
        ("latency p50 ms", "/latency_ms/p50"),
        ("latency p95 ms", "/latency_ms/p95"),
        ("latency p99 ms", "/latency_ms/p99"),
        ("requests per lookup", "/requests_per_lookup"),
        ("  of which failed", "/failed_requests_per_lookup"),
        ("messages per search", "/messages_per_search"),
        ("propagation p50 ms", "/propagation_ms/p50"),
        ("propagation p95 ms", "/propagation_ms/p95"),
        ("propagation p99 ms", "/propagation_ms/p99"),
        ("revocation p50 ms", "/revocation_ms/p50"),
        ("revocation p99 ms", "/revocation_ms/p99"),
        ("propagation coverage", "/propagation_coverage"),
        ("revocation coverage", "/revocation_coverage"),
        ("stale results", "/stale_results"),
        ("bootstrap s", "/bootstrap_s"),
        ("wall s", "/wall_s"),
        ("peak RSS MiB", "/peak_rss_mb"),
    ];
    let show = |v: Option<&Value>| match v {
        Some(Value::Number(n)) => format!("{:.4}", n.as_f64().unwrap_or(f64::NAN)),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "-".into(),
    };
    let mut t = format!("{:<22} {:>14} {:>14} {:>12}\n", "metric", "A", "B", "B - A");
    for (name, ptr) in rows {
        let (x, y) = (a.pointer(ptr), b.pointer(ptr));
        let diff = match (x.and_then(Value::as_f64), y.and_then(Value::as_f64)) {
            (Some(x), Some(y)) => format!("{:+.4}", y - x),
            _ => String::new(),
        };
        t += &format!("{name:<22} {:>14} {:>14} {diff:>12}\n", show(x), show(y));
    }
    t
}

/// A Markdown table of several summaries, one row each (the results page).
pub fn markdown_table(summaries: &[Value]) -> String {
    let num = |v: &Value, ptr: &str, digits: usize| {
        v.pointer(ptr)
            .and_then(Value::as_f64)
            .map_or("-".to_owned(), |x| format!("{x:.digits$}"))
    };
    let mut t = String::from(
        "| scenario | engine | nodes | agents | searches | recall | latency p50 / p95 / p99 ms | requests per lookup | messages per search | propagation p50 / p95 / p99 ms | revocation p50 / p99 ms | stale | lookup hops p50 / p95 | wall s | peak RSS MiB |\n\
         | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- | --- | ---: | --- | ---: | ---: |\n",
    );
    for s in summaries {
        let str_of = |ptr: &str| {
            s.pointer(ptr)
                .and_then(Value::as_str)
                .unwrap_or("-")
                .to_owned()
        };
        t += &format!(
            "| {} | {} | {} | {} | {} | {} | {} / {} / {} | {} | {} | {} / {} / {} | {} / {} | {} | {} / {} | {} | {} |\n",
            str_of("/scenario"),
            str_of("/engine"),
            num(s, "/nodes", 0),
            num(s, "/agents", 0),
            num(s, "/searches", 0),
            num(s, "/recall", 4),
            num(s, "/latency_ms/p50", 0),
            num(s, "/latency_ms/p95", 0),
            num(s, "/latency_ms/p99", 0),
            num(s, "/requests_per_lookup", 1),
            num(s, "/messages_per_search", 1),
            num(s, "/propagation_ms/p50", 0),
            num(s, "/propagation_ms/p95", 0),
            num(s, "/propagation_ms/p99", 0),
            num(s, "/revocation_ms/p50", 0),
            num(s, "/revocation_ms/p99", 0),
            num(s, "/stale_results", 0),
            num(s, "/lookups/hops/p50", 0),
            num(s, "/lookups/hops/p95", 0),
            num(s, "/wall_s", 1),
            num(s, "/peak_rss_mb", 0),
        );
    }
    t
}
