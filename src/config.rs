//! Node configuration: a TOML file, then `AGENTMESH_*` environment
//! variables, then command-line flags, each overriding the one before.
//!
//! Unknown keys are errors that name the key, so a typo never silently
//! falls back to a default. [`Config::default`] is a working single-node
//! setup. Environment variables of the form `AGENTMESH_SECTION__KEY` set
//! `section.key` (the value is parsed as TOML, else taken as a string);
//! the flag-style ones (`AGENTMESH_DATA_DIR`, `AGENTMESH_LISTEN`, ...) are
//! read by the CLI.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Errors from loading or checking a configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("config file {path}: {source}")]
    Read {
        /// The config file.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
    /// The file or an override is not valid TOML or names an unknown key.
    #[error("config {origin}: {message}")]
    Parse {
        /// Where the text at fault came from: `file {path}`,
        /// `variable {name}`, or the file (or `defaults`) with the
        /// variables that override it.
        origin: String,
        /// The TOML parser's or deserialiser's message.
        message: String,
    },
    /// A value is out of its allowed range.
    #[error("config key {key}: {message}")]
    Invalid {
        /// The dotted key at fault (`api.max_body_bytes`).
        key: &'static str,
        /// What the value must be, or what is wrong with it.
        message: String,
    },
    /// A `crawl.seed_files` file could not be read, is too large, or holds
    /// a line that is not a domain name.
    #[error("config key crawl.seed_files: {}{}: {message}", path.display(), line.map(|l| format!(" line {l}")).unwrap_or_default())]
    SeedFile {
        /// The seed file.
        path: PathBuf,
        /// The 1-based line at fault, when it is one line.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
}

/// What a node keeps of the records peers offer it unasked (gossip,
/// DHT puts). What it looks up itself (search answers, DHT gets) is
/// always kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Replication {
    /// Every valid record (a federation partner: searches answer locally).
    #[default]
    All,
    /// Only updates and tombstones of agents already held; new agents are
    /// validated and passed on, not stored.
    Lookups,
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where the store and `node.key` live.
    pub data_dir: PathBuf,
    /// The HTTP API.
    pub api: ApiConfig,
    /// The libp2p listener and bootstrap peers (used once the mesh lands).
    pub p2p: P2pConfig,
    /// How the crawler reaches DNS and HTTPS.
    pub crawl: CrawlConfig,
    /// Record lifetime and store tuning.
    pub store: StoreConfig,
    /// How free-text searches are ranked.
    pub search: SearchConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("./agentmesh-data"),
            api: ApiConfig::default(),
            p2p: P2pConfig::default(),
            crawl: CrawlConfig::default(),
            store: StoreConfig::default(),
            search: SearchConfig::default(),
        }
    }
}

/// `[api]`: the HTTP API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiConfig {
    /// Listen address.
    pub listen: SocketAddr,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Default page size for `GET /agents` and `top` for searches.
    pub default_limit: usize,
    /// Largest page size or `top` a client may ask for.
    pub max_limit: usize,
    /// When set, writes (`POST`/`PUT`/`DELETE /agents`) need
    /// `Authorization: Bearer <token>`.
    pub admin_token: Option<String>,
    /// Time allowed for one request, end to end.
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// Requests handled at once; more wait (then time out).
    pub max_concurrent_requests: usize,
    /// Longest line of a `POST /admin/import` body, in bytes; a longer
    /// line is refused (the others still go in).
    pub import_max_line_bytes: usize,
    /// Most lines of one `POST /admin/import` body; the import stops
    /// after them.
    pub import_max_lines: u64,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 7700)),
            max_body_bytes: 256 * 1024,
            default_limit: 20,
            max_limit: 100,
            admin_token: None,
            request_timeout: Duration::from_secs(30),
            max_concurrent_requests: 1024,
            import_max_line_bytes: DEFAULT_IMPORT_MAX_LINE_BYTES,
            import_max_lines: 1_000_000,
        }
    }
}

/// The longest lifetime of a record from another node accepted by
/// default (`p2p.max_record_lifetime`): 30 days.
pub const DEFAULT_MAX_RECORD_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);

/// Live records held by default from any one signer this node does not
/// trust (`p2p.max_claims_per_signer`).
pub const DEFAULT_MAX_CLAIMS_PER_SIGNER: u64 = 100_000;

/// Live records held by default from all untrusted signers together
/// (`p2p.max_claims`).
pub const DEFAULT_MAX_CLAIMS: u64 = 2_000_000;

/// The default longest line of an import, in bytes (`agentmesh import`,
/// `api.import_max_line_bytes`).
pub const DEFAULT_IMPORT_MAX_LINE_BYTES: usize = 256 * 1024;

/// `[p2p]`: the mesh.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct P2pConfig {
    /// Multiaddrs to listen on.
    pub listen: Vec<String>,
    /// Multiaddrs (with `/p2p/<peer id>`) of peers to join through.
    pub bootstrap: Vec<String>,
    /// Multiaddrs peers can reach this node at (a public address behind
    /// NAT, a `/dns4/..` name), announced in its provider records. Listen
    /// addresses the address policy allows, and addresses two peers say
    /// they see, are announced without being listed here.
    pub external_addresses: Vec<String>,
    /// Peer ids whose DNS evidence this node takes as is (federation
    /// partners); records from others are marked "attested by" and their
    /// ADP agents re-verified here.
    pub trusted_peers: Vec<String>,
    /// Most providers one mesh search asks (and a quarter as many peers
    /// of this node's own choice besides; with no provider, most
    /// connected peers).
    pub search_fanout: usize,
    /// How long a mesh search may take, end to end: provider lookup,
    /// peers' answers, judging them and ranking (a peer that has not
    /// answered by 70 % of it is not waited for).
    #[serde(with = "humantime_serde")]
    pub search_timeout: Duration,
    /// Dial loopback, private, link-local and CGNAT addresses (peers on
    /// one machine or a private network). Off by default: such addresses,
    /// whether configured, advertised by a peer or resolved from a name,
    /// are not dialled.
    pub allow_private_addresses: bool,
    /// What to keep of the records peers gossip: `all` (a federation
    /// partner: searches answer from the local store) or `lookups` (only
    /// what this node looked up, and updates of agents it holds).
    pub replication: Replication,
    /// The longest lifetime (`expires_at - issued_at`) of a record from
    /// another node; a longer one is refused (`lifetime_too_long`), so no
    /// signer can keep a record alive past the owner's next word. At
    /// least `store.record_ttl`.
    #[serde(with = "humantime_serde")]
    pub max_record_lifetime: Duration,
    /// Domains the mesh may have this node re-verify per minute (records
    /// from untrusted signers claiming evidence), all peers together.
    pub reverify_per_minute: u32,
    /// Of those, per sending peer.
    pub reverify_per_peer_per_minute: u32,
    /// Of those, per record signer.
    pub reverify_per_signer_per_minute: u32,
    /// Most live records held from any one signer outside
    /// `trusted_peers`; more are refused (`signer_quota`).
    pub max_claims_per_signer: u64,
    /// Most live records held from all signers outside `trusted_peers`
    /// together; more are refused (`claims_full`). This node's own and its
    /// trusted peers' records never count against it.
    pub max_claims: u64,
    /// Most incoming connections (in their handshake or established)
    /// from one IP address; more are refused before the handshake
    /// (`per_ip`). 0: no cap. Loopback is not capped.
    pub max_connections_per_ip: u32,
}

impl Default for P2pConfig {
    fn default() -> Self {
        Self {
            listen: vec![
                "/ip4/0.0.0.0/tcp/7701".into(),
                "/ip4/0.0.0.0/udp/7701/quic-v1".into(),
            ],
            bootstrap: Vec::new(),
            external_addresses: Vec::new(),
            trusted_peers: Vec::new(),
            search_fanout: 16,
            search_timeout: Duration::from_secs(2),
            allow_private_addresses: false,
            replication: Replication::All,
            max_record_lifetime: DEFAULT_MAX_RECORD_LIFETIME,
            reverify_per_minute: 300,
            reverify_per_peer_per_minute: 30,
            reverify_per_signer_per_minute: 30,
            max_claims_per_signer: DEFAULT_MAX_CLAIMS_PER_SIGNER,
            max_claims: DEFAULT_MAX_CLAIMS,
            max_connections_per_ip: 8,
        }
    }
}

/// `[crawl]`: where the crawler asks and what it may reach.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CrawlConfig {
    /// DNS servers to ask instead of the system's.
    pub resolvers: Vec<SocketAddr>,
    /// Extra PEM trust roots for HTTPS and WSS.
    pub ca_files: Vec<PathBuf>,
    /// Permit loopback and private targets (off by default).
    pub allow_private_addresses: bool,
    /// DNSSEC trust anchors beside the root's.
    pub dnssec_trust_anchors: Vec<PathBuf>,
    /// Domains to crawl at start.
    pub seeds: Vec<String>,
    /// Files of domains to crawl at start, one per line (`#` starts a
    /// comment), read when the node starts; see
    /// `crawl::seeds::seed_domains` for the bounds.
    pub seed_files: Vec<PathBuf>,
    /// Crawl the verified peers that crawled agents list.
    pub follow_peers: bool,
    /// Domains crawled at once.
    pub concurrency: usize,
    /// Most domains one crawl job may grow to by following peers.
    pub max_domains_per_job: usize,
    /// The discovery formats a crawl of a domain reads: `adp`, `a2a`
    /// (Agent Cards), `ard` (`ai-catalog.json`), `dns-aid` (SVCB under
    /// `_agents`), `aid` (`v=aid1` TXT records). All by default.
    pub formats: Vec<crate::descriptor::DocumentFormat>,
    /// The port the well-known documents of the other formats (A2A cards,
    /// ARD catalogs) are fetched from: 443, unless a test server listens
    /// elsewhere. ADP's own URLs come from its TXT and SRV records.
    pub https_port: u16,
    /// Ports the crawler may connect to besides 443 (and `https_port`):
    /// a URL a domain publishes (the TXT `wk`, an SRV port, a redirect,
    /// `endpoints.chat`) on any other port is refused with
    /// `port_not_allowed`. Empty by default; test rigs whose servers
    /// listen elsewhere name their port here.
    pub allowed_ports: Vec<u16>,
    /// Revisit crawled domains (`crawl::scheduler`): at min(DNS TTL,
    /// HTTP max-age), with backoff on failures. On by default.
    pub recrawl: bool,
    /// The shortest revisit interval, however short the TTLs.
    #[serde(with = "humantime_serde")]
    pub min_recrawl: Duration,
    /// How often a recrawl whose document did not change (304) re-runs
    /// the challenge.
    #[serde(with = "humantime_serde")]
    pub challenge_interval: Duration,
    /// The first retry after a failed visit; it doubles per failure.
    #[serde(with = "humantime_serde")]
    pub retry_base: Duration,
    /// The longest retry interval.
    #[serde(with = "humantime_serde")]
    pub retry_max: Duration,
    /// An agent not confirmed for this long is `stale` in results.
    #[serde(with = "humantime_serde")]
    pub stale_after: Duration,
    /// An agent not confirmed for this long leaves default results
    /// (`include_stale` still shows it).
    #[serde(with = "humantime_serde")]
    pub drop_after: Duration,
    /// Most domains the recrawl schedule holds. When it is full, a new
    /// domain takes the place of the held domain with the most failed
    /// visits in a row (the oldest confirmation breaks ties), if that one
    /// failed at least once and at least as often as the new one;
    /// otherwise the new domain is not scheduled (a schedule full of
    /// domains that answer is never churned by new names).
    pub max_scheduled_domains: usize,
    /// A domain whose visits failed this many times in a row leaves the
    /// recrawl schedule (its agents are dropped from default results);
    /// a later crawl request schedules it again.
    pub evict_after_failures: u32,
    /// Requests in flight to one host at once.
    pub per_host_concurrency: usize,
    /// Least time between two request starts to one host.
    #[serde(with = "humantime_serde")]
    pub per_host_interval: Duration,
    /// Requests in flight to one IP address at once, whatever host names
    /// they were asked under (`crawl::polite`: many names on one address
    /// share this budget; looser than a host's by default, as shared
    /// hosting serves many honest domains from one address).
    pub per_address_concurrency: usize,
    /// Least time between two request starts to one IP address.
    #[serde(with = "humantime_serde")]
    pub per_address_interval: Duration,
    /// How publishers reach this node's operator (a URL or mail address),
    /// sent in the crawler's User-Agent.
    pub contact: Option<String>,
    /// Ask the endpoints of agents registered here whether they answer
    /// (`crawl::probe`; off by default).
    pub probe_registered: bool,
    /// How often each registered agent's endpoint is asked.
    #[serde(with = "humantime_serde")]
    pub probe_interval: Duration,
    /// Most endpoints probed per second.
    pub probe_rate: u32,
}

impl Default for CrawlConfig {
    fn default() -> Self {
        Self {
            resolvers: Vec::new(),
            ca_files: Vec::new(),
            allow_private_addresses: false,
            dnssec_trust_anchors: Vec::new(),
            seeds: Vec::new(),
            seed_files: Vec::new(),
            follow_peers: true,
            concurrency: 64,
            max_domains_per_job: 10_000,
            formats: crate::descriptor::DocumentFormat::CRAWLED.to_vec(),
            https_port: 443,
            allowed_ports: Vec::new(),
            recrawl: true,
            min_recrawl: Duration::from_secs(60),
            challenge_interval: Duration::from_secs(24 * 3600),
            retry_base: Duration::from_secs(300),
            retry_max: Duration::from_secs(24 * 3600),
            stale_after: Duration::from_secs(6 * 3600),
            drop_after: Duration::from_secs(3 * 24 * 3600),
            max_scheduled_domains: 100_000,
            evict_after_failures: 10,
            per_host_concurrency: 2,
            per_host_interval: Duration::from_millis(250),
            per_address_concurrency: 4,
            per_address_interval: Duration::from_millis(100),
            contact: None,
            probe_registered: false,
            probe_interval: Duration::from_secs(3600),
            probe_rate: 2,
        }
    }
}

/// `[store]`: records and the embedded database.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// How long records this node signs stay valid.
    #[serde(with = "humantime_serde")]
    pub record_ttl: Duration,
    /// sled page cache size, bytes.
    pub cache_bytes: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            record_ttl: Duration::from_secs(7 * 24 * 3600),
            cache_bytes: 256 * 1024 * 1024,
        }
    }
}

/// `[search]`: how free-text searches are ranked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchConfig {
    /// A static embedding model in the Model2Vec format (a directory
    /// holding `tokenizer.json`, `model.safetensors`, `config.json`): the
    /// text index's best candidates are re-ranked by meaning as well.
    /// Needs a build with the `semantic` feature; read once at start,
    /// never downloaded (`scripts/semantic-model.sh` makes one). Unset: text
    /// ranking alone.
    pub semantic_model: Option<PathBuf>,
    /// With a model: the weight of the text index's order in the fusion
    /// of the two orders, 0 to 1 (1: words alone, 0: meaning alone).
    pub semantic_weight: f64,
}

impl Default for SearchConfig {
    fn default() -> Self {
        Self {
            semantic_model: None,
            semantic_weight: DEFAULT_SEMANTIC_WEIGHT,
        }
    }
}

/// The default `search.semantic_weight`, measured on the relevance sets
/// (BENCHMARKS.md).
pub const DEFAULT_SEMANTIC_WEIGHT: f64 = 0.7;

/// Prefix of configuration environment variables.
pub const ENV_PREFIX: &str = "AGENTMESH_";

impl Config {
    /// Loads `file` (when given) and applies `AGENTMESH_SECTION__KEY`
    /// variables from `env`, then validates.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, variable or key at fault.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let table = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_owned(),
                    source,
                })?;
                text.parse::<toml::Table>()
                    .map_err(|e| ConfigError::Parse {
                        origin: format!("file {}", path.display()),
                        message: e.to_string(),
                    })?
            }
            None => toml::Table::new(),
        };
        let mut overrides: Vec<(String, String)> = env
            .into_iter()
            .filter(|(k, _)| k.starts_with(ENV_PREFIX) && k.contains("__"))
            .collect();
        overrides.sort();
        let origin = match file {
            Some(p) => format!("file {}", p.display()),
            None => "defaults".into(),
        };
        // Each variable's value is read as TOML (numbers, booleans,
        // arrays), else as a string. A variable whose typed reading does
        // not fit its key on its own, but whose text does (a token of
        // digits is still a string), is read as a string.
        #[derive(Clone, Copy, PartialEq)]
        enum Reading {
            Skip,
            Typed,
            Text,
        }
        let build = |readings: &[Reading]| -> Result<Result<Config, toml::de::Error>, ConfigError> {
            let mut merged = table.clone();
            for ((name, value), reading) in overrides.iter().zip(readings) {
                let value = match reading {
                    Reading::Skip => continue,
                    Reading::Typed => parse_env_value(value),
                    Reading::Text => toml::Value::String(value.clone()),
                };
                let path: Vec<String> = name[ENV_PREFIX.len()..]
                    .split("__")
                    .map(str::to_lowercase)
                    .collect();
                set_path(&mut merged, &path, value).map_err(|message| ConfigError::Parse {
                    origin: format!("variable {name}"),
                    message,
                })?;
            }
            Ok(toml::Value::Table(merged).try_into::<Config>())
        };
        let mut readings = vec![Reading::Typed; overrides.len()];
        for i in 0..overrides.len() {
            let mut alone = vec![Reading::Skip; overrides.len()];
            alone[i] = Reading::Typed;
            if build(&alone)?.is_err() {
                alone[i] = Reading::Text;
                if build(&alone)?.is_ok() {
                    readings[i] = Reading::Text;
                }
            }
        }
        match build(&readings)? {
            Ok(config) => {
                config.validate()?;
                Ok(config)
            }
            Err(e) => {
                let names: Vec<&str> = overrides.iter().map(|(n, _)| n.as_str()).collect();
                let origin = if names.is_empty() {
                    origin
                } else {
                    format!("{origin} with variables {}", names.join(", "))
                };
                Err(ConfigError::Parse {
                    origin,
                    message: e.message().to_owned(),
                })
            }
        }
    }

    /// Checks the invariants the node relies on.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, message: &str| {
            Err(ConfigError::Invalid {
                key,
                message: message.to_owned(),
            })
        };
        if self.data_dir.as_os_str().is_empty() {
            return invalid("data_dir", "must not be empty");
        }
        if let Some(dir) = &self.search.semantic_model {
            if !cfg!(feature = "semantic") {
                return invalid(
                    "search.semantic_model",
                    "this build has no semantic ranking: rebuild with `--features semantic`, or unset it",
                );
            }
            if dir.as_os_str().is_empty() {
                return invalid("search.semantic_model", "must not be empty when set");
            }
        }
        if !(0.0..=1.0).contains(&self.search.semantic_weight) {
            return invalid("search.semantic_weight", "must be between 0 and 1");
        }
        if self.api.max_body_bytes < 1024 || self.api.max_body_bytes > 16 * 1024 * 1024 {
            return invalid("api.max_body_bytes", "must be between 1 KiB and 16 MiB");
        }
        if self.api.max_limit == 0 || self.api.max_limit > 10_000 {
            return invalid("api.max_limit", "must be between 1 and 10000");
        }
        if self.api.default_limit == 0 || self.api.default_limit > self.api.max_limit {
            return invalid("api.default_limit", "must be between 1 and api.max_limit");
        }
        if self.api.request_timeout.is_zero() {
            return invalid("api.request_timeout", "must be above zero");
        }
        if self.api.max_concurrent_requests == 0 {
            return invalid("api.max_concurrent_requests", "must be above zero");
        }
        if self.api.import_max_line_bytes < 1024
            || self.api.import_max_line_bytes > 16 * 1024 * 1024
        {
            return invalid(
                "api.import_max_line_bytes",
                "must be between 1 KiB and 16 MiB",
            );
        }
        if self.api.import_max_lines == 0 {
            return invalid("api.import_max_lines", "must be above zero");
        }
        if matches!(&self.api.admin_token, Some(t) if t.len() < 16) {
            return invalid("api.admin_token", "must be at least 16 characters");
        }
        if self.crawl.concurrency == 0 || self.crawl.concurrency > 4096 {
            return invalid("crawl.concurrency", "must be between 1 and 4096");
        }
        let c = &self.crawl;
        if c.min_recrawl < Duration::from_secs(1) {
            return invalid("crawl.min_recrawl", "must be at least 1 s");
        }
        if c.retry_base.is_zero() || c.retry_base > c.retry_max {
            return invalid(
                "crawl.retry_base",
                "must be above zero and at most crawl.retry_max",
            );
        }
        if c.stale_after.is_zero() || c.drop_after <= c.stale_after {
            return invalid(
                "crawl.drop_after",
                "must be longer than crawl.stale_after, which must be above zero",
            );
        }
        if c.per_host_concurrency == 0 || c.per_host_concurrency > 64 {
            return invalid("crawl.per_host_concurrency", "must be between 1 and 64");
        }
        if c.probe_interval < Duration::from_secs(60) {
            return invalid("crawl.probe_interval", "must be at least 1 minute");
        }
        if c.probe_rate == 0 || c.probe_rate > 100 {
            return invalid("crawl.probe_rate", "must be between 1 and 100 per second");
        }
        if c.max_scheduled_domains == 0 || c.max_scheduled_domains > 100_000_000 {
            return invalid(
                "crawl.max_scheduled_domains",
                "must be between 1 and 100000000",
            );
        }
        if c.evict_after_failures == 0 || c.evict_after_failures > 1000 {
            return invalid("crawl.evict_after_failures", "must be between 1 and 1000");
        }
        if c.allowed_ports.len() > 64 || c.allowed_ports.contains(&0) {
            return invalid(
                "crawl.allowed_ports",
                "must hold at most 64 ports, none of them 0",
            );
        }
        if c.https_port == 0 {
            return invalid("crawl.https_port", "must not be 0");
        }
        if c.per_host_interval > Duration::from_secs(60) {
            return invalid("crawl.per_host_interval", "must be at most 60 s");
        }
        if c.per_address_concurrency == 0 || c.per_address_concurrency > 256 {
            return invalid("crawl.per_address_concurrency", "must be between 1 and 256");
        }
        if c.per_address_interval > Duration::from_secs(60) {
            return invalid("crawl.per_address_interval", "must be at most 60 s");
        }
        if let Some(contact) = &c.contact {
            if contact.len() > 200 || !contact.bytes().all(|b| (0x20..0x7f).contains(&b)) {
                return invalid(
                    "crawl.contact",
                    "must be at most 200 printable ASCII characters (it goes in a header)",
                );
            }
        }
        if self.p2p.max_record_lifetime < self.store.record_ttl {
            return invalid(
                "p2p.max_record_lifetime",
                "must be at least store.record_ttl (this node's own records would be refused by nodes like it)",
            );
        }
        for (key, n) in [
            ("p2p.reverify_per_minute", self.p2p.reverify_per_minute),
            (
                "p2p.reverify_per_peer_per_minute",
                self.p2p.reverify_per_peer_per_minute,
            ),
            (
                "p2p.reverify_per_signer_per_minute",
                self.p2p.reverify_per_signer_per_minute,
            ),
        ] {
            if n > 100_000 {
                return invalid(key, "must be at most 100000");
            }
        }
        if self.p2p.max_claims_per_signer == 0
            || self.p2p.max_claims_per_signer > self.p2p.max_claims
        {
            return invalid(
                "p2p.max_claims_per_signer",
                "must be above zero and at most p2p.max_claims",
            );
        }
        if self.p2p.search_fanout == 0 || self.p2p.search_fanout > 256 {
            return invalid("p2p.search_fanout", "must be between 1 and 256");
        }
        if self.p2p.search_timeout.is_zero() || self.p2p.search_timeout > Duration::from_secs(60) {
            return invalid("p2p.search_timeout", "must be above zero and at most 60 s");
        }
        for peer in &self.p2p.trusted_peers {
            if peer.parse::<libp2p::PeerId>().is_err() {
                return Err(ConfigError::Invalid {
                    key: "p2p.trusted_peers",
                    message: format!("{peer:?} is not a peer id"),
                });
            }
        }
        if self.store.record_ttl < Duration::from_secs(60) {
            return invalid("store.record_ttl", "must be at least 1 minute");
        }
        Ok(())
    }

    /// Path of the node key inside the data directory.
    pub fn node_key_path(&self) -> PathBuf {
        self.data_dir.join("node.key")
    }

    /// Path of the store inside the data directory.
    pub fn store_path(&self) -> PathBuf {
        self.data_dir.join("store")
    }
}

fn parse_env_value(raw: &str) -> toml::Value {
    format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_owned()))
}

fn set_path(table: &mut toml::Table, path: &[String], value: toml::Value) -> Result<(), String> {
    let (last, parents) = path.split_last().ok_or("empty key")?;
    let mut cur = table;
    for p in parents {
        let entry = cur
            .entry(p.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = entry
            .as_table_mut()
            .ok_or_else(|| format!("{p} is not a table"))?;
    }
    cur.insert(last.clone(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn default_is_a_working_single_node() {
        let c = Config::default();
        c.validate().unwrap();
        assert_eq!(c.api.listen.to_string(), "127.0.0.1:7700");
        assert_eq!(c.data_dir, PathBuf::from("./agentmesh-data"));
        assert_eq!(c.p2p.listen[0], "/ip4/0.0.0.0/tcp/7701");
        assert!(!c.crawl.allow_private_addresses);
    }

    #[test]
    fn file_then_environment_override() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "data_dir = \"/var/lib/am\"\n[api]\nlisten = \"127.0.0.1:9000\"\nmax_limit = 50\n[store]\nrecord_ttl = \"2h\"\n",
        )
        .unwrap();
        let c = Config::load(
            Some(&path),
            env(&[
                ("AGENTMESH_API__MAX_LIMIT", "70"),
                ("AGENTMESH_CRAWL__ALLOW_PRIVATE_ADDRESSES", "true"),
                ("OTHER__X", "1"),
            ]),
        )
        .unwrap();
        assert_eq!(c.data_dir, PathBuf::from("/var/lib/am"));
        assert_eq!(c.api.listen.port(), 9000);
        assert_eq!(c.api.max_limit, 70);
        assert_eq!(c.store.record_ttl, Duration::from_secs(7200));
        assert!(c.crawl.allow_private_addresses);
    }

    #[test]
    fn a_semantic_model_needs_the_feature_and_a_path() {
        let c = Config::load(
            None,
            env(&[("AGENTMESH_SEARCH__SEMANTIC_MODEL", "/opt/model")]),
        );
        if cfg!(feature = "semantic") {
            let c = c.unwrap();
            assert_eq!(c.search.semantic_model, Some(PathBuf::from("/opt/model")));
        } else {
            let err = c.unwrap_err().to_string();
            assert!(err.contains("search.semantic_model"), "{err}");
            assert!(err.contains("--features semantic"), "{err}");
        }
        assert_eq!(Config::default().search.semantic_model, None);
        for bad in ["1.5", "-0.1", "nan"] {
            let err = Config::load(None, env(&[("AGENTMESH_SEARCH__SEMANTIC_WEIGHT", bad)]))
                .unwrap_err()
                .to_string();
            assert!(err.contains("search.semantic_weight"), "{bad}: {err}");
        }
    }

    #[test]
    fn unknown_keys_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "[api]\nlisten_addr = \"127.0.0.1:1\"\n").unwrap();
        let err = Config::load(Some(&path), vec![]).unwrap_err().to_string();
        assert!(err.contains("listen_addr"), "{err}");
        let err = Config::load(None, env(&[("AGENTMESH_API__BOGUS", "1")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("bogus"), "{err}");
    }

    #[test]
    fn a_value_that_reads_as_a_number_can_still_be_a_string() {
        let c = Config::load(
            None,
            env(&[
                ("AGENTMESH_API__ADMIN_TOKEN", "2718281828459045"),
                ("AGENTMESH_API__MAX_LIMIT", "70"),
            ]),
        )
        .unwrap();
        assert_eq!(c.api.admin_token.as_deref(), Some("2718281828459045"));
        assert_eq!(c.api.max_limit, 70);
    }

    #[test]
    fn per_address_limits_are_read_and_checked() {
        let c = Config::load(
            None,
            env(&[
                ("AGENTMESH_CRAWL__PER_ADDRESS_CONCURRENCY", "16"),
                ("AGENTMESH_CRAWL__PER_ADDRESS_INTERVAL", "20ms"),
            ]),
        )
        .unwrap();
        assert_eq!(c.crawl.per_address_concurrency, 16);
        assert_eq!(c.crawl.per_address_interval, Duration::from_millis(20));
        for (key, bad, named) in [
            (
                "AGENTMESH_CRAWL__PER_ADDRESS_CONCURRENCY",
                "0",
                "crawl.per_address_concurrency",
            ),
            (
                "AGENTMESH_CRAWL__PER_ADDRESS_CONCURRENCY",
                "257",
                "crawl.per_address_concurrency",
            ),
            (
                "AGENTMESH_CRAWL__PER_ADDRESS_INTERVAL",
                "61s",
                "crawl.per_address_interval",
            ),
        ] {
            let err = Config::load(None, env(&[(key, bad)])).unwrap_err();
            assert!(
                matches!(err, ConfigError::Invalid { key, .. } if key == named),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn bad_values_are_refused() {
        let err = Config::load(None, env(&[("AGENTMESH_API__MAX_BODY_BYTES", "10")])).unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Invalid {
                    key: "api.max_body_bytes",
                    ..
                }
            ),
            "{err}"
        );
        let err =
            Config::load(None, env(&[("AGENTMESH_API__LISTEN", "not-an-address")])).unwrap_err();
        assert!(err.to_string().contains("AGENTMESH_API__LISTEN"), "{err}");
        let missing =
            Config::load(Some(Path::new("/nonexistent/agentmesh.toml")), vec![]).unwrap_err();
        assert!(matches!(missing, ConfigError::Read { .. }));
    }
}
