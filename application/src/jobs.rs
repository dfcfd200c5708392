//! The job queue (outbox): durable units of side-effecting work.
//!
//! A job is written in the same transaction as the events that cause it, under a unique
//! idempotency key (a second insert of the key is the same job). Workers claim jobs with a lease;
//! a worker that dies has its lease expire and the job is claimed again. A failed attempt is
//! retried after an exponential backoff with jitter; after the last attempt the job is `dead`.
//! Only the worker holding the lease can complete or fail a job (fencing by lease owner).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use kuatia_domain::tenancy::TenantId;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use uuid::Uuid;

use crate::records::StoreError;

/// A job to write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewJob {
    /// What handler runs it (`sifen.submit`, `webhook.deliver`, …).
    pub kind: String,
    /// Unique across all jobs: the same key is the same job.
    pub idempotency_key: String,
    /// Owner.
    pub tenant_id: TenantId,
    /// Input of the handler.
    pub payload: Value,
    /// Attempts before the job is dead (at least 1).
    pub max_attempts: u32,
    /// Not before this moment (`None`: now).
    pub run_at: Option<DateTime<Utc>>,
}

impl NewJob {
    /// A job to run now, with 10 attempts. An object payload written while a span is current
    /// also carries that span's trace context (`trace_parent`, [`crate::trace_context`]), so the
    /// job runs in the same trace.
    pub fn new(kind: impl Into<String>, key: impl Into<String>, tenant_id: TenantId, payload: Value) -> Self {
        let mut payload = payload;
        crate::trace_context::stamp(&mut payload);
        Self {
            kind: kind.into(),
            idempotency_key: key.into(),
            tenant_id,
            payload,
            max_attempts: 10,
            run_at: None,
        }
    }
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for `next_attempt_at`.
    Pending,
    /// Leased by a worker.
    Running,
    /// Done.
    Succeeded,
    /// Failed its last attempt.
    Dead,
}

impl JobState {
    /// Stored name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Dead => "dead",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => Self::Pending,
            "running" => Self::Running,
            "succeeded" => Self::Succeeded,
            "dead" => Self::Dead,
            _ => return None,
        })
    }

    /// Every state, for gauges.
    pub const ALL: [JobState; 4] = [Self::Pending, Self::Running, Self::Succeeded, Self::Dead];
}

/// What [`JobQueue::release`] notes in a released job's `last_error`.
pub const RELEASED: &str = "released at shutdown during an attempt";

/// A claimed (or inspected) job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Job {
    /// Id.
    pub id: Uuid,
    /// Handler kind.
    pub kind: String,
    /// Idempotency key.
    pub idempotency_key: String,
    /// Owner.
    pub tenant_id: TenantId,
    /// Input.
    pub payload: Value,
    /// State.
    pub state: JobState,
    /// Attempts started so far, including the current one.
    pub attempts: u32,
    /// Attempts allowed.
    pub max_attempts: u32,
    /// When the next attempt may start.
    pub next_attempt_at: DateTime<Utc>,
    /// Worker holding the lease.
    pub lease_owner: Option<String>,
    /// When the lease ends.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// Error of the last failed attempt.
    pub last_error: Option<String>,
}

/// Count of jobs per kind and state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobCount {
    /// Kind.
    pub kind: String,
    /// State.
    pub state: JobState,
    /// How many.
    pub count: i64,
}

/// The queue port.
#[async_trait]
pub trait JobQueue: Send + Sync {
    /// Writes a job outside an append (returns whether it was new).
    async fn enqueue(&self, job: &NewJob) -> Result<bool, StoreError>;

    /// Leases up to `limit` due jobs of the given kinds to `worker` for `lease`. Jobs whose lease
    /// expired count as due; each claim starts an attempt. Concurrent claimers never get the same
    /// job.
    async fn claim(
        &self,
        worker: &str,
        kinds: &[String],
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, StoreError>;

    /// Marks a job done. Returns false when `worker` no longer holds its lease.
    async fn complete(&self, job_id: Uuid, worker: &str) -> Result<bool, StoreError>;

    /// Records a failed attempt: `retry_in` schedules the next attempt, `None` (or no attempts
    /// left) makes the job dead. Returns the new state, or `None` when `worker` lost the lease.
    async fn fail(
        &self,
        job_id: Uuid,
        worker: &str,
        error: &str,
        retry_in: Option<Duration>,
    ) -> Result<Option<JobState>, StoreError>;

    /// Extends the lease of a running job. Returns false when `worker` lost the lease.
    async fn extend_lease(&self, job_id: Uuid, worker: &str, lease: Duration) -> Result<bool, StoreError>;

    /// Gives back every lease `worker` holds, without counting the attempt (graceful shutdown),
    /// noting [`RELEASED`] in the job's `last_error`: the interrupted attempt may have had
    /// effects (a handler that must know whether an earlier run started reads it there).
    async fn release(&self, worker: &str) -> Result<u64, StoreError>;

    /// Reads one job.
    async fn get(&self, job_id: Uuid) -> Result<Option<Job>, StoreError>;

    /// Reads a job by its idempotency key.
    async fn get_by_key(&self, key: &str) -> Result<Option<Job>, StoreError>;

    /// Jobs per kind and state.
    async fn counts(&self) -> Result<Vec<JobCount>, StoreError>;

    /// Jobs matching `filter`, the most recently changed first (`kuatia jobs list`).
    async fn list(&self, filter: &JobFilter) -> Result<Vec<Job>, StoreError>;

    /// Makes a dead or waiting job due now, with one attempt more than it has used (so a dead
    /// job gets exactly one more try before it is dead again). Returns the job as it is now, or
    /// `None` when there is no such job or it is running or succeeded (nothing changed).
    async fn retry(&self, job_id: Uuid) -> Result<Option<Job>, StoreError>;

    /// Makes a waiting job dead without running it, noting `note` as its `last_error`. Returns
    /// the job as it is now, or `None` when there is no such job or it is not pending.
    async fn discard(&self, job_id: Uuid, note: &str) -> Result<Option<Job>, StoreError>;

    /// Deletes at most `limit` succeeded jobs whose last change is older than `age` (by the
    /// database's clock) and returns how many went. Only succeeded ones: pending, running and
    /// dead jobs stay whatever their age (an operator acts on dead ones). Safe because a job's
    /// idempotency key is only ever queued again by a retry of the append that made it, which
    /// happens within seconds, never days later (docs/operations.md, "Storage").
    async fn prune_succeeded(&self, age: Duration, limit: usize) -> Result<u64, StoreError>;
}

/// Removes every succeeded job older than `age`, `batch` at a time (each batch a short
/// transaction of its own, so workers are not held up); returns how many went.
pub async fn prune_succeeded(queue: &dyn JobQueue, age: Duration, batch: usize) -> Result<u64, StoreError> {
    let batch = batch.max(1);
    let mut removed = 0;
    loop {
        let n = queue.prune_succeeded(age, batch).await?;
        removed += n;
        if n < batch as u64 {
            return Ok(removed);
        }
    }
}

/// What `kuatia jobs list --status` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobListStatus {
    /// Waiting for its next attempt (failed ones included).
    Pending,
    /// Waiting for its next attempt after a failed one (`pending` with a `last_error`).
    Failed,
    /// Leased by a worker.
    Running,
    /// Done.
    Succeeded,
    /// Out of attempts, or discarded.
    Dead,
}

impl JobListStatus {
    /// Parses `pending`, `failed`, `running`, `succeeded` or `dead`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => Self::Pending,
            "failed" => Self::Failed,
            "running" => Self::Running,
            "succeeded" => Self::Succeeded,
            "dead" => Self::Dead,
            _ => return None,
        })
    }

    /// The stored state it reads.
    pub fn state(&self) -> JobState {
        match self {
            Self::Pending | Self::Failed => JobState::Pending,
            Self::Running => JobState::Running,
            Self::Succeeded => JobState::Succeeded,
            Self::Dead => JobState::Dead,
        }
    }
}

/// Which jobs [`JobQueue::list`] returns.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    /// Only jobs in this state (`None`: every state).
    pub status: Option<JobListStatus>,
    /// Only jobs of this kind (`sifen.submit`).
    pub kind: Option<String>,
    /// Only jobs about this document (its id in the job's payload or idempotency key).
    pub document: Option<Uuid>,
    /// At most this many.
    pub limit: usize,
}

impl JobFilter {
    /// The `LIKE` pattern the document filter is read with.
    pub fn document_pattern(&self) -> Option<String> {
        self.document.map(|id| format!("%{id}%"))
    }
}

/// Exponential backoff with jitter: `base × factor^(attempt−1)`, capped at `max`, then spread by
/// ±`jitter` (a fraction) so that jobs failing together do not retry together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// Delay after the first failed attempt.
    pub base: Duration,
    /// Growth per attempt.
    pub factor: f64,
    /// Upper bound before jitter.
    pub max: Duration,
    /// Spread, 0.0 to 1.0.
    pub jitter: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(5),
            factor: 2.0,
            max: Duration::from_secs(3600),
            jitter: 0.2,
        }
    }
}

impl Backoff {
    /// The nominal delay after failed attempt `attempt` (1-based), before jitter.
    pub fn nominal(&self, attempt: u32) -> Duration {
        let exp = self.factor.powi(attempt.saturating_sub(1).min(64) as i32);
        let secs = (self.base.as_secs_f64() * exp).min(self.max.as_secs_f64());
        Duration::from_secs_f64(secs)
    }

    /// The delay after failed attempt `attempt`, with jitter.
    pub fn delay(&self, attempt: u32) -> Duration {
        let nominal = self.nominal(attempt).as_secs_f64();
        let spread = nominal * self.jitter.clamp(0.0, 1.0);
        let offset = if spread > 0.0 {
            rand::rng().random_range(-spread..=spread)
        } else {
            0.0
        };
        Duration::from_secs_f64((nominal + offset).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_exponentially_up_to_the_cap() {
        let b = Backoff {
            base: Duration::from_secs(1),
            factor: 2.0,
            max: Duration::from_secs(10),
            jitter: 0.0,
        };
        let delays: Vec<u64> = (1..=6).map(|a| b.delay(a).as_secs()).collect();
        assert_eq!(delays, vec![1, 2, 4, 8, 10, 10]);
    }

    #[test]
    fn jitter_stays_within_its_spread_and_varies() {
        let b = Backoff {
            base: Duration::from_secs(100),
            factor: 1.0,
            max: Duration::from_secs(100),
            jitter: 0.2,
        };
        let samples: Vec<f64> = (0..200).map(|_| b.delay(3).as_secs_f64()).collect();
        assert!(samples.iter().all(|s| (80.0..=120.0).contains(s)));
        let distinct: std::collections::BTreeSet<u64> =
            samples.iter().map(|s| (*s * 1000.0) as u64).collect();
        assert!(distinct.len() > 10, "jitter should spread retries");
    }

    #[test]
    fn job_states_round_trip_through_their_stored_names() {
        for state in JobState::ALL {
            assert_eq!(JobState::parse(state.as_str()), Some(state));
        }
        assert_eq!(JobState::parse("exploded"), None);
    }
}
