//! Appending: one grouped transaction under [`APPEND_LOCK`] (heads, positions, multi-row
//! inserts, jobs) and the inline projections applied inside it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use kuatia_application::event_store::{AppendOutcome, AppendRequest, RecordedEvent, StoreError};
use kuatia_application::jobs::NewJob;
use kuatia_application::projection::{MAX_JSON_PARAM_BYTES, Projection};
use kuatia_application::upcast::UpcasterChain;
use sqlx::{PgConnection, Row};
use std::collections::HashMap;
use std::sync::Arc;

use super::jobs::insert_jobs;
use super::{APPEND_LOCK, PgInner};
use crate::store::common::{Planned, StreamHead, is_unique_violation, outcomes, plan, raise, upcast};
use crate::store::db_error;
use crate::store::group::BatchAppend;
use crate::store::sql_value::PgSqlTx;

/// Largest bind message of one INSERT. sqlx 0.9.0 no longer sets TCP_NODELAY
/// (transact-rs/sqlx#4335, fixed upstream by #4336 but not released as of 0.9.0): a message that
/// TLS cuts into several 16 KiB records then waits ~40 ms for a delayed ACK (Nagle). Keeping each
/// statement within one record avoids the stall; drop this split once sqlx sets TCP_NODELAY again.
const MAX_STATEMENT_BYTES: usize = MAX_JSON_PARAM_BYTES;

#[async_trait]
impl BatchAppend for PgInner {
    async fn append_batch(
        &self,
        requests: &[AppendRequest],
    ) -> Result<Vec<Result<AppendOutcome, StoreError>>, StoreError> {
        let mut tx = self.pool.begin().await.map_err(db_error)?;
        // The lock comes first: positions are drawn only while holding it. The time is read in
        // the same statement, after the lock is granted (one round trip fewer while it is held).
        let now: DateTime<Utc> =
            sqlx::query_scalar("SELECT clock_timestamp() FROM (SELECT pg_advisory_xact_lock($1)) AS locked")
                .bind(APPEND_LOCK)
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error)?;
        let mut stream_ids: Vec<String> = requests.iter().map(|r| r.stream.stream_id.clone()).collect();
        stream_ids.sort();
        stream_ids.dedup();
        let head_rows = sqlx::query(
            // One backward index probe per stream (DISTINCT ON would read every version of it).
            "SELECT s.id AS stream_id, h.stream_version, h.hash, h.tenant_id, h.stream_type \
             FROM UNNEST($1::text[]) AS s(id) JOIN LATERAL ( \
               SELECT stream_version, hash, tenant_id, stream_type FROM events \
               WHERE stream_id = s.id ORDER BY stream_version DESC LIMIT 1) AS h ON true",
        )
        .bind(&stream_ids)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error)?;
        let mut heads = HashMap::with_capacity(head_rows.len());
        for row in &head_rows {
            heads.insert(
                row.try_get::<String, _>("stream_id").map_err(db_error)?,
                StreamHead {
                    version: row.try_get::<i64, _>("stream_version").map_err(db_error)? as u64,
                    hash: row.try_get("hash").map_err(db_error)?,
                    tenant_id: row.try_get("tenant_id").map_err(db_error)?,
                    stream_type: row.try_get("stream_type").map_err(db_error)?,
                },
            );
        }
        let (mut planned, refusals) = plan(requests, &mut heads, now);
        let total: usize = planned.iter().map(|p| p.events.len()).sum();
        if total > 0 {
            let mut positions: Vec<i64> = sqlx::query_scalar(
                "SELECT nextval('events_global_position_seq') FROM generate_series(1, $1)",
            )
            .bind(total as i64)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?;
            positions.sort_unstable();
            let mut next = positions.into_iter();
            for event in planned.iter_mut().flat_map(|p| p.events.iter_mut()) {
                event.global_position = next
                    .next()
                    .ok_or_else(|| StoreError::Corrupt("too few positions".into()))?;
            }
            self.insert_events(&mut tx, requests, &planned).await?;
            let events: Vec<RecordedEvent> = planned.iter().flat_map(|p| p.events.iter().cloned()).collect();
            self.apply_inline(&mut tx, &events).await?;
            let jobs: Vec<&NewJob> = planned
                .iter()
                .flat_map(|p| requests[p.index].jobs.iter())
                .collect();
            insert_jobs(&mut tx, &jobs).await?;
        }
        tx.commit().await.map_err(db_error)?;
        if let Some(last) = planned
            .iter()
            .flat_map(|p| p.events.last())
            .map(|e| e.global_position)
            .max()
        {
            raise(&self.hint, last);
        }
        Ok(outcomes(planned, refusals))
    }
}

impl PgInner {
    /// Inserts the planned events, as few statements as possible but each under
    /// [`MAX_STATEMENT_BYTES`].
    async fn insert_events(
        &self,
        conn: &mut PgConnection,
        requests: &[AppendRequest],
        planned: &[Planned],
    ) -> Result<(), StoreError> {
        let mut rows: Vec<(&RecordedEvent, Arc<str>)> = Vec::new();
        for p in planned {
            let metadata: Arc<str> = serde_json::to_string(&requests[p.index].metadata)
                .map_err(|e| StoreError::Invalid(e.to_string()))?
                .into();
            rows.extend(p.events.iter().map(|e| (e, metadata.clone())));
        }
        let mut chunk_start = 0;
        let mut chunk_bytes = 0;
        for (i, (event, metadata)) in rows.iter().enumerate() {
            // Payload length is a close upper bound of its JSON text; the rest is ids and hashes.
            let bytes = 300 + metadata.len() + event.payload.to_string().len();
            if i > chunk_start && chunk_bytes + bytes > MAX_STATEMENT_BYTES {
                Self::insert_chunk(&mut *conn, &rows[chunk_start..i]).await?;
                chunk_start = i;
                chunk_bytes = 0;
            }
            chunk_bytes += bytes;
        }
        Self::insert_chunk(conn, &rows[chunk_start..])
            .await
            .map_err(|err| match err {
                StoreError::VersionConflict { .. } => {
                    let first = &planned[0];
                    StoreError::VersionConflict {
                        stream_id: requests[first.index].stream.stream_id.clone(),
                        expected: requests[first.index].expected,
                        actual: first.current,
                    }
                }
                other => other,
            })
    }

    /// One multi-row INSERT.
    async fn insert_chunk(
        conn: &mut PgConnection,
        rows: &[(&RecordedEvent, Arc<str>)],
    ) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let n = rows.len();
        let mut positions = Vec::with_capacity(n);
        let mut ids = Vec::with_capacity(n);
        let mut tenants = Vec::with_capacity(n);
        let mut types = Vec::with_capacity(n);
        let mut streams = Vec::with_capacity(n);
        let mut versions = Vec::with_capacity(n);
        let mut names = Vec::with_capacity(n);
        let mut schemas = Vec::with_capacity(n);
        let mut payloads = Vec::with_capacity(n);
        let mut metadata = Vec::with_capacity(n);
        let mut prevs = Vec::with_capacity(n);
        let mut hashes = Vec::with_capacity(n);
        let mut recorded = Vec::with_capacity(n);
        for (e, meta) in rows {
            positions.push(e.global_position);
            ids.push(e.event_id);
            tenants.push(e.tenant_id.as_uuid());
            types.push(e.stream_type.clone());
            streams.push(e.stream_id.clone());
            versions.push(e.stream_version as i64);
            names.push(e.event_type.clone());
            schemas.push(e.schema_version as i32);
            // Sent as text and cast to json, so the server stores exactly the hashed bytes.
            payloads.push(e.payload.to_string());
            metadata.push(meta.to_string());
            prevs.push(e.prev_hash.clone());
            hashes.push(e.hash.clone());
            recorded.push(e.recorded_at);
        }
        let inserted = sqlx::query(
            "INSERT INTO events (global_position, event_id, tenant_id, stream_type, stream_id, stream_version, \
               event_type, schema_version, payload, metadata, recorded_at, prev_hash, hash) \
             SELECT t.position, t.id, t.tenant, t.stype, t.stream, t.version, t.name, t.schema, \
               t.payload::json, t.metadata::json, t.recorded, t.prev, t.hash \
             FROM UNNEST($1::bigint[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::bigint[], \
               $7::text[], $8::int[], $9::text[], $10::text[], $11::timestamptz[], $12::text[], $13::text[]) \
               AS t(position, id, tenant, stype, stream, version, name, schema, payload, metadata, recorded, prev, hash)",
        )
        .bind(&positions)
        .bind(&ids)
        .bind(&tenants)
        .bind(&types)
        .bind(&streams)
        .bind(&versions)
        .bind(&names)
        .bind(&schemas)
        .bind(&payloads)
        .bind(&metadata)
        .bind(&recorded)
        .bind(&prevs)
        .bind(&hashes)
        .execute(conn)
        .await;
        match inserted {
            Ok(_) => Ok(()),
            // Only possible if something bypassed the append lock; the bisecting retry then
            // reports it on the request it belongs to.
            Err(err) if is_unique_violation(&err, "events_stream_version_key") => {
                Err(StoreError::VersionConflict {
                    stream_id: rows[0].0.stream_id.clone(),
                    expected: kuatia_application::event_store::ExpectedVersion::Any,
                    actual: 0,
                })
            }
            Err(err) if is_unique_violation(&err, "events_event_id_key") => {
                Err(StoreError::Invalid("an event id is already stored".into()))
            }
            Err(err) => Err(db_error(err)),
        }
    }

    async fn apply_inline(
        &self,
        conn: &mut PgConnection,
        events: &[RecordedEvent],
    ) -> Result<(), StoreError> {
        if self.inline.is_empty() {
            return Ok(());
        }
        let events: Vec<RecordedEvent> = events
            .iter()
            .map(|event| upcast(&self.upcasters, event.clone()))
            .collect();
        for projection in &self.inline {
            Self::apply_all(&mut *conn, &self.upcasters, projection.as_ref(), &events).await?;
        }
        Ok(())
    }

    /// A projection's `apply_all` on upcast events.
    pub(super) async fn apply_all(
        conn: &mut PgConnection,
        upcasters: &UpcasterChain,
        projection: &dyn Projection,
        events: &[RecordedEvent],
    ) -> Result<(), StoreError> {
        let mut tx = PgSqlTx { conn, upcasters };
        projection
            .apply_all(&mut tx, events)
            .await
            .map_err(|e| StoreError::Projection {
                name: projection.name().to_owned(),
                message: e.to_string(),
            })
    }
}
