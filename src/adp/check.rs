//! What makes an `agent.json` speak for a domain: the document check
//! (JSON, `ADP/1.x`, the schema, an identity naming the domain) and the
//! fingerprint chain (DNS `pk` = the document's fingerprint = SHA-256 of
//! `publicKey.full`). Pure code: the crawler runs it on what it fetched,
//! the federation judge on documents that peers attest.

use ed25519_dalek::VerifyingKey;
use serde_json::Value;

use super::{AgentDocument, SCHEMA};
use crate::aidip::FieldProblem;
use crate::identity::{self, AgentId};
use crate::trust::Reason;

/// Most schema problems reported for one document.
const MAX_PROBLEMS: usize = 32;
/// Longest schema problem message kept, in characters.
const MAX_PROBLEM_CHARS: usize = 300;

/// Why a document does not speak for a domain. The crawler maps each
/// variant to its own reason code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DocumentError {
    /// Not JSON.
    #[error("agent.json is not valid JSON: {message}")]
    InvalidJson {
        /// The JSON parser's message.
        message: String,
    },
    /// A protocol version this node does not speak.
    #[error("agent.json protocol {protocol:?} is not ADP/1.x")]
    ProtocolUnsupported {
        /// The document's `protocol` (empty when it has none).
        protocol: String,
    },
    /// The document does not match the ADP schema.
    #[error("agent.json does not match the ADP schema ({} problems)", problems.len())]
    SchemaInvalid {
        /// Each mismatch with its JSON pointer (at most 32).
        problems: Vec<FieldProblem>,
    },
    /// `identity.domain` or `identity.id` is not the domain crawled.
    #[error("agent.json speaks for {got}, not {expected}")]
    DomainMismatch {
        /// The domain crawled.
        expected: String,
        /// The document's `identity.domain` and `identity.id`.
        got: String,
    },
    /// The DNS fingerprint is not the document's.
    #[error("DNS pk {dns} does not match the document's fingerprint {document}")]
    FingerprintMismatch {
        /// The fingerprint in the DNS `pk` field.
        dns: String,
        /// The document's `publicKey.fingerprint` (lower-case).
        document: String,
    },
    /// `publicKey.full` does not hash to the fingerprint.
    #[error("publicKey.full does not hash to the fingerprint {fingerprint}")]
    KeyMismatch {
        /// The fingerprint the key should hash to (lower-case).
        fingerprint: String,
    },
}

impl DocumentError {
    /// The stable reason code.
    pub fn reason(&self) -> Reason {
        match self {
            Self::InvalidJson { .. } => Reason::InvalidJson,
            Self::ProtocolUnsupported { .. } => Reason::ProtocolUnsupported,
            Self::SchemaInvalid { .. } => Reason::SchemaInvalid,
            Self::DomainMismatch { .. } => Reason::DomainMismatch,
            Self::FingerprintMismatch { .. } => Reason::FingerprintMismatch,
            Self::KeyMismatch { .. } => Reason::KeyMismatch,
        }
    }
}

/// Checks `agent.json` documents against the ADP schema, compiled once.
/// Cheap to share behind an `Arc`.
pub struct DocumentChecker {
    schema: jsonschema::Validator,
}

impl std::fmt::Debug for DocumentChecker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocumentChecker").finish_non_exhaustive()
    }
}

impl Default for DocumentChecker {
    fn default() -> Self {
        Self::new()
    }
}

impl DocumentChecker {
    /// A checker with the built-in schema (`proto/adp-agent.schema.json`).
    pub fn new() -> Self {
        let schema: Value =
            serde_json::from_str(SCHEMA).expect("the built-in ADP schema is valid JSON");
        let schema = jsonschema::validator_for(&schema)
            .expect("the built-in ADP schema is a valid JSON Schema");
        Self { schema }
    }

    /// Parses `text` as the `agent.json` of `domain` (normalised).
    ///
    /// # Errors
    /// [`DocumentError::InvalidJson`], [`DocumentError::ProtocolUnsupported`],
    /// [`DocumentError::SchemaInvalid`] (at most 32 problems, each with its
    /// JSON pointer) or [`DocumentError::DomainMismatch`].
    pub fn check(&self, domain: &str, text: &str) -> Result<AgentDocument, DocumentError> {
        let value: Value = serde_json::from_str(text).map_err(|e| DocumentError::InvalidJson {
            message: e.to_string(),
        })?;
        let protocol = value
            .get("protocol")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !protocol.starts_with("ADP/1.") {
            return Err(DocumentError::ProtocolUnsupported {
                protocol: protocol.to_owned(),
            });
        }
        let problems: Vec<FieldProblem> = self
            .schema
            .iter_errors(&value)
            .take(MAX_PROBLEMS)
            .map(|e| FieldProblem {
                field: e.instance_path.to_string(),
                message: e.to_string().chars().take(MAX_PROBLEM_CHARS).collect(),
            })
            .collect();
        if !problems.is_empty() {
            return Err(DocumentError::SchemaInvalid { problems });
        }
        let document: AgentDocument =
            serde_json::from_value(value).map_err(|e| DocumentError::SchemaInvalid {
                problems: vec![FieldProblem {
                    field: String::new(),
                    message: e.to_string(),
                }],
            })?;
        if !document.names_domain(domain) {
            return Err(DocumentError::DomainMismatch {
                expected: domain.to_owned(),
                got: format!("{} ({})", document.identity.domain, document.identity.id),
            });
        }
        Ok(document)
    }
}

impl AgentDocument {
    /// Whether the identity block speaks for `domain` (normalised):
    /// `identity.domain` is it (any case, a trailing dot allowed) and
    /// `identity.id` is `agent:{domain}`.
    pub fn names_domain(&self, domain: &str) -> bool {
        self.identity
            .domain
            .trim_end_matches('.')
            .eq_ignore_ascii_case(domain)
            && AgentId::of_domain(domain) == self.identity.id.to_ascii_lowercase()
    }

    /// The key the document proves on its own: `publicKey.full`, when it
    /// hashes to `publicKey.fingerprint`.
    pub fn proven_key(&self) -> Option<VerifyingKey> {
        let key = identity::decode_public_key(self.identity.public_key.full.as_deref()?).ok()?;
        has_fingerprint(&key, &self.identity.public_key.fingerprint).then_some(key)
    }
}

/// Whether `key` hashes to `fingerprint` (compared without regard to case).
pub fn has_fingerprint(key: &VerifyingKey, fingerprint: &str) -> bool {
    identity::fingerprint(key).eq_ignore_ascii_case(fingerprint)
}

/// The fingerprint chain: the DNS `pk` (lower-case) equals the document's
/// fingerprint, and `publicKey.full`, when present, hashes to it. Answers
/// the key the chain proves (`None` without `publicKey.full`: the
/// challenge answer must then bring a key that hashes to the fingerprint).
///
/// # Errors
/// [`DocumentError::FingerprintMismatch`] or [`DocumentError::KeyMismatch`].
pub fn fingerprint_chain(
    dns_pk: &str,
    doc: &AgentDocument,
) -> Result<Option<VerifyingKey>, DocumentError> {
    let doc_fp = doc.identity.public_key.fingerprint.to_ascii_lowercase();
    if doc_fp != dns_pk {
        return Err(DocumentError::FingerprintMismatch {
            dns: dns_pk.to_owned(),
            document: doc_fp,
        });
    }
    match &doc.identity.public_key.full {
        None => Ok(None),
        Some(full) => match identity::decode_public_key(full) {
            Ok(key) if has_fingerprint(&key, &doc_fp) => Ok(Some(key)),
            _ => Err(DocumentError::KeyMismatch {
                fingerprint: doc_fp,
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::SigningKey;

    fn document(domain: &str, key: &VerifyingKey) -> String {
        serde_json::json!({
            "protocol": "ADP/1.0",
            "identity": {
                "id": format!("agent:{domain}"),
                "domain": domain,
                "name": "Test",
                "owner": "Test",
                "created": "2026-01-01T00:00:00Z",
                "publicKey": {
                    "algorithm": "ed25519",
                    "fingerprint": identity::fingerprint(key),
                    "full": identity::encode_public_key(key)
                }
            },
            "endpoints": {"chat": format!("wss://{domain}/agent/chat")},
            "capabilities": [{"id": "translate", "description": "Translates text."}],
            "security": {"tlsRequired": true},
            "availability": {"status": "online"}
        })
        .to_string()
    }

    #[test]
    fn a_good_document_passes_and_proves_its_key() {
        let key = SigningKey::from_bytes(&[3u8; 32]).verifying_key();
        let checker = DocumentChecker::new();
        let doc = checker.check("a.test", &document("a.test", &key)).unwrap();
        assert_eq!(doc.proven_key(), Some(key));
        let fp = identity::fingerprint(&key);
        assert_eq!(fingerprint_chain(&fp, &doc).unwrap(), Some(key));
    }

    #[test]
    fn each_refusal_has_its_variant() {
        let key = SigningKey::from_bytes(&[3u8; 32]).verifying_key();
        let other = SigningKey::from_bytes(&[4u8; 32]).verifying_key();
        let checker = DocumentChecker::new();
        let text = document("a.test", &key);
        assert!(matches!(
            checker.check("a.test", &text[..text.len() / 2]),
            Err(DocumentError::InvalidJson { .. })
        ));
        assert!(matches!(
            checker.check("a.test", &text.replace("ADP/1.0", "ADP/2.0")),
            Err(DocumentError::ProtocolUnsupported { .. })
        ));
        assert!(matches!(
            checker.check(
                "a.test",
                &text.replace("\"capabilities\"", "\"capabilitiez\"")
            ),
            Err(DocumentError::SchemaInvalid { .. })
        ));
        assert!(matches!(
            checker.check("b.test", &text),
            Err(DocumentError::DomainMismatch { .. })
        ));
        let doc = checker.check("a.test", &text).unwrap();
        assert!(matches!(
            fingerprint_chain(&identity::fingerprint(&other), &doc),
            Err(DocumentError::FingerprintMismatch { .. })
        ));
        let mut swapped = doc.clone();
        swapped.identity.public_key.full = Some(identity::encode_public_key(&other));
        assert!(matches!(
            fingerprint_chain(&identity::fingerprint(&key), &swapped),
            Err(DocumentError::KeyMismatch { .. })
        ));
        assert_eq!(swapped.proven_key(), None);
    }

    #[test]
    fn a_later_minor_version_with_unknown_members_is_read_and_another_major_is_never_half_parsed() {
        let key = SigningKey::from_bytes(&[3u8; 32]).verifying_key();
        let checker = DocumentChecker::new();
        let mut doc: serde_json::Value = serde_json::from_str(&document("a.test", &key)).unwrap();
        // ADP 10.4: members this node does not know are ignored.
        doc["protocol"] = "ADP/1.7".into();
        doc["x-future"] = serde_json::json!({"nested": [1, 2, {"deep": true}]});
        doc["identity"]["pronouns"] = "it/its".into();
        doc["capabilities"][0]["costPerCall"] = serde_json::json!({"usd": 0.01});
        let read = checker.check("a.test", &doc.to_string()).unwrap();
        assert_eq!(read.identity.domain, "a.test");
        assert_eq!(read.proven_key(), Some(key));

        // ADP 10.3: another major version is refused with its reason
        // before anything else is read, even when the rest would not
        // pass the schema of ours.
        let mut major = doc.clone();
        major["protocol"] = "ADP/2.0".into();
        major.as_object_mut().unwrap().remove("capabilities");
        match checker.check("a.test", &major.to_string()) {
            Err(e @ DocumentError::ProtocolUnsupported { .. }) => {
                assert_eq!(e.reason(), Reason::ProtocolUnsupported);
                assert!(e.to_string().contains("ADP/2.0"), "{e}");
            }
            other => panic!("expected protocol_unsupported, got {other:?}"),
        }
        let mut none = doc;
        none.as_object_mut().unwrap().remove("protocol");
        assert!(matches!(
            checker.check("a.test", &none.to_string()),
            Err(DocumentError::ProtocolUnsupported { protocol }) if protocol.is_empty()
        ));
    }
}
