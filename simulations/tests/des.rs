//! The discrete-event engine at small N: deterministic under a seed,
//! complete on a converged network, Kademlia lookups as short as the
//! bucket rules promise, and tombstones that reach every live node.

use std::path::Path;

use agentmesh_sim::population::Population;
use agentmesh_sim::report::Summary;
use agentmesh_sim::scenario::{Scenario, SearchChoice};
use agentmesh_sim::{run, RunOptions};
use tokio_util::sync::CancellationToken;

fn scenario(extra: &str) -> Scenario {
    let text = format!(
        r#"
name = "t"
engine = "des"
seed = 3
nodes = 300
agents = 3000
searches = 150
duration_s = 60
probe_lookups = 150
replication = "lookups"
[capabilities]
vocabulary = 50
{extra}
"#
    );
    Scenario::parse(&text, Path::new("test.toml")).unwrap()
}

fn summary(sc: &Scenario, seed: Option<u64>) -> Summary {
    let opts = RunOptions {
        seed,
        out: None,
        write: false,
    };
    run(sc, &opts, &CancellationToken::new(), &mut |_| {}).unwrap()
}

/// The summary without what depends on the machine (wall time, memory).
fn figures(s: &Summary) -> serde_json::Value {
    let mut v = serde_json::to_value(s).unwrap();
    let o = v.as_object_mut().unwrap();
    for k in ["wall_s", "peak_rss_mb", "setup_s", "keygen_s"] {
        o.remove(k);
    }
    v
}

#[test]
fn the_same_seed_gives_the_same_numbers() {
    let sc = scenario("[publish]\nprobes = 2\nat_s = 5\n[churn.session]\ndistribution = \"weibull\"\nshape = 0.5\nscale_s = 600\n[churn.downtime]\ndistribution = \"lognormal\"\nmedian_s = 300\nsigma = 1.0\n");
    let a = figures(&summary(&sc, None));
    let b = figures(&summary(&sc, None));
    assert_eq!(a, b);
    let c = figures(&summary(&sc, Some(99)));
    assert_ne!(a, c, "another seed, other numbers");
    // The population itself is a function of the seed.
    let p = Population::generate(&sc, 3);
    let q = Population::generate(&sc, 3);
    assert_eq!(p.peers, q.peers);
    assert_eq!(p.home, q.home);
}

#[test]
fn a_converged_network_without_churn_finds_everything() {
    let s = summary(&scenario(""), None);
    assert_eq!(s.searches, 150);
    assert_eq!(s.recall, 1.0, "{}", s.text());
    assert!(s.requests_per_lookup > 0.0);
    assert!(s.messages_per_search > s.requests_per_lookup);
    // No node is down and no message lost: every request is answered.
    assert_eq!(s.failed_requests_per_lookup, 0.0, "{}", s.text());
}

#[test]
fn lost_provider_announcements_make_lookups_ask_further() {
    let whole = summary(&scenario(""), None);
    let mut lossy = scenario("");
    lossy.lost_announcements = 0.5;
    let lossy = summary(&lossy, None);
    assert!(
        lossy.requests_per_lookup > whole.requests_per_lookup,
        "{} against {}",
        lossy.requests_per_lookup,
        whole.requests_per_lookup
    );
    // The requests that rose are answered ones: a provider nobody holds
    // makes a lookup ask further, not fail.
    assert_eq!(lossy.failed_requests_per_lookup, 0.0);
}

#[test]
fn lookups_take_the_hops_kademlia_promises() {
    let s = summary(&scenario(""), None);
    let l = s.lookups.as_ref().unwrap();
    assert_eq!(l.count, 150);
    assert!(l.reached_closest >= 0.99, "{}", s.text());
    // log2(300 / 20) ~ 4 bits to resolve: a handful of hops at most.
    assert!(l.hops.p50 >= 1.0 && l.hops.p95 <= 4.0, "{}", s.text());
    // The searches' own provider lookups record their hops too.
    let h = s.lookup_hops.expect("the model counts a search's hops");
    assert!(h.p50 >= 1.0, "{}", s.text());
    // alpha = 3 in flight until the 20 closest answered: at least k requests.
    assert!(
        l.requests_mean >= 20.0 && l.requests_mean <= 80.0,
        "{}",
        s.text()
    );
}

#[test]
fn a_tombstone_reaches_every_live_node_and_stale_results_are_counted() {
    let sc = scenario("[revoke]\nprobes = 5\nat_s = 10\nsearches = 300\nwindow_s = 0.3\n");
    let s = summary(&sc, None);
    assert_eq!(s.revocation_coverage, Some(1.0), "{}", s.text());
    assert!(s.revocation_ms.p99 > 0.0);
    // Searches right after the tombstone, from nodes it has not reached yet
    // but whose peers hold the revoked agents, return them.
    assert!(s.recall_by_kind["revoked"].is_number());
}

#[test]
fn a_partition_cuts_recall_and_publications_do_not_cross_it() {
    let sc = scenario(
        "[[partitions]]\nstart_s = 0\nheal_s = 60\nfraction = 0.4\n[publish]\nprobes = 2\nat_s = 5\n",
    );
    let s = summary(&sc, None);
    assert!(s.recall < 1.0, "{}", s.text());
    let coverage = s.propagation_coverage.unwrap();
    assert!(coverage < 0.95 && coverage > 0.3, "{}", s.text());
}

#[test]
fn an_eclipsed_capability_is_found_less_than_the_others() {
    let sc = scenario(
        "[adversarial]\nshare = 0.0\n[adversarial.eclipse]\ncapability_rank = 30\nsearch_share = 0.3\n",
    );
    let s = summary(&sc, None);
    let eclipsed = s.recall_by_kind["eclipsed"].as_f64().unwrap();
    let normal = s.recall_by_kind["normal"].as_f64().unwrap();
    assert!(eclipsed < normal, "{}", s.text());
}

#[test]
fn an_eclipse_naming_sybil_providers_leaves_searches_the_quarter_of_connected_peers() {
    let eclipse = "[adversarial]\nshare = 0.0\n[adversarial.eclipse]\ncapability_rank = 5\n\
                   search_share = 0.3\nproviders = \"sybils\"\n";
    let mixed = summary(&scenario(eclipse), None);
    let before = summary(
        &scenario(&format!(
            "{eclipse}[node]\nsearch_choice = \"providers_first\"\n"
        )),
        None,
    );
    let recall = |s: &Summary| s.recall_by_kind["eclipsed"].as_f64().unwrap();
    // Before, every peer asked was a sybil that answers nothing: only
    // what the asker held itself was found.
    assert!(recall(&before) < 0.2, "{}", before.text());
    assert!(
        recall(&mixed) > recall(&before) + 0.2,
        "{}\n{}",
        mixed.text(),
        before.text()
    );
    assert_eq!(mixed.node.search_choice, SearchChoice::Mixed);
}

#[test]
fn a_search_that_ends_when_its_answer_is_full_is_faster_and_finds_as_much() {
    let s = |ends: bool| {
        let sc = scenario(&format!("[node]\nsearch_ends_when_full = {ends}\n"));
        summary(&sc, None)
    };
    let (full, all) = (s(true), s(false));
    assert!(full.node.search_ends_when_full && !all.node.search_ends_when_full);
    // Each search still finds a page: the answer is full when it ends.
    assert_eq!(full.recall, 1.0, "{}", full.text());
    assert_eq!(all.recall, 1.0, "{}", all.text());
    // The slowest providers no longer set the time, and the answers a
    // search did not wait for are not counted as its messages.
    assert!(
        full.latency_ms.p50 < all.latency_ms.p50 && full.latency_ms.p95 < all.latency_ms.p95,
        "when full: {}\nall answered: {}",
        full.text(),
        all.text()
    );
    assert!(full.messages_per_search < all.messages_per_search);
}

#[test]
fn the_search_choice_of_before_issue_44_asks_only_providers_when_it_has_them() {
    let s = |choice: &str| {
        let sc = scenario(&format!("[node]\nsearch_choice = \"{choice}\"\n"));
        summary(&sc, None)
    };
    let (mixed, before) = (s("mixed"), s("providers_first"));
    // A converged network finds everything either way.
    assert_eq!(mixed.recall, 1.0, "{}", mixed.text());
    assert_eq!(before.recall, 1.0, "{}", before.text());
    assert_ne!(figures(&mixed), figures(&before));
}

#[test]
fn a_takeover_is_judged_by_the_askers_rule() {
    let takeover = |judge: &str| {
        let sc = scenario(&format!(
            "[adversarial]\nshare = 0.2\nbehaviour = \"takeover\"\njudge = \"{judge}\"\n"
        ));
        summary(&sc, None)
    };
    let (owner, highest) = (takeover("owner"), takeover("highest_seq"));
    let share = |s: &Summary| s.taken_over.expect("a takeover scenario reports it");
    assert!(
        share(&owner) > 0.0,
        "an id met first is the first signer's: {}",
        owner.text()
    );
    assert!(
        share(&highest) > share(&owner),
        "{}\n{}",
        highest.text(),
        owner.text()
    );
    assert!(
        owner.recall > highest.recall,
        "{}\n{}",
        owner.text(),
        highest.text()
    );
    let (o, h) = (owner.counters.unwrap(), highest.counters.unwrap());
    assert!(o.takeover_refused > 0, "{o:?}");
    assert_eq!(h.takeover_refused, 0, "{h:?}");
    // Without the behaviour there is no such figure.
    let plain = summary(&scenario(""), None);
    assert_eq!(plain.taken_over, None);
    assert_eq!(plain.searches_taken_over, None);
}

#[test]
fn a_swarm_scenario_maps_onto_the_same_population() {
    let des = scenario("[publish]\nprobes = 2\n[revoke]\nprobes = 3\n");
    let mut swarm = des.clone();
    swarm.engine = agentmesh_sim::scenario::Engine::Swarm;
    let p = Population::generate(&des, 3).swarm_params(&swarm, 3);
    assert_eq!(p.nodes, 300);
    assert_eq!(p.agents.len(), 3000);
    assert_eq!(p.searches.len(), 150);
    assert_eq!(p.publish_probes.len(), 2);
    assert_eq!(p.revoke_probes, 3);
    assert!(p
        .agents
        .iter()
        .all(|a| a.home < 300 && !a.capabilities.is_empty()));
    assert!(p.searches.iter().all(|s| s.capability.starts_with("cap-")));
    assert_eq!(
        p.search_timeout,
        agentmesh::config::P2pConfig::default().search_timeout
    );
}

#[test]
fn a_run_writes_its_summary_series_and_plots() {
    let dir = std::env::temp_dir().join(format!("agentmesh-sim-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let sc = scenario("[publish]\nprobes = 1\nat_s = 5\n");
    let opts = RunOptions {
        seed: None,
        out: Some(dir.clone()),
        write: true,
    };
    let s = run(&sc, &opts, &CancellationToken::new(), &mut |_| {}).unwrap();
    for f in [
        "summary.json",
        "searches.csv",
        "lookups.csv",
        "convergence.csv",
        "recall_over_time.svg",
        "latency_cdf.svg",
        "messages_per_search.svg",
        "convergence.svg",
    ] {
        let len = std::fs::metadata(dir.join(f)).map(|m| m.len()).unwrap_or(0);
        assert!(len > 0, "{f} missing or empty");
    }
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    for key in [
        "engine",
        "nodes",
        "agents",
        "searches",
        "recall",
        "latency_ms",
        "requests_per_lookup",
        "messages_per_search",
        "propagation_ms",
        "wall_s",
        "peak_rss_mb",
    ] {
        assert!(written.get(key).is_some(), "summary.json lacks {key}");
    }
    assert_eq!(written["searches"], 150);
    let lines = std::fs::read_to_string(dir.join("searches.csv"))
        .unwrap()
        .lines()
        .count();
    assert_eq!(lines, 151, "a header and one line per search");
    // Two summaries side by side: the same run differs by nothing.
    let table = agentmesh_sim::report::side_by_side(&written, &serde_json::to_value(&s).unwrap());
    assert!(
        table.contains("recall") && table.contains("+0.0000"),
        "{table}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The `lookup_requests` column of a run's `searches.csv`, one per search.
fn lookup_requests_per_search(sc: &Scenario) -> Vec<u32> {
    let dir = tempfile::tempdir().unwrap();
    let opts = RunOptions {
        seed: None,
        out: Some(dir.path().to_path_buf()),
        write: true,
    };
    run(sc, &opts, &CancellationToken::new(), &mut |_| {}).unwrap();
    let csv = std::fs::read_to_string(dir.path().join("searches.csv")).unwrap();
    let mut lines = csv.lines();
    let column = lines
        .next()
        .unwrap()
        .split(',')
        .position(|c| c == "lookup_requests")
        .unwrap();
    lines
        .map(|l| l.split(',').nth(column).unwrap().parse().unwrap())
        .collect()
}

#[test]
fn a_search_its_own_provider_store_answers_sends_no_lookup_request() {
    // 20 nodes and k = 20: every node is among the closest to every shard
    // key, so every asker holds every provider record, and two capabilities
    // over 400 agents give each far more providers than a search asks. The
    // node answers such a call before libp2p sends anything.
    let text = r#"
name = "t"
engine = "des"
seed = 3
nodes = 20
agents = 400
searches = 40
duration_s = 30
probe_lookups = 0
replication = "lookups"
[capabilities]
vocabulary = 2
per_agent_min = 1
per_agent_max = 1
"#;
    let sc = Scenario::parse(text, Path::new("test.toml")).unwrap();
    let requests = lookup_requests_per_search(&sc);
    assert_eq!(requests.len(), 40);
    assert!(
        requests.iter().all(|&r| r == 0),
        "lookup requests per search: {requests:?}"
    );
    let s = summary(&sc, None);
    assert!(s.recall > 0.99, "recall {}", s.recall);

    // With 200 nodes the providers sit on other nodes, and lookups ask.
    let wider = Scenario::parse(
        &text.replace("nodes = 20", "nodes = 200"),
        Path::new("test.toml"),
    )
    .unwrap();
    assert!(lookup_requests_per_search(&wider).iter().any(|&r| r > 0));
}

#[test]
fn a_down_node_that_refuses_is_passed_over_at_once_and_a_silent_one_times_out() {
    let churn = "[churn.session]\ndistribution = \"weibull\"\nshape = 0.5\nscale_s = 600\n[churn.downtime]\ndistribution = \"lognormal\"\nmedian_s = 300\nsigma = 1.0\n";
    // Searches wait for every peer asked, so that a silent one holds them
    // (a search ending once its answer is full is not held by it).
    let all = "[node]\nsearch_ends_when_full = false\n";
    let silent = summary(&scenario(&format!("{churn}{all}")), None);
    let refusing = summary(
        &scenario(&format!("[churn]\nrefused_rtts = 0.0\n{churn}{all}")),
        None,
    );
    let (s, r) = (
        silent.counters.clone().unwrap(),
        refusing.counters.clone().unwrap(),
    );
    assert_eq!(s.kad_refused, 0);
    assert!(s.kad_timeouts > 0, "down nodes are silent by default");
    // Nothing else is lost in this scenario: every failure is a refusal.
    assert!(r.kad_refused > 0);
    assert_eq!(r.kad_timeouts, 0);
    // The lookups' refusals show in their own figures. A silent node's
    // request is still pending when the lookup's share of the budget
    // ends (the per-peer timeout is 10 s): not a failure, as libp2p does
    // not count a request pending at a query's end as one.
    assert!(
        refusing.failed_requests_per_lookup > 0.0
            && refusing.failed_requests_per_lookup < refusing.requests_per_lookup,
        "{}",
        refusing.text()
    );
    assert_eq!(silent.failed_requests_per_lookup, 0.0);
    // A search asking a down provider waits for it to its fan-out deadline
    // when the node is silent, not when it refuses.
    assert!(r.search_refused > 0);
    assert_eq!(s.search_refused, 0);
    assert!(
        refusing.latency_ms.p50 < silent.latency_ms.p50,
        "a refusal does not hold a search: p50 {} against {}",
        refusing.latency_ms.p50,
        silent.latency_ms.p50
    );
}
