//! The testbed's TLS: a throw-away certificate authority made with rcgen
//! at start, leaf certificates chosen by SNI, and the rustls
//! configurations of both ends (ring provider, TLS 1.3 and 1.2; the
//! client decides which it accepts).
//!
//! One leaf per organisation zone, `*.{org}.test`, rather than one per
//! agent: a population of 5,000 agents in 100 zones costs 100 signatures
//! at start instead of 5,000, each certificate stays small (one name),
//! and the SNI lookup is one hash probe on the parent name. Agent identity
//! in ADP comes from the Ed25519 key, not from TLS, so agents of one
//! organisation sharing a certificate hides nothing a test needs (hosting
//! providers do the same). A client that sends no SNI (a URL with an IP
//! literal host) gets the certificate for `127.0.0.1` and `::1`. All
//! leaves share one ECDSA P-256 key; the CA key never leaves memory.
//! [`TestCa::single_server_config`] issues one more leaf, with a key of
//! its own, for a server started after the CA (the invokable agents).
//!
//! Used by [`super::Testbed`]; `agent-host` may use it for a single
//! domain in a local setup.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::TestbedError;

fn cert_error(e: impl std::fmt::Display) -> TestbedError {
    TestbedError::Certificate {
        reason: e.to_string(),
    }
}

/// The rustls crypto provider both ends use.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A test CA and the leaves it issued.
#[derive(Debug, Clone)]
pub struct TestCa {
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    resolver: Arc<SniResolver>,
    /// The CA's name and key, kept to issue more leaves after start
    /// ([`TestCa::single_server_config`]).
    issuer: Arc<Issuer<'static, KeyPair>>,
}

/// A leaf certificate and its key, PEM ([`TestCa::leaf_pem`]).
#[derive(Debug, Clone)]
pub struct LeafPem {
    /// The certificate.
    pub cert: String,
    /// Its private key (PKCS#8).
    pub key: String,
}

/// Picks the leaf for the SNI name: an exact name, else the wildcard of
/// its parent, else (no SNI) the IP-address leaf.
#[derive(Debug)]
struct SniResolver {
    by_name: HashMap<String, Arc<CertifiedKey>>,
    ip: Option<Arc<CertifiedKey>>,
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let Some(sni) = hello.server_name() else {
            return self.ip.clone();
        };
        let sni = sni.trim_end_matches('.').to_ascii_lowercase();
        if let Some(key) = self.by_name.get(&sni) {
            return Some(key.clone());
        }
        let parent = sni.split_once('.')?.1;
        self.by_name.get(&format!("*.{parent}")).cloned()
    }
}

/// A leaf for `sans` (the first also its common name), signed by
/// `issuer`, with `key`.
fn issue(
    issuer: &Issuer<'static, KeyPair>,
    key: &KeyPair,
    sans: Vec<String>,
) -> Result<Arc<CertifiedKey>, TestbedError> {
    let signing_key = rustls::crypto::ring::sign::any_supported_type(&PrivateKeyDer::Pkcs8(
        PrivatePkcs8KeyDer::from(key.serialize_der()),
    ))
    .map_err(cert_error)?;
    let cert = leaf_certificate(issuer, key, sans, ExtendedKeyUsagePurpose::ServerAuth)?;
    Ok(Arc::new(CertifiedKey::new(
        vec![cert.der().clone()],
        signing_key,
    )))
}

/// The certificate of a leaf for `sans` (the first also its common
/// name), signed by `issuer`, for `key`, for `usage` (a server's or a
/// client's).
fn leaf_certificate(
    issuer: &Issuer<'static, KeyPair>,
    key: &KeyPair,
    sans: Vec<String>,
    usage: ExtendedKeyUsagePurpose,
) -> Result<rcgen::Certificate, TestbedError> {
    let common_name = sans
        .first()
        .cloned()
        .ok_or_else(|| cert_error("a leaf needs at least one name"))?;
    let mut params = CertificateParams::new(sans).map_err(cert_error)?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.extended_key_usages = vec![usage];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.signed_by(key, issuer).map_err(cert_error)
}

impl TestCa {
    /// Makes a CA and one leaf for each entry of `names`: a DNS name
    /// (`a.example.test`), a wildcard (`*.org1.test`), or an IP address
    /// (all IP addresses share one leaf, served when there is no SNI).
    ///
    /// # Errors
    /// [`TestbedError::Certificate`] when rcgen or rustls refuse a name or
    /// key.
    pub fn new<S: AsRef<str>>(names: &[S]) -> Result<Self, TestbedError> {
        let ca_key = KeyPair::generate().map_err(cert_error)?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(cert_error)?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "agentmesh testbed CA");
        dn.push(DnType::OrganizationName, "agentmesh testbed");
        ca_params.distinguished_name = dn;
        let ca_cert = ca_params.self_signed(&ca_key).map_err(cert_error)?;
        let ca_pem = ca_cert.pem();
        let ca_der = ca_cert.der().clone();
        let issuer = Issuer::new(ca_params, ca_key);

        let leaf_key = KeyPair::generate().map_err(cert_error)?;
        let leaf = |sans: Vec<String>| issue(&issuer, &leaf_key, sans);

        let (ips, dns): (Vec<&str>, Vec<&str>) = names
            .iter()
            .map(|n| n.as_ref().trim_end_matches('.'))
            .partition(|n| n.parse::<IpAddr>().is_ok());
        let mut by_name = HashMap::with_capacity(dns.len());
        for name in dns {
            let name = name.to_ascii_lowercase();
            let key = leaf(vec![name.clone()])?;
            by_name.insert(name, key);
        }
        let ip = if ips.is_empty() {
            None
        } else {
            Some(leaf(ips.iter().map(|s| (*s).to_owned()).collect())?)
        };
        Ok(Self {
            ca_pem,
            ca_der,
            resolver: Arc::new(SniResolver { by_name, ip }),
            issuer: Arc::new(issuer),
        })
    }

    /// A server configuration presenting one new leaf, issued by this CA
    /// for all of `names` (DNS names or IP addresses) whatever the SNI:
    /// TLS 1.3 and 1.2, ALPN `http/1.1`. For a server started after the
    /// CA (the invokable agents, [`super::agents`]).
    ///
    /// # Errors
    /// [`TestbedError::Certificate`] when `names` is empty or rcgen
    /// refuses a name.
    pub fn single_server_config<S: AsRef<str>>(
        &self,
        names: &[S],
    ) -> Result<Arc<rustls::ServerConfig>, TestbedError> {
        let names: Vec<String> = names.iter().map(|n| n.as_ref().to_owned()).collect();
        let key = KeyPair::generate().map_err(cert_error)?;
        let leaf = issue(&self.issuer, &key, names)?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .expect("the ring provider supports TLS 1.3 and 1.2")
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(leaf)));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// One new leaf, issued by this CA for all of `names` (DNS names or
    /// IP addresses), with a key of its own, as PEM: the certificate and
    /// the PKCS#8 private key. For a server outside this process (one
    /// written with another TLS stack) that the test's clients must
    /// trust through the CA.
    ///
    /// # Errors
    /// [`TestbedError::Certificate`] when `names` is empty or rcgen
    /// refuses a name.
    pub fn leaf_pem<S: AsRef<str>>(&self, names: &[S]) -> Result<LeafPem, TestbedError> {
        let names: Vec<String> = names.iter().map(|n| n.as_ref().to_owned()).collect();
        let key = KeyPair::generate().map_err(cert_error)?;
        let cert = leaf_certificate(
            &self.issuer,
            &key,
            names,
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        Ok(LeafPem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }

    /// A client certificate for `name` (its common name and
    /// subjectAltName), issued by this CA with a key of its own, as PEM:
    /// what a node presents to an agent that asks for one.
    ///
    /// # Errors
    /// [`TestbedError::Certificate`] when rcgen refuses the name.
    pub fn client_pem(&self, name: &str) -> Result<LeafPem, TestbedError> {
        let key = KeyPair::generate().map_err(cert_error)?;
        let cert = leaf_certificate(
            &self.issuer,
            &key,
            vec![name.to_owned()],
            ExtendedKeyUsagePurpose::ClientAuth,
        )?;
        Ok(LeafPem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }

    /// As [`TestCa::single_server_config`], and the handshake fails for a
    /// client that presents no certificate this CA issued.
    ///
    /// # Errors
    /// As [`TestCa::single_server_config`].
    pub fn single_server_config_requiring_clients<S: AsRef<str>>(
        &self,
        names: &[S],
    ) -> Result<Arc<rustls::ServerConfig>, TestbedError> {
        let names: Vec<String> = names.iter().map(|n| n.as_ref().to_owned()).collect();
        let key = KeyPair::generate().map_err(cert_error)?;
        let leaf = issue(&self.issuer, &key, names)?;
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(self.root_store()),
            provider(),
        )
        .build()
        .map_err(cert_error)?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .expect("the ring provider supports TLS 1.3 and 1.2")
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(leaf)));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA certificate, DER.
    pub fn ca_der(&self) -> &CertificateDer<'static> {
        &self.ca_der
    }

    /// A root store holding only this CA.
    pub fn root_store(&self) -> rustls::RootCertStore {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(self.ca_der.clone())
            .expect("an rcgen CA certificate parses as a trust anchor");
        roots
    }

    /// The server side: TLS 1.3 and 1.2, leaves by SNI, ALPN `http/1.1`.
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .expect("the ring provider supports TLS 1.3 and 1.2")
            .with_no_client_auth()
            .with_cert_resolver(self.resolver.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }

    /// A client that trusts only this CA (TLS 1.3 and 1.2, no ALPN).
    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        Arc::new(
            rustls::ClientConfig::builder_with_provider(provider())
                .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
                .expect("the ring provider supports TLS 1.3 and 1.2")
                .with_root_certificates(self.root_store())
                .with_no_client_auth(),
        )
    }
}
