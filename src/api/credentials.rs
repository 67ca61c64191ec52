//! The credentials a node accepts ([`Access`]: the admin token, the API
//! key ring, the JWT issuer, the client certificate entries) and what a
//! request was granted ([`Granted`]); the checks themselves, with no
//! request or state around them. `auth.rs` applies them to requests.

use std::sync::Arc;

use subtle::ConstantTimeEq;

use super::caller::Principal;
use super::tls::PeerCertificate;
use crate::access::certs::{ClientCertificates, ColonHex};
use crate::access::jwt::JwtVerifier;
use crate::access::keys::{self, KeyRing, KeyVerdict};
use crate::access::{Scope, Scopes};
use crate::config::Secret;

/// The credentials a node accepts, and what a caller without any may do.
#[derive(Debug)]
pub struct Access {
    admin_token: Option<Secret>,
    pub(super) keys: Arc<KeyRing>,
    jwt: Option<Arc<JwtVerifier>>,
    certificates: ClientCertificates,
    public_reads: bool,
}

impl Access {
    /// The access of a node: its admin token, its key ring, its JWT
    /// issuer, and whether callers without credentials may read.
    pub fn new(
        admin_token: Option<Secret>,
        keys: KeyRing,
        jwt: Option<JwtVerifier>,
        public_reads: bool,
    ) -> Self {
        Self {
            admin_token,
            keys: Arc::new(keys),
            jwt: jwt.map(Arc::new),
            certificates: ClientCertificates::default(),
            public_reads,
        }
    }

    /// The same access, with the client certificates of
    /// `[[api.tls.clients]]` as credentials too.
    pub fn with_certificates(self, certificates: ClientCertificates) -> Self {
        Self {
            certificates,
            ..self
        }
    }

    /// Whether no credential is configured: then every caller may do
    /// everything (a loopback node for one user). A client certificate
    /// entry is a credential.
    pub fn is_open(&self) -> bool {
        self.admin_token.is_none()
            && self.jwt.is_none()
            && self.certificates.is_empty()
            && !self.keys.any()
    }

    /// Who a request without a bearer credential is, and what it may do:
    /// the entry its connection's client certificate matches, else
    /// anonymous. A certificate no entry matches proves nobody.
    pub(super) fn without_bearer(
        &self,
        certificate: Option<&PeerCertificate>,
    ) -> (Principal, Scopes) {
        let Some(PeerCertificate(presented)) = certificate else {
            return (Principal::Anonymous, self.anonymous_scopes());
        };
        match self.certificates.identify(presented) {
            Some((name, scopes)) => (
                Principal::Certificate {
                    name: name.to_owned(),
                },
                scopes,
            ),
            None => {
                tracing::debug!(
                    fingerprint = %ColonHex(presented.fingerprint()),
                    "a client certificate matches no api.tls.clients entry: anonymous"
                );
                (Principal::Anonymous, self.anonymous_scopes())
            }
        }
    }

    /// What a caller without credentials may do.
    pub(super) fn anonymous_scopes(&self) -> Scopes {
        if self.is_open() {
            Scopes::all()
        } else if self.public_reads {
            Scopes::from_iter([Scope::Read])
        } else {
            Scopes::NONE
        }
    }

    /// Who `token` proves, and what it may do.
    pub(super) async fn check(&self, token: &str) -> Result<(Principal, Scopes), Refusal> {
        if let Some(admin) = &self.admin_token {
            if bool::from(token.as_bytes().ct_eq(admin.expose().as_bytes())) {
                return Ok((Principal::AdminToken, Scopes::all()));
            }
        }
        if keys::looks_like_key(token) {
            return match self.keys.verify(token, crate::record::unix_now()) {
                KeyVerdict::Valid { id, scopes } => Ok((Principal::ApiKey { id }, scopes)),
                KeyVerdict::Unknown => Err(Refusal::new("unknown_key", "the API key is not valid")),
                KeyVerdict::Expired { id } => Err(Refusal::new(
                    "expired_key",
                    format!("the API key {id} has expired"),
                )),
                KeyVerdict::Revoked { id } => Err(Refusal::new(
                    "revoked_key",
                    format!("the API key {id} was revoked"),
                )),
            };
        }
        if let Some(jwt) = self
            .jwt
            .as_ref()
            .filter(|_| JwtVerifier::looks_like_jwt(token))
        {
            return match jwt.verify(token).await {
                Ok(grant) => Ok((
                    Principal::Jwt {
                        subject: grant.subject,
                    },
                    grant.scopes,
                )),
                Err(e) => Err(Refusal::new("bad_jwt", e.to_string())),
            };
        }
        Err(Refusal::new("bad_token", "the bearer token is not valid"))
    }
}

/// The scopes a request was granted, in its extensions (set by
/// `identify` in `api/auth.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Granted(pub Scopes);

/// Why credentials were refused: a metric label and a message for the
/// client (never the credential).
pub(super) struct Refusal {
    pub(super) reason: &'static str,
    pub(super) message: String,
}

impl Refusal {
    pub(super) fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}
