//! The documents endpoints: intake here; reading in `read.rs`; the auditor's stream, chain and
//! state as of an event in `audit.rs`; retry, cancel, inutilize and a delivery made by hand in
//! `actions.rs`.
//!
//! Intake runs in stages, each refusing with every issue it finds: 1. structure here — the body
//! is a CanonicalDocumentV1: every problem its published JSON Schema finds at once, then serde's
//! parse (`crate::schema::canonical_document`); then the intake use case
//! (`kuatia_application::intake`): 2. routing, 3. readiness of the routed channel, 4. business
//! validation; and it stores the document once under its Idempotency-Key and external_id.
//!
//! `POST /v1/documents/validate` answers all of them as `{valid, errors, warnings, routing}`.
//! `POST /v1/documents` refuses stages 1–3 and the configuration-dependent rules of stage 4 with
//! 400 (nothing stored), and stores a document that passed them as `validated` (then `queued`)
//! or `validation_failed`.

use crate::extract::{Path, Query};
use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use kuatia_application::documents::{self, DocumentsError};
use kuatia_application::idempotency;
use kuatia_application::intake::{self, Prepared, ReceiveError, Received};
use kuatia_domain::access::Permission;
use kuatia_domain::channel::ChannelKind;
use kuatia_domain::document::aggregate::DocumentStatus;
use kuatia_domain::document::canonical::{self, CanonicalDocument};
use kuatia_domain::document::issues::Issue;
use kuatia_domain::document::routing::Routing;
use kuatia_domain::document::validation::Validation;
use kuatia_projections::documents::{self as read_docs, DocumentRow};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::routes::artifacts::ArtifactView;
use crate::state::AppState;

/// The request body as bytes: a wrong content type is 415 and an oversized body 413, both in our
/// error shape.
pub struct JsonBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for JsonBytes {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !crate::extract::is_json(req.headers()) {
            return Err(ApiError::validation("expected Content-Type: application/json")
                .with_status(StatusCode::UNSUPPORTED_MEDIA_TYPE));
        }
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(crate::extract::body_error)?;
        crate::extract::refuse_nul(&bytes)?;
        Ok(Self(bytes))
    }
}

/// Issues as the contract's ValidationIssue list.
pub fn issues_json(issues: &[Issue]) -> Value {
    Value::Array(
        issues
            .iter()
            .map(|i| json!({"field": i.field, "code": i.code, "message": i.message}))
            .collect(),
    )
}

/// Why intake stopped before a document could be stored.
#[derive(Debug)]
pub enum Refusal {
    /// Not a CanonicalDocumentV1.
    Structure(Vec<Issue>),
    /// No company, channel, branch or point could be chosen.
    Routing(Vec<Issue>),
    /// The routed channel is not ready; `certificate` when the certificate is the reason.
    NotReady {
        /// Routing that was found.
        routing: Routing,
        /// The failing checks as issues.
        issues: Vec<Issue>,
        /// Whether the certificate check failed.
        certificate: bool,
    },
    /// Something else (not found, permission, store).
    Api(ApiError),
}

impl From<ApiError> for Refusal {
    fn from(e: ApiError) -> Self {
        Self::Api(e)
    }
}

impl From<kuatia_application::event_store::StoreError> for Refusal {
    fn from(e: kuatia_application::event_store::StoreError) -> Self {
        Self::Api(e.into())
    }
}

impl From<intake::Refusal> for Refusal {
    fn from(refusal: intake::Refusal) -> Self {
        match refusal {
            intake::Refusal::Routing(issues) => Self::Routing(issues),
            intake::Refusal::NotReady {
                routing,
                issues,
                certificate,
            } => Self::NotReady {
                routing,
                issues,
                certificate,
            },
            intake::Refusal::NoSuchCompany => Self::Api(ApiError::not_found("no such company")),
            intake::Refusal::Internal(message) => Self::Api(ApiError::new(ErrorCode::InternalError, message)),
            intake::Refusal::Store(e) => Self::Api(e.into()),
        }
    }
}

impl Refusal {
    /// The error `POST /v1/documents` answers.
    pub fn into_error(self) -> ApiError {
        match self {
            Self::Structure(issues) => ApiError::validation(format!(
                "the body is not a CanonicalDocumentV1: {} problem(s); see details.errors",
                issues.len()
            ))
            .with_details(json!({ "errors": issues_json(&issues) })),
            Self::Routing(issues) => ApiError::new(
                ErrorCode::ConfigurationError,
                format!("the document cannot be routed: {}", first_message(&issues)),
            )
            .with_details(json!({ "errors": issues_json(&issues) })),
            Self::NotReady {
                issues, certificate, ..
            } => ApiError::new(
                if certificate {
                    ErrorCode::CertificateError
                } else {
                    ErrorCode::ConfigurationError
                },
                format!("the channel is not ready: {}", first_message(&issues)),
            )
            .with_details(json!({ "errors": issues_json(&issues) })),
            Self::Api(e) => e,
        }
    }
}

fn first_message(issues: &[Issue]) -> String {
    issues.first().map(|i| i.message.clone()).unwrap_or_default()
}

/// Who the caller is, as the intake use case needs it.
pub(crate) fn requester(caller: &Caller) -> intake::Requester {
    intake::Requester {
        tenant: caller.tenant,
        company_scope: caller.company_id,
        metadata: caller.metadata(),
    }
}

/// Stage 1 here (the body is a CanonicalDocumentV1: every problem its published JSON Schema
/// finds, then serde's parse), stages 2–4 in the intake use case.
pub async fn prepare(state: &AppState, caller: &Caller, body: &[u8]) -> Result<Prepared, Refusal> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| Refusal::Structure(canonical::parse(body).err().unwrap_or_default()))?;
    let request_hash = idempotency::request_hash(&value);
    let document = crate::schema::canonical_document(value).map_err(Refusal::Structure)?;
    Ok(intake::prepare(&state.intake, &requester(caller), document, request_hash).await?)
}

/// The routing part of a validation response.
#[derive(Debug, Serialize, ToSchema)]
pub struct RoutingView {
    /// Company.
    pub company_id: Uuid,
    /// Branch.
    pub branch_id: Option<Uuid>,
    /// Issuance point.
    pub issuance_point_id: Option<Uuid>,
    /// `sifen` or `autoimpresor`.
    pub channel: String,
}

impl From<Routing> for RoutingView {
    fn from(r: Routing) -> Self {
        Self {
            company_id: r.company_id,
            branch_id: Some(r.branch_id),
            issuance_point_id: Some(r.issuance_point_id),
            channel: kind_str(r.channel).to_owned(),
        }
    }
}

fn kind_str(kind: ChannelKind) -> &'static str {
    kind.as_str()
}

/// Needed by `POST /v1/documents/validate`.
pub const VALIDATE_DOCUMENT: Permission = Permission::IssueDocuments;
/// Needed by `POST /v1/documents`.
pub const CREATE_DOCUMENT: Permission = Permission::IssueDocuments;
/// Needed by `GET /v1/documents`, `/{id}`, `/{id}/status`.
pub const READ_DOCUMENTS: Permission = Permission::ReadDocuments;
/// Needed by `GET /v1/documents/{id}/timeline`.
pub const READ_TIMELINE: Permission = Permission::ReadAudit;

/// `POST /v1/documents/validate` response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ValidationResponse {
    /// No errors.
    pub valid: bool,
    /// Blocking issues `{field, code, message}` (docs/issue-codes.md).
    #[schema(value_type = Vec<Object>)]
    pub errors: Value,
    /// Non-blocking issues.
    #[schema(value_type = Vec<Object>)]
    pub warnings: Value,
    /// Where the document would go; null when it cannot be routed.
    pub routing: Option<RoutingView>,
}

/// Validates a document without storing it: structure, routing and readiness (contract rule
/// 4.4.4), and every business and v150 rule; every issue at once.
#[utoipa::path(
    post,
    path = "/v1/documents/validate",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body(content = CanonicalDocument, description = "A CanonicalDocumentV1 (GET /v1/schemas/canonical-document)",
                 example = json!(canonical::sample_invoice())),
    responses(
        (status = 200, description = "The validation (valid or not)", body = ValidationResponse),
        (status = 401, description = "No valid credentials", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody)
    )
)]
pub async fn validate_document(
    State(state): State<AppState>,
    caller: Caller,
    JsonBytes(body): JsonBytes,
) -> Result<axum::Json<ValidationResponse>, ApiError> {
    caller.require(VALIDATE_DOCUMENT)?;
    let none = || Value::Array(Vec::new());
    let response = match prepare(&state, &caller, &body).await {
        Ok(p) => ValidationResponse {
            valid: p.validation.is_valid(),
            errors: issues_json(&p.validation.errors),
            warnings: issues_json(&p.validation.warnings),
            routing: Some(p.routing.into()),
        },
        Err(Refusal::Structure(issues) | Refusal::Routing(issues)) => ValidationResponse {
            valid: false,
            errors: issues_json(&issues),
            warnings: none(),
            routing: None,
        },
        Err(Refusal::NotReady { routing, issues, .. }) => ValidationResponse {
            valid: false,
            errors: issues_json(&issues),
            warnings: none(),
            routing: Some(routing.into()),
        },
        Err(Refusal::Api(e)) => return Err(e),
    };
    Ok(axum::Json(response))
}

/// A document as `POST /v1/documents` and the status endpoint answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentView {
    /// Id.
    pub id: Uuid,
    /// The caller's id.
    pub external_id: String,
    /// DocumentStatus.
    pub status: String,
    /// `sifen` or `autoimpresor`.
    pub channel: String,
    /// Document type.
    #[serde(rename = "type")]
    pub doc_type: String,
    /// Company.
    pub company_id: Uuid,
    /// Branch.
    pub branch_id: Uuid,
    /// Issuance point.
    pub issuance_point_id: Uuid,
    /// CDC (SIFEN; once transformed).
    pub cdc: Option<String>,
    /// `001-001-0000001` once numbered.
    pub number: Option<String>,
    /// Grand total (PYG).
    #[schema(value_type = f64)]
    pub grand_total: Value,
    /// Issue date-time.
    pub issue_datetime: chrono::DateTime<Utc>,
    /// Received.
    pub created_at: chrono::DateTime<Utc>,
    /// Last change.
    pub updated_at: chrono::DateTime<Utc>,
    /// Blocking issues (status `validation_failed`).
    #[schema(value_type = Vec<Object>)]
    pub errors: Value,
    /// Warnings.
    #[schema(value_type = Vec<Object>)]
    pub warnings: Value,
    /// `self`, `status`, `timeline`.
    #[schema(value_type = Object)]
    pub links: Value,
}

impl From<DocumentRow> for DocumentView {
    fn from(r: DocumentRow) -> Self {
        let base = format!("/v1/documents/{}", r.id);
        Self {
            id: r.id,
            external_id: r.external_id,
            status: r.status,
            channel: r.channel,
            doc_type: r.doc_type,
            company_id: r.company_id,
            branch_id: r.branch_id,
            issuance_point_id: r.issuance_point_id,
            cdc: r.cdc,
            number: r.number,
            grand_total: serde_json::from_str(&r.grand_total).unwrap_or(Value::String(r.grand_total)),
            issue_datetime: r.issue_datetime,
            created_at: r.created_at,
            updated_at: r.updated_at,
            errors: issues_json(&r.errors),
            warnings: issues_json(&r.warnings),
            links: json!({"self": base, "status": format!("{base}/status"), "timeline": format!("{base}/timeline")}),
        }
    }
}

/// The key as stored: a company-scoped caller's keys live in its company's own namespace, so
/// that two callers of one tenant scoped to different companies never meet each other's keys
/// (a replay would answer with a document the caller may not see, and its own would silently
/// not be created). The separator (U+001F) cannot appear in a header value, so no key a caller
/// sends can reach another namespace.
fn scoped_idempotency_key(caller: &Caller, key: String) -> String {
    match caller.company_id {
        Some(company) => format!("company:{company}\u{1f}{key}"),
        None => key,
    }
}

fn idempotency_key(headers: &HeaderMap) -> Result<String, ApiError> {
    let key = headers
        .get("idempotency-key")
        .ok_or_else(|| {
            ApiError::invalid_field(
                "Idempotency-Key",
                "required",
                "the Idempotency-Key header is required",
            )
        })?
        .to_str()
        .map_err(|_| {
            ApiError::invalid_field(
                "Idempotency-Key",
                "invalid_format",
                "Idempotency-Key must be visible ASCII",
            )
        })?
        .trim()
        .to_owned();
    if key.is_empty() || key.len() > idempotency::MAX_KEY_LEN {
        return Err(ApiError::invalid_field(
            "Idempotency-Key",
            "invalid_length",
            format!("Idempotency-Key has 1 to {} characters", idempotency::MAX_KEY_LEN),
        ));
    }
    Ok(key)
}

fn created(view: Value, replayed: bool) -> Response {
    let mut response = (StatusCode::CREATED, axum::Json(view)).into_response();
    if replayed {
        response
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}

/// What `POST /v1/documents` answered when it stored document `id` (`read_docs::intake_row`).
async fn intake_view(state: &AppState, caller: &Caller, id: Uuid) -> Result<Value, ApiError> {
    let row = read_docs::intake_row(&state.store, caller.tenant, id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::InternalError, "the document is not readable"))?;
    Ok(serde_json::to_value(DocumentView::from(row)).unwrap_or(Value::Null))
}

/// Receives a document: 201 with its status (`queued`, or `validation_failed` with the errors).
#[utoipa::path(
    post,
    path = "/v1/documents",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(
        ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant"),
        ("Idempotency-Key" = String, Header, description = "1–255 characters; 24 h per tenant: the same body answers the original response (Idempotent-Replayed: true), another body 409")
    ),
    request_body(content = CanonicalDocument, description = "A CanonicalDocumentV1 (GET /v1/schemas/canonical-document)",
                 example = json!(canonical::sample_invoice())),
    responses(
        (status = 201, description = "Stored (status queued, or validation_failed with errors)", body = DocumentView),
        (status = 400, description = "Not a CanonicalDocumentV1 (validation_error), no routing or a channel not ready for the document (configuration_error: e.g. a remisión on a sifen channel without remision_notice), certificate not ready (certificate_error); nothing stored", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 409, description = "Idempotency-Key used with another body, or still in progress; or the external_id names a live document of the company and type already (`details.existing_document_id`; one that ended validation_failed, rejected, failed_terminal or invalidated does not block)", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody)
    )
)]
pub async fn create_document(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBytes(body): JsonBytes,
) -> Result<Response, ApiError> {
    caller.require(CREATE_DOCUMENT)?;
    let key = scoped_idempotency_key(&caller, idempotency_key(&headers)?);
    let prepared = prepare(&state, &caller, &body)
        .await
        .map_err(Refusal::into_error)?;
    // The answer is built from what was decided, not read back: the row intake leaves behind
    // (its status, version and time come from the append).
    let row = |id: Uuid, routing: &Routing, document: &CanonicalDocument, validation: &Validation| {
        DocumentRow::after_intake(
            id,
            routing,
            document,
            validation.errors.clone(),
            validation.warnings.clone(),
        )
    };
    let received = intake::receive(
        &state.store,
        &*state.intake.clock,
        &requester(&caller),
        &key,
        prepared,
        row,
    )
    .await;
    match received {
        Ok(Received::Created {
            view: mut row,
            stored,
        }) => {
            row.status = stored.status.as_str().to_owned();
            row.version = stored.version as i64;
            row.created_at = stored.recorded_at;
            row.updated_at = stored.recorded_at;
            let view = serde_json::to_value(DocumentView::from(row)).unwrap_or(Value::Null);
            Ok(created(view, false))
        }
        // Taken over from a request that died after storing it: answer its intake.
        Ok(Received::TakenOver { document_id }) => {
            Ok(created(intake_view(&state, &caller, document_id).await?, false))
        }
        Ok(Received::StoredBefore { document_id }) => {
            Ok(created(intake_view(&state, &caller, document_id).await?, true))
        }
        Ok(Received::Replay(response)) => Ok(created(response, true)),
        Err(ReceiveError::KeyReused) => {
            Err(ApiError::validation(ReceiveError::KeyReused.to_string()).with_status(StatusCode::CONFLICT))
        }
        Err(e @ (ReceiveError::InFlight | ReceiveError::Conflict(_))) => {
            Err(ApiError::new(ErrorCode::ConflictError, e.to_string()))
        }
        Err(e @ ReceiveError::ExternalIdHeld { existing, .. }) => {
            Err(ApiError::new(ErrorCode::ConflictError, e.to_string())
                .with_details(json!({"existing_document_id": existing})))
        }
        Err(ReceiveError::Store(e)) => Err(e.into()),
    }
}

/// A file to save (`Content-Disposition: attachment`) of `content_type`, named `file_name`.
fn attachment(content_type: &'static str, file_name: &str, body: impl IntoResponse) -> Response {
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{file_name}\""))
        .unwrap_or(HeaderValue::from_static("attachment"));
    (
        [
            (
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static(content_type),
            ),
            (axum::http::header::CONTENT_DISPOSITION, disposition),
        ],
        body,
    )
        .into_response()
}

pub mod actions;
pub mod audit;
pub mod read;

pub use actions::{DELIVER_BY_HAND, FiscalReason, RETRY_DOCUMENT, VOID_DOCUMENT};
pub(crate) use read::visible;
pub use read::{DocumentDetail, DocumentList, DocumentStats, ListQuery, SifenAnswerView, TimelineView};
