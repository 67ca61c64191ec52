//! The relevance set at scale: the queries of
//! `tests/relevance.rs` over `AGENTMESH_RELEVANCE_AGENTS` generated agents
//! (default 100000), scored for the node's search (`Registry::search_local`:
//! query understanding and the text index): precision@1, nDCG@10, the
//! queries answered with nothing though relevant agents exist, time per
//! query.
//!
//! `cargo bench --bench relevance`. The queries are anchored on the first 1,000 agents, so every size of at
//! least 1,000 has relevant agents for each.

// The test uses what the bench does not (the set's own checks).
#[allow(dead_code)]
#[path = "../tests/relevance/eval.rs"]
mod eval;
#[path = "../tests/relevance/harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "../tests/relevance/population.rs"]
mod population;
#[allow(dead_code)]
#[path = "../tests/relevance/queries.rs"]
mod queries;

use anyhow::Context as _;

const DEFAULT_AGENTS: usize = 100_000;

fn main() -> anyhow::Result<()> {
    let agents = match std::env::var("AGENTMESH_RELEVANCE_AGENTS") {
        Ok(v) => v
            .parse()
            .with_context(|| format!("AGENTMESH_RELEVANCE_AGENTS={v:?} is not a number"))?,
        Err(_) => DEFAULT_AGENTS,
    };
    anyhow::ensure!(
        agents >= population::ANCHORS,
        "the queries are anchored on the first {} agents; use at least that many",
        population::ANCHORS
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let run = runtime.block_on(harness::run(agents))?;
    println!("{run}");
    Ok(())
}
