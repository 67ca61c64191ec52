//! The command line: argument definitions and the commands they run.
//! `main.rs` only parses and dispatches here; `cli/crawl.rs` holds
//! `verify` and `crawl`, `cli/import.rs` the bulk import,
//! `cli/publish.rs` the agent-operator tooling,
//! `cli/testbed.rs` the testbed served on its own, `cli/audit.rs` the
//! audit log read from a data directory or a node, `cli/demo.rs` the
//! one-command tour; `cli/status.rs` and `cli/search.rs` ask a running
//! node's API (`cli/http.rs`: the client they share), and `completions`
//! prints a shell's completion script.

#[cfg(feature = "testbed")]
mod agent_host;
mod audit;
mod backup;
mod crawl;
#[cfg(feature = "testbed")]
mod demo;
mod http;
mod import;
mod invoke;
mod keys;
pub mod logging;
mod publish;
mod revoke;
mod search;
mod status;
mod suspend;
#[cfg(feature = "testbed")]
mod testbed;
mod verify_answer;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, CommandFactory as _, Parser, Subcommand};

use crate::config::Config;
use crate::identity;
use crate::node::Node;

/// agentmesh: a federated, peer-to-peer discovery node for AI agents.
#[derive(Debug, Parser)]
#[command(name = "agentmesh", version, about, long_about = None)]
pub struct Cli {
    /// How log lines are written to stderr: `text` for people, `json`
    /// (one object per line, with the span fields) for log collectors.
    #[arg(long, global = true, value_enum, env = "AGENTMESH_LOG_FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (coloured on a terminal).
    Text,
    /// One JSON object per line: time, level, target, fields, the current
    /// span and the spans around it.
    Json,
}

impl Cli {
    /// The log filter when `RUST_LOG` is not set: the demo prints its own
    /// story and logs only warnings; everything else logs at info, without
    /// the DNS server's line per query; neither shows the DNS library's
    /// DNSSEC warnings (`agentmesh_dnssec_library_warnings_total` counts
    /// them).
    pub fn default_log_filter(&self) -> &'static str {
        match self.command {
            #[cfg(feature = "testbed")]
            Command::Demo(_) => "warn,hickory_server=error,hickory_net::dnssec=off",
            _ => "info,hickory_server=warn,hickory_net::dnssec=off",
        }
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a node: the registry API on --listen, data in --data-dir.
    Node(NodeArgs),
    /// A one-command tour of a mesh: a testbed of 300 ADP agents in three
    /// organisations, three nodes each crawling one, a search on node 1
    /// finding what node 3 verified; then node 1's API until Ctrl-C.
    #[cfg(feature = "testbed")]
    Demo(DemoArgs),
    /// Make an Ed25519 key file (PKCS#8 PEM, mode 0600) and print its
    /// fingerprint and public key.
    Keygen(KeygenArgs),
    /// Run the whole ADP chain for one domain and print each step, then
    /// check the verified peers it lists one hop out (peer-verified when
    /// one is key-verified and lists it back); exit 0 at key-verified or
    /// better, 1 below, 2 on a usage error.
    Verify(crawl::VerifyArgs),
    /// Crawl many domains into the data directory, with a summary by trust
    /// level and failure reason.
    Crawl(crawl::CrawlCmdArgs),
    /// Import AIDIP documents, one JSON object per line (`-`: stdin), or
    /// with `--format mcp-registry` MCP Registry servers, into the data
    /// directory as this node's registrations; or restore an export
    /// (`agentmesh export`, recognised by its header line, or
    /// `--format export`) into an empty data directory; each refused line is
    /// reported with its line number (exit 0 when all went in, 3 when some
    /// lines were refused, 1 on an error).
    Import(import::ImportArgs),
    /// Write everything a node holds (its registrations as AIDIP
    /// documents, every signed record as received, suspensions, the
    /// crawl schedule and every other tree) as one export, from a stopped
    /// node's data directory or a running node's API (`--api`);
    /// `agentmesh import` restores it into an empty data directory.
    Export(backup::ExportArgs),
    /// Print the DNS records and write the agent.json that put an agent on
    /// the mesh.
    Publish(publish::PublishArgs),
    /// Serve one agent's agent.json and answer key challenges (what
    /// `publish` prepared).
    #[cfg(feature = "testbed")]
    AgentHost(agent_host::AgentHostArgs),
    /// Serve a generated population of ADP agents (DNS, HTTPS, WSS), some
    /// broken on purpose, until Ctrl-C or SIGTERM: something for nodes to
    /// crawl.
    #[cfg(feature = "testbed")]
    Testbed(testbed::TestbedArgs),
    /// Revoke an agent: a tombstone signed with the agent's own key, sent
    /// to a node (`--node URL`), which stores and publishes it, or printed.
    Revoke(revoke::RevokeArgs),
    /// Suspend an agent on a running node (it stays stored and leaves every
    /// search and resolution), lift a suspension (`--lift`), or list them
    /// (`--list`), through the node's admin API.
    Suspend(suspend::SuspendArgs),
    /// Make, list or revoke the node's API keys (in its data directory;
    /// a running node sees the change within a second).
    Keys(keys::KeysArgs),
    /// Read the audit log: `verify` its hash chain (exit 1 naming the
    /// first broken entry), `tail` its newest entries, `show` one entry
    /// and the record version it names; from a data directory no node
    /// runs on (`--data-dir`) or a running node (`--api URL --token T`).
    Audit(audit::AuditArgs),
    /// Check a signed answer (`proof=true`, docs/answers.md) offline: the
    /// node's signature, the request it answers, every record's signature,
    /// every inclusion proof against the log checkpoint it carries, every
    /// trust level recomputed from its evidence (exit 0 when all holds, 1
    /// naming each failure, 2 on a usage error).
    VerifyAnswer(verify_answer::VerifyAnswerArgs),
    /// Print the node's peer id (its key in the data directory, made if
    /// missing), e.g. to configure other nodes' bootstrap and trusted peers
    /// before it starts.
    PeerId(PeerIdArgs),
    /// Show a running node's state through its API: version, peer id,
    /// connected peers, records by trust level, crawl queue and recrawl
    /// schedule (exit 0; 1 when the node answers an error, 2 when it
    /// cannot be reached within --timeout).
    Status(status::StatusArgs),
    /// Search a running node (`POST /agents/search`): free text and
    /// filters, a table of the results or their JSON (exit 0; 1 when the
    /// node refuses the search, its problems printed; 2 when it cannot be
    /// reached within --timeout).
    Search(search::SearchArgs),
    /// Call an agent through a running node's gateway
    /// (`POST /agents/{id}/invoke`): the input from a JSON file or stdin,
    /// the agent's JSON answer on stdout (exit 0; 1 when the node or the
    /// agent refuses or fails the call, its error printed; 2 when the node
    /// cannot be reached within --timeout).
    Invoke(invoke::InvokeArgs),
    /// Print the shell completion script for bash, zsh, fish, powershell
    /// or elvish (e.g. `agentmesh completions bash >
    /// ~/.local/share/bash-completion/completions/agentmesh`).
    Completions(CompletionsArgs),
    /// Print the OpenAPI 3.1 document of the HTTP API (what a node serves
    /// at `/openapi.json`; `proto/openapi.json` is a copy).
    Openapi,
}

/// Flags of `completions`.
#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Flags of `peer-id`.
#[derive(Debug, Clone, Args)]
pub struct PeerIdArgs {
    /// TOML config file (for its data_dir).
    #[arg(long, env = "AGENTMESH_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Data directory (where node.key is).
    #[arg(long, env = "AGENTMESH_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

/// Flags shared by every command that runs a node.
#[derive(Debug, Clone, Args)]
pub struct NodeArgs {
    /// TOML config file.
    #[arg(long, env = "AGENTMESH_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Data directory (store and node.key).
    #[arg(long, env = "AGENTMESH_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// HTTP API listen address.
    #[arg(long, env = "AGENTMESH_LISTEN", value_name = "IP:PORT")]
    pub listen: Option<SocketAddr>,
    /// libp2p listen multiaddr (repeatable).
    #[arg(long = "p2p-listen", value_name = "MULTIADDR")]
    pub p2p_listen: Vec<String>,
    /// Peer to join through (repeatable).
    #[arg(long, value_name = "MULTIADDR")]
    pub bootstrap: Vec<String>,
    /// How the node's crawler connects (resolvers, trust roots, private
    /// targets).
    #[command(flatten)]
    pub crawl: CrawlArgs,
}

/// Flags of every crawling command (docs/protocol.md#cli).
#[derive(Debug, Clone, Default, Args)]
pub struct CrawlArgs {
    /// DNS server to ask instead of the system's (repeatable).
    #[arg(long = "resolver", value_name = "IP:PORT")]
    pub resolvers: Vec<SocketAddr>,
    /// Extra trust roots for HTTPS and WSS (PEM; repeatable).
    #[arg(long = "ca-file", value_name = "PEM")]
    pub ca_files: Vec<PathBuf>,
    /// Permit loopback and private targets.
    #[arg(long)]
    pub allow_private: bool,
    /// DNSSEC trust anchors beside the root's (DS or DNSKEY records in
    /// zone-file syntax, or IANA's root-anchors.xml; repeatable).
    #[arg(long = "trust-anchor", value_name = "FILE")]
    pub trust_anchors: Vec<PathBuf>,
    /// The port of the well-known documents of the formats beside ADP
    /// (A2A cards, ARD catalogs; 443 unless a test server runs elsewhere).
    #[arg(long, value_name = "PORT")]
    pub https_port: Option<u16>,
    /// A port the crawler may connect to besides 443 (repeatable; config
    /// `crawl.allowed_ports`): a test server's port, say.
    #[arg(long = "allow-port", value_name = "PORT")]
    pub allow_ports: Vec<u16>,
}

impl NodeArgs {
    /// The configuration: file, then environment, then these flags.
    ///
    /// # Errors
    /// When the file or an override is invalid.
    pub fn config(&self) -> anyhow::Result<Config> {
        let mut c = Config::load(self.config.as_deref(), std::env::vars())?;
        if let Some(d) = &self.data_dir {
            c.data_dir = d.clone();
        }
        if let Some(l) = self.listen {
            c.api.listen = l;
        }
        if !self.p2p_listen.is_empty() {
            c.p2p.listen = self.p2p_listen.clone();
        }
        c.p2p.bootstrap.extend(self.bootstrap.iter().cloned());
        self.crawl.apply(&mut c);
        c.validate()?;
        Ok(c)
    }
}

impl CrawlArgs {
    pub(crate) fn apply(&self, c: &mut Config) {
        if !self.resolvers.is_empty() {
            c.crawl.resolvers = self.resolvers.clone();
        }
        c.crawl.ca_files.extend(self.ca_files.iter().cloned());
        c.crawl.allow_private_addresses |= self.allow_private;
        c.crawl
            .dnssec_trust_anchors
            .extend(self.trust_anchors.iter().cloned());
        if let Some(port) = self.https_port {
            c.crawl.https_port = port;
        }
        for port in &self.allow_ports {
            if !c.crawl.allowed_ports.contains(port) {
                c.crawl.allowed_ports.push(*port);
            }
        }
    }
}

/// Flags of `demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Keep the demo's data here instead of a temporary directory.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// HTTP API listen address.
    #[arg(long, default_value = "127.0.0.1:7700", value_name = "IP:PORT")]
    pub listen: SocketAddr,
    /// Crawl, search and print, then exit instead of serving.
    #[arg(long)]
    pub no_serve: bool,
}

/// Flags of `keygen`.
#[derive(Debug, Clone, Args)]
pub struct KeygenArgs {
    /// Where to write the key; never overwritten.
    #[arg(long, short, default_value = "agent.key", value_name = "FILE")]
    pub out: PathBuf,
    /// Print `{"key_file","fingerprint","public_key"}` instead of the
    /// three lines.
    #[arg(long)]
    pub json: bool,
}

/// Runs the parsed command.
///
/// # Errors
/// Whatever the command failed with, with context.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let done = |r: anyhow::Result<()>| r.map(|()| ExitCode::SUCCESS);
    match cli.command {
        Command::Node(args) => done(run_node(args.config()?).await),
        #[cfg(feature = "testbed")]
        Command::Demo(args) => done(demo::run(args).await),
        Command::Keygen(args) => done(keygen(&args)),
        Command::Verify(args) => crawl::verify(args).await,
        Command::Crawl(args) => crawl::crawl(args).await,
        Command::Import(args) => import::run(args).await,
        Command::Export(args) => backup::export(args).await,
        Command::Publish(args) => done(publish::run(&args)),
        #[cfg(feature = "testbed")]
        Command::AgentHost(args) => done(agent_host::run(args).await),
        #[cfg(feature = "testbed")]
        Command::Testbed(args) => testbed::run(args).await,
        Command::Suspend(args) => suspend::run(args).await,
        Command::Revoke(args) => revoke::run(args).await,
        Command::Audit(args) => audit::run(args).await,
        Command::VerifyAnswer(args) => Ok(verify_answer::run(&args)),
        Command::PeerId(args) => done(peer_id(&args)),
        Command::Keys(args) => keys::run(args),
        Command::Status(args) => status::run(args).await,
        Command::Search(args) => search::run(args).await,
        Command::Invoke(args) => invoke::run(args).await,
        Command::Completions(args) => done(completions(&args)),
        Command::Openapi => done(
            std::io::Write::write_all(
                &mut std::io::stdout().lock(),
                crate::api::openapi_json().as_bytes(),
            )
            .context("writing the OpenAPI document to stdout"),
        ),
    }
}

/// Opens a node's data directory for a one-shot command (`crawl`,
/// `import`): creates it when missing, loads (or creates) the node key,
/// and opens the store on a blocking thread. Fails when a node runs on it.
async fn open_data_dir(
    config: &Config,
) -> anyhow::Result<(crate::store::Store, ed25519_dalek::SigningKey)> {
    crate::node::create_data_dir(&config.data_dir)?;
    let key = identity::load_or_create(&config.node_key_path())?;
    // What it signs goes into the node's transparency log, as a node's
    // own writes do.
    let options = crate::store::StoreOptions {
        log_signer: Some(key.verifying_key().to_bytes()),
        ..crate::store::StoreOptions::of(&config.store)
    };
    let path = config.store_path();
    let store =
        tokio::task::spawn_blocking(move || crate::store::Store::open_with(&path, &options))
            .await
            .context("the store-open task panicked")?
            .with_context(|| {
                format!(
                    "opening the store in {} (is a node running on it?)",
                    config.data_dir.display()
                )
            })?;
    Ok((store, key))
}

/// Writes the completion script of `args.shell` to stdout.
fn completions(args: &CompletionsArgs) -> anyhow::Result<()> {
    // Generated whole first: clap_complete panics on a failed write (a
    // closed pipe), this reports it.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "agentmesh", &mut script);
    std::io::Write::write_all(&mut std::io::stdout().lock(), &script)
        .context("writing the completion script to stdout")
}

fn peer_id(args: &PeerIdArgs) -> anyhow::Result<()> {
    let mut config = Config::load(args.config.as_deref(), std::env::vars())?;
    if let Some(d) = &args.data_dir {
        config.data_dir = d.clone();
    }
    crate::node::create_data_dir(&config.data_dir)?;
    let key = identity::load_or_create(&config.node_key_path())?;
    println!("{}", crate::identity::peer_id_of(&key));
    Ok(())
}

async fn run_node(config: Config) -> anyhow::Result<()> {
    let signal = shutdown_signal();
    let scheme = if config.api.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let node = Node::spawn(config).await.context("starting the node")?;
    println!(
        "agentmesh node {} serving {scheme}://{}",
        node.peer_id(),
        node.api_addr()
    );
    signal.await;
    node.shutdown().await.context("stopping the node")
}

fn keygen(args: &KeygenArgs) -> anyhow::Result<()> {
    let key = identity::generate();
    identity::write_key_file(&args.out, &key)?;
    let public = key.verifying_key();
    let (fingerprint, encoded) = (
        identity::fingerprint(&public),
        identity::encode_public_key(&public),
    );
    if args.json {
        let out = serde_json::json!({
            "key_file": args.out,
            "fingerprint": fingerprint,
            "public_key": encoded,
        });
        println!("{out}");
        return Ok(());
    }
    println!("key file:    {}", args.out.display());
    println!("fingerprint: {fingerprint}");
    println!("public key:  {encoded}");
    Ok(())
}

/// Installs SIGINT and SIGTERM handlers now; the future resolves when one
/// arrives.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    // The handlers are installed here, before the caller announces that
    // it serves: a signal that arrives right after the announcement must
    // find them in place (a default SIGINT would kill the process unflushed).
    #[cfg(unix)]
    let streams = {
        use tokio::signal::unix::{signal, SignalKind};
        (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        )
    };
    async move {
        #[cfg(unix)]
        match streams {
            (Ok(mut int), Ok(mut term)) => {
                tokio::select! {
                    _ = int.recv() => {},
                    _ = term.recv() => {},
                }
            }
            (int, term) => {
                let e = int
                    .err()
                    .or(term.err())
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                tracing::error!(error = %e, "cannot listen for SIGINT/SIGTERM; waiting for Ctrl-C");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutdown requested");
    }
}
