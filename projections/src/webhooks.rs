//! `webhooks` (inline): webhook endpoints, from the `webhook_endpoint` streams, and the queries
//! the webhook endpoints and the fan-out run. No secret is here: rows carry the sealed secrets'
//! ids. (Deliveries are a plain table written by the delivery jobs:
//! `kuatia_application::webhooks`.)
//!
//! Inline, so that an endpoint receives events the moment its creation returns. Updates carry
//! the stream version and only apply forward, so a replayed event changes nothing.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use kuatia_application::event_store::{ProjectionKind, RecordedEvent, SharedStore, StoreError};
use kuatia_application::projection::{Projection, SqlTx, SqlValue};
use kuatia_domain::tenancy::TenantId;
use kuatia_domain::webhook::{EndpointEvent, EndpointSettings};
use uuid::Uuid;

/// The projection.
#[derive(Debug, Default, Clone, Copy)]
pub struct Webhooks;

impl Webhooks {
    /// Its stable name.
    pub const NAME: &'static str = "webhooks";
}

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

#[async_trait]
impl Projection for Webhooks {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn kind(&self) -> ProjectionKind {
        ProjectionKind::Inline
    }

    fn tables(&self) -> &'static [&'static str] {
        &["webhook_endpoints"]
    }

    fn stream_types(&self) -> Option<&'static [&'static str]> {
        Some(&["webhook_endpoint"])
    }

    async fn apply(&self, tx: &mut dyn SqlTx, event: &RecordedEvent) -> Result<(), StoreError> {
        if event.stream_type != "webhook_endpoint" {
            return Ok(());
        }
        let decoded: EndpointEvent = serde_json::from_value(event.payload.clone())
            .map_err(|e| corrupt(format!("webhook endpoint event {}: {e}", event.event_id)))?;
        let version = SqlValue::Int(event.stream_version as i64);
        let stream = SqlValue::Text(event.stream_id.clone());
        let at = SqlValue::Timestamp(event.recorded_at);
        match decoded {
            EndpointEvent::WebhookEndpointCreated {
                endpoint_id,
                settings,
                secret_id,
            } => {
                tx.execute(
                    "INSERT INTO webhook_endpoints (id, tenant_id, company_id, url, description, events, active, \
                       deleted, secret_id, stream_id, version, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12) ON CONFLICT (id) DO NOTHING",
                    &[
                        SqlValue::Uuid(endpoint_id),
                        SqlValue::Uuid(event.tenant_id.as_uuid()),
                        settings.company_id.into(),
                        SqlValue::Text(settings.url.clone()),
                        settings.description.clone().map_or(SqlValue::Null, SqlValue::Text),
                        SqlValue::Json(serde_json::to_value(&settings.events).map_err(corrupt)?),
                        SqlValue::Bool(settings.active),
                        SqlValue::Bool(false),
                        SqlValue::Uuid(secret_id),
                        stream,
                        version,
                        at,
                    ],
                )
                .await?;
            }
            EndpointEvent::WebhookEndpointUpdated { settings } => {
                tx.execute(
                    "UPDATE webhook_endpoints SET company_id = $2, url = $3, description = $4, events = $5, \
                       active = $6, version = $7, updated_at = $8 WHERE stream_id = $1 AND version < $7",
                    &[
                        stream,
                        settings.company_id.into(),
                        SqlValue::Text(settings.url.clone()),
                        settings
                            .description
                            .clone()
                            .map_or(SqlValue::Null, SqlValue::Text),
                        SqlValue::Json(serde_json::to_value(&settings.events).map_err(corrupt)?),
                        SqlValue::Bool(settings.active),
                        version,
                        at,
                    ],
                )
                .await?;
            }
            EndpointEvent::WebhookSecretRotated {
                secret_id,
                previous_secret_id,
                previous_valid_until,
            } => {
                tx.execute(
                    "UPDATE webhook_endpoints SET secret_id = $2, previous_secret_id = $3, \
                       previous_secret_expires_at = $4, version = $5, updated_at = $6 \
                     WHERE stream_id = $1 AND version < $5",
                    &[
                        stream,
                        SqlValue::Uuid(secret_id),
                        SqlValue::Uuid(previous_secret_id),
                        SqlValue::Timestamp(previous_valid_until),
                        version,
                        at,
                    ],
                )
                .await?;
            }
            EndpointEvent::WebhookEndpointDeactivated => {
                tx.execute(
                    "UPDATE webhook_endpoints SET active = $2, version = $3, updated_at = $4 \
                     WHERE stream_id = $1 AND version < $3",
                    &[stream, SqlValue::Bool(false), version, at],
                )
                .await?;
            }
            EndpointEvent::WebhookEndpointDeleted => {
                tx.execute(
                    "UPDATE webhook_endpoints SET deleted = $2, active = $3, version = $4, updated_at = $5 \
                     WHERE stream_id = $1 AND version < $4",
                    &[stream, SqlValue::Bool(true), SqlValue::Bool(false), version, at],
                )
                .await?;
            }
        }
        Ok(())
    }
}

/// An endpoint as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointRow {
    /// Id.
    pub id: Uuid,
    /// Its stream.
    pub stream_id: String,
    /// What it is.
    pub settings: EndpointSettings,
    /// The current sealed secret.
    pub secret_id: Uuid,
    /// The previous sealed secret, while it still signs.
    pub previous_secret: Option<(Uuid, DateTime<Utc>)>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

fn row(r: &[SqlValue]) -> Result<EndpointRow, StoreError> {
    let uuid = |i: usize| {
        r[i].as_uuid()
            .ok_or_else(|| corrupt("webhook endpoint: bad uuid"))
    };
    let time = |i: usize| {
        r[i].as_timestamp()
            .ok_or_else(|| corrupt("webhook endpoint: bad time"))
    };
    let events = match &r[5] {
        SqlValue::Json(v) => v.clone(),
        SqlValue::Text(t) => serde_json::from_str(t).map_err(corrupt)?,
        _ => return Err(corrupt("webhook endpoint: bad events")),
    };
    let previous = match (
        r[8].non_null().and_then(SqlValue::as_uuid),
        r[9].non_null().and_then(SqlValue::as_timestamp),
    ) {
        (Some(id), Some(until)) => Some((id, until)),
        _ => None,
    };
    Ok(EndpointRow {
        id: uuid(0)?,
        stream_id: r[1].as_text().unwrap_or_default(),
        settings: EndpointSettings {
            company_id: r[2].non_null().and_then(SqlValue::as_uuid),
            url: r[3].as_text().unwrap_or_default(),
            description: r[4].non_null().and_then(SqlValue::as_text),
            events: serde_json::from_value(events).map_err(corrupt)?,
            active: r[6].as_i64() == Some(1),
        },
        secret_id: uuid(7)?,
        previous_secret: previous,
        created_at: time(10)?,
        updated_at: time(11)?,
    })
}

/// The tenant's endpoints that are not deleted (only those of `company` and the tenant-wide ones,
/// when given), oldest first.
pub async fn endpoints(
    store: &SharedStore,
    tenant: TenantId,
    company: Option<Uuid>,
) -> Result<Vec<EndpointRow>, StoreError> {
    let rows = match company {
        Some(company) => {
            store
                .query(
                    "SELECT id, stream_id, company_id, url, description, events, active, secret_id, \
                       previous_secret_id, previous_secret_expires_at, created_at, updated_at \
                     FROM webhook_endpoints WHERE tenant_id = $1 AND deleted = $2 AND company_id = $3 \
                     ORDER BY created_at, id",
                    &[
                        SqlValue::Uuid(tenant.as_uuid()),
                        SqlValue::Bool(false),
                        SqlValue::Uuid(company),
                    ],
                )
                .await?
        }
        None => {
            store
                .query(
                    TENANT_ENDPOINTS,
                    &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Bool(false)],
                )
                .await?
        }
    };
    rows.iter().map(|r| row(r)).collect()
}

/// The tenant's endpoints that are not deleted, oldest first.
const TENANT_ENDPOINTS: &str = "SELECT id, stream_id, company_id, url, description, events, active, secret_id, \
       previous_secret_id, previous_secret_expires_at, created_at, updated_at \
     FROM webhook_endpoints WHERE tenant_id = $1 AND deleted = $2 ORDER BY created_at, id";

/// The tenant's active endpoints, oldest first, read in an open transaction (the fan-out's).
pub async fn active_endpoints_in(
    tx: &mut dyn SqlTx,
    tenant: TenantId,
) -> Result<Vec<EndpointRow>, StoreError> {
    let rows = tx
        .query(
            TENANT_ENDPOINTS,
            &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Bool(false)],
        )
        .await?;
    let mut active = Vec::new();
    for r in &rows {
        let endpoint = row(r)?;
        if endpoint.settings.active {
            active.push(endpoint);
        }
    }
    Ok(active)
}

/// The active endpoints that receive events of `company` (theirs and the tenant-wide ones).
pub async fn active_endpoints_for(
    store: &SharedStore,
    tenant: TenantId,
    company: Option<Uuid>,
) -> Result<Vec<EndpointRow>, StoreError> {
    Ok(endpoints(store, tenant, None)
        .await?
        .into_iter()
        .filter(|e| {
            e.settings.active && (e.settings.company_id.is_none() || e.settings.company_id == company)
        })
        .collect())
}

/// One endpoint of the tenant that is not deleted.
pub async fn endpoint(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
) -> Result<Option<EndpointRow>, StoreError> {
    let rows = store
        .query(
            "SELECT id, stream_id, company_id, url, description, events, active, secret_id, \
               previous_secret_id, previous_secret_expires_at, created_at, updated_at \
             FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2 AND deleted = $3",
            &[
                SqlValue::Uuid(tenant.as_uuid()),
                SqlValue::Uuid(id),
                SqlValue::Bool(false),
            ],
        )
        .await?;
    rows.first().map(|r| row(r)).transpose()
}

/// Every certificate of every tenant: (tenant, company, record), for the expiry scan.
pub async fn all_certificates(
    store: &SharedStore,
) -> Result<Vec<(TenantId, Uuid, kuatia_domain::certificate::CertificateRecord)>, StoreError> {
    let rows = store
        .query(
            "SELECT tenant_id, company_id, record FROM certificates ORDER BY id",
            &[],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let record = match &r[2] {
                SqlValue::Json(v) => v.clone(),
                SqlValue::Text(t) => serde_json::from_str(t).map_err(corrupt)?,
                _ => return Err(corrupt("certificate: bad record")),
            };
            Ok((
                TenantId::from_uuid(r[0].as_uuid().ok_or_else(|| corrupt("certificate: bad tenant"))?),
                r[1].as_uuid()
                    .ok_or_else(|| corrupt("certificate: bad company"))?,
                serde_json::from_value(record).map_err(corrupt)?,
            ))
        })
        .collect()
}
