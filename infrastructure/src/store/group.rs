//! Group commit: concurrent appends in one process share one transaction.
//!
//! Appends are serialised (PostgreSQL: the append advisory lock; SQLite: the single writer), so
//! one append at a time would pay one lock hand-over, one commit and one fsync each. Instead,
//! every append enqueues its request; whoever takes the leader lock drains the queue and commits
//! everything queued in one transaction, while later arrivals queue for the next round. Each
//! request is still checked on its own (its expected version, its tenant), gets its own result,
//! and a conflict refuses only that request. If the shared transaction fails for another reason
//! (a request whose inline projection fails, say), the batch is split in two and each half retried
//! ([`commit`]), down to single requests: one bad request cannot fail its neighbours, and they
//! stay grouped in as few transactions as possible. Halves are retried in order, so two requests
//! on one stream still commit in the order they were queued.
//!
//! The commit runs in a spawned task: a caller that goes away (a client disconnecting) cannot
//! cancel a transaction that carries other callers' events.

use async_trait::async_trait;
use kuatia_application::event_store::{AppendOutcome, AppendRequest, StoreError};
use std::sync::Mutex;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A queued append and where its result goes.
pub(crate) struct Waiting {
    /// The request.
    pub request: AppendRequest,
    /// Its result.
    pub reply: oneshot::Sender<Result<AppendOutcome, StoreError>>,
}

/// The queue and the leader lock.
pub(crate) struct GroupCommit {
    pending: Mutex<Vec<Waiting>>,
    leader: tokio::sync::Mutex<()>,
    max_events: usize,
}

fn interrupted() -> StoreError {
    StoreError::Database("the append's transaction was interrupted; its outcome is unknown".into())
}

impl GroupCommit {
    /// A queue whose batches hold at most `max_events` events (one request always fits).
    pub fn new(max_events: usize) -> Self {
        Self {
            pending: Mutex::new(Vec::new()),
            leader: tokio::sync::Mutex::new(()),
            max_events: max_events.max(1),
        }
    }

    fn take_batch(&self) -> Vec<Waiting> {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut events = 0;
        let mut take = 0;
        for waiting in pending.iter() {
            events += waiting.request.events.len();
            if take > 0 && events > self.max_events {
                break;
            }
            take += 1;
        }
        pending.drain(..take).collect()
    }

    /// Queues a request and returns its result; `commit` starts the transaction of a batch and
    /// must send every request's result.
    pub async fn submit(
        &self,
        request: AppendRequest,
        commit: impl Fn(Vec<Waiting>) -> JoinHandle<()>,
    ) -> Result<AppendOutcome, StoreError> {
        let (reply, mut result) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Waiting { request, reply });
        loop {
            // Whoever is answered returns at once; only the unanswered compete to lead. (Queuing
            // for the leader lock just to read an answer would keep writers from submitting new
            // work and shrink every batch.)
            let leader = tokio::select! {
                biased;
                outcome = &mut result => return outcome.unwrap_or_else(|_| Err(interrupted())),
                guard = self.leader.lock() => guard,
            };
            match result.try_recv() {
                Ok(outcome) => return outcome,
                Err(oneshot::error::TryRecvError::Closed) => return Err(interrupted()),
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            let batch = self.take_batch();
            if batch.is_empty() {
                // Ours is in a batch whose leader went away; its task still answers.
                drop(leader);
                return result.await.unwrap_or_else(|_| Err(interrupted()));
            }
            let _ = commit(batch).await;
            drop(leader);
        }
    }
}

/// A backend's transaction for a batch of appends.
#[async_trait]
pub(crate) trait BatchAppend: Send + Sync {
    /// Appends every request in one transaction. `Err`: nothing was committed. `Ok`: one result
    /// per request, in order (a refused request does not stop the others).
    async fn append_batch(
        &self,
        requests: &[AppendRequest],
    ) -> Result<Vec<Result<AppendOutcome, StoreError>>, StoreError>;
}

/// Commits a batch and answers every request, bisecting on failure.
pub(crate) async fn commit(appender: &dyn BatchAppend, batch: Vec<Waiting>) {
    let mut work = vec![batch];
    while let Some(batch) = work.pop() {
        let requests: Vec<AppendRequest> = batch.iter().map(|w| w.request.clone()).collect();
        match appender.append_batch(&requests).await {
            Ok(results) => {
                for (waiting, result) in batch.into_iter().zip(results) {
                    let _ = waiting.reply.send(result);
                }
            }
            Err(err) if batch.len() == 1 => {
                if let Some(waiting) = batch.into_iter().next() {
                    let _ = waiting.reply.send(Err(err));
                }
            }
            Err(err) => {
                tracing::debug!(error = %err, requests = batch.len(), "a grouped append failed; retrying its halves");
                let mut first = batch;
                let second = first.split_off(first.len() / 2);
                // A stack: push the second half first so the first half commits first.
                work.push(second);
                work.push(first);
            }
        }
    }
}
