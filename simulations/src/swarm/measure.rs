//! What a run measures: one search's outcome from its asking node's
//! counters ([`search_once`]), the ground truth it is scored against
//! ([`Truth`]), the process's memory, and the one-line sums of the
//! nodes' counters that the progress lines show.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use agentmesh::mesh::StatsSnapshot;
use agentmesh::registry::SearchQuery;
use agentmesh::search::{Asked, Scope};
use agentmesh::store::Filter;
use anyhow::Result;

use super::agents::{agent_id, normalised};
use super::node::{statuses, SimNode, Swarm};
use crate::model::{SearchKind, SearchRecord, SearchSample, SwarmAgent};

/// Resident and peak memory of this process, in bytes (Linux; zeros
/// elsewhere).
pub fn memory() -> (u64, u64) {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return (0, 0);
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

pub(super) fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// A line of the swarm's gossip verdicts, summed over the nodes: what
/// explains a record that did not arrive somewhere.
pub(super) fn gossip_line(swarm: &Swarm) -> String {
    let mut accepted = 0u64;
    let mut ignored: BTreeMap<String, u64> = Default::default();
    let mut rejected = 0u64;
    let mut queries: BTreeMap<String, u64> = Default::default();
    for n in &swarm.nodes {
        let s = n.mesh.stats();
        for (kind, outcomes) in &s.kad_queries {
            for (outcome, v) in outcomes {
                *queries.entry(format!("{kind}/{outcome}")).or_default() += v;
            }
        }
        accepted += s.gossip.accepted;
        rejected += s.gossip.rejected_total();
        for (k, v) in s.gossip.ignored {
            *ignored.entry(k).or_default() += v;
        }
    }
    format!(
        "gossip over all nodes: {accepted} accepted, {rejected} rejected, ignored {ignored:?}; \
         Kademlia queries ended: {queries:?}"
    )
}

/// A line of the search requests over all nodes: sent, failed and timed
/// out at the askers, served and refused (by reason) at the peers asked,
/// the dials that failed, the incoming connections refused or failed, and
/// the connections trimmed: what explains a search whose peers did not
/// answer.
pub(super) fn serving_line(swarm: &Swarm) -> String {
    let (mut sent, mut failed, mut timed_out, mut served, mut dial_failures) = (0, 0, 0, 0, 0);
    let (mut incoming_failures, mut trimmed) = (0, 0);
    let mut refused: BTreeMap<String, u64> = Default::default();
    let mut failed_by: BTreeMap<String, u64> = Default::default();
    for n in &swarm.nodes {
        let s = n.mesh.stats();
        sent += s.requests_sent;
        failed += s.requests_failed;
        for (k, v) in s.requests_failed_by {
            *failed_by.entry(k).or_default() += v;
        }
        timed_out += s.requests_timed_out;
        served += s.searches_served;
        dial_failures += s.dial_failures;
        incoming_failures += s.incoming_failures;
        trimmed += s.connections_trimmed;
        for (k, v) in s.searches_refused {
            *refused.entry(k).or_default() += v;
        }
    }
    format!(
        "search requests over all nodes: {sent} sent, {failed} failed {failed_by:?}, {timed_out} timed out; \
         {served} served, refused {refused:?}; {dial_failures} dials failed, \
         {incoming_failures} incoming connections failed or refused, {trimmed} trimmed"
    )
}

/// A line of the swarm's mean connections, routing-table peers, gossip
/// mesh peers and DHT records per node: what a node's memory goes with.
pub(super) async fn peers_line(swarm: &Swarm) -> Result<String> {
    let (mut connected, mut routing, mut mesh, mut dht, mut max_connected) = (0, 0, 0, 0, 0);
    let all: Vec<usize> = (0..swarm.nodes.len()).collect();
    for (_, s) in statuses(&swarm.nodes, &all).await? {
        connected += s.connected_peers;
        max_connected = max_connected.max(s.connected_peers);
        routing += s.routing_table_peers;
        mesh += s.gossip_mesh_peers;
        dht += s.dht_records;
    }
    let n = swarm.nodes.len().max(1) as f64;
    Ok(format!(
        "per node: {:.1} connected peers (most {max_connected}), {:.1} in the routing table, \
         {:.1} gossip mesh peers, {:.1} DHT records",
        connected as f64 / n,
        routing as f64 / n,
        mesh as f64 / n,
        dht as f64 / n
    ))
}

/// Finished Kademlia queries of `kind` in a snapshot, whatever their outcome.
pub(super) fn queries_ended(s: &StatsSnapshot, kind: &str) -> u64 {
    s.kad_queries.get(kind).map_or(0, |m| m.values().sum())
}

/// Kademlia requests of the provider lookups in a snapshot: sent, and of
/// those failed.
pub(super) fn provider_requests(s: &StatsSnapshot) -> (u64, u64) {
    let of = |m: &BTreeMap<String, u64>| m.get("get_providers").copied().unwrap_or(0);
    (of(&s.kad_requests_sent), of(&s.kad_requests_failed))
}

/// Runs one search from its node; `truth` holds the live agents of its
/// capability, `revoked` the agents tombstoned so far (stale on a page);
/// `at_s` is when it starts (s since the run started).
pub(super) async fn search_once(
    node: &SimNode,
    capability: &str,
    limit: usize,
    shards: u32,
    truth: &HashSet<String>,
    revoked: &HashSet<String>,
    at_s: f64,
) -> Result<SearchRecord> {
    let query = SearchQuery {
        filter: Filter {
            capabilities: normalised(&[capability.to_owned()]),
            ..Filter::default()
        },
        query: None,
        after: None,
        limit,
        explain: false,
    };
    let before = node.mesh.stats();
    let t0 = Instant::now();
    let outcome = node.search.search(&query, Scope::Mesh).await?;
    let latency = t0.elapsed();
    let report = outcome.mesh;
    let looked_up = report
        .as_ref()
        .is_some_and(|r| r.whom != Asked::Nobody && !query.filter.capabilities.is_empty());
    // The lookup's shard queries end (and are counted) as the loop
    // stops them, just after the lookup answered.
    let mut after = node.mesh.stats();
    if looked_up {
        let want = queries_ended(&before, "get_providers") + u64::from(shards);
        let until = Instant::now() + Duration::from_secs(10);
        while queries_ended(&after, "get_providers") < want && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(5)).await;
            after = node.mesh.stats();
        }
    }
    let ((sent_after, failed_after), (sent_before, failed_before)) =
        (provider_requests(&after), provider_requests(&before));
    let lookup_requests = sent_after.saturating_sub(sent_before);
    let lookup_failed = failed_after.saturating_sub(failed_before);
    let found: HashSet<&str> = outcome
        .page
        .items
        .iter()
        .map(|s| s.id.as_str())
        .filter(|id| truth.contains(*id))
        .collect();
    let stale = outcome
        .page
        .items
        .iter()
        .map(|s| s.id.as_str())
        .filter(|id| revoked.contains(*id))
        .collect::<HashSet<&str>>()
        .len();
    let (asked, answered) = report.as_ref().map_or((0, 0), |r| (r.asked, r.answered));
    let bytes = (after.transport.inbound + after.transport.outbound)
        .saturating_sub(before.transport.inbound + before.transport.outbound);
    let sample = SearchSample {
        found: found.len(),
        expected: truth.len().min(limit),
        latency_ms: latency.as_secs_f64() * 1000.0,
        lookup_requests: u32::try_from(lookup_requests).unwrap_or(u32::MAX),
        lookup_failed: u32::try_from(lookup_failed).unwrap_or(u32::MAX),
        lookup_hops: None,
        messages: u32::try_from(lookup_requests + (asked + answered) as u64).unwrap_or(u32::MAX),
        bytes,
    };
    Ok(SearchRecord {
        at_s,
        kind: SearchKind::Normal,
        sample,
        stale,
        taken_over: 0,
        asked: u32::try_from(asked).unwrap_or(u32::MAX),
        answered: u32::try_from(answered).unwrap_or(u32::MAX),
        asked_providers: report.as_ref().is_some_and(|r| r.whom == Asked::Providers),
    })
}

/// The ground truth of the searches: the live agents of each capability,
/// and the agents tombstoned so far. Under churn the probes change it as
/// they are played, as the DES's ground truth does at their times.
pub(super) struct Truth {
    pub(super) live: HashMap<String, HashSet<String>>,
    pub(super) revoked: HashSet<String>,
}

impl Truth {
    pub(super) fn of(agents: &[SwarmAgent]) -> Self {
        let mut t = Self {
            live: HashMap::new(),
            revoked: HashSet::new(),
        };
        for (i, a) in agents.iter().enumerate() {
            t.add(&agent_id(i), &a.capabilities);
        }
        t
    }

    pub(super) fn add(&mut self, id: &str, capabilities: &[String]) {
        for c in normalised(capabilities) {
            self.live.entry(c).or_default().insert(id.to_owned());
        }
    }

    pub(super) fn revoke(&mut self, id: &str, capabilities: &[String]) {
        for c in normalised(capabilities) {
            if let Some(ids) = self.live.get_mut(&c) {
                ids.remove(id);
            }
        }
        self.revoked.insert(id.to_owned());
    }
}
