//! `agentmesh agent-host`: serve one agent's `agent.json`, landing page and
//! handshake challenge, the same code the testbed runs for its population.
//! An operator points it at the document `publish` wrote, the agent key,
//! and a certificate for the domain (or `--plain` behind a TLS proxy).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::adp::AgentDocument;
use crate::identity;
use crate::testbed::web::{serve, AgentSite, Sites};

/// Flags of `agent-host`.
#[derive(Debug, Clone, Args)]
pub struct AgentHostArgs {
    /// The agent.json to serve (as written by `publish`).
    #[arg(long, value_name = "FILE")]
    pub document: PathBuf,
    /// The agent's key file; it must be the key the document names.
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// Certificate chain for the agent's domain (PEM).
    #[arg(
        long,
        value_name = "PEM",
        required_unless_present = "plain",
        requires = "cert_key"
    )]
    pub cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "PEM")]
    pub cert_key: Option<PathBuf>,
    /// Serve plain HTTP (behind a proxy that terminates TLS and WSS).
    #[arg(long, conflicts_with = "cert")]
    pub plain: bool,
    /// Listen address.
    #[arg(long, default_value = "0.0.0.0:443", value_name = "IP:PORT")]
    pub listen: SocketAddr,
}

fn tls_config(cert: &PathBuf, key: &PathBuf) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain: Vec<_> = CertificateDer::pem_slice_iter(
        &std::fs::read(cert).with_context(|| format!("reading {}", cert.display()))?,
    )
    .collect::<Result<_, _>>()
    .with_context(|| format!("{} holds no PEM certificate", cert.display()))?;
    anyhow::ensure!(
        !chain.is_empty(),
        "{} holds no PEM certificate",
        cert.display()
    );
    let key = PrivateKeyDer::from_pem_slice(
        &std::fs::read(key).with_context(|| format!("reading {}", key.display()))?,
    )
    .with_context(|| format!("{} holds no PEM private key", key.display()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
    .context("TLS versions")?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .context("the certificate and key do not form a usable pair")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Runs `agent-host` until Ctrl-C or SIGTERM.
///
/// # Errors
/// For unreadable files, a document that is not bound to the key, or a
/// port that cannot be bound.
pub(super) async fn run(args: AgentHostArgs) -> anyhow::Result<()> {
    let signal = super::shutdown_signal();
    let text = std::fs::read(&args.document)
        .with_context(|| format!("reading {}", args.document.display()))?;
    let document: AgentDocument = serde_json::from_slice(&text)
        .with_context(|| format!("{} is not an ADP agent.json", args.document.display()))?;
    let key = identity::read_key_file(&args.key)?;
    let fingerprint = identity::fingerprint(&key.verifying_key());
    anyhow::ensure!(
        document
            .identity
            .public_key
            .fingerprint
            .eq_ignore_ascii_case(&fingerprint),
        "{} names the key {}, but {} is {fingerprint}",
        args.document.display(),
        document.identity.public_key.fingerprint,
        args.key.display()
    );
    let tls = match (&args.cert, &args.cert_key) {
        (Some(cert), Some(cert_key)) => Some(tls_config(cert, cert_key)?),
        _ => None,
    };
    let domain = document.identity.domain.clone();
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    let sites = Arc::new(Sites::single(
        AgentSite::new(&domain, text, key),
        shutdown.clone(),
    ));
    let scheme = if tls.is_some() { "https" } else { "http" };
    println!("serving agent:{domain} ({fingerprint}) on {scheme}://{addr}");
    let server = tokio::spawn(serve(listener, tls, sites));
    signal.await;
    shutdown.cancel();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), server).await;
    Ok(())
}
