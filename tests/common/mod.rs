//! The integration-test harness: runs the real `agentmesh` binary as a child
//! process on loopback, as users run it.
//!
//! - [`TestNode`] starts `agentmesh node` on a fresh data directory with the
//!   API on `127.0.0.1:0`, learns its port from the "serving" line it
//!   prints, and kills it on drop (printing its stderr when the test is
//!   failing). [`TestNode::restart`] stops it with SIGTERM and starts it
//!   again on the same data directory; [`TestNode::crash_and_restart`] does
//!   the same with SIGKILL.
//! - [`ChildGuard`] owns every process a test spawns and kills it on drop,
//!   so none outlives its test, even a failing one.
//! - [`run`] runs any command to completion within a deadline, capturing
//!   its output.
//! - [`Api`] is a small HTTP client for the node's API whose every request
//!   has a deadline, answering [`Reply`]s with status, headers and JSON body;
//!   [`Reply::expect_field_problem`] checks a 400 that names a field.
//!
//! Every wait has a deadline and says what it waited for when it runs out.

// Each test crate uses a different part of the harness.
#![allow(dead_code)]
// `pub` marks the harness's API to the test crates that include it.
#![allow(unreachable_pub)]

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use agentmesh::testbed::{Population, PopulationConfig, Testbed, TestbedOptions};
use serde_json::{json, Value};

pub mod netns;

/// How long any single wait may take: generous, because the tests share
/// two cores with each other; a wait ends as soon as its condition holds.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Waits until `check` holds, polling every 50 ms, for at most
/// [`DEADLINE`]; panics naming `what` when it does not.
pub async fn wait_until<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    wait_until_within(DEADLINE, what, check).await;
}

/// As [`wait_until`], with its own deadline; answers how long it waited.
pub async fn wait_until_within<F, Fut>(deadline: Duration, what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = tokio::time::Instant::now();
    while !check().await {
        assert!(
            start.elapsed() < deadline,
            "timed out after {deadline:?} waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    start.elapsed()
}

/// Where `name` is on the `PATH` (`command -v`), if it is.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !path.is_empty()).then(|| PathBuf::from(path))
}

/// What a test that needs an outside tool (BIND, nginx, Chromium,
/// schemathesis) gets from `found`, or a failure that says how to install
/// it. Those tests are `#[ignore = "needs …"]`: a plain `cargo test` lists
/// them as ignored instead of passing them unseen, and `.ci/run`, which
/// installs the tools, runs them with `-- --ignored`.
pub fn needs<T>(found: Option<T>, tool: &str, install: &str) -> T {
    found.unwrap_or_else(|| {
        panic!("this test needs {tool}, which is not installed here ({install})")
    })
}

/// The bound on a whole command that does real work (a demo, a crawl of
/// a testbed): long enough for a loaded 2-core CI machine running other
/// tests beside it, short enough that a hang still ends the test.
pub const LONG_DEADLINE: Duration = Duration::from_secs(180);

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_agentmesh")
}

/// The repository root (where `README.md` and `proto/` live).
pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A command for the binary with an environment that does not leak the
/// caller's `AGENTMESH_*` settings into the test, and plain (uncoloured)
/// logs.
pub fn agentmesh() -> Command {
    let mut cmd = Command::new(bin());
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("AGENTMESH_") {
            cmd.env_remove(name);
        }
    }
    cmd.env("NO_COLOR", "1").stdin(Stdio::null());
    cmd
}

/// Text a reader thread collects from a child's output stream.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<String>>);

impl Captured {
    /// Everything collected so far.
    pub fn text(&self) -> String {
        self.0
            .lock()
            .expect("the capture lock is never held across a panic")
            .clone()
    }

    fn push_line(&self, line: &str) {
        let mut s = self
            .0
            .lock()
            .expect("the capture lock is never held across a panic");
        s.push_str(line);
        s.push('\n');
    }
}

/// Reads `stream` line by line into `into` on a thread, calling `on_line`
/// for each line; the thread ends at end of stream.
pub fn capture(
    stream: impl Read + Send + 'static,
    into: Captured,
    mut on_line: impl FnMut(&str) + Send + 'static,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf);
                    let line = line.trim_end_matches(['\n', '\r']);
                    into.push_line(line);
                    on_line(line);
                }
            }
        }
    })
}

/// A spawned process, killed (SIGKILL) and reaped on drop: a test that
/// fails, or forgets to stop what it started, leaves no process behind.
pub struct ChildGuard(Child);

impl ChildGuard {
    /// Spawns `cmd`; `what` names it in failure messages.
    #[track_caller]
    pub fn spawn(cmd: &mut Command, what: &str) -> Self {
        match cmd.spawn() {
            Ok(child) => Self(child),
            Err(e) => panic!("cannot start {what}: {e}"),
        }
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.0.id()
    }

    /// Takes its stdout, which the command must have piped.
    #[track_caller]
    pub fn take_stdout(&mut self) -> ChildStdout {
        self.0
            .stdout
            .take()
            .expect("stdout is piped and taken once")
    }

    /// Takes its stderr, which the command must have piped.
    #[track_caller]
    pub fn take_stderr(&mut self) -> ChildStderr {
        self.0
            .stderr
            .take()
            .expect("stderr is piped and taken once")
    }

    /// Sends `signal` (a `kill -s` name such as `TERM`).
    #[track_caller]
    pub fn signal(&self, signal: &str) {
        let id = self.id().to_string();
        let status = match Command::new("kill").args(["-s", signal, &id]).status() {
            Ok(status) => status,
            Err(e) => panic!("cannot run `kill -s {signal}`: {e}"),
        };
        assert!(status.success(), "`kill -s {signal} {id}` failed: {status}");
    }

    /// Waits at most `deadline` for it to exit; `None` if it is still
    /// running then.
    #[track_caller]
    pub fn wait_timeout(&mut self, deadline: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + deadline;
        loop {
            match self.0.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() >= until => return None,
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => panic!("cannot wait for process {}: {e}", self.id()),
            }
        }
    }

    /// Waits at most `deadline` for it to exit; on timeout kills it and
    /// panics naming `what` it waited for.
    #[track_caller]
    pub fn wait_for_exit(&mut self, deadline: Duration, what: &str) -> ExitStatus {
        match self.wait_timeout(deadline) {
            Some(status) => status,
            None => {
                self.kill();
                panic!("timed out after {deadline:?} waiting for {what}");
            }
        }
    }

    /// Kills it (SIGKILL) and reaps it; nothing happens if it has exited
    /// and been waited for already.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A finished command.
#[derive(Debug)]
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// Everything it printed on stdout.
    pub stdout: String,
    /// Everything it printed on stderr.
    pub stderr: String,
}

impl Finished {
    /// Panics with the output unless the command exited with status 0.
    pub fn assert_success(&self, what: &str) -> &Self {
        assert!(
            self.status.success(),
            "{what} failed with {}\n--- stdout\n{}--- stderr\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Panics with the output unless the command failed (status not 0).
    pub fn assert_failure(&self, what: &str) -> &Self {
        assert!(
            !self.status.success(),
            "{what} should have failed but exited 0\n--- stdout\n{}--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

/// Runs `cmd` to completion, at most `deadline`, capturing its output;
/// `what` names it in failure messages.
pub fn run(cmd: &mut Command, deadline: Duration, what: &str) -> Finished {
    let mut child = ChildGuard::spawn(cmd.stdout(Stdio::piped()).stderr(Stdio::piped()), what);
    let (out, err) = (Captured::default(), Captured::default());
    let readers = [
        capture(child.take_stdout(), out.clone(), |_| {}),
        capture(child.take_stderr(), err.clone(), |_| {}),
    ];
    let Some(status) = child.wait_timeout(deadline) else {
        child.kill();
        panic!(
            "timed out after {deadline:?} waiting for {what} to exit\n--- stdout\n{}--- stderr\n{}",
            out.text(),
            err.text()
        );
    };
    // The child has exited, so its pipes close unless it left a grandchild
    // holding them; the readers end at once in every case this crate has.
    for r in readers {
        let _ = r.join();
    }
    Finished {
        status,
        stdout: out.text(),
        stderr: err.text(),
    }
}

/// A running `agentmesh node` on a loopback port with its own data
/// directory. Killed on drop (its [`ChildGuard`]).
pub struct TestNode {
    child: Option<ChildGuard>,
    readers: Vec<JoinHandle<()>>,
    data_dir: tempfile::TempDir,
    env: Vec<(String, String)>,
    args: Vec<String>,
    listen: String,
    p2p_listen: String,
    netns: Option<netns::Host>,
    addr: SocketAddr,
    peer_id: String,
    stdout: Captured,
    stderr: Captured,
}

/// What the node prints once its API is listening:
/// `agentmesh node <peer id> serving http://<addr>` (`https://` with
/// `[api.tls]`).
fn parse_serving_line(line: &str) -> Option<(String, SocketAddr)> {
    let rest = line.strip_prefix("agentmesh node ")?;
    let (peer_id, url) = rest
        .split_once(" serving http://")
        .or_else(|| rest.split_once(" serving https://"))?;
    Some((peer_id.to_owned(), url.trim().parse().ok()?))
}

/// Options for [`TestNode`]: extra environment, extra flags, and a data
/// directory prepared by the test.
#[derive(Default)]
pub struct NodeBuilder {
    env: Vec<(String, String)>,
    args: Vec<String>,
    data_dir: Option<tempfile::TempDir>,
    listen: Option<String>,
    netns: Option<netns::Host>,
}

impl NodeBuilder {
    /// Sets an environment variable for the node.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// A node that crawls `testbed`: its DNS server as resolver, its CA
    /// (`ca`, written by [`testbed_with_ca`]) trusted, loopback and its
    /// HTTPS port allowed, and no peers followed beyond the domains asked
    /// for.
    pub fn crawling(self, testbed: &Testbed, ca: &Path) -> Self {
        let (resolver, ca) = (testbed.dns_addr().to_string(), ca.to_string_lossy());
        let port = testbed.https_port().to_string();
        self.args(&["--resolver", &resolver, "--ca-file", &ca, "--allow-private"])
            .args(&["--allow-port", &port])
            .env("AGENTMESH_CRAWL__FOLLOW_PEERS", "false")
    }

    /// A node whose gateway and probe may reach agents on loopback at
    /// `ports`, their TLS certificates signed by the CA in `ca_file`
    /// (the crawler's rules, which both follow, opened that far).
    pub fn calling(self, ports: &[u16], ca_file: &Path) -> Self {
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        let ca = ca_file.to_string_lossy().into_owned();
        self.env("AGENTMESH_CRAWL__ALLOW_PRIVATE_ADDRESSES", "true")
            .env(
                "AGENTMESH_CRAWL__ALLOWED_PORTS",
                &format!("[{}]", ports.join(",")),
            )
            .env("AGENTMESH_CRAWL__CA_FILES", &format!("[\"{ca}\"]"))
    }

    /// Adds command-line arguments after the harness's own
    /// (`node --data-dir <dir> --listen 127.0.0.1:0 --p2p-listen ...`).
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// Listens on `addr` instead of `127.0.0.1:0`.
    pub fn listen(mut self, addr: &str) -> Self {
        self.listen = Some(addr.to_owned());
        self
    }

    /// Runs the node in `host`'s network namespace ([`netns::Network`]),
    /// its API and mesh listening on the host's address.
    pub fn in_netns(mut self, host: &netns::Host) -> Self {
        self.listen = Some(format!("{}:0", host.ip));
        self.netns = Some(host.clone());
        self
    }

    /// Uses `dir` (already populated, e.g. by `demo --data-dir`) as the
    /// data directory.
    pub fn data_dir(mut self, dir: tempfile::TempDir) -> Self {
        self.data_dir = Some(dir);
        self
    }

    /// Starts the node and waits until it serves.
    pub fn start(self) -> TestNode {
        let data_dir = self.data_dir.unwrap_or_else(|| {
            tempfile::Builder::new()
                .prefix("agentmesh-test-")
                .tempdir()
                .expect("a temporary data directory can be created")
        });
        let mut node = TestNode {
            child: None,
            readers: Vec::new(),
            data_dir,
            env: self.env,
            args: self.args,
            listen: self.listen.unwrap_or_else(|| "127.0.0.1:0".into()),
            p2p_listen: format!(
                "/ip4/{}/tcp/0",
                self.netns
                    .as_ref()
                    .map_or(std::net::Ipv4Addr::LOCALHOST, |h| h.ip)
            ),
            netns: self.netns,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            peer_id: String::new(),
            stdout: Captured::default(),
            stderr: Captured::default(),
        };
        node.spawn();
        node
    }
}

impl TestNode {
    /// Starts a node with the default configuration.
    pub fn start() -> Self {
        Self::builder().start()
    }

    /// Starts a node with extra environment variables (e.g.
    /// `AGENTMESH_API__ADMIN_TOKEN`).
    pub fn start_with_env(env: &[(&str, &str)]) -> Self {
        env.iter()
            .fold(Self::builder(), |b, (k, v)| b.env(k, v))
            .start()
    }

    /// Options for a node with more than the defaults.
    pub fn builder() -> NodeBuilder {
        NodeBuilder::default()
    }

    fn spawn(&mut self) {
        let mut cmd = agentmesh();
        cmd.arg("node")
            .arg("--data-dir")
            .arg(self.data_dir.path())
            .args(["--listen", &self.listen])
            // Keep parallel tests off the default p2p port 7701.
            .args(["--p2p-listen", &self.p2p_listen])
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(host) = &self.netns {
            netns::enter(&mut cmd, host);
        }
        let mut child = ChildGuard::spawn(&mut cmd, bin());
        let (tx, rx) = mpsc::channel();
        let mut tx = Some(tx);
        self.readers.push(capture(
            child.take_stdout(),
            self.stdout.clone(),
            move |line| {
                if let Some(found) = parse_serving_line(line) {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(found);
                    }
                }
            },
        ));
        let stderr_reader = capture(child.take_stderr(), self.stderr.clone(), |_| {});
        match rx.recv_timeout(DEADLINE) {
            Ok((peer_id, addr)) => {
                self.readers.push(stderr_reader);
                self.peer_id = peer_id;
                self.addr = addr;
                self.child = Some(child);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                child.kill();
                panic!(
                    "timed out after {DEADLINE:?} waiting for the node to print \
                     'agentmesh node <peer id> serving http://<addr>'\n--- stdout\n{}--- stderr\n{}",
                    self.stdout.text(),
                    self.stderr.text()
                );
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // stdout closed before the line: the node is exiting.
                let status = child.wait_for_exit(DEADLINE, "the failed node to exit");
                let _ = stderr_reader.join();
                panic!(
                    "the node exited with {status} before serving\n--- stdout\n{}--- stderr\n{}",
                    self.stdout.text(),
                    self.stderr.text()
                );
            }
        }
    }

    /// The API's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The node's peer id, as printed on its serving line.
    pub fn peer_id(&self) -> &str {
        &self.peer_id
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        self.data_dir.path()
    }

    /// Everything the node (in all its runs) printed on stderr.
    pub fn stderr(&self) -> String {
        self.stderr.text()
    }

    /// A client for this node's API.
    pub fn api(&self) -> Api {
        Api::new(self.base_url())
    }

    /// Stops the node gracefully (SIGTERM), waits for it to exit and
    /// asserts it exited with status 0.
    pub fn stop(&mut self) {
        self.stop_with("TERM");
    }

    /// Sends `sig` (`TERM`, `INT`), waits for the node to exit and asserts
    /// it exited with status 0.
    pub fn stop_with(&mut self, sig: &str) {
        let mut child = self.child.take().expect("the node is running");
        child.signal(sig);
        let status = child.wait_for_exit(DEADLINE, &format!("the node to exit after SIG{sig}"));
        self.join_readers();
        assert!(
            status.success(),
            "the node exited with {status} after SIG{sig}\n--- stderr\n{}",
            self.stderr.text()
        );
    }

    /// Starts the node again on the same data directory after
    /// [`TestNode::stop_with`] or [`TestNode::kill`].
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "the node is still running");
        self.stderr.push_line("--- harness: start again ---");
        self.spawn();
    }

    /// Kills the node (SIGKILL: no chance to flush) and waits for it.
    pub fn kill(&mut self) {
        let mut child = self.child.take().expect("the node is running");
        child.signal("KILL");
        child.wait_for_exit(DEADLINE, "the node to die after SIGKILL");
        self.join_readers();
    }

    /// Stops the node with SIGTERM and starts it again on the same data
    /// directory (on a new port: use [`TestNode::api`] again).
    pub fn restart(&mut self) {
        self.stop();
        self.stderr
            .push_line("--- harness: restart after SIGTERM ---");
        self.spawn();
    }

    /// Stops the node with SIGTERM and starts it again on the same data
    /// directory with `args` added to its command line (a `--bootstrap`
    /// it did not have).
    pub fn restart_with_args(&mut self, args: &[&str]) {
        self.stop();
        self.args.extend(args.iter().map(|a| a.to_string()));
        self.stderr
            .push_line("--- harness: restart with more arguments ---");
        self.spawn();
    }

    /// Kills the node with SIGKILL and starts it again on the same data
    /// directory (on a new port: use [`TestNode::api`] again).
    pub fn crash_and_restart(&mut self) {
        self.kill();
        self.stderr
            .push_line("--- harness: restart after SIGKILL ---");
        self.spawn();
    }

    fn join_readers(&mut self) {
        // The child has exited, so its pipes are closed and the readers end.
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
    }
}

impl Drop for TestNode {
    fn drop(&mut self) {
        // Killed before its stderr is printed.
        drop(self.child.take());
        if std::thread::panicking() {
            eprintln!(
                "--- node {} (data {}) stderr\n{}",
                self.addr,
                self.data_dir.path().display(),
                self.stderr.text()
            );
        }
    }
}

/// A reply from the API.
#[derive(Debug)]
pub struct Reply {
    /// The request, for failure messages.
    pub request: String,
    /// The status code.
    pub status: u16,
    /// The response headers.
    pub headers: reqwest::header::HeaderMap,
    /// The body as text.
    pub text: String,
    /// The body as JSON (`Null` when empty or not JSON).
    pub body: Value,
}

impl Reply {
    /// Asserts the status and answers the JSON body.
    #[track_caller]
    pub fn expect(&self, status: u16) -> &Value {
        assert_eq!(
            self.status, status,
            "{}: expected status {status}, got {} with body {}",
            self.request, self.status, self.text
        );
        &self.body
    }

    /// Asserts the status and that the body is the draft's error object
    /// with `code` and a non-empty message; answers the error object.
    #[track_caller]
    pub fn expect_error(&self, status: u16, code: &str) -> &Value {
        self.expect(status);
        let error = self
            .body
            .get("error")
            .unwrap_or_else(|| panic!("{}: no error object in {}", self.request, self.text));
        assert_eq!(
            error["code"], code,
            "{}: wrong error code in {}",
            self.request, self.text
        );
        assert!(
            error["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{}: the error has no message: {}",
            self.request,
            self.text
        );
        error
    }

    /// Asserts a 400 `InvalidInput` error object whose `details` is a
    /// non-empty array of problems, each naming its `field` (a JSON
    /// pointer) with a non-empty `message`; answers the problems.
    #[track_caller]
    pub fn expect_problems(&self) -> &[Value] {
        let error = self.expect_error(400, "InvalidInput");
        // `let else`, not a closure, so a failure points at the caller.
        let Some(problems) = error["details"].as_array().filter(|d| !d.is_empty()) else {
            panic!("{}: no details in {}", self.request, self.text);
        };
        for p in problems {
            assert!(
                p["field"].is_string() && p["message"].as_str().is_some_and(|m| !m.is_empty()),
                "{}: a problem without a field or a message: {p}",
                self.request
            );
        }
        problems
    }

    /// Asserts what [`Reply::expect_problems`] does, and that a problem is
    /// at `field` (a JSON pointer such as `/id`); answers that problem.
    #[track_caller]
    pub fn expect_field_problem(&self, field: &str) -> &Value {
        let problem = self.expect_problems().iter().find(|p| p["field"] == field);
        let Some(problem) = problem else {
            panic!(
                "{}: expected a problem at {field:?}, got {}",
                self.request, self.text
            );
        };
        problem
    }

    /// A response header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The ids of a JSON array of summaries, in order.
    #[track_caller]
    pub fn ids(&self) -> Vec<String> {
        ids(self.expect(200))
    }
}

/// The `id` members of a JSON array of objects.
#[track_caller]
pub fn ids(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected a JSON array, got {v}"))
        .iter()
        .map(|s| {
            s["id"]
                .as_str()
                .unwrap_or_else(|| panic!("no id in {s}"))
                .to_owned()
        })
        .collect()
}

/// A client for a node's API. Every request has a deadline.
#[derive(Clone)]
pub struct Api {
    base: String,
    client: reqwest::Client,
    token: Option<String>,
}

impl Api {
    /// A client for the API at `base` (`http://host:port`).
    pub fn new(base: String) -> Self {
        Self {
            base,
            client: reqwest::Client::builder()
                .timeout(DEADLINE)
                .build()
                .expect("a plain HTTP client builds"),
            token: None,
        }
    }

    /// The same client, sending `Authorization: Bearer <token>`.
    pub fn with_token(&self, token: &str) -> Self {
        Self {
            token: Some(token.to_owned()),
            ..self.clone()
        }
    }

    /// The absolute URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request builder for `method path`, with the token if any.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.client.request(method, self.url(path));
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    /// Sends `request`, described as `what` in failure messages.
    pub async fn send(&self, what: String, request: reqwest::RequestBuilder) -> Reply {
        let response = request
            .send()
            .await
            .unwrap_or_else(|e| panic!("{what}: no response: {e}"));
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response
            .text()
            .await
            .unwrap_or_else(|e| panic!("{what}: cannot read the body: {e}"));
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply {
            request: what,
            status,
            headers,
            text,
            body,
        }
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Reply {
        self.send(
            format!("GET {path}"),
            self.request(reqwest::Method::GET, path),
        )
        .await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        self.send(
            format!("POST {path}"),
            self.request(reqwest::Method::POST, path).json(body),
        )
        .await
    }

    /// `PUT path` with a JSON body.
    pub async fn put(&self, path: &str, body: &Value) -> Reply {
        self.send(
            format!("PUT {path}"),
            self.request(reqwest::Method::PUT, path).json(body),
        )
        .await
    }

    /// `DELETE path`.
    pub async fn delete(&self, path: &str) -> Reply {
        self.send(
            format!("DELETE {path}"),
            self.request(reqwest::Method::DELETE, path),
        )
        .await
    }

    /// `POST path` with a raw body and content type.
    pub async fn post_raw(&self, path: &str, content_type: Option<&str>, body: Vec<u8>) -> Reply {
        let mut r = self.request(reqwest::Method::POST, path).body(body);
        if let Some(ct) = content_type {
            r = r.header(reqwest::header::CONTENT_TYPE, ct);
        }
        self.send(format!("POST {path} ({content_type:?})"), r)
            .await
    }

    /// `POST /agents/search` with `body`.
    pub async fn search(&self, body: Value) -> Reply {
        self.post("/agents/search", &body).await
    }

    /// Registers `doc` and asserts 201; answers the stored document.
    pub async fn register(&self, doc: &Value) -> Value {
        self.post("/agents", doc).await.expect(201).clone()
    }
}

/// A valid AIDIP document with the given terms (single implied operation).
pub fn agent(id: &str, capabilities: &[&str], tags: &[&str], languages: &[&str]) -> Value {
    json!({
        "id": id,
        "name": format!("Agent {id}"),
        "description": format!("Test agent {id}."),
        "version": "1.0.0",
        "capabilities": capabilities,
        "tags": tags,
        "endpoint": format!("https://agents.example.net/{id}"),
        "supported_languages": languages,
        "authentication": {"type": "api_key"},
        "inputs": {"type": "object", "properties": {"text": {"type": "string"}}},
        "outputs": {"type": "object"}
    })
}

/// A valid AIDIP document with one capability and nothing else optional.
pub fn minimal_agent(id: &str) -> Value {
    agent(id, &["translation"], &[], &["en"])
}

/// A JSON example from `proto/examples/`, e.g. `aidip/valid/x.json`.
pub fn example(relative: &str) -> Value {
    let path: PathBuf = repo_root().join("proto/examples").join(relative);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The file names in `proto/examples/<dir>`, sorted.
pub fn examples_in(dir: &str) -> Vec<String> {
    let path = repo_root().join("proto/examples").join(dir);
    let mut names: Vec<String> = std::fs::read_dir(&path)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", path.display()))
        .map(|e| {
            e.expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    names
}

/// A testbed of `healthy` agents and its CA written to `<dir>/ca.pem`.
pub async fn testbed_with_ca(
    seed: u64,
    healthy: usize,
) -> (Testbed, tempfile::TempDir, std::path::PathBuf) {
    let testbed = Testbed::start(
        Population::generate(&PopulationConfig::healthy(seed, healthy)),
        TestbedOptions::default(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    testbed.write_ca(&ca).unwrap();
    (testbed, dir, ca)
}

/// `document` (an ADP `agent.json`) with `key` in place of the agent's
/// own key: what an impersonator gossips.
pub fn with_key(document: &str, key: &ed25519_dalek::SigningKey) -> String {
    use agentmesh::identity;
    let mut doc: agentmesh::adp::AgentDocument = serde_json::from_str(document).unwrap();
    doc.identity.public_key.fingerprint = identity::fingerprint(&key.verifying_key());
    doc.identity.public_key.full = Some(identity::encode_public_key(&key.verifying_key()));
    doc.identity.previous_fingerprint = None;
    serde_json::to_string(&doc).unwrap()
}

/// A descriptor record of `document` (ADP) claiming every piece of
/// evidence: the fingerprint, a challenge answered by `answering` (valid
/// when it is the document's key), DNSSEC, a mutual peer; valid for
/// `lifetime_secs`, signed by `signer`. What a hostile peer gossips.
pub fn claim_everything(
    document: &str,
    seq: u64,
    lifetime_secs: u64,
    answering: &ed25519_dalek::SigningKey,
    signer: &ed25519_dalek::SigningKey,
) -> Vec<u8> {
    use agentmesh::adp::{handshake, AgentDocument};
    use agentmesh::trust::{ChallengeProof, Evidence};
    let doc: AgentDocument = serde_json::from_str(document).unwrap();
    let mut body = agentmesh::record::DescriptorRecord::new(
        doc.to_descriptor(),
        document.to_owned(),
        seq,
        agentmesh::record::unix_now(),
        lifetime_secs,
        Evidence::default(),
    );
    let (verifier, unix_ms, rand) = ("rogue".to_owned(), 1_700_000_000_000, [9u8; 16]);
    let nonce = handshake::nonce(&body.doc_sha256, &verifier, unix_ms, &rand);
    let frame = handshake::challenge(&verifier, &signer.verifying_key(), &nonce);
    let answer = handshake::answer(&frame, &body.agent_id, answering);
    body.evidence = Evidence {
        dnssec: true,
        fingerprint: true,
        challenge: Some(ChallengeProof {
            verifier,
            unix_ms,
            rand: rand.to_vec(),
            signature: agentmesh::identity::decode_bytes(answer.signature.as_deref().unwrap())
                .unwrap(),
        }),
        mutual_peer: true,
        dnssec_chain: None,
    };
    agentmesh::record::SignedRecord::sign_descriptor(&body, signer)
        .unwrap()
        .encode()
}

/// An AIDIP registration of `id` with `endpoint` and the capability
/// `weather-forecast`, at `seq`, valid for an hour, signed by `signer`:
/// what another registry (or a stranger) sends.
pub fn signed_registration(
    id: &str,
    endpoint: &str,
    seq: u64,
    signer: &ed25519_dalek::SigningKey,
) -> Vec<u8> {
    let descriptor = agentmesh::descriptor::Descriptor {
        id: id.into(),
        name: "Weather".into(),
        description: "Forecasts".into(),
        version: None,
        publisher: None,
        endpoint: Some(endpoint.into()),
        capabilities: vec!["weather-forecast".into()],
        tags: vec![],
        languages: vec![],
        status: None,
        auth: None,
        format: agentmesh::descriptor::DocumentFormat::Aidip,
    };
    let body = agentmesh::record::DescriptorRecord::new(
        descriptor,
        json!({"id": id, "endpoint": endpoint}).to_string(),
        seq,
        agentmesh::record::unix_now(),
        3600,
        agentmesh::trust::Evidence::default(),
    );
    agentmesh::record::SignedRecord::sign_descriptor(&body, signer)
        .unwrap()
        .encode()
}

/// The testbed's invokable agents (AIDIP, MCP, A2A, misbehaving on
/// request), and their test CA's certificate in a file a node trusts.
pub struct TestAgents {
    /// The agents.
    pub agents: agentmesh::testbed::agents::InvokeAgents,
    /// A directory the test may use (the CA's file is in it).
    pub dir: tempfile::TempDir,
    /// The CA's certificate.
    pub ca_file: PathBuf,
}

/// Starts the testbed's invokable agents on loopback.
pub async fn test_agents() -> TestAgents {
    let ca = agentmesh::testbed::certs::TestCa::new(&["127.0.0.1", "localhost"]).unwrap();
    let agents = agentmesh::testbed::agents::InvokeAgents::start(&ca)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.ca_pem()).unwrap();
    TestAgents {
        agents,
        dir,
        ca_file,
    }
}

/// The Python interpreter named by `$env`, else `default`, when it
/// exists and imports `modules` (a Python `import` line's names): how
/// the interop tests find the SDK `.ci/run` installed.
pub fn python_with(env: &str, default: &str, modules: &str) -> Option<PathBuf> {
    let python = std::env::var_os(env)
        .map(PathBuf::from)
        .unwrap_or_else(|| default.into());
    if !python.exists() {
        return None;
    }
    let mut probe = Command::new(&python);
    probe.args(["-c", &format!("import {modules}")]);
    let found = run(
        &mut probe,
        Duration::from_secs(60),
        &format!("python -c 'import {modules}'"),
    );
    found.status.success().then_some(python)
}

/// A server written in Python with another party's SDK, on loopback
/// over TLS, killed on drop.
pub struct PythonServer {
    _process: ChildGuard,
    /// The port it printed (`listening PORT` on stdout).
    pub port: u16,
    /// What it wrote to stderr.
    pub stderr: Captured,
}

impl PythonServer {
    /// Runs `python script CERT KEY args...` with a leaf of `ca` for
    /// 127.0.0.1 written in `dir` as `{name}-cert.pem` and
    /// `{name}-key.pem`; waits for the port it prints. `what` names it
    /// in failures.
    pub fn start(
        python: &Path,
        script: &str,
        args: &[String],
        ca: &agentmesh::testbed::certs::TestCa,
        dir: &Path,
        name: &str,
        what: &str,
    ) -> Self {
        let leaf = ca.leaf_pem(&["127.0.0.1"]).unwrap();
        let cert = dir.join(format!("{name}-cert.pem"));
        let key = dir.join(format!("{name}-key.pem"));
        std::fs::write(&cert, &leaf.cert).unwrap();
        std::fs::write(&key, &leaf.key).unwrap();
        let mut cmd = Command::new(python);
        cmd.arg(repo_root().join(script))
            .arg(&cert)
            .arg(&key)
            .args(args)
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut process = ChildGuard::spawn(&mut cmd, what);
        let stderr = Captured::default();
        capture(process.take_stderr(), stderr.clone(), |_| {});
        let (tx, rx) = mpsc::channel();
        capture(process.take_stdout(), Captured::default(), move |line| {
            if let Some(port) = line.strip_prefix("listening ") {
                let _ = tx.send(port.trim().parse::<u16>().ok());
            }
        });
        let port = match rx.recv_timeout(DEADLINE) {
            Ok(Some(port)) => port,
            Ok(None) => panic!("{what} printed no port: {}", stderr.text()),
            Err(_) => panic!(
                "{what} did not listen within {DEADLINE:?}: {}",
                stderr.text()
            ),
        };
        Self {
            _process: process,
            port,
            stderr,
        }
    }
}
