//! Delivery of accepted documents to the customer and the issuer (docs/webhooks.md), as jobs.
//! It works through ports only ([`DeliveryPorts`]): the mail server ([`Mailer`]), WhatsApp and
//! Telegram ([`ChatSender`]), the artifact store and the clock.
//!
//! - [`PlanDeliveries`] (`delivery.plan`, queued by the document's outbox on acceptance): reads
//!   the document's `delivery` settings. `manual` records each delivery `pending` (the console
//!   delivers); `automatic` queues one [`DeliverDocument`] job per target and channel.
//! - [`DeliverDocument`] (`delivery.send`): one attempt through email (SMTP), WhatsApp (Cloud
//!   API) or Telegram (Bot API), attaching the newest `kude` or `printable_pdf` and the
//!   `signed_xml`.
//!   When the printable is not rendered yet it waits (`KUATIA_PRINTABLE_WAIT_SECS` after the
//!   acceptance), then sends what exists and says so. Every attempt is a `DeliveryRecorded`
//!   event on the document (its timeline): `pending` with the error and the next attempt's time
//!   while retrying (1 min, 5 min, 30 min, 2 h, 6 h, 12 h, 24 h, scaled by
//!   `KUATIA_DELIVERY_RETRY_SCALE`), `sent` with the provider's answer, and `failed` after the
//!   last retry, which raises the `document.delivery_failed` webhook.
//! - [`EmailInvitation`] (`invitation.email`): emails an invitation's link to the invited address
//!   (`POST /v1/memberships` with `KUATIA_SMTP_URL` set), retried on the same schedule until the
//!   invitation expires.

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use kuatia_domain::document::aggregate::{
    self as document, ArtifactKind, DeliveryStatus, DeliveryTarget, Document, DocumentCommand, DocumentState,
    DocumentStatus,
};
use kuatia_domain::document::canonical::{DeliveryChannel, DeliveryMode};
use kuatia_domain::tenancy::TenantId;
use kuatia_domain::webhook::retry_delay;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

use super::ports::Clock;
use super::{document_id, metadata, retry};
use crate::aggregate::AggregateStore;
use crate::artifacts::{ArtifactStore, sha256_hex};
use crate::documents;
use crate::event_store::{SharedStore, StoreError};
use crate::jobs::{Backoff, Job, JobQueue, NewJob};
use crate::webhooks::{DELIVERY_PLAN, DELIVERY_SEND, INVITATION_EMAIL};
use crate::worker::{JobFailure, JobHandler};

const ACTOR: &str = "system:delivery";

/// A file to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// File name shown to the recipient.
    pub filename: String,
    /// MIME type.
    pub content_type: String,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// What to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Subject (email) or caption (messaging).
    pub subject: String,
    /// Body text.
    pub text: String,
    /// Files.
    pub attachments: Vec<Attachment>,
}

/// Why a message was not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotSent {
    /// What went wrong, in the server's words where it gave some.
    pub reason: String,
    /// Sending again would be refused again: the recipient's mail server refused for good (an
    /// SMTP 5xx answer: no such mailbox, domain refused), an address that is not one, or a
    /// document that names no address for the channel. Such a delivery is `failed` at once;
    /// anything else (a server down, a 4xx answer, a service not configured yet) is retried on
    /// the schedule.
    pub permanent: bool,
}

impl NotSent {
    /// A failure that may pass: retried.
    pub fn transient(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            permanent: false,
        }
    }

    /// A refusal that sending again would meet again: not retried.
    pub fn permanent(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            permanent: true,
        }
    }
}

impl std::fmt::Display for NotSent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// A mail server.
#[async_trait]
pub trait Mailer: Send + Sync {
    /// Sends one message, with its attachments, to every address; the server's answer, or why it
    /// was not sent.
    async fn send(&self, to: &[String], message: &Message) -> Result<String, NotSent>;
}

/// A messaging service (WhatsApp, Telegram) that sends a message's files to one recipient.
#[async_trait]
pub trait ChatSender: Send + Sync {
    /// Sends the message's attachments, captioned with its subject, to `to` (a phone number, a
    /// chat id); the service's message ids, or why it was not sent.
    async fn send(&self, to: &str, message: &Message) -> Result<String, String>;
}

/// The ports the delivery process manager works through.
#[derive(Clone)]
pub struct DeliveryPorts {
    /// The event store (documents are loaded and their deliveries recorded through it).
    pub store: SharedStore,
    /// The job queue (a plan queues the sends).
    pub jobs: Arc<dyn JobQueue>,
    /// The documents' files (the printable and the signed XML are attached).
    pub artifacts: Arc<dyn ArtifactStore>,
    /// The mail server: `None` when none is configured, `Err` with why when its setting is
    /// unusable (every email attempt fails with that reason).
    pub mailer: Option<Result<Arc<dyn Mailer>, String>>,
    /// WhatsApp, when configured.
    pub whatsapp: Option<Arc<dyn ChatSender>>,
    /// Telegram, when configured.
    pub telegram: Option<Arc<dyn ChatSender>>,
    /// The time.
    pub clock: Arc<dyn Clock>,
}

/// The operator's delivery settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeliverySettings {
    /// Multiplies the retry schedule (`KUATIA_DELIVERY_RETRY_SCALE`; tests shrink it). Anything
    /// but a positive finite number counts as 1.
    pub retry_scale: f64,
    /// How long after the acceptance a delivery waits for the printable to be rendered
    /// (`KUATIA_PRINTABLE_WAIT_SECS`, at most a day).
    pub printable_wait_secs: u64,
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
    mailer: Option<Result<Arc<dyn Mailer>, String>>,
    whatsapp: Option<Arc<dyn ChatSender>>,
    telegram: Option<Arc<dyn ChatSender>>,
    clock: Arc<dyn Clock>,
    retry_scale: f64,
    printable_wait: TimeDelta,
}

impl std::fmt::Debug for Deliveries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliveries").finish_non_exhaustive()
    }
}

impl Deliveries {
    /// The handlers over their ports, with the operator's settings.
    pub fn new(ports: DeliveryPorts, settings: DeliverySettings) -> Self {
        let scale = settings.retry_scale;
        Self {
            store: ports.store,
            jobs: ports.jobs,
            artifacts: ports.artifacts,
            mailer: ports.mailer,
            whatsapp: ports.whatsapp,
            telegram: ports.telegram,
            clock: ports.clock,
            retry_scale: if scale.is_finite() && scale > 0.0 {
                scale
            } else {
                1.0
            },
            printable_wait: TimeDelta::seconds(settings.printable_wait_secs.min(86_400) as i64),
        }
    }

    /// The job handlers: plan, send, and the invitation email.
    pub fn handlers(&self) -> Vec<Arc<dyn JobHandler>> {
        vec![
            Arc::new(PlanDeliveries(self.clone())),
            Arc::new(DeliverDocument(self.clone())),
            Arc::new(EmailInvitation(self.clone())),
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
                    at: self.clock.now(),
                },
                metadata(ACTOR),
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

/// Why the service did not email a document for the issuer: nothing was sent, nothing recorded.
#[derive(Debug)]
pub enum EmailByHandError {
    /// No mail server is configured (`KUATIA_SMTP_URL`), or its setting is unusable: why.
    NotConfigured(String),
    /// The recipient is not one email address.
    NotAnAddress,
    /// The document's printable (the KuDE, or the autoimpresor PDF) is not rendered yet.
    NotRendered(ArtifactKind),
    /// The mail server did not take the message.
    NotSent(NotSent),
    /// What recording it would meet: no such document, not `accepted`, a note too long, the
    /// store failing.
    Document(documents::DocumentsError),
    /// The document's files could not be read.
    Files(String),
}

impl Deliveries {
    /// Emails an accepted document (its printable and signed XML, the message of the automatic
    /// delivery) to `request.recipient` through the configured mail server, now, and records it
    /// as a delivery by hand by email with the server's answer (`DeliveredByHand` with `sent`):
    /// what the console's "send by email" does. The aggregate decides first, so that the message
    /// goes out only when its record would be taken; a document whose printable is not rendered
    /// yet is refused rather than sent without it.
    pub async fn email_by_hand(
        &self,
        tenant: TenantId,
        request: documents::HandDeliveryRequest,
        metadata: crate::event_store::EventMetadata,
    ) -> Result<document::HandDelivery, EmailByHandError> {
        let mailer = match &self.mailer {
            None => {
                return Err(EmailByHandError::NotConfigured(
                    "no mail server is configured (KUATIA_SMTP_URL)".into(),
                ));
            }
            Some(Err(e)) => return Err(EmailByHandError::NotConfigured(e.clone())),
            Some(Ok(mailer)) => mailer.clone(),
        };
        let to = request
            .recipient
            .as_deref()
            .map(str::trim)
            .filter(|a| crate::identity::plausible_email(a))
            .ok_or(EmailByHandError::NotAnAddress)?
            .to_owned();
        let request = documents::HandDeliveryRequest {
            channel: document::HandChannel::Email,
            recipient: Some(to.clone()),
            ..request
        };
        let loaded = AggregateStore::<Document>::new(self.store.clone(), tenant)
            .load(&document::stream_id(tenant, request.document_id))
            .await
            .map_err(|e| EmailByHandError::Document(e.into()))?;
        let Some(state) = loaded.aggregate().state() else {
            return Err(EmailByHandError::Document(documents::DocumentsError::NotFound));
        };
        loaded
            .aggregate()
            .decide(DocumentCommand::DeliverByHand {
                target: request.target,
                channel: request.channel,
                recipient: request.recipient.clone(),
                note: request.note.clone(),
                sent: Some(String::new()),
                at: self.clock.now(),
            })
            .map_err(|e| EmailByHandError::Document(documents::DocumentsError::Refused(e)))?;
        let (message, missing) = document_message(self, state).await.map_err(|e| {
            EmailByHandError::Files(match e {
                JobFailure::Retry(m) | JobFailure::RetryAfter(m, _) | JobFailure::Permanent(m) => m,
            })
        })?;
        if let Some(kind) = missing {
            return Err(EmailByHandError::NotRendered(kind));
        }
        let answer = mailer
            .send(&[to], &message)
            .await
            .map_err(EmailByHandError::NotSent)?;
        metrics::counter!("kuatia_document_deliveries_total", "channel" => "email", "outcome" => "sent_by_hand")
            .increment(1);
        let request = documents::HandDeliveryRequest {
            sent: Some(answer),
            ..request
        };
        documents::deliver_by_hand(&self.store, self.clock.as_ref(), tenant, request, metadata)
            .await
            .map_err(EmailByHandError::Document)
    }
}

/// `delivery.plan`: the document's deliveries, recorded (manual) or queued (automatic).
#[derive(Debug)]
pub struct PlanDeliveries(Deliveries);

/// `delivery.send`: one attempt of one delivery of a document.
#[derive(Debug)]
pub struct DeliverDocument(Deliveries);

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
impl JobHandler for PlanDeliveries {
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
            // The issuer's `webhook` channel is the webhook endpoints' business.
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
impl JobHandler for DeliverDocument {
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
        let (message, missing) = document_message(d, &state).await?;
        let mut notes = Vec::new();
        // The printable: wait for it a while after the acceptance, then send without it.
        if let Some(printable_kind) = missing {
            let accepted_at = state.approved_at.unwrap_or(state.updated_at);
            if d.clock.now() < accepted_at + d.printable_wait && state.status == DocumentStatus::Accepted {
                return Err(JobFailure::RetryAfter(
                    format!("waiting for the {printable_kind} to be rendered"),
                    Duration::from_secs(2),
                ));
            }
            notes.push(format!(
                "sent without the {printable_kind}: it was not rendered in time"
            ));
        }
        let outcome: Result<String, NotSent> = match (target, channel) {
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
                    (None, _) => Err(NotSent::transient(
                        "WhatsApp is not configured (KUATIA_WHATSAPP_TOKEN, KUATIA_WHATSAPP_PHONE_NUMBER_ID)",
                    )),
                    (_, None) => Err(NotSent::permanent("the customer has no phone")),
                    (Some(w), Some(phone)) => w.send(&phone, &message).await.map_err(NotSent::transient),
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
                    (None, _) => Err(NotSent::transient(
                        "Telegram is not configured (KUATIA_TELEGRAM_BOT_TOKEN)",
                    )),
                    (_, None) => Err(NotSent::permanent("the customer has no telegram_chat_id")),
                    (Some(t), Some(chat)) => t.send(&chat, &message).await.map_err(NotSent::transient),
                }
            }
            (_, other) => Err(NotSent::permanent(format!(
                "the issuer has no address for {}",
                name(other)
            ))),
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
            Err(NotSent { reason, permanent }) => {
                let retry = retry_delay(attempt).filter(|_| !permanent);
                let Some(delay) = retry else {
                    metrics::counter!("kuatia_document_deliveries_total", "channel" => name(channel), "outcome" => "failed")
                        .increment(1);
                    let detail = if permanent {
                        format!("attempt {attempt} refused for good, not retried: {reason}")
                    } else {
                        format!("attempt {attempt} failed, the last: {reason}")
                    };
                    return d
                        .record(tenant, id, key, DeliveryStatus::Failed, attempt, detail)
                        .await;
                };
                let wait = d.scaled(delay);
                let next = d.clock.now() + TimeDelta::from_std(wait).unwrap_or_default();
                d.record(
                    tenant,
                    id,
                    key,
                    DeliveryStatus::Pending,
                    attempt,
                    format!(
                        "attempt {attempt} failed: {reason}; next attempt at {}",
                        next.to_rfc3339()
                    ),
                )
                .await?;
                Err(JobFailure::RetryAfter(reason, wait))
            }
        }
    }
}

/// The message that delivers a document, in Spanish: its printable (the KuDE, or the autoimpresor
/// PDF) and its signed XML attached, named by the CDC (else the number). The kind of printable is
/// given back when it is not rendered yet (the message then carries only the XML).
async fn document_message(
    d: &Deliveries,
    state: &DocumentState,
) -> Result<(Message, Option<ArtifactKind>), JobFailure> {
    let number = state
        .number
        .as_ref()
        .map_or_else(|| state.document.external_id.clone(), ToString::to_string);
    let stem = state.cdc.clone().unwrap_or_else(|| number.replace('-', ""));
    let printable_kind = if state.routing.channel == kuatia_domain::channel::ChannelKind::Sifen {
        ArtifactKind::Kude
    } else {
        ArtifactKind::PrintablePdf
    };
    let printable = artifact(d, state, printable_kind, format!("{stem}.pdf")).await?;
    let missing = printable.is_none().then_some(printable_kind);
    let xml = artifact(d, state, ArtifactKind::SignedXml, format!("{stem}.xml")).await?;
    let seller = state
        .document
        .seller
        .legal_name
        .clone()
        .unwrap_or_else(|| "el emisor".into());
    let message = Message {
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
    Ok((message, missing))
}

async fn email(d: &Deliveries, to: &[String], message: &Message) -> Result<String, NotSent> {
    if to.is_empty() {
        return Err(NotSent::permanent("no email address"));
    }
    match &d.mailer {
        None => Err(NotSent::transient("email is not configured (KUATIA_SMTP_URL)")),
        Some(Err(e)) => Err(NotSent::transient(e.clone())),
        Some(Ok(mailer)) => mailer.send(to, message).await,
    }
}

/// `invitation.email`: emails an invitation (its payload: `invitation_id`, `to`, `tenant_name`,
/// `role`, `accept_url`, `expires_at`).
#[derive(Debug)]
pub struct EmailInvitation(Deliveries);

/// Queues the email of an invitation: one job per invitation.
pub async fn queue_invitation_email(
    jobs: &dyn JobQueue,
    tenant: TenantId,
    invitation: &crate::identity::NewInvitation,
    tenant_name: &str,
    accept_url: &str,
) -> Result<(), StoreError> {
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
impl JobHandler for EmailInvitation {
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
        let expires_at: DateTime<Utc> = field(job, "expires_at")?;
        if self.0.clock.now() >= expires_at {
            return Err(JobFailure::Permanent(
                "the invitation expired before it could be emailed".into(),
            ));
        }
        let message = Message {
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
            Err(e) if e.permanent => Err(JobFailure::Permanent(format!(
                "emailing the invitation: refused for good: {e}"
            ))),
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
