//! `GET|POST /v1/branches`, `PATCH /v1/branches/{id}`, `GET|POST /v1/issuance-points`,
//! `PATCH /v1/issuance-points/{id}`.

use crate::extract::{Path, Query};
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use kuatia_application::configuration;
use kuatia_domain::access::Permission;
use kuatia_domain::company::{Branch, CompanyCommand, IssuancePoint};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::Json;
use crate::routes::companies::configuration_error;
use crate::state::AppState;

/// Needed by `GET /v1/branches`.
pub const LIST_BRANCHES: Permission = Permission::ReadConfiguration;
/// Needed by `POST /v1/branches`.
pub const CREATE_BRANCH: Permission = Permission::ManageConfiguration;
/// Needed by `PATCH /v1/branches/{id}`.
pub const UPDATE_BRANCH: Permission = Permission::ManageConfiguration;
/// Needed by `PATCH /v1/issuance-points/{id}`.
pub const UPDATE_POINT: Permission = Permission::ManageConfiguration;
/// Needed by `GET /v1/issuance-points`.
pub const LIST_POINTS: Permission = Permission::ReadConfiguration;
/// Needed by `POST /v1/issuance-points`.
pub const CREATE_POINT: Permission = Permission::ManageConfiguration;

/// `POST /v1/branches` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateBranch {
    /// The company (may be omitted with a company-scoped key).
    pub company_id: Option<Uuid>,
    /// `001` to `999`, unique in the company.
    pub code: String,
    /// Name.
    pub name: String,
    /// Address when it differs from the company's.
    pub address: Option<String>,
    /// House number.
    pub house_number: Option<String>,
    /// City code, when the branch is in another city than the company (SET's geographic table).
    pub city_code: Option<u32>,
    /// City name: optional, filled from SET's table; one given must be the table's
    /// (`city_name_mismatch` names it).
    pub city_name: Option<String>,
    /// Department code: the city's (`city_department_mismatch` names it); the company's when
    /// omitted.
    pub department_code: Option<u16>,
    /// Department name: optional, filled from SET's table; one given must be the table's.
    pub department_name: Option<String>,
    /// Chosen when a document names no branch and the company has several.
    #[serde(default)]
    pub is_default: bool,
}

/// A branch.
#[derive(Debug, Serialize, ToSchema)]
pub struct BranchView {
    /// Id.
    pub id: Uuid,
    /// Company.
    pub company_id: Uuid,
    /// Code.
    pub code: String,
    /// Name.
    pub name: String,
    /// Address.
    pub address: Option<String>,
    /// House number.
    pub house_number: Option<String>,
    /// City code.
    pub city_code: Option<u32>,
    /// City name.
    pub city_name: Option<String>,
    /// Department code.
    pub department_code: Option<u16>,
    /// Department name.
    pub department_name: Option<String>,
    /// Default of its company.
    pub is_default: bool,
    /// Added.
    pub created_at: DateTime<Utc>,
}

impl From<kuatia_projections::configuration::BranchRow> for BranchView {
    fn from(row: kuatia_projections::configuration::BranchRow) -> Self {
        let b = row.branch;
        Self {
            id: b.branch_id,
            company_id: row.company_id,
            code: b.code,
            name: b.name,
            address: b.address,
            house_number: b.house_number,
            city_code: b.city_code,
            city_name: b.city_name,
            department_code: b.department_code,
            department_name: b.department_name,
            is_default: b.is_default,
            created_at: row.created_at,
        }
    }
}

/// `GET /v1/branches` query.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct BranchQuery {
    /// Only this company's branches.
    pub company_id: Option<Uuid>,
}

/// Lists branches, of one company or of all (a company-scoped key sees only its company's).
#[utoipa::path(
    get,
    path = "/v1/branches",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(BranchQuery, ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "Branches by company and code", body = [BranchView]),
        (status = 400, description = "A malformed parameter, or one the route does not define (unknown_parameter)", body = ErrorBody),
        (status = 401, description = "No valid credentials", body = ErrorBody),
        (status = 403, description = "Not this tenant", body = ErrorBody)
    )
)]
pub async fn list_branches(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<BranchQuery>,
) -> Result<axum::Json<Vec<BranchView>>, ApiError> {
    caller.require(LIST_BRANCHES)?;
    let company = caller.company_scope(query.company_id)?;
    let rows = kuatia_projections::configuration::branches(&state.store, caller.tenant, company).await?;
    Ok(axum::Json(rows.into_iter().map(BranchView::from).collect()))
}

/// Adds a branch (establecimiento) to a company.
#[utoipa::path(
    post,
    path = "/v1/branches",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body = CreateBranch,
    responses(
        (status = 201, description = "Added", body = BranchView),
        (status = 400, description = "Invalid code or name, no company given, or a place not in SET's geographic table (unknown_city_code, city_department_mismatch, city_name_mismatch, department_name_mismatch in details.errors)", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such company", body = ErrorBody),
        (status = 409, description = "The code is used in this company", body = ErrorBody)
    )
)]
pub async fn create_branch(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<CreateBranch>,
) -> Result<(StatusCode, axum::Json<BranchView>), ApiError> {
    caller.require(CREATE_BRANCH)?;
    let company = crate::routes::companies::company_row(&caller, &state.store, body.company_id).await?;
    let branch = Branch {
        branch_id: Uuid::now_v7(),
        code: body.code,
        name: body.name.trim().to_owned(),
        address: body.address,
        house_number: body.house_number,
        city_code: body.city_code,
        city_name: body.city_name,
        department_code: body.department_code,
        department_name: body.department_name,
        is_default: body.is_default,
    };
    let id = branch.branch_id;
    configuration::change_company(
        &state.store,
        caller.tenant,
        &company.stream_id,
        CompanyCommand::AddBranch(branch),
        caller.metadata(),
    )
    .await
    .map_err(configuration_error)?;
    let row = kuatia_projections::configuration::branch(&state.store, caller.tenant, id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::InternalError, "the new branch is not readable"))?;
    Ok((StatusCode::CREATED, axum::Json(row.into())))
}

/// What `PATCH /v1/branches/{id}` may change.
const BRANCH_FIELDS: &[&str] = &[
    "name",
    "address",
    "house_number",
    "city_code",
    "city_name",
    "department_code",
    "department_name",
    "is_default",
];

/// What `PATCH /v1/issuance-points/{id}` may change.
const POINT_FIELDS: &[&str] = &["name", "is_default"];

/// The record `current` with `patch` laid over it, as a JSON object: a field of `fields` replaces
/// (`null` clears an optional one); an identity field (`immutable`, as the record has it) may be
/// sent only unchanged (400 `immutable`: its code is in every CDC and number made there); any
/// other field is 400 `unknown_field`. `stale` names fields dropped when a field they describe
/// moves and the patch does not give them (a city's name is the table's, not kept for another
/// code).
fn merged(
    what: &str,
    current: Map<String, Value>,
    patch: Map<String, Value>,
    fields: &[&str],
    immutable: &[(&str, Value)],
    stale: &[(&str, &str)],
) -> Result<Map<String, Value>, ApiError> {
    let mut merged = current;
    for (key, value) in &patch {
        if let Some((_, kept)) = immutable.iter().find(|(name, _)| name == key) {
            if value != kept {
                return Err(ApiError::invalid_field(
                    key,
                    "immutable",
                    format!("the {key} of {what} cannot change; add a new one instead"),
                ));
            }
        } else if !fields.contains(&key.as_str()) {
            return Err(ApiError::invalid_field(
                key,
                "unknown_field",
                format!(
                    "{key} is not a field of {what} that can change ({})",
                    fields.join(", ")
                ),
            ));
        }
    }
    for (field, moved_with) in stale {
        if patch.contains_key(*moved_with) && !patch.contains_key(*field) {
            merged.remove(*field);
        }
    }
    for (key, value) in patch {
        if fields.contains(&key.as_str()) {
            merged.insert(key, value);
        }
    }
    Ok(merged)
}

fn object<T: Serialize>(record: &T) -> Result<Map<String, Value>, ApiError> {
    match serde_json::to_value(record) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::new(ErrorCode::InternalError, "internal error")),
        Err(e) => Err(ApiError::internal(&e)),
    }
}

fn record<T: serde::de::DeserializeOwned>(what: &str, object: Map<String, Value>) -> Result<T, ApiError> {
    serde_json::from_value(Value::Object(object))
        .map_err(|e| ApiError::validation(format!("the body does not match the {what} schema: {e}")))
}

/// Changes a branch: its name, address, place or default flag (never its code, which is in every
/// CDC and number made there, nor its company). An unchanged record is no event.
#[utoipa::path(
    patch,
    path = "/v1/branches/{id}",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(
        ("id" = Uuid, Path, description = "Branch id"),
        ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")
    ),
    request_body(content = Object, description = "The fields to change: name, address, house_number, city_code, city_name, department_code, department_name, is_default (null clears an optional one; a new city_code or department_code drops the old names unless given). code may be sent only unchanged."),
    responses(
        (status = 200, description = "The branch as it now is", body = BranchView),
        (status = 400, description = "Invalid name or place (details.errors as for POST), a changed code (immutable), or a field a branch does not have (unknown_field)", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such branch for this caller", body = ErrorBody)
    )
)]
pub async fn update_branch(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
    Json(patch): Json<Map<String, Value>>,
) -> Result<axum::Json<BranchView>, ApiError> {
    caller.require(UPDATE_BRANCH)?;
    let current = kuatia_projections::configuration::branch(&state.store, caller.tenant, id)
        .await?
        .filter(|b| caller.sees(b.company_id))
        .ok_or_else(|| ApiError::not_found("no such branch"))?;
    let company = kuatia_projections::configuration::company(&state.store, caller.tenant, current.company_id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such branch"))?;
    let fields = merged(
        "a branch",
        object(&current.branch)?,
        patch,
        BRANCH_FIELDS,
        &[
            ("code", Value::String(current.branch.code.clone())),
            ("id", Value::String(id.to_string())),
            ("company_id", Value::String(current.company_id.to_string())),
        ],
        &[("city_name", "city_code"), ("department_name", "department_code")],
    )?;
    let mut branch: Branch = record("branch", fields)?;
    branch.name = branch.name.trim().to_owned();
    if branch != current.branch {
        configuration::change_company(
            &state.store,
            caller.tenant,
            &company.stream_id,
            CompanyCommand::UpdateBranch(branch),
            caller.metadata(),
        )
        .await
        .map_err(configuration_error)?;
    }
    let row = kuatia_projections::configuration::branch(&state.store, caller.tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such branch"))?;
    Ok(axum::Json(row.into()))
}

/// `POST /v1/issuance-points` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateIssuancePoint {
    /// The branch.
    pub branch_id: Uuid,
    /// `001` to `999`, unique in the branch.
    pub code: String,
    /// Name.
    pub name: Option<String>,
    /// Chosen when a document names no point and the branch has several.
    #[serde(default)]
    pub is_default: bool,
}

/// An issuance point.
#[derive(Debug, Serialize, ToSchema)]
pub struct IssuancePointView {
    /// Id.
    pub id: Uuid,
    /// Company.
    pub company_id: Uuid,
    /// Branch.
    pub branch_id: Uuid,
    /// Code.
    pub code: String,
    /// Name.
    pub name: Option<String>,
    /// Default of its branch.
    pub is_default: bool,
    /// Added.
    pub created_at: DateTime<Utc>,
}

impl From<kuatia_projections::configuration::PointRow> for IssuancePointView {
    fn from(row: kuatia_projections::configuration::PointRow) -> Self {
        Self {
            id: row.id,
            company_id: row.company_id,
            branch_id: row.branch_id,
            code: row.code,
            name: row.name,
            is_default: row.is_default,
            created_at: row.created_at,
        }
    }
}

/// `GET /v1/issuance-points` query. Unknown parameters are refused.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct PointQuery {
    /// Only this company's points.
    pub company_id: Option<Uuid>,
    /// Only this branch's points.
    pub branch_id: Option<Uuid>,
}

/// Lists issuance points, of one company or branch or of all (a company-scoped key sees only its
/// company's), by company, branch and code.
#[utoipa::path(
    get,
    path = "/v1/issuance-points",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(PointQuery, ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "Issuance points by company, branch and code", body = [IssuancePointView]),
        (status = 400, description = "A malformed or unknown parameter", body = ErrorBody),
        (status = 401, description = "No valid credentials", body = ErrorBody),
        (status = 403, description = "Not this tenant", body = ErrorBody),
        (status = 404, description = "A company-scoped key named another company", body = ErrorBody)
    )
)]
pub async fn list_issuance_points(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<PointQuery>,
) -> Result<axum::Json<Vec<IssuancePointView>>, ApiError> {
    caller.require(LIST_POINTS)?;
    let company = caller.company_scope(query.company_id)?;
    let rows = kuatia_projections::configuration::issuance_points(
        &state.store,
        caller.tenant,
        company,
        query.branch_id,
    )
    .await?;
    Ok(axum::Json(
        rows.into_iter().map(IssuancePointView::from).collect(),
    ))
}

/// Adds an issuance point (punto de expedición) to a branch.
#[utoipa::path(
    post,
    path = "/v1/issuance-points",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body = CreateIssuancePoint,
    responses(
        (status = 201, description = "Added", body = IssuancePointView),
        (status = 400, description = "Invalid code", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such branch", body = ErrorBody),
        (status = 409, description = "The code is used in this branch", body = ErrorBody)
    )
)]
pub async fn create_issuance_point(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<CreateIssuancePoint>,
) -> Result<(StatusCode, axum::Json<IssuancePointView>), ApiError> {
    caller.require(CREATE_POINT)?;
    let branch = kuatia_projections::configuration::branch(&state.store, caller.tenant, body.branch_id)
        .await?
        .filter(|b| caller.sees(b.company_id))
        .ok_or_else(|| ApiError::not_found("no such branch"))?;
    let company = kuatia_projections::configuration::company(&state.store, caller.tenant, branch.company_id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such branch"))?;
    let point = IssuancePoint {
        point_id: Uuid::now_v7(),
        branch_id: body.branch_id,
        code: body.code,
        name: body.name.map(|n| n.trim().to_owned()).filter(|n| !n.is_empty()),
        is_default: body.is_default,
    };
    let id = point.point_id;
    configuration::change_company(
        &state.store,
        caller.tenant,
        &company.stream_id,
        CompanyCommand::AddIssuancePoint(point),
        caller.metadata(),
    )
    .await
    .map_err(configuration_error)?;
    let row = kuatia_projections::configuration::issuance_point(&state.store, caller.tenant, id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::InternalError, "the new point is not readable"))?;
    Ok((StatusCode::CREATED, axum::Json(row.into())))
}

/// Changes an issuance point: its name or default flag (never its code or branch). An unchanged
/// record is no event.
#[utoipa::path(
    patch,
    path = "/v1/issuance-points/{id}",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(
        ("id" = Uuid, Path, description = "Issuance point id"),
        ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")
    ),
    request_body(content = Object, description = "The fields to change: name (null clears it), is_default. code and branch_id may be sent only unchanged."),
    responses(
        (status = 200, description = "The issuance point as it now is", body = IssuancePointView),
        (status = 400, description = "A changed code or branch (immutable), or a field a point does not have (unknown_field)", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such issuance point for this caller", body = ErrorBody)
    )
)]
pub async fn update_issuance_point(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
    Json(patch): Json<Map<String, Value>>,
) -> Result<axum::Json<IssuancePointView>, ApiError> {
    caller.require(UPDATE_POINT)?;
    let current = kuatia_projections::configuration::issuance_point(&state.store, caller.tenant, id)
        .await?
        .filter(|p| caller.sees(p.company_id))
        .ok_or_else(|| ApiError::not_found("no such issuance point"))?;
    let company = kuatia_projections::configuration::company(&state.store, caller.tenant, current.company_id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such issuance point"))?;
    let was = IssuancePoint {
        point_id: current.id,
        branch_id: current.branch_id,
        code: current.code.clone(),
        name: current.name.clone(),
        is_default: current.is_default,
    };
    let fields = merged(
        "an issuance point",
        object(&was)?,
        patch,
        POINT_FIELDS,
        &[
            ("code", Value::String(current.code.clone())),
            ("id", Value::String(id.to_string())),
            ("branch_id", Value::String(current.branch_id.to_string())),
            ("company_id", Value::String(current.company_id.to_string())),
        ],
        &[],
    )?;
    let mut point: IssuancePoint = record("issuance point", fields)?;
    point.name = point.name.map(|n| n.trim().to_owned()).filter(|n| !n.is_empty());
    if point != was {
        configuration::change_company(
            &state.store,
            caller.tenant,
            &company.stream_id,
            CompanyCommand::UpdateIssuancePoint(point),
            caller.metadata(),
        )
        .await
        .map_err(configuration_error)?;
    }
    let row = kuatia_projections::configuration::issuance_point(&state.store, caller.tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such issuance point"))?;
    Ok(axum::Json(row.into()))
}
