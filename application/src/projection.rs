//! Read models: the [`Projection`] port and the small SQL surface projections write through.
//!
//! A projection is written once and runs on both backends: it speaks portable SQL (`$1`
//! placeholders, `INSERT … ON CONFLICT`) through [`SqlTx`], which the store implements over its
//! open transaction. That transaction is the append transaction for inline projections and the
//! checkpoint transaction for catch-up subscriptions, so a read model and its checkpoint always
//! move together. sqlx's `Any` driver was rejected because it lacks UUID and timestamp types.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::jobs::NewJob;
use crate::records::{ProjectionKind, RecordedEvent, StoreError};

/// A value bound to or read from SQL. UUIDs and timestamps map to native types on PostgreSQL and
/// to text on SQLite.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    /// NULL, typed as text (fine for text columns and SQLite).
    Null,
    /// NULL of a given type: PostgreSQL refuses a text-typed NULL in a uuid or timestamp column.
    TypedNull(SqlType),
    /// Any integer.
    Int(i64),
    /// Text.
    Text(String),
    /// Boolean (an integer on SQLite).
    Bool(bool),
    /// JSON (`jsonb` on PostgreSQL, text on SQLite).
    Json(Value),
    /// UUID (`uuid` on PostgreSQL, text on SQLite).
    Uuid(uuid::Uuid),
    /// Timestamp (`timestamptz` on PostgreSQL, RFC 3339 text on SQLite).
    Timestamp(DateTime<Utc>),
    /// A calendar day (`date` on PostgreSQL, `YYYY-MM-DD` text on SQLite).
    Date(chrono::NaiveDate),
}

impl SqlValue {
    /// The integer, if this is one.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Self::Int(v) => Some(*v),
            Self::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// The text, if this is text (or a UUID, rendered).
    pub fn as_text(&self) -> Option<String> {
        match self {
            Self::Text(v) => Some(v.clone()),
            Self::Uuid(v) => Some(v.to_string()),
            _ => None,
        }
    }

    /// The UUID, native (PostgreSQL) or as text (SQLite).
    pub fn as_uuid(&self) -> Option<uuid::Uuid> {
        match self {
            Self::Uuid(v) => Some(*v),
            Self::Text(v) => uuid::Uuid::parse_str(v).ok(),
            _ => None,
        }
    }

    /// The timestamp, native (PostgreSQL) or as RFC 3339 text (SQLite).
    pub fn as_timestamp(&self) -> Option<DateTime<Utc>> {
        match self {
            Self::Timestamp(v) => Some(*v),
            Self::Text(v) => DateTime::parse_from_rfc3339(v)
                .ok()
                .map(|t| t.with_timezone(&Utc)),
            _ => None,
        }
    }

    /// A nullable value: `None` for NULL.
    pub fn non_null(&self) -> Option<&SqlValue> {
        (!matches!(self, Self::Null | Self::TypedNull(_))).then_some(self)
    }
}

/// The type of a [`SqlValue::TypedNull`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlType {
    /// Text.
    Text,
    /// Integer.
    Int,
    /// Boolean.
    Bool,
    /// JSON.
    Json,
    /// UUID.
    Uuid,
    /// Timestamp.
    Timestamp,
}

/// Which database a transaction runs on, for the rare statement that must differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// PostgreSQL.
    Postgres,
    /// SQLite.
    Sqlite,
}

impl From<Option<uuid::Uuid>> for SqlValue {
    fn from(value: Option<uuid::Uuid>) -> Self {
        value.map_or(Self::TypedNull(SqlType::Uuid), Self::Uuid)
    }
}

impl From<Option<DateTime<Utc>>> for SqlValue {
    fn from(value: Option<DateTime<Utc>>) -> Self {
        value.map_or(Self::TypedNull(SqlType::Timestamp), Self::Timestamp)
    }
}

/// An open transaction, as a projection sees it.
#[async_trait]
pub trait SqlTx: Send {
    /// The backend.
    fn backend(&self) -> Backend;
    /// Runs a statement, returns the rows affected.
    async fn execute(&mut self, sql: &'static str, params: &[SqlValue]) -> Result<u64, StoreError>;
    /// Runs a query, returns every row as values in column order.
    async fn query(
        &mut self,
        sql: &'static str,
        params: &[SqlValue],
    ) -> Result<Vec<Vec<SqlValue>>, StoreError>;
    /// Writes a job in this transaction (a duplicate idempotency key is skipped; returns whether
    /// the job was new).
    async fn enqueue_job(&mut self, job: &NewJob) -> Result<bool, StoreError>;
    /// The events of one stream up to and including version `upto`, in version order, upcast as
    /// every read path upcasts them (a process manager folding what it acts on).
    async fn load_stream_upto(
        &mut self,
        stream_id: &str,
        upto: u64,
    ) -> Result<Vec<RecordedEvent>, StoreError>;
}

/// A read model or process manager fed by events.
///
/// `apply` must be idempotent: applying an event a second time changes nothing (guard with the
/// event's position or stream version). A rebuild empties `tables()` and replays from position 0.
#[async_trait]
pub trait Projection: Send + Sync {
    /// Unique, stable name (the checkpoint row's key).
    fn name(&self) -> &'static str;
    /// How it is fed.
    fn kind(&self) -> ProjectionKind;
    /// The tables it owns (emptied by a rebuild).
    fn tables(&self) -> &'static [&'static str];
    /// The stream types whose events it reads (`document`, `tenant`…); `None`, the default: every
    /// stream. A rebuild of an inline projection replays only these (the store reads past the
    /// rest without sending them), so `apply` must do nothing with an event of any other type.
    fn stream_types(&self) -> Option<&'static [&'static str]> {
        None
    }
    /// Applies one event inside the given transaction.
    async fn apply(&self, tx: &mut dyn SqlTx, event: &RecordedEvent) -> Result<(), StoreError>;
    /// Applies several events in order inside the given transaction: the same rows as
    /// [`Projection::apply`] on each in turn, which is what it does unless a projection writes
    /// them with fewer statements (the append transaction of an inline projection holds the
    /// global append lock, so every round trip there is paid by every writer).
    async fn apply_all(&self, tx: &mut dyn SqlTx, events: &[RecordedEvent]) -> Result<(), StoreError> {
        self.apply_each(tx, events).await
    }
    /// [`Projection::apply`] on each event in turn (what an `apply_all` falls back to where it
    /// cannot group, on SQLite say).
    async fn apply_each(&self, tx: &mut dyn SqlTx, events: &[RecordedEvent]) -> Result<(), StoreError> {
        for event in events {
            self.apply(tx, event).await?;
        }
        Ok(())
    }
}

/// The most bytes of JSON one statement a projection writes should carry (a rows-as-JSON
/// parameter, say): the PostgreSQL store keeps its own statements under the same size, so that
/// over TLS none waits for a delayed ACK (see `MAX_STATEMENT_BYTES` in the store).
pub const MAX_JSON_PARAM_BYTES: usize = 12 * 1024;

/// Groups `rows` (JSON objects) into JSON arrays of at most [`MAX_JSON_PARAM_BYTES`] each (a row
/// larger than that goes alone), in order, for statements that read their rows from one JSON
/// parameter (`jsonb_to_recordset($1)`).
pub fn json_row_chunks(rows: Vec<Value>) -> Vec<Value> {
    let mut chunks = Vec::new();
    let mut chunk = Vec::new();
    let mut bytes = 0;
    for row in rows {
        let size = row.to_string().len() + 1;
        if !chunk.is_empty() && bytes + size > MAX_JSON_PARAM_BYTES {
            chunks.push(Value::Array(std::mem::take(&mut chunk)));
            bytes = 0;
        }
        bytes += size;
        chunk.push(row);
    }
    if !chunk.is_empty() {
        chunks.push(Value::Array(chunk));
    }
    chunks
}

/// A timestamp as PostgreSQL stores it (microseconds, truncated as sqlx binds a `DateTime`), for
/// rows passed as JSON.
pub fn pg_timestamp(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}
