//! `event_type_counts` (catch-up): how many events of each type each tenant has, per stream type.
//! Operators read it to see activity; it is the foundation's example of an eventually consistent
//! read model with its checkpoint moved in the same transaction as its rows.

use async_trait::async_trait;
use kuatia_application::event_store::{ProjectionKind, RecordedEvent, StoreError};
use kuatia_application::projection::{Projection, SqlTx, SqlValue};

/// The projection.
#[derive(Debug, Default, Clone, Copy)]
pub struct EventTypeCounts;

impl EventTypeCounts {
    /// Its stable name.
    pub const NAME: &'static str = "event_type_counts";
}

#[async_trait]
impl Projection for EventTypeCounts {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn kind(&self) -> ProjectionKind {
        ProjectionKind::CatchUp
    }

    fn tables(&self) -> &'static [&'static str] {
        &["event_type_counts"]
    }

    async fn apply(&self, tx: &mut dyn SqlTx, event: &RecordedEvent) -> Result<(), StoreError> {
        // Events reach a row in position order, so "only past last_position" makes a second
        // delivery of the same event change nothing.
        tx.execute(
            "INSERT INTO event_type_counts (tenant_id, stream_type, event_type, events, last_position) \
             VALUES ($1, $2, $3, 1, $4) \
             ON CONFLICT (tenant_id, stream_type, event_type) DO UPDATE SET \
               events = event_type_counts.events + 1, last_position = excluded.last_position \
             WHERE event_type_counts.last_position < excluded.last_position",
            &[
                SqlValue::Uuid(event.tenant_id.as_uuid()),
                SqlValue::Text(event.stream_type.clone()),
                SqlValue::Text(event.event_type.clone()),
                SqlValue::Int(event.global_position),
            ],
        )
        .await?;
        Ok(())
    }
}
