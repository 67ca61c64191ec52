//! Client certificates as credentials (docs/protocol.md#api-access):
//! which verified certificate means which peer registry, and what it may
//! do. The TLS handshake has already checked the certificate against
//! `api.tls.client_ca_files` and its validity in time; this module only
//! names it. [`Presented`] is what a certificate shows (its SHA-256 and
//! its subject names), read once per connection; [`ClientCertificates`]
//! is the table of `[[api.tls.clients]]` entries the API's
//! authentication layer looks a [`Presented`] certificate up in.
//!
//! An entry matches a certificate when every way it gives matches: its
//! `subject` one of the certificate's DNS or URI subjectAltNames (DNS
//! names without regard to ASCII case; a wildcard name is matched as
//! written, never expanded), or its common name when it has no
//! subjectAltName extension; its `fingerprint` the SHA-256 of the
//! certificate's DER. The first entry that matches, in the order
//! configured, names the certificate. A certificate no entry matches
//! proves nobody.

use std::fmt;

use sha2::{Digest, Sha256};

use super::{Scope, Scopes};
use crate::config::TlsClientConfig;

/// Longest entry name: it is a principal's name in the audit log.
pub const MAX_NAME_CHARS: usize = 64;

/// Most subject names read from one certificate; past them the rest are
/// not looked at.
const MAX_NAMES: usize = 64;

/// What a verified client certificate shows: the SHA-256 of its DER and
/// the names it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Presented {
    fingerprint: [u8; 32],
    /// Its DNS and URI subjectAltNames, or its common names when it has
    /// no subjectAltName extension.
    names: Vec<Name>,
}

/// One name a certificate is for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Name {
    /// A DNS subjectAltName, or a common name: compared without regard
    /// to ASCII case.
    Dns(String),
    /// A URI subjectAltName: compared exactly.
    Uri(String),
}

impl Presented {
    /// What the certificate `der` shows. A certificate whose names
    /// cannot be read (the handshake accepted it, a stricter parser does
    /// not) shows its fingerprint only.
    pub fn from_der(der: &[u8]) -> Self {
        Self {
            fingerprint: Sha256::digest(der).into(),
            names: subject_names(der),
        }
    }

    /// The SHA-256 of the certificate's DER.
    pub fn fingerprint(&self) -> &[u8; 32] {
        &self.fingerprint
    }

    /// Whether the certificate is for `subject`.
    fn is_for(&self, subject: &str) -> bool {
        self.names.iter().any(|name| match name {
            Name::Dns(n) => n.eq_ignore_ascii_case(subject),
            Name::Uri(n) => n == subject,
        })
    }
}

/// The names of the certificate `der`: its DNS and URI subjectAltNames,
/// or, without a subjectAltName extension, its common names. None when
/// it does not parse.
fn subject_names(der: &[u8]) -> Vec<Name> {
    use x509_parser::extensions::GeneralName;
    use x509_parser::prelude::{FromDer, X509Certificate};
    let Ok((_, cert)) = X509Certificate::from_der(der) else {
        return Vec::new();
    };
    match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|name| match name {
                GeneralName::DNSName(n) => Some(Name::Dns((*n).to_owned())),
                GeneralName::URI(n) => Some(Name::Uri((*n).to_owned())),
                _ => None,
            })
            .take(MAX_NAMES)
            .collect(),
        Ok(None) => cert
            .subject()
            .iter_common_name()
            .filter_map(|cn| cn.as_str().ok())
            .map(|cn| Name::Dns(cn.to_owned()))
            .take(MAX_NAMES)
            .collect(),
        // A broken or repeated extension: no name is believed.
        Err(_) => Vec::new(),
    }
}

/// An `[[api.tls.clients]]` entry that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("api.tls.clients entry {entry}: {message}")]
pub struct ClientEntryError {
    /// The entry, by its name or, when the name is at fault, its
    /// 1-based position.
    pub entry: String,
    /// What is wrong with it.
    pub message: String,
}

/// One `[[api.tls.clients]]` entry, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    name: String,
    subject: Option<String>,
    fingerprint: Option<[u8; 32]>,
    scopes: Scopes,
}

impl Entry {
    fn matches(&self, cert: &Presented) -> bool {
        self.subject.as_deref().is_none_or(|s| cert.is_for(s))
            && self.fingerprint.is_none_or(|f| f == cert.fingerprint)
    }
}

/// The client certificates a node accepts as credentials: the
/// `[[api.tls.clients]]` entries, in the order configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientCertificates {
    entries: Vec<Entry>,
}

impl ClientCertificates {
    /// The entries of `[[api.tls.clients]]`, checked.
    ///
    /// # Errors
    /// [`ClientEntryError`] for an entry with an empty, overlong or
    /// repeated name, a name with spaces or control characters, neither
    /// `subject` nor `fingerprint`, an empty subject, a fingerprint that
    /// is not 32 bytes of hex, or a scope that is not one (or none).
    pub fn from_config(clients: &[TlsClientConfig]) -> Result<Self, ClientEntryError> {
        let mut entries: Vec<Entry> = Vec::with_capacity(clients.len());
        for (i, client) in clients.iter().enumerate() {
            if let Err(message) = check_name(&client.name) {
                return Err(ClientEntryError {
                    entry: format!("#{}", i + 1),
                    message: message.into(),
                });
            }
            let refuse = |message: String| ClientEntryError {
                entry: format!("{:?}", client.name),
                message,
            };
            if entries.iter().any(|e| e.name == client.name) {
                return Err(refuse("the name is used by an earlier entry".into()));
            }
            if client.subject.is_none() && client.fingerprint.is_none() {
                return Err(refuse(
                    "set subject, fingerprint or both: how the certificate is known".into(),
                ));
            }
            if client
                .subject
                .as_deref()
                .is_some_and(|s| s.trim().is_empty())
            {
                return Err(refuse("the subject is empty".into()));
            }
            let fingerprint = client
                .fingerprint
                .as_deref()
                .map(parse_fingerprint)
                .transpose()
                .map_err(refuse)?;
            let scopes = client
                .scopes
                .iter()
                .map(|name| name.parse::<Scope>())
                .collect::<Result<Scopes, _>>()
                .map_err(|e| refuse(e.to_string()))?;
            if scopes.is_empty() {
                return Err(refuse("an entry needs at least one scope".into()));
            }
            entries.push(Entry {
                name: client.name.clone(),
                subject: client.subject.clone(),
                fingerprint,
                scopes,
            });
        }
        Ok(Self { entries })
    }

    /// Whether no entry is configured.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The name and scopes of the first entry `cert` matches, if any.
    pub fn identify(&self, cert: &Presented) -> Option<(&str, Scopes)> {
        self.entries
            .iter()
            .find(|e| e.matches(cert))
            .map(|e| (e.name.as_str(), e.scopes))
    }
}

/// Checks an entry's name: 1 to [`MAX_NAME_CHARS`] characters, no
/// whitespace nor control characters (it is written into log lines).
fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("the name is empty");
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err("the name is longer than 64 characters");
    }
    if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("the name has spaces or control characters");
    }
    Ok(())
}

/// A SHA-256 fingerprint written in hex, its bytes separated by colons
/// (`ab:cd:...`, as `openssl x509 -fingerprint -sha256` prints it) or
/// not; either case.
///
/// # Errors
/// A message saying what is wrong, when it is not 32 bytes of hex.
pub fn parse_fingerprint(text: &str) -> Result<[u8; 32], String> {
    let text = text.trim();
    let digits: String = if text.contains(':') {
        let parts: Vec<&str> = text.split(':').collect();
        if parts.iter().any(|p| p.len() != 2) {
            return Err(format!(
                "the fingerprint {text:?} is not hex bytes separated by colons (ab:cd:...)"
            ));
        }
        parts.concat()
    } else {
        text.to_owned()
    };
    let mut bytes = [0u8; 32];
    match hex::decode_to_slice(&digits, &mut bytes) {
        Ok(()) => Ok(bytes),
        Err(_) => Err(format!(
            "the fingerprint {text:?} is not a SHA-256 in hex (64 hex digits, \
             with or without colons)"
        )),
    }
}

/// A fingerprint as `ab:cd:...`, how a log line shows it.
pub struct ColonHex<'a>(pub &'a [u8; 32]);

impl fmt::Display for ColonHex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
