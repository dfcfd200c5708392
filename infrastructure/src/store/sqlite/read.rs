//! Reading events: the log with its filters, one stream's versions, and a row into a
//! [`RecordedEvent`].

use kuatia_application::event_store::{EventMetadata, ReadFilter, RecordedEvent, StoreError};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};

use super::{SqliteStore, parse_json, parse_time, parse_uuid};
use crate::store::common::tenant;
use crate::store::db_error;

macro_rules! event_columns {
    () => {
        "global_position, event_id, tenant_id, stream_type, stream_id, stream_version, event_type, \
         schema_version, payload, metadata, recorded_at, prev_hash, hash"
    };
}

impl SqliteStore {
    /// The log's events as stored, their bodies parsed (`Value`) or kept as text (`RawValue`).
    pub(super) async fn read_raw_on<P: serde::de::DeserializeOwned>(
        conn: &mut SqliteConnection,
        filter: &ReadFilter,
    ) -> Result<Vec<RecordedEvent<P>>, StoreError> {
        let limit = filter.limit.clamp(1, 100_000) as i64;
        let tenant = filter.tenant.map(|t| t.as_uuid().to_string());
        let rows = sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE global_position > $1 AND ($3 IS NULL OR tenant_id = $3) \
              AND ($4 IS NULL OR stream_id = $4) AND ($5 IS NULL OR event_type = $5) \
              AND ($6 IS NULL OR stream_id IN ( \
                   SELECT stream_id FROM companies WHERE id = $6 AND tenant_id = $3 \
                   UNION ALL SELECT stream_id FROM documents WHERE company_id = $6 AND tenant_id = $3)) \
              AND ($7 IS NULL OR stream_type IN (SELECT value FROM json_each($7))) \
              ORDER BY global_position LIMIT $2"
        ))
        .bind(filter.after)
        .bind(limit)
        .bind(tenant)
        .bind(filter.stream_id.clone())
        .bind(filter.event_type.clone())
        .bind(filter.company.map(|c| c.to_string()))
        .bind(filter.stream_types.map(|t| serde_json::json!(t).to_string()))
        .fetch_all(&mut *conn)
        .await
        .map_err(db_error)?;
        rows.iter().map(event_from_row).collect()
    }
}

/// The stored events of one stream with versions in `after + 1 ..= upto`, in version order, not
/// upcast (the store's reads and a projection's `SqlTx` upcast them).
pub(crate) async fn stream_events(
    conn: &mut SqliteConnection,
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

fn event_from_row<P: serde::de::DeserializeOwned>(row: &SqliteRow) -> Result<RecordedEvent<P>, StoreError> {
    let corrupt = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let text = |name: &str| row.try_get::<String, _>(name).map_err(corrupt);
    Ok(RecordedEvent {
        global_position: row.try_get("global_position").map_err(corrupt)?,
        event_id: parse_uuid("event_id", &text("event_id")?)?,
        tenant_id: tenant(parse_uuid("tenant_id", &text("tenant_id")?)?),
        stream_type: text("stream_type")?,
        stream_id: text("stream_id")?,
        stream_version: row.try_get::<i64, _>("stream_version").map_err(corrupt)? as u64,
        event_type: text("event_type")?,
        schema_version: row.try_get::<i64, _>("schema_version").map_err(corrupt)? as u32,
        payload: parse_json("payload", &text("payload")?)?,
        metadata: parse_json::<EventMetadata>("metadata", &text("metadata")?)?,
        recorded_at: parse_time("recorded_at", &text("recorded_at")?)?,
        prev_hash: row.try_get("prev_hash").map_err(corrupt)?,
        hash: text("hash")?,
    })
}
