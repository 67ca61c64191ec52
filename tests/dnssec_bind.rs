//! DNSSEC against zones signed by independent software: BIND 9's
//! `dnssec-keygen` and `dnssec-signzone` sign `org1.test` (the testbed's
//! first organisation, its TXT, SRV and A records), its parent `test.` and
//! a private root `.` with the DS records between them, BIND's `named`
//! serves the three on a loopback port, and the crawler validates with
//! hickory from that root's key-signing key as trust anchor
//! (`--trust-anchor`). Secure earns the `dnssec`
//! evidence; a TXT record altered after signing is `dnssec_bogus` and
//! never reaches key-verified, in the library, in `agentmesh verify
//! --trust-anchor`, and in a running `agentmesh node --trust-anchor`
//! crawling through `POST /crawl` (the Secure agent found by search with
//! the evidence, a forged one never stored, and a revisit of the Secure
//! one after its record was altered reported `dnssec_bogus`).
//!
//!
//! Trust anchors in every form and place: a DS record for the root
//! (`dnssec-dsfromkey`), DS and DNSKEY anchors for `org1.test` alone (an
//! island of trust, its parents unsigned or not served at all), and the
//! same zones served with their signatures and keys stripped while an
//! anchor covers them, which is `dnssec_bogus`, never a downgrade to
//! unsigned DNS.
//!
//! A DNS-AID SVCB record in the same zone validates Secure, and altered
//! after signing is `dnssec_bogus`.
//!
//! `.ci/run` installs BIND (`bind9`, `bind9-utils`); without it the tests
//! say so and pass, except under CI, where they fail. The harness is
//! `tests/bind/mod.rs`.

use std::path::Path;
use std::time::Duration;

use crate::bind;
use crate::common;

use agentmesh::crawl::StepOutcome;
use agentmesh::testbed::{Behaviour, Population, PopulationConfig, Testbed, TestbedOptions};
use agentmesh::trust::TrustLevel;
use bind::{
    assert_bogus, assert_secure, crawl, crawler, ds_anchor, fingerprint_of, require_bind, sign,
    sign_chain, tamper, tampered_copy, verify_cli, without_txt_signature, zone_text, Named, ZONE,
};
use common::TestNode;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs BIND (apt-get install bind9 bind9-utils)"]
async fn a_zone_signed_by_bind_validates_and_a_tampered_record_is_bogus() {
    require_bind();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let dir = tempfile::tempdir().unwrap();
    // Four healthy agents and one that never answers the challenge, all in
    // org1.test.
    let population =
        Population::generate(&PopulationConfig::healthy(17, 4).with(Behaviour::ChallengeSilent));
    let bed = Testbed::start(population, TestbedOptions::default())
        .await
        .expect("the testbed starts");
    let ca = dir.path().join("ca.pem");
    bed.write_ca(&ca).unwrap();
    let (zones, anchor) = sign_chain(dir.path(), &zone_text(&bed));
    let signed = zones[2].1.clone();
    let domain = bed
        .population()
        .agents()
        .iter()
        .find(|a| a.domain.ends_with(ZONE) && a.behaviour == Behaviour::Healthy)
        .expect("an agent in org1.test")
        .domain
        .clone();

    // Secure: the dnssec evidence, on top of the key.
    let named = Named::start(dir.path(), &zones).await;
    let report = crawler(&ca, named.addr, &anchor)
        .crawl(&domain)
        .await
        .report;
    let step = report.steps.iter().find(|s| s.step == "dnssec").unwrap();
    assert_eq!(step.outcome, StepOutcome::Ok, "{:?}", report.steps);
    assert!(report.trust.evidence.dnssec);
    assert_eq!(
        report.level(),
        TrustLevel::KeyVerified,
        "{:?}",
        report.reasons
    );
    let (code, json) = verify_cli(&domain, named.addr, &ca, &anchor, bed.https_port());
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["trust"]["evidence"]["dnssec"], true);

    // Secure DNS without the key's proof is dns-verified.
    let silent = bed
        .population()
        .domain_of(Behaviour::ChallengeSilent)
        .unwrap()
        .to_owned();
    let report = crawler(&ca, named.addr, &anchor)
        .crawl(&silent)
        .await
        .report;
    assert_eq!(
        report.level(),
        TrustLevel::DnsVerified,
        "{:?}",
        report.steps
    );
    assert_eq!(
        report.reasons.first().map(|r| r.as_str()),
        Some("challenge_no_answer")
    );

    drop(named);

    // Tampered after signing: the TXT record's fingerprint changes, its
    // RRSIG stays. Bogus, refused before anything else is fetched.
    tamper(&signed, &fingerprint_of(&bed, &domain));
    let named = Named::start(dir.path(), &zones).await;
    let report = crawler(&ca, named.addr, &anchor)
        .crawl(&domain)
        .await
        .report;
    assert_eq!(
        report.reasons.first().map(|r| r.as_str()),
        Some("dnssec_bogus"),
        "{:?}",
        report.steps
    );
    assert_eq!(report.level(), TrustLevel::Unverified);
    assert!(!report.stored && !report.steps.iter().any(|s| s.step == "fetch"));
    let (code, json) = verify_cli(&domain, named.addr, &ca, &anchor, bed.https_port());
    assert_eq!(code, 1, "{json}");
    assert_eq!(json["reasons"][0], "dnssec_bogus");
    drop(named);
    bed.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs BIND (apt-get install bind9 bind9-utils)"]
async fn a_node_crawls_a_zone_signed_by_bind_and_refuses_a_tampered_record() {
    require_bind();
    let dir = tempfile::tempdir().unwrap();
    let population = Population::generate(&PopulationConfig::healthy(18, 4));
    let bed = Testbed::start(population, TestbedOptions::default())
        .await
        .expect("the testbed starts");
    let ca = dir.path().join("ca.pem");
    bed.write_ca(&ca).unwrap();
    let (zones, anchor) = sign_chain(dir.path(), &zone_text(&bed));
    let mut in_zone = bed
        .population()
        .agents()
        .iter()
        .filter(|a| a.domain.ends_with(&format!(".{ZONE}")));
    let secure = in_zone.next().expect("an agent in org1.test").clone();
    let forged = in_zone.next().expect("a second agent in org1.test").clone();
    // One record of the signed zone altered after signing; the rest of the
    // zone, its keys and signatures as BIND made them.
    tamper(&zones[2].1, &forged.fingerprint());
    let named = Named::start(dir.path(), &zones).await;

    let resolver = named.addr.to_string();
    let ca = ca.to_string_lossy().into_owned();
    let anchor = anchor.to_string_lossy().into_owned();
    let mut node = tokio::task::block_in_place(|| {
        TestNode::builder()
            .args(&[
                "--resolver",
                &resolver,
                "--ca-file",
                &ca,
                "--allow-private",
                "--allow-port",
                &bed.https_port().to_string(),
                "--trust-anchor",
                &anchor,
            ])
            .env("AGENTMESH_CRAWL__FOLLOW_PEERS", "false")
            .start()
    });
    let api = node.api();
    let reply = api
        .post(
            "/crawl",
            &json!({"domains": [secure.domain, forged.domain], "wait": true}),
        )
        .await;
    let reports = reply.expect(200)["reports"].as_array().unwrap().clone();
    let report_of = |domain: &str| {
        reports
            .iter()
            .find(|r| r["domain"] == domain)
            .unwrap_or_else(|| panic!("a report for {domain}: {reports:?}"))
            .clone()
    };
    let step_of = |report: &serde_json::Value, step: &str| {
        report["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["step"] == step)
            .cloned()
    };

    // Secure: the dnssec step ok, the evidence on the stored record.
    let report = report_of(&secure.domain);
    let step = step_of(&report, "dnssec").expect("a dnssec step");
    assert_eq!(step["outcome"], "ok", "{report}");
    assert_eq!(report["trust"]["evidence"]["dnssec"], true, "{report}");
    assert_eq!(report["trust"]["level"], "key-verified", "{report}");
    assert_eq!(report["stored"], true, "{report}");
    let cap = &secure.capabilities[0].id;
    let found = api
        .post(
            "/agents/search",
            &json!({"filters": {"capabilities": [cap]}, "top": 50}),
        )
        .await;
    let hits = found.expect(200).as_array().unwrap().clone();
    let hit = hits
        .iter()
        .find(|h| h["id"] == secure.id())
        .unwrap_or_else(|| panic!("{} found by its capability {cap}: {hits:?}", secure.id()));
    assert_eq!(hit["trust"]["evidence"]["dnssec"], true, "{hit}");
    assert_eq!(hit["trust"]["level"], "key-verified", "{hit}");
    signed_answer_proves_the_chain(&api, &secure.id(), &anchor, dir.path()).await;

    // Bogus: refused before the document is fetched, nothing stored.
    let report = report_of(&forged.domain);
    assert_eq!(report["reasons"][0], "dnssec_bogus", "{report}");
    assert_eq!(report["trust"]["level"], "unverified", "{report}");
    assert_eq!(report["stored"], false, "{report}");
    assert!(step_of(&report, "fetch").is_none(), "{report}");
    api.get(&format!("/agents/{}", forged.id()))
        .await
        .expect_error(404, "NotFound");
    let all = api.get("/agents?include_stale=true&limit=50").await;
    assert!(
        !common::ids(all.expect(200)).contains(&forged.id()),
        "the forged agent is not listed"
    );
    // The node keeps the report that says why.
    let kept = api.get(&format!("/crawl/{}", forged.domain)).await;
    assert_eq!(kept.expect(200)["reasons"][0], "dnssec_bogus");

    // The Secure agent's record altered in turn: a revisit sees Bogus.
    // The node restarts first, or its resolver would answer the Secure
    // RRset it cached for the record's TTL (300 s).
    let port = named.addr.port();
    drop(named);
    tamper(&zones[2].1, &secure.fingerprint());
    let named = Named::start_on(dir.path(), &zones, port).await;
    tokio::task::block_in_place(|| node.restart());
    let api = node.api();
    let again = api
        .post("/crawl", &json!({"domains": [secure.domain], "wait": true}))
        .await;
    let report = &again.expect(200)["reports"][0];
    assert_eq!(report["reasons"][0], "dnssec_bogus", "{report}");
    assert_eq!(report["stored"], false, "{report}");
    assert!(step_of(report, "fetch").is_none(), "{report}");
    // Search results say so beside the record held from the Secure visit.
    let found = api
        .post(
            "/agents/search",
            &json!({"filters": {"capabilities": [cap]}, "top": 50}),
        )
        .await;
    let hit = found
        .expect(200)
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == secure.id())
        .cloned()
        .unwrap_or_else(|| panic!("{} still held", secure.id()));
    assert_eq!(hit["trust"]["reasons"][0], "dnssec_bogus", "{hit}");

    drop(node);
    drop(named);
    bed.shutdown().await;
}

/// The signed answer for `id` carries the DNSSEC chain BIND's signatures
/// make, from the private root's key down through `test.` and
/// `org1.test`: `agentmesh verify-answer` proves it from the root's
/// anchor, and so does the Python verifier written from the documents
/// (dnspython checking the signatures), when it is installed.
async fn signed_answer_proves_the_chain(api: &common::Api, id: &str, anchor: &str, dir: &Path) {
    let reply = api
        .request(reqwest::Method::GET, &format!("/agents/{id}/proof"))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let file = dir.join("answer.json");
    std::fs::write(&file, reply.bytes().await.unwrap()).unwrap();
    let mut cmd = std::process::Command::new(common::bin());
    cmd.arg("verify-answer")
        .arg(&file)
        .args(["--json", "--dnssec-anchor", anchor]);
    let done = common::run(&mut cmd, Duration::from_secs(60), "agentmesh verify-answer");
    let report: serde_json::Value = serde_json::from_str(done.stdout.trim()).unwrap();
    assert!(done.status.success(), "{report}");
    assert_eq!(report["results"][0]["level"], "key-verified", "{report}");
    assert_eq!(report["notes"], json!([]), "the chain proved: {report}");
    let Some(python) = common::python_with(
        "ANSWER_VERIFY_PYTHON",
        "/opt/answer-verify/bin/python",
        "cryptography, dns.dnssec",
    ) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "the answer verifier's Python is missing under CI"
        );
        return;
    };
    let mut cmd = std::process::Command::new(python);
    cmd.arg(common::repo_root().join("tests/answers/verify.py"))
        .arg(&file)
        .args(["--dnssec-anchor", anchor]);
    let done = common::run(&mut cmd, Duration::from_secs(60), "tests/answers/verify.py");
    let report: serde_json::Value = serde_json::from_str(done.stdout.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", done.stdout, done.stderr));
    assert!(done.status.success(), "{report}");
    assert_eq!(report["results"][0]["level"], "key-verified", "{report}");
}

/// A testbed of `n` healthy agents (seeded by `seed`), its CA written to
/// `dir`, and one of its agents in [`ZONE`].
async fn testbed(
    seed: u64,
    n: usize,
    dir: &std::path::Path,
) -> (Testbed, std::path::PathBuf, String) {
    let bed = Testbed::start(
        Population::generate(&PopulationConfig::healthy(seed, n)),
        TestbedOptions::default(),
    )
    .await
    .expect("the testbed starts");
    let ca = dir.join("ca.pem");
    bed.write_ca(&ca).unwrap();
    let domain = bed
        .population()
        .agents()
        .iter()
        .find(|a| a.domain.ends_with(&format!(".{ZONE}")))
        .expect("an agent in org1.test")
        .domain
        .clone();
    (bed, ca, domain)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs BIND (apt-get install bind9 bind9-utils)"]
async fn a_ds_anchor_for_the_root_validates_and_a_tampered_record_is_bogus() {
    require_bind();
    let dir = tempfile::tempdir().unwrap();
    let (bed, ca, domain) = testbed(21, 3, dir.path()).await;
    let (mut zones, root_key) = sign_chain(dir.path(), &zone_text(&bed));
    // The root's anchor as IANA publishes it: a DS record.
    let anchor = ds_anchor(&root_key);

    let named = Named::start(dir.path(), &zones).await;
    assert_secure(&crawl(&domain, &ca, named.addr, &anchor).await);
    let (code, json) = verify_cli(&domain, named.addr, &ca, &anchor, bed.https_port());
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["trust"]["evidence"]["dnssec"], true);

    zones[2].1 = tampered_copy(&zones[2].1, "org1.tampered", &fingerprint_of(&bed, &domain));
    let forging = Named::start(dir.path(), &zones).await;
    assert_bogus(&crawl(&domain, &ca, forging.addr, &anchor).await);
    drop((named, forging));
    bed.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs BIND (apt-get install bind9 bind9-utils)"]
async fn an_island_of_trust_validates_without_its_parents() {
    require_bind();
    let dir = tempfile::tempdir().unwrap();
    let (bed, ca, domain) = testbed(22, 3, dir.path()).await;
    // org1.test alone is signed; its anchor in both forms.
    let (signed, key, _) = sign(dir.path(), &format!("{ZONE}."), &zone_text(&bed));
    let ds = ds_anchor(&key);
    let tampered = tampered_copy(&signed, "org1.tampered", &fingerprint_of(&bed, &domain));

    // No parent served at all: nobody answers for test. or the root.
    let alone = Named::start(dir.path(), &[(ZONE.into(), signed.clone())]).await;
    // An unsigned test. that delegates to org1.test without a DS.
    let unsigned_parent = dir.path().join("test.unsigned");
    std::fs::write(
        &unsigned_parent,
        bind::parent_text("test.", &format!("{ZONE}."), ""),
    )
    .unwrap();
    let under_unsigned = Named::start(
        dir.path(),
        &[
            ("test".into(), unsigned_parent.clone()),
            (ZONE.into(), signed.clone()),
        ],
    )
    .await;
    for anchor in [&ds, &key] {
        for named in [&alone, &under_unsigned] {
            assert_secure(&crawl(&domain, &ca, named.addr, anchor).await);
        }
    }
    let (code, json) = verify_cli(&domain, alone.addr, &ca, &ds, bed.https_port());
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["trust"]["evidence"]["dnssec"], true);

    // A record altered after signing: Bogus from either anchor.
    let forging = Named::start(
        dir.path(),
        &[("test".into(), unsigned_parent), (ZONE.into(), tampered)],
    )
    .await;
    for anchor in [&ds, &key] {
        assert_bogus(&crawl(&domain, &ca, forging.addr, anchor).await);
    }
    let (code, json) = verify_cli(&domain, forging.addr, &ca, &key, bed.https_port());
    assert_eq!(code, 1, "{json}");
    assert_eq!(json["reasons"][0], "dnssec_bogus");
    drop((alone, under_unsigned, forging));
    bed.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs BIND (apt-get install bind9 bind9-utils)"]
async fn stripped_signatures_under_an_anchor_are_bogus() {
    require_bind();
    let dir = tempfile::tempdir().unwrap();
    let (bed, ca, domain) = testbed(23, 3, dir.path()).await;

    // The whole chain signed, the root's KSK as the anchor (the form the
    // crawler has always read): Secure as served by BIND...
    let chain = dir.path().join("chain");
    std::fs::create_dir(&chain).unwrap();
    let (zones, root_key) = sign_chain(&chain, &zone_text(&bed));
    let named = Named::start(dir.path(), &zones).await;
    assert_secure(&crawl(&domain, &ca, named.addr, &root_key).await);
    drop(named);
    // ...and the same three zones with every RRSIG, DNSKEY and NSEC
    // stripped (the unsigned files they were signed from): an on-path
    // attacker's view. Refused, never key-verified nor dns-verified.
    let stripped: Vec<(String, std::path::PathBuf)> =
        [(".", "root"), ("test", "test"), (ZONE, ZONE)]
            .iter()
            .map(|(zone, file)| ((*zone).to_owned(), chain.join(format!("{file}.zone"))))
            .collect();
    let stripping = Named::start(dir.path(), &stripped).await;
    assert_bogus(&crawl(&domain, &ca, stripping.addr, &root_key).await);
    assert_bogus(&crawl(&domain, &ca, stripping.addr, &ds_anchor(&root_key)).await);
    let (code, json) = verify_cli(&domain, stripping.addr, &ca, &root_key, bed.https_port());
    assert_eq!(code, 1, "{json}");
    assert_eq!(json["reasons"][0], "dnssec_bogus");
    assert_eq!(json["trust"]["level"], "unverified");
    drop(stripping);
    // Only the TXT record's signature stripped, the keys left in place.
    let mut unsigned_txt = zones.clone();
    unsigned_txt[2].1 = without_txt_signature(&zones[2].1, ZONE, &domain, "org1.nosig");
    let stripping = Named::start(dir.path(), &unsigned_txt).await;
    assert_bogus(&crawl(&domain, &ca, stripping.addr, &root_key).await);
    drop(stripping);

    // An island anchor over org1.test, the zone served stripped whole,
    // and with its TXT record's signature alone stripped.
    let island = dir.path().join("island");
    std::fs::create_dir(&island).unwrap();
    let (signed, key, _) = sign(&island, &format!("{ZONE}."), &zone_text(&bed));
    let ds = ds_anchor(&key);
    let stripping = Named::start(
        dir.path(),
        &[(ZONE.into(), island.join(format!("{ZONE}.zone")))],
    )
    .await;
    for anchor in [&ds, &key] {
        assert_bogus(&crawl(&domain, &ca, stripping.addr, anchor).await);
    }
    drop(stripping);
    let nosig = without_txt_signature(&signed, ZONE, &domain, "org1.nosig");
    let stripping = Named::start(dir.path(), &[(ZONE.into(), nosig)]).await;
    for anchor in [&ds, &key] {
        assert_bogus(&crawl(&domain, &ca, stripping.addr, anchor).await);
    }
    drop(stripping);
    bed.shutdown().await;
}

/// A DNS-AID record (`_a2a._agents` of an agent of org1.test, pointing
/// at its own host) in the zone BIND signs: its SVCB RRset validates
/// Secure, and the agent is stored dns-verified; the record altered after signing (its
/// port) is `dnssec_bogus` and nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs BIND (apt-get install bind9 bind9-utils)"]
async fn a_dns_aid_record_signed_by_bind_validates_and_a_tampered_one_is_bogus() {
    require_bind();
    let dir = tempfile::tempdir().unwrap();
    let (bed, ca, domain) = testbed(23, 3, dir.path()).await;
    let https = bed.https_port();
    let owner = format!("_a2a._agents.{domain}");
    let zone = format!(
        "{}{owner}. IN SVCB 1 {domain}. alpn=\"h2\" port={https} key65402=\"a2a\"\n",
        zone_text(&bed)
    );
    let (mut zones, anchor) = sign_chain(dir.path(), &zone);
    let id = format!("dns-aid:{owner}");
    let crawl_dns_aid = |dns: std::net::SocketAddr, store: &str| {
        let (ca, anchor) = (ca.clone(), anchor.clone());
        let store_dir = dir.path().join(store);
        let id = id.clone();
        let domain = domain.clone();
        async move {
            let store = agentmesh::store::Store::open(&store_dir, 8 << 20).unwrap();
            let issuer = agentmesh::issuer::Issuer::new(
                store,
                std::sync::Arc::new(agentmesh::identity::generate()),
                std::time::Duration::from_secs(3600),
            );
            crawler(&ca, dns, &anchor)
                .crawl_many(&issuer, vec![domain], false, 10, |_| {})
                .await
                .into_iter()
                .find(|r| r.agent_id == id)
                .expect("a report of the DNS-AID agent")
        }
    };

    let named = Named::start(dir.path(), &zones).await;
    let report = crawl_dns_aid(named.addr, "secure").await;
    let step = report.steps.iter().find(|s| s.step == "dnssec").unwrap();
    assert_eq!(step.outcome, StepOutcome::Ok, "{:?}", report.steps);
    assert!(report.stored, "{:?}", report.steps);
    assert_eq!(
        report.level(),
        TrustLevel::DnsVerified,
        "{:?}",
        report.steps
    );
    assert!(report.trust.evidence.dnssec);

    // The port changed in the signed file; its RRSIG stays.
    let text = std::fs::read_to_string(&zones[2].1).unwrap();
    let needle = format!("port={https}");
    assert_eq!(text.matches(&needle).count(), 1, "the SVCB record, once");
    let altered = text.replace(&needle, &format!("port={}", https.wrapping_add(1)));
    let tampered = zones[2].1.with_file_name("org1.svcb-tampered");
    std::fs::write(&tampered, altered).unwrap();
    zones[2].1 = tampered;
    let forging = Named::start(dir.path(), &zones).await;
    let report = crawl_dns_aid(forging.addr, "forged").await;
    assert_eq!(
        report.reasons.first().map(|r| r.as_str()),
        Some("dnssec_bogus"),
        "{:?}",
        report.steps
    );
    assert!(!report.stored);
    drop((named, forging));
    bed.shutdown().await;
}
