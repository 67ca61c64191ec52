//! HTTPS for the API (`[api.tls]`): the rustls server configuration,
//! read and checked from its files at start, and [`PeerCertificate`],
//! the request extension carrying what a connection's verified client
//! certificate shows. The server loop (`api/serve.rs`) runs the
//! handshake with it; the authentication layer (`api/auth.rs`) looks the
//! certificate up among the configured clients.
//!
//! The server offers h2 and HTTP/1.1 by ALPN. With
//! `api.tls.client_ca_files` it asks for a client certificate: a client
//! may send none, but one it sends must chain to one of those CAs and be
//! valid in time, or the handshake fails.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

use crate::access::certs::Presented;
use crate::config::TlsConfig;

/// Largest PEM file read (a certificate chain, a key, a CA bundle).
pub const MAX_PEM_BYTES: u64 = 1024 * 1024;

/// Most certificates read from one PEM file.
const MAX_PEM_CERTS: usize = 1024;

/// What a connection's client certificate shows, once the handshake
/// verified it: in the extensions of every request on that connection.
#[derive(Debug, Clone)]
pub struct PeerCertificate(pub Arc<Presented>);

/// `[api.tls]` could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file is missing, unreadable, too large, or holds no usable PEM.
    #[error("{key} {}: {reason}", path.display())]
    File {
        /// The config key naming the file (`api.tls.cert_file`).
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The files are each readable but rustls refuses them together (a
    /// key that is not the certificate's, a CA it cannot use).
    #[error("api.tls: {reason}")]
    Refused {
        /// rustls's reason, with the files it concerns.
        reason: String,
    },
}

/// The rustls server configuration `[api.tls]` describes.
///
/// # Errors
/// [`TlsError::File`] naming a file that is missing, unreadable, larger
/// than [`MAX_PEM_BYTES`] or without the PEM it should hold;
/// [`TlsError::Refused`] when rustls refuses the key or the CAs.
pub fn server_config(config: &TlsConfig) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = read_certificates("api.tls.cert_file", &config.cert_file)?;
    let key_bytes = read_bounded("api.tls.key_file", &config.key_file)?;
    let key = PrivateKeyDer::from_pem_slice(&key_bytes).map_err(|e| TlsError::File {
        key: "api.tls.key_file",
        path: config.key_file.clone(),
        reason: format!("no usable PEM private key in it ({e})"),
    })?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError::Refused {
            reason: e.to_string(),
        })?;
    let builder = if config.client_ca_files.is_empty() {
        builder.with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for path in &config.client_ca_files {
            for cert in read_certificates("api.tls.client_ca_files", path)? {
                roots.add(cert).map_err(|e| TlsError::File {
                    key: "api.tls.client_ca_files",
                    path: path.clone(),
                    reason: format!("not a usable CA certificate ({e})"),
                })?;
            }
        }
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .allow_unauthenticated()
                .build()
                .map_err(|e| TlsError::Refused {
                    reason: format!("api.tls.client_ca_files: {e}"),
                })?;
        builder.with_client_cert_verifier(verifier)
    };
    let mut server = builder
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Refused {
            reason: format!(
                "{} and {} do not make a usable certificate and key ({e})",
                config.cert_file.display(),
                config.key_file.display()
            ),
        })?;
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(server))
}

/// The certificates of the PEM file `path`: at least one.
fn read_certificates(
    key: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read_bounded(key, path)?;
    let refuse = |reason: String| TlsError::File {
        key,
        path: path.to_owned(),
        reason,
    };
    let mut certs = Vec::new();
    for cert in CertificateDer::pem_slice_iter(&bytes) {
        if certs.len() == MAX_PEM_CERTS {
            return Err(refuse(format!("more than {MAX_PEM_CERTS} certificates")));
        }
        certs.push(cert.map_err(|e| refuse(format!("not valid PEM ({e})")))?);
    }
    if certs.is_empty() {
        return Err(refuse("no PEM certificate in it".into()));
    }
    Ok(certs)
}

/// The bytes of `path`, refused past [`MAX_PEM_BYTES`].
fn read_bounded(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    use std::io::Read as _;
    let refuse = |reason: String| TlsError::File {
        key,
        path: path.to_owned(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(|e| refuse(e.to_string()))?;
    let mut bytes = Vec::new();
    file.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refuse(e.to_string()))?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(refuse(format!("larger than {MAX_PEM_BYTES} bytes")));
    }
    Ok(bytes)
}
