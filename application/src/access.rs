//! Tenants and API keys: the use cases behind `POST /v1/tenants` and `/v1/api-keys`.
//!
//! Keys are `kt_test_` (demo tenants) or `kt_live_` followed by 40 random base62 characters
//! (about 238 bits). Only their SHA-256 is kept; the plain key is returned once, by the call
//! that creates it. A SHA-256 rather than a slow password hash is right here: the key is random
//! and long, so there is nothing to brute-force, and every request must verify it quickly.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use kuatia_domain::access::Role;
use kuatia_domain::tenancy::{Environment, TenantId, TenantSlug};
use kuatia_domain::tenant::{self, KeyGrant, Revoker, Tenant, TenantCommand, TenantError};
use rand::Rng;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::aggregate::{CommandExecutor, ExecuteError};
use crate::event_store::{EventMetadata, SharedStore, StoreError};

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Lower-case hex SHA-256 of a secret.
pub fn sha256_hex(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// An API key's record (no secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyRow {
    /// Id.
    pub id: Uuid,
    /// Tenant.
    pub tenant_id: TenantId,
    /// Label.
    pub name: String,
    /// Role.
    pub role: Role,
    /// Company scope.
    pub company_id: Option<Uuid>,
    /// Recognisable prefix.
    pub prefix: String,
    /// Issued.
    pub created_at: DateTime<Utc>,
    /// Stops working at.
    pub expires_at: Option<DateTime<Utc>>,
    /// Revoked at.
    pub revoked_at: Option<DateTime<Utc>>,
}

impl ApiKeyRow {
    /// Whether the key authenticates at `now`.
    pub fn is_active(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|at| at > now)
    }
}

/// The access read models, as authentication reads them on every request.
#[async_trait]
pub trait AccessReads: Send + Sync {
    /// The API key whose secret hashes to `sha256` (active or not).
    async fn key_by_hash(&self, sha256: &str) -> Result<Option<ApiKeyRow>, StoreError>;
    /// `user`'s role in `tenant`; `None`: not a member.
    async fn role_of(&self, tenant: TenantId, user: Uuid) -> Result<Option<Role>, StoreError>;
}

/// A freshly generated key: the secret, its listing prefix and its hash.
#[derive(Clone, PartialEq, Eq)]
pub struct GeneratedKey {
    /// The whole key, shown once.
    pub secret: String,
    /// First 12 characters, kept for listings.
    pub prefix: String,
    /// SHA-256 of the secret.
    pub sha256: String,
}

impl std::fmt::Debug for GeneratedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeneratedKey")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// `n` random base62 characters from the thread's cryptographic generator (about 5.95 bits
/// each): the unguessable part of API keys and public links.
pub fn random_base62(n: usize) -> String {
    let mut rng = rand::rng();
    (0..n)
        .map(|_| char::from(BASE62[rng.random_range(0..BASE62.len())]))
        .collect()
}

/// Generates a key for a tenant of the given environment.
pub fn generate_key(environment: Environment) -> GeneratedKey {
    let random = random_base62(40);
    let secret = format!("{}{random}", environment.api_key_prefix());
    GeneratedKey {
        prefix: secret.chars().take(12).collect(),
        sha256: sha256_hex(&secret),
        secret,
    }
}

/// A key as returned at creation: its record plus the secret, once.
#[derive(Clone)]
pub struct IssuedKey {
    /// Id.
    pub id: Uuid,
    /// Label.
    pub name: String,
    /// Role.
    pub role: Role,
    /// Company scope.
    pub company_id: Option<Uuid>,
    /// Prefix.
    pub prefix: String,
    /// The key, shown once.
    pub key: String,
    /// Expiry.
    pub expires_at: Option<DateTime<Utc>>,
}

impl std::fmt::Debug for IssuedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedKey")
            .field("id", &self.id)
            .field("role", &self.role)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// Why an access operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// The slug belongs to another tenant.
    #[error("the slug is already taken")]
    SlugTaken,
    /// No such tenant or key for this caller.
    #[error("not found")]
    NotFound,
    /// A domain rule refused it.
    #[error(transparent)]
    Refused(TenantError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Maps an executor error of the tenant aggregate.
pub(crate) fn from_execute(err: ExecuteError<TenantError>) -> AccessError {
    match err {
        ExecuteError::Rejected(TenantError::UnknownKey | TenantError::NotCreated)
        | ExecuteError::NotFound => AccessError::NotFound,
        ExecuteError::Rejected(e) => AccessError::Refused(e),
        ExecuteError::Conflict(stream) => AccessError::Store(StoreError::VersionConflict {
            stream_id: stream,
            expected: crate::event_store::ExpectedVersion::Any,
            actual: 0,
        }),
        ExecuteError::Store(e) => AccessError::Store(e),
    }
}

/// Creates a tenant and its bootstrap owner key; returns the tenant id and the key.
pub async fn create_tenant(
    store: &SharedStore,
    slug: TenantSlug,
    name: String,
    environment: Environment,
    metadata: EventMetadata,
) -> Result<(TenantId, IssuedKey), AccessError> {
    let tenant_id = TenantId::from_uuid(Uuid::now_v7());
    let generated = generate_key(environment);
    let grant = KeyGrant {
        key_id: Uuid::now_v7(),
        name: "bootstrap".to_owned(),
        role: Role::Owner,
        company_id: None,
        prefix: generated.prefix.clone(),
        key_sha256: String::new(),
        expires_at: None,
    };
    record_hash(store, tenant_id, grant.key_id, &generated.sha256).await?;
    let executor = CommandExecutor::<Tenant>::new(store.clone(), ());
    let command = TenantCommand::Create {
        tenant_id: tenant_id.as_uuid(),
        slug: slug.clone(),
        name,
        environment,
        bootstrap_key: grant.clone(),
    };
    match executor
        .execute(tenant_id, &tenant::stream_id(&slug), command, metadata)
        .await
    {
        Ok(_) => {}
        // Another tenant's stream (NotFound), a lost race (Conflict) or an existing tenant.
        Err(
            ExecuteError::NotFound
            | ExecuteError::Conflict(_)
            | ExecuteError::Rejected(TenantError::AlreadyExists),
        ) => {
            return Err(AccessError::SlugTaken);
        }
        Err(other) => return Err(from_execute(other)),
    }
    Ok((tenant_id, issued(grant, generated.secret)))
}

/// Notes that a key authenticated a request at `at` (`api_key_usage`; never moves back). Not an
/// event: use is not a change of the tenant, and a write in the log per request would drown it.
pub async fn record_key_use(
    store: &SharedStore,
    tenant: TenantId,
    key_id: Uuid,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    store
        .execute(
            "INSERT INTO api_key_usage (key_id, tenant_id, last_used_at) VALUES ($1, $2, $3) \
             ON CONFLICT (key_id) DO UPDATE SET last_used_at = excluded.last_used_at \
             WHERE api_key_usage.last_used_at < excluded.last_used_at",
            &[
                crate::projection::SqlValue::Uuid(key_id),
                crate::projection::SqlValue::Uuid(tenant.as_uuid()),
                crate::projection::SqlValue::Timestamp(at),
            ],
        )
        .await?;
    Ok(())
}

/// Writes the SHA-256 that authenticates a key, before the event that issues it: an event in the
/// log always has its hash; a failed append leaves only a hash of a key that does not exist.
async fn record_hash(
    store: &SharedStore,
    tenant: TenantId,
    key_id: Uuid,
    sha256: &str,
) -> Result<(), StoreError> {
    store
        .execute(
            "INSERT INTO api_key_hashes (key_id, tenant_id, key_sha256, created_at) VALUES ($1, $2, $3, $4)",
            &[
                crate::projection::SqlValue::Uuid(key_id),
                crate::projection::SqlValue::Uuid(tenant.as_uuid()),
                crate::projection::SqlValue::Text(sha256.to_owned()),
                crate::projection::SqlValue::Timestamp(Utc::now()),
            ],
        )
        .await?;
    Ok(())
}

fn issued(grant: KeyGrant, secret: String) -> IssuedKey {
    IssuedKey {
        id: grant.key_id,
        name: grant.name,
        role: grant.role,
        company_id: grant.company_id,
        prefix: grant.prefix,
        key: secret,
        expires_at: grant.expires_at,
    }
}

/// What a new key should be.
#[derive(Debug, Clone)]
pub struct KeyRequest {
    /// Label.
    pub name: String,
    /// Role.
    pub role: Role,
    /// Company scope.
    pub company_id: Option<Uuid>,
    /// Expiry.
    pub expires_at: Option<DateTime<Utc>>,
}

/// Issues a key in a tenant, on behalf of a caller with `granted_by`.
pub async fn issue_key(
    store: &SharedStore,
    tenant: TenantId,
    stream_id: &str,
    environment: Environment,
    request: KeyRequest,
    granted_by: Role,
    metadata: EventMetadata,
) -> Result<IssuedKey, AccessError> {
    let generated = generate_key(environment);
    let grant = KeyGrant {
        key_id: Uuid::now_v7(),
        name: request.name.trim().to_owned(),
        role: request.role,
        company_id: request.company_id,
        prefix: generated.prefix.clone(),
        key_sha256: String::new(),
        expires_at: request.expires_at,
    };
    record_hash(store, tenant, grant.key_id, &generated.sha256).await?;
    let executor = CommandExecutor::<Tenant>::new(store.clone(), ());
    executor
        .execute(
            tenant,
            stream_id,
            TenantCommand::IssueApiKey {
                key: grant.clone(),
                granted_by,
            },
            metadata,
        )
        .await
        .map_err(from_execute)?;
    Ok(issued(grant, generated.secret))
}

/// Revokes a key of the tenant.
pub async fn revoke_key(
    store: &SharedStore,
    tenant: TenantId,
    stream_id: &str,
    key_id: Uuid,
    by: Revoker,
    metadata: EventMetadata,
) -> Result<(), AccessError> {
    let executor = CommandExecutor::<Tenant>::new(store.clone(), ());
    executor
        .execute(
            tenant,
            stream_id,
            TenantCommand::RevokeApiKey { key_id, by },
            metadata,
        )
        .await
        .map_err(from_execute)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_the_environment_prefix_forty_base62_characters_and_a_matching_hash() {
        let demo = generate_key(Environment::Demo);
        assert!(demo.secret.starts_with("kt_test_"));
        let live = generate_key(Environment::Production);
        assert!(live.secret.starts_with("kt_live_"));
        let random = &live.secret["kt_live_".len()..];
        assert_eq!(random.len(), 40);
        assert!(random.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_eq!(live.prefix, live.secret[..12]);
        assert_eq!(live.sha256, sha256_hex(&live.secret));
        assert_ne!(generate_key(Environment::Demo).secret, demo.secret);
        assert!(
            !format!("{demo:?}").contains(&demo.secret),
            "Debug never shows the secret"
        );
    }
}
