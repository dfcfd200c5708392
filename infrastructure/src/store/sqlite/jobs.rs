//! The job queue on SQLite: writing jobs inside a transaction, claiming them in the write
//! transaction, finishing, retrying and listing them.

use async_trait::async_trait;
use kuatia_application::event_store::StoreError;
use kuatia_application::hash::format_timestamp;
use kuatia_application::jobs::{
    Job, JobCount, JobFilter, JobListStatus, JobQueue, JobState, NewJob, RELEASED,
};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use std::time::Duration;
use uuid::Uuid;

use super::{SqliteStore, parse_json, parse_time, parse_uuid};
use crate::store::common::tenant;
use crate::store::db_error;

macro_rules! job_columns {
    () => {
        "id, kind, idempotency_key, tenant_id, payload, state, attempts, max_attempts, next_attempt_at, \
         lease_owner, lease_expires_at, last_error"
    };
}

fn seconds(d: Duration) -> String {
    format!("+{:.3} seconds", d.as_secs_f64())
}

fn job_from_row(row: &SqliteRow) -> Result<Job, StoreError> {
    let corrupt = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let text = |name: &str| row.try_get::<String, _>(name).map_err(corrupt);
    let opt_text = |name: &str| row.try_get::<Option<String>, _>(name).map_err(corrupt);
    let state = text("state")?;
    Ok(Job {
        id: parse_uuid("id", &text("id")?)?,
        kind: text("kind")?,
        idempotency_key: text("idempotency_key")?,
        tenant_id: tenant(parse_uuid("tenant_id", &text("tenant_id")?)?),
        payload: parse_json("payload", &text("payload")?)?,
        state: JobState::parse(&state).ok_or_else(|| StoreError::Corrupt(format!("job state {state}")))?,
        attempts: row.try_get::<i64, _>("attempts").map_err(corrupt)? as u32,
        max_attempts: row.try_get::<i64, _>("max_attempts").map_err(corrupt)? as u32,
        next_attempt_at: parse_time("next_attempt_at", &text("next_attempt_at")?)?,
        lease_owner: opt_text("lease_owner")?,
        lease_expires_at: opt_text("lease_expires_at")?
            .map(|t| parse_time("lease_expires_at", &t))
            .transpose()?,
        last_error: opt_text("last_error")?,
    })
}

/// Writes a job on an open connection (inside the caller's transaction).
pub(crate) async fn insert_job(conn: &mut SqliteConnection, job: &NewJob) -> Result<bool, StoreError> {
    let result = sqlx::query(concat!(
        "INSERT INTO jobs (id, tenant_id, kind, idempotency_key, payload, state, max_attempts, next_attempt_at, \
           created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, 'pending', $6, COALESCE($7, ",
        now!(),
        "), ",
        now!(),
        ", ",
        now!(),
        ") ON CONFLICT (idempotency_key) DO NOTHING"
    ))
    .bind(Uuid::now_v7().to_string())
    .bind(job.tenant_id.as_uuid().to_string())
    .bind(&job.kind)
    .bind(&job.idempotency_key)
    .bind(job.payload.to_string())
    .bind(i64::from(job.max_attempts.max(1)))
    .bind(job.run_at.map(format_timestamp))
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(result.rows_affected() == 1)
}

#[async_trait]
impl JobQueue for SqliteStore {
    async fn enqueue(&self, job: &NewJob) -> Result<bool, StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let inserted = insert_job(&mut tx, job).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(inserted)
    }

    async fn claim(
        &self,
        worker: &str,
        kinds: &[String],
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, StoreError> {
        let kinds = serde_json::to_string(kinds).map_err(|e| StoreError::Invalid(e.to_string()))?;
        let (_guard, mut tx) = self.inner.begin_write().await?;
        sqlx::query(concat!(
            "UPDATE jobs SET state = 'dead', lease_owner = NULL, lease_expires_at = NULL, updated_at = ",
            now!(),
            ", last_error = COALESCE(last_error || '; ', '') || 'lease expired during the last attempt' \
             WHERE state = 'running' AND lease_expires_at < ",
            now!(),
            " AND attempts >= max_attempts"
        ))
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        let rows = sqlx::query(concat!(
            "UPDATE jobs SET state = 'running', lease_owner = $1, attempts = attempts + 1, lease_expires_at = ",
            now_plus!("$2"),
            ", updated_at = ",
            now!(),
            // Two searches of `jobs_due_by_kind_idx` (state, kind, due time); one OR of both
            // made SQLite scan the table.
            " WHERE id IN ( \
               SELECT id FROM ( \
                 SELECT id, next_attempt_at FROM jobs \
                 WHERE state = 'pending' AND kind IN (SELECT value FROM json_each($3)) \
                   AND next_attempt_at <= ",
            now!(),
            " AND attempts < max_attempts \
                 UNION ALL \
                 SELECT id, next_attempt_at FROM jobs \
                 WHERE state = 'running' AND kind IN (SELECT value FROM json_each($3)) \
                   AND lease_expires_at < ",
            now!(),
            " AND attempts < max_attempts) \
               ORDER BY next_attempt_at LIMIT $4) \
             RETURNING ",
            job_columns!()
        ))
        .bind(worker)
        .bind(seconds(lease))
        .bind(kinds)
        .bind(limit.max(1) as i64)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error)?;
        let jobs = rows.iter().map(job_from_row).collect::<Result<Vec<_>, _>>()?;
        tx.commit().await.map_err(db_error)?;
        Ok(jobs)
    }

    async fn prune_succeeded(&self, age: Duration, limit: usize) -> Result<u64, StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let result = sqlx::query(concat!(
            "DELETE FROM jobs WHERE id IN ( \
               SELECT id FROM jobs WHERE state = 'succeeded' AND updated_at < ",
            now_plus!("$1"),
            " LIMIT $2)"
        ))
        .bind(format!("-{:.3} seconds", age.as_secs_f64()))
        .bind(limit.max(1) as i64)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(result.rows_affected())
    }

    async fn complete(&self, job_id: Uuid, worker: &str) -> Result<bool, StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let result = sqlx::query(concat!(
            "UPDATE jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL, updated_at = ",
            now!(),
            " WHERE id = $1 AND lease_owner = $2 AND state = 'running'"
        ))
        .bind(job_id.to_string())
        .bind(worker)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(result.rows_affected() == 1)
    }

    async fn fail(
        &self,
        job_id: Uuid,
        worker: &str,
        error: &str,
        retry_in: Option<Duration>,
    ) -> Result<Option<JobState>, StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let state: Option<String> = sqlx::query_scalar(concat!(
            "UPDATE jobs SET \
               state = CASE WHEN $3 IS NULL OR attempts >= max_attempts THEN 'dead' ELSE 'pending' END, \
               next_attempt_at = CASE WHEN $3 IS NULL THEN next_attempt_at ELSE ",
            now_plus!("$3"),
            " END, last_error = $4, lease_owner = NULL, lease_expires_at = NULL, updated_at = ",
            now!(),
            " WHERE id = $1 AND lease_owner = $2 AND state = 'running' RETURNING state"
        ))
        .bind(job_id.to_string())
        .bind(worker)
        .bind(retry_in.map(seconds))
        .bind(error)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(state.as_deref().and_then(JobState::parse))
    }

    async fn extend_lease(&self, job_id: Uuid, worker: &str, lease: Duration) -> Result<bool, StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let result = sqlx::query(concat!(
            "UPDATE jobs SET lease_expires_at = ",
            now_plus!("$3"),
            ", updated_at = ",
            now!(),
            " WHERE id = $1 AND lease_owner = $2 AND state = 'running'"
        ))
        .bind(job_id.to_string())
        .bind(worker)
        .bind(seconds(lease))
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(result.rows_affected() == 1)
    }

    async fn release(&self, worker: &str) -> Result<u64, StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let result = sqlx::query(concat!(
            "UPDATE jobs SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL, \
               attempts = max(attempts - 1, 0), last_error = COALESCE(last_error || '; ', '') || $2, \
               next_attempt_at = ",
            now!(),
            ", updated_at = ",
            now!(),
            " WHERE lease_owner = $1 AND state = 'running'"
        ))
        .bind(worker)
        .bind(RELEASED)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(result.rows_affected())
    }

    async fn get(&self, job_id: Uuid) -> Result<Option<Job>, StoreError> {
        let row = sqlx::query(concat!("SELECT ", job_columns!(), " FROM jobs WHERE id = $1"))
            .bind(job_id.to_string())
            .fetch_optional(&self.inner.pool)
            .await
            .map_err(db_error)?;
        row.as_ref().map(job_from_row).transpose()
    }

    async fn get_by_key(&self, key: &str) -> Result<Option<Job>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            job_columns!(),
            " FROM jobs WHERE idempotency_key = $1"
        ))
        .bind(key)
        .fetch_optional(&self.inner.pool)
        .await
        .map_err(db_error)?;
        row.as_ref().map(job_from_row).transpose()
    }

    async fn list(&self, filter: &JobFilter) -> Result<Vec<Job>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            job_columns!(),
            " FROM jobs WHERE ($1 IS NULL OR state = $1) AND ($2 = 0 OR last_error IS NOT NULL) \
              AND ($3 IS NULL OR kind = $3) \
              AND ($4 IS NULL OR payload LIKE $4 OR idempotency_key LIKE $4) \
              ORDER BY updated_at DESC, id DESC LIMIT $5"
        ))
        .bind(filter.status.map(|s| s.state().as_str()))
        .bind(i64::from(filter.status == Some(JobListStatus::Failed)))
        .bind(filter.kind.clone())
        .bind(filter.document_pattern())
        .bind(filter.limit.clamp(1, 100_000) as i64)
        .fetch_all(&self.inner.pool)
        .await
        .map_err(db_error)?;
        rows.iter().map(job_from_row).collect()
    }

    async fn retry(&self, job_id: Uuid) -> Result<Option<Job>, StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let result = sqlx::query(concat!(
            "UPDATE jobs SET state = 'pending', max_attempts = max(max_attempts, attempts + 1), \
               next_attempt_at = ",
            now!(),
            ", updated_at = ",
            now!(),
            " WHERE id = $1 AND state IN ('pending', 'dead')"
        ))
        .bind(job_id.to_string())
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        if result.rows_affected() == 0 {
            return Ok(None);
        }
        self.get(job_id).await
    }

    async fn discard(&self, job_id: Uuid, note: &str) -> Result<Option<Job>, StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let result = sqlx::query(concat!(
            "UPDATE jobs SET state = 'dead', last_error = $2, updated_at = ",
            now!(),
            " WHERE id = $1 AND state = 'pending'"
        ))
        .bind(job_id.to_string())
        .bind(note)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        if result.rows_affected() == 0 {
            return Ok(None);
        }
        self.get(job_id).await
    }

    async fn counts(&self) -> Result<Vec<JobCount>, StoreError> {
        let rows = sqlx::query(
            "SELECT kind, state, count(*) AS n FROM jobs GROUP BY kind, state ORDER BY kind, state",
        )
        .fetch_all(&self.inner.pool)
        .await
        .map_err(db_error)?;
        rows.iter()
            .map(|row| {
                let state: String = row.try_get("state").map_err(db_error)?;
                Ok(JobCount {
                    kind: row.try_get("kind").map_err(db_error)?,
                    state: JobState::parse(&state)
                        .ok_or_else(|| StoreError::Corrupt(format!("job state {state}")))?,
                    count: row.try_get("n").map_err(db_error)?,
                })
            })
            .collect()
    }
}
