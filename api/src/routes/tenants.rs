//! `POST /v1/tenants`, `GET /v1/tenants/{id}`.

use crate::extract::Path;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use kuatia_application::access::{self, AccessError};
use kuatia_application::event_store::EventMetadata;
use kuatia_domain::tenancy::{Environment, TenantId, TenantSlug};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::Json;
use crate::middleware::RequestId;
use crate::state::AppState;

/// `POST /v1/tenants` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTenant {
    /// `^[a-z0-9][a-z0-9-]{1,62}$`, unique.
    pub slug: String,
    /// Display name, 1 to 200 characters.
    pub name: String,
    /// `demo` (default) or `production`.
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "demo")]
    pub environment: Option<Environment>,
}

/// A tenant.
#[derive(Debug, Serialize, ToSchema)]
pub struct TenantView {
    /// Id (the value of `X-Tenant-Id`).
    pub id: Uuid,
    /// Slug.
    pub slug: String,
    /// Name.
    pub name: String,
    /// `demo` or `production`.
    #[schema(value_type = String, example = "demo")]
    pub environment: Environment,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// `POST /v1/tenants` answer: the tenant and its first owner key, shown once.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedTenant {
    /// The tenant.
    #[serde(flatten)]
    pub tenant: TenantView,
    /// Plain value of an `owner` API key. Shown only in this answer; store it now.
    pub bootstrap_api_key: String,
}

async fn view(state: &AppState, id: TenantId) -> Result<Option<TenantView>, ApiError> {
    Ok(kuatia_projections::access::tenant(&state.store, id)
        .await?
        .map(|t| TenantView {
            id: t.id,
            slug: t.slug,
            name: t.name,
            environment: t.environment,
            created_at: t.created_at,
        }))
}

/// Creates a tenant and returns its bootstrap owner key (once).
#[utoipa::path(
    post,
    path = "/v1/tenants",
    tag = "tenancy",
    request_body = CreateTenant,
    responses(
        (status = 201, description = "Created; `bootstrap_api_key` is shown only here", body = CreatedTenant),
        (status = 400, description = "Invalid slug or name", body = ErrorBody),
        (status = 403, description = "Public tenant creation is disabled (KUATIA_PUBLIC_SIGNUP=false)", body = ErrorBody),
        (status = 409, description = "The slug is taken", body = ErrorBody),
        (status = 429, description = "Too many requests from this IP", body = ErrorBody)
    )
)]
pub async fn create_tenant(
    State(state): State<AppState>,
    _limit: crate::rate_limit::PerIp,
    request_id: Option<axum::Extension<RequestId>>,
    Json(body): Json<CreateTenant>,
) -> Result<(StatusCode, axum::Json<CreatedTenant>), ApiError> {
    if !state.public_signup {
        return Err(ApiError::forbidden("tenant creation is disabled on this server"));
    }
    let slug = TenantSlug::parse(&body.slug)
        .map_err(|e| ApiError::invalid_field("slug", "invalid_slug", e.to_string()))?;
    let name = body.name.trim().to_owned();
    if !(1..=200).contains(&name.chars().count()) {
        return Err(ApiError::invalid_field(
            "name",
            "invalid_name",
            "a name has 1 to 200 characters",
        ));
    }
    let request_id = request_id.map(|r| r.0.0.clone());
    let metadata = EventMetadata {
        actor: Some("anonymous:signup".to_owned()),
        request_id: request_id.clone(),
        correlation_id: request_id,
        causation_id: None,
        trace_parent: None,
    };
    let environment = body.environment.unwrap_or_default();
    let (tenant_id, key) = access::create_tenant(&state.store, slug, name, environment, metadata)
        .await
        .map_err(|e| match e {
            AccessError::SlugTaken => ApiError::new(ErrorCode::ConflictError, "the slug is already taken"),
            other => access_error(other),
        })?;
    let tenant = view(&state, tenant_id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::InternalError, "the new tenant is not readable"))?;
    Ok((
        StatusCode::CREATED,
        axum::Json(CreatedTenant {
            tenant,
            bootstrap_api_key: key.key,
        }),
    ))
}

/// Needed by `GET /v1/tenants/{id}`.
pub const GET_TENANT: kuatia_domain::access::Permission =
    kuatia_domain::access::Permission::ReadConfiguration;

/// Reads the caller's tenant.
#[utoipa::path(
    get,
    path = "/v1/tenants/{id}",
    tag = "tenancy",
    security(("api_key" = []), ("session" = [])),
    params(
        ("id" = Uuid, Path, description = "Tenant id"),
        ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")
    ),
    responses(
        (status = 200, description = "The tenant", body = TenantView),
        (status = 401, description = "No valid API key", body = ErrorBody),
        (status = 403, description = "X-Tenant-Id is not the key's tenant", body = ErrorBody),
        (status = 404, description = "Not this caller's tenant", body = ErrorBody)
    )
)]
pub async fn get_tenant(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<TenantView>, ApiError> {
    caller.require(GET_TENANT)?;
    if id != caller.tenant.as_uuid() {
        return Err(ApiError::not_found("no such tenant"));
    }
    view(&state, caller.tenant)
        .await?
        .map(axum::Json)
        .ok_or_else(|| ApiError::not_found("no such tenant"))
}

/// Maps the access use cases' errors.
pub fn access_error(err: AccessError) -> ApiError {
    match err {
        AccessError::SlugTaken => ApiError::new(ErrorCode::ConflictError, "the slug is already taken"),
        AccessError::NotFound => ApiError::not_found("no such resource"),
        AccessError::Refused(e) => match e {
            kuatia_domain::tenant::TenantError::OwnerOnly
            | kuatia_domain::tenant::TenantError::OwnerKeyOwnerOnly
            | kuatia_domain::tenant::TenantError::OutsideScope
            | kuatia_domain::tenant::TenantError::OwnersOwnerOnly => ApiError::forbidden(e.to_string()),
            kuatia_domain::tenant::TenantError::NotMember => ApiError::not_found(e.to_string()),
            kuatia_domain::tenant::TenantError::LastOwner => {
                ApiError::new(ErrorCode::ConflictError, e.to_string())
            }
            other => ApiError::validation(other.to_string()),
        },
        AccessError::Store(kuatia_application::event_store::StoreError::VersionConflict { .. }) => {
            ApiError::new(ErrorCode::ConflictError, "a concurrent change won; retry")
        }
        AccessError::Store(e) => ApiError::internal(&e),
    }
}
