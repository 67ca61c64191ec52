//! Node configuration: a TOML file, then `AGENTMESH_*` environment
//! variables, then command-line flags, each overriding the one before.
//!
//! Unknown keys are errors that name the key, so a typo never silently
//! falls back to a default. [`Config::default`] is a working single-node
//! setup. Environment variables of the form `AGENTMESH_SECTION__KEY` set
//! `section.key` (the value is parsed as TOML, else taken as a string);
//! the flag-style ones (`AGENTMESH_DATA_DIR`, `AGENTMESH_LISTEN`, ...) are
//! read by the CLI.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod limits;
mod sections;

pub use limits::{IpRange, LimitsConfig};
pub use sections::{
    ApiConfig, AuditRetention, CrawlConfig, GatewayConfig, GatewayCredential, JwtConfig,
    OnEquivocation, P2pConfig, Replication, SearchConfig, Secret, StoreConfig, TlsClientConfig,
    TlsConfig, DEFAULT_IMPORT_MAX_LINE_BYTES, DEFAULT_MAX_CLAIMS, DEFAULT_MAX_CLAIMS_PER_SIGNER,
    DEFAULT_MAX_RECORD_LIFETIME, DEFAULT_SEMANTIC_WEIGHT,
};

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
    /// The invocation gateway (`POST /agents/{id}/invoke`).
    pub gateway: GatewayConfig,
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
            gateway: GatewayConfig::default(),
        }
    }
}

/// Most MCP registries one node follows (`crawl.mcp_upstreams`).
pub const MAX_MCP_UPSTREAMS: usize = 16;

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
            Ok(mut config) => {
                config.read_admin_token_file()?;
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

    /// Reads `api.admin_token_file` into `api.admin_token` when the
    /// token itself is not set: its first line, trimmed.
    ///
    /// # Errors
    /// [`ConfigError::Read`] when the file cannot be read,
    /// [`ConfigError::Invalid`] when its first line is empty.
    pub fn read_admin_token_file(&mut self) -> Result<(), ConfigError> {
        let Some(path) = &self.api.admin_token_file else {
            return Ok(());
        };
        if self.api.admin_token.is_some() {
            return Ok(());
        }
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        let token = text.lines().next().unwrap_or_default().trim();
        if token.is_empty() {
            return Err(ConfigError::Invalid {
                key: "api.admin_token_file",
                message: format!("{} holds no token on its first line", path.display()),
            });
        }
        self.api.admin_token = Some(Secret::from(token));
        Ok(())
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
        self.validate_serving()?;
        if let Some(origin) = &self.store.log_origin {
            if let Err(e) = crate::tlog::note::check_origin(origin) {
                return invalid("store.log_origin", &e.to_string());
            }
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
        if let Some(jwt) = &self.api.jwt {
            if jwt.issuer.is_empty() || jwt.audience.is_empty() {
                return invalid("api.jwt", "issuer and audience must both be set");
            }
            match (&jwt.jwks_url, &jwt.jwks_file) {
                (Some(_), Some(_)) | (None, None) => {
                    return invalid("api.jwt", "set exactly one of jwks_url and jwks_file")
                }
                (Some(url), None) if !url.starts_with("https://") => {
                    return invalid("api.jwt.jwks_url", "must be an https:// URL")
                }
                _ => {}
            }
            if jwt.refresh < Duration::from_secs(30) {
                return invalid("api.jwt.refresh", "must be at least 30 s");
            }
        }
        if let Some(tls) = &self.api.tls {
            if !tls.clients.is_empty() && tls.client_ca_files.is_empty() {
                return invalid(
                    "api.tls.clients",
                    "client certificates need api.tls.client_ca_files (without a CA none is asked for)",
                );
            }
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
        if c.mcp_follow_interval < Duration::from_secs(10) {
            return invalid("crawl.mcp_follow_interval", "must be at least 10 seconds");
        }
        if c.mcp_upstreams.len() > MAX_MCP_UPSTREAMS {
            return invalid(
                "crawl.mcp_upstreams",
                &format!("at most {MAX_MCP_UPSTREAMS} registries are followed"),
            );
        }
        for upstream in &c.mcp_upstreams {
            match url::Url::parse(upstream) {
                Ok(u) if u.scheme() == "https" && u.host_str().is_some() && u.query().is_none() => {
                }
                _ => {
                    return invalid(
                        "crawl.mcp_upstreams",
                        &format!("{upstream:?} is not an https URL without a query"),
                    )
                }
            }
        }
        if c.probe_rate == 0 || c.probe_rate > 100 {
            return invalid("crawl.probe_rate", "must be between 1 and 100 per second");
        }
        if c.probe_timeout < Duration::from_millis(100)
            || c.probe_timeout > Duration::from_secs(300)
        {
            return invalid(
                "crawl.probe_timeout",
                "must be between 100 ms and 5 minutes",
            );
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
        if c.per_host_burst == 0 || c.per_host_burst > 64 {
            return invalid("crawl.per_host_burst", "must be between 1 and 64");
        }
        if c.per_address_burst == 0 || c.per_address_burst > 256 {
            return invalid("crawl.per_address_burst", "must be between 1 and 256");
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
        if self.p2p.witness_interval < Duration::from_millis(100)
            || self.p2p.witness_interval > Duration::from_secs(24 * 3600)
        {
            return invalid("p2p.witness_interval", "must be from 100ms to 1 day");
        }
        if self.p2p.ping_interval < Duration::from_millis(100)
            || self.p2p.ping_interval > Duration::from_secs(3600)
        {
            return invalid("p2p.ping_interval", "must be from 100ms to 1 hour");
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

impl Config {
    /// The invariants of the server loop and the rate limits.
    fn validate_serving(&self) -> Result<(), ConfigError> {
        let invalid = |key: &'static str, message: &str| {
            Err(ConfigError::Invalid {
                key,
                message: message.to_owned(),
            })
        };
        let api = &self.api;
        for (key, value) in [
            ("api.header_read_timeout", api.header_read_timeout),
            ("api.idle_timeout", api.idle_timeout),
            ("api.body_read_timeout", api.body_read_timeout),
        ] {
            if value.is_zero() {
                return invalid(key, "must be above zero");
            }
        }
        if api.max_connections == 0 {
            return invalid("api.max_connections", "must be above zero");
        }
        if api.max_connections_per_ip == 0 || api.max_connections_per_ip > api.max_connections {
            return invalid(
                "api.max_connections_per_ip",
                "must be between 1 and api.max_connections",
            );
        }
        let limits = &api.limits;
        if limits.window < Duration::from_secs(1) || limits.window > Duration::from_secs(86_400) {
            return invalid("api.limits.window", "must be between 1 s and 1 day");
        }
        for (key, budget) in limits.budgets() {
            if budget == 0 {
                return invalid(
                    key,
                    "must be above zero (api.limits.enabled = false lifts the limits)",
                );
            }
        }
        if limits.max_tracked == 0 {
            return invalid("api.limits.max_tracked", "must be above zero");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
