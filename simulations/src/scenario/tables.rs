//! The scenario file's tables (`[capabilities]`, `[latency]`, `[churn]`,
//! `[adversarial]`, `[node]`, `[swarm]`…), each with its defaults.

use serde::Deserialize;

/// The capability vocabulary: names `cap-0` .. `cap-{vocabulary-1}`, rank 0
/// the most popular (Zipf).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Capabilities {
    /// Distinct capabilities.
    pub vocabulary: usize,
    /// Zipf exponent of capability popularity (0 = uniform).
    pub zipf_exponent: f64,
    /// Fewest capabilities per agent.
    pub per_agent_min: usize,
    /// Most capabilities per agent.
    pub per_agent_max: usize,
    /// Zipf exponent of which capability a search asks for (0 = uniform).
    pub search_zipf_exponent: f64,
}

impl Default for Capabilities {
    fn default() -> Self {
        Self {
            vocabulary: 1000,
            zipf_exponent: 1.0,
            per_agent_min: 1,
            per_agent_max: 3,
            search_zipf_exponent: 1.0,
        }
    }
}

/// Latency: a round-trip time per pair of nodes, drawn once from a lognormal
/// distribution, plus connection setup and processing times.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Latency {
    /// Median round-trip time between two nodes, ms.
    pub rtt_median_ms: f64,
    /// Lognormal sigma of the round-trip time (0 = every pair at the median).
    pub rtt_sigma: f64,
    /// Extra round trips to reach a peer not in the asker's routing table
    /// (TCP handshake, noise, multistream negotiation).
    pub connect_rtts: f64,
    /// Time a node takes to answer a Kademlia request, ms.
    pub service_ms: f64,
    /// Time a node takes to answer a search (its index), ms.
    pub answer_ms: f64,
    /// Time a node takes to judge a gossiped record before forwarding, ms.
    pub validate_ms: f64,
    /// Time the asker takes to judge records and rank, ms.
    pub rank_ms: f64,
}

impl Default for Latency {
    fn default() -> Self {
        Self {
            rtt_median_ms: 100.0,
            rtt_sigma: 0.6,
            connect_rtts: 1.5,
            service_ms: 1.0,
            answer_ms: 5.0,
            validate_ms: 2.0,
            rank_ms: 5.0,
        }
    }
}

/// A session or downtime length distribution.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, tag = "distribution", rename_all = "lowercase")]
pub enum Lengths {
    /// Weibull with `shape` and `scale_s`.
    Weibull {
        /// Shape k (< 1: many short sessions, a heavy tail).
        shape: f64,
        /// Scale, seconds.
        scale_s: f64,
    },
    /// Lognormal with `median_s` and `sigma`.
    Lognormal {
        /// Median, seconds.
        median_s: f64,
        /// Sigma of the log.
        sigma: f64,
    },
}

impl Lengths {
    /// One length, in seconds.
    pub fn sample(&self, rng: &mut impl rand::Rng) -> f64 {
        use rand_distr::{Distribution, LogNormal, Weibull};
        match *self {
            Lengths::Weibull { shape, scale_s } => Weibull::new(scale_s, shape)
                .expect("validated weibull")
                .sample(rng),
            Lengths::Lognormal { median_s, sigma } => LogNormal::new(median_s.ln(), sigma)
                .expect("validated lognormal")
                .sample(rng),
        }
    }
}

/// Churn: every node alternates sessions (online) and downtimes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Churn {
    /// How long a node stays online.
    pub session: Lengths,
    /// How long it stays away.
    pub downtime: Lengths,
    /// DES only: a request to a down node (Kademlia or search) fails after
    /// this many round trips (a refused connection: a stopped process on a
    /// live host; 0 for the swarm engine's memory transport, where the dial
    /// fails at once). Absent: a down node is silent, as a host that is
    /// gone: a Kademlia request times out after libp2p's per-peer timeout
    /// (10 s), and a search waits for the peer until its fan-out deadline.
    #[serde(default)]
    pub refused_rtts: Option<f64>,
}

impl Churn {
    /// The share of nodes online in the steady state: mean session over
    /// mean session plus mean downtime, the means estimated from 4,000
    /// draws each (both engines start from it).
    pub fn online_share(&self, rng: &mut impl rand::Rng) -> f64 {
        let mut mean = |l: &Lengths| (0..4000).map(|_| l.sample(rng)).sum::<f64>() / 4000.0;
        let on = mean(&self.session);
        let off = mean(&self.downtime);
        on / (on + off)
    }
}

/// A partition: from `start_s` to `heal_s`, a `fraction` of the nodes cannot
/// reach the others (messages across are lost).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Partition {
    /// When it starts, s.
    pub start_s: f64,
    /// When it heals, s.
    pub heal_s: f64,
    /// Share of nodes cut off, 0..1.
    pub fraction: f64,
}

/// A flash crowd: from `start_s` for `duration_s`, a `share` of the searches
/// ask for the capability of popularity rank `capability_rank`, at
/// `rate_multiplier` times the base search rate.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlashCrowd {
    /// Start, s.
    pub start_s: f64,
    /// Length, s.
    pub duration_s: f64,
    /// Popularity rank of the capability (0 = most popular).
    #[serde(default)]
    pub capability_rank: usize,
    /// Share of the window's searches that ask for it, 0..1.
    #[serde(default = "share_09")]
    pub share: f64,
    /// Search rate inside the window relative to outside, >= 1.
    #[serde(default = "ten")]
    pub rate_multiplier: f64,
}

fn share_09() -> f64 {
    0.9
}
fn ten() -> f64 {
    10.0
}

/// New agents published after convergence, timed until each live node got them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Publish {
    /// How many agents.
    pub probes: usize,
    /// When the first is published, s; the others follow `interval_s` apart.
    #[serde(default)]
    pub at_s: f64,
    /// Spacing of the publications, s.
    #[serde(default = "ten")]
    pub interval_s: f64,
}

/// Agents of the starting population tombstoned after convergence.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Revoke {
    /// How many (the first agents of the population).
    pub probes: usize,
    /// When they are tombstoned, s.
    #[serde(default)]
    pub at_s: f64,
    /// Extra searches for the revoked agents' capabilities, spread over
    /// the `window_s` after `at_s` (they count the stale results).
    #[serde(default)]
    pub searches: usize,
    /// Length of the window of those searches, s.
    #[serde(default = "two")]
    pub window_s: f64,
}

fn two() -> f64 {
    2.0
}

/// What the adversarial nodes do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Behaviour {
    /// Never answer searches or Kademlia requests.
    Drop,
    /// Answer searches with forged records only (the asker's judge refuses them).
    Forge,
    /// Answer searches with records of honest agents' ids signed by the
    /// adversary's own key, its own endpoint and a seq above the owner's:
    /// an id takeover attempt, judged by `adversarial.judge`.
    Takeover,
}

/// Whom an asker's judge lets write an id it already holds (what
/// `adversarial.behaviour = "takeover"` is judged by).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JudgeRule {
    /// The node since the hostile-peer checks (`federation.rs`): a record for an id held
    /// is accepted only from the signer of the held record, and never over
    /// a local registration; an id not held is taken from its first
    /// signer (as a claim).
    #[default]
    Owner,
    /// The node before the hostile-peer checks: any signer's record with a higher seq
    /// replaces the held one, a local registration included.
    HighestSeq,
}

/// Which providers an eclipse's sybils name for the keys they surround.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EclipseProviders {
    /// None: a lookup of the key finds no providers, so a search falls
    /// back to its connected peers.
    #[default]
    None,
    /// The sybils themselves (they announced themselves and kept the
    /// honest providers' announcements out), who then answer no search.
    Sybils,
}

/// Whom a search asks, of the providers its lookup found and the peers
/// it is connected to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchChoice {
    /// The node since the hostile-peer checks (`search/ask.rs`, `choose`): at most the
    /// fan-out of providers in random order, and besides them a quarter
    /// as many connected peers that are not providers (trusted first,
    /// then at random); with no providers, the connected peers fill the
    /// fan-out.
    #[default]
    Mixed,
    /// The node before the hostile-peer checks: the providers in the order the lookup
    /// found them; the connected peers only when it found none.
    ProvidersFirst,
}

/// Misbehaving nodes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Adversarial {
    /// Share of the nodes that misbehave, 0..1 (chosen at random).
    #[serde(default)]
    pub share: f64,
    /// What they do.
    #[serde(default = "drop_b")]
    pub behaviour: Behaviour,
    /// Who may write an id the asker holds (only with `behaviour =
    /// "takeover"`; default `"owner"`, today's node).
    #[serde(default)]
    pub judge: Option<JudgeRule>,
    /// An eclipse of one capability's shard keys.
    #[serde(default)]
    pub eclipse: Option<Eclipse>,
}

impl Adversarial {
    /// The judge rule the askers run (today's node unless told).
    pub fn judge_rule(&self) -> JudgeRule {
        self.judge.unwrap_or_default()
    }
}

fn drop_b() -> Behaviour {
    Behaviour::Drop
}

/// Sybils placed closer to each shard key of one capability than any honest
/// node: they answer lookups of those keys with no providers and with one
/// another as the closer peers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Eclipse {
    /// Popularity rank of the eclipsed capability.
    #[serde(default)]
    pub capability_rank: usize,
    /// Sybils per shard key (k = 20 fills the closest set).
    #[serde(default = "twenty")]
    pub sybils_per_shard: usize,
    /// Share of the searches that ask for the eclipsed capability, 0..1.
    #[serde(default = "share_02")]
    pub search_share: f64,
    /// The providers the sybils name: `"none"` (default) or `"sybils"`.
    #[serde(default)]
    pub providers: EclipseProviders,
}

fn twenty() -> usize {
    20
}
fn share_02() -> f64 {
    0.2
}

/// Overrides of the node's constants; each absent key is the node's default.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeOverrides {
    /// Capability shards S.
    pub shards: Option<u32>,
    /// Peers one search asks (`p2p.search_fanout`).
    pub search_fanout: Option<usize>,
    /// One search's deadline, ms (`p2p.search_timeout`).
    pub search_timeout_ms: Option<u64>,
    /// Whether a search stops waiting once its answer is full
    /// (`p2p.search_ends_when_full`; false: the node before, which waited
    /// for every peer asked).
    pub search_ends_when_full: Option<bool>,
    /// Whom a search asks (DES only): `"mixed"`, the node's since issue
    /// 44 (default), or `"providers_first"`, the node's before.
    pub search_choice: Option<SearchChoice>,
}

/// Node settings only the real-swarm engine has a meaning for: the DES
/// does not model connections (a peer is "connected" when it is in the
/// asker's routing table).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwarmOverrides {
    /// Established connections per node (`MeshLimits::max_connections`,
    /// default 256). A node at its limit refuses further connections,
    /// Kademlia's dials among them.
    pub max_connections: Option<u32>,
    /// Whether nodes trim connections over the high-water mark, as
    /// `agentmesh node` does (default true; false: a node keeps every
    /// connection up to its limit, the node's behaviour before trimming).
    pub trim_connections: Option<bool>,
    /// The connections' security handshake (default noise, as
    /// `agentmesh node`; plaintext saves noise's buffers and handshakes
    /// and changes no mesh logic).
    pub security: Option<Security>,
}

/// The security handshake of a swarm's memory connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Security {
    /// Noise XX, what `agentmesh node` runs on TCP.
    #[default]
    Noise,
    /// libp2p's plaintext exchange of public keys: peer ids as with noise,
    /// nothing encrypted (every byte stays in the one process).
    Plaintext,
}
