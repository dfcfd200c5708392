//! The worker pool: claims jobs, runs their handlers, records the outcome.
//!
//! Each worker holds at most one lease at a time and heartbeats it while the handler runs. On
//! shutdown a worker stops claiming, lets its current job finish within the grace period, and
//! gives back whatever lease it still holds so that another instance picks the job up at once
//! instead of waiting for the lease to expire.

use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::jobs::{Backoff, Job, JobQueue, JobState};
use crate::trace_context;

/// Why a job attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobFailure {
    /// A transient failure: retry after the handler's backoff.
    Retry(String),
    /// A transient failure with a delay the handler knows (a server's `Retry-After`).
    RetryAfter(String, Duration),
    /// Retrying cannot help: the job is dead now.
    Permanent(String),
}

/// Runs the jobs of one kind.
#[async_trait]
pub trait JobHandler: Send + Sync {
    /// The job kind it runs.
    fn kind(&self) -> &'static str;
    /// Delay between attempts.
    fn backoff(&self) -> Backoff {
        Backoff::default()
    }
    /// Runs one attempt. Must be safe to run again for the same job (at-least-once).
    async fn run(&self, job: &Job) -> Result<(), JobFailure>;
}

/// Worker pool settings.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Instance name; worker ids are `<instance>-<n>`.
    pub instance: String,
    /// Concurrent workers.
    pub workers: usize,
    /// Lease length; heartbeats renew it every third of it.
    pub lease: Duration,
    /// Sleep when no job is due.
    pub poll_interval: Duration,
    /// How long a running job may go on after shutdown starts.
    pub shutdown_grace: Duration,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            instance: format!("kuatia-{}", uuid::Uuid::now_v7().simple()),
            workers: 4,
            lease: Duration::from_secs(60),
            poll_interval: Duration::from_millis(500),
            shutdown_grace: Duration::from_secs(20),
        }
    }
}

/// The pool.
///
/// Idle workers wake one at a time: the store's position hint (or the poll interval) wakes one,
/// and a worker that claims a job wakes the next before running it, so a burst of N jobs gets
/// N + 1 claims instead of one claim per idle worker per commit, most of them finding nothing
/// (and each a write on the jobs table).
pub struct WorkerPool {
    queue: Arc<dyn JobQueue>,
    handlers: HashMap<String, Arc<dyn JobHandler>>,
    config: WorkerConfig,
    wake: Option<tokio::sync::watch::Receiver<i64>>,
    /// Wakes one idle worker.
    idle: tokio::sync::Notify,
}

impl WorkerPool {
    /// A pool with no handlers.
    pub fn new(queue: Arc<dyn JobQueue>, config: WorkerConfig) -> Self {
        Self {
            queue,
            handlers: HashMap::new(),
            config,
            wake: None,
            idle: tokio::sync::Notify::new(),
        }
    }

    /// Idle workers also wake when this moves (the store's position hint: a commit may have
    /// queued a job), so a job queued with its events starts at once instead of at the next
    /// poll.
    pub fn with_wake(mut self, wake: tokio::sync::watch::Receiver<i64>) -> Self {
        self.wake = Some(wake);
        self
    }

    /// Registers the handler of one kind.
    pub fn with_handler(mut self, handler: Arc<dyn JobHandler>) -> Self {
        self.handlers.insert(handler.kind().to_owned(), handler);
        self
    }

    /// Starts the workers; the handle completes when all have stopped and released their leases.
    pub fn spawn(self, shutdown: CancellationToken) -> JoinHandle<()> {
        let kinds: Vec<String> = self.handlers.keys().cloned().collect();
        let shared = Arc::new(self);
        tokio::spawn(async move {
            if kinds.is_empty() {
                shutdown.cancelled().await;
                return;
            }
            let mut tasks = Vec::new();
            // The position hint moved (a commit may have queued a job): wake one idle worker.
            if let Some(mut wake) = shared.wake.clone() {
                let (pool, shutdown) = (shared.clone(), shutdown.clone());
                tasks.push(tokio::spawn(async move {
                    wake.borrow_and_update();
                    loop {
                        tokio::select! {
                            () = shutdown.cancelled() => return,
                            changed = wake.changed() => {
                                if changed.is_err() {
                                    return;
                                }
                                pool.idle.notify_one();
                            }
                        }
                    }
                }));
            }
            // Zero workers: an instance that serves the API and leaves the jobs to others.
            for n in 0..shared.config.workers {
                let pool = shared.clone();
                let kinds = kinds.clone();
                let shutdown = shutdown.clone();
                let worker = format!("{}-{n}", pool.config.instance);
                tasks.push(tokio::spawn(
                    async move { pool.work(worker, kinds, shutdown).await },
                ));
            }
            for task in tasks {
                let _ = task.await;
            }
        })
    }

    async fn work(&self, worker: String, kinds: Vec<String>, shutdown: CancellationToken) {
        while !shutdown.is_cancelled() {
            let claimed = self.queue.claim(&worker, &kinds, 1, self.config.lease).await;
            match claimed {
                Ok(jobs) if !jobs.is_empty() => {
                    // There may be more: let the next idle worker look.
                    self.idle.notify_one();
                    for job in jobs {
                        self.run_one(&worker, job, &shutdown).await;
                    }
                }
                Ok(_) => {
                    tokio::select! {
                        _ = shutdown.cancelled() => {}
                        _ = tokio::time::sleep(self.config.poll_interval) => {}
                        () = self.idle.notified() => {}
                    }
                }
                Err(err) => {
                    tracing::warn!(worker = %worker, error = %err, "claiming jobs failed");
                    tokio::select! {
                        _ = shutdown.cancelled() => {}
                        _ = tokio::time::sleep(self.config.poll_interval * 4) => {}
                    }
                }
            }
        }
        match self.queue.release(&worker).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(worker = %worker, released = n, "released job leases on shutdown"),
            Err(err) => tracing::warn!(worker = %worker, error = %err, "releasing job leases failed"),
        }
    }

    async fn run_one(&self, worker: &str, job: Job, shutdown: &CancellationToken) {
        let Some(handler) = self.handlers.get(&job.kind).cloned() else {
            return;
        };
        // The attempt runs in a span of its own (never a child of whatever the worker task had
        // current) whose trace parent is the context the job was written in, so a request and
        // the jobs it causes are one trace.
        let span = tracing::info_span!(
            parent: None,
            "job",
            otel.name = %job.kind,
            otel.kind = "consumer",
            trace_parent = trace_context::of_payload(&job.payload),
            trace_id = tracing::field::Empty,
            job.id = %job.id,
            job.kind = %job.kind,
            job.attempt = job.attempts,
            tenant_id = %job.tenant_id,
            otel.status_code = tracing::field::Empty,
            otel.status_message = tracing::field::Empty,
        );
        if let Some(traceparent) = span.in_scope(trace_context::current)
            && let Some(trace_id) = trace_context::trace_id(&traceparent)
        {
            span.record("trace_id", trace_id);
        }
        let attempt = async {
            // interval() panics on zero; a lease shorter than 300 ms still heartbeats every 100 ms.
            let heartbeat_every = (self.config.lease / 3).max(Duration::from_millis(100));
            let started = Instant::now();
            let run = handler.run(&job);
            tokio::pin!(run);
            let mut heartbeat = tokio::time::interval(heartbeat_every);
            heartbeat.tick().await;
            let grace_over = async {
                shutdown.cancelled().await;
                tokio::time::sleep(self.config.shutdown_grace).await;
            };
            tokio::pin!(grace_over);
            let outcome = loop {
                tokio::select! {
                    result = &mut run => break Some(result),
                    _ = heartbeat.tick() => {
                        if let Ok(false) = self.queue.extend_lease(job.id, worker, self.config.lease).await {
                            tracing::warn!(job_id = %job.id, "lost the lease of a running job");
                        }
                    }
                    _ = &mut grace_over => break None,
                }
            };
            let Some(result) = outcome else {
                tracing::warn!(job_id = %job.id, kind = %job.kind, "job still running after the shutdown grace; its lease is released");
                metrics::counter!("kuatia_job_attempts_total", "kind" => job.kind.clone(), "outcome" => "interrupted")
                    .increment(1);
                return;
            };
            metrics::histogram!("kuatia_job_duration_seconds", "kind" => job.kind.clone())
                .record(started.elapsed().as_secs_f64());
            let (recorded, outcome) = match result {
                Ok(()) => {
                    let completed = self.queue.complete(job.id, worker).await;
                    let outcome = if matches!(completed, Ok(false)) {
                        "lease_lost"
                    } else {
                        "succeeded"
                    };
                    (completed.map(|_| ()), outcome)
                }
                Err(failure) => {
                    let (message, retry_in) = match failure {
                        JobFailure::Retry(m) => (m, Some(handler.backoff().delay(job.attempts))),
                        JobFailure::RetryAfter(m, d) => (m, Some(d)),
                        JobFailure::Permanent(m) => (m, None),
                    };
                    let current = tracing::Span::current();
                    current.record("otel.status_code", "error");
                    current.record("otel.status_message", message.as_str());
                    let state = self.queue.fail(job.id, worker, &message, retry_in).await;
                    let outcome = match &state {
                        Ok(Some(JobState::Dead)) => "dead",
                        Ok(None) => "lease_lost",
                        _ => "retry",
                    };
                    if outcome == "dead" {
                        tracing::error!(job_id = %job.id, kind = %job.kind, error = %message, "job is dead after its last attempt");
                    } else {
                        tracing::warn!(job_id = %job.id, kind = %job.kind, attempt = job.attempts, error = %message, "job attempt failed");
                    }
                    (state.map(|_| ()), outcome)
                }
            };
            metrics::counter!("kuatia_job_attempts_total", "kind" => job.kind.clone(), "outcome" => outcome)
                .increment(1);
            if let Err(err) = recorded {
                tracing::error!(job_id = %job.id, error = %err, "recording a job outcome failed; the lease will expire and the job run again");
            }
        };
        attempt.instrument(span).await;
    }
}
