//! Contract §4.4: document intake and reading (DECISIONS §4–§5).
//!
//! Intake runs in stages, each refusing with every issue it finds:
//! 1. structure — the body is a CanonicalDocumentV1: every problem its published JSON Schema
//!    finds at once, then serde's parse (`crate::schema::canonical_document`);
//! 2. routing — company (or the key's), channel, branch and point, defaults resolved
//!    (`domain::document::routing`);
//! 3. readiness of the routed channel (`domain::channel`), certificate included, and what the
//!    document's type needs of it (a remisión on `sifen`: the channel's `remision_notice`);
//! 4. business validation (`domain::document::validation`; on `sifen`, places are checked against
//!    SET's geographic table there, `domain::geography`).
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
use kuatia_application::documents::{self, DocumentsError, Intake};
use kuatia_application::external_ids::{self, ExternalClaim, ExternalId};
use kuatia_application::idempotency::{self, Claim};
use kuatia_domain::access::Permission;
use kuatia_domain::certificate::Check;
use kuatia_domain::channel::{ChannelKind, EmissionChannel, ReadinessContext};
use kuatia_domain::document::aggregate::DocumentStatus;
use kuatia_domain::document::canonical::{self, CanonicalDocument};
use kuatia_domain::document::issues::Issue;
use kuatia_domain::document::routing::{self, Requested, Routing};
use kuatia_domain::document::validation::{self, RegistryAnswer, Validation, ValidationContext};
use kuatia_domain::ruc::Ruc;
use kuatia_projections::configuration::{self as read, CompanyRow};
use kuatia_projections::documents::{self as read_docs, DocumentRow};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody, ErrorCode};
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

/// A document that passed structure, routing and readiness, with its business validation.
#[derive(Debug)]
pub struct Prepared {
    /// The document as sent.
    pub document: CanonicalDocument,
    /// The body's hash as canonical JSON (`idempotency::request_hash`).
    pub request_hash: String,
    /// Where it goes.
    pub routing: Routing,
    /// The company.
    pub company: CompanyRow,
    /// The routed channel.
    pub channel: EmissionChannel,
    /// Business errors and warnings.
    pub validation: Validation,
}

/// Readiness checks that routing has not already covered, as issues.
fn readiness_issues(checks: Vec<Check>) -> (Vec<Issue>, bool) {
    let mut certificate = false;
    let issues = checks
        .into_iter()
        .filter(|c| !c.ok && c.name != "branch" && c.name != "issuance_point")
        .map(|c| {
            certificate |= c.name == "certificate";
            let code = if c.name == "certificate" {
                "certificate_not_ready"
            } else {
                "configuration_not_ready"
            };
            Issue::new(format!("configuration.{}", c.name), code, c.message)
        })
        .collect();
    (issues, certificate)
}

/// An autoimpresor range that earlier documents used up: refused at intake, nothing stored.
/// The channel's configured `next_number` opens the series; from then on the series' own count
/// says what is left (a document racing another for the last number is refused by the channel's
/// job instead, as `failed_terminal` with a `configuration_error`).
async fn used_up_range(
    state: &AppState,
    tenant: kuatia_domain::tenancy::TenantId,
    routing: &Routing,
    settings: &kuatia_domain::channel::AutoimpresorSettings,
) -> Result<Option<Issue>, Refusal> {
    let branch = read::branch(&state.store, tenant, routing.branch_id).await?;
    let point = read::issuance_point(&state.store, tenant, routing.issuance_point_id).await?;
    let (Some(branch), Some(point)) = (branch, point) else {
        return Ok(None);
    };
    let series = kuatia_application::process::autoimpresor::series_key(
        routing.company_id,
        settings,
        &branch.branch.code,
        &point.code,
    );
    let next = kuatia_projections::number_series::next_number_opt(&state.store, tenant, &series)
        .await?
        .unwrap_or(settings.next_number);
    Ok((next > settings.range_end).then(|| {
        Issue::new(
            "configuration.autoimpresor",
            "configuration_not_ready",
            format!(
                "the authorised range {}–{} of timbrado {} is exhausted; configure a new range on the channel",
                settings.range_start, settings.range_end, settings.timbrado
            ),
        )
    }))
}

/// `associated_document` against the tenant's own documents (issue 25): a `document_id` names
/// one SIFEN approved, whose CDC is filled in; a credit or debit note's CDC of the company's own
/// RUC that kuatia never issued is a warning (issued elsewhere, or mistyped: SIFEN refuses a note
/// whose invoice it does not hold). Business errors and warnings, added to validation's.
async fn resolve_associated(
    state: &AppState,
    tenant: kuatia_domain::tenancy::TenantId,
    document: &mut CanonicalDocument,
    ruc: &Ruc,
) -> Result<(Vec<Issue>, Vec<Issue>), Refusal> {
    use kuatia_domain::document::canonical::DocumentType;
    use kuatia_domain::document::issues::codes;
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    let note = matches!(
        document.doc_type,
        DocumentType::CreditNote | DocumentType::DebitNote
    );
    let credit_note = document.doc_type == DocumentType::CreditNote;
    let total = document.totals.grand_total.get();
    let Some(associated) = document.associated_document.as_mut() else {
        return Ok((errors, warnings));
    };
    // The tenant's document referred to, when it is one.
    let mut referred: Option<DocumentRow> = None;
    if let Some(id) = associated.document_id {
        let found = read_docs::document(&state.store, tenant, id).await?;
        let approved = found
            .as_ref()
            .filter(|d| d.status == DocumentStatus::Accepted.as_str())
            .and_then(|d| d.cdc.clone());
        match (approved, found) {
            (Some(cdc), _) if associated.cdc.as_deref().is_some_and(|c| c.trim() != cdc) => errors.push(Issue::new(
                "associated_document.cdc",
                codes::NOT_ALLOWED,
                format!("document {id} has CDC {cdc}: give document_id or cdc, not two that disagree"),
            )),
            (Some(cdc), found) => {
                associated.cdc = Some(cdc);
                referred = found;
            }
            (None, found) => errors.push(Issue::new(
                "associated_document.document_id",
                codes::ASSOCIATED_DOCUMENT_NOT_FOUND,
                match found {
                    None => format!("no document {id} in this tenant"),
                    Some(d) => format!(
                        "document {id} is {}: only a document SIFEN approved (accepted) has a CDC to refer to",
                        d.status
                    ),
                },
            )),
        }
    } else if note
        && let Some(cdc) = associated.cdc.as_deref().map(str::trim)
        && cdc.len() == 44
        && cdc.get(2..10).map(|r| r.trim_start_matches('0')) == Some(ruc.number().trim_start_matches('0'))
    {
        let filter = read_docs::Filter {
            cdc: Some(cdc.to_owned()),
            ..read_docs::Filter::default()
        };
        referred = read_docs::list(&state.store, tenant, &filter, 1)
            .await?
            .into_iter()
            .next();
        if referred.is_none() {
            warnings.push(Issue::new(
                "associated_document.cdc",
                codes::ASSOCIATED_DOCUMENT_UNKNOWN,
                format!(
                    "kuatia issued no document with CDC {cdc}: if it was issued elsewhere this is fine, otherwise check it (SIFEN refuses a note whose invoice it does not hold)"
                ),
            ));
        }
    }
    // Rule 2417: the credit notes of an invoice, this one and the live ones before it, add up to
    // at most the invoice's total.
    if credit_note
        && let Some(invoice) = &referred
        && let Some(cdc) = invoice.cdc.as_deref()
        && let Ok(invoice_total) = invoice.grand_total.parse::<rust_decimal::Decimal>()
    {
        let earlier: rust_decimal::Decimal = read_docs::credit_notes_of(&state.store, tenant, cdc)
            .await?
            .iter()
            .filter_map(|t| t.parse::<rust_decimal::Decimal>().ok())
            .sum();
        if total + earlier > invoice_total {
            let name = invoice.number.as_deref().unwrap_or(invoice.external_id.as_str());
            errors.push(Issue::new(
                "totals.grand_total",
                codes::CREDIT_NOTE_EXCEEDS_INVOICE,
                if earlier.is_zero() {
                    format!(
                        "a credit note adjusts at most its invoice's total: {total} is more than {invoice_total}, the total of {name} (rule 2417)"
                    )
                } else {
                    format!(
                        "the credit notes of {name} would add up to {}: its earlier credit notes already credit {earlier} of its total {invoice_total}, so at most {} is left (rule 2417)",
                        total + earlier,
                        (invoice_total - earlier).max(rust_decimal::Decimal::ZERO)
                    )
                },
            ));
        }
    }
    Ok((errors, warnings))
}

/// Runs stages 1–4 on a body.
pub async fn prepare(state: &AppState, caller: &Caller, body: &[u8]) -> Result<Prepared, Refusal> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| Refusal::Structure(canonical::parse(body).err().unwrap_or_default()))?;
    let request_hash = idempotency::request_hash(&value);
    let mut document = crate::schema::canonical_document(value).map_err(Refusal::Structure)?;

    let company_id = caller.company_scope(document.company_id)?.ok_or_else(|| {
        Refusal::Routing(vec![Issue::new(
            "company_id",
            routing::MISSING_CONFIGURATION,
            "company_id is required unless the API key is scoped to a company",
        )])
    })?;
    let snapshot = read::company_snapshot(&state.store, &state.snapshots, caller.tenant, company_id)
        .await?
        .ok_or_else(|| {
            Refusal::Routing(vec![Issue::new(
                "company_id",
                routing::UNKNOWN_REFERENCE,
                "no such company in this tenant",
            )])
        })?;
    let locations = &snapshot.locations;
    let requested = Requested {
        branch_id: document.branch_id,
        issuance_point_id: document.issuance_point_id,
        channel: document.channel,
    };
    let routing =
        routing::route(company_id, requested, &snapshot.channels, locations).map_err(Refusal::Routing)?;
    let channel = snapshot
        .channels
        .iter()
        .find(|c| c.channel_id == routing.channel_id)
        .cloned()
        .ok_or_else(|| {
            Refusal::Api(ApiError::new(
                ErrorCode::InternalError,
                "the routed channel vanished",
            ))
        })?;

    let company = snapshot.company.clone();
    let ruc = Ruc::parse(&company.ruc).map_err(|_| {
        Refusal::Api(ApiError::new(
            ErrorCode::InternalError,
            "a stored RUC is unreadable",
        ))
    })?;
    let certificates = &snapshot.certificates;
    let print_settings_saved = snapshot.print_settings_saved;
    let now = Utc::now();
    let ctx = ReadinessContext {
        ruc: &ruc,
        branches: locations,
        certificates,
        print_settings_saved,
        now,
        today: kuatia_domain::local_time::paraguay_today(now),
    };
    let mut checks = channel.readiness(&ctx);
    checks.extend(channel.document_checks(document.doc_type));
    let (issues, certificate) = readiness_issues(checks);
    if !issues.is_empty() {
        return Err(Refusal::NotReady {
            routing,
            issues,
            certificate,
        });
    }

    if let Some(settings) = channel.autoimpresor.as_ref()
        && let Some(issue) = used_up_range(state, caller.tenant, &routing, settings).await?
    {
        return Err(Refusal::NotReady {
            routing,
            issues: vec![issue],
            certificate: false,
        });
    }

    let certificate_expires_in_days = channel.sifen.as_ref().and_then(|s| {
        certificates
            .iter()
            .find(|c| c.certificate_id == s.certificate_id)
            .map(|c| c.facts.validate(&ruc, now).expires_in_days)
    });
    // The buyer's RUC against the taxpayer registry (a warning, never a refusal).
    let buyer_registry = match document
        .buyer
        .as_ref()
        .and_then(|b| b.ruc.as_deref())
        .and_then(|r| Ruc::parse(r).ok())
    {
        Some(buyer) => kuatia_infrastructure::lookup::registry_answer(state.store.as_ref(), &buyer).await,
        None => RegistryAnswer::NotLoaded,
    };
    let (reference_errors, reference_warnings) =
        resolve_associated(state, caller.tenant, &mut document, &ruc).await?;
    let mut validation = validation::validate(
        &document,
        &ValidationContext {
            channel: routing.channel,
            company_ruc: &ruc,
            environment: channel.sifen.as_ref().map(|s| s.environment),
            now,
            certificate_expires_in_days,
            buyer_registry,
        },
    );
    validation.errors.extend(reference_errors);
    validation.warnings.extend(reference_warnings);
    // What validation accepts, the builder builds (issue 25): a sifen document's DE is built here,
    // unsigned, so that one the pipeline could not build is refused now, not stuck later.
    if routing.channel == ChannelKind::Sifen
        && validation.errors.is_empty()
        && let Some(sifen) = channel.sifen.as_ref()
        && let Err(issue) =
            kuatia_application::process::build::check_buildable(&document, &ruc, &company.profile, sifen, now)
    {
        validation.errors.push(issue);
    }
    Ok(Prepared {
        document,
        request_hash,
        routing,
        company,
        channel,
        validation,
    })
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

/// `POST /v1/documents/validate` response (contract §2.8).
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
    request_body(content = CanonicalDocument, description = "A CanonicalDocumentV1 (contract §2.1, DECISIONS §4)",
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
    /// DocumentStatus (contract §2.7).
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

/// How long a request waits for another one holding its Idempotency-Key.
const IN_FLIGHT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// A claim older than this whose owner never finished is taken over.
const ABANDONED_AFTER: chrono::Duration = chrono::Duration::seconds(30);

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
    request_body(content = CanonicalDocument, description = "A CanonicalDocumentV1 (contract §2.1, DECISIONS §4)",
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
    let hash = prepared.request_hash.clone();
    let started = std::time::Instant::now();
    let document_id = loop {
        match idempotency::claim(&state.store, caller.tenant, &key, &hash, Utc::now()).await? {
            Claim::Claimed { document_id } => break document_id,
            Claim::Stored { document_id } => {
                return Ok(created(intake_view(&state, &caller, document_id).await?, true));
            }
            Claim::Replay { response } => return Ok(created(response, true)),
            Claim::Mismatch => {
                return Err(ApiError::validation(
                    "Idempotency-Key was already used with another request body",
                )
                .with_status(StatusCode::CONFLICT));
            }
            Claim::InFlight {
                document_id,
                claimed_at,
            } => {
                if Utc::now() - claimed_at > ABANDONED_AFTER {
                    // Its owner died: finish its work under the same document id (an existing
                    // document is found, never duplicated).
                    break document_id;
                }
                if started.elapsed() > IN_FLIGHT_WAIT {
                    return Err(ApiError::new(
                        ErrorCode::ConflictError,
                        "a request with this Idempotency-Key is still in progress; retry shortly",
                    ));
                }
                tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            }
        }
    };
    // One live document per external_id of a company and type (issue 26): a second one would be
    // a second fiscal document for the same sale.
    let external = ExternalId {
        company_id: prepared.routing.company_id,
        doc_type: prepared.document.doc_type.as_str(),
        external_id: &prepared.document.external_id,
    };
    if let ExternalClaim::Held {
        document_id: existing,
    } = external_ids::claim(&state.store, caller.tenant, &external, document_id, Utc::now()).await?
    {
        let _ = idempotency::release(&state.store, caller.tenant, &key, document_id).await;
        return Err(ApiError::new(
            ErrorCode::ConflictError,
            format!(
                "external_id {:?} already names {} {existing} of this company, which is not finished without effect: \
                 a second one would be a second fiscal document. Ask for it (GET /v1/documents/{existing}), or send \
                 another external_id; once it ends validation_failed, rejected, failed_terminal or invalidated the \
                 external_id is free again",
                external.external_id, external.doc_type
            ),
        )
        .with_details(json!({"existing_document_id": existing})));
    }
    let external_owned = (
        external.company_id,
        external.doc_type.to_owned(),
        external.external_id.to_owned(),
    );
    // The answer is built from what was decided, not read back: the row intake leaves behind
    // (its status, version and time come from the append).
    let mut row = DocumentRow::after_intake(
        document_id,
        &prepared.routing,
        &prepared.document,
        prepared.validation.errors.clone(),
        prepared.validation.warnings.clone(),
    );
    let intake = Intake {
        document_id,
        routing: prepared.routing,
        document: prepared.document,
        errors: prepared.validation.errors,
        warnings: prepared.validation.warnings,
    };
    let view =
        match documents::receive(&state.store, caller.tenant, intake, caller.metadata(), Utc::now()).await {
            Ok(Some(stored)) => {
                row.status = stored.status.as_str().to_owned();
                row.version = stored.version as i64;
                row.created_at = stored.recorded_at;
                row.updated_at = stored.recorded_at;
                serde_json::to_value(DocumentView::from(row)).unwrap_or(Value::Null)
            }
            // Taken over from a request that died after storing it: answer its intake.
            Ok(None) => intake_view(&state, &caller, document_id).await?,
            Err(e) => {
                let _ = idempotency::release(&state.store, caller.tenant, &key, document_id).await;
                let external = ExternalId {
                    company_id: external_owned.0,
                    doc_type: &external_owned.1,
                    external_id: &external_owned.2,
                };
                let _ = external_ids::release(&state.store, caller.tenant, &external, document_id).await;
                return Err(match e {
                    DocumentsError::Store(e) => e.into(),
                    other => ApiError::new(ErrorCode::ConflictError, other.to_string()),
                });
            }
        };
    Ok(created(view, false))
}

/// `GET /v1/documents` query (contract §4.4).
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

/// Makes the next attempt of a document in `retrying` immediate (contract §3): 202 with its
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

/// The fiscal reason body (contract §2.15).
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
                "the cancellation window closed at {deadline} (DECISIONS §5: 48 h for invoices and \
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

/// Cancels a document (contract §3, DECISIONS §5).
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

/// Inutilises a document's number (contract §3, DECISIONS §5).
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

/// An artifact with a presigned download URL (DECISIONS §8; built by
/// `routes::artifacts::views` for both the artifact list and the detail).
#[derive(Debug, Serialize, ToSchema)]
pub struct ArtifactView {
    /// Id.
    pub id: Uuid,
    /// kude, signed_xml, printable_pdf, …
    #[serde(rename = "type")]
    pub kind: String,
    /// Version per type.
    pub version: i64,
    /// MIME type.
    pub content_type: String,
    /// SHA-256, hex.
    pub sha256: String,
    /// Bytes.
    pub size: i64,
    /// Recorded.
    pub created_at: chrono::DateTime<Utc>,
    /// Where to download the bytes without a bearer: `…/artifacts/{id}/download?expires=&signature=`,
    /// valid until `expires_at`.
    pub download_url: String,
    /// When `download_url` stops working (15 minutes after the listing).
    pub expires_at: chrono::DateTime<Utc>,
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
