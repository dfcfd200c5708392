//! Documents: the use cases behind `POST /v1/documents` and the commands the channels send.
//! Each is a command on the document's stream (`domain::document::aggregate`).

use chrono::{DateTime, Utc};
use kuatia_domain::document::aggregate::{self, Document, DocumentCommand, DocumentError, DocumentStatus};
use kuatia_domain::document::canonical::CanonicalDocument;
use kuatia_domain::document::issues::Issue;
use kuatia_domain::document::routing::Routing;
use kuatia_domain::tenancy::TenantId;
use uuid::Uuid;

use crate::aggregate::{CommandExecutor, ExecuteError};
use crate::event_store::{EventMetadata, SharedStore, StoreError};

/// Why a document command did not happen.
#[derive(Debug, thiserror::Error)]
pub enum DocumentsError {
    /// The aggregate refused (an invalid transition maps to 409).
    #[error(transparent)]
    Refused(DocumentError),
    /// No such document.
    #[error("no such document")]
    NotFound,
    /// A concurrent command won.
    #[error("a concurrent change won; retry")]
    Conflict,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn from_execute(err: ExecuteError<DocumentError>) -> DocumentsError {
    match err {
        ExecuteError::Rejected(DocumentError::NotFound) | ExecuteError::NotFound => DocumentsError::NotFound,
        ExecuteError::Rejected(e) => DocumentsError::Refused(e),
        ExecuteError::Conflict(_) => DocumentsError::Conflict,
        ExecuteError::Store(e) => DocumentsError::Store(e),
    }
}

/// Runs one command on a document.
pub async fn command(
    store: &SharedStore,
    tenant: TenantId,
    document_id: Uuid,
    command: DocumentCommand,
    metadata: EventMetadata,
) -> Result<(), DocumentsError> {
    CommandExecutor::<Document>::new(store.clone(), ())
        .execute(
            tenant,
            &aggregate::stream_id(tenant, document_id),
            command,
            metadata,
        )
        .await
        .map(|_| ())
        .map_err(from_execute)
}

/// What intake decided about a document.
#[derive(Debug)]
pub struct Intake {
    /// The id (from the idempotency claim).
    pub document_id: Uuid,
    /// Where it goes.
    pub routing: Routing,
    /// The document.
    pub document: CanonicalDocument,
    /// Blocking issues.
    pub errors: Vec<Issue>,
    /// Warnings.
    pub warnings: Vec<Issue>,
}

/// A document intake stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    /// When the store recorded its events.
    pub recorded_at: DateTime<Utc>,
    /// Its stream version afterwards.
    pub version: u64,
    /// Its status afterwards (`queued`, or `validation_failed`).
    pub status: DocumentStatus,
}

/// Stores a received document (`validated` or `validation_failed`) and queues a valid one for its
/// channel, in one append that reads nothing first. `Ok(None)`: a document with this id exists already (an idempotent retry found it).
pub async fn receive(
    store: &SharedStore,
    tenant: TenantId,
    intake: Intake,
    metadata: EventMetadata,
    at: DateTime<Utc>,
) -> Result<Option<Stored>, DocumentsError> {
    let valid = intake.errors.is_empty();
    let document_id = intake.document_id;
    let mut commands = vec![DocumentCommand::Receive {
        document_id,
        routing: intake.routing,
        document: Box::new(intake.document),
        errors: intake.errors,
        warnings: intake.warnings,
        at,
    }];
    if valid {
        commands.push(DocumentCommand::Queue { at });
    }
    // One append: received, validated (or validation_failed) and queued commit together.
    let received = CommandExecutor::<Document>::new(store.clone(), ())
        .execute_new(
            tenant,
            &aggregate::stream_id(tenant, document_id),
            commands,
            metadata,
        )
        .await
        .map(|committed| Stored {
            recorded_at: committed.recorded_at.unwrap_or(at),
            version: committed.stream_version,
            status: if valid {
                DocumentStatus::Queued
            } else {
                DocumentStatus::ValidationFailed
            },
        })
        .map_err(from_execute);
    match received {
        Ok(stored) => Ok(Some(stored)),
        Err(DocumentsError::Refused(DocumentError::AlreadyExists) | DocumentsError::Conflict) => Ok(None),
        Err(e) => Err(e),
    }
}
