//! The extractors a handler takes to check who is asking beyond its
//! route's scope: [`Admin`] (the `admin` scope, a second check under
//! `/admin/`) and [`Operator`] (may see full crawl reports); and the 401
//! answer both the extractors and `auth.rs` give.

use std::convert::Infallible;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

use super::credentials::Granted;
use super::error::{ApiError, ErrorCode};
use super::state::AppState;
use crate::access::{Scope, Scopes};

/// The realm every `WWW-Authenticate` names.
const REALM: &str = "agentmesh";

/// A 401 answer: the error object and `WWW-Authenticate: Bearer`, with
/// `error="invalid_token"` when credentials were brought and refused
/// (RFC 6750, section 3).
pub(super) fn unauthorized(message: String, invalid_token: bool) -> Response {
    let mut response = ApiError::new(ErrorCode::Unauthorized, message).into_response();
    let challenge = if invalid_token {
        format!("Bearer realm=\"{REALM}\", error=\"invalid_token\"")
    } else {
        format!("Bearer realm=\"{REALM}\"")
    };
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_str(&challenge).expect("an ASCII challenge"),
    );
    response
}

/// A request allowed to administer the node (the `admin` scope). The
/// routes under `/admin/` are guarded by [`require_scope`](super::auth::require_scope) already; a
/// handler taking this refuses on its own too, should its route ever be
/// missing from the table.
pub(super) struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, Response> {
        let granted = parts
            .extensions
            .get::<Granted>()
            .map_or(Scopes::NONE, |g| g.0);
        if granted.allows(Scope::Admin) {
            Ok(Admin)
        } else {
            Err(unauthorized(
                "this route needs credentials with the 'admin' scope".into(),
                false,
            ))
        }
    }
}

/// Whether the caller may see a node's full crawl reports: it has the
/// `crawl` scope, on a node that checks credentials (a node without any
/// treats nobody as its operator).
pub(super) struct Operator(pub(super) bool);

impl FromRequestParts<AppState> for Operator {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Infallible> {
        let granted = parts
            .extensions
            .get::<Granted>()
            .map_or(Scopes::NONE, |g| g.0);
        Ok(Operator(
            !state.access().is_open() && granted.allows(Scope::Crawl),
        ))
    }
}
