//! Where a run's node stores live: one temporary directory per run, in
//! `/dev/shm` when it exists, named with the process id so that the next
//! run can remove the directories of runs whose process is gone.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// How a run's temporary directory is named: this prefix, the process
/// id, `-`, and tempfile's random suffix (`agentmesh-swarm-4242-Xa9cQ1`).
pub const TEMP_PREFIX: &str = "agentmesh-swarm-";

/// Where the node stores go: `/dev/shm` (memory-backed) when it exists,
/// else the system's temporary directory.
pub fn temp_base() -> PathBuf {
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir() {
        shm
    } else {
        std::env::temp_dir()
    }
}

/// The temporary directory the node stores live under (see the module
/// documentation), after removing those of dead runs.
pub(super) fn temp_root(progress: &mut dyn FnMut(&str)) -> Result<tempfile::TempDir> {
    let base = temp_base();
    for dir in remove_stale_dirs(&base) {
        progress(&format!(
            "removed {}, left by a run that is gone",
            dir.display()
        ));
    }
    tempfile::Builder::new()
        .prefix(&format!("{TEMP_PREFIX}{}-", std::process::id()))
        .tempdir_in(&base)
        .with_context(|| format!("a temporary directory under {}", base.display()))
}

/// Removes the run directories under `base` whose process is gone: named
/// [`TEMP_PREFIX`]`<pid>-…` with no `/proc/<pid>`. Only where `/proc`
/// exists (Linux), and never a directory named otherwise (one of a run
/// before the pid was in the name) or of a live process, whatever it runs
/// now. A run in another pid namespace sharing `base` would look dead:
/// this assumes one machine's runs. Answers the directories removed.
pub fn remove_stale_dirs(base: &Path) -> Vec<PathBuf> {
    let proc_ = Path::new("/proc");
    if !proc_.join("self").exists() {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(base) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(TEMP_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let path = entry.path();
        if pid == std::process::id() || proc_.join(pid.to_string()).exists() || !path.is_dir() {
            continue;
        }
        if std::fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_directories_of_dead_runs_are_removed() {
        let base = tempfile::tempdir().unwrap();
        // A process that has exited: its pid is free (until reused, and
        // then the directory is kept, which errs on the safe side).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let live = std::process::id();
        let make = |name: &str| {
            let p = base.path().join(name);
            std::fs::create_dir_all(p.join("node-00000")).unwrap();
            std::fs::write(p.join("node-00000/db"), b"x").unwrap();
            p
        };
        let stale = make(&format!("{TEMP_PREFIX}{dead}-abc123"));
        let ours = make(&format!("{TEMP_PREFIX}{live}-def456"));
        let unnamed = make(&format!("{TEMP_PREFIX}Xa9cQ1"));
        let other = make(&format!("other-{dead}-abc"));
        if !std::path::Path::new("/proc/self").exists() {
            // No way to tell a dead run from a live one: nothing goes.
            assert!(remove_stale_dirs(base.path()).is_empty());
            return;
        }
        assert_eq!(remove_stale_dirs(base.path()), vec![stale.clone()]);
        assert!(!stale.exists());
        assert!(ours.exists() && unnamed.exists() && other.exists());
    }
}
