//! `agentmesh demo`: the README's one-command tour of a federated mesh.
//!
//! In one process it starts a testbed population (three organisations of
//! 100 ADP agents each, a few of them broken on purpose, served by real
//! DNS and HTTPS on loopback) and three nodes joined over loopback TCP.
//! Each node crawls one organisation; the demo prints what each verified,
//! by trust level and failure reason, then searches on node 1 and shows
//! the agents it found that only node 3 crawled, with their trust and who
//! attested them. Node 1 also registers the drafts' example agents through
//! its registry. Then it serves node 1's API (by default on
//! 127.0.0.1:7700) with curl commands to try, until Ctrl-C.
//!
//! Data goes to a temporary directory, removed at the end, unless
//! `--data-dir` is given (one sub-directory per node).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::{json, Value};

use super::DemoArgs;
use crate::config::Config;
use crate::crawl::CrawlReport;
use crate::node::Node;
use crate::testbed::{Behaviour, Population, PopulationConfig, Testbed, TestbedOptions};
use crate::trust::TrustLevel;

/// The drafts' example registrations node 1 makes.
const EXAMPLES: [&str; 4] = [
    include_str!("../../proto/examples/aidip/valid/translator-draft-example.json"),
    include_str!("../../proto/examples/aidip/valid/legal-summarizer-zh-en.json"),
    include_str!("../../proto/examples/aidip/valid/extra-fields-oauth2-scopes.json"),
    include_str!("../../proto/examples/aidip/valid/minimal-top-level-inputs-outputs.json"),
];

/// The population's seed: every run shows the same agents.
const SEED: u64 = 7;
/// Organisations, one per node.
const ORGS: usize = 3;
/// Agents in each organisation.
const AGENTS_PER_ORG: usize = 100;
/// The broken agents (all in the last organisation: the population puts
/// misbehaving agents after the healthy ones). None of them points at an
/// address outside the testbed, and none is slow on purpose.
const BROKEN: [Behaviour; 6] = [
    Behaviour::TxtMissing,
    Behaviour::FingerprintMismatch,
    Behaviour::WrongDomain,
    Behaviour::InvalidJson,
    Behaviour::ChallengeBadSignature,
    Behaviour::RedirectOtherHost,
];
/// How long the demo waits for the mesh to form and for a search to see
/// what node 3 crawled.
const WAIT: Duration = Duration::from_secs(30);

/// The demo's population: 300 agents in `org1.test` .. `org3.test`.
pub(super) fn population() -> Population {
    let mut config = PopulationConfig::healthy(SEED, ORGS * AGENTS_PER_ORG - BROKEN.len());
    config.agents_per_org = AGENTS_PER_ORG;
    config.misbehaving = BROKEN.to_vec();
    Population::generate(&config)
}

/// One node of the demo, with what it crawled.
struct DemoNode {
    node: Node,
    org: String,
    reports: Vec<CrawlReport>,
}

/// Runs the demo.
///
/// # Errors
/// When the testbed or a node cannot start, or a step fails.
pub(super) async fn run(args: DemoArgs) -> anyhow::Result<()> {
    let (data_dir, temporary) = match &args.data_dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!(
                "agentmesh-demo-{}",
                hex::encode(rand::random::<[u8; 6]>())
            )),
            true,
        ),
    };
    let result = run_in(&args, &data_dir, temporary).await;
    if temporary {
        let _ = std::fs::remove_dir_all(&data_dir);
    }
    result
}

/// A node's configuration: loopback p2p, the testbed as its DNS and CA,
/// private addresses allowed (everything here is on 127.0.0.1), the
/// testbed's HTTPS port allowed and read for the other formats, and no following of peers (each node crawls exactly its organisation).
fn node_config(data_dir: PathBuf, listen: SocketAddr, testbed: &Testbed, ca_file: &Path) -> Config {
    let mut config = Config {
        data_dir,
        ..Config::default()
    };
    config.api.listen = listen;
    config.p2p.listen = vec!["/ip4/127.0.0.1/tcp/0".into()];
    config.p2p.allow_private_addresses = true;
    config.crawl.resolvers = vec![testbed.dns_addr()];
    config.crawl.ca_files = vec![ca_file.to_owned()];
    config.crawl.allow_private_addresses = true;
    config.crawl.https_port = testbed.https_port();
    config.crawl.allowed_ports = vec![testbed.https_port()];
    // The testbed serves every organisation from one address: the demo's
    // crawls are not paced as one shared host (crawl::polite).
    config.crawl.per_address_concurrency = 256;
    config.crawl.per_address_interval = std::time::Duration::ZERO;
    config.crawl.follow_peers = false;
    // Each node crawls its organisation's hundred domains at once: the
    // three crawlers and the testbed share this machine's cores, and the
    // crawl is bound by them, not by waiting.
    config.crawl.concurrency = 100;
    config
}

async fn run_in(args: &DemoArgs, data_dir: &Path, temporary: bool) -> anyhow::Result<()> {
    let signal = crate::cli::shutdown_signal();
    let place = if temporary {
        "a temporary directory".to_owned()
    } else {
        data_dir.display().to_string()
    };
    crate::node::create_data_dir(data_dir)?;
    let testbed = Testbed::start(population(), TestbedOptions::default())
        .await
        .context("starting the testbed")?;
    let ca_file = data_dir.join("testbed-ca.pem");
    testbed.write_ca(&ca_file)?;
    println!(
        "agentmesh demo: a testbed of {} ADP agents in {ORGS} organisations (DNS {}, HTTPS {}), \
         three nodes, data in {place}",
        testbed.population().len(),
        testbed.dns_addr(),
        testbed.https_addr(),
    );

    let mut nodes: Vec<Node> = Vec::new();
    let started = start_nodes(args, data_dir, &testbed, &ca_file, &mut nodes).await;
    let outcome = match started {
        Ok(attesters) => tour(nodes, &attesters, &testbed, args, signal).await,
        Err(e) => {
            for node in nodes {
                let _ = node.shutdown().await;
            }
            Err(e)
        }
    };
    testbed.shutdown().await;
    outcome
}

/// Starts node 1 on `args.listen`, then nodes 2 and 3 joining through it.
/// The three organisations federate: each node's key is made first, so
/// that every node can list the others in `p2p.trusted_peers` and take
/// their DNS evidence as is, instead of re-crawling what they attest.
async fn start_nodes(
    args: &DemoArgs,
    data_dir: &Path,
    testbed: &Testbed,
    ca_file: &Path,
    nodes: &mut Vec<Node>,
) -> anyhow::Result<Vec<String>> {
    let mut configs = Vec::new();
    let mut attesters = Vec::new();
    for i in 1..=ORGS {
        let listen = if i == 1 {
            args.listen
        } else {
            SocketAddr::from(([127, 0, 0, 1], 0))
        };
        let dir = data_dir.join(format!("node{i}"));
        let config = node_config(dir, listen, testbed, ca_file);
        crate::node::create_data_dir(&config.data_dir)?;
        let key = crate::identity::load_or_create(&config.node_key_path())?;
        attesters.push(crate::identity::fingerprint(&key.verifying_key()));
        configs.push((config, crate::identity::peer_id_of(&key)));
    }
    let peer_ids: Vec<String> = configs.iter().map(|(_, p)| p.clone()).collect();
    let mut bootstrap = Vec::new();
    for (i, (mut config, _)) in (1..).zip(configs) {
        config.p2p.bootstrap = bootstrap.clone();
        config.p2p.trusted_peers = peer_ids.clone();
        let node = Node::spawn(config)
            .await
            .with_context(|| format!("starting node {i}"))?;
        if i == 1 {
            bootstrap = node.listen_addrs().to_vec();
        }
        println!(
            "  node {i}: peer {}, API http://{}",
            node.peer_id(),
            node.api_addr()
        );
        nodes.push(node);
    }
    Ok(attesters)
}

/// The tour proper; always shuts the nodes down.
async fn tour(
    nodes: Vec<Node>,
    attesters: &[String],
    testbed: &Testbed,
    args: &DemoArgs,
    signal: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let mut demo: Vec<DemoNode> = nodes
        .into_iter()
        .enumerate()
        .map(|(i, node)| DemoNode {
            node,
            org: format!("org{}", i + 1),
            reports: Vec::new(),
        })
        .collect();
    let mut outcome = steps(&mut demo, attesters, testbed).await;
    if let (Ok(sample), false) = (&outcome, args.no_serve) {
        print_try(&demo[0], sample);
        signal.await;
    }
    for d in demo {
        if let Err(e) = d.node.shutdown().await {
            outcome = outcome.and(Err(e.into()));
        }
    }
    outcome.map(|_| ())
}

/// What the curl examples point at.
struct Sample {
    capability: String,
    remote_agent: Option<String>,
    own_domain: Option<String>,
}

/// `attesters[i]`: how results name node `i + 1` (its key's fingerprint).
async fn steps(
    demo: &mut [DemoNode],
    attesters: &[String],
    testbed: &Testbed,
) -> anyhow::Result<Sample> {
    wait_for_mesh(demo).await?;

    let registry = demo[0].node.registry();
    for text in EXAMPLES {
        let doc: Value = serde_json::from_str(text).context("built-in example")?;
        registry.register(doc).await?;
    }
    println!(
        "\nnode 1 registered the drafts' {} example agents through its AIDIP registry",
        EXAMPLES.len()
    );

    crawl_orgs(demo, testbed).await?;
    for (i, d) in demo.iter().enumerate() {
        print_crawl(i + 1, d);
    }

    let Some((capability, expected)) = pick_capability(&demo[ORGS - 1]).await else {
        anyhow::bail!("node {ORGS} verified no agent: nothing to search for");
    };
    let found = search_until_found(&demo[0].node, &capability, &expected).await?;
    print_search(&capability, &found, attesters, &expected);
    Ok(Sample {
        capability,
        remote_agent: expected.into_iter().next(),
        own_domain: demo[0].reports.first().map(|r| r.domain.clone()),
    })
}

/// Waits until every node has a peer (node 1 has all of them).
async fn wait_for_mesh(demo: &[DemoNode]) -> anyhow::Result<()> {
    let until = Instant::now() + WAIT;
    for (i, d) in demo.iter().enumerate() {
        let want = if i == 0 { demo.len() - 1 } else { 1 };
        loop {
            let status = d.node.mesh().status().await?;
            if status.connected_peers >= want {
                break;
            }
            if Instant::now() > until {
                anyhow::bail!(
                    "node {} has {} peer(s) after {WAIT:?}, wanted {want}",
                    i + 1,
                    status.connected_peers
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    println!("the three nodes are connected over loopback TCP");
    Ok(())
}

/// Each node crawls its organisation, all three at once.
async fn crawl_orgs(demo: &mut [DemoNode], testbed: &Testbed) -> anyhow::Result<()> {
    let started = Instant::now();
    let jobs = demo.iter().map(|d| {
        let domains: Vec<String> = testbed
            .population()
            .agents()
            .iter()
            .filter(|a| a.org == d.org)
            .map(|a| a.domain.clone())
            .collect();
        d.node.crawl_queue().crawl(domains)
    });
    let results = futures_util::future::join_all(jobs).await;
    for (d, r) in demo.iter_mut().zip(results) {
        d.reports = r.with_context(|| format!("crawling {}.test", d.org))?;
    }
    println!(
        "\neach node crawled its organisation ({:.1} s for all three, at once):",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn print_crawl(n: usize, d: &DemoNode) {
    let mut levels: BTreeMap<TrustLevel, usize> = BTreeMap::new();
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &d.reports {
        *levels.entry(r.level()).or_default() += 1;
        if let Some(first) = r.reasons.first() {
            *reasons.entry(first.as_str()).or_default() += 1;
        }
    }
    let levels: Vec<String> = levels
        .iter()
        .rev()
        .map(|(l, c)| format!("{c} {}", l.as_str()))
        .collect();
    println!(
        "  node {n} crawled {}.test: {} domains: {}",
        d.org,
        d.reports.len(),
        levels.join(", ")
    );
    if !reasons.is_empty() {
        let reasons: Vec<String> = reasons.iter().map(|(r, c)| format!("{r} {c}")).collect();
        println!("         failures: {}", reasons.join(", "));
    }
}

/// The capability most of `d`'s verified agents offer, and those agents
/// (their capabilities as node `d` stored them).
async fn pick_capability(d: &DemoNode) -> Option<(String, Vec<String>)> {
    let mut verified: Vec<(String, Vec<String>)> = Vec::new();
    for r in &d.reports {
        if !r.stored || r.level() < TrustLevel::KeyVerified {
            continue;
        }
        if let Ok(summary) = d.node.registry().summary(&r.agent_id).await {
            verified.push((r.agent_id.clone(), summary.capabilities));
        }
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, capabilities) in &verified {
        for c in capabilities {
            *counts.entry(c).or_default() += 1;
        }
    }
    let (capability, _) = counts.into_iter().max_by_key(|(c, n)| (*n, *c))?;
    let mut agents: Vec<String> = verified
        .iter()
        .filter(|(_, capabilities)| capabilities.iter().any(|c| c == capability))
        .map(|(id, _)| id.clone())
        .collect();
    agents.sort();
    Some((capability.to_owned(), agents))
}

/// What a search on node 1 answered.
struct Found {
    items: Vec<Value>,
    peers_asked: String,
    peers_answered: String,
    took: Duration,
}

/// Searches node 1's API (scope mesh, the default) until every agent of
/// `expected` is in the answer.
async fn search_until_found(
    node: &Node,
    capability: &str,
    expected: &[String],
) -> anyhow::Result<Found> {
    let client = reqwest::Client::new();
    let url = format!("http://{}/agents/search", node.api_addr());
    let body = json!({"filters": {"capabilities": [capability]}, "top": 100});
    let until = Instant::now() + WAIT;
    loop {
        let started = Instant::now();
        let response = client
            .post(&url)
            .json(&body)
            .send()
            .await
            .context("searching node 1")?;
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("0")
                .to_owned()
        };
        let (peers_asked, peers_answered) = (
            header("x-agentmesh-peers-asked"),
            header("x-agentmesh-peers-answered"),
        );
        let items: Vec<Value> = response.json().await.context("node 1's search answer")?;
        let took = started.elapsed();
        let has = |id: &String| items.iter().any(|i| i["id"] == id.as_str());
        if expected.iter().all(has) {
            return Ok(Found {
                items,
                peers_asked,
                peers_answered,
                took,
            });
        }
        if Instant::now() > until {
            anyhow::bail!(
                "after {WAIT:?} node 1's search for {capability} still misses {} of node {ORGS}'s {} agents",
                expected.iter().filter(|id| !has(id)).count(),
                expected.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `node N` for an attester that is one of ours, else its fingerprint.
fn attester(attesters: &[String], attested_by: &Value) -> String {
    let first = attested_by
        .as_array()
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .unwrap_or("");
    attesters
        .iter()
        .position(|p| p == first)
        .map_or_else(|| first.to_owned(), |i| format!("node {}", i + 1))
}

/// `crawled`: the agents node 3's own crawl verified with the capability.
fn print_search(capability: &str, found: &Found, attesters: &[String], crawled: &[String]) {
    let mut by_attester: BTreeMap<String, usize> = BTreeMap::new();
    for item in &found.items {
        *by_attester
            .entry(attester(attesters, &item["trust"]["attested_by"]))
            .or_default() += 1;
    }
    let split: Vec<String> = by_attester
        .iter()
        .map(|(who, n)| format!("{n} attested by {who}"))
        .collect();
    println!(
        "\nsearch on node 1, capability {capability:?} (scope mesh, {} ms, {} of {} peers answered): \
         {} agents: {}",
        found.took.as_millis(),
        found.peers_answered,
        found.peers_asked,
        found.items.len(),
        split.join(", ")
    );
    // By node 3's own crawl, and held by node 1 from the mesh, not by the
    // first attester: a node also re-signs another org's agent that names
    // one of its own agents as a mutual peer, so node 3 may be the first
    // attester of an agent it did not crawl, and node 1 may hold one of
    // node 3's agents as its own re-signed record.
    println!("agents only node {ORGS} crawled, found from node 1:");
    for item in found
        .items
        .iter()
        .filter(|i| crawled.iter().any(|id| i["id"] == id.as_str()) && i["source"] == "mesh")
        .take(8)
    {
        let evidence: Vec<&str> = item["trust"]["evidence"]
            .as_object()
            .map(|e| {
                e.iter()
                    .filter(|(_, v)| v.as_bool() == Some(true))
                    .map(|(k, _)| k.as_str())
                    .collect()
            })
            .unwrap_or_default();
        println!(
            "  {:<40} trust {:<14} evidence {:<28} source {}",
            item["id"].as_str().unwrap_or(""),
            item["trust"]["level"].as_str().unwrap_or(""),
            evidence.join("+"),
            item["source"].as_str().unwrap_or("")
        );
    }
}

fn print_try(node1: &DemoNode, sample: &Sample) {
    let base = format!("http://{}", node1.node.api_addr());
    let cap = &sample.capability;
    println!("\nNode 1's API is live at {base}. Try:");
    println!("  curl -s {base}/health");
    println!("  curl -s {base}/peers");
    println!("  curl -si -X POST {base}/agents/search -H 'content-type: application/json' \\");
    println!("       -d '{{\"filters\":{{\"capabilities\":[\"{cap}\"]}},\"top\":5}}'");
    if let Some(id) = &sample.remote_agent {
        println!("  curl -s {base}/agents/{id}        # crawled by node {ORGS}");
    }
    if let Some(domain) = &sample.own_domain {
        println!("  curl -s {base}/crawl/{domain}   # node 1's crawl report");
    }
    println!("  curl -s '{base}/agents?capabilities=translation&language=zh'");
    println!("Ctrl-C stops the demo and removes its data.");
}
