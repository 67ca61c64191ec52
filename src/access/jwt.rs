//! Bearer JWTs from an OAuth 2.0 issuer (`[api.jwt]`): a token is
//! accepted when it is signed by a key of the issuer's JWKS, with an
//! asymmetric algorithm that key is for, and names the configured issuer
//! and audience, a subject, and an expiry not passed (with the
//! configured leeway). Its scopes are those of its `scope` claim (a
//! space-separated string) or `scp` claim (a list) that are agentmesh
//! scopes; others are ignored.
//!
//! The JWKS is fetched from `jwks_url` (or read from `jwks_file`) when
//! first needed, again when it is older than `refresh`, and again when a
//! token names a key id the set lacks (an issuer's key rotation), at
//! most once per [`MIN_REFETCH`] so that tokens with made-up key ids
//! cannot make the node hammer the issuer. A failed fetch keeps the keys
//! fetched before.
//!
//! Symmetric (HMAC) keys and `alg: none` are never accepted: a JWKS is
//! public, so a key in it cannot be a shared secret.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

use super::Scopes;
use crate::config::JwtConfig;

/// Longest token accepted, in bytes.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// Largest JWKS read, in bytes.
pub const MAX_JWKS_BYTES: usize = 1 << 20;

/// Most keys of a JWKS kept.
pub const MAX_JWKS_KEYS: usize = 64;

/// Shortest time between two fetches of the JWKS made because a token
/// named an unknown key.
pub const MIN_REFETCH: Duration = Duration::from_secs(30);

/// How long one fetch of the JWKS may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// What a valid token proves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenGrant {
    /// Its `sub` claim.
    pub subject: String,
    /// The agentmesh scopes it grants.
    pub scopes: Scopes,
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    /// Not a JWT this node can read (size, encoding, header).
    #[error("the bearer token is not a valid JWT: {0}")]
    Malformed(String),
    /// An algorithm this node does not accept (HMAC, none, unknown).
    #[error("the token's algorithm {0} is not accepted")]
    Algorithm(String),
    /// No key of the issuer's JWKS has the token's key id (or the JWKS
    /// could not be had).
    #[error("no key of the issuer's JWKS verifies this token: {0}")]
    UnknownKey(String),
    /// The signature, issuer, audience, expiry or a required claim is
    /// wrong.
    #[error("the token is not valid: {0}")]
    Invalid(String),
}

/// Why the JWKS could not be had.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    /// The fetch or the read failed.
    #[error("the JWKS could not be fetched from {source_name}: {reason}")]
    Fetch {
        /// The URL or file.
        source_name: String,
        /// What failed.
        reason: String,
    },
    /// The JWKS is not a key set, or holds no usable key.
    #[error("the JWKS from {source_name} is not usable: {reason}")]
    Invalid {
        /// The URL or file.
        source_name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The configuration cannot work (a CA file that cannot be read).
    #[error("api.jwt: {0}")]
    Config(String),
}

/// One usable key of the set.
struct UsableKey {
    key: DecodingKey,
    /// The algorithms it may verify.
    algorithms: Vec<Algorithm>,
}

#[derive(Default)]
struct KeySet {
    keys: HashMap<String, UsableKey>,
    /// Keys without a `kid`: tried for tokens without one.
    anonymous: Vec<UsableKey>,
    fetched: Option<Instant>,
}

/// Checks bearer JWTs against the configured issuer.
pub struct JwtVerifier {
    config: JwtConfig,
    client: reqwest::Client,
    keys: tokio::sync::RwLock<KeySet>,
    /// Held while fetching (one fetch at a time), with the time of the
    /// last fetch made for an unknown key id.
    fetching: tokio::sync::Mutex<Option<Instant>>,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("issuer", &self.config.issuer)
            .finish_non_exhaustive()
    }
}

impl JwtVerifier {
    /// A verifier for `config`; nothing is fetched yet.
    ///
    /// # Errors
    /// [`JwksError::Config`] when a CA file cannot be read or the HTTP
    /// client cannot be built.
    pub fn new(config: JwtConfig) -> Result<Self, JwksError> {
        let mut builder = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("agentmesh/", env!("CARGO_PKG_VERSION")));
        for path in &config.ca_files {
            let pem = std::fs::read(path)
                .map_err(|e| JwksError::Config(format!("{}: {e}", path.display())))?;
            let cert = reqwest::Certificate::from_pem(&pem)
                .map_err(|e| JwksError::Config(format!("{}: {e}", path.display())))?;
            builder = builder.add_root_certificate(cert);
        }
        let client = builder
            .build()
            .map_err(|e| JwksError::Config(e.to_string()))?;
        Ok(Self {
            config,
            client,
            keys: tokio::sync::RwLock::new(KeySet::default()),
            fetching: tokio::sync::Mutex::new(None),
        })
    }

    /// Whether a bearer token looks like a JWT (three dot-separated
    /// parts), so it is checked here rather than as another credential.
    pub fn looks_like_jwt(token: &str) -> bool {
        token.split('.').count() == 3
    }

    /// Checks `token`.
    ///
    /// # Errors
    /// [`JwtError`], naming what is wrong.
    pub async fn verify(&self, token: &str) -> Result<TokenGrant, JwtError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(JwtError::Malformed(format!(
                "longer than {MAX_TOKEN_BYTES} bytes"
            )));
        }
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| JwtError::Malformed(e.to_string()))?;
        if matches!(
            header.alg,
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
        ) {
            return Err(JwtError::Algorithm(format!("{:?}", header.alg)));
        }
        self.refresh_if_stale().await;
        if !self.has_key(header.kid.as_deref()).await {
            self.refetch_for_unknown_key().await;
        }
        let keys = self.keys.read().await;
        let candidates: Vec<&UsableKey> = match &header.kid {
            Some(kid) => keys.keys.get(kid).into_iter().collect(),
            None => keys.anonymous.iter().collect(),
        };
        if candidates.is_empty() {
            return Err(JwtError::UnknownKey(match &header.kid {
                Some(kid) => format!("key id {kid:?}"),
                None => "the token names no key id".into(),
            }));
        }
        let mut last = JwtError::Algorithm(format!("{:?}", header.alg));
        for candidate in candidates {
            if !candidate.algorithms.contains(&header.alg) {
                continue;
            }
            match jsonwebtoken::decode::<Value>(token, &candidate.key, &self.validation(header.alg))
            {
                Ok(data) => return grant(&self.config, &data.claims),
                Err(e) => last = JwtError::Invalid(e.to_string()),
            }
        }
        Err(last)
    }

    /// The checks every token goes through, for algorithm `alg`.
    fn validation(&self, alg: Algorithm) -> Validation {
        let mut v = Validation::new(alg);
        v.leeway = self.config.leeway.as_secs();
        v.validate_exp = true;
        v.validate_nbf = true;
        v.set_issuer(&[&self.config.issuer]);
        v.set_audience(&[&self.config.audience]);
        v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        v
    }

    async fn has_key(&self, kid: Option<&str>) -> bool {
        let keys = self.keys.read().await;
        match kid {
            Some(kid) => keys.keys.contains_key(kid),
            None => !keys.anonymous.is_empty(),
        }
    }

    /// Fetches the set when it was never fetched or is older than
    /// `refresh`.
    async fn refresh_if_stale(&self) {
        if self.is_stale().await {
            let _one = self.fetching.lock().await;
            // Another request may have fetched while this one waited.
            if self.is_stale().await {
                self.fetch_and_keep().await;
            }
        }
    }

    /// Whether the set was never fetched or is older than `refresh`.
    async fn is_stale(&self) -> bool {
        self.keys
            .read()
            .await
            .fetched
            .is_none_or(|at| at.elapsed() >= self.config.refresh)
    }

    /// Fetches the set again for a token naming a key it lacks, unless
    /// that was done less than [`MIN_REFETCH`] ago.
    async fn refetch_for_unknown_key(&self) {
        let mut last = self.fetching.lock().await;
        if last.is_some_and(|at| at.elapsed() < MIN_REFETCH) {
            return;
        }
        *last = Some(Instant::now());
        self.fetch_and_keep().await;
    }

    async fn fetch_and_keep(&self) {
        match self.fetch().await {
            Ok(set) => *self.keys.write().await = set,
            Err(e) => {
                tracing::warn!(error = %e, "the JWT issuer's keys could not be fetched; the keys fetched before stay in force");
                // Try again at the next token, not at every one: the
                // stale time restarts, and a set never fetched is
                // tried again after MIN_REFETCH.
                let mut keys = self.keys.write().await;
                if keys.fetched.is_some() {
                    keys.fetched = Some(Instant::now());
                }
            }
        }
    }

    /// Fetches the JWKS now: the keys in force are replaced when it
    /// works.
    ///
    /// # Errors
    /// [`JwksError`] when the set cannot be fetched or holds no usable
    /// key.
    pub async fn fetch_now(&self) -> Result<usize, JwksError> {
        let set = self.fetch().await?;
        let count = set.keys.len() + set.anonymous.len();
        *self.keys.write().await = set;
        Ok(count)
    }

    async fn fetch(&self) -> Result<KeySet, JwksError> {
        let (name, bytes) = if let Some(url) = &self.config.jwks_url {
            (url.clone(), self.download(url).await?)
        } else if let Some(path) = &self.config.jwks_file {
            (path.display().to_string(), read_file(path)?)
        } else {
            return Err(JwksError::Config(
                "neither jwks_url nor jwks_file is set".into(),
            ));
        };
        parse_set(&name, &bytes)
    }

    async fn download(&self, url: &str) -> Result<Vec<u8>, JwksError> {
        let failed = |reason: String| JwksError::Fetch {
            source_name: url.to_owned(),
            reason,
        };
        let mut response = self
            .client
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| failed(e.to_string()))?;
        if !response.status().is_success() {
            return Err(failed(format!("HTTP {}", response.status())));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| failed(e.to_string()))? {
            if body.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err(failed(format!("more than {MAX_JWKS_BYTES} bytes")));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, JwksError> {
    let failed = |reason: String| JwksError::Fetch {
        source_name: path.display().to_string(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| failed(e.to_string()))?;
    if meta.len() > MAX_JWKS_BYTES as u64 {
        return Err(failed(format!("more than {MAX_JWKS_BYTES} bytes")));
    }
    std::fs::read(path).map_err(|e| failed(e.to_string()))
}

/// The usable keys of a JWKS document: signing keys of an asymmetric
/// type; each other entry (encryption keys, symmetric keys, types this
/// node does not know) is skipped.
fn parse_set(name: &str, bytes: &[u8]) -> Result<KeySet, JwksError> {
    let invalid = |reason: String| JwksError::Invalid {
        source_name: name.to_owned(),
        reason,
    };
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))?;
    let entries = doc
        .get("keys")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("no \"keys\" list".into()))?;
    let mut set = KeySet {
        fetched: Some(Instant::now()),
        ..KeySet::default()
    };
    for entry in entries.iter().take(MAX_JWKS_KEYS) {
        let Ok(jwk) = serde_json::from_value::<Jwk>(entry.clone()) else {
            continue;
        };
        let Some(usable) = usable(&jwk) else {
            continue;
        };
        match jwk.common.key_id.clone() {
            Some(kid) => {
                set.keys.insert(kid, usable);
            }
            None => set.anonymous.push(usable),
        }
    }
    if set.keys.is_empty() && set.anonymous.is_empty() {
        return Err(invalid("it holds no asymmetric signing key".into()));
    }
    Ok(set)
}

/// A JWK as a key this node verifies with, and the algorithms it may
/// verify: its family's, narrowed to its `alg` when it names one.
fn usable(jwk: &Jwk) -> Option<UsableKey> {
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        return None;
    }
    let family: Vec<Algorithm> = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => vec![
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::PS384,
            Algorithm::PS512,
        ],
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
            vec![Algorithm::EdDSA]
        }
        _ => return None,
    };
    let algorithms = match jwk.common.key_algorithm {
        Some(named) => {
            let named: Algorithm = serde_json::to_value(named).ok()?.as_str()?.parse().ok()?;
            family.into_iter().filter(|a| *a == named).collect()
        }
        None => family,
    };
    if algorithms.is_empty() {
        return None;
    }
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(UsableKey { key, algorithms })
}

/// What a verified token's claims grant.
fn grant(config: &JwtConfig, claims: &Value) -> Result<TokenGrant, JwtError> {
    let subject = claims
        .get("sub")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.len() <= 256 && !s.chars().any(char::is_control))
        .ok_or_else(|| JwtError::Invalid("its sub claim is missing or not a short string".into()))?
        .to_owned();
    let scopes = match claims.get(&config.scope_claim) {
        Some(Value::String(list)) => Scopes::from_list_lenient(list),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .filter_map(|s| s.parse().ok())
            .collect(),
        _ => Scopes::NONE,
    };
    Ok(TokenGrant { subject, scopes })
}

#[cfg(test)]
mod tests;
