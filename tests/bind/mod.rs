//! BIND 9 for the DNSSEC tests (`tests/dnssec_bind.rs`): zones signed by
//! `dnssec-keygen` and `dnssec-signzone`, trust anchors written by
//! `dnssec-keygen` (DNSKEY) and `dnssec-dsfromkey` (DS), `named` serving
//! them on a loopback port, killed on drop; and the crawler and the
//! `agentmesh verify` command pointed at it.

// Each test binary uses part of the harness, and it is reached only
// from inside the test crate.
#![allow(dead_code)]
#![allow(unreachable_pub)]

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentmesh::crawl::{AllowedPorts, CrawlReport, Crawler, CrawlerOptions};
use agentmesh::net::AddressPolicy;
use agentmesh::testbed::Testbed;
use agentmesh::trust::TrustLevel;

pub const ZONE: &str = "org1.test";
pub const DEADLINE: Duration = Duration::from_secs(20);

fn have(tool: &str) -> bool {
    super::common::on_path(tool).is_some()
}

/// Fails the test unless BIND's tools are here (`#[ignore]`d tests run
/// where they are: `.ci/run` installs them).
pub fn require_bind() {
    let tools = [
        "named",
        "named-compilezone",
        "dnssec-keygen",
        "dnssec-signzone",
        "dnssec-dsfromkey",
    ];
    let missing: Vec<&str> = tools.into_iter().filter(|t| !have(t)).collect();
    crate::common::needs(
        missing.is_empty().then_some(()),
        &format!("BIND ({} missing)", missing.join(", ")),
        "apt-get install bind9 bind9-utils",
    );
}

pub fn run(cmd: &mut Command) -> String {
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

/// `named` serving zone files; killed on drop.
pub struct Named {
    child: Child,
    /// Where it answers (UDP and TCP).
    pub addr: SocketAddr,
}

impl Named {
    /// `named` serving `zones` (name, file), its configuration in a
    /// directory of its own under `dir`.
    pub async fn start(dir: &Path, zones: &[(String, PathBuf)]) -> Self {
        Self::start_on(dir, zones, free_port()).await
    }

    /// As [`Named::start`], on `port` (a node keeps asking the resolver
    /// it was started with).
    pub async fn start_on(dir: &Path, zones: &[(String, PathBuf)], port: u16) -> Self {
        let dir = dir.join(format!("named-{port}"));
        std::fs::create_dir_all(&dir).unwrap();
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
pub fn zone_text(bed: &Testbed) -> String {
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
pub fn parent_text(origin: &str, child: &str, dsset: &str) -> String {
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
/// `.key` file and the DS records of the zone (`dsset-{origin}`). The
/// unsigned text stays beside it as `{zone}.zone`: the same zone with its
/// signatures and keys stripped.
pub fn sign(dir: &Path, origin: &str, text: &str) -> (PathBuf, PathBuf, String) {
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
pub fn sign_chain(dir: &Path, zone: &str) -> (Vec<(String, PathBuf)>, PathBuf) {
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
pub fn fingerprint_of(bed: &Testbed, domain: &str) -> String {
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
pub fn tamper(signed: &Path, fingerprint: &str) {
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

pub fn crawler(bed_ca: &Path, dns: SocketAddr, anchor: &Path) -> Crawler {
    let options = CrawlerOptions {
        resolvers: vec![dns],
        ca_files: vec![bed_ca.to_owned()],
        policy: AddressPolicy {
            allow_private: true,
        },
        trust_anchors: vec![anchor.to_owned()],
        // The testbed's HTTPS port, whichever it is: these tests are
        // about DNSSEC, not ports.
        allowed_ports: AllowedPorts::new(1..=u16::MAX),
        ..CrawlerOptions::default()
    };
    let key = agentmesh::identity::generate();
    let verifier = agentmesh::identity::peer_id_of(&key);
    Crawler::new(options, Arc::new(key), verifier).expect("the crawler builds")
}

/// `agentmesh verify DOMAIN --json` through `dns`, trusting `ca` and
/// `anchor`, with the testbed's HTTPS port allowed: its exit code and
/// its JSON.
pub fn verify_cli(
    domain: &str,
    dns: SocketAddr,
    ca: &Path,
    anchor: &Path,
    https_port: u16,
) -> (i32, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_agentmesh"))
        .args([
            "verify",
            domain,
            "--json",
            "--allow-private",
            "--allow-port",
            &https_port.to_string(),
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

/// A copy of the signed zone file `signed` (as `{name}`) with `domain`'s
/// TXT record altered after signing ([`tamper`]).
pub fn tampered_copy(signed: &Path, name: &str, fingerprint: &str) -> PathBuf {
    let copy = signed.with_file_name(name);
    std::fs::copy(signed, &copy).unwrap();
    tamper(&copy, fingerprint);
    copy
}

/// A copy of the signed zone `zone` in `signed` (as `{name}`) without the
/// RRSIG over `domain`'s TXT record: its keys and every other signature
/// as BIND made them. `named-compilezone` writes the zone one record a
/// line first.
pub fn without_txt_signature(signed: &Path, zone: &str, domain: &str, name: &str) -> PathBuf {
    let flat = signed.with_file_name(format!("{name}.flat"));
    run(Command::new("named-compilezone")
        .args(["-q", "-s", "full", "-o"])
        .arg(&flat)
        .arg(zone)
        .arg(signed));
    let owner = format!("_agent.{domain}.");
    let text = std::fs::read_to_string(&flat).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            !(fields.len() > 4
                && fields[0].eq_ignore_ascii_case(&owner)
                && fields[3] == "RRSIG"
                && fields[4] == "TXT")
        })
        .collect();
    assert_eq!(
        text.lines().count(),
        kept.len() + 1,
        "one RRSIG over {owner}'s TXT record removed"
    );
    let copy = signed.with_file_name(name);
    std::fs::write(&copy, kept.join("\n") + "\n").unwrap();
    copy
}

/// The DS record of the key in `key_file` (a `K*.key` file), SHA-256, as
/// `dnssec-dsfromkey -2` writes it, saved as `{key_file}.ds`.
pub fn ds_anchor(key_file: &Path) -> PathBuf {
    let ds = run(Command::new("dnssec-dsfromkey").arg("-2").arg(key_file));
    assert!(
        ds.contains(" DS "),
        "dnssec-dsfromkey wrote a DS record: {ds}"
    );
    let path = key_file.with_extension("ds");
    std::fs::write(&path, ds).unwrap();
    path
}

/// Crawls `domain` through `dns` from `anchor`.
pub async fn crawl(domain: &str, ca: &Path, dns: SocketAddr, anchor: &Path) -> CrawlReport {
    crawler(ca, dns, anchor).crawl(domain).await.report
}

/// `report` proves the TXT RRset Secure: the dnssec step passed, the
/// evidence is set, and the key's proof is on top.
pub fn assert_secure(report: &CrawlReport) {
    let step = report.steps.iter().find(|s| s.step == "dnssec");
    assert_eq!(
        step.map(|s| s.outcome),
        Some(agentmesh::crawl::StepOutcome::Ok),
        "{:?}",
        report.steps
    );
    assert!(report.trust.evidence.dnssec, "{:?}", report.steps);
    assert_eq!(
        report.level(),
        TrustLevel::KeyVerified,
        "{:?}",
        report.reasons
    );
}

/// `report` refused the TXT RRset as `dnssec_bogus` before anything was
/// fetched: no evidence, no trust, nothing stored.
pub fn assert_bogus(report: &CrawlReport) {
    assert_eq!(
        report.reasons.first().map(|r| r.as_str()),
        Some("dnssec_bogus"),
        "{:?}",
        report.steps
    );
    assert_eq!(report.level(), TrustLevel::Unverified, "{:?}", report.steps);
    assert!(!report.trust.evidence.dnssec);
    assert!(!report.trust.evidence.fingerprint);
    assert!(!report.stored && !report.steps.iter().any(|s| s.step == "fetch"));
}
