//! What the process managers' job handlers share: how a failure is told to the worker, the
//! document a job is about, and the metadata of the events they record.

use crate::event_store::EventMetadata;
use crate::jobs::Job;
use crate::worker::JobFailure;
use uuid::Uuid;

/// A failure the worker tries again on its backoff (the store, a lost race, a network error).
pub(crate) fn retry(message: impl std::fmt::Display) -> JobFailure {
    JobFailure::Retry(message.to_string())
}

/// The `document_id` of a job's payload; a job without one fails for good.
pub(crate) fn document_id(job: &Job) -> Result<Uuid, JobFailure> {
    job.payload["document_id"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| JobFailure::Permanent(format!("job {} has no document_id", job.id)))
}

/// The metadata of the events a process manager records: its actor (`system:…`).
pub(crate) fn metadata(actor: &str) -> EventMetadata {
    EventMetadata {
        actor: Some(actor.to_owned()),
        ..EventMetadata::default()
    }
}
