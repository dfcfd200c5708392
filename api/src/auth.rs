//! Authentication and tenant scoping, in one extractor that every tenant route takes, so that no
//! handler can forget either.
//!
//! [`Caller`] resolves, in this order:
//! 1. credentials ([`Credentials`]): `Authorization: Bearer <API key>`, else the `kuatia_session`
//!    cookie of a console login; none, unknown, revoked or expired → 401 `authentication_error`
//!    with `WWW-Authenticate: Bearer` (one message for all, so a caller learns nothing about which
//!    keys or sessions exist);
//! 2. `X-Tenant-Id`: missing or not a UUID → 400 `validation_error`; a tenant the key does not
//!    belong to, or the session's user is not a member of → 403 `permission_error`. Every tenant
//!    route needs the header, also with a cookie: a cross-site form cannot send it, which is the
//!    CSRF defence for cookie sessions.
//!
//! Handlers then ask for what they need with [`Caller::require`] (403 `permission_error`). The key
//! is looked up by its SHA-256, so the comparison of secrets never happens byte by byte in our
//! code; the database compares hashes, which leak nothing about the key.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use kuatia_application::access::{ApiKeyRow, sha256_hex};
use kuatia_application::event_store::EventMetadata;
use kuatia_domain::access::{Permission, Role};
use kuatia_domain::tenancy::TenantId;
use uuid::Uuid;

use crate::error::ApiError;
use crate::middleware::RequestId;
use crate::state::AppState;

/// Header naming the tenant of a request.
pub const TENANT_HEADER: &str = "x-tenant-id";

/// Name of the session cookie.
pub const SESSION_COOKIE: &str = "kuatia_session";

/// Proven credentials, before any tenant is chosen.
#[derive(Debug, Clone)]
pub enum Credentials {
    /// An API key (its record).
    ApiKey(ApiKeyRow),
    /// A console session.
    Session {
        /// Session id.
        session_id: Uuid,
        /// Its user.
        user: kuatia_application::identity::User,
    },
}

/// Who is calling, in which tenant, with which role.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The tenant every read and write of this request is confined to.
    pub tenant: TenantId,
    /// The role the request acts with.
    pub role: Role,
    /// When set, only this company's data.
    pub company_id: Option<Uuid>,
    /// The credentials used.
    pub credentials: Credentials,
    /// The request's id (for event metadata).
    pub request_id: Option<String>,
}

impl Caller {
    /// Refuses the request unless the role grants the permission.
    pub fn require(&self, permission: Permission) -> Result<(), ApiError> {
        if self.role.allows(permission) {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "the role {} may not do this (needs one of: {})",
                self.role.as_str(),
                Role::granting(permission)
                    .iter()
                    .map(|r| r.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        }
    }

    /// The company a request acts on: the explicit one (which a company-scoped key must match:
    /// another company is "not found"), else the key's own, else none.
    pub fn company_scope(&self, explicit: Option<Uuid>) -> Result<Option<Uuid>, ApiError> {
        match (self.company_id, explicit) {
            (Some(scope), Some(asked)) if scope != asked => Err(ApiError::not_found("no such company")),
            (Some(scope), _) => Ok(Some(scope)),
            (None, asked) => Ok(asked),
        }
    }

    /// Whether a record of `company` is visible to this caller.
    pub fn sees(&self, company: Uuid) -> bool {
        self.company_id.is_none_or(|scope| scope == company)
    }

    /// Metadata for the events this request causes.
    pub fn metadata(&self) -> EventMetadata {
        let actor = match &self.credentials {
            Credentials::ApiKey(key) => format!("api_key:{}", key.id),
            Credentials::Session { user, .. } => format!("user:{}", user.id),
        };
        EventMetadata {
            actor: Some(actor),
            request_id: self.request_id.clone(),
            correlation_id: self.request_id.clone(),
            causation_id: None,
            trace_parent: None,
        }
    }
}

fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts
        .headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty()).then(|| token.trim())
}

fn session_cookie(parts: &Parts) -> Option<&str> {
    parts
        .headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == SESSION_COOKIE && !value.is_empty()).then_some(value)
        })
}

/// When this process last wrote each key's use: one write a minute per key at most, so that
/// `GET /v1/api-keys` shows the last use to the minute without a write per request.
static USE_WRITTEN: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<uuid::Uuid, std::time::Instant>>,
> = std::sync::LazyLock::new(Default::default);

/// Records that `key` authenticated a request (`api_key_usage`). A failed write is logged, never
/// a reason to refuse the request.
async fn note_use(state: &AppState, key: &ApiKeyRow) {
    let now = std::time::Instant::now();
    {
        let Ok(mut written) = USE_WRITTEN.lock() else {
            return;
        };
        if written
            .get(&key.id)
            .is_some_and(|at| now.duration_since(*at) < std::time::Duration::from_secs(60))
        {
            return;
        }
        written.insert(key.id, now);
    }
    if let Err(err) =
        kuatia_application::access::record_key_use(&state.store, key.tenant_id, key.id, chrono::Utc::now())
            .await
    {
        tracing::warn!(key_id = %key.id, error = %err, "could not record the API key's use");
    }
}

impl FromRequestParts<AppState> for Credentials {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        if let Some(token) = bearer(parts) {
            let key = state.access.key_by_hash(&sha256_hex(token)).await?;
            return match key.filter(|k| k.is_active(chrono::Utc::now())) {
                Some(key) => {
                    note_use(state, &key).await;
                    Ok(Self::ApiKey(key))
                }
                None => Err(ApiError::unauthenticated("the API key is not valid")),
            };
        }
        if let Some(token) = session_cookie(parts) {
            return match kuatia_application::identity::session(&state.store, token).await? {
                Some((session_id, user)) => Ok(Self::Session { session_id, user }),
                None => Err(ApiError::unauthenticated("the session has ended; log in again")),
            };
        }
        Err(ApiError::unauthenticated(
            "an API key is required (Authorization: Bearer …)",
        ))
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let credentials = Credentials::from_request_parts(parts, state).await?;
        let tenant = match parts.headers.get(TENANT_HEADER).map(|v| v.to_str()) {
            None => return Err(ApiError::validation("the X-Tenant-Id header is required")),
            Some(Err(_)) => return Err(ApiError::validation("X-Tenant-Id must be a UUID")),
            Some(Ok(text)) => text
                .trim()
                .parse::<TenantId>()
                .map_err(|_| ApiError::validation("X-Tenant-Id must be a UUID"))?,
        };
        Self::for_tenant(parts, state, credentials, tenant).await
    }
}

impl Caller {
    /// The caller of `tenant` with these credentials: the key's tenant or the user's membership
    /// decides the role (neither → 403 `permission_error`), and the key's, user's and tenant's
    /// rate limits apply. The API's extractor (tenant from `X-Tenant-Id`) and the console's (tenant
    /// the user chose) both come here.
    pub async fn for_tenant(
        parts: &mut Parts,
        state: &AppState,
        credentials: Credentials,
        tenant: TenantId,
    ) -> Result<Self, ApiError> {
        let (role, company_id) = match &credentials {
            Credentials::ApiKey(key) if key.tenant_id == tenant => (key.role, key.company_id),
            Credentials::ApiKey(_) => {
                return Err(ApiError::forbidden(
                    "X-Tenant-Id does not match the API key's tenant",
                ));
            }
            Credentials::Session { user, .. } => match state.access.role_of(tenant, user.id).await? {
                Some(role) => (role, None),
                None => {
                    return Err(ApiError::forbidden(
                        "the user is not a member of the X-Tenant-Id tenant",
                    ));
                }
            },
        };
        let bucket = match &credentials {
            Credentials::ApiKey(key) => format!("api_key:{}", key.id),
            Credentials::Session { user, .. } => format!("user:{}", user.id),
        };
        crate::rate_limit::enforce(parts, state, &bucket, tenant, state.rate_limit_per_key).await?;
        // The tenant's ceiling: all its keys and users together.
        crate::rate_limit::enforce(
            parts,
            state,
            &format!("tenant:{tenant}"),
            tenant,
            state.rate_limit_per_tenant,
        )
        .await?;
        Ok(Self {
            tenant,
            role,
            company_id,
            request_id: parts.extensions.get::<RequestId>().map(|r| r.0.clone()),
            credentials,
        })
    }
}
