//! The `agentmesh-sim` CLI: `run SCENARIO.toml [--seed N] [--out DIR]
//! [--json]` and `compare A.json B.json`. Progress goes to stderr.

use std::path::PathBuf;

use agentmesh_sim::scenario::Scenario;
use agentmesh_sim::{run, RunOptions, Status};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

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
            let summary = match run(&sc, &opts, &mut status) {
                Ok(summary) => summary,
                Err(e) => {
                    bar.finish_and_clear();
                    if let Some(i) = e.downcast_ref::<agentmesh_sim::swarm::Interrupted>() {
                        eprintln!("{i}");
                        std::process::exit(i.exit_code());
                    }
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
