//! `sifen_answers` (catch-up): SIFEN's answers to each tenant's SIFEN channels, counted by hour and
//! code, with the time from an attempt's start to its answer. What the operators' room shows as
//! SIFEN's health per tenant channel (the instance's metrics carry no tenant).
//!
//! From the document streams: `DocumentReceived` on a `sifen` channel notes where the document is
//! sent (`sifen_sends`); `DocumentSubmitted` and `DocumentSubmissionResumed` note when an attempt
//! started; an answer to the DE (`DocumentAccepted`, `DocumentRejected`: SIFEN's code; an
//! operational failure, `DocumentRetryScheduled`: the code `retry`) adds one to its hour's row
//! with the time since the attempt started, when one is known. Rows only move forward
//! (`last_position`: events of one row arrive in position order), so an event applied twice
//! counts once. A document answered for good (or
//! never to be sent: validation failed, given up, voided) leaves `sifen_sends`, which so holds
//! only documents in flight. The answers to events (cancelación, inutilización) are not counted:
//! the documents' timelines hold them.

use async_trait::async_trait;
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use kuatia_application::event_store::{ProjectionKind, RecordedEvent, StoreError};
use kuatia_application::projection::{Projection, SqlTx, SqlValue};
use kuatia_application::support::SIFEN_RETRY_CODE as RETRY_CODE;
use serde_json::Value;

/// The projection.
#[derive(Debug, Default, Clone, Copy)]
pub struct SifenAnswers;

impl SifenAnswers {
    /// Its stable name.
    pub const NAME: &'static str = "sifen_answers";
}

fn corrupt(event: &RecordedEvent, what: &str) -> StoreError {
    StoreError::Corrupt(format!(
        "{} {}: unreadable {what}",
        event.event_type, event.event_id
    ))
}

fn at_of(event: &RecordedEvent, body: &Value) -> Result<DateTime<Utc>, StoreError> {
    body["at"]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
        .ok_or_else(|| corrupt(event, "at"))
}

/// What an answer event says: SIFEN's code, and whether the document is then answered for good.
fn answer(event_type: &str, body: &Value) -> Option<(String, bool)> {
    match event_type {
        "DocumentAccepted" => Some((body["code"].as_str()?.to_owned(), true)),
        "DocumentRejected" => Some((body["code"].as_str()?.to_owned(), true)),
        "DocumentRetryScheduled" => Some((RETRY_CODE.to_owned(), false)),
        _ => None,
    }
}

/// Events after which a document is never sent again (its `sifen_sends` row leaves).
const ENDS: &[&str] = &[
    "DocumentValidationFailed",
    "DocumentFailedTerminally",
    "DocumentCancelled",
    "DocumentInvalidated",
];

#[async_trait]
impl Projection for SifenAnswers {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn kind(&self) -> ProjectionKind {
        ProjectionKind::CatchUp
    }

    fn tables(&self) -> &'static [&'static str] {
        &["sifen_answers", "sifen_sends"]
    }

    async fn apply(&self, tx: &mut dyn SqlTx, event: &RecordedEvent) -> Result<(), StoreError> {
        if event.stream_type != "document" {
            return Ok(());
        }
        let Some(document) = kuatia_domain::document::aggregate::document_of(&event.stream_id) else {
            return Ok(());
        };
        let body = &event.payload[event.event_type.as_str()];
        let position = SqlValue::Int(event.global_position);
        match event.event_type.as_str() {
            "DocumentReceived" => {
                let routing = &body["routing"];
                if routing["channel"].as_str() != Some("sifen") {
                    return Ok(());
                }
                let id = |key: &str| {
                    routing[key]
                        .as_str()
                        .and_then(|t| t.parse::<uuid::Uuid>().ok())
                        .ok_or_else(|| corrupt(event, key))
                };
                tx.execute(
                    "INSERT INTO sifen_sends (document_id, tenant_id, company_id, channel_id, submitted_at, \
                       last_position) VALUES ($1, $2, $3, $4, NULL, $5) ON CONFLICT (document_id) DO NOTHING",
                    &[
                        SqlValue::Uuid(document),
                        SqlValue::Uuid(event.tenant_id.as_uuid()),
                        SqlValue::Uuid(id("company_id")?),
                        SqlValue::Uuid(id("channel_id")?),
                        position,
                    ],
                )
                .await?;
            }
            "DocumentSubmitted" | "DocumentSubmissionResumed" => {
                tx.execute(
                    "UPDATE sifen_sends SET submitted_at = $2, last_position = $3 \
                     WHERE document_id = $1 AND last_position < $3",
                    &[
                        SqlValue::Uuid(document),
                        SqlValue::Timestamp(at_of(event, body)?),
                        position,
                    ],
                )
                .await?;
            }
            ended if ENDS.contains(&ended) => {
                tx.execute(
                    "DELETE FROM sifen_sends WHERE document_id = $1",
                    &[SqlValue::Uuid(document)],
                )
                .await?;
            }
            other => {
                let Some((code, done)) = answer(other, body) else {
                    return Ok(());
                };
                let sends = tx
                    .query(
                        "SELECT company_id, channel_id, submitted_at, last_position FROM sifen_sends \
                         WHERE document_id = $1",
                        &[SqlValue::Uuid(document)],
                    )
                    .await?;
                // Not a SIFEN document, or this answer was counted already.
                let Some(row) = sends.first() else {
                    return Ok(());
                };
                if row[3].as_i64().is_some_and(|last| last >= event.global_position) {
                    return Ok(());
                }
                let at = at_of(event, body)?;
                let latency = row[2]
                    .non_null()
                    .and_then(SqlValue::as_timestamp)
                    .map(|started| (at - started).num_milliseconds().max(0));
                let hour = at.duration_trunc(TimeDelta::hours(1)).unwrap_or(at);
                tx.execute(
                    "INSERT INTO sifen_answers (tenant_id, company_id, channel_id, hour, code, answers, \
                       latency_ms, timed, last_at, last_position) VALUES ($1, $2, $3, $4, $5, 1, $6, $7, $8, $9) \
                     ON CONFLICT (tenant_id, channel_id, hour, code) DO UPDATE SET \
                       answers = sifen_answers.answers + 1, \
                       latency_ms = sifen_answers.latency_ms + excluded.latency_ms, \
                       timed = sifen_answers.timed + excluded.timed, \
                       last_at = CASE WHEN excluded.last_at > sifen_answers.last_at \
                         THEN excluded.last_at ELSE sifen_answers.last_at END, \
                       last_position = excluded.last_position \
                     WHERE sifen_answers.last_position < excluded.last_position",
                    &[
                        SqlValue::Uuid(event.tenant_id.as_uuid()),
                        row[0].clone(),
                        row[1].clone(),
                        SqlValue::Timestamp(hour),
                        SqlValue::Text(code),
                        SqlValue::Int(latency.unwrap_or(0)),
                        SqlValue::Int(i64::from(latency.is_some())),
                        SqlValue::Timestamp(at),
                        position.clone(),
                    ],
                )
                .await?;
                if done {
                    tx.execute(
                        "DELETE FROM sifen_sends WHERE document_id = $1",
                        &[SqlValue::Uuid(document)],
                    )
                    .await?;
                } else {
                    // The attempt is answered: the next one starts its own clock.
                    tx.execute(
                        "UPDATE sifen_sends SET submitted_at = NULL, last_position = $2 WHERE document_id = $1",
                        &[SqlValue::Uuid(document), position],
                    )
                    .await?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_are_read_with_their_code_and_what_they_end() {
        assert_eq!(
            answer("DocumentAccepted", &json!({"code": "0260"})),
            Some(("0260".into(), true))
        );
        assert_eq!(
            answer("DocumentRejected", &json!({"code": "1001"})),
            Some(("1001".into(), true))
        );
        assert_eq!(
            answer("DocumentRetryScheduled", &json!({"reason": "timeout"})),
            Some((RETRY_CODE.into(), false))
        );
        assert_eq!(answer("DocumentSigned", &json!({})), None);
    }
}
