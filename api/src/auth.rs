//! Authentication and tenant scoping, in one extractor that every tenant route takes, so that no
//! handler can forget either (contract §5, DECISIONS §2).
//!
//! [`Caller`] resolves, in this order:
//! 1. credentials: `Authorization: Bearer <API key>`; none, unknown, revoked or expired → 401
//!    `authentication_error` with `WWW-Authenticate: Bearer` (one message for all, so a caller
//!    learns nothing about which keys exist);
//! 2. `X-Tenant-Id`: missing or not a UUID → 400 `validation_error`; another tenant than the
//!    key's → 403 `permission_error`.
//!
//! Handlers then ask for what they need with [`Caller::require`] (403 `permission_error`). The key
//! is looked up by its SHA-256, so the comparison of secrets never happens byte by byte in our
//! code; the database compares hashes, which leak nothing about the key.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use kuatia_application::access::sha256_hex;
use kuatia_application::event_store::EventMetadata;
use kuatia_domain::access::{Permission, Role};
use kuatia_domain::tenancy::TenantId;
use kuatia_projections::access::{self, ApiKeyRow};
use uuid::Uuid;

use crate::error::ApiError;
use crate::middleware::RequestId;
use crate::state::AppState;

/// Header naming the tenant of a request.
pub const TENANT_HEADER: &str = "x-tenant-id";

/// Who is calling, in which tenant, with which role.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The tenant every read and write of this request is confined to.
    pub tenant: TenantId,
    /// The role the request acts with.
    pub role: Role,
    /// When set, only this company's data.
    pub company_id: Option<Uuid>,
    /// The API key used.
    pub key: ApiKeyRow,
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

    /// Metadata for the events this request causes.
    pub fn metadata(&self) -> EventMetadata {
        EventMetadata {
            actor: Some(format!("api_key:{}", self.key.id)),
            request_id: self.request_id.clone(),
            correlation_id: self.request_id.clone(),
            causation_id: None,
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

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let Some(token) = bearer(parts) else {
            return Err(ApiError::unauthenticated(
                "an API key is required (Authorization: Bearer …)",
            ));
        };
        let key = access::key_by_hash(&state.store, &sha256_hex(token)).await?;
        let Some(key) = key.filter(|k| k.is_active(chrono::Utc::now())) else {
            return Err(ApiError::unauthenticated("the API key is not valid"));
        };
        let tenant = match parts.headers.get(TENANT_HEADER).map(|v| v.to_str()) {
            None => return Err(ApiError::validation("the X-Tenant-Id header is required")),
            Some(Err(_)) => return Err(ApiError::validation("X-Tenant-Id must be a UUID")),
            Some(Ok(text)) => text
                .trim()
                .parse::<TenantId>()
                .map_err(|_| ApiError::validation("X-Tenant-Id must be a UUID"))?,
        };
        if tenant != key.tenant_id {
            return Err(ApiError::forbidden(
                "X-Tenant-Id does not match the API key's tenant",
            ));
        }
        Ok(Self {
            tenant,
            role: key.role,
            company_id: key.company_id,
            request_id: parts.extensions.get::<RequestId>().map(|r| r.0.clone()),
            key,
        })
    }
}
