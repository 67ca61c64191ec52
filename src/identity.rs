//! Who is who: Ed25519 keys, fingerprints, the base64url form of public
//! keys and key files (PKCS#8 PEM, mode 0600); agent [`Domain`]s and
//! [`AgentId`]s; the libp2p peer id of a node key. A leaf: it imports
//! nothing of the crate.
//!
//! The node's own key (`node.key` in the data directory) signs every record
//! the node issues; later it is also the node's libp2p identity. Agent
//! operators make their keys with `agentmesh keygen`, which uses the same
//! file format.

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ed25519_dalek::pkcs8::{DecodePrivateKey, EncodePrivateKey};
use ed25519_dalek::{SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

/// Length of a fingerprint string: `ed25519:` (8) and 64 hex digits.
pub const FINGERPRINT_LEN: usize = 72;

/// Errors from key handling.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// A public key string was not 32 bytes of base64url.
    #[error("public key is not 32 bytes of base64url without padding: {reason}")]
    BadPublicKey {
        /// What is wrong: the base64 error, the byte count, or not a
        /// valid Ed25519 point.
        reason: String,
    },
    /// A key file could not be read or written.
    #[error("key file {path}: {source}")]
    Io {
        /// The key file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A key file did not hold a PKCS#8 Ed25519 private key.
    #[error("key file {path} is not a PKCS#8 PEM Ed25519 private key: {reason}")]
    BadKeyFile {
        /// The key file.
        path: PathBuf,
        /// The PKCS#8 decoder's (or encoder's) message.
        reason: String,
    },
    /// `keygen` would overwrite an existing key.
    #[error("key file {path} already exists (refusing to overwrite it)")]
    Exists {
        /// The key file that already exists.
        path: PathBuf,
    },
}

/// The fingerprint of a public key: `ed25519:` + lowercase hex of
/// SHA-256 over the raw 32-byte key (docs/protocol.md#identity).
pub fn fingerprint(key: &VerifyingKey) -> String {
    format!("ed25519:{}", hex::encode(Sha256::digest(key.as_bytes())))
}

/// Whether `s` has the shape of a fingerprint (does not check any key).
pub fn is_fingerprint(s: &str) -> bool {
    s.len() == FINGERPRINT_LEN
        && s.starts_with("ed25519:")
        && s[8..]
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The raw key as base64url without padding (`publicKey.full`).
pub fn encode_public_key(key: &VerifyingKey) -> String {
    URL_SAFE_NO_PAD.encode(key.as_bytes())
}

/// Bytes as base64url without padding.
pub fn encode_bytes(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Parses base64url without padding.
///
/// # Errors
/// The decoder's error.
pub fn decode_bytes(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    URL_SAFE_NO_PAD.decode(text.trim())
}

/// Parses `publicKey.full`.
///
/// # Errors
/// [`KeyError::BadPublicKey`] when the text is not base64url of a valid
/// 32-byte Ed25519 point.
pub fn decode_public_key(text: &str) -> Result<VerifyingKey, KeyError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(text.trim())
        .map_err(|e| KeyError::BadPublicKey {
            reason: e.to_string(),
        })?;
    let raw: [u8; 32] = bytes
        .try_into()
        .map_err(|b: Vec<u8>| KeyError::BadPublicKey {
            reason: format!("{} bytes", b.len()),
        })?;
    VerifyingKey::from_bytes(&raw).map_err(|e| KeyError::BadPublicKey {
        reason: e.to_string(),
    })
}

/// A fresh random signing key.
pub fn generate() -> SigningKey {
    SigningKey::generate(&mut rand::rngs::OsRng)
}

/// Reads a PKCS#8 PEM private key.
///
/// # Errors
/// [`KeyError::Io`] or [`KeyError::BadKeyFile`].
pub fn read_key_file(path: &Path) -> Result<SigningKey, KeyError> {
    let text = std::fs::read_to_string(path).map_err(|source| KeyError::Io {
        path: path.to_owned(),
        source,
    })?;
    SigningKey::from_pkcs8_pem(&text).map_err(|e| KeyError::BadKeyFile {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// Writes `key` as PKCS#8 PEM to a new file with mode 0600; never
/// overwrites an existing file.
///
/// # Errors
/// [`KeyError::Exists`] when the file exists, [`KeyError::Io`] otherwise.
pub fn write_key_file(path: &Path, key: &SigningKey) -> Result<(), KeyError> {
    let io = |source| KeyError::Io {
        path: path.to_owned(),
        source,
    };
    let pem = key
        .to_pkcs8_pem(Default::default())
        .map_err(|e| KeyError::BadKeyFile {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            KeyError::Exists {
                path: path.to_owned(),
            }
        } else {
            io(e)
        }
    })?;
    file.write_all(pem.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)
}

/// Loads the key at `path`, creating it (0600) when it does not exist.
///
/// # Errors
/// As [`read_key_file`] and [`write_key_file`].
pub fn load_or_create(path: &Path) -> Result<SigningKey, KeyError> {
    match write_key_file(path, &generate()) {
        Ok(()) | Err(KeyError::Exists { .. }) => read_key_file(path),
        Err(e) => Err(e),
    }
}

/// The id prefix of agents found through DNS (docs/protocol.md#identity).
pub const AGENT_ID_PREFIX: &str = "agent:";

/// A domain that is not a usable agent domain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{domain:?} is not a domain name: {reason}")]
pub struct DomainError {
    /// What was given.
    pub domain: String,
    /// Why it was refused.
    pub reason: String,
}

/// An agent domain in its one form: trimmed, lower-case, no trailing dot,
/// IDNA (punycode), at least two DNS labels.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Domain(String);

impl Domain {
    /// Normalises `raw` (an optional `agent:` prefix is dropped).
    ///
    /// # Errors
    /// [`DomainError`] for anything that is not a domain name with at
    /// least two labels (IP addresses included).
    pub fn parse(raw: &str) -> Result<Self, DomainError> {
        let bad = |reason: &str| DomainError {
            domain: raw.to_owned(),
            reason: reason.into(),
        };
        let trimmed = raw.trim();
        let trimmed = trimmed
            .strip_prefix(AGENT_ID_PREFIX)
            .unwrap_or(trimmed)
            .trim_end_matches('.');
        if trimmed.is_empty() || trimmed.len() > 253 {
            return Err(bad("empty or longer than 253 characters"));
        }
        let host = match url::Host::parse(trimmed) {
            Ok(url::Host::Domain(d)) => d,
            Ok(_) => return Err(bad("an IP address is not an agent domain")),
            Err(e) => return Err(bad(&e.to_string())),
        };
        if !host.contains('.') {
            return Err(bad("needs at least two labels"));
        }
        for label in host.split('.') {
            let ok = !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !ok {
                return Err(bad(&format!("label {label:?} is not a DNS label")));
            }
        }
        Ok(Self(host))
    }

    /// The normalised name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id of the agent this domain anchors.
    pub fn agent_id(&self) -> AgentId {
        AgentId::of_domain(&self.0)
    }
}

impl std::fmt::Display for Domain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Domain> for String {
    fn from(d: Domain) -> Self {
        d.0
    }
}

/// Normalises a domain (see [`Domain::parse`]) to its string form.
///
/// # Errors
/// [`DomainError`].
pub fn normalise_domain(raw: &str) -> Result<String, DomainError> {
    Domain::parse(raw).map(String::from)
}

/// An agent id: `agent:{domain}` for agents found through DNS, or the id
/// an AIDIP registration chose.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AgentId(String);

impl AgentId {
    /// The id of the DNS-anchored agent of `domain`, which the caller has
    /// already normalised (see [`Domain`]).
    pub fn of_domain(domain: &str) -> Self {
        Self(format!("{AGENT_ID_PREFIX}{domain}"))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The domain of a DNS-anchored agent id.
    pub fn domain(&self) -> Option<&str> {
        self.0.strip_prefix(AGENT_ID_PREFIX)
    }
}

impl std::fmt::Display for AgentId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<AgentId> for String {
    fn from(id: AgentId) -> Self {
        id.0
    }
}

impl PartialEq<str> for AgentId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<String> for AgentId {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

/// Which of `stripes` lock stripes agent `id` falls in (the same agent,
/// the same stripe, within one process): the issuer's per-agent locks and
/// the store's write stripes.
pub fn stripe_of(id: &str, stripes: usize) -> usize {
    use std::hash::{BuildHasher, BuildHasherDefault};
    let hash =
        BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(id);
    (hash % stripes.max(1) as u64) as usize
}

/// The libp2p keypair of a node's Ed25519 signing key (the node key is
/// its libp2p identity).
pub fn libp2p_keypair(key: &SigningKey) -> libp2p::identity::Keypair {
    let mut secret = key.to_bytes();
    libp2p::identity::Keypair::ed25519_from_bytes(&mut secret)
        .expect("a 32-byte Ed25519 secret is always a valid libp2p key")
}

/// The libp2p peer id of a node key, as a string.
pub fn peer_id_of(key: &SigningKey) -> String {
    libp2p_keypair(key).public().to_peer_id().to_string()
}

/// The libp2p peer id of a node's public key, as a string.
pub fn peer_id_of_public(key: &VerifyingKey) -> String {
    libp2p::identity::ed25519::PublicKey::try_from_bytes(key.as_bytes())
        .map(|k| {
            libp2p::identity::PublicKey::from(k)
                .to_peer_id()
                .to_string()
        })
        .expect("an Ed25519 verifying key is a valid libp2p key")
}

/// The Ed25519 key a peer id names (an Ed25519 peer id inlines its key);
/// `None` for another kind of peer id or text that is not one.
pub fn key_of_peer_id(peer: &str) -> Option<VerifyingKey> {
    let id = peer.parse::<libp2p::PeerId>().ok()?;
    let key = libp2p::identity::PublicKey::try_decode_protobuf(id.as_ref().digest()).ok()?;
    let key = key.try_into_ed25519().ok()?;
    VerifyingKey::from_bytes(&key.to_bytes()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_id_names_its_node_key() {
        let key = SigningKey::from_bytes(&[3u8; 32]);
        let peer = peer_id_of(&key);
        assert_eq!(peer_id_of_public(&key.verifying_key()), peer);
        assert_eq!(key_of_peer_id(&peer), Some(key.verifying_key()));
        assert_eq!(key_of_peer_id("not a peer id"), None);
    }

    #[test]
    fn domains_are_normalised_or_refused() {
        assert_eq!(normalise_domain(" Example.ORG. ").unwrap(), "example.org");
        assert_eq!(
            normalise_domain("agent:alice.agent").unwrap(),
            "alice.agent"
        );
        assert_eq!(
            normalise_domain("bücher.example").unwrap(),
            "xn--bcher-kva.example"
        );
        assert_eq!(
            Domain::parse("Alice.Agent").unwrap().agent_id().as_str(),
            "agent:alice.agent"
        );
        assert_eq!(
            AgentId::of_domain("alice.agent").domain(),
            Some("alice.agent")
        );
        for bad in [
            "",
            "localhost",
            "127.0.0.1",
            "a..b",
            "-a.b",
            "a_b.example",
            "exa mple.org",
        ] {
            assert!(normalise_domain(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn peer_id_is_the_libp2p_id_of_the_node_key() {
        let key = SigningKey::from_bytes(&[9u8; 32]);
        let peer = libp2p_keypair(&key).public().to_peer_id();
        assert_eq!(peer.to_string(), peer_id_of(&key));
        assert!(peer_id_of(&key).starts_with("12D3KooW"));
    }

    #[test]
    fn fingerprint_is_sha256_of_raw_key() {
        let key = SigningKey::from_bytes(&[7u8; 32]).verifying_key();
        let fp = fingerprint(&key);
        assert_eq!(fp.len(), FINGERPRINT_LEN);
        assert!(is_fingerprint(&fp));
        assert_eq!(&fp[8..], hex::encode(Sha256::digest(key.as_bytes())));
    }

    #[test]
    fn public_key_round_trips_and_rejects_bad_lengths() {
        let key = generate().verifying_key();
        let text = encode_public_key(&key);
        assert_eq!(text.len(), 43);
        assert_eq!(decode_public_key(&text).unwrap(), key);
        assert!(matches!(
            decode_public_key("AAAA"),
            Err(KeyError::BadPublicKey { .. })
        ));
        assert!(decode_public_key("not base64 !").is_err());
    }

    #[test]
    fn key_file_is_private_and_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.key");
        let first = load_or_create(&path).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let again = load_or_create(&path).unwrap();
        assert_eq!(first.to_bytes(), again.to_bytes());
        assert!(matches!(
            write_key_file(&path, &generate()),
            Err(KeyError::Exists { .. })
        ));
        std::fs::write(&path, "garbage").unwrap();
        assert!(matches!(
            read_key_file(&path),
            Err(KeyError::BadKeyFile { .. })
        ));
    }
}
