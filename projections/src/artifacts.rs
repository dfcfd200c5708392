//! Queries over the `documents` projection's `document_artifacts` for the unauthenticated
//! endpoints: the presigned download knows a document id and an artifact id (bound together by
//! the URL's signature) and no tenant, so it looks the artifact up by both ids; a public link
//! knows its token's hash, which names the document. Writes: none (the rows are the `documents`
//! projection's).

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

/// A public link found by its token's hash, with the document's newest printable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicPrintable {
    /// When the link stops working.
    pub expires_at: DateTime<Utc>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
    /// The document.
    pub document_id: Uuid,
    /// Its newest KuDE or autoimpresor PDF; `None` while none is rendered.
    pub printable: Option<Download>,
}

/// The public link whose token hashes to `token_sha256`, in any tenant.
pub async fn public_printable(
    store: &SharedStore,
    token_sha256: &str,
) -> Result<Option<PublicPrintable>, StoreError> {
    let rows = store
        .query(
            "SELECT l.document_id, l.expires_at, l.revoked_at FROM document_public_links l \
             WHERE l.token_sha256 = $1",
            &[SqlValue::Text(token_sha256.to_owned())],
        )
        .await?;
    let Some(link) = rows.first() else {
        return Ok(None);
    };
    let document_id = link[0].as_uuid().ok_or_else(|| corrupt("document id"))?;
    let newest = store
        .query(
            "SELECT a.id FROM document_artifacts a WHERE a.document_id = $1 \
               AND a.kind IN ('kude', 'printable_pdf') ORDER BY a.created_at DESC, a.version DESC LIMIT 1",
            &[SqlValue::Uuid(document_id)],
        )
        .await?;
    let printable = match newest.first() {
        Some(row) => {
            let artifact_id = row[0].as_uuid().ok_or_else(|| corrupt("artifact id"))?;
            download(store, document_id, artifact_id).await?
        }
        None => None,
    };
    Ok(Some(PublicPrintable {
        expires_at: link[1].as_timestamp().ok_or_else(|| corrupt("expires_at"))?,
        revoked_at: link[2].non_null().and_then(SqlValue::as_timestamp),
        document_id,
        printable,
    }))
}
