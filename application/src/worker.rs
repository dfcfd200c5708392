//! The worker pool: claims jobs, runs their handlers, records the outcome.
//!
//! Each worker runs one job at a time and heartbeats its lease while the handler runs; a claim
//! takes jobs for the pool's idle workers too (see [`WorkerPool`]), leased under the claiming
//! worker's name. On shutdown the workers stop claiming and let their current jobs finish within
//! the grace period; then the pool gives back every lease still held under its workers' names so
//! that another instance picks those jobs up at once instead of waiting for the leases to expire.

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
    /// How often an idle pool looks for due jobs without being woken (jobs that became due by
    /// time: retries, expired leases; and jobs queued by other instances or outside an append):
    /// one idle worker looks per interval, however many are idle.
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

/// The most jobs one claim takes (for the idle workers of the pool).
const MAX_CLAIM: usize = 32;

/// The pool.
///
/// Idle workers wake one at a time: the store's position hint (or the poll interval) wakes one,
/// and that worker claims, in one statement, as many due jobs as there are idle workers (itself
/// included, at most [`MAX_CLAIM`]). It runs the first and hands the others to idle workers
/// through the pool's queue of claimed jobs (they run under its lease name), then wakes one more
/// worker to look for more. A commit that queues N jobs thus costs about two claims instead of
/// N + 1, and none per idle worker (each claim is a write on the jobs table).
pub struct WorkerPool {
    queue: Arc<dyn JobQueue>,
    handlers: HashMap<String, Arc<dyn JobHandler>>,
    config: WorkerConfig,
    wake: Option<tokio::sync::watch::Receiver<i64>>,
    /// Wakes one idle worker.
    idle: tokio::sync::Notify,
    /// Workers waiting for work.
    idle_workers: std::sync::atomic::AtomicUsize,
    /// Jobs a worker claimed for others, with the lease owner they were claimed under.
    claimed: std::sync::Mutex<std::collections::VecDeque<(String, Job)>>,
    /// The workers whose claims took jobs: the only lease owners the pool can have given leases
    /// to, so the only ones released on shutdown (most of a large pool's workers never claim).
    lease_owners: std::sync::Mutex<std::collections::BTreeSet<String>>,
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
            idle_workers: std::sync::atomic::AtomicUsize::new(0),
            claimed: std::sync::Mutex::new(std::collections::VecDeque::new()),
            lease_owners: std::sync::Mutex::new(std::collections::BTreeSet::new()),
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
            // The poll: one idle worker looks per interval (each worker sleeping the interval on
            // its own made an idle pool of N workers claim N times per interval, all for nothing).
            {
                let (pool, shutdown) = (shared.clone(), shutdown.clone());
                tasks.push(tokio::spawn(async move {
                    let mut tick =
                        tokio::time::interval(pool.config.poll_interval.max(Duration::from_millis(1)));
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    loop {
                        tokio::select! {
                            () = shutdown.cancelled() => return,
                            _ = tick.tick() => pool.idle.notify_one(),
                        }
                    }
                }));
            }
            // Zero workers: an instance that serves the API and leaves the jobs to others.
            for n in 0..shared.config.workers {
                let worker = format!("{}-{n}", shared.config.instance);
                let pool = shared.clone();
                let kinds = kinds.clone();
                let shutdown = shutdown.clone();
                tasks.push(tokio::spawn(
                    async move { pool.work(worker, kinds, shutdown).await },
                ));
            }
            for task in tasks {
                let _ = task.await;
            }
            // Every worker has stopped: give back the leases still held under any worker's name
            // that claimed jobs (a job cut off by the grace, or claimed for another worker and
            // never started). Not before: a worker may be running a job claimed under another's
            // name.
            let owners = std::mem::take(
                &mut *shared
                    .lease_owners
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            for worker in owners {
                match shared.queue.release(&worker).await {
                    Ok(0) => {}
                    Ok(n) => {
                        tracing::info!(worker = %worker, released = n, "released job leases on shutdown")
                    }
                    Err(err) => tracing::warn!(worker = %worker, error = %err, "releasing job leases failed"),
                }
            }
        })
    }

    /// A job another worker claimed for this one, with its lease owner.
    fn take_claimed(&self) -> Option<(String, Job)> {
        self.claimed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop_front()
    }

    async fn work(&self, worker: String, kinds: Vec<String>, shutdown: CancellationToken) {
        use std::sync::atomic::Ordering;
        // A worker starts idle: the pool's ticker wakes one at once, which claims for all the idle
        // ones (a pool of 256 starting with a claim each made 256 claims, and held the database's
        // connections while it did).
        self.wait_idle(&shutdown).await;
        while !shutdown.is_cancelled() {
            if let Some((owner, job)) = self.take_claimed() {
                self.run_one(&owner, job, &shutdown).await;
                continue;
            }
            let want = (self.idle_workers.load(Ordering::Acquire) + 1).min(MAX_CLAIM);
            let claimed = self.queue.claim(&worker, &kinds, want, self.config.lease).await;
            // A claim that took jobs leased them under this name; one that failed may have too
            // (its answer lost after the commit).
            if !matches!(&claimed, Ok(jobs) if jobs.is_empty()) {
                self.lease_owners
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(worker.clone());
            }
            match claimed {
                Ok(jobs) if !jobs.is_empty() => {
                    let mut jobs = jobs.into_iter();
                    let first = jobs.next();
                    let others: Vec<(String, Job)> = jobs.map(|job| (worker.clone(), job)).collect();
                    // One idle worker per job claimed for others, and one more: there may be more.
                    let wake = others.len() + 1;
                    self.claimed
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .extend(others);
                    for _ in 0..wake {
                        self.idle.notify_one();
                    }
                    if let Some(job) = first {
                        self.run_one(&worker, job, &shutdown).await;
                    }
                }
                Ok(_) => self.wait_idle(&shutdown).await,
                Err(err) => {
                    tracing::warn!(worker = %worker, error = %err, "claiming jobs failed");
                    tokio::select! {
                        _ = shutdown.cancelled() => {}
                        _ = tokio::time::sleep(self.config.poll_interval * 4) => {}
                    }
                }
            }
        }
    }

    /// Waits, counted among the idle workers, until woken (a commit, the poll, more jobs claimed)
    /// or shut down.
    async fn wait_idle(&self, shutdown: &CancellationToken) {
        use std::sync::atomic::Ordering;
        self.idle_workers.fetch_add(1, Ordering::AcqRel);
        tokio::select! {
            _ = shutdown.cancelled() => {}
            () = self.idle.notified() => {}
        }
        self.idle_workers.fetch_sub(1, Ordering::AcqRel);
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
