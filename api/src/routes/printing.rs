//! `POST /v1/documents/{id}/regenerate-pdf`: a new version of
//! a document's printable (the KuDE of a SIFEN document, the autoimpresor printable PDF). The
//! request is an event (`PdfRegenerationRequested`) whose job renders and records the new
//! version (`kuatia_application::process::printing`); earlier versions stay listed.

use crate::extract::Path;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use kuatia_application::documents::{self, DocumentsError};
use kuatia_domain::access::Permission;
use kuatia_domain::document::aggregate::{Document, DocumentCommand, DocumentError};
use kuatia_projections::documents as read_docs;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::state::AppState;

/// Needed by `POST /v1/documents/{id}/regenerate-pdf` (as the other document commands).
pub const REGENERATE_PDF: Permission = Permission::IssueDocuments;

/// The answer to a regeneration request.
#[derive(Debug, Serialize, ToSchema)]
pub struct RegenerationQueued {
    /// The document.
    pub document_id: Uuid,
    /// The printable being rendered again: `kude` or `printable_pdf`.
    #[serde(rename = "type")]
    pub artifact_type: String,
    /// The version the new PDF will have (earlier versions stay listed).
    pub version: u32,
    /// Always `queued`.
    pub status: String,
    /// Where the new version will be listed.
    pub artifacts_url: String,
}

/// Queues a new rendering of the document's printable: 202. 409 `conflict_error` when the
/// document has no printable yet (a SIFEN document before its KuDE is recorded, which follows
/// its acceptance; an autoimpresor document before it is rendered). Asking again while a
/// regeneration is pending queues nothing more and answers the same.
#[utoipa::path(
    post,
    path = "/v1/documents/{id}/regenerate-pdf",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 202, description = "A PDF generation job is queued", body = RegenerationQueued),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such document", body = ErrorBody),
        (status = 409, description = "The document has no printable yet", body = ErrorBody)
    )
)]
pub async fn regenerate_pdf(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<Response, ApiError> {
    caller.require(REGENERATE_PDF)?;
    let row = read_docs::document(&state.store, caller.tenant, id)
        .await?
        .filter(|d| caller.sees(d.company_id))
        .ok_or_else(|| ApiError::not_found("no such document"))?;
    // A job may append to the document at the same moment (a report, a delivery): the request
    // is decided again on the new state, a few times, before it is called a conflict.
    let mut attempts = 0;
    let outcome = loop {
        let command = DocumentCommand::RequestPdfRegeneration { at: Utc::now() };
        match documents::command(&state.store, caller.tenant, id, command, caller.metadata()).await {
            Err(DocumentsError::Conflict) if attempts < 5 => attempts += 1,
            outcome => break outcome,
        }
    };
    match outcome {
        Ok(()) => {}
        Err(DocumentsError::Refused(DocumentError::NoPrintable)) => {
            return Err(ApiError::new(
                ErrorCode::ConflictError,
                format!(
                    "the document has no printable yet (status `{}`): the KuDE follows SIFEN's \
                     acceptance, the autoimpresor printable its rendering",
                    row.status
                ),
            ));
        }
        Err(DocumentsError::Refused(e)) => {
            return Err(ApiError::new(ErrorCode::ConflictError, e.to_string()));
        }
        Err(DocumentsError::Conflict) => {
            return Err(ApiError::new(
                ErrorCode::ConflictError,
                "the document changed meanwhile; try again",
            ));
        }
        Err(DocumentsError::NotFound) => return Err(ApiError::not_found("no such document")),
        Err(DocumentsError::Store(e)) => return Err(e.into()),
    }
    let store =
        kuatia_application::aggregate::AggregateStore::<Document>::new(state.store.clone(), caller.tenant);
    let loaded = store
        .load(&kuatia_domain::document::aggregate::stream_id(caller.tenant, id))
        .await?;
    let document = loaded
        .aggregate()
        .state()
        .ok_or_else(|| ApiError::not_found("no such document"))?;
    let kind = document
        .printable_kind()
        .ok_or_else(|| ApiError::new(ErrorCode::ConflictError, "the document has no printable yet"))?;
    let body = RegenerationQueued {
        document_id: id,
        artifact_type: kind.to_string(),
        version: document.next_artifact_version(kind),
        status: "queued".into(),
        artifacts_url: format!("/v1/documents/{id}/artifacts"),
    };
    Ok((StatusCode::ACCEPTED, axum::Json(body)).into_response())
}
