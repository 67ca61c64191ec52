//! A crawl of the testbed's formats organisation (`formats.test`):
//! publishers of A2A cards, an ARD catalog, DNS-AID and AID records,
//! healthy and broken, each served by the testbed's real DNS and HTTPS
//! servers. Every agent is reported with its source format and trust
//! level, every broken publisher with its reason code, and what is stored
//! is found by a search.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentmesh::crawl::{AllowedPorts, CrawlReport, Crawler, CrawlerOptions};
use agentmesh::descriptor::DocumentFormat;
use agentmesh::issuer::Issuer;
use agentmesh::net::AddressPolicy;
use agentmesh::record::RecordBody;
use agentmesh::store::Store;
use agentmesh::testbed::formats::JWKS_PATH;
use agentmesh::testbed::{Population, PopulationConfig, Testbed, TestbedOptions};
use agentmesh::trust::TrustLevel;

struct Rig {
    testbed: Testbed,
    _dir: tempfile::TempDir,
    store: Store,
    issuer: Issuer,
    crawler: Crawler,
}

async fn rig() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let options = TestbedOptions {
        formats: true,
        ..TestbedOptions::default()
    };
    let population = Population::generate(&PopulationConfig::healthy(9, 3));
    let testbed = Testbed::start(population, options)
        .await
        .expect("the testbed starts");
    let ca_file = dir.path().join("ca.pem");
    testbed.write_ca(&ca_file).unwrap();
    let store = Store::open(&dir.path().join("store"), 16 << 20).unwrap();
    let options = CrawlerOptions {
        resolvers: vec![testbed.dns_addr()],
        ca_files: vec![ca_file],
        policy: AddressPolicy {
            allow_private: true,
        },
        fetch_timeout: Duration::from_secs(3),
        challenge_timeout: Duration::from_secs(2),
        https_port: testbed.https_port(),
        allowed_ports: AllowedPorts::new([testbed.https_port()]),
        ..CrawlerOptions::default()
    };
    let key = agentmesh::identity::generate();
    let verifier = agentmesh::identity::peer_id_of(&key);
    let crawler = Crawler::new(options, Arc::new(key), verifier).expect("the crawler builds");
    let issuer = Issuer::new(
        store.clone(),
        Arc::new(agentmesh::identity::generate()),
        Duration::from_secs(24 * 3600),
    );
    Rig {
        testbed,
        _dir: dir,
        store,
        issuer,
        crawler,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_format_is_reported_with_its_source_format_trust_and_reasons() {
    let rig = rig().await;
    let org = rig
        .testbed
        .formats()
        .expect("the formats organisation is served");
    let mut domains: Vec<String> = org.expected.iter().map(|e| e.domain.clone()).collect();
    domains.dedup();
    let reports = rig
        .crawler
        .crawl_many(&rig.issuer, domains, false, 1000, |_| {})
        .await;
    let by_id: BTreeMap<&str, &CrawlReport> =
        reports.iter().map(|r| (r.agent_id.as_str(), r)).collect();

    let mut wrong = Vec::new();
    for e in &org.expected {
        let Some(r) = by_id.get(e.agent_id.as_str()) else {
            wrong.push(format!("{}: not reported", e.agent_id));
            continue;
        };
        if r.source_format != e.format {
            wrong.push(format!("{}: format {}", e.agent_id, r.source_format));
        }
        let got = if r.stored {
            Ok(r.level())
        } else {
            Err(r.reasons.first().map_or("none", |r| r.as_str()))
        };
        if got != e.outcome {
            wrong.push(format!(
                "{}: expected {:?}, got {got:?} {:?}",
                e.agent_id, e.outcome, r.steps
            ));
        }
    }
    assert!(wrong.is_empty(), "mismatches:\n{}", wrong.join("\n"));

    // The ADP agent beside the AID record is still key-verified.
    let beside = org
        .expected
        .iter()
        .find(|e| e.format == DocumentFormat::Aid && !e.domain.ends_with("formats.test"))
        .expect("an AID record beside an ADP agent");
    let adp = by_id[format!("agent:{}", beside.domain).as_str()];
    assert_eq!(adp.level(), TrustLevel::KeyVerified, "{:?}", adp.reasons);

    // The signed card's signature was checked against its key set, and a
    // broken publisher's absence of formats costs no report: no domain of
    // the organisation reports an ADP failure.
    let signed = by_id["a2a:a2a.formats.test"];
    let step = signed.steps.iter().find(|s| s.step == "signature").unwrap();
    assert_eq!(
        step.outcome,
        agentmesh::crawl::StepOutcome::Ok,
        "{}",
        step.detail
    );
    assert_eq!(
        rig.testbed.document_fetches("a2a.formats.test", JWKS_PATH),
        1
    );
    for r in &reports {
        if r.domain.ends_with("formats.test") {
            assert_ne!(r.source_format, DocumentFormat::Adp, "{}", r.agent_id);
        }
    }

    // What was stored is held with its format, unverified, and nothing
    // refused was stored.
    for e in &org.expected {
        let held = rig.store.get(&e.agent_id).await.unwrap();
        match (&e.outcome, held) {
            (Ok(_), Some(agent)) => {
                let RecordBody::Descriptor(d) = &agent.body else {
                    panic!("{}: a tombstone", e.agent_id)
                };
                assert_eq!(d.descriptor.format, e.format, "{}", e.agent_id);
                assert_eq!(d.evidence.level(), TrustLevel::Unverified);
            }
            (Err(_), None) => {}
            (outcome, held) => panic!("{}: {outcome:?} but held {}", e.agent_id, held.is_some()),
        }
    }
}
