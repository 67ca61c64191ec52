//! What the benches that drive the real `agentmesh` binary (`scope`,
//! `gateway`) share: a node started on loopback from a config file, its
//! API URL read from its "serving" line, killed and reaped on drop.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::ensure;

/// The node process, killed and reaped on drop.
pub(crate) struct NodeProc(Child);

impl Drop for NodeProc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `bin` as a node whose data lives in `dir/data`, its API and
/// p2p listeners on loopback ports of the system's choosing, with the
/// TOML `extra` after that; answers its API URL (from its "serving"
/// line, waited for at most 120 s).
pub(crate) fn start_node(
    bin: &Path,
    dir: &Path,
    extra: &str,
) -> anyhow::Result<(NodeProc, String)> {
    let config = dir.join("agentmesh.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {:?}\n\n[api]\nlisten = \"127.0.0.1:0\"\n\n[p2p]\nlisten = [\"/ip4/127.0.0.1/tcp/0\"]\n{extra}",
            dir.join("data").display().to_string()
        ),
    )?;
    let stdout = dir.join("node.out");
    let child = Command::new(bin)
        .args(["node", "--config", &config.display().to_string()])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout)?)
        .stderr(std::fs::File::create(dir.join("node.err"))?)
        .spawn()?;
    let node = NodeProc(child);
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        let text = std::fs::read_to_string(&stdout).unwrap_or_default();
        if let Some(url) = text.lines().find_map(|l| {
            let rest = l.strip_prefix("agentmesh node ")?;
            Some(rest.split_once(" serving ")?.1.trim().to_owned())
        }) {
            return Ok((node, url));
        }
        ensure!(
            Instant::now() < until,
            "the node printed no 'serving' line in 120 s: {}",
            std::fs::read_to_string(dir.join("node.err")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
