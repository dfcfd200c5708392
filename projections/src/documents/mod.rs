//! `documents` (inline): the status and list read model (`documents`) and each document's
//! artifacts (`document_artifacts`), from the document streams, and the queries the document
//! endpoints run. A document's timeline is its stream itself ([`timeline`] reads the events), not
//! a copy of it. `document_counts` (documents per tenant, Paraguay day, company and status, what
//! [`status_counts`] sums) is kept by triggers on `documents` (migration 0028), so that every way
//! a row is written counts alike; so is `document_names` (migration 0029), the buyers' names
//! indexed by trigrams for the list's search.
//!
//! Inline, so that a read right after `POST /v1/documents` sees the document. Updates carry the
//! stream version and only apply forward, so a replayed event changes nothing.
//!
//! Here: the projection, how it applies events, and what its parts share (the intake run, the
//! fields a document gives its row). Beside: `write.rs` (what an event writes, event by event),
//! `batch.rs` (a batch's rows written together on PostgreSQL), `queries.rs` (the rows and queries
//! the endpoints read).

use async_trait::async_trait;
use kuatia_application::event_store::{ProjectionKind, RecordedEvent, StoreError};
use kuatia_application::projection::{Backend, Projection, SqlTx, SqlValue};
use kuatia_domain::document::aggregate::{DocumentEvent, DocumentStatus};
use kuatia_domain::document::issues::Issue;
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

mod batch;
mod queries;
mod write;

pub use batch::STEP_UPDATE;
use batch::{IntakeRows, StepRows};
pub use queries::{
    ArtifactRow, DocumentRow, Filter, TimelineEntry, artifacts, count_by_status, credit_notes_of, document,
    intake_row, list, status_counts, timeline,
};
use write::{apply_own, changes_row};

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
        &[
            "documents",
            "document_artifacts",
            "document_manual_deliveries",
            "document_public_links",
            // Kept by triggers on `documents` (migrations 0028, 0029); emptied with it by a
            // rebuild.
            "document_counts",
            "document_names",
        ]
    }

    fn stream_types(&self) -> Option<&'static [&'static str]> {
        Some(&["document"])
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
                        let decoded = decode(first)?;
                        if matches!(decoded, DocumentEvent::DocumentReceived { .. }) {
                            // Not the start of an intake run: on its own, after what is pending.
                            intake.write(tx, &mut steps).await?;
                            steps.write(tx).await?;
                            self.apply(tx, first).await?;
                        } else {
                            let document_id = document_id(first)?;
                            if !steps.push(first, &decoded, document_id) {
                                // Written now: a change to its row needs the row there first.
                                // Steps wait for the end, after every pending intake row.
                                if intake.holds(document_id) && changes_row(&decoded) {
                                    intake.write(tx, &mut steps).await?;
                                }
                                apply_own(tx, first, &decoded, document_id).await?;
                            }
                        }
                    }
                    rest = &rest[1..];
                }
            }
        }
        intake.write(tx, &mut steps).await?;
        steps.write(tx).await
    }
}

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
    DocumentEvent::deserialize(&event.payload)
        .map_err(|e| StoreError::Corrupt(format!("document event {}: {e}", event.event_id)))
}

/// The document id of an event of a document stream (`…:<uuid>`).
fn document_id(event: &RecordedEvent) -> Result<Uuid, StoreError> {
    kuatia_domain::document::aggregate::document_of(&event.stream_id)
        .ok_or_else(|| corrupt("document stream id"))
}

fn buyer_ruc(document: &kuatia_domain::document::canonical::CanonicalDocument) -> Option<String> {
    document
        .buyer
        .as_ref()
        .and_then(|b| b.ruc.as_deref())
        .map(ruc_number)
        .filter(|n| !n.is_empty())
}

/// A text as the list's search compares it: trimmed, lower case, with the Spanish accents and ñ
/// folded (á é í ó ú ü ñ → a e i o u u n), so that "gomez" finds "Gómez" (migration 0025 folds
/// the same letters).
pub fn search_text(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .map(|c| match c {
            'á' => 'a',
            'é' => 'e',
            'í' => 'i',
            'ó' => 'o',
            'ú' | 'ü' => 'u',
            'ñ' => 'n',
            other => other,
        })
        .collect::<String>()
        .trim()
        .to_owned()
}

/// The buyer's legal and trade names as the search compares them; `None` without either.
fn buyer_search(document: &kuatia_domain::document::canonical::CanonicalDocument) -> Option<String> {
    let buyer = document.buyer.as_ref()?;
    let names: Vec<&str> = [buyer.legal_name.as_deref(), buyer.trade_name.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    Some(search_text(&names.join(" "))).filter(|s| !s.is_empty())
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
