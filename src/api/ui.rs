//! The web explorer (`GET /`, docs/protocol.md#api-health): plain HTML, CSS and
//! JavaScript compiled into the binary (no build step, no CDN, no
//! external fonts), talking to this node's own API. It reads only what
//! needs no admin token, and never holds one.
//!
//! Every asset goes out with a Content Security Policy that allows only
//! this origin's scripts and styles and no inline ones, so text from an
//! agent's document can never run as script (the script writes it with
//! `textContent`, never as markup).

use axum::extract::Path;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

use super::error::{ApiError, ErrorBody, ErrorCode};

const INDEX: &str = include_str!("ui/index.html");
const APP_JS: &str = include_str!("ui/app.js");
const STYLE_CSS: &str = include_str!("ui/style.css");

/// The policy every explorer asset is served with.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                   form-action 'self'; frame-ancestors 'none'";

fn serve(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CSP),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

/// `GET /`: the explorer's page.
/// `GET /`: the explorer's page.
#[utoipa::path(get, path = "/", tag = "explorer",
    responses((status = 200, description = "The explorer", body = String,
        content_type = "text/html; charset=utf-8")))]
pub(super) async fn index() -> Response {
    serve(INDEX, "text/html; charset=utf-8")
}

/// `GET /ui/{asset}`: its script and style sheet.
/// `GET /ui/{asset}`: the explorer's script and style sheet.
#[utoipa::path(get, path = "/ui/{asset}", tag = "explorer",
    params(("asset" = String, Path, pattern = r"^(app\.js|style\.css)$",
        description = "`app.js` or `style.css`")),
    responses(
        (status = 200, description = "The asset", content(
            (String = "text/javascript; charset=utf-8"),
            (String = "text/css; charset=utf-8"),
        )),
        (status = 404, description = "No such asset", body = ErrorBody),
    ))]
pub(super) async fn asset(Path(asset): Path<String>) -> Result<Response, ApiError> {
    match asset.as_str() {
        "app.js" => Ok(serve(APP_JS, "text/javascript; charset=utf-8")),
        "style.css" => Ok(serve(STYLE_CSS, "text/css; charset=utf-8")),
        other => Err(ApiError::new(
            ErrorCode::NotFound,
            format!("no explorer asset {other:?}"),
        )),
    }
}
