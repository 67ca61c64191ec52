//! Who a registration is for (docs/protocol.md#visibility): the
//! [`Reader`] extractor, the caller as the entitlements see it; the
//! `visibility` member a registration may carry; and
//! `GET`/`PUT /agents/{id}/visibility`, for the agent's owner and the
//! operator.

use std::convert::Infallible;

use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::caller::Caller;
use super::credentials::Granted;
use super::error::{ApiError, ErrorBody, ErrorCode, NoRoom, NotJson, StoreFailed};
use super::json::JsonBody;
use super::state::AppState;
use crate::access::{Scope, Scopes};
use crate::store::{
    Audience, Entitlement, Viewer, Visibility, MAX_ENTITLED_CLIENTS, MAX_ENTITLED_SCOPES,
};

/// The caller as entitlements see it: its principal, its scopes, and
/// whether it is the operator (the `admin` scope).
#[derive(Debug, Clone)]
pub(super) struct Reader(pub(super) Viewer);

impl Reader {
    /// Whom a list or a search of this caller answers.
    pub(super) fn audience(&self) -> Audience {
        Audience::Viewer(self.0.clone())
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Reader {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        let granted = parts
            .extensions
            .get::<Granted>()
            .map_or(Scopes::NONE, |g| g.0);
        Ok(Reader(Viewer {
            principal: Caller::of(&parts.extensions).principal.to_string(),
            scopes: granted.iter().map(|s| s.as_str().to_owned()).collect(),
            operator: granted.allows(Scope::Admin),
        }))
    }
}

/// What a client asks for: `"public"`, `"unlisted"`, `"private"`, or
/// an object naming the clients and scopes a private agent is shown to.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub(super) enum AskedVisibility {
    /// Only the visibility.
    Name(Visibility),
    /// The visibility with whom it is for.
    Full(VisibilityBody),
}

/// A visibility with the clients and scopes a private agent is shown to.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct VisibilityBody {
    /// `public`, `unlisted` or `private`.
    visibility: Visibility,
    /// Principals a private agent is shown to: `key:<id>`,
    /// `jwt:<subject>`, `cert:<name>` (at most 64).
    #[serde(default)]
    clients: Vec<String>,
    /// Scopes whose holders a private agent is shown to (at most 16).
    #[serde(default)]
    scopes: Vec<String>,
}

impl AskedVisibility {
    /// The entitlement asked for (its owner is the registry's to set),
    /// each problem at its pointer under `/visibility`.
    fn into_entitlement(self) -> Result<Entitlement, ApiError> {
        let ent = match self {
            Self::Name(visibility) => Entitlement {
                visibility,
                ..Entitlement::default()
            },
            Self::Full(b) => Entitlement {
                visibility: b.visibility,
                clients: b.clients,
                scopes: b.scopes,
                owner: None,
            },
        };
        let mut problems = ent.problems();
        for (i, name) in ent.scopes.iter().enumerate() {
            if let Err(e) = name.parse::<Scope>() {
                problems.push((format!("/visibility/scopes/{i}"), e.to_string()));
            }
        }
        if problems.is_empty() {
            Ok(ent)
        } else {
            Err(invalid(problems))
        }
    }
}

fn invalid(problems: Vec<(String, String)>) -> ApiError {
    let details: Vec<Value> = problems
        .iter()
        .map(|(field, message)| json!({"field": field, "message": message}))
        .collect();
    let message = match problems.as_slice() {
        [(field, message)] => format!("invalid visibility: {field} {message}"),
        many => format!("invalid visibility ({} problems)", many.len()),
    };
    ApiError::new(ErrorCode::InvalidInput, message).with_details(Value::Array(details))
}

/// Takes the `visibility` member out of a registration (it is the
/// node's to keep, not part of the agent's document).
///
/// # Errors
/// 400 for a member that is not a visibility.
pub(super) fn take_visibility(doc: &mut Value) -> Result<Option<Entitlement>, ApiError> {
    let Some(member) = doc.as_object_mut().and_then(|o| o.remove("visibility")) else {
        return Ok(None);
    };
    let asked: AskedVisibility = serde_json::from_value(member).map_err(|e| {
        invalid(vec![(
            "/visibility".to_owned(),
            format!(
                "{e}: expected \"public\", \"unlisted\", \"private\" or \
                 {{\"visibility\", \"clients\", \"scopes\"}} (at most \
                 {MAX_ENTITLED_CLIENTS} clients and {MAX_ENTITLED_SCOPES} scopes)"
            ),
        )])
    })?;
    asked.into_entitlement().map(Some)
}

/// Who may see and change an agent registered here.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct VisibilityView {
    /// The agent.
    id: String,
    /// `public`, `unlisted` or `private`.
    visibility: Visibility,
    /// The principals a private agent is shown to.
    clients: Vec<String>,
    /// The scopes whose holders a private agent is shown to.
    scopes: Vec<String>,
    /// Who registered it (`key:<id>`, `jwt:<subject>`, `admin-token`,
    /// `anonymous` on an open node); none for an imported agent.
    owner: Option<String>,
}

impl VisibilityView {
    fn new(id: String, e: Entitlement) -> Self {
        Self {
            id,
            visibility: e.visibility,
            clients: e.clients,
            scopes: e.scopes,
            owner: e.owner,
        }
    }
}

/// `GET /agents/{id}/visibility`: who may see and change an agent
/// registered here, for its owner and the operator.
#[utoipa::path(get, path = "/agents/{id}/visibility", tag = "agents",
    params(("id" = String, Path, description = "Agent id")),
    responses(
        (status = 200, description = "Its visibility and owner", body = VisibilityView),
        (status = 403, description = "Another client registered the agent", body = ErrorBody),
        (status = 404, description = "Not registered here, or not shown to this client", body = ErrorBody),
        StoreFailed,
    ))]
pub(super) async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Reader(who): Reader,
) -> Result<Json<VisibilityView>, ApiError> {
    let ent = state.registry().entitlement_for(&id, &who).await?;
    Ok(Json(VisibilityView::new(id, ent)))
}

/// `PUT /agents/{id}/visibility`: changes who may see an agent registered
/// here, for its owner and the operator. Its document is signed again
/// under the new visibility: an agent made public goes to the mesh. A
/// public agent cannot be hidden again (peers hold it): delete it and
/// register it again.
#[utoipa::path(put, path = "/agents/{id}/visibility", tag = "agents",
    params(("id" = String, Path, description = "Agent id")),
    request_body(content = AskedVisibility,
        description = "`\"public\"`, `\"unlisted\"`, `\"private\"`, or `{\"visibility\", \"clients\", \"scopes\"}`"),
    responses(
        (status = 200, description = "Its visibility now", body = VisibilityView),
        (status = 400, description = "Not a visibility (every problem in `details`)", body = ErrorBody),
        (status = 403, description = "Another client registered the agent", body = ErrorBody),
        (status = 404, description = "Not registered here, or not shown to this client", body = ErrorBody),
        (status = 409, description = "The agent is public and peers hold it", body = ErrorBody),
        NotJson,
        StoreFailed,
        NoRoom,
    ))]
pub(super) async fn put(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Reader(who): Reader,
    JsonBody(asked): JsonBody<Value>,
) -> Result<Json<VisibilityView>, ApiError> {
    let mut wrapped = json!({ "visibility": asked });
    let asked = take_visibility(&mut wrapped)?.expect("the member was just put there");
    let ent = state.registry().set_visibility(&id, &who, asked).await?;
    Ok(Json(VisibilityView::new(id, ent)))
}
