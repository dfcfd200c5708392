//! Queries over the `documents` projection's `document_artifacts` for the unauthenticated
//! download endpoint: it knows a document id and an artifact id (bound together by the URL's
//! signature) and no tenant, so it looks the artifact up by both ids. Writes: none (the rows are
//! the `documents` projection's).

use chrono::{DateTime, Utc};
use kuatia_application::event_store::{SharedStore, StoreError};
use kuatia_application::projection::SqlValue;
use uuid::Uuid;

/// An artifact as the download endpoint serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Download {
    /// Kind (`kude`, `signed_xml`, …).
    pub kind: String,
    /// Version per kind.
    pub version: i64,
    /// MIME type.
    pub content_type: String,
    /// SHA-256 of the bytes (their name in the artifact store).
    pub sha256: String,
    /// Bytes.
    pub size: i64,
    /// Recorded.
    pub created_at: DateTime<Utc>,
    /// The document's CDC (SIFEN), for the file name.
    pub cdc: Option<String>,
    /// The document's number (`001-001-0000001`), for the file name.
    pub number: Option<String>,
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("unreadable {what}"))
}

/// The artifact `artifact_id` of document `document_id`, in any tenant.
pub async fn download(
    store: &SharedStore,
    document_id: Uuid,
    artifact_id: Uuid,
) -> Result<Option<Download>, StoreError> {
    let rows = store
        .query(
            "SELECT a.kind, a.version, a.content_type, a.sha256, a.size, a.created_at, d.cdc, d.number \
             FROM document_artifacts a JOIN documents d ON d.id = a.document_id \
             WHERE a.id = $1 AND a.document_id = $2",
            &[SqlValue::Uuid(artifact_id), SqlValue::Uuid(document_id)],
        )
        .await?;
    rows.first()
        .map(|r| {
            Ok(Download {
                kind: r[0].as_text().ok_or_else(|| corrupt("kind"))?,
                version: r[1].as_i64().ok_or_else(|| corrupt("version"))?,
                content_type: r[2].as_text().ok_or_else(|| corrupt("content type"))?,
                sha256: r[3].as_text().ok_or_else(|| corrupt("sha256"))?,
                size: r[4].as_i64().ok_or_else(|| corrupt("size"))?,
                created_at: r[5].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
                cdc: r[6].non_null().and_then(SqlValue::as_text),
                number: r[7].non_null().and_then(SqlValue::as_text),
            })
        })
        .transpose()
}
