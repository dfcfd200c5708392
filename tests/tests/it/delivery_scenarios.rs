//! The webhook and the customer delivery process managers scenario by scenario, through their
//! ports: given a delivery recorded or a document that asks to be delivered, when a job runs,
//! then this attempt, this record and this retry. The store (the backend under test), the
//! vault, the endpoints' read model, the webhook sender and the SMTP mailer are the real ones,
//! talking to a real HTTP receiver and a real SMTP server on local ports; WhatsApp and Telegram
//! are fakes (their HTTP APIs have their end-to-end test in `webhooks`), every destination is
//! allowed (the policy has its own tests) and the clock is set by the scenario.

use crate::scenario_support::{Anywhere, Ground, SetClock, artifact_store, handler, running_job};
use crate::webhooks::{Inbox, free_port, start_receiver, start_smtp_refusing};
use async_trait::async_trait;
use chrono::{Duration as TimeDelta, Utc};
use kuatia_application::aggregate::AggregateStore;
use kuatia_application::documents::{self, Intake};
use kuatia_application::event_store::{EventMetadata, SharedStore};
use kuatia_application::jobs::{Job, JobFilter};
use kuatia_application::process::delivery::{
    ChatSender, Deliveries, DeliveryPorts, DeliverySettings, Mailer, Message, delivery_id,
};
use kuatia_application::process::ports::Clock;
use kuatia_application::process::webhook_delivery::{WebhookDelivery, WebhookPorts};
use kuatia_application::vault::Vault;
use kuatia_application::webhooks::{
    self as app, DELIVERY_PLAN, DELIVERY_SEND, DeliveryRow, DeliveryStatus as WebhookStatus, NewDelivery,
    WEBHOOK_DELIVER,
};
use kuatia_application::worker::{JobFailure, JobHandler};
use kuatia_domain::channel::ChannelKind;
use kuatia_domain::document::aggregate::{
    DeliveryState, DeliveryStatus, DeliveryTarget, Document, DocumentState, stream_id,
};
use kuatia_domain::document::canonical::{self, DeliveryChannel, sample_invoice};
use kuatia_domain::document::routing::Routing;
use kuatia_domain::tenancy::TenantId;
use kuatia_domain::webhook::{EndpointSettings, retry_delay};
use kuatia_infrastructure::delivery::SmtpMailer;
use kuatia_infrastructure::store::Database;
use kuatia_infrastructure::webhook_sender::{WebhookSender, signature_header};
use kuatia_tests::{ScratchDir, TestDb};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

/// WhatsApp or Telegram, faked: every message it was given, and its answer.
#[derive(Default)]
struct FakeChat {
    sent: Mutex<Vec<(String, Message)>>,
}

#[async_trait]
impl ChatSender for FakeChat {
    async fn send(&self, to: &str, message: &Message) -> Result<String, String> {
        let mut sent = self.sent.lock().unwrap();
        sent.push((to.to_owned(), message.clone()));
        Ok(format!("fake message {}", sent.len()))
    }
}

/// A scenario: the store, the vault, the clock and a tenant.
struct Scenario {
    _db: TestDb,
    artifacts: ScratchDir,
    database: Database,
    store: SharedStore,
    vault: Vault,
    tenant: TenantId,
    clock: Arc<SetClock>,
}

impl Scenario {
    async fn new() -> Self {
        let ground = Ground::new().await;
        Self {
            _db: ground.db,
            artifacts: ground.artifacts,
            vault: ground.vault,
            store: ground.store,
            database: ground.database,
            tenant: ground.tenant,
            clock: Arc::new(SetClock(Mutex::new(Utc::now()))),
        }
    }

    /// The webhook process manager over the real read model and sender.
    fn webhooks(&self) -> WebhookDelivery {
        WebhookDelivery::new(WebhookPorts {
            store: self.store.clone(),
            jobs: self.database.jobs(),
            vault: self.vault.clone(),
            endpoints: Arc::new(kuatia_projections::reads::Reads::new(self.store.clone())),
            sender: Arc::new(WebhookSender::default()),
            destinations: Arc::new(Anywhere),
            clock: self.clock.clone(),
        })
    }

    /// The delivery process manager with these adapters; the printable is not waited for.
    fn deliveries(
        &self,
        mailer: Option<Arc<dyn Mailer>>,
        whatsapp: Option<Arc<dyn ChatSender>>,
        telegram: Option<Arc<dyn ChatSender>>,
    ) -> Deliveries {
        Deliveries::new(
            DeliveryPorts {
                store: self.store.clone(),
                jobs: self.database.jobs(),
                artifacts: artifact_store(&self.artifacts),
                mailer: mailer.map(Ok),
                whatsapp,
                telegram,
                clock: self.clock.clone(),
            },
            DeliverySettings {
                retry_scale: 1.0,
                printable_wait_secs: 0,
            },
        )
    }

    fn job(&self, kind: &str, payload: Value) -> Job {
        running_job(self.tenant, kind, payload, self.clock.now())
    }

    /// Given: an endpoint for every event at `url`; its id and secret.
    async fn endpoint(&self, url: &str) -> (Uuid, String) {
        let (id, secret) = app::create_endpoint(
            &self.store,
            &self.vault,
            self.tenant,
            EndpointSettings {
                company_id: None,
                url: url.to_owned(),
                description: None,
                events: vec!["*".into()],
                active: true,
            },
            EventMetadata::default(),
        )
        .await
        .expect("an endpoint");
        (id, secret.to_string())
    }

    /// Given: the fan-out recorded a `document.accepted` delivery to the endpoint.
    async fn fanned_out(&self, endpoint: Uuid) -> DeliveryRow {
        let event_id = format!("evt_{}", Uuid::now_v7().simple());
        app::record_delivery(
            &self.store,
            &NewDelivery {
                tenant: self.tenant,
                endpoint_id: endpoint,
                event_id: event_id.clone(),
                event_type: "document.accepted".into(),
                document_id: None,
                seq: 0,
                body: json!({"id": event_id, "type": "document.accepted", "data": {"n": "é"}}).to_string(),
                created_at: self.clock.now(),
            },
        )
        .await
        .expect("a delivery")
    }

    async fn delivery(&self, row: &DeliveryRow) -> DeliveryRow {
        app::delivery(&self.store, self.tenant, row.id)
            .await
            .expect("read")
            .expect("the delivery")
    }

    /// Given: an invoice received that asks for `delivery`.
    async fn document(&self, delivery: Value) -> Uuid {
        let mut value = sample_invoice();
        value["issue_datetime"] = json!((self.clock.now() - TimeDelta::hours(1)).to_rfc3339());
        value["delivery"] = delivery;
        let document = canonical::from_value(value).expect("the sample invoice");
        let id = Uuid::now_v7();
        documents::receive(
            &self.store,
            self.tenant,
            Intake {
                document_id: id,
                routing: Routing {
                    company_id: Uuid::now_v7(),
                    branch_id: Uuid::now_v7(),
                    issuance_point_id: Uuid::now_v7(),
                    channel: ChannelKind::Sifen,
                    channel_id: Uuid::now_v7(),
                },
                document,
                errors: vec![],
                warnings: vec![],
            },
            EventMetadata::default(),
            self.clock.now(),
        )
        .await
        .expect("received");
        id
    }

    async fn state(&self, document: Uuid) -> DocumentState {
        AggregateStore::<Document>::new(self.store.clone(), self.tenant)
            .load(&stream_id(self.tenant, document))
            .await
            .expect("loaded")
            .aggregate()
            .state()
            .cloned()
            .expect("a document")
    }

    /// The last recorded attempt of the document's delivery to `target` through `channel`.
    async fn recorded(
        &self,
        document: Uuid,
        target: DeliveryTarget,
        channel: DeliveryChannel,
    ) -> Option<DeliveryState> {
        self.state(document)
            .await
            .deliveries
            .get(&delivery_id(document, target, channel))
            .cloned()
    }

    /// The `delivery.send` job of the document's delivery to the customer through `channel`.
    fn send_job(&self, document: Uuid, channel: DeliveryChannel) -> Job {
        self.job(
            DELIVERY_SEND,
            json!({
                "document_id": document,
                "delivery_id": delivery_id(document, DeliveryTarget::Customer, channel),
                "target": DeliveryTarget::Customer,
                "channel": channel,
            }),
        )
    }
}

fn scheduled(failure: JobFailure) -> (String, Duration) {
    match failure {
        JobFailure::RetryAfter(message, wait) => (message, wait),
        other => panic!("not a scheduled retry: {other:?}"),
    }
}

/// A receiver that answers 500 is tried again on the schedule (1 min, 5 min, 30 min, with the
/// clock advanced by each), then its 200 settles the delivery: delivered once, every attempt the
/// same event id and body, signed with the endpoint's secret at the attempt's time.
#[tokio::test]
async fn a_webhook_answered_500_is_retried_on_the_schedule_until_its_200() {
    let s = Scenario::new().await;
    let inbox = Inbox::default();
    let (port, _receiver) = start_receiver(inbox.clone(), 0).await;
    let (endpoint, secret) = s.endpoint(&format!("http://127.0.0.1:{port}/hook")).await;
    let row = s.fanned_out(endpoint).await;
    let deliver = handler(s.webhooks().handlers(), WEBHOOK_DELIVER);
    let job = s.job(WEBHOOK_DELIVER, json!({"delivery_id": row.id, "replays": 0}));

    inbox.answer(500);
    let mut signed_at = Vec::new();
    for attempt in 1..=3u32 {
        signed_at.push(s.clock.now().timestamp());
        let (message, wait) = scheduled(deliver.run(&job).await.expect_err("retried"));
        assert_eq!(message, "the receiver answered 500");
        let delay = retry_delay(attempt).expect("a retry");
        assert_eq!(wait, delay.to_std().expect("a duration"), "attempt {attempt}");
        let stored = s.delivery(&row).await;
        assert_eq!(stored.status, WebhookStatus::Retrying);
        assert_eq!(stored.attempts, attempt);
        assert_eq!(stored.last_status_code, Some(500));
        assert_eq!(
            stored.next_attempt_at.map(|t| t.timestamp_millis()),
            Some((s.clock.now() + delay).timestamp_millis()),
            "the next attempt is due after the schedule's delay"
        );
        s.clock.advance(delay);
    }

    inbox.answer(0);
    signed_at.push(s.clock.now().timestamp());
    deliver.run(&job).await.expect("delivered");
    let stored = s.delivery(&row).await;
    assert_eq!(stored.status, WebhookStatus::Delivered);
    assert_eq!(stored.attempts, 4);
    assert_eq!(stored.last_status_code, Some(200));
    assert_eq!(stored.last_error, None);

    // A job run again after the delivery (a lost lease) sends nothing.
    deliver.run(&job).await.expect("nothing to do");
    let got = inbox.all();
    assert_eq!(got.len(), 4, "three refused attempts and one delivery: {got:?}");
    for (received, at) in got.iter().zip(&signed_at) {
        assert_eq!(received.id, row.event_id);
        assert_eq!(received.event, "document.accepted");
        assert_eq!(received.body, row.body, "the stored body, byte for byte");
        assert_eq!(
            received.signature,
            signature_header(&[secret.as_bytes()], *at, row.body.as_bytes()),
            "signed with the secret at the attempt's time"
        );
        assert!(received.signature.starts_with(&format!("t={at},v1=")));
    }
}

/// An endpoint deactivated after the fan-out recorded its delivery: the delivery fails without an
/// attempt, saying why, and the receiver hears nothing.
#[tokio::test]
async fn a_delivery_to_an_endpoint_deactivated_after_the_fan_out_fails_unsent() {
    let s = Scenario::new().await;
    let inbox = Inbox::default();
    let (port, _receiver) = start_receiver(inbox.clone(), 0).await;
    let (endpoint, _secret) = s.endpoint(&format!("http://127.0.0.1:{port}/hook")).await;
    let row = s.fanned_out(endpoint).await;
    app::deactivate_endpoint(&s.store, s.tenant, endpoint, EventMetadata::default())
        .await
        .expect("deactivated");

    let deliver = handler(s.webhooks().handlers(), WEBHOOK_DELIVER);
    deliver
        .run(&s.job(WEBHOOK_DELIVER, json!({"delivery_id": row.id, "replays": 0})))
        .await
        .expect("settled");
    let stored = s.delivery(&row).await;
    assert_eq!(stored.status, WebhookStatus::Failed);
    assert_eq!(stored.attempts, 0, "no attempt was made");
    assert_eq!(
        stored.last_error.as_deref(),
        Some("the endpoint was deactivated or deleted")
    );
    assert!(inbox.all().is_empty(), "nothing was sent");
}

/// The endpoints' `test` sends through the same process manager: one signed attempt, recorded.
#[tokio::test]
async fn the_webhook_test_is_one_signed_attempt_recorded_as_its_outcome() {
    let s = Scenario::new().await;
    let inbox = Inbox::default();
    let (port, _receiver) = start_receiver(inbox.clone(), 0).await;
    let (endpoint, secret) = s.endpoint(&format!("http://127.0.0.1:{port}/hook")).await;
    let webhooks = s.webhooks();
    let read = kuatia_projections::webhooks::endpoint(&s.store, s.tenant, endpoint)
        .await
        .expect("read")
        .expect("the endpoint");
    inbox.answer(503);
    let (row, sent) = webhooks
        .send_test(s.tenant, &read.into())
        .await
        .expect("recorded");
    assert_eq!(row.status, WebhookStatus::Failed, "a test is never retried");
    assert_eq!(sent.status_code, Some(503));
    assert_eq!(sent.error.as_deref(), Some("the receiver answered 503"));
    let got = inbox.all();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].event, "webhook.test");
    assert_eq!(
        got[0].signature,
        signature_header(
            &[secret.as_bytes()],
            s.clock.now().timestamp(),
            got[0].body.as_bytes()
        )
    );
}

/// The `delivery.send` handler of a scenario whose mail goes to the SMTP server on `port`.
fn email_sender(s: &Scenario, port: u16) -> Arc<dyn JobHandler> {
    let mailer = SmtpMailer::from_url(&format!("smtp://127.0.0.1:{port}"), "kuatia <f@example.com>")
        .expect("a mailer");
    handler(
        s.deliveries(Some(Arc::new(mailer)), None, None).handlers(),
        DELIVERY_SEND,
    )
}

/// Email through a real SMTP server that refuses the recipient for good (550, no such user): the
/// refusal would meet every attempt, so the delivery is `failed` at the first, naming the
/// server's answer, and the job ends.
#[tokio::test]
async fn an_email_the_server_refuses_for_good_fails_at_once_and_is_not_retried() {
    let s = Scenario::new().await;
    let (refusing, mail) = start_smtp_refusing(Some("nadie@example.com")).await;
    let send = email_sender(&s, refusing);
    let doc = s
        .document(
            json!({"customer": {"mode": "automatic", "channels": ["email"], "email": "nadie@example.com"}}),
        )
        .await;
    let job = s.send_job(doc, DeliveryChannel::Email);
    send.run(&job).await.expect("settled: nothing to retry");
    let recorded = s
        .recorded(doc, DeliveryTarget::Customer, DeliveryChannel::Email)
        .await
        .expect("recorded");
    assert_eq!(recorded.status, DeliveryStatus::Failed, "{recorded:?}");
    assert_eq!(recorded.attempt, 1);
    let detail = recorded.detail.unwrap_or_default();
    assert!(
        detail.starts_with("attempt 1 refused for good, not retried: ") && detail.contains("550"),
        "{detail}"
    );
    // Settled: a job run again sends nothing more.
    send.run(&job).await.expect("nothing to do");
    assert!(mail.lock().unwrap().is_empty(), "no message was accepted");
}

/// Email through a mail server that is down: retried on the schedule, each attempt a `pending`
/// record naming the error and the next attempt's time, and the last one (the 8th) `failed`.
#[tokio::test]
async fn an_email_whose_server_is_down_is_retried_on_the_schedule_then_failed() {
    let s = Scenario::new().await;
    let down = free_port().await;
    let send = email_sender(&s, down);
    let doc = s
        .document(
            json!({"customer": {"mode": "automatic", "channels": ["email"], "email": "cliente@example.com"}}),
        )
        .await;
    let job = s.send_job(doc, DeliveryChannel::Email);
    for attempt in 1..=7u32 {
        let (error, wait) = scheduled(send.run(&job).await.expect_err("retried"));
        let delay = retry_delay(attempt).expect("a retry");
        assert_eq!(wait, delay.to_std().expect("a duration"));
        let recorded = s
            .recorded(doc, DeliveryTarget::Customer, DeliveryChannel::Email)
            .await
            .expect("recorded");
        assert_eq!(recorded.status, DeliveryStatus::Pending);
        assert_eq!(recorded.attempt, attempt);
        assert_eq!(
            recorded.detail,
            Some(format!(
                "attempt {attempt} failed: {error}; next attempt at {}",
                (s.clock.now() + delay).to_rfc3339()
            ))
        );
        s.clock.advance(delay);
    }
    send.run(&job).await.expect("the last attempt settles it");
    let recorded = s
        .recorded(doc, DeliveryTarget::Customer, DeliveryChannel::Email)
        .await
        .expect("recorded");
    assert_eq!(recorded.status, DeliveryStatus::Failed);
    assert_eq!(recorded.attempt, 8);
    assert!(
        recorded
            .detail
            .as_deref()
            .is_some_and(|d| d.starts_with("attempt 8 failed, the last: ")),
        "{recorded:?}"
    );
    // Settled: a job run again sends nothing more.
    send.run(&job).await.expect("nothing to do");
}

/// A message the server accepts is `sent` at once, with the server's answer, and says the
/// printable was not there to attach.
#[tokio::test]
async fn an_email_the_server_accepts_is_sent_with_its_answer() {
    let s = Scenario::new().await;
    let (port, mail) = start_smtp_refusing(None).await;
    let send = email_sender(&s, port);
    let doc = s
        .document(
            json!({"customer": {"mode": "automatic", "channels": ["email"], "email": "cliente@example.com"}}),
        )
        .await;
    send.run(&s.send_job(doc, DeliveryChannel::Email))
        .await
        .expect("sent");
    let recorded = s
        .recorded(doc, DeliveryTarget::Customer, DeliveryChannel::Email)
        .await
        .expect("recorded");
    assert_eq!(recorded.status, DeliveryStatus::Sent);
    assert_eq!(recorded.attempt, 1);
    assert_eq!(
        recorded.detail.as_deref(),
        Some("queued as sink-1; sent without the kude: it was not rendered in time")
    );
    assert_eq!(recorded.at, s.clock.now());
    let mail = mail.lock().unwrap();
    assert_eq!(mail.len(), 1);
    assert_eq!(mail[0].0, ["cliente@example.com"]);
}

/// The plan queues one send per automatic channel; WhatsApp gets the message for the customer's
/// phone, and Telegram, not configured, is retried saying so.
#[tokio::test]
async fn the_plan_queues_each_channel_and_an_unconfigured_one_is_retried_saying_so() {
    let s = Scenario::new().await;
    let whatsapp = Arc::new(FakeChat::default());
    let deliveries = s.deliveries(None, Some(whatsapp.clone()), None);
    let doc = s
        .document(json!({"customer": {
            "mode": "automatic",
            "channels": ["whatsapp", "telegram"],
            "phone": "+595 981 123456",
            "telegram_chat_id": "4242"
        }}))
        .await;
    handler(deliveries.handlers(), DELIVERY_PLAN)
        .run(&s.job(DELIVERY_PLAN, json!({"document_id": doc})))
        .await
        .expect("planned");
    let queued = s
        .database
        .jobs()
        .list(&JobFilter {
            status: None,
            kind: Some(DELIVERY_SEND.into()),
            document: Some(doc),
            limit: 10,
        })
        .await
        .expect("jobs");
    let mut keys: Vec<String> = queued.iter().map(|j| j.idempotency_key.clone()).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            format!("{DELIVERY_SEND}:{doc}:customer:telegram"),
            format!("{DELIVERY_SEND}:{doc}:customer:whatsapp"),
        ]
    );

    let send = handler(deliveries.handlers(), DELIVERY_SEND);
    send.run(&s.send_job(doc, DeliveryChannel::Whatsapp))
        .await
        .expect("sent");
    let sent = whatsapp.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, "+595 981 123456");
    assert!(
        sent[0].1.subject.starts_with("Documento electrónico "),
        "{:?}",
        sent[0].1
    );
    let recorded = s
        .recorded(doc, DeliveryTarget::Customer, DeliveryChannel::Whatsapp)
        .await
        .expect("recorded");
    assert_eq!(recorded.status, DeliveryStatus::Sent);
    assert!(recorded.detail.is_some_and(|d| d.starts_with("fake message 1")));

    let (error, _) = scheduled(
        send.run(&s.send_job(doc, DeliveryChannel::Telegram))
            .await
            .expect_err("retried"),
    );
    assert_eq!(error, "Telegram is not configured (KUATIA_TELEGRAM_BOT_TOKEN)");
    let recorded = s
        .recorded(doc, DeliveryTarget::Customer, DeliveryChannel::Telegram)
        .await
        .expect("recorded");
    assert_eq!(recorded.status, DeliveryStatus::Pending);
}
