//! [`JsonBody`]: a JSON request body whose refusal is the API's error
//! object, for every handler that reads JSON.

use axum::extract::{FromRequest, Request};
use axum::Json;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// A JSON body, read by axum's [`Json`]: a malformed body or one of the
/// wrong shape is a 400, a body over the limit a 413, one that is not
/// `application/json` a 415, each as the error object (see
/// `From<JsonRejection> for ApiError`).
pub(super) struct JsonBody<T>(pub(super) T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let Json(value) = Json::<T>::from_request(req, state).await?;
        Ok(Self(value))
    }
}
