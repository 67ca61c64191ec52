//! Scenario files: every shipped one loads; a bad one is refused with the
//! file, the key and the reason.

use std::path::{Path, PathBuf};

use agentmesh_sim::population::Population;
use agentmesh_sim::scenario::{
    Behaviour, EclipseProviders, JudgeRule, Scenario, SearchChoice, Security,
};

const GOOD: &str = r#"
name = "t"
engine = "des"
nodes = 100
agents = 1000
searches = 10
"#;

fn refused(text: &str) -> (String, String) {
    let e = Scenario::parse(text, Path::new("bad.toml")).expect_err("should be refused");
    assert_eq!(e.file, PathBuf::from("bad.toml"));
    let shown = e.to_string();
    assert!(shown.starts_with("bad.toml: key `"), "{shown}");
    (e.key, e.reason)
}

#[test]
fn every_shipped_scenario_loads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let sc = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                path.file_stem().unwrap().to_str().unwrap(),
                sc.name,
                "a scenario's name is its file name"
            );
            n += 1;
        }
    }
    assert!(n >= 12, "only {n} scenarios shipped");
}

#[test]
fn a_minimal_scenario_takes_the_node_defaults() {
    let sc = Scenario::parse(GOOD, Path::new("good.toml")).unwrap();
    let node = sc.node();
    assert_eq!(node.shards, agentmesh::mesh::MeshConfig::default().shards);
    assert_eq!(
        node.fanout,
        agentmesh::config::P2pConfig::default()
            .search_fanout
            .min(agentmesh::mesh::MeshLimits::default().max_search_fanout)
    );
    assert_eq!(
        node.max_providers_per_key,
        agentmesh::mesh::MeshLimits::default().max_providers_per_key
    );
    assert_eq!(node.k, 20);
    assert_eq!(node.alpha, 3);
    assert_eq!(
        node.replication,
        agentmesh::config::P2pConfig::default().replication
    );
}

#[test]
fn an_unknown_key_is_named_with_its_table() {
    let (key, reason) = refused(&format!("{GOOD}\n[latency]\nrtt_mean_ms = 3\n"));
    assert_eq!(key, "latency.rtt_mean_ms");
    assert!(reason.contains("unknown field"), "{reason}");
    let (key, _) = refused(&format!("{GOOD}\nnodez = 3\n"));
    assert_eq!(key, "nodez");
}

#[test]
fn a_missing_key_and_a_wrong_type_are_named() {
    let (key, reason) = refused("name = \"t\"\nengine = \"des\"\nnodes = 10\nagents = 10\n");
    assert_eq!(key, "searches");
    assert!(reason.contains("missing"), "{reason}");
    let (key, _) = refused(&GOOD.replace("nodes = 100", "nodes = \"many\""));
    assert_eq!(key, "nodes");
    let (key, reason) = refused(&GOOD.replace("\"des\"", "\"mpi\""));
    assert_eq!(key, "engine");
    assert!(reason.contains("unknown variant"), "{reason}");
}

#[test]
fn every_range_is_checked() {
    let cases: &[(&str, &str)] = &[
        ("nodes = 100", "nodes = 1"),
        ("nodes = 100", "nodes = 1000000"),
        ("agents = 1000", "agents = 0"),
        ("searches = 10", "searches = 10\nlimit = 0"),
        ("searches = 10", "searches = 10\nduration_s = 0.5"),
        ("searches = 10", "searches = 10\nloss = 0.95"),
        ("searches = 10", "searches = 10\n[capabilities]\nvocabulary = 0"),
        ("searches = 10", "searches = 10\n[capabilities]\nper_agent_min = 3\nper_agent_max = 2"),
        ("searches = 10", "searches = 10\n[capabilities]\nzipf_exponent = -1.0"),
        ("searches = 10", "searches = 10\n[latency]\nrtt_median_ms = 0"),
        ("searches = 10", "searches = 10\n[latency]\nrtt_sigma = 9"),
        ("searches = 10", "searches = 10\n[churn.session]\ndistribution = \"weibull\"\nshape = 0\nscale_s = 10\n[churn.downtime]\ndistribution = \"lognormal\"\nmedian_s = 10\nsigma = 1"),
        ("searches = 10", "searches = 10\n[churn.session]\ndistribution = \"weibull\"\nshape = 0.5\nscale_s = 10\n[churn.downtime]\ndistribution = \"lognormal\"\nmedian_s = 0\nsigma = 1"),
        ("searches = 10", "searches = 10\n[churn]\nrefused_rtts = 11.0\n[churn.session]\ndistribution = \"weibull\"\nshape = 0.5\nscale_s = 10\n[churn.downtime]\ndistribution = \"lognormal\"\nmedian_s = 10\nsigma = 1"),
        ("searches = 10", "searches = 10\n[[partitions]]\nstart_s = 100\nheal_s = 50\nfraction = 0.3"),
        ("searches = 10", "searches = 10\n[[partitions]]\nstart_s = 10\nheal_s = 50\nfraction = 0.9"),
        ("searches = 10", "searches = 10\n[flash_crowd]\nstart_s = 10\nduration_s = 10\nrate_multiplier = 0.5"),
        ("searches = 10", "searches = 10\n[flash_crowd]\nstart_s = 10\nduration_s = 10\ncapability_rank = 5000"),
        ("searches = 10", "searches = 10\n[publish]\nprobes = 1000"),
        ("searches = 10", "searches = 10\n[publish]\nprobes = 5\nat_s = 500\ninterval_s = 30"),
        ("searches = 10", "searches = 10\n[revoke]\nprobes = 5000"),
        ("searches = 10", "searches = 10\n[adversarial]\nshare = 0.9"),
        ("searches = 10", "searches = 10\n[adversarial.eclipse]\nsybils_per_shard = 0"),
        ("searches = 10", "searches = 10\n[node]\nshards = 0"),
        ("searches = 10", "searches = 10\n[node]\nsearch_fanout = 1000"),
        ("searches = 10", "searches = 10\n[node]\nsearch_timeout_ms = 0"),
        ("name = \"t\"", "name = \"../escape\""),
        ("engine = \"des\"\nnodes = 100", "engine = \"swarm\"\nnodes = 5000"),
    ];
    for (from, to) in cases {
        let text = GOOD.replace(from, to);
        assert_ne!(text, GOOD, "case {to:?} changed nothing");
        let (key, reason) = refused(&text);
        assert!(!key.is_empty() && key != "-", "{to:?}: no key");
        assert!(!reason.is_empty(), "{to:?}: no reason");
    }
}

#[test]
fn a_range_error_names_the_dotted_key() {
    let (key, reason) = refused(&format!("{GOOD}\n[latency]\nrtt_sigma = 9\n"));
    assert_eq!(key, "latency.rtt_sigma");
    assert!(reason.contains("outside"), "{reason}");
    let (key, _) = refused(&GOOD.replace("nodes = 100", "nodes = 1"));
    assert_eq!(key, "nodes");
}

#[test]
fn a_missing_file_is_refused_with_its_name() {
    let e = Scenario::load(Path::new("/nonexistent/x.toml")).unwrap_err();
    assert_eq!(e.key, "-");
    assert!(e.to_string().starts_with("/nonexistent/x.toml:"));
}

#[test]
fn a_swarm_scenario_refuses_what_the_swarm_engine_does_not_model() {
    let swarm = GOOD.replace("engine = \"des\"", "engine = \"swarm\"");
    assert!(
        swarm.contains("engine = \"swarm\""),
        "GOOD names its engine"
    );
    Scenario::parse(&swarm, Path::new("good.toml")).expect("a plain swarm scenario loads");
    for (extra, key) in [
        ("loss = 0.01\n", "loss"),
        ("lost_announcements = 0.2\n", "lost_announcements"),
        ("[node]\nshards = 4\n", "node.shards"),
        ("[node]\nsearch_fanout = 4\n", "node.search_fanout"),
        ("[node]\nsearch_choice = \"mixed\"\n", "node.search_choice"),
        ("[adversarial]\nshare = 0.2\n", "adversarial"),
        (
            "[adversarial]\nshare = 0.2\nbehaviour = \"takeover\"\n",
            "adversarial",
        ),
        (
            "[adversarial]\nshare = 0.2\nbehaviour = \"takeover\"\njudge = \"highest_seq\"\n",
            "adversarial",
        ),
    ] {
        let (got, reason) = refused(&format!("{swarm}\n{extra}"));
        assert_eq!(got, key, "{extra}: {reason}");
        assert!(reason.contains("engine = \"des\""), "{reason}");
    }
    // The discrete-event engine takes them.
    Scenario::parse(&format!("{GOOD}\nloss = 0.01\n"), Path::new("good.toml")).unwrap();
}

#[test]
fn a_swarm_scenario_takes_churn_and_lookups_but_not_probes_under_lookups() {
    let swarm = GOOD.replace("engine = \"des\"", "engine = \"swarm\"");
    let churn = "[churn.session]\ndistribution = \"weibull\"\nshape = 0.5\nscale_s = 60\n\
                 [churn.downtime]\ndistribution = \"lognormal\"\nmedian_s = 30\nsigma = 1.0\n";
    let lookups = format!("replication = \"lookups\"\n{swarm}\n{churn}");
    let sc = Scenario::parse(&lookups, Path::new("good.toml")).expect("churn and lookups load");
    assert!(sc.churn.is_some());
    for (extra, key) in [
        (
            "[publish]\nprobes = 2\nat_s = 1\ninterval_s = 1\n",
            "publish",
        ),
        ("[revoke]\nprobes = 2\nat_s = 1\n", "revoke"),
    ] {
        let (got, reason) = refused(&format!("{lookups}\n{extra}"));
        assert_eq!(got, key, "{extra}: {reason}");
        assert!(reason.contains("lookups"), "{reason}");
    }
    // A refusing down node is the memory transport's own behaviour there.
    let (got, reason) = refused(&format!("{swarm}\n[churn]\nrefused_rtts = 0.0\n{churn}"));
    assert_eq!(got, "churn.refused_rtts", "{reason}");
    assert!(reason.contains("engine = \"des\""), "{reason}");
    Scenario::parse(
        &format!("{GOOD}\n[churn]\nrefused_rtts = 0.0\n{churn}"),
        Path::new("good.toml"),
    )
    .expect("the DES takes it");
    // Under replication "all" every node stores the probes: timed.
    Scenario::parse(
        &format!("{swarm}\n{churn}\n[publish]\nprobes = 2\nat_s = 1\ninterval_s = 1\n"),
        Path::new("good.toml"),
    )
    .expect("probes under replication all load");
    // Searches in a revocation's window: under churn the swarm keeps to
    // their times; without it they would run before the revocation.
    let window = "[revoke]\nprobes = 2\nat_s = 1\nsearches = 5\n";
    let (got, reason) = refused(&format!("{swarm}\n{window}"));
    assert_eq!(got, "revoke.searches", "{reason}");
    assert!(reason.contains("[churn]"), "{reason}");
    Scenario::parse(
        &format!("{swarm}\n{churn}\n{window}"),
        Path::new("good.toml"),
    )
    .expect("under churn the swarm keeps to the window");
}

#[test]
fn a_connection_limit_is_a_swarm_setting_within_its_range() {
    let swarm = GOOD.replace("engine = \"des\"", "engine = \"swarm\"");
    let sc = Scenario::parse(
        &format!("{swarm}\n[swarm]\nmax_connections = 64\n"),
        Path::new("good.toml"),
    )
    .expect("a swarm scenario with a connection limit loads");
    assert_eq!(sc.swarm.max_connections, Some(64));
    assert_eq!(sc.node().max_connections, Some(64));
    // Without the key the node's own limit applies (and is reported).
    let plain = Scenario::parse(&swarm, Path::new("good.toml")).unwrap();
    assert_eq!(
        plain.node().max_connections,
        Some(agentmesh::mesh::MeshLimits::default().max_connections)
    );
    for n in [0, 8, 100_000] {
        let (key, reason) = refused(&format!("{swarm}\n[swarm]\nmax_connections = {n}\n"));
        assert_eq!(key, "swarm.max_connections", "{n}: {reason}");
    }
    // The DES does not model connections: the key is refused there, and
    // its summaries name no limit.
    let (key, reason) = refused(&format!("{GOOD}\n[swarm]\nmax_connections = 64\n"));
    assert_eq!(key, "swarm.max_connections");
    assert!(reason.contains("engine = \"swarm\""), "{reason}");
    let des = Scenario::parse(GOOD, Path::new("good.toml")).unwrap();
    assert_eq!(des.node().max_connections, None);
}

#[test]
fn connection_trimming_follows_the_limit_and_can_be_turned_off_in_a_swarm() {
    let swarm = GOOD.replace("engine = \"des\"", "engine = \"swarm\"");
    // On by default, its mark following the limit as the node's does.
    let limited = Scenario::parse(
        &format!("{swarm}\n[swarm]\nmax_connections = 64\n"),
        Path::new("good.toml"),
    )
    .unwrap();
    assert_eq!(limited.node().connections_high_water, Some(48));
    let plain = Scenario::parse(&swarm, Path::new("good.toml")).unwrap();
    assert_eq!(
        plain.node().connections_high_water,
        Some(agentmesh::mesh::MeshLimits::default().connections_high_water)
    );
    let off = Scenario::parse(
        &format!("{swarm}\n[swarm]\ntrim_connections = false\n"),
        Path::new("good.toml"),
    )
    .unwrap();
    assert_eq!(off.swarm.trim_connections, Some(false));
    assert_eq!(off.node().connections_high_water, None);
    // The DES has no connections to trim.
    let (key, reason) = refused(&format!("{GOOD}\n[swarm]\ntrim_connections = false\n"));
    assert_eq!(key, "swarm.trim_connections");
    assert!(reason.contains("engine = \"swarm\""), "{reason}");
    assert_eq!(
        Scenario::parse(GOOD, Path::new("good.toml"))
            .unwrap()
            .node()
            .connections_high_water,
        None
    );
}

#[test]
fn publish_probes_must_all_fall_inside_the_run() {
    // 600 s by default: five probes 30 s apart from 480 s end at 600 s.
    let fits = format!("{GOOD}\n[publish]\nprobes = 5\nat_s = 480\ninterval_s = 30\n");
    Scenario::parse(&fits, Path::new("ok.toml")).unwrap();
    let (key, reason) = refused(&fits.replace("at_s = 480", "at_s = 481"));
    assert_eq!(key, "publish.interval_s", "{reason}");
    assert!(reason.contains("601 s"), "{reason}");
}

#[test]
fn a_swarm_names_its_connections_security_noise_unless_told_plaintext() {
    let swarm = GOOD.replace("engine = \"des\"", "engine = \"swarm\"");
    let plain = Scenario::parse(&swarm, Path::new("good.toml")).unwrap();
    assert_eq!(plain.node().security, Some(Security::Noise));
    let fast = Scenario::parse(
        &format!("{swarm}\n[swarm]\nsecurity = \"plaintext\"\n"),
        Path::new("good.toml"),
    )
    .unwrap();
    assert_eq!(fast.node().security, Some(Security::Plaintext));
    // What the run is given follows what the summary names.
    for sc in [&plain, &fast] {
        let params = Population::generate(sc, 1).swarm_params(sc, 1);
        assert_eq!(Some(params.security), sc.node().security);
    }
    // A handshake the node does not have is refused with its key.
    let (key, reason) = refused(&format!("{swarm}\n[swarm]\nsecurity = \"tls\"\n"));
    assert_eq!(key, "swarm.security", "{reason}");
    // The DES has no connections.
    let (key, reason) = refused(&format!("{GOOD}\n[swarm]\nsecurity = \"plaintext\"\n"));
    assert_eq!(key, "swarm.security");
    assert!(reason.contains("engine = \"swarm\""), "{reason}");
    assert_eq!(
        Scenario::parse(GOOD, Path::new("good.toml"))
            .unwrap()
            .node()
            .security,
        None
    );
}

#[test]
fn the_takeover_and_fan_out_keys_take_only_their_values() {
    for (extra, key) in [
        (
            "[adversarial]\nbehaviour = \"steal\"\n",
            "adversarial.behaviour",
        ),
        (
            "[adversarial]\nbehaviour = \"takeover\"\njudge = \"first_come\"\n",
            "adversarial.judge",
        ),
        (
            "[adversarial.eclipse]\nproviders = \"honest\"\n",
            "adversarial.eclipse.providers",
        ),
        ("[node]\nsearch_choice = \"random\"\n", "node.search_choice"),
    ] {
        let (got, reason) = refused(&format!("{GOOD}\n{extra}"));
        assert_eq!(got, key, "{extra}: {reason}");
        assert!(reason.contains("unknown variant"), "{extra}: {reason}");
    }
    // A judge rule means something only to the takeover behaviour.
    let (got, reason) = refused(&format!(
        "{GOOD}\n[adversarial]\nbehaviour = \"forge\"\njudge = \"owner\"\n"
    ));
    assert_eq!(got, "adversarial.judge", "{reason}");
    assert!(reason.contains("takeover"), "{reason}");
    // What they take.
    let sc = Scenario::parse(
        &format!(
            "{GOOD}\n[node]\nsearch_choice = \"providers_first\"\n[adversarial]\n\
             behaviour = \"takeover\"\njudge = \"highest_seq\"\n[adversarial.eclipse]\n\
             providers = \"sybils\"\n"
        ),
        Path::new("good.toml"),
    )
    .unwrap();
    let a = sc.adversarial.as_ref().unwrap();
    assert_eq!(a.behaviour, Behaviour::Takeover);
    assert_eq!(a.judge_rule(), JudgeRule::HighestSeq);
    assert_eq!(
        a.eclipse.as_ref().unwrap().providers,
        EclipseProviders::Sybils
    );
    assert_eq!(sc.node().search_choice, SearchChoice::ProvidersFirst);
    // The defaults: today's node.
    let sc = Scenario::parse(
        &format!("{GOOD}\n[adversarial]\nbehaviour = \"takeover\"\n"),
        Path::new("good.toml"),
    )
    .unwrap();
    assert_eq!(
        sc.adversarial.as_ref().unwrap().judge_rule(),
        JudgeRule::Owner
    );
    assert_eq!(sc.node().search_choice, SearchChoice::Mixed);
}
