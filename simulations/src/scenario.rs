//! The scenario file: what one run simulates (TOML, `deny_unknown_fields`,
//! every number range-checked). [`Scenario::load`] reads and validates a
//! file; a refusal names the file, the key and the reason. The format is
//! documented in `simulations/README.md`.
//!
//! Node constants (shard count, search fan-out and deadline, Kademlia's k
//! and alpha) are not copied here: unless a scenario overrides them under
//! `[node]`, [`Scenario::node`] reads them from the node's own defaults.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentmesh::config::{P2pConfig, Replication};
use agentmesh::mesh::{MeshConfig, MeshLimits, MeshTimeouts};
use serde::Deserialize;

/// Which engine runs a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// The discrete-event engine (10k–100k nodes, virtual time).
    Des,
    /// Real node swarms in one process (up to ~1,000 nodes, wall-clock time).
    Swarm,
}

impl Engine {
    /// The name used in scenario files and summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Des => "des",
            Engine::Swarm => "swarm",
        }
    }
}

/// A scenario as written in its file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name; the default output directory is `simulations/out/<name>`.
    pub name: String,
    /// Which engine runs it.
    pub engine: Engine,
    /// Seed of every random choice (overridden by `--seed`).
    #[serde(default = "one")]
    pub seed: u64,
    /// Registries (nodes) in the mesh.
    pub nodes: usize,
    /// Agents in the starting population.
    pub agents: usize,
    /// Capability searches, spread uniformly over `duration_s`.
    pub searches: usize,
    /// Virtual time the run covers, in seconds.
    #[serde(default = "default_duration")]
    pub duration_s: f64,
    /// Results asked per search (`top`).
    #[serde(default = "default_limit")]
    pub limit: usize,
    /// What nodes keep of gossiped records (the node's `p2p.replication`);
    /// default: the node's default.
    #[serde(default)]
    pub replication: Option<Replication>,
    /// Plain Kademlia closest-node lookups of random keys, measured beside
    /// the searches for comparison with published DHT figures.
    #[serde(default = "default_probe_lookups")]
    pub probe_lookups: usize,
    /// Capability vocabulary and popularity.
    #[serde(default)]
    pub capabilities: Capabilities,
    /// Pairwise latency and processing times.
    #[serde(default)]
    pub latency: Latency,
    /// Share of messages lost, 0..1.
    #[serde(default)]
    pub loss: f64,
    /// Share of the starting population's provider announcements that
    /// reached no holder, 0..1 (the DES only; default 0, the converged
    /// state). A swarm on a saturated machine loses some: a
    /// `start_providing` whose closest-peer phase times out sends no
    /// `ADD_PROVIDER`. Each (provider, shard key) pair is dropped with
    /// this probability, from the seed.
    #[serde(default)]
    pub lost_announcements: f64,
    /// Node churn: none when absent.
    #[serde(default)]
    pub churn: Option<Churn>,
    /// Partitions that heal.
    #[serde(default)]
    pub partitions: Vec<Partition>,
    /// A flash crowd on one capability.
    #[serde(default)]
    pub flash_crowd: Option<FlashCrowd>,
    /// Newly published agents whose propagation is timed.
    #[serde(default)]
    pub publish: Option<Publish>,
    /// Tombstoned agents whose disappearance is timed.
    #[serde(default)]
    pub revoke: Option<Revoke>,
    /// Misbehaving nodes.
    #[serde(default)]
    pub adversarial: Option<Adversarial>,
    /// Overrides of the node's constants (default: the node's own).
    #[serde(default)]
    pub node: NodeOverrides,
    /// Settings of the real-swarm engine's nodes (refused for the DES).
    #[serde(default)]
    pub swarm: SwarmOverrides,
}

fn one() -> u64 {
    1
}
fn default_duration() -> f64 {
    600.0
}
fn default_limit() -> usize {
    10
}
fn default_probe_lookups() -> usize {
    200
}

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
    /// The node since issue 44 (`federation.rs`): a record for an id held
    /// is accepted only from the signer of the held record, and never over
    /// a local registration; an id not held is taken from its first
    /// signer (as a claim).
    #[default]
    Owner,
    /// The node before issue 44: any signer's record with a higher seq
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
    /// The node since issue 44 (`search/ask.rs`, `choose`): at most the
    /// fan-out of providers in random order, and besides them a quarter
    /// as many connected peers that are not providers (trusted first,
    /// then at random); with no providers, the connected peers fill the
    /// fan-out.
    #[default]
    Mixed,
    /// The node before issue 44: the providers in the order the lookup
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

/// Fewest connections a swarm scenario may allow a node: the bootstrap
/// waits for [`READY_ROUTING_PEERS`](crate::swarm::READY_ROUTING_PEERS)
/// routing-table peers, and a search asks up to `search_fanout` peers.
pub const MIN_SWARM_CONNECTIONS: u32 = 16;

/// The node constants a run uses: the node's defaults unless overridden.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NodeParams {
    /// Capability shards S (`MeshConfig::default().shards`).
    pub shards: u32,
    /// Peers one search asks: `p2p.search_fanout`, capped at
    /// `MeshLimits::max_search_fanout`.
    pub fanout: usize,
    /// One search's deadline (`p2p.search_timeout`).
    pub search_timeout_ms: u64,
    /// Whom a search asks of its providers and connected peers (the
    /// swarm engine runs the node's own, `mixed`).
    pub search_choice: SearchChoice,
    /// Kademlia's k (libp2p's `K_VALUE`, the node's `max_providers_per_key`).
    pub k: usize,
    /// Kademlia's alpha (libp2p's `ALPHA_VALUE`).
    pub alpha: usize,
    /// Providers a holder keeps per key (`MeshLimits::max_providers_per_key`).
    pub max_providers_per_key: usize,
    /// Providers one lookup call returns at most (`max_providers_result`).
    pub max_providers_result: usize,
    /// Search handlers a node runs at once (`max_inflight_handlers`).
    pub max_inflight_handlers: usize,
    /// Deadline of a provider lookup, ms (`MeshTimeouts::lookup`).
    pub lookup_timeout_ms: u64,
    /// Kademlia per-peer request timeout, ms (libp2p's default).
    pub kad_peer_timeout_ms: u64,
    /// Kademlia query timeout, ms (`MeshTimeouts::kad_query`).
    pub kad_query_timeout_ms: u64,
    /// Re-announcement interval of provider records, s (`MeshTimeouts::reprovide`).
    pub reprovide_s: u64,
    /// Known list bound (`wire::MAX_KNOWN`).
    pub max_known: usize,
    /// Gossipsub mesh degree D (libp2p's default; the node keeps it).
    pub gossip_d: usize,
    /// Gossipsub lazy-push degree.
    pub gossip_d_lazy: usize,
    /// Gossipsub heartbeat, ms (the node's 1 s).
    pub heartbeat_ms: u64,
    /// What nodes keep of gossip.
    pub replication: Replication,
    /// Established connections per node (`MeshLimits::max_connections`),
    /// swarm engine only: the DES does not model connections.
    pub max_connections: Option<u32>,
    /// Connected peers over which a node trims its connections
    /// (`MeshLimits::connections_high_water`, following the limit), swarm
    /// engine only; `None` there when `[swarm] trim_connections = false`.
    pub connections_high_water: Option<u32>,
    /// The connections' security handshake, swarm engine only.
    pub security: Option<Security>,
}

/// A refused scenario: which file, which key, why.
#[derive(Debug)]
pub struct ScenarioError {
    /// The file read.
    pub file: PathBuf,
    /// The key at fault (dotted path), or `-` for the file as a whole.
    pub key: String,
    /// Why it is refused.
    pub reason: String,
}

impl std::error::Error for ScenarioError {}

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: key `{}`: {}",
            self.file.display(),
            self.key,
            self.reason
        )
    }
}

/// Upper bounds (what this machine can hold).
pub const MAX_NODES: usize = 200_000;
/// Largest starting population.
pub const MAX_AGENTS: usize = 2_000_000;
/// Most searches in one run.
pub const MAX_SEARCHES: usize = 1_000_000;
/// Largest capability vocabulary.
pub const MAX_VOCABULARY: usize = 100_000;
/// Most probes (publish or revoke) in one run.
pub const MAX_PROBES: usize = 100;

impl Scenario {
    /// Reads and validates `path`.
    ///
    /// # Errors
    /// A [`ScenarioError`] naming the file, the key and the reason.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            file: path.to_owned(),
            key: "-".into(),
            reason: format!("cannot read: {e}"),
        })?;
        Self::parse(&text, path)
    }

    /// Parses and validates `text`, read from `path`.
    ///
    /// # Errors
    /// A [`ScenarioError`] naming the file, the key and the reason.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ScenarioError> {
        if text.len() > 1 << 20 {
            return Err(ScenarioError {
                file: path.to_owned(),
                key: "-".into(),
                reason: "over 1 MiB".into(),
            });
        }
        let scenario: Scenario = toml::from_str(text).map_err(|e| ScenarioError {
            file: path.to_owned(),
            key: key_of(&e, text),
            reason: e.message().to_owned(),
        })?;
        scenario.validate().map_err(|(key, reason)| ScenarioError {
            file: path.to_owned(),
            key: key.into(),
            reason,
        })?;
        Ok(scenario)
    }

    /// Checks every range; answers the key at fault and why.
    ///
    /// # Errors
    /// `(key, reason)` for the first value out of range.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        fn range<T: PartialOrd + std::fmt::Display>(
            key: &'static str,
            v: T,
            lo: T,
            hi: T,
        ) -> Result<(), (&'static str, String)> {
            if v >= lo && v <= hi {
                Ok(())
            } else {
                Err((key, format!("{v} is outside {lo}..={hi}")))
            }
        }
        fn finite(key: &'static str, v: f64) -> Result<(), (&'static str, String)> {
            if v.is_finite() {
                Ok(())
            } else {
                Err((key, "must be a finite number".into()))
            }
        }
        if self.name.is_empty()
            || self.name.len() > 64
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err((
                "name",
                "1 to 64 characters of [A-Za-z0-9_-] (it names the output directory)".into(),
            ));
        }
        range("nodes", self.nodes, 2, MAX_NODES)?;
        range("agents", self.agents, 1, MAX_AGENTS)?;
        range("searches", self.searches, 0, MAX_SEARCHES)?;
        finite("duration_s", self.duration_s)?;
        range("duration_s", self.duration_s, 1.0, 7.0 * 86400.0)?;
        range("limit", self.limit, 1, 100)?;
        range("probe_lookups", self.probe_lookups, 0, 100_000)?;
        let c = &self.capabilities;
        range("capabilities.vocabulary", c.vocabulary, 1, MAX_VOCABULARY)?;
        finite("capabilities.zipf_exponent", c.zipf_exponent)?;
        range("capabilities.zipf_exponent", c.zipf_exponent, 0.0, 5.0)?;
        finite("capabilities.search_zipf_exponent", c.search_zipf_exponent)?;
        range(
            "capabilities.search_zipf_exponent",
            c.search_zipf_exponent,
            0.0,
            5.0,
        )?;
        range("capabilities.per_agent_min", c.per_agent_min, 1, 32)?;
        range(
            "capabilities.per_agent_max",
            c.per_agent_max,
            c.per_agent_min,
            32.min(c.vocabulary.max(c.per_agent_min)),
        )?;
        let l = &self.latency;
        for (key, v, hi) in [
            ("latency.rtt_median_ms", l.rtt_median_ms, 5000.0),
            ("latency.rtt_sigma", l.rtt_sigma, 3.0),
            ("latency.connect_rtts", l.connect_rtts, 10.0),
            ("latency.service_ms", l.service_ms, 10_000.0),
            ("latency.answer_ms", l.answer_ms, 10_000.0),
            ("latency.validate_ms", l.validate_ms, 10_000.0),
            ("latency.rank_ms", l.rank_ms, 10_000.0),
        ] {
            finite(key, v)?;
            range(key, v, 0.0, hi)?;
        }
        if l.rtt_median_ms <= 0.0 {
            return Err(("latency.rtt_median_ms", "must be above 0".into()));
        }
        finite("loss", self.loss)?;
        range("loss", self.loss, 0.0, 0.9)?;
        finite("lost_announcements", self.lost_announcements)?;
        range("lost_announcements", self.lost_announcements, 0.0, 1.0)?;
        if let Some(churn) = &self.churn {
            check_lengths("churn.session", &churn.session)?;
            check_lengths("churn.downtime", &churn.downtime)?;
            if let Some(r) = churn.refused_rtts {
                finite("churn.refused_rtts", r)?;
                range("churn.refused_rtts", r, 0.0, 10.0)?;
                if self.engine == Engine::Swarm {
                    return Err((
                        "churn.refused_rtts",
                        "the swarm engine's memory transport refuses a stopped node's \
                         connections at once: remove it, or use engine = \"des\""
                            .into(),
                    ));
                }
            }
        }
        for p in &self.partitions {
            finite("partitions.start_s", p.start_s)?;
            finite("partitions.heal_s", p.heal_s)?;
            range("partitions.start_s", p.start_s, 0.0, self.duration_s)?;
            range("partitions.heal_s", p.heal_s, p.start_s, self.duration_s)?;
            range("partitions.fraction", p.fraction, 0.0, 0.5)?;
        }
        if self.partitions.len() > 16 {
            return Err(("partitions", "at most 16".into()));
        }
        if let Some(f) = &self.flash_crowd {
            range("flash_crowd.start_s", f.start_s, 0.0, self.duration_s)?;
            range(
                "flash_crowd.duration_s",
                f.duration_s,
                0.0,
                self.duration_s - f.start_s,
            )?;
            range(
                "flash_crowd.capability_rank",
                f.capability_rank,
                0,
                c.vocabulary - 1,
            )?;
            range("flash_crowd.share", f.share, 0.0, 1.0)?;
            range(
                "flash_crowd.rate_multiplier",
                f.rate_multiplier,
                1.0,
                1000.0,
            )?;
        }
        if let Some(p) = &self.publish {
            range("publish.probes", p.probes, 0, MAX_PROBES)?;
            range("publish.at_s", p.at_s, 0.0, self.duration_s)?;
            range("publish.interval_s", p.interval_s, 0.0, 86400.0)?;
            // The DES ends a minute after `duration_s`, and a probe past
            // the run would be left out of the figures without a word.
            let last = p.at_s + p.interval_s * p.probes.saturating_sub(1) as f64;
            if last > self.duration_s {
                return Err((
                    "publish.interval_s",
                    format!(
                        "the last of {} probes would be published at {last} s, after duration_s ({} s)",
                        p.probes, self.duration_s
                    ),
                ));
            }
        }
        if let Some(r) = &self.revoke {
            range("revoke.probes", r.probes, 0, MAX_PROBES.min(self.agents))?;
            range("revoke.at_s", r.at_s, 0.0, self.duration_s)?;
            range("revoke.searches", r.searches, 0, MAX_SEARCHES)?;
            range("revoke.window_s", r.window_s, 0.001, 86400.0)?;
        }
        if let Some(a) = &self.adversarial {
            range("adversarial.share", a.share, 0.0, 0.5)?;
            if let Some(e) = &a.eclipse {
                range(
                    "adversarial.eclipse.capability_rank",
                    e.capability_rank,
                    0,
                    c.vocabulary - 1,
                )?;
                range(
                    "adversarial.eclipse.sybils_per_shard",
                    e.sybils_per_shard,
                    1,
                    100,
                )?;
                range("adversarial.eclipse.search_share", e.search_share, 0.0, 1.0)?;
            }
            if a.judge.is_some() && a.behaviour != Behaviour::Takeover {
                return Err((
                    "adversarial.judge",
                    "only behaviour = \"takeover\" writes records for ids the askers hold: \
                     remove it, or set behaviour = \"takeover\""
                        .into(),
                ));
            }
        }
        if let Some(s) = self.node.shards {
            range("node.shards", s, 1, 1024)?;
        }
        if let Some(f) = self.node.search_fanout {
            range("node.search_fanout", f, 1, 256)?;
        }
        if let Some(t) = self.node.search_timeout_ms {
            range("node.search_timeout_ms", t, 1, 60_000)?;
        }
        if self.engine == Engine::Swarm {
            // What the swarm engine does not model is refused, not
            // silently run without: a researcher would read churn (or
            // loss, or adversaries) into figures that have none.
            let unmodelled: [(&'static str, bool); 7] = [
                ("partitions", !self.partitions.is_empty()),
                ("loss", self.loss > 0.0),
                ("lost_announcements", self.lost_announcements > 0.0),
                ("adversarial", self.adversarial.is_some()),
                ("node.shards", self.node.shards.is_some()),
                ("node.search_fanout", self.node.search_fanout.is_some()),
                ("node.search_choice", self.node.search_choice.is_some()),
            ];
            if let Some((key, _)) = unmodelled.iter().find(|(_, set)| *set) {
                return Err((
                    key,
                    "the swarm engine does not model this yet (the real nodes run with their \
                     defaults over a lossless in-memory transport): remove it, or use \
                     engine = \"des\""
                        .into(),
                ));
            }
        }
        if self.engine == Engine::Swarm && self.replication == Some(Replication::Lookups) {
            // Only the home node stores a record: the swarm times a
            // probe's arrival in the other nodes' stores.
            for (key, set) in [
                ("publish", self.publish.is_some()),
                ("revoke", self.revoke.is_some()),
            ] {
                if set {
                    return Err((
                        key,
                        "under replication = \"lookups\" only an agent's home node stores \
                         its record, so the swarm engine has no arrival elsewhere to time: \
                         remove it, or use replication = \"all\" or engine = \"des\""
                            .into(),
                    ));
                }
            }
        }
        if self.engine == Engine::Swarm
            && self.churn.is_none()
            && self.revoke.as_ref().is_some_and(|r| r.searches > 0)
        {
            // Without churn the swarm runs its searches back to back,
            // before any probe: these would all run before the
            // revocation they are meant to watch.
            return Err((
                "revoke.searches",
                "without churn the swarm engine runs the searches back to back before the \
                 probes, so these would not fall inside the revocation's window (it counts \
                 stale results with searches of its own while a tombstone spreads): remove \
                 it, add [churn], or use engine = \"des\""
                    .into(),
            ));
        }
        if let Some(c) = self.swarm.max_connections {
            if self.engine == Engine::Des {
                return Err((
                    "swarm.max_connections",
                    "the DES does not model connections or their limit: remove it, or use \
                     engine = \"swarm\""
                        .into(),
                ));
            }
            range("swarm.max_connections", c, MIN_SWARM_CONNECTIONS, 4096)?;
        }
        for (key, set) in [
            (
                "swarm.trim_connections",
                self.swarm.trim_connections.is_some(),
            ),
            ("swarm.security", self.swarm.security.is_some()),
        ] {
            if set && self.engine == Engine::Des {
                return Err((
                    key,
                    "the DES does not model connections: remove it, or use engine = \"swarm\""
                        .into(),
                ));
            }
        }
        if self.engine == Engine::Swarm && self.nodes > 2000 {
            return Err((
                "nodes",
                "the swarm engine runs at most 2000 nodes (use engine = \"des\")".into(),
            ));
        }
        Ok(())
    }

    /// The node constants this run uses.
    pub fn node(&self) -> NodeParams {
        let p2p = P2pConfig::default();
        let mesh = MeshConfig::default();
        let limits = MeshLimits::default();
        let timeouts = MeshTimeouts::default();
        let gossip = libp2p::gossipsub::Config::default();
        let fanout = self
            .node
            .search_fanout
            .unwrap_or(p2p.search_fanout)
            .min(limits.max_search_fanout);
        NodeParams {
            shards: self.node.shards.unwrap_or(mesh.shards),
            fanout,
            search_timeout_ms: self
                .node
                .search_timeout_ms
                .unwrap_or(p2p.search_timeout.as_millis() as u64),
            search_choice: self.node.search_choice.unwrap_or_default(),
            k: libp2p::kad::K_VALUE.get(),
            alpha: libp2p::kad::ALPHA_VALUE.get(),
            max_providers_per_key: limits.max_providers_per_key,
            max_providers_result: limits.max_providers_result,
            max_inflight_handlers: limits.max_inflight_handlers,
            lookup_timeout_ms: timeouts.lookup.as_millis() as u64,
            // rust-libp2p's ClosestPeersIterConfig::peer_timeout default;
            // the node does not change it.
            kad_peer_timeout_ms: Duration::from_secs(10).as_millis() as u64,
            kad_query_timeout_ms: timeouts.kad_query.as_millis() as u64,
            reprovide_s: timeouts.reprovide.as_secs(),
            max_known: agentmesh::mesh::wire::MAX_KNOWN,
            gossip_d: gossip.mesh_n(),
            gossip_d_lazy: gossip.gossip_lazy(),
            heartbeat_ms: 1000,
            replication: self.replication.unwrap_or(p2p.replication),
            max_connections: (self.engine == Engine::Swarm)
                .then(|| self.swarm.max_connections.unwrap_or(limits.max_connections)),
            connections_high_water: (self.engine == Engine::Swarm
                && self.swarm.trim_connections.unwrap_or(true))
            .then(|| {
                let mut l = MeshLimits::default();
                if let Some(n) = self.swarm.max_connections {
                    l.set_max_connections(n);
                }
                l.connections_high_water
            }),
            security: (self.engine == Engine::Swarm)
                .then(|| self.swarm.security.unwrap_or_default()),
        }
    }
}

fn check_lengths(key: &'static str, l: &Lengths) -> Result<(), (&'static str, String)> {
    let ok = match *l {
        Lengths::Weibull { shape, scale_s } => {
            shape.is_finite()
                && scale_s.is_finite()
                && (0.05..=20.0).contains(&shape)
                && (1.0..=1e8).contains(&scale_s)
        }
        Lengths::Lognormal { median_s, sigma } => {
            median_s.is_finite()
                && sigma.is_finite()
                && (1.0..=1e8).contains(&median_s)
                && (0.0..=5.0).contains(&sigma)
        }
    };
    if ok {
        Ok(())
    } else {
        Err((
            key,
            "weibull needs shape in 0.05..=20 and scale_s in 1..=1e8; lognormal needs \
             median_s in 1..=1e8 and sigma in 0..=5"
                .into(),
        ))
    }
}

/// The dotted key a TOML error points at, from its span (best effort).
fn key_of(e: &toml::de::Error, text: &str) -> String {
    let msg = e.message();
    // serde's unknown-field message names the field.
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        if let Some(end) = rest.find('`') {
            return with_table(e, text, &rest[..end]);
        }
    }
    if let Some(rest) = msg.strip_prefix("missing field `") {
        if let Some(end) = rest.find('`') {
            return with_table(e, text, &rest[..end]);
        }
    }
    match e.span() {
        Some(span) => {
            let line_start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
            let line = &text[line_start..];
            let key = line
                .split('=')
                .next()
                .unwrap_or("")
                .trim()
                .trim_matches(['[', ']']);
            with_table(e, text, key)
        }
        None => "-".into(),
    }
}

/// Prefixes `key` with the `[table]` the error's span sits in.
fn with_table(e: &toml::de::Error, text: &str, key: &str) -> String {
    let Some(span) = e.span() else {
        return key.to_owned();
    };
    let before = &text[..span.start.min(text.len())];
    let table = before.lines().rev().find_map(|l| {
        let l = l.trim();
        l.strip_prefix('[')
            .map(|t| t.trim_start_matches('[').trim_end_matches(']').trim())
    });
    match table {
        Some(t) if !t.is_empty() && t != key && !key.starts_with(t) => format!("{t}.{key}"),
        _ => key.to_owned(),
    }
}
