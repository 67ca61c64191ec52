//! The `agentmesh` command line, run as users run it: version and help,
//! configuration from file, environment and flags (and its errors),
//! `keygen`, `demo`, `node`'s start-up failures and signals, `peer-id`,
//! `testbed` serving what a mesh of nodes crawls, and `status`, `search`
//! and `completions` against a running node.

use crate::common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use common::{
    agentmesh, capture, minimal_agent, run, Captured, ChildGuard, Finished, TestNode, DEADLINE,
    LONG_DEADLINE,
};
use ed25519_dalek::pkcs8::DecodePrivateKey as _;
use sha2::{Digest as _, Sha256};

/// Runs `agentmesh args...` with `DEADLINE`.
fn agentmesh_run(args: &[&str]) -> Finished {
    run(
        agentmesh().args(args),
        DEADLINE,
        &format!("agentmesh {}", args.join(" ")),
    )
}

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("agentmesh-cli-")
        .tempdir()
        .expect("a temporary directory can be created")
}

/// `node` flags that keep a node that does start off shared ports.
const LOOPBACK: [&str; 4] = [
    "--listen",
    "127.0.0.1:0",
    "--p2p-listen",
    "/ip4/127.0.0.1/tcp/0",
];

/// Runs `agentmesh node` on a fresh data directory with `extra` flags and
/// `env`, expecting it to fail before serving; answers its stderr.
fn node_fails(extra: &[&str], env: &[(&str, &str)], what: &str) -> String {
    let dir = tempdir();
    let mut cmd = agentmesh();
    cmd.arg("node")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run(&mut cmd, DEADLINE, what);
    out.assert_failure(what);
    assert!(
        !out.stdout.contains("serving"),
        "{what}: the node must not serve: {}",
        out.stdout
    );
    out.stderr
}

// ------------------------------------------------------------ version, help

#[test]
fn version_prints_the_crate_version() {
    let out = agentmesh_run(&["--version"]);
    out.assert_success("agentmesh --version");
    assert_eq!(
        out.stdout.trim(),
        format!("agentmesh {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn help_lists_the_subcommands() {
    let out = agentmesh_run(&["--help"]);
    out.assert_success("agentmesh --help");
    for sub in ["node", "demo", "keygen", "status", "search", "completions"] {
        assert!(
            out.stdout.lines().any(|l| l.trim_start().starts_with(sub)),
            "`agentmesh --help` lists {sub}:\n{}",
            out.stdout
        );
    }
}

#[test]
fn help_of_each_command_lists_its_flags() {
    let cases: &[(&str, &[&str])] = &[
        (
            "node",
            &[
                "--config",
                "--data-dir",
                "--listen",
                "--p2p-listen",
                "--bootstrap",
                "--resolver",
                "--ca-file",
                "--allow-private",
                "--trust-anchor",
            ],
        ),
        ("keygen", &["--out"]),
        ("demo", &["--data-dir", "--listen", "--no-serve"]),
        (
            "import",
            &["--data-dir", "--config", "--json", "--max-line-bytes"],
        ),
    ];
    for (command, flags) in cases {
        let out = agentmesh_run(&[command, "--help"]);
        out.assert_success(&format!("agentmesh {command} --help"));
        for flag in *flags {
            assert!(
                out.stdout
                    .split(|c: char| !(c.is_alphanumeric() || c == '-'))
                    .any(|w| w == *flag),
                "`agentmesh {command} --help` lists {flag}:\n{}",
                out.stdout
            );
        }
    }
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["frobnicate"][..],
        &["node", "--bogus"],
        &["node", "--listen", "nowhere"],
    ] {
        let out = agentmesh_run(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "agentmesh {args:?}: a usage error exits 2\n{}",
            out.stderr
        );
        assert!(!out.stderr.is_empty(), "agentmesh {args:?} says why");
    }
}

// ------------------------------------------------------------------- config

#[test]
fn config_file_with_an_unknown_key_fails_naming_it() {
    let dir = tempdir();
    for (text, key) in [
        ("[api]\nlisten_addr = \"127.0.0.1:1\"\n", "listen_addr"),
        ("datadir = \"/tmp/x\"\n", "datadir"),
        ("[storage]\ncache_bytes = 1\n", "storage"),
    ] {
        let path = dir.path().join("agentmesh.toml");
        std::fs::write(&path, text).unwrap();
        let stderr = node_fails(
            &["--config", path.to_str().unwrap()],
            &[],
            &format!("node with config {text:?}"),
        );
        assert!(
            stderr.contains(key),
            "the error names the unknown key {key}:\n{stderr}"
        );
    }
}

#[test]
fn unknown_environment_key_fails_naming_it() {
    let stderr = node_fails(
        &LOOPBACK,
        &[("AGENTMESH_API__BOGUS", "1")],
        "node with AGENTMESH_API__BOGUS",
    );
    assert!(
        stderr.to_lowercase().contains("bogus"),
        "the error names the key:\n{stderr}"
    );
}

#[test]
fn out_of_range_values_fail_naming_the_key() {
    for (name, value, key) in [
        ("AGENTMESH_API__MAX_BODY_BYTES", "10", "api.max_body_bytes"),
        ("AGENTMESH_API__ADMIN_TOKEN", "short", "api.admin_token"),
        ("AGENTMESH_API__MAX_LIMIT", "0", "api.max_limit"),
        ("AGENTMESH_STORE__RECORD_TTL", "\"1s\"", "store.record_ttl"),
    ] {
        let stderr = node_fails(
            &LOOPBACK,
            &[(name, value)],
            &format!("node with {name}={value}"),
        );
        assert!(
            stderr.contains(key),
            "{name}={value}: names {key}:\n{stderr}"
        );
    }
}

#[test]
fn missing_or_malformed_config_file_fails_naming_it() {
    let dir = tempdir();
    let missing = dir.path().join("absent.toml");
    let stderr = node_fails(
        &["--config", missing.to_str().unwrap()],
        &[],
        "node with a missing config file",
    );
    assert!(stderr.contains("absent.toml"), "{stderr}");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[api\nlisten = 1").unwrap();
    let stderr = node_fails(
        &["--config", bad.to_str().unwrap()],
        &[],
        "node with a malformed config file",
    );
    assert!(stderr.contains("bad.toml"), "{stderr}");
}

#[tokio::test]
async fn file_then_environment_then_flags() {
    let dir = tempdir();
    let path = dir.path().join("agentmesh.toml");
    std::fs::write(
        &path,
        "data_dir = \"/nonexistent/overridden-by-the-flag\"\n\
         [api]\nlisten = \"127.0.0.1:1\"\nmax_limit = 5\ndefault_limit = 2\n",
    )
    .unwrap();

    // The file alone: the flags (--data-dir, --listen) override its
    // data_dir and listen; its limits apply.
    let node = TestNode::builder()
        .args(&["--config", path.to_str().unwrap()])
        .start();
    let api = node.api();
    for i in 0..6 {
        api.register(&minimal_agent(&format!("cfg{i}"))).await;
    }
    assert_eq!(
        api.get("/agents").await.ids().len(),
        2,
        "default_limit from the file"
    );
    assert_eq!(api.get("/agents?limit=5").await.ids().len(), 5);
    api.get("/agents?limit=6")
        .await
        .expect_error(400, "InvalidInput");
    assert!(node.data_dir().join("node.key").exists());
    drop(node);

    // The environment overrides the file; AGENTMESH_LISTEN is overridden
    // by the --listen flag.
    let node = TestNode::builder()
        .args(&["--config", path.to_str().unwrap()])
        .env("AGENTMESH_API__MAX_LIMIT", "7")
        .env("AGENTMESH_LISTEN", "127.0.0.1:1")
        .start();
    let api = node.api();
    for i in 0..8 {
        api.register(&minimal_agent(&format!("cfg{i}"))).await;
    }
    assert_eq!(api.get("/agents?limit=7").await.ids().len(), 7);
    api.get("/agents?limit=8")
        .await
        .expect_error(400, "InvalidInput");

    // AGENTMESH_CONFIG names the file like --config.
    let node = TestNode::builder()
        .env("AGENTMESH_CONFIG", path.to_str().unwrap())
        .start();
    node.api()
        .get("/agents?limit=6")
        .await
        .expect_error(400, "InvalidInput");
}

// ------------------------------------------------------------------- keygen

/// The value after `label:` on a line of `out`.
fn field<'a>(out: &'a str, label: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(label))
        .and_then(|rest| rest.strip_prefix(':'))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {label:?} line in:\n{out}"))
}

fn check_key_file(path: &Path, stdout: &str) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} has mode {mode:o}", path.display());
    }
    let pem = std::fs::read_to_string(path).unwrap();
    assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"), "{pem}");
    let key = ed25519_dalek::SigningKey::from_pkcs8_pem(&pem)
        .unwrap_or_else(|e| panic!("{} is not a PKCS#8 Ed25519 key: {e}", path.display()));
    let raw = key.verifying_key().to_bytes();

    let fingerprint = field(stdout, "fingerprint");
    assert_eq!(fingerprint.len(), 72, "{fingerprint}");
    assert_eq!(
        fingerprint,
        format!("ed25519:{}", hex::encode(Sha256::digest(raw))),
        "the fingerprint is ed25519: + hex SHA-256 of the raw public key"
    );
    let public = field(stdout, "public key");
    assert_eq!(public.len(), 43, "{public}");
    assert_eq!(
        URL_SAFE_NO_PAD
            .decode(public)
            .expect("base64url without padding"),
        raw,
        "the printed public key is the file's"
    );
}

#[test]
fn keygen_writes_a_0600_pem_and_prints_fingerprint_and_public_key() {
    let dir = tempdir();
    let path = dir.path().join("agent.key");
    let out = agentmesh_run(&["keygen", "--out", path.to_str().unwrap()]);
    out.assert_success("keygen --out");
    check_key_file(&path, &out.stdout);

    // Another key is another key.
    let other = dir.path().join("other.key");
    let out2 = agentmesh_run(&["keygen", "-o", other.to_str().unwrap()]);
    out2.assert_success("keygen -o");
    check_key_file(&other, &out2.stdout);
    assert_ne!(
        field(&out.stdout, "fingerprint"),
        field(&out2.stdout, "fingerprint")
    );
}

#[test]
fn keygen_refuses_to_overwrite() {
    let dir = tempdir();
    let path = dir.path().join("agent.key");
    agentmesh_run(&["keygen", "--out", path.to_str().unwrap()]).assert_success("keygen");
    let before = std::fs::read(&path).unwrap();
    let out = agentmesh_run(&["keygen", "--out", path.to_str().unwrap()]);
    out.assert_failure("keygen over an existing file");
    assert!(
        out.stderr.contains("already exists"),
        "the error says why:\n{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the key is untouched"
    );

    // Any existing file, not only keys.
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "precious").unwrap();
    agentmesh_run(&["keygen", "--out", notes.to_str().unwrap()])
        .assert_failure("keygen over a text file");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "precious");
}

#[test]
fn keygen_defaults_to_agent_key_in_the_working_directory() {
    let dir = tempdir();
    let out = run(
        agentmesh().arg("keygen").current_dir(dir.path()),
        DEADLINE,
        "keygen",
    );
    out.assert_success("keygen");
    check_key_file(&dir.path().join("agent.key"), &out.stdout);
}

#[test]
fn keygen_into_a_missing_directory_fails_naming_the_path() {
    let dir = tempdir();
    let path = dir.path().join("no/such/dir/agent.key");
    let out = agentmesh_run(&["keygen", "--out", path.to_str().unwrap()]);
    out.assert_failure("keygen into a missing directory");
    assert!(out.stderr.contains("no/such/dir"), "{}", out.stderr);
}

// --------------------------------------------------------------------- demo

#[test]
fn demo_crawls_three_orgs_and_finds_node_3s_agents_from_node_1() {
    let tmp = tempdir();
    let out = run(
        agentmesh()
            .args(["demo", "--no-serve", "--listen", "127.0.0.1:0"])
            .env("TMPDIR", tmp.path()),
        Duration::from_secs(120),
        "demo --no-serve",
    );
    out.assert_success("demo --no-serve");
    let stdout = &out.stdout;
    for n in 1..=3 {
        let line = format!("node {n} crawled org{n}.test: 100 domains");
        assert!(stdout.contains(&line), "no {line:?} in:\n{stdout}");
    }
    // The broken agents are all in org3: node 3 names their failures.
    for reason in [
        "fingerprint_mismatch 1",
        "challenge_bad_signature 1",
        "txt_missing 1",
    ] {
        assert!(stdout.contains(reason), "no {reason:?} in:\n{stdout}");
    }
    let found = stdout
        .split("agents only node 3 crawled, found from node 1:")
        .nth(1)
        .unwrap_or_else(|| panic!("no cross-node search in:\n{stdout}"));
    let rows: Vec<&str> = found
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert!(
        !rows.is_empty(),
        "node 1 found nothing of node 3's:\n{stdout}"
    );
    for row in rows {
        assert!(row.contains(".org3.test"), "{row}");
        assert!(row.contains("-verified"), "{row}");
        assert!(row.contains("source mesh"), "{row}");
    }
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "the demo removes its data: {left:?}");
}

/// Copies the directory tree `from` into `to`.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[tokio::test]
async fn demo_with_a_data_dir_keeps_node_1s_agents_for_a_node() {
    let dir = tempdir();
    let out = run(
        agentmesh()
            .args([
                "demo",
                "--no-serve",
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
            ])
            .arg(dir.path()),
        Duration::from_secs(120),
        "demo --no-serve --data-dir",
    );
    out.assert_success("demo --data-dir");
    let node1 = tempfile::TempDir::new().unwrap();
    copy_dir(&dir.path().join("node1"), node1.path());
    let node = TestNode::builder().data_dir(node1).start();
    let api = node.api();
    let health = api.get("/health").await;
    let records = health.expect(200)["records"].as_u64().unwrap();
    assert!(records >= 104, "node 1 holds {records} records");
    let doc = api.get("/agents/agent-12345").await;
    assert_eq!(doc.expect(200)["name"], "Chinese-English Translator");
}

#[test]
fn demo_with_a_data_dir_says_where_its_data_is() {
    let dir = tempdir();
    let out = run(
        agentmesh()
            .args([
                "demo",
                "--no-serve",
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
            ])
            .arg(dir.path()),
        LONG_DEADLINE,
        "demo --no-serve --data-dir",
    );
    out.assert_success("demo --data-dir");
    assert!(
        !out.stdout.contains("temporary directory"),
        "the data is kept, not temporary:\n{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&dir.path().display().to_string()),
        "the demo says where its data is:\n{}",
        out.stdout
    );
}

// --------------------------------------------------------------------- node

#[test]
fn node_on_a_taken_port_fails_clearly() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let stderr = node_fails(
        &["--listen", &addr, "--p2p-listen", "/ip4/127.0.0.1/tcp/0"],
        &[],
        "node on a taken port",
    );
    assert!(
        stderr.contains(&format!("cannot listen on {addr}")),
        "the error names the address:\n{stderr}"
    );
    assert!(
        stderr.to_lowercase().contains("in use"),
        "the error says the address is in use:\n{stderr}"
    );
    drop(taken);
}

#[test]
fn node_with_an_unusable_data_dir_fails_clearly() {
    let dir = tempdir();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let out = run(
        agentmesh()
            .arg("node")
            .arg("--data-dir")
            .arg(&file)
            .args(LOOPBACK),
        DEADLINE,
        "node with a file as data dir",
    );
    out.assert_failure("node with a file as data dir");
    assert!(
        out.stderr.contains("a-file"),
        "the error names the path:\n{}",
        out.stderr
    );
}

#[test]
fn node_creates_its_key_once_and_stops_on_sigterm_and_sigint() {
    let mut node = TestNode::start();
    let peer_id = node.peer_id().to_owned();
    assert!(peer_id.starts_with("12D3KooW"), "{peer_id}");
    let key = node.data_dir().join("node.key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "node.key has mode {mode:o}");
    }
    let pem = std::fs::read(&key).unwrap();
    node.stop_with("INT");
    node.start_again();
    assert_eq!(node.peer_id(), peer_id, "the same key, the same peer id");
    assert_eq!(
        std::fs::read(&key).unwrap(),
        pem,
        "node.key is not rewritten"
    );
    node.stop_with("TERM");
    assert!(
        node.stderr().contains("node stopped"),
        "the node logs its orderly stop:\n{}",
        node.stderr()
    );
}

#[test]
fn peer_id_prints_the_id_the_node_then_serves_with() {
    let dir = tempdir();
    let data = dir.path().to_str().unwrap().to_owned();
    let first = agentmesh_run(&["peer-id", "--data-dir", &data]);
    first.assert_success("peer-id");
    let id = first.stdout.trim().to_owned();
    assert!(id.starts_with("12D3KooW"), "{id}");
    let again = agentmesh_run(&["peer-id", "--data-dir", &data]);
    assert_eq!(again.stdout.trim(), id, "the key is made once");
    let node = TestNode::builder().data_dir(dir).start();
    assert_eq!(node.peer_id(), id, "the node serves with that key");
}

// ------------------------------------------------------------------ testbed

/// `agentmesh testbed --out <temporary directory>`, killed on drop (its
/// [`ChildGuard`]).
struct TestbedCmd {
    child: ChildGuard,
    out: tempfile::TempDir,
    stdout: Captured,
    stderr: Captured,
    dns: SocketAddr,
    /// Its HTTPS listener: the port a crawler must be allowed.
    https: SocketAddr,
}

impl TestbedCmd {
    /// Starts it and waits (10 s) for "serving until ..." on stdout.
    fn start(args: &[&str]) -> Self {
        let out = tempdir();
        let mut child = ChildGuard::spawn(
            agentmesh()
                .arg("testbed")
                .args(args)
                .arg("--out")
                .arg(out.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
            "agentmesh testbed",
        );
        let (stdout, stderr) = (Captured::default(), Captured::default());
        let (tx, rx) = std::sync::mpsc::channel();
        capture(child.take_stdout(), stdout.clone(), move |line| {
            if line.starts_with("serving until") {
                let _ = tx.send(());
            }
        });
        capture(child.take_stderr(), stderr.clone(), |_| {});
        let mut bed = Self {
            child,
            out,
            stdout,
            stderr,
            dns: SocketAddr::from(([0, 0, 0, 0], 0)),
            https: SocketAddr::from(([0, 0, 0, 0], 0)),
        };
        if rx.recv_timeout(DEADLINE).is_err() {
            panic!(
                "timed out after {DEADLINE:?} waiting for the testbed to print \
                 'serving until'\n--- stdout\n{}--- stderr\n{}",
                bed.stdout.text(),
                bed.stderr.text()
            );
        }
        let text = bed.stdout.text();
        bed.dns = text
            .lines()
            .find_map(|l| l.strip_prefix("dns:"))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no 'dns: <ip:port>' line in:\n{text}"));
        bed.https = text
            .lines()
            .find_map(|l| l.strip_prefix("https:"))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no 'https: <ip:port>' line in:\n{text}"));
        bed
    }

    fn path(&self, name: &str) -> PathBuf {
        self.out.path().join(name)
    }

    /// The lines of `org{n}.domains`.
    fn domains(&self, org: usize) -> Vec<String> {
        let path = self.path(&format!("org{org}.domains"));
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// `agentmesh verify domain` against this testbed; answers its exit
    /// code and stdout.
    fn verify(&self, domain: &str) -> (Option<i32>, String) {
        let out = run(
            agentmesh()
                .args(["verify", domain, "--resolver", &self.dns.to_string()])
                .arg("--ca-file")
                .arg(self.path("ca.pem"))
                .arg("--allow-private")
                .args(["--allow-port", &self.https.port().to_string()]),
            Duration::from_secs(30),
            &format!("agentmesh verify {domain}"),
        );
        (out.status.code(), out.stdout)
    }

    /// SIGTERM; asserts it exits 0 within 10 s.
    fn stop(&mut self) {
        self.child.signal("TERM");
        let status = self
            .child
            .wait_for_exit(DEADLINE, "the testbed to exit after SIGTERM");
        assert!(
            status.success(),
            "the testbed exited with {status}\n--- stderr\n{}",
            self.stderr.text()
        );
    }
}

impl Drop for TestbedCmd {
    fn drop(&mut self) {
        // Killed before its output is printed.
        self.child.kill();
        if std::thread::panicking() {
            eprintln!(
                "--- testbed stdout\n{}--- testbed stderr\n{}",
                self.stdout.text(),
                self.stderr.text()
            );
        }
    }
}

/// The A records of `name` at the DNS server `dns`.
async fn a_records(dns: SocketAddr, name: &str) -> Vec<IpAddr> {
    use hickory_resolver::config::{NameServerConfig, ResolverConfig};
    use hickory_resolver::net::runtime::TokioRuntimeProvider;
    let mut server = NameServerConfig::udp_and_tcp(dns.ip());
    for connection in &mut server.connections {
        connection.port = dns.port();
    }
    let config = ResolverConfig::from_name_servers(vec![server]);
    let mut builder = hickory_resolver::TokioResolver::builder_with_config(
        config,
        TokioRuntimeProvider::default(),
    );
    builder.options_mut().timeout = Duration::from_secs(2);
    let resolver = builder.build().expect("the resolver builds");
    let lookup = tokio::time::timeout(DEADLINE, resolver.ipv4_lookup(format!("{name}.")))
        .await
        .unwrap_or_else(|_| panic!("timed out after {DEADLINE:?} resolving {name}"))
        .unwrap_or_else(|e| panic!("resolving {name}: {e}"));
    lookup
        .answers()
        .iter()
        .filter_map(|r| match &r.data {
            hickory_proto::rr::RData::A(a) => Some(IpAddr::V4(a.0)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn testbed_writes_its_files_advertises_its_address_and_its_agents_verify() {
    // The agents resolve to --advertise, where the HTTPS listener is: a
    // second loopback address shows that the A records follow the flag.
    let advertised = Ipv4Addr::new(127, 0, 0, 2);
    let mut bed = tokio::task::block_in_place(|| {
        TestbedCmd::start(&[
            "--agents",
            "6",
            "--orgs",
            "2",
            "--seed",
            "7",
            "--advertise",
            "127.0.0.2",
            "--https",
            "127.0.0.2:0",
        ])
    });

    // ca.pem, one domain list per org (4 default broken agents join the 6
    // healthy ones, 5 per org), and ready.
    let ca = std::fs::read_to_string(bed.path("ca.pem")).unwrap();
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    assert!(bed.path("ready").exists(), "ready is written");
    assert!(!bed.path("org3.domains").exists(), "two orgs only");
    let (org1, org2) = (bed.domains(1), bed.domains(2));
    assert_eq!((org1.len(), org2.len()), (5, 5), "{org1:?} {org2:?}");
    for (n, list) in [(1, &org1), (2, &org2)] {
        for d in list {
            assert!(d.ends_with(&format!(".org{n}.test")), "{d} in org{n}");
        }
    }
    let all: Vec<&String> = org1.iter().chain(&org2).collect();
    assert!(
        !all.iter()
            .any(|d| d.starts_with("private-target") || d.starts_with("loopback-target")),
        "no agent points outside the testbed by default: {all:?}"
    );
    let summary = bed.stdout.text();
    for name in ["ca.pem", "org1.domains", "org2.domains", "ready"] {
        assert!(
            summary.contains(name),
            "the summary names {name}:\n{summary}"
        );
    }

    // DNS answers for a listed domain point at the advertised address.
    let healthy = org1[0].clone();
    assert_eq!(a_records(bed.dns, &healthy).await, [IpAddr::V4(advertised)]);

    // `verify` key-verifies a healthy agent and refuses a broken one.
    let broken = all
        .iter()
        .find(|d| d.starts_with("fingerprint-mismatch"))
        .expect("a fingerprint_mismatch agent by default")
        .to_string();
    let bed_ref = &bed;
    let ((ok, ok_out), (bad, bad_out)) =
        tokio::task::block_in_place(|| (bed_ref.verify(&healthy), bed_ref.verify(&broken)));
    assert_eq!(ok, Some(0), "verify {healthy}:\n{ok_out}");
    assert!(ok_out.contains("key-verified"), "{ok_out}");
    assert_eq!(bad, Some(1), "verify {broken}:\n{bad_out}");

    // SIGTERM: exit 0, and `ready` no longer announces a testbed.
    tokio::task::block_in_place(|| bed.stop());
    assert!(!bed.path("ready").exists(), "ready is removed at stop");
    assert!(bed.path("ca.pem").exists());
}

#[test]
fn testbed_usage_errors_exit_2_and_say_why() {
    for (args, says) in [
        (&["--broken", "bogus"][..], "bogus"),
        (&["--broken", "healthy"], "healthy"),
        (&["--orgs", "0"], "--orgs"),
        (
            &["--agents", "2", "--broken", "none", "--orgs", "3"],
            "--orgs",
        ),
        (&["--agents", "0", "--broken", "none"], "no agents"),
        (&["--advertise", "nowhere"], "--advertise"),
        (&["--advertise", "10.9.8.7"], "--https"),
        (&["--dns", "53"], "--dns"),
    ] {
        let mut full = vec!["testbed"];
        full.extend_from_slice(args);
        let out = agentmesh_run(&full);
        assert_eq!(
            out.status.code(),
            Some(2),
            "agentmesh {full:?} is a usage error\n{}",
            out.stderr
        );
        assert!(
            out.stderr.contains(says),
            "agentmesh {full:?} says {says:?}:\n{}",
            out.stderr
        );
        assert!(!out.stdout.contains("serving"), "{}", out.stdout);
    }
}

#[test]
fn testbed_on_a_taken_port_fails_naming_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempdir();
    let out = run(
        agentmesh()
            .args(["testbed", "--https", &addr, "--out"])
            .arg(dir.path()),
        DEADLINE,
        "testbed on a taken port",
    );
    assert_eq!(out.status.code(), Some(1), "{}", out.stderr);
    assert!(out.stderr.contains(&addr), "names {addr}:\n{}", out.stderr);
    assert!(!dir.path().join("ready").exists(), "not ready");
}

/// `agentmesh crawl --data-dir` signs what it stores through the node's
/// issuer: the records live for the configured `store.record_ttl` (7 days
/// by default, or what the config says), not a crawler default of its own.
#[test]
fn crawl_into_a_data_dir_signs_records_with_the_configured_lifetime() {
    let bed = TestbedCmd::start(&[
        "--agents", "2", "--orgs", "1", "--seed", "11", "--broken", "none",
    ]);
    let domain = bed
        .domains(1)
        .into_iter()
        .find(|d| !d.contains("mismatch"))
        .expect("a healthy agent");
    let dir = tempdir();
    let default_ttl = agentmesh::config::Config::default().store.record_ttl;
    for (sub, env_ttl, expected) in [
        ("default", None, default_ttl),
        (
            "configured",
            Some("\"3d\""),
            Duration::from_secs(3 * 24 * 3600),
        ),
    ] {
        let data = dir.path().join(sub);
        let mut cmd = agentmesh();
        cmd.args(["crawl", &domain, "--resolver", &bed.dns.to_string()])
            .arg("--ca-file")
            .arg(bed.path("ca.pem"))
            .arg("--allow-private")
            .args(["--allow-port", &bed.https.port().to_string()])
            .arg("--data-dir")
            .arg(&data);
        if let Some(ttl) = env_ttl {
            cmd.env("AGENTMESH_STORE__RECORD_TTL", ttl);
        }
        let out = run(&mut cmd, LONG_DEADLINE, "agentmesh crawl");
        assert!(
            out.status.success() && out.stdout.contains("1 records stored"),
            "agentmesh crawl ({sub}):\n{}\n{}",
            out.stdout,
            out.stderr
        );
        let store = agentmesh::store::Store::open(&data.join("store"), 8 << 20).unwrap();
        let held = store
            .blocking()
            .get(&format!("agent:{domain}"))
            .unwrap()
            .unwrap_or_else(|| panic!("{domain} is stored ({sub})"));
        let agentmesh::record::RecordBody::Descriptor(body) = held.body else {
            panic!("a descriptor is stored ({sub})");
        };
        assert_eq!(
            body.expires_at - body.issued_at,
            expected.as_secs(),
            "record lifetime ({sub})"
        );
    }
}

#[test]
fn crawl_of_the_formats_organisation_lists_each_agent_with_its_format_and_trust() {
    let bed = TestbedCmd::start(&[
        "--agents",
        "2",
        "--orgs",
        "1",
        "--broken",
        "none",
        "--formats",
    ]);
    let https = bed
        .stdout
        .text()
        .lines()
        .find_map(|l| l.strip_prefix("https:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|a| a.parse::<SocketAddr>().ok())
        .expect("an 'https: <ip:port>' line");
    let dir = tempdir();
    let out = run(
        agentmesh()
            .args(["crawl", "--file"])
            .arg(bed.path("formats.domains"))
            .args(["--resolver", &bed.dns.to_string(), "--allow-private"])
            .args(["--https-port", &https.port().to_string()])
            .arg("--ca-file")
            .arg(bed.path("ca.pem"))
            .arg("--data-dir")
            .arg(dir.path()),
        LONG_DEADLINE,
        "agentmesh crawl of formats.test",
    );
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    // One line per agent: id, source format, trust level, first reason.
    let line = |id: &str| {
        out.stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("no line for {id} in:\n{}", out.stdout))
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
    };
    assert_eq!(line("a2a:a2a.formats.test"), ["a2a", "unverified"]);
    assert_eq!(line("aid:aid.formats.test"), ["aid", "unverified"]);
    assert_eq!(
        line("urn:air:catalog.formats.test:weather"),
        ["ard", "unverified"]
    );
    assert_eq!(
        line("a2a:a2a-forged.formats.test"),
        ["a2a", "unverified", "card_signature_bad"]
    );
    assert_eq!(
        line("dns-aid:_a2a._agents.dnsaid-broken.formats.test"),
        ["dns-aid", "unverified", "dns_aid_malformed"]
    );
    assert!(out.stdout.contains("by source format"), "{}", out.stdout);
}

// ---------------------------------------------------------------- import

/// A file of import lines (each written as is, then a newline).
fn write_lines(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let path = dir.join(name);
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// `agentmesh import FILE --data-dir DATA extra...`.
fn import(file: &Path, data: &Path, extra: &[&str]) -> Finished {
    run(
        agentmesh()
            .arg("import")
            .arg(file)
            .arg("--data-dir")
            .arg(data)
            .args(extra),
        LONG_DEADLINE,
        "agentmesh import",
    )
}

/// A count of `import`'s summary table (`  label   N`).
fn summary_count(out: &str, label: &str) -> u64 {
    out.lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .and_then(|rest| rest.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {label:?} count in:\n{out}"))
}

/// The held seq of `id` in the store of `data` (no node running on it).
fn held_seq(data: &Path, id: &str) -> u64 {
    let store = agentmesh::store::Store::open(&data.join("store"), 8 << 20).unwrap();
    let held = store.blocking().get(id).unwrap();
    held.unwrap_or_else(|| panic!("{id} is stored")).body.seq()
}

#[tokio::test]
async fn import_reports_bad_lines_by_number_imports_the_rest_and_reruns_idempotently() {
    let dir = tempdir();
    let data = dir.path().join("data");
    let mut lines: Vec<String> = (0..20)
        .map(|i| agentmesh::testbed::synthetic_agent(i).to_string())
        .collect();
    // Line numbers count from 1: replace some good lines by bad ones.
    lines[2] = "{\"id\": \"demo-broken\", ".to_owned();
    let mut no_name = agentmesh::testbed::synthetic_agent(6);
    no_name.as_object_mut().unwrap().remove("name");
    lines[6] = no_name.to_string();
    lines[9] = String::new();
    let mut long = agentmesh::testbed::synthetic_agent(11);
    long["description"] = serde_json::json!("x".repeat(5000));
    lines[11] = long.to_string();
    let mut no_id = agentmesh::testbed::synthetic_agent(14);
    no_id.as_object_mut().unwrap().remove("id");
    lines[14] = no_id.to_string();
    let file = write_lines(dir.path(), "agents.jsonl", &lines);

    let out = import(&file, &data, &["--max-line-bytes", "4096"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "refused lines exit 3\n{}\n{}",
        out.stdout,
        out.stderr
    );
    let refused: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("line "))
        .collect();
    assert_eq!(refused.len(), 3, "{}", out.stderr);
    assert!(
        refused[0].starts_with("line 3: refused: the line is not JSON"),
        "{}",
        refused[0]
    );
    assert!(
        refused[1].starts_with("line 7: refused (id demo-00006): /name:"),
        "{}",
        refused[1]
    );
    assert!(
        refused[2].starts_with("line 12: refused: the line has 5")
            && refused[2].contains("at most 4096"),
        "{}",
        refused[2]
    );
    for (label, n) in [
        ("lines read", 20),
        ("created", 16),
        ("unchanged", 0),
        ("refused", 3),
        ("blank", 1),
    ] {
        assert_eq!(
            summary_count(&out.stdout, label),
            n,
            "{label}\n{}",
            out.stdout
        );
    }
    let seq_before = held_seq(&data, "demo-00000");

    // Again, machine-readable: nothing changes, not even a seq.
    let out = import(&file, &data, &["--max-line-bytes", "4096", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", out.stderr);
    let mut results: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary = results.pop().unwrap();
    assert_eq!(
        summary,
        serde_json::json!({"summary": {"lines": 20, "blank": 1, "created": 0, "updated": 0,
            "unchanged": 16, "refused": 3, "stopped": null}})
    );
    let refused_lines: Vec<u64> = results
        .iter()
        .filter(|r| r["outcome"] == "refused")
        .map(|r| r["line"].as_u64().unwrap())
        .collect();
    assert_eq!(refused_lines, [3, 7, 12]);
    let assigned = results
        .iter()
        .find(|r| r["line"] == 15)
        .and_then(|r| r["id"].as_str())
        .unwrap()
        .to_owned();
    assert!(assigned.starts_with("agent-"), "{assigned}");
    assert_eq!(held_seq(&data, "demo-00000"), seq_before);

    // A node on the data directory serves them as its own registrations.
    let moved = tempfile::TempDir::new().unwrap();
    copy_dir(&data, moved.path());
    let node = common::TestNode::builder().data_dir(moved).start();
    let api = node.api();
    assert_eq!(api.get("/health").await.expect(200)["records"], 16);
    assert_eq!(api.get(&format!("/agents/{assigned}")).await.status, 200);
    assert_eq!(api.get("/agents/demo-00006").await.status, 404);
    let found = api
        .search(serde_json::json!({"filters": {"tags": ["legal"]}, "scope": "local"}))
        .await;
    let legal: Vec<String> = (0..20)
        .filter(|i| i % 6 == 0 && ![2, 6, 14].contains(i))
        .map(|i| format!("demo-{i:05}"))
        .collect();
    assert_eq!(found.ids(), legal);
    assert_eq!(found.expect(200)[0]["source"], "local");
    let mut changed = agentmesh::testbed::synthetic_agent(0);
    changed["description"] = serde_json::json!("Edited.");
    api.put("/agents/demo-00000", &changed).await.expect(200);
}

#[test]
fn import_reads_stdin_and_exits_0_when_every_line_went_in() {
    let dir = tempdir();
    let data = dir.path().join("data");
    let lines: Vec<String> = (0..5)
        .map(|i| agentmesh::testbed::synthetic_agent(i).to_string())
        .collect();
    let file = write_lines(dir.path(), "in.jsonl", &lines);
    let out = run(
        agentmesh()
            .args(["import", "-", "--data-dir"])
            .arg(&data)
            .stdin(std::fs::File::open(&file).unwrap()),
        LONG_DEADLINE,
        "agentmesh import -",
    );
    out.assert_success("agentmesh import -");
    assert!(out.stdout.contains("imported stdin"), "{}", out.stdout);
    assert_eq!(summary_count(&out.stdout, "created"), 5, "{}", out.stdout);
    assert!(held_seq(&data, "demo-00004") > 0);
}

#[test]
fn import_fails_clearly_without_its_input_or_beside_a_running_node() {
    let dir = tempdir();
    let out = import(
        &dir.path().join("missing.jsonl"),
        &dir.path().join("data"),
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("missing.jsonl"), "{}", out.stderr);

    let node = TestNode::start();
    let file = write_lines(dir.path(), "one.jsonl", &[minimal_agent("x").to_string()]);
    let out = import(&file, node.data_dir(), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("is a node running on it?"),
        "{}",
        out.stderr
    );
}

// ------------------------------------------------- status, search, completions

/// Runs `agentmesh args... --api <node>`, its output 100 columns wide.
fn against(node: &TestNode, args: &[&str]) -> Finished {
    let url = node.base_url();
    run(
        agentmesh()
            .args(args)
            .args(["--api", url.as_str()])
            .env("COLUMNS", "100"),
        DEADLINE,
        &format!("agentmesh {}", args.join(" ")),
    )
}

/// The value after `label` on a `status` line (`label  value`).
fn status_line<'a>(out: &'a str, label: &str) -> &'a str {
    out.lines()
        .find_map(|l| {
            l.strip_prefix(label)
                .filter(|rest| rest.starts_with("  "))
                .map(str::trim)
        })
        .unwrap_or_else(|| panic!("no {label:?} line in:\n{out}"))
}

#[tokio::test]
async fn status_shows_a_running_nodes_version_peer_id_records_and_crawl_queue() {
    let node = TestNode::start();
    let api = node.api();
    for id in ["s1", "s2"] {
        api.register(&minimal_agent(id)).await;
    }
    let health = api.get("/health").await.expect(200).clone();

    let out = against(&node, &["status", "--json"]);
    out.assert_success("agentmesh status --json");
    let s: serde_json::Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("status --json prints one JSON object: {e}\n{}", out.stdout));
    assert_eq!(s["api"], node.base_url());
    assert_eq!(s["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(s["cli_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(s["status"], "ok");
    assert_eq!(s["peer_id"], node.peer_id());
    assert_eq!(s["records"], health["records"]);
    assert_eq!(s["records"], 2);
    assert_eq!(s["records_by_trust"]["unverified"], 2, "{s}");
    assert_eq!(s["records_by_trust"]["key-verified"], 0, "{s}");
    assert_eq!(s["peers"], 0);
    assert_eq!(s["connected"], serde_json::json!([]), "a lone node: {s}");
    assert_eq!(s["mesh_records"]["accepted"], 0, "{s}");
    assert_eq!(s["crawl"]["jobs_waiting"], 0, "{s}");
    assert_eq!(s["listen_addrs"], health["listen_addrs"]);

    let out = against(&node, &["status"]);
    out.assert_success("agentmesh status");
    let text = &out.stdout;
    assert_eq!(status_line(text, "node"), node.base_url());
    assert_eq!(
        status_line(text, "version"),
        format!("{v} (this CLI {v})", v = env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(status_line(text, "peer id"), node.peer_id());
    assert_eq!(
        status_line(text, "records"),
        "2 (2 unverified, 0 dns-verified, 0 key-verified, 0 peer-verified)"
    );
    assert_eq!(status_line(text, "peers"), "0 connected");
    assert!(
        status_line(text, "crawl queue").starts_with("0 jobs waiting"),
        "{text}"
    );
    // The values start in one column.
    let column = |l: &str| l.len() - l[11..].trim_start().len();
    let columns: std::collections::BTreeSet<usize> = text
        .lines()
        .filter(|l| !l.starts_with(' '))
        .map(column)
        .collect();
    assert_eq!(columns.len(), 1, "aligned values:\n{text}");
}

#[test]
fn status_of_a_node_that_is_not_there_fails_naming_the_url() {
    // A port nobody listens on: refused at once.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    for args in [&["status"][..], &["status", "--json"]] {
        let mut all = args.to_vec();
        all.extend(["--api", url.as_str()]);
        let out = agentmesh_run(&all);
        assert_eq!(out.status.code(), Some(2), "{all:?}\n{}", out.stderr);
        assert!(
            out.stderr
                .contains(&format!("cannot reach the node at {url}/health")),
            "{all:?} names the URL: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains("refused"),
            "and says why: {}",
            out.stderr
        );
        assert!(out.stdout.is_empty(), "nothing on stdout: {}", out.stdout);
    }
    // A port that accepts connections and never answers: given up after
    // --timeout.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let out = agentmesh_run(&["status", "--api", &url, "--timeout", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains(&url) && out.stderr.contains("no answer within 1 s"),
        "{}",
        out.stderr
    );
    drop(silent);
}

#[tokio::test]
async fn search_prints_a_table_or_the_json_of_a_nodes_agents() {
    let node = TestNode::start();
    let api = node.api();
    let mut glacier = common::agent("glacier-7", &["weather"], &[], &["en"]);
    glacier["name"] =
        "Glacier melt forecaster with a name far too long for any terminal column at all".into();
    glacier["description"] = "Forecasts glacier meltwater runoff for alpine valleys.".into();
    api.register(&glacier).await;
    let mut poet = common::agent("poet-3", &["writing"], &[], &["fr"]);
    poet["description"] = "Writes sonnets in French.".into();
    api.register(&poet).await;

    let out = against(&node, &["search", "glacier meltwater", "--scope", "local"]);
    out.assert_success("agentmesh search");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines[0].starts_with("ID ") && lines[0].contains("TRUST"),
        "{}",
        out.stdout
    );
    assert!(lines[1].starts_with("glacier-7 "), "{}", out.stdout);
    assert!(
        lines[1].contains("unverified") && lines[1].ends_with("local"),
        "{}",
        out.stdout
    );
    assert!(
        lines[1].contains('…'),
        "the long name is cut: {}",
        out.stdout
    );
    assert!(!out.stdout.contains("poet-3"), "{}", out.stdout);

    let out = against(
        &node,
        &["search", "glacier meltwater", "--scope", "local", "--json"],
    );
    out.assert_success("agentmesh search --json");
    let results: serde_json::Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("search --json prints the JSON array: {e}\n{}", out.stdout));
    assert_eq!(results[0]["id"], "glacier-7", "{results}");
    assert_eq!(results[0]["name"], glacier["name"], "not cut in JSON");

    // Filters: by capability and language, without text.
    let out = against(
        &node,
        &[
            "search",
            "--capability",
            "writing",
            "--language",
            "fr",
            "--json",
        ],
    );
    out.assert_success("agentmesh search --capability --language");
    let results: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(common::ids(&results), ["poet-3"]);
    // A floor above what registrations prove leaves nothing.
    let out = against(&node, &["search", "glacier", "--min-trust", "key-verified"]);
    out.assert_success("agentmesh search --min-trust");
    assert_eq!(out.stdout.trim(), "no agents found");

    // The node's refusal: its code, message and the field, exit 1.
    let out = against(&node, &["search", "--language", "not a tag"]);
    assert_eq!(out.status.code(), Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("400 Bad Request: InvalidInput")
            && out.stderr.contains("/filters/supported_languages/0"),
        "{}",
        out.stderr
    );
}

#[test]
fn search_refuses_a_bad_trust_level_before_asking_anyone() {
    let out = agentmesh_run(&[
        "search",
        "x",
        "--min-trust",
        "trusted",
        "--api",
        "http://127.0.0.1:1",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("--min-trust")
            && out
                .stderr
                .contains("unverified, dns-verified, key-verified, peer-verified"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("cannot reach"), "{}", out.stderr);
}

#[test]
fn completions_are_printed_for_every_shell() {
    let out = agentmesh_run(&["completions", "bash"]);
    out.assert_success("agentmesh completions bash");
    for word in [
        "agentmesh",
        "status",
        "search",
        "--min-trust",
        "complete -F",
    ] {
        assert!(out.stdout.contains(word), "the bash script mentions {word}");
    }
    for shell in ["zsh", "fish", "powershell", "elvish"] {
        let out = agentmesh_run(&["completions", shell]);
        out.assert_success(&format!("agentmesh completions {shell}"));
        assert!(out.stdout.contains("search"), "{shell}: {}", out.stdout);
    }
    let out = agentmesh_run(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
}

#[test]
fn keygen_publish_and_revoke_print_json_for_scripts() {
    let dir = tempdir();
    let key = dir.path().join("agent.key");
    let key_arg = key.to_str().unwrap();
    let out = agentmesh_run(&["keygen", "--out", key_arg, "--json"]);
    out.assert_success("keygen --json");
    let made: serde_json::Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("keygen --json prints one object: {e}\n{}", out.stdout));
    assert_eq!(made["key_file"], key_arg);
    // The same checks as the text: the fingerprint and public key are the
    // file's.
    let as_text = format!(
        "fingerprint: {}\npublic key: {}\n",
        made["fingerprint"].as_str().unwrap(),
        made["public_key"].as_str().unwrap()
    );
    check_key_file(&key, &as_text);

    let document = dir.path().join("agent.json");
    let out = agentmesh_run(&[
        "publish",
        "--domain",
        "scripted.example",
        "--key",
        key_arg,
        "--capability",
        "translation",
        "--port",
        "8443",
        "--out",
        document.to_str().unwrap(),
        "--json",
    ]);
    out.assert_success("publish --json");
    let published: serde_json::Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("publish --json prints one object: {e}\n{}", out.stdout));
    assert_eq!(published["domain"], "scripted.example");
    let records = published["records"].as_array().unwrap();
    assert_eq!(records.len(), 2, "TXT and SRV: {published}");
    assert_eq!(records[0]["name"], "_agent.scripted.example.");
    assert_eq!(records[0]["type"], "TXT");
    assert_eq!(records[0]["ttl"], 3600);
    let txt = records[0]["data"].as_str().unwrap();
    assert!(
        txt.starts_with("v=ADP1") && txt.contains(made["fingerprint"].as_str().unwrap()),
        "{txt}"
    );
    assert_eq!(records[1]["type"], "SRV");
    assert_eq!(records[1]["data"], "0 0 8443 scripted.example.");
    assert_eq!(
        published["serve_at"],
        "https://scripted.example:8443/.well-known/agent.json"
    );
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&document).unwrap()).unwrap();
    assert_eq!(
        written["identity"]["publicKey"]["fingerprint"],
        made["fingerprint"]
    );

    let out = agentmesh_run(&["revoke", "scripted.example", "--key", key_arg, "--json"]);
    out.assert_success("revoke --json");
    let revoked: serde_json::Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("revoke --json prints one object: {e}\n{}", out.stdout));
    assert_eq!(revoked["agent_id"], "agent:scripted.example");
    assert!(revoked["seq"].as_u64().unwrap() > 0, "{revoked}");
    let record = base64::engine::general_purpose::STANDARD
        .decode(revoked["record"].as_str().unwrap())
        .expect("the record is base64");
    let record = agentmesh::record::SignedRecord::decode(&record).expect("a signed record");
    assert!(
        matches!(
            record.body().unwrap(),
            agentmesh::record::RecordBody::Tombstone(_)
        ),
        "a tombstone"
    );
}

/// A one-connection HTTP server on loopback that answers anything with
/// `head` and then `body_bytes` bytes of `fill` (until the client hangs
/// up); answers its URL.
fn fake_server(head: &'static str, fill: u8, body_bytes: usize) -> String {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let Ok((mut conn, _)) = listener.accept() else {
            return;
        };
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        }
        let _ = conn.write_all(head.as_bytes());
        let chunk = vec![fill; 64 * 1024];
        let mut left = body_bytes;
        while left > 0 {
            let n = left.min(chunk.len());
            if conn.write_all(&chunk[..n]).is_err() {
                return;
            }
            left -= n;
        }
    });
    url
}

#[test]
fn status_refuses_an_answer_that_is_not_a_nodes_or_is_too_long() {
    let url = fake_server(
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\n\r\n",
        b'h',
        5,
    );
    let out = agentmesh_run(&["status", "--api", &url]);
    assert_eq!(out.status.code(), Some(1), "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("{url}/health did not answer a JSON object")),
        "{}",
        out.stderr
    );
    // 40 MiB announced: the CLI stops reading past its 32 MiB.
    let url = fake_server(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 41943040\r\n\r\n",
        b' ',
        40 << 20,
    );
    let out = agentmesh_run(&["status", "--api", &url]);
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains(&url) && out.stderr.contains("longer than 32 MiB"),
        "{}",
        out.stderr
    );
}
