//! Users, console sessions and memberships.

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

pub(crate) fn identity_error(err: IdentityError) -> ApiError {
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
    let cookie = session_cookie(&state, &session)?;
    let mut response = axum::Json(LoginAnswer {
        user: session.user.into(),
        memberships,
    })
    .into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(response)
}

/// Every tenant `user` belongs to, with its name (the console's tenant switch).
pub(crate) async fn tenants_of_user(
    state: &AppState,
    user: uuid::Uuid,
) -> Result<Vec<kuatia_projections::access::UserTenant>, ApiError> {
    Ok(kuatia_projections::access::tenants_of_user(&state.store, user).await?)
}

/// The `Set-Cookie` value that opens a session in the browser.
pub(crate) fn session_cookie(
    state: &AppState,
    session: &identity::NewSession,
) -> Result<HeaderValue, ApiError> {
    let secure = if state.insecure_cookies { "" } else { "; Secure" };
    let cookie = format!(
        "{SESSION_COOKIE}={}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}{secure}",
        session.token,
        identity::SESSION_LIFETIME.num_seconds()
    );
    HeaderValue::from_str(&cookie).map_err(|_| ApiError::new(ErrorCode::InternalError, "internal error"))
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

/// `POST /v1/memberships` body: whom to invite (an email, or a registered user's id) and the role.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateMembership {
    /// A registered user's id.
    pub user_id: Option<Uuid>,
    /// Or an email address (registered or not: the answer is the same).
    pub email: Option<String>,
    /// The role (only owners invite `owner`).
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
    /// The member's email (in the list only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// The member's name, when the person gave one (in the list only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// An invitation (`POST /v1/memberships`, `GET /v1/invitations`).
#[derive(Debug, Serialize, ToSchema)]
pub struct InvitationView {
    /// Id (to revoke it).
    pub invitation_id: Uuid,
    /// `invited`, `accepted`, `revoked` or `expired`.
    #[schema(example = "invited")]
    pub status: String,
    /// The invited address.
    pub email: String,
    /// The role accepting grants.
    #[schema(value_type = String, example = "issuer")]
    pub role: Role,
    /// Until when it can be accepted (7 days).
    pub expires_at: DateTime<Utc>,
    /// Only in the answer to `POST /v1/memberships` when no mail server is configured: the link
    /// to pass on to the invitee (it ends in the token that accepts the invitation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accept_url: Option<String>,
    /// The membership it became, once accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub membership_id: Option<Uuid>,
    /// Who invited (`api_key:<id>` or `user:<id>`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invited_by: Option<String>,
    /// Created (absent in the answer to the creation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
}

impl InvitationView {
    fn from_row(row: &kuatia_projections::access::InvitationRow, now: DateTime<Utc>) -> Self {
        let status = if row.status == "invited" && now >= row.expires_at {
            "expired".to_owned()
        } else {
            row.status.clone()
        };
        Self {
            invitation_id: row.id,
            status,
            email: row.email.clone(),
            role: row.role,
            expires_at: row.expires_at,
            accept_url: None,
            membership_id: row.membership_id,
            invited_by: Some(row.invited_by.clone()),
            created_at: Some(row.created_at),
        }
    }
}

pub(crate) fn invitation_error(err: identity::InvitationError) -> ApiError {
    use kuatia_domain::tenant::TenantError;
    match err {
        identity::InvitationError::BadEmail => {
            ApiError::invalid_field("email", "invalid_email", err.to_string())
        }
        identity::InvitationError::UnknownToken
        | identity::InvitationError::Access(kuatia_application::access::AccessError::Refused(
            TenantError::UnknownInvitation,
        )) => ApiError::not_found("no invitation matches this link"),
        identity::InvitationError::Access(kuatia_application::access::AccessError::Refused(
            e @ (TenantError::InvitationClosed | TenantError::AlreadyMember),
        )) => ApiError::new(ErrorCode::ConflictError, e.to_string()),
        identity::InvitationError::Access(kuatia_application::access::AccessError::Refused(
            e @ TenantError::NotInvitee,
        )) => ApiError::forbidden(format!("{e}: log in as the invited address to accept it")),
        identity::InvitationError::Access(other) => access_error(other),
    }
}

/// Needed by `POST /v1/memberships`.
pub const CREATE_MEMBERSHIP: Permission = Permission::ManageAccess;

/// Invites a person to the caller's tenant: nobody is added until the invitee,
/// logged in as the invited email, accepts with `POST /v1/invitations/{token}/accept`. The
/// answer is the same whether or not the email belongs to a registered user. With a mail server
/// (`KUATIA_SMTP_URL`) the link is emailed; otherwise it is in `accept_url`, for the inviter to
/// pass on.
#[utoipa::path(
    post,
    path = "/v1/memberships",
    tag = "tenancy",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body = CreateMembership,
    responses(
        (status = 202, description = "Invited (valid 7 days)", body = InvitationView),
        (status = 400, description = "Not an email, an unknown user id, or neither/both of user_id and email", body = ErrorBody),
        (status = 403, description = "Caller is not owner or admin (owners only invite owners), or is a company-scoped key", body = ErrorBody)
    )
)]
pub async fn create_membership(
    State(state): State<AppState>,
    caller: Caller,
    headers: axum::http::HeaderMap,
    Json(body): Json<CreateMembership>,
) -> Result<(StatusCode, axum::Json<InvitationView>), ApiError> {
    caller.require(CREATE_MEMBERSHIP)?;
    // A membership is tenant-wide: a company-scoped key granting one would reach beyond its
    // company (register a user, make it admin, log in as it, mint an unscoped key).
    tenant_wide(&caller)?;
    let email = match (body.user_id, body.email) {
        (Some(id), None) => {
            identity::user_by_id(&state.store, id)
                .await?
                .ok_or_else(|| {
                    ApiError::invalid_field("user_id", "unknown_user", "no registered user has this id")
                })?
                .email
        }
        (None, Some(email)) => email,
        _ => return Err(ApiError::validation("give exactly one of user_id and email")),
    };
    let tenant = kuatia_projections::access::tenant(&state.store, caller.tenant)
        .await?
        .ok_or_else(|| ApiError::not_found("no such tenant"))?;
    let invitation = identity::invite(
        &state.store,
        caller.tenant,
        &tenant.stream_id,
        &email,
        body.role,
        caller.role,
        caller.metadata(),
    )
    .await
    .map_err(invitation_error)?;
    let accept_url = format!(
        "{}/invitations/{}",
        crate::routes::artifacts::origin(&headers),
        invitation.token
    );
    if state.mail_configured {
        kuatia_application::process::delivery::queue_invitation_email(
            state.jobs.as_ref(),
            caller.tenant,
            &invitation,
            &tenant.name,
            &accept_url,
        )
        .await?;
    }
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(InvitationView {
            invitation_id: invitation.id,
            status: "invited".to_owned(),
            email: invitation.email,
            role: invitation.role,
            expires_at: invitation.expires_at,
            accept_url: (!state.mail_configured).then_some(accept_url),
            membership_id: None,
            invited_by: None,
            created_at: None,
        }),
    ))
}

/// Needed by `GET /v1/invitations` and `DELETE /v1/invitations/{id}`.
pub const MANAGE_INVITATIONS: Permission = Permission::ManageAccess;

/// The tenant's invitations, newest first (pending, accepted, revoked and expired).
#[utoipa::path(
    get,
    path = "/v1/invitations",
    tag = "tenancy",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "The invitations", body = Vec<InvitationView>),
        (status = 403, description = "Caller is not owner or admin, or is a company-scoped key", body = ErrorBody)
    )
)]
pub async fn list_invitations(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<axum::Json<Vec<InvitationView>>, ApiError> {
    caller.require(MANAGE_INVITATIONS)?;
    tenant_wide(&caller)?;
    let now = Utc::now();
    let rows = kuatia_projections::access::invitations(&state.store, caller.tenant).await?;
    Ok(axum::Json(
        rows.iter().map(|r| InvitationView::from_row(r, now)).collect(),
    ))
}

/// Revokes a pending invitation (an event, `InvitationRevoked`): its link no longer accepts.
/// Revoking one that is no longer pending changes nothing.
#[utoipa::path(
    delete,
    path = "/v1/invitations/{id}",
    tag = "tenancy",
    security(("api_key" = []), ("session" = [])),
    params(
        ("id" = Uuid, Path, description = "Invitation id"),
        ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")
    ),
    responses(
        (status = 204, description = "Revoked"),
        (status = 403, description = "Caller is not owner or admin, is a company-scoped key, or (not an owner) revokes an owner's invitation", body = ErrorBody),
        (status = 404, description = "No such invitation", body = ErrorBody)
    )
)]
pub async fn revoke_invitation(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<StatusCode, ApiError> {
    caller.require(MANAGE_INVITATIONS)?;
    tenant_wide(&caller)?;
    let found = kuatia_projections::access::invitation(&state.store, id)
        .await?
        .filter(|row| row.tenant_id == caller.tenant)
        .ok_or_else(|| ApiError::not_found("no such invitation"))?;
    let tenant = kuatia_projections::access::tenant(&state.store, caller.tenant)
        .await?
        .ok_or_else(|| ApiError::not_found("no such tenant"))?;
    identity::revoke_invitation(
        &state.store,
        caller.tenant,
        &tenant.stream_id,
        found.id,
        caller.role,
        caller.metadata(),
    )
    .await
    .map_err(|e| invitation_error(e.into()))?;
    Ok(StatusCode::NO_CONTENT)
}

/// The invitation a token accepts, with its tenant's stream.
pub(crate) async fn invitation_of_token(
    state: &AppState,
    token: &str,
) -> Result<
    (
        kuatia_projections::access::InvitationRow,
        kuatia_projections::access::TenantRow,
    ),
    ApiError,
> {
    let unknown = || invitation_error(identity::InvitationError::UnknownToken);
    let (tenant_id, id) = identity::invitation_of_token(&state.store, token)
        .await?
        .ok_or_else(unknown)?;
    let row = kuatia_projections::access::invitation(&state.store, id)
        .await?
        .filter(|r| r.tenant_id == tenant_id)
        .ok_or_else(unknown)?;
    let tenant = kuatia_projections::access::tenant(&state.store, tenant_id)
        .await?
        .ok_or_else(unknown)?;
    Ok((row, tenant))
}

/// Accepts an invitation: the caller's session must be the invited email's; the token alone
/// grants nothing. The membership is granted now (`MemberAdded`, naming the invitation).
#[utoipa::path(
    post,
    path = "/v1/invitations/{token}/accept",
    tag = "tenancy",
    security(("session" = [])),
    params(("token" = String, Path, description = "The invitation's token (the end of its accept_url)")),
    responses(
        (status = 200, description = "Accepted: the membership", body = MembershipView),
        (status = 401, description = "Not logged in", body = ErrorBody),
        (status = 403, description = "An API key, or a session of another email address", body = ErrorBody),
        (status = 404, description = "No invitation has this token", body = ErrorBody),
        (status = 409, description = "Already accepted, revoked or expired; or already a member", body = ErrorBody)
    )
)]
pub async fn accept_invitation(
    State(state): State<AppState>,
    credentials: Credentials,
    Path(token): Path<String>,
) -> Result<axum::Json<MembershipView>, ApiError> {
    let Credentials::Session { user, .. } = credentials else {
        return Err(ApiError::forbidden(
            "an invitation is accepted by the invited person, logged in (POST /v1/auth/login), not with an API key",
        ));
    };
    let row = accept(&state, &token, &user).await?;
    Ok(axum::Json(membership_view(&row)))
}

/// `user` accepts the invitation of `token`: the membership it became.
pub(crate) async fn accept(
    state: &AppState,
    token: &str,
    user: &identity::User,
) -> Result<kuatia_projections::access::MembershipRow, ApiError> {
    let (invitation, tenant) = invitation_of_token(state, token).await?;
    let metadata = kuatia_application::event_store::EventMetadata {
        actor: Some(format!("user:{}", user.id)),
        ..Default::default()
    };
    let membership_id = identity::accept_invitation(
        &state.store,
        invitation.tenant_id,
        &tenant.stream_id,
        invitation.id,
        user,
        metadata,
    )
    .await
    .map_err(invitation_error)?;
    kuatia_projections::access::membership_by_id(&state.store, invitation.tenant_id, membership_id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::InternalError, "the membership is not readable"))
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
        email: None,
        name: None,
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

/// The tenant's members, oldest first, each with the person's email and name.
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
    Ok(axum::Json(
        rows.into_iter()
            .map(|m| MembershipView {
                email: Some(m.email),
                name: m.name,
                ..membership_view(&m.membership)
            })
            .collect(),
    ))
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
