//! The processes under test: `agentmesh testbed` and `agentmesh node`,
//! each a child of this bench with its output in files of the work
//! directory, killed (SIGKILL) and reaped on drop. Every wait polls a
//! condition with a deadline and says what it waited for.

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use serde_json::Value;

/// How often a wait polls its condition.
const POLL: Duration = Duration::from_millis(50);

/// A child process, killed and reaped on drop.
pub(crate) struct Proc {
    name: String,
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Proc {
    /// Starts `bin args..` with stdout and stderr in `dir/<name>.out|.err`,
    /// no `AGENTMESH_*` variable inherited, and `RUST_LOG` set to `log`.
    fn spawn(
        bin: &Path,
        args: &[String],
        dir: &Path,
        name: &str,
        log: &str,
    ) -> anyhow::Result<Self> {
        let stdout = dir.join(format!("{name}.out"));
        let stderr = dir.join(format!("{name}.err"));
        let mut cmd = Command::new(bin);
        for (var, _) in std::env::vars_os() {
            if var.to_string_lossy().starts_with("AGENTMESH_") {
                cmd.env_remove(var);
            }
        }
        let child = cmd
            .args(args)
            .env("RUST_LOG", log)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(File::create(&stdout)?)
            .stderr(File::create(&stderr)?)
            .spawn()
            .with_context(|| format!("cannot start {} ({name})", bin.display()))?;
        Ok(Self {
            name: name.to_owned(),
            child,
            stdout,
            stderr,
        })
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU time (user + system) the process has used so far, seconds.
    pub(crate) fn cpu_secs(&self) -> f64 {
        crate::machine::cpu_secs_of(&format!("/proc/{}/stat", self.pid()))
    }

    /// Everything printed on stdout so far.
    fn stdout_text(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// The last `n` lines of stderr, for error messages.
    pub(crate) fn stderr_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Fails if the process has exited.
    fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "{} exited with {status}\n--- stderr (tail)\n{}",
                self.name,
                self.stderr_tail(30)
            );
        }
        Ok(())
    }

    /// Polls stdout until `find` returns something, at most `deadline`.
    async fn wait_stdout<T>(
        &mut self,
        deadline: Duration,
        what: &str,
        find: impl Fn(&str) -> Option<T>,
    ) -> anyhow::Result<T> {
        let until = Instant::now() + deadline;
        loop {
            if let Some(found) = find(&self.stdout_text()) {
                return Ok(found);
            }
            self.check_alive()?;
            if Instant::now() >= until {
                bail!(
                    "timed out after {deadline:?} waiting for {} to print {what}\n--- stderr (tail)\n{}",
                    self.name,
                    self.stderr_tail(30)
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running `agentmesh testbed` and what the nodes need of it.
pub(crate) struct Testbed {
    pub(crate) proc: Proc,
    /// Its DNS server (UDP and TCP).
    pub(crate) dns: SocketAddr,
    /// Its test CA, PEM.
    pub(crate) ca_file: PathBuf,
    /// Its HTTPS port, which the crawling nodes must be allowed.
    pub(crate) https_port: u16,
    /// Every domain it serves, org by org.
    pub(crate) domains: Vec<String>,
}

impl Testbed {
    /// Starts a testbed of `agents` healthy agents (none broken) in
    /// `orgs` organisations, writing its files under `dir/testbed`.
    pub(crate) async fn start(
        bin: &Path,
        dir: &Path,
        agents: usize,
        orgs: usize,
    ) -> anyhow::Result<Self> {
        let out = dir.join("testbed");
        let args: Vec<String> = [
            "testbed",
            "--agents",
            &agents.to_string(),
            "--orgs",
            &orgs.to_string(),
            "--broken",
            "none",
            "--out",
            &out.display().to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut proc = Proc::spawn(bin, &args, dir, "testbed", "warn")?;
        // The summary ends with this line, after the files are written.
        let dns = proc
            .wait_stdout(Duration::from_secs(300), "its summary", |text| {
                if !text.contains("serving until") {
                    return None;
                }
                text.lines()
                    .find_map(|l| l.strip_prefix("dns:"))
                    .and_then(|l| l.split_whitespace().next())
                    .and_then(|a| a.parse::<SocketAddr>().ok())
            })
            .await?;
        let https_port = proc
            .wait_stdout(Duration::from_secs(10), "its https line", |text| {
                text.lines()
                    .find_map(|l| l.strip_prefix("https:"))
                    .and_then(|l| l.split_whitespace().next())
                    .and_then(|a| a.parse::<SocketAddr>().ok())
                    .map(|a| a.port())
            })
            .await?;
        if !out.join("ready").exists() {
            bail!(
                "the testbed printed its summary but wrote no {}",
                out.join("ready").display()
            );
        }
        let mut domains = Vec::new();
        for org in 1..=orgs {
            let path = out.join(format!("org{org}.domains"));
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            domains.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_owned),
            );
        }
        if domains.len() != agents {
            bail!("the testbed lists {} domains, not {agents}", domains.len());
        }
        Ok(Self {
            proc,
            dns,
            ca_file: out.join("ca.pem"),
            https_port,
            domains,
        })
    }
}

/// A running `agentmesh node` on loopback.
pub(crate) struct Node {
    pub(crate) proc: Proc,
    pub(crate) name: String,
    pub(crate) url: String,
    pub(crate) peer_id: String,
    // Dropped after the process (fields drop in order): the data
    // directory is removed once the node is dead.
    _dir: tempfile::TempDir,
}

/// What a node is started with beyond the defaults.
pub(crate) struct NodeSetup<'a> {
    pub(crate) name: &'a str,
    /// Multiaddrs (with `/p2p/<peer id>`) to bootstrap to.
    pub(crate) bootstrap: Vec<String>,
    /// The testbed to crawl, if this node crawls.
    pub(crate) crawl: Option<&'a Testbed>,
}

/// A TOML string (basic string, escaped).
fn toml_str(s: &str) -> String {
    format!("{s:?}")
}

impl Node {
    /// Writes the node's config file and starts it; waits for its
    /// "serving" line.
    pub(crate) async fn start(
        bin: &Path,
        dir: &Path,
        setup: NodeSetup<'_>,
    ) -> anyhow::Result<Self> {
        let data = tempfile::Builder::new()
            .prefix(&format!("{}-", setup.name))
            .tempdir_in(dir)?;
        let list = |v: &[String]| v.iter().map(|s| toml_str(s)).collect::<Vec<_>>().join(", ");
        let mut config = format!(
            "data_dir = {}\n\n[api]\nlisten = \"127.0.0.1:0\"\n\n[p2p]\nlisten = [\"/ip4/127.0.0.1/tcp/0\"]\nbootstrap = [{}]\nallow_private_addresses = true\n",
            toml_str(&data.path().join("data").display().to_string()),
            list(&setup.bootstrap),
        );
        if let Some(tb) = setup.crawl {
            config.push_str(&format!(
                "\n[crawl]\nresolvers = [{}]\nca_files = [{}]\nallow_private_addresses = true\nallowed_ports = [{}]\n",
                toml_str(&tb.dns.to_string()),
                toml_str(&tb.ca_file.display().to_string()),
                tb.https_port,
            ));
        }
        let config_path = data.path().join("agentmesh.toml");
        std::fs::write(&config_path, config)?;
        let args = vec![
            "node".to_owned(),
            "--config".to_owned(),
            config_path.display().to_string(),
        ];
        // Warnings, and the crawl queue's line per finished job.
        let log = "warn,agentmesh::crawl::queue=info";
        let mut proc = Proc::spawn(bin, &args, dir, setup.name, log)?;
        let (peer_id, url) = proc
            .wait_stdout(
                Duration::from_secs(60),
                "'agentmesh node <peer id> serving http://<addr>'",
                |text| {
                    text.lines().find_map(|l| {
                        let rest = l.strip_prefix("agentmesh node ")?;
                        let (peer, addr) = rest.split_once(" serving ")?;
                        Some((peer.to_owned(), addr.trim().to_owned()))
                    })
                },
            )
            .await?;
        Ok(Self {
            proc,
            name: setup.name.to_owned(),
            url,
            peer_id,
            _dir: data,
        })
    }

    /// `GET /health`.
    pub(crate) async fn health(&self, http: &reqwest::Client) -> anyhow::Result<Value> {
        let r = http
            .get(format!("{}/health", self.url))
            .timeout(Duration::from_secs(10))
            .send()
            .await?
            .error_for_status()?;
        Ok(r.json().await?)
    }

    /// The node's first libp2p listen address with `/p2p/<peer id>`, from
    /// `GET /health`.
    pub(crate) async fn p2p_addr(&self, http: &reqwest::Client) -> anyhow::Result<String> {
        let health = self.health(http).await?;
        let addr = health["listen_addrs"]
            .as_array()
            .and_then(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .find(|a| a.contains("/tcp/"))
            })
            .ok_or_else(|| anyhow!("{} reports no TCP listen address: {health}", self.name))?;
        Ok(if addr.contains("/p2p/") {
            addr.to_owned()
        } else {
            format!("{addr}/p2p/{}", self.peer_id)
        })
    }

    /// Polls `GET /health` until `check` holds on it, at most `deadline`.
    pub(crate) async fn wait_health(
        &mut self,
        http: &reqwest::Client,
        deadline: Duration,
        what: &str,
        check: impl Fn(&Value) -> bool,
    ) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let mut last = Value::Null;
        loop {
            if let Ok(h) = self.health(http).await {
                if check(&h) {
                    return Ok(started.elapsed());
                }
                last = h;
            }
            self.proc.check_alive()?;
            if started.elapsed() >= deadline {
                bail!(
                    "timed out after {deadline:?} waiting for {} to have {what}; last /health: {last}",
                    self.name
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Waits until every process in `procs` uses under `threshold` of a core
/// over a 1 s interval, at most `deadline`; answers how long it took, or
/// `None` at the deadline (the caller goes on and says so).
pub(crate) async fn wait_quiet(
    procs: &[&Proc],
    threshold: f64,
    deadline: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    let mut before: Vec<f64> = procs.iter().map(|p| p.cpu_secs()).collect();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now: Vec<f64> = procs.iter().map(|p| p.cpu_secs()).collect();
        if now.iter().zip(&before).all(|(n, b)| n - b < threshold) {
            return Some(started.elapsed());
        }
        if started.elapsed() >= deadline {
            return None;
        }
        before = now;
    }
}
