//! Extractors whose rejections are our errors, not axum's plain text.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// `axum::Json`, but a malformed body, a wrong content type or an oversized body is answered with
/// our error body (400, 415 or 413 `validation_error`), with the parser's message.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<S, T> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(rejection_to_error(rejection)),
        }
    }
}

fn rejection_to_error(rejection: JsonRejection) -> ApiError {
    let status = rejection.status();
    match rejection {
        JsonRejection::JsonDataError(e) => {
            ApiError::validation(format!("the body does not match the schema: {}", e.body_text()))
        }
        JsonRejection::JsonSyntaxError(e) => {
            ApiError::validation(format!("malformed JSON: {}", e.body_text()))
        }
        JsonRejection::MissingJsonContentType(_) => {
            ApiError::validation("expected Content-Type: application/json")
                .with_status(StatusCode::UNSUPPORTED_MEDIA_TYPE)
        }
        _ if status == StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::validation("request body is too large").with_status(StatusCode::PAYLOAD_TOO_LARGE)
        }
        other => ApiError::validation(other.body_text()),
    }
}

/// A wrapper of an axum parts extractor whose rejection is answered 400 `validation_error` in our
/// error body, the parser's message after `what`.
macro_rules! parts_extractor {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name<T>(pub T);

        impl<S, T> axum::extract::FromRequestParts<S> for $name<T>
        where
            T: DeserializeOwned + Send,
            S: Send + Sync,
        {
            type Rejection = ApiError;

            async fn from_request_parts(
                parts: &mut axum::http::request::Parts,
                state: &S,
            ) -> Result<Self, Self::Rejection> {
                match axum::extract::$name::<T>::from_request_parts(parts, state).await {
                    Ok(axum::extract::$name(value)) => Ok(Self(value)),
                    Err(rejection) => Err(ApiError::validation(format!(
                        concat!($what, " is not valid: {}"),
                        rejection.body_text()
                    ))),
                }
            }
        }
    };
}

parts_extractor!(
    /// `axum::extract::Path`, but a path segment that does not parse (an id that is not a UUID)
    /// is answered 400 `validation_error` in our error body, naming what could not be read.
    Path,
    "the path"
);

parts_extractor!(
    /// `axum::extract::Query`, but a query string that does not match (a repeated or unreadable
    /// parameter) is answered 400 `validation_error` in our error body, with the parser's message.
    Query,
    "the query string"
);
