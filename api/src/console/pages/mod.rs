//! The console's pages, one module per area; each calls the REST API's handlers or the
//! application's use cases with the console's [`Caller`](crate::auth::Caller).

pub mod access;
pub mod account;
pub mod audit;
pub mod auth;
pub mod document;
pub mod documents;
pub mod home;
pub mod issue;
pub mod operators;
pub mod sandbox;
pub mod setup;
pub mod webhooks;

use askama::Template;
use axum::response::Response;
use serde_json::Value;

use super::Chrome;
use super::i18n::Tr;
use crate::error::ApiError;

/// A form with only its token.
#[derive(Debug, serde::Deserialize)]
pub struct TokenForm {
    /// The session's form token.
    pub csrf: Option<String>,
}

/// A refusal inside the frame.
#[derive(Template)]
#[template(path = "console/error.html")]
pub struct ErrorPage {
    pub chrome: Chrome,
    pub title: String,
    pub message: String,
}

/// A refusal before there is a frame (no session, no tenant).
#[derive(Template)]
#[template(path = "console/plain.html")]
pub struct PlainPage {
    pub tr: Tr,
    pub title: String,
    pub message: String,
}

/// The body of an API answer, as JSON (the console reads what the API would have sent).
pub(crate) async fn json_of(response: Response) -> Result<Value, ApiError> {
    let bytes = axum::body::to_bytes(response.into_body(), 16 * 1024 * 1024)
        .await
        .map_err(|e| ApiError::internal(&e))?;
    serde_json::from_slice(&bytes).map_err(|e| ApiError::internal(&e))
}

/// A refusal's issues (`details.errors`), each as `field: message`; the refusal's message alone
/// when it names none.
pub(crate) fn issues_said(e: &ApiError) -> Vec<String> {
    let listed: Vec<String> = e
        .details
        .as_ref()
        .and_then(|d| d["errors"].as_array())
        .into_iter()
        .flatten()
        .map(|i| {
            format!(
                "{}: {}",
                i["field"].as_str().unwrap_or("$"),
                i["message"].as_str().unwrap_or_default()
            )
        })
        .collect();
    if listed.is_empty() {
        vec![e.message.clone()]
    } else {
        listed
    }
}
