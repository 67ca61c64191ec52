//! The simulated population, generated from a scenario and its seed: the
//! nodes (real libp2p peer ids from seeded Ed25519 keys, so
//! [`shard_of`] and Kademlia's key hashing run unchanged), the agents
//! (a home node and Zipf-popular capabilities each), the searches (when,
//! from where, for what), the publish and revocation probes. Both engines
//! take their work from here; [`Population::swarm_params`] maps it onto the
//! real-swarm engine's [`SwarmParams`].

use std::time::Duration;

use agentmesh::mesh::shard_of;
use libp2p::identity::Keypair;
use libp2p::kad::KBucketKey;
use libp2p::PeerId;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Zipf};

use crate::model::{Outage, SearchKind, SwarmAgent, SwarmParams, SwarmSearch};
use crate::scenario::{NodeParams, Scenario};

/// The capability name of popularity rank `rank` (`cap-0` most popular).
pub fn capability_name(rank: u32) -> String {
    format!("cap-{rank}")
}

/// Lists of `u32` per owner, packed (offsets into one vector).
#[derive(Debug, Clone, Default)]
pub struct Packed {
    offsets: Vec<u32>,
    items: Vec<u32>,
}

impl Packed {
    /// Packs `pairs` of (owner, item) for owners `0..owners`, items in the
    /// order given.
    pub fn from_pairs(owners: usize, pairs: impl Iterator<Item = (u32, u32)> + Clone) -> Self {
        let mut counts = vec![0u32; owners + 1];
        for (o, _) in pairs.clone() {
            counts[o as usize + 1] += 1;
        }
        for i in 1..counts.len() {
            counts[i] += counts[i - 1];
        }
        let mut fill = counts.clone();
        let mut items = vec![0u32; counts[owners] as usize];
        for (o, it) in pairs {
            items[fill[o as usize] as usize] = it;
            fill[o as usize] += 1;
        }
        Self {
            offsets: counts,
            items,
        }
    }

    /// The items of `owner`.
    pub fn get(&self, owner: usize) -> &[u32] {
        &self.items[self.offsets[owner] as usize..self.offsets[owner + 1] as usize]
    }

    /// Owners.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// No owners.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One planned search.
#[derive(Debug, Clone, Copy)]
pub struct PlannedSearch {
    /// When, µs of virtual time.
    pub at_us: u64,
    /// The node asked.
    pub from: u32,
    /// The capability (rank).
    pub capability: u32,
    /// Why it runs.
    pub kind: SearchKind,
}

/// One agent published after convergence.
#[derive(Debug, Clone)]
pub struct PlannedPublish {
    /// When, µs.
    pub at_us: u64,
    /// Its home node.
    pub home: u32,
    /// Its capabilities (ranks).
    pub capabilities: Vec<u32>,
}

/// The generated population.
#[derive(Debug)]
pub struct Population {
    /// Peer ids of the nodes.
    pub peers: Vec<PeerId>,
    /// Kademlia keys of the nodes: SHA-256 of the peer id (libp2p's `KBucketKey`).
    pub kad_keys: Vec<[u8; 32]>,
    /// Each node's capability shard ([`shard_of`]).
    pub shard: Vec<u32>,
    /// Each agent's home node.
    pub home: Vec<u32>,
    /// Each agent's capabilities (ranks).
    pub agent_caps: Packed,
    /// The searches, in time order.
    pub searches: Vec<PlannedSearch>,
    /// The publish probes, in time order.
    pub publish: Vec<PlannedPublish>,
    /// The revoked agents (the first `revoke.probes` of the population) and when.
    pub revoke: Vec<u32>,
    /// When they are revoked, µs.
    pub revoke_at_us: u64,
    /// Seconds the keys took to generate.
    pub keygen_s: f64,
}

/// A seeded RNG for one purpose, so adding draws to one stream does not
/// shift another's.
pub fn rng_for(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

fn us(s: f64) -> u64 {
    (s * 1e6).round() as u64
}

impl Population {
    /// Generates the population of `scenario` with `seed`.
    pub fn generate(scenario: &Scenario, seed: u64) -> Self {
        let started = std::time::Instant::now();
        let node = scenario.node();
        let mut keys_rng = rng_for(seed, 1);
        let mut peers = Vec::with_capacity(scenario.nodes);
        for _ in 0..scenario.nodes {
            let mut secret = [0u8; 32];
            keys_rng.fill(&mut secret);
            let key = Keypair::ed25519_from_bytes(secret).expect("32 bytes are an ed25519 secret");
            peers.push(key.public().to_peer_id());
        }
        let kad_keys = peers
            .iter()
            .map(|p| {
                let key = KBucketKey::from(*p);
                let mut out = [0u8; 32];
                out.copy_from_slice(key.hashed_bytes());
                out
            })
            .collect();
        let shard = peers.iter().map(|p| shard_of(p, node.shards)).collect();
        let keygen_s = started.elapsed().as_secs_f64();

        let caps = &scenario.capabilities;
        let mut rng = rng_for(seed, 2);
        let zipf = Zipf::new(caps.vocabulary as u64, caps.zipf_exponent)
            .expect("validated: vocabulary >= 1, exponent >= 0");
        let mut home = Vec::with_capacity(scenario.agents);
        let mut pairs: Vec<(u32, u32)> = Vec::with_capacity(scenario.agents * 2);
        for a in 0..scenario.agents {
            home.push(rng.gen_range(0..scenario.nodes) as u32);
            for c in draw_caps(&mut rng, &zipf, caps.per_agent_min, caps.per_agent_max) {
                pairs.push((a as u32, c));
            }
        }
        let agent_caps = Packed::from_pairs(scenario.agents, pairs.iter().copied());
        drop(pairs);

        let searches = plan_searches(scenario, seed, &node);
        let mut prng = rng_for(seed, 4);
        let publish = scenario
            .publish
            .as_ref()
            .map(|p| {
                (0..p.probes)
                    .map(|i| PlannedPublish {
                        at_us: us(p.at_s + p.interval_s * i as f64),
                        home: prng.gen_range(0..scenario.nodes) as u32,
                        capabilities: draw_caps(
                            &mut prng,
                            &zipf,
                            caps.per_agent_min,
                            caps.per_agent_max,
                        ),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let (revoke, revoke_at_us) = scenario
            .revoke
            .as_ref()
            .map(|r| ((0..r.probes as u32).collect(), us(r.at_s)))
            .unwrap_or_default();
        let mut pop = Self {
            peers,
            kad_keys,
            shard,
            home,
            agent_caps,
            searches,
            publish,
            revoke,
            revoke_at_us,
            keygen_s,
        };
        pop.plan_revoke_searches(scenario, seed);
        pop
    }

    fn plan_revoke_searches(&mut self, scenario: &Scenario, seed: u64) {
        let Some(r) = &scenario.revoke else { return };
        if self.revoke.is_empty() {
            return;
        }
        let mut rng = rng_for(seed, 5);
        for _ in 0..r.searches {
            let agent = self.revoke[rng.gen_range(0..self.revoke.len())];
            let caps = self.agent_caps.get(agent as usize);
            let capability = caps[rng.gen_range(0..caps.len())];
            self.searches.push(PlannedSearch {
                at_us: us(r.at_s + rng.gen::<f64>() * r.window_s),
                from: rng.gen_range(0..scenario.nodes) as u32,
                capability,
                kind: SearchKind::Revoked,
            });
        }
        self.searches.sort_by_key(|s| s.at_us);
    }

    /// The real-swarm engine's parameters for this population.
    pub fn swarm_params(&self, scenario: &Scenario, seed: u64) -> SwarmParams {
        let node = scenario.node();
        let agent = |home: u32, caps: &[u32]| SwarmAgent {
            home: home as usize,
            capabilities: caps.iter().map(|&c| capability_name(c)).collect(),
        };
        SwarmParams {
            nodes: self.peers.len(),
            agents: (0..self.home.len())
                .map(|a| agent(self.home[a], self.agent_caps.get(a)))
                .collect(),
            searches: self
                .searches
                .iter()
                .map(|s| SwarmSearch {
                    from: s.from as usize,
                    capability: capability_name(s.capability),
                    at: Duration::from_micros(s.at_us),
                    kind: s.kind,
                })
                .collect(),
            publish_probes: self
                .publish
                .iter()
                .map(|p| agent(p.home, &p.capabilities))
                .collect(),
            publish_at: self
                .publish
                .iter()
                .map(|p| Duration::from_micros(p.at_us))
                .collect(),
            revoke_probes: self.revoke.len(),
            revoke_at: Duration::from_micros(self.revoke_at_us),
            limit: scenario.limit,
            search_timeout: Duration::from_millis(node.search_timeout_ms),
            search_ends_when_full: node.search_ends_when_full,
            max_connections: scenario.swarm.max_connections,
            trim_connections: scenario.swarm.trim_connections.unwrap_or(true),
            security: node.security.unwrap_or_default(),
            replication: node.replication,
            outages: plan_outages(scenario, seed),
            seed,
        }
    }
}

/// The outages of a real-swarm run under churn: each node starts online
/// with the steady state's share, as in the DES, and then alternates
/// sessions and downtimes drawn from the scenario's distributions until
/// `duration_s` (the swarm plays them during its search phase).
pub fn plan_outages(scenario: &Scenario, seed: u64) -> Vec<Outage> {
    let Some(churn) = &scenario.churn else {
        return Vec::new();
    };
    let mut rng = rng_for(seed, 17);
    let p_on = churn.online_share(&mut rng);
    let end = scenario.duration_s;
    let mut out = Vec::new();
    for node in 0..scenario.nodes {
        let mut t = 0.0;
        let mut online = rng.gen::<f64>() < p_on;
        while t < end {
            if online {
                t += churn.session.sample(&mut rng);
            } else {
                // At least a millisecond away: an outage ends after it starts.
                let up = t + churn.downtime.sample(&mut rng).max(1e-3);
                out.push(Outage {
                    node,
                    down_at: Duration::from_secs_f64(t),
                    up_at: Duration::from_secs_f64(up),
                });
                t = up;
            }
            online = !online;
        }
    }
    out
}

/// Distinct capabilities for one agent, popular ones more often.
fn draw_caps(rng: &mut ChaCha8Rng, zipf: &Zipf<f64>, min: usize, max: usize) -> Vec<u32> {
    let want = rng.gen_range(min..=max);
    let mut out: Vec<u32> = Vec::with_capacity(want);
    let mut tries = 0;
    while out.len() < want && tries < 64 * want {
        let c = zipf.sample(rng) as u32 - 1;
        if !out.contains(&c) {
            out.push(c);
        }
        tries += 1;
    }
    out
}

/// The base searches (and a flash crowd's and an eclipse's share), sorted by time.
fn plan_searches(scenario: &Scenario, seed: u64, _node: &NodeParams) -> Vec<PlannedSearch> {
    let mut rng = rng_for(seed, 3);
    let caps = &scenario.capabilities;
    let zipf = Zipf::new(caps.vocabulary as u64, caps.search_zipf_exponent)
        .expect("validated: vocabulary >= 1, exponent >= 0");
    let d = scenario.duration_s;
    // Search times: uniform, with the flash crowd's window weighted by its
    // rate multiplier.
    let (w_start, w_len, mult) = scenario.flash_crowd.as_ref().map_or((0.0, 0.0, 1.0), |f| {
        (f.start_s, f.duration_s, f.rate_multiplier)
    });
    let inside = w_len * mult;
    let outside = d - w_len;
    let mut out = Vec::with_capacity(scenario.searches);
    for _ in 0..scenario.searches {
        let x = rng.gen::<f64>() * (inside + outside);
        let (t, in_window) = if x < inside {
            (w_start + x / mult, true)
        } else {
            let y = x - inside;
            (if y < w_start { y } else { y + w_len }, false)
        };
        let mut kind = SearchKind::Normal;
        let mut capability = zipf.sample(&mut rng) as u32 - 1;
        if let (true, Some(f)) = (in_window, &scenario.flash_crowd) {
            if rng.gen::<f64>() < f.share {
                capability = f.capability_rank as u32;
                kind = SearchKind::Flash;
            }
        }
        if let Some(e) = scenario
            .adversarial
            .as_ref()
            .and_then(|a| a.eclipse.as_ref())
        {
            if kind == SearchKind::Normal && rng.gen::<f64>() < e.search_share {
                capability = e.capability_rank as u32;
                kind = SearchKind::Eclipsed;
            }
        }
        out.push(PlannedSearch {
            at_us: us(t.clamp(0.0, d)),
            from: rng.gen_range(0..scenario.nodes) as u32,
            capability,
            kind,
        });
    }
    out.sort_by_key(|s| s.at_us);
    out
}
