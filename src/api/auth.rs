//! Who may write: the node's admin token (`api.admin_token`), asked as
//! `Authorization: Bearer <token>` and compared in constant time. Two
//! extractors carry it to the handlers: [`Admin`], which refuses a
//! request without the token (401, the error object), and [`Operator`],
//! which only tells whether the request carries it (what a full crawl
//! report is shown to).

use std::convert::Infallible;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};

use super::caller::{Caller, ClientAddr, Principal};
use super::error::{ApiError, ErrorCode};
use super::state::AppState;

/// The layer that tells who is asking: inserts the request's [`Caller`]
/// (before any handler, the rate limits and the audit log read it).
pub(super) async fn identify(
    axum::extract::State(state): axum::extract::State<AppState>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let principal =
        if state.config().admin_token.is_some() && authorize(&state, req.headers()).is_ok() {
            Principal::AdminToken
        } else {
            Principal::Anonymous
        };
    let addr = req.extensions().get::<ClientAddr>().map(|a| a.0);
    req.extensions_mut().insert(Caller { principal, addr });
    next.run(req).await
}

/// A request allowed to write: it carries the admin token, or the node
/// has none. A handler taking it answers 401 without running when the
/// token is missing or wrong.
pub(super) struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        authorize(state, &parts.headers).map(|()| Admin)
    }
}

/// Whether the request carries this node's admin token, when one is
/// configured (a node without a token treats nobody as its operator).
pub(super) struct Operator(pub(super) bool);

impl FromRequestParts<AppState> for Operator {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Infallible> {
        let operator =
            state.config().admin_token.is_some() && authorize(state, &parts.headers).is_ok();
        Ok(Operator(operator))
    }
}

/// Checks the bearer token of a request against the node's, when it has
/// one.
fn authorize(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(token) = &state.config().admin_token else {
        return Ok(());
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::Unauthorized,
                "this node requires 'Authorization: Bearer <token>' for writes",
            )
        })?;
    if bool::from(subtle::ConstantTimeEq::ct_eq(
        presented.as_bytes(),
        token.as_bytes(),
    )) {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::Unauthorized,
            "the bearer token is not valid",
        ))
    }
}
