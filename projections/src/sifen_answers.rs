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
use kuatia_application::projection::{Backend, Projection, SqlTx, SqlValue, json_row_chunks, pg_timestamp};
use kuatia_application::support::SIFEN_RETRY_CODE as RETRY_CODE;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use uuid::Uuid;

/// How an answer row takes what is added to it (one answer, or a batch's): counts and latency
/// added, the later time kept, and only past the row's last position (a redelivered answer counts
/// once).
macro_rules! count_answers {
    () => {
        "ON CONFLICT (tenant_id, channel_id, hour, code) DO UPDATE SET \
           answers = sifen_answers.answers + excluded.answers, \
           latency_ms = sifen_answers.latency_ms + excluded.latency_ms, \
           timed = sifen_answers.timed + excluded.timed, \
           last_at = CASE WHEN excluded.last_at > sifen_answers.last_at \
             THEN excluded.last_at ELSE sifen_answers.last_at END, \
           last_position = excluded.last_position \
         WHERE sifen_answers.last_position < excluded.last_position"
    };
}

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

/// What one document event means here.
enum Step {
    /// A document on a SIFEN channel was received: it is in flight from now on.
    Send {
        document: Uuid,
        company: Uuid,
        channel: Uuid,
    },
    /// An attempt started.
    Started { document: Uuid, at: DateTime<Utc> },
    /// The document is never sent again.
    End { document: Uuid },
    /// SIFEN answered (its code; `done`: answered for good).
    Answer {
        document: Uuid,
        code: String,
        done: bool,
        at: DateTime<Utc>,
    },
}

impl Step {
    /// The step an event is, if any.
    fn of(event: &RecordedEvent) -> Result<Option<Step>, StoreError> {
        if event.stream_type != "document" {
            return Ok(None);
        }
        let Some(document) = kuatia_domain::document::aggregate::document_of(&event.stream_id) else {
            return Ok(None);
        };
        let body = &event.payload[event.event_type.as_str()];
        Ok(Some(match event.event_type.as_str() {
            "DocumentReceived" => {
                let routing = &body["routing"];
                if routing["channel"].as_str() != Some("sifen") {
                    return Ok(None);
                }
                let id = |key: &str| {
                    routing[key]
                        .as_str()
                        .and_then(|t| t.parse::<Uuid>().ok())
                        .ok_or_else(|| corrupt(event, key))
                };
                Step::Send {
                    document,
                    company: id("company_id")?,
                    channel: id("channel_id")?,
                }
            }
            "DocumentSubmitted" | "DocumentSubmissionResumed" => Step::Started {
                document,
                at: at_of(event, body)?,
            },
            ended if ENDS.contains(&ended) => Step::End { document },
            other => {
                let Some((code, done)) = answer(other, body) else {
                    return Ok(None);
                };
                Step::Answer {
                    document,
                    code,
                    done,
                    at: at_of(event, body)?,
                }
            }
        }))
    }

    fn document(&self) -> Uuid {
        match self {
            Step::Send { document, .. }
            | Step::Started { document, .. }
            | Step::End { document }
            | Step::Answer { document, .. } => *document,
        }
    }
}

/// An answer's hour: the row it counts in.
fn hour_of(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(TimeDelta::hours(1)).unwrap_or(at)
}

/// The time from an attempt's start to its answer, when the start is known.
fn latency(started: Option<DateTime<Utc>>, at: DateTime<Utc>) -> Option<i64> {
    started.map(|started| (at - started).num_milliseconds().max(0))
}

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
        let Some(step) = Step::of(event)? else {
            return Ok(());
        };
        let position = SqlValue::Int(event.global_position);
        match step {
            Step::Send {
                document,
                company,
                channel,
            } => {
                tx.execute(
                    "INSERT INTO sifen_sends (document_id, tenant_id, company_id, channel_id, submitted_at, \
                       last_position) VALUES ($1, $2, $3, $4, NULL, $5) ON CONFLICT (document_id) DO NOTHING",
                    &[
                        SqlValue::Uuid(document),
                        SqlValue::Uuid(event.tenant_id.as_uuid()),
                        SqlValue::Uuid(company),
                        SqlValue::Uuid(channel),
                        position,
                    ],
                )
                .await?;
            }
            Step::Started { document, at } => {
                tx.execute(
                    "UPDATE sifen_sends SET submitted_at = $2, last_position = $3 \
                     WHERE document_id = $1 AND last_position < $3",
                    &[SqlValue::Uuid(document), SqlValue::Timestamp(at), position],
                )
                .await?;
            }
            Step::End { document } => {
                tx.execute(
                    "DELETE FROM sifen_sends WHERE document_id = $1",
                    &[SqlValue::Uuid(document)],
                )
                .await?;
            }
            Step::Answer {
                document,
                code,
                done,
                at,
            } => {
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
                let latency = latency(row[2].non_null().and_then(SqlValue::as_timestamp), at);
                tx.execute(
                    concat!(
                        "INSERT INTO sifen_answers (tenant_id, company_id, channel_id, hour, code, answers, \
                           latency_ms, timed, last_at, last_position) VALUES ($1, $2, $3, $4, $5, 1, $6, $7, $8, $9) ",
                        count_answers!()
                    ),
                    &[
                        SqlValue::Uuid(event.tenant_id.as_uuid()),
                        row[0].clone(),
                        row[1].clone(),
                        SqlValue::Timestamp(hour_of(at)),
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

    /// On PostgreSQL, a batch in at most five kinds of statement whatever its size (3–5
    /// statements per SIFEN document event by event: a rebuild replayed 15–20 k events/s): the
    /// in-flight rows the batch touches and the answer rows' last positions are read at once,
    /// the events are folded in memory exactly as `apply` does one by one, and what they leave is
    /// written at once (tests hold the rows equal to `apply`'s, also for a batch replayed over
    /// answers counted already).
    async fn apply_all(&self, tx: &mut dyn SqlTx, events: &[RecordedEvent]) -> Result<(), StoreError> {
        if tx.backend() != Backend::Postgres {
            return self.apply_each(tx, events).await;
        }
        let mut steps = Vec::new();
        for event in events {
            if let Some(step) = Step::of(event)? {
                steps.push((event, step));
            }
        }
        if steps.is_empty() {
            return Ok(());
        }
        let mut fold = Fold::read(tx, steps.iter().map(|(_, step)| step.document())).await?;
        let mut answers = Vec::new();
        for (event, step) in steps {
            if let Some(answer) = fold.step(event, step) {
                answers.push(answer);
            }
        }
        fold.write(tx).await?;
        write_answers(tx, answers).await
    }
}

/// A document in flight, as `sifen_sends` holds it.
#[derive(Clone, PartialEq)]
struct Send {
    tenant: Uuid,
    company: Uuid,
    channel: Uuid,
    submitted_at: Option<DateTime<Utc>>,
    last_position: i64,
}

/// The in-flight rows a batch touches: as stored before it, and as its events leave them.
struct Fold {
    stored: HashMap<Uuid, Send>,
    now: HashMap<Uuid, Option<Send>>,
    /// The documents touched, in order of first touch.
    order: Vec<Uuid>,
}

/// One answer to count: its row's key, and what it adds.
struct Counted {
    tenant: Uuid,
    company: Uuid,
    channel: Uuid,
    code: String,
    at: DateTime<Utc>,
    latency: Option<i64>,
    position: i64,
}

impl Fold {
    async fn read(tx: &mut dyn SqlTx, documents: impl Iterator<Item = Uuid>) -> Result<Self, StoreError> {
        let mut order = Vec::new();
        let mut seen = HashSet::new();
        for document in documents {
            if seen.insert(document) {
                order.push(document);
            }
        }
        let ids = order.iter().map(|id| Value::String(id.to_string())).collect();
        let mut stored = HashMap::new();
        for chunk in json_row_chunks(ids) {
            let rows = tx
                .query(
                    "SELECT document_id, tenant_id, company_id, channel_id, submitted_at, last_position \
                     FROM sifen_sends WHERE document_id = ANY (ARRAY(SELECT (jsonb_array_elements_text($1))::uuid))",
                    &[SqlValue::Json(chunk)],
                )
                .await?;
            for row in rows {
                let uuid = |i: usize| {
                    row[i]
                        .as_uuid()
                        .ok_or_else(|| StoreError::Corrupt("sifen_sends row".into()))
                };
                stored.insert(
                    uuid(0)?,
                    Send {
                        tenant: uuid(1)?,
                        company: uuid(2)?,
                        channel: uuid(3)?,
                        submitted_at: row[4].non_null().and_then(SqlValue::as_timestamp),
                        last_position: row[5].as_i64().unwrap_or(0),
                    },
                );
            }
        }
        let now = order.iter().map(|id| (*id, stored.get(id).cloned())).collect();
        Ok(Self { stored, now, order })
    }

    /// What `apply` does with one step, in memory; the answer to count, if any (before the
    /// answer rows' own positions are asked).
    fn step(&mut self, event: &RecordedEvent, step: Step) -> Option<Counted> {
        let position = event.global_position;
        let row = self.now.entry(step.document()).or_default();
        match step {
            Step::Send { company, channel, .. } => {
                if row.is_none() {
                    *row = Some(Send {
                        tenant: event.tenant_id.as_uuid(),
                        company,
                        channel,
                        submitted_at: None,
                        last_position: position,
                    });
                }
                None
            }
            Step::Started { at, .. } => {
                if let Some(send) = row.as_mut().filter(|s| s.last_position < position) {
                    send.submitted_at = Some(at);
                    send.last_position = position;
                }
                None
            }
            Step::End { .. } => {
                *row = None;
                None
            }
            Step::Answer { code, done, at, .. } => {
                let send = row.as_mut().filter(|s| s.last_position < position)?;
                let counted = Counted {
                    tenant: event.tenant_id.as_uuid(),
                    company: send.company,
                    channel: send.channel,
                    code,
                    at,
                    latency: latency(send.submitted_at, at),
                    position,
                };
                if done {
                    *row = None;
                } else {
                    send.submitted_at = None;
                    send.last_position = position;
                }
                Some(counted)
            }
        }
    }

    /// Writes the rows the batch changed: gone ones deleted, changed or new ones written whole.
    async fn write(self, tx: &mut dyn SqlTx) -> Result<(), StoreError> {
        let mut gone = Vec::new();
        let mut rows = Vec::new();
        for id in &self.order {
            match (self.stored.get(id), self.now.get(id).and_then(Option::as_ref)) {
                (Some(_), None) => gone.push(Value::String(id.to_string())),
                (before, Some(send)) if before != Some(send) => rows.push(serde_json::json!({
                    "document_id": id,
                    "tenant_id": send.tenant,
                    "company_id": send.company,
                    "channel_id": send.channel,
                    "submitted_at": send.submitted_at.map(pg_timestamp),
                    "last_position": send.last_position,
                })),
                _ => {}
            }
        }
        for chunk in json_row_chunks(gone) {
            tx.execute(
                "DELETE FROM sifen_sends \
                 WHERE document_id = ANY (ARRAY(SELECT (jsonb_array_elements_text($1))::uuid))",
                &[SqlValue::Json(chunk)],
            )
            .await?;
        }
        for chunk in json_row_chunks(rows) {
            tx.execute(
                "INSERT INTO sifen_sends (document_id, tenant_id, company_id, channel_id, submitted_at, \
                   last_position) \
                 SELECT document_id, tenant_id, company_id, channel_id, submitted_at, last_position \
                 FROM jsonb_to_recordset($1) AS r(document_id uuid, tenant_id uuid, company_id uuid, \
                   channel_id uuid, submitted_at timestamptz, last_position bigint) \
                 ON CONFLICT (document_id) DO UPDATE SET submitted_at = excluded.submitted_at, \
                   last_position = excluded.last_position",
                &[SqlValue::Json(chunk)],
            )
            .await?;
        }
        Ok(())
    }
}

/// The answer rows' key: tenant, channel, hour, code.
type AnswerKey = (Uuid, Uuid, DateTime<Utc>, String);

/// What a batch adds to one answer row: the company (of its first answer), the answers, their
/// summed latency and how many were timed, the last answer's time and position.
struct Sum {
    company: Uuid,
    answers: i64,
    latency_ms: i64,
    timed: i64,
    last_at: DateTime<Utc>,
    last_position: i64,
}

/// Counts a batch's answers: each row's answers after the last position it counted (as `apply`'s
/// guard skips one by one), added in one statement per chunk of rows.
async fn write_answers(tx: &mut dyn SqlTx, answers: Vec<Counted>) -> Result<(), StoreError> {
    if answers.is_empty() {
        return Ok(());
    }
    let key = |a: &Counted| -> AnswerKey { (a.tenant, a.channel, hour_of(a.at), a.code.clone()) };
    let mut keys: Vec<AnswerKey> = Vec::new();
    let mut seen = HashSet::new();
    for answer in &answers {
        if seen.insert(key(answer)) {
            keys.push(key(answer));
        }
    }
    let asked = keys
        .iter()
        .map(|(tenant, channel, hour, code)| {
            serde_json::json!({"tenant_id": tenant, "channel_id": channel, "hour": pg_timestamp(*hour), "code": code})
        })
        .collect();
    let mut counted: HashMap<AnswerKey, i64> = HashMap::new();
    for chunk in json_row_chunks(asked) {
        let rows = tx
            .query(
                "SELECT a.tenant_id, a.channel_id, a.hour, a.code, a.last_position FROM sifen_answers AS a \
                 JOIN jsonb_to_recordset($1) AS r(tenant_id uuid, channel_id uuid, hour timestamptz, code text) \
                   ON a.tenant_id = r.tenant_id AND a.channel_id = r.channel_id AND a.hour = r.hour \
                   AND a.code = r.code",
                &[SqlValue::Json(chunk)],
            )
            .await?;
        for row in rows {
            if let (Some(tenant), Some(channel), Some(hour), Some(code), Some(last)) = (
                row[0].as_uuid(),
                row[1].as_uuid(),
                row[2].as_timestamp(),
                row[3].as_text(),
                row[4].as_i64(),
            ) {
                counted.insert((tenant, channel, hour, code), last);
            }
        }
    }
    let mut sums: HashMap<AnswerKey, Sum> = HashMap::new();
    for answer in answers {
        let key = key(&answer);
        if counted.get(&key).is_some_and(|last| *last >= answer.position) {
            continue;
        }
        let sum = sums.entry(key).or_insert(Sum {
            company: answer.company,
            answers: 0,
            latency_ms: 0,
            timed: 0,
            last_at: answer.at,
            last_position: answer.position,
        });
        sum.answers += 1;
        sum.latency_ms += answer.latency.unwrap_or(0);
        sum.timed += i64::from(answer.latency.is_some());
        sum.last_at = sum.last_at.max(answer.at);
        sum.last_position = answer.position;
    }
    let rows = keys
        .into_iter()
        .filter_map(|key| {
            let sum = sums.remove(&key)?;
            let (tenant, channel, hour, code) = key;
            Some(serde_json::json!({
                "tenant_id": tenant, "company_id": sum.company, "channel_id": channel,
                "hour": pg_timestamp(hour), "code": code, "answers": sum.answers,
                "latency_ms": sum.latency_ms, "timed": sum.timed, "last_at": pg_timestamp(sum.last_at),
                "last_position": sum.last_position,
            }))
        })
        .collect();
    for chunk in json_row_chunks(rows) {
        tx.execute(
            concat!(
                "INSERT INTO sifen_answers (tenant_id, company_id, channel_id, hour, code, answers, latency_ms, \
               timed, last_at, last_position) \
             SELECT tenant_id, company_id, channel_id, hour, code, answers, latency_ms, timed, last_at, \
               last_position \
             FROM jsonb_to_recordset($1) AS r(tenant_id uuid, company_id uuid, channel_id uuid, \
               hour timestamptz, code text, answers bigint, latency_ms bigint, timed bigint, \
               last_at timestamptz, last_position bigint) ",
                count_answers!()
            ),
            &[SqlValue::Json(chunk)],
        )
        .await?;
    }
    Ok(())
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
