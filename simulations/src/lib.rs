//! `agentmesh-sim`: how agentmesh's discovery behaves with thousands of
//! registries and a million agents, before anyone deploys it.
//!
//! Two engines share one scenario format ([`scenario`]), one population
//! generator ([`population`]), the types of the work and its samples
//! ([`model`]) and one report ([`report`], [`plot`]):
//! - [`des`], the discrete-event engine: 10,000–100,000 nodes in virtual
//!   time, Kademlia and the node's search modelled message by message,
//!   with the node's own key derivation and constants;
//! - [`swarm`], the real-swarm engine: the node's own mesh code, N swarms
//!   in one process over libp2p's memory transport, in wall-clock time.
//!
//! [`run`] runs one scenario and writes its outputs; `main.rs` is the CLI,
//! which also owns the signal handling: the library installs no handler
//! and only watches the cancellation token it is given.

pub mod des;
pub mod model;
pub mod plot;
pub mod population;
pub mod report;
pub mod scenario;
pub mod swarm;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use population::Population;
use report::Summary;
use scenario::{Engine, Scenario};

/// How to run one scenario.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Overrides the scenario's seed.
    pub seed: Option<u64>,
    /// Where the outputs go (default `simulations/out/<name>`); `None` with
    /// `write` false: nothing is written.
    pub out: Option<PathBuf>,
    /// Write summary.json, the CSV series and the plots.
    pub write: bool,
}

/// What a run hands to its progress display.
#[derive(Debug, Clone)]
pub enum Status {
    /// A phase starts.
    Phase(String),
    /// Searches done of all, and the virtual time reached.
    Searches {
        /// Done.
        done: u64,
        /// In all.
        total: u64,
        /// Virtual time, s.
        virtual_s: f64,
    },
}

/// Writes a run's CSV series and plots into `dir`, the same for either
/// engine.
fn write_series(dir: &Path, name: &str, series: &report::Series<'_>) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    report::write_csv(dir, series)
        .with_context(|| format!("writing CSV into {}", dir.display()))?;
    plot::write_plots(dir, name, series)
        .with_context(|| format!("drawing the plots into {}", dir.display()))
}

/// The default output directory of a scenario.
pub fn default_out(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("out").join(name)
}

/// Runs `scenario` and, when asked, writes its outputs. A swarm run
/// watches `cancel` (it stops and removes its node stores when it is
/// cancelled, answering [`swarm::Cancelled`]); the DES, which holds
/// nothing to clean up, does not.
///
/// # Errors
/// The swarm engine's error, or an output that cannot be written.
pub fn run(
    scenario: &Scenario,
    opts: &RunOptions,
    cancel: &CancellationToken,
    status: &mut dyn FnMut(Status),
) -> anyhow::Result<Summary> {
    let started = Instant::now();
    let seed = opts.seed.unwrap_or(scenario.seed);
    status(Status::Phase(format!(
        "generating {} nodes and {} agents",
        scenario.nodes, scenario.agents
    )));
    let pop = Population::generate(scenario, seed);
    let out_dir = opts
        .out
        .clone()
        .unwrap_or_else(|| default_out(&scenario.name));
    let summary = match scenario.engine {
        Engine::Des => {
            status(Status::Phase("placing the converged state".into()));
            let outcome = des::run(scenario, &pop, seed, &mut |p| {
                status(Status::Searches {
                    done: p.done,
                    total: p.total,
                    virtual_s: p.virtual_s,
                })
            });
            let mut summary =
                Summary::from_des(scenario, seed, &outcome, started.elapsed().as_secs_f64());
            summary.keygen_s = Some(pop.keygen_s);
            if opts.write {
                write_series(&out_dir, &scenario.name, &(&outcome).into())?;
            }
            summary
        }
        Engine::Swarm => {
            let params = pop.swarm_params(scenario, seed);
            drop(pop);
            let outcome = swarm::run(&params, cancel, &mut |line| {
                status(Status::Phase(line.to_owned()))
            })?;
            if opts.write {
                write_series(&out_dir, &scenario.name, &(&outcome).into())?;
            }
            Summary::from_swarm(scenario, seed, &outcome)
        }
    };
    if opts.write {
        std::fs::create_dir_all(&out_dir)
            .with_context(|| format!("creating {}", out_dir.display()))?;
        let path = out_dir.join("summary.json");
        std::fs::write(&path, serde_json::to_string_pretty(&summary)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(summary)
}
