//! `webhook_fanout` (side effect): the webhook fan-out as a subscription over the
//! event stream, in global order.
//!
//! For every webhook-raising document event (`kuatia_domain::webhook::webhook_event_type`) of a
//! tenant that has active endpoints, it records one delivery per active endpoint of the tenant,
//! or of the document's company, that subscribes to the event and existed when it happened, and
//! queues the delivery's job — in the batch's transaction, so the deliveries, their jobs and the
//! checkpoint move together: each event is fanned out once, in commit order, and a later event of
//! a document is never recorded before an earlier one. A tenant without endpoints costs one
//! indexed query per batch (its events are not even decoded), where a job per event cost a job
//! row, a claim and a completion.
//!
//! The body is built once and stored: the document's facts (company, external id, channel, CDC,
//! status) as its stream stood at the event, read from `events` up to the event's version. The
//! webhook event id is `evt_` and the causing store event's id, the same in every replay.
//!
//! Never rebuilt (it has side effects); it starts where migration 0017 put it (after the events
//! whose fan-out jobs had already run).

use async_trait::async_trait;
use chrono::Utc;
use kuatia_application::event_store::{ProjectionKind, RecordedEvent, StoreError};
use kuatia_application::projection::{Projection, SqlTx};
use kuatia_application::trace_context;
use kuatia_application::webhooks::{self as app, NewDelivery};
use kuatia_domain::document::aggregate::{DocumentEvent, DocumentStatus};
use kuatia_domain::tenancy::TenantId;
use kuatia_domain::webhook::webhook_event_type;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use uuid::Uuid;

use crate::webhooks::{EndpointRow, active_endpoints_in};

/// The subscription.
#[derive(Debug, Default, Clone, Copy)]
pub struct WebhookFanout;

impl WebhookFanout {
    /// Its stable name.
    pub const NAME: &'static str = "webhook_fanout";
}

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("webhook fan-out: {e}"))
}

fn decode(event_id: Uuid, payload: Value) -> Result<DocumentEvent, StoreError> {
    serde_json::from_value(payload).map_err(|e| corrupt(format!("event {event_id}: {e}")))
}

#[async_trait]
impl Projection for WebhookFanout {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn kind(&self) -> ProjectionKind {
        ProjectionKind::SideEffect
    }

    fn tables(&self) -> &'static [&'static str] {
        &[]
    }

    async fn apply(&self, tx: &mut dyn SqlTx, event: &RecordedEvent) -> Result<(), StoreError> {
        self.apply_all(tx, std::slice::from_ref(event)).await
    }

    async fn apply_all(&self, tx: &mut dyn SqlTx, events: &[RecordedEvent]) -> Result<(), StoreError> {
        // Each tenant's active endpoints, read once per batch.
        let mut endpoints: HashMap<TenantId, Vec<EndpointRow>> = HashMap::new();
        for event in events {
            if event.stream_type != "document" {
                continue;
            }
            let active = match endpoints.entry(event.tenant_id) {
                Entry::Occupied(known) => known.into_mut(),
                Entry::Vacant(new) => new.insert(active_endpoints_in(tx, event.tenant_id).await?),
            };
            if active.is_empty() {
                continue;
            }
            let decoded = decode(event.event_id, event.payload.clone())?;
            let Some(kind) = webhook_event_type(&decoded) else {
                continue;
            };
            let facts = Facts::at(tx, event).await?;
            let receivers: Vec<&EndpointRow> = active
                .iter()
                .filter(|e| {
                    (e.settings.company_id.is_none() || e.settings.company_id == facts.company_id)
                        && e.settings.subscribes(kind)
                        && e.created_at <= event.recorded_at
                })
                .collect();
            if receivers.is_empty() {
                continue;
            }
            let document_id = document_id(event)?;
            let id = app::webhook_event_id(event.event_id);
            // The event's own fields (the payload is `{"DocumentRejected": {...}}`).
            let data = event
                .payload
                .as_object()
                .and_then(|o| o.values().next().cloned())
                .unwrap_or(Value::Null);
            let mut body = json!({
                "id": id,
                "type": kind,
                "created_at": event.recorded_at,
                "tenant_id": event.tenant_id,
                "company_id": facts.company_id,
                "document_id": document_id,
                "external_id": facts.external_id,
                "status": facts.status.map(DocumentStatus::as_str),
                "channel": facts.channel,
                "cdc": facts.cdc,
                "data": data,
            });
            // `document.failed` says why, as the document's `errors` do.
            if let DocumentEvent::DocumentIssuanceRefused {
                code, message, field, ..
            } = &decoded
            {
                body["errors"] = json!([{
                    "field": field.as_deref().unwrap_or("autoimpresor"),
                    "code": code,
                    "message": message,
                }]);
            }
            let body = body.to_string();
            for endpoint in receivers {
                let row = app::record_delivery_in(
                    tx,
                    &NewDelivery {
                        tenant: event.tenant_id,
                        endpoint_id: endpoint.id,
                        event_id: id.clone(),
                        event_type: kind.to_owned(),
                        document_id: Some(document_id),
                        seq: event.stream_version as i64,
                        body: body.clone(),
                        created_at: Utc::now(),
                    },
                )
                .await?;
                // The same key is the same job: a replayed batch queues nothing new. It runs in
                // the trace of the span that wrote the event.
                let mut job = app::deliver_job(&row);
                trace_context::stamp_with(&mut job.payload, event.metadata.trace_parent.as_deref());
                tx.enqueue_job(&job).await?;
            }
        }
        Ok(())
    }
}

/// The document id of an event of a document stream (`document:<tenant>:<uuid>`).
fn document_id(event: &RecordedEvent) -> Result<Uuid, StoreError> {
    kuatia_domain::document::aggregate::document_of(&event.stream_id)
        .ok_or_else(|| corrupt(format!("stream id {}", event.stream_id)))
}

/// What a webhook body says about the document, as its stream stood at one event.
#[derive(Default)]
struct Facts {
    company_id: Option<Uuid>,
    external_id: Option<String>,
    channel: Option<&'static str>,
    cdc: Option<String>,
    status: Option<DocumentStatus>,
}

impl Facts {
    /// Folds the document's stream up to and including `event` (read in the transaction, upcast
    /// as every read path does).
    async fn at(tx: &mut dyn SqlTx, event: &RecordedEvent) -> Result<Self, StoreError> {
        let mut facts = Self::default();
        for recorded in tx
            .load_stream_upto(&event.stream_id, event.stream_version)
            .await?
        {
            let decoded = decode(recorded.event_id, recorded.payload)?;
            if let Some(status) = decoded.resulting_status() {
                facts.status = Some(status);
            }
            match decoded {
                DocumentEvent::DocumentReceived {
                    routing, document, ..
                } => {
                    facts.company_id = Some(routing.company_id);
                    facts.channel = Some(routing.channel.as_str());
                    facts.external_id = Some(document.external_id);
                }
                DocumentEvent::DocumentTransformed { cdc, .. } => facts.cdc = Some(cdc),
                _ => {}
            }
        }
        Ok(facts)
    }
}
