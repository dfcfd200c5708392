//! `GET|POST /v1/certificates`, `POST /v1/certificates/{id}/validate`.
//!
//! An upload is JSON `{company_id, pfx_base64, password, label?}` or `multipart/form-data` with a
//! `pfx` file part and the same fields as text parts. The password and the file never reach a log
//! line or an error message; responses carry only what the certificate says.

use crate::extract::Path;
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{StatusCode, header};
use base64::Engine;
use chrono::{DateTime, Utc};
use kuatia_application::configuration::{self, CertificateUpload};
use kuatia_domain::access::Permission;
use kuatia_domain::certificate::{CertificateStatus, Check};
use kuatia_domain::ruc::Ruc;
use kuatia_projections::configuration::CertificateRow;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;
use zeroize::Zeroizing;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::Json;
use crate::routes::companies::configuration_error;
use crate::state::AppState;

/// Needed by `GET /v1/certificates`.
pub const LIST_CERTIFICATES: Permission = Permission::ReadConfiguration;
/// Needed by `POST /v1/certificates`.
pub const UPLOAD_CERTIFICATE: Permission = Permission::ManageConfiguration;
/// Needed by `POST /v1/certificates/{id}/validate`.
pub const VALIDATE_CERTIFICATE: Permission = Permission::ReadConfiguration;

/// A certificate, without key material.
#[derive(Debug, Serialize, ToSchema)]
pub struct CertificateView {
    /// Id.
    pub id: Uuid,
    /// Company.
    pub company_id: Uuid,
    /// Free label.
    pub label: Option<String>,
    /// Subject (RFC 4514).
    pub subject: String,
    /// Issuer (RFC 4514).
    pub issuer: String,
    /// Serial number, hex.
    pub serial_number: String,
    /// The RUC the certificate names (`80069563-1`), if any.
    pub ruc: Option<String>,
    /// Start of validity.
    pub not_before: DateTime<Utc>,
    /// End of validity.
    pub not_after: DateTime<Utc>,
    /// SHA-256 of the DER, hex.
    pub fingerprint_sha256: String,
    /// `valid`, `expiring_soon` (under 30 days), `not_yet_valid`, `expired` or `invalid` (a check
    /// of `validate` fails).
    #[schema(value_type = String)]
    pub status: CertificateStatus,
    /// Uploaded.
    pub created_at: DateTime<Utc>,
}

fn view(row: CertificateRow, company_ruc: &Ruc, now: DateTime<Utc>) -> CertificateView {
    let r = row.record;
    CertificateView {
        id: r.certificate_id,
        company_id: row.company_id,
        label: r.label,
        status: r.facts.status(company_ruc, now),
        subject: r.facts.subject,
        issuer: r.facts.issuer,
        serial_number: r.facts.serial_number,
        ruc: r.facts.ruc,
        not_before: r.facts.not_before,
        not_after: r.facts.not_after,
        fingerprint_sha256: r.facts.fingerprint_sha256,
        created_at: row.created_at,
    }
}

async fn company_ruc(state: &AppState, caller: &Caller, company: Uuid) -> Result<Ruc, ApiError> {
    let row = kuatia_projections::configuration::company(&state.store, caller.tenant, company)
        .await?
        .ok_or_else(|| ApiError::not_found("no such company"))?;
    Ruc::parse(&row.ruc).map_err(|_| ApiError::new(ErrorCode::InternalError, "a stored RUC is unreadable"))
}

/// Lists the tenant's certificates (a company-scoped key: its company's), newest first.
#[utoipa::path(
    get,
    path = "/v1/certificates",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "Certificates, without key material", body = [CertificateView]),
        (status = 401, description = "No valid credentials", body = ErrorBody),
        (status = 403, description = "Not this tenant", body = ErrorBody)
    )
)]
pub async fn list_certificates(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<axum::Json<Vec<CertificateView>>, ApiError> {
    caller.require(LIST_CERTIFICATES)?;
    let rows =
        kuatia_projections::configuration::certificates(&state.store, caller.tenant, caller.company_id)
            .await?;
    let companies =
        kuatia_projections::configuration::companies(&state.store, caller.tenant, caller.company_id).await?;
    let now = Utc::now();
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let Some(ruc) = companies
            .iter()
            .find(|c| c.id == row.company_id)
            .and_then(|c| Ruc::parse(&c.ruc).ok())
        else {
            continue;
        };
        out.push(view(row, &ruc, now));
    }
    Ok(axum::Json(out))
}

/// The fields of an upload, from either body shape.
#[derive(Default)]
struct UploadFields {
    company_id: Option<String>,
    pfx: Option<Vec<u8>>,
    password: Option<Zeroizing<String>>,
    label: Option<String>,
}

fn decode_pfx(text: &str) -> Result<Vec<u8>, ApiError> {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(|_| {
            ApiError::invalid_field("pfx_base64", "invalid_base64", "pfx_base64 is not valid base64")
        })
}

fn text_field(object: &mut serde_json::Map<String, Value>, name: &str) -> Result<Option<String>, ApiError> {
    match object.remove(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        // The value is not echoed: it may be the password.
        Some(_) => Err(ApiError::invalid_field(
            name,
            "invalid_type",
            format!("{name} must be a string"),
        )),
    }
}

async fn upload_fields(request: Request) -> Result<UploadFields, ApiError> {
    let multipart = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("multipart/form-data")
        });
    let mut fields = UploadFields::default();
    if multipart {
        let mut form = Multipart::from_request(request, &())
            .await
            .map_err(|e| ApiError::validation(format!("unreadable multipart body: {}", e.body_text())))?;
        while let Some(part) = form.next_field().await.map_err(|e| {
            ApiError::validation(format!("unreadable multipart body: {}", e.body_text()))
                .with_status(e.status())
        })? {
            let name = part.name().unwrap_or_default().to_owned();
            let bytes = part.bytes().await.map_err(|e| {
                ApiError::validation(format!("unreadable part {name}: {}", e.body_text()))
                    .with_status(e.status())
            })?;
            let text = || {
                String::from_utf8(bytes.to_vec()).map_err(|_| {
                    ApiError::invalid_field(&name, "invalid_text", format!("{name} must be UTF-8 text"))
                })
            };
            match name.as_str() {
                "pfx" => fields.pfx = Some(bytes.to_vec()),
                "pfx_base64" => fields.pfx = Some(decode_pfx(&text()?)?),
                "password" => fields.password = Some(Zeroizing::new(text()?)),
                "company_id" => fields.company_id = Some(text()?),
                "label" => fields.label = Some(text()?),
                other => {
                    return Err(ApiError::invalid_field(
                        other,
                        "unknown_field",
                        format!("unknown part {other:?}; expected pfx, password, company_id, label"),
                    ));
                }
            }
        }
    } else {
        let Json(body) = Json::<Value>::from_request(request, &()).await?;
        let Value::Object(mut object) = body else {
            return Err(ApiError::validation("the body must be a JSON object"));
        };
        fields.company_id = text_field(&mut object, "company_id")?;
        fields.password = text_field(&mut object, "password")?.map(Zeroizing::new);
        fields.label = text_field(&mut object, "label")?;
        if let Some(text) = text_field(&mut object, "pfx_base64")? {
            fields.pfx = Some(decode_pfx(&text)?);
        }
        if let Some(unknown) = object.keys().next() {
            return Err(ApiError::invalid_field(
                unknown,
                "unknown_field",
                format!("unknown field {unknown:?}; expected company_id, pfx_base64, password, label"),
            ));
        }
    }
    Ok(fields)
}

/// Uploads a PFX (PKCS#12) certificate: JSON with `pfx_base64`, or multipart with a `pfx` file.
#[utoipa::path(
    post,
    path = "/v1/certificates",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body(
        description = "JSON `{company_id, pfx_base64, password, label?}`, or multipart/form-data with a `pfx` \
                       file part and company_id, password, label as text parts. Legacy RC2/3DES files are accepted.",
        content(
            (Object = "application/json", example = json!({"company_id": "0192f0c6-58a3-7c2e-9d1b-3b1f4c2a9e10", "pfx_base64": "MIIJ…", "password": "the PFX password", "label": "firma 2026"})),
            (Object = "multipart/form-data")
        )
    ),
    responses(
        (status = 201, description = "Stored (key and chain sealed with AES-256-GCM)", body = CertificateView),
        (status = 400, description = "Missing field, bad base64, or (certificate_error) a file that is not a PFX or a wrong password", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such company", body = ErrorBody),
        (status = 409, description = "This certificate is already uploaded for the company", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody)
    )
)]
pub async fn upload_certificate(
    State(state): State<AppState>,
    caller: Caller,
    request: Request,
) -> Result<(StatusCode, axum::Json<CertificateView>), ApiError> {
    caller.require(UPLOAD_CERTIFICATE)?;
    let fields = upload_fields(request).await?;
    let explicit = fields
        .company_id
        .as_deref()
        .map(|id| {
            id.trim().parse::<Uuid>().map_err(|_| {
                ApiError::invalid_field("company_id", "invalid_uuid", "company_id must be a UUID")
            })
        })
        .transpose()?;
    let company = crate::routes::companies::company_row(&caller, &state.store, explicit).await?;
    let pfx = fields
        .pfx
        .filter(|p| !p.is_empty())
        .ok_or_else(|| ApiError::invalid_field("pfx_base64", "required", "the PFX file is required"))?;
    let password = fields
        .password
        .ok_or_else(|| ApiError::invalid_field("password", "required", "the PFX password is required"))?;
    let label = fields
        .label
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty());
    if label.as_ref().is_some_and(|l| l.chars().count() > 100) {
        return Err(ApiError::invalid_field(
            "label",
            "invalid_length",
            "label has at most 100 characters",
        ));
    }
    let record = configuration::add_certificate(
        &state.store,
        &state.vault,
        &state.pfx_slots,
        caller.tenant,
        &company.stream_id,
        CertificateUpload { pfx, password, label },
        caller.metadata(),
    )
    .await
    .map_err(configuration_error)?;
    let row =
        kuatia_projections::configuration::certificate(&state.store, caller.tenant, record.certificate_id)
            .await?
            .ok_or_else(|| ApiError::new(ErrorCode::InternalError, "the new certificate is not readable"))?;
    let ruc = Ruc::parse(&company.ruc)
        .map_err(|_| ApiError::new(ErrorCode::InternalError, "a stored RUC is unreadable"))?;
    Ok((StatusCode::CREATED, axum::Json(view(row, &ruc, Utc::now()))))
}

/// One check of a validation.
#[derive(Debug, Serialize, ToSchema)]
pub struct CheckView {
    /// `key_matches_certificate`, `validity_period`, `rsa_key_size`, `ruc_matches_company`,
    /// `client_auth_usage` (certificates); `chain` (its own route); readiness adds its own names.
    pub name: String,
    /// Passed.
    pub ok: bool,
    /// What was found.
    pub message: String,
    /// The same for the console's words in its languages (not in the JSON answer).
    #[serde(skip)]
    pub finding: kuatia_domain::certificate::Finding,
}

impl From<Check> for CheckView {
    fn from(c: Check) -> Self {
        Self {
            name: c.name,
            ok: c.ok,
            message: c.message,
            finding: c.finding,
        }
    }
}

/// `POST /v1/certificates/{id}/validate` response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ValidationView {
    /// Every check passed.
    pub valid: bool,
    /// Every check of the certificate (key matches, validity period, RSA of 2048 bits or more,
    /// the company's RUC, clientAuth usage), each with its outcome.
    pub checks: Vec<CheckView>,
    /// Whole days until the end of validity (negative once expired).
    pub expires_in_days: i64,
}

/// Checks a certificate: key matches, validity period, RSA ≥ 2048, the RUC is the company's,
/// clientAuth usage.
#[utoipa::path(
    post,
    path = "/v1/certificates/{id}/validate",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(
        ("id" = Uuid, Path, description = "The certificate"),
        ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")
    ),
    responses(
        (status = 200, description = "The checks (a failed check is still 200)", body = ValidationView),
        (status = 404, description = "No such certificate", body = ErrorBody)
    )
)]
pub async fn validate_certificate(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<ValidationView>, ApiError> {
    let row = checked_certificate(&state, &caller, id).await?;
    let ruc = company_ruc(&state, &caller, row.company_id).await?;
    let v = row.record.facts.validate(&ruc, Utc::now());
    Ok(axum::Json(ValidationView {
        valid: v.valid,
        checks: v.checks.into_iter().map(CheckView::from).collect(),
        expires_in_days: v.expires_in_days,
    }))
}

/// Certificate `id` for a caller that may check it and sees its company (404 otherwise).
async fn checked_certificate(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
) -> Result<kuatia_projections::configuration::CertificateRow, ApiError> {
    caller.require(VALIDATE_CERTIFICATE)?;
    kuatia_projections::configuration::certificate(&state.store, caller.tenant, id)
        .await?
        .filter(|r| caller.sees(r.company_id))
        .ok_or_else(|| ApiError::not_found("no such certificate"))
}

/// `GET /v1/certificates/{id}/chain` response.
#[derive(Debug, Serialize, ToSchema)]
pub struct CertificateChainView {
    /// The chain as a check: `name` is `chain`; `ok` is false only when the file's own
    /// certificates contradict each other; `message` says what the file carries.
    pub check: CheckView,
    /// The holder's certificate is its own issuer (for the simulator and tests; SIFEN accepts
    /// only certificates of an accredited provider). Null for a certificate uploaded before
    /// chains were examined (upload it again).
    pub self_signed: Option<bool>,
    /// The subjects of the file's certificates above the holder's, from its issuer up, each
    /// signature verified.
    pub issuers: Vec<String>,
    /// The chain ends at a root (a self-signed certificate) the file carries.
    pub reaches_root: Option<bool>,
}

/// Says the chain the certificate's file carried when it was uploaded: self-signed, its issuers
/// up to a root, or without its issuer. A separate answer from `validate`, whose checks are
/// decided: the chain fails only when the file contradicts itself.
#[utoipa::path(
    get,
    path = "/v1/certificates/{id}/chain",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(
        ("id" = Uuid, Path, description = "The certificate"),
        ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")
    ),
    responses(
        (status = 200, description = "The chain", body = CertificateChainView),
        (status = 404, description = "No such certificate", body = ErrorBody)
    )
)]
pub async fn certificate_chain(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<CertificateChainView>, ApiError> {
    let row = checked_certificate(&state, &caller, id).await?;
    let facts = &row.record.facts;
    Ok(axum::Json(CertificateChainView {
        check: facts.chain_check().into(),
        self_signed: facts.chain.as_ref().map(|c| c.self_signed),
        issuers: facts
            .chain
            .as_ref()
            .map(|c| c.issuers.clone())
            .unwrap_or_default(),
        reaches_root: facts.chain.as_ref().map(|c| c.reaches_root),
    }))
}
