//! The job queue (outbox): exactly-once execution by many workers, leases, backoff, dead jobs,
//! idempotency keys, and jobs written atomically with the events that cause them.

use async_trait::async_trait;
use kuatia_application::event_store::{ExpectedVersion, StoreError};
use kuatia_application::jobs::{Backoff, Job, JobQueue, JobState, NewJob};
use kuatia_application::worker::{JobFailure, JobHandler, WorkerConfig, WorkerPool};
use kuatia_domain::tenancy::TenantId;
use kuatia_tests::TestDb;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use crate::store::{append, stream, tenant};

fn job(key: &str) -> NewJob {
    NewJob::new("test.echo", key, TenantId::SYSTEM, json!({"key": key}))
}

fn kinds() -> Vec<String> {
    vec!["test.echo".to_owned()]
}

struct Counting {
    runs: Arc<Mutex<HashMap<String, u32>>>,
}

#[async_trait]
impl JobHandler for Counting {
    fn kind(&self) -> &'static str {
        "test.echo"
    }
    async fn run(&self, job: &Job) -> Result<(), JobFailure> {
        tokio::time::sleep(Duration::from_millis(1)).await;
        *self
            .runs
            .lock()
            .expect("lock")
            .entry(job.idempotency_key.clone())
            .or_default() += 1;
        Ok(())
    }
}

async fn wait_until_succeeded(queue: &Arc<dyn JobQueue>, expected: i64) {
    for _ in 0..600 {
        let counts = queue.counts().await.expect("counts");
        let done: i64 = counts
            .iter()
            .filter(|c| c.state == JobState::Succeeded)
            .map(|c| c.count)
            .sum();
        if done == expected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("jobs did not all succeed in time");
}

#[tokio::test]
async fn many_workers_in_two_instances_run_each_job_exactly_once() {
    let db = TestDb::new().await;
    let one = db.open().await;
    let two = db.open().await;
    const JOBS: usize = 150;
    for i in 0..JOBS {
        assert!(
            one.jobs()
                .enqueue(&job(&format!("job-{i}")))
                .await
                .expect("enqueue")
        );
    }
    let runs = Arc::new(Mutex::new(HashMap::new()));
    let shutdown = CancellationToken::new();
    let pools: Vec<_> = [&one, &two]
        .iter()
        .enumerate()
        .map(|(n, database)| {
            WorkerPool::new(
                database.jobs(),
                WorkerConfig {
                    instance: format!("instance-{n}"),
                    workers: 4,
                    poll_interval: Duration::from_millis(20),
                    ..WorkerConfig::default()
                },
            )
            .with_handler(Arc::new(Counting { runs: runs.clone() }))
            .spawn(shutdown.clone())
        })
        .collect();
    wait_until_succeeded(&one.jobs(), JOBS as i64).await;
    shutdown.cancel();
    for pool in pools {
        pool.await.expect("pool");
    }
    let runs = runs.lock().expect("lock");
    assert_eq!(runs.len(), JOBS);
    assert!(runs.values().all(|n| *n == 1), "some job ran twice: {runs:?}");
}

#[tokio::test]
async fn a_job_whose_worker_dies_is_claimed_again_after_its_lease_expires() {
    let db = TestDb::new().await;
    let queue = db.open().await.jobs();
    queue.enqueue(&job("orphan")).await.expect("enqueue");
    let claimed = queue
        .claim("dying-worker", &kinds(), 1, Duration::from_millis(400))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].attempts, 1);
    // The worker "dies": it never completes. Nobody else gets the job while the lease holds.
    assert!(
        queue
            .claim("rescuer", &kinds(), 1, Duration::from_secs(30))
            .await
            .expect("claim")
            .is_empty()
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    let again = queue
        .claim("rescuer", &kinds(), 1, Duration::from_secs(30))
        .await
        .expect("claim");
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].id, again[0].attempts), (claimed[0].id, 2));
    // The dead worker's late answer is fenced off; the lease holder's is taken.
    assert!(
        !queue
            .complete(claimed[0].id, "dying-worker")
            .await
            .expect("complete")
    );
    assert!(queue.complete(claimed[0].id, "rescuer").await.expect("complete"));
    assert_eq!(
        queue.get(claimed[0].id).await.expect("get").expect("job").state,
        JobState::Succeeded
    );
}

#[tokio::test]
async fn failed_attempts_back_off_and_the_last_one_makes_the_job_dead() {
    let db = TestDb::new().await;
    let queue = db.open().await.jobs();
    let mut new = job("flaky");
    new.max_attempts = 2;
    queue.enqueue(&new).await.expect("enqueue");

    let first = queue
        .claim("w", &kinds(), 1, Duration::from_secs(30))
        .await
        .expect("claim")
        .remove(0);
    let state = queue
        .fail(first.id, "w", "timeout", Some(Duration::from_secs(3600)))
        .await
        .expect("fail");
    assert_eq!(state, Some(JobState::Pending));
    let stored = queue.get(first.id).await.expect("get").expect("job");
    let delay = stored.next_attempt_at - chrono::Utc::now();
    assert!(
        delay > chrono::Duration::minutes(59),
        "next attempt is an hour away: {delay}"
    );
    assert_eq!(stored.last_error.as_deref(), Some("timeout"));
    assert!(
        queue
            .claim("w", &kinds(), 1, Duration::from_secs(30))
            .await
            .expect("claim")
            .is_empty(),
        "not due yet"
    );

    let mut soon = job("flaky-soon");
    soon.max_attempts = 2;
    queue.enqueue(&soon).await.expect("enqueue");
    let a = queue
        .claim("w", &kinds(), 1, Duration::from_secs(30))
        .await
        .expect("claim")
        .remove(0);
    queue
        .fail(a.id, "w", "503", Some(Duration::from_millis(50)))
        .await
        .expect("fail");
    tokio::time::sleep(Duration::from_millis(150)).await;
    let b = queue
        .claim("w", &kinds(), 1, Duration::from_secs(30))
        .await
        .expect("claim")
        .remove(0);
    assert_eq!((b.id, b.attempts), (a.id, 2));
    let state = queue
        .fail(b.id, "w", "503 again", Some(Duration::from_millis(50)))
        .await
        .expect("fail");
    assert_eq!(state, Some(JobState::Dead), "no attempts left");

    queue.enqueue(&job("hopeless")).await.expect("enqueue");
    let c = queue
        .claim("w", &kinds(), 1, Duration::from_secs(30))
        .await
        .expect("claim")
        .remove(0);
    assert_eq!(
        queue.fail(c.id, "w", "bad input", None).await.expect("fail"),
        Some(JobState::Dead)
    );
}

#[tokio::test]
async fn a_job_key_inserted_twice_is_one_job() {
    let db = TestDb::new().await;
    let queue = db.open().await.jobs();
    assert!(queue.enqueue(&job("same-key")).await.expect("first"));
    assert!(!queue.enqueue(&job("same-key")).await.expect("second"));
    let counts = queue.counts().await.expect("counts");
    assert_eq!(counts.iter().map(|c| c.count).sum::<i64>(), 1);
}

#[tokio::test]
async fn jobs_commit_with_their_events_or_not_at_all() {
    let db = TestDb::new().await;
    let database = db.open().await;
    let (store, queue) = (database.store(), database.jobs());
    let t = tenant();
    let mut request = append(stream(t, "doc-1"), ExpectedVersion::NoStream, &["Queued"]);
    request.jobs = vec![job("submit-doc-1"), job("submit-doc-1")];
    store.append(request).await.expect("append with jobs");
    assert!(queue.get_by_key("submit-doc-1").await.expect("get").is_some());

    let mut conflicting = append(stream(t, "doc-1"), ExpectedVersion::NoStream, &["Queued"]);
    conflicting.jobs = vec![job("submit-doc-1-again")];
    assert!(matches!(
        store.append(conflicting).await,
        Err(StoreError::VersionConflict { .. })
    ));
    assert!(
        queue
            .get_by_key("submit-doc-1-again")
            .await
            .expect("get")
            .is_none(),
        "a refused append leaves no job behind"
    );
}

struct Sleepy;

#[async_trait]
impl JobHandler for Sleepy {
    fn kind(&self) -> &'static str {
        "test.echo"
    }
    fn backoff(&self) -> Backoff {
        Backoff::default()
    }
    async fn run(&self, _job: &Job) -> Result<(), JobFailure> {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(())
    }
}

/// Starts a pool of `workers` (instance `instance`) running [`Sleepy`] on `queue` and waits
/// until the job `long` runs; returns the pool's handle and the running job.
async fn pool_running_long(
    queue: Arc<dyn JobQueue>,
    instance: &str,
    workers: usize,
    shutdown: &CancellationToken,
) -> (tokio::task::JoinHandle<()>, Job) {
    queue.enqueue(&job("long")).await.expect("enqueue");
    let pool = WorkerPool::new(
        queue.clone(),
        WorkerConfig {
            instance: instance.into(),
            workers,
            poll_interval: Duration::from_millis(20),
            shutdown_grace: Duration::from_millis(200),
            ..WorkerConfig::default()
        },
    )
    .with_handler(Arc::new(Sleepy))
    .spawn(shutdown.clone());
    for _ in 0..100 {
        let j = queue.get_by_key("long").await.expect("get").expect("job");
        if j.state == JobState::Running {
            return (pool, j);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the job never started");
}

/// Shuts the pool down and returns the job `long` as it was left.
async fn shut_down(
    queue: &dyn JobQueue,
    pool: tokio::task::JoinHandle<()>,
    shutdown: &CancellationToken,
) -> Job {
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), pool)
        .await
        .expect("stops within the grace")
        .expect("pool");
    let released = queue.get_by_key("long").await.expect("get").expect("job");
    assert_eq!(released.state, JobState::Pending);
    assert_eq!(released.lease_owner, None);
    released
}

#[tokio::test]
async fn on_shutdown_a_worker_gives_back_the_lease_of_a_job_it_could_not_finish() {
    let db = TestDb::new().await;
    let queue = db.open().await.jobs();
    let shutdown = CancellationToken::new();
    let (pool, running) = pool_running_long(queue.clone(), "leaving", 1, &shutdown).await;
    assert_eq!(running.lease_owner.as_deref(), Some("leaving-0"));
    let released = shut_down(&*queue, pool, &shutdown).await;
    assert_eq!(
        released.attempts, 0,
        "an interrupted attempt is not counted against the job"
    );
    // But it is on record: the next run knows an earlier one started (and may have had effects).
    assert_eq!(
        released.last_error.as_deref(),
        Some(kuatia_application::jobs::RELEASED)
    );
}

#[tokio::test]
async fn on_shutdown_a_large_pool_gives_back_leases_only_under_the_names_that_claimed_jobs() {
    let db = TestDb::new().await;
    let database = db.open().await;
    let queue = CountingClaims::over(&database);
    let shutdown = CancellationToken::new();
    let (pool, running) = pool_running_long(queue.clone(), "large", 256, &shutdown).await;
    let owner = running.lease_owner.expect("the job runs under a worker's name");
    shut_down(&*queue, pool, &shutdown).await;
    // One release for the one worker that claimed, not one statement per worker of the pool.
    assert_eq!(*queue.released.lock().expect("lock"), vec![owner]);
}

/// The real queue, counting claims (and noting whose leases were released).
struct CountingClaims {
    inner: Arc<dyn JobQueue>,
    claims: std::sync::atomic::AtomicUsize,
    released: Mutex<Vec<String>>,
}

impl CountingClaims {
    /// Over the database's queue.
    fn over(database: &kuatia_infrastructure::store::Database) -> Arc<Self> {
        Arc::new(Self {
            inner: database.jobs(),
            claims: Default::default(),
            released: Default::default(),
        })
    }

    /// Claims so far.
    fn count(&self) -> usize {
        self.claims.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A pool of `workers` over this queue that polls every `poll_interval`.
    fn pool(self: &Arc<Self>, workers: usize, poll_interval: Duration) -> WorkerPool {
        WorkerPool::new(
            self.clone(),
            WorkerConfig {
                workers,
                poll_interval,
                ..WorkerConfig::default()
            },
        )
    }
}

#[async_trait]
impl JobQueue for CountingClaims {
    async fn enqueue(&self, job: &NewJob) -> Result<bool, StoreError> {
        self.inner.enqueue(job).await
    }
    async fn claim(
        &self,
        worker: &str,
        kinds: &[String],
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, StoreError> {
        self.claims.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.claim(worker, kinds, limit, lease).await
    }
    async fn complete(&self, job_id: uuid::Uuid, worker: &str) -> Result<bool, StoreError> {
        self.inner.complete(job_id, worker).await
    }
    async fn fail(
        &self,
        job_id: uuid::Uuid,
        worker: &str,
        error: &str,
        retry_in: Option<Duration>,
    ) -> Result<Option<JobState>, StoreError> {
        self.inner.fail(job_id, worker, error, retry_in).await
    }
    async fn extend_lease(
        &self,
        job_id: uuid::Uuid,
        worker: &str,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        self.inner.extend_lease(job_id, worker, lease).await
    }
    async fn prune_succeeded(&self, age: Duration, limit: usize) -> Result<u64, StoreError> {
        self.inner.prune_succeeded(age, limit).await
    }
    async fn release(&self, worker: &str) -> Result<u64, StoreError> {
        self.released.lock().expect("lock").push(worker.to_owned());
        self.inner.release(worker).await
    }
    async fn get(&self, job_id: uuid::Uuid) -> Result<Option<Job>, StoreError> {
        self.inner.get(job_id).await
    }
    async fn get_by_key(&self, key: &str) -> Result<Option<Job>, StoreError> {
        self.inner.get_by_key(key).await
    }
    async fn counts(&self) -> Result<Vec<kuatia_application::jobs::JobCount>, StoreError> {
        self.inner.counts().await
    }
    async fn list(&self, filter: &kuatia_application::jobs::JobFilter) -> Result<Vec<Job>, StoreError> {
        self.inner.list(filter).await
    }
    async fn retry(&self, job_id: uuid::Uuid) -> Result<Option<Job>, StoreError> {
        self.inner.retry(job_id).await
    }
    async fn discard(&self, job_id: uuid::Uuid, note: &str) -> Result<Option<Job>, StoreError> {
        self.inner.discard(job_id, note).await
    }
}

/// Holds every run until all of them are in progress at once, and notes how many claims it took
/// to get there.
struct Together {
    started: Arc<tokio::sync::Barrier>,
    queue: Arc<CountingClaims>,
    claims_when_all_ran: Arc<Mutex<Option<usize>>>,
}

#[async_trait]
impl JobHandler for Together {
    fn kind(&self) -> &'static str {
        "test.together"
    }
    async fn run(&self, _job: &Job) -> Result<(), JobFailure> {
        let waited = tokio::time::timeout(Duration::from_secs(10), self.started.wait())
            .await
            .map_err(|_| JobFailure::Permanent("the other jobs never ran alongside".into()))?;
        if waited.is_leader() {
            *self.claims_when_all_ran.lock().expect("lock") = Some(self.queue.count());
        }
        Ok(())
    }
}

#[tokio::test]
async fn one_claim_takes_a_commits_jobs_for_the_idle_workers_and_they_run_at_once() {
    let db = TestDb::new().await;
    let database = db.open().await;
    let store = database.store();
    let queue = CountingClaims::over(&database);
    const WORKERS: usize = 16;
    const JOBS: usize = 12;
    let claims_when_all_ran = Arc::new(Mutex::new(None));
    let shutdown = CancellationToken::new();
    let pool = queue
        .pool(WORKERS, Duration::from_secs(600))
        .with_wake(store.position_hint())
        .with_handler(Arc::new(Together {
            started: Arc::new(tokio::sync::Barrier::new(JOBS)),
            queue: queue.clone(),
            claims_when_all_ran: claims_when_all_ran.clone(),
        }))
        .spawn(shutdown.clone());
    // Every worker looks once when it starts, then waits.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let at_start = queue.count();
    let mut request = append(stream(tenant(), "batch"), ExpectedVersion::NoStream, &["Queued"]);
    request.jobs = (0..JOBS)
        .map(|i| {
            let mut job = job(&format!("together-{i}"));
            job.kind = "test.together".into();
            job
        })
        .collect();
    store.append(request).await.expect("append with its jobs");
    let jobs: Arc<dyn JobQueue> = queue.clone();
    wait_until_succeeded(&jobs, JOBS as i64).await;
    // Every job ran while all the others did (the barrier), and getting them all running took a
    // claim or two: the woken worker took the commit's jobs for the idle workers at once (a
    // claim per job would be at least 12).
    let claims = claims_when_all_ran
        .lock()
        .expect("lock")
        .expect("all ran at once")
        - at_start;
    assert!(claims <= 2, "{claims} claims to start one commit's {JOBS} jobs");
    shutdown.cancel();
    pool.await.expect("pool");
}

#[tokio::test]
async fn an_idle_pool_looks_for_jobs_once_per_poll_interval_not_once_per_worker() {
    let db = TestDb::new().await;
    let database = db.open().await;
    let queue = CountingClaims::over(&database);
    const WORKERS: usize = 256;
    let runs = Arc::new(Mutex::new(HashMap::new()));
    let shutdown = CancellationToken::new();
    let pool = queue
        .pool(WORKERS, Duration::from_millis(100))
        .with_handler(Arc::new(Counting { runs: runs.clone() }))
        .spawn(shutdown.clone());
    // A starting pool looks once per poll too (the first at once), not once per worker.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let at = queue.count();
    assert!(
        (1..=6).contains(&at),
        "{at} claims in the first 300 ms of {WORKERS} workers polling every 100 ms"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let claims = queue.count() - at;
    // About ten polls in a second; a poll per worker would be 2 560.
    assert!(
        claims <= 20,
        "{claims} claims in 1 s by {WORKERS} idle workers polling every 100 ms"
    );
    // A job nothing wakes the pool for (queued outside an append) is found by the poll.
    queue.enqueue(&job("polled")).await.expect("enqueue");
    let jobs: Arc<dyn JobQueue> = queue.clone();
    wait_until_succeeded(&jobs, 1).await;
    assert_eq!(runs.lock().expect("lock").get("polled"), Some(&1));
    shutdown.cancel();
    pool.await.expect("pool");
}

#[tokio::test]
async fn a_commit_wakes_one_idle_worker_not_all_of_them_and_every_job_still_runs_at_once() {
    let db = TestDb::new().await;
    let database = db.open().await;
    let store = database.store();
    let queue = CountingClaims::over(&database);
    const WORKERS: usize = 16;
    const COMMITS: usize = 40;
    let runs = Arc::new(Mutex::new(HashMap::new()));
    let shutdown = CancellationToken::new();
    // Only the position hint wakes the workers here.
    let pool = queue
        .pool(WORKERS, Duration::from_secs(600))
        .with_wake(store.position_hint())
        .with_handler(Arc::new(Counting { runs: runs.clone() }))
        .spawn(shutdown.clone());
    // Every worker looks once when it starts.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let at_start = queue.count();
    let t = tenant();
    for i in 0..COMMITS {
        let mut request = append(
            stream(t, &format!("doc-{i}")),
            ExpectedVersion::NoStream,
            &["Queued"],
        );
        request.jobs = vec![job(&format!("wake-{i}"))];
        store.append(request).await.expect("append with a job");
        // Each job starts at once, woken by its commit (the poll interval is ten minutes).
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !runs.lock().expect("lock").contains_key(&format!("wake-{i}")) {
            assert!(
                std::time::Instant::now() < deadline,
                "job {i} did not start after its commit"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    shutdown.cancel();
    pool.await.expect("pool");
    let claims = queue.count() - at_start;
    // One wake per commit: the woken worker claims the job and wakes another, which finds
    // nothing; the first looks again after running it. Waking every idle worker would make about
    // WORKERS claims per commit.
    assert!(
        claims <= COMMITS * 4,
        "{claims} claims for {COMMITS} commits of one job each with {WORKERS} idle workers"
    );
    assert_eq!(runs.lock().expect("lock").len(), COMMITS);
}

#[tokio::test]
async fn an_operator_lists_retries_and_discards_jobs_on_both_backends() {
    use kuatia_application::jobs::{JobFilter, JobListStatus};
    let db = TestDb::new().await;
    let store = db.open().await;
    let queue = store.jobs();
    let document = uuid::Uuid::now_v7();
    let mut doomed = NewJob::new(
        "test.submit",
        format!("submit:{document}"),
        TenantId::SYSTEM,
        json!({"document_id": document}),
    );
    doomed.max_attempts = 2;
    queue.enqueue(&doomed).await.expect("enqueue");
    queue.enqueue(&job("waiting")).await.expect("enqueue");
    queue
        .enqueue(&NewJob::new("test.hold", "running", TenantId::SYSTEM, json!({})))
        .await
        .expect("enqueue");
    let lease = Duration::from_secs(60);
    let submit = vec!["test.submit".to_owned()];
    // Two failed attempts: failed (pending with an error), then dead.
    let first = queue.claim("w", &submit, 1, lease).await.expect("claim");
    queue
        .fail(first[0].id, "w", "boom 1", Some(Duration::ZERO))
        .await
        .expect("fail");
    let list = |status: Option<JobListStatus>, kind: Option<&str>, document: Option<uuid::Uuid>| {
        let filter = JobFilter {
            status,
            kind: kind.map(str::to_owned),
            document,
            limit: 100,
        };
        let queue = queue.clone();
        async move {
            let mut keys: Vec<String> = queue
                .list(&filter)
                .await
                .expect("list")
                .into_iter()
                .map(|j| j.idempotency_key)
                .collect();
            keys.sort();
            keys
        }
    };
    let submit_key = format!("submit:{document}");
    assert_eq!(
        list(Some(JobListStatus::Failed), None, None).await,
        vec![submit_key.clone()]
    );
    assert_eq!(
        list(Some(JobListStatus::Pending), None, None).await,
        ["running".to_owned(), submit_key.clone(), "waiting".to_owned()]
    );
    let second = queue.claim("w", &submit, 1, lease).await.expect("claim");
    queue
        .fail(second[0].id, "w", "boom 2", Some(Duration::ZERO))
        .await
        .expect("fail");
    let running = queue
        .claim("w", &["test.hold".to_owned()], 1, lease)
        .await
        .expect("claim");
    assert_eq!(
        list(Some(JobListStatus::Dead), None, None).await,
        vec![submit_key.clone()]
    );
    assert!(list(Some(JobListStatus::Failed), None, None).await.is_empty());
    assert_eq!(list(Some(JobListStatus::Running), None, None).await.len(), 1);
    assert_eq!(
        list(None, Some("test.submit"), None).await,
        vec![submit_key.clone()]
    );
    assert_eq!(list(None, None, Some(document)).await, vec![submit_key.clone()]);
    assert_eq!(list(None, None, None).await.len(), 3);

    // Retry: a dead job is due now with exactly one attempt more.
    let retried = queue.retry(first[0].id).await.expect("retry").expect("changed");
    assert_eq!(retried.state, JobState::Pending);
    assert_eq!((retried.attempts, retried.max_attempts), (2, 3));
    assert!(retried.next_attempt_at <= chrono::Utc::now());
    let third = queue.claim("w", &submit, 1, lease).await.expect("claim");
    assert_eq!(third.len(), 1, "claimable again");
    assert_eq!(
        queue
            .fail(third[0].id, "w", "boom 3", Some(Duration::ZERO))
            .await
            .expect("fail"),
        Some(JobState::Dead),
        "one more attempt, no more"
    );
    // Neither a running nor a succeeded job is changed.
    assert!(queue.retry(running[0].id).await.expect("retry").is_none());
    assert!(
        queue
            .discard(running[0].id, "no")
            .await
            .expect("discard")
            .is_none()
    );
    assert!(queue.retry(uuid::Uuid::now_v7()).await.expect("retry").is_none());

    // Discard: a waiting job becomes dead without running, the note as its last error.
    let waiting = queue.get_by_key("waiting").await.expect("get").expect("job");
    let discarded = queue
        .discard(waiting.id, "discarded by ana: gone")
        .await
        .expect("discard")
        .expect("changed");
    assert_eq!(discarded.state, JobState::Dead);
    assert_eq!(discarded.last_error.as_deref(), Some("discarded by ana: gone"));
    assert!(
        queue
            .discard(waiting.id, "again")
            .await
            .expect("discard")
            .is_none(),
        "already dead"
    );
    assert!(
        queue
            .claim("w", &kinds(), 10, lease)
            .await
            .expect("claim")
            .is_empty()
    );
}

/// Storage (issue 30): succeeded jobs past their retention are removed, in batches; pending,
/// running and dead ones stay whatever their age, and so do recent succeeded ones.
#[tokio::test]
async fn succeeded_jobs_past_their_retention_are_pruned_and_nothing_else() {
    let db = TestDb::new().await;
    let database = db.open().await;
    let queue = database.jobs();
    for key in ["old-done-1", "old-done-2", "old-dead", "old-running", "new-done"] {
        assert!(queue.enqueue(&job(key)).await.expect("enqueue"));
    }
    let claimed = queue
        .claim("w", &kinds(), 10, Duration::from_secs(60))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 5);
    let id = |key: &str| {
        claimed
            .iter()
            .find(|j| j.idempotency_key == key)
            .expect("claimed")
            .id
    };
    for key in ["old-done-1", "old-done-2"] {
        assert!(queue.complete(id(key), "w").await.expect("complete"));
    }
    queue
        .fail(id("old-dead"), "w", "gave up", None)
        .await
        .expect("fail");
    assert!(queue.enqueue(&job("old-pending")).await.expect("enqueue"));
    // Every job last changed long ago; then one more succeeds now.
    kuatia_tests::execute(
        &database,
        "UPDATE jobs SET updated_at = '2020-01-01T00:00:00.000000Z'",
    )
    .await
    .expect("backdate");
    assert!(queue.complete(id("new-done"), "w").await.expect("complete"));

    // One at a time, so that the loop runs past its first batch.
    let removed =
        kuatia_application::jobs::prune_succeeded(queue.as_ref(), Duration::from_secs(30 * 86_400), 1)
            .await
            .expect("prune");
    assert_eq!(removed, 2);
    for (key, kept) in [
        ("old-done-1", false),
        ("old-done-2", false),
        ("old-dead", true),
        ("old-running", true),
        ("old-pending", true),
        ("new-done", true),
    ] {
        assert_eq!(queue.get_by_key(key).await.expect("get").is_some(), kept, "{key}");
    }
    assert_eq!(
        kuatia_application::jobs::prune_succeeded(queue.as_ref(), Duration::from_secs(30 * 86_400), 100)
            .await
            .expect("prune again"),
        0
    );
}
