//! `event_type_counts` (catch-up): how many events of each type each tenant has, per stream type.
//! Operators read it to see activity; it is the foundation's example of an eventually consistent
//! read model with its checkpoint moved in the same transaction as its rows.

use async_trait::async_trait;
use kuatia_application::event_store::{ProjectionKind, RecordedEvent, StoreError};
use kuatia_application::projection::{Backend, Projection, SqlTx, SqlValue, json_row_chunks};
use serde_json::json;

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

    /// On PostgreSQL, one statement per
    /// [`MAX_JSON_PARAM_BYTES`](kuatia_application::projection::MAX_JSON_PARAM_BYTES) of
    /// (tenant, stream type, event type) rows for the whole batch instead of one per event
    /// (a catch-up batch is up to hundreds of events): each row counts the batch's events past its
    /// `last_position`, exactly what `apply` does event by event.
    async fn apply_all(&self, tx: &mut dyn SqlTx, events: &[RecordedEvent]) -> Result<(), StoreError> {
        if tx.backend() != Backend::Postgres {
            return self.apply_each(tx, events).await;
        }
        // Per type, in order of first appearance: its events' positions, ascending.
        let mut types: Vec<(&RecordedEvent, Vec<i64>)> = Vec::new();
        for event in events {
            let same = |(e, _): &&mut (&RecordedEvent, Vec<i64>)| {
                e.tenant_id == event.tenant_id
                    && e.stream_type == event.stream_type
                    && e.event_type == event.event_type
            };
            match types.iter_mut().find(same) {
                Some((_, positions)) => positions.push(event.global_position),
                None => types.push((event, vec![event.global_position])),
            }
        }
        let rows = types
            .into_iter()
            .map(|(e, positions)| {
                json!({
                    "tenant_id": e.tenant_id.as_uuid(),
                    "stream_type": e.stream_type,
                    "event_type": e.event_type,
                    "positions": positions,
                })
            })
            .collect();
        for chunk in json_row_chunks(rows) {
            // One runner at a time (the checkpoint row is locked): rows that exist count the
            // positions past theirs, the others are created from the batch.
            tx.execute(
                "WITH r AS (SELECT * FROM jsonb_to_recordset($1) \
                   AS r(tenant_id uuid, stream_type text, event_type text, positions bigint[])), \
                 moved AS (UPDATE event_type_counts AS c SET \
                     events = c.events + (SELECT count(*) FROM unnest(r.positions) AS p WHERE p > c.last_position), \
                     last_position = GREATEST(c.last_position, r.positions[cardinality(r.positions)]) \
                   FROM r WHERE c.tenant_id = r.tenant_id AND c.stream_type = r.stream_type \
                     AND c.event_type = r.event_type \
                   RETURNING c.tenant_id) \
                 INSERT INTO event_type_counts (tenant_id, stream_type, event_type, events, last_position) \
                 SELECT r.tenant_id, r.stream_type, r.event_type, cardinality(r.positions), \
                   r.positions[cardinality(r.positions)] FROM r \
                 WHERE NOT EXISTS (SELECT 1 FROM event_type_counts AS c WHERE c.tenant_id = r.tenant_id \
                   AND c.stream_type = r.stream_type AND c.event_type = r.event_type)",
                &[SqlValue::Json(chunk)],
            )
            .await?;
        }
        Ok(())
    }
}
