//! The logged-in person's own account, whatever the tenant: `GET`/`PATCH /v1/auth/me` (who, the
//! name), `PUT /v1/auth/password` (which ends every other session), `GET /v1/auth/sessions` and
//! `DELETE /v1/auth/sessions` ("sign out everywhere else"). A session only: an API key has no
//! person behind it (404).

use axum::extract::State;
use chrono::{DateTime, Utc};
use kuatia_application::identity::{self, PasswordChangeError};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Credentials;
use crate::error::{ApiError, ErrorBody};
use crate::extract::Json;
use crate::routes::identity::UserView;
use crate::state::AppState;

/// The session's user and session id; an API key is refused.
fn person(credentials: Credentials) -> Result<(Uuid, identity::User), ApiError> {
    match credentials {
        Credentials::Session { session_id, user } => Ok((session_id, user)),
        Credentials::ApiKey(_) => Err(ApiError::not_found(
            "this request is authenticated with an API key, which belongs to no person: log in",
        )),
    }
}

/// Who is logged in.
#[utoipa::path(
    get,
    path = "/v1/auth/me",
    tag = "tenancy",
    security(("session" = [])),
    responses(
        (status = 200, description = "The logged-in user", body = UserView),
        (status = 401, description = "No valid session", body = ErrorBody),
        (status = 404, description = "An API key, not a session", body = ErrorBody)
    )
)]
pub async fn me(credentials: Credentials) -> Result<axum::Json<UserView>, ApiError> {
    Ok(axum::Json(person(credentials)?.1.into()))
}

/// `PATCH /v1/auth/me` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateMe {
    /// The name to go by, at most 100 characters; empty clears it.
    pub name: String,
}

/// Sets the name the logged-in user goes by.
#[utoipa::path(
    patch,
    path = "/v1/auth/me",
    tag = "tenancy",
    security(("session" = [])),
    request_body = UpdateMe,
    responses(
        (status = 200, description = "The user as it is now", body = UserView),
        (status = 400, description = "A name over 100 characters", body = ErrorBody),
        (status = 401, description = "No valid session", body = ErrorBody),
        (status = 404, description = "An API key, not a session", body = ErrorBody)
    )
)]
pub async fn update_me(
    State(state): State<AppState>,
    credentials: Credentials,
    Json(body): Json<UpdateMe>,
) -> Result<axum::Json<UserView>, ApiError> {
    let (_, user) = person(credentials)?;
    if body.name.trim().chars().count() > 100 {
        return Err(ApiError::invalid_field(
            "name",
            "too_long",
            "a name has at most 100 characters",
        ));
    }
    let user = identity::rename(&state.store, user.id, &body.name)
        .await?
        .ok_or_else(|| ApiError::not_found("no such user"))?;
    Ok(axum::Json(user.into()))
}

/// `PUT /v1/auth/password` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangePassword {
    /// The password in use now.
    pub current_password: String,
    /// The new one: at least 12 characters, not a common one.
    pub new_password: String,
}

/// `PUT /v1/auth/password` and `DELETE /v1/auth/sessions` answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionsEnded {
    /// How many other sessions of the user were ended.
    pub sessions_ended: u64,
}

/// Changes the logged-in user's password; every other session of the user ends (this one goes
/// on). Limited per IP like the login, since it checks a password.
#[utoipa::path(
    put,
    path = "/v1/auth/password",
    tag = "tenancy",
    security(("session" = [])),
    request_body = ChangePassword,
    responses(
        (status = 200, description = "Changed; the other sessions ended", body = SessionsEnded),
        (status = 400, description = "`current_password` wrong (`wrong_password`) or `new_password` weak (`weak_password`)", body = ErrorBody),
        (status = 401, description = "No valid session", body = ErrorBody),
        (status = 404, description = "An API key, not a session", body = ErrorBody),
        (status = 429, description = "Too many attempts from this IP", body = ErrorBody)
    )
)]
pub async fn change_password(
    State(state): State<AppState>,
    _limit: crate::rate_limit::PerIp,
    credentials: Credentials,
    Json(body): Json<ChangePassword>,
) -> Result<axum::Json<SessionsEnded>, ApiError> {
    let (session, user) = person(credentials)?;
    let ended = identity::change_password(
        &state.store,
        user.id,
        &body.current_password,
        &body.new_password,
        Some(session),
    )
    .await
    .map_err(|e| match e {
        PasswordChangeError::WrongCurrent => {
            ApiError::invalid_field("current_password", "wrong_password", e.to_string())
        }
        PasswordChangeError::Weak(_) => {
            ApiError::invalid_field("new_password", "weak_password", e.to_string())
        }
        PasswordChangeError::Identity(e) => crate::routes::identity::identity_error(e),
    })?;
    Ok(axum::Json(SessionsEnded {
        sessions_ended: ended,
    }))
}

/// A live session of the user (never its cookie).
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionView {
    /// Id.
    pub id: Uuid,
    /// When it was opened (the login).
    pub created_at: DateTime<Utc>,
    /// When it ends unless used (12 hours after its last use).
    pub expires_at: DateTime<Utc>,
    /// The session of this request.
    pub current: bool,
}

/// The logged-in user's live sessions, newest first.
#[utoipa::path(
    get,
    path = "/v1/auth/sessions",
    tag = "tenancy",
    security(("session" = [])),
    responses(
        (status = 200, description = "The sessions", body = [SessionView]),
        (status = 401, description = "No valid session", body = ErrorBody),
        (status = 404, description = "An API key, not a session", body = ErrorBody)
    )
)]
pub async fn list_sessions(
    State(state): State<AppState>,
    credentials: Credentials,
) -> Result<axum::Json<Vec<SessionView>>, ApiError> {
    let (current, user) = person(credentials)?;
    Ok(axum::Json(
        identity::sessions_of(&state.store, user.id)
            .await?
            .into_iter()
            .map(|s| SessionView {
                id: s.id,
                created_at: s.created_at,
                expires_at: s.expires_at,
                current: s.id == current,
            })
            .collect(),
    ))
}

/// Ends every other session of the logged-in user ("sign out everywhere else"); this one goes on.
#[utoipa::path(
    delete,
    path = "/v1/auth/sessions",
    tag = "tenancy",
    security(("session" = [])),
    responses(
        (status = 200, description = "The other sessions ended", body = SessionsEnded),
        (status = 401, description = "No valid session", body = ErrorBody),
        (status = 404, description = "An API key, not a session", body = ErrorBody)
    )
)]
pub async fn end_other_sessions(
    State(state): State<AppState>,
    credentials: Credentials,
) -> Result<axum::Json<SessionsEnded>, ApiError> {
    let (current, user) = person(credentials)?;
    let ended = identity::end_sessions(&state.store, user.id, Some(current)).await?;
    Ok(axum::Json(SessionsEnded {
        sessions_ended: ended,
    }))
}
