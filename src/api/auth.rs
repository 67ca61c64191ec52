//! Who may do what (docs/protocol.md#api-access). Two layers and two
//! extractors:
//! - [`identify`], on every request: reads the bearer credential (the
//!   admin token, an API key, or a JWT from the configured issuer),
//!   refuses a bad one (401 with `WWW-Authenticate`, counted by reason
//!   and logged without the credential), and inserts the request's
//!   [`Caller`] and the scopes it was granted ([`Granted`]). Without a
//!   bearer credential, the connection's verified client certificate
//!   (`[api.tls]`, [`PeerCertificate`]) names the caller when it matches
//!   an `[[api.tls.clients]]` entry; else the caller is anonymous;
//! - [`require_scope`], on every matched route: looks the route up in
//!   [`ROUTE_SCOPES`] and refuses a caller without that scope (401 when
//!   it brought no credentials, 403 when they lack the scope);
//! - `Admin`, which a handler under `/admin/` takes as a second check,
//!   and `Operator`, which tells whether the caller may see a full crawl
//!   report (`api/guards.rs`).
//!
//! The credentials themselves and their checks are `api/credentials.rs`
//! ([`Access`](super::credentials::Access)).
//!
//! A node with no credentials configured at all (no admin token, no API
//! key, no JWT issuer, no client certificate entry) is open: every
//! caller has every scope. The node only runs so on a loopback address
//! (see `node`'s access step).

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::caller::{Caller, ClientAddr, Principal};
use super::credentials::{Granted, Refusal};
use super::error::{ApiError, ErrorCode};
use super::guards::unauthorized;
use super::state::AppState;
use super::tls::PeerCertificate;
use crate::access::{Scope, Scopes};

/// Lets one warning line through per second: a client sending bad
/// credentials as fast as it can must not flood the log.
struct OncePerSecond(std::sync::atomic::AtomicU64);

impl OncePerSecond {
    fn allow(&self) -> bool {
        use std::sync::atomic::Ordering;
        let now = crate::record::unix_now();
        let last = self.0.load(Ordering::Relaxed);
        now > last
            && self
                .0
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

static WARNINGS: OncePerSecond = OncePerSecond(std::sync::atomic::AtomicU64::new(0));

/// The layer that tells who is asking: inserts the request's [`Caller`]
/// and [`Granted`] scopes before any handler (the rate limits and the
/// audit log read them), or answers 401 to credentials that do not
/// check.
pub(super) async fn identify(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let access = state.access();
    let addr = req.extensions().get::<ClientAddr>().map(|a| a.0);
    let presented = req.headers().get(header::AUTHORIZATION).cloned();
    let (principal, scopes) = match presented {
        // An open node checks nothing: there is nothing to check against.
        Some(_) if access.is_open() => (Principal::Anonymous, Scopes::all()),
        // A bearer credential, when sent, says who the caller is; the
        // connection's certificate only when none is.
        None => access.without_bearer(req.extensions().get::<PeerCertificate>()),
        Some(value) => {
            let token = value
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim)
                .filter(|t| !t.is_empty());
            let checked = match token {
                Some(token) => access.check(token).await,
                None => Err(Refusal::new(
                    "malformed",
                    "credentials go in 'Authorization: Bearer <token>'",
                )),
            };
            match checked {
                Ok(granted) => granted,
                Err(refusal) => {
                    state.metrics().auth_failed(refusal.reason);
                    if WARNINGS.allow() {
                        tracing::warn!(
                            client = ?addr,
                            path = %req.uri().path(),
                            reason = refusal.reason,
                            "credentials refused (at most one such line a second; \
                             agentmesh_auth_failures_total counts them all)"
                        );
                    }
                    let request_id = req
                        .extensions()
                        .get::<super::observe::RequestId>()
                        .map(|r| r.as_str().to_owned());
                    let anonymous = Caller {
                        principal: Principal::Anonymous,
                        addr,
                    };
                    let event = super::audit::event_of(
                        &anonymous,
                        crate::store::AuditAction::AuthFailed,
                        req.uri().path(),
                        crate::store::AuditOutcome::Refused("Unauthorized".into()),
                        request_id,
                    );
                    super::audit::auth_failed(&state, event).await;
                    return unauthorized(refusal.message, true);
                }
            }
        }
    };
    record_key_changes(&state).await;
    req.extensions_mut().insert(Caller { principal, addr });
    req.extensions_mut().insert(Granted(scopes));
    next.run(req).await
}

/// Records in the audit log the changes `agentmesh keys` made to the key
/// file beside the running node (noticed at its next read of the file).
async fn record_key_changes(state: &AppState) {
    use crate::access::keys::KeyChange;
    use crate::store::{AuditAction, AuditEvent, AuditOutcome};
    for change in state.access().keys.take_changes() {
        let (action, target) = match change {
            KeyChange::Created { id, name } => (AuditAction::KeyCreate, format!("{id} ({name})")),
            KeyChange::Revoked { id } => (AuditAction::KeyRevoke, id),
        };
        let event = AuditEvent::new("key-file", action, target, AuditOutcome::Ok);
        if let Err(e) = state.registry().store().audit(event).await {
            tracing::error!(error = %e, "the audit log failed");
        }
    }
}

/// Which scope each route needs; `None`: anyone (the explorer's files,
/// the health check load balancers ask, the OpenAPI document). A route
/// missing here needs `admin` (and a test walks every route).
pub const ROUTE_SCOPES: &[(&str, &str, Option<Scope>)] = &[
    ("GET", "/", None),
    ("GET", "/ui/{asset}", None),
    ("GET", "/health", None),
    ("GET", "/openapi.json", None),
    ("GET", "/metrics", Some(Scope::Read)),
    ("GET", "/peers", Some(Scope::Read)),
    ("GET", "/log/checkpoint", Some(Scope::Read)),
    ("GET", "/log/key", Some(Scope::Read)),
    ("GET", "/log/equivocations", Some(Scope::Read)),
    ("GET", "/log/tile/{path}", Some(Scope::Read)),
    ("GET", "/log/proof/inclusion", Some(Scope::Read)),
    ("GET", "/log/proof/consistency", Some(Scope::Read)),
    ("GET", "/agents", Some(Scope::Read)),
    ("POST", "/agents", Some(Scope::Register)),
    ("POST", "/agents/search", Some(Scope::Read)),
    ("GET", "/agents/{id}", Some(Scope::Read)),
    ("PUT", "/agents/{id}", Some(Scope::Register)),
    ("DELETE", "/agents/{id}", Some(Scope::Register)),
    ("GET", "/agents/{id}/summary", Some(Scope::Read)),
    ("GET", "/agents/{id}/proof", Some(Scope::Read)),
    ("GET", "/agents/{id}/suspension", Some(Scope::Read)),
    ("GET", "/agents/{id}/visibility", Some(Scope::Read)),
    ("PUT", "/agents/{id}/visibility", Some(Scope::Register)),
    ("POST", "/agents/{id}/invoke", Some(Scope::Invoke)),
    ("POST", "/agents/{id}/operations/{op}", Some(Scope::Invoke)),
    ("POST", "/resolve", Some(Scope::Read)),
    ("GET", "/.well-known/ard.json", None),
    ("GET", "/.well-known/ai-catalog.json", None),
    ("POST", "/ard/search", Some(Scope::Read)),
    ("POST", "/ard/explore", Some(Scope::Read)),
    ("GET", "/ard/agents", Some(Scope::Read)),
    ("GET", "/ard/agents/{identifier}", Some(Scope::Read)),
    ("GET", "/v0.1/servers", Some(Scope::Read)),
    (
        "GET",
        "/v0.1/servers/{serverName}/versions",
        Some(Scope::Read),
    ),
    (
        "GET",
        "/v0.1/servers/{serverName}/versions/{version}",
        Some(Scope::Read),
    ),
    ("POST", "/crawl", Some(Scope::Crawl)),
    ("GET", "/crawl/{domain}", Some(Scope::Read)),
    ("POST", "/records", Some(Scope::Records)),
    ("POST", "/admin/import", Some(Scope::Import)),
    ("PUT", "/admin/agents/{id}/suspension", Some(Scope::Admin)),
    (
        "DELETE",
        "/admin/agents/{id}/suspension",
        Some(Scope::Admin),
    ),
    ("GET", "/admin/suspensions", Some(Scope::Admin)),
    ("POST", "/admin/agents/{id}/transfer", Some(Scope::Admin)),
    ("GET", "/admin/audit", Some(Scope::Admin)),
    ("GET", "/admin/audit/verify", Some(Scope::Admin)),
    ("GET", "/admin/audit/{seq}", Some(Scope::Admin)),
    ("GET", "/admin/export", Some(Scope::Admin)),
];

/// The scope a route needs: its [`ROUTE_SCOPES`] entry, else `admin`.
pub fn route_scope(method: &Method, route: &str) -> Option<Scope> {
    // HEAD is answered by the GET route.
    let method = if method == Method::HEAD {
        "GET"
    } else {
        method.as_str()
    };
    // A wildcard segment (`{*path}`, as the router names it) is listed
    // as the OpenAPI document names it (`{path}`).
    let route = route.replace("{*", "{");
    ROUTE_SCOPES
        .iter()
        .find(|(m, r, _)| *m == method && *r == route)
        .map_or(Some(Scope::Admin), |(_, _, scope)| *scope)
}

/// The layer on every matched route: refuses a caller without the
/// route's scope.
pub(super) async fn require_scope(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned())
        .unwrap_or_default();
    let Some(scope) = route_scope(req.method(), &route) else {
        return next.run(req).await;
    };
    let granted = req
        .extensions()
        .get::<Granted>()
        .map_or(Scopes::NONE, |g| g.0);
    if granted.allows(scope) {
        return next.run(req).await;
    }
    let caller = Caller::of(req.extensions());
    if caller.principal == Principal::Anonymous {
        unauthorized(
            format!(
                "{} {route} needs credentials with the '{scope}' scope: \
                 'Authorization: Bearer <API key, JWT or admin token>'",
                req.method()
            ),
            false,
        )
    } else {
        ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "{} {route} needs the '{scope}' scope; {} has {granted}",
                req.method(),
                caller.principal
            ),
        )
        .with_status(StatusCode::FORBIDDEN)
        .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::certs::ClientCertificates;
    use crate::access::keys::KeyRing;
    use crate::api::credentials::Access;
    use std::sync::Arc;

    #[test]
    fn a_route_missing_from_the_table_needs_admin() {
        assert_eq!(route_scope(&Method::GET, "/nowhere"), Some(Scope::Admin));
        assert_eq!(route_scope(&Method::HEAD, "/agents"), Some(Scope::Read));
        assert_eq!(route_scope(&Method::GET, "/health"), None);
    }

    #[test]
    fn a_certificate_entry_is_a_credential_and_names_the_caller_it_matches() {
        use crate::access::certs::Presented;
        use crate::config::TlsClientConfig;
        let dir = tempfile::tempdir().unwrap();
        let open = Access::new(None, KeyRing::in_dir(dir.path()), None, true);
        assert!(open.is_open());
        let presented = Presented::from_der(b"not even a certificate");
        let digest = hex::encode(presented.fingerprint());
        let entries = ClientCertificates::from_config(&[TlsClientConfig {
            name: "peer".into(),
            subject: None,
            fingerprint: Some(digest),
            scopes: vec!["register".into()],
        }])
        .unwrap();
        let access =
            Access::new(None, KeyRing::in_dir(dir.path()), None, true).with_certificates(entries);
        assert!(!access.is_open(), "an entry is a credential");
        let known = PeerCertificate(Arc::new(presented));
        assert_eq!(
            access.without_bearer(Some(&known)),
            (
                Principal::Certificate {
                    name: "peer".into()
                },
                Scopes::from_iter([Scope::Register])
            )
        );
        assert_eq!(
            access.without_bearer(Some(&known)).0.to_string(),
            "cert:peer"
        );
        let stranger = PeerCertificate(Arc::new(Presented::from_der(b"another")));
        let anonymous = (Principal::Anonymous, Scopes::from_iter([Scope::Read]));
        assert_eq!(access.without_bearer(Some(&stranger)), anonymous);
        assert_eq!(access.without_bearer(None), anonymous);
    }
}
