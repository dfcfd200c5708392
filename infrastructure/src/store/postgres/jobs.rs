//! The job queue on PostgreSQL: writing jobs inside a transaction, claiming them with
//! `FOR UPDATE SKIP LOCKED`, finishing, retrying and listing them.

use async_trait::async_trait;
use kuatia_application::event_store::StoreError;
use kuatia_application::jobs::{
    Job, JobCount, JobFilter, JobListStatus, JobQueue, JobState, NewJob, RELEASED,
};
use kuatia_application::projection::{json_row_chunks, pg_timestamp};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};
use std::time::Duration;
use uuid::Uuid;

use super::PgStore;
use crate::store::common::tenant;
use crate::store::db_error;

macro_rules! job_columns {
    () => {
        "id, kind, idempotency_key, tenant_id, payload, state, attempts, max_attempts, next_attempt_at, \
         lease_owner, lease_expires_at, last_error"
    };
}

fn job_from_row(row: &PgRow) -> Result<Job, StoreError> {
    let corrupt = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let state: String = row.try_get("state").map_err(corrupt)?;
    Ok(Job {
        id: row.try_get("id").map_err(corrupt)?,
        kind: row.try_get("kind").map_err(corrupt)?,
        idempotency_key: row.try_get("idempotency_key").map_err(corrupt)?,
        tenant_id: tenant(row.try_get("tenant_id").map_err(corrupt)?),
        payload: row.try_get("payload").map_err(corrupt)?,
        state: JobState::parse(&state).ok_or_else(|| StoreError::Corrupt(format!("job state {state}")))?,
        attempts: row.try_get::<i32, _>("attempts").map_err(corrupt)? as u32,
        max_attempts: row.try_get::<i32, _>("max_attempts").map_err(corrupt)? as u32,
        next_attempt_at: row.try_get("next_attempt_at").map_err(corrupt)?,
        lease_owner: row.try_get("lease_owner").map_err(corrupt)?,
        lease_expires_at: row.try_get("lease_expires_at").map_err(corrupt)?,
        last_error: row.try_get("last_error").map_err(corrupt)?,
    })
}

/// Writes jobs on an open connection (inside the caller's transaction) in as few statements as
/// [`MAX_JSON_PARAM_BYTES`] of rows allow; a duplicate idempotency key is skipped, as
/// [`insert_job`] skips it.
///
/// [`MAX_JSON_PARAM_BYTES`]: kuatia_application::projection::MAX_JSON_PARAM_BYTES
pub(crate) async fn insert_jobs(conn: &mut PgConnection, jobs: &[&NewJob]) -> Result<(), StoreError> {
    if let [job] = jobs {
        return insert_job(conn, job).await.map(|_| ());
    }
    let rows = jobs
        .iter()
        .map(|job| {
            serde_json::json!({
                "id": Uuid::now_v7(),
                "tenant_id": job.tenant_id.as_uuid(),
                "kind": job.kind,
                "idempotency_key": job.idempotency_key,
                "payload": job.payload,
                "max_attempts": job.max_attempts.max(1),
                "run_at": job.run_at.map(pg_timestamp),
            })
        })
        .collect();
    for chunk in json_row_chunks(rows) {
        sqlx::query(
            "INSERT INTO jobs (id, tenant_id, kind, idempotency_key, payload, state, max_attempts, next_attempt_at) \
             SELECT id, tenant_id, kind, idempotency_key, payload, 'pending', max_attempts, \
               COALESCE(run_at, clock_timestamp()) \
             FROM jsonb_to_recordset($1) AS r(id uuid, tenant_id uuid, kind text, idempotency_key text, \
               payload jsonb, max_attempts integer, run_at timestamptz) \
             ON CONFLICT (idempotency_key) DO NOTHING",
        )
        .bind(sqlx::types::Json(&chunk))
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
    }
    Ok(())
}

/// Writes a job on an open connection (inside the caller's transaction).
pub(crate) async fn insert_job(conn: &mut PgConnection, job: &NewJob) -> Result<bool, StoreError> {
    let result = sqlx::query(
        "INSERT INTO jobs (id, tenant_id, kind, idempotency_key, payload, state, max_attempts, next_attempt_at) \
         VALUES ($1, $2, $3, $4, $5, 'pending', $6, COALESCE($7, clock_timestamp())) \
         ON CONFLICT (idempotency_key) DO NOTHING",
    )
    .bind(Uuid::now_v7())
    .bind(job.tenant_id.as_uuid())
    .bind(&job.kind)
    .bind(&job.idempotency_key)
    .bind(sqlx::types::Json(&job.payload))
    .bind(job.max_attempts.max(1) as i32)
    .bind(job.run_at)
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(result.rows_affected() == 1)
}

#[async_trait]
impl JobQueue for PgStore {
    async fn enqueue(&self, job: &NewJob) -> Result<bool, StoreError> {
        let mut conn = self.inner.pool.acquire().await.map_err(db_error)?;
        insert_job(&mut conn, job).await
    }

    async fn claim(
        &self,
        worker: &str,
        kinds: &[String],
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, StoreError> {
        // One statement (one round trip per claim). First, a job whose lease expired on its last
        // attempt will never be claimed again: it is dead (`dead`, run whether or not the claim
        // reads it; never a row the claim takes, which all have attempts left).
        // Due jobs are read kind by kind, each an ordered scan of `jobs_due_by_kind_idx`: an
        // ordered index scan marks the entries of jobs claimed and finished since the last vacuum
        // as dead as it passes them, so the next claim skips them (a bitmap scan of all the
        // kinds at once never does, and under load every claim re-read thousands of them).
        // The times compare with `now()` (the statement's own transaction: the same instant to the
        // microsecond), not `clock_timestamp()`: a volatile function cannot bound an index scan,
        // and `expired` and `dead` then read every running job's row on every claim (`EXPLAIN
        // ANALYZE` under load: 66 rows, 0.18 of the claim's 0.38 ms) instead of the few expired
        // entries of `jobs_lease_idx`.
        let rows = sqlx::query(concat!(
            "WITH dead AS ( \
               UPDATE jobs SET state = 'dead', lease_owner = NULL, lease_expires_at = NULL, \
                 updated_at = clock_timestamp(), \
                 last_error = COALESCE(last_error || '; ', '') || 'lease expired during the last attempt' \
               WHERE state = 'running' AND lease_expires_at < now() AND attempts >= max_attempts \
               RETURNING id), \
             due AS ( \
               SELECT j.id, j.next_attempt_at FROM unnest($3::text[]) AS k(kind) \
               CROSS JOIN LATERAL ( \
                 SELECT id, next_attempt_at FROM jobs \
                 WHERE jobs.kind = k.kind AND state = 'pending' AND next_attempt_at <= now() \
                   AND attempts < max_attempts \
                 ORDER BY next_attempt_at LIMIT $4 FOR UPDATE SKIP LOCKED) AS j), \
             expired AS ( \
               SELECT id, next_attempt_at FROM jobs \
               WHERE state = 'running' AND lease_expires_at < now() AND kind = ANY($3) \
                 AND attempts < max_attempts \
               LIMIT $4 FOR UPDATE SKIP LOCKED) \
             UPDATE jobs SET state = 'running', lease_owner = $1, attempts = attempts + 1, \
               lease_expires_at = clock_timestamp() + make_interval(secs => $2), updated_at = clock_timestamp() \
             WHERE id IN ( \
               SELECT id FROM (SELECT id, next_attempt_at FROM due UNION ALL SELECT id, next_attempt_at FROM expired) AS c \
               ORDER BY next_attempt_at LIMIT $4) \
             RETURNING ",
            job_columns!()
        ))
        .bind(worker)
        .bind(lease.as_secs_f64())
        .bind(kinds)
        .bind(limit.max(1) as i64)
        .fetch_all(&self.inner.pool)
        .await
        .map_err(db_error)?;
        rows.iter().map(job_from_row).collect()
    }

    async fn prune_succeeded(&self, age: Duration, limit: usize) -> Result<u64, StoreError> {
        let result = sqlx::query(
            "DELETE FROM jobs WHERE id IN ( \
               SELECT id FROM jobs WHERE state = 'succeeded' \
                 AND updated_at < clock_timestamp() - make_interval(secs => $1::float8) \
               LIMIT $2)",
        )
        .bind(age.as_secs_f64())
        .bind(limit.max(1) as i64)
        .execute(&self.inner.pool)
        .await
        .map_err(db_error)?;
        Ok(result.rows_affected())
    }

    async fn complete(&self, job_id: Uuid, worker: &str) -> Result<bool, StoreError> {
        let result = sqlx::query(
            "UPDATE jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL, updated_at = clock_timestamp() \
             WHERE id = $1 AND lease_owner = $2 AND state = 'running'",
        )
        .bind(job_id)
        .bind(worker)
        .execute(&self.inner.pool)
        .await
        .map_err(db_error)?;
        Ok(result.rows_affected() == 1)
    }

    async fn fail(
        &self,
        job_id: Uuid,
        worker: &str,
        error: &str,
        retry_in: Option<Duration>,
    ) -> Result<Option<JobState>, StoreError> {
        let state: Option<String> = sqlx::query_scalar(
            "UPDATE jobs SET \
               state = CASE WHEN $3::float8 IS NULL OR attempts >= max_attempts THEN 'dead' ELSE 'pending' END, \
               next_attempt_at = CASE WHEN $3::float8 IS NULL THEN next_attempt_at \
                                      ELSE clock_timestamp() + make_interval(secs => $3::float8) END, \
               last_error = $4, lease_owner = NULL, lease_expires_at = NULL, updated_at = clock_timestamp() \
             WHERE id = $1 AND lease_owner = $2 AND state = 'running' \
             RETURNING state",
        )
        .bind(job_id)
        .bind(worker)
        .bind(retry_in.map(|d| d.as_secs_f64()))
        .bind(error)
        .fetch_optional(&self.inner.pool)
        .await
        .map_err(db_error)?;
        Ok(state.as_deref().and_then(JobState::parse))
    }

    async fn extend_lease(&self, job_id: Uuid, worker: &str, lease: Duration) -> Result<bool, StoreError> {
        let result = sqlx::query(
            "UPDATE jobs SET lease_expires_at = clock_timestamp() + make_interval(secs => $3), updated_at = clock_timestamp() \
             WHERE id = $1 AND lease_owner = $2 AND state = 'running'",
        )
        .bind(job_id)
        .bind(worker)
        .bind(lease.as_secs_f64())
        .execute(&self.inner.pool)
        .await
        .map_err(db_error)?;
        Ok(result.rows_affected() == 1)
    }

    async fn release(&self, worker: &str) -> Result<u64, StoreError> {
        let result = sqlx::query(
            "UPDATE jobs SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL, \
               attempts = GREATEST(attempts - 1, 0), next_attempt_at = clock_timestamp(), updated_at = clock_timestamp(), \
               last_error = COALESCE(last_error || '; ', '') || $2 \
             WHERE lease_owner = $1 AND state = 'running'",
        )
        .bind(worker)
        .bind(RELEASED)
        .execute(&self.inner.pool)
        .await
        .map_err(db_error)?;
        Ok(result.rows_affected())
    }

    async fn get(&self, job_id: Uuid) -> Result<Option<Job>, StoreError> {
        let row = sqlx::query(concat!("SELECT ", job_columns!(), " FROM jobs WHERE id = $1"))
            .bind(job_id)
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
            " FROM jobs WHERE ($1::text IS NULL OR state = $1) AND (NOT $2 OR last_error IS NOT NULL) \
              AND ($3::text IS NULL OR kind = $3) \
              AND ($4::text IS NULL OR payload::text LIKE $4 OR idempotency_key LIKE $4) \
              ORDER BY updated_at DESC, id DESC LIMIT $5"
        ))
        .bind(filter.status.map(|s| s.state().as_str()))
        .bind(filter.status == Some(JobListStatus::Failed))
        .bind(filter.kind.clone())
        .bind(filter.document_pattern())
        .bind(filter.limit.clamp(1, 100_000) as i64)
        .fetch_all(&self.inner.pool)
        .await
        .map_err(db_error)?;
        rows.iter().map(job_from_row).collect()
    }

    async fn retry(&self, job_id: Uuid) -> Result<Option<Job>, StoreError> {
        let result = sqlx::query(
            "UPDATE jobs SET state = 'pending', max_attempts = greatest(max_attempts, attempts + 1), \
               next_attempt_at = clock_timestamp(), updated_at = clock_timestamp() \
             WHERE id = $1 AND state IN ('pending', 'dead')",
        )
        .bind(job_id)
        .execute(&self.inner.pool)
        .await
        .map_err(db_error)?;
        if result.rows_affected() == 0 {
            return Ok(None);
        }
        self.get(job_id).await
    }

    async fn discard(&self, job_id: Uuid, note: &str) -> Result<Option<Job>, StoreError> {
        let result = sqlx::query(
            "UPDATE jobs SET state = 'dead', last_error = $2, updated_at = clock_timestamp() \
             WHERE id = $1 AND state = 'pending'",
        )
        .bind(job_id)
        .bind(note)
        .execute(&self.inner.pool)
        .await
        .map_err(db_error)?;
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
