//! The API over HTTPS with client certificates (`[api.tls]`,
//! docs/protocol.md#api-access), a real node on loopback and real TLS:
//! a certificate matching an `[[api.tls.clients]]` entry is that entry's
//! principal (`cert:<name>`, in the audit log) with its scopes; a bearer
//! credential comes first; a certificate from another CA, or expired,
//! fails the handshake; a client without one is anonymous; plain HTTP
//! gets no HTTP answer; a client that never starts the handshake is cut
//! off at `api.header_read_timeout` and holds its connection slot until
//! then; a missing or broken file stops the start, named.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::CertificateDer;
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::common::{agentmesh, minimal_agent, run, wait_until, NodeBuilder, TestNode, DEADLINE};

const ADMIN_TOKEN: &str = "the-admin-token-of-the-mtls-test";

/// A test certificate authority and the files made from it, in a
/// temporary directory.
struct Pki {
    dir: tempfile::TempDir,
    ca: Issuer<'static, KeyPair>,
    ca_pem: String,
}

impl Pki {
    /// A CA called `name`, written to `<dir>/<name>.pem`.
    fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        let ca_pem = params.self_signed(&key).unwrap().pem();
        let pki = Self {
            dir: tempfile::tempdir().unwrap(),
            ca: Issuer::new(params, key),
            ca_pem,
        };
        std::fs::write(pki.path(&format!("{name}.pem")), &pki.ca_pem).unwrap();
        pki
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    /// A certificate for `names` signed by this CA, for `usage`, and its
    /// key: (certificate PEM, key PEM).
    fn issue(
        &self,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
        expired: bool,
    ) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, names[0]);
        params.extended_key_usages = vec![usage];
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let cert = params.signed_by(&key, &self.ca).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// A client certificate for `name`: the PEM reqwest's `Identity`
    /// takes (key and certificate) and the certificate's SHA-256 in
    /// `ab:cd:...` form.
    fn client(&self, name: &str, expired: bool) -> (String, String) {
        let (cert, key) = self.issue(&[name], ExtendedKeyUsagePurpose::ClientAuth, expired);
        let der = CertificateDer::from_pem_slice(cert.as_bytes()).unwrap();
        let digest: Vec<String> = Sha256::digest(&der)
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect();
        (format!("{key}{cert}"), digest.join(":"))
    }

    /// The server's certificate for `localhost` and 127.0.0.1, written to
    /// `server.pem` and `server.key`.
    fn server(&self) -> (PathBuf, PathBuf) {
        let (cert, key) = self.issue(
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
            false,
        );
        let (cert_file, key_file) = (self.path("server.pem"), self.path("server.key"));
        std::fs::write(&cert_file, cert).unwrap();
        std::fs::write(&key_file, key).unwrap();
        (cert_file, key_file)
    }
}

/// An `[api.tls]` config file in `pki`'s directory: the server's files,
/// `pki`'s CA for clients, `extra` appended (more keys, entries).
fn config_file(pki: &Pki, api: &str, extra: &str) -> PathBuf {
    let (cert, key) = pki.server();
    let text = format!(
        "[api]\n{api}\n[api.tls]\ncert_file = {cert:?}\nkey_file = {key:?}\n\
         client_ca_files = [{ca:?}]\n{extra}",
        ca = pki.path("test-ca.pem"),
    );
    let path = pki.path("agentmesh.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// An HTTPS client trusting `pki`'s CA, presenting `identity` (key and
/// certificate PEM) when given.
fn client(pki: &Pki, identity: Option<&str>) -> reqwest::Client {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .timeout(DEADLINE)
        .add_root_certificate(reqwest::Certificate::from_pem(pki.ca_pem.as_bytes()).unwrap());
    if let Some(pem) = identity {
        builder = builder.identity(reqwest::Identity::from_pem(pem.as_bytes()).unwrap());
    }
    builder.build().unwrap()
}

fn url(node: &TestNode, path: &str) -> String {
    format!("https://127.0.0.1:{}{path}", node.addr().port())
}

/// `method path` on `node` with `client`, an optional bearer token and
/// JSON body: the status and the body.
async fn call(
    client: &reqwest::Client,
    node: &TestNode,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> (u16, Value) {
    let mut request = client.request(method.clone(), url(node, path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = request
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: no answer: {e:?}"));
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Makes an API key in `dir`; answers its token.
fn make_key(dir: &Path, name: &str, scopes: &str) -> String {
    let mut cmd = agentmesh();
    cmd.args(["keys", "create", "--data-dir"])
        .arg(dir)
        .args(["--name", name, "--scope", scopes]);
    let done = run(&mut cmd, DEADLINE, "agentmesh keys create");
    done.assert_success("agentmesh keys create");
    done.stdout.trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_name_their_callers_and_a_bearer_credential_comes_first() {
    let pki = Pki::new("test-ca");
    let (east, _) = pki.client("registry-east.example.org", false);
    let (reader, reader_digest) = pki.client("reader.example.org", false);
    let (stranger, _) = pki.client("stranger.example.org", false);
    let config = config_file(
        &pki,
        &format!("admin_token = {ADMIN_TOKEN:?}"),
        &format!(
            "[[api.tls.clients]]\nname = \"registry-east\"\n\
             subject = \"registry-east.example.org\"\nscopes = [\"read\", \"register\"]\n\
             [[api.tls.clients]]\nname = \"reader\"\nfingerprint = {reader_digest:?}\n\
             scopes = [\"read\"]\n"
        ),
    );
    let data = tempfile::tempdir().unwrap();
    let key = make_key(data.path(), "sync", "register");
    let node = NodeBuilder::default()
        .data_dir(data)
        .args(&["--config", config.to_str().unwrap()])
        .start();
    use reqwest::Method;

    // (a) The certificate of an entry with `register` registers, and the
    // audit log names the entry.
    let east = client(&pki, Some(&east));
    let doc = minimal_agent("mtls-east");
    let (status, body) = call(&east, &node, Method::POST, "/agents", None, Some(&doc)).await;
    assert_eq!(status, 201, "{body}");
    let admin = client(&pki, None);
    let (status, audit) = call(
        &admin,
        &node,
        Method::GET,
        "/admin/audit?limit=100",
        Some(ADMIN_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200, "{audit}");
    let entries = audit["entries"].as_array().unwrap();
    assert!(
        entries.iter().any(|e| e["action"] == "register"
            && e["target"] == "mtls-east"
            && e["actor"] == "cert:registry-east"
            && e["addr"] == "127.0.0.1"),
        "no register by cert:registry-east in {audit}"
    );

    // (b) An entry with only `read` (known by its fingerprint) reads but
    // may not register: 403, naming it.
    let reader = client(&pki, Some(&reader));
    let (status, _) = call(&reader, &node, Method::GET, "/agents/mtls-east", None, None).await;
    assert_eq!(status, 200);
    let doc = minimal_agent("mtls-reader");
    let (status, body) = call(&reader, &node, Method::POST, "/agents", None, Some(&doc)).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.to_string().contains("cert:reader"), "{body}");

    // (e) No certificate: anonymous, public reads work and writes need
    // credentials; an API key works over TLS.
    let (status, _) = call(&admin, &node, Method::GET, "/agents/mtls-east", None, None).await;
    assert_eq!(status, 200);
    let doc = minimal_agent("mtls-anonymous");
    let (status, _) = call(&admin, &node, Method::POST, "/agents", None, Some(&doc)).await;
    assert_eq!(status, 401);
    let doc = minimal_agent("mtls-key");
    let (status, body) = call(
        &admin,
        &node,
        Method::POST,
        "/agents",
        Some(&key),
        Some(&doc),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    // A certificate from the right CA that no entry names is anonymous.
    let stranger = client(&pki, Some(&stranger));
    let doc = minimal_agent("mtls-stranger");
    let (status, _) = call(&stranger, &node, Method::POST, "/agents", None, Some(&doc)).await;
    assert_eq!(status, 401);
    let (status, _) = call(
        &stranger,
        &node,
        Method::GET,
        "/agents/mtls-east",
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);

    // Precedence: a bearer credential sent with a certificate says who
    // the caller is (the key, with `register` only: no reads), and a
    // bad one is refused whatever the certificate.
    let doc = minimal_agent("mtls-precedence");
    let (status, body) = call(
        &reader,
        &node,
        Method::POST,
        "/agents",
        Some(&key),
        Some(&doc),
    )
    .await;
    assert_eq!(
        status, 201,
        "the key's register scope, not the certificate's read: {body}"
    );
    let (status, _) = call(
        &east,
        &node,
        Method::GET,
        "/agents/mtls-east",
        Some(&key),
        None,
    )
    .await;
    assert_eq!(status, 403, "the key, not the certificate, is the caller");
    let (status, _) = call(
        &east,
        &node,
        Method::GET,
        "/agents/mtls-east",
        Some("amk_0000000000000000_nope"),
        None,
    )
    .await;
    assert_eq!(status, 401);

    let (status, audit) = call(
        &admin,
        &node,
        Method::GET,
        "/admin/audit?limit=100",
        Some(ADMIN_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let actor_of = |target: &str| {
        audit["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["action"] == "register" && e["target"] == target)
            .map(|e| e["actor"].as_str().unwrap().to_owned())
    };
    assert!(
        actor_of("mtls-key").is_some_and(|a| a.starts_with("key:")),
        "{audit}"
    );
    assert!(
        actor_of("mtls-precedence").is_some_and(|a| a.starts_with("key:")),
        "{audit}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_from_another_ca_or_expired_fail_the_handshake_and_plain_http_gets_no_answer()
{
    let pki = Pki::new("test-ca");
    let other = Pki::new("other-ca");
    let (good, _) = pki.client("registry-west.example.org", false);
    let (foreign, _) = other.client("registry-west.example.org", false);
    let (expired, _) = pki.client("registry-west.example.org", true);
    // Client certificate entries are the node's only credentials: it
    // may listen beyond loopback, and is not open to everyone.
    let config = config_file(
        &pki,
        "",
        "[[api.tls.clients]]\nname = \"registry-west\"\n\
         subject = \"registry-west.example.org\"\nscopes = [\"register\", \"read\"]\n",
    );
    let node = NodeBuilder::default()
        .listen("0.0.0.0:0")
        .args(&["--config", config.to_str().unwrap()])
        .start();
    let anonymous = client(&pki, None);
    let doc = minimal_agent("mtls-west");
    let (status, _) = call(
        &anonymous,
        &node,
        reqwest::Method::POST,
        "/agents",
        None,
        Some(&doc),
    )
    .await;
    assert_eq!(
        status, 401,
        "a node whose only credentials are certificates is not open"
    );

    // (c), (d): no HTTP answer, an error that is not a timeout.
    for (what, identity) in [
        ("another CA", &foreign),
        ("an expired certificate", &expired),
    ] {
        let refused = client(&pki, Some(identity))
            .get(url(&node, "/health"))
            .send()
            .await;
        match refused {
            Ok(response) => panic!("{what}: answered {}", response.status()),
            Err(e) => assert!(!e.is_timeout(), "{what}: {e:?}"),
        }
    }
    let (status, body) = call(
        &client(&pki, Some(&good)),
        &node,
        reqwest::Method::POST,
        "/agents",
        None,
        Some(&doc),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    // (f) Plain HTTP to the TLS port: whatever comes back is not HTTP.
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", node.addr().port()))
        .await
        .unwrap();
    tcp.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(DEADLINE, tcp.read_to_end(&mut answer))
        .await
        .expect("the server closes a plain HTTP connection");
    if read.is_ok() {
        assert!(
            !answer.starts_with(b"HTTP/"),
            "an HTTP answer: {}",
            String::from_utf8_lossy(&answer)
        );
    }

    // h2 and HTTP/1.1 are offered by ALPN.
    for (offered, expected) in [(&b"h2"[..], &b"h2"[..]), (b"http/1.1", b"http/1.1")] {
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(pki.ca_pem.as_bytes()) {
            roots.add(ca.unwrap()).unwrap();
        }
        let mut tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        tls.alpn_protocols = vec![offered.to_vec()];
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", node.addr().port()))
            .await
            .unwrap();
        let stream = tokio_rustls::TlsConnector::from(std::sync::Arc::new(tls))
            .connect("localhost".try_into().unwrap(), tcp)
            .await
            .unwrap();
        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(expected));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_sends_a_client_hello_is_cut_off_and_holds_its_slot_until_then() {
    let pki = Pki::new("test-ca");
    let timeout = Duration::from_secs(1);
    let config = config_file(
        &pki,
        "header_read_timeout = \"1s\"\nmax_connections_per_ip = 2",
        "",
    );
    let node = NodeBuilder::default()
        .args(&["--config", config.to_str().unwrap()])
        .start();
    // Two connections that never start the handshake take this address's
    // two slots...
    let opened = tokio::time::Instant::now();
    let mut silent = Vec::new();
    for _ in 0..2 {
        silent.push(
            tokio::net::TcpStream::connect(("127.0.0.1", node.addr().port()))
                .await
                .unwrap(),
        );
    }
    // ...so a third is closed as it is accepted.
    let refused = client(&pki, None).get(url(&node, "/health")).send().await;
    assert!(
        refused.is_err(),
        "a third connection was served: {refused:?}"
    );

    // Each is closed by the server once the timeout runs out, not before.
    for mut stream in silent {
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(DEADLINE, stream.read(&mut buf))
            .await
            .expect("the server closes a connection that never sends a ClientHello");
        assert!(
            matches!(read, Ok(0) | Err(_)),
            "bytes from the server: {read:?}"
        );
        assert!(
            opened.elapsed() >= timeout,
            "closed after {:?}, before api.header_read_timeout",
            opened.elapsed()
        );
    }
    // Then the slots are free again.
    let https = client(&pki, None);
    wait_until("a TLS client is served again", || {
        let request = https.get(url(&node, "/health")).send();
        async move { request.await.is_ok_and(|r| r.status() == 200) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_broken_tls_file_or_client_entry_stops_the_start_naming_it() {
    let pki = Pki::new("test-ca");
    let config = config_file(&pki, "", "");
    let text = std::fs::read_to_string(&config).unwrap();
    let server_pem = pki.path("server.pem").display().to_string();
    let server_key = pki.path("server.key").display().to_string();
    let missing = pki.path("no-such-cert.pem").display().to_string();
    let garbage = pki.path("garbage.key");
    std::fs::write(&garbage, "not a key\n").unwrap();
    let huge = pki.path("huge-ca.pem");
    std::fs::write(&huge, vec![b'A'; 2 * 1024 * 1024]).unwrap();
    let ca = pki.path("test-ca.pem").display().to_string();
    let cases = [
        (
            text.replace(&server_pem, &missing),
            vec!["api.tls.cert_file", missing.as_str()],
        ),
        (
            text.replace(&server_key, &garbage.display().to_string()),
            vec!["api.tls.key_file", "garbage.key", "private key"],
        ),
        (
            text.replace(&ca, &huge.display().to_string()),
            vec!["api.tls.client_ca_files", "huge-ca.pem", "larger than"],
        ),
        (
            format!("{text}[[api.tls.clients]]\nname = \"peer\"\nsubject = \"p\"\nscopes = [\"reed\"]\n"),
            vec!["api.tls.clients", "\"peer\"", "reed"],
        ),
    ];
    for (i, (config_text, expected)) in cases.into_iter().enumerate() {
        let path = pki.path(&format!("case-{i}.toml"));
        std::fs::write(&path, config_text).unwrap();
        let data = tempfile::tempdir().unwrap();
        let mut cmd = agentmesh();
        cmd.arg("node")
            .arg("--data-dir")
            .arg(data.path())
            .args([
                "--listen",
                "127.0.0.1:0",
                "--p2p-listen",
                "/ip4/127.0.0.1/tcp/0",
            ])
            .arg("--config")
            .arg(&path);
        let done = run(&mut cmd, DEADLINE, "a node with a broken [api.tls]");
        done.assert_failure("a node with a broken [api.tls]");
        for needle in expected {
            assert!(
                done.stderr.contains(needle),
                "case {i}: no {needle:?} in\n{}",
                done.stderr
            );
        }
    }
}
