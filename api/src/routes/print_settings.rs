//! `GET|PUT /v1/print-settings`, and `PATCH` (issue 26) for
//! changing some settings. Bodies are checked against their published schemas
//! (`crate::schema`), so every problem comes back at once; the GET answer can be sent back as
//! it came.

use crate::extract::Query;
use axum::extract::State;
use chrono::{DateTime, Utc};
use kuatia_application::configuration;
use kuatia_domain::access::Permission;
use kuatia_domain::company::CompanyCommand;
use kuatia_domain::print_settings::{CopyLabel, PrintSettings};
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
/// Needed by `PUT` and `PATCH /v1/print-settings`.
pub const SAVE_PRINT_SETTINGS: Permission = Permission::ManageConfiguration;

/// The read response: the settings plus their record's id, tenant and times (`id` and the times
/// are null while the company prints with the defaults). Its schema is [`PrintSettings`]'s with
/// those fields added (`view_schema`): a derived one would be `allOf` PrintSettings, whose
/// `additionalProperties: false` refuses the added fields.
#[derive(Debug, Serialize)]
pub struct PrintSettingsView {
    /// Record id (null: never saved).
    pub id: Option<Uuid>,
    /// Tenant.
    pub tenant_id: Uuid,
    /// Company.
    pub company_id: Uuid,
    /// The settings (PrintSettings).
    #[serde(flatten)]
    pub settings: PrintSettings,
    /// First saved.
    pub created_at: Option<DateTime<Utc>>,
    /// Last saved.
    pub updated_at: Option<DateTime<Utc>>,
}

/// `GET /v1/print-settings` query.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
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

/// The fields of the GET answer that are not settings: a PUT or PATCH may send them back (the
/// GET answer as it came), and they are ignored.
pub const READ_ONLY_FIELDS: &[&str] = &["id", "tenant_id", "created_at", "updated_at"];

/// The body of `PUT /v1/print-settings`: `company_id` and every setting, as the API's
/// PrintSettingsRequest; the GET answer's read-only fields are accepted and ignored. Its
/// schema is [`PrintSettings`]'s with `company_id` added, so the two cannot drift.
pub struct PrintSettingsRequest;

/// The body of `PATCH /v1/print-settings`: `company_id` and any of the settings; the others keep
/// their value.
pub struct PrintSettingsPatch;

/// PrintSettings' schema as a request body: `company_id` added (required), the read-only fields
/// of the GET answer described as such, and, for a patch, no setting required.
fn request_schema(patch: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::PartialSchema;
    use utoipa::openapi::schema::{
        AdditionalProperties, ObjectBuilder, Schema, SchemaFormat, SchemaType, Type,
    };
    use utoipa::openapi::{KnownFormat, RefOr};
    let RefOr::T(Schema::Object(mut schema)) = PrintSettings::schema() else {
        return PrintSettings::schema();
    };
    let settings = std::mem::take(&mut schema.properties);
    schema.properties.insert(
        "company_id".to_owned(),
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)))
            .description(Some("The company."))
            .into(),
    );
    schema.properties.extend(settings);
    for field in READ_ONLY_FIELDS {
        schema.properties.insert(
            (*field).to_owned(),
            ObjectBuilder::new()
                .schema_type(SchemaType::AnyValue)
                .read_only(true)
                .description(Some("From the GET answer: accepted and ignored."))
                .into(),
        );
    }
    let settings_required = std::mem::take(&mut schema.required);
    schema.required = vec!["company_id".to_owned()];
    if !patch {
        schema.required.extend(settings_required);
    }
    // As serde's `deny_unknown_fields`: a misspelt setting is named, never dropped.
    schema.additional_properties = Some(Box::new(AdditionalProperties::FreeForm(false)));
    schema.description = Some(
        if patch {
            "company_id and any of the settings: the others keep their value. A null clears an optional setting."
        } else {
            "company_id and every required setting; an optional one left out is cleared."
        }
        .to_owned(),
    );
    RefOr::T(Schema::Object(schema))
}

/// PrintSettings' schema with the record's fields of the GET answer.
fn view_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::PartialSchema;
    use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaFormat, SchemaType, Type};
    use utoipa::openapi::{KnownFormat, RefOr};
    let RefOr::T(Schema::Object(mut schema)) = PrintSettings::schema() else {
        return PrintSettings::schema();
    };
    let field = |format: KnownFormat, nullable: bool, description: &str| {
        let kind = if nullable {
            SchemaType::from_iter([Type::String, Type::Null])
        } else {
            SchemaType::Type(Type::String)
        };
        ObjectBuilder::new()
            .schema_type(kind)
            .format(Some(SchemaFormat::KnownFormat(format)))
            .description(Some(description))
            .into()
    };
    let settings = std::mem::take(&mut schema.properties);
    schema.properties.insert(
        "id".to_owned(),
        field(KnownFormat::Uuid, true, "Record id (null: never saved)."),
    );
    schema
        .properties
        .insert("tenant_id".to_owned(), field(KnownFormat::Uuid, false, "Tenant."));
    schema.properties.insert(
        "company_id".to_owned(),
        field(KnownFormat::Uuid, false, "Company."),
    );
    schema.properties.extend(settings);
    schema.properties.insert(
        "created_at".to_owned(),
        field(KnownFormat::DateTime, true, "First saved."),
    );
    schema.properties.insert(
        "updated_at".to_owned(),
        field(KnownFormat::DateTime, true, "Last saved."),
    );
    for required in ["id", "tenant_id", "company_id", "created_at", "updated_at"] {
        schema.required.push(required.to_owned());
    }
    schema.description = Some("A company's print settings and their record.".to_owned());
    RefOr::T(Schema::Object(schema))
}

impl utoipa::PartialSchema for PrintSettingsView {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        view_schema()
    }
}

impl ToSchema for PrintSettingsView {
    fn schemas(schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>) {
        schemas.push((
            "CopyLabel".to_owned(),
            <CopyLabel as utoipa::PartialSchema>::schema(),
        ));
    }
}

impl utoipa::PartialSchema for PrintSettingsRequest {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        request_schema(false)
    }
}

impl ToSchema for PrintSettingsRequest {
    fn schemas(schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>) {
        schemas.push((
            "CopyLabel".to_owned(),
            <CopyLabel as utoipa::PartialSchema>::schema(),
        ));
    }
}

impl utoipa::PartialSchema for PrintSettingsPatch {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        request_schema(true)
    }
}

impl ToSchema for PrintSettingsPatch {
    fn schemas(schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>) {
        schemas.push((
            "CopyLabel".to_owned(),
            <CopyLabel as utoipa::PartialSchema>::schema(),
        ));
    }
}

/// Checks a PUT or PATCH body against its schema (every problem at once) and splits it into the
/// company and the settings it sends, the read-only fields dropped.
fn read_body(
    schema: &crate::schema::BodySchema,
    mut body: Map<String, Value>,
) -> Result<(Uuid, Map<String, Value>), ApiError> {
    let issues = schema.issues(&Value::Object(body.clone()));
    if !issues.is_empty() {
        return Err(invalid(
            issues.into_iter().map(|i| (i.field, i.code, i.message)).collect(),
        ));
    }
    for field in READ_ONLY_FIELDS {
        body.remove(*field);
    }
    let company_id = body
        .remove("company_id")
        .and_then(|v| v.as_str().and_then(|s| s.parse::<Uuid>().ok()))
        .ok_or_else(|| {
            ApiError::invalid_field("company_id", "required", "company_id (a UUID) is required")
        })?;
    Ok((company_id, body))
}

/// Checks the settings and records them (`SetPrintSettings`: nothing happens when they are the
/// saved ones), then answers as GET does.
async fn save(
    state: &AppState,
    caller: &Caller,
    company_id: Uuid,
    fields: Map<String, Value>,
) -> Result<axum::Json<PrintSettingsView>, ApiError> {
    // The schema has checked the fields; serde still runs, and its error is the fallback.
    let settings: PrintSettings = serde_json::from_value(Value::Object(fields)).map_err(|e| {
        ApiError::validation(format!("the body does not match the print settings schema: {e}"))
    })?;
    let issues = settings.issues();
    if !issues.is_empty() {
        return Err(invalid(issues));
    }
    let current = read(state, caller, company_id).await?;
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
    Ok(axum::Json(read(state, caller, company_id).await?))
}

/// Saves a company's print settings, all of them (the contract's PrintSettingsRequest). Every
/// missing, unknown or mistyped field is named in one answer; the GET answer sent back as it
/// came is accepted (its read-only `id`, `tenant_id`, `created_at`, `updated_at` are ignored).
#[utoipa::path(
    put,
    path = "/v1/print-settings",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body(content = PrintSettingsRequest, description = "company_id and every setting (optional ones left out are cleared)"),
    responses(
        (status = 200, description = "Saved", body = PrintSettingsView),
        (status = 400, description = "Every missing, unknown or invalid field (details.errors); a logo that is not a JPEG data URL under 512 KiB", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such company", body = ErrorBody)
    )
)]
pub async fn put_print_settings(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<Map<String, Value>>,
) -> Result<axum::Json<PrintSettingsView>, ApiError> {
    caller.require(SAVE_PRINT_SETTINGS)?;
    let (company_id, fields) = read_body(&crate::schema::PRINT_SETTINGS_REQUEST, body)?;
    save(&state, &caller, company_id, fields).await
}

/// Changes some of a company's print settings: only the fields sent (a null clears an optional
/// one); the others keep their saved value, or the default while none is saved. Checked as PUT
/// is, and recorded as PUT records.
#[utoipa::path(
    patch,
    path = "/v1/print-settings",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body(content = PrintSettingsPatch, description = "company_id and the settings to change"),
    responses(
        (status = 200, description = "Saved: every setting, as GET answers", body = PrintSettingsView),
        (status = 400, description = "Every unknown or invalid field (details.errors); a logo that is not a JPEG data URL under 512 KiB", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such company", body = ErrorBody)
    )
)]
pub async fn patch_print_settings(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<Map<String, Value>>,
) -> Result<axum::Json<PrintSettingsView>, ApiError> {
    caller.require(SAVE_PRINT_SETTINGS)?;
    let (company_id, changes) = read_body(&crate::schema::PRINT_SETTINGS_PATCH, body)?;
    let current = read(&state, &caller, company_id).await?;
    let mut fields = match serde_json::to_value(&current.settings) {
        Ok(Value::Object(fields)) => fields,
        _ => Map::new(),
    };
    fields.extend(changes);
    save(&state, &caller, company_id, fields).await
}
