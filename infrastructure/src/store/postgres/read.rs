//! Reading events: the log with its filters, one stream's versions, and a row into a
//! [`RecordedEvent`].

use kuatia_application::event_store::{EventMetadata, ReadFilter, RecordedEvent, StoreError};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use super::{PgInner, PgStore};
use crate::store::common::{tenant, upcast};
use crate::store::db_error;
use std::sync::Arc;

macro_rules! event_columns {
    () => {
        "global_position, event_id, tenant_id, stream_type, stream_id, stream_version, event_type, \
         schema_version, payload, metadata, recorded_at, prev_hash, hash"
    };
}

impl PgStore {
    /// A page of a rebuild's replay: up to 1 000 events after `after` of the given stream types
    /// (all with `None`), upcast, read on a pooled connection.
    pub(super) async fn replay_page(
        inner: Arc<PgInner>,
        stream_types: Option<&'static [&'static str]>,
        after: i64,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        let filter = ReadFilter {
            after,
            limit: 1000,
            // Only the streams it reads: the store skips the rest (issue 30: `access` read 2 M
            // events to use a few hundred).
            stream_types,
            ..ReadFilter::default()
        };
        let mut conn = inner.pool.acquire().await.map_err(db_error)?;
        let events = Self::read_raw_on(&mut conn, &filter).await?;
        Ok(events
            .into_iter()
            .map(|event| upcast(&inner.upcasters, event))
            .collect())
    }

    /// The log's events as stored, their bodies parsed (`Value`) or kept as text (`RawValue`).
    pub(super) async fn read_raw_on<P: Payload>(
        conn: &mut PgConnection,
        filter: &ReadFilter,
    ) -> Result<Vec<RecordedEvent<P>>, StoreError> {
        let limit = filter.limit.clamp(1, 100_000) as i64;
        if filter.event_type.is_some() || filter.company.is_some() || filter.stream_types.is_some() {
            // The filtered reads of `GET /v1/events`: one statement; the company's streams come
            // from the companies and documents read models (see `ReadFilter::company`).
            let rows = sqlx::query(concat!(
                "SELECT ",
                event_columns!(),
                " FROM events WHERE global_position > $1 AND ($3::uuid IS NULL OR tenant_id = $3) \
                  AND ($4::text IS NULL OR stream_id = $4) AND ($5::text IS NULL OR event_type = $5) \
                  AND ($6::uuid IS NULL OR stream_id IN ( \
                       SELECT stream_id FROM companies WHERE id = $6 AND tenant_id = $3 \
                       UNION ALL SELECT stream_id FROM documents WHERE company_id = $6 AND tenant_id = $3)) \
                  AND ($7::text[] IS NULL OR stream_type = ANY ($7)) \
                  ORDER BY global_position LIMIT $2"
            ))
            .bind(filter.after)
            .bind(limit)
            .bind(filter.tenant.map(|t| t.as_uuid()))
            .bind(filter.stream_id.clone())
            .bind(filter.event_type.clone())
            .bind(filter.company)
            .bind(filter.stream_types)
            .fetch_all(&mut *conn)
            .await
            .map_err(db_error)?;
            return rows.iter().map(event_from_row).collect();
        }
        let rows = match (&filter.tenant, &filter.stream_id) {
            (None, None) => {
                sqlx::query(concat!("SELECT ", event_columns!(), " FROM events WHERE global_position > $1 ORDER BY global_position LIMIT $2"))
                    .bind(filter.after)
                    .bind(limit)
                    .fetch_all(&mut *conn)
                    .await
            }
            (Some(t), None) => {
                sqlx::query(concat!("SELECT ", event_columns!(), " FROM events WHERE tenant_id = $3 AND global_position > $1 ORDER BY global_position LIMIT $2"))
                    .bind(filter.after)
                    .bind(limit)
                    .bind(t.as_uuid())
                    .fetch_all(&mut *conn)
                    .await
            }
            (None, Some(s)) => {
                sqlx::query(concat!("SELECT ", event_columns!(), " FROM events WHERE stream_id = $3 AND global_position > $1 ORDER BY global_position LIMIT $2"))
                    .bind(filter.after)
                    .bind(limit)
                    .bind(s)
                    .fetch_all(&mut *conn)
                    .await
            }
            (Some(t), Some(s)) => {
                sqlx::query(concat!("SELECT ", event_columns!(), " FROM events WHERE tenant_id = $3 AND stream_id = $4 AND global_position > $1 ORDER BY global_position LIMIT $2"))
                    .bind(filter.after)
                    .bind(limit)
                    .bind(t.as_uuid())
                    .bind(s)
                    .fetch_all(&mut *conn)
                    .await
            }
        }
        .map_err(db_error)?;
        rows.iter().map(event_from_row).collect()
    }
}

/// The stored events of one stream with versions in `after + 1 ..= upto`, in version order, not
/// upcast (the store's reads and a projection's `SqlTx` upcast them).
pub(crate) async fn stream_events(
    conn: &mut PgConnection,
    stream_id: &str,
    after: u64,
    upto: u64,
) -> Result<Vec<RecordedEvent>, StoreError> {
    let rows = sqlx::query(concat!(
        "SELECT ",
        event_columns!(),
        " FROM events WHERE stream_id = $1 AND stream_version > $2 AND stream_version <= $3 \
         ORDER BY stream_version"
    ))
    .bind(stream_id)
    .bind(i64::try_from(after).unwrap_or(i64::MAX))
    .bind(i64::try_from(upto).unwrap_or(i64::MAX))
    .fetch_all(&mut *conn)
    .await
    .map_err(db_error)?;
    rows.iter().map(event_from_row).collect()
}

/// A body as a read gives it: the stored `json` decoded into a `Value`, or its text as it is.
pub(crate) trait Payload:
    for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>
{
}
impl Payload for serde_json::Value {}
impl Payload for Box<serde_json::value::RawValue> {}

fn event_from_row<P: Payload>(row: &PgRow) -> Result<RecordedEvent<P>, StoreError> {
    let corrupt = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let metadata: serde_json::Value = row.try_get("metadata").map_err(corrupt)?;
    Ok(RecordedEvent {
        global_position: row.try_get("global_position").map_err(corrupt)?,
        event_id: row.try_get("event_id").map_err(corrupt)?,
        tenant_id: tenant(row.try_get("tenant_id").map_err(corrupt)?),
        stream_type: row.try_get("stream_type").map_err(corrupt)?,
        stream_id: row.try_get("stream_id").map_err(corrupt)?,
        stream_version: row.try_get::<i64, _>("stream_version").map_err(corrupt)? as u64,
        event_type: row.try_get("event_type").map_err(corrupt)?,
        schema_version: row.try_get::<i32, _>("schema_version").map_err(corrupt)? as u32,
        payload: row.try_get("payload").map_err(corrupt)?,
        metadata: serde_json::from_value::<EventMetadata>(metadata)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        recorded_at: row.try_get("recorded_at").map_err(corrupt)?,
        prev_hash: row.try_get("prev_hash").map_err(corrupt)?,
        hash: row.try_get("hash").map_err(corrupt)?,
    })
}
