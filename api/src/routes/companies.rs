//! `GET|POST /v1/companies`, `PATCH /v1/companies/{id}`.

use crate::extract::Path;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use kuatia_application::configuration::{self, ConfigurationError};
use kuatia_application::vault::{PfxError, VaultError};
use kuatia_domain::access::Permission;
use kuatia_domain::company::{CompanyCommand, CompanyError, CompanyProfile};
use kuatia_domain::ruc::{Ruc, RucError};
use kuatia_projections::configuration::CompanyRow;
use serde::Serialize;
use serde_json::{Map, Value, json};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::Json;
use crate::state::AppState;

/// Needed by `GET /v1/companies`.
pub const LIST_COMPANIES: Permission = Permission::ReadConfiguration;
/// Needed by `POST /v1/companies`.
pub const CREATE_COMPANY: Permission = Permission::ManageConfiguration;
/// Needed by `PATCH /v1/companies/{id}`.
pub const UPDATE_COMPANY: Permission = Permission::ManageConfiguration;

/// A company: its id, RUC and every field of its profile.
#[derive(Debug, Serialize, ToSchema)]
pub struct CompanyView {
    /// Id.
    pub id: Uuid,
    /// RUC with its check digit, `80069563-1`.
    pub ruc: String,
    /// legal_name, trade_name, taxpayer_type (`individual`|`legal_entity`), tax_regime_code,
    /// address, house_number, department_code, department_name, district_code, district_name,
    /// city_code, city_name, phone, email, economic_activities [{code, description}]. The codes
    /// are SET's geographic table's and must agree (city in district in department); the names
    /// are the table's: optional on input (filled from the table), and a name given that is not
    /// the table's is refused (400 validation_error, `city_name_mismatch` and the like, naming it).
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub profile: CompanyProfile,
    /// Registered.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

impl From<CompanyRow> for CompanyView {
    fn from(row: CompanyRow) -> Self {
        Self {
            id: row.id,
            ruc: row.ruc,
            profile: row.profile,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

fn profile_from(object: Map<String, Value>) -> Result<CompanyProfile, ApiError> {
    let profile: CompanyProfile = serde_json::from_value(Value::Object(object))
        .map_err(|e| ApiError::validation(format!("the body does not match the company schema: {e}")))?;
    let issues = profile.issues();
    if !issues.is_empty() {
        return Err(invalid(
            issues
                .into_iter()
                .map(|i| (i.field, i.code.to_owned(), i.message))
                .collect(),
        ));
    }
    Ok(profile)
}

/// 400 with every issue in `details.errors`.
pub fn invalid(issues: Vec<(String, String, String)>) -> ApiError {
    let errors: Vec<Value> = issues
        .iter()
        .map(|(field, code, message)| json!({"field": field, "code": code, "message": message}))
        .collect();
    ApiError::validation(format!(
        "the request has {} problem(s); see details.errors",
        errors.len()
    ))
    .with_details(json!({ "errors": errors }))
}

/// Maps the configuration use cases' errors.
pub fn configuration_error(err: ConfigurationError) -> ApiError {
    match err {
        ConfigurationError::DuplicateCode(code) => ApiError::new(
            ErrorCode::ConflictError,
            format!("the code {code} is already used"),
        ),
        ConfigurationError::Duplicate => ApiError::new(
            ErrorCode::ConflictError,
            "a company with this RUC is already registered in this tenant",
        ),
        ConfigurationError::NotFound => ApiError::not_found("no such company"),
        ConfigurationError::Conflict => {
            ApiError::new(ErrorCode::ConflictError, "a concurrent change won; retry")
        }
        ConfigurationError::Refused(CompanyError::Invalid(issues)) => invalid(issues),
        ConfigurationError::Refused(
            e @ (CompanyError::DuplicateCertificate(_) | CompanyError::ChannelKindChanged(..)),
        ) => ApiError::new(ErrorCode::ConflictError, e.to_string()),
        ConfigurationError::Pfx(e @ PfxError::TooMuchWork(_)) => {
            ApiError::invalid_field("pfx_base64", "pfx_work_limit", e.to_string())
        }
        ConfigurationError::Pfx(e @ PfxError::Busy) => {
            ApiError::new(ErrorCode::RateLimitError, e.to_string())
                .with_details(serde_json::json!({"bucket": "certificate_uploads"}))
                .with_header(axum::http::header::RETRY_AFTER, "2")
        }
        ConfigurationError::Pfx(e) => ApiError::new(ErrorCode::CertificateError, e.to_string()),
        ConfigurationError::Vault(VaultError::Store(e)) => ApiError::internal(&e),
        ConfigurationError::Vault(e) => ApiError::internal(&e),
        ConfigurationError::Refused(other) => ApiError::validation(other.to_string()),
        ConfigurationError::Store(e) => ApiError::internal(&e),
    }
}

/// Lists the tenant's companies (a company-scoped key sees only its company).
#[utoipa::path(
    get,
    path = "/v1/companies",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "Companies by RUC", body = [CompanyView]),
        (status = 401, description = "No valid credentials", body = ErrorBody),
        (status = 403, description = "Not this tenant", body = ErrorBody)
    )
)]
pub async fn list_companies(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<axum::Json<Vec<CompanyView>>, ApiError> {
    caller.require(LIST_COMPANIES)?;
    let rows =
        kuatia_projections::configuration::companies(&state.store, caller.tenant, caller.company_id).await?;
    Ok(axum::Json(rows.into_iter().map(CompanyView::from).collect()))
}

/// Registers a company; the RUC's check digit is verified.
#[utoipa::path(
    post,
    path = "/v1/companies",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body(content = Object, description = "`ruc` (`80069563-1`) and every profile field of CompanyView; department_name, district_name and city_name may be omitted (filled from SET's geographic table)"),
    responses(
        (status = 201, description = "Registered", body = CompanyView),
        (status = 400, description = "Invalid RUC (wrong check digit included) or profile (codes not in SET's geographic table or not agreeing: unknown_city_code, city_department_mismatch, city_district_mismatch; a name not the table's: city_name_mismatch, department_name_mismatch, district_name_mismatch); every problem in details.errors", body = ErrorBody),
        (status = 403, description = "Role not allowed, or a company-scoped key", body = ErrorBody),
        (status = 409, description = "The RUC is already registered in this tenant", body = ErrorBody)
    )
)]
pub async fn create_company(
    State(state): State<AppState>,
    caller: Caller,
    Json(mut body): Json<Map<String, Value>>,
) -> Result<(StatusCode, axum::Json<CompanyView>), ApiError> {
    caller.require(CREATE_COMPANY)?;
    if caller.company_id.is_some() {
        return Err(ApiError::forbidden(
            "a company-scoped key cannot register companies",
        ));
    }
    let ruc_text = match body.remove("ruc") {
        Some(Value::String(text)) => text,
        _ => {
            return Err(ApiError::invalid_field(
                "ruc",
                "required",
                "ruc is required, as NNNNNNNN-D",
            ));
        }
    };
    let ruc = Ruc::parse(&ruc_text).map_err(|e| match e {
        RucError::CheckDigit { .. } => ApiError::invalid_field("ruc", "invalid_check_digit", e.to_string()),
        RucError::Format => ApiError::invalid_field("ruc", "invalid_format", e.to_string()),
    })?;
    let profile = profile_from(body)?;
    let id = configuration::register_company(&state.store, caller.tenant, ruc, profile, caller.metadata())
        .await
        .map_err(configuration_error)?;
    let row = kuatia_projections::configuration::company(&state.store, caller.tenant, id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::InternalError, "the new company is not readable"))?;
    Ok((StatusCode::CREATED, axum::Json(row.into())))
}

/// Changes any field of a company but its RUC.
#[utoipa::path(
    patch,
    path = "/v1/companies/{id}",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(
        ("id" = Uuid, Path, description = "Company id"),
        ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")
    ),
    request_body(content = Object, description = "The profile fields to change (not `ruc`)"),
    responses(
        (status = 200, description = "The updated company", body = CompanyView),
        (status = 400, description = "Invalid field, or an attempt to change the RUC", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such company for this caller", body = ErrorBody)
    )
)]
pub async fn update_company(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
    Json(patch): Json<Map<String, Value>>,
) -> Result<axum::Json<CompanyView>, ApiError> {
    caller.require(UPDATE_COMPANY)?;
    if caller.company_id.is_some_and(|scope| scope != id) {
        return Err(ApiError::not_found("no such company"));
    }
    let current = kuatia_projections::configuration::company(&state.store, caller.tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such company"))?;
    if patch.contains_key("ruc") {
        return Err(ApiError::invalid_field(
            "ruc",
            "immutable",
            "the RUC of a company cannot change",
        ));
    }
    let Value::Object(mut merged) =
        serde_json::to_value(&current.profile).map_err(|e| ApiError::internal(&e))?
    else {
        return Err(ApiError::new(ErrorCode::InternalError, "internal error"));
    };
    // A patch that moves the address drops the names (and the district) of the old place unless
    // it gives them: they are filled from SET's geographic table, not kept for another code.
    let moved = |code: &str| patch.contains_key(code);
    let stale: &[(&str, bool)] = &[
        ("city_name", moved("city_code")),
        ("district_code", moved("city_code")),
        ("district_name", moved("city_code") || moved("district_code")),
        ("department_name", moved("department_code")),
    ];
    for (field, drop) in stale {
        if *drop && !patch.contains_key(*field) {
            merged.remove(*field);
        }
    }
    merged.extend(patch);
    let profile = profile_from(merged)?;
    configuration::change_company(
        &state.store,
        caller.tenant,
        &current.stream_id,
        CompanyCommand::UpdateProfile { profile },
        caller.metadata(),
    )
    .await
    .map_err(configuration_error)?;
    let row = kuatia_projections::configuration::company(&state.store, caller.tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such company"))?;
    Ok(axum::Json(row.into()))
}

/// The company a write needs, as its row: the explicit or the caller's key's company, which must
/// exist.
pub async fn company_row(
    caller: &Caller,
    store: &kuatia_application::event_store::SharedStore,
    explicit: Option<Uuid>,
) -> Result<kuatia_projections::configuration::CompanyRow, ApiError> {
    let id = caller
        .company_scope(explicit)?
        .ok_or_else(|| ApiError::invalid_field("company_id", "required", "company_id is required"))?;
    kuatia_projections::configuration::company(store, caller.tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such company"))
}
