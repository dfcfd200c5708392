//! The worker pool: claims jobs, runs their handlers, records the outcome.
//!
//! Each worker holds at most one lease at a time and heartbeats it while the handler runs. On
//! shutdown a worker stops claiming, lets its current job finish within the grace period, and
//! gives back whatever lease it still holds so that another instance picks the job up at once
//! instead of waiting for the lease to expire.

use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::jobs::{Backoff, Job, JobQueue, JobState};

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
pub struct WorkerPool {
    queue: Arc<dyn JobQueue>,
    handlers: HashMap<String, Arc<dyn JobHandler>>,
    config: WorkerConfig,
    wake: Option<tokio::sync::watch::Receiver<i64>>,
}

impl WorkerPool {
    /// A pool with no handlers.
    pub fn new(queue: Arc<dyn JobQueue>, config: WorkerConfig) -> Self {
        Self {
            queue,
            handlers: HashMap::new(),
            config,
            wake: None,
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
        // This worker's own view of the hint: `changed` marks what it has seen.
        let mut wake = self.wake.clone();
        if let Some(w) = wake.as_mut() {
            w.borrow_and_update();
        }
        while !shutdown.is_cancelled() {
            let claimed = self.queue.claim(&worker, &kinds, 1, self.config.lease).await;
            match claimed {
                Ok(jobs) if !jobs.is_empty() => {
                    for job in jobs {
                        self.run_one(&worker, job, &shutdown).await;
                    }
                }
                Ok(_) => {
                    let woken = async {
                        match wake.as_mut() {
                            Some(w) => {
                                if w.changed().await.is_err() {
                                    std::future::pending::<()>().await;
                                }
                            }
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        _ = shutdown.cancelled() => {}
                        _ = tokio::time::sleep(self.config.poll_interval) => {}
                        () = woken => {}
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
        // interval() panics on zero; a lease shorter than 300 ms still heartbeats every 100 ms.
        let heartbeat_every = (self.config.lease / 3).max(Duration::from_millis(100));
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
            return;
        };
        let recorded = match result {
            Ok(()) => self.queue.complete(job.id, worker).await.map(|_| ()),
            Err(failure) => {
                let (message, retry_in) = match failure {
                    JobFailure::Retry(m) => (m, Some(handler.backoff().delay(job.attempts))),
                    JobFailure::RetryAfter(m, d) => (m, Some(d)),
                    JobFailure::Permanent(m) => (m, None),
                };
                let state = self.queue.fail(job.id, worker, &message, retry_in).await;
                if let Ok(Some(JobState::Dead)) = state {
                    tracing::error!(job_id = %job.id, kind = %job.kind, error = %message, "job is dead after its last attempt");
                } else {
                    tracing::warn!(job_id = %job.id, kind = %job.kind, attempt = job.attempts, error = %message, "job attempt failed");
                }
                state.map(|_| ())
            }
        };
        if let Err(err) = recorded {
            tracing::error!(job_id = %job.id, error = %err, "recording a job outcome failed; the lease will expire and the job run again");
        }
    }
}
