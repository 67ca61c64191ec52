//! The synthetic agent population: who the agents are, generated from a
//! seed, and which of them misbehave and how.
//!
//! Everything here is deterministic: the same [`PopulationConfig`] gives
//! the same domains, keys, names, capabilities and relationships. Each
//! agent is drawn from its own generator, keyed by the seed and its index,
//! so agent `i` is the same whatever the population size; only the
//! relationships depend on the whole population. What an agent publishes
//! (DNS records, `agent.json`, its site) depends on the ports the testbed
//! binds and is rendered by [`super::publish`].
//!
//! Used by [`super::Testbed`], the crawler's tests, the demo and the
//! simulations.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::str::FromStr;

use ed25519_dalek::{SigningKey, VerifyingKey};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map};
use sha2::{Digest, Sha256};

use super::vocab;
use crate::adp::{Capability, Relationship};
use crate::identity;

macro_rules! behaviours {
    ($($(#[$doc:meta])* $variant:ident => $name:literal,)*) => {
        /// How one agent behaves. Every variant but [`Behaviour::Healthy`]
        /// and [`Behaviour::TxtLarge`] breaks the agent in exactly one way,
        /// so that every failure path of the crawler has an agent to test.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Behaviour {
            $($(#[$doc])* $variant,)*
        }

        impl Behaviour {
            /// Every behaviour, `Healthy` first.
            pub const ALL: &'static [Behaviour] = &[$(Behaviour::$variant,)*];

            /// The stable `snake_case` name (also accepted by `FromStr`).
            pub fn name(self) -> &'static str {
                match self {
                    $(Behaviour::$variant => $name,)*
                }
            }
        }
    };
}

behaviours! {
    /// Publishes a correct TXT, SRV and A record, a valid `agent.json` and
    /// answers the challenge.
    Healthy => "healthy",
    /// No TXT record at `_agent.{domain}` (the name does not exist).
    TxtMissing => "txt_missing",
    /// The ADP TXT record has no `pk=`.
    TxtMalformed => "txt_malformed",
    /// Two well-formed ADP TXT records (ADP 10.3 incompatibility).
    TxtTwoRecords => "txt_two_records",
    /// The TXT record says `v=ADP2`.
    TxtWrongVersion => "txt_wrong_version",
    /// Healthy, but its TXT RRset (the ADP record and filler records) is
    /// larger than a UDP answer: a resolver must retry over TCP.
    TxtLarge => "txt_large",
    /// The TXT `pk=` is the fingerprint of another key.
    FingerprintMismatch => "fingerprint_mismatch",
    /// `identity.domain` names another domain.
    WrongDomain => "wrong_domain",
    /// `agent.json` is over 64 KiB (valid JSON, padded).
    Oversized => "oversized",
    /// `agent.json` is drip-fed (see [`super::Drip`]).
    SlowBody => "slow_body",
    /// The well-known URL redirects to itself.
    RedirectLoop => "redirect_loop",
    /// The well-known URL redirects to another host.
    RedirectOtherHost => "redirect_other_host",
    /// The TXT `wk=` is a plain `http://` URL (served on the HTTP port).
    PlainHttp => "plain_http",
    /// `agent.json` is served as `text/html`.
    WrongContentType => "wrong_content_type",
    /// `agent.json` is cut short: not JSON.
    InvalidJson => "invalid_json",
    /// `agent.json` holds an array nested 1,000 deep (2 KB).
    DeepNesting => "deep_nesting",
    /// The challenge answer carries the agent's key but is signed by
    /// another key.
    ChallengeBadSignature => "challenge_bad_signature",
    /// The challenge answer is signed over a nonce of the agent's own
    /// (carried in its frame) instead of the challenge's.
    ChallengeWrongNonce => "challenge_wrong_nonce",
    /// The WebSocket opens but the challenge is never answered.
    ChallengeSilent => "challenge_silent",
    /// Healthy, but its answer is a handshake frame of its own (ADP 6.2):
    /// it carries the agent's own fresh nonce rather than an echo, with the
    /// signature over the challenge's, and the agent waits for the
    /// verifier's signed frame over its nonce (counted by the site).
    ChallengeOwnNonce => "challenge_own_nonce",
    /// The domain's A record is 10.0.0.1 (nothing listens there: a crawler
    /// must refuse before connecting).
    PrivateTarget => "private_target",
    /// The TXT `wk=` URL's host is the literal `127.0.0.1`.
    LoopbackTarget => "loopback_target",
}

impl Behaviour {
    /// Every behaviour except `Healthy`.
    pub fn misbehaviours() -> impl Iterator<Item = Behaviour> {
        Self::ALL
            .iter()
            .copied()
            .filter(|b| *b != Behaviour::Healthy)
    }

    /// Whether a correct crawler (allowed to reach the testbed's loopback
    /// addresses) key-verifies an agent that behaves so. `LoopbackTarget`
    /// counts as failing: its `wk` points at a literal loopback address.
    pub fn verifies(self) -> bool {
        matches!(
            self,
            Behaviour::Healthy | Behaviour::TxtLarge | Behaviour::ChallengeOwnNonce
        )
    }
}

impl fmt::Display for Behaviour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The name given to `FromStr` is not a behaviour.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown behaviour {0:?}")]
pub struct UnknownBehaviour(pub String);

impl FromStr for Behaviour {
    type Err = UnknownBehaviour;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim().to_ascii_lowercase().replace('-', "_");
        Self::ALL
            .iter()
            .copied()
            .find(|b| b.name() == s)
            .ok_or(UnknownBehaviour(s))
    }
}

/// What population to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct PopulationConfig {
    /// Everything is derived from this.
    pub seed: u64,
    /// How many healthy agents (indices `0..healthy`).
    pub healthy: usize,
    /// One extra agent per entry, after the healthy ones, in this order.
    pub misbehaving: Vec<Behaviour>,
    /// Agents per organisation zone `org{n}.test` (at least 1).
    pub agents_per_org: usize,
    /// Share of healthy agents that form mutual `verified` peer pairs.
    pub mutual_share: f64,
    /// Chance that an agent lists one more peer that does not list it back.
    pub one_way_share: f64,
    /// Chance that an agent lists a peer outside the population (a name
    /// that does not resolve).
    pub dangling_share: f64,
    /// Whether every agent has rotated its key since generation zero
    /// (the same population, later: [`Rotation`]).
    pub rotation: Rotation,
}

/// A population's keys: as generated, or each agent's next key, with or
/// without the rotation statement signed by the first (ADP 7.3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Rotation {
    /// The generated keys.
    #[default]
    None,
    /// The next keys; each document names the first key as
    /// `previousFingerprint` and carries its signed `keyRotation`.
    Proven,
    /// The next keys and `previousFingerprint`, without a statement.
    Unproven,
}

impl PopulationConfig {
    /// `healthy` healthy agents and no misbehaving ones.
    pub fn healthy(seed: u64, healthy: usize) -> Self {
        Self {
            seed,
            healthy,
            misbehaving: Vec::new(),
            agents_per_org: 50,
            mutual_share: 0.3,
            one_way_share: 0.2,
            dangling_share: 0.1,
            rotation: Rotation::None,
        }
    }

    /// Adds one agent that behaves as `behaviour`.
    #[must_use]
    pub fn with(mut self, behaviour: Behaviour) -> Self {
        self.misbehaving.push(behaviour);
        self
    }

    /// Adds one agent of each misbehaviour.
    #[must_use]
    pub fn with_every_misbehaviour(mut self) -> Self {
        self.misbehaving.extend(Behaviour::misbehaviours());
        self
    }
}

/// One synthetic agent.
#[derive(Debug, Clone)]
pub struct Agent {
    /// Position in the population.
    pub index: usize,
    /// `{label}.{org}.test`, lowercase.
    pub domain: String,
    /// `org{n}`: the zone is `{org}.test`.
    pub org: String,
    /// Display name.
    pub name: String,
    /// The agent's Ed25519 key.
    pub key: SigningKey,
    /// How it behaves.
    pub behaviour: Behaviour,
    /// 1 to 3 capabilities.
    pub capabilities: Vec<Capability>,
    /// Peers it lists.
    pub relationships: Vec<Relationship>,
    /// Operator's display name.
    pub owner: String,
    /// ISO 8601 creation time.
    pub created: String,
    /// `availability` block.
    pub availability: Map<String, serde_json::Value>,
    /// Requests per minute it advertises.
    pub rate_limit: u32,
    /// `meta.version`.
    pub version: u32,
}

impl Agent {
    /// `agent:{domain}`.
    pub fn id(&self) -> String {
        format!("agent:{}", self.domain)
    }

    /// The public key.
    pub fn verifying_key(&self) -> VerifyingKey {
        self.key.verifying_key()
    }

    /// `ed25519:` + hex SHA-256 of the public key.
    pub fn fingerprint(&self) -> String {
        identity::fingerprint(&self.verifying_key())
    }
}

/// A generated population.
#[derive(Debug, Clone)]
pub struct Population {
    config: PopulationConfig,
    agents: Vec<Agent>,
    by_domain: HashMap<String, usize>,
    mutual: Vec<(usize, usize)>,
}

/// SHA-256 over a label, the seed and an index: every derived value.
fn derive(label: &str, seed: u64, index: u64) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(label.as_bytes());
    h.update(seed.to_be_bytes());
    h.update(index.to_be_bytes());
    h.finalize().into()
}

/// The key of agent `index`: SHA-256("agentmesh/testbed/key/v1" || seed ||
/// index) is the Ed25519 secret.
pub fn agent_key(seed: u64, index: usize) -> SigningKey {
    SigningKey::from_bytes(&derive("agentmesh/testbed/key/v1", seed, index as u64))
}

/// Agent `index`'s next key, after a rotation: SHA-256 of
/// "agentmesh/testbed/key/v2" || seed || index.
pub fn rotated_key(seed: u64, index: usize) -> SigningKey {
    SigningKey::from_bytes(&derive("agentmesh/testbed/key/v2", seed, index as u64))
}

/// The key agent `index` of a population of `seed` holds after `rotation`.
pub fn current_key(seed: u64, index: usize, rotation: Rotation) -> SigningKey {
    match rotation {
        Rotation::None => agent_key(seed, index),
        Rotation::Proven | Rotation::Unproven => rotated_key(seed, index),
    }
}

/// A key that belongs to no agent (what `FingerprintMismatch` publishes
/// and `ChallengeBadSignature` signs with).
pub fn impostor_key(seed: u64, index: usize) -> SigningKey {
    SigningKey::from_bytes(&derive("agentmesh/testbed/impostor/v1", seed, index as u64))
}

fn capitalise(word: &str) -> String {
    let mut c = word.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

fn pick<'a, T>(rng: &mut StdRng, items: &'a [T]) -> &'a T {
    &items[rng.gen_range(0..items.len())]
}

fn timestamp(rng: &mut StdRng) -> String {
    format!(
        "{}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        rng.gen_range(2023..=2025),
        rng.gen_range(1..=12),
        rng.gen_range(1..=28),
        rng.gen_range(0..24),
        rng.gen_range(0..60),
        rng.gen_range(0..60)
    )
}

fn capability(rng: &mut StdRng, kind: &vocab::CapabilityKind) -> Capability {
    let mut interfaces: Vec<String> = ["chat", "api", "webhook"]
        .iter()
        .filter(|_| rng.gen_bool(0.5))
        .map(|s| (*s).to_owned())
        .collect();
    if interfaces.is_empty() {
        interfaces.push("api".into());
    }
    let count = rng.gen_range(1..=4);
    let mut languages: Vec<String> = vocab::LANGUAGES
        .choose_multiple(rng, count)
        .map(|s| (*s).to_owned())
        .collect();
    languages.sort();
    let model = *pick(rng, vocab::PRICING_MODELS);
    let currency = *pick(rng, vocab::CURRENCIES);
    let pricing = match model {
        "per_call" => json!({"model": model, "details": {
            "currency": currency,
            "amount": f64::from(rng.gen_range(1..=500u32)) / 10_000.0,
            "unit": "call"}}),
        "subscription" => json!({"model": model, "details": {
            "currency": currency,
            "monthly": rng.gen_range(5..=199),
            "callsIncluded": rng.gen_range(1..=100) * 1000}}),
        _ => json!({"model": model}),
    };
    Capability {
        id: kind.id.into(),
        name: Some(kind.name.into()),
        description: Some(kind.description.into()),
        input: Some(kind.input.iter().map(|s| (*s).to_owned()).collect()),
        output: Some(kind.output.iter().map(|s| (*s).to_owned()).collect()),
        interfaces: Some(interfaces),
        languages: Some(languages),
        pricing: Some(pricing),
        extra: Map::new(),
    }
}

fn generate_agent(config: &PopulationConfig, index: usize, behaviour: Behaviour) -> Agent {
    let seed = config.seed;
    let mut rng = StdRng::from_seed(derive("agentmesh/testbed/agent/v1", seed, index as u64));
    let org_n = index / config.agents_per_org.max(1) + 1;
    let org = format!("org{org_n}");
    let (adj, noun) = (
        *pick(&mut rng, vocab::ADJECTIVES),
        *pick(&mut rng, vocab::NOUNS),
    );
    let label = match behaviour {
        Behaviour::Healthy => format!("{adj}-{noun}-{index}"),
        b => format!("{}-{index}", b.name().replace('_', "-")),
    };
    let count = rng.gen_range(1..=3);
    let kinds: Vec<&vocab::CapabilityKind> = vocab::CAPABILITIES
        .choose_multiple(&mut rng, count)
        .collect();
    let capabilities = kinds.iter().map(|k| capability(&mut rng, k)).collect();
    let name = format!("{} {} {}", capitalise(adj), capitalise(noun), kinds[0].name);
    let base = vocab::ORG_NAMES[(org_n - 1) % vocab::ORG_NAMES.len()];
    let owner = match (org_n - 1) / vocab::ORG_NAMES.len() {
        0 => base.to_owned(),
        n => format!("{base} {}", n + 1),
    };
    let created = timestamp(&mut rng);
    let mut availability = Map::new();
    if rng.gen_bool(0.05) {
        availability.insert("status".into(), "maintenance".into());
        availability.insert("maintenanceWindow".into(), "Sun 02:00-04:00 UTC".into());
    } else {
        availability.insert("status".into(), "online".into());
    }
    availability.insert(
        "uptime".into(),
        (*pick(&mut rng, &["99%", "99.5%", "99.9%", "99.99%"])).into(),
    );
    Agent {
        index,
        domain: format!("{label}.{org}.test"),
        org,
        name,
        key: current_key(seed, index, config.rotation),
        behaviour,
        capabilities,
        relationships: Vec::new(),
        owner,
        created,
        availability,
        rate_limit: *pick(&mut rng, &[30, 60, 120, 600]),
        version: rng.gen_range(1..=9),
    }
}

fn peer(other: &Agent, trust: &str, since: String) -> Relationship {
    Relationship {
        kind: "peer".into(),
        id: other.id(),
        name: Some(other.name.clone()),
        trust: Some(trust.into()),
        since: Some(since[..10].to_owned()),
    }
}

impl Population {
    /// Generates the population `config` describes.
    pub fn generate(config: &PopulationConfig) -> Self {
        let behaviours: Vec<Behaviour> = std::iter::repeat_n(Behaviour::Healthy, config.healthy)
            .chain(config.misbehaving.iter().copied())
            .collect();
        // Deriving keys dominates; agents are independent, so use the cores.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(16));
        let chunk = behaviours.len().div_ceil(threads).max(256);
        let mut agents: Vec<Agent> = std::thread::scope(|scope| {
            let workers: Vec<_> = behaviours
                .chunks(chunk)
                .enumerate()
                .map(|(c, part)| {
                    scope.spawn(move || {
                        part.iter()
                            .enumerate()
                            .map(|(j, b)| generate_agent(config, c * chunk + j, *b))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().expect("generating an agent does not panic"))
                .collect()
        });
        let n = agents.len() as u64;
        let mut rng = StdRng::from_seed(derive(
            "agentmesh/testbed/relationships/v1",
            config.seed,
            (n << 32) | config.healthy as u64,
        ));
        let mut lists: HashSet<(usize, usize)> = HashSet::new();

        // Mutual pairs among healthy agents.
        let mut healthy: Vec<usize> = (0..config.healthy).collect();
        healthy.shuffle(&mut rng);
        let pairs = ((config.mutual_share.clamp(0.0, 1.0) * config.healthy as f64) as usize) / 2;
        for k in 0..pairs {
            let (a, b) = (healthy[2 * k], healthy[2 * k + 1]);
            let since = timestamp(&mut rng);
            let (ra, rb) = (
                peer(&agents[b], "verified", since.clone()),
                peer(&agents[a], "verified", since),
            );
            agents[a].relationships.push(ra);
            agents[b].relationships.push(rb);
            lists.extend([(a, b), (b, a)]);
        }

        // One-way peers (never the reverse of an existing listing) and
        // peers outside the population.
        for a in 0..agents.len() {
            if agents.len() > 1 && rng.gen_bool(config.one_way_share.clamp(0.0, 1.0)) {
                let b = rng.gen_range(0..agents.len());
                if b != a && !lists.contains(&(a, b)) && !lists.contains(&(b, a)) {
                    let trust = if rng.gen_bool(0.7) {
                        "verified"
                    } else {
                        "unverified"
                    };
                    let rel = peer(&agents[b], trust, timestamp(&mut rng));
                    agents[a].relationships.push(rel);
                    lists.insert((a, b));
                }
            }
            if rng.gen_bool(config.dangling_share.clamp(0.0, 1.0)) {
                let (adj, noun) = (
                    *pick(&mut rng, vocab::ADJECTIVES),
                    *pick(&mut rng, vocab::NOUNS),
                );
                let k = rng.gen_range(0..1_000_000);
                agents[a].relationships.push(Relationship {
                    kind: "peer".into(),
                    id: format!("agent:{adj}-{noun}-{k}.offnet.test"),
                    name: Some(format!("{} {}", capitalise(adj), capitalise(noun))),
                    trust: Some("unverified".into()),
                    since: None,
                });
            }
        }

        let by_domain = agents.iter().map(|a| (a.domain.clone(), a.index)).collect();
        let mut population = Self {
            config: config.clone(),
            agents,
            by_domain,
            mutual: Vec::new(),
        };
        population.mutual = population.find_mutual_pairs();
        population
    }

    /// `n` healthy agents with the default shares.
    pub fn healthy(seed: u64, n: usize) -> Self {
        Self::generate(&PopulationConfig::healthy(seed, n))
    }

    /// Pairs `(a, b)`, `a < b`, that list each other as `verified` peers,
    /// read back from the relationships themselves.
    fn find_mutual_pairs(&self) -> Vec<(usize, usize)> {
        let verified = |a: &Agent| -> Vec<usize> {
            a.relationships
                .iter()
                .filter(|r| r.trust.as_deref() == Some("verified"))
                .filter_map(|r| r.id.strip_prefix("agent:"))
                .filter_map(|d| self.by_domain.get(d).copied())
                .collect()
        };
        let edges: HashSet<(usize, usize)> = self
            .agents
            .iter()
            .flat_map(|a| verified(a).into_iter().map(move |b| (a.index, b)))
            .collect();
        let mut pairs: Vec<(usize, usize)> = edges
            .iter()
            .filter(|(a, b)| a < b && edges.contains(&(*b, *a)))
            .copied()
            .collect();
        pairs.sort_unstable();
        pairs
    }

    /// The configuration it was generated from.
    pub fn config(&self) -> &PopulationConfig {
        &self.config
    }

    /// All agents, by index.
    pub fn agents(&self) -> &[Agent] {
        &self.agents
    }

    /// Number of agents.
    pub fn len(&self) -> usize {
        self.agents.len()
    }

    /// Whether there are no agents.
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }

    /// The agent at `domain` (lowercase, no trailing dot).
    pub fn get(&self, domain: &str) -> Option<&Agent> {
        self.by_domain.get(domain).map(|i| &self.agents[*i])
    }

    /// How the agent at `domain` behaves.
    pub fn behaviour_of(&self, domain: &str) -> Option<Behaviour> {
        self.get(domain).map(|a| a.behaviour)
    }

    /// The agents that behave as `behaviour`.
    pub fn with_behaviour(&self, behaviour: Behaviour) -> impl Iterator<Item = &Agent> {
        self.agents.iter().filter(move |a| a.behaviour == behaviour)
    }

    /// The domain of the first agent that behaves as `behaviour`.
    pub fn domain_of(&self, behaviour: Behaviour) -> Option<&str> {
        self.with_behaviour(behaviour)
            .next()
            .map(|a| a.domain.as_str())
    }

    /// The healthy agents.
    pub fn healthy_agents(&self) -> impl Iterator<Item = &Agent> {
        self.with_behaviour(Behaviour::Healthy)
    }

    /// Domains of the agents that list each other as `verified` peers.
    pub fn mutual_pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.mutual.iter().map(|(a, b)| {
            (
                self.agents[*a].domain.as_str(),
                self.agents[*b].domain.as_str(),
            )
        })
    }

    /// Whether the agents at `a` and `b` list each other as `verified`.
    pub fn is_mutual(&self, a: &str, b: &str) -> bool {
        match (self.by_domain.get(a), self.by_domain.get(b)) {
            (Some(&x), Some(&y)) => self.mutual.binary_search(&(x.min(y), x.max(y))).is_ok(),
            _ => false,
        }
    }

    /// The organisation zones (`org1.test`, ...).
    pub fn zones(&self) -> BTreeSet<String> {
        self.agents
            .iter()
            .map(|a| format!("{}.test", a.org))
            .collect()
    }
}
