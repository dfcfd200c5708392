//! `POST /v1/sandbox/preview` (`docs/sandbox.md`). The preview
//! itself is `crate::sandbox`; this handler picks whose configuration it runs under and counts
//! the request.
//!
//! Without credentials the endpoint is open and rate-limited per IP ([`PerIp`]). With an API key
//! or a console session (and `X-Tenant-Id`) it runs with the caller's configuration: the caller
//! must hold [`USE_SANDBOX`], and the request counts against the key or user like any tenant
//! request. Invalid credentials are refused (401), never silently ignored.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use kuatia_domain::access::Permission;
use kuatia_domain::document::canonical::{self, CanonicalDocument};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::auth::{Caller, SESSION_COOKIE};
use crate::error::{ApiError, ErrorBody};
use crate::rate_limit::PerIp;
use crate::sandbox::{self, Mode, PreviewResponse};
use crate::state::AppState;

/// Needed by `POST /v1/sandbox/preview` when called with credentials.
pub const USE_SANDBOX: Permission = Permission::UseSandbox;

/// The body of a preview: the canonical document's fields plus `mode`.
/// The body itself is optional: empty, or with only `mode`, it previews the sample invoice,
/// issued now. For the OpenAPI document only; the handler reads the body itself.
#[derive(Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct SandboxPreviewRequest {
    /// `demo_simulated` (default; `autoimpresor_test` when the document names the autoimpresor
    /// channel), `sifen_dev` or `autoimpresor_test`.
    mode: Option<Mode>,
    /// The document.
    #[serde(flatten)]
    document: CanonicalDocument,
}

/// A runnable example at any date: the sample invoice printed on the autoimpresor channel, whose
/// only date rule is "not before 2018-11-22" (a SIFEN preview also needs an issue date within
/// the last 720 hours, which a fixed example cannot keep; the empty examples use "now").
pub fn autoimpresor_example() -> Value {
    let mut document = canonical::sample_invoice();
    document["mode"] = json!("autoimpresor_test");
    document
}

/// Whether the request carries credentials (an `Authorization` header or the session cookie).
fn has_credentials(headers: &HeaderMap) -> bool {
    headers.contains_key(header::AUTHORIZATION)
        || headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .any(|pair| {
                pair.trim()
                    .split_once('=')
                    .is_some_and(|(name, _)| name == SESSION_COOKIE)
            })
}

/// Previews a document without fiscal effect: validated, numbered from a reserved test range,
/// turned into a signed SIFEN DE with its QR and KuDE (or an autoimpresor printable), sent to the
/// simulator or the SIFEN test endpoint, and answered inline. Nothing is stored, no number is
/// reserved, and only `sifen_dev` sends anything out of the process.
///
/// Without credentials anyone may call it (rate-limited per IP): the document's seller is the
/// issuer, signing with a throw-away certificate and SIFEN's generic test CSC. With an API key or
/// session and `X-Tenant-Id`, it runs with the routed company's configuration (certificate,
/// CSC, authorization, print settings).
#[utoipa::path(
    post,
    path = "/v1/sandbox/preview",
    tag = "sandbox",
    security((), ("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Option<uuid::Uuid>, Header,
            description = "Only with credentials: the caller's tenant, whose configuration the preview uses")),
    request_body(
        content = Option<SandboxPreviewRequest>,
        content_type = "application/json",
        description = "Optional. A CanonicalDocumentV1 with an optional `mode`; empty (or only `mode`) previews the sample invoice issued now",
        examples(
            ("sample" = (summary = "The sample invoice, issued now, through the simulator in process",
                         value = json!({}))),
            ("sifen_dev" = (summary = "The sample invoice sent to the SIFEN test endpoint (a simulator by default)",
                            value = json!({"mode": "sifen_dev"}))),
            ("autoimpresor" = (summary = "A whole document, printed on the autoimpresor channel",
                               value = json!(autoimpresor_example())))
        )
    ),
    responses(
        (status = 200, description = "The preview: fiscal_impact false, persistence none, artifacts inline",
         body = PreviewResponse),
        (status = 400, description = "Not a valid request or document (details.errors lists every issue), or a configuration that cannot issue it",
         body = ErrorBody),
        (status = 401, description = "Credentials sent but not valid", body = ErrorBody),
        (status = 403, description = "The credentials' role may not use the sandbox, or X-Tenant-Id is another tenant", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "A body that is not JSON", body = ErrorBody),
        (status = 429, description = "Too many previews from this IP (or key) this minute", body = ErrorBody),
        (status = 502, description = "sifen_dev: the SIFEN test endpoint could not be reached or answered garbage", body = ErrorBody),
        (status = 504, description = "sifen_dev: the SIFEN test endpoint did not answer in time", body = ErrorBody)
    )
)]
pub async fn preview(
    State(state): State<AppState>,
    request: Request,
) -> Result<axum::Json<PreviewResponse>, ApiError> {
    let (mut parts, body) = request.into_parts();
    let caller = if has_credentials(&parts.headers) {
        let caller = Caller::from_request_parts(&mut parts, &state).await?;
        caller.require(USE_SANDBOX)?;
        Some(caller)
    } else {
        PerIp::from_request_parts(&mut parts, &state).await?;
        None
    };
    let headers = parts.headers.clone();
    let body = Bytes::from_request(Request::from_parts(parts, body), &state)
        .await
        .map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::validation("request body is too large").with_status(StatusCode::PAYLOAD_TOO_LARGE)
            } else {
                ApiError::validation(format!("unreadable body: {}", e.body_text()))
            }
        })?;
    if !body.iter().all(u8::is_ascii_whitespace) && !crate::extract::is_json(&headers) {
        return Err(ApiError::validation("expected Content-Type: application/json")
            .with_status(StatusCode::UNSUPPORTED_MEDIA_TYPE));
    }
    let preview = sandbox::preview(&state, &state.sandbox, caller.as_ref(), &body).await?;
    Ok(axum::Json(preview))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_an_authorization_header_or_the_session_cookie() {
        let mut headers = HeaderMap::new();
        assert!(!has_credentials(&headers));
        headers.insert(header::COOKIE, "theme=dark; other=1".parse().expect("value"));
        assert!(!has_credentials(&headers));
        headers.insert(
            header::COOKIE,
            "theme=dark; kuatia_session=abc".parse().expect("value"),
        );
        assert!(has_credentials(&headers));
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, "Bearer x".parse().expect("value"));
        assert!(has_credentials(&headers));
    }
}
