use std::path::Path;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::super::Sim;
use super::choose;
use crate::population::Population;
use crate::scenario::Scenario;

/// The node's own cases (`src/search/tests.rs`), over node indices.
#[test]
fn the_providers_and_a_quarter_more_connected_peers_trusted_first() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let providers: Vec<u32> = (0..40).collect();
    let speakers: Vec<u32> = (100..130).collect();
    let trusted = [105, 117];
    let chosen = choose(&providers, &speakers, |p| trusted.contains(p), 16, &mut rng);
    assert_eq!(chosen.len(), 20, "16 providers and 4 more");
    let unique: std::collections::HashSet<_> = chosen.iter().collect();
    assert_eq!(unique.len(), 20, "each peer asked once");
    assert!(chosen[..16].iter().all(|p| providers.contains(p)));
    assert!(
        trusted.iter().all(|t| chosen[16..18].contains(t)),
        "{chosen:?}"
    );
    assert!(chosen[16..].iter().all(|p| speakers.contains(p)));
    // The providers asked are drawn at random, not the first found.
    let mut orders = std::collections::HashSet::new();
    for _ in 0..8 {
        let c = choose(&providers, &speakers, |_| false, 16, &mut rng);
        assert!(c[16..].iter().all(|p| speakers.contains(p)), "{c:?}");
        orders.insert(c[..16].to_vec());
    }
    assert!(orders.len() > 1, "the providers asked vary");
    assert!(!orders.contains(&providers[..16]));
}

#[test]
fn few_providers_are_all_asked_with_a_quarter_more_and_none_leaves_the_connected_peers() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let providers = [1, 2, 3];
    // A provider the asker is connected to is asked once, as one.
    let speakers: Vec<u32> = (100..120).chain([1]).collect();
    let chosen = choose(&providers, &speakers, |_| false, 16, &mut rng);
    assert_eq!(chosen.len(), 7, "{chosen:?}");
    assert!(
        providers.iter().all(|p| chosen[..3].contains(p)),
        "{chosen:?}"
    );
    assert!(chosen[3..].iter().all(|p| !providers.contains(p)));
    // No providers: the connected peers fill the fan-out, trusted first.
    let chosen = choose(&[], &speakers, |p| *p == 105, 16, &mut rng);
    assert_eq!(chosen.len(), 16);
    assert_eq!(chosen[0], 105);
    assert!(chosen.iter().all(|p| speakers.contains(p)));
    // A fan-out of one: a provider, and a trusted peer besides.
    let one = choose(&providers, &speakers, |p| *p == 105, 1, &mut rng);
    assert_eq!(one.len(), 2);
    assert!(providers.contains(&one[0]) && one[1] == 105, "{one:?}");
    // Nobody connected: the providers, all of them up to the fan-out.
    let chosen = choose(&providers, &[], |_| false, 16, &mut rng);
    assert_eq!(chosen.len(), 3);
}

fn small(judge: &str) -> Scenario {
    let text = format!(
        r#"
name = "t"
engine = "des"
seed = 5
nodes = 40
agents = 400
searches = 4
probe_lookups = 0
replication = "lookups"
[capabilities]
vocabulary = 10
[adversarial]
share = 0.1
behaviour = "takeover"
judge = "{judge}"
"#
    );
    Scenario::parse(&text, Path::new("test.toml")).unwrap()
}

#[test]
fn a_forgers_version_is_judged_by_the_rule() {
    for (rule, replaces) in [("owner", false), ("highest_seq", true)] {
        let sc = small(rule);
        let pop = Population::generate(&sc, 5);
        let mut sim = Sim::place(&sc, &pop, 5);
        let n = 0u32;
        let own = pop
            .home
            .iter()
            .position(|&h| h == n)
            .expect("node 0 homes an agent") as u32;
        let mut others = (0..pop.home.len() as u32).filter(|&a| pop.home[a as usize] != n);
        let (first_met, held_before) = (others.next().unwrap(), others.next().unwrap());

        // Its own registration: replaced only under the highest seq.
        sim.judge_record(n, own, true, 0);
        assert_eq!(
            sim.is_forged(n, own),
            replaces,
            "{rule}: a local registration"
        );

        // An id it meets first in a forger's version: kept, whoever
        // signed it; the owner's version then loses.
        sim.judge_record(n, first_met, true, 0);
        assert!(sim.is_forged(n, first_met), "{rule}: first met");
        sim.judge_record(n, first_met, false, 0);
        assert!(sim.is_forged(n, first_met), "{rule}: the owner's after");

        // An id it holds from its owner: the forger's replaces it only
        // under the highest seq.
        sim.judge_record(n, held_before, false, 0);
        assert!(!sim.is_forged(n, held_before));
        sim.judge_record(n, held_before, true, 0);
        assert_eq!(sim.is_forged(n, held_before), replaces, "{rule}: held");

        let c = &sim.out.counters;
        assert_eq!(c.owner_refused, 1, "{rule}");
        if replaces {
            assert_eq!((c.takeover_stored, c.takeover_refused), (3, 0), "{rule}");
        } else {
            assert_eq!((c.takeover_stored, c.takeover_refused), (1, 2), "{rule}");
        }
    }
}
