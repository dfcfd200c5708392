//! `stream_index` (inline): one row per stream with its version and last event, updated in the
//! append transaction so a client reads its own write at once.

use async_trait::async_trait;
use kuatia_application::event_store::{ProjectionKind, RecordedEvent, StoreError};
use kuatia_application::projection::{Backend, Projection, SqlTx, SqlValue, json_row_chunks, pg_timestamp};
use serde_json::json;
use std::collections::HashMap;

/// The projection.
#[derive(Debug, Default, Clone, Copy)]
pub struct StreamIndex;

impl StreamIndex {
    /// Its stable name.
    pub const NAME: &'static str = "stream_index";
}

#[async_trait]
impl Projection for StreamIndex {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn kind(&self) -> ProjectionKind {
        ProjectionKind::Inline
    }

    fn tables(&self) -> &'static [&'static str] {
        &["stream_index"]
    }

    async fn apply(&self, tx: &mut dyn SqlTx, event: &RecordedEvent) -> Result<(), StoreError> {
        // The version guard makes a replayed event a no-op.
        tx.execute(
            "INSERT INTO stream_index (stream_id, tenant_id, stream_type, version, last_event_type, \
               last_position, first_recorded_at, last_recorded_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $7) \
             ON CONFLICT (stream_id) DO UPDATE SET version = excluded.version, \
               last_event_type = excluded.last_event_type, last_position = excluded.last_position, \
               last_recorded_at = excluded.last_recorded_at \
             WHERE stream_index.version < excluded.version",
            &[
                SqlValue::Text(event.stream_id.clone()),
                SqlValue::Uuid(event.tenant_id.as_uuid()),
                SqlValue::Text(event.stream_type.clone()),
                SqlValue::Int(event.stream_version as i64),
                SqlValue::Text(event.event_type.clone()),
                SqlValue::Int(event.global_position),
                SqlValue::Timestamp(event.recorded_at),
            ],
        )
        .await?;
        Ok(())
    }

    /// On PostgreSQL, one row per stream (its last event, its first event's time) from a JSON
    /// parameter: the state `apply` reaches event by event, in one statement per
    /// [`MAX_JSON_PARAM_BYTES`](kuatia_application::projection::MAX_JSON_PARAM_BYTES) of rows.
    async fn apply_all(&self, tx: &mut dyn SqlTx, events: &[RecordedEvent]) -> Result<(), StoreError> {
        if tx.backend() != Backend::Postgres {
            return self.apply_each(tx, events).await;
        }
        // Per stream in order of first appearance: (first event, last event).
        let mut streams: Vec<(&RecordedEvent, &RecordedEvent)> = Vec::new();
        let mut index: HashMap<&str, usize> = HashMap::new();
        for event in events {
            match index.get(event.stream_id.as_str()) {
                Some(&i) => {
                    if event.stream_version > streams[i].1.stream_version {
                        streams[i].1 = event;
                    }
                }
                None => {
                    index.insert(event.stream_id.as_str(), streams.len());
                    streams.push((event, event));
                }
            }
        }
        let rows = streams
            .iter()
            .map(|(first, last)| {
                json!({
                    "stream_id": last.stream_id,
                    "tenant_id": last.tenant_id.as_uuid(),
                    "stream_type": last.stream_type,
                    "version": last.stream_version,
                    "last_event_type": last.event_type,
                    "last_position": last.global_position,
                    "first_recorded_at": pg_timestamp(first.recorded_at),
                    "last_recorded_at": pg_timestamp(last.recorded_at),
                })
            })
            .collect();
        for chunk in json_row_chunks(rows) {
            tx.execute(
                "INSERT INTO stream_index (stream_id, tenant_id, stream_type, version, last_event_type, \
                   last_position, first_recorded_at, last_recorded_at) \
                 SELECT stream_id, tenant_id, stream_type, version, last_event_type, last_position, \
                   first_recorded_at, last_recorded_at \
                 FROM jsonb_to_recordset($1) AS r(stream_id text, tenant_id uuid, stream_type text, \
                   version bigint, last_event_type text, last_position bigint, \
                   first_recorded_at timestamptz, last_recorded_at timestamptz) \
                 ON CONFLICT (stream_id) DO UPDATE SET version = excluded.version, \
                   last_event_type = excluded.last_event_type, last_position = excluded.last_position, \
                   last_recorded_at = excluded.last_recorded_at \
                 WHERE stream_index.version < excluded.version",
                &[SqlValue::Json(chunk)],
            )
            .await?;
        }
        Ok(())
    }
}
