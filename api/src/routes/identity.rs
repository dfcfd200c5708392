//! Contract §4.2: users, console sessions and memberships (DECISIONS §2).

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use kuatia_application::identity::{self, IdentityError};
use kuatia_domain::access::{Permission, Role};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::{Caller, Credentials, SESSION_COOKIE};
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{Json, Path};
use crate::routes::tenants::access_error;
use crate::state::AppState;

/// `POST /v1/users` body.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    /// Email (case does not matter).
    pub email: String,
    /// At least 12 characters.
    pub password: String,
    /// Display name.
    pub name: Option<String>,
}

/// A user.
#[derive(Debug, Serialize, ToSchema)]
pub struct UserView {
    /// Id.
    pub id: Uuid,
    /// Email.
    pub email: String,
    /// Name.
    pub name: Option<String>,
    /// Registered.
    pub created_at: DateTime<Utc>,
}

impl From<identity::User> for UserView {
    fn from(user: identity::User) -> Self {
        Self {
            id: user.id,
            email: user.email,
            name: user.name,
            created_at: user.created_at,
        }
    }
}

fn identity_error(err: IdentityError) -> ApiError {
    match err {
        IdentityError::EmailRefused => ApiError::invalid_field("email", "email_refused", err.to_string()),
        IdentityError::WeakPassword(_) => {
            ApiError::invalid_field("password", "weak_password", err.to_string())
        }
        IdentityError::BadCredentials => ApiError::unauthenticated("wrong email or password"),
        IdentityError::Store(e) => ApiError::internal(&e),
        IdentityError::Hashing => ApiError::new(ErrorCode::InternalError, "internal error"),
    }
}

/// Registers a user (an invalid and an already registered email get the same answer).
#[utoipa::path(
    post,
    path = "/v1/users",
    tag = "tenancy",
    request_body = CreateUser,
    responses(
        (status = 201, description = "Registered", body = UserView),
        (status = 400, description = "Invalid or unavailable email, or a password under 12 characters", body = ErrorBody),
        (status = 429, description = "Too many requests from this IP", body = ErrorBody)
    )
)]
pub async fn create_user(
    State(state): State<AppState>,
    _limit: crate::rate_limit::PerIp,
    Json(body): Json<CreateUser>,
) -> Result<(StatusCode, axum::Json<UserView>), ApiError> {
    let user = identity::register(&state.store, &body.email, &body.password, body.name)
        .await
        .map_err(identity_error)?;
    Ok((StatusCode::CREATED, axum::Json(user.into())))
}

/// `POST /v1/auth/login` body.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Login {
    /// Email.
    pub email: String,
    /// Password.
    pub password: String,
}

/// A membership as the login answer lists it.
#[derive(Debug, Serialize, ToSchema)]
pub struct MembershipSummary {
    /// Tenant.
    pub tenant_id: Uuid,
    /// Role.
    #[schema(value_type = String, example = "admin")]
    pub role: Role,
}

/// `POST /v1/auth/login` answer (the session itself is in the `kuatia_session` cookie).
#[derive(Debug, Serialize, ToSchema)]
pub struct LoginAnswer {
    /// The user.
    pub user: UserView,
    /// Where the user may act.
    pub memberships: Vec<MembershipSummary>,
}

/// Checks email and password and opens a 12-hour sliding session in an HTTP-only cookie.
#[utoipa::path(
    post,
    path = "/v1/auth/login",
    tag = "tenancy",
    request_body = Login,
    responses(
        (status = 200, description = "Logged in; `Set-Cookie: kuatia_session=…; HttpOnly; SameSite=Lax; Secure`", body = LoginAnswer),
        (status = 401, description = "Wrong email or password", body = ErrorBody),
        (status = 429, description = "Too many attempts from this IP", body = ErrorBody)
    )
)]
pub async fn login(
    State(state): State<AppState>,
    _limit: crate::rate_limit::PerIp,
    Json(body): Json<Login>,
) -> Result<Response, ApiError> {
    let session = identity::login(&state.store, &body.email, &body.password)
        .await
        .map_err(identity_error)?;
    let memberships = kuatia_projections::access::memberships_of(&state.store, session.user.id)
        .await?
        .into_iter()
        .map(|m| MembershipSummary {
            tenant_id: m.tenant_id.as_uuid(),
            role: m.role,
        })
        .collect();
    let secure = if state.insecure_cookies { "" } else { "; Secure" };
    let cookie = format!(
        "{SESSION_COOKIE}={}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}{secure}",
        session.token,
        identity::SESSION_LIFETIME.num_seconds()
    );
    let mut response = axum::Json(LoginAnswer {
        user: session.user.into(),
        memberships,
    })
    .into_response();
    let value = HeaderValue::from_str(&cookie)
        .map_err(|_| ApiError::new(ErrorCode::InternalError, "internal error"))?;
    response.headers_mut().insert(header::SET_COOKIE, value);
    Ok(response)
}

/// `POST /v1/auth/logout` answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct LoggedOut {
    /// Whether a session was ended (false for an API key, which has none).
    pub session_ended: bool,
}

/// Ends the current session (with an API key there is nothing to end).
#[utoipa::path(
    post,
    path = "/v1/auth/logout",
    tag = "tenancy",
    security(("api_key" = []), ("session" = [])),
    responses(
        (status = 200, description = "The session is revoked; the cookie is cleared", body = LoggedOut),
        (status = 401, description = "No valid credentials", body = ErrorBody)
    )
)]
pub async fn logout(State(state): State<AppState>, credentials: Credentials) -> Result<Response, ApiError> {
    let ended = match credentials {
        Credentials::Session { session_id, .. } => {
            identity::logout(&state.store, session_id).await?;
            true
        }
        Credentials::ApiKey(_) => false,
    };
    let mut response = axum::Json(LoggedOut { session_ended: ended }).into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("kuatia_session=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0"),
    );
    Ok(response)
}

/// `POST /v1/memberships` body: the user by id or by email.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateMembership {
    /// The user's id.
    pub user_id: Option<Uuid>,
    /// Or the user's email.
    pub email: Option<String>,
    /// The role (only owners grant `owner`).
    #[schema(value_type = String, example = "issuer")]
    pub role: Role,
}

/// A membership.
#[derive(Debug, Serialize, ToSchema)]
pub struct MembershipView {
    /// Id.
    pub id: Uuid,
    /// User.
    pub user_id: Uuid,
    /// Tenant.
    pub tenant_id: Uuid,
    /// Role.
    #[schema(value_type = String, example = "issuer")]
    pub role: Role,
    /// Since.
    pub created_at: DateTime<Utc>,
}

/// Needed by `POST /v1/memberships`.
pub const CREATE_MEMBERSHIP: Permission = Permission::ManageAccess;

/// Gives a registered user a role in the caller's tenant.
#[utoipa::path(
    post,
    path = "/v1/memberships",
    tag = "tenancy",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body = CreateMembership,
    responses(
        (status = 201, description = "Member added", body = MembershipView),
        (status = 400, description = "Unknown user, or neither/both of user_id and email", body = ErrorBody),
        (status = 403, description = "Caller is not owner or admin (owners only grant owner), or is a company-scoped key", body = ErrorBody),
        (status = 409, description = "Already a member", body = ErrorBody)
    )
)]
pub async fn create_membership(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<CreateMembership>,
) -> Result<(StatusCode, axum::Json<MembershipView>), ApiError> {
    caller.require(CREATE_MEMBERSHIP)?;
    // A membership is tenant-wide: a company-scoped key granting one would reach beyond its
    // company (register a user, make it admin, log in as it, mint an unscoped key).
    tenant_wide(&caller)?;
    let user = match (body.user_id, body.email.as_deref()) {
        (Some(id), None) => identity::user_by_id(&state.store, id).await?,
        (None, Some(email)) => identity::user_by_email(&state.store, email).await?,
        _ => return Err(ApiError::validation("give exactly one of user_id and email")),
    }
    .ok_or_else(|| ApiError::invalid_field("user_id", "unknown_user", "no registered user matches"))?;
    let tenant = kuatia_projections::access::tenant(&state.store, caller.tenant)
        .await?
        .ok_or_else(|| ApiError::not_found("no such tenant"))?;
    identity::add_member(
        &state.store,
        caller.tenant,
        &tenant.stream_id,
        user.id,
        body.role,
        caller.role,
        caller.metadata(),
    )
    .await
    .map_err(|e| match e {
        kuatia_application::access::AccessError::Refused(
            kuatia_domain::tenant::TenantError::AlreadyMember,
        ) => ApiError::new(
            ErrorCode::ConflictError,
            "the user is already a member of this tenant",
        ),
        other => access_error(other),
    })?;
    let row = kuatia_projections::access::membership(&state.store, caller.tenant, user.id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::InternalError, "the membership is not readable"))?;
    Ok((StatusCode::CREATED, axum::Json(membership_view(&row))))
}

/// Needed by `GET /v1/memberships`, `PATCH` and `DELETE /v1/memberships/{id}`.
pub const MANAGE_MEMBERSHIPS: Permission = Permission::ManageAccess;

/// Members are tenant-wide: a company-scoped key does not manage them.
fn tenant_wide(caller: &Caller) -> Result<(), ApiError> {
    if caller.company_id.is_some() {
        return Err(ApiError::forbidden(
            "a company-scoped key cannot manage the tenant's members",
        ));
    }
    Ok(())
}

fn membership_view(row: &kuatia_projections::access::MembershipRow) -> MembershipView {
    MembershipView {
        id: row.id,
        user_id: row.user_id,
        tenant_id: row.tenant_id.as_uuid(),
        role: row.role,
        created_at: row.created_at,
    }
}

/// A role change.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateMembership {
    /// The new role (only owners give or take `owner`; the last owner stays one).
    #[schema(value_type = String, example = "viewer")]
    pub role: Role,
}

/// The tenant's members, oldest first.
#[utoipa::path(
    get,
    path = "/v1/memberships",
    tag = "tenancy",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "The members", body = Vec<MembershipView>),
        (status = 403, description = "Caller is not owner or admin, or is a company-scoped key", body = ErrorBody)
    )
)]
pub async fn list_memberships(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<axum::Json<Vec<MembershipView>>, ApiError> {
    caller.require(MANAGE_MEMBERSHIPS)?;
    tenant_wide(&caller)?;
    let rows = kuatia_projections::access::members(&state.store, caller.tenant).await?;
    Ok(axum::Json(rows.iter().map(membership_view).collect()))
}

async fn member_and_stream(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
) -> Result<(kuatia_projections::access::MembershipRow, String), ApiError> {
    let row = kuatia_projections::access::membership_by_id(&state.store, caller.tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such membership"))?;
    let tenant = kuatia_projections::access::tenant(&state.store, caller.tenant)
        .await?
        .ok_or_else(|| ApiError::not_found("no such tenant"))?;
    Ok((row, tenant.stream_id))
}

/// Changes a member's role (an event, `MemberRoleChanged`, naming who asked).
#[utoipa::path(
    patch,
    path = "/v1/memberships/{id}",
    tag = "tenancy",
    security(("api_key" = []), ("session" = [])),
    params(
        ("id" = Uuid, Path, description = "Membership id"),
        ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")
    ),
    request_body = UpdateMembership,
    responses(
        (status = 200, description = "The membership with its new role", body = MembershipView),
        (status = 400, description = "Not a role", body = ErrorBody),
        (status = 403, description = "Caller is not owner or admin, is a company-scoped key, or (not an owner) touches ownership", body = ErrorBody),
        (status = 404, description = "No such membership", body = ErrorBody),
        (status = 409, description = "It would lower the tenant's last owner", body = ErrorBody)
    )
)]
pub async fn update_membership(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
    Json(body): Json<serde_json::Value>,
) -> Result<axum::Json<MembershipView>, ApiError> {
    caller.require(MANAGE_MEMBERSHIPS)?;
    tenant_wide(&caller)?;
    // Another tenant's (or an unknown) membership is 404 whatever the body says.
    let (row, stream) = member_and_stream(&state, &caller, id).await?;
    let body: UpdateMembership = serde_json::from_value(body)
        .map_err(|e| ApiError::validation(format!("the body does not match the schema: {e}")))?;
    identity::change_member(
        &state.store,
        caller.tenant,
        &stream,
        row.user_id,
        Some(body.role),
        caller.role,
        caller.metadata(),
    )
    .await
    .map_err(access_error)?;
    let row = kuatia_projections::access::membership_by_id(&state.store, caller.tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such membership"))?;
    Ok(axum::Json(membership_view(&row)))
}

/// Removes a member (an event, `MemberRemoved`): its sessions no longer reach the tenant.
#[utoipa::path(
    delete,
    path = "/v1/memberships/{id}",
    tag = "tenancy",
    security(("api_key" = []), ("session" = [])),
    params(
        ("id" = Uuid, Path, description = "Membership id"),
        ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")
    ),
    responses(
        (status = 204, description = "Removed"),
        (status = 403, description = "Caller is not owner or admin, is a company-scoped key, or (not an owner) removes an owner", body = ErrorBody),
        (status = 404, description = "No such membership", body = ErrorBody),
        (status = 409, description = "It is the tenant's last owner", body = ErrorBody)
    )
)]
pub async fn delete_membership(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<StatusCode, ApiError> {
    caller.require(MANAGE_MEMBERSHIPS)?;
    tenant_wide(&caller)?;
    let (row, stream) = member_and_stream(&state, &caller, id).await?;
    identity::change_member(
        &state.store,
        caller.tenant,
        &stream,
        row.user_id,
        None,
        caller.role,
        caller.metadata(),
    )
    .await
    .map_err(access_error)?;
    Ok(StatusCode::NO_CONTENT)
}
