//! Calibration: one small scenario run by both engines, the
//! discrete-event model and real node swarms, from the same population,
//! searches and probes. The report puts them side by side; the test
//! asserts they agree within these tolerances:
//!
//! - recall within 2 percentage points;
//! - every probe reaches every node in both (propagation and revocation
//!   coverage 1);
//! - Kademlia requests of a search's provider lookup, and messages per
//!   search, within 40 % (measured: 44.7 and 48.0 requests, 60.0 and 63.3
//!   messages; the model follows rust-libp2p's iterator, but the swarms'
//!   routing tables are what their own bootstrap built, not the bucket
//!   rules' converged state).
//!
//! Latency and propagation times are printed, never compared: the model
//! runs on a WAN latency model, the swarms on an in-memory transport on a
//! shared machine. The 100- and 500-node calibration scenarios in
//! `simulations/scenarios/` are the same comparison at sizes too slow for
//! a test.

use std::path::Path;

use agentmesh_sim::population::Population;
use agentmesh_sim::report::{side_by_side, Summary};
use agentmesh_sim::scenario::Scenario;
use agentmesh_sim::{run, swarm, RunOptions};
use tokio_util::sync::CancellationToken;

const SCENARIO: &str = r#"
name = "calibration-small"
engine = "des"
seed = 11
nodes = 12
agents = 60
searches = 12
duration_s = 60
limit = 50
probe_lookups = 12

[capabilities]
vocabulary = 8
zipf_exponent = 1.0
per_agent_min = 1
per_agent_max = 2

[publish]
probes = 2
at_s = 10
interval_s = 5

[revoke]
probes = 2
at_s = 30
"#;

#[test]
fn the_model_and_real_swarms_agree_on_a_small_mesh() {
    let path = Path::new("calibration-small.toml");
    let des_scenario = Scenario::parse(SCENARIO, path).expect("the scenario is valid");
    let des = run(
        &des_scenario,
        &RunOptions {
            seed: None,
            out: None,
            write: false,
        },
        &CancellationToken::new(),
        &mut |_| {},
    )
    .expect("the DES runs");

    let swarm_scenario = Scenario::parse(
        &SCENARIO.replace(r#"engine = "des""#, r#"engine = "swarm""#),
        path,
    )
    .expect("the swarm variant is valid");
    let seed = swarm_scenario.seed;
    let params = Population::generate(&swarm_scenario, seed).swarm_params(&swarm_scenario, seed);
    let outcome = swarm::run(&params, &CancellationToken::new(), &mut |line| {
        eprintln!("swarm: {line}")
    })
    .expect("the swarms run");
    let real = Summary::from_swarm(&swarm_scenario, seed, &outcome);

    let (d, s) = (
        serde_json::to_value(&des).unwrap(),
        serde_json::to_value(&real).unwrap(),
    );
    eprintln!("{}", side_by_side(&d, &s));

    assert!(
        (des.recall - real.recall).abs() <= 0.02,
        "recall: DES {:.4}, swarm {:.4}",
        des.recall,
        real.recall
    );
    assert_eq!(
        des.propagation_coverage,
        Some(1.0),
        "the model reaches every node"
    );
    assert_eq!(
        des.revocation_coverage,
        Some(1.0),
        "the model revokes everywhere"
    );
    let live_pairs = params.publish_probes.len() * params.nodes;
    assert_eq!(
        outcome.propagation_ms.len(),
        live_pairs,
        "every probe reached every swarm node"
    );
    assert_eq!(
        outcome.revocation_ms.len(),
        params.revoke_probes * params.nodes,
        "every revocation reached every swarm node"
    );
    for (what, model, swarms) in [
        (
            "requests per provider lookup",
            des.requests_per_lookup,
            real.requests_per_lookup,
        ),
        (
            "messages per search",
            des.messages_per_search,
            real.messages_per_search,
        ),
    ] {
        assert!(
            (0.6..=1.4).contains(&(swarms / model)),
            "{what}: DES {model:.1}, swarm {swarms:.1}"
        );
    }
}
