//! The crawler's HTTP caching and politeness against a server we did not
//! write: nginx (Debian's `nginx-light`, which `.ci/run` installs) serving
//! an `agent.json` over TLS 1.3 from a test CA. nginx makes its own ETag
//! (from the file's modification time and length) and answers
//! `If-None-Match` with 304 by RFC 9110 13.1.2; a location that answers
//! 429 with `Retry-After` (RFC 9110 10.2.3) holds the host, and the log
//! nginx keeps shows the held host is not asked again.
//!
//! Without nginx the test says so and passes, except under CI, where it
//! fails.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentmesh::crawl::fetch::{FetchOptions, Fetcher};
use agentmesh::crawl::polite::{self, HostLimiter, Politeness};
use agentmesh::crawl::{AllowedPorts, CrawlError, CrawlerOptions};
use agentmesh::net::AddressPolicy;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use url::Url;

const HOST: &str = "agent.nginx.test";
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Kills nginx when the test ends, however it ends.
struct Nginx(Child);

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn nginx_binary() -> Option<&'static str> {
    ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

/// A CA and a leaf for [`HOST`], written as PEM into `dir`; answers the
/// CA file.
fn certificates(dir: &Path) -> std::path::PathBuf {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "nginx test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec![HOST.to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    std::fs::write(dir.join("leaf.pem"), leaf.pem()).unwrap();
    std::fs::write(dir.join("leaf.key"), leaf_key.serialize_pem()).unwrap();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca_cert.pem()).unwrap();
    ca_file
}

fn start_nginx(binary: &str, dir: &Path, port: u16) -> Nginx {
    let d = dir.display();
    let conf = format!(
        "daemon off;\nmaster_process off;\nuser root;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log stderr warn;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n\
           access_log {d}/access.log;\n\
           client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp; fastcgi_temp_path {d}/tmp;\n\
           uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;\n\
           server {{\n\
             listen 127.0.0.1:{port} ssl;\n\
             server_name {HOST};\n\
             ssl_certificate {d}/leaf.pem; ssl_certificate_key {d}/leaf.key;\n\
             ssl_protocols TLSv1.3;\n\
             root {d}/www;\n\
             location = /.well-known/agent.json {{\n\
               default_type application/json;\n\
               add_header Cache-Control \"max-age=300\";\n\
             }}\n\
             location = /busy {{\n\
               add_header Retry-After 120 always;\n\
               return 429;\n\
             }}\n\
           }}\n\
         }}\n"
    );
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let child = Command::new(binary)
        .args(["-e", "stderr", "-p"])
        .arg(dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .stdin(Stdio::null())
        .spawn()
        .expect("nginx starts");
    let nginx = Nginx(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(SocketAddr::new(LOOPBACK, port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "nginx did not listen within 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    nginx
}

/// Requests nginx logged so far.
fn logged(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("access.log"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[tokio::test]
#[ignore = "needs nginx (apt-get install nginx-light)"]
async fn nginx_etags_answer_304_and_its_retry_after_holds_the_host() {
    let binary = crate::common::needs(nginx_binary(), "nginx", "apt-get install nginx-light");
    let dir = tempfile::tempdir().unwrap();
    let ca = certificates(dir.path());
    let www = dir.path().join("www/.well-known");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("agent.json"), br#"{"protocol":"ADP/1.0"}"#).unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _nginx = start_nginx(binary, dir.path(), port);

    let options = CrawlerOptions {
        ca_files: vec![ca],
        ..CrawlerOptions::default()
    };
    let fetcher = Fetcher::new(FetchOptions {
        policy: AddressPolicy {
            allow_private: true,
        },
        tls: options.tls_config().unwrap(),
        connect_timeout: Duration::from_secs(3),
        timeout: Duration::from_secs(5),
        limiter: HostLimiter::new(Politeness {
            per_host_concurrency: 1,
            per_host_interval: Duration::from_millis(1),
            per_host_burst: 1,
            per_address_concurrency: 64,
            per_address_interval: Duration::ZERO,
            per_address_burst: 1,
        }),
        user_agent: polite::user_agent(None),
        allowed_ports: AllowedPorts::new([port]),
    });
    let url = Url::parse(&format!("https://{HOST}:{port}/.well-known/agent.json")).unwrap();

    // A full answer, with nginx's ETag and the max-age it was told.
    let first = fetcher.fetch(&url, &[LOOPBACK], None).await.unwrap();
    let first = first.expect("a 200");
    assert_eq!(first.text, r#"{"protocol":"ADP/1.0"}"#);
    let etag = first.etag.clone().expect("nginx sends an ETag");
    assert_eq!(first.max_age, Some(300));
    // Asked again with it: nginx answers 304.
    assert!(
        fetcher
            .fetch(&url, &[LOOPBACK], Some(&etag))
            .await
            .unwrap()
            .is_none(),
        "nginx answered the conditional request with the whole document"
    );
    // The document changes (another length: another ETag): the old tag
    // gets the new document.
    std::fs::write(www.join("agent.json"), br#"{"protocol":"ADP/1.0","x":1}"#).unwrap();
    let changed = fetcher.fetch(&url, &[LOOPBACK], Some(&etag)).await.unwrap();
    let changed = changed.expect("a changed document is answered in full");
    assert_eq!(changed.text, r#"{"protocol":"ADP/1.0","x":1}"#);
    assert_ne!(changed.etag.as_deref(), Some(etag.as_str()));

    // 429 with Retry-After: 120 holds the host...
    let busy = Url::parse(&format!("https://{HOST}:{port}/busy")).unwrap();
    match fetcher.fetch(&busy, &[LOOPBACK], None).await {
        Err(CrawlError::Throttled {
            status: 429,
            retry_after_secs: Some(120),
            ..
        }) => {}
        other => panic!("expected http_throttled with 120 s, got {other:?}"),
    }
    // ...and nothing more is asked of it while the hold lasts. nginx
    // writes a request's log line after its answer is sent: wait for it.
    crate::common::wait_until("nginx to log the four requests so far", || async {
        logged(dir.path()) >= 4
    })
    .await;
    let asked = logged(dir.path());
    assert_eq!(asked, 4, "nginx logged the four requests so far");
    match fetcher.fetch(&url, &[LOOPBACK], None).await {
        Err(e @ CrawlError::HostBackoff { .. }) => {
            assert_eq!(e.retry_after().map(|d| d.as_secs() > 100), Some(true));
        }
        other => panic!("expected host_backoff, got {other:?}"),
    }
    assert_eq!(logged(dir.path()), asked, "the held host was not asked");
}
