//! The discrete-event engine: 10,000–100,000 nodes and up to a million
//! agents in virtual time (µs), one event queue ([`queue::Queue`]), one
//! seeded RNG per purpose.
//!
//! The starting population is placed in the state the mesh converges to
//! (nothing of it is gossiped): every node's routing table by the bucket
//! rules (`des/kad.rs`), provider records of every capability shard at the
//! k nodes closest to its key, each holding the first
//! `max_providers_per_key` providers that announced, and the records at
//! the nodes that hold them, by rule rather than stored: under
//! `replication = "all"` every node holds every record, under `"lookups"`
//! a node holds its own registrations and what its searches stored. What
//! is measured runs message by message: Kademlia lookups (α in flight,
//! per-peer timeouts), the search's fan-out with its deadlines
//! (`des/search.rs`), gossip of published records and tombstones
//! (`des/gossip.rs`), churn and the routing repairs it causes.

mod churn;
mod gossip;
pub mod kad;
mod lookup;
pub mod queue;
mod search;

use std::collections::{HashMap, HashSet};

use agentmesh::config::Replication;
use agentmesh::mesh::capability_key;
use libp2p::kad::{KBucketKey, RecordKey};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use kad::{Id, Iter, Sorted};
use queue::Queue;

use crate::model::Outage;
pub use crate::model::SearchRecord;
use crate::population::{capability_name, plan_outages, rng_for, Packed, Population};
use crate::scenario::{Behaviour, EclipseProviders, JudgeRule, NodeParams, Scenario};

/// Bytes of a Kademlia request (key, type, framing).
const KAD_REQUEST_BYTES: u64 = 100;
/// Bytes per peer in a Kademlia answer (peer id and two addresses).
const KAD_PEER_BYTES: u64 = 80;
/// Bytes of a search request without its `known` list.
const SEARCH_REQUEST_BYTES: u64 = 200;
/// Bytes per `known` entry (digest and seq).
const KNOWN_ENTRY_BYTES: u64 = 18;
/// Bytes of one signed descriptor record (typical descriptors are 2–4 KiB).
const RECORD_BYTES: u64 = 3000;
/// Bytes of a gossip control message (IHAVE / IWANT).
const CONTROL_BYTES: u64 = 80;

/// One reference lookup: a plain Kademlia closest-node lookup.
#[derive(Debug, Clone)]
pub struct LookupRecord {
    /// Requests it sent.
    pub requests: u32,
    /// Hops to the node closest to the key (its depth), if it was reached.
    pub hops: Option<u32>,
    /// Time until the closest node answered, ms.
    pub closest_ms: Option<f64>,
    /// Time until the lookup finished, ms.
    pub latency_ms: f64,
}

/// Message counters of a run.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Counters {
    /// Kademlia requests sent.
    pub kad_requests: u64,
    /// Kademlia requests that timed out.
    pub kad_timeouts: u64,
    /// Kademlia requests a down node refused (`churn.refused_rtts`).
    pub kad_refused: u64,
    /// Search requests a down node refused (`churn.refused_rtts`).
    pub search_refused: u64,
    /// Search requests sent.
    pub search_requests: u64,
    /// Search answers received.
    pub search_answers: u64,
    /// Answers that came after the asker stopped waiting.
    pub late_answers: u64,
    /// Search requests a node refused (handler slots full).
    pub overloaded: u64,
    /// Gossip messages (records) sent, duplicates included.
    pub gossip_messages: u64,
    /// Gossip deliveries that were duplicates.
    pub gossip_duplicates: u64,
    /// IHAVE / IWANT control messages.
    pub gossip_control: u64,
    /// Provider announcements at the re-provide ticks and of restarted
    /// nodes (estimated, k per key, not simulated message by message).
    pub reprovide_messages_estimated: u64,
    /// Routing-table entries replaced after a timeout.
    pub table_repairs: u64,
    /// Takeover: a forger's version of an id an asker stored (an id it
    /// did not hold, or, under `judge = "highest_seq"`, one it held).
    pub takeover_stored: u64,
    /// Takeover: a forger's version an asker's judge refused (the id held
    /// from its owner: `not_owner` or `local_registration`).
    pub takeover_refused: u64,
    /// Takeover: an owner's version refused because the asker holds a
    /// forger's version of the id (a lower seq, or not the holder's signer).
    pub owner_refused: u64,
    /// Bytes of every message above.
    pub bytes: u64,
}

/// What a DES run measured.
#[derive(Debug, Clone, Default)]
pub struct DesOutcome {
    /// Every search.
    pub searches: Vec<SearchRecord>,
    /// The reference lookups.
    pub lookups: Vec<LookupRecord>,
    /// Per (probe, node live at its publication): ms until it held the record.
    pub propagation_ms: Vec<f64>,
    /// Probe deliveries that never happened (node live at publication).
    pub propagation_unreached: usize,
    /// Per (revoked agent, live node): ms until it had the tombstone.
    pub revocation_ms: Vec<f64>,
    /// Tombstone deliveries that never happened.
    pub revocation_unreached: usize,
    /// Results that were revoked agents.
    pub stale_results: usize,
    /// Messages.
    pub counters: Counters,
    /// Events processed.
    pub events: u64,
    /// Nodes (honest + sybils) and how many were online at the end.
    pub nodes_total: usize,
    /// Mean routing-table size.
    pub mean_table: f64,
    /// Seconds spent placing the converged state.
    pub setup_s: f64,
    /// Virtual seconds simulated.
    pub virtual_s: f64,
}

/// Progress as the engine reports it.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Searches done.
    pub done: u64,
    /// Searches in all.
    pub total: u64,
    /// Virtual time, s.
    pub virtual_s: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Honest,
    Drop,
    Forge,
    /// Signs honest agents' ids with its own key (`behaviour = "takeover"`).
    Takeover,
    /// A sybil of the eclipse, placed next to the shard key it eclipses.
    Sybil(u32),
}

/// One capability shard key and who holds its provider records.
struct ProviderKey {
    target: Id,
    /// Every node that provides it, in the order they announced.
    providers: Vec<u32>,
    /// The nodes holding provider records: (node, when stored, what).
    holders: Vec<(u32, u64, Vec<u32>)>,
}

enum Owner {
    Shard { search: u32, key: u32 },
    Probe { idx: u32, closest: u32 },
    Bootstrap,
}

struct Lookup {
    iter: Iter,
    from: u32,
    owner: Owner,
    requests: u32,
    /// Requests that failed while the lookup ran (timed out, refused).
    failed: u32,
    started: u64,
    done: bool,
}

#[derive(Debug, Clone, Copy)]
enum Ev {
    SearchStart(u32),
    ProbeLookup(u32),
    KadResponse { lookup: u32, from: u32 },
    KadTimeout { lookup: u32, node: u32 },
    KadRefused { lookup: u32, node: u32 },
    LookupDeadline(u32),
    SearchArrive { search: u32, to: u32 },
    SearchAnswer { search: u32, from: u32 },
    SearchRefused(u32),
    FanoutDeadline(u32),
    Gossip { item: u32, to: u32 },
    Forward { item: u32, node: u32 },
    IHave { item: u32, node: u32 },
    IHaveArrive { item: u32, to: u32, from: u32 },
    Publish(u32),
    Revoke,
    NodeDown(u32),
    NodeUp(u32),
    PartitionStart(u32),
    PartitionHeal,
    Reprovide,
}

/// The engine's state.
struct Sim<'a> {
    sc: &'a Scenario,
    np: NodeParams,
    pop: &'a Population,
    seed: u64,
    ids: Vec<Id>,
    sorted: Sorted,
    tables: Vec<Vec<u32>>,
    role: Vec<Role>,
    online: Vec<bool>,
    up_since: Vec<u64>,
    /// Under churn, the outages both engines play for this seed.
    outages: Vec<Outage>,
    partition: Option<u32>,
    inflight: Vec<u16>,
    cap_agents: Packed,
    node_agents: Packed,
    stored: HashMap<u32, Vec<u32>>,
    /// Per node, the agents it holds in a forger's version (takeover).
    forged: HashMap<u32, HashSet<u32>>,
    /// Who may write an id an asker holds (takeover).
    judge: JudgeRule,
    keys: Vec<ProviderKey>,
    key_index: HashMap<(u32, u32), u32>,
    /// Eclipse sybils per shard: the shard key they surround, and who they are.
    sybils: HashMap<u32, (Id, Vec<u32>)>,
    lookups: Vec<Lookup>,
    searches: Vec<search::SearchState>,
    gossip: Vec<gossip::Item>,
    /// Publish probe -> its gossip item (`u32::MAX` before it is published).
    publish_item: Vec<u32>,
    /// Revoked agent -> its tombstone's gossip item.
    revoked: HashMap<u32, u32>,
    queue: Queue<Ev>,
    rng: ChaCha8Rng,
    out: DesOutcome,
    end_us: u64,
}

fn us(ms: f64) -> u64 {
    (ms * 1000.0).round().max(0.0) as u64
}

/// A deterministic 64-bit mix (splitmix64).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn unit(x: u64) -> f64 {
    (mix(x) >> 11) as f64 / (1u64 << 53) as f64
}

/// The Kademlia key a capability shard's provider records live under
/// (libp2p hashes the record key into the key space).
pub fn shard_target(capability: u32, shard: u32) -> Id {
    let key = RecordKey::new(&capability_key(&capability_name(capability), shard));
    let hashed = KBucketKey::new(key);
    let mut b = [0u8; 32];
    b.copy_from_slice(hashed.hashed_bytes());
    Id::from_bytes(&b)
}

/// Runs `scenario` over `pop` with `seed`; `progress` is called now and then.
pub fn run(
    scenario: &Scenario,
    pop: &Population,
    seed: u64,
    progress: &mut dyn FnMut(Progress),
) -> DesOutcome {
    let started = std::time::Instant::now();
    let mut sim = Sim::place(scenario, pop, seed);
    sim.out.setup_s = started.elapsed().as_secs_f64();
    sim.schedule_all();
    let total = sim.searches_total();
    let mut last = 0u64;
    while let Some((now, ev)) = sim.queue.pop() {
        if now > sim.end_us {
            break;
        }
        sim.handle(now, ev);
        if sim.queue.processed() - last >= 1 << 15 {
            last = sim.queue.processed();
            progress(Progress {
                done: sim.out.searches.len() as u64,
                total,
                virtual_s: now as f64 / 1e6,
            });
        }
    }
    sim.finish()
}

impl<'a> Sim<'a> {
    /// Places the converged state.
    fn place(sc: &'a Scenario, pop: &'a Population, seed: u64) -> Self {
        let np = sc.node();
        let honest = pop.peers.len();
        let mut ids: Vec<Id> = pop.kad_keys.iter().map(Id::from_bytes).collect();
        let mut role = vec![Role::Honest; honest];
        let mut rng = rng_for(seed, 10);
        if let Some(a) = &sc.adversarial {
            let bad = (a.share * honest as f64).round() as usize;
            let kind = match a.behaviour {
                Behaviour::Drop => Role::Drop,
                Behaviour::Forge => Role::Forge,
                Behaviour::Takeover => Role::Takeover,
            };
            for i in rand::seq::index::sample(&mut rng, honest, bad) {
                role[i] = kind;
            }
        }
        let mut sybils: HashMap<u32, (Id, Vec<u32>)> = HashMap::new();
        if let Some(e) = sc.adversarial.as_ref().and_then(|a| a.eclipse.as_ref()) {
            for s in 0..np.shards {
                let target = shard_target(e.capability_rank as u32, s);
                let mut list = Vec::new();
                for _ in 0..e.sybils_per_shard {
                    // 64 leading bits shared with the key: closer than any
                    // honest node of a 10^5-node network (~17 bits).
                    let id = Id(
                        target.0 & !(u128::MAX >> 64) | (rng.gen::<u64>() as u128),
                        rng.gen(),
                    );
                    list.push(ids.len() as u32);
                    ids.push(id);
                    role.push(Role::Sybil(s));
                }
                sybils.insert(s, (target, list));
            }
        }
        let total = ids.len();
        let sorted = Sorted::new(&ids);
        let tables = kad::build_tables(&ids, &sorted, np.k, &mut rng);

        // Churn: the outage plan the swarm engine plays for this seed, so
        // that both engines stop and start the same nodes at the same
        // times. A node whose first outage starts at 0 starts down.
        let outages = plan_outages(sc, seed);
        let mut online = vec![true; total];
        for o in outages.iter().filter(|o| o.down_at.is_zero()) {
            online[o.node] = false;
        }
        // Records by rule: agents per capability and per home node.
        let cap_agents = Packed::from_pairs(
            sc.capabilities.vocabulary,
            (0..pop.home.len())
                .flat_map(|a| pop.agent_caps.get(a).iter().map(move |&c| (c, a as u32))),
        );
        let node_agents = Packed::from_pairs(
            honest,
            pop.home.iter().enumerate().map(|(a, &h)| (h, a as u32)),
        );
        let mut sim = Self {
            sc,
            np,
            pop,
            seed,
            ids,
            sorted,
            tables,
            role,
            online,
            up_since: vec![0; total],
            outages,
            partition: None,
            inflight: vec![0; total],
            cap_agents,
            node_agents,
            stored: HashMap::new(),
            forged: HashMap::new(),
            judge: sc
                .adversarial
                .as_ref()
                .map(|a| a.judge_rule())
                .unwrap_or_default(),
            keys: Vec::new(),
            key_index: HashMap::new(),
            sybils,
            lookups: Vec::new(),
            searches: Vec::new(),
            gossip: Vec::new(),
            publish_item: vec![u32::MAX; pop.publish.len()],
            revoked: HashMap::new(),
            queue: Queue::default(),
            rng: rng_for(seed, 12),
            out: DesOutcome::default(),
            end_us: (sc.duration_s * 1e6) as u64 + 60_000_000,
        };
        sim.place_providers(&mut rng);
        sim.out.nodes_total = total;
        sim.out.mean_table =
            sim.tables.iter().map(Vec::len).sum::<usize>() as f64 / total.max(1) as f64;
        sim
    }

    /// Provider records: each home node provides each of its agents'
    /// capabilities under its own shard; the k closest nodes to each shard
    /// key hold the first `max_providers_per_key` announcements, less the
    /// scenario's `lost_announcements` share, which reached none.
    fn place_providers(&mut self, rng: &mut ChaCha8Rng) {
        let mut per_key: HashMap<(u32, u32), Vec<u32>> = HashMap::new();
        for (a, &home) in self.pop.home.iter().enumerate() {
            let shard = self.pop.shard[home as usize];
            for &c in self.pop.agent_caps.get(a) {
                per_key.entry((c, shard)).or_default().push(home);
            }
        }
        let mut keys: Vec<((u32, u32), Vec<u32>)> = per_key.into_iter().collect();
        keys.sort_unstable_by_key(|(k, _)| *k);
        let lost = self.sc.lost_announcements;
        for ((c, s), mut providers) in keys {
            providers.sort_unstable();
            providers.dedup();
            providers.shuffle(rng);
            if lost > 0.0 {
                providers.retain(|_| rng.gen::<f64>() >= lost);
            }
            self.add_key(c, s, providers, 0);
        }
    }

    fn add_key(&mut self, c: u32, s: u32, providers: Vec<u32>, now: u64) -> u32 {
        let target = shard_target(c, s);
        let holders = self.closest_online(target, self.np.k);
        let max = self.np.max_providers_per_key;
        let holders = holders
            .into_iter()
            .map(|h| {
                let list = if matches!(self.role[h as usize], Role::Sybil(_)) {
                    self.sybil_providers(h)
                } else {
                    providers.iter().copied().take(max).collect()
                };
                (h, now, list)
            })
            .collect();
        let idx = self.keys.len() as u32;
        self.keys.push(ProviderKey {
            target,
            providers,
            holders,
        });
        self.key_index.insert((c, s), idx);
        idx
    }

    /// The provider records an eclipse's sybil holds for the key it
    /// surrounds: none, or (`providers = "sybils"`) its fellow sybils.
    fn sybil_providers(&self, sybil: u32) -> Vec<u32> {
        let Role::Sybil(s) = self.role[sybil as usize] else {
            return Vec::new();
        };
        let names = self
            .sc
            .adversarial
            .as_ref()
            .and_then(|a| a.eclipse.as_ref())
            .is_some_and(|e| e.providers == EclipseProviders::Sybils);
        if !names {
            return Vec::new();
        }
        self.sybils[&s]
            .1
            .iter()
            .copied()
            .take(self.np.max_providers_per_key)
            .collect()
    }

    fn closest_online(&self, target: Id, k: usize) -> Vec<u32> {
        self.sorted
            .closest(&self.ids, target, k, |n| self.online[n as usize])
    }

    fn schedule_all(&mut self) {
        for (i, s) in self.pop.searches.iter().enumerate() {
            self.queue.push(s.at_us, Ev::SearchStart(i as u32));
        }
        let mut r = rng_for(self.seed, 13);
        for i in 0..self.sc.probe_lookups {
            let at = (r.gen::<f64>() * self.sc.duration_s * 1e6) as u64;
            self.queue.push(at, Ev::ProbeLookup(i as u32));
        }
        for (i, p) in self.pop.publish.iter().enumerate() {
            self.queue.push(p.at_us, Ev::Publish(i as u32));
        }
        if !self.pop.revoke.is_empty() {
            self.queue.push(self.pop.revoke_at_us, Ev::Revoke);
        }
        for (i, p) in self.sc.partitions.iter().enumerate() {
            self.queue
                .push(us(p.start_s * 1000.0), Ev::PartitionStart(i as u32));
            self.queue.push(us(p.heal_s * 1000.0), Ev::PartitionHeal);
        }
        for o in &self.outages {
            let n = o.node as u32;
            if !o.down_at.is_zero() {
                self.queue
                    .push(o.down_at.as_micros() as u64, Ev::NodeDown(n));
            }
            self.queue.push(o.up_at.as_micros() as u64, Ev::NodeUp(n));
        }
        let tick = self.np.reprovide_s * 1_000_000;
        let mut t = tick;
        while t < (self.sc.duration_s * 1e6) as u64 {
            self.queue.push(t, Ev::Reprovide);
            t += tick;
        }
    }

    fn searches_total(&self) -> u64 {
        self.pop.searches.len() as u64
    }

    fn handle(&mut self, now: u64, ev: Ev) {
        match ev {
            Ev::SearchStart(i) => self.search_start(now, i),
            Ev::ProbeLookup(i) => self.probe_lookup(now, i),
            Ev::KadResponse { lookup, from } => self.kad_response(now, lookup, from),
            Ev::KadTimeout { lookup, node } => self.kad_timeout(now, lookup, node),
            Ev::KadRefused { lookup, node } => self.kad_refused(now, lookup, node),
            Ev::LookupDeadline(s) => self.lookup_deadline(now, s),
            Ev::SearchArrive { search, to } => self.search_arrive(now, search, to),
            Ev::SearchAnswer { search, from } => self.search_answer(now, search, from),
            Ev::SearchRefused(search) => self.search_refused(now, search),
            Ev::FanoutDeadline(s) => self.fanout_deadline(now, s),
            Ev::Gossip { item, to } => self.gossip_deliver(now, item, to),
            Ev::Forward { item, node } => self.gossip_forward(now, item, node),
            Ev::IHave { item, node } => self.gossip_ihave(now, item, node),
            Ev::IHaveArrive { item, to, from } => self.gossip_ihave_arrive(now, item, to, from),
            Ev::Publish(i) => self.publish(now, i),
            Ev::Revoke => self.revoke(now),
            Ev::NodeDown(n) => self.node_down(n),
            Ev::NodeUp(n) => self.node_up(now, n),
            Ev::PartitionStart(i) => self.partition = Some(i),
            Ev::PartitionHeal => self.partition = None,
            Ev::Reprovide => self.reprovide(now),
        }
    }

    // --- the network ---------------------------------------------------

    /// Whether `a` and `b` are on the same side of the active partition.
    fn reachable(&self, a: u32, b: u32) -> bool {
        match self.partition {
            None => true,
            Some(i) => self.side(i, a) == self.side(i, b),
        }
    }

    fn side(&self, partition: u32, node: u32) -> bool {
        let f = self.sc.partitions[partition as usize].fraction;
        unit(self.seed ^ mix(u64::from(partition) + 1) ^ u64::from(node)) < f
    }

    /// The round-trip time between two nodes, µs (drawn once per pair).
    fn rtt(&self, a: u32, b: u32) -> u64 {
        let (x, y) = if a < b { (a, b) } else { (b, a) };
        let h = self.seed ^ (u64::from(x) << 32 | u64::from(y));
        let (u1, u2) = (unit(h).max(1e-12), unit(h ^ 0x5555_5555_5555_5555));
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        let l = &self.sc.latency;
        us(l.rtt_median_ms * (l.rtt_sigma * z).exp())
    }

    /// Request-response time from `a` to `b` and back, µs: a connection
    /// setup first unless `b` is in `a`'s routing table, then the service time.
    fn round_trip(&self, a: u32, b: u32, service_ms: f64) -> u64 {
        let rtt = self.rtt(a, b);
        let connect = if self.tables[a as usize].contains(&b) {
            0
        } else {
            (rtt as f64 * self.sc.latency.connect_rtts) as u64
        };
        rtt + connect + us(service_ms)
    }

    fn lost(&mut self, messages: i32) -> bool {
        self.sc.loss > 0.0 && self.rng.gen::<f64>() >= (1.0 - self.sc.loss).powi(messages)
    }

    /// Whether `to` answers a Kademlia request of `from` now.
    fn kad_answers(&mut self, from: u32, to: u32) -> bool {
        self.online[to as usize]
            && self.role[to as usize] != Role::Drop
            && self.reachable(from, to)
            && !self.lost(2)
    }

    fn finish(mut self) -> DesOutcome {
        self.collect_gossip();
        self.out.events = self.queue.processed();
        self.out.virtual_s = self.sc.duration_s;
        self.out
    }

    /// The replication mode nodes run.
    fn replication(&self) -> Replication {
        self.np.replication
    }
}
