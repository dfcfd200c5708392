//! `POST /v1/sandbox/preview` (`docs/sandbox.md`): the request read, the preview run by the
//! sandbox use case (`kuatia_application::sandbox`), the answer written with its artifacts inline.
//!
//! Without credentials the endpoint is open and rate-limited per IP ([`PerIp`]). With an API key
//! or a console session (and `X-Tenant-Id`) it runs with the caller's configuration: the caller
//! must hold [`USE_SANDBOX`], and the request counts against the key or user like any tenant
//! request. Invalid credentials are refused (401), never silently ignored.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use kuatia_application::idempotency;
use kuatia_application::sandbox::{self, Exchange, Mode, Outcome, Preview, PreviewError};
use kuatia_domain::access::Permission;
use kuatia_domain::channel::ChannelKind;
use kuatia_domain::document::canonical::{self, CanonicalDocument};
use kuatia_domain::document::issues::{Issue, codes};
use kuatia_domain::document::validation::Validation;
use kuatia_domain::sifen::exchange::SoapError;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::{Caller, SESSION_COOKIE};
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::rate_limit::PerIp;
use crate::routes::documents::{Refusal, issues_json, requester};
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
    #[schema(value_type = Option<SandboxMode>)]
    mode: Option<Mode>,
    /// The document.
    #[serde(flatten)]
    document: CanonicalDocument,
}

/// What the preview does (the wire form of `kuatia_application::sandbox::Mode`; for the OpenAPI
/// document only).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum SandboxMode {
    /// SIFEN channel; the simulator's answer, computed in process.
    DemoSimulated,
    /// SIFEN channel; sent to the SIFEN test endpoint (a simulator by default).
    SifenDev,
    /// Autoimpresor channel; the printable PDF.
    AutoimpresorTest,
}

/// A runnable example at any date: the sample invoice printed on the autoimpresor channel, whose
/// only date rule is "not before 2018-11-22" (a SIFEN preview also needs an issue date within
/// the last 720 hours, which a fixed example cannot keep; the empty examples use "now").
pub fn autoimpresor_example() -> Value {
    let mut document = canonical::sample_invoice();
    document["mode"] = json!("autoimpresor_test");
    document
}

// ---------------------------------------------------------------------------------------------
// The answer.

/// One artifact, inline.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = SandboxArtifact)]
pub struct PreviewArtifact {
    /// `signed_xml`, `kude`, `channel_response` or `printable_pdf`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `application/xml` or `application/pdf`.
    pub content_type: String,
    /// Text artifacts (XML), as is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Binary artifacts (PDF), base64.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
}

impl PreviewArtifact {
    fn text(kind: &str, content_type: &str, body: String) -> Self {
        Self {
            kind: kind.to_owned(),
            content_type: content_type.to_owned(),
            body: Some(body),
            body_base64: None,
        }
    }

    fn binary(kind: &str, content_type: &str, bytes: &[u8]) -> Self {
        use base64::Engine;
        Self {
            kind: kind.to_owned(),
            content_type: content_type.to_owned(),
            body: None,
            body_base64: Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
        }
    }
}

/// Where the preview went and under which number.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = SandboxRouting)]
pub struct PreviewRouting {
    /// The company whose configuration was used; null for anonymous previews.
    pub company_id: Option<Uuid>,
    /// Its branch; null for anonymous previews.
    pub branch_id: Option<Uuid>,
    /// Its issuance point; null for anonymous previews.
    pub issuance_point_id: Option<Uuid>,
    /// `sifen` or `autoimpresor`.
    pub channel: ChannelKind,
    /// `sandbox` (anonymous: the seller as issuer, a throw-away certificate, the generic test
    /// CSC) or `company` (the routed company's configuration).
    pub configuration: &'static str,
    /// The timbrado printed and signed.
    pub timbrado: String,
    /// `999-999-9NNNNNN`: the reserved test range, never a real series.
    pub number: String,
}

/// The answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = SandboxPreviewResponse)]
pub struct PreviewResponse {
    /// The mode that ran.
    #[schema(value_type = SandboxMode)]
    pub mode: Mode,
    /// The channel previewed.
    pub channel: ChannelKind,
    /// Always false.
    pub fiscal_impact: bool,
    /// Always `none`.
    pub persistence: String,
    /// Where it went and its number.
    pub routing: PreviewRouting,
    /// The normalized canonical document.
    #[schema(value_type = Object)]
    pub document: Value,
    /// Signed XML, KuDE and SIFEN's answer (sifen); the printable PDF (autoimpresor).
    pub artifacts: Vec<PreviewArtifact>,
    /// The channel's answer: SIFEN's (`status`, `code`, `message`, `protocol`, `cdc`, …) or the
    /// autoimpresor printer's.
    #[schema(value_type = Object)]
    pub response: Value,
    /// Non-blocking issues `{field, code, message}`.
    #[schema(value_type = Vec<Object>)]
    pub warnings: Value,
}

// ---------------------------------------------------------------------------------------------
// The request.

/// A request split into its mode and its document.
#[derive(Debug, Clone, PartialEq)]
pub struct PreviewRequest {
    /// `mode`, when given.
    pub mode: Option<Mode>,
    /// The document's JSON, `mode` removed; `None` for an empty body (or one with only `mode`).
    pub document: Option<Value>,
}

fn refused(issues: Vec<Issue>) -> ApiError {
    ApiError::validation(format!(
        "the preview request is not valid: {} problem(s); see details.errors",
        issues.len()
    ))
    .with_details(json!({ "errors": issues_json(&issues) }))
}

/// Reads a body: empty (or `null`, or `{}` with at most `mode`) previews the sample invoice.
pub fn read_request(body: &[u8]) -> Result<PreviewRequest, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(PreviewRequest {
            mode: None,
            document: None,
        });
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        refused(vec![Issue::new(
            "$",
            codes::MALFORMED_JSON,
            format!("malformed JSON at line {} column {}: {e}", e.line(), e.column()),
        )])
    })?;
    let mut object = match value {
        Value::Null => serde_json::Map::new(),
        Value::Object(object) => object,
        _ => {
            return Err(refused(vec![Issue::new(
                "$",
                codes::INVALID_TYPE,
                "the body must be a JSON object (a canonical document, optionally with mode)",
            )]));
        }
    };
    let mode = match object.remove("mode") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(Mode::ALL.into_iter().find(|m| m.as_str() == text).ok_or_else(
            || {
                refused(vec![Issue::new(
                    "mode",
                    codes::INVALID_ENUM,
                    format!("unknown mode {text:?}; expected demo_simulated, sifen_dev or autoimpresor_test"),
                )])
            },
        )?),
        Some(_) => {
            return Err(refused(vec![Issue::new(
                "mode",
                codes::INVALID_TYPE,
                "mode must be a string: demo_simulated, sifen_dev or autoimpresor_test",
            )]));
        }
    };
    Ok(PreviewRequest {
        mode,
        document: (!object.is_empty()).then_some(Value::Object(object)),
    })
}

/// The channel a document names, if it names a valid one (an invalid one is structure's issue).
fn named_channel(document: &Value) -> Option<ChannelKind> {
    serde_json::from_value(document.get("channel")?.clone()).ok()
}

/// Sets the document's channel from an explicit mode, refusing a document that names the other
/// channel.
fn align_channel(document: &mut Value, mode: Option<Mode>) -> Result<(), ApiError> {
    let Some(mode) = mode else { return Ok(()) };
    match named_channel(document) {
        Some(named) if named != mode.channel() => Err(refused(vec![Issue::new(
            "channel",
            codes::NOT_ALLOWED,
            format!(
                "channel {} does not go with mode {}, which previews the {} channel",
                named.as_str(),
                mode.as_str(),
                mode.channel().as_str()
            ),
        )])),
        _ => {
            document["channel"] = json!(mode.channel());
            Ok(())
        }
    }
}

/// A failed exchange with the SIFEN test endpoint, in the contract's terms.
fn upstream(e: &SoapError) -> ApiError {
    match e {
        SoapError::Config(_) | SoapError::InvalidRequest(_) => ApiError::internal(e),
        SoapError::NotSent { .. } => ApiError::new(
            ErrorCode::UpstreamError,
            "the SIFEN test endpoint could not be reached; nothing was sent",
        ),
        SoapError::OutcomeUnknown { timeout: true, .. } => ApiError::new(
            ErrorCode::UpstreamError,
            "the SIFEN test endpoint did not answer in time",
        )
        .with_status(axum::http::StatusCode::GATEWAY_TIMEOUT),
        other => ApiError::new(
            ErrorCode::UpstreamError,
            format!("the SIFEN test endpoint answered something unreadable: {other}"),
        ),
    }
}

/// SIFEN's answer as the preview's `response`.
fn answer_json(exchange: &Exchange, cdc: &str) -> Value {
    let result = &exchange.answered.result;
    json!({
        "endpoint": exchange.endpoint,
        "service": exchange.service,
        "http_status": exchange.answered.status,
        "status": result.status.as_str(),
        "approved": result.status.is_approved(),
        "code": result.code(),
        "message": result.results.first().map(|r| r.message.as_str()),
        "cdc": result.cdc.as_deref().unwrap_or(cdc),
        "protocol": result.authorization,
        "processed_at": result.processed_at,
        "digest_value": result.digest_value,
        "results": result.results,
    })
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
    Ok(axum::Json(run(&state, caller.as_ref(), &body).await?))
}

/// Reads the request (stage 1: the mode, then the document against its JSON Schema), runs the
/// preview and writes its answer.
async fn run(state: &AppState, caller: Option<&Caller>, body: &[u8]) -> Result<PreviewResponse, ApiError> {
    let request = read_request(body)?;
    let requester = caller.map(requester);
    let mut value = match request.document {
        Some(document) => document,
        None => sandbox::sample(&state.sandbox, requester.as_ref())
            .await
            .map_err(preview_error)?,
    };
    align_channel(&mut value, request.mode)?;
    let request_hash = idempotency::request_hash(&value);
    let document =
        crate::schema::canonical_document(value).map_err(|issues| Refusal::Structure(issues).into_error())?;
    let preview = sandbox::preview(
        &state.sandbox,
        requester.as_ref(),
        document,
        request_hash,
        request.mode,
    )
    .await
    .map_err(preview_error)?;
    response(preview)
}

fn validation_refused(validation: &Validation) -> ApiError {
    ApiError::validation(format!(
        "the document does not pass validation: {} error(s); see details.errors",
        validation.errors.len()
    ))
    .with_details(json!({
        "errors": issues_json(&validation.errors),
        "warnings": issues_json(&validation.warnings),
    }))
}

/// A preview that stopped, in the contract's terms.
fn preview_error(e: PreviewError) -> ApiError {
    match e {
        PreviewError::Refused(refusal) => Refusal::from(refusal).into_error(),
        PreviewError::Invalid(validation) => validation_refused(&validation),
        PreviewError::Unbuildable(message) => ApiError::validation(message.clone()).with_details(json!({
            "errors": [{"field": "$", "code": codes::INVALID_FORMAT, "message": message}]
        })),
        PreviewError::Upstream(e) => upstream(&e),
        PreviewError::Internal(message) => ApiError::internal(&std::io::Error::other(message)),
    }
}

/// The answer: the artifacts inline, the channel's answer as JSON.
fn response(preview: Preview) -> Result<PreviewResponse, ApiError> {
    let Preview {
        mode,
        routing,
        document,
        warnings,
        outcome,
    } = preview;
    let normalized = serde_json::to_value(&document)
        .map_err(|e| ApiError::internal(&std::io::Error::other(format!("sandbox: the document: {e}"))))?;
    let (artifacts, response) = match outcome {
        Outcome::Sifen {
            cdc,
            signed_xml,
            kude,
            exchange,
        } => {
            let response = answer_json(&exchange, &cdc);
            (
                vec![
                    PreviewArtifact::text("signed_xml", "application/xml", signed_xml),
                    PreviewArtifact::binary("kude", "application/pdf", &kude),
                    PreviewArtifact::text("channel_response", "application/xml", exchange.answered.raw),
                ],
                response,
            )
        }
        Outcome::Autoimpresor {
            pdf,
            authorization,
            valid_from,
            valid_to,
        } => (
            vec![PreviewArtifact::binary("printable_pdf", "application/pdf", &pdf)],
            json!({
                "status": "printed",
                "number": routing.number,
                "timbrado": routing.timbrado,
                "authorization": authorization,
                "valid_from": valid_from,
                "valid_to": valid_to,
                "reported": false,
                "message": "printed in process with a SIN VALOR FISCAL watermark; a preview is reported to no endpoint",
            }),
        ),
    };
    Ok(PreviewResponse {
        mode,
        channel: routing.channel,
        fiscal_impact: false,
        persistence: "none".to_owned(),
        routing: PreviewRouting {
            company_id: routing.routed.as_ref().map(|r| r.company_id),
            branch_id: routing.routed.as_ref().map(|r| r.branch_id),
            issuance_point_id: routing.routed.as_ref().map(|r| r.issuance_point_id),
            channel: routing.channel,
            configuration: if routing.routed.is_some() {
                "company"
            } else {
                "sandbox"
            },
            timbrado: routing.timbrado,
            number: routing.number,
        },
        document: normalized,
        artifacts,
        response,
        warnings: issues_json(&warnings),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_body_or_one_with_only_a_mode_previews_the_sample() {
        for body in [&b""[..], b"  \n", b"null", b"{}"] {
            assert_eq!(
                read_request(body).expect("read"),
                PreviewRequest {
                    mode: None,
                    document: None
                }
            );
        }
        let only_mode = read_request(br#"{"mode": "sifen_dev"}"#).expect("read");
        assert_eq!(only_mode.mode, Some(Mode::SifenDev));
        assert_eq!(only_mode.document, None);
    }

    #[test]
    fn a_bad_mode_or_body_is_a_validation_error_naming_the_field() {
        for (body, field, code) in [
            (&br#"{"mode": "production"}"#[..], "mode", "invalid_enum"),
            (br#"{"mode": 3}"#, "mode", "invalid_type"),
            (b"[1, 2]", "$", "invalid_type"),
            (b"{not json", "$", "malformed_json"),
        ] {
            let e = read_request(body).expect_err("refused");
            assert_eq!(e.code, ErrorCode::ValidationError);
            let details = e.details.expect("details");
            assert_eq!(details["errors"][0]["field"], field, "{details}");
            assert_eq!(details["errors"][0]["code"], code, "{details}");
        }
    }

    #[test]
    fn an_explicit_mode_sets_the_channel_and_refuses_the_other_one() {
        let mut doc = json!({"external_id": "x"});
        align_channel(&mut doc, Some(Mode::AutoimpresorTest)).expect("aligned");
        assert_eq!(doc["channel"], "autoimpresor");
        let mut doc = json!({"channel": "sifen"});
        let e = align_channel(&mut doc, Some(Mode::AutoimpresorTest)).expect_err("refused");
        assert_eq!(e.details.expect("details")["errors"][0]["field"], "channel");
    }

    #[test]
    fn the_documented_modes_are_the_use_case_s() {
        let documented: Vec<Value> = [
            SandboxMode::DemoSimulated,
            SandboxMode::SifenDev,
            SandboxMode::AutoimpresorTest,
        ]
        .iter()
        .map(|m| serde_json::to_value(m).expect("json"))
        .collect();
        let modes: Vec<Value> = Mode::ALL.iter().map(|m| json!(m.as_str())).collect();
        assert_eq!(documented, modes);
        for mode in Mode::ALL {
            assert_eq!(serde_json::to_value(mode).expect("json"), json!(mode.as_str()));
        }
    }

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
