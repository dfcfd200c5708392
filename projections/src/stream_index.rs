//! `stream_index` (inline): one row per stream with its version and last event, updated in the
//! append transaction so a client reads its own write at once.

use async_trait::async_trait;
use kuatia_application::event_store::{ProjectionKind, RecordedEvent, StoreError};
use kuatia_application::projection::{Projection, SqlTx, SqlValue};

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
}
