//! The testbed's servers over real sockets: DNS with hickory-resolver
//! (UDP and TCP), HTTPS with reqwest trusting the test CA, and the
//! WebSocket challenge with tokio-tungstenite. Every wait has a deadline.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ed25519_dalek::SigningKey;
use futures_util::{SinkExt, StreamExt};
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RData, RecordType};
use hickory_resolver::config::{NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::TokioResolver;
use reqwest::header;
use sha2::{Digest, Sha256};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::super::*;
use super::schema;
use crate::adp::handshake::{self, HandshakeError, HandshakeFrame};
use crate::adp::txt;

const DEADLINE: Duration = Duration::from_secs(10);
const VERIFIER: &str = "test-verifier";

/// Awaits `f`, failing the test after 10 s with what it waited for.
async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, f)
        .await
        .unwrap_or_else(|_| panic!("timed out after 10 s waiting for {what}"))
}

async fn start(healthy: usize, drip: Drip) -> Testbed {
    let config = PopulationConfig::healthy(11, healthy).with_every_misbehaviour();
    let options = TestbedOptions {
        drip,
        ..TestbedOptions::default()
    };
    within(
        "the testbed to start",
        Testbed::start(Population::generate(&config), options),
    )
    .await
    .expect("the testbed starts")
}

fn domain(bed: &Testbed, b: Behaviour) -> String {
    bed.population()
        .domain_of(b)
        .expect("the behaviour is in the population")
        .to_owned()
}

fn resolver(addr: SocketAddr) -> TokioResolver {
    let mut server = NameServerConfig::udp_and_tcp(addr.ip());
    for connection in &mut server.connections {
        connection.port = addr.port();
    }
    let config = ResolverConfig::from_name_servers(vec![server]);
    let mut builder = TokioResolver::builder_with_config(config, TokioRuntimeProvider::default());
    builder.options_mut().timeout = Duration::from_secs(2);
    builder.options_mut().cache_size = 0;
    builder.build().expect("the resolver builds")
}

/// A client trusting only the CA read back from its PEM (as `--ca-file`
/// would), with the ring provider, no redirects, every domain on loopback.
fn http_client(bed: &Testbed) -> reqwest::Client {
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject;
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(bed.ca_pem().as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let mut builder = reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(DEADLINE);
    for agent in bed.population().agents() {
        builder = builder.resolve(&agent.domain, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    }
    builder.build().unwrap()
}

fn well_known(bed: &Testbed, b: Behaviour) -> String {
    bed.well_known_url(&domain(bed, b)).unwrap()
}

async fn get(client: &reqwest::Client, url: &str) -> reqwest::Response {
    within(url, client.get(url).send()).await.unwrap()
}

/// Runs the challenge against `domain`; `None` when no answer arrives
/// within `wait`.
async fn challenge(
    bed: &Testbed,
    domain: &str,
    nonce: &str,
    wait: Duration,
) -> Option<HandshakeFrame> {
    let tcp = within(
        "TCP connect",
        tokio::net::TcpStream::connect(bed.https_addr()),
    )
    .await
    .unwrap();
    let connector = tokio_rustls::TlsConnector::from(bed.client_config());
    let name = rustls::pki_types::ServerName::try_from(domain.to_owned()).unwrap();
    let tls = within("TLS handshake", connector.connect(name, tcp))
        .await
        .unwrap();
    let url = format!("wss://{domain}:{}/agent/chat", bed.https_port());
    let (mut ws, _) = within(
        "WebSocket upgrade",
        tokio_tungstenite::client_async(url, tls),
    )
    .await
    .unwrap();
    let key = SigningKey::from_bytes(&[7; 32]);
    let frame = handshake::challenge(VERIFIER, &key.verifying_key(), nonce);
    ws.send(WsMessage::text(serde_json::to_string(&frame).unwrap()))
        .await
        .unwrap();
    let answer = tokio::time::timeout(wait, async {
        while let Some(message) = ws.next().await {
            if let WsMessage::Text(text) = message.ok()? {
                return serde_json::from_str::<HandshakeFrame>(&text).ok();
            }
        }
        None
    })
    .await
    .ok()
    .flatten();
    let _ = within("WebSocket close", ws.close(None)).await;
    answer
}

#[tokio::test]
async fn dns_answers_txt_srv_and_a_over_udp_and_tcp() {
    let bed = start(20, Drip::default()).await;
    let dns = resolver(bed.dns_addr());
    let healthy = bed
        .population()
        .healthy_agents()
        .next()
        .unwrap()
        .domain
        .clone();

    let lookup = within("TXT", dns.txt_lookup(format!("_agent.{healthy}.")))
        .await
        .unwrap();
    let records: Vec<String> = lookup
        .answers()
        .iter()
        .filter_map(|r| match &r.data {
            RData::TXT(t) => Some(
                t.txt_data
                    .iter()
                    .map(|s| String::from_utf8_lossy(s))
                    .collect(),
            ),
            _ => None,
        })
        .collect();
    assert_eq!(lookup.answers()[0].ttl, 300);
    let parsed = txt::parse(&healthy, &records).unwrap();
    assert_eq!(
        parsed.fingerprint,
        bed.population().get(&healthy).unwrap().fingerprint()
    );
    assert_eq!(Some(parsed.well_known), bed.well_known_url(&healthy));

    let srv = within("SRV", dns.srv_lookup(format!("_agent._tcp.{healthy}.")))
        .await
        .unwrap();
    match &srv.answers()[0].data {
        RData::SRV(s) => {
            assert_eq!(s.port, bed.https_port());
            assert_eq!(s.target, Name::from_ascii(format!("{healthy}.")).unwrap());
        }
        other => panic!("not an SRV: {other:?}"),
    }
    let ips = |lookup: hickory_resolver::lookup::Lookup| -> Vec<IpAddr> {
        lookup
            .answers()
            .iter()
            .filter_map(|r| match &r.data {
                RData::A(a) => Some(IpAddr::V4(a.0)),
                _ => None,
            })
            .collect()
    };
    let a = within("A", dns.ipv4_lookup(format!("{healthy}.")))
        .await
        .unwrap();
    assert_eq!(ips(a), [IpAddr::from(Ipv4Addr::LOCALHOST)]);
    let private = domain(&bed, Behaviour::PrivateTarget);
    let a = within("A", dns.ipv4_lookup(format!("{private}.")))
        .await
        .unwrap();
    assert_eq!(ips(a), [IpAddr::from([10, 0, 0, 1])]);

    let two = domain(&bed, Behaviour::TxtTwoRecords);
    let lookup = within("TXT", dns.txt_lookup(format!("_agent.{two}.")))
        .await
        .unwrap();
    assert_eq!(lookup.answers().len(), 2);

    // Larger than a UDP answer: the resolver retries over TCP.
    let large = domain(&bed, Behaviour::TxtLarge);
    let lookup = within("TXT", dns.txt_lookup(format!("_agent.{large}.")))
        .await
        .unwrap();
    assert_eq!(lookup.answers().len(), 7);

    let missing = domain(&bed, Behaviour::TxtMissing);
    let err = within("TXT", dns.txt_lookup(format!("_agent.{missing}.")))
        .await
        .unwrap_err();
    assert!(err.is_nx_domain(), "{err}");
    let err = within("AAAA", dns.ipv6_lookup(format!("{healthy}.")))
        .await
        .unwrap_err();
    assert!(err.is_no_records_found() && !err.is_nx_domain(), "{err}");
    let err = within("A", dns.ipv4_lookup("nobody.org1.test."))
        .await
        .unwrap_err();
    assert!(err.is_nx_domain(), "{err}");
    assert!(bed.dns_queries() >= 9);
    within("shutdown", bed.shutdown()).await;
}

#[tokio::test]
async fn a_udp_answer_too_large_for_512_bytes_is_truncated() {
    let bed = start(1, Drip::default()).await;
    let large = domain(&bed, Behaviour::TxtLarge);
    let mut query = Message::query();
    query.add_query(Query::query(
        Name::from_ascii(format!("_agent.{large}.")).unwrap(),
        RecordType::TXT,
    ));
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket
        .send_to(&query.to_vec().unwrap(), bed.dns_addr())
        .await
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = within("a UDP answer", socket.recv(&mut buf)).await.unwrap();
    assert!(n <= 512);
    let answer = Message::from_vec(&buf[..n]).unwrap();
    assert!(answer.metadata.truncation, "TC is set");
    assert!(answer.metadata.authoritative);
}

#[tokio::test]
async fn a_healthy_agent_serves_a_valid_document_and_answers_the_challenge() {
    let bed = start(5, Drip::default()).await;
    let client = http_client(&bed);
    let agent = bed.population().healthy_agents().next().unwrap().clone();
    let url = bed.well_known_url(&agent.domain).unwrap();
    let response = get(&client, &url).await;
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers[header::CONTENT_TYPE], "application/json");
    assert_eq!(headers[header::CACHE_CONTROL], "max-age=300");
    let etag = headers[header::ETAG].to_str().unwrap().to_owned();
    let body = within("the body", response.bytes()).await.unwrap();
    let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert!(schema().is_valid(&value));
    let doc: crate::adp::AgentDocument = serde_json::from_value(value).unwrap();
    let records = bed.txt_records(&agent.domain);
    let pk = txt::parse(&agent.domain, &records).unwrap().fingerprint;
    assert_eq!(doc.identity.public_key.fingerprint, pk);
    assert_eq!(doc.identity.domain, agent.domain);

    let again = within(
        "conditional GET",
        client.get(&url).header(header::IF_NONE_MATCH, &etag).send(),
    )
    .await
    .unwrap();
    assert_eq!(again.status(), 304);
    let counts = bed.site_counts(&agent.domain).unwrap();
    assert_eq!((counts.well_known, counts.not_modified), (2, 1));

    let origin = url.trim_end_matches("/.well-known/agent.json");
    let landing = get(&client, &format!("{origin}/")).await;
    assert!(landing.headers()[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let html = within("the landing page", landing.text()).await.unwrap();
    assert!(html.contains("id=\"adp-agent\"") && html.contains(&pk));

    let digest = Sha256::digest(&body);
    let nonce = handshake::nonce(&digest, VERIFIER, 1_700_000_000_000, &[1; 16]);
    let answer = challenge(&bed, &agent.domain, &nonce, DEADLINE)
        .await
        .expect("an answer");
    handshake::check_answer(
        &answer,
        &nonce,
        &agent.id(),
        VERIFIER,
        &agent.verifying_key(),
    )
    .expect("the answer proves the key");
    assert_eq!(bed.site_counts(&agent.domain).unwrap().chat, 1);
    within("shutdown", bed.shutdown()).await;
}

#[tokio::test]
async fn misbehaviours_are_observable_over_https() {
    let bed = start(2, Drip::default()).await;
    let client = http_client(&bed);

    let url = well_known(&bed, Behaviour::RedirectLoop);
    let r = get(&client, &url).await;
    assert!(r.status().is_redirection());
    let location = r.headers()[header::LOCATION].to_str().unwrap();
    assert_eq!(
        r.url().join(location).unwrap().as_str(),
        url,
        "redirects to itself"
    );

    let r = get(&client, &well_known(&bed, Behaviour::RedirectOtherHost)).await;
    assert!(r.status().is_redirection());
    let target = url::Url::parse(r.headers()[header::LOCATION].to_str().unwrap()).unwrap();
    assert_ne!(
        target.host_str(),
        Some(domain(&bed, Behaviour::RedirectOtherHost).as_str())
    );
    assert_eq!(target.scheme(), "https");

    let r = get(&client, &well_known(&bed, Behaviour::Oversized)).await;
    assert!(within("body", r.bytes()).await.unwrap().len() > 64 * 1024);
    let r = get(&client, &well_known(&bed, Behaviour::WrongContentType)).await;
    assert_eq!(r.status(), 200);
    assert!(r.headers()[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let r = get(&client, &well_known(&bed, Behaviour::InvalidJson)).await;
    let body = within("body", r.bytes()).await.unwrap();
    assert!(serde_json::from_slice::<serde_json::Value>(&body).is_err());

    // The TXT wk of PlainHttp and LoopbackTarget agents, fetched as is.
    for b in [Behaviour::PlainHttp, Behaviour::LoopbackTarget] {
        let d = domain(&bed, b);
        let wk = txt::parse(&d, &bed.txt_records(&d)).unwrap().well_known;
        assert!(wk.starts_with(if b == Behaviour::PlainHttp {
            "http://"
        } else {
            "https://127.0.0.1:"
        }));
        let r = get(&client, &wk).await;
        assert_eq!(r.status(), 200, "{wk}");
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
    }

    // The IP-literal host serves by path only.
    let by_ip = format!(
        "https://127.0.0.1:{}/.well-known/agent.json",
        bed.https_port()
    );
    assert_eq!(get(&client, &by_ip).await.status(), 421);
    within("shutdown", bed.shutdown()).await;
}

#[tokio::test]
async fn a_slow_body_drips_and_stops_at_shutdown() {
    let drip = Drip {
        bytes: 1,
        every: Duration::from_millis(200),
    };
    let bed = start(1, drip).await;
    let client = http_client(&bed);
    let r = get(&client, &well_known(&bed, Behaviour::SlowBody)).await;
    assert_eq!(r.status(), 200, "headers arrive at once");
    let mut body = r.bytes_stream();
    let mut got = 0;
    let started = Instant::now();
    let read = tokio::time::timeout(Duration::from_secs(1), async {
        while let Some(chunk) = body.next().await {
            got += chunk.unwrap().len();
        }
    })
    .await;
    assert!(read.is_err(), "the body is not complete after 1 s");
    assert!(
        (2..=10).contains(&got),
        "{got} bytes in {:?}",
        started.elapsed()
    );
    within("shutdown", bed.shutdown()).await;
    let rest = within("the end of the body", async {
        let mut failed = false;
        while let Some(chunk) = body.next().await {
            failed |= chunk.is_err();
        }
        failed
    })
    .await;
    assert!(rest, "the body ends in an error at shutdown");
}

#[tokio::test]
async fn misbehaving_challenges_are_observable() {
    let bed = start(1, Drip::default()).await;
    let nonce = handshake::nonce(&[0; 32], VERIFIER, 1, &[2; 16]);
    let check = |b: Behaviour, answer: &HandshakeFrame| {
        let agent = bed.population().with_behaviour(b).next().unwrap();
        handshake::check_answer(
            answer,
            &nonce,
            &agent.id(),
            VERIFIER,
            &agent.verifying_key(),
        )
    };
    let d = domain(&bed, Behaviour::ChallengeBadSignature);
    let answer = challenge(&bed, &d, &nonce, DEADLINE).await.unwrap();
    assert_eq!(
        check(Behaviour::ChallengeBadSignature, &answer),
        Err(HandshakeError::BadSignature)
    );
    let d = domain(&bed, Behaviour::ChallengeWrongNonce);
    let answer = challenge(&bed, &d, &nonce, DEADLINE).await.unwrap();
    assert_eq!(
        check(Behaviour::ChallengeWrongNonce, &answer),
        Err(HandshakeError::WrongNonce)
    );
    let d = domain(&bed, Behaviour::ChallengeSilent);
    assert!(challenge(&bed, &d, &nonce, Duration::from_secs(1))
        .await
        .is_none());
    assert_eq!(bed.site_counts(&d).unwrap().chat, 1, "the WebSocket opened");

    // A plain GET of the chat endpoint asks for an upgrade.
    let client = http_client(&bed);
    let url = format!("https://{d}:{}/agent/chat", bed.https_port());
    assert_eq!(get(&client, &url).await.status(), 426);
    within("shutdown", bed.shutdown()).await;
}

#[tokio::test]
async fn tls_1_3_is_negotiated_and_1_2_accepted_with_a_leaf_per_org_zone() {
    let bed = start(60, Drip::default()).await;
    let agents = bed.population().agents();
    let (first, other_org) = (&agents[0], &agents[55]);
    assert_ne!(first.org, other_org.org);
    let tls12 = rustls::ClientConfig::builder_with_provider(certs::provider())
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .with_root_certificates(bed.ca().root_store())
        .with_no_client_auth();
    for (config, version) in [
        (bed.client_config(), rustls::ProtocolVersion::TLSv1_3),
        (Arc::new(tls12), rustls::ProtocolVersion::TLSv1_2),
    ] {
        for agent in [first, other_org] {
            let tcp = within(
                "TCP connect",
                tokio::net::TcpStream::connect(bed.https_addr()),
            )
            .await
            .unwrap();
            let name = rustls::pki_types::ServerName::try_from(agent.domain.clone()).unwrap();
            let connector = tokio_rustls::TlsConnector::from(config.clone());
            let tls = within("TLS handshake", connector.connect(name, tcp))
                .await
                .unwrap_or_else(|e| panic!("{} over {version:?}: {e}", agent.domain));
            assert_eq!(tls.get_ref().1.protocol_version(), Some(version));
        }
    }
    // A name the CA issued nothing for gets no certificate.
    let tcp = tokio::net::TcpStream::connect(bed.https_addr())
        .await
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from("stranger.example").unwrap();
    let connector = tokio_rustls::TlsConnector::from(bed.client_config());
    assert!(within("TLS handshake", connector.connect(name, tcp))
        .await
        .is_err());
}

#[tokio::test]
async fn five_thousand_agents_start_and_answer() {
    let started = Instant::now();
    let population = Population::healthy(1, 5000);
    let generated = started.elapsed();
    let bed = within(
        "5,000 agents",
        Testbed::start(population, TestbedOptions::default()),
    )
    .await
    .unwrap();
    let total = started.elapsed();
    // How fast is a benchmark's question, not a test's: printed, and
    // bounded only by `within`'s deadline (a machine under load must not
    // fail it).
    eprintln!("5,000 agents: generated in {generated:?}, serving after {total:?}");
    let dns = resolver(bed.dns_addr());
    let last = &bed.population().agents()[4999].domain;
    let lookup = within("TXT", dns.txt_lookup(format!("_agent.{last}.")))
        .await
        .unwrap();
    assert_eq!(lookup.answers().len(), 1);
    let ca = tempfile::NamedTempFile::new().unwrap();
    bed.write_ca(ca.path()).unwrap();
    assert_eq!(std::fs::read_to_string(ca.path()).unwrap(), bed.ca_pem());
    drop(bed);
}
