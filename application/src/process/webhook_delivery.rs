//! The webhook delivery process manager (docs/webhooks.md): the jobs that POST the recorded
//! deliveries to the integrators' endpoints. It works through ports only ([`WebhookPorts`]): the
//! endpoints' read model ([`WebhookReads`]), the sender ([`WebhookSender`]), the destination
//! policy, the vault that holds the signing secrets, and the clock. The webhook use cases the API
//! calls (endpoints, the deliveries table, replays) are `crate::webhooks`.
//!
//! - The fan-out is not a job: the `webhook_fanout` subscription (in the projections) records
//!   the deliveries of each webhook-raising event in commit order and queues their jobs
//!   ([`LegacyFanout`] finishes the fan-out jobs of older versions).
//! - [`DeliverWebhook`] (`webhook.deliver`): one attempt of one delivery. It waits while an earlier
//!   event of the same document to the same endpoint is not delivered or failed (order per
//!   document and endpoint), checks the URL again (production: https and public addresses
//!   only), signs with every valid secret and POSTs with a 10 s timeout. A 2xx is `delivered`;
//!   anything else is retried at 1 min, 5 min, 30 min, 2 h, 6 h, 12 h, 24 h (scaled by
//!   `KUATIA_DELIVERY_RETRY_SCALE`), then `failed`.
//! - [`CertificateScan`] (`certificate.scan`): the `certificate.expiring` deliveries.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use kuatia_domain::certificate::CertificateRecord;
use kuatia_domain::tenancy::TenantId;
use kuatia_domain::webhook::{EndpointSettings, expiring_threshold, retry_delay};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

use super::ports::{Clock, Destinations};
use super::retry;
use crate::event_store::{SharedStore, StoreError};
use crate::jobs::{Backoff, Job, JobQueue, NewJob};
use crate::vault::Vault;
use crate::webhooks::{
    self as app, Attempt, CERTIFICATE_SCAN, DeliveryRow, DeliveryStatus, NewDelivery, WEBHOOK_DELIVER,
    WEBHOOK_FANOUT,
};
use crate::worker::{JobFailure, JobHandler};

/// A webhook endpoint as the deliveries need it (no secret: the ids of the sealed ones).
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// Id.
    pub id: Uuid,
    /// Its URL, events, company and whether it is active.
    pub settings: EndpointSettings,
    /// The current sealed signing secret.
    pub secret_id: Uuid,
    /// The previous sealed secret and until when it still signs (during a rotation).
    pub previous_secret: Option<(Uuid, DateTime<Utc>)>,
}

/// The webhook endpoints' read model, as the deliveries read it.
#[async_trait]
pub trait WebhookReads: Send + Sync {
    /// One endpoint of the tenant that is not deleted.
    async fn endpoint(&self, tenant: TenantId, id: Uuid) -> Result<Option<Endpoint>, StoreError>;
    /// The active endpoints that receive events of `company` (theirs and the tenant-wide ones),
    /// oldest first.
    async fn active_endpoints_for(
        &self,
        tenant: TenantId,
        company: Option<Uuid>,
    ) -> Result<Vec<Endpoint>, StoreError>;
    /// Every certificate of every tenant: (tenant, company, record), for the expiry scan.
    async fn certificates(&self) -> Result<Vec<(TenantId, Uuid, CertificateRecord)>, StoreError>;
}

/// One webhook request.
#[derive(Debug, Clone)]
pub struct WebhookRequest<'a> {
    /// Where (the URL as configured; the destination policy checked it).
    pub url: &'a str,
    /// The address to connect to, when the destination policy pinned one.
    pub pinned: Option<SocketAddr>,
    /// `X-Webhook-Id`.
    pub event_id: &'a str,
    /// `X-Webhook-Event`.
    pub event_type: &'a str,
    /// The raw JSON body.
    pub body: &'a str,
    /// Signing secrets, current first (two during a rotation).
    pub secrets: &'a [&'a [u8]],
    /// `t=` of the signature.
    pub timestamp: i64,
}

/// What the receiver answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookAnswer {
    /// The receiver's HTTP status.
    pub status: u16,
    /// How long it took.
    pub latency: Duration,
}

/// Sends webhooks: signs the body with every secret (`X-Webhook-Signature`) and POSTs it, once.
#[async_trait]
pub trait WebhookSender: Send + Sync {
    /// POSTs one signed webhook. `Err` is a transport failure (refused, timed out, cut), in
    /// words the tenant may read.
    async fn send(&self, request: &WebhookRequest<'_>) -> Result<WebhookAnswer, String>;
}

/// The ports the webhook delivery process manager works through.
#[derive(Clone)]
pub struct WebhookPorts {
    /// The event store (the deliveries table lives beside the events).
    pub store: SharedStore,
    /// The job queue (the scan queues deliveries).
    pub jobs: Arc<dyn JobQueue>,
    /// Sealed secrets: the endpoints' signing secrets.
    pub vault: Vault,
    /// The endpoints' read model.
    pub endpoints: Arc<dyn WebhookReads>,
    /// The sender.
    pub sender: Arc<dyn WebhookSender>,
    /// The destination policy endpoints are checked against before every attempt.
    pub destinations: Arc<dyn Destinations>,
    /// The time.
    pub clock: Arc<dyn Clock>,
}

/// What the handlers and the `test` endpoint share.
#[derive(Clone)]
pub struct WebhookDelivery {
    store: SharedStore,
    jobs: Arc<dyn JobQueue>,
    vault: Vault,
    endpoints: Arc<dyn WebhookReads>,
    sender: Arc<dyn WebhookSender>,
    destinations: Arc<dyn Destinations>,
    clock: Arc<dyn Clock>,
    retry_scale: f64,
}

impl std::fmt::Debug for WebhookDelivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookDelivery").finish_non_exhaustive()
    }
}

/// The outcome of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptOutcome {
    /// The receiver's status, when it answered.
    pub status_code: Option<u16>,
    /// What went wrong, when it did.
    pub error: Option<String>,
}

impl AttemptOutcome {
    /// Whether the receiver took it (a 2xx).
    pub fn ok(&self) -> bool {
        self.status_code.is_some_and(|c| (200..300).contains(&c))
    }
}

impl WebhookDelivery {
    /// Handlers over their ports, on the retry schedule as decided.
    pub fn new(ports: WebhookPorts) -> Self {
        Self {
            store: ports.store,
            jobs: ports.jobs,
            vault: ports.vault,
            endpoints: ports.endpoints,
            sender: ports.sender,
            destinations: ports.destinations,
            clock: ports.clock,
            retry_scale: 1.0,
        }
    }

    /// Multiplies the retry schedule (tests shrink it).
    pub fn with_retry_scale(mut self, scale: f64) -> Self {
        self.retry_scale = if scale.is_finite() && scale > 0.0 {
            scale
        } else {
            1.0
        };
        self
    }

    /// The job handlers: fan-out, delivery and the certificate scan.
    pub fn handlers(&self) -> Vec<Arc<dyn JobHandler>> {
        vec![
            Arc::new(LegacyFanout),
            Arc::new(DeliverWebhook(self.clone())),
            Arc::new(CertificateScan(self.clone())),
        ]
    }

    fn scaled(&self, delay: chrono::TimeDelta) -> Duration {
        Duration::from_secs_f64((delay.as_seconds_f64() * self.retry_scale).max(0.0))
    }

    /// One signed POST of a stored delivery to an endpoint (no bookkeeping), to where the
    /// destination policy lets the tenant send now.
    pub async fn send(&self, tenant: TenantId, endpoint: &Endpoint, row: &DeliveryRow) -> AttemptOutcome {
        let failed = |error: String| AttemptOutcome {
            status_code: None,
            error: Some(error),
        };
        let pinned = match self.destinations.check(tenant, &endpoint.settings.url).await {
            Ok(pinned) => pinned,
            Err(refusal) => return failed(refusal),
        };
        let now = self.clock.now();
        let mut secrets = Vec::new();
        match self.vault.get(tenant, endpoint.secret_id).await {
            Ok(s) => secrets.push(s),
            Err(e) => return failed(format!("the signing secret: {e}")),
        }
        if let Some((previous, until)) = endpoint.previous_secret
            && until > now
            && let Ok(s) = self.vault.get(tenant, previous).await
        {
            secrets.push(s);
        }
        let keys: Vec<&[u8]> = secrets.iter().map(|s| s.as_slice()).collect();
        let answer = self
            .sender
            .send(&WebhookRequest {
                url: &endpoint.settings.url,
                pinned,
                event_id: &row.event_id,
                event_type: &row.event_type,
                body: &row.body,
                secrets: &keys,
                timestamp: now.timestamp(),
            })
            .await;
        metrics::counter!("kuatia_webhook_attempts_total").increment(1);
        match answer {
            Ok(answer) => {
                metrics::histogram!("kuatia_webhook_delivery_seconds").record(answer.latency.as_secs_f64());
                let ok = (200..300).contains(&answer.status);
                AttemptOutcome {
                    status_code: Some(answer.status),
                    error: (!ok).then(|| format!("the receiver answered {}", answer.status)),
                }
            }
            Err(error) => failed(error),
        }
    }

    /// `POST /v1/webhooks/{id}/test`: records a `webhook.test` delivery and makes its one attempt
    /// now.
    pub async fn send_test(
        &self,
        tenant: TenantId,
        endpoint: &Endpoint,
    ) -> Result<(DeliveryRow, AttemptOutcome), JobFailure> {
        let now = self.clock.now();
        let id = app::webhook_event_id(Uuid::now_v7());
        let body = json!({
            "id": id,
            "type": "webhook.test",
            "created_at": now,
            "tenant_id": tenant,
            "company_id": endpoint.settings.company_id,
            "document_id": null,
            "external_id": null,
            "status": null,
            "channel": null,
            "cdc": null,
            "data": {"endpoint_id": endpoint.id},
        });
        let row = app::record_delivery(
            &self.store,
            &NewDelivery {
                tenant,
                endpoint_id: endpoint.id,
                event_id: id,
                event_type: "webhook.test".into(),
                document_id: None,
                seq: 0,
                body: body.to_string(),
                created_at: now,
            },
        )
        .await
        .map_err(retry)?;
        let sent = self.send(tenant, endpoint, &row).await;
        let status = if sent.ok() {
            DeliveryStatus::Delivered
        } else {
            DeliveryStatus::Failed
        };
        self.record(&row, status, 1, &sent, None).await?;
        count(status);
        let row = app::delivery(&self.store, tenant, row.id)
            .await
            .map_err(retry)?
            .unwrap_or(row);
        Ok((row, sent))
    }

    async fn record(
        &self,
        row: &DeliveryRow,
        status: DeliveryStatus,
        attempts: u32,
        sent: &AttemptOutcome,
        next: Option<DateTime<Utc>>,
    ) -> Result<(), JobFailure> {
        app::record_attempt(
            &self.store,
            row.id,
            row.replays,
            &Attempt {
                status,
                attempts,
                status_code: sent.status_code,
                error: sent.error.clone(),
                next_attempt_at: next,
                at: self.clock.now(),
            },
        )
        .await
        .map_err(retry)
    }
}

fn count(status: DeliveryStatus) {
    metrics::counter!("kuatia_webhook_deliveries_total", "outcome" => status.as_str()).increment(1);
}

/// `webhook.fanout`, as jobs of versions before the `webhook_fanout` subscription queued it: it
/// does nothing. Migration 0017 started the subscription before the first event such a job was
/// still pending for (and deleted those jobs), and an instance of an older version that still
/// queues one queues it for an event the subscription fans out anyway; this handler only lets such
/// a job finish instead of waiting forever for a worker.
#[derive(Debug)]
pub struct LegacyFanout;

#[async_trait]
impl JobHandler for LegacyFanout {
    fn kind(&self) -> &'static str {
        WEBHOOK_FANOUT
    }

    async fn run(&self, _job: &Job) -> Result<(), JobFailure> {
        Ok(())
    }
}

/// `webhook.deliver`: one attempt of one delivery.
#[derive(Debug)]
pub struct DeliverWebhook(WebhookDelivery);

#[async_trait]
impl JobHandler for DeliverWebhook {
    fn kind(&self) -> &'static str {
        WEBHOOK_DELIVER
    }

    fn backoff(&self) -> Backoff {
        Backoff {
            base: Duration::from_millis(200),
            ..Backoff::default()
        }
    }

    async fn run(&self, job: &Job) -> Result<(), JobFailure> {
        let w = &self.0;
        let tenant = job.tenant_id;
        let id: Uuid = job.payload["delivery_id"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| JobFailure::Permanent(format!("job {} has no delivery_id", job.id)))?;
        let replays = job.payload["replays"].as_u64().unwrap_or(0) as u32;
        let Some(row) = app::delivery(&w.store, tenant, id).await.map_err(retry)? else {
            return Err(JobFailure::Permanent(format!("no delivery {id}")));
        };
        if row.replays != replays || row.status.is_settled() {
            return Ok(());
        }
        let endpoint = w
            .endpoints
            .endpoint(tenant, row.endpoint_id)
            .await
            .map_err(retry)?
            .filter(|e| e.settings.active);
        let Some(endpoint) = endpoint else {
            let sent = AttemptOutcome {
                status_code: None,
                error: Some("the endpoint was deactivated or deleted".into()),
            };
            w.record(&row, DeliveryStatus::Failed, row.attempts, &sent, None)
                .await?;
            count(DeliveryStatus::Failed);
            return Ok(());
        };
        if app::waits_for_earlier(&w.store, &row).await.map_err(retry)? {
            // Order per document and endpoint: come back once the earlier one is through.
            return Err(JobFailure::RetryAfter(
                "an earlier event of this document is not delivered yet".into(),
                w.scaled(chrono::TimeDelta::seconds(10))
                    .clamp(Duration::from_millis(200), Duration::from_secs(10)),
            ));
        }
        let attempts = row.attempts + 1;
        let delivering = AttemptOutcome {
            status_code: row.last_status_code,
            error: row.last_error.clone(),
        };
        w.record(&row, DeliveryStatus::Delivering, attempts, &delivering, None)
            .await?;
        let sent = w.send(tenant, &endpoint, &row).await;
        if sent.ok() {
            w.record(&row, DeliveryStatus::Delivered, attempts, &sent, None)
                .await?;
            count(DeliveryStatus::Delivered);
            return Ok(());
        }
        match retry_delay(attempts) {
            Some(delay) => {
                let wait = w.scaled(delay);
                let next = w.clock.now() + chrono::TimeDelta::from_std(wait).unwrap_or_default();
                w.record(&row, DeliveryStatus::Retrying, attempts, &sent, Some(next))
                    .await?;
                count(DeliveryStatus::Retrying);
                Err(JobFailure::RetryAfter(
                    sent.error.unwrap_or_else(|| "delivery failed".into()),
                    wait,
                ))
            }
            None => {
                w.record(&row, DeliveryStatus::Failed, attempts, &sent, None)
                    .await?;
                count(DeliveryStatus::Failed);
                Ok(())
            }
        }
    }
}

/// The scan job of one period (its key names the period, so every instance's timer queues the
/// same job once).
pub fn certificate_scan_job(now: DateTime<Utc>, every: Duration) -> NewJob {
    let period = now.timestamp() / (every.as_secs().max(1) as i64);
    let mut job = NewJob::new(
        CERTIFICATE_SCAN,
        format!("{CERTIFICATE_SCAN}:{}:{period}", every.as_secs()),
        TenantId::from_uuid(Uuid::nil()),
        json!({}),
    );
    job.max_attempts = 20;
    job
}

/// `certificate.scan`: for every certificate 30, 7 or 1 days from its end, one
/// `certificate.expiring` delivery per subscribed endpoint of its tenant and company. The event
/// id names the certificate and the threshold, so each warning goes out once, however often the
/// scan runs.
#[derive(Debug)]
pub struct CertificateScan(WebhookDelivery);

#[async_trait]
impl JobHandler for CertificateScan {
    fn kind(&self) -> &'static str {
        CERTIFICATE_SCAN
    }

    async fn run(&self, _job: &Job) -> Result<(), JobFailure> {
        let w = &self.0;
        let now = w.clock.now();
        for (tenant, company, certificate) in w.endpoints.certificates().await.map_err(retry)? {
            let left = certificate.facts.not_after - now;
            let days_left = left.num_days() + i64::from(left.num_seconds() % 86_400 > 0);
            let Some(threshold) = expiring_threshold(days_left) else {
                continue;
            };
            let id = format!("evt_cert_{}_{threshold}", certificate.certificate_id.simple());
            let body = json!({
                "id": id,
                "type": "certificate.expiring",
                "created_at": now,
                "tenant_id": tenant,
                "company_id": company,
                "document_id": null,
                "external_id": null,
                "status": null,
                "channel": null,
                "cdc": null,
                "data": {
                    "certificate_id": certificate.certificate_id,
                    "label": certificate.label,
                    "subject": certificate.facts.subject,
                    "serial_number": certificate.facts.serial_number,
                    "not_after": certificate.facts.not_after,
                    "days_left": days_left,
                    "threshold_days": threshold,
                },
            })
            .to_string();
            let endpoints = w
                .endpoints
                .active_endpoints_for(tenant, Some(company))
                .await
                .map_err(retry)?;
            for endpoint in endpoints
                .iter()
                .filter(|e| e.settings.subscribes("certificate.expiring"))
            {
                let row = app::record_delivery(
                    &w.store,
                    &NewDelivery {
                        tenant,
                        endpoint_id: endpoint.id,
                        event_id: id.clone(),
                        event_type: "certificate.expiring".into(),
                        document_id: None,
                        seq: 0,
                        body: body.clone(),
                        created_at: now,
                    },
                )
                .await
                .map_err(retry)?;
                w.jobs.enqueue(&app::deliver_job(&row)).await.map_err(retry)?;
            }
        }
        Ok(())
    }
}
