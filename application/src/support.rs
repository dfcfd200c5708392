//! What an operator of the whole service does, for the CLI (`kuatia jobs`, `kuatia operators`,
//! `kuatia events verify`) and the console's operators' room alike: each action changes what it
//! changes and records a [`SupportEvent`] with the operator as the actor (`operator:<name>`), on
//! the tenant's support stream (a job's) or the system's (who is an operator, a rebuild, a
//! verification).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use chrono::Utc;
use kuatia_domain::support::{self, SupportEvent};
use kuatia_domain::tenancy::TenantId;

use crate::event_store::{
    AppendRequest, EventMetadata, ExpectedVersion, NewEvent, ReadFilter, SharedStore, StoreError, StreamRef,
};
use crate::hash::{ChainBreak, ChainVerifier};
use crate::jobs::{Job, JobQueue, JobState};

/// The code the `sifen_answers` read model counts an operational failure under (no answer from
/// SIFEN, or one that says to try again later): SIFEN's own codes are digits.
pub const SIFEN_RETRY_CODE: &str = "retry";

/// Why a support action did nothing.
#[derive(Debug, thiserror::Error)]
pub enum SupportError {
    /// No such job.
    #[error("no job {0}")]
    NoSuchJob(uuid::Uuid),
    /// The job is not in a state the action changes.
    #[error("job {id} is {status}: {action} changes only a {changes} job")]
    NotChangeable {
        /// The job.
        id: uuid::Uuid,
        /// Its status as `jobs list` says it.
        status: &'static str,
        /// `retry` or `discard`.
        action: &'static str,
        /// What the action changes.
        changes: &'static str,
    },
    /// A discard needs a reason.
    #[error("a discard says why the job is discarded; the reason may not be empty")]
    NoReason,
    /// The store failed (the queue change may have been made: a failed append is said after it).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// How a job's status is named (`failed`: waiting after a failed attempt).
pub fn job_status(job: &Job) -> &'static str {
    match job.state {
        JobState::Pending if job.last_error.is_some() => "failed",
        state => state.as_str(),
    }
}

/// Appends `event` to `tenant`'s support stream with `operator` as the actor.
pub async fn record(
    store: &SharedStore,
    tenant: TenantId,
    event: &SupportEvent,
    operator: &str,
) -> Result<(), StoreError> {
    store
        .append(AppendRequest {
            stream: StreamRef {
                tenant_id: tenant,
                stream_type: support::STREAM_TYPE.into(),
                stream_id: support::stream_id(tenant),
            },
            expected: ExpectedVersion::Any,
            events: vec![NewEvent::from_domain(event)?],
            metadata: EventMetadata {
                actor: Some(format!("operator:{operator}")),
                ..EventMetadata::default()
            },
            jobs: Vec::new(),
        })
        .await
        .map(|_| ())
}

/// Makes a dead or waiting job due now (one attempt more), recorded as `JobRetried`.
pub async fn retry_job(
    store: &SharedStore,
    queue: &dyn JobQueue,
    id: uuid::Uuid,
    operator: &str,
    reason: Option<String>,
) -> Result<Job, SupportError> {
    let Some(job) = queue.retry(id).await? else {
        return Err(unchanged(queue, id, "retry", "dead or pending").await);
    };
    let event = SupportEvent::JobRetried {
        job_id: job.id,
        kind: job.kind.clone(),
        idempotency_key: job.idempotency_key.clone(),
        operator: operator.to_owned(),
        reason,
        at: Utc::now(),
    };
    record(store, job.tenant_id, &event, operator).await?;
    Ok(job)
}

/// Makes a waiting job dead without running it (`reason` becomes its last error), recorded as
/// `JobDiscarded`.
pub async fn discard_job(
    store: &SharedStore,
    queue: &dyn JobQueue,
    id: uuid::Uuid,
    operator: &str,
    reason: &str,
) -> Result<Job, SupportError> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(SupportError::NoReason);
    }
    let Some(job) = queue
        .discard(id, &format!("discarded by {operator}: {reason}"))
        .await?
    else {
        return Err(unchanged(queue, id, "discard", "pending").await);
    };
    let event = SupportEvent::JobDiscarded {
        job_id: job.id,
        kind: job.kind.clone(),
        idempotency_key: job.idempotency_key.clone(),
        operator: operator.to_owned(),
        reason: reason.to_owned(),
        at: Utc::now(),
    };
    record(store, job.tenant_id, &event, operator).await?;
    Ok(job)
}

async fn unchanged(
    queue: &dyn JobQueue,
    id: uuid::Uuid,
    action: &'static str,
    changes: &'static str,
) -> SupportError {
    match queue.get(id).await {
        Ok(Some(job)) => SupportError::NotChangeable {
            id,
            status: job_status(&job),
            action,
            changes,
        },
        Ok(None) => SupportError::NoSuchJob(id),
        Err(e) => SupportError::Store(e),
    }
}

/// The operators of the service: the emails the system's support stream added and did not
/// remove since.
pub async fn operators(store: &SharedStore) -> Result<BTreeSet<String>, StoreError> {
    let mut out = BTreeSet::new();
    for event in store.load_stream(&support::stream_id(TenantId::SYSTEM)).await? {
        match serde_json::from_value::<SupportEvent>(event.payload) {
            Ok(SupportEvent::OperatorAdded { email, .. }) => {
                out.insert(email);
            }
            Ok(SupportEvent::OperatorRemoved { email, .. }) => {
                out.remove(&email);
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Makes `email` an operator (`false`: it was one already; nothing recorded).
pub async fn add_operator(store: &SharedStore, email: &str, operator: &str) -> Result<bool, StoreError> {
    let email = email.trim().to_lowercase();
    if operators(store).await?.contains(&email) {
        return Ok(false);
    }
    let event = SupportEvent::OperatorAdded {
        email,
        operator: operator.to_owned(),
        at: Utc::now(),
    };
    record(store, TenantId::SYSTEM, &event, operator).await?;
    Ok(true)
}

/// Ends `email`'s operator rights (`false`: it was not one; nothing recorded).
pub async fn remove_operator(store: &SharedStore, email: &str, operator: &str) -> Result<bool, StoreError> {
    let email = email.trim().to_lowercase();
    if !operators(store).await?.contains(&email) {
        return Ok(false);
    }
    let event = SupportEvent::OperatorRemoved {
        email,
        operator: operator.to_owned(),
        at: Utc::now(),
    };
    record(store, TenantId::SYSTEM, &event, operator).await?;
    Ok(true)
}

/// The projections as the operators' room sees them (the composition root implements it over the
/// projections' registry and runtime, the code `kuatia projections rebuild` runs).
#[async_trait::async_trait]
pub trait ProjectionAdmin: Send + Sync {
    /// `Some(true)` for a projection that may be rebuilt, `Some(false)` for a side-effect
    /// subscription (never rebuilt), `None` for no such name.
    fn rebuildable(&self, name: &str) -> Option<bool>;

    /// Empties projection `name` and replays it from position 0, calling `progress(position,
    /// head)`; the events replayed, or why not.
    async fn rebuild(&self, name: &str, progress: &(dyn Fn(i64, i64) + Send + Sync)) -> Result<u64, String>;
}

/// Rebuilds projection `name`, recorded as `ProjectionRebuilt` on the system's support stream.
pub async fn rebuild_projection(
    store: &SharedStore,
    projections: &dyn ProjectionAdmin,
    name: &str,
    operator: &str,
    progress: &(dyn Fn(i64, i64) + Send + Sync),
) -> Result<u64, String> {
    match projections.rebuildable(name) {
        None => return Err(format!("no projection named {name:?}")),
        Some(false) => return Err(format!("{name} has side effects and is never rebuilt")),
        Some(true) => {}
    }
    let events = projections.rebuild(name, progress).await?;
    let event = SupportEvent::ProjectionRebuilt {
        name: name.to_owned(),
        events,
        operator: operator.to_owned(),
        at: Utc::now(),
    };
    record(store, TenantId::SYSTEM, &event, operator)
        .await
        .map_err(|e| e.to_string())?;
    Ok(events)
}

/// Verifies the whole store (as [`verify_store`]), recorded as `EventsVerified` on the system's
/// support stream.
pub async fn verify_recorded(
    store: &SharedStore,
    operator: &str,
    progress: &(dyn Fn(i64, i64) + Send + Sync),
) -> Result<Verification, StoreError> {
    let found = verify_store(store, progress).await?;
    let event = SupportEvent::EventsVerified {
        events: found.checked,
        broken: u64::from(found.broken.is_some()),
        operator: operator.to_owned(),
        at: Utc::now(),
    };
    record(store, TenantId::SYSTEM, &event, operator).await?;
    Ok(found)
}

/// A long task of the operators' room (a rebuild or a verification), one at a time per instance.
#[derive(Debug, Clone)]
pub struct OperatorTask {
    /// `rebuild` or `verify`.
    pub kind: &'static str,
    /// The projection rebuilt (empty for a verification).
    pub name: String,
    /// Who started it.
    pub operator: String,
    /// When.
    pub started: chrono::DateTime<Utc>,
    /// The position reached.
    pub position: i64,
    /// The head it runs to.
    pub head: i64,
    /// When it ended (`None`: running).
    pub finished: Option<chrono::DateTime<Utc>>,
    /// It ended well.
    pub ok: bool,
    /// What it found or why it failed.
    pub outcome: String,
}

/// The instance's slot for the room's task.
pub type Tasks = Arc<Mutex<Option<OperatorTask>>>;

/// Puts `task` in the slot unless one runs there; `false` when one does.
pub fn claim(tasks: &Tasks, task: OperatorTask) -> bool {
    let Ok(mut slot) = tasks.lock() else {
        return false;
    };
    if slot.as_ref().is_some_and(|t| t.finished.is_none()) {
        return false;
    }
    *slot = Some(task);
    true
}

/// Changes the task in the slot, if there is one.
pub fn update(tasks: &Tasks, f: impl FnOnce(&mut OperatorTask)) {
    if let Ok(mut slot) = tasks.lock()
        && let Some(task) = slot.as_mut()
    {
        f(task);
    }
}

/// What a verification of the whole store found.
#[derive(Debug, Clone)]
pub struct Verification {
    /// Events checked.
    pub checked: u64,
    /// Streams seen.
    pub streams: u64,
    /// The last position read.
    pub head: i64,
    /// Where a chain broke, if one did (the walk stops there).
    pub broken: Option<ChainBreak>,
}

/// Walks every event in order checking each stream's hash chain, calling `progress(position,
/// head)` after each page; stops at the first break.
pub async fn verify_store(
    store: &SharedStore,
    progress: &(dyn Fn(i64, i64) + Send + Sync),
) -> Result<Verification, StoreError> {
    let head = store.head_position().await?;
    let mut verifier = ChainVerifier::default();
    let mut filter = ReadFilter {
        after: 0,
        limit: 2000,
        ..ReadFilter::default()
    };
    // The next page is read while this one is hashed (issue 30: reading and hashing took turns).
    let read = |after: i64| {
        let (store, limit) = (store.clone(), filter.limit);
        tokio::spawn(async move {
            store
                .read_all_raw_json(&ReadFilter {
                    after,
                    limit,
                    ..ReadFilter::default()
                })
                .await
        })
    };
    let mut next = read(0);
    loop {
        let page = next
            .await
            .map_err(|e| StoreError::Invalid(format!("reading the log: {e}")))??;
        let Some(last) = page.last() else { break };
        filter.after = last.global_position;
        next = read(filter.after);
        for event in &page {
            if let Err(broken) = verifier.check(event) {
                return Ok(Verification {
                    checked: verifier.checked(),
                    streams: verifier.streams() as u64,
                    head: filter.after,
                    broken: Some(broken),
                });
            }
        }
        progress(filter.after, head.max(filter.after));
    }
    Ok(Verification {
        checked: verifier.checked(),
        streams: verifier.streams() as u64,
        head: filter.after,
        broken: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(kind: &'static str) -> OperatorTask {
        OperatorTask {
            kind,
            name: "documents".into(),
            operator: "soporte@kuatia.com.py".into(),
            started: Utc::now(),
            position: 0,
            head: 10,
            finished: None,
            ok: false,
            outcome: String::new(),
        }
    }

    #[test]
    fn one_task_runs_at_a_time_and_an_ended_one_gives_way() {
        let tasks = Tasks::default();
        assert!(claim(&tasks, task("rebuild")));
        assert!(!claim(&tasks, task("verify")), "refused while the rebuild runs");
        update(&tasks, |t| t.finished = Some(Utc::now()));
        assert!(claim(&tasks, task("verify")));
        assert_eq!(
            tasks.lock().map(|t| t.as_ref().map(|t| t.kind)).ok().flatten(),
            Some("verify")
        );
    }
}
