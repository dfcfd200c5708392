//! Group commit: concurrent appends in one process share one transaction (a
//! [`kuatia_application::combine::Combiner`]).
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
use kuatia_application::combine::Combiner;
use kuatia_application::event_store::{AppendOutcome, AppendRequest, StoreError};
use tokio::task::JoinHandle;

/// A queued append and where its result goes.
pub(crate) type Waiting =
    kuatia_application::combine::Waiting<AppendRequest, Result<AppendOutcome, StoreError>>;

/// The queue and the leader lock ([`Combiner`], weighed in events).
pub(crate) struct GroupCommit(Combiner<AppendRequest, Result<AppendOutcome, StoreError>>);

fn interrupted() -> StoreError {
    StoreError::Database("the append's transaction was interrupted; its outcome is unknown".into())
}

impl GroupCommit {
    /// A queue whose batches hold at most `max_events` events (one request always fits).
    pub fn new(max_events: usize) -> Self {
        Self(Combiner::new(max_events, |request| request.events.len()))
    }

    /// Queues requests together and in order (they commit in that order, usually in one
    /// transaction) and returns their results in the same order; `commit` starts the transaction
    /// of a batch and must send every request's result.
    pub async fn submit_all(
        &self,
        requests: Vec<AppendRequest>,
        commit: impl Fn(Vec<Waiting>) -> JoinHandle<()>,
    ) -> Vec<Result<AppendOutcome, StoreError>> {
        self.0
            .submit_all(requests, commit)
            .await
            .into_iter()
            .map(|result| result.unwrap_or_else(|| Err(interrupted())))
            .collect()
    }
}

/// A backend's appends through its group commit: each request validated on its own
/// (`common::validate`), the valid ones queued together and in order, the results in the order
/// of `requests`.
pub(crate) async fn append_all<B: BatchAppend + 'static>(
    group: &GroupCommit,
    appender: &std::sync::Arc<B>,
    requests: Vec<AppendRequest>,
) -> Vec<Result<AppendOutcome, StoreError>> {
    let mut results: Vec<Option<Result<AppendOutcome, StoreError>>> = Vec::with_capacity(requests.len());
    let mut valid = Vec::with_capacity(requests.len());
    for request in requests {
        match super::common::validate(&request) {
            Ok(()) => {
                results.push(None);
                valid.push(request);
            }
            Err(e) => results.push(Some(Err(e))),
        }
    }
    let mut committed = group
        .submit_all(valid, |batch| {
            let appender = appender.clone();
            tokio::spawn(async move { commit(appender.as_ref(), batch).await })
        })
        .await
        .into_iter();
    results
        .into_iter()
        .map(|result| result.unwrap_or_else(|| committed.next().unwrap_or_else(|| Err(interrupted()))))
        .collect()
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
