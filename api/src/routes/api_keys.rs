//! `POST /v1/api-keys`, `GET /v1/api-keys/current`, and `DELETE /v1/api-keys/{id}`;
//! `GET /v1/api-keys` lists them with their last use, so that an auditor can
//! name the `api_key:<id>` actors of the event log.

use crate::extract::{Path, Query};
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use kuatia_application::access::{self, KeyRequest};
use kuatia_domain::access::{Permission, Role};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::{Caller, Credentials};
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::Json;
use crate::routes::tenants::access_error;
use crate::state::AppState;

/// `POST /v1/api-keys` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateApiKey {
    /// Label, 1 to 100 characters.
    pub name: String,
    /// `owner`, `admin`, `issuer`, `viewer` or `auditor` (only owners issue owner keys).
    #[schema(value_type = String, example = "issuer")]
    pub role: Role,
    /// Restrict the key to one company.
    pub company_id: Option<Uuid>,
    /// When the key stops working (RFC 3339, in the future).
    pub expires_at: Option<DateTime<Utc>>,
}

/// An API key's record (never its secret, except `key` at creation).
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyView {
    /// Id.
    pub id: Uuid,
    /// Label.
    pub name: String,
    /// Role.
    #[schema(value_type = String, example = "issuer")]
    pub role: Role,
    /// Company scope.
    pub company_id: Option<Uuid>,
    /// First 12 characters of the key.
    pub prefix: String,
    /// Issued.
    pub created_at: DateTime<Utc>,
    /// Expiry.
    pub expires_at: Option<DateTime<Utc>>,
}

/// `POST /v1/api-keys` answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedApiKey {
    /// The record.
    #[serde(flatten)]
    pub record: ApiKeyView,
    /// The key. Shown only in this answer.
    pub key: String,
}

/// `GET /v1/api-keys/current` answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct CurrentApiKey {
    /// The record.
    #[serde(flatten)]
    pub record: ApiKeyView,
    /// Its tenant.
    pub tenant_id: Uuid,
}

/// A key as listed: its record, whether it still works, and when it was last used.
#[derive(Debug, Serialize, ToSchema)]
pub struct ListedApiKey {
    /// The record.
    #[serde(flatten)]
    pub record: ApiKeyView,
    /// When it was revoked (it no longer authenticates).
    pub revoked_at: Option<DateTime<Utc>>,
    /// When it last authenticated a request, to the minute; null when never.
    pub last_used_at: Option<DateTime<Utc>>,
}

/// `GET /v1/api-keys` query. Unknown parameters are refused.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ApiKeysQuery {
    /// Only keys scoped to this company (a company-scoped caller: its own).
    pub company_id: Option<Uuid>,
}

/// `DELETE /v1/api-keys/{id}` answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct RevokedApiKey {
    /// Id.
    pub id: Uuid,
    /// When it stopped working.
    pub revoked_at: Option<DateTime<Utc>>,
}

fn view(row: &kuatia_projections::access::ApiKeyRow) -> ApiKeyView {
    ApiKeyView {
        id: row.id,
        name: row.name.clone(),
        role: row.role,
        company_id: row.company_id,
        prefix: row.prefix.clone(),
        created_at: row.created_at,
        expires_at: row.expires_at,
    }
}

async fn stream_of(
    state: &AppState,
    caller: &Caller,
) -> Result<(String, kuatia_domain::tenancy::Environment), ApiError> {
    let tenant = kuatia_projections::access::tenant(&state.store, caller.tenant)
        .await?
        .ok_or_else(|| ApiError::not_found("no such tenant"))?;
    Ok((tenant.stream_id, tenant.environment))
}

/// Needed by `POST /v1/api-keys`.
pub const CREATE_API_KEY: Permission = Permission::ManageAccess;
/// Needed by `GET /v1/api-keys/current`.
pub const CURRENT_API_KEY: Permission = Permission::ReadConfiguration;
/// Needed by `GET /v1/api-keys`: the roles that read the event log (owner, admin, auditor), so
/// that they can name its `api_key:<id>` actors.
pub const LIST_API_KEYS: Permission = Permission::ReadAudit;
/// Needed by `DELETE /v1/api-keys/{id}`.
pub const REVOKE_API_KEY: Permission = Permission::ManageAccess;

/// Issues an API key; its value is returned once.
#[utoipa::path(
    post,
    path = "/v1/api-keys",
    tag = "tenancy",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body = CreateApiKey,
    responses(
        (status = 201, description = "Created; `key` is shown only here", body = CreatedApiKey),
        (status = 400, description = "Invalid name, role, company or expiry", body = ErrorBody),
        (status = 401, description = "No valid API key", body = ErrorBody),
        (status = 403, description = "Role not allowed, or an owner key asked by a non-owner", body = ErrorBody)
    )
)]
pub async fn create_api_key(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<CreateApiKey>,
) -> Result<(StatusCode, axum::Json<CreatedApiKey>), ApiError> {
    caller.require(CREATE_API_KEY)?;
    if caller.company_id.is_some() {
        return Err(ApiError::forbidden("a company-scoped key cannot issue keys"));
    }
    if let Some(company) = body.company_id
        && kuatia_projections::configuration::company(&state.store, caller.tenant, company)
            .await?
            .is_none()
    {
        return Err(ApiError::new(
            ErrorCode::ConfigurationError,
            format!("company {company} does not exist in this tenant"),
        ));
    }
    if body.expires_at.is_some_and(|at| at <= Utc::now()) {
        return Err(ApiError::invalid_field(
            "expires_at",
            "in_the_past",
            "expires_at must be in the future",
        ));
    }
    let (stream, environment) = stream_of(&state, &caller).await?;
    let issued = access::issue_key(
        &state.store,
        caller.tenant,
        &stream,
        environment,
        KeyRequest {
            name: body.name,
            role: body.role,
            company_id: body.company_id,
            expires_at: body.expires_at,
        },
        caller.role,
        caller.metadata(),
    )
    .await
    .map_err(access_error)?;
    let row = kuatia_projections::access::key_by_id(&state.store, caller.tenant, issued.id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::InternalError, "the new key is not readable"))?;
    Ok((
        StatusCode::CREATED,
        axum::Json(CreatedApiKey {
            record: view(&row),
            key: issued.key,
        }),
    ))
}

/// Lists the tenant's keys, revoked ones too, oldest first, each with its last use (never a
/// secret). A company-scoped caller sees its company's keys only.
#[utoipa::path(
    get,
    path = "/v1/api-keys",
    tag = "tenancy",
    security(("api_key" = []), ("session" = [])),
    params(ApiKeysQuery, ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "The keys", body = [ListedApiKey]),
        (status = 400, description = "A malformed or unknown parameter", body = ErrorBody),
        (status = 401, description = "No valid API key", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "A company-scoped caller named another company", body = ErrorBody)
    )
)]
pub async fn list_api_keys(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<ApiKeysQuery>,
) -> Result<axum::Json<Vec<ListedApiKey>>, ApiError> {
    caller.require(LIST_API_KEYS)?;
    let company = caller.company_scope(query.company_id)?;
    let keys = kuatia_projections::access::keys(&state.store, caller.tenant, company).await?;
    Ok(axum::Json(
        keys.into_iter()
            .map(|(row, last_used_at)| ListedApiKey {
                record: view(&row),
                revoked_at: row.revoked_at,
                last_used_at,
            })
            .collect(),
    ))
}

/// Describes the key this request authenticated with (no secret).
#[utoipa::path(
    get,
    path = "/v1/api-keys/current",
    tag = "tenancy",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "The calling key", body = CurrentApiKey),
        (status = 401, description = "No valid API key", body = ErrorBody),
        (status = 403, description = "X-Tenant-Id is not the key's tenant", body = ErrorBody),
        (status = 404, description = "The request used a session, not an API key", body = ErrorBody)
    )
)]
pub async fn current_api_key(caller: Caller) -> Result<axum::Json<CurrentApiKey>, ApiError> {
    caller.require(CURRENT_API_KEY)?;
    match &caller.credentials {
        Credentials::ApiKey(key) => Ok(axum::Json(CurrentApiKey {
            record: view(key),
            tenant_id: caller.tenant.as_uuid(),
        })),
        Credentials::Session { .. } => Err(ApiError::not_found(
            "this request is authenticated with a session, not an API key",
        )),
    }
}

/// Revokes a key of the tenant (revoking twice is harmless). Only an owner revokes an owner
/// key; a company-scoped caller revokes only keys of its own company. The event records who.
#[utoipa::path(
    delete,
    path = "/v1/api-keys/{id}",
    tag = "tenancy",
    security(("api_key" = []), ("session" = [])),
    params(
        ("id" = Uuid, Path, description = "Key id"),
        ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")
    ),
    responses(
        (status = 200, description = "Revoked", body = RevokedApiKey),
        (status = 401, description = "No valid API key", body = ErrorBody),
        (status = 403, description = "Role not allowed; an owner key revoked by a non-owner; a key of another company (or tenant-wide) revoked by a company-scoped caller", body = ErrorBody),
        (status = 404, description = "No such key in this tenant", body = ErrorBody)
    )
)]
pub async fn revoke_api_key(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<RevokedApiKey>, ApiError> {
    caller.require(REVOKE_API_KEY)?;
    let (stream, _) = stream_of(&state, &caller).await?;
    let metadata = caller.metadata();
    let by = kuatia_domain::tenant::Revoker {
        actor: metadata.actor.clone().unwrap_or_default(),
        role: caller.role,
        company_id: caller.company_id,
    };
    access::revoke_key(&state.store, caller.tenant, &stream, id, by, metadata)
        .await
        .map_err(access_error)?;
    let row = kuatia_projections::access::key_by_id(&state.store, caller.tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such API key"))?;
    Ok(axum::Json(RevokedApiKey {
        id,
        revoked_at: row.revoked_at,
    }))
}
