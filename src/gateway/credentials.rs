//! The node's own credentials for agents (`[[gateway.credentials]]`),
//! read once at start: a header an agent is sent when the client sends
//! none of its own, and a TLS client certificate the node presents to an
//! agent that asks for one (`mtls`). Files are bounded and every
//! problem names the entry's agent and the file; a value or key is never
//! shown.

use std::collections::HashMap;
use std::io::Read as _;
use std::path::Path;
use std::sync::Arc;

use reqwest::header::{HeaderName, HeaderValue};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::SetupError;
use crate::config::GatewayCredential;
use crate::crawl::CrawlerOptions;

/// Largest credential file read (a header value, a PEM chain or key).
pub const MAX_CREDENTIAL_FILE_BYTES: u64 = 64 * 1024;
/// Most certificates in one `cert_file` (the leaf and its intermediates).
pub const MAX_CHAIN_CERTS: usize = 8;

/// What the node presents to agents, by agent id.
#[derive(Debug, Clone, Default)]
pub struct NodeCredentials {
    /// The header sent to an agent when the client sends none.
    pub headers: HashMap<String, (HeaderName, HeaderValue)>,
    /// The TLS configuration presenting the agent's client certificate.
    pub certificates: HashMap<String, Arc<rustls::ClientConfig>>,
}

impl NodeCredentials {
    /// Reads every entry of `entries`; the TLS configurations are the
    /// crawler's (`crawl`: its roots and versions) presenting each
    /// entry's certificate.
    ///
    /// # Errors
    /// [`SetupError::Credential`] naming the entry's agent and what is
    /// wrong with it.
    pub fn read(entries: &[GatewayCredential], crawl: &CrawlerOptions) -> Result<Self, SetupError> {
        let mut out = Self::default();
        for c in entries {
            let bad = |message: String| SetupError::Credential {
                agent: c.agent.clone(),
                message,
            };
            match (&c.header, &c.value_file) {
                (Some(header), Some(file)) => {
                    let header = header_value(header, file).map_err(bad)?;
                    out.headers.insert(c.agent.clone(), header);
                }
                (None, None) => {}
                _ => return Err(bad("header and value_file go together".into())),
            }
            match (&c.cert_file, &c.key_file) {
                (Some(cert), Some(key)) => {
                    let identity = identity(cert, key).map_err(bad)?;
                    let tls = crawl
                        .tls_config_presenting(Some(identity))
                        .map_err(|e| bad(e.to_string()))?;
                    out.certificates.insert(c.agent.clone(), tls);
                }
                (None, None) => {}
                _ => return Err(bad("cert_file and key_file go together".into())),
            }
            if c.header.is_none() && c.cert_file.is_none() {
                return Err(bad(
                    "the entry gives neither header and value_file nor cert_file and key_file"
                        .into(),
                ));
            }
        }
        Ok(out)
    }
}

/// A file's bytes, at most [`MAX_CREDENTIAL_FILE_BYTES`].
fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_CREDENTIAL_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_CREDENTIAL_FILE_BYTES {
        return Err(format!(
            "{} is larger than {MAX_CREDENTIAL_FILE_BYTES} bytes",
            path.display()
        ));
    }
    Ok(bytes)
}

/// The header `name` with the first line of `file` as its value.
fn header_value(name: &str, file: &Path) -> Result<(HeaderName, HeaderValue), String> {
    let name =
        HeaderName::from_bytes(name.as_bytes()).map_err(|e| format!("header {name:?}: {e}"))?;
    let bytes = read_bounded(file)?;
    let text =
        String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", file.display()))?;
    let text = text.lines().next().unwrap_or_default().trim();
    if text.is_empty() {
        return Err(format!(
            "{} holds no value on its first line",
            file.display()
        ));
    }
    let mut value = HeaderValue::from_str(text)
        .map_err(|_| "the value is not a valid header value".to_owned())?;
    value.set_sensitive(true);
    Ok((name, value))
}

/// The certificate chain of `cert_file` (leaf first) and the key of
/// `key_file`.
fn identity(
    cert_file: &Path,
    key_file: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let pem = read_bounded(cert_file)?;
    let mut chain = Vec::new();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("{}: {e}", cert_file.display()))?;
        if chain.len() == MAX_CHAIN_CERTS {
            return Err(format!(
                "{} holds more than {MAX_CHAIN_CERTS} certificates",
                cert_file.display()
            ));
        }
        chain.push(cert);
    }
    if chain.is_empty() {
        return Err(format!("{} holds no PEM certificate", cert_file.display()));
    }
    let pem = read_bounded(key_file)?;
    // The key's bytes are not shown: only that it did not read.
    let key = PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|_| format!("{} holds no PEM private key", key_file.display()))?;
    Ok((chain, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(agent: &str) -> GatewayCredential {
        GatewayCredential {
            agent: agent.into(),
            header: None,
            value_file: None,
            cert_file: None,
            key_file: None,
        }
    }

    fn refusal(entries: &[GatewayCredential]) -> String {
        NodeCredentials::read(entries, &CrawlerOptions::default())
            .expect_err("refused")
            .to_string()
    }

    #[test]
    fn an_entry_gives_whole_pairs_and_at_least_one() {
        let dir = tempfile::tempdir().unwrap();
        let value = dir.path().join("value");
        std::fs::write(&value, "secret\n").unwrap();
        let err = refusal(&[entry("a")]);
        assert!(
            err.contains("gateway.credentials for a") && err.contains("neither"),
            "{err}"
        );
        let mut half = entry("b");
        half.header = Some("x-api-key".into());
        assert!(refusal(&[half]).contains("go together"));
        let mut half = entry("c");
        half.cert_file = Some(value.clone());
        assert!(refusal(&[half]).contains("cert_file and key_file go together"));
        let mut whole = entry("d");
        whole.header = Some("x-api-key".into());
        whole.value_file = Some(value);
        let read = NodeCredentials::read(&[whole], &CrawlerOptions::default()).unwrap();
        assert_eq!(read.headers["d"].1, "secret");
        assert!(read.headers["d"].1.is_sensitive());
    }

    #[test]
    fn files_that_are_not_credentials_are_refused_by_name_without_their_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let not_pem = dir.path().join("not.pem");
        std::fs::write(&not_pem, "the-secret-key-material").unwrap();
        let huge = dir.path().join("huge.pem");
        std::fs::write(&huge, vec![b'a'; MAX_CREDENTIAL_FILE_BYTES as usize + 1]).unwrap();
        let mut e = entry("a");
        e.cert_file = Some(not_pem.clone());
        e.key_file = Some(not_pem.clone());
        let err = refusal(&[e]);
        assert!(err.contains("no PEM certificate"), "{err}");
        let mut e = entry("a");
        e.cert_file = Some(huge.clone());
        e.key_file = Some(not_pem.clone());
        assert!(refusal(&[e]).contains("larger than"));
        let mut e = entry("a");
        e.header = Some("x-api-key".into());
        e.value_file = Some(dir.path().join("missing"));
        assert!(refusal(&[e]).contains("missing"));
        let ca = crate::testbed::TestCa::new(&["a.test"]).unwrap();
        let leaf = ca.leaf_pem(&["a.test"]).unwrap();
        let cert = dir.path().join("cert.pem");
        std::fs::write(&cert, leaf.cert).unwrap();
        let mut e = entry("a");
        e.cert_file = Some(cert);
        e.key_file = Some(not_pem);
        let err = refusal(&[e]);
        assert!(err.contains("no PEM private key"), "{err}");
        assert!(!err.contains("the-secret-key-material"), "{err}");
    }
}
