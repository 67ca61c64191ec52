//! The agent operator's workflow as the README tells it (keygen, publish,
//! agent-host, verify) over a real DNS server and real TLS on loopback,
//! and a node crawling a testbed population through `POST /crawl`.

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::Stdio;
use std::time::Duration;

use agentmesh::testbed::dns::{DnsServer, Zone};
use common::{agentmesh, run, testbed_with_ca, ChildGuard, TestNode, DEADLINE};
use serde_json::{json, Value};

/// Starts `agent-host` and waits (with a deadline) for its "serving" line.
fn agent_host(args: &[&str]) -> (ChildGuard, SocketAddr) {
    let mut child = ChildGuard::spawn(
        agentmesh()
            .arg("agent-host")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
        "agent-host",
    );
    let stdout = child.take_stdout();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let line = rx
        .recv_timeout(DEADLINE)
        .expect("agent-host prints its address within 10 s");
    let addr = line
        .rsplit("://")
        .next()
        .expect("an address")
        .parse()
        .expect("ip:port");
    (child, addr)
}

/// The quoted character-strings of a zone-file TXT line.
fn txt_strings(line: &str) -> Vec<String> {
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_publishes_hosts_and_verifies_an_agent() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let domain = "agent.example.test";

    // keygen + publish, as the README shows (no --port: the SRV record
    // carries the port, the URLs name none).
    tokio::task::block_in_place(|| {
        run(
            agentmesh().args(["keygen", "--out", &path("agent.key")]),
            DEADLINE,
            "keygen",
        )
        .assert_success("keygen");
    });
    let published = tokio::task::block_in_place(|| {
        run(
            agentmesh().args([
                "publish",
                "--domain",
                domain,
                "--key",
                &path("agent.key"),
                "--capability",
                "translation",
                "--language",
                "en",
                "--language",
                "fr",
                "--out",
                &path("agent.json"),
            ]),
            DEADLINE,
            "publish",
        )
    });
    published.assert_success("publish");
    let txt_line = published
        .stdout
        .lines()
        .find(|l| l.contains(" IN TXT "))
        .expect("publish prints a TXT line")
        .to_owned();
    assert!(
        txt_line.starts_with(&format!("_agent.{domain}. ")),
        "{txt_line}"
    );
    let document: Value =
        serde_json::from_str(&std::fs::read_to_string(path("agent.json")).unwrap()).unwrap();
    assert_eq!(
        document["endpoints"]["chat"],
        format!("wss://{domain}/agent/chat")
    );

    // A certificate for the domain from a test CA.
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec![domain.to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    std::fs::write(path("ca.pem"), ca.pem()).unwrap();
    std::fs::write(path("cert.pem"), leaf.pem()).unwrap();
    std::fs::write(path("cert.key"), leaf_key.serialize_pem()).unwrap();

    let (_host, host_addr) = tokio::task::block_in_place(|| {
        agent_host(&[
            "--document",
            &path("agent.json"),
            "--key",
            &path("agent.key"),
            "--cert",
            &path("cert.pem"),
            "--cert-key",
            &path("cert.key"),
            "--listen",
            "127.0.0.1:0",
        ])
    });

    // The zone the operator would publish: the printed TXT, an SRV with the
    // host's port, and the address.
    let mut zone = Zone::new();
    zone.add_txt(&format!("_agent.{domain}"), txt_strings(&txt_line))
        .unwrap();
    zone.add_srv(
        &format!("_agent._tcp.{domain}"),
        0,
        0,
        host_addr.port(),
        domain,
    )
    .unwrap();
    zone.add_a(domain, Ipv4Addr::LOCALHOST).unwrap();
    let dns = DnsServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), zone)
        .await
        .unwrap();
    let resolver = dns.local_addr().to_string();

    let verify = |extra: &[&str]| {
        let mut cmd = agentmesh();
        cmd.args([
            "verify",
            domain,
            "--json",
            "--resolver",
            &resolver,
            "--ca-file",
            &path("ca.pem"),
            "--allow-port",
            &host_addr.port().to_string(),
        ])
        .args(extra);
        tokio::task::block_in_place(|| run(&mut cmd, Duration::from_secs(20), "verify"))
    };
    let ok = verify(&["--allow-private"]);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "verify exits 0 when key-verified\n{}\n{}",
        ok.stdout,
        ok.stderr
    );
    let report: Value = serde_json::from_str(&ok.stdout).expect("--json prints one JSON object");
    assert_eq!(report["agent_id"], format!("agent:{domain}"));
    assert_eq!(report["trust"]["level"], "key-verified");
    assert_eq!(report["trust"]["evidence"]["fingerprint"], true);
    assert_eq!(report["trust"]["evidence"]["challenge"], true);
    assert_eq!(report["reasons"], json!([]));
    let steps: Vec<&str> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(
        steps,
        [
            "dns_txt",
            "dnssec",
            "dns_srv",
            "dns_address",
            "fetch",
            "document",
            "fingerprint",
            "challenge",
            "peers"
        ]
    );
    assert_eq!(
        report["steps"][2]["outcome"], "ok",
        "the SRV record supplied the port"
    );
    assert_eq!(
        report["steps"][1]["outcome"], "skipped",
        "the testbed's zone is not signed"
    );
    assert_eq!(
        report["steps"][8]["outcome"], "skipped",
        "a published agent lists no verified peer to check"
    );

    // Without the opt-in, the loopback target is refused: exit 1.
    let refused = verify(&[]);
    assert_eq!(refused.status.code(), Some(1), "{}", refused.stdout);
    let report: Value = serde_json::from_str(&refused.stdout).unwrap();
    assert_eq!(report["reasons"], json!(["address_not_allowed"]));

    // A usage error: exit 2.
    let usage = tokio::task::block_in_place(|| {
        run(
            agentmesh().args(["verify", "not a domain"]),
            DEADLINE,
            "verify",
        )
    });
    assert_eq!(usage.status.code(), Some(2));

    // The host refuses a document that names another key.
    tokio::task::block_in_place(|| {
        run(
            agentmesh().args(["keygen", "--out", &path("other.key")]),
            DEADLINE,
            "keygen",
        )
        .assert_success("keygen");
        let wrong = run(
            agentmesh().args([
                "agent-host",
                "--document",
                &path("agent.json"),
                "--key",
                &path("other.key"),
                "--plain",
                "--listen",
                "127.0.0.1:0",
            ]),
            DEADLINE,
            "agent-host with the wrong key",
        );
        wrong.assert_failure("agent-host with the wrong key");
        assert!(wrong.stderr.contains("names the key"), "{}", wrong.stderr);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_crawls_through_its_api_and_serves_what_it_verified() {
    let (testbed, _dir, ca) = testbed_with_ca(21, 30).await;
    let node = tokio::task::block_in_place(|| TestNode::builder().crawling(&testbed, &ca).start());
    let api = node.api();
    let population = testbed.population();
    let domains: Vec<&str> = population
        .agents()
        .iter()
        .take(10)
        .map(|a| a.domain.as_str())
        .collect();

    let reply = api
        .post("/crawl", &json!({"domains": domains, "wait": true}))
        .await;
    let reports = reply.expect(200)["reports"].as_array().unwrap().clone();
    assert_eq!(reports.len(), 10);
    assert!(
        reports.iter().all(
            |r| r["trust"]["level"] == "key-verified" || r["trust"]["level"] == "peer-verified"
        ),
        "{reports:?}"
    );

    let agent = &population.agents()[0];
    let doc = api.get(&format!("/agents/{}", agent.id())).await;
    assert_eq!(doc.expect(200)["identity"]["domain"], agent.domain.as_str());
    let report = api.get(&format!("/crawl/{}", agent.domain)).await;
    let report = report.expect(200);
    assert_eq!(report["agent_id"], agent.id());
    // The node keeps a schedule for what it crawled: back at the TTL
    // and max-age (300 s, up to 10 % later), with the document's ETag.
    let now = agentmesh::record::unix_now();
    let schedule = &report["schedule"];
    let next = schedule["next_at"].as_u64().expect("a next visit");
    assert!(
        (now + 290..=now + 331).contains(&next),
        "next visit in {} s: {schedule}",
        next.saturating_sub(now)
    );
    assert_eq!(schedule["failures"], 0, "{schedule}");
    assert!(schedule["etag"].is_string(), "{schedule}");

    let cap = &agent.capabilities[0].id;
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
        .find(|s| s["id"] == agent.id())
        .cloned()
        .unwrap_or_else(|| panic!("{} found by its capability {cap}", agent.id()));
    assert_eq!(hit["source"], "crawl");
    assert!(
        hit["trust"]["evidence"]["challenge"] == true
            && hit["trust"]["evidence"]["fingerprint"] == true,
        "{hit}"
    );
    // Results say how fresh a crawled agent is and whether its endpoint
    // answered, and carry its declared status.
    assert_eq!(hit["status"], "online", "{hit}");
    assert_eq!(hit["freshness"]["state"], "fresh", "{hit}");
    assert_eq!(hit["freshness"]["endpoint_ok"], true, "{hit}");
    assert_eq!(hit["freshness"]["next_check_at"], next, "{hit}");
    api.get("/agents?include_stale=maybe")
        .await
        .expect_field_problem("include_stale");
    let with_stale = api.get("/agents?include_stale=true&limit=50").await;
    assert_eq!(with_stale.expect(200).as_array().unwrap().len(), 10);

    // Asynchronous crawls are queued; bad names are refused with details.
    let queued = api
        .post(
            "/crawl",
            &json!({"domains": [population.agents()[20].domain]}),
        )
        .await;
    assert_eq!(queued.expect(202)["queued"], 1);
    let bad = api
        .post(
            "/crawl",
            &json!({"domains": ["ok.example", "not a domain"]}),
        )
        .await;
    assert_eq!(
        bad.expect_problems()[0]["field"],
        "/domains/1",
        "{}",
        bad.text
    );
    api.get("/crawl/never.example")
        .await
        .expect_error(404, "NotFound");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_crawls_its_seed_files_at_start() {
    let (testbed, dir, ca) = testbed_with_ca(22, 8).await;
    let domains: Vec<&str> = testbed
        .population()
        .agents()
        .iter()
        .map(|a| a.domain.as_str())
        .collect();
    let (first, rest) = domains.split_at(3);
    let a = dir.path().join("a.domains");
    std::fs::write(&a, format!("# the first three\n{}\n", first.join("\n"))).unwrap();
    let b = dir.path().join("b.domains");
    std::fs::write(&b, format!("{}\n\n{}\n", rest.join("\n"), first[0])).unwrap();

    let files = format!(r#"["{}", "{}"]"#, a.display(), b.display());
    let node = tokio::task::block_in_place(|| {
        TestNode::builder()
            .crawling(&testbed, &ca)
            .env("AGENTMESH_CRAWL__SEED_FILES", &files)
            .start()
    });
    let api = node.api();
    // Every domain of both files gets a report (the crawl runs in the
    // background from start).
    let deadline = std::time::Instant::now() + DEADLINE;
    for d in &domains {
        loop {
            let reply = api.get(&format!("/crawl/{d}")).await;
            if reply.status == 200 {
                let level = &reply.body["trust"]["level"];
                assert!(
                    level == "key-verified" || level == "peer-verified",
                    "{d}: {}",
                    reply.text
                );
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out after {DEADLINE:?} waiting for the seed {d} to be crawled"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert_eq!(
        api.get("/health").await.expect(200)["records"],
        domains.len()
    );

    // A line that is not a domain stops the node before it serves,
    // naming the file and the line.
    let bad = dir.path().join("bad.domains");
    std::fs::write(&bad, format!("{}\nnot a domain\n", first[0])).unwrap();
    let out = tokio::task::block_in_place(|| {
        run(
            agentmesh()
                .args(["node", "--listen", "127.0.0.1:0"])
                .args(["--p2p-listen", "/ip4/127.0.0.1/tcp/0"])
                .arg("--data-dir")
                .arg(dir.path().join("data"))
                .env(
                    "AGENTMESH_CRAWL__SEED_FILES",
                    format!(r#"["{}"]"#, bad.display()),
                ),
            DEADLINE,
            "node with a bad seed file",
        )
    });
    out.assert_failure("node with a bad seed file");
    assert!(
        out.stderr.contains("crawl.seed_files") && out.stderr.contains("bad.domains line 2"),
        "{}",
        out.stderr
    );
}
