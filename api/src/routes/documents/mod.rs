//! The documents endpoints: intake, reading, retry, cancel and inutilize.
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

/// `GET /v1/documents` query.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Company.
    pub company_id: Option<String>,
    /// DocumentStatus.
    pub status: Option<String>,
    /// `sifen` or `autoimpresor`.
    pub channel: Option<String>,
    /// The caller's id.
    pub external_id: Option<String>,
    /// Exactly 44 digits.
    pub cdc: Option<String>,
    /// The buyer's RUC, with or without its check digit.
    pub ruc: Option<String>,
    /// issue_datetime ≥ (RFC 3339).
    pub date_from: Option<String>,
    /// issue_datetime < (RFC 3339).
    pub date_to: Option<String>,
    /// 1–100, default 50.
    pub limit: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// A page of documents.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentList {
    /// Newest first.
    pub documents: Vec<DocumentView>,
    /// Pass as `cursor` for the next page; null on the last one.
    pub next_cursor: Option<String>,
}

fn bad(field: &str, message: &str) -> ApiError {
    ApiError::invalid_field(field, "invalid_format", message)
}

fn time_param(field: &str, value: Option<&str>) -> Result<Option<chrono::DateTime<Utc>>, ApiError> {
    value
        .map(|v| {
            chrono::DateTime::parse_from_rfc3339(v.trim())
                .map(|t| t.with_timezone(&Utc))
                .map_err(|_| {
                    bad(
                        field,
                        "expected an RFC 3339 date-time with offset, e.g. 2026-03-01T00:00:00-03:00",
                    )
                })
        })
        .transpose()
}

fn filter_from(caller: &Caller, q: &ListQuery) -> Result<(read_docs::Filter, u32), ApiError> {
    let company = q
        .company_id
        .as_deref()
        .map(|c| {
            c.trim()
                .parse::<Uuid>()
                .map_err(|_| bad("company_id", "company_id must be a UUID"))
        })
        .transpose()?;
    let status = match q.status.as_deref() {
        Some(s) if !DocumentStatus::ALL.iter().any(|st| st.as_str() == s) => {
            return Err(ApiError::invalid_field(
                "status",
                "invalid_enum",
                format!("unknown status {s:?}"),
            ));
        }
        other => other.map(str::to_owned),
    };
    let channel = match q.channel.as_deref() {
        Some(c) if c != "sifen" && c != "autoimpresor" => {
            return Err(ApiError::invalid_field(
                "channel",
                "invalid_enum",
                "channel is sifen or autoimpresor",
            ));
        }
        other => other.map(str::to_owned),
    };
    if let Some(cdc) = &q.cdc
        && !(cdc.len() == 44 && cdc.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(bad("cdc", "a CDC is exactly 44 digits"));
    }
    let buyer_ruc = q.ruc.as_deref().map(read_docs::ruc_number);
    if buyer_ruc
        .as_ref()
        .is_some_and(|r| r.is_empty() || r.len() > 8 || !r.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(bad("ruc", "a RUC is 1 to 8 digits, optionally followed by -DV"));
    }
    let limit = match q.limit.as_deref() {
        None => 50,
        Some(l) => match l.trim().parse::<u32>() {
            Ok(n) if (1..=100).contains(&n) => n,
            _ => return Err(bad("limit", "limit is 1 to 100")),
        },
    };
    let before = q
        .cursor
        .as_deref()
        .map(|c| {
            c.trim()
                .parse::<Uuid>()
                .map_err(|_| bad("cursor", "not a cursor of this listing"))
        })
        .transpose()?;
    Ok((
        read_docs::Filter {
            company_id: caller.company_scope(company)?,
            status,
            channel,
            external_id: q.external_id.clone(),
            cdc: q.cdc.clone(),
            buyer_ruc,
            date_from: time_param("date_from", q.date_from.as_deref())?,
            date_to: time_param("date_to", q.date_to.as_deref())?,
            before,
        },
        limit,
    ))
}

/// Lists documents, newest first, with every filter of the contract and cursor pagination.
#[utoipa::path(
    get,
    path = "/v1/documents",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(ListQuery, ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "A page", body = DocumentList),
        (status = 400, description = "A malformed filter", body = ErrorBody)
    )
)]
pub async fn list_documents(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<ListQuery>,
) -> Result<axum::Json<DocumentList>, ApiError> {
    caller.require(READ_DOCUMENTS)?;
    let (filter, limit) = filter_from(&caller, &query)?;
    let mut rows = read_docs::list(&state.store, caller.tenant, &filter, limit + 1).await?;
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let next_cursor = if more {
        rows.last().map(|r| r.id.to_string())
    } else {
        None
    };
    Ok(axum::Json(DocumentList {
        documents: rows.into_iter().map(DocumentView::from).collect(),
        next_cursor,
    }))
}

async fn visible(state: &AppState, caller: &Caller, id: Uuid) -> Result<DocumentRow, ApiError> {
    read_docs::document(&state.store, caller.tenant, id)
        .await?
        .filter(|d| caller.sees(d.company_id))
        .ok_or_else(|| ApiError::not_found("no such document"))
}

/// A document's materialised status.
#[utoipa::path(
    get,
    path = "/v1/documents/{id}/status",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses((status = 200, description = "Status", body = DocumentView), (status = 404, description = "No such document", body = ErrorBody))
)]
pub async fn document_status(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<DocumentView>, ApiError> {
    caller.require(READ_DOCUMENTS)?;
    Ok(axum::Json(visible(&state, &caller, id).await?.into()))
}

/// Needed by `POST /v1/documents/{id}/retry`.
pub const RETRY_DOCUMENT: Permission = Permission::IssueDocuments;

/// Makes the next attempt of a document in `retrying` immediate: 202 with its
/// status; 409 in any other status.
#[utoipa::path(
    post,
    path = "/v1/documents/{id}/retry",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 202, description = "A resend job is queued (the CDC is queried first)", body = DocumentView),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such document", body = ErrorBody),
        (status = 409, description = "The document is not in `retrying`", body = ErrorBody)
    )
)]
pub async fn retry_document(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<Response, ApiError> {
    caller.require(RETRY_DOCUMENT)?;
    let row = visible(&state, &caller, id).await?;
    let command = kuatia_domain::document::aggregate::DocumentCommand::RetryNow { at: Utc::now() };
    match documents::command(&state.store, caller.tenant, id, command, caller.metadata()).await {
        Ok(()) => {}
        Err(DocumentsError::Refused(_) | DocumentsError::Conflict) => {
            return Err(ApiError::new(
                ErrorCode::ConflictError,
                format!(
                    "only a document in `retrying` can be retried; this one is `{}`",
                    row.status
                ),
            ));
        }
        Err(DocumentsError::NotFound) => return Err(ApiError::not_found("no such document")),
        Err(DocumentsError::Store(e)) => return Err(e.into()),
    }
    let view = visible(&state, &caller, id).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(DocumentView::from(view))).into_response())
}

/// Needed by `POST /v1/documents/{id}/cancel` and `/inutilize`.
pub const VOID_DOCUMENT: Permission = Permission::IssueDocuments;

/// How long `POST /cancel` and `/inutilize` wait for SIFEN's answer before answering 202.
const FISCAL_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The fiscal reason body.
#[derive(Debug, Deserialize, ToSchema)]
pub struct FiscalReason {
    /// Why. SIFEN's `mOtEve` takes 5 to 500 characters once trimmed; a shorter or longer
    /// reason is refused with 400 `validation_error`.
    pub reason: String,
}

fn parse_reason(body: &[u8]) -> Result<String, ApiError> {
    let parsed: FiscalReason = serde_json::from_slice(body)
        .map_err(|e| ApiError::validation(format!("the body is `{{\"reason\": string}}`: {e}")))?;
    if parsed.reason.trim().is_empty() {
        return Err(ApiError::validation("`reason` must not be empty"));
    }
    Ok(parsed.reason)
}

async fn aggregate_state(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
) -> Result<Option<kuatia_domain::document::aggregate::DocumentState>, ApiError> {
    let store =
        kuatia_application::aggregate::AggregateStore::<kuatia_domain::document::aggregate::Document>::new(
            state.store.clone(),
            caller.tenant,
        );
    let loaded = store
        .load(&kuatia_domain::document::aggregate::stream_id(caller.tenant, id))
        .await?;
    Ok(loaded.aggregate().state().cloned())
}

/// Records a cancel or inutilize request, then waits for its outcome (see [`cancel_document`]).
async fn void_document(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
    body: &[u8],
    kind: kuatia_domain::document::aggregate::FiscalEventKind,
) -> Result<Response, ApiError> {
    use kuatia_domain::document::aggregate::{DocumentCommand, DocumentError, FiscalEventKind};
    caller.require(VOID_DOCUMENT)?;
    let row = visible(state, caller, id).await?;
    let reason = parse_reason(body)?;
    let (command, done, verb) = match kind {
        FiscalEventKind::Cancellation => (
            DocumentCommand::Cancel {
                reason,
                at: Utc::now(),
            },
            DocumentStatus::Cancelled,
            "cancelled",
        ),
        FiscalEventKind::Inutilization => (
            DocumentCommand::Inutilize {
                reason,
                at: Utc::now(),
            },
            DocumentStatus::Invalidated,
            "inutilised",
        ),
    };
    let conflict = |message: String| ApiError::new(ErrorCode::ConflictError, message);
    match documents::command(&state.store, caller.tenant, id, command, caller.metadata()).await {
        Ok(()) => {}
        Err(DocumentsError::Refused(DocumentError::ReasonLength { chars })) => {
            return Err(ApiError::validation(format!(
                "`reason` must have 5 to 500 characters once trimmed (SIFEN `mOtEve`); it has {chars}"
            ))
            .with_details(json!({"field": "reason"})));
        }
        Err(DocumentsError::Refused(DocumentError::CancellationWindowClosed { deadline })) => {
            return Err(conflict(format!(
                "the cancellation window closed at {deadline} (48 h for invoices and \
                 autofacturas, 168 h for other documents, from SIFEN's approval); SIFEN was not \
                 contacted"
            ))
            .with_details(json!({"deadline": deadline})));
        }
        Err(DocumentsError::Refused(DocumentError::FiscalEventPending(other))) => {
            return Err(conflict(format!(
                "a SIFEN {other} of this document is still waiting for its answer"
            )));
        }
        Err(DocumentsError::Refused(_)) => {
            return Err(conflict(format!(
                "a document in `{}` cannot be {verb}",
                row.status
            )));
        }
        Err(DocumentsError::Conflict) => {
            return Err(conflict(
                "the document changed meanwhile; read it and try again".into(),
            ));
        }
        Err(DocumentsError::NotFound) => return Err(ApiError::not_found("no such document")),
        Err(DocumentsError::Store(e)) => return Err(e.into()),
    }
    // Wait for the outcome: at once for a local cancellation or an autoimpresor void, after
    // SIFEN's answer for an event.
    let deadline = std::time::Instant::now() + FISCAL_WAIT;
    let mut pause = std::time::Duration::from_millis(25);
    loop {
        let Some(doc) = aggregate_state(state, caller, id).await? else {
            return Err(ApiError::not_found("no such document"));
        };
        if doc.status == done {
            let view = visible(state, caller, id).await?;
            return Ok((StatusCode::OK, axum::Json(DocumentView::from(view))).into_response());
        }
        if doc.pending.is_none() {
            // Answered, and not as asked: SIFEN's refusal.
            let refusal = doc.last_refusal.filter(|r| r.kind == kind);
            let (code, message) = refusal.map(|r| (r.code, r.message)).unwrap_or_default();
            return Err(conflict(format!("SIFEN refused the {kind}: {code} {message}"))
                .with_details(json!({"sifen_code": code, "sifen_message": message})));
        }
        if std::time::Instant::now() >= deadline {
            let view = visible(state, caller, id).await?;
            return Ok((StatusCode::ACCEPTED, axum::Json(DocumentView::from(view))).into_response());
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(std::time::Duration::from_millis(250));
    }
}

/// Cancels a document.
///
/// A document not yet submitted to SIFEN (`received` … `signing`, or an autoimpresor one in
/// `rendering`) is cancelled locally at once, with no fiscal effect. An `accepted` SIFEN document
/// is cancelled through SIFEN's cancelación event, inside the window (48 h for invoices and
/// autofacturas, 168 h for the rest, from SIFEN's approval), checked here first: outside it the
/// answer is 409 and SIFEN is not contacted.
///
/// The answer is synchronous within a bound: the request is recorded (the document's timeline
/// shows `DocumentCancellationRequested`), a job sends the event, and the call waits up to 10 s
/// for SIFEN's answer. **200** with the document in `cancelled`; **409** `conflict_error` when
/// SIFEN refused, with SIFEN's code and message in `details` (`sifen_code`, `sifen_message`; the
/// document stays `accepted`); **202** with the document still `accepted` when SIFEN has not
/// answered within the wait — the job keeps trying, and the document's status or timeline tells
/// the outcome (calling again is harmless: it waits for the same request). Cancelling a cancelled
/// document answers 200 again.
#[utoipa::path(
    post,
    path = "/v1/documents/{id}/cancel",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body = FiscalReason,
    responses(
        (status = 200, description = "Cancelled (status `cancelled`)", body = DocumentView),
        (status = 202, description = "Requested; SIFEN's answer is still pending after the wait", body = DocumentView),
        (status = 400, description = "No reason, or one outside 5 to 500 characters", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such document", body = ErrorBody),
        (status = 409, description = "Not cancellable in its status, outside the window, another SIFEN event pending, or refused by SIFEN (`details.sifen_code`)", body = ErrorBody)
    )
)]
pub async fn cancel_document(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
    JsonBytes(body): JsonBytes,
) -> Result<Response, ApiError> {
    void_document(
        &state,
        &caller,
        id,
        &body,
        kuatia_domain::document::aggregate::FiscalEventKind::Cancellation,
    )
    .await
}

/// Inutilises a document's number.
///
/// Allowed for a SIFEN document in `accepted`, `rejected` or `failed_terminal` (a SIFEN number
/// that never became a valid document is what the inutilización event is for; SIFEN itself
/// refuses an approved number, 4065), and for an accepted autoimpresor document, whose printed
/// number is voided at once.
///
/// Synchronous within a bound, like `POST /cancel`: the request is recorded
/// (`DocumentInutilizationRequested`), a job sends SIFEN's inutilización for that one number
/// (timbrado, establishment, point, type), and the call waits up to 10 s. **200** with the
/// document in `invalidated`; **409** `conflict_error` when SIFEN refused, with `details`
/// `sifen_code` and `sifen_message` (the status does not change); **202** with the unchanged
/// document when SIFEN has not answered within the wait.
#[utoipa::path(
    post,
    path = "/v1/documents/{id}/inutilize",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body = FiscalReason,
    responses(
        (status = 200, description = "Inutilised (status `invalidated`)", body = DocumentView),
        (status = 202, description = "Requested; SIFEN's answer is still pending after the wait", body = DocumentView),
        (status = 400, description = "No reason, or one outside 5 to 500 characters", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such document", body = ErrorBody),
        (status = 409, description = "Not in accepted, rejected or failed_terminal, another SIFEN event pending, or refused by SIFEN (`details.sifen_code`)", body = ErrorBody)
    )
)]
pub async fn inutilize_document(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
    JsonBytes(body): JsonBytes,
) -> Result<Response, ApiError> {
    void_document(
        &state,
        &caller,
        id,
        &body,
        kuatia_domain::document::aggregate::FiscalEventKind::Inutilization,
    )
    .await
}

/// One timeline entry.
#[derive(Debug, Serialize, ToSchema)]
pub struct TimelineView {
    /// Global position in the event log.
    pub position: i64,
    /// Version in the document's stream.
    pub version: i64,
    /// Event type.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Status after the event.
    pub status: String,
    /// When it was recorded.
    pub at: chrono::DateTime<Utc>,
    /// Who, resolved when read (`{type, id, name}`: a key's current name, a user's email; see
    /// `GET /v1/events`); null when the event has none.
    pub actor: Option<crate::routes::events::ActorView>,
    /// The event's data.
    #[schema(value_type = Object)]
    pub data: Value,
    /// The previous event's `hash` in this document's stream; null for the first.
    pub prev_hash: Option<String>,
    /// The event's chain hash (hex SHA-256; `kuatia events verify`).
    pub hash: String,
}

async fn timeline_of(state: &AppState, caller: &Caller, id: Uuid) -> Result<Vec<TimelineView>, ApiError> {
    let entries = read_docs::timeline(&state.store, caller.tenant, id).await?;
    let named: Vec<String> = entries.iter().filter_map(|e| e.actor.clone()).collect();
    let actors = crate::routes::events::resolve_actors(state, caller.tenant, &named).await?;
    Ok(entries
        .into_iter()
        .map(|e| TimelineView {
            position: e.position,
            version: e.version,
            event_type: e.event_type,
            status: e.status,
            at: e.at,
            actor: e.actor.as_deref().and_then(|a| actors.get(a).cloned()),
            data: e.data,
            prev_hash: e.prev_hash,
            hash: e.hash,
        })
        .collect())
}

/// A document's timeline: the immutable events of its stream, oldest first.
#[utoipa::path(
    get,
    path = "/v1/documents/{id}/timeline",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses((status = 200, description = "Events", body = [TimelineView]), (status = 404, description = "No such document", body = ErrorBody))
)]
pub async fn document_timeline(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<Vec<TimelineView>>, ApiError> {
    caller.require(READ_TIMELINE)?;
    visible(&state, &caller, id).await?;
    Ok(axum::Json(timeline_of(&state, &caller, id).await?))
}

/// The diagnostic detail: summary, the canonical document as received, artifacts, and (for roles
/// that read audit data) the timeline.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentDetail {
    /// The status view.
    pub summary: DocumentView,
    /// Artifacts.
    pub artifacts: Vec<ArtifactView>,
    /// The timeline; null for roles without audit access (viewer, issuer).
    pub timeline: Option<Vec<TimelineView>>,
    /// SIFEN's last answer (or the last failure to get one), explained; null before the first.
    pub sifen: Option<SifenAnswerView>,
}

/// SIFEN's last word on a document, in SIFEN's terms and in plain ones.
#[derive(Debug, Serialize, ToSchema)]
pub struct SifenAnswerView {
    /// SIFEN's code (`0260`, `0160`, …); null when the last attempt got no answer.
    pub code: Option<String>,
    /// SIFEN's message, or what went wrong reaching it.
    pub message: String,
    /// `dProtAut`, when approved.
    pub protocol: Option<String>,
    /// What the code usually means.
    pub meaning: Option<String>,
    /// What to do about it (and what kuatia does).
    pub action: Option<String>,
    /// What kuatia takes the code for, from SIFEN's answers table (docs/sifen-channel.md):
    /// `approved`, `rejected`, `absent`, `processing` or `operational` (ask again later).
    #[schema(value_type = Option<String>)]
    pub class: Option<kuatia_domain::sifen::answers::Meaning>,
}

/// The SIFEN block of the detail, from the document's own state.
async fn sifen_answer(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
) -> Result<Option<SifenAnswerView>, ApiError> {
    use kuatia_domain::document::aggregate::{self as agg, Document};
    let loaded =
        kuatia_application::aggregate::AggregateStore::<Document>::new(state.store.clone(), caller.tenant)
            .load(&agg::stream_id(caller.tenant, id))
            .await?;
    let Some(doc) = loaded.aggregate().state() else {
        return Ok(None);
    };
    let (code, message, protocol) = match (&doc.answer, &doc.last_failure) {
        (Some(answer), _) => (
            Some(answer.code.clone()),
            answer.message.clone(),
            answer.protocol.clone(),
        ),
        (None, Some(failure)) => {
            // "SIFEN 0161: …" when SIFEN answered with an operational code.
            let code = failure
                .strip_prefix("SIFEN ")
                .and_then(|rest| rest.get(..4))
                .filter(|c| c.bytes().all(|b| b.is_ascii_digit()))
                .map(str::to_owned);
            (code, failure.clone(), None)
        }
        (None, None) => return Ok(None),
    };
    let explained = match code.as_deref() {
        Some(code) => kuatia_domain::sifen::codes::explain(code),
        // SIFEN was not reached, or its answer did not come.
        None => kuatia_domain::sifen::codes::explain_failure(&message),
    };
    Ok(Some(SifenAnswerView {
        code,
        message,
        protocol,
        meaning: explained.map(|e| e.meaning.to_owned()),
        action: explained.map(|e| e.action.to_owned()),
        class: explained.map(|e| e.class),
    }))
}

/// A document's detail.
#[utoipa::path(
    get,
    path = "/v1/documents/{id}",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses((status = 200, description = "Detail", body = DocumentDetail), (status = 404, description = "No such document", body = ErrorBody))
)]
pub async fn get_document(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<DocumentDetail>, ApiError> {
    caller.require(READ_DOCUMENTS)?;
    let row = visible(&state, &caller, id).await?;
    let artifacts = crate::routes::artifacts::views(&state, &headers, &caller, id).await?;
    let timeline = if caller.role.allows(READ_TIMELINE) {
        Some(timeline_of(&state, &caller, id).await?)
    } else {
        None
    };
    let sifen = sifen_answer(&state, &caller, id).await?;
    Ok(axum::Json(DocumentDetail {
        summary: row.into(),
        artifacts,
        timeline,
        sifen,
    }))
}
