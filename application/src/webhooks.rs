//! Webhooks: the use cases behind `/v1/webhooks` and the `webhook_deliveries`
//! table the delivery jobs keep.
//!
//! An endpoint is an event-sourced configuration record (`kuatia_domain::webhook`); its signing
//! secret (`whsec_…`, shown once) is sealed in the [`Vault`] and the events carry its id.
//! Deliveries are rows, not events: one per (endpoint, webhook event), keyed by the webhook
//! event's id, which is derived from the document event that caused it, so a repeated fan-out
//! finds the row it made before and a replay re-sends the very same body and id.

use chrono::{DateTime, TimeDelta, Utc};
use kuatia_domain::tenancy::TenantId;
use kuatia_domain::webhook::{self, EndpointCommand, EndpointError, EndpointSettings, WebhookEndpoint};
use rand::Rng;
use uuid::Uuid;
use zeroize::Zeroizing;

use crate::aggregate::{CommandExecutor, ExecuteError};
use crate::event_store::{EventMetadata, SharedStore, StoreError};
use crate::jobs::NewJob;
use crate::projection::{SqlTx, SqlValue};
use crate::vault::{Vault, VaultError};

/// Job kind of versions that fanned webhooks out with a job per event (the `webhook_fanout`
/// subscription does it now); such a job finishes without doing anything.
pub const WEBHOOK_FANOUT: &str = "webhook.fanout";
/// Job kind: send one webhook delivery (and retry it on its schedule).
pub const WEBHOOK_DELIVER: &str = "webhook.deliver";
/// Job kind: warn of certificates that expire in 30, 7 or 1 days (`certificate.expiring`).
pub const CERTIFICATE_SCAN: &str = "certificate.scan";
/// Job kind: plan the customer and issuer deliveries of an accepted document.
pub const DELIVERY_PLAN: &str = "delivery.plan";
/// Job kind: one customer or issuer delivery through one channel (email, WhatsApp, Telegram).
pub const DELIVERY_SEND: &str = "delivery.send";
/// Job kind: email an invitation's link to the invited address (when a mail server is set).
pub const INVITATION_EMAIL: &str = "invitation.email";

/// Why a webhook change did not happen.
#[derive(Debug, thiserror::Error)]
pub enum WebhooksError {
    /// No such endpoint for this caller.
    #[error("no such webhook endpoint")]
    NotFound,
    /// A concurrent change won.
    #[error("a concurrent change won; retry")]
    Conflict,
    /// The settings break a rule: (field, code, message).
    #[error("invalid webhook endpoint")]
    Invalid(Vec<webhook::FieldIssue>),
    /// Sealing or opening the secret failed.
    #[error(transparent)]
    Vault(#[from] VaultError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn from_execute(err: ExecuteError<EndpointError>) -> WebhooksError {
    match err {
        ExecuteError::Rejected(EndpointError::NotFound) | ExecuteError::NotFound => WebhooksError::NotFound,
        ExecuteError::Rejected(EndpointError::AlreadyExists) | ExecuteError::Conflict(_) => {
            WebhooksError::Conflict
        }
        ExecuteError::Store(e) => WebhooksError::Store(e),
    }
}

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A new signing secret: `whsec_` and 40 random base62 characters (about 238 bits).
pub fn generate_secret() -> Zeroizing<String> {
    let mut rng = rand::rng();
    let random: String = (0..40)
        .map(|_| char::from(BASE62[rng.random_range(0..BASE62.len())]))
        .collect();
    Zeroizing::new(format!("whsec_{random}"))
}

async fn run(
    store: &SharedStore,
    tenant: TenantId,
    endpoint_id: Uuid,
    command: EndpointCommand,
    metadata: EventMetadata,
) -> Result<(), WebhooksError> {
    CommandExecutor::<WebhookEndpoint>::new(store.clone(), ())
        .execute(
            tenant,
            &webhook::stream_id(tenant, endpoint_id),
            command,
            metadata,
        )
        .await
        .map(|_| ())
        .map_err(from_execute)
}

/// Creates an endpoint; returns its id and its secret (the one time it is shown).
pub async fn create_endpoint(
    store: &SharedStore,
    vault: &Vault,
    tenant: TenantId,
    settings: EndpointSettings,
    metadata: EventMetadata,
) -> Result<(Uuid, Zeroizing<String>), WebhooksError> {
    let endpoint_id = Uuid::now_v7();
    let secret = generate_secret();
    let secret_id = vault.put(tenant, "webhook_secret", secret.as_bytes()).await?;
    run(
        store,
        tenant,
        endpoint_id,
        EndpointCommand::Create {
            endpoint_id,
            settings,
            secret_id,
        },
        metadata,
    )
    .await?;
    Ok((endpoint_id, secret))
}

/// Replaces an endpoint's settings.
pub async fn update_endpoint(
    store: &SharedStore,
    tenant: TenantId,
    endpoint_id: Uuid,
    settings: EndpointSettings,
    metadata: EventMetadata,
) -> Result<(), WebhooksError> {
    run(
        store,
        tenant,
        endpoint_id,
        EndpointCommand::Update { settings },
        metadata,
    )
    .await
}

/// A new secret (returned, shown once); the current one keeps signing for 24 h.
pub async fn rotate_secret(
    store: &SharedStore,
    vault: &Vault,
    tenant: TenantId,
    endpoint_id: Uuid,
    now: DateTime<Utc>,
    metadata: EventMetadata,
) -> Result<Zeroizing<String>, WebhooksError> {
    let secret = generate_secret();
    let secret_id = vault.put(tenant, "webhook_secret", secret.as_bytes()).await?;
    run(
        store,
        tenant,
        endpoint_id,
        EndpointCommand::RotateSecret {
            secret_id,
            previous_valid_until: now + TimeDelta::hours(webhook::ROTATION_OVERLAP_HOURS),
        },
        metadata,
    )
    .await?;
    Ok(secret)
}

/// Stops deliveries to an endpoint.
pub async fn deactivate_endpoint(
    store: &SharedStore,
    tenant: TenantId,
    endpoint_id: Uuid,
    metadata: EventMetadata,
) -> Result<(), WebhooksError> {
    run(store, tenant, endpoint_id, EndpointCommand::Deactivate, metadata).await
}

/// Deletes an endpoint logically.
pub async fn delete_endpoint(
    store: &SharedStore,
    tenant: TenantId,
    endpoint_id: Uuid,
    metadata: EventMetadata,
) -> Result<(), WebhooksError> {
    run(store, tenant, endpoint_id, EndpointCommand::Delete, metadata).await
}

// ---------------------------------------------------------------------------------------------
// Deliveries
// ---------------------------------------------------------------------------------------------

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// Queued, not tried yet (or replayed).
    Pending,
    /// An attempt is under way.
    Delivering,
    /// The receiver answered 2xx.
    Delivered,
    /// An attempt failed; the next is scheduled.
    Retrying,
    /// Every attempt failed.
    Failed,
}

impl DeliveryStatus {
    /// Every status, for gauges and validation.
    pub const ALL: [Self; 5] = [
        Self::Pending,
        Self::Delivering,
        Self::Delivered,
        Self::Retrying,
        Self::Failed,
    ];

    /// The wire and stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivering => "delivering",
            Self::Delivered => "delivered",
            Self::Retrying => "retrying",
            Self::Failed => "failed",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Whether no more attempts follow (until a replay).
    pub fn is_settled(self) -> bool {
        matches!(self, Self::Delivered | Self::Failed)
    }
}

/// A delivery to record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDelivery {
    /// Owner.
    pub tenant: TenantId,
    /// Where to.
    pub endpoint_id: Uuid,
    /// The webhook event's id (`evt_…`), stable across retries and replays.
    pub event_id: String,
    /// Its type (`document.accepted`).
    pub event_type: String,
    /// The document, for document events (ordering is per document and endpoint).
    pub document_id: Option<Uuid>,
    /// Order within the document (the causing event's stream version).
    pub seq: i64,
    /// The exact JSON body every attempt sends.
    pub body: String,
    /// When it was recorded.
    pub created_at: DateTime<Utc>,
}

/// A delivery as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryRow {
    /// Id.
    pub id: Uuid,
    /// Owner.
    pub tenant: TenantId,
    /// Where to.
    pub endpoint_id: Uuid,
    /// The webhook event's id.
    pub event_id: String,
    /// Its type.
    pub event_type: String,
    /// The document, for document events.
    pub document_id: Option<Uuid>,
    /// Order within the document.
    pub seq: i64,
    /// The body.
    pub body: String,
    /// Status.
    pub status: DeliveryStatus,
    /// Attempts made (since the last replay).
    pub attempts: u32,
    /// Replays so far (each queues a new job).
    pub replays: u32,
    /// HTTP status of the last attempt, when the receiver answered.
    pub last_status_code: Option<u16>,
    /// What went wrong in the last attempt.
    pub last_error: Option<String>,
    /// When the next attempt is due (`retrying`, `pending`).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Recorded.
    pub created_at: DateTime<Utc>,
    /// When it was delivered.
    pub delivered_at: Option<DateTime<Utc>>,
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("webhook delivery: bad {what}"))
}

fn delivery_row(r: &[SqlValue]) -> Result<DeliveryRow, StoreError> {
    Ok(DeliveryRow {
        id: r[0].as_uuid().ok_or_else(|| corrupt("id"))?,
        tenant: TenantId::from_uuid(r[1].as_uuid().ok_or_else(|| corrupt("tenant"))?),
        endpoint_id: r[2].as_uuid().ok_or_else(|| corrupt("endpoint"))?,
        event_id: r[3].as_text().unwrap_or_default(),
        event_type: r[4].as_text().unwrap_or_default(),
        document_id: r[5].non_null().and_then(SqlValue::as_uuid),
        seq: r[6].as_i64().unwrap_or_default(),
        body: r[7].as_text().unwrap_or_default(),
        status: DeliveryStatus::parse(&r[8].as_text().unwrap_or_default())
            .ok_or_else(|| corrupt("status"))?,
        attempts: r[9].as_i64().unwrap_or_default() as u32,
        replays: r[10].as_i64().unwrap_or_default() as u32,
        last_status_code: r[11].non_null().and_then(SqlValue::as_i64).map(|c| c as u16),
        last_error: r[12].non_null().and_then(SqlValue::as_text),
        next_attempt_at: r[13].non_null().and_then(SqlValue::as_timestamp),
        created_at: r[14].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
        delivered_at: r[15].non_null().and_then(SqlValue::as_timestamp),
    })
}

/// Records a delivery unless the endpoint has this event already; returns the stored row (new
/// or the one from before).
pub async fn record_delivery(store: &SharedStore, new: &NewDelivery) -> Result<DeliveryRow, StoreError> {
    store
        .execute(INSERT_DELIVERY, &insert_delivery_params(new))
        .await?;
    let rows = store
        .query(
            DELIVERY_BY_EVENT,
            &[
                SqlValue::Uuid(new.endpoint_id),
                SqlValue::Text(new.event_id.clone()),
            ],
        )
        .await?;
    inserted(&rows)
}

/// [`record_delivery`] in an open transaction (the fan-out subscription's, whose checkpoint moves
/// with it).
pub async fn record_delivery_in(tx: &mut dyn SqlTx, new: &NewDelivery) -> Result<DeliveryRow, StoreError> {
    tx.execute(INSERT_DELIVERY, &insert_delivery_params(new)).await?;
    let rows = tx
        .query(
            DELIVERY_BY_EVENT,
            &[
                SqlValue::Uuid(new.endpoint_id),
                SqlValue::Text(new.event_id.clone()),
            ],
        )
        .await?;
    inserted(&rows)
}

const INSERT_DELIVERY: &str = "INSERT INTO webhook_deliveries (id, tenant_id, endpoint_id, event_id, event_type, \
       document_id, seq, body, status, attempts, replays, next_attempt_at, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, 0, $10, $10, $10) \
     ON CONFLICT (endpoint_id, event_id) DO NOTHING";

const DELIVERY_BY_EVENT: &str = "SELECT id, tenant_id, endpoint_id, event_id, event_type, document_id, seq, body, \
       status, attempts, replays, last_status_code, last_error, next_attempt_at, created_at, delivered_at \
     FROM webhook_deliveries WHERE endpoint_id = $1 AND event_id = $2";

fn insert_delivery_params(new: &NewDelivery) -> [SqlValue; 10] {
    [
        SqlValue::Uuid(Uuid::now_v7()),
        SqlValue::Uuid(new.tenant.as_uuid()),
        SqlValue::Uuid(new.endpoint_id),
        SqlValue::Text(new.event_id.clone()),
        SqlValue::Text(new.event_type.clone()),
        new.document_id.into(),
        SqlValue::Int(new.seq),
        SqlValue::Text(new.body.clone()),
        SqlValue::Text(DeliveryStatus::Pending.as_str().to_owned()),
        SqlValue::Timestamp(new.created_at),
    ]
}

fn inserted(rows: &[Vec<SqlValue>]) -> Result<DeliveryRow, StoreError> {
    rows.first()
        .map(|r| delivery_row(r))
        .transpose()?
        .ok_or_else(|| corrupt("insert (row missing after insert)"))
}

/// The webhook event id of a store event (`evt_` and its id): the same in every fan-out, retry
/// and replay, so receivers can de-duplicate.
pub fn webhook_event_id(store_event_id: Uuid) -> String {
    format!("evt_{}", store_event_id.simple())
}

/// The delivery job of a delivery (a replay is a new job: its key names the replay).
pub fn deliver_job(row: &DeliveryRow) -> NewJob {
    let mut job = NewJob::new(
        WEBHOOK_DELIVER,
        format!("{WEBHOOK_DELIVER}:{}:{}", row.id, row.replays),
        row.tenant,
        serde_json::json!({"delivery_id": row.id, "replays": row.replays}),
    );
    // Waiting for an earlier delivery of the same document is an attempt of the job too.
    job.max_attempts = 1_000_000;
    job
}

/// One delivery of the tenant.
pub async fn delivery(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
) -> Result<Option<DeliveryRow>, StoreError> {
    let rows = store
        .query(
            "SELECT id, tenant_id, endpoint_id, event_id, event_type, document_id, seq, body, status, attempts, \
               replays, last_status_code, last_error, next_attempt_at, created_at, delivered_at \
             FROM webhook_deliveries WHERE tenant_id = $1 AND id = $2",
            &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(id)],
        )
        .await?;
    rows.first().map(|r| delivery_row(r)).transpose()
}

/// An endpoint's deliveries, newest first, optionally of one status, at most `limit`.
pub async fn deliveries(
    store: &SharedStore,
    tenant: TenantId,
    endpoint_id: Uuid,
    status: Option<DeliveryStatus>,
    limit: u32,
) -> Result<Vec<DeliveryRow>, StoreError> {
    let rows = match status {
        Some(status) => {
            store
                .query(
                    "SELECT id, tenant_id, endpoint_id, event_id, event_type, document_id, seq, body, status, \
                       attempts, replays, last_status_code, last_error, next_attempt_at, created_at, delivered_at \
                     FROM webhook_deliveries WHERE tenant_id = $1 AND endpoint_id = $2 AND status = $3 \
                     ORDER BY id DESC LIMIT $4",
                    &[
                        SqlValue::Uuid(tenant.as_uuid()),
                        SqlValue::Uuid(endpoint_id),
                        SqlValue::Text(status.as_str().to_owned()),
                        SqlValue::Int(i64::from(limit)),
                    ],
                )
                .await?
        }
        None => {
            store
                .query(
                    "SELECT id, tenant_id, endpoint_id, event_id, event_type, document_id, seq, body, status, \
                       attempts, replays, last_status_code, last_error, next_attempt_at, created_at, delivered_at \
                     FROM webhook_deliveries WHERE tenant_id = $1 AND endpoint_id = $2 \
                     ORDER BY id DESC LIMIT $3",
                    &[
                        SqlValue::Uuid(tenant.as_uuid()),
                        SqlValue::Uuid(endpoint_id),
                        SqlValue::Int(i64::from(limit)),
                    ],
                )
                .await?
        }
    };
    rows.iter().map(|r| delivery_row(r)).collect()
}

/// Whether an earlier event of the same document to the same endpoint is still on its way (then
/// this one waits: events of one document reach an endpoint in order).
pub async fn waits_for_earlier(store: &SharedStore, row: &DeliveryRow) -> Result<bool, StoreError> {
    let Some(document) = row.document_id else {
        return Ok(false);
    };
    let rows = store
        .query(
            "SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND document_id = $2 AND seq < $3 \
               AND status <> $4 AND status <> $5",
            &[
                SqlValue::Uuid(row.endpoint_id),
                SqlValue::Uuid(document),
                SqlValue::Int(row.seq),
                SqlValue::Text(DeliveryStatus::Delivered.as_str().to_owned()),
                SqlValue::Text(DeliveryStatus::Failed.as_str().to_owned()),
            ],
        )
        .await?;
    Ok(rows
        .first()
        .and_then(|r| r.first())
        .and_then(SqlValue::as_i64)
        .unwrap_or(0)
        > 0)
}

/// The outcome of an attempt, to record.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// The new status.
    pub status: DeliveryStatus,
    /// Attempts so far.
    pub attempts: u32,
    /// HTTP status, when the receiver answered.
    pub status_code: Option<u16>,
    /// What went wrong.
    pub error: Option<String>,
    /// The next attempt (retrying).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// When the attempt ended (or started, for `delivering`).
    pub at: DateTime<Utc>,
}

/// Records an attempt's start or outcome (only while `replays` is still the delivery's: a stale
/// job never overwrites a replay's progress).
pub async fn record_attempt(
    store: &SharedStore,
    id: Uuid,
    replays: u32,
    attempt: &Attempt,
) -> Result<(), StoreError> {
    let delivered_at = (attempt.status == DeliveryStatus::Delivered).then_some(attempt.at);
    store
        .execute(
            "UPDATE webhook_deliveries SET status = $3, attempts = $4, last_status_code = $5, last_error = $6, \
               next_attempt_at = $7, delivered_at = $8, updated_at = $9 WHERE id = $1 AND replays = $2",
            &[
                SqlValue::Uuid(id),
                SqlValue::Int(i64::from(replays)),
                SqlValue::Text(attempt.status.as_str().to_owned()),
                SqlValue::Int(i64::from(attempt.attempts)),
                attempt
                    .status_code
                    .map_or(SqlValue::TypedNull(crate::projection::SqlType::Int), |c| {
                        SqlValue::Int(i64::from(c))
                    }),
                attempt.error.clone().map_or(SqlValue::Null, SqlValue::Text),
                attempt.next_attempt_at.into(),
                delivered_at.into(),
                SqlValue::Timestamp(attempt.at),
            ],
        )
        .await?;
    Ok(())
}

/// One attempt of a delivery as recorded (migration 0030's trigger writes it with the outcome).
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRecord {
    /// The round: 0 for the first, then one more for each replay.
    pub replay: u32,
    /// The attempt's number within its round, from 1.
    pub attempt: u32,
    /// When it ended.
    pub at: DateTime<Utc>,
    /// What it left the delivery as: `delivered`, `retrying` or `failed`.
    pub status: DeliveryStatus,
    /// The receiver's HTTP status, when it answered.
    pub status_code: Option<u16>,
    /// What went wrong.
    pub error: Option<String>,
}

/// Every attempt of a delivery of the tenant, oldest first (empty for another tenant's).
pub async fn attempts(
    store: &SharedStore,
    tenant: TenantId,
    delivery_id: Uuid,
) -> Result<Vec<AttemptRecord>, StoreError> {
    let rows = store
        .query(
            "SELECT replay, attempt, at, status, status_code, error FROM webhook_delivery_attempts \
             WHERE tenant_id = $1 AND delivery_id = $2 ORDER BY replay, attempt",
            &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(delivery_id)],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(AttemptRecord {
                replay: r[0].as_i64().unwrap_or_default() as u32,
                attempt: r[1].as_i64().unwrap_or_default() as u32,
                at: r[2].as_timestamp().ok_or_else(|| corrupt("attempt time"))?,
                status: DeliveryStatus::parse(&r[3].as_text().unwrap_or_default())
                    .ok_or_else(|| corrupt("attempt status"))?,
                status_code: r[4].non_null().and_then(SqlValue::as_i64).map(|c| c as u16),
                error: r[5].non_null().and_then(SqlValue::as_text),
            })
        })
        .collect()
}

/// Puts a stored delivery back to `pending` with a fresh attempt count (same body, same event
/// id); returns its new replay number, for the job's key.
pub async fn requeue(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
    at: DateTime<Utc>,
) -> Result<Option<DeliveryRow>, StoreError> {
    store
        .execute(
            "UPDATE webhook_deliveries SET status = $3, attempts = 0, replays = replays + 1, last_error = NULL, \
               next_attempt_at = $4, updated_at = $4 WHERE tenant_id = $1 AND id = $2",
            &[
                SqlValue::Uuid(tenant.as_uuid()),
                SqlValue::Uuid(id),
                SqlValue::Text(DeliveryStatus::Pending.as_str().to_owned()),
                SqlValue::Timestamp(at),
            ],
        )
        .await?;
    delivery(store, tenant, id).await
}

/// Deliveries per status (for the metrics gauge).
pub async fn counts(store: &SharedStore) -> Result<Vec<(DeliveryStatus, i64)>, StoreError> {
    let rows = store
        .query(
            "SELECT status, count(*) FROM webhook_deliveries GROUP BY status",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            Some((
                DeliveryStatus::parse(&r[0].as_text()?)?,
                r[1].as_i64().unwrap_or(0),
            ))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_whsec_and_forty_base62_characters() {
        let a = generate_secret();
        assert!(a.starts_with("whsec_"));
        assert_eq!(a.len(), 46);
        assert!(a["whsec_".len()..].bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_ne!(*a, *generate_secret());
    }

    #[test]
    fn statuses_round_trip_and_two_are_settled() {
        for s in DeliveryStatus::ALL {
            assert_eq!(DeliveryStatus::parse(s.as_str()), Some(s));
        }
        let settled: Vec<_> = DeliveryStatus::ALL
            .into_iter()
            .filter(|s| s.is_settled())
            .collect();
        assert_eq!(settled, vec![DeliveryStatus::Delivered, DeliveryStatus::Failed]);
    }
}
