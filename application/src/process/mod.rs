//! The process managers: job handlers that take a document from one state to the next by
//! talking to the world (SIFEN, a printer, a mail server, an integrator's endpoint) and
//! recording what happened as the document's events. Each works through the ports of
//! [`ports`], those of its own file, and those the application already has (the event store,
//! the job queue, the artifact store, the printer, the vault); `kuatia_api::compose` builds
//! their adapters.
//!
//! - [`sifen`]: numbering, building and signing, sending (alone or in lots), reconciling before
//!   any resend, polling lots, and the cancelación / inutilización events.
//! - [`build`]: one DE built and signed (the SIFEN process and the sandbox both use it).
//! - [`delivery`]: an accepted document to its customer and issuer (email, WhatsApp, Telegram),
//!   and invitations by email.
//! - [`webhook_delivery`]: webhook deliveries to the integrators' endpoints, signed, retried and
//!   in order, and the certificate expiry scan that raises `certificate.expiring`. (The webhook
//!   use cases the API calls, endpoints and the deliveries table, are `crate::webhooks`.)
//! - [`autoimpresor`]: the autoimpresor channel: numbering from the authorised range, the
//!   printable, and the number reports to the channel's endpoint.
//! - [`printing`]: the KuDE of an accepted SIFEN document, and any printable rendered again on
//!   request.
//!
//! The helpers below are the ones every process manager shares.

use kuatia_domain::document::aggregate::{self, Document, DocumentState};
use kuatia_domain::tenancy::TenantId;
use uuid::Uuid;

use crate::aggregate::AggregateStore;
use crate::artifacts::ArtifactStore;
use crate::event_store::{EventMetadata, SharedStore};
use crate::jobs::Job;
use crate::worker::JobFailure;

pub mod autoimpresor;
pub mod build;
pub mod delivery;
pub mod ports;
pub mod printing;
pub mod sifen;
pub mod webhook_delivery;

/// A failure the worker retries with the job's backoff, saying `message`.
pub fn retry(message: impl std::fmt::Display) -> JobFailure {
    JobFailure::Retry(message.to_string())
}

/// The metadata of the events a process manager records: `actor` names it
/// (`system:sifen`, `system:autoimpresor`, …).
pub fn metadata(actor: &str) -> EventMetadata {
    EventMetadata {
        actor: Some(actor.to_owned()),
        ..EventMetadata::default()
    }
}

/// The document a job is about (its payload's `document_id`); a job without one fails for good.
pub fn document_id(job: &Job) -> Result<Uuid, JobFailure> {
    job.payload["document_id"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| JobFailure::Permanent(format!("job {} has no document_id", job.id)))
}

/// The document as its stream stands (`None`: no such document of the tenant); a store failure
/// is retried.
pub async fn load_document(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
) -> Result<Option<DocumentState>, JobFailure> {
    let loaded = AggregateStore::<Document>::new(store.clone(), tenant)
        .load(&aggregate::stream_id(tenant, id))
        .await
        .map_err(retry)?;
    Ok(loaded.aggregate().state().cloned())
}

/// The document's signed XML as stored (the bytes SIFEN got and the KuDE prints). A document
/// without one, or whose record names none, fails for good; an artifact store that cannot answer
/// (or lost the bytes) is retried.
pub async fn signed_xml(artifacts: &dyn ArtifactStore, state: &DocumentState) -> Result<Vec<u8>, JobFailure> {
    let id = state.document_id;
    let artifact_id = state
        .signed_xml_artifact_id
        .ok_or_else(|| JobFailure::Permanent(format!("document {id} has no signed XML")))?;
    let artifact = state
        .artifact(artifact_id)
        .ok_or_else(|| JobFailure::Permanent(format!("document {id}: signed XML not recorded")))?;
    artifacts
        .get(&artifact.sha256)
        .await
        .map_err(retry)?
        .ok_or_else(|| {
            retry(format!(
                "the signed XML {} is not in the artifact store",
                artifact.sha256
            ))
        })
}
