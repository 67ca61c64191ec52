//! The crawler against the testbed: real DNS (hickory-server), real TLS
//! with a test CA, real WebSocket challenges, all on loopback.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentmesh::crawl::polite::Politeness;
use agentmesh::crawl::{AllowedPorts, CrawlReport, Crawler, CrawlerOptions};
use agentmesh::issuer::Issuer;
use agentmesh::net::AddressPolicy;
use agentmesh::record::RecordBody;
use agentmesh::store::{Filter, Store};
use agentmesh::testbed::{Behaviour, Drip, Population, PopulationConfig, Testbed, TestbedOptions};
use agentmesh::trust::{Reason, TrustLevel};

struct Rig {
    testbed: Testbed,
    _dir: tempfile::TempDir,
    ca_file: std::path::PathBuf,
    store: Store,
    issuer: Issuer,
}

async fn rig(config: PopulationConfig) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let testbed = Testbed::start(Population::generate(&config), TestbedOptions::default())
        .await
        .expect("the testbed starts");
    let ca_file = dir.path().join("ca.pem");
    testbed.write_ca(&ca_file).unwrap();
    let store = Store::open(&dir.path().join("store"), 16 << 20).unwrap();
    Rig {
        testbed,
        _dir: dir,
        ca_file,
        issuer: Issuer::new(
            store.clone(),
            Arc::new(agentmesh::identity::generate()),
            Duration::from_secs(24 * 3600),
        ),
        store,
    }
}

impl Rig {
    fn crawler(&self, allow_private: bool) -> Crawler {
        self.crawler_with(
            allow_private,
            AllowedPorts::new([self.testbed.https_port()]),
        )
    }

    fn crawler_with(&self, allow_private: bool, allowed_ports: AllowedPorts) -> Crawler {
        let options = CrawlerOptions {
            resolvers: vec![self.testbed.dns_addr()],
            ca_files: vec![self.ca_file.clone()],
            policy: AddressPolicy { allow_private },
            fetch_timeout: Duration::from_secs(3),
            challenge_timeout: Duration::from_secs(2),
            concurrency: 32,
            allowed_ports,
            // Every testbed site is on 127.0.0.1: these tests are about
            // what a crawl finds, so the address gets no budget of its own
            // (`many_names_on_one_address_are_crawled_one_at_a_time` is the
            // test of that budget).
            politeness: Politeness {
                per_address_concurrency: 256,
                per_address_interval: Duration::ZERO,
                ..Politeness::default()
            },
            ..CrawlerOptions::default()
        };
        let key = agentmesh::identity::generate();
        let verifier = agentmesh::identity::peer_id_of(&key);
        Crawler::new(options, Arc::new(key), verifier).expect("the crawler builds")
    }

    fn domain(&self, b: Behaviour) -> String {
        self.testbed
            .population()
            .domain_of(b)
            .expect("the population has it")
            .to_owned()
    }
}

/// The reason code a correct crawler reports for each misbehaviour (with
/// loopback allowed, as the testbed lives on loopback).
fn expected_reason(b: Behaviour) -> Option<&'static str> {
    Some(match b {
        Behaviour::Healthy | Behaviour::TxtLarge | Behaviour::ChallengeOwnNonce => return None,
        Behaviour::TxtMissing => "txt_missing",
        Behaviour::TxtMalformed => "txt_malformed",
        Behaviour::TxtTwoRecords => "txt_multiple",
        Behaviour::TxtWrongVersion => "txt_unsupported_version",
        Behaviour::FingerprintMismatch => "fingerprint_mismatch",
        Behaviour::WrongDomain => "domain_mismatch",
        Behaviour::Oversized => "document_too_large",
        Behaviour::SlowBody => "timeout",
        Behaviour::RedirectLoop => "redirect_limit",
        Behaviour::RedirectOtherHost => "redirect_other_host",
        Behaviour::PlainHttp => "insecure_url",
        Behaviour::WrongContentType => "wrong_content_type",
        Behaviour::InvalidJson => "invalid_json",
        Behaviour::DeepNesting => "json_too_deep",
        Behaviour::ChallengeBadSignature => "challenge_bad_signature",
        Behaviour::ChallengeWrongNonce => "challenge_wrong_nonce",
        Behaviour::ChallengeSilent => "challenge_no_answer",
        Behaviour::PrivateTarget | Behaviour::LoopbackTarget => "address_not_allowed",
        _ => "unknown behaviour",
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_misbehaving_agent_fails_with_its_exact_reason() {
    // PrivateTarget and LoopbackTarget are crawled with the default policy
    // below: with loopback allowed the crawler would connect to them.
    let mut config = PopulationConfig::healthy(7, 4);
    for b in Behaviour::misbehaviours() {
        if !matches!(b, Behaviour::PrivateTarget | Behaviour::LoopbackTarget) {
            config = config.with(b);
        }
    }
    let rig = rig(config).await;
    let crawler = rig.crawler(true);
    let domains: Vec<String> = rig
        .testbed
        .population()
        .agents()
        .iter()
        .map(|a| a.domain.clone())
        .collect();
    let reports = crawler
        .crawl_many(&rig.issuer, domains, false, 1000, |_| {})
        .await;
    let by_domain: BTreeMap<&str, &CrawlReport> =
        reports.iter().map(|r| (r.domain.as_str(), r)).collect();
    let mut wrong = Vec::new();
    for agent in rig.testbed.population().agents() {
        let r = by_domain[agent.domain.as_str()];
        match expected_reason(agent.behaviour) {
            None => {
                if r.level() < TrustLevel::KeyVerified {
                    wrong.push(format!(
                        "{}: {} expected key-verified, got {} {:?}",
                        agent.behaviour,
                        agent.domain,
                        r.level(),
                        r.reasons
                    ));
                }
            }
            Some(reason) => {
                if r.reasons.first().map(|r| r.as_str()) != Some(reason)
                    || r.level() != TrustLevel::Unverified
                {
                    wrong.push(format!(
                        "{}: expected {reason}, got {} {:?}",
                        agent.behaviour,
                        r.level(),
                        r.reasons
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "mismatches:\n{}", wrong.join("\n"));

    // A failed challenge still stores the DNS-consistent document, at
    // unverified with the fingerprint evidence; a broken chain stores nothing.
    let silent = by_domain[rig.domain(Behaviour::ChallengeSilent).as_str()];
    assert!(silent.stored && silent.trust.evidence.fingerprint && !silent.trust.evidence.challenge);
    let mismatch = by_domain[rig.domain(Behaviour::FingerprintMismatch).as_str()];
    assert!(!mismatch.stored);
    assert!(rig.store.get(&mismatch.agent_id).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_reply_styles_prove_the_key_and_an_own_nonce_gets_the_mutual_half() {
    let rig = rig(PopulationConfig::healthy(5, 1)
        .with(Behaviour::ChallengeOwnNonce)
        .with(Behaviour::ChallengeWrongNonce))
    .await;
    let crawler = rig.crawler(true);
    let echo = rig.testbed.population().agents()[0].domain.clone();
    let own = rig.domain(Behaviour::ChallengeOwnNonce);
    for d in [&echo, &own] {
        let r = crawler.crawl(d).await.report;
        assert_eq!(r.level(), TrustLevel::KeyVerified, "{d}: {:?}", r.reasons);
        assert!(r.trust.evidence.challenge, "{d}");
    }
    // The verifier answered the agent's nonce with its own signed frame,
    // and the agent checked it; an echoing agent gets no such frame.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while rig.testbed.site_counts(&own).unwrap().mutual == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no checked closing frame"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(rig.testbed.site_counts(&echo).unwrap().mutual, 0);

    // Signing its own nonce instead of the challenge's proves nothing.
    let wrong = crawler
        .crawl(&rig.domain(Behaviour::ChallengeWrongNonce))
        .await
        .report;
    assert_eq!(wrong.level(), TrustLevel::Unverified);
    assert_eq!(
        wrong.reasons.first().map(|r| r.as_str()),
        Some("challenge_wrong_nonce")
    );
}

/// The verified peers an agent lists, as domains, in document order.
fn verified_peer_domains(agent: &agentmesh::testbed::Agent) -> Vec<String> {
    agent
        .relationships
        .iter()
        .filter(|r| r.kind == "peer" && r.trust.as_deref() == Some("verified"))
        .filter_map(|r| r.id.strip_prefix("agent:").map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_checks_listed_peers_one_hop_out_and_reports_peer_verified_when_mutual() {
    let rig = rig(PopulationConfig::healthy(21, 40).with_every_misbehaviour()).await;
    let crawler = rig.crawler(true);
    let population = rig.testbed.population();
    let behaviour_of = |domain: &str| {
        population
            .agents()
            .iter()
            .find(|a| a.domain == domain)
            .map(|a| a.behaviour)
    };
    let (mut mutual_seen, mut one_way_seen) = (0, 0);
    for agent in population.agents() {
        if agent.behaviour != Behaviour::Healthy {
            continue;
        }
        let listed = verified_peer_domains(agent);
        if listed.is_empty() {
            continue;
        }
        // What the population says: a listed peer that verifies and lists
        // this agent back makes it peer-verified.
        let checked: Vec<&String> = listed
            .iter()
            .take(agentmesh::crawl::MAX_PEERS_CHECKED)
            .collect();
        let expect_mutual: Vec<String> = checked
            .iter()
            .filter(|d| {
                behaviour_of(d).is_some_and(Behaviour::verifies)
                    && population.is_mutual(&agent.domain, d)
            })
            .map(|d| format!("agent:{d}"))
            .collect();
        let r = crawler.verify_with_peers(&agent.domain).await.report;
        let got_mutual: Vec<String> = r
            .peer_checks
            .iter()
            .filter(|c| c.mutual)
            .map(|c| c.agent_id.clone())
            .collect();
        assert_eq!(
            got_mutual.len(),
            expect_mutual.len(),
            "{}: {got_mutual:?}",
            agent.domain
        );
        assert_eq!(r.peer_checks.len(), checked.len(), "{}", agent.domain);
        let peers_step = r.steps.iter().find(|s| s.step == "peers").unwrap();
        if expect_mutual.is_empty() {
            one_way_seen += 1;
            assert_eq!(r.level(), TrustLevel::KeyVerified, "{}", agent.domain);
            assert!(peers_step.detail.starts_with("no mutual verified peer"));
        } else {
            mutual_seen += 1;
            assert_eq!(r.level(), TrustLevel::PeerVerified, "{}", agent.domain);
            assert!(r.trust.evidence.mutual_peer);
            for c in r.peer_checks.iter().filter(|c| c.mutual) {
                assert!(expect_mutual.contains(&c.agent_id), "{}", c.agent_id);
                assert!(c.report.level() >= TrustLevel::KeyVerified);
                assert!(c.report.steps.iter().any(|s| s.step == "challenge"));
            }
        }
        // A listed peer that fails its own chain says why.
        for c in r.peer_checks.iter().filter(|c| !c.mutual) {
            if c.report.level() < TrustLevel::KeyVerified {
                assert!(!c.report.reasons.is_empty(), "{}", c.agent_id);
            }
        }
    }
    assert!(
        mutual_seen > 0 && one_way_seen > 0,
        "{mutual_seen} {one_way_seen}"
    );

    // Nothing is checked for an agent that is not key-verified itself.
    let broken = crawler
        .verify_with_peers(&rig.domain(Behaviour::ChallengeSilent))
        .await
        .report;
    assert!(broken.peer_checks.is_empty());
    let step = broken.steps.iter().find(|s| s.step == "peers").unwrap();
    assert_eq!(step.outcome, agentmesh::crawl::StepOutcome::Skipped);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_policy_never_connects_to_internal_addresses() {
    let rig = rig(PopulationConfig::healthy(11, 2)
        .with(Behaviour::PrivateTarget)
        .with(Behaviour::LoopbackTarget))
    .await;
    let crawler = rig.crawler(false);
    for agent in rig.testbed.population().agents() {
        let r = crawler.crawl(&agent.domain).await.report;
        assert_eq!(
            r.reasons.first().map(|r| r.as_str()),
            Some("address_not_allowed"),
            "{}: {:?}",
            agent.domain,
            r.steps
        );
        assert_eq!(r.level(), TrustLevel::Unverified);
    }
    let served: u64 = rig
        .testbed
        .population()
        .agents()
        .iter()
        .filter_map(|a| rig.testbed.site_counts(&a.domain))
        .map(|c| c.well_known + c.chat + c.landing)
        .sum();
    assert_eq!(served, 0, "no request may reach the testbed's sites");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_on_a_port_not_allowed_is_refused_before_connecting() {
    // The testbed serves on a loopback port that is not 443: with only the
    // default ports allowed, its agents' `wk` URLs (and the SRV port they
    // take) are refused with their own reason, and nothing connects.
    let rig = rig(PopulationConfig::healthy(12, 3)).await;
    assert_ne!(rig.testbed.https_port(), 443);
    let crawler = rig.crawler_with(true, AllowedPorts::default());
    for agent in rig.testbed.population().agents() {
        let r = crawler.crawl(&agent.domain).await.report;
        assert_eq!(
            r.reasons,
            [Reason::PortNotAllowed],
            "{}: {:?}",
            agent.domain,
            r.steps
        );
        let step = r.steps.iter().find(|s| s.step == "dns_address").unwrap();
        assert_eq!(step.reason, Some(Reason::PortNotAllowed));
        assert!(
            step.detail
                .contains(&format!("port {}", rig.testbed.https_port())),
            "{}",
            step.detail
        );
        assert_eq!(r.level(), TrustLevel::Unverified);
        assert!(!r.stored);
    }
    let served: u64 = rig
        .testbed
        .population()
        .agents()
        .iter()
        .filter_map(|a| rig.testbed.site_counts(&a.domain))
        .map(|c| c.well_known + c.chat + c.landing)
        .sum();
    assert_eq!(served, 0, "no request may reach the testbed's sites");
    // The same agents with the port allowed are crawled (the refusal was
    // the port's, not something else).
    let allowed = rig.crawler(true);
    let agent = rig.testbed.population().healthy_agents().next().unwrap();
    let r = allowed.crawl(&agent.domain).await.report;
    assert!(r.level() >= TrustLevel::KeyVerified, "{:?}", r.steps);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_population_is_key_verified_and_mutual_pairs_peer_verified() {
    let rig = rig(PopulationConfig::healthy(3, 220)).await;
    let crawler = rig.crawler(true);
    let domains: Vec<String> = rig
        .testbed
        .population()
        .agents()
        .iter()
        .map(|a| a.domain.clone())
        .collect();
    let reports = crawler
        .crawl_many(&rig.issuer, domains, false, 1000, |_| {})
        .await;
    assert_eq!(reports.len(), 220);
    let failed: Vec<_> = reports
        .iter()
        .filter(|r| r.level() < TrustLevel::KeyVerified)
        .map(|r| (&r.domain, &r.reasons))
        .collect();
    assert!(failed.is_empty(), "not key-verified: {failed:?}");

    // Levels as stored, after every agent was crawled (order-independent).
    let level = async |domain: &str| match rig
        .store
        .get(&format!("agent:{domain}"))
        .await
        .unwrap()
        .map(|a| a.body)
    {
        Some(RecordBody::Descriptor(d)) => d.evidence.level(),
        other => panic!("{domain}: no descriptor ({other:?})"),
    };
    let population = rig.testbed.population();
    let pairs: Vec<(&str, &str)> = population.mutual_pairs().collect();
    assert!(
        pairs.len() >= 20,
        "the population has mutual pairs ({})",
        pairs.len()
    );
    for (a, b) in &pairs {
        assert_eq!(
            level(a).await,
            TrustLevel::PeerVerified,
            "{a} (mutual with {b})"
        );
        assert_eq!(
            level(b).await,
            TrustLevel::PeerVerified,
            "{b} (mutual with {a})"
        );
    }
    let mutual: std::collections::HashSet<&str> =
        pairs.iter().flat_map(|(a, b)| [*a, *b]).collect();
    for agent in population.agents() {
        if !mutual.contains(agent.domain.as_str()) {
            assert_eq!(
                level(&agent.domain).await,
                TrustLevel::KeyVerified,
                "{} has no mutual peer",
                agent.domain
            );
        }
    }

    // Crawled agents are indexed beside registered ones.
    let some = &population.agents()[0];
    let cap = agentmesh::descriptor::normalise_term(&some.capabilities[0].id).unwrap();
    let found = rig
        .store
        .search(&Filter::new([cap.as_str()], [], []).unwrap(), None, 1000)
        .await
        .unwrap();
    assert!(
        found.iter().any(|a| a.body.agent_id() == some.id()),
        "{} found by capability {cap}",
        some.id()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_feed_the_frontier() {
    let rig = rig(PopulationConfig::healthy(5, 60)).await;
    let crawler = rig.crawler(true);
    let population = rig.testbed.population();
    let (a, b) = population.mutual_pairs().next().expect("a mutual pair");
    let reports = crawler
        .crawl_many(&rig.issuer, vec![a.to_owned()], true, 1000, |_| {})
        .await;
    let crawled: std::collections::HashSet<&str> =
        reports.iter().map(|r| r.domain.as_str()).collect();
    assert!(
        crawled.contains(b),
        "the peer {b} of {a} was crawled through the relationship"
    );
    assert!(reports.len() > 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_resolve_to_internal_addresses_are_refused_before_connecting() {
    use agentmesh::testbed::dns::{DnsServer, Zone};
    use hickory_proto::rr::rdata::AAAA;
    use hickory_proto::rr::{Name, RData, Record};
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

    let fp = agentmesh::identity::fingerprint(&agentmesh::identity::generate().verifying_key());
    let mut zone = Zone::new();
    let mut agent = |domain: &str, wk: &str| {
        zone.add_txt(
            &format!("_agent.{domain}"),
            vec![format!("v=ADP1; pk={fp}; wk={wk}")],
        )
        .unwrap();
    };
    agent(
        "metadata.example.test",
        "https://metadata.example.test/.well-known/agent.json",
    );
    agent(
        "v6.example.test",
        "https://v6.example.test/.well-known/agent.json",
    );
    agent(
        "ten.example.test",
        "https://ten.example.test/.well-known/agent.json",
    );
    agent(
        "literal-metadata.example.test",
        "https://169.254.169.254/latest/meta-data",
    );
    agent(
        "literal-v6.example.test",
        "https://[::1]:8443/.well-known/agent.json",
    );
    zone.add_a("metadata.example.test", Ipv4Addr::new(169, 254, 169, 254))
        .unwrap();
    zone.add_a("ten.example.test", Ipv4Addr::new(10, 1, 2, 3))
        .unwrap();
    zone.insert(Record::from_rdata(
        Name::from_ascii("v6.example.test.").unwrap(),
        300,
        RData::AAAA(AAAA(Ipv6Addr::LOCALHOST)),
    ));
    let dns = DnsServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), zone)
        .await
        .unwrap();

    let options = CrawlerOptions {
        resolvers: vec![dns.local_addr()],
        ..CrawlerOptions::default()
    };
    let key = agentmesh::identity::generate();
    let crawler = Crawler::new(options, Arc::new(key), "verifier".into()).unwrap();
    for domain in [
        "metadata.example.test",
        "v6.example.test",
        "ten.example.test",
        "literal-metadata.example.test",
        "literal-v6.example.test",
    ] {
        let r = crawler.crawl(domain).await.report;
        assert_eq!(
            r.reasons,
            vec![Reason::AddressNotAllowed],
            "{domain}: {:?}",
            r.steps
        );
        let fetch_ran = r.steps.iter().any(|s| s.step == "fetch");
        assert!(
            !fetch_ran,
            "{domain}: nothing is fetched from a refused address"
        );
    }
}

/// A crawler for `bed`, storing through `issuer`.
async fn crawl_into(
    bed: &Testbed,
    dir: &std::path::Path,
    issuer: &Issuer,
    domain: &str,
) -> CrawlReport {
    let ca_file = dir.join(format!("ca-{}.pem", bed.https_port()));
    bed.write_ca(&ca_file).unwrap();
    let options = CrawlerOptions {
        resolvers: vec![bed.dns_addr()],
        ca_files: vec![ca_file],
        policy: AddressPolicy {
            allow_private: true,
        },
        fetch_timeout: Duration::from_secs(3),
        challenge_timeout: Duration::from_secs(2),
        allowed_ports: AllowedPorts::new([bed.https_port()]),
        ..CrawlerOptions::default()
    };
    let key = agentmesh::identity::generate();
    let verifier = agentmesh::identity::peer_id_of(&key);
    let crawler = Crawler::new(options, Arc::new(key), verifier).unwrap();
    crawler.crawl_and_store(issuer, domain).await.report
}

async fn bed_with(rotation: agentmesh::testbed::Rotation) -> Testbed {
    let config = PopulationConfig {
        rotation,
        ..PopulationConfig::healthy(31, 1)
    };
    Testbed::start(Population::generate(&config), TestbedOptions::default())
        .await
        .expect("the testbed starts")
}

/// The fingerprint of the key in the document held for `id`.
async fn held_fingerprint(store: &Store, id: &str) -> String {
    let held = store.get(id).await.unwrap().expect("held");
    let RecordBody::Descriptor(d) = held.body else {
        panic!("a descriptor")
    };
    let doc: serde_json::Value = serde_json::from_str(&d.document).unwrap();
    doc["identity"]["publicKey"]["fingerprint"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rotation_keeps_the_agent_only_with_the_old_keys_statement() {
    use agentmesh::testbed::Rotation;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store"), 16 << 20).unwrap();
    let issuer = Issuer::new(
        store.clone(),
        Arc::new(agentmesh::identity::generate()),
        Duration::from_secs(24 * 3600),
    );
    let first = bed_with(Rotation::None).await;
    let domain = first.population().agents()[0].domain.clone();
    let id = format!("agent:{domain}");
    let r = crawl_into(&first, dir.path(), &issuer, &domain).await;
    assert!(
        r.stored && r.level() == TrustLevel::KeyVerified,
        "{:?}",
        r.reasons
    );
    let old_fp = held_fingerprint(&store, &id).await;

    // Without a statement: refused, the old descriptor stays.
    let unproven = bed_with(Rotation::Unproven).await;
    let r = crawl_into(&unproven, dir.path(), &issuer, &domain).await;
    assert_eq!(
        r.reasons.first().map(|r| r.as_str()),
        Some("key_changed_unproven"),
        "{:?}",
        r.steps
    );
    assert!(!r.stored);
    assert_eq!(r.level(), TrustLevel::Unverified);
    assert_eq!(held_fingerprint(&store, &id).await, old_fp);

    // With the old key's statement: the agent keeps its identity under the
    // new key.
    let proven = bed_with(Rotation::Proven).await;
    let r = crawl_into(&proven, dir.path(), &issuer, &domain).await;
    let step = r
        .steps
        .iter()
        .find(|s| s.step == "rotation")
        .expect("a rotation step");
    assert_eq!(
        step.outcome,
        agentmesh::crawl::StepOutcome::Ok,
        "{}",
        step.detail
    );
    assert!(
        r.stored && r.level() == TrustLevel::KeyVerified,
        "{:?}",
        r.reasons
    );
    let new_fp = held_fingerprint(&store, &id).await;
    assert_ne!(new_fp, old_fp);

    // The pre-rotation document served again (a replay) is refused.
    let r = crawl_into(&first, dir.path(), &issuer, &domain).await;
    assert_eq!(
        r.reasons.first().map(|r| r.as_str()),
        Some("key_changed_unproven")
    );
    assert_eq!(held_fingerprint(&store, &id).await, new_fp);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_revokes_itself_with_its_own_key_through_a_node() {
    let bed = bed_with(agentmesh::testbed::Rotation::None).await;
    let agent = bed.population().agents()[0].clone();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    bed.write_ca(&ca).unwrap();
    let mut config = agentmesh::config::Config {
        data_dir: dir.path().join("data"),
        ..agentmesh::config::Config::default()
    };
    config.api.listen = "127.0.0.1:0".parse().unwrap();
    config.p2p.listen = vec!["/ip4/127.0.0.1/tcp/0".into()];
    config.p2p.allow_private_addresses = true;
    config.crawl.resolvers = vec![bed.dns_addr()];
    config.crawl.ca_files = vec![ca];
    config.crawl.allow_private_addresses = true;
    config.crawl.allowed_ports = vec![bed.https_port()];
    config.crawl.follow_peers = false;
    let node = agentmesh::node::Node::spawn(config)
        .await
        .expect("the node starts");
    let api = format!("http://{}", node.api_addr());
    let http = reqwest::Client::new();
    let crawled: serde_json::Value = http
        .post(format!("{api}/crawl"))
        .json(&serde_json::json!({"domains": [agent.domain], "wait": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(crawled["reports"][0]["stored"], true, "{crawled}");
    let id = agent.id();
    let get = |id: String| {
        let (http, api) = (http.clone(), api.clone());
        async move {
            http.get(format!("{api}/agents/{id}"))
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(get(id.clone()).await, 200);

    // A tombstone signed by a key that is not the agent's is refused.
    let stranger = dir.path().join("stranger.key");
    agentmesh::identity::write_key_file(&stranger, &agentmesh::identity::generate()).unwrap();
    let revoke = |key: &std::path::Path, extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_agentmesh"))
            .args(["revoke", &agent.domain, "--node", &api])
            .arg("--key")
            .arg(key)
            .args(extra)
            .output()
            .unwrap()
    };
    let refused = tokio::task::block_in_place(|| revoke(&stranger, &[]));
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("tombstone_not_authorised"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert_eq!(get(id.clone()).await, 200);

    // The agent's own key: revoked, gone from the node.
    let own = dir.path().join("agent.key");
    agentmesh::identity::write_key_file(&own, &agent.key).unwrap();
    let done = tokio::task::block_in_place(|| revoke(&own, &["--json"]));
    assert_eq!(
        done.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    // --json: the tombstone's id and seq, and the node's answer.
    let said: serde_json::Value = serde_json::from_slice(&done.stdout).expect("one JSON object");
    assert_eq!(said["agent_id"], id.as_str(), "{said}");
    assert!(said["seq"].as_u64().is_some_and(|s| s > 0), "{said}");
    assert!(said["node"].is_object(), "the node's answer: {said}");
    assert_eq!(get(id.clone()).await, 404);
    let found: serde_json::Value = http
        .post(format!("{api}/agents/search"))
        .json(&serde_json::json!({"filters": {}, "scope": "local"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        found.as_array().unwrap().iter().all(|r| r["id"] != id),
        "{found}"
    );

    // A record that is not CBOR is refused as such.
    let wrong = http
        .post(format!("{api}/records"))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 415);
    node.shutdown().await.expect("the node stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_peer_cannot_launder_its_claim_through_a_mutual_listing() {
    // Two agents that list each other as verified peers; a hostile node
    // gossips a forgery of one of them (its own key in the document, every
    // flag set) before this node crawls the other.
    let rig = rig(PopulationConfig::healthy(5, 12)).await;
    let population = rig.testbed.population();
    let (a, b) = population
        .mutual_pairs()
        .next()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .expect("the population has a mutual pair");
    let b_agent = population
        .agents()
        .iter()
        .find(|x| x.domain == b)
        .expect("b is in the population");
    let b_doc = serde_json::to_string(&population.document(b_agent, rig.testbed.ports())).unwrap();
    let rogue = agentmesh::identity::generate();
    let forged = common::claim_everything(
        &common::with_key(&b_doc, &rogue),
        agentmesh::record::next_seq(None),
        3600,
        &rogue,
        &rogue,
    );
    let own = rig.issuer.key().verifying_key();
    let judge = agentmesh::federation::Judge::new(rig.store.clone(), own, []);
    let judged = tokio::task::spawn_blocking(move || judge.judge(&forged))
        .await
        .unwrap();
    assert!(
        matches!(
            judged,
            agentmesh::federation::Judgement::Stored { trusted: false, .. }
        ),
        "{judged:?}"
    );

    let outcome = rig.crawler(true).crawl_and_store(&rig.issuer, &a).await;
    assert!(outcome.report.stored, "{:?}", outcome.report);
    assert_eq!(
        outcome.report.trust.level,
        TrustLevel::KeyVerified,
        "a claim held for the peer makes no mutual pair"
    );
    let held_b = rig
        .store
        .get(&format!("agent:{b}"))
        .await
        .unwrap()
        .expect("the claim is held");
    assert!(held_b.claimed, "the forgery is still a claim");
    assert_eq!(
        held_b.record.signer(),
        &rogue.verifying_key(),
        "this node re-signed nothing it did not verify"
    );

    // Once this node verified b itself, the pair is real.
    let outcome = rig.crawler(true).crawl_and_store(&rig.issuer, &b).await;
    assert!(outcome.report.stored, "{:?}", outcome.report);
    assert_eq!(outcome.report.trust.level, TrustLevel::PeerVerified);
    let held_a = rig.store.get(&format!("agent:{a}")).await.unwrap().unwrap();
    assert_eq!(held_a.counted_level(), TrustLevel::PeerVerified);
}

/// A node crawling the testbed with private addresses not allowed, and
/// `admin_token` as its token (none: an open node).
async fn node_for(
    bed: &Testbed,
    dir: &std::path::Path,
    admin_token: Option<&str>,
) -> agentmesh::node::Node {
    let ca = dir.join("ca.pem");
    bed.write_ca(&ca).unwrap();
    let mut config = agentmesh::config::Config {
        data_dir: dir.join("data"),
        ..agentmesh::config::Config::default()
    };
    config.api.listen = "127.0.0.1:0".parse().unwrap();
    config.api.admin_token = admin_token.map(Into::into);
    config.p2p.listen = vec!["/ip4/127.0.0.1/tcp/0".into()];
    config.p2p.allow_private_addresses = true;
    config.crawl.resolvers = vec![bed.dns_addr()];
    config.crawl.ca_files = vec![ca];
    config.crawl.allow_private_addresses = false;
    config.crawl.allowed_ports = vec![bed.https_port()];
    config.crawl.follow_peers = false;
    agentmesh::node::Node::spawn(config)
        .await
        .expect("the node starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_crawl_report_names_no_internal_address_and_the_operator_sees_it() {
    use agentmesh::testbed::publish::PRIVATE_ADDRESS;
    let bed = Testbed::start(
        Population::generate(&PopulationConfig::healthy(13, 1).with(Behaviour::PrivateTarget)),
        TestbedOptions::default(),
    )
    .await
    .expect("the testbed starts");
    let domain = bed
        .population()
        .domain_of(Behaviour::PrivateTarget)
        .unwrap()
        .to_owned();
    let address = PRIVATE_ADDRESS.to_string();
    let token = "a-token-of-sixteen-or-more";
    let http = reqwest::Client::new();

    // A node with a token: the operator crawls, and sees the address.
    let dir = tempfile::tempdir().unwrap();
    let node = node_for(&bed, dir.path(), Some(token)).await;
    let api = format!("http://{}", node.api_addr());
    let crawled: serde_json::Value = http
        .post(format!("{api}/crawl"))
        .bearer_auth(token)
        .json(&serde_json::json!({"domains": [domain], "wait": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        crawled["reports"][0]["reasons"],
        serde_json::json!(["address_not_allowed"]),
        "{crawled}"
    );
    assert!(crawled.to_string().contains(&address), "{crawled}");
    let get = |auth: Option<&str>| {
        let mut request = http.get(format!("{api}/crawl/{domain}"));
        if let Some(t) = auth {
            request = request.bearer_auth(t);
        }
        async move {
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 200);
            response.json::<serde_json::Value>().await.unwrap()
        }
    };
    let full = get(Some(token)).await;
    assert!(full.to_string().contains(&address), "{full}");
    // A wrong token is refused (401), and its answer names no address.
    let refused = http
        .get(format!("{api}/crawl/{domain}"))
        .bearer_auth("not-the-token-at-all")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert!(!refused.text().await.unwrap().contains(&address));
    // Anyone else: the reason code, no address.
    {
        let who: Option<&str> = None;
        let public = get(who).await;
        let text = public.to_string();
        assert!(!text.contains(&address), "{who:?}: {text}");
        assert!(!text.contains("10.0.0."), "{who:?}: {text}");
        assert_eq!(
            public["reasons"],
            serde_json::json!(["address_not_allowed"])
        );
        let step = public["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["step"] == "dns_address")
            .expect("a dns_address step");
        assert_eq!(step["reason"], "address_not_allowed");
        assert_eq!(step["detail"], agentmesh::crawl::REFUSED_ADDRESS);
    }
    node.shutdown().await.expect("the node stops");

    // A node without a token is open: everyone gets the redacted report,
    // from POST /crawl too.
    let dir = tempfile::tempdir().unwrap();
    let node = node_for(&bed, dir.path(), None).await;
    let api = format!("http://{}", node.api_addr());
    let crawled: serde_json::Value = http
        .post(format!("{api}/crawl"))
        .json(&serde_json::json!({"domains": [domain], "wait": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        crawled["reports"][0]["reasons"],
        serde_json::json!(["address_not_allowed"]),
        "{crawled}"
    );
    assert!(!crawled.to_string().contains(&address), "{crawled}");
    let public: serde_json::Value = http
        .get(format!("{api}/crawl/{domain}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        public["reasons"],
        serde_json::json!(["address_not_allowed"])
    );
    assert!(!public.to_string().contains(&address), "{public}");
    node.shutdown().await.expect("the node stops");
    bed.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_names_on_one_address_are_crawled_one_at_a_time() {
    // Six names, all resolving to 127.0.0.1, each dripping its document
    // for at least `drip.every`: crawled at once with one request to the
    // address at a time, no request reaches the address while one of
    // those documents is being served.
    const NAMES: usize = 6;
    let drip = Drip {
        bytes: 64 * 1024,
        every: Duration::from_millis(150),
    };
    let mut config = PopulationConfig::healthy(91, 0);
    for _ in 0..NAMES {
        config = config.with(Behaviour::SlowBody);
    }
    let dir = tempfile::tempdir().unwrap();
    let testbed = Testbed::start(
        Population::generate(&config),
        TestbedOptions {
            drip,
            ..TestbedOptions::default()
        },
    )
    .await
    .expect("the testbed starts");
    let ca_file = dir.path().join("ca.pem");
    testbed.write_ca(&ca_file).unwrap();
    let options = CrawlerOptions {
        resolvers: vec![testbed.dns_addr()],
        ca_files: vec![ca_file],
        policy: AddressPolicy {
            allow_private: true,
        },
        fetch_timeout: Duration::from_secs(5),
        challenge_timeout: Duration::from_secs(2),
        concurrency: 32,
        allowed_ports: AllowedPorts::new([testbed.https_port()]),
        politeness: Politeness {
            per_host_concurrency: 2,
            per_host_interval: Duration::from_millis(1),
            per_host_burst: 1,
            per_address_concurrency: 1,
            per_address_interval: Duration::from_millis(1),
            per_address_burst: 1,
        },
        ..CrawlerOptions::default()
    };
    let key = agentmesh::identity::generate();
    let verifier = agentmesh::identity::peer_id_of(&key);
    let crawler = Crawler::new(options, Arc::new(key), verifier).expect("the crawler builds");
    let domains: Vec<String> = testbed
        .population()
        .with_behaviour(Behaviour::SlowBody)
        .map(|a| a.domain.clone())
        .collect();
    assert_eq!(domains.len(), NAMES);

    let crawls = futures_util::future::join_all(domains.iter().map(|d| crawler.crawl(d)));
    let outcomes = tokio::time::timeout(Duration::from_secs(30), crawls)
        .await
        .expect("six crawls of one address, one request at a time, end within 30 s");
    assert_eq!(outcomes.len(), NAMES);

    // Every request the sites served (documents and challenge sessions),
    // in the order they arrived.
    let mut served: Vec<(std::time::Instant, &'static str, String)> = domains
        .iter()
        .flat_map(|d| {
            let site = testbed.site(d).expect("the testbed serves it");
            site.requests()
                .into_iter()
                .map(move |r| (r.at, r.kind, d.clone()))
        })
        .collect();
    served.sort_by_key(|(at, ..)| *at);
    let documents = served.iter().filter(|(_, k, _)| *k == "well_known").count();
    assert_eq!(documents, NAMES, "each name's document was asked for once");
    for pair in served.windows(2) {
        let ((at, kind, domain), (next, next_kind, next_domain)) = (&pair[0], &pair[1]);
        if *kind == "well_known" {
            let gap = next.duration_since(*at);
            assert!(
                gap >= drip.every,
                "{next_kind} to {next_domain} arrived {gap:?} after the document of {domain} \
                 began, which takes at least {:?}: two requests to 127.0.0.1 overlapped",
                drip.every
            );
        }
    }
}
