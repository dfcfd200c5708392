//! The [`Store`] trait on SQLite: appends through the group commit, reads, subscriptions and
//! their checkpoints, projection resets and rebuilds, and the read models' queries.

use async_trait::async_trait;
use kuatia_application::aggregate_cache::AggregateCache;
use kuatia_application::event_store::{
    AppendOutcome, AppendRequest, BatchOutcome, JsonEvent, ProjectionKind, ReadFilter, RecordedEvent, Store,
    StoreError, SubscriptionStatus,
};
use kuatia_application::projection::{Projection, SqlValue};
use sqlx::Row;
use tokio::sync::watch;

use super::read::stream_events;
use super::{SqliteStore, parse_time};
use crate::store::common::{upcast, upcast_json};
use crate::store::group;
use crate::store::sql_value::{bind_sqlite, decode_sqlite_row};
use crate::store::{db_error, write_error};

#[async_trait]
impl Store for SqliteStore {
    async fn append(&self, request: AppendRequest) -> Result<AppendOutcome, StoreError> {
        kuatia_application::statements::note();
        group::append_all(&self.group, &self.inner, vec![request])
            .await
            .pop()
            .unwrap_or_else(|| Err(StoreError::Invalid("no append result".into())))
    }

    async fn append_all(&self, requests: Vec<AppendRequest>) -> Vec<Result<AppendOutcome, StoreError>> {
        kuatia_application::statements::note();
        group::append_all(&self.group, &self.inner, requests).await
    }

    async fn load_stream(&self, stream_id: &str) -> Result<Vec<RecordedEvent>, StoreError> {
        self.load_stream_after(stream_id, 0).await
    }

    async fn load_stream_raw(
        &self,
        tenant: kuatia_domain::tenancy::TenantId,
        stream_id: &str,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        kuatia_application::statements::note();
        let mut conn = self.inner.pool.acquire().await.map_err(db_error)?;
        let events = stream_events(&mut conn, stream_id, 0, u64::MAX).await?;
        // Stream ids are unique across tenants; the tenant is checked all the same.
        Ok(events.into_iter().filter(|e| e.tenant_id == tenant).collect())
    }

    async fn load_stream_after(&self, stream_id: &str, after: u64) -> Result<Vec<RecordedEvent>, StoreError> {
        kuatia_application::statements::note();
        let mut conn = self.inner.pool.acquire().await.map_err(db_error)?;
        let events = stream_events(&mut conn, stream_id, after, u64::MAX).await?;
        Ok(events
            .into_iter()
            .map(|e| upcast(&self.inner.upcasters, e))
            .collect())
    }

    fn aggregate_cache(&self) -> Option<&AggregateCache> {
        Some(&self.inner.aggregates)
    }

    async fn read_all(&self, filter: &ReadFilter) -> Result<Vec<RecordedEvent>, StoreError> {
        let raw = self.read_all_raw(filter).await?;
        Ok(raw
            .into_iter()
            .map(|e| upcast(&self.inner.upcasters, e))
            .collect())
    }

    async fn read_all_raw(&self, filter: &ReadFilter) -> Result<Vec<RecordedEvent>, StoreError> {
        kuatia_application::statements::note();
        let mut conn = self.inner.pool.acquire().await.map_err(db_error)?;
        Self::read_raw_on(&mut conn, filter).await
    }

    async fn read_all_json(&self, filter: &ReadFilter) -> Result<Vec<JsonEvent>, StoreError> {
        let stored = self.read_all_raw_json(filter).await?;
        stored
            .into_iter()
            .map(|e| upcast_json(&self.inner.upcasters, e))
            .collect()
    }

    async fn read_all_raw_json(&self, filter: &ReadFilter) -> Result<Vec<JsonEvent>, StoreError> {
        kuatia_application::statements::note();
        let mut conn = self.inner.pool.acquire().await.map_err(db_error)?;
        Self::read_raw_on(&mut conn, filter).await
    }

    async fn head_position(&self) -> Result<i64, StoreError> {
        sqlx::query_scalar("SELECT COALESCE(max(global_position), 0) FROM events")
            .fetch_one(&self.inner.pool)
            .await
            .map_err(db_error)
    }

    fn position_hint(&self) -> watch::Receiver<i64> {
        self.inner.hint.subscribe()
    }

    async fn register_projection(&self, projection: &dyn Projection) -> Result<(), StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        sqlx::query(concat!(
            "INSERT INTO subscriptions (name, kind, updated_at) VALUES ($1, $2, ",
            now!(),
            ") ON CONFLICT (name) DO UPDATE SET kind = excluded.kind"
        ))
        .bind(projection.name())
        .bind(projection.kind().as_str())
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    async fn run_batch(
        &self,
        projection: &dyn Projection,
        max_events: usize,
    ) -> Result<BatchOutcome, StoreError> {
        // The write lock is the checkpoint lock: one batch at a time, and a batch in another
        // process waits for this one and then reads the moved checkpoint.
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let checkpoint: Option<i64> =
            sqlx::query_scalar("SELECT position FROM subscriptions WHERE name = $1")
                .bind(projection.name())
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_error)?;
        let Some(checkpoint) = checkpoint else {
            return Err(StoreError::Invalid(format!(
                "projection {} is not registered",
                projection.name()
            )));
        };
        let filter = ReadFilter {
            after: checkpoint,
            limit: max_events,
            ..ReadFilter::default()
        };
        let events = Self::read_raw_on(&mut tx, &filter).await?;
        let Some(last) = events.last().map(|e| e.global_position) else {
            return Ok(BatchOutcome::CaughtUp);
        };
        self.inner.apply_events(&mut tx, projection, &events).await?;
        sqlx::query(concat!(
            "UPDATE subscriptions SET position = $2, last_error = NULL, updated_at = ",
            now!(),
            " WHERE name = $1"
        ))
        .bind(projection.name())
        .bind(last)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(BatchOutcome::Applied {
            count: events.len(),
            position: last,
        })
    }

    async fn record_projection_error(&self, name: &str, error: &str) -> Result<(), StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        sqlx::query(concat!(
            "UPDATE subscriptions SET last_error = $2, updated_at = ",
            now!(),
            " WHERE name = $1"
        ))
        .bind(name)
        .bind(error)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    async fn reset_projection(&self, projection: &dyn Projection) -> Result<(), StoreError> {
        if projection.kind() == ProjectionKind::SideEffect {
            return Err(StoreError::Invalid(format!(
                "{} has side effects and is never rebuilt",
                projection.name()
            )));
        }
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let updated = sqlx::query(concat!(
            "UPDATE subscriptions SET position = 0, last_error = NULL, updated_at = ",
            now!(),
            " WHERE name = $1"
        ))
        .bind(projection.name())
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::Invalid(format!(
                "projection {} is not registered",
                projection.name()
            )));
        }
        Self::delete_tables(&mut tx, projection).await?;
        tx.commit().await.map_err(db_error)
    }

    async fn rebuild_inline(
        &self,
        projection: &dyn Projection,
        progress: &(dyn Fn(i64, i64) + Send + Sync),
    ) -> Result<u64, StoreError> {
        if projection.kind() != ProjectionKind::Inline {
            return Err(StoreError::Invalid(format!(
                "{} is not an inline projection",
                projection.name()
            )));
        }
        let (_guard, mut tx) = self.inner.begin_write().await?;
        Self::delete_tables(&mut tx, projection).await?;
        let head: i64 = sqlx::query_scalar("SELECT COALESCE(max(global_position), 0) FROM events")
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
        let mut position = 0;
        let mut applied = 0u64;
        loop {
            let filter = ReadFilter {
                after: position,
                limit: 1000,
                // Only the streams it reads: the store skips the rest (issue 30: `access` read
                // 2 M events to use a few hundred).
                stream_types: projection.stream_types(),
                ..ReadFilter::default()
            };
            let events = Self::read_raw_on(&mut tx, &filter).await?;
            let Some(last) = events.last().map(|e| e.global_position) else {
                break;
            };
            applied += events.len() as u64;
            self.inner.apply_events(&mut tx, projection, &events).await?;
            position = last;
            progress(position, head);
        }
        sqlx::query(concat!(
            "INSERT INTO subscriptions (name, kind, position, updated_at) VALUES ($1, 'inline', $2, ",
            now!(),
            ") ON CONFLICT (name) DO UPDATE SET position = excluded.position, last_error = NULL, \
               updated_at = excluded.updated_at"
        ))
        .bind(projection.name())
        .bind(head)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(applied)
    }

    async fn subscription_statuses(&self) -> Result<Vec<SubscriptionStatus>, StoreError> {
        let head = self.head_position().await?;
        let rows = sqlx::query(
            "SELECT name, kind, position, last_error, updated_at FROM subscriptions ORDER BY name",
        )
        .fetch_all(&self.inner.pool)
        .await
        .map_err(db_error)?;
        rows.iter()
            .map(|row| {
                let kind: String = row.try_get("kind").map_err(db_error)?;
                let position = if kind == "inline" {
                    head
                } else {
                    row.try_get("position").map_err(db_error)?
                };
                let updated_at: String = row.try_get("updated_at").map_err(db_error)?;
                Ok(SubscriptionStatus {
                    name: row.try_get("name").map_err(db_error)?,
                    kind,
                    position,
                    lag: head - position,
                    last_error: row.try_get("last_error").map_err(db_error)?,
                    updated_at: Some(parse_time("updated_at", &updated_at)?),
                })
            })
            .collect()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.inner.pool)
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn query(&self, sql: &'static str, params: &[SqlValue]) -> Result<Vec<Vec<SqlValue>>, StoreError> {
        kuatia_application::statements::note();
        let rows = bind_sqlite(sqlx::query(sql), params)
            .fetch_all(&self.inner.pool)
            .await
            .map_err(db_error)?;
        rows.iter().map(decode_sqlite_row).collect()
    }

    async fn execute(&self, sql: &'static str, params: &[SqlValue]) -> Result<u64, StoreError> {
        kuatia_application::statements::note();
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let affected = bind_sqlite(sqlx::query(sql), params)
            .execute(&mut *tx)
            .await
            .map(|r| r.rows_affected())
            .map_err(write_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(affected)
    }
}
