//! Who may do what through the API (docs/protocol.md#api-access): a node
//! beyond loopback without credentials refuses to start; each scope
//! allows exactly its routes; bad, revoked and expired credentials are
//! refused with `WWW-Authenticate`, counted and never logged; bearer JWTs
//! from an issuer whose JWKS is served over real TLS, signed by this
//! crate's `jsonwebtoken` and, apart, by PyJWT (`access/pyjwt_mint.py`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentmesh::access::Scope;
use agentmesh::api::ROUTE_SCOPES;
use ed25519_dalek::pkcs8::EncodePrivateKey;
use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{agentmesh, minimal_agent, run, wait_until, NodeBuilder, TestNode};

const ADMIN_TOKEN: &str = "the-admin-token-of-this-test";

/// Makes a key in `dir` with `agentmesh keys create`; answers its token.
fn make_key(dir: &std::path::Path, name: &str, scopes: &str, expires: Option<&str>) -> String {
    let mut cmd = agentmesh();
    cmd.args(["keys", "create", "--data-dir"])
        .arg(dir)
        .args(["--name", name, "--scope", scopes]);
    if let Some(e) = expires {
        cmd.args(["--expires", e]);
    }
    let done = run(&mut cmd, Duration::from_secs(30), "agentmesh keys create");
    done.assert_success("agentmesh keys create");
    let token = done.stdout.trim().to_owned();
    assert!(token.starts_with("amk_"), "{}", done.stdout);
    token
}

fn key_id(token: &str) -> String {
    token["amk_".len()..].split('_').next().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_beyond_loopback_without_credentials_refuses_to_start_and_says_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = agentmesh();
    cmd.arg("node").arg("--data-dir").arg(dir.path()).args([
        "--listen",
        "0.0.0.0:0",
        "--p2p-listen",
        "/ip4/127.0.0.1/tcp/0",
    ]);
    let done = run(&mut cmd, Duration::from_secs(60), "a node on 0.0.0.0");
    done.assert_failure("a node on 0.0.0.0 without credentials");
    for hint in [
        "beyond loopback",
        "api.admin_token_file",
        "agentmesh keys create",
        "[api.jwt]",
    ] {
        assert!(
            done.stderr.contains(hint),
            "no {hint:?} in\n{}",
            done.stderr
        );
    }

    // With an API key in its data directory it starts, and writes need
    // the key.
    let token = make_key(dir.path(), "operator", "admin", None);
    let node = NodeBuilder::default()
        .listen("0.0.0.0:0")
        .data_dir(dir)
        .start();
    let api = node.api();
    api.post("/agents", &minimal_agent("beyond"))
        .await
        .expect_error(401, "Unauthorized");
    api.with_token(&token)
        .post("/agents", &minimal_agent("beyond"))
        .await
        .expect(201);
}

/// Which scope each route needs, as docs/protocol.md#api-access says
/// (written out here, not read from the node's table, so that a change
/// to the table that the documentation does not make fails).
const EXPECTED: &[(&str, &str, Option<Scope>)] = &[
    ("GET", "/", None),
    ("GET", "/ui/{asset}", None),
    ("GET", "/health", None),
    ("GET", "/openapi.json", None),
    ("GET", "/metrics", Some(Scope::Read)),
    ("GET", "/peers", Some(Scope::Read)),
    ("GET", "/log/checkpoint", Some(Scope::Read)),
    ("GET", "/log/key", Some(Scope::Read)),
    ("GET", "/log/equivocations", Some(Scope::Read)),
    ("GET", "/log/tile/{path}", Some(Scope::Read)),
    ("GET", "/log/proof/inclusion", Some(Scope::Read)),
    ("GET", "/log/proof/consistency", Some(Scope::Read)),
    ("GET", "/agents", Some(Scope::Read)),
    ("POST", "/agents", Some(Scope::Register)),
    ("POST", "/agents/search", Some(Scope::Read)),
    ("GET", "/agents/{id}", Some(Scope::Read)),
    ("PUT", "/agents/{id}", Some(Scope::Register)),
    ("DELETE", "/agents/{id}", Some(Scope::Register)),
    ("GET", "/agents/{id}/summary", Some(Scope::Read)),
    ("GET", "/agents/{id}/proof", Some(Scope::Read)),
    ("GET", "/agents/{id}/suspension", Some(Scope::Read)),
    ("GET", "/agents/{id}/visibility", Some(Scope::Read)),
    ("PUT", "/agents/{id}/visibility", Some(Scope::Register)),
    ("POST", "/agents/{id}/invoke", Some(Scope::Invoke)),
    ("POST", "/agents/{id}/operations/{op}", Some(Scope::Invoke)),
    ("POST", "/resolve", Some(Scope::Read)),
    ("POST", "/crawl", Some(Scope::Crawl)),
    ("GET", "/crawl/{domain}", Some(Scope::Read)),
    ("POST", "/records", Some(Scope::Records)),
    ("POST", "/admin/import", Some(Scope::Import)),
    ("PUT", "/admin/agents/{id}/suspension", Some(Scope::Admin)),
    (
        "DELETE",
        "/admin/agents/{id}/suspension",
        Some(Scope::Admin),
    ),
    ("GET", "/admin/suspensions", Some(Scope::Admin)),
    ("POST", "/admin/agents/{id}/transfer", Some(Scope::Admin)),
    ("GET", "/admin/audit", Some(Scope::Admin)),
    ("GET", "/admin/audit/verify", Some(Scope::Admin)),
    ("GET", "/admin/audit/{seq}", Some(Scope::Admin)),
    ("GET", "/admin/export", Some(Scope::Admin)),
    ("GET", "/.well-known/ard.json", None),
    ("GET", "/.well-known/ai-catalog.json", None),
    ("POST", "/ard/search", Some(Scope::Read)),
    ("POST", "/ard/explore", Some(Scope::Read)),
    ("GET", "/ard/agents", Some(Scope::Read)),
    ("GET", "/ard/agents/{identifier}", Some(Scope::Read)),
    ("GET", "/v0.1/servers", Some(Scope::Read)),
    (
        "GET",
        "/v0.1/servers/{serverName}/versions",
        Some(Scope::Read),
    ),
    (
        "GET",
        "/v0.1/servers/{serverName}/versions/{version}",
        Some(Scope::Read),
    ),
];

#[test]
fn the_scope_table_lists_every_route_once() {
    let table: std::collections::BTreeSet<(&str, &str)> =
        ROUTE_SCOPES.iter().map(|(m, r, _)| (*m, *r)).collect();
    let expected: std::collections::BTreeSet<(&str, &str)> =
        EXPECTED.iter().map(|(m, r, _)| (*m, *r)).collect();
    assert_eq!(table.len(), ROUTE_SCOPES.len(), "a route listed twice");
    assert_eq!(table, expected, "the node's routes and this test's differ");
}

/// A concrete path for a route template.
fn concrete(route: &str) -> String {
    route
        .replace("{id}", "scoped-agent")
        .replace("{domain}", "example.com")
        .replace("{asset}", "app.js")
        .replace("{seq}", "1")
        .replace("{op}", "echo")
        .replace("{path}", "0/000")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_scope_allows_exactly_its_routes() {
    let dir = tempfile::tempdir().unwrap();
    let mut clients: Vec<(String, Option<Scope>, Option<String>)> =
        vec![("anonymous".into(), None, None)];
    for scope in Scope::ALL {
        let token = make_key(dir.path(), scope.as_str(), scope.as_str(), None);
        clients.push((format!("key with {scope}"), Some(scope), Some(token)));
    }
    let node = NodeBuilder::default()
        .env("AGENTMESH_API__ADMIN_TOKEN", ADMIN_TOKEN)
        .data_dir(dir)
        .start();
    let http = reqwest::Client::new();
    let base = node.base_url();
    for (method, route, needed) in EXPECTED {
        let method: Method = method.parse().unwrap();
        for (who, scope, token) in &clients {
            let mut request = http
                .request(method.clone(), format!("{base}{}", concrete(route)))
                .timeout(Duration::from_secs(30));
            if let Some(t) = token {
                request = request.bearer_auth(t);
            }
            if method == Method::POST || method == Method::PUT {
                request = request.json(&json!({}));
            }
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let challenge = response
                .headers()
                .get("www-authenticate")
                .map(|v| v.to_str().unwrap().to_owned());
            let body = response.text().await.unwrap();
            let allowed = match (needed, scope) {
                (None, _) => true,
                // Reads are public by default.
                (Some(Scope::Read), None) => true,
                (Some(_), None) => false,
                (Some(needed), Some(has)) => *has == Scope::Admin || has == needed,
            };
            let what = format!("{method} {route} as {who}: {status} {body}");
            if allowed {
                assert!(status != 401 && status != 403, "refused: {what}");
            } else if token.is_none() {
                assert_eq!(status, 401, "{what}");
                assert_eq!(
                    challenge.as_deref(),
                    Some("Bearer realm=\"agentmesh\""),
                    "{what}"
                );
                assert!(body.contains("Unauthorized"), "{what}");
            } else {
                assert_eq!(status, 403, "{what}");
                assert!(body.contains("Forbidden"), "{what}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_reads_need_credentials_but_health_and_the_document_stay_open() {
    let dir = tempfile::tempdir().unwrap();
    let reader = make_key(dir.path(), "reader", "read", None);
    let node = NodeBuilder::default()
        .env("AGENTMESH_API__PUBLIC_READS", "false")
        .data_dir(dir)
        .start();
    let open = node.api();
    open.get("/agents").await.expect_error(401, "Unauthorized");
    open.search(json!({"text": "anything"}))
        .await
        .expect_error(401, "Unauthorized");
    open.get("/health").await.expect(200);
    open.get("/openapi.json").await.expect(200);
    open.with_token(&reader).get("/agents").await.expect(200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_revoked_and_expired_credentials_are_refused_counted_and_never_logged() {
    let dir = tempfile::tempdir().unwrap();
    let writer = make_key(dir.path(), "writer", "register", None);
    let brief = make_key(dir.path(), "brief", "register", Some("2s"));
    let auditor = make_key(dir.path(), "auditor", "admin", None);
    let node = NodeBuilder::default().data_dir(dir).start();
    let api = node.api();
    api.with_token(&writer)
        .post("/agents", &minimal_agent("w1"))
        .await
        .expect(201);

    let wrong_secret = format!("amk_{}_{}", key_id(&writer), "B".repeat(43));
    for (what, header) in [
        ("a wrong secret", format!("Bearer {wrong_secret}")),
        (
            "an unknown token",
            "Bearer not-a-credential-of-this-node".to_owned(),
        ),
        ("another scheme", format!("Basic {writer}")),
    ] {
        let r = api
            .request(Method::GET, "/agents")
            .header(reqwest::header::AUTHORIZATION, header);
        let reply = api.send(what.to_owned(), r).await;
        reply.expect_error(401, "Unauthorized");
        assert_eq!(
            reply.header("www-authenticate"),
            Some("Bearer realm=\"agentmesh\", error=\"invalid_token\""),
            "{what}"
        );
    }

    // Revoked while the node runs: refused within the recheck time.
    let mut cmd = agentmesh();
    cmd.args(["keys", "revoke", "--data-dir"])
        .arg(node.data_dir())
        .arg(key_id(&writer));
    run(&mut cmd, Duration::from_secs(30), "agentmesh keys revoke").assert_success("keys revoke");
    let revoked = api.with_token(&writer);
    wait_until("the revoked key is refused", || async {
        revoked.get("/agents").await.status == 401
    })
    .await;
    let reply = revoked.post("/agents", &minimal_agent("w2")).await;
    let message = reply.expect_error(401, "Unauthorized")["message"].to_string();
    assert!(message.contains("revoked"), "{message}");

    // Expired: refused once its time has passed.
    let expiring = api.with_token(&brief);
    wait_until("the expired key is refused", || async {
        expiring.get("/agents").await.status == 401
    })
    .await;
    let message = expiring.get("/agents").await.body["error"]["message"].to_string();
    assert!(message.contains("expired"), "{message}");

    let metrics = api.get("/metrics").await;
    for reason in [
        "unknown_key",
        "bad_token",
        "malformed",
        "revoked_key",
        "expired_key",
    ] {
        let line = format!("agentmesh_auth_failures_total{{reason=\"{reason}\"}}");
        assert!(
            metrics.text.contains(&line),
            "no {line} in\n{}",
            metrics.text
        );
    }
    // The audit log holds the refusals, aggregated, with the address.
    let audit = api
        .with_token(&auditor)
        .get("/admin/audit?last=100")
        .await
        .expect(200)
        .clone();
    let refused: Vec<&Value> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "auth_failed")
        .collect();
    assert!(!refused.is_empty(), "{audit}");
    assert!(refused.iter().all(|e| e["addr"] == "127.0.0.1"), "{audit}");
    let log = node.stderr();
    assert!(log.contains("credentials refused"), "{log}");
    for secret in [&writer, &brief, &wrong_secret] {
        // `amk_{hex id}_{secret}`: the secret may hold `_` itself.
        let tail = secret.splitn(3, '_').nth(2).unwrap();
        assert!(tail.len() >= 8, "{secret}");
        assert!(!log.contains(tail), "a secret reached the log");
    }
}

// ---------------------------------------------------------------- JWT

const ISSUER: &str = "https://issuer.test/";
const AUDIENCE: &str = "agentmesh-test";

/// An OAuth issuer's JWKS endpoint: a real TLS server (the testbed's test
/// CA) answering every request with the current key set.
struct JwksServer {
    url: String,
    ca_file: tempfile::NamedTempFile,
    jwks: Arc<Mutex<String>>,
    _task: tokio::task::JoinHandle<()>,
}

impl JwksServer {
    async fn start(keys: Value) -> JwksServer {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let ca = agentmesh::testbed::certs::TestCa::new(&["127.0.0.1"]).unwrap();
        let mut ca_file = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut ca_file, ca.ca_pem().as_bytes()).unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(ca.server_config());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}/jwks.json", listener.local_addr().unwrap());
        let jwks = Arc::new(Mutex::new(keys.to_string()));
        let served = jwks.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, served) = (acceptor.clone(), served.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let body = served.lock().unwrap().clone();
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = tls.write_all(response.as_bytes()).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        JwksServer {
            url,
            ca_file,
            jwks,
            _task: task,
        }
    }
}

fn jwk(kid: &str, key: &ed25519_dalek::SigningKey) -> Value {
    use base64::Engine;
    let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes());
    json!({"kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "alg": "EdDSA", "use": "sig"})
}

fn jwt(kid: &str, key: &ed25519_dalek::SigningKey, claims: &Value) -> String {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.kid = Some(kid.into());
    let der = key.to_pkcs8_der().unwrap();
    jsonwebtoken::encode(
        &header,
        claims,
        &jsonwebtoken::EncodingKey::from_ed_der(der.as_bytes()),
    )
    .unwrap()
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwts_from_the_configured_issuer_are_checked_against_its_jwks_over_tls() {
    let issuer_key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let stranger = ed25519_dalek::SigningKey::from_bytes(&[8; 32]);
    let server = JwksServer::start(json!({"keys": [jwk("k1", &issuer_key)]})).await;
    let ca = server.ca_file.path().to_str().unwrap().to_owned();
    let node = TestNode::builder()
        .env("AGENTMESH_API__JWT__ISSUER", ISSUER)
        .env("AGENTMESH_API__JWT__AUDIENCE", AUDIENCE)
        .env("AGENTMESH_API__JWT__JWKS_URL", &server.url)
        .env("AGENTMESH_API__JWT__CA_FILES", &format!("[\"{ca}\"]"))
        .start();
    let api = node.api();
    let claims = |scope: &str| {
        json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice@example.org",
               "exp": unix_now() + 600, "scope": scope})
    };

    let writer = jwt("k1", &issuer_key, &claims("openid register"));
    api.with_token(&writer)
        .post("/agents", &minimal_agent("by-jwt"))
        .await
        .expect(201);
    // Valid, but without the scope the route needs.
    let reader = jwt("k1", &issuer_key, &claims("read"));
    api.with_token(&reader)
        .post("/agents", &minimal_agent("nope"))
        .await
        .expect_error(403, "Forbidden");
    // Anonymous writes are closed now that an issuer is configured.
    api.post("/agents", &minimal_agent("nope"))
        .await
        .expect_error(401, "Unauthorized");

    // The issuer rotates its key: a token naming the new key id makes
    // the node fetch the set again at once.
    let next = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    *server.jwks.lock().unwrap() =
        json!({"keys": [jwk("k1", &issuer_key), jwk("k2", &next)]}).to_string();
    api.with_token(&jwt("k2", &next, &claims("register")))
        .post("/agents", &minimal_agent("rotated"))
        .await
        .expect(201);

    let mut refused = Vec::new();
    let mut c = claims("register");
    c["iss"] = json!("https://elsewhere.test/");
    refused.push(("another issuer", jwt("k1", &issuer_key, &c)));
    let mut c = claims("register");
    c["aud"] = json!("another-service");
    refused.push(("another audience", jwt("k1", &issuer_key, &c)));
    let mut c = claims("register");
    c["exp"] = json!(unix_now() - 3600);
    refused.push(("expired", jwt("k1", &issuer_key, &c)));
    refused.push((
        "signed by a stranger",
        jwt("k1", &stranger, &claims("register")),
    ));
    refused.push((
        "an unknown key id",
        jwt("k9", &stranger, &claims("register")),
    ));
    for (what, token) in refused {
        let reply = api
            .with_token(&token)
            .post("/agents", &minimal_agent("nope"))
            .await;
        assert_eq!(reply.status, 401, "{what}: {}", reply.text);
        assert!(
            reply
                .header("www-authenticate")
                .is_some_and(|h| h.contains("invalid_token")),
            "{what}"
        );
    }
    assert_eq!(api.get("/agents/nope").await.status, 404);
}

/// The Python interpreter that has PyJWT: `$PYJWT_PYTHON`, else the
/// virtualenv `.ci/run` makes.
fn pyjwt_python() -> Option<std::path::PathBuf> {
    let python = std::env::var_os("PYJWT_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/opt/pyjwt/bin/python".into());
    if !python.exists() {
        return None;
    }
    let mut probe = std::process::Command::new(&python);
    probe.args(["-c", "import jwt, cryptography"]);
    let found = run(
        &mut probe,
        Duration::from_secs(30),
        "python -c 'import jwt'",
    );
    (found.status.success()).then_some(python)
}

/// Tokens and keys written by another implementation: PyJWT makes an RSA
/// and an EC key, publishes them as a JWKS, and signs good and bad
/// tokens, which the node checks as it checks its own issuer's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PyJWT (python3 -m venv /opt/pyjwt && /opt/pyjwt/bin/pip install 'PyJWT[crypto]', or PYJWT_PYTHON)"]
async fn jwts_minted_by_pyjwt_are_accepted_or_refused_as_the_node_s_own() {
    let python = crate::common::needs(
        pyjwt_python(),
        "PyJWT",
        "python3 -m venv /opt/pyjwt && /opt/pyjwt/bin/pip install 'PyJWT[crypto]'",
    );
    let script = crate::common::repo_root().join("tests/access/pyjwt_mint.py");
    let mut mint = std::process::Command::new(&python);
    mint.arg(&script)
        .args([ISSUER, AUDIENCE])
        .arg(unix_now().to_string());
    let minted = run(&mut mint, Duration::from_secs(60), "pyjwt_mint.py");
    minted.assert_success("pyjwt_mint.py");
    let minted: Value = serde_json::from_str(&minted.stdout).unwrap();
    let server = JwksServer::start(minted["jwks"].clone()).await;
    let ca = server.ca_file.path().to_str().unwrap().to_owned();
    let node = TestNode::builder()
        .env("AGENTMESH_API__JWT__ISSUER", ISSUER)
        .env("AGENTMESH_API__JWT__AUDIENCE", AUDIENCE)
        .env("AGENTMESH_API__JWT__JWKS_URL", &server.url)
        .env("AGENTMESH_API__JWT__CA_FILES", &format!("[\"{ca}\"]"))
        .start();
    let api = node.api();
    let token = |name: &str| minted["tokens"][name].as_str().unwrap().to_owned();
    for (i, good) in ["rs256", "es256", "ps256"].into_iter().enumerate() {
        api.with_token(&token(good))
            .post("/agents", &minimal_agent(&format!("py-agent-{i}")))
            .await
            .expect(201);
    }
    for bad in [
        "wrong_audience",
        "wrong_issuer",
        "expired",
        "not_yet_valid",
        "no_subject",
        "bad_signature",
        "hmac",
        "none",
    ] {
        let r = api
            .with_token(&token(bad))
            .post("/agents", &minimal_agent("py-refused"))
            .await;
        r.expect_error(401, "Unauthorized");
        let challenge = r.header("www-authenticate").unwrap_or_default();
        assert!(challenge.contains("invalid_token"), "{bad}: {challenge}");
    }
    api.get("/agents/py-refused")
        .await
        .expect_error(404, "NotFound");
    // Who registered is the token's subject.
    let admin = api.with_token(&token("rs256"));
    let view = admin.get("/agents/py-agent-0/visibility").await;
    assert_eq!(view.expect(200)["owner"], "jwt:py-client");
}
