//! Delivery of accepted documents to the customer and the issuer (contract §2.6, DECISIONS §7),
//! as jobs.
//!
//! - [`Plan`] (`delivery.plan`, queued by the document's outbox on acceptance): reads the
//!   document's `delivery` settings. `manual` records each delivery `pending` (the console
//!   delivers); `automatic` queues one [`Send`] job per target and channel.
//! - [`Send`] (`delivery.send`): one attempt through email (SMTP), WhatsApp (Cloud API) or
//!   Telegram (Bot API), attaching the newest `kude` or `printable_pdf` and the `signed_xml`.
//!   When the printable is not rendered yet it waits (`KUATIA_PRINTABLE_WAIT_SECS` after the
//!   acceptance), then sends what exists and says so. Every attempt is a `DeliveryRecorded`
//!   event on the document (its timeline): `pending` with the error and the next attempt's time
//!   while retrying (1 min, 5 min, 30 min, 2 h, 6 h, 12 h, 24 h, scaled by
//!   `KUATIA_DELIVERY_RETRY_SCALE`), `sent` with the provider's answer, and `failed` after the
//!   last retry, which raises the `document.delivery_failed` webhook.
//! - [`InvitationMail`] (`invitation.email`): emails an invitation's link to the invited address
//!   (`POST /v1/memberships` with `KUATIA_SMTP_URL` set), retried on the same schedule until the
//!   invitation expires.

use async_trait::async_trait;
use chrono::{TimeDelta, Utc};
use kuatia_application::aggregate::AggregateStore;
use kuatia_application::artifacts::{ArtifactStore, sha256_hex};
use kuatia_application::documents;
use kuatia_application::event_store::{EventMetadata, SharedStore};
use kuatia_application::jobs::{Backoff, Job, JobQueue, NewJob};
use kuatia_application::webhooks::{DELIVERY_PLAN, DELIVERY_SEND, INVITATION_EMAIL};
use kuatia_application::worker::{JobFailure, JobHandler};
use kuatia_domain::document::aggregate::{
    self as document, ArtifactKind, DeliveryStatus, DeliveryTarget, Document, DocumentCommand, DocumentState,
    DocumentStatus,
};
use kuatia_domain::document::canonical::{DeliveryChannel, DeliveryMode};
use kuatia_domain::tenancy::TenantId;
use kuatia_domain::webhook::retry_delay;
use kuatia_infrastructure::config::Config;
use kuatia_infrastructure::delivery::{Attachment, Mailer, Outgoing, Telegram, WhatsApp};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

const ACTOR: &str = "system:delivery";

fn retry(message: impl std::fmt::Display) -> JobFailure {
    JobFailure::Retry(message.to_string())
}

fn metadata() -> EventMetadata {
    EventMetadata {
        actor: Some(ACTOR.to_owned()),
        ..EventMetadata::default()
    }
}

/// The id of the delivery of one document to one target through one channel (stable, so a
/// repeated plan records nothing new).
pub fn delivery_id(document_id: Uuid, target: DeliveryTarget, channel: DeliveryChannel) -> Uuid {
    let hash = sha256_hex(format!("delivery:{document_id}:{target:?}:{channel:?}").as_bytes());
    Uuid::parse_str(&hash[..32]).unwrap_or_else(|_| Uuid::nil())
}

/// What the handlers share.
#[derive(Clone)]
pub struct Deliveries {
    store: SharedStore,
    jobs: Arc<dyn JobQueue>,
    artifacts: Arc<dyn ArtifactStore>,
    mailer: Option<Result<Mailer, String>>,
    whatsapp: Option<WhatsApp>,
    telegram: Option<Telegram>,
    retry_scale: f64,
    printable_wait: TimeDelta,
}

impl std::fmt::Debug for Deliveries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliveries").finish_non_exhaustive()
    }
}

impl Deliveries {
    /// The handlers with the configured mail server and messaging APIs.
    pub fn new(
        store: SharedStore,
        jobs: Arc<dyn JobQueue>,
        artifacts: Arc<dyn ArtifactStore>,
        config: &Config,
    ) -> Self {
        let mailer = config
            .smtp_url
            .as_ref()
            .filter(|u| !u.expose().is_empty())
            .map(|url| Mailer::from_url(url.expose(), &config.smtp_from));
        if let Some(Err(e)) = &mailer {
            tracing::warn!(error = %e, "the mail server setting is unusable; email deliveries will fail");
        }
        let whatsapp = match (&config.whatsapp_token, &config.whatsapp_phone_number_id) {
            (Some(token), Some(phone)) => {
                Some(WhatsApp::new(&config.whatsapp_base_url, token.expose(), phone))
            }
            _ => None,
        };
        let telegram = config
            .telegram_bot_token
            .as_ref()
            .map(|token| Telegram::new(&config.telegram_base_url, token.expose()));
        let scale = config.delivery_retry_scale;
        Self {
            store,
            jobs,
            artifacts,
            mailer,
            whatsapp,
            telegram,
            retry_scale: if scale.is_finite() && scale > 0.0 {
                scale
            } else {
                1.0
            },
            printable_wait: TimeDelta::seconds(config.printable_wait_secs.min(86_400) as i64),
        }
    }

    /// The job handlers: plan and send.
    pub fn handlers(&self) -> Vec<Arc<dyn JobHandler>> {
        vec![
            Arc::new(Plan(self.clone())),
            Arc::new(Send(self.clone())),
            Arc::new(InvitationMail(self.clone())),
        ]
    }

    async fn load(&self, tenant: TenantId, id: Uuid) -> Result<DocumentState, JobFailure> {
        let loaded = AggregateStore::<Document>::new(self.store.clone(), tenant)
            .load(&document::stream_id(tenant, id))
            .await
            .map_err(retry)?;
        loaded
            .aggregate()
            .state()
            .cloned()
            .ok_or_else(|| JobFailure::Permanent(format!("no document {id}")))
    }

    async fn record(
        &self,
        tenant: TenantId,
        document_id: Uuid,
        delivery: (Uuid, DeliveryTarget, DeliveryChannel),
        status: DeliveryStatus,
        attempt: u32,
        detail: String,
    ) -> Result<(), JobFailure> {
        let (delivery_id, target, channel) = delivery;
        // Other writers (the KuDE, the other channels' jobs) append to the document too: a lost
        // race is tried again at once, because the message went out already and sending it
        // again to record it would deliver it twice.
        let mut tries = 0;
        loop {
            let recorded = documents::command(
                &self.store,
                tenant,
                document_id,
                DocumentCommand::RecordDelivery {
                    delivery_id,
                    target,
                    channel,
                    status,
                    attempt,
                    detail: Some(detail.clone()),
                    at: Utc::now(),
                },
                metadata(),
            )
            .await;
            match recorded {
                Err(documents::DocumentsError::Conflict) if tries < 50 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(10 * tries)).await;
                }
                other => return other.map_err(retry),
            }
        }
    }

    fn scaled(&self, delay: TimeDelta) -> Duration {
        Duration::from_secs_f64((delay.as_seconds_f64() * self.retry_scale).max(0.0))
    }
}

/// `delivery.plan`.
#[derive(Debug)]
pub struct Plan(Deliveries);

/// `delivery.send`.
#[derive(Debug)]
pub struct Send(Deliveries);

fn document_id(job: &Job) -> Result<Uuid, JobFailure> {
    job.payload["document_id"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| JobFailure::Permanent(format!("job {} has no document_id", job.id)))
}

fn field<T: serde::de::DeserializeOwned>(job: &Job, key: &str) -> Result<T, JobFailure> {
    serde_json::from_value(job.payload[key].clone())
        .map_err(|e| JobFailure::Permanent(format!("job {}: {key}: {e}", job.id)))
}

fn name<T: serde::Serialize>(value: T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[async_trait]
impl JobHandler for Plan {
    fn kind(&self) -> &'static str {
        DELIVERY_PLAN
    }

    async fn run(&self, job: &Job) -> Result<(), JobFailure> {
        let d = &self.0;
        let tenant = job.tenant_id;
        let id = document_id(job)?;
        let state = d.load(tenant, id).await?;
        let Some(settings) = state.document.delivery.clone() else {
            return Ok(());
        };
        let mut planned: Vec<(DeliveryTarget, DeliveryChannel, bool)> = Vec::new();
        if let Some(customer) = &settings.customer {
            let channels = customer.channels.clone().unwrap_or_else(|| {
                customer
                    .email
                    .as_ref()
                    .map(|_| vec![DeliveryChannel::Email])
                    .unwrap_or_default()
            });
            for channel in channels {
                if channel != DeliveryChannel::Webhook {
                    planned.push((
                        DeliveryTarget::Customer,
                        channel,
                        customer.mode == DeliveryMode::Automatic,
                    ));
                }
            }
        }
        if let Some(issuer) = &settings.issuer {
            let automatic = issuer.mode == Some(DeliveryMode::Automatic);
            let channels = issuer.channels.clone().unwrap_or_else(|| {
                issuer
                    .emails
                    .as_ref()
                    .map(|_| vec![DeliveryChannel::Email])
                    .unwrap_or_default()
            });
            // The issuer's `webhook` channel is the webhook endpoints' business (DECISIONS §7).
            for channel in channels {
                if channel != DeliveryChannel::Webhook {
                    planned.push((DeliveryTarget::Issuer, channel, automatic));
                }
            }
        }
        for (target, channel, automatic) in planned {
            let delivery = delivery_id(id, target, channel);
            if !automatic {
                if !state.deliveries.contains_key(&delivery) {
                    d.record(
                        tenant,
                        id,
                        (delivery, target, channel),
                        DeliveryStatus::Pending,
                        0,
                        "manual: the issuer delivers from the console".into(),
                    )
                    .await?;
                }
                continue;
            }
            let mut send = NewJob::new(
                DELIVERY_SEND,
                format!("{DELIVERY_SEND}:{id}:{}:{}", name(target), name(channel)),
                tenant,
                json!({"document_id": id, "delivery_id": delivery, "target": target, "channel": channel}),
            );
            send.max_attempts = 1_000_000;
            d.jobs.enqueue(&send).await.map_err(retry)?;
        }
        Ok(())
    }
}

/// The newest artifact of a kind, with its bytes.
async fn artifact(
    d: &Deliveries,
    state: &DocumentState,
    kind: ArtifactKind,
    filename: String,
) -> Result<Option<Attachment>, JobFailure> {
    let Some(a) = state.latest_artifact(kind) else {
        return Ok(None);
    };
    let bytes = d
        .artifacts
        .get(&a.sha256)
        .await
        .map_err(retry)?
        .ok_or_else(|| retry(format!("the {kind} artifact {} is not in the store", a.sha256)))?;
    Ok(Some(Attachment {
        filename,
        content_type: a.content_type.clone(),
        bytes,
    }))
}

#[async_trait]
impl JobHandler for Send {
    fn kind(&self) -> &'static str {
        DELIVERY_SEND
    }

    fn backoff(&self) -> Backoff {
        Backoff {
            base: Duration::from_millis(500),
            ..Backoff::default()
        }
    }

    async fn run(&self, job: &Job) -> Result<(), JobFailure> {
        let d = &self.0;
        let tenant = job.tenant_id;
        let id = document_id(job)?;
        let delivery: Uuid = field(job, "delivery_id")?;
        let target: DeliveryTarget = field(job, "target")?;
        let channel: DeliveryChannel = field(job, "channel")?;
        let state = d.load(tenant, id).await?;
        let last = state.deliveries.get(&delivery);
        if last.is_some_and(|l| matches!(l.status, DeliveryStatus::Sent | DeliveryStatus::Failed)) {
            return Ok(());
        }
        let attempt = last.map_or(0, |l| l.attempt) + 1;
        let settings =
            state
                .document
                .delivery
                .clone()
                .unwrap_or(kuatia_domain::document::canonical::Delivery {
                    customer: None,
                    issuer: None,
                });
        let number = state
            .number
            .as_ref()
            .map_or_else(|| state.document.external_id.clone(), ToString::to_string);
        let stem = state.cdc.clone().unwrap_or_else(|| number.replace('-', ""));
        // The printable: wait for it a while after the acceptance, then send without it.
        let printable_kind = if state.routing.channel == kuatia_domain::channel::ChannelKind::Sifen {
            ArtifactKind::Kude
        } else {
            ArtifactKind::PrintablePdf
        };
        let printable = artifact(d, &state, printable_kind, format!("{stem}.pdf")).await?;
        let accepted_at = state.approved_at.unwrap_or(state.updated_at);
        let mut notes = Vec::new();
        if printable.is_none() {
            if Utc::now() < accepted_at + d.printable_wait && state.status == DocumentStatus::Accepted {
                return Err(JobFailure::RetryAfter(
                    format!("waiting for the {printable_kind} to be rendered"),
                    Duration::from_secs(2),
                ));
            }
            notes.push(format!(
                "sent without the {printable_kind}: it was not rendered in time"
            ));
        }
        let xml = artifact(d, &state, ArtifactKind::SignedXml, format!("{stem}.xml")).await?;
        let seller = state
            .document
            .seller
            .legal_name
            .clone()
            .unwrap_or_else(|| "el emisor".into());
        let message = Outgoing {
            subject: format!("Documento electrónico {number} de {seller}"),
            text: format!(
                "Adjuntamos el documento electrónico {number} emitido por {seller}{}.\n",
                state
                    .cdc
                    .as_ref()
                    .map(|c| format!(" (CDC {c})"))
                    .unwrap_or_default()
            ),
            attachments: printable.into_iter().chain(xml).collect(),
        };
        let outcome: Result<String, String> = match (target, channel) {
            (DeliveryTarget::Customer, DeliveryChannel::Email) => {
                let to: Vec<String> = settings
                    .customer
                    .as_ref()
                    .and_then(|c| c.email.clone())
                    .into_iter()
                    .collect();
                email(d, &to, &message).await
            }
            (DeliveryTarget::Issuer, DeliveryChannel::Email) => {
                let to = settings
                    .issuer
                    .as_ref()
                    .and_then(|i| i.emails.clone())
                    .unwrap_or_default();
                email(d, &to, &message).await
            }
            (DeliveryTarget::Customer, DeliveryChannel::Whatsapp) => {
                match (
                    &d.whatsapp,
                    settings.customer.as_ref().and_then(|c| c.phone.clone()),
                ) {
                    (None, _) => Err(
                        "WhatsApp is not configured (KUATIA_WHATSAPP_TOKEN, KUATIA_WHATSAPP_PHONE_NUMBER_ID)"
                            .into(),
                    ),
                    (_, None) => Err("the customer has no phone".into()),
                    (Some(w), Some(phone)) => w.send(&phone, &message).await,
                }
            }
            (DeliveryTarget::Customer, DeliveryChannel::Telegram) => {
                match (
                    &d.telegram,
                    settings
                        .customer
                        .as_ref()
                        .and_then(|c| c.telegram_chat_id.clone()),
                ) {
                    (None, _) => Err("Telegram is not configured (KUATIA_TELEGRAM_BOT_TOKEN)".into()),
                    (_, None) => Err("the customer has no telegram_chat_id".into()),
                    (Some(t), Some(chat)) => t.send(&chat, &message).await,
                }
            }
            (_, other) => Err(format!("the issuer has no address for {}", name(other))),
        };
        let key = (delivery, target, channel);
        match outcome {
            Ok(answer) => {
                notes.insert(0, answer);
                metrics::counter!("kuatia_document_deliveries_total", "channel" => name(channel), "outcome" => "sent")
                    .increment(1);
                d.record(tenant, id, key, DeliveryStatus::Sent, attempt, notes.join("; "))
                    .await
            }
            Err(error) => match retry_delay(attempt) {
                Some(delay) => {
                    let wait = d.scaled(delay);
                    let next = Utc::now() + TimeDelta::from_std(wait).unwrap_or_default();
                    d.record(
                        tenant,
                        id,
                        key,
                        DeliveryStatus::Pending,
                        attempt,
                        format!(
                            "attempt {attempt} failed: {error}; next attempt at {}",
                            next.to_rfc3339()
                        ),
                    )
                    .await?;
                    Err(JobFailure::RetryAfter(error, wait))
                }
                None => {
                    metrics::counter!("kuatia_document_deliveries_total", "channel" => name(channel), "outcome" => "failed")
                        .increment(1);
                    d.record(
                        tenant,
                        id,
                        key,
                        DeliveryStatus::Failed,
                        attempt,
                        format!("attempt {attempt} failed, the last: {error}"),
                    )
                    .await
                }
            },
        }
    }
}

async fn email(d: &Deliveries, to: &[String], message: &Outgoing) -> Result<String, String> {
    if to.is_empty() {
        return Err("no email address".into());
    }
    match &d.mailer {
        None => Err("email is not configured (KUATIA_SMTP_URL)".into()),
        Some(Err(e)) => Err(e.clone()),
        Some(Ok(mailer)) => mailer.send(to, message).await,
    }
}

/// The job that emails an invitation (its payload: `invitation_id`, `to`, `tenant_name`, `role`,
/// `accept_url`, `expires_at`).
struct InvitationMail(Deliveries);

/// Queues the email of an invitation: one job per invitation.
pub async fn queue_invitation_email(
    jobs: &dyn JobQueue,
    tenant: TenantId,
    invitation: &kuatia_application::identity::NewInvitation,
    tenant_name: &str,
    accept_url: &str,
) -> Result<(), kuatia_application::event_store::StoreError> {
    let mut job = NewJob::new(
        INVITATION_EMAIL,
        format!("{INVITATION_EMAIL}:{}", invitation.id),
        tenant,
        json!({
            "invitation_id": invitation.id,
            "to": invitation.email,
            "tenant_name": tenant_name,
            "role": invitation.role.as_str(),
            "accept_url": accept_url,
            "expires_at": invitation.expires_at,
        }),
    );
    job.max_attempts = 1_000;
    jobs.enqueue(&job).await.map(|_| ())
}

#[async_trait]
impl JobHandler for InvitationMail {
    fn kind(&self) -> &'static str {
        INVITATION_EMAIL
    }

    fn backoff(&self) -> Backoff {
        Backoff {
            base: Duration::from_millis(500),
            ..Backoff::default()
        }
    }

    async fn run(&self, job: &Job) -> Result<(), JobFailure> {
        let to: String = field(job, "to")?;
        let tenant_name: String = field(job, "tenant_name")?;
        let role: String = field(job, "role")?;
        let url: String = field(job, "accept_url")?;
        let expires_at: chrono::DateTime<Utc> = field(job, "expires_at")?;
        if Utc::now() >= expires_at {
            return Err(JobFailure::Permanent(
                "the invitation expired before it could be emailed".into(),
            ));
        }
        let message = Outgoing {
            subject: format!("Invitación a {tenant_name} en kuatia"),
            text: format!(
                "Te invitaron a {tenant_name} en kuatia con el rol {role}.\n\n\
                 Para aceptar, iniciá sesión con esta dirección ({to}) y abrí este enlace:\n{url}\n\n\
                 La invitación vence el {} (UTC). Si no la esperabas, ignorá este mensaje.\n",
                expires_at.format("%d/%m/%Y %H:%M")
            ),
            attachments: Vec::new(),
        };
        let attempt = job.attempts;
        match email(&self.0, std::slice::from_ref(&to), &message).await {
            Ok(_) => Ok(()),
            Err(e) => {
                let wait = self
                    .0
                    .scaled(retry_delay(attempt).unwrap_or(TimeDelta::hours(24)));
                Err(JobFailure::RetryAfter(
                    format!("emailing the invitation: {e}"),
                    wait,
                ))
            }
        }
    }
}
