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
//! `.ci/run` installs BIND (`bind9`, `bind9-utils`); without it the test
//! says so and passes, except under CI, where it fails.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentmesh::crawl::{Crawler, CrawlerOptions, StepOutcome};
use agentmesh::net::AddressPolicy;
use agentmesh::testbed::{Behaviour, Population, PopulationConfig, Testbed, TestbedOptions};
use agentmesh::verify::TrustLevel;
use common::TestNode;
use serde_json::json;

const ZONE: &str = "org1.test";
const DEADLINE: Duration = Duration::from_secs(20);

fn have(tool: &str) -> bool {
    common::on_path(tool).is_some()
}

/// Whether BIND's tools are here; under CI they must be.
fn bind_available() -> bool {
    let ok = ["named", "dnssec-keygen", "dnssec-signzone"]
        .iter()
        .all(|t| have(t));
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "BIND (named, dnssec-keygen, dnssec-signzone) must be installed under CI"
        );
        eprintln!("!!! SKIPPED: BIND is not installed (apt-get install bind9 bind9-utils)");
    }
    ok
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("the command runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A free loopback UDP port (TCP is taken on the same number by named).
fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `named` serving `zone_file` for [`ZONE`]; killed on drop.
struct Named {
    child: Child,
    addr: SocketAddr,
}

impl Named {
    async fn start(dir: &Path, zones: &[(String, PathBuf)]) -> Self {
        Self::start_on(dir, zones, free_port()).await
    }

    /// As [`Named::start`], on `port` (a node keeps asking the resolver
    /// it was started with).
    async fn start_on(dir: &Path, zones: &[(String, PathBuf)], port: u16) -> Self {
        let conf = dir.join("named.conf");
        std::fs::write(
            &conf,
            format!(
                "options {{\n  directory \"{d}\";\n  pid-file \"{d}/named.pid\";\n  \
                 listen-on port {port} {{ 127.0.0.1; }};\n  listen-on-v6 {{ none; }};\n  \
                 recursion no;\n  dnssec-validation no;\n  allow-query {{ any; }};\n}};\n{zones}",
                d = dir.display(),
                zones = zones
                    .iter()
                    .map(|(name, file)| format!(
                        "zone \"{name}\" {{ type primary; file \"{}\"; }};\n",
                        file.display()
                    ))
                    .collect::<String>()
            ),
        )
        .unwrap();
        let child = Command::new("named")
            .args(["-g", "-n", "1", "-c"])
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("named starts");
        let named = Self {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        };
        named.wait_serving().await;
        named
    }

    /// Waits until `named` answers the zone's SOA.
    async fn wait_serving(&self) {
        let dns =
            agentmesh::crawl::dns::Dns::new(&[self.addr], Duration::from_millis(500)).unwrap();
        let until = Instant::now() + DEADLINE;
        loop {
            if dns.txt(&format!("_probe.{ZONE}")).await.is_ok()
                || matches!(
                    dns.txt(&format!("_probe.{ZONE}")).await,
                    Err(agentmesh::crawl::dns::DnsError::NxDomain { .. })
                )
            {
                return;
            }
            assert!(
                Instant::now() < until,
                "named did not answer within {DEADLINE:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Named {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The zone file of [`ZONE`]: the testbed's records for its agents there.
fn zone_text(bed: &Testbed) -> String {
    let https = bed.https_port();
    let mut text = format!(
        "$TTL 300\n@ IN SOA ns.{ZONE}. hostmaster.{ZONE}. 1 3600 600 86400 60\n\
         @ IN NS ns.{ZONE}.\nns IN A 127.0.0.1\n"
    );
    for agent in bed.population().agents() {
        let d = &agent.domain;
        if !d.ends_with(&format!(".{ZONE}")) {
            continue;
        }
        for record in bed.txt_records(d) {
            let strings: Vec<String> = record
                .as_bytes()
                .chunks(255)
                .map(|c| format!("\"{}\"", String::from_utf8_lossy(c).replace('"', "\\\"")))
                .collect();
            text.push_str(&format!("_agent.{d}. IN TXT {}\n", strings.join(" ")));
        }
        text.push_str(&format!("_agent._tcp.{d}. IN SRV 0 0 {https} {d}.\n"));
        text.push_str(&format!("{d}. IN A 127.0.0.1\n"));
    }
    text
}

/// A parent zone `origin` (`.` or `test.`) delegating `child` to
/// `ns.{child}`, with the child's DS records (`dsset` written by
/// `dnssec-signzone`).
fn parent_text(origin: &str, child: &str, dsset: &str) -> String {
    let ns = if origin == "." {
        "ns.".to_owned()
    } else {
        format!("ns.{origin}")
    };
    format!(
        "$TTL 300\n{origin} IN SOA {ns} hostmaster.{ns} 1 3600 600 86400 60\n\
         {origin} IN NS {ns}\n{ns} IN A 127.0.0.1\n\
         {child} IN NS ns.{child}\nns.{child} IN A 127.0.0.1\n{dsset}"
    )
}

/// Signs `text` as zone `origin` with new keys (a KSK and a ZSK, ECDSA
/// P-256) made by `dnssec-keygen`; answers the signed file, the KSK's
/// `.key` file and the DS records of the zone (`dsset-{origin}`).
fn sign(dir: &Path, origin: &str, text: &str) -> (PathBuf, PathBuf, String) {
    let file = if origin == "." {
        "root".to_owned()
    } else {
        origin.trim_end_matches('.').to_owned()
    };
    let unsigned = dir.join(format!("{file}.zone"));
    std::fs::write(&unsigned, text).unwrap();
    let keygen = |ksk: bool| {
        let mut cmd = Command::new("dnssec-keygen");
        cmd.arg("-q")
            .arg("-K")
            .arg(dir)
            .args(["-a", "ECDSAP256SHA256", "-n", "ZONE"]);
        if ksk {
            cmd.args(["-f", "KSK"]);
        }
        run(cmd.arg(origin)).trim().to_owned()
    };
    let ksk = keygen(true);
    let _zsk = keygen(false);
    let signed = dir.join(format!("{file}.signed"));
    run(Command::new("dnssec-signzone")
        .arg("-K")
        .arg(dir)
        .arg("-d")
        .arg(dir)
        .args(["-S", "-o", origin, "-f"])
        .arg(&signed)
        .arg(&unsigned));
    let dsset_name = if origin == "." {
        "dsset-.".to_owned()
    } else {
        format!("dsset-{}.", origin.trim_end_matches('.'))
    };
    let dsset = std::fs::read_to_string(dir.join(dsset_name)).unwrap_or_default();
    (signed, dir.join(format!("{ksk}.key")), dsset)
}

/// The chain `.` -> `test.` -> [`ZONE`], each signed by BIND's tools
/// (a private root, so the trust anchor is that root's KSK); answers the
/// signed files in that order and the root's KSK file.
fn sign_chain(dir: &Path, zone: &str) -> (Vec<(String, PathBuf)>, PathBuf) {
    let (org, _, org_ds) = sign(dir, &format!("{ZONE}."), zone);
    let (test, _, test_ds) = sign(
        dir,
        "test.",
        &parent_text("test.", &format!("{ZONE}."), &org_ds),
    );
    let (root, anchor, _) = sign(dir, ".", &parent_text(".", "test.", &test_ds));
    (
        vec![
            (".".into(), root),
            ("test".into(), test),
            (ZONE.into(), org),
        ],
        anchor,
    )
}

/// The fingerprint `domain`'s agent publishes in its TXT record.
fn fingerprint_of(bed: &Testbed, domain: &str) -> String {
    bed.population()
        .agents()
        .iter()
        .find(|a| a.domain == domain)
        .expect("the agent is in the population")
        .fingerprint()
}

/// Alters the last digit of `fingerprint` in the TXT record of the signed
/// zone file `signed`, leaving its RRSIG as it was: the record no longer
/// matches its signature.
fn tamper(signed: &Path, fingerprint: &str) {
    // Wherever the signed file writes the TXT record (its owner name may
    // also appear in another name's NSEC), the fingerprint is there once.
    let text = std::fs::read_to_string(signed).unwrap();
    let needle = format!("pk={fingerprint}");
    assert_eq!(
        text.matches(&needle).count(),
        1,
        "the agent's TXT record, once"
    );
    let at = text.find(&needle).unwrap() + needle.len() - 1;
    let mut bytes = text.into_bytes();
    bytes[at] = if bytes[at] == b'0' { b'1' } else { b'0' };
    std::fs::write(signed, bytes).unwrap();
}

fn crawler(bed_ca: &Path, dns: SocketAddr, anchor: &Path) -> Crawler {
    let options = CrawlerOptions {
        resolvers: vec![dns],
        ca_files: vec![bed_ca.to_owned()],
        policy: AddressPolicy {
            allow_private: true,
        },
        trust_anchors: vec![anchor.to_owned()],
        ..CrawlerOptions::default()
    };
    let key = agentmesh::identity::generate();
    let verifier = agentmesh::identity::peer_id_of(&key);
    Crawler::new(options, Arc::new(key), verifier).expect("the crawler builds")
}

fn verify_cli(domain: &str, dns: SocketAddr, ca: &Path, anchor: &Path) -> (i32, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_agentmesh"))
        .args([
            "verify",
            domain,
            "--json",
            "--allow-private",
            "--resolver",
            &dns.to_string(),
        ])
        .arg("--ca-file")
        .arg(ca)
        .arg("--trust-anchor")
        .arg(anchor)
        .output()
        .expect("agentmesh verify runs");
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "verify printed no JSON ({e}):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_signed_by_bind_validates_and_a_tampered_record_is_bogus() {
    if !bind_available() {
        return;
    }
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
    let (code, json) = verify_cli(&domain, named.addr, &ca, &anchor);
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
    let (code, json) = verify_cli(&domain, named.addr, &ca, &anchor);
    assert_eq!(code, 1, "{json}");
    assert_eq!(json["reasons"][0], "dnssec_bogus");
    drop(named);
    bed.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_crawls_a_zone_signed_by_bind_and_refuses_a_tampered_record() {
    if !bind_available() {
        return;
    }
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
