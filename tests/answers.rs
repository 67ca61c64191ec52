//! Signed answers over HTTP (docs/answers.md): a node's search, list,
//! lookup, resolution and `/agents/{id}/proof` answers, asked with
//! `proof=true` or the media type, are checked offline by `agentmesh
//! verify-answer`, and by a verifier written in Python from the format
//! document alone (`tests/answers/verify.py`); each lie the node could
//! tell (the answer sealed again with its own key) is named by both.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentmesh::answer::{self, Envelope, Payload};
use base64::engine::general_purpose::{STANDARD as B64, URL_SAFE_NO_PAD as B64U};
use base64::Engine as _;
use serde_json::{json, Value};

use crate::common::{agent, agentmesh, needs, python_with, run, testbed_with_ca, Api, TestNode};

/// A node, a few of its registrations, and (when `crawl`) a crawled
/// testbed agent at key-verified.
struct Answering {
    node: TestNode,
    dir: tempfile::TempDir,
    _testbed: Option<agentmesh::testbed::Testbed>,
}

impl Answering {
    async fn start() -> Self {
        let (testbed, _ca_dir, ca) = testbed_with_ca(61, 1).await;
        let node = tokio::task::block_in_place(|| {
            TestNode::builder()
                .crawling(&testbed, &ca)
                .env("AGENTMESH_API__LIMITS__ENABLED", "false")
                .start()
        });
        let api = node.api();
        for id in ["proof-one", "proof-two", "proof-three"] {
            api.register(&agent(id, &["summarise"], &[], &["en"])).await;
        }
        let domain = testbed.population().agents()[0].domain.clone();
        api.post("/crawl", &json!({"domains": [domain], "wait": true}))
            .await
            .expect(200);
        Self {
            node,
            dir: tempfile::tempdir().unwrap(),
            _testbed: Some(testbed),
        }
    }

    fn api(&self) -> Api {
        self.node.api()
    }

    /// The node's key, from its data directory: what it seals a lie with.
    fn key(&self) -> ed25519_dalek::SigningKey {
        agentmesh::identity::read_key_file(&self.node.data_dir().join("node.key")).unwrap()
    }

    /// Writes `bytes` to a file named `name`; its path.
    fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

async fn signed(api: &Api, method: reqwest::Method, target: &str, body: Option<&Value>) -> Vec<u8> {
    let mut request = api.request(method, target);
    if let Some(b) = body {
        request = request.json(b);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200, "{target}");
    assert_eq!(
        response.headers()["content-type"],
        answer::MEDIA_TYPE,
        "{target}"
    );
    response.bytes().await.unwrap().to_vec()
}

/// Runs `agentmesh verify-answer` on `file` with `args`: its exit code
/// and its JSON report.
fn verify_answer(file: &Path, args: &[&str]) -> (i32, Value) {
    let mut cmd = agentmesh();
    cmd.arg("verify-answer").arg(file).arg("--json").args(args);
    let done = run(&mut cmd, Duration::from_secs(60), "agentmesh verify-answer");
    let report = serde_json::from_str(done.stdout.trim())
        .unwrap_or_else(|e| panic!("not a JSON report ({e}): {}{}", done.stdout, done.stderr));
    (done.status.code().unwrap(), report)
}

/// The codes of a report's failures, each once, sorted.
fn codes(report: &Value) -> Vec<String> {
    let codes: std::collections::BTreeSet<String> = report["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_owned())
        .collect();
    codes.into_iter().collect()
}

/// What each route answers signed, and the plain answer stays the default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_signed_answer_checks_offline() {
    let a = Answering::start().await;
    let api = a.api();
    let peer = a.node.peer_id().to_owned();
    let search = json!({"query": "summarise", "top": 10});
    let plain = api.post("/agents/search", &search).await;
    assert!(plain.expect(200).is_array(), "plain JSON stays the default");

    let answers = [
        (
            "POST",
            "/agents/search?proof=true",
            "/agents/search",
            Some(search.clone()),
        ),
        (
            "GET",
            "/agents?capabilities=summarise&proof=true",
            "/agents?capabilities=summarise",
            None,
        ),
        (
            "GET",
            "/agents/proof-two?proof=true",
            "/agents/proof-two",
            None,
        ),
        (
            "POST",
            "/resolve?proof=true",
            "/resolve",
            Some(json!({"intent": "summarise a text"})),
        ),
        (
            "GET",
            "/agents/proof-one/proof",
            "/agents/proof-one/proof",
            None,
        ),
    ];
    for (method, target, sent, body) in answers {
        let bytes = signed(&api, method.parse().unwrap(), target, body.as_ref()).await;
        let file = a.file("answer.json", &bytes);
        let body_file = a.file(
            "body.json",
            &body
                .as_ref()
                .map(|b| b.to_string().into_bytes())
                .unwrap_or_default(),
        );
        let request = format!("{method} {sent}");
        let (code, report) = verify_answer(
            &file,
            &[
                "--trust",
                &peer,
                "--request",
                &request,
                "--request-body",
                body_file.to_str().unwrap(),
            ],
        );
        assert_eq!(code, 0, "{target}: {report}");
        assert!(
            !report["results"].as_array().unwrap().is_empty(),
            "{target}: {report}"
        );
    }

    // Asked by media type: the crawled agent's key-verified level is
    // recomputed from its challenge proof.
    let response = api
        .request(reqwest::Method::POST, "/agents/search")
        .header("accept", answer::MEDIA_TYPE)
        .json(&json!({"filters": {"min_trust": "key-verified"}}))
        .send()
        .await
        .unwrap();
    let file = a.file("crawled.json", &response.bytes().await.unwrap());
    let (code, report) = verify_answer(&file, &["--trust", &peer]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["results"][0]["level"], "key-verified", "{report}");
    assert_eq!(
        report["notes"],
        json!([]),
        "the challenge was checked offline"
    );

    // Another node's key is not this one.
    let other = agentmesh::identity::peer_id_of(&agentmesh::identity::generate());
    let (code, report) = verify_answer(&file, &["--trust", &other]);
    assert_eq!(
        (code, codes(&report)),
        (1, vec!["untrusted_node".to_owned()])
    );
}

/// A real answer, and the lies a node could tell sealed with its own
/// key, each to be named by its code.
async fn lies(a: &Answering) -> Vec<(&'static str, Vec<u8>, Vec<&'static str>)> {
    let api = a.api();
    let old_checkpoint = api.get("/log/checkpoint").await.text.clone().into_bytes();
    api.register(&agent("proof-four", &["summarise"], &[], &["en"]))
        .await;
    let bytes = signed(
        &api,
        reqwest::Method::POST,
        "/agents/search?proof=true",
        Some(&json!({"query": "summarise", "top": 10})),
    )
    .await;
    let envelope: Envelope = serde_json::from_slice(&bytes).unwrap();
    let payload: Payload =
        serde_json::from_slice(&B64U.decode(&envelope.payload).unwrap()).unwrap();
    let key = a.key();
    let seal = |p: &Payload| {
        serde_json::to_vec(&answer::seal(&serde_json::to_vec(p).unwrap(), &key)).unwrap()
    };
    let own = payload
        .results
        .iter()
        .position(|r| r.id == "proof-one")
        .expect("a registration of the node's in the answer");
    let lie = |change: &dyn Fn(&mut Payload)| {
        let mut p = payload.clone();
        change(&mut p);
        seal(&p)
    };
    let mut out = vec![("true", bytes.clone(), vec![])];
    out.push((
        "a changed field",
        lie(&|p| {
            let mut r = B64.decode(&p.results[own].record).unwrap();
            let at = r.windows(9).position(|w| w == b"proof-one").unwrap();
            r[at] = b'P';
            p.results[own].record = B64.encode(r);
        }),
        vec!["inclusion", "record"],
    ));
    out.push((
        "a dropped result",
        lie(&|p| {
            p.results.remove(own);
        }),
        vec!["results"],
    ));
    out.push((
        "a stale checkpoint",
        lie(&|p| p.checkpoint = String::from_utf8(old_checkpoint.clone()).unwrap()),
        vec!["inclusion"],
    ));
    out.push((
        "a forged trust level",
        lie(&|p| p.answer[own]["trust"]["level"] = json!("peer-verified")),
        vec!["trust_level"],
    ));
    let mut unsealed: Envelope = envelope.clone();
    unsealed.payload = B64U.encode(
        serde_json::to_vec(&{
            let mut p = payload.clone();
            p.time += 1;
            p
        })
        .unwrap(),
    );
    out.push((
        "not sealed again",
        serde_json::to_vec(&unsealed).unwrap(),
        vec!["signature"],
    ));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_answer_names_every_lie() {
    let a = Answering::start().await;
    for (what, bytes, expected) in lies(&a).await {
        let file = a.file("lie.json", &bytes);
        let (code, report) = verify_answer(&file, &[]);
        assert_eq!(codes(&report), expected, "{what}: {report}");
        assert_eq!(code, i32::from(!expected.is_empty()), "{what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the answer verifier's Python (python3 -m venv /opt/answer-verify && /opt/answer-verify/bin/pip install cryptography==50.0.2 dnspython==2.9.2)"]
async fn an_independent_python_verifier_agrees() {
    let python = needs(
        python_with("ANSWER_VERIFY_PYTHON", "/opt/answer-verify/bin/python", "cryptography, dns.dnssec"),
        "the answer verifier's Python",
        "python3 -m venv /opt/answer-verify && /opt/answer-verify/bin/pip install cryptography==50.0.2 dnspython==2.9.2",
    );
    let script = crate::common::repo_root().join("tests/answers/verify.py");
    let a = Answering::start().await;
    let peer = a.node.peer_id().to_owned();
    for (what, bytes, expected) in lies(&a).await {
        let file = a.file("lie.json", &bytes);
        let mut cmd = std::process::Command::new(&python);
        cmd.arg(&script).arg(&file).args(["--trust", &peer]);
        let done = run(&mut cmd, Duration::from_secs(60), "tests/answers/verify.py");
        let report: Value = serde_json::from_str(done.stdout.trim())
            .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {}{}", done.stdout, done.stderr));
        assert_eq!(codes(&report), expected, "{what}: {report}");
        assert_eq!(
            done.status.code(),
            Some(i32::from(!expected.is_empty())),
            "{what}"
        );
    }
}

/// The vectors the Python generator builds from the format document
/// alone (answers of every shape, and each lie), checked by `agentmesh
/// verify-answer`: the codes must be the ones the generator expects.
#[test]
#[ignore = "needs the answer verifier's Python (python3 -m venv /opt/answer-verify && /opt/answer-verify/bin/pip install cbor2==6.2.1 cryptography==50.0.2 dnspython==2.9.2)"]
fn verify_answer_agrees_with_answers_written_from_the_document() {
    let python = needs(
        python_with("ANSWER_VERIFY_PYTHON", "/opt/answer-verify/bin/python", "cbor2, cryptography, dns.dnssec"),
        "the answer verifier's Python",
        "python3 -m venv /opt/answer-verify && /opt/answer-verify/bin/pip install cbor2==6.2.1 cryptography==50.0.2 dnspython==2.9.2",
    );
    let dir = tempfile::tempdir().unwrap();
    let script = crate::common::repo_root().join("tests/answers/make_vectors.py");
    // The generator checks its vectors with the Python verifier too.
    let mut cmd = std::process::Command::new(&python);
    cmd.arg(&script).arg("--out").arg(dir.path());
    run(&mut cmd, Duration::from_secs(300), "make_vectors.py").assert_success("make_vectors.py");
    let manifest: Vec<Value> =
        serde_json::from_slice(&std::fs::read(dir.path().join("manifest.json")).unwrap()).unwrap();
    assert!(manifest.len() >= 30, "{} vectors", manifest.len());
    for v in manifest {
        let name = v["name"].as_str().unwrap();
        let (mut args, mut method, mut target) = (Vec::new(), None, None);
        let given: Vec<&str> = v["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let mut it = given.into_iter();
        while let Some(a) = it.next() {
            match a {
                "--request-method" => method = it.next(),
                "--request-target" => target = it.next(),
                other => args.push(other.to_owned()),
            }
        }
        if method.is_some() || target.is_some() {
            args.push("--request".into());
            args.push(format!("{} {}", method.unwrap_or(""), target.unwrap_or("")));
        }
        let mut cmd = agentmesh();
        cmd.current_dir(dir.path())
            .arg("verify-answer")
            .arg(v["file"].as_str().unwrap())
            .arg("--json")
            .args(&args);
        let done = run(&mut cmd, Duration::from_secs(60), name);
        let expected: Vec<String> = {
            let set: std::collections::BTreeSet<String> = v["codes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap().to_owned())
                .collect();
            set.into_iter().collect()
        };
        if v["ok"] == false && expected.is_empty() {
            assert_eq!(done.status.code(), Some(2), "{name}: a usage error");
            continue;
        }
        let report: Value = serde_json::from_str(done.stdout.trim())
            .unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {}{}", done.stdout, done.stderr));
        assert_eq!(codes(&report), expected, "{name}: {report}");
    }
}

/// Answers written from docs/answers.md by the Python generator, kept in
/// `tests/answers/vectors/`: checked without Python.
#[test]
fn answers_written_from_the_document_check() {
    let vectors = crate::common::repo_root().join("tests/answers/vectors");
    for (file, expected) in [
        ("ok_list.json", vec![]),
        ("ok_search.json", vec![]),
        ("forged_trust_level.json", vec!["trust_level".to_owned()]),
    ] {
        let (code, report) = verify_answer(&vectors.join(file), &[]);
        assert_eq!(codes(&report), expected, "{file}: {report}");
        assert_eq!(code, i32::from(!expected.is_empty()), "{file}");
    }
}

/// A node crawling an agent of a zone signed in process (the testbed's
/// `test.`, its key the node's trust anchor): the agent's record carries
/// the DNSSEC chain that proved its TXT record, and its signed answer.
struct SignedZone {
    a: Answering,
    anchor: PathBuf,
    answer: Vec<u8>,
    _dns: agentmesh::testbed::dns::DnsServer,
}

impl SignedZone {
    async fn start() -> Self {
        use agentmesh::testbed::dnssec::ZoneKey;
        use agentmesh::testbed::publish::AGENT_ADDRESS;
        use agentmesh::testbed::{Population, PopulationConfig, Testbed, TestbedOptions};
        let dir = tempfile::tempdir().unwrap();
        let bed = Testbed::start(
            Population::generate(&PopulationConfig::healthy(23, 1)),
            TestbedOptions::default(),
        )
        .await
        .expect("the testbed starts");
        let ca = dir.path().join("ca.pem");
        bed.write_ca(&ca).unwrap();
        let key = ZoneKey::generate().unwrap();
        let anchor = dir.path().join("anchor.key");
        std::fs::write(&anchor, key.trust_anchor()).unwrap();
        let mut zone = bed.population().zone(bed.ports(), AGENT_ADDRESS).unwrap();
        key.sign(&mut zone).unwrap();
        let dns = agentmesh::testbed::dns::DnsServer::start("127.0.0.1:0".parse().unwrap(), zone)
            .await
            .unwrap();
        let (resolver, port) = (dns.local_addr().to_string(), bed.https_port().to_string());
        let node = tokio::task::block_in_place(|| {
            TestNode::builder()
                .args(&["--resolver", &resolver, "--allow-private"])
                .args(&["--ca-file", ca.to_str().unwrap(), "--allow-port", &port])
                .args(&["--trust-anchor", anchor.to_str().unwrap()])
                .env("AGENTMESH_CRAWL__FOLLOW_PEERS", "false")
                .env("AGENTMESH_API__LIMITS__ENABLED", "false")
                .start()
        });
        let api = node.api();
        let domain = bed.population().agents()[0].domain.clone();
        let reply = api
            .post("/crawl", &json!({"domains": [domain], "wait": true}))
            .await;
        let reply = reply.expect(200);
        let report = &reply["reports"][0];
        assert_eq!(report["trust"]["evidence"]["dnssec"], true, "{report}");
        assert_eq!(report["stored"], true, "{report}");
        let answer = signed(
            &api,
            reqwest::Method::GET,
            &format!("/agents/agent:{domain}/proof"),
            None,
        )
        .await;
        let a = Answering {
            node,
            dir,
            _testbed: Some(bed),
        };
        Self {
            a,
            anchor,
            answer,
            _dns: dns,
        }
    }

    /// The answer and, sealed with the node's key, the lies about the
    /// agent's DNSSEC chain: each with the codes a checker given the
    /// zone's anchor must name.
    fn lies(&self) -> Vec<(&'static str, Vec<u8>, Vec<&'static str>)> {
        use agentmesh::record::{RecordBody, SignedRecord};
        let envelope: Envelope = serde_json::from_slice(&self.answer).unwrap();
        let payload: Payload =
            serde_json::from_slice(&B64U.decode(&envelope.payload).unwrap()).unwrap();
        let key = self.a.key();
        let record =
            SignedRecord::decode(&B64.decode(&payload.results[0].record).unwrap()).unwrap();
        let Ok(RecordBody::Descriptor(body)) = record.body() else {
            panic!("a descriptor");
        };
        let chain = body
            .evidence
            .dnssec_chain
            .clone()
            .expect("the record carries its chain");
        let resealed = |change: &dyn Fn(&mut agentmesh::record::DescriptorRecord)| {
            let mut body = (*body).clone();
            change(&mut body);
            let mut p = payload.clone();
            p.results[0].record =
                B64.encode(SignedRecord::sign_descriptor(&body, &key).unwrap().encode());
            serde_json::to_vec(&answer::seal(&serde_json::to_vec(&p).unwrap(), &key)).unwrap()
        };
        // The TXT record's key fingerprint changed inside the chain.
        let at = chain
            .windows(4)
            .position(|w| w == b"pk=e")
            .expect("the TXT record in the chain");
        let mut altered = chain.clone();
        altered[at + 12] ^= 1;
        vec![
            ("true", self.answer.clone(), vec![]),
            (
                "a DNS record changed in the chain",
                resealed(&|b| b.evidence.dnssec_chain = Some(altered.clone())),
                // The re-signed record is not the one logged either.
                vec!["evidence", "inclusion", "trust_level"],
            ),
            (
                "a chain cut short",
                resealed(&|b| b.evidence.dnssec_chain = Some(chain[..chain.len() / 2].to_vec())),
                vec!["evidence", "inclusion", "trust_level"],
            ),
        ]
    }
}

/// The notes of a report with `code`.
fn notes(report: &Value, code: &str) -> Vec<String> {
    report["notes"]
        .as_array()
        .map(|n| {
            n.iter()
                .filter(|n| n["code"] == code)
                .map(|n| n["message"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_carries_the_dnssec_chain_and_verify_answer_checks_it() {
    let z = SignedZone::start().await;
    let anchor = z.anchor.to_str().unwrap();
    let file = z.a.file("answer.json", &z.answer);
    // From the zone's anchor: proved, nothing left unchecked.
    let (code, report) = verify_answer(&file, &["--dnssec-anchor", anchor]);
    assert_eq!((code, codes(&report)), (0, vec![]), "{report}");
    assert_eq!(report["results"][0]["level"], "key-verified", "{report}");
    assert!(notes(&report, "unchecked").is_empty(), "{report}");
    // Without it the chain holds together from a key the checker was
    // not given: a note, not a failure.
    let (code, report) = verify_answer(&file, &[]);
    assert_eq!(code, 0, "{report}");
    let unchecked = notes(&report, "unchecked");
    assert!(
        unchecked
            .iter()
            .any(|n| n.contains("not among the trust anchors")),
        "{report}"
    );
    for (what, bytes, expected) in z.lies() {
        let file = z.a.file("lie.json", &bytes);
        let (code, report) = verify_answer(&file, &["--dnssec-anchor", anchor]);
        assert_eq!(codes(&report), expected, "{what}: {report}");
        assert_eq!(code, i32::from(!expected.is_empty()), "{what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the answer verifier's Python (python3 -m venv /opt/answer-verify && /opt/answer-verify/bin/pip install cryptography==50.0.2 dnspython==2.9.2)"]
async fn the_python_verifier_checks_the_dnssec_chain_too() {
    let python = needs(
        python_with("ANSWER_VERIFY_PYTHON", "/opt/answer-verify/bin/python", "cryptography, dns.dnssec"),
        "the answer verifier's Python",
        "python3 -m venv /opt/answer-verify && /opt/answer-verify/bin/pip install cryptography==50.0.2 dnspython==2.9.2",
    );
    let script = crate::common::repo_root().join("tests/answers/verify.py");
    let z = SignedZone::start().await;
    let peer = z.a.node.peer_id().to_owned();
    let anchor = z.anchor.to_str().unwrap();
    let python_report = |file: &Path, anchored: bool| {
        let mut cmd = std::process::Command::new(&python);
        cmd.arg(&script).arg(file).args(["--trust", &peer]);
        if anchored {
            cmd.args(["--dnssec-anchor", anchor]);
        }
        let done = run(&mut cmd, Duration::from_secs(60), "tests/answers/verify.py");
        let report: Value = serde_json::from_str(done.stdout.trim())
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", done.stdout, done.stderr));
        (done.status.code(), report)
    };
    let file = z.a.file("answer.json", &z.answer);
    let (code, report) = python_report(&file, false);
    assert_eq!((code, codes(&report)), (Some(0), vec![]), "{report}");
    for (what, bytes, expected) in z.lies() {
        let file = z.a.file("lie.json", &bytes);
        let (code, report) = python_report(&file, true);
        assert_eq!(codes(&report), expected, "{what}: {report}");
        assert_eq!(code, Some(i32::from(!expected.is_empty())), "{what}");
    }
}
