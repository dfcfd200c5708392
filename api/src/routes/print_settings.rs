//! Contract §4.3: `GET|PUT /v1/print-settings` (§2.13, DECISIONS §3).

use crate::extract::Query;
use axum::extract::State;
use chrono::{DateTime, Utc};
use kuatia_application::configuration;
use kuatia_domain::access::Permission;
use kuatia_domain::company::CompanyCommand;
use kuatia_domain::print_settings::PrintSettings;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::extract::Json;
use crate::routes::companies::{configuration_error, invalid};
use crate::state::AppState;

/// Needed by `GET /v1/print-settings`.
pub const READ_PRINT_SETTINGS: Permission = Permission::ReadConfiguration;
/// Needed by `PUT /v1/print-settings`.
pub const SAVE_PRINT_SETTINGS: Permission = Permission::ManageConfiguration;

/// The read response: the settings plus their record's id, tenant and times (`id` and the times
/// are null while the company prints with the defaults).
#[derive(Debug, Serialize, ToSchema)]
pub struct PrintSettingsView {
    /// Record id (null: never saved).
    pub id: Option<Uuid>,
    /// Tenant.
    pub tenant_id: Uuid,
    /// Company.
    pub company_id: Uuid,
    /// logo_text, logo_image_data_url, logo_image_name, business_activity, footer_note,
    /// copy_label (`ORIGINAL`|`COPIA`), show_logo, show_item_tax, show_payment_terms,
    /// show_copy_label, page_width, page_height (millimetres), template_elements.
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub settings: PrintSettings,
    /// First saved.
    pub created_at: Option<DateTime<Utc>>,
    /// Last saved.
    pub updated_at: Option<DateTime<Utc>>,
}

/// `GET /v1/print-settings` query.
#[derive(Debug, Deserialize, IntoParams)]
pub struct PrintSettingsQuery {
    /// The company (required).
    pub company_id: Option<Uuid>,
}

async fn read(state: &AppState, caller: &Caller, company_id: Uuid) -> Result<PrintSettingsView, ApiError> {
    if caller.company_id.is_some_and(|scope| scope != company_id) {
        return Err(ApiError::not_found("no such company"));
    }
    let company = kuatia_projections::configuration::company(&state.store, caller.tenant, company_id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such company"))?;
    let saved =
        kuatia_projections::configuration::print_settings(&state.store, caller.tenant, company_id).await?;
    Ok(match saved {
        Some(row) => PrintSettingsView {
            id: Some(row.id),
            tenant_id: caller.tenant.as_uuid(),
            company_id,
            settings: row.settings,
            created_at: Some(row.created_at),
            updated_at: Some(row.updated_at),
        },
        None => PrintSettingsView {
            id: None,
            tenant_id: caller.tenant.as_uuid(),
            company_id,
            settings: PrintSettings::defaults(&company.profile.legal_name),
            created_at: None,
            updated_at: None,
        },
    })
}

/// A company's print settings (its defaults until saved).
#[utoipa::path(
    get,
    path = "/v1/print-settings",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(PrintSettingsQuery, ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "The settings", body = PrintSettingsView),
        (status = 400, description = "company_id missing", body = ErrorBody),
        (status = 404, description = "No such company", body = ErrorBody)
    )
)]
pub async fn get_print_settings(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<PrintSettingsQuery>,
) -> Result<axum::Json<PrintSettingsView>, ApiError> {
    caller.require(READ_PRINT_SETTINGS)?;
    let company_id = query
        .company_id
        .ok_or_else(|| ApiError::invalid_field("company_id", "required", "company_id is required"))?;
    Ok(axum::Json(read(&state, &caller, company_id).await?))
}

/// Saves a company's print settings (all fields, as the contract's PrintSettingsRequest).
#[utoipa::path(
    put,
    path = "/v1/print-settings",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body(content = Object, description = "company_id and every field of PrintSettingsView's settings"),
    responses(
        (status = 200, description = "Saved", body = PrintSettingsView),
        (status = 400, description = "Invalid field; a logo that is not a JPEG data URL under 512 KiB", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such company", body = ErrorBody)
    )
)]
pub async fn put_print_settings(
    State(state): State<AppState>,
    caller: Caller,
    Json(mut body): Json<Map<String, Value>>,
) -> Result<axum::Json<PrintSettingsView>, ApiError> {
    caller.require(SAVE_PRINT_SETTINGS)?;
    let company_id = body
        .remove("company_id")
        .and_then(|v| v.as_str().and_then(|s| s.parse::<Uuid>().ok()))
        .ok_or_else(|| {
            ApiError::invalid_field("company_id", "required", "company_id (a UUID) is required")
        })?;
    let settings: PrintSettings = serde_json::from_value(Value::Object(body)).map_err(|e| {
        ApiError::validation(format!("the body does not match the print settings schema: {e}"))
    })?;
    let issues = settings.issues();
    if !issues.is_empty() {
        return Err(invalid(issues));
    }
    let current = read(&state, &caller, company_id).await?;
    let company = kuatia_projections::configuration::company(&state.store, caller.tenant, company_id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such company"))?;
    let command = CompanyCommand::SetPrintSettings {
        settings_id: current.id.unwrap_or_else(Uuid::now_v7),
        settings,
    };
    configuration::change_company(
        &state.store,
        caller.tenant,
        &company.stream_id,
        command,
        caller.metadata(),
    )
    .await
    .map_err(configuration_error)?;
    Ok(axum::Json(read(&state, &caller, company_id).await?))
}
