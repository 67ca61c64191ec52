//! The [`Summary`] of a run (`summary.json`, and the last line of
//! stdout under `--json`), made the same way from either engine's
//! outcome, with the published reference figures beside the simulated
//! ones.

use serde::Serialize;
use serde_json::Value;

use crate::des::{Counters, DesOutcome};
use crate::model::{SearchKind, SearchRecord, SearchSample};
use crate::scenario::{Behaviour, NodeParams, Scenario};
use crate::swarm::SwarmOutcome;

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
