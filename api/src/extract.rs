//! Extractors whose rejections are our errors, not axum's plain text.

use axum::body::Bytes;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ApiError;

/// `axum::Json`, but a malformed body, a wrong content type or an oversized body is answered with
/// our error body (400, 415 or 413 `validation_error`), with the parser's message; a string
/// holding U+0000 is refused too ([`refuse_nul`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<S, T> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json(req.headers()) {
            return Err(ApiError::validation("expected Content-Type: application/json")
                .with_status(StatusCode::UNSUPPORTED_MEDIA_TYPE));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(body_error)?;
        refuse_nul(&bytes)?;
        match axum::Json::<T>::from_bytes(&bytes) {
            Ok(axum::Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(rejection_to_error(rejection)),
        }
    }
}

/// A body that could not be read: too large (413), not received within the body deadline (408,
/// `KUATIA_BODY_READ_TIMEOUT_SECS`), or cut (400).
pub fn body_error(e: axum::extract::rejection::BytesRejection) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::validation("request body is too large").with_status(StatusCode::PAYLOAD_TOO_LARGE);
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(c) = cause {
        if c.is::<tower_http::timeout::TimeoutError>() {
            return ApiError::validation("the request body did not arrive in time")
                .with_status(StatusCode::REQUEST_TIMEOUT);
        }
        cause = c.source();
    }
    ApiError::validation(format!("unreadable body: {}", e.body_text()))
}

/// Whether the request says its body is JSON (`application/json`, `application/*+json`).
pub fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let v = v.trim().to_ascii_lowercase();
            v.starts_with("application/json") || (v.starts_with("application/") && v.contains("+json"))
        })
}

/// Refuses a JSON body with a string (or key) holding U+0000 with 400 `validation_error` naming
/// where: PostgreSQL's text cannot hold it, so SQLite would keep what PostgreSQL refuses, and
/// no field of the contract needs it. JSON can write it only as the escape `\u0000`, so bodies
/// without that escape are not parsed again.
pub fn refuse_nul(body: &[u8]) -> Result<(), ApiError> {
    let escaped = body
        .windows(6)
        .any(|w| w[0] == b'\\' && w[1] == b'u' && &w[2..] == b"0000");
    if !escaped {
        return Ok(());
    }
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return Ok(());
    };
    match nul_path(&value, String::new()) {
        Some(path) => Err(ApiError::invalid_field(
            if path.is_empty() { "body" } else { path.as_str() },
            "invalid_character",
            "text may not contain the NUL character (U+0000)",
        )),
        None => Ok(()),
    }
}

/// The path (`buyer.name`, `items[0].description`) of the first string or key holding U+0000.
fn nul_path(value: &Value, at: String) -> Option<String> {
    let join = |key: &str| {
        if at.is_empty() {
            key.to_owned()
        } else {
            format!("{at}.{key}")
        }
    };
    match value {
        Value::String(s) => s.contains('\0').then_some(at),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| nul_path(v, format!("{at}[{i}]"))),
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            if k.contains('\0') {
                Some(join(&k.replace('\0', "")))
            } else {
                nul_path(v, join(k))
            }
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_characters_are_found_where_they_are_and_nowhere_else() {
        let at = |body: &str| refuse_nul(body.as_bytes()).err().map(|e| e.message);
        assert!(at(r#"{"external_id": "A\u0000B"}"#).is_some_and(|e| e.contains("external_id")));
        assert!(at(r#"{"items": [{"d": "x"}, {"d": "\u0000"}]}"#).is_some_and(|e| e.contains("items[1].d")));
        assert!(at(r#"{"metadata": {"k\u0000": "v"}}"#).is_some_and(|e| e.contains("metadata.k")));
        // An escaped backslash followed by "u0000" is not a NUL.
        assert_eq!(at(r#"{"a": "\\u0000"}"#), None);
        assert_eq!(at(r#"{"a": "plain"}"#), None);
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

/// The field serde named in an "unknown field `x`, expected …" error.
fn unknown_field(message: &str) -> Option<&str> {
    let rest = &message[message.find("unknown field `")? + "unknown field `".len()..];
    Some(&rest[..rest.find('`')?])
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
                    Err(rejection) => {
                        let text = rejection.body_text();
                        // A struct with `#[serde(deny_unknown_fields)]` refuses a parameter it
                        // does not know: name it as the field in error.
                        if let Some(name) = unknown_field(&text) {
                            let expected = text
                                .find("expected ")
                                .map(|at| format!(" ({})", &text[at..]))
                                .unwrap_or_default();
                            return Err(ApiError::invalid_field(
                                name,
                                "unknown_parameter",
                                format!("not a parameter of this route{expected}"),
                            ));
                        }
                        Err(ApiError::validation(format!(
                            concat!($what, " is not valid: {}"),
                            text
                        )))
                    }
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
