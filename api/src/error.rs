//! The error model: one table of codes and HTTP statuses, one body shape.
//!
//! Handlers return [`ApiError`]. Its response carries the error in an extension and no body yet;
//! the request middleware ([`crate::middleware`]) renders the body with the request id, so every
//! error (a handler's, a rejected extractor's, axum's own 404/405, a caught panic) has
//! `{code, message, request_id, details?}`. Internal errors are logged once with their cause chain
//! and never shown to the client.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// The error codes of the API (docs/errors.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Invalid payload or fiscal rule not met; also idempotency-key reuse (409) and an oversized
    /// body (413).
    ValidationError,
    /// A company, branch, issuance point, channel, timbrado or numbering range is missing.
    ConfigurationError,
    /// Certificate missing, invalid or expired.
    CertificateError,
    /// No or invalid credentials.
    AuthenticationError,
    /// Credentials valid, but not allowed to do this.
    PermissionError,
    /// Resource not found (also: a path or method the API does not have).
    NotFound,
    /// The resource's state does not allow the operation.
    ConflictError,
    /// The request limit was exceeded.
    RateLimitError,
    /// The external channel or provider reported a temporary failure.
    UpstreamError,
    /// Internal failure.
    InternalError,
    /// A dependency (the database) is not ready.
    ReadinessCheckFailed,
}

/// The whole table: code, its default HTTP status, and what it means. `docs/errors.md` is
/// checked against it by a test.
pub const ERROR_TABLE: [(ErrorCode, u16, &str); 11] = [
    (
        ErrorCode::ValidationError,
        400,
        "invalid payload or fiscal rule not met (409 for Idempotency-Key reuse with another body, 413 for an oversized body)",
    ),
    (
        ErrorCode::ConfigurationError,
        400,
        "a company, branch, issuance point, channel, timbrado or numbering range is missing or ambiguous",
    ),
    (
        ErrorCode::CertificateError,
        400,
        "certificate missing, invalid or expired",
    ),
    (ErrorCode::AuthenticationError, 401, "no or invalid credentials"),
    (
        ErrorCode::PermissionError,
        403,
        "the credentials do not allow this operation",
    ),
    (
        ErrorCode::NotFound,
        404,
        "resource not found (405 for a method the path does not have)",
    ),
    (
        ErrorCode::ConflictError,
        409,
        "the resource's state does not allow the operation",
    ),
    (
        ErrorCode::RateLimitError,
        429,
        "the request limit was exceeded (with Retry-After)",
    ),
    (
        ErrorCode::UpstreamError,
        502,
        "the channel or provider failed (504 when it timed out)",
    ),
    (
        ErrorCode::InternalError,
        500,
        "internal failure (no internals in the message)",
    ),
    (
        ErrorCode::ReadinessCheckFailed,
        503,
        "a dependency (the database) is not ready",
    ),
];

impl ErrorCode {
    /// The wire name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::ValidationError => "validation_error",
            Self::ConfigurationError => "configuration_error",
            Self::CertificateError => "certificate_error",
            Self::AuthenticationError => "authentication_error",
            Self::PermissionError => "permission_error",
            Self::NotFound => "not_found",
            Self::ConflictError => "conflict_error",
            Self::RateLimitError => "rate_limit_error",
            Self::UpstreamError => "upstream_error",
            Self::InternalError => "internal_error",
            Self::ReadinessCheckFailed => "readiness_check_failed",
        }
    }

    /// The default HTTP status, from [`ERROR_TABLE`].
    pub fn status(&self) -> StatusCode {
        let code = ERROR_TABLE
            .iter()
            .find(|(c, _, _)| c == self)
            .map_or(500, |(_, status, _)| *status);
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

/// The error body of every error response.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorBody {
    /// Stable error code.
    pub code: ErrorCode,
    /// Human-readable explanation, safe to show.
    pub message: String,
    /// The request's id (also in the `X-Request-Id` header).
    pub request_id: String,
    /// Code-specific details (validation issues, rate-limit bucket, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

/// An error a handler returns.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// Code.
    pub code: ErrorCode,
    /// HTTP status (the code's default unless a variant such as 409/413 applies).
    pub status: StatusCode,
    /// Message for the client.
    pub message: String,
    /// Details for the client.
    pub details: Option<Value>,
    /// Extra response headers (`WWW-Authenticate`, `Retry-After`).
    pub headers: Vec<(axum::http::HeaderName, axum::http::HeaderValue)>,
}

impl ApiError {
    /// An error with the code's default status.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            status: code.status(),
            message: message.into(),
            details: None,
            headers: Vec::new(),
        }
    }

    /// The same error with a response header.
    pub fn with_header(mut self, name: axum::http::HeaderName, value: &'static str) -> Self {
        self.headers
            .push((name, axum::http::HeaderValue::from_static(value)));
        self
    }

    /// The same error with a computed response header.
    pub fn with_header_value(mut self, name: axum::http::HeaderName, value: axum::http::HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    /// 429 `rate_limit_error` for a spent bucket (`Retry-After`).
    pub fn rate_limited(
        decision: &kuatia_application::rate_limit::Decision,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Self {
        let retry_after = (decision.reset_at - now).num_seconds().max(1);
        Self::new(
            ErrorCode::RateLimitError,
            "too many requests; retry after the window resets",
        )
        .with_details(serde_json::json!({
            "bucket": "requests_minute",
            "limit": decision.limit,
            "reset_at": decision.reset_at,
        }))
        .with_header_value(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from(retry_after),
        )
    }

    /// 401 `authentication_error` with `WWW-Authenticate: Bearer`.
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::AuthenticationError, message)
            .with_header(axum::http::header::WWW_AUTHENTICATE, "Bearer")
    }

    /// 403 `permission_error`.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::PermissionError, message)
    }

    /// The same error with another status (409 and 413 variants of `validation_error`, 504).
    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// The same error with details.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// 400 `validation_error`.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::ValidationError, message)
    }

    /// 400 `validation_error` for one field, with `details.errors` as the contract shapes it.
    pub fn invalid_field(field: &str, code: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self::validation(format!("{field}: {message}")).with_details(serde_json::json!({
            "errors": [{"field": field, "code": code, "message": message}]
        }))
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    /// 500 `internal_error`: logs the cause once, shows the client nothing of it.
    pub fn internal(cause: &(dyn std::error::Error + 'static)) -> Self {
        let mut chain = cause.to_string();
        let mut source = cause.source();
        while let Some(s) = source {
            chain.push_str(": ");
            chain.push_str(&s.to_string());
            source = s.source();
        }
        tracing::error!(error = %chain, "internal error");
        Self::new(
            ErrorCode::InternalError,
            "internal error; quote the request_id when reporting it",
        )
    }

    /// The body, once the request id is known.
    pub fn body(&self, request_id: &str) -> ErrorBody {
        ErrorBody {
            code: self.code,
            message: self.message.clone(),
            request_id: request_id.to_owned(),
            details: self.details.clone(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = self.status.into_response();
        for (name, value) in &self.headers {
            response.headers_mut().insert(name.clone(), value.clone());
        }
        response.extensions_mut().insert(self);
        response
    }
}

impl From<kuatia_application::event_store::StoreError> for ApiError {
    fn from(err: kuatia_application::event_store::StoreError) -> Self {
        Self::internal(&err)
    }
}

/// Maps a bare status produced outside our handlers (axum's 404/405, a layer's 413/408) to our
/// error.
pub fn from_status(status: StatusCode) -> ApiError {
    match status {
        StatusCode::NOT_FOUND => ApiError::not_found("no such resource"),
        StatusCode::METHOD_NOT_ALLOWED => {
            ApiError::not_found("this path does not support the method").with_status(status)
        }
        StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::validation("request body is too large").with_status(status)
        }
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            ApiError::validation("expected Content-Type: application/json").with_status(status)
        }
        s if s.is_server_error() => ApiError::new(ErrorCode::InternalError, "internal error"),
        s => ApiError::validation(s.canonical_reason().unwrap_or("bad request")).with_status(s),
    }
}
