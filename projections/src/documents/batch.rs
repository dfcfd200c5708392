//! A batch's rows written together on PostgreSQL: the rows of documents' intake runs, and the
//! status, version, CDC, number and artifacts that later events leave.

use chrono::{DateTime, Utc};
use kuatia_application::event_store::{RecordedEvent, StoreError};
use kuatia_application::projection::{SqlTx, SqlValue, json_row_chunks, pg_timestamp};
use kuatia_domain::document::aggregate::DocumentEvent;
use serde_json::Value;
use std::collections::HashMap;
use uuid::Uuid;

use super::{IntakeRun, associated_cdc, buyer_ruc, buyer_search, corrupt, document_id, json};

/// The status and version of a batch's later document events, written together (PostgreSQL):
/// each document's row once, as its last event leaves it (with the CDC and number a
/// `DocumentTransformed` of the batch gave it), and the batch's artifacts.
#[derive(Default)]
pub(super) struct StepRows {
    /// Per document, in order of first appearance.
    documents: Vec<StepDocument>,
    /// Each document's place in `documents`.
    index: HashMap<Uuid, usize>,
    /// `document_artifacts` rows of the batch's `ArtifactRecorded`.
    artifacts: Vec<Value>,
}

/// What a batch's later events leave of one document's row.
struct StepDocument {
    id: Uuid,
    /// The status the batch left, if any event of it changes the status.
    status: Option<&'static str>,
    /// The last event's version and time.
    version: u64,
    at: DateTime<Utc>,
    /// The CDC, if the batch transformed the document.
    cdc: Option<String>,
    /// The number, if the batch transformed the document or started rendering it (autoimpresor).
    number: Option<String>,
}

impl StepRows {
    /// Takes one event. What it writes besides status and version (`apply_own`) joins
    /// the batch's statements too when it is a CDC, a number or an artifact; `false`: the caller
    /// writes that part itself.
    pub(super) fn push(&mut self, event: &RecordedEvent, decoded: &DocumentEvent, document_id: Uuid) -> bool {
        let entry = match self.index.get(&document_id) {
            Some(&i) => &mut self.documents[i],
            None => {
                self.index.insert(document_id, self.documents.len());
                self.documents.push(StepDocument {
                    id: document_id,
                    status: None,
                    version: event.stream_version,
                    at: event.recorded_at,
                    cdc: None,
                    number: None,
                });
                let last = self.documents.len() - 1;
                &mut self.documents[last]
            }
        };
        if let Some(status) = decoded.resulting_status() {
            entry.status = Some(status.as_str());
        }
        entry.version = event.stream_version;
        entry.at = event.recorded_at;
        match decoded {
            DocumentEvent::DocumentTransformed { number, cdc, .. } => {
                entry.cdc = Some(cdc.clone());
                entry.number = Some(number.to_string());
                true
            }
            DocumentEvent::DocumentRenderingStarted { number, .. } => {
                entry.number = Some(number.to_string());
                true
            }
            DocumentEvent::ArtifactRecorded {
                artifact_id,
                kind,
                content_type,
                sha256,
                size,
                version,
                ..
            } => {
                self.artifacts.push(serde_json::json!({
                    "id": artifact_id,
                    "tenant_id": event.tenant_id.as_uuid(),
                    "document_id": document_id,
                    "kind": kind.as_str(),
                    "version": version,
                    "content_type": content_type,
                    "sha256": sha256,
                    "size": i64::try_from(*size).unwrap_or(i64::MAX),
                    "created_at": pg_timestamp(event.recorded_at),
                }));
                true
            }
            _ => false,
        }
    }

    /// Hands the documents whose rows `intake` holds pending over to it (see
    /// [`IntakeRows::write`]); keeps the others.
    fn hand_over(&mut self, intake: &mut IntakeRows) {
        if intake.index.is_empty() {
            return;
        }
        self.index.clear();
        for document in std::mem::take(&mut self.documents) {
            if !intake.absorb(&document) {
                self.index.insert(document.id, self.documents.len());
                self.documents.push(document);
            }
        }
    }

    pub(super) async fn write(&mut self, tx: &mut dyn SqlTx) -> Result<(), StoreError> {
        self.index.clear();
        let rows: Vec<Value> = std::mem::take(&mut self.documents)
            .into_iter()
            .map(|d| {
                serde_json::json!({
                    "id": d.id,
                    "status": d.status,
                    "version": d.version,
                    "updated_at": pg_timestamp(d.at),
                    "cdc": d.cdc,
                    "number": d.number,
                })
            })
            .collect();
        for chunk in json_row_chunks(rows) {
            tx.execute(STEP_UPDATE, &[SqlValue::Json(chunk)]).await?;
        }
        for chunk in json_row_chunks(std::mem::take(&mut self.artifacts)) {
            tx.execute(
                "INSERT INTO document_artifacts (id, tenant_id, document_id, kind, version, content_type, sha256, \
                   size, created_at) \
                 SELECT id, tenant_id, document_id, kind, version, content_type, sha256, size, created_at \
                 FROM jsonb_to_recordset($1) AS r(id uuid, tenant_id uuid, document_id uuid, kind text, \
                   version bigint, content_type text, sha256 text, size bigint, created_at timestamptz) \
                 ON CONFLICT (id) DO NOTHING",
                &[SqlValue::Json(chunk)],
            )
            .await?;
        }
        Ok(())
    }
}

/// The documents' rows after a batch's later events (PostgreSQL; rows as a JSON array). The ids
/// are also given as an array the planner sees: joined only with `jsonb_to_recordset` (which it
/// estimates at 100 rows), it read the whole `documents` table for every batch, under the append
/// lock (1.3 ms a batch at a few thousand documents, and growing with the table).
pub const STEP_UPDATE: &str = "UPDATE documents AS d SET status = COALESCE(r.status, d.status), \
       version = r.version, updated_at = r.updated_at, cdc = COALESCE(r.cdc, d.cdc), \
       number = COALESCE(r.number, d.number) \
     FROM jsonb_to_recordset($1) AS r(id uuid, status text, version bigint, updated_at timestamptz, \
       cdc text, number text) \
     WHERE d.id = ANY (ARRAY(SELECT (e->>'id')::uuid FROM jsonb_array_elements($1) AS e)) \
       AND d.id = r.id AND d.version <= r.version";

/// Intake rows waiting to be written as JSON parameters.
#[derive(Default)]
pub(super) struct IntakeRows {
    documents: Vec<Value>,
    /// Each pending document's place in `documents`.
    index: HashMap<Uuid, usize>,
}

impl IntakeRows {
    /// The row `apply` leaves after the run's events.
    pub(super) fn push(&mut self, run: IntakeRun<'_>) -> Result<(), StoreError> {
        let (received, decoded) = &run.events[0];
        let DocumentEvent::DocumentReceived {
            routing, document, ..
        } = decoded
        else {
            return Err(corrupt("intake run"));
        };
        let document_id = document_id(received)?;
        self.index.insert(document_id, self.documents.len());
        let state = run.fold();
        let (status, last) = (state.status, state.last);
        let (errors, warnings) = (json(&state.errors)?, json(&state.warnings)?);
        self.documents.push(serde_json::json!({
            "id": document_id,
            "tenant_id": received.tenant_id.as_uuid(),
            "company_id": routing.company_id,
            "branch_id": routing.branch_id,
            "issuance_point_id": routing.issuance_point_id,
            "channel": routing.channel.as_str(),
            "channel_id": routing.channel_id,
            "doc_type": document.doc_type.as_str(),
            "external_id": document.external_id,
            "status": status.as_str(),
            "buyer_ruc": buyer_ruc(document),
            "issue_datetime": pg_timestamp(document.issue_datetime.with_timezone(&Utc)),
            "grand_total": document.totals.grand_total.to_string(),
            "associated_cdc": associated_cdc(document),
            "buyer_search": buyer_search(document),
            "cdc": null,
            "number": null,
            "errors": errors,
            "warnings": warnings,
            "stream_id": received.stream_id,
            "version": last.stream_version,
            "created_at": pg_timestamp(received.recorded_at),
            "updated_at": pg_timestamp(last.recorded_at),
        }));
        Ok(())
    }

    /// Whether the document's row is pending.
    pub(super) fn holds(&self, document_id: Uuid) -> bool {
        self.index.contains_key(&document_id)
    }

    /// Folds what later events of the batch leave into a pending row, as `STEP_UPDATE` would
    /// write it after the row's insert; `false` when the document's row is not pending.
    fn absorb(&mut self, step: &StepDocument) -> bool {
        let Some(&i) = self.index.get(&step.id) else {
            return false;
        };
        let row = &mut self.documents[i];
        if let Some(status) = step.status {
            row["status"] = Value::from(status);
        }
        row["version"] = Value::from(step.version);
        row["updated_at"] = Value::from(pg_timestamp(step.at));
        if let Some(cdc) = &step.cdc {
            row["cdc"] = Value::from(cdc.as_str());
        }
        if let Some(number) = &step.number {
            row["number"] = Value::from(number.as_str());
        }
        true
    }

    /// Writes what is pending (PostgreSQL), with what `steps` holds for these documents folded
    /// in: a document whose events are all in the batch is written once, as they leave it (its
    /// row inserted, then updated, paid every index twice: issue 30's profile of a rebuild).
    pub(super) async fn write(&mut self, tx: &mut dyn SqlTx, steps: &mut StepRows) -> Result<(), StoreError> {
        steps.hand_over(self);
        self.index.clear();
        for chunk in json_row_chunks(std::mem::take(&mut self.documents)) {
            tx.execute(
                "INSERT INTO documents (id, tenant_id, company_id, branch_id, issuance_point_id, channel, \
                   channel_id, doc_type, external_id, status, cdc, number, buyer_ruc, issue_datetime, grand_total, \
                   errors, warnings, state, stream_id, version, created_at, updated_at, associated_cdc, \
                   buyer_search) \
                 SELECT id, tenant_id, company_id, branch_id, issuance_point_id, channel, channel_id, doc_type, \
                   external_id, status, cdc, number, buyer_ruc, issue_datetime, grand_total, errors, warnings, \
                   '{}'::jsonb, stream_id, version, created_at, updated_at, associated_cdc, buyer_search \
                 FROM jsonb_to_recordset($1) AS r(id uuid, tenant_id uuid, company_id uuid, branch_id uuid, \
                   issuance_point_id uuid, channel text, channel_id uuid, doc_type text, external_id text, \
                   status text, buyer_ruc text, issue_datetime timestamptz, grand_total text, errors jsonb, \
                   warnings jsonb, stream_id text, version bigint, created_at timestamptz, \
                   updated_at timestamptz, associated_cdc text, buyer_search text, cdc text, number text) \
                 ON CONFLICT (id) DO NOTHING",
                &[SqlValue::Json(chunk)],
            )
            .await?;
        }
        Ok(())
    }
}
