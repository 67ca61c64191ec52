//! DNSSEC in the plain test run, without BIND: the testbed's `test.` zone
//! signed in process ([`ZoneKey`], hickory-proto's signer), served by the
//! testbed's hickory-server on loopback, and the crawler validating with
//! that zone's key as its only trust anchor (`--trust-anchor` syntax).
//! Secure earns the `dnssec` evidence; a TXT record changed after signing,
//! or carrying a signature made over other data, is `dnssec_bogus` and
//! never reaches key-verified. The same zone holds the formats
//! organisation: a DNS-AID SVCB RRset that validates, and an AID record
//! that validates and publishes an A2A card's key, are dns-verified.
//! `tests/dnssec_bind.rs` runs the same checks against zones signed by
//! BIND.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use std::time::Duration;

use agentmesh::crawl::scheduler::{ManualClock, SchedulePolicy, Scheduler};
use agentmesh::crawl::{AllowedPorts, CrawlReport, Crawler, CrawlerOptions, StepOutcome};
use agentmesh::net::AddressPolicy;
use agentmesh::record::RecordBody;
use agentmesh::store::FreshState;
use agentmesh::testbed::dns::{DnsServer, Zone};
use agentmesh::testbed::dnssec::ZoneKey;
use agentmesh::testbed::formats::{
    card_key, A2A_ANCHORED_DOMAIN, A2A_OTHER_KEY_DOMAIN, DNS_AID_CARD_DOMAIN,
};
use agentmesh::testbed::publish::AGENT_ADDRESS;
use agentmesh::testbed::{Population, PopulationConfig, Testbed, TestbedOptions};
use agentmesh::trust::{Evidence, TrustLevel};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hickory_proto::rr::{Name, RData, RecordType};

async fn crawl(domain: &str, dns: SocketAddr, ca: &Path, anchor: &Path, port: u16) -> CrawlReport {
    let options = CrawlerOptions {
        resolvers: vec![dns],
        ca_files: vec![ca.to_owned()],
        policy: AddressPolicy {
            allow_private: true,
        },
        trust_anchors: vec![anchor.to_owned()],
        allowed_ports: AllowedPorts::new([port]),
        ..CrawlerOptions::default()
    };
    let key = agentmesh::identity::generate();
    let verifier = agentmesh::identity::peer_id_of(&key);
    Crawler::new(options, Arc::new(key), verifier)
        .expect("the crawler builds")
        .crawl(domain)
        .await
        .report
}

/// The owner name of `domain`'s TXT record.
fn txt_owner(domain: &str) -> Name {
    Name::from_ascii(format!("_agent.{domain}.")).unwrap()
}

fn assert_bogus(report: &CrawlReport) {
    assert_eq!(
        report.reasons.first().map(|r| r.as_str()),
        Some("dnssec_bogus"),
        "{:?}",
        report.steps
    );
    assert_eq!(report.level(), TrustLevel::Unverified);
    assert!(!report.trust.evidence.dnssec);
    // Refused before the document is fetched; nothing to store.
    assert!(!report.stored && !report.steps.iter().any(|s| s.step == "fetch"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_signed_in_process_validates_and_a_changed_record_is_bogus() {
    let dir = tempfile::tempdir().unwrap();
    let bed = Testbed::start(
        Population::generate(&PopulationConfig::healthy(19, 3)),
        TestbedOptions::default(),
    )
    .await
    .expect("the testbed starts");
    let ca = dir.path().join("ca.pem");
    bed.write_ca(&ca).unwrap();
    let agents = bed.population().agents();
    let (secure, changed, resigned) = (&agents[0], &agents[1], &agents[2]);

    let key = ZoneKey::generate().unwrap();
    let anchor = dir.path().join("anchor.key");
    std::fs::write(&anchor, key.trust_anchor()).unwrap();
    let mut zone: Zone = bed.population().zone(bed.ports(), AGENT_ADDRESS).unwrap();
    key.sign(&mut zone).unwrap();

    // After signing: one agent's TXT record gets another fingerprint (its
    // signature is over the old data); another's signature is replaced by
    // the one made over the first agent's record.
    let mut forged = zone.clone();
    let owner = format!("_agent.{}", changed.domain);
    let old = forged.remove(&owner, RecordType::TXT).unwrap();
    assert_eq!(old.len(), 1, "one TXT record at {owner}");
    let record = bed.txt_records(&changed.domain).remove(0);
    let fp = changed.fingerprint();
    let last = if fp.ends_with('0') { "1" } else { "0" };
    let altered = record.replace(&fp, &format!("{}{last}", &fp[..fp.len() - 1]));
    assert_ne!(altered, record);
    forged.add_txt(&owner, vec![altered]).unwrap();
    let moved: Vec<_> = zone
        .signatures(&txt_owner(&secure.domain).into(), RecordType::TXT)
        .iter()
        .cloned()
        .map(|mut rrsig| {
            rrsig.name = txt_owner(&resigned.domain);
            rrsig
        })
        .collect();
    assert!(!moved.is_empty(), "the zone is signed");
    forged
        .replace_signatures(
            &format!("_agent.{}", resigned.domain),
            RecordType::TXT,
            moved,
        )
        .unwrap();

    let mut server = DnsServer::start("127.0.0.1:0".parse().unwrap(), zone)
        .await
        .unwrap();
    let mut forging = DnsServer::start("127.0.0.1:0".parse().unwrap(), forged)
        .await
        .unwrap();

    // Secure: the dnssec step ok, the evidence, and the key on top.
    let report = crawl(
        &secure.domain,
        server.local_addr(),
        &ca,
        &anchor,
        bed.https_port(),
    )
    .await;
    let step = report.steps.iter().find(|s| s.step == "dnssec").unwrap();
    assert_eq!(step.outcome, StepOutcome::Ok, "{:?}", report.steps);
    assert!(report.trust.evidence.dnssec);
    assert_eq!(
        report.level(),
        TrustLevel::KeyVerified,
        "{:?}",
        report.reasons
    );

    // The same zone from the forging server: the untouched record is
    // still Secure, the changed and re-signed ones are Bogus.
    let report = crawl(
        &secure.domain,
        forging.local_addr(),
        &ca,
        &anchor,
        bed.https_port(),
    )
    .await;
    assert!(report.trust.evidence.dnssec, "{:?}", report.steps);
    assert_bogus(
        &crawl(
            &changed.domain,
            forging.local_addr(),
            &ca,
            &anchor,
            bed.https_port(),
        )
        .await,
    );
    assert_bogus(
        &crawl(
            &resigned.domain,
            forging.local_addr(),
            &ca,
            &anchor,
            bed.https_port(),
        )
        .await,
    );

    // Another key as the anchor: the zone's own key is not trusted, and a
    // signed zone that does not validate is Bogus.
    let stranger = dir.path().join("stranger.key");
    std::fs::write(&stranger, ZoneKey::generate().unwrap().trust_anchor()).unwrap();
    assert_bogus(
        &crawl(
            &secure.domain,
            server.local_addr(),
            &ca,
            &stranger,
            bed.https_port(),
        )
        .await,
    );

    // An agent held from a Secure visit whose zone then stops validating:
    // the revisit is dnssec_bogus, and the held record is marked stale at
    // once (not after crawl.stale_after), with the reason in its results.
    let store = agentmesh::store::Store::open(&dir.path().join("store"), 8 << 20).unwrap();
    let node_key = Arc::new(agentmesh::identity::generate());
    let issuer =
        agentmesh::issuer::Issuer::new(store.clone(), node_key.clone(), Duration::from_secs(3600));
    let clock = Arc::new(ManualClock::new(agentmesh::record::unix_now()));
    let scheduler = |dns: SocketAddr| {
        let options = CrawlerOptions {
            resolvers: vec![dns],
            ca_files: vec![ca.clone()],
            policy: AddressPolicy {
                allow_private: true,
            },
            trust_anchors: vec![anchor.clone()],
            allowed_ports: AllowedPorts::new([bed.https_port()]),
            ..CrawlerOptions::default()
        };
        let crawler =
            Crawler::new(options, node_key.clone(), "verifier".into()).expect("the crawler builds");
        Scheduler::load(
            crawler,
            issuer.clone(),
            SchedulePolicy::from_config(&agentmesh::config::CrawlConfig::default()),
            clock.clone(),
        )
    };
    let honest = scheduler(server.local_addr()).await.unwrap();
    assert!(honest.visit(&changed.domain).await.unwrap()[0].stored);
    let id = changed.id();
    let fresh = store.freshness(&id).await.unwrap().unwrap();
    assert_eq!(fresh.state, FreshState::Fresh);
    let forged_view = scheduler(forging.local_addr()).await.unwrap();
    assert_bogus(&forged_view.visit(&changed.domain).await.unwrap()[0]);
    let held = store.freshness(&id).await.unwrap().unwrap();
    assert_eq!(held.state, FreshState::Stale, "marked at once");
    assert_eq!(
        held.checked_at, fresh.checked_at,
        "a Bogus visit confirms nothing"
    );
    let summary = agentmesh::registry::Registry::new(issuer.clone())
        .summary(&id)
        .await
        .unwrap();
    assert_eq!(
        summary.trust.reasons.first().map(|r| r.as_str()),
        Some("dnssec_bogus")
    );
    assert_eq!(summary.freshness.unwrap().state, FreshState::Stale);

    server.shutdown().await;
    forging.shutdown().await;
    bed.shutdown().await;
}

/// A crawl of `domains` in every format through the resolver at `dns`,
/// validating under `anchor` (none: the built-in root's, which does not
/// cover `test.`), stored in a fresh store under `dir`: the reports, and
/// the store.
async fn crawl_formats(
    bed: &Testbed,
    dir: &Path,
    dns: SocketAddr,
    anchor: Option<&Path>,
    domains: &[&str],
) -> (Vec<CrawlReport>, agentmesh::store::Store) {
    let ca = dir.join("ca.pem");
    bed.write_ca(&ca).unwrap();
    let options = CrawlerOptions {
        resolvers: vec![dns],
        ca_files: vec![ca],
        policy: AddressPolicy {
            allow_private: true,
        },
        trust_anchors: anchor.into_iter().map(Path::to_owned).collect(),
        https_port: bed.https_port(),
        allowed_ports: AllowedPorts::new([bed.https_port()]),
        fetch_timeout: Duration::from_secs(3),
        ..CrawlerOptions::default()
    };
    let key = agentmesh::identity::generate();
    let verifier = agentmesh::identity::peer_id_of(&key);
    let crawler = Crawler::new(options, Arc::new(key), verifier).expect("the crawler builds");
    let store_dir = tempfile::tempdir_in(dir).unwrap().keep();
    let store = agentmesh::store::Store::open(&store_dir, 8 << 20).unwrap();
    let issuer = agentmesh::issuer::Issuer::new(
        store.clone(),
        Arc::new(agentmesh::identity::generate()),
        Duration::from_secs(3600),
    );
    let domains = domains.iter().map(|d| d.to_string()).collect();
    let reports = crawler
        .crawl_many(&issuer, domains, false, 10, |_| {})
        .await;
    (reports, store)
}

/// The report of `id` among `reports`.
fn report_of<'a>(reports: &'a [CrawlReport], id: &str) -> &'a CrawlReport {
    reports
        .iter()
        .find(|r| r.agent_id == id)
        .unwrap_or_else(|| panic!("no report of {id}: {reports:?}"))
}

/// The evidence of the record `store` holds for `id`.
async fn held_evidence(store: &agentmesh::store::Store, id: &str) -> Evidence {
    let held = store.get(id).await.unwrap().expect("the agent is held");
    let RecordBody::Descriptor(d) = held.body else {
        panic!("{id}: a tombstone")
    };
    d.evidence
}

/// Checks that `evidence` carries a DNSSEC chain proving, from `anchor`,
/// the `rtype` RRset at `owner` (what anyone holding the record can check
/// offline).
fn assert_chain_proves(evidence: &Evidence, anchor: &Path, owner: &str, rtype: RecordType) {
    let chain = evidence
        .dnssec_chain
        .as_ref()
        .expect("the record carries its DNSSEC chain");
    let anchors = agentmesh::dnssec::TrustAnchorSet::load(&[anchor.to_owned()]).unwrap();
    let owner = Name::from_ascii(format!("{owner}.")).unwrap();
    let now = agentmesh::record::unix_now();
    let proved = agentmesh::dnssec::chain::verify(chain, &anchors, &owner, rtype, now)
        .unwrap_or_else(|e| panic!("{owner}: {e}"));
    assert_eq!(proved.anchor_zone, Name::from_ascii("test.").unwrap());
    assert!(!proved.records.is_empty());
    // The root's built-in anchor alone does not prove it.
    agentmesh::dnssec::chain::verify(
        chain,
        &agentmesh::dnssec::TrustAnchorSet::builtin_root(),
        &owner,
        rtype,
        now,
    )
    .unwrap_err();
}

/// The testbed's zone with the formats organisation's records, signed by
/// a new key written as a trust anchor under `dir`.
fn signed_formats_zone(bed: &Testbed, dir: &Path) -> (Zone, std::path::PathBuf) {
    let key = ZoneKey::generate().unwrap();
    let anchor = dir.join("anchor.key");
    std::fs::write(&anchor, key.trust_anchor()).unwrap();
    let mut zone: Zone = bed.population().zone(bed.ports(), AGENT_ADDRESS).unwrap();
    for (owner, data) in &bed.formats().expect("the formats organisation").records {
        zone.add(owner, data.clone()).unwrap();
    }
    key.sign(&mut zone).unwrap();
    (zone, anchor)
}

async fn formats_bed() -> Testbed {
    Testbed::start(
        Population::generate(&PopulationConfig::healthy(3, 3)),
        TestbedOptions {
            formats: true,
            ..TestbedOptions::default()
        },
    )
    .await
    .expect("the testbed starts")
}

/// A DNS-AID record in the signed zone validates (the report's `dnssec`
/// step): the agent behind it is stored dns-verified, with the `dnssec`
/// flag, where the same record in the testbed's unsigned zone stays
/// unverified; the record changed after signing is `dnssec_bogus`,
/// refused before its target is fetched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dns_aid_record_in_a_signed_zone_is_dns_verified_and_a_changed_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bed = formats_bed().await;
    let (zone, anchor) = signed_formats_zone(&bed, dir.path());

    // The same record with another priority: its signature is over the
    // old data.
    let owner = format!("_a2a._agents.{DNS_AID_CARD_DOMAIN}");
    let mut forged = zone.clone();
    let old = forged.remove(&owner, RecordType::SVCB).unwrap();
    let RData::SVCB(mut changed) = old[0].data.clone() else {
        panic!("an SVCB record at {owner}")
    };
    changed.svc_priority += 1;
    forged.add(&owner, RData::SVCB(changed)).unwrap();
    let mut server = DnsServer::start("127.0.0.1:0".parse().unwrap(), zone)
        .await
        .unwrap();
    let mut forging = DnsServer::start("127.0.0.1:0".parse().unwrap(), forged)
        .await
        .unwrap();

    let id = format!("dns-aid:{owner}");
    let (reports, store) = crawl_formats(
        &bed,
        dir.path(),
        server.local_addr(),
        Some(&anchor),
        &[DNS_AID_CARD_DOMAIN],
    )
    .await;
    let secure = report_of(&reports, &id);
    let step = secure.steps.iter().find(|s| s.step == "dnssec").unwrap();
    assert_eq!(step.outcome, StepOutcome::Ok, "{:?}", secure.steps);
    assert!(secure.stored, "{:?}", secure.steps);
    assert_eq!(
        secure.level(),
        TrustLevel::DnsVerified,
        "{:?}",
        secure.steps
    );
    assert!(secure.trust.evidence.dnssec);
    let held = held_evidence(&store, &id).await;
    assert!(held.dnssec && !held.fingerprint, "{held:?}");
    assert_eq!(held.level(), TrustLevel::DnsVerified);
    assert_chain_proves(&held, &anchor, &owner, RecordType::SVCB);
    let card_fetches = bed.document_fetches(
        "dnsaid-card-host.formats.test",
        "/.well-known/agent-card.json",
    );
    assert_eq!(card_fetches, 1);

    // The testbed's own zone is not signed: the same agent, unverified.
    let (reports, store) = crawl_formats(
        &bed,
        dir.path(),
        bed.dns_addr(),
        None,
        &[DNS_AID_CARD_DOMAIN],
    )
    .await;
    let unsigned = report_of(&reports, &id);
    assert!(unsigned.stored, "{:?}", unsigned.steps);
    assert_eq!(unsigned.level(), TrustLevel::Unverified);
    assert!(!unsigned.trust.evidence.dnssec);
    assert_eq!(held_evidence(&store, &id).await, Evidence::default());
    let card_fetches = card_fetches + 1;

    let (reports, store) = crawl_formats(
        &bed,
        dir.path(),
        forging.local_addr(),
        Some(&anchor),
        &[DNS_AID_CARD_DOMAIN],
    )
    .await;
    let bogus = report_of(&reports, &id);
    assert_eq!(
        bogus.reasons.first().map(|r| r.as_str()),
        Some("dnssec_bogus"),
        "{:?}",
        bogus.steps
    );
    assert!(!bogus.stored);
    assert!(store.get(&id).await.unwrap().is_none());
    assert_eq!(
        bed.document_fetches(
            "dnsaid-card-host.formats.test",
            "/.well-known/agent-card.json"
        ),
        card_fetches,
        "refused before the target is fetched"
    );

    server.shutdown().await;
    forging.shutdown().await;
    bed.shutdown().await;
}

/// A signed card whose key the domain's AID record publishes, in a signed
/// zone: the `_agent` TXT RRset validates, so the card's agent is stored
/// dns-verified with both `fingerprint` and `dnssec`. A card signed with
/// another key than the AID record's earns nothing, and so does one whose
/// AID record was changed after signing to name its key (Bogus).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_key_anchored_by_a_validated_aid_record_is_dns_verified() {
    let dir = tempfile::tempdir().unwrap();
    let bed = formats_bed().await;
    let (zone, anchor) = signed_formats_zone(&bed, dir.path());
    // After signing, the other domain's AID record is given the card's
    // key (the anchor a forger would want): its old signature stays.
    let mut forged = zone.clone();
    let owner = format!("_agent.{A2A_OTHER_KEY_DOMAIN}");
    forged.remove(&owner, RecordType::TXT).unwrap();
    let k = URL_SAFE_NO_PAD.encode(card_key().verifying_key().as_bytes());
    forged
        .add_txt(
            &owner,
            vec![format!(
                "v=aid2;u=https://{A2A_OTHER_KEY_DOMAIN}/a2a/v1;p=a2a;k={k}"
            )],
        )
        .unwrap();
    let mut server = DnsServer::start("127.0.0.1:0".parse().unwrap(), zone)
        .await
        .unwrap();
    let mut forging = DnsServer::start("127.0.0.1:0".parse().unwrap(), forged)
        .await
        .unwrap();
    let (reports, store) = crawl_formats(
        &bed,
        dir.path(),
        server.local_addr(),
        Some(&anchor),
        &[A2A_ANCHORED_DOMAIN, A2A_OTHER_KEY_DOMAIN],
    )
    .await;

    let id = format!("a2a:{A2A_ANCHORED_DOMAIN}");
    let anchored = report_of(&reports, &id);
    assert!(anchored.stored, "{:?}", anchored.steps);
    assert_eq!(
        anchored.level(),
        TrustLevel::DnsVerified,
        "{:?}",
        anchored.steps
    );
    assert!(anchored.trust.evidence.dnssec && anchored.trust.evidence.fingerprint);
    let step = anchored.steps.iter().find(|s| s.step == "dnssec").unwrap();
    assert_eq!(step.outcome, StepOutcome::Ok, "{:?}", anchored.steps);
    let held = held_evidence(&store, &id).await;
    assert!(
        held.dnssec && held.fingerprint && held.challenge.is_none(),
        "{held:?}"
    );
    assert_eq!(held.level(), TrustLevel::DnsVerified);
    let aid_owner = format!("_agent.{A2A_ANCHORED_DOMAIN}");
    assert_chain_proves(&held, &anchor, &aid_owner, RecordType::TXT);

    let id = format!("a2a:{A2A_OTHER_KEY_DOMAIN}");
    let other = report_of(&reports, &id);
    assert!(other.stored, "{:?}", other.steps);
    assert_eq!(other.level(), TrustLevel::Unverified);
    assert_eq!(held_evidence(&store, &id).await, Evidence::default());
    // The AID records themselves are read as before: unverified.
    let aid = report_of(&reports, &format!("aid:{A2A_ANCHORED_DOMAIN}"));
    assert!(aid.stored && aid.level() == TrustLevel::Unverified);

    // The forged record names the card's key and fails validation: it
    // anchors nothing, and the card is stored as one no DNS names.
    let (reports, store) = crawl_formats(
        &bed,
        dir.path(),
        forging.local_addr(),
        Some(&anchor),
        &[A2A_OTHER_KEY_DOMAIN],
    )
    .await;
    let forged = report_of(&reports, &id);
    assert!(forged.stored, "{:?}", forged.steps);
    assert_eq!(forged.level(), TrustLevel::Unverified);
    assert!(!forged.trust.evidence.fingerprint, "{:?}", forged.steps);
    let step = forged.steps.iter().find(|s| s.step == "dnssec").unwrap();
    assert_eq!(step.outcome, StepOutcome::Failed, "{:?}", forged.steps);
    assert_eq!(step.reason.map(|r| r.as_str()), Some("dnssec_bogus"));
    assert_eq!(held_evidence(&store, &id).await, Evidence::default());

    server.shutdown().await;
    forging.shutdown().await;
    bed.shutdown().await;
}
