//! The sections of [`Config`](super::Config), one struct per TOML table
//! (`[api]`, `[p2p]`, `[crawl]`, `[store]`, `[search]`), each with the
//! defaults of a working single node, and the default values other
//! modules name.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

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

/// What a node does with a peer whose transparency log it caught
/// showing two histories (docs/protocol.md#witnessing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnEquivocation {
    /// Refuse every record its key signs from then on (`equivocated`),
    /// and no longer count it as a trusted peer.
    #[default]
    Distrust,
    /// Keep and show the proof only.
    Report,
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
    /// The admin token: `Authorization: Bearer <token>` allows every
    /// route (docs/protocol.md#api-access). At least 16 characters.
    pub admin_token: Option<Secret>,
    /// A file holding the admin token (its first line), read at start;
    /// used when `admin_token` is not set.
    pub admin_token_file: Option<PathBuf>,
    /// Whether requests without credentials may read (get, list,
    /// search, resolve, summaries, crawl report summaries). Writes
    /// always need credentials once any are configured.
    pub public_reads: bool,
    /// Bearer JWTs from an OAuth 2.0 issuer, when set.
    pub jwt: Option<JwtConfig>,
    /// `[api.tls]`: HTTPS, and client certificates, when set; unset, the
    /// API serves plain HTTP.
    pub tls: Option<TlsConfig>,
    /// Time allowed for one request, end to end.
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// Requests handled at once, all routes together; a request past
    /// them is answered 503 with `Retry-After` at once (load shedding).
    pub max_concurrent_requests: usize,
    /// Time a client has to send a request's head (request line and
    /// headers); a slower one is disconnected. The clock starts when the
    /// server waits for a head, so an HTTP/1 keep-alive connection also
    /// waits this long at most for its next request.
    #[serde(with = "humantime_serde")]
    pub header_read_timeout: Duration,
    /// A connection with no request in flight and no bytes either way for
    /// this long is closed.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// A request body that sends no bytes for this long is cut off (the
    /// request fails with 408, an import stops).
    #[serde(with = "humantime_serde")]
    pub body_read_timeout: Duration,
    /// Most open connections; more are closed as they are accepted.
    pub max_connections: usize,
    /// Most open connections from one client address; more are closed as
    /// they are accepted. `trusted_proxies` are not capped.
    pub max_connections_per_ip: usize,
    /// Addresses or CIDR ranges of reverse proxies whose
    /// `X-Forwarded-For` is believed: behind one, a request's client
    /// address is the right-most address in that header that is not a
    /// trusted proxy itself. Empty: the TCP peer is the client.
    pub trusted_proxies: Vec<super::IpRange>,
    /// `[api.limits]`: rate limits and daily quotas.
    pub limits: super::LimitsConfig,
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
            admin_token_file: None,
            public_reads: true,
            jwt: None,
            tls: None,
            request_timeout: Duration::from_secs(30),
            max_concurrent_requests: 1024,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_read_timeout: Duration::from_secs(30),
            max_connections: 4096,
            max_connections_per_ip: 256,
            trusted_proxies: Vec::new(),
            limits: super::LimitsConfig::default(),
            import_max_line_bytes: DEFAULT_IMPORT_MAX_LINE_BYTES,
            import_max_lines: 1_000_000,
        }
    }
}

/// A secret from the configuration (a token): shown as `<redacted>` by
/// `Debug`, so it never reaches a log line through the config.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// The secret's text.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Self {
        Secret(s)
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Self {
        Secret(s.to_owned())
    }
}

impl std::ops::Deref for Secret {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// `[api.jwt]`: bearer JWTs from an OAuth 2.0 issuer, checked against
/// its JWKS (docs/protocol.md#api-access).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtConfig {
    /// The `iss` a token must carry.
    pub issuer: String,
    /// The `aud` a token must carry (one of, when it has several).
    pub audience: String,
    /// Where the issuer's JWKS is fetched (`https://`).
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// Or a file holding it (read again on the same schedule).
    #[serde(default)]
    pub jwks_file: Option<PathBuf>,
    /// Extra CA certificates (PEM) trusted for `jwks_url`.
    #[serde(default)]
    pub ca_files: Vec<PathBuf>,
    /// The claim that holds the scopes: a space-separated string or a
    /// list of strings.
    #[serde(default = "default_scope_claim")]
    pub scope_claim: String,
    /// Clock skew allowed on `exp` and `nbf`.
    #[serde(default = "default_jwt_leeway", with = "humantime_serde")]
    pub leeway: Duration,
    /// How old the fetched JWKS may grow before it is fetched again.
    #[serde(default = "default_jwks_refresh", with = "humantime_serde")]
    pub refresh: Duration,
}

/// `[api.tls]`: the API served over HTTPS only (HTTP/1.1 and h2 by
/// ALPN), and the client certificates it accepts as credentials
/// (docs/protocol.md#api-access).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The server's certificate chain (PEM), leaf first.
    pub cert_file: PathBuf,
    /// The server's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// CA certificates (PEM) a client certificate must chain to. When
    /// set, the server asks for a client certificate; a client may send
    /// none, but one it sends must chain to one of these and be valid in
    /// time, or the handshake fails.
    #[serde(default)]
    pub client_ca_files: Vec<PathBuf>,
    /// `[[api.tls.clients]]`: which client certificates mean whom, and
    /// what each may do.
    #[serde(default)]
    pub clients: Vec<TlsClientConfig>,
}

/// `[[api.tls.clients]]`: one peer registry known by its client
/// certificate. A certificate matches when it matches every way given
/// (`subject`, `fingerprint`; at least one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsClientConfig {
    /// The label of the principal (`cert:<name>` in the audit log and the
    /// rate limits).
    pub name: String,
    /// A DNS or URI subjectAltName of the certificate, or its subject's
    /// common name when it has no subjectAltName.
    #[serde(default)]
    pub subject: Option<String>,
    /// The SHA-256 of the certificate's DER, in hex (`ab:cd:...` or
    /// plain).
    #[serde(default)]
    pub fingerprint: Option<String>,
    /// The scopes it is granted (`read`, `register`, `records`, `import`,
    /// `crawl`, `admin`).
    pub scopes: Vec<String>,
}

fn default_scope_claim() -> String {
    "scope".into()
}

fn default_jwt_leeway() -> Duration {
    Duration::from_secs(60)
}

fn default_jwks_refresh() -> Duration {
    Duration::from_secs(15 * 60)
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
    /// Whether a mesh search stops waiting once its answer is full: the
    /// answers hold a page (`limit`) of records this node did not hold,
    /// and at least half the peers asked have answered. Off: it waits for
    /// every peer asked, up to its budget (docs/protocol.md#mesh-search).
    pub search_ends_when_full: bool,
    /// How often this node publishes its log's checkpoint for witnesses
    /// when it changed (and every ten times as long anyway); it witnesses
    /// its peers' checkpoints as they come (docs/protocol.md#witnessing).
    #[serde(with = "humantime_serde")]
    pub witness_interval: Duration,
    /// How often each connection is pinged (`/ipfs/ping/1.0.0`), each
    /// ping waiting as long for its answer; a connection whose pings fail
    /// twice in a row is closed, so a peer cut off is let go and searches
    /// stop waiting on it.
    #[serde(with = "humantime_serde")]
    pub ping_interval: Duration,
    /// What to do with a peer caught equivocating: `distrust` (refuse
    /// what its key signs) or `report` (keep and show the proof only).
    pub on_equivocation: OnEquivocation,
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
            search_ends_when_full: true,
            witness_interval: Duration::from_secs(60),
            ping_interval: Duration::from_secs(10),
            on_equivocation: OnEquivocation::Distrust,
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
    /// One request start to one host per this, sustained.
    #[serde(with = "humantime_serde")]
    pub per_host_interval: Duration,
    /// Request starts to one host that may come at once after it was
    /// idle (a visit in every format); 1 spaces every start.
    pub per_host_burst: u32,
    /// Requests in flight to one IP address at once, whatever host names
    /// they were asked under (`crawl::polite`: many names on one address
    /// share this budget; looser than a host's by default, as shared
    /// hosting serves many honest domains from one address).
    pub per_address_concurrency: usize,
    /// One request start to one IP address per this, sustained.
    #[serde(with = "humantime_serde")]
    pub per_address_interval: Duration,
    /// Request starts to one IP address that may come at once after it
    /// was idle.
    pub per_address_burst: u32,
    /// How publishers reach this node's operator (a URL or mail address),
    /// sent in the crawler's User-Agent.
    pub contact: Option<String>,
    /// Ask the agents registered here (AIDIP registrations, imported MCP
    /// servers, A2A agents) whether they answer in their protocol
    /// (`crawl::probe`; off by default).
    pub probe_registered: bool,
    /// Probe, on each visit, the agents of other formats than ADP a crawl
    /// stores (an A2A agent whose card a crawled domain serves), as the
    /// probe asks a registered one (off by default; ADP agents are
    /// checked by the challenge).
    pub probe_crawled: bool,
    /// How often each registered agent's endpoint is asked.
    #[serde(with = "humantime_serde")]
    pub probe_interval: Duration,
    /// Most endpoints probed per second.
    pub probe_rate: u32,
    /// Most probes in flight at once (each host still under the
    /// per-host and per-address limits).
    pub probe_concurrency: usize,
    /// The whole probe of one agent (every request of it, an MCP session's
    /// three or four), past which it counts as `timeout`.
    #[serde(with = "humantime_serde")]
    pub probe_timeout: Duration,
    /// MCP registries this node follows (`crawl::follow`): the base URL of
    /// each (`https://registry.modelcontextprotocol.io`), whose
    /// `/v0.1/servers` it reads in full once and then by `updated_since`,
    /// importing the servers as the bulk import does.
    pub mcp_upstreams: Vec<String>,
    /// How often each upstream is asked for its changes.
    #[serde(with = "humantime_serde")]
    pub mcp_follow_interval: Duration,
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
            per_host_burst: 8,
            per_address_concurrency: 4,
            per_address_interval: Duration::from_millis(100),
            per_address_burst: 16,
            contact: None,
            probe_registered: false,
            probe_crawled: false,
            probe_interval: Duration::from_secs(3600),
            probe_rate: 2,
            probe_concurrency: 16,
            probe_timeout: Duration::from_secs(10),
            mcp_upstreams: Vec::new(),
            mcp_follow_interval: Duration::from_secs(15 * 60),
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
    /// The store's size on disk (sled's files and the text index), in
    /// bytes, past which writes of live records are refused (507
    /// Insufficient Storage) while reads, deletes and suspensions go on.
    /// Unset: no limit but the disk's.
    pub max_bytes: Option<u64>,

    /// How long the audit log keeps entries: a duration (`"90d"`) or an
    /// entry count (`1000000`). Older entries are pruned behind a
    /// checkpoint signed with the node key, so the chain still verifies.
    /// Unset (the default): every entry is kept.
    pub audit_retention: Option<AuditRetention>,

    /// The origin line of the node's transparency log (its checkpoints'
    /// first line and its key's name): by C2SP's advice the scheme-less
    /// URL of the log (`registry.example.org/log`). Unset: `agentmesh/`
    /// and the node's peer id.
    pub log_origin: Option<String>,
}

/// `store.audit_retention`: by age or by count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AuditRetention {
    /// The newest this many entries.
    Entries(u64),
    /// Entries younger than this.
    Age(#[serde(with = "humantime_serde")] Duration),
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            record_ttl: Duration::from_secs(7 * 24 * 3600),
            cache_bytes: 256 * 1024 * 1024,
            audit_retention: None,
            max_bytes: None,
            log_origin: None,
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

/// `[gateway]`: the invocation gateway (docs/protocol.md#gateway). It
/// connects under the crawler's rules (`crawl.allow_private_addresses`,
/// `crawl.allowed_ports`, `crawl.ca_files`, `crawl.resolvers`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    /// Serve `POST /agents/{id}/invoke` and
    /// `POST /agents/{id}/operations/{op}` (callers need the `invoke`
    /// scope).
    pub enabled: bool,
    /// The whole call to an agent: connect, send, its answer.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Connecting to one of the agent's addresses.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Largest answer read from an agent, in bytes; a larger one fails
    /// the call (502).
    pub max_response_bytes: usize,
    /// Calls in flight at once, all agents together; more are answered
    /// 503 with `Retry-After`.
    pub max_concurrent: usize,
    /// Calls in flight at once to one agent; more are answered 503.
    pub max_concurrent_per_agent: usize,
    /// How long a call's `Idempotency-Key` is remembered: a retry with the
    /// same key within it gets the first answer again (in memory, bounded).
    #[serde(with = "humantime_serde")]
    pub idempotency_window: Duration,
    /// The node's own credentials for agents it calls on its clients'
    /// behalf: `[[gateway.credentials]]` with `agent`, `header` and
    /// `value_file`.
    pub credentials: Vec<GatewayCredential>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            max_response_bytes: 4 * 1024 * 1024,
            max_concurrent: 256,
            max_concurrent_per_agent: 16,
            idempotency_window: Duration::from_secs(3600),
            credentials: Vec::new(),
        }
    }
}

/// A credential the node presents to an agent
/// (`[[gateway.credentials]]`): a header, sent when the client sends
/// none of its own, a TLS client certificate (for agents that ask for
/// one: `mtls`), or both. An entry gives `header` with `value_file`,
/// `cert_file` with `key_file`, or all four.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayCredential {
    /// The agent's id.
    pub agent: String,
    /// The header it goes in (`authorization`, `x-api-key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// A file whose first line is the header's value (read at start;
    /// never logged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_file: Option<PathBuf>,
    /// A PEM file with the client certificate the node presents to this
    /// agent, then any intermediates (read at start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_file: Option<PathBuf>,
    /// A PEM file with that certificate's private key (read at start;
    /// never logged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
}
