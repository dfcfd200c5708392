//! `documents` (inline): the status and list read model (`documents`) and each document's
//! artifacts (`document_artifacts`), from the document streams, and the queries the document
//! endpoints run. A document's timeline is its stream itself ([`timeline`] reads the events), not
//! a copy of it.
//!
//! Inline, so that a read right after `POST /v1/documents` sees the document. Updates carry the
//! stream version and only apply forward, so a replayed event changes nothing.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use kuatia_application::event_store::{ProjectionKind, RecordedEvent, SharedStore, StoreError};
use kuatia_application::projection::{Backend, Projection, SqlTx, SqlValue, json_row_chunks, pg_timestamp};
use kuatia_domain::document::aggregate::{DocumentEvent, DocumentStatus};
use kuatia_domain::document::issues::Issue;
use kuatia_domain::tenancy::TenantId;
use serde_json::Value;
use uuid::Uuid;

/// The projection.
#[derive(Debug, Default, Clone, Copy)]
pub struct Documents;

impl Documents {
    /// Its stable name.
    pub const NAME: &'static str = "documents";
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("unreadable {what}"))
}

fn json<T: serde::Serialize>(value: &T) -> Result<Value, StoreError> {
    serde_json::to_value(value).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// The RUC number of a party's `NNNNNNNN-D` (the list filter matches with or without DV).
pub fn ruc_number(ruc: &str) -> String {
    ruc.trim().split('-').next().unwrap_or_default().trim().to_owned()
}

#[async_trait]
impl Projection for Documents {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn kind(&self) -> ProjectionKind {
        ProjectionKind::Inline
    }

    fn tables(&self) -> &'static [&'static str] {
        &["documents", "document_artifacts"]
    }

    async fn apply(&self, tx: &mut dyn SqlTx, event: &RecordedEvent) -> Result<(), StoreError> {
        if event.stream_type != "document" {
            return Ok(());
        }
        let decoded = decode(event)?;
        let document_id = document_id(event)?;
        let version = event.stream_version as i64;
        apply_own(tx, event, &decoded, document_id).await?;
        let status = decoded.resulting_status().map(|s| s.as_str().to_owned());
        tx.execute(
            "UPDATE documents SET status = COALESCE($2, status), version = $3, updated_at = $4 \
             WHERE id = $1 AND version <= $3",
            &[
                SqlValue::Uuid(document_id),
                status.map_or(SqlValue::Null, SqlValue::Text),
                SqlValue::Int(version),
                SqlValue::Timestamp(event.recorded_at),
            ],
        )
        .await?;
        Ok(())
    }

    /// On PostgreSQL, documents whose first events (received, then validated or
    /// validation_failed, then queued: what intake appends) are in `events` get their rows from
    /// one statement per
    /// [`MAX_JSON_PARAM_BYTES`](kuatia_application::projection::MAX_JSON_PARAM_BYTES) of rows for
    /// the whole batch, instead of four statements each; every later event of a document (the
    /// pipeline's steps) has its status, version, CDC and number, and artifact
    /// join two statements for the whole batch as well (what else an event writes, issues say,
    /// is written at once). The rows are those `apply` writes event by event (tests hold a
    /// rebuild equal to them).
    async fn apply_all(&self, tx: &mut dyn SqlTx, events: &[RecordedEvent]) -> Result<(), StoreError> {
        if tx.backend() != Backend::Postgres {
            return self.apply_each(tx, events).await;
        }
        let mut intake = IntakeRows::default();
        let mut steps = StepRows::default();
        let mut rest = events;
        while let Some(first) = rest.first() {
            match intake_run(rest)? {
                Some((run, len)) => {
                    intake.push(run)?;
                    rest = &rest[len..];
                }
                None => {
                    if first.stream_type == "document" {
                        intake.write(tx).await?;
                        let decoded = decode(first)?;
                        if matches!(decoded, DocumentEvent::DocumentReceived { .. }) {
                            // Not the start of an intake run: on its own, after what is pending.
                            steps.write(tx).await?;
                            self.apply(tx, first).await?;
                        } else {
                            let document_id = document_id(first)?;
                            if !steps.push(first, &decoded, document_id) {
                                apply_own(tx, first, &decoded, document_id).await?;
                            }
                        }
                    }
                    rest = &rest[1..];
                }
            }
        }
        intake.write(tx).await?;
        steps.write(tx).await
    }
}

/// What an event writes besides the document's status and version.
async fn apply_own(
    tx: &mut dyn SqlTx,
    event: &RecordedEvent,
    decoded: &DocumentEvent,
    document_id: Uuid,
) -> Result<(), StoreError> {
    let version = event.stream_version as i64;
    let tenant = SqlValue::Uuid(event.tenant_id.as_uuid());
    {
        match decoded {
            DocumentEvent::DocumentReceived {
                routing, document, ..
            } => {
                let buyer_ruc = buyer_ruc(document);
                tx.execute(
                    "INSERT INTO documents (id, tenant_id, company_id, branch_id, issuance_point_id, channel, \
                       channel_id, doc_type, external_id, status, cdc, number, buyer_ruc, issue_datetime, grand_total, \
                       errors, warnings, state, stream_id, version, created_at, updated_at, associated_cdc) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'received', NULL, NULL, $10, $11, $12, $13, $13, $14, \
                       $15, $16, $17, $17, $18) ON CONFLICT (id) DO NOTHING",
                    &[
                        SqlValue::Uuid(document_id),
                        tenant.clone(),
                        SqlValue::Uuid(routing.company_id),
                        SqlValue::Uuid(routing.branch_id),
                        SqlValue::Uuid(routing.issuance_point_id),
                        SqlValue::Text(routing.channel.as_str().to_owned()),
                        SqlValue::Uuid(routing.channel_id),
                        SqlValue::Text(document.doc_type.as_str().to_owned()),
                        SqlValue::Text(document.external_id.clone()),
                        buyer_ruc.map_or(SqlValue::Null, SqlValue::Text),
                        SqlValue::Timestamp(document.issue_datetime.with_timezone(&Utc)),
                        SqlValue::Text(document.totals.grand_total.to_string()),
                        SqlValue::Json(Value::Array(Vec::new())),
                        SqlValue::Json(serde_json::json!({})),
                        SqlValue::Text(event.stream_id.clone()),
                        SqlValue::Int(version),
                        SqlValue::Timestamp(event.recorded_at),
                        associated_cdc(document).map_or(SqlValue::Null, SqlValue::Text),
                    ],
                )
                .await?;
            }
            DocumentEvent::DocumentValidated { warnings, .. } => {
                set_issues(tx, document_id, &[], warnings).await?;
            }
            DocumentEvent::DocumentValidationFailed { errors, warnings, .. } => {
                set_issues(tx, document_id, errors, warnings).await?;
            }
            DocumentEvent::DocumentTransformed { number, cdc, .. } => {
                tx.execute(
                    "UPDATE documents SET cdc = $2, number = $3 WHERE id = $1",
                    &[
                        SqlValue::Uuid(document_id),
                        SqlValue::Text(cdc.clone()),
                        SqlValue::Text(number.to_string()),
                    ],
                )
                .await?;
            }
            DocumentEvent::DocumentIssuanceRefused {
                code, message, field, ..
            } => {
                // A queued document has no errors yet: the refusal is its one error.
                let path = field.as_deref().unwrap_or("autoimpresor");
                tx.execute(
                    "UPDATE documents SET errors = $2 WHERE id = $1",
                    &[
                        SqlValue::Uuid(document_id),
                        SqlValue::Json(json(&[Issue::new(path, code, message.clone())])?),
                    ],
                )
                .await?;
            }
            DocumentEvent::DocumentRenderingStarted { number, .. } => {
                tx.execute(
                    "UPDATE documents SET number = $2 WHERE id = $1",
                    &[SqlValue::Uuid(document_id), SqlValue::Text(number.to_string())],
                )
                .await?;
            }
            DocumentEvent::ArtifactRecorded {
                artifact_id,
                kind,
                content_type,
                sha256,
                size,
                version: artifact_version,
                ..
            } => {
                tx.execute(
                    "INSERT INTO document_artifacts (id, tenant_id, document_id, kind, version, content_type, sha256, \
                       size, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING",
                    &[
                        SqlValue::Uuid(*artifact_id),
                        tenant.clone(),
                        SqlValue::Uuid(document_id),
                        SqlValue::Text(kind.as_str().to_owned()),
                        SqlValue::Int(i64::from(*artifact_version)),
                        SqlValue::Text(content_type.clone()),
                        SqlValue::Text(sha256.clone()),
                        SqlValue::Int(i64::try_from(*size).unwrap_or(i64::MAX)),
                        SqlValue::Timestamp(event.recorded_at),
                    ],
                )
                .await?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// The status and version of a batch's later document events, written together (PostgreSQL):
/// each document's row once, as its last event leaves it (with the CDC and number a
/// `DocumentTransformed` of the batch gave it), and the batch's artifacts.
#[derive(Default)]
struct StepRows {
    /// Per document, in order of first appearance.
    documents: Vec<StepDocument>,
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
    /// CDC and number, if the batch transformed the document.
    numbered: Option<(String, String)>,
}

impl StepRows {
    /// Takes one event. What it writes besides status and version (`apply_own`) joins
    /// the batch's statements too when it is a CDC and number or an artifact; `false`: the caller
    /// writes that part itself.
    fn push(&mut self, event: &RecordedEvent, decoded: &DocumentEvent, document_id: Uuid) -> bool {
        let entry = match self.documents.iter().position(|d| d.id == document_id) {
            Some(i) => &mut self.documents[i],
            None => {
                self.documents.push(StepDocument {
                    id: document_id,
                    status: None,
                    version: event.stream_version,
                    at: event.recorded_at,
                    numbered: None,
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
                entry.numbered = Some((cdc.clone(), number.to_string()));
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

    async fn write(&mut self, tx: &mut dyn SqlTx) -> Result<(), StoreError> {
        let rows: Vec<Value> = std::mem::take(&mut self.documents)
            .into_iter()
            .map(|d| {
                let (cdc, number) = d.numbered.unzip();
                serde_json::json!({
                    "id": d.id,
                    "status": d.status,
                    "version": d.version,
                    "updated_at": pg_timestamp(d.at),
                    "cdc": cdc,
                    "number": number,
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

/// The intake events of a new document (version 1 on), decoded.
struct IntakeRun<'a> {
    events: Vec<(&'a RecordedEvent, DocumentEvent)>,
}

/// What a document's intake events leave: its issues, its status, the last event.
struct IntakeState<'a> {
    errors: Vec<Issue>,
    warnings: Vec<Issue>,
    status: DocumentStatus,
    last: &'a RecordedEvent,
}

impl<'a> IntakeRun<'a> {
    /// Folds the run as `apply` does event by event.
    fn fold(&self) -> IntakeState<'a> {
        let mut state = IntakeState {
            errors: Vec::new(),
            warnings: Vec::new(),
            status: DocumentStatus::Received,
            last: self.events[0].0,
        };
        for (event, decoded) in &self.events {
            match decoded {
                DocumentEvent::DocumentValidated { warnings, .. } => {
                    state.errors.clear();
                    state.warnings.clone_from(warnings);
                }
                DocumentEvent::DocumentValidationFailed { errors, warnings, .. } => {
                    state.errors.clone_from(errors);
                    state.warnings.clone_from(warnings);
                }
                _ => {}
            }
            state.status = decoded.resulting_status().unwrap_or(state.status);
            state.last = event;
        }
        state
    }
}

/// A run of intake events at the head of `events`: a `DocumentReceived` at version 1, then
/// adjacent events of the same stream, one version apart, that intake appends after it. `None`
/// when `events` does not start with one; the length of the run otherwise.
fn intake_run(events: &[RecordedEvent]) -> Result<Option<(IntakeRun<'_>, usize)>, StoreError> {
    let Some(first) = events.first() else {
        return Ok(None);
    };
    if first.stream_type != "document" || first.stream_version != 1 || first.event_type != "DocumentReceived"
    {
        return Ok(None);
    }
    let mut run = vec![(first, decode(first)?)];
    for event in &events[1..] {
        let previous = run[run.len() - 1].0;
        if event.stream_id != previous.stream_id
            || event.stream_version != previous.stream_version + 1
            || !matches!(
                event.event_type.as_str(),
                "DocumentValidated" | "DocumentValidationFailed" | "DocumentQueued"
            )
        {
            break;
        }
        run.push((event, decode(event)?));
    }
    let len = run.len();
    Ok(Some((IntakeRun { events: run }, len)))
}

fn decode(event: &RecordedEvent) -> Result<DocumentEvent, StoreError> {
    serde_json::from_value(event.payload.clone())
        .map_err(|e| StoreError::Corrupt(format!("document event {}: {e}", event.event_id)))
}

/// Intake rows waiting to be written as JSON parameters.
#[derive(Default)]
struct IntakeRows {
    documents: Vec<Value>,
}

impl IntakeRows {
    /// The row `apply` leaves after the run's events.
    fn push(&mut self, run: IntakeRun<'_>) -> Result<(), StoreError> {
        let (received, decoded) = &run.events[0];
        let DocumentEvent::DocumentReceived {
            routing, document, ..
        } = decoded
        else {
            return Err(corrupt("intake run"));
        };
        let document_id = document_id(received)?;
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
            "errors": errors,
            "warnings": warnings,
            "stream_id": received.stream_id,
            "version": last.stream_version,
            "created_at": pg_timestamp(received.recorded_at),
            "updated_at": pg_timestamp(last.recorded_at),
        }));
        Ok(())
    }

    /// Writes what is pending (PostgreSQL).
    async fn write(&mut self, tx: &mut dyn SqlTx) -> Result<(), StoreError> {
        for chunk in json_row_chunks(std::mem::take(&mut self.documents)) {
            tx.execute(
                "INSERT INTO documents (id, tenant_id, company_id, branch_id, issuance_point_id, channel, \
                   channel_id, doc_type, external_id, status, cdc, number, buyer_ruc, issue_datetime, grand_total, \
                   errors, warnings, state, stream_id, version, created_at, updated_at, associated_cdc) \
                 SELECT id, tenant_id, company_id, branch_id, issuance_point_id, channel, channel_id, doc_type, \
                   external_id, status, NULL, NULL, buyer_ruc, issue_datetime, grand_total, errors, warnings, \
                   '{}'::jsonb, stream_id, version, created_at, updated_at, associated_cdc \
                 FROM jsonb_to_recordset($1) AS r(id uuid, tenant_id uuid, company_id uuid, branch_id uuid, \
                   issuance_point_id uuid, channel text, channel_id uuid, doc_type text, external_id text, \
                   status text, buyer_ruc text, issue_datetime timestamptz, grand_total text, errors jsonb, \
                   warnings jsonb, stream_id text, version bigint, created_at timestamptz, \
                   updated_at timestamptz, associated_cdc text) \
                 ON CONFLICT (id) DO NOTHING",
                &[SqlValue::Json(chunk)],
            )
            .await?;
        }
        Ok(())
    }
}

/// The document id of an event of a document stream (`…:<uuid>`).
fn document_id(event: &RecordedEvent) -> Result<Uuid, StoreError> {
    event
        .stream_id
        .rsplit(':')
        .next()
        .and_then(|id| id.parse::<Uuid>().ok())
        .ok_or_else(|| corrupt("document stream id"))
}

async fn set_issues(
    tx: &mut dyn SqlTx,
    id: Uuid,
    errors: &[Issue],
    warnings: &[Issue],
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE documents SET errors = $2, warnings = $3 WHERE id = $1",
        &[
            SqlValue::Uuid(id),
            SqlValue::Json(json(&errors)?),
            SqlValue::Json(json(&warnings)?),
        ],
    )
    .await
    .map(|_| ())
}

/// The row intake left for document `id` (what `POST /v1/documents` answered), rebuilt from the
/// document's first events, which never change: the answer to a repeated request with the same
/// Idempotency-Key, whatever happened to the document since. `None` when there is no such
/// document.
pub async fn intake_row(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
) -> Result<Option<DocumentRow>, StoreError> {
    let events = store
        .load_stream(&kuatia_domain::document::aggregate::stream_id(tenant, id))
        .await?;
    let Some((run, _)) = intake_run(&events)? else {
        return Ok(None);
    };
    let (
        received,
        DocumentEvent::DocumentReceived {
            routing, document, ..
        },
    ) = &run.events[0]
    else {
        return Err(corrupt("intake run"));
    };
    let state = run.fold();
    let (status, last) = (state.status, state.last);
    let mut row = DocumentRow::after_intake(id, routing, document, state.errors, state.warnings);
    row.status = status.as_str().to_owned();
    row.version = last.stream_version as i64;
    row.created_at = received.recorded_at;
    row.updated_at = last.recorded_at;
    Ok(Some(row))
}

/// A document as the status and list endpoints show it.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentRow {
    /// Id.
    pub id: Uuid,
    /// Company.
    pub company_id: Uuid,
    /// Branch.
    pub branch_id: Uuid,
    /// Issuance point.
    pub issuance_point_id: Uuid,
    /// `sifen` or `autoimpresor`.
    pub channel: String,
    /// Document type.
    pub doc_type: String,
    /// The caller's id.
    pub external_id: String,
    /// Status.
    pub status: String,
    /// CDC (SIFEN, once transformed).
    pub cdc: Option<String>,
    /// `001-001-0000001`, once numbered.
    pub number: Option<String>,
    /// Buyer RUC number.
    pub buyer_ruc: Option<String>,
    /// Issue date-time (UTC).
    pub issue_datetime: DateTime<Utc>,
    /// Grand total, decimal text.
    pub grand_total: String,
    /// Blocking issues.
    pub errors: Vec<Issue>,
    /// Warnings.
    pub warnings: Vec<Issue>,
    /// Stream version.
    pub version: i64,
    /// Received.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

impl DocumentRow {
    /// The row intake leaves behind, without reading it back: what [`Documents`] writes for a
    /// `DocumentReceived` and the validation events after it. The caller sets `status`,
    /// `version`, `created_at` and `updated_at` from the append (here `received`, 1 and the
    /// issue time). `POST /v1/documents` answers with it; a test holds it equal to the stored row.
    pub fn after_intake(
        id: Uuid,
        routing: &kuatia_domain::document::routing::Routing,
        document: &kuatia_domain::document::canonical::CanonicalDocument,
        errors: Vec<Issue>,
        warnings: Vec<Issue>,
    ) -> Self {
        let at = document.issue_datetime.with_timezone(&Utc);
        Self {
            id,
            company_id: routing.company_id,
            branch_id: routing.branch_id,
            issuance_point_id: routing.issuance_point_id,
            channel: routing.channel.as_str().to_owned(),
            doc_type: document.doc_type.as_str().to_owned(),
            external_id: document.external_id.clone(),
            status: "received".to_owned(),
            cdc: None,
            number: None,
            buyer_ruc: buyer_ruc(document),
            issue_datetime: document.issue_datetime.with_timezone(&Utc),
            grand_total: document.totals.grand_total.to_string(),
            errors,
            warnings,
            version: 1,
            created_at: at,
            updated_at: at,
        }
    }
}

fn buyer_ruc(document: &kuatia_domain::document::canonical::CanonicalDocument) -> Option<String> {
    document
        .buyer
        .as_ref()
        .and_then(|b| b.ruc.as_deref())
        .map(ruc_number)
        .filter(|n| !n.is_empty())
}

fn issues(value: &SqlValue) -> Result<Vec<Issue>, StoreError> {
    match value {
        SqlValue::Json(v) => serde_json::from_value(v.clone()),
        SqlValue::Text(t) => serde_json::from_str(t),
        _ => return Err(corrupt("issues")),
    }
    .map_err(|e| StoreError::Corrupt(format!("issues: {e}")))
}

fn row(r: &[SqlValue]) -> Result<DocumentRow, StoreError> {
    let text = |i: usize, what: &str| r[i].as_text().ok_or_else(|| corrupt(what));
    let uuid = |i: usize, what: &str| r[i].as_uuid().ok_or_else(|| corrupt(what));
    Ok(DocumentRow {
        id: uuid(0, "id")?,
        company_id: uuid(1, "company")?,
        branch_id: uuid(2, "branch")?,
        issuance_point_id: uuid(3, "point")?,
        channel: text(4, "channel")?,
        doc_type: text(5, "type")?,
        external_id: text(6, "external id")?,
        status: text(7, "status")?,
        cdc: r[8].non_null().and_then(SqlValue::as_text),
        number: r[9].non_null().and_then(SqlValue::as_text),
        buyer_ruc: r[10].non_null().and_then(SqlValue::as_text),
        issue_datetime: r[11].as_timestamp().ok_or_else(|| corrupt("issue_datetime"))?,
        grand_total: text(12, "grand total")?,
        errors: issues(&r[13])?,
        warnings: issues(&r[14])?,
        version: r[15].as_i64().ok_or_else(|| corrupt("version"))?,
        created_at: r[16].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
        updated_at: r[17].as_timestamp().ok_or_else(|| corrupt("updated_at"))?,
    })
}

/// One document of the tenant.
pub async fn document(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
) -> Result<Option<DocumentRow>, StoreError> {
    let rows = store
        .query(
            "SELECT id, company_id, branch_id, issuance_point_id, channel, doc_type, external_id, status, cdc, \
               number, buyer_ruc, issue_datetime, grand_total, errors, warnings, version, created_at, updated_at \
             FROM documents WHERE tenant_id = $1 AND id = $2",
            &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(id)],
        )
        .await?;
    rows.first().map(|r| row(r)).transpose()
}

/// The CDC a document refers to (`associated_document.cdc`), when it names one.
fn associated_cdc(document: &kuatia_domain::document::canonical::CanonicalDocument) -> Option<String> {
    document
        .associated_document
        .as_ref()
        .and_then(|a| a.cdc.as_deref())
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty())
}

/// The grand totals of the tenant's live credit notes that refer to the document with `cdc`
/// (SIFEN rule 2417 adds them up): every one but those that ended `validation_failed`,
/// `rejected`, `failed_terminal`, `cancelled` or `invalidated`.
pub async fn credit_notes_of(
    store: &SharedStore,
    tenant: TenantId,
    cdc: &str,
) -> Result<Vec<String>, StoreError> {
    let rows = store
        .query(
            "SELECT grand_total FROM documents WHERE tenant_id = $1 AND associated_cdc = $2 \
               AND doc_type = 'credit_note' \
               AND status NOT IN ('validation_failed', 'rejected', 'failed_terminal', 'cancelled', 'invalidated')",
            &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Text(cdc.to_owned())],
        )
        .await?;
    Ok(rows.iter().filter_map(|r| r[0].as_text()).collect())
}

/// Documents per status over every tenant, for the `kuatia_documents` gauge (read when
/// `/metrics` is scraped, so every instance reports the whole pipeline).
pub async fn count_by_status(store: &SharedStore) -> Result<Vec<(String, i64)>, StoreError> {
    let rows = store
        .query("SELECT status, count(*) FROM documents GROUP BY status", &[])
        .await?;
    Ok(rows
        .iter()
        .filter_map(|r| Some((r[0].as_text()?, r[1].as_i64().unwrap_or(0))))
        .collect())
}

/// The list filters; `None` means "any".
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Company.
    pub company_id: Option<Uuid>,
    /// Status.
    pub status: Option<String>,
    /// Channel.
    pub channel: Option<String>,
    /// External id.
    pub external_id: Option<String>,
    /// CDC.
    pub cdc: Option<String>,
    /// Buyer RUC number (without DV).
    pub buyer_ruc: Option<String>,
    /// issue_datetime ≥.
    pub date_from: Option<DateTime<Utc>>,
    /// issue_datetime <.
    pub date_to: Option<DateTime<Utc>>,
    /// Only ids below this one (the cursor).
    pub before: Option<Uuid>,
}

/// A page of documents, newest first (ids are UUIDv7, so id order is creation order and a cursor
/// on the id never skips or repeats).
pub async fn list(
    store: &SharedStore,
    tenant: TenantId,
    filter: &Filter,
    limit: u32,
) -> Result<Vec<DocumentRow>, StoreError> {
    // One statement for every combination: a NULL parameter switches its condition off.
    let rows = store
        .query(
            "SELECT id, company_id, branch_id, issuance_point_id, channel, doc_type, external_id, status, cdc, \
               number, buyer_ruc, issue_datetime, grand_total, errors, warnings, version, created_at, updated_at \
             FROM documents WHERE tenant_id = $1 \
               AND ($2 IS NULL OR company_id = $2) AND ($3 IS NULL OR status = $3) \
               AND ($4 IS NULL OR channel = $4) AND ($5 IS NULL OR external_id = $5) \
               AND ($6 IS NULL OR cdc = $6) AND ($7 IS NULL OR buyer_ruc = $7) \
               AND ($8 IS NULL OR issue_datetime >= $8) AND ($9 IS NULL OR issue_datetime < $9) \
               AND ($10 IS NULL OR id < $10) \
             ORDER BY id DESC LIMIT $11",
            &[
                SqlValue::Uuid(tenant.as_uuid()),
                filter.company_id.into(),
                opt_text(&filter.status),
                opt_text(&filter.channel),
                opt_text(&filter.external_id),
                opt_text(&filter.cdc),
                opt_text(&filter.buyer_ruc),
                opt_time(filter.date_from),
                opt_time(filter.date_to),
                filter.before.into(),
                SqlValue::Int(i64::from(limit)),
            ],
        )
        .await?;
    rows.iter().map(|r| row(r)).collect()
}

fn opt_text(value: &Option<String>) -> SqlValue {
    value.clone().map_or(SqlValue::Null, SqlValue::Text)
}

fn opt_time(value: Option<DateTime<Utc>>) -> SqlValue {
    value.map_or(
        SqlValue::TypedNull(kuatia_application::projection::SqlType::Timestamp),
        SqlValue::Timestamp,
    )
}

/// One timeline entry.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineEntry {
    /// Global position.
    pub position: i64,
    /// Stream version.
    pub version: i64,
    /// Event type.
    pub event_type: String,
    /// Status after the event.
    pub status: String,
    /// Recorded at.
    pub at: DateTime<Utc>,
    /// Who.
    pub actor: Option<String>,
    /// The event's data.
    pub data: Value,
    /// The previous event's hash in the stream (`None` for the first).
    pub prev_hash: Option<String>,
    /// The event's chain hash.
    pub hash: String,
}

/// A document's timeline, oldest first: the events of its stream (upcast, as every read path
/// sees them), each with the status the document had after it. Empty for a document the tenant
/// does not have (the stream id names the tenant).
pub async fn timeline(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
) -> Result<Vec<TimelineEntry>, StoreError> {
    let events = store
        .load_stream(&kuatia_domain::document::aggregate::stream_id(tenant, id))
        .await?;
    let mut status = DocumentStatus::Received;
    events
        .into_iter()
        .map(|event| {
            status = decode(&event)?.resulting_status().unwrap_or(status);
            Ok(TimelineEntry {
                position: event.global_position,
                version: event.stream_version as i64,
                event_type: event.event_type,
                status: status.as_str().to_owned(),
                at: event.recorded_at,
                actor: event.metadata.actor,
                data: event.payload,
                prev_hash: event.prev_hash,
                hash: event.hash,
            })
        })
        .collect()
}

/// An artifact row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactRow {
    /// Id.
    pub id: Uuid,
    /// Kind.
    pub kind: String,
    /// Version per kind.
    pub version: i64,
    /// MIME type.
    pub content_type: String,
    /// SHA-256.
    pub sha256: String,
    /// Bytes.
    pub size: i64,
    /// Recorded.
    pub created_at: DateTime<Utc>,
}

/// A document's artifacts, by kind and version.
pub async fn artifacts(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
) -> Result<Vec<ArtifactRow>, StoreError> {
    let rows = store
        .query(
            "SELECT id, kind, version, content_type, sha256, size, created_at FROM document_artifacts \
             WHERE tenant_id = $1 AND document_id = $2 ORDER BY kind, version",
            &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(id)],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(ArtifactRow {
                id: r[0].as_uuid().ok_or_else(|| corrupt("artifact id"))?,
                kind: r[1].as_text().ok_or_else(|| corrupt("kind"))?,
                version: r[2].as_i64().ok_or_else(|| corrupt("version"))?,
                content_type: r[3].as_text().ok_or_else(|| corrupt("content type"))?,
                sha256: r[4].as_text().ok_or_else(|| corrupt("sha256"))?,
                size: r[5].as_i64().ok_or_else(|| corrupt("size"))?,
                created_at: r[6].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
            })
        })
        .collect()
}
