//! A swarm run stopped by SIGTERM removes its node stores and exits with
//! 143, as a shell reports a process SIGTERM killed (Ctrl-C: 130).

#![cfg(unix)]

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

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
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let until = Instant::now() + Duration::from_secs(120);
    let stores = loop {
        let left = until.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .expect("the run names its stores' directory within 120 s");
        if let Some((_, dir)) = line.split_once("; stores under ") {
            break PathBuf::from(dir.trim());
        }
    };
    assert!(
        stores.is_dir(),
        "{} exists while the run runs",
        stores.display()
    );

    let pid = run.0.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success(), "kill -TERM {pid}");
    let until = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = run.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < until,
            "the run did not exit within 60 s of SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(143), "{status:?}");
    assert!(
        !stores.exists(),
        "{} is left after SIGTERM",
        stores.display()
    );
}
