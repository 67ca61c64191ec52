//! A swarm run stopped by SIGTERM removes its node stores and exits with
//! 143, as a shell reports a process SIGTERM killed (Ctrl-C: 130); and a
//! Ctrl-C after a run has ended still ends the process: the library
//! installs no signal handler (the CLI does), so none outlives a run.

#![cfg(unix)]

use std::io::BufRead;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use agentmesh::config::Replication;
use agentmesh_sim::model::{SearchKind, SwarmAgent, SwarmParams, SwarmSearch};
use agentmesh_sim::scenario::Security;
use agentmesh_sim::swarm;
use tokio_util::sync::CancellationToken;

/// Enough searches that the run is still searching when the signal comes
/// (it is sent as soon as the swarm has bootstrapped).
const SCENARIO: &str = r#"
name = "interrupted"
engine = "swarm"
seed = 3
nodes = 4
agents = 8
searches = 100000
"#;

/// Kills the run on drop, should the test fail before it ends.
struct Run(Child);

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The first line of `out` that `pick` accepts, read within `secs`
/// seconds (`what` names it in the failure).
fn first_line<T>(
    out: impl std::io::Read + Send + 'static,
    secs: u64,
    what: &str,
    mut pick: impl FnMut(&str) -> Option<T>,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .unwrap_or_else(|e| panic!("{what} within {secs} s: {e}"));
        if let Some(found) = pick(&line) {
            return found;
        }
    }
}

/// Sends `signal` (`INT`, `TERM`) to the run and waits up to 60 s for it
/// to exit; how it exited.
fn signal_and_wait(run: &mut Run, signal: &str) -> ExitStatus {
    let pid = run.0.id().to_string();
    let sent = Command::new("kill")
        .args([format!("-{signal}"), pid.clone()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -{signal} {pid}");
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = run.0.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < until,
            "the run did not exit within 60 s of SIG{signal}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sigterm_removes_the_node_stores_and_exits_143() {
    let work = tempfile::tempdir().unwrap();
    let scenario = work.path().join("interrupted.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let mut run = Run(Command::new(env!("CARGO_BIN_EXE_agentmesh-sim"))
        .arg("run")
        .arg(&scenario)
        .arg("--out")
        .arg(work.path().join("out"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap());
    // Without a terminal each phase is a line on stderr; the bootstrap's
    // names the stores' directory.
    let stderr = run.0.stderr.take().unwrap();
    let stores = first_line(stderr, 120, "the run names its stores' directory", |line| {
        line.split_once("; stores under ")
            .map(|(_, dir)| PathBuf::from(dir.trim()))
    });
    assert!(
        stores.is_dir(),
        "{} exists while the run runs",
        stores.display()
    );

    assert_eq!(signal_and_wait(&mut run, "TERM").code(), Some(143));
    assert!(
        !stores.exists(),
        "{} is left after SIGTERM",
        stores.display()
    );
}

/// Set in the process the next test starts of itself: it runs a small
/// swarm, says so on stdout, then waits as the CLI would while writing
/// the report.
const CHILD: &str = "AGENTMESH_SIM_AFTER_RUN_CHILD";
/// The child's line once its run has ended.
const RAN: &str = "the swarm run ended";

/// The library's run leaves SIGINT its default fate: the child is killed
/// by it (a shell reports 130), not left running.
#[test]
fn ctrl_c_after_a_swarm_run_ends_the_process() {
    if std::env::var_os(CHILD).is_some() {
        after_a_run();
    }
    let name = "ctrl_c_after_a_swarm_run_ends_the_process";
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    // A test run started as a background job of a non-interactive shell
    // (`cargo test ... &`) ignores SIGINT, and a child inherits that; the
    // child starts with SIGINT's default disposition, so what it shows is
    // what the library does to it.
    // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
    unsafe {
        use std::os::unix::process::CommandExt;
        child.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut run = Run(child.spawn().unwrap());
    let stdout = run.0.stdout.take().unwrap();
    // libtest's own "test NAME ... " comes first on the line.
    first_line(stdout, 120, "the child's swarm run ends", |line| {
        line.trim_end().ends_with(RAN).then_some(())
    });
    // The child waits 120 s for the signal before it exits 0 of itself.
    assert_eq!(signal_and_wait(&mut run, "INT").signal(), Some(2));
}

/// The child's part: a run of four nodes, then a wait for the signal.
fn after_a_run() -> ! {
    let agent = |home, capability: &str| SwarmAgent {
        home,
        capabilities: vec![capability.to_owned()],
    };
    let params = SwarmParams {
        nodes: 4,
        agents: (0..8).map(|i| agent(i % 4, "cap-0")).collect(),
        searches: (0..4)
            .map(|from| SwarmSearch {
                from,
                capability: "cap-0".to_owned(),
                at: Duration::ZERO,
                kind: SearchKind::Normal,
            })
            .collect(),
        publish_probes: vec![agent(1, "cap-1")],
        publish_at: Vec::new(),
        revoke_probes: 1,
        revoke_at: Duration::ZERO,
        limit: 10,
        search_timeout: Duration::from_secs(2),
        search_ends_when_full: true,
        max_connections: None,
        trim_connections: true,
        security: Security::Noise,
        replication: Replication::All,
        outages: Vec::new(),
        seed: 5,
    };
    let outcome = swarm::run(&params, &CancellationToken::new(), &mut |line| {
        eprintln!("[child] {line}")
    });
    assert!(outcome.is_ok(), "the child's run: {:?}", outcome.err());
    println!("{RAN}");
    std::thread::sleep(Duration::from_secs(120));
    std::process::exit(0);
}
