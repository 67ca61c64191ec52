//! A crawl of the testbed's formats organisation (`formats.test`):
//! publishers of A2A cards, an ARD catalog, DNS-AID and AID records,
//! healthy and broken, each served by the testbed's real DNS and HTTPS
//! servers. Every agent is reported with its source format and trust
//! level, every broken publisher with its reason code, and what is stored
//! is found by a search.

use crate::common;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentmesh::crawl::{AllowedPorts, CrawlReport, Crawler, CrawlerOptions};
use agentmesh::descriptor::DocumentFormat;
use agentmesh::issuer::Issuer;
use agentmesh::net::AddressPolicy;
use agentmesh::record::RecordBody;
use agentmesh::store::{Filter, Store, TextQuery};
use agentmesh::testbed::formats::{
    A2A_ANCHORED_DOMAIN, A2A_OTHER_KEY_DOMAIN, AGENTMAP_PATH, ARD_SOURCES_DOMAIN,
    DNS_AID_CARD_DOMAIN, DNS_AID_CARD_NAME, DNS_AID_CROWD_DOMAIN, DNS_AID_PRIVATE_CAP_DOMAIN,
    JWKS_PATH, LINKED_PATH, MANIFEST_JWKS_PATH,
};
use agentmesh::testbed::{Population, PopulationConfig, Testbed, TestbedOptions};
use agentmesh::trust::{Reason, TrustLevel};

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
    let store = Store::open(&dir.path().join("store"), 16 << 20).unwrap();
    let crawler = crawler(&testbed, dir.path(), true);
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

/// A crawler of the testbed, which is on loopback: `allow_private` as a
/// test rig sets it, or as a node's default (refused).
fn crawler(testbed: &Testbed, dir: &std::path::Path, allow_private: bool) -> Crawler {
    crawler_of(
        testbed,
        dir,
        allow_private,
        CrawlerOptions::default().formats,
    )
}

/// As [`crawler`], reading only `formats`.
fn crawler_of(
    testbed: &Testbed,
    dir: &std::path::Path,
    allow_private: bool,
    formats: Vec<DocumentFormat>,
) -> Crawler {
    let ca_file = dir.join("ca.pem");
    testbed.write_ca(&ca_file).unwrap();
    let options = CrawlerOptions {
        resolvers: vec![testbed.dns_addr()],
        ca_files: vec![ca_file],
        policy: AddressPolicy { allow_private },
        fetch_timeout: Duration::from_secs(3),
        challenge_timeout: Duration::from_secs(2),
        https_port: testbed.https_port(),
        allowed_ports: AllowedPorts::new([testbed.https_port()]),
        formats,
        ..CrawlerOptions::default()
    };
    let key = agentmesh::identity::generate();
    let verifier = agentmesh::identity::peer_id_of(&key);
    Crawler::new(options, Arc::new(key), verifier).expect("the crawler builds")
}

/// The domain of the testbed's first healthy ADP agent.
fn healthy_domain(testbed: &Testbed) -> String {
    testbed
        .population()
        .healthy_agents()
        .next()
        .expect("a healthy ADP agent")
        .domain
        .clone()
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

    // ARD v0.91: the catalog at `ard.json` is read, and the legacy
    // `ai-catalog.json` beside it is not even fetched.
    let current = "catalog-v091.formats.test";
    assert!(by_id.contains_key(format!("urn:air:{current}:translator").as_str()));
    assert!(!by_id.contains_key(format!("urn:air:{current}:legacy").as_str()));
    assert_eq!(
        rig.testbed
            .document_fetches(current, agentmesh::formats::ard::WELL_KNOWN_PATH),
        0
    );

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
    // The SVCB index's host: dns-aid-core's index tried first and left
    // (not ARD), then the ARD catalog read.
    for path in [
        "/.well-known/agents-index.json",
        "/.well-known/ai-catalog.json",
    ] {
        assert_eq!(
            rig.testbed
                .document_fetches("dnsaid-index-host.formats.test", path),
            1,
            "{path}"
        );
    }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ard_entries_are_found_where_v091_says_and_their_trust_manifests_checked() {
    let rig = rig().await;
    let domain = ARD_SOURCES_DOMAIN;
    let reports = rig
        .crawler
        .crawl_many(&rig.issuer, vec![domain.to_owned()], false, 10, |_| {})
        .await;
    let report = |name: &str| {
        let id = format!("urn:air:{domain}:{name}");
        reports
            .iter()
            .find(|r| r.agent_id == id)
            .unwrap_or_else(|| panic!("no report for {id}: {reports:?}"))
    };
    // Found through robots.txt's Agentmap line, the page's rel="ard" link
    // and the page's JSON-LD; the legacy catalog is not fetched, since
    // the domain publishes v0.91 sources.
    assert!(step(report("ledger"), "catalog")
        .detail
        .contains(AGENTMAP_PATH));
    assert!(step(report("forger"), "catalog")
        .detail
        .contains(LINKED_PATH));
    assert!(step(report("slides"), "catalog")
        .detail
        .contains("JSON-LD entry"));
    assert_eq!(
        rig.testbed
            .document_fetches(domain, agentmesh::formats::ard::WELL_KNOWN_PATH),
        0
    );
    assert!(reports.iter().all(|r| !r.agent_id.ends_with(":legacy")));

    // Signed through a key set on the host, and through the did:web
    // identity's DID document: verified, claims shown, level not raised.
    for (name, from) in [
        ("ledger", MANIFEST_JWKS_PATH),
        ("auditor", "/.well-known/did.json"),
    ] {
        let r = report(name);
        assert!(r.stored, "{name}: {:?}", r.steps);
        assert_eq!(r.level(), TrustLevel::Unverified);
        let s = step(r, "trust_manifest");
        assert_eq!(s.outcome, agentmesh::crawl::StepOutcome::Ok, "{}", s.detail);
        assert!(s.detail.contains("verifies"), "{}", s.detail);
        assert!(s.detail.contains(from), "{}", s.detail);
        assert!(s.detail.contains("SOC2-Type2"), "{}", s.detail);
    }
    // One key set fetch serves both signatures that name it.
    assert_eq!(rig.testbed.document_fetches(domain, MANIFEST_JWKS_PATH), 1);

    // A claim changed after signing refuses the entry; an identity of
    // another domain is namespace squatting.
    let forged = report("forger");
    assert!(!forged.stored);
    assert_eq!(forged.reasons, [Reason::TrustManifestSignatureBad]);
    let squatter = report("squatter");
    assert!(!squatter.stored);
    assert_eq!(squatter.reasons, [Reason::CatalogEntryInvalid]);
    assert!(
        step(squatter, "entry").detail.contains("does not align"),
        "{}",
        step(squatter, "entry").detail
    );
    for name in ["forger", "squatter"] {
        let id = format!("urn:air:{domain}:{name}");
        assert!(rig.store.get(&id).await.unwrap().is_none(), "{id} is held");
    }

    // The stored entry keeps its trust manifest as written (claims for
    // whoever reads it), and the skill its kind's tag.
    let held = rig
        .store
        .get(&format!("urn:air:{domain}:ledger"))
        .await
        .unwrap()
        .expect("the entry is held");
    let RecordBody::Descriptor(d) = &held.body else {
        panic!("a tombstone")
    };
    let doc: serde_json::Value = serde_json::from_str(&d.document).unwrap();
    assert_eq!(
        doc["trustManifest"]["attestations"][0]["type"],
        "SOC2-Type2"
    );
    let skill = rig
        .store
        .get(&format!("urn:air:{domain}:slides"))
        .await
        .unwrap()
        .expect("the skill is held");
    let RecordBody::Descriptor(d) = &skill.body else {
        panic!("a tombstone")
    };
    assert!(
        d.descriptor.tags.contains(&"skill".to_owned()),
        "{:?}",
        d.descriptor.tags
    );
}

/// The step of `report` named `name`.
fn step<'a>(report: &'a CrawlReport, name: &str) -> &'a agentmesh::crawl::Step {
    report
        .steps
        .iter()
        .find(|s| s.step == name)
        .unwrap_or_else(|| panic!("no {name} step in {:?}", report.steps))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dns_aid_agent_is_found_by_what_the_card_behind_its_record_says() {
    let rig = rig().await;
    let reports = rig
        .crawler
        .crawl_many(
            &rig.issuer,
            vec![DNS_AID_CARD_DOMAIN.to_owned()],
            false,
            10,
            |_| {},
        )
        .await;
    let id = format!("dns-aid:_a2a._agents.{DNS_AID_CARD_DOMAIN}");
    let report = reports
        .iter()
        .find(|r| r.agent_id == id)
        .unwrap_or_else(|| panic!("no report for {id}: {reports:?}"));
    assert!(report.stored, "{:?}", report.steps);
    assert_eq!(report.source_format, DocumentFormat::DnsAid);
    assert_eq!(report.level(), TrustLevel::Unverified);
    for name in ["dns_svcb", "dns_address", "capability", "card"] {
        let s = step(report, name);
        assert_eq!(
            s.outcome,
            agentmesh::crawl::StepOutcome::Ok,
            "{name}: {}",
            s.detail
        );
    }
    assert!(
        step(report, "capability")
            .detail
            .contains("cap-sha256 matches"),
        "{}",
        step(report, "capability").detail
    );

    // Stored with the card's name, description and skills, and the
    // capability document's capabilities, under the DNS-AID id.
    let held = rig
        .store
        .get(&id)
        .await
        .unwrap()
        .expect("the agent is held");
    let RecordBody::Descriptor(d) = &held.body else {
        panic!("a tombstone")
    };
    let d = &d.descriptor;
    assert_eq!(d.name, DNS_AID_CARD_NAME);
    assert!(
        d.description.contains("published as an A2A Agent Card"),
        "{}",
        d.description
    );
    assert_eq!(d.format, DocumentFormat::DnsAid);
    assert!(
        d.capabilities.contains(&"tide_prediction".to_owned()),
        "{:?}",
        d.capabilities
    );
    assert!(
        d.capabilities.contains(&"harbour_schedules".to_owned()),
        "{:?}",
        d.capabilities
    );
    assert!(d.tags.contains(&"a2a".to_owned()), "{:?}", d.tags);

    // Found by a capability the card names, and by words of its name.
    let by_capability = rig
        .store
        .search(&Filter::new(["tide_prediction"], [], []).unwrap(), None, 10)
        .await
        .unwrap();
    assert!(
        by_capability.iter().any(|a| a.body.agent_id() == id),
        "not found by capability"
    );
    rig.store.flush().await.unwrap();
    rig.store.sync_text().await.unwrap();
    let by_text = rig
        .store
        .text_search(&TextQuery {
            text: "tide forecaster",
            filter: &Filter::default(),
            limit: 10,
            now: agentmesh::record::unix_now(),
            min_trust: None,
            capabilities: &[],
            subjects: &[],
        })
        .await
        .unwrap()
        .expect("the words rank");
    assert_eq!(
        by_text.first().map(|(id, _)| id.as_str()),
        Some(id.as_str()),
        "{by_text:?}"
    );
}

/// The evidence the record held for `id` carries.
async fn held_evidence(store: &Store, id: &str) -> agentmesh::trust::Evidence {
    let held = store.get(id).await.unwrap().expect("the agent is held");
    let RecordBody::Descriptor(d) = held.body else {
        panic!("{id}: a tombstone")
    };
    d.evidence
}

/// A signed card whose key the domain's AID record publishes (`k`) is
/// anchored in DNS: stored with the `fingerprint` flag, unverified still
/// in a zone that is not signed (no challenge, no DNSSEC). A card signed
/// with another key than the AID record's, or with no AID record beside
/// it, earns nothing, and its report says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_key_the_domains_aid_record_publishes_is_anchored_and_no_other_is() {
    let rig = rig().await;
    let domains = [
        A2A_ANCHORED_DOMAIN,
        A2A_OTHER_KEY_DOMAIN,
        "a2a.formats.test",
    ];
    let reports = rig
        .crawler
        .crawl_many(
            &rig.issuer,
            domains.iter().map(|d| d.to_string()).collect(),
            false,
            10,
            |_| {},
        )
        .await;
    let report = |domain: &str| {
        let id = format!("a2a:{domain}");
        reports
            .iter()
            .find(|r| r.agent_id == id)
            .unwrap_or_else(|| panic!("no report for {id}: {reports:?}"))
    };

    let anchored = report(A2A_ANCHORED_DOMAIN);
    assert!(anchored.stored, "{:?}", anchored.steps);
    assert!(anchored.trust.evidence.fingerprint, "{:?}", anchored.steps);
    assert!(
        !anchored.trust.evidence.dnssec,
        "the testbed's zone is not signed"
    );
    assert_eq!(
        anchored.level(),
        TrustLevel::Unverified,
        "no challenge was signed"
    );
    let said = &step(anchored, "signature").detail;
    assert!(said.contains("the key is the one the AID record"), "{said}");
    assert_eq!(
        step(anchored, "dns_txt").outcome,
        agentmesh::crawl::StepOutcome::Ok
    );
    assert_eq!(
        step(anchored, "dnssec").outcome,
        agentmesh::crawl::StepOutcome::Skipped
    );
    let held = held_evidence(&rig.store, &anchored.agent_id).await;
    assert!(held.fingerprint && !held.dnssec, "{held:?}");
    assert_eq!(held.level(), TrustLevel::Unverified);

    for (domain, why) in [
        (A2A_OTHER_KEY_DOMAIN, "publishes another key"),
        (
            "a2a.formats.test",
            "no TXT record at _agent.a2a.formats.test",
        ),
    ] {
        let r = report(domain);
        assert!(r.stored, "{domain}: {:?}", r.steps);
        assert_eq!(
            r.trust.evidence,
            agentmesh::trust::EvidenceFlags::default(),
            "{domain}"
        );
        let signature = step(r, "signature");
        assert_eq!(signature.outcome, agentmesh::crawl::StepOutcome::Ok);
        assert!(
            signature.detail.contains(why),
            "{domain}: {}",
            signature.detail
        );
        assert!(
            signature.detail.contains("not anchored in DNS")
                && signature.detail.contains("stays unverified"),
            "{domain}: {}",
            signature.detail
        );
        assert_eq!(
            held_evidence(&rig.store, &r.agent_id).await,
            agentmesh::trust::Evidence::default(),
            "{domain}"
        );
    }
}

/// A record of `id` (of `format`) claiming `evidence`, signed by
/// `signer`: what an untrusted peer gossips or posts.
fn claim(
    id: &str,
    format: DocumentFormat,
    evidence: agentmesh::trust::Evidence,
    signer: &ed25519_dalek::SigningKey,
) -> Vec<u8> {
    let descriptor = agentmesh::descriptor::Descriptor {
        id: id.to_owned(),
        name: "Claimed by a stranger".into(),
        description: "Whatever the stranger says.".into(),
        version: None,
        publisher: None,
        endpoint: Some("https://stranger.example/agent".into()),
        capabilities: vec!["anything".into()],
        tags: Vec::new(),
        languages: Vec::new(),
        status: None,
        auth: None,
        format,
    };
    let body = agentmesh::record::DescriptorRecord::new(
        descriptor,
        "{}".into(),
        agentmesh::record::next_seq(None),
        agentmesh::record::unix_now(),
        3600,
        evidence,
    );
    agentmesh::record::SignedRecord::sign_descriptor(&body, signer)
        .unwrap()
        .encode()
}

/// An untrusted signer's record claiming the flags DNS gives an A2A card
/// or a DNS-AID record is kept as its claim, shown and counted as
/// nothing, and its domain re-verified by this node's own crawl in those
/// formats, whose record replaces the claim with what the domain proves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_claim_about_a_card_or_a_dns_aid_record_is_re_verified_by_this_node() {
    let rig = rig().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    rig.testbed.write_ca(&ca).unwrap();
    let mut config = agentmesh::config::Config {
        data_dir: dir.path().join("data"),
        ..agentmesh::config::Config::default()
    };
    config.api.listen = "127.0.0.1:0".parse().unwrap();
    config.p2p.listen = vec!["/ip4/127.0.0.1/tcp/0".into()];
    config.p2p.allow_private_addresses = true;
    config.crawl.resolvers = vec![rig.testbed.dns_addr()];
    config.crawl.ca_files = vec![ca];
    config.crawl.allow_private_addresses = true;
    config.crawl.https_port = rig.testbed.https_port();
    config.crawl.allowed_ports = vec![rig.testbed.https_port()];
    config.crawl.follow_peers = false;
    let node = agentmesh::node::Node::spawn(config)
        .await
        .expect("the node starts");
    let api = format!("http://{}", node.api_addr());
    let http = reqwest::Client::new();
    let stranger = agentmesh::identity::generate();
    let by = agentmesh::identity::fingerprint(&stranger.verifying_key());
    let summary = |id: String| {
        let (http, api) = (http.clone(), api.clone());
        async move {
            let reply = http
                .get(format!("{api}/agents/{id}/summary"))
                .send()
                .await
                .unwrap();
            assert_eq!(reply.status(), 200, "{id}");
            reply.json::<serde_json::Value>().await.unwrap()
        }
    };

    let card = format!("a2a:{A2A_ANCHORED_DOMAIN}");
    let svcb = format!("dns-aid:_a2a._agents.{DNS_AID_CARD_DOMAIN}");
    let everything = agentmesh::trust::Evidence {
        dnssec: true,
        fingerprint: true,
        ..agentmesh::trust::Evidence::default()
    };
    let dnssec = agentmesh::trust::Evidence {
        dnssec: true,
        ..agentmesh::trust::Evidence::default()
    };
    // A domain that publishes nothing: its claim stays one.
    let unpublished = "a2a:unpublished.formats.test".to_owned();
    for (id, format, evidence) in [
        (&unpublished, DocumentFormat::A2a, everything.clone()),
        (&card, DocumentFormat::A2a, everything),
        (&svcb, DocumentFormat::DnsAid, dnssec),
    ] {
        let reply = http
            .post(format!("{api}/records"))
            .header("content-type", "application/cbor")
            .body(claim(id, format, evidence, &stranger))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 201, "{id}: {}", reply.text().await.unwrap());
    }

    // Shown as the stranger's claim, counted as nothing.
    let s = summary(unpublished.clone()).await;
    assert_eq!(s["source"], "mesh", "{s}");
    assert_eq!(s["trust"]["level"], "unverified", "{s}");
    assert_eq!(s["trust"]["evidence"]["fingerprint"], false, "{s}");
    assert_eq!(s["trust"]["claimed"]["level"], "dns-verified", "{s}");
    assert_eq!(s["trust"]["claimed"]["by"], by.as_str(), "{s}");
    let found: serde_json::Value = http
        .post(format!("{api}/agents/search"))
        .json(&serde_json::json!({"filters": {"min_trust": "dns-verified"}, "scope": "local"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(found, serde_json::json!([]), "min_trust counts no claim");

    // Each claim is replaced by this node's own record, signed by it and
    // counted, with the evidence its crawl proved: the card's key is the
    // one the AID record publishes; the DNS-AID zone is not signed.
    for (id, fingerprint) in [(&card, true), (&svcb, false)] {
        common::wait_until(&format!("this node re-verified {id}"), || {
            let summary = summary(id.clone());
            async move { summary.await["trust"].get("claimed").is_none() }
        })
        .await;
        let s = summary(id.clone()).await;
        assert_eq!(s["source"], "crawl", "{s}");
        assert_ne!(s["record"]["signer"], by.as_str(), "{s}");
        assert_eq!(s["trust"]["level"], "unverified", "{s}");
        assert_eq!(s["trust"]["evidence"]["fingerprint"], fingerprint, "{s}");
        assert_eq!(s["trust"]["evidence"]["dnssec"], false, "{s}");
        assert_ne!(s["name"], "Claimed by a stranger", "{s}");
    }
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_refuses_dns_aid_targets_and_cap_documents_at_private_addresses() {
    let rig = rig().await;
    let dir = tempfile::tempdir().unwrap();
    let strict = crawler(&rig.testbed, dir.path(), false);
    let reports = strict
        .crawl_many(
            &rig.issuer,
            vec![
                DNS_AID_PRIVATE_CAP_DOMAIN.to_owned(),
                DNS_AID_CARD_DOMAIN.to_owned(),
            ],
            false,
            10,
            |_| {},
        )
        .await;
    let report = |domain: &str| {
        reports
            .iter()
            .find(|r| r.domain == domain && r.source_format == DocumentFormat::DnsAid)
            .unwrap_or_else(|| panic!("no DNS-AID report for {domain}: {reports:?}"))
    };
    // The target is public and nothing is fetched there; the cap's host
    // is loopback: refused before anything connects, nothing stored.
    let private_cap = report(DNS_AID_PRIVATE_CAP_DOMAIN);
    assert!(!private_cap.stored);
    assert_eq!(
        private_cap.reasons,
        [Reason::AddressNotAllowed],
        "{:?}",
        private_cap.steps
    );
    assert_eq!(
        step(private_cap, "dns_address").outcome,
        agentmesh::crawl::StepOutcome::Ok
    );
    assert_eq!(
        step(private_cap, "capability").reason,
        Some(Reason::AddressNotAllowed)
    );
    // A target at loopback: refused at the target.
    let private_target = report(DNS_AID_CARD_DOMAIN);
    assert!(!private_target.stored);
    assert_eq!(
        step(private_target, "dns_address").reason,
        Some(Reason::AddressNotAllowed)
    );
    assert!(private_target.steps.iter().all(|s| s.step != "card"));
    for r in [private_cap, private_target] {
        assert!(
            rig.store.get(&r.agent_id).await.unwrap().is_none(),
            "{}",
            r.agent_id
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_gets_at_most_32_dns_aid_agents_followed() {
    let rig = rig().await;
    let reports = rig
        .crawler
        .crawl_many(
            &rig.issuer,
            vec![DNS_AID_CROWD_DOMAIN.to_owned()],
            false,
            10,
            |_| {},
        )
        .await;
    let dns_aid: Vec<&CrawlReport> = reports
        .iter()
        .filter(|r| r.source_format == DocumentFormat::DnsAid)
        .collect();
    assert_eq!(dns_aid.len(), 33, "{reports:?}");
    let followed = dns_aid
        .iter()
        .filter(|r| r.steps.iter().any(|s| s.step == "dns_address"))
        .count();
    assert_eq!(followed, 32);
    let refused: Vec<_> = dns_aid.iter().filter(|r| !r.stored).collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].reasons, [Reason::DnsAidMalformed]);
    assert_eq!(
        refused[0].agent_id,
        format!("dns-aid:extra.{DNS_AID_CROWD_DOMAIN}"),
        "the index's name comes after the protocol names"
    );
}

/// A domain's documents ride one TLS connection: the card, a path where
/// nothing is published (a 404), and the card again, fetched one after
/// the other by one crawler's fetcher, connect to the domain's server
/// once (a client of its own per fetch connected three times); another
/// domain on the same address gets its own connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_domains_documents_share_a_connection() {
    use agentmesh::crawl::fetch::{FetchOptions, Fetcher, A2A_CARD};
    use agentmesh::crawl::polite::{self, HostLimiter, Politeness};
    use url::Url;

    let rig = rig().await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    rig.testbed.write_ca(&ca_file).unwrap();
    let options = CrawlerOptions {
        ca_files: vec![ca_file],
        ..CrawlerOptions::default()
    };
    let port = rig.testbed.https_port();
    let fetcher = Fetcher::new(FetchOptions {
        policy: AddressPolicy {
            allow_private: true,
        },
        tls: options.tls_config().unwrap(),
        connect_timeout: Duration::from_secs(3),
        timeout: Duration::from_secs(5),
        limiter: HostLimiter::new(Politeness::default()),
        user_agent: polite::user_agent(None),
        allowed_ports: AllowedPorts::new([port]),
    });
    let ip = std::net::IpAddr::V4(rig.testbed.advertise());
    let url =
        |domain: &str, path: &str| Url::parse(&format!("https://{domain}:{port}{path}")).unwrap();
    let card = url(A2A_ANCHORED_DOMAIN, "/.well-known/agent-card.json");
    let nothing = url(A2A_ANCHORED_DOMAIN, "/.well-known/nothing-here.json");
    let before = rig.testbed.web_connections();
    let first = fetcher.fetch_kind(&card, &[ip], None, A2A_CARD).await;
    assert!(matches!(first, Ok(Some(_))), "{first:?}");
    let missing = fetcher.fetch_kind(&nothing, &[ip], None, A2A_CARD).await;
    assert!(
        matches!(
            missing,
            Err(agentmesh::crawl::CrawlError::HttpStatus { status: 404, .. })
        ),
        "{missing:?}"
    );
    let again = fetcher.fetch_kind(&card, &[ip], None, A2A_CARD).await;
    assert!(matches!(again, Ok(Some(_))), "{again:?}");
    assert_eq!(
        rig.testbed.web_connections() - before,
        1,
        "three documents of one domain, one after the other, on one connection"
    );
    let other = url(A2A_OTHER_KEY_DOMAIN, "/.well-known/agent-card.json");
    let _ = fetcher.fetch_kind(&other, &[ip], None, A2A_CARD).await;
    assert_eq!(
        rig.testbed.web_connections() - before,
        2,
        "another domain, its own"
    );
}

/// Every DNS-AID name lives under `_agents.{domain}`: for a domain where
/// DNS says that name does not exist, one query settles DNS-AID (the
/// index's TXT, the two protocol names and the index's SVCB are not
/// asked: four queries before); a domain that publishes DNS-AID records
/// still has them read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_without_an_agents_name_costs_dns_aid_one_query() {
    let rig = rig().await;
    let dir = tempfile::tempdir().unwrap();
    let crawler = crawler_of(&rig.testbed, dir.path(), true, vec![DocumentFormat::DnsAid]);
    let plain = healthy_domain(&rig.testbed);
    let before = rig.testbed.dns_queries();
    let reports = crawler
        .crawl_many(&rig.issuer, vec![plain], false, 10, |_| {})
        .await;
    assert!(reports.is_empty(), "{reports:?}");
    assert_eq!(rig.testbed.dns_queries() - before, 1);
    let reports = crawler
        .crawl_many(
            &rig.issuer,
            vec![DNS_AID_CARD_DOMAIN.to_owned()],
            false,
            10,
            |_| {},
        )
        .await;
    assert!(
        reports
            .iter()
            .any(|r| r.agent_id.starts_with("dns-aid:") && r.stored),
        "{reports:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visit_in_every_format_fetches_the_adp_document_once_on_two_connections() {
    let rig = rig().await;
    let domain = healthy_domain(&rig.testbed);
    let site = rig.testbed.site(&domain).expect("its site").clone();
    let before = site.counts().well_known;
    let connections = rig.testbed.web_connections();
    let reports = rig
        .crawler
        .crawl_many(&rig.issuer, vec![domain.clone()], false, 10, |_| {})
        .await;
    assert!(
        reports.iter().any(
            |r| r.agent_id == format!("agent:{domain}") && r.level() >= TrustLevel::KeyVerified
        ),
        "{reports:?}"
    );
    // The A2A reader's 0.2 path is the URL the ADP record names: the ADP
    // chain's fetch is the only one.
    assert_eq!(site.counts().well_known - before, 1);
    // Its seven documents ride at most as many connections as requests
    // may be in flight to the host (two); the challenge has its own.
    let opened = rig.testbed.web_connections() - connections;
    assert!(opened <= 3, "{opened} connections for one domain's visit");
}
