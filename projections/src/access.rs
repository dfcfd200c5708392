//! `access` (inline): tenants and their API keys, from the tenant streams, and the queries that
//! authentication and the tenant endpoints run on them.
//!
//! Inline, because a key must work the moment its creation returns. Every statement is
//! idempotent (insert-if-absent, revoke-if-not-revoked), so a replayed event changes nothing.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use kuatia_application::event_store::{ProjectionKind, RecordedEvent, SharedStore, StoreError};
use kuatia_application::projection::{Projection, SqlTx, SqlValue};
use kuatia_domain::access::Role;
use kuatia_domain::tenancy::{Environment, TenantId};
use kuatia_domain::tenant::TenantEvent;
use uuid::Uuid;

/// The projection.
#[derive(Debug, Default, Clone, Copy)]
pub struct Access;

impl Access {
    /// Its stable name.
    pub const NAME: &'static str = "access";
}

#[async_trait]
impl Projection for Access {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn kind(&self) -> ProjectionKind {
        ProjectionKind::Inline
    }

    fn tables(&self) -> &'static [&'static str] {
        &["tenants", "api_keys", "memberships", "invitations"]
    }

    fn stream_types(&self) -> Option<&'static [&'static str]> {
        Some(&["tenant"])
    }

    async fn apply(&self, tx: &mut dyn SqlTx, event: &RecordedEvent) -> Result<(), StoreError> {
        if event.stream_type != "tenant" {
            return Ok(());
        }
        let decoded: TenantEvent = serde_json::from_value(event.payload.clone())
            .map_err(|e| StoreError::Corrupt(format!("tenant event {}: {e}", event.event_id)))?;
        let tenant = event.tenant_id.as_uuid();
        match decoded {
            TenantEvent::TenantCreated {
                tenant_id,
                slug,
                name,
                environment,
            } => {
                tx.execute(
                    "INSERT INTO tenants (id, tenant_id, slug, name, environment, stream_id, created_at) \
                     VALUES ($1, $1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING",
                    &[
                        SqlValue::Uuid(tenant_id),
                        SqlValue::Text(slug.as_str().to_owned()),
                        SqlValue::Text(name),
                        SqlValue::Text(environment_name(environment).to_owned()),
                        SqlValue::Text(event.stream_id.clone()),
                        SqlValue::Timestamp(event.recorded_at),
                    ],
                )
                .await?;
            }
            TenantEvent::ApiKeyIssued(key) => {
                tx.execute(
                    "INSERT INTO api_keys (id, tenant_id, name, role, company_id, prefix, key_sha256, created_at, \
                       expires_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING",
                    &[
                        SqlValue::Uuid(key.key_id),
                        SqlValue::Uuid(tenant),
                        SqlValue::Text(key.name),
                        SqlValue::Text(key.role.as_str().to_owned()),
                        key.company_id.into(),
                        SqlValue::Text(key.prefix),
                        // The hash in events written before hashes left the log; since then a
                        // placeholder that no SHA-256 equals (the column is unique and not null):
                        // authentication reads `api_key_hashes`.
                        SqlValue::Text(if key.key_sha256.is_empty() {
                            format!("key:{}", key.key_id)
                        } else {
                            key.key_sha256
                        }),
                        SqlValue::Timestamp(event.recorded_at),
                        key.expires_at.into(),
                    ],
                )
                .await?;
            }
            TenantEvent::MemberAdded {
                membership_id,
                user_id,
                role,
                invitation_id,
            } => {
                if let Some(invitation) = invitation_id {
                    tx.execute(
                        "UPDATE invitations SET status = 'accepted', closed_at = $2, membership_id = $3 \
                         WHERE id = $1 AND status = 'invited'",
                        &[
                            SqlValue::Uuid(invitation),
                            SqlValue::Timestamp(event.recorded_at),
                            SqlValue::Uuid(membership_id),
                        ],
                    )
                    .await?;
                }
                tx.execute(
                    "INSERT INTO memberships (id, tenant_id, user_id, role, created_at) VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (id) DO NOTHING",
                    &[
                        SqlValue::Uuid(membership_id),
                        SqlValue::Uuid(tenant),
                        SqlValue::Uuid(user_id),
                        SqlValue::Text(role.as_str().to_owned()),
                        SqlValue::Timestamp(event.recorded_at),
                    ],
                )
                .await?;
            }
            TenantEvent::MemberRoleChanged { user_id, role } => {
                tx.execute(
                    "UPDATE memberships SET role = $3 WHERE tenant_id = $1 AND user_id = $2",
                    &[
                        SqlValue::Uuid(tenant),
                        SqlValue::Uuid(user_id),
                        SqlValue::Text(role.as_str().to_owned()),
                    ],
                )
                .await?;
            }
            TenantEvent::MemberRemoved { user_id } => {
                tx.execute(
                    "DELETE FROM memberships WHERE tenant_id = $1 AND user_id = $2",
                    &[SqlValue::Uuid(tenant), SqlValue::Uuid(user_id)],
                )
                .await?;
            }
            TenantEvent::MemberInvited {
                invitation_id,
                email,
                role,
                expires_at,
                invited_by,
            } => {
                tx.execute(
                    "INSERT INTO invitations (id, tenant_id, email, role, status, invited_by, created_at, expires_at) \
                     VALUES ($1, $2, $3, $4, 'invited', $5, $6, $7) ON CONFLICT (id) DO NOTHING",
                    &[
                        SqlValue::Uuid(invitation_id),
                        SqlValue::Uuid(tenant),
                        SqlValue::Text(email),
                        SqlValue::Text(role.as_str().to_owned()),
                        SqlValue::Text(invited_by),
                        SqlValue::Timestamp(event.recorded_at),
                        SqlValue::Timestamp(expires_at),
                    ],
                )
                .await?;
            }
            TenantEvent::InvitationRevoked { invitation_id, .. } => {
                tx.execute(
                    "UPDATE invitations SET status = 'revoked', closed_at = $2 WHERE id = $1 AND status = 'invited'",
                    &[SqlValue::Uuid(invitation_id), SqlValue::Timestamp(event.recorded_at)],
                )
                .await?;
            }
            TenantEvent::ApiKeyRevoked { key_id, .. } => {
                tx.execute(
                    "UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
                    &[SqlValue::Uuid(key_id), SqlValue::Timestamp(event.recorded_at)],
                )
                .await?;
            }
        }
        Ok(())
    }
}

fn environment_name(environment: Environment) -> &'static str {
    match environment {
        Environment::Demo => "demo",
        Environment::Production => "production",
    }
}

fn parse_environment(text: &str) -> Environment {
    if text == "production" {
        Environment::Production
    } else {
        Environment::Demo
    }
}

fn parse_role(text: &str) -> Result<Role, StoreError> {
    serde_json::from_value(serde_json::Value::String(text.to_owned()))
        .map_err(|_| StoreError::Corrupt(format!("unknown role {text:?}")))
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("unreadable {what}"))
}

/// A tenant as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantRow {
    /// Id.
    pub id: Uuid,
    /// Slug.
    pub slug: String,
    /// Name.
    pub name: String,
    /// Environment.
    pub environment: Environment,
    /// Stream of its events.
    pub stream_id: String,
    /// Creation.
    pub created_at: DateTime<Utc>,
}

/// The id of the tenant with this slug.
pub async fn tenant_id_by_slug(store: &SharedStore, slug: &str) -> Result<Option<TenantId>, StoreError> {
    let rows = store
        .query(
            "SELECT id FROM tenants WHERE slug = $1",
            &[SqlValue::Text(slug.to_owned())],
        )
        .await?;
    Ok(rows.first().and_then(|r| r[0].as_uuid()).map(TenantId::from_uuid))
}

/// Whether the destination policy applies to a tenant's outgoing requests in full: a production
/// tenant, or one not (yet) known, which is held to the stricter rule.
pub async fn is_production(store: &SharedStore, id: TenantId) -> Result<bool, StoreError> {
    Ok(tenant(store, id)
        .await?
        .is_none_or(|t| t.environment == kuatia_domain::tenancy::Environment::Production))
}

/// Reads one tenant.
pub async fn tenant(store: &SharedStore, id: TenantId) -> Result<Option<TenantRow>, StoreError> {
    let rows = store
        .query(
            "SELECT id, slug, name, environment, stream_id, created_at FROM tenants WHERE id = $1",
            &[SqlValue::Uuid(id.as_uuid())],
        )
        .await?;
    rows.first()
        .map(|r| {
            Ok(TenantRow {
                id: r[0].as_uuid().ok_or_else(|| corrupt("tenant id"))?,
                slug: r[1].as_text().ok_or_else(|| corrupt("slug"))?,
                name: r[2].as_text().ok_or_else(|| corrupt("name"))?,
                environment: parse_environment(&r[3].as_text().unwrap_or_default()),
                stream_id: r[4].as_text().ok_or_else(|| corrupt("stream id"))?,
                created_at: r[5].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
            })
        })
        .transpose()
}

pub use kuatia_application::access::ApiKeyRow;

fn key_row(r: &[SqlValue]) -> Result<ApiKeyRow, StoreError> {
    Ok(ApiKeyRow {
        id: r[0].as_uuid().ok_or_else(|| corrupt("key id"))?,
        tenant_id: TenantId::from_uuid(r[1].as_uuid().ok_or_else(|| corrupt("key tenant"))?),
        name: r[2].as_text().ok_or_else(|| corrupt("key name"))?,
        role: parse_role(&r[3].as_text().unwrap_or_default())?,
        company_id: r[4].non_null().and_then(SqlValue::as_uuid),
        prefix: r[5].as_text().ok_or_else(|| corrupt("prefix"))?,
        created_at: r[6].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
        expires_at: r[7].non_null().and_then(SqlValue::as_timestamp),
        revoked_at: r[8].non_null().and_then(SqlValue::as_timestamp),
    })
}

/// The tenant's keys (of one company when `company` is given), oldest first, each with when it
/// was last used (`api_key_usage`, written by authentication; `None`: never, or not since the
/// table exists).
pub async fn keys(
    store: &SharedStore,
    tenant: TenantId,
    company: Option<Uuid>,
) -> Result<Vec<(ApiKeyRow, Option<DateTime<Utc>>)>, StoreError> {
    let rows = store
        .query(
            "SELECT k.id, k.tenant_id, k.name, k.role, k.company_id, k.prefix, k.created_at, k.expires_at, \
               k.revoked_at, u.last_used_at \
             FROM api_keys k LEFT JOIN api_key_usage u ON u.key_id = k.id \
             WHERE k.tenant_id = $1 AND ($2 IS NULL OR k.company_id = $2) ORDER BY k.created_at, k.id",
            &[
                SqlValue::Uuid(tenant.as_uuid()),
                company.map_or(
                    SqlValue::TypedNull(kuatia_application::projection::SqlType::Uuid),
                    SqlValue::Uuid,
                ),
            ],
        )
        .await?;
    rows.iter()
        .map(|r| Ok((key_row(r)?, r[9].non_null().and_then(SqlValue::as_timestamp))))
        .collect()
}

/// Finds a key by the SHA-256 of its secret.
pub async fn key_by_hash(store: &SharedStore, sha256: &str) -> Result<Option<ApiKeyRow>, StoreError> {
    let rows = store
        .query(
            "SELECT k.id, k.tenant_id, k.name, k.role, k.company_id, k.prefix, k.created_at, k.expires_at, \
               k.revoked_at \
             FROM api_key_hashes h JOIN api_keys k ON k.id = h.key_id WHERE h.key_sha256 = $1",
            &[SqlValue::Text(sha256.to_owned())],
        )
        .await?;
    rows.first().map(|r| key_row(r)).transpose()
}

/// Finds a tenant's key by id.
pub async fn key_by_id(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
) -> Result<Option<ApiKeyRow>, StoreError> {
    let rows = store
        .query(
            "SELECT id, tenant_id, name, role, company_id, prefix, created_at, expires_at, revoked_at \
             FROM api_keys WHERE tenant_id = $1 AND id = $2",
            &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(id)],
        )
        .await?;
    rows.first().map(|r| key_row(r)).transpose()
}

/// A membership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MembershipRow {
    /// Id.
    pub id: Uuid,
    /// Tenant.
    pub tenant_id: TenantId,
    /// User.
    pub user_id: Uuid,
    /// Role.
    pub role: Role,
    /// Since.
    pub created_at: DateTime<Utc>,
}

fn membership_row(r: &[SqlValue]) -> Result<MembershipRow, StoreError> {
    Ok(MembershipRow {
        id: r[0].as_uuid().ok_or_else(|| corrupt("membership id"))?,
        tenant_id: TenantId::from_uuid(r[1].as_uuid().ok_or_else(|| corrupt("membership tenant"))?),
        user_id: r[2].as_uuid().ok_or_else(|| corrupt("membership user"))?,
        role: parse_role(&r[3].as_text().unwrap_or_default())?,
        created_at: r[4].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
    })
}

/// A member and who the person is.
#[derive(Debug, Clone)]
pub struct Member {
    /// The membership.
    pub membership: MembershipRow,
    /// The user's email (lower case).
    pub email: String,
    /// The user's name, if given.
    pub name: Option<String>,
}

/// The members of a tenant, oldest first, with each person's email and name (one statement).
pub async fn members(store: &SharedStore, tenant: TenantId) -> Result<Vec<Member>, StoreError> {
    store
        .query(
            "SELECT m.id, m.tenant_id, m.user_id, m.role, m.created_at, u.email, u.name \
             FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.tenant_id = $1 \
             ORDER BY m.created_at, m.id",
            &[SqlValue::Uuid(tenant.as_uuid())],
        )
        .await?
        .iter()
        .map(|r| {
            Ok(Member {
                membership: membership_row(r)?,
                email: r[5].as_text().ok_or_else(|| corrupt("member email"))?,
                name: r[6].as_text(),
            })
        })
        .collect()
}

/// A membership of a tenant by its id.
pub async fn membership_by_id(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
) -> Result<Option<MembershipRow>, StoreError> {
    let rows = store
        .query(
            "SELECT id, tenant_id, user_id, role, created_at FROM memberships WHERE tenant_id = $1 AND id = $2",
            &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(id)],
        )
        .await?;
    rows.first().map(|r| membership_row(r)).transpose()
}

/// Every tenant a user belongs to.
pub async fn memberships_of(store: &SharedStore, user_id: Uuid) -> Result<Vec<MembershipRow>, StoreError> {
    store
        .query(
            "SELECT id, tenant_id, user_id, role, created_at FROM memberships WHERE user_id = $1 ORDER BY created_at",
            &[SqlValue::Uuid(user_id)],
        )
        .await?
        .iter()
        .map(|r| membership_row(r))
        .collect()
}

/// A tenant a user belongs to, with its name (the console's tenant switch).
#[derive(Debug, Clone)]
pub struct UserTenant {
    /// The tenant.
    pub tenant_id: Uuid,
    /// Its name.
    pub name: String,
}

/// Every tenant a user belongs to, with names, in one query (oldest membership first).
pub async fn tenants_of_user(store: &SharedStore, user_id: Uuid) -> Result<Vec<UserTenant>, StoreError> {
    store
        .query(
            "SELECT t.id, t.name FROM memberships m JOIN tenants t ON t.id = m.tenant_id \
             WHERE m.user_id = $1 ORDER BY m.created_at, m.id",
            &[SqlValue::Uuid(user_id)],
        )
        .await?
        .iter()
        .map(|r| {
            Ok(UserTenant {
                tenant_id: r[0].as_uuid().ok_or_else(|| corrupt("tenant id"))?,
                name: r[1].as_text().ok_or_else(|| corrupt("name"))?,
            })
        })
        .collect()
}

/// A user's membership in one tenant.
pub async fn membership(
    store: &SharedStore,
    tenant: TenantId,
    user_id: Uuid,
) -> Result<Option<MembershipRow>, StoreError> {
    let rows = store
        .query(
            "SELECT id, tenant_id, user_id, role, created_at FROM memberships WHERE tenant_id = $1 AND user_id = $2",
            &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(user_id)],
        )
        .await?;
    rows.first().map(|r| membership_row(r)).transpose()
}

/// An invitation as the `invitations` table holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvitationRow {
    /// Id.
    pub id: Uuid,
    /// Tenant.
    pub tenant_id: TenantId,
    /// The invited address.
    pub email: String,
    /// The role it grants.
    pub role: Role,
    /// `invited`, `accepted` or `revoked` (an `invited` one past `expires_at` has expired).
    pub status: String,
    /// Who invited.
    pub invited_by: String,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Until when it can be accepted.
    pub expires_at: DateTime<Utc>,
    /// When it was accepted or revoked.
    pub closed_at: Option<DateTime<Utc>>,
    /// The membership it became.
    pub membership_id: Option<Uuid>,
}

fn invitation_row(r: &[SqlValue]) -> Result<InvitationRow, StoreError> {
    Ok(InvitationRow {
        id: r[0].as_uuid().ok_or_else(|| corrupt("invitation id"))?,
        tenant_id: TenantId::from_uuid(r[1].as_uuid().ok_or_else(|| corrupt("invitation tenant"))?),
        email: r[2].as_text().ok_or_else(|| corrupt("invitation email"))?,
        role: parse_role(&r[3].as_text().unwrap_or_default())?,
        status: r[4].as_text().ok_or_else(|| corrupt("invitation status"))?,
        invited_by: r[5].as_text().unwrap_or_default(),
        created_at: r[6].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
        expires_at: r[7].as_timestamp().ok_or_else(|| corrupt("expires_at"))?,
        closed_at: r[8].non_null().and_then(SqlValue::as_timestamp),
        membership_id: r[9].non_null().and_then(SqlValue::as_uuid),
    })
}

/// A tenant's invitations, newest first.
pub async fn invitations(store: &SharedStore, tenant: TenantId) -> Result<Vec<InvitationRow>, StoreError> {
    store
        .query(
            concat!(
                "SELECT id, tenant_id, email, role, status, invited_by, created_at, expires_at, closed_at, ",
                "membership_id FROM invitations WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC"
            ),
            &[SqlValue::Uuid(tenant.as_uuid())],
        )
        .await?
        .iter()
        .map(|r| invitation_row(r))
        .collect()
}

/// One invitation by id, in any tenant (`None` for an unknown id).
pub async fn invitation(store: &SharedStore, id: Uuid) -> Result<Option<InvitationRow>, StoreError> {
    let rows = store
        .query(
            concat!(
                "SELECT id, tenant_id, email, role, status, invited_by, created_at, expires_at, closed_at, ",
                "membership_id FROM invitations WHERE id = $1"
            ),
            &[SqlValue::Uuid(id)],
        )
        .await?;
    rows.first().map(|r| invitation_row(r)).transpose()
}
