//! Appending: one grouped write transaction (heads, inserts, jobs) and the inline projections
//! applied inside it.

use async_trait::async_trait;
use kuatia_application::event_store::{AppendOutcome, AppendRequest, RecordedEvent, StoreError};
use kuatia_application::projection::Projection;
use sqlx::{Row, SqliteConnection};
use std::collections::HashMap;

use super::jobs::insert_job;
use super::{SqliteInner, parse_time, parse_uuid};
use crate::store::common::{StreamHead, is_unique_violation, outcomes, plan, raise, upcast};
use crate::store::db_error;
use crate::store::group::BatchAppend;
use crate::store::sql_value::SqliteSqlTx;
use kuatia_application::hash::format_timestamp;

impl SqliteInner {
    pub(super) async fn apply_events(
        &self,
        conn: &mut SqliteConnection,
        projection: &dyn Projection,
        events: &[RecordedEvent],
    ) -> Result<(), StoreError> {
        for event in events {
            let event = upcast(&self.upcasters, event.clone());
            let mut tx = SqliteSqlTx {
                conn: &mut *conn,
                upcasters: &self.upcasters,
            };
            projection
                .apply(&mut tx, &event)
                .await
                .map_err(|e| StoreError::Projection {
                    name: projection.name().to_owned(),
                    message: format!("at position {}: {e}", event.global_position),
                })?;
        }
        Ok(())
    }
}

#[async_trait]
impl BatchAppend for SqliteInner {
    async fn append_batch(
        &self,
        requests: &[AppendRequest],
    ) -> Result<Vec<Result<AppendOutcome, StoreError>>, StoreError> {
        let (_guard, mut tx) = self.begin_write().await?;
        let now: String = sqlx::query_scalar(concat!("SELECT ", now!()))
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
        let now = parse_time("now", &now)?;
        let mut heads = HashMap::new();
        for request in requests {
            let stream_id = &request.stream.stream_id;
            if heads.contains_key(stream_id) {
                continue;
            }
            let row = sqlx::query(
                "SELECT stream_version, hash, tenant_id, stream_type FROM events \
                 WHERE stream_id = $1 ORDER BY stream_version DESC LIMIT 1",
            )
            .bind(stream_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_error)?;
            if let Some(row) = row {
                heads.insert(
                    stream_id.clone(),
                    StreamHead {
                        version: row.try_get::<i64, _>("stream_version").map_err(db_error)? as u64,
                        hash: row.try_get("hash").map_err(db_error)?,
                        tenant_id: parse_uuid(
                            "tenant_id",
                            &row.try_get::<String, _>("tenant_id").map_err(db_error)?,
                        )?,
                        stream_type: row.try_get("stream_type").map_err(db_error)?,
                    },
                );
            }
        }
        let (mut planned, refusals) = plan(requests, &mut heads, now);
        for p in &mut planned {
            let metadata = serde_json::to_string(&requests[p.index].metadata)
                .map_err(|e| StoreError::Invalid(e.to_string()))?;
            for event in &mut p.events {
                let inserted = sqlx::query_scalar::<_, i64>(
                    "INSERT INTO events (event_id, tenant_id, stream_type, stream_id, stream_version, event_type, \
                       schema_version, payload, metadata, recorded_at, prev_hash, hash) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING global_position",
                )
                .bind(event.event_id.to_string())
                .bind(event.tenant_id.as_uuid().to_string())
                .bind(&event.stream_type)
                .bind(&event.stream_id)
                .bind(event.stream_version as i64)
                .bind(&event.event_type)
                .bind(i64::from(event.schema_version))
                .bind(event.payload.to_string())
                .bind(&metadata)
                .bind(format_timestamp(event.recorded_at))
                .bind(&event.prev_hash)
                .bind(&event.hash)
                .fetch_one(&mut *tx)
                .await;
                event.global_position = match inserted {
                    Ok(position) => position,
                    Err(err) if is_unique_violation(&err, "events_stream_version_key") => {
                        return Err(StoreError::VersionConflict {
                            stream_id: event.stream_id.clone(),
                            expected: requests[p.index].expected,
                            actual: p.current,
                        });
                    }
                    Err(err) => return Err(db_error(err)),
                };
            }
        }
        let events: Vec<RecordedEvent> = planned.iter().flat_map(|p| p.events.iter().cloned()).collect();
        for projection in &self.inline {
            self.apply_events(&mut tx, projection.as_ref(), &events).await?;
        }
        for p in &planned {
            for job in &requests[p.index].jobs {
                insert_job(&mut tx, job).await?;
            }
        }
        tx.commit().await.map_err(db_error)?;
        if let Some(last) = events.last() {
            raise(&self.hint, last.global_position);
        }
        Ok(outcomes(planned, refusals))
    }
}
