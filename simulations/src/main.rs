//! The `agentmesh-sim` CLI: `run SCENARIO.toml [--seed N] [--out DIR]
//! [--json]` and `compare A.json B.json`. Progress goes to stderr.
//!
//! The CLI owns the signal handling: a SIGINT (Ctrl-C) or SIGTERM during
//! a swarm run cancels the run's token, so the run stops its nodes and
//! removes their stores before the process exits; at any other time the
//! process exits at once. Either way the exit code is 128 + the signal's
//! number (130, 143), as a shell reports a process the signal killed.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use agentmesh_sim::scenario::{Engine, Scenario};
use agentmesh_sim::swarm::Cancelled;
use agentmesh_sim::{run, RunOptions, Status};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use tokio_util::sync::CancellationToken;

// As `agentmesh` itself: hundreds of in-process nodes allocate and free
// buffers, frames and futures, and glibc's malloc was a sixth of a
// 500-node swarm's CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "agentmesh-sim",
    version,
    about = "Simulate agentmesh discovery at scale"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one scenario; outputs into --out (default simulations/out/<name>).
    Run {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// Seed (overrides the scenario's).
        #[arg(long)]
        seed: Option<u64>,
        /// Output directory.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print the summary as one JSON object on the last line of stdout.
        #[arg(long)]
        json: bool,
    },
    /// A Markdown table of summaries, one row each.
    Table {
        /// summary.json files.
        summaries: Vec<PathBuf>,
    },
    /// Put two summaries (e.g. DES and swarm) side by side.
    Compare {
        /// The first summary.json.
        a: PathBuf,
        /// The second summary.json.
        b: PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    let signals = Signals::listen();
    match Cli::parse().command {
        Command::Run {
            scenario,
            seed,
            out,
            json,
        } => {
            let sc = match Scenario::load(&scenario) {
                Ok(sc) => sc,
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(2);
                }
            };
            let bar = ProgressBar::new(0).with_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} searches {msg}",
                )
                .expect("a valid template"),
            );
            let mut status = |s: Status| match s {
                // Without a terminal (a log file) the bar is hidden:
                // each phase is a line of its own.
                Status::Phase(p) if bar.is_hidden() => eprintln!("{p}"),
                Status::Phase(p) => bar.set_message(p),
                Status::Searches {
                    done,
                    total,
                    virtual_s,
                } => {
                    bar.set_length(total);
                    bar.set_position(done);
                    bar.set_message(format!("virtual {virtual_s:.0} s"));
                }
            };
            let opts = RunOptions {
                seed,
                out,
                write: true,
            };
            // Only the swarm engine has stores to remove: it watches the
            // token; a signal during the DES ends the process at once.
            let cancel = signals.watch(sc.engine == Engine::Swarm);
            let outcome = run(&sc, &opts, &cancel, &mut status);
            let signal = signals.unwatch();
            let summary = match (outcome, signal) {
                (Ok(summary), None) => summary,
                (Err(e), Some(signal)) if e.is::<Cancelled>() => {
                    bar.finish_and_clear();
                    eprintln!("interrupted by signal {signal}; the node stores are removed");
                    std::process::exit(128 + signal);
                }
                (Ok(_), Some(signal)) => {
                    // A swarm run answers Cancelled once its token is
                    // cancelled; should one end first, the signal wins.
                    bar.finish_and_clear();
                    std::process::exit(128 + signal);
                }
                (Err(e), _) => {
                    bar.finish_and_clear();
                    return Err(e);
                }
            };
            bar.finish_and_clear();
            println!("{}", summary.text());
            if json {
                println!("{}", serde_json::to_string(&summary)?);
            }
        }
        Command::Compare { a, b } => {
            print!(
                "{}",
                agentmesh_sim::report::side_by_side(&read_json(&a)?, &read_json(&b)?)
            );
        }
        Command::Table { summaries } => {
            let all = summaries
                .iter()
                .map(read_json)
                .collect::<anyhow::Result<Vec<_>>>()?;
            print!("{}", agentmesh_sim::report::markdown_table(&all));
        }
    }
    Ok(())
}

fn read_json(p: &PathBuf) -> anyhow::Result<serde_json::Value> {
    use anyhow::Context;
    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", p.display()))
}

/// What the CLI and its signal thread share.
#[derive(Default)]
struct Watching {
    /// The token of the run that watches it, if one does: a signal then
    /// cancels it instead of ending the process.
    run: Option<CancellationToken>,
    /// The signal that cancelled it.
    signal: Option<i32>,
}

/// The CLI's signal handling (see the module documentation): a thread
/// that waits for SIGINT and SIGTERM and either cancels the watching
/// run's token or exits.
#[derive(Clone)]
struct Signals(Arc<Mutex<Watching>>);

impl Signals {
    /// Starts the signal thread. Where the signals cannot be listened
    /// for, they keep their default fate.
    fn listen() -> Self {
        let signals = Signals(Arc::default());
        let shared = signals.clone();
        let spawned = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || wait_for_signals(|signal| shared.on_signal(signal)));
        if let Err(e) = spawned {
            eprintln!("warning: no signal thread ({e}); Ctrl-C will not remove a run's stores");
        }
        signals
    }

    /// A new token for a run; if the run `watches` it, a signal cancels
    /// it until [`Signals::unwatch`].
    fn watch(&self, watches: bool) -> CancellationToken {
        let token = CancellationToken::new();
        let mut w = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        w.run = watches.then(|| token.clone());
        w.signal = None;
        token
    }

    /// The run has returned: from now on a signal exits at once. Answers
    /// the signal that cancelled the run, if one did.
    fn unwatch(&self) -> Option<i32> {
        let mut w = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        w.run = None;
        w.signal.take()
    }

    fn on_signal(&self, signal: i32) {
        let mut w = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match &w.run {
            // A second signal while the run removes its stores changes
            // nothing: the first one's exit code stands.
            Some(run) => {
                run.cancel();
                w.signal.get_or_insert(signal);
            }
            None => std::process::exit(128 + signal),
        }
    }
}

/// Calls `on` with each SIGINT's or SIGTERM's number, for the life of
/// the process.
#[cfg(unix)]
fn wait_for_signals(on: impl Fn(i32)) {
    use signal_hook::consts::{SIGINT, SIGTERM};
    match signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
        Ok(mut signals) => signals.forever().for_each(on),
        Err(e) => eprintln!("warning: cannot listen for signals ({e})"),
    }
}

/// Calls `on` with 2 at each Ctrl-C, for the life of the process.
#[cfg(not(unix))]
fn wait_for_signals(on: impl Fn(i32)) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    runtime.block_on(async {
        while tokio::signal::ctrl_c().await.is_ok() {
            on(2);
        }
    });
}
