//! A document's artifacts and their downloads.
//!
//! - `GET /v1/documents/{id}/artifacts` lists them, each with a presigned `download_url` valid
//!   for 15 minutes (`KUATIA_ARTIFACT_URL_TTL_SECS`). The detail (`GET /v1/documents/{id}`) lists
//!   the very same items ([`views`]).
//! - `GET /v1/documents/{id}/artifacts/{artifactId}/download?expires=&signature=` takes no bearer:
//!   the signature is the credential. `signature` is the lower-case hex HMAC-SHA256, under the
//!   server's URL key, of `"<document id>:<artifact id>:<expires>"`; it is checked in constant
//!   time (`kuatia_application::mac`), and a wrong, malformed or expired one is 403 `permission_error`
//!   in the contract's error shape, the same answer for each so that nothing is learnt by
//!   probing. The bytes come from the artifact store, checked against their SHA-256.
//!
//! The URL key is `KUATIA_ARTIFACT_URL_KEY` when set, otherwise derived from the master key
//! ([`derive_url_key`]), so that every instance sharing the master key verifies every other's
//! URLs with nothing more to configure. Rotating either invalidates the URLs handed out (they
//! last 15 minutes anyway).

use crate::extract::Path;
use axum::extract::State;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use chrono::{TimeZone, Utc};
use kuatia_domain::access::Permission;
use kuatia_projections::documents as read_docs;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

pub use kuatia_application::download_urls::{UrlSigner, derive_url_key};

/// The origin the client reached us at (`X-Forwarded-Proto`/`X-Forwarded-Host` from a proxy,
/// else `Host` over http), so that `download_url` is absolute; empty (a path-absolute URL) when
/// the request named no host.
pub(crate) fn origin(headers: &HeaderMap) -> String {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(',').next().unwrap_or_default().trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let host = text("x-forwarded-host").or_else(|| text("host"));
    // Only what a host header may hold: nothing that could bend the URL.
    let host = host.filter(|h| {
        h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'))
    });
    let scheme = text("x-forwarded-proto")
        .filter(|p| p == "https" || p == "http")
        .unwrap_or_else(|| "http".to_owned());
    host.map_or_else(String::new, |h| format!("{scheme}://{h}"))
}

/// An artifact with a presigned download URL (built by
/// `routes::artifacts::views` for both the artifact list and the detail).
#[derive(Debug, Serialize, ToSchema)]
pub struct ArtifactView {
    /// Id.
    pub id: Uuid,
    /// kude, signed_xml, printable_pdf, …
    #[serde(rename = "type")]
    pub kind: String,
    /// Version per type.
    pub version: i64,
    /// MIME type.
    pub content_type: String,
    /// SHA-256, hex.
    pub sha256: String,
    /// Bytes.
    pub size: i64,
    /// Recorded.
    pub created_at: chrono::DateTime<Utc>,
    /// Where to download the bytes without a bearer: `…/artifacts/{id}/download?expires=&signature=`,
    /// valid until `expires_at`.
    pub download_url: String,
    /// When `download_url` stops working (15 minutes after the listing).
    pub expires_at: chrono::DateTime<Utc>,
}

/// The artifacts of a document the caller may see, each with a fresh download URL: what both the
/// artifact list and the document detail show.
pub async fn views(
    state: &AppState,
    headers: &HeaderMap,
    caller: &Caller,
    document_id: Uuid,
) -> Result<Vec<ArtifactView>, ApiError> {
    let now = Utc::now();
    let expires = state.artifact_urls.expires(now);
    let expires_at = Utc.timestamp_opt(expires, 0).single().unwrap_or(now);
    let origin = origin(headers);
    Ok(read_docs::artifacts(&state.store, caller.tenant, document_id)
        .await?
        .into_iter()
        .map(|a| ArtifactView {
            download_url: format!("{origin}{}", state.artifact_urls.path(document_id, a.id, expires)),
            expires_at,
            id: a.id,
            kind: a.kind,
            version: a.version,
            content_type: a.content_type,
            sha256: a.sha256,
            size: a.size,
            created_at: a.created_at,
        })
        .collect())
}

/// A document's artifacts with presigned download URLs.
#[utoipa::path(
    get,
    path = "/v1/documents/{id}/artifacts",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "The document's artifacts, every version, each with a download URL valid for 15 minutes", body = [ArtifactView],
            example = json!([{
                "id": "0193a0c4-7a9e-7d21-9c1e-5b1f4f0e2a10",
                "type": "signed_xml",
                "version": 1,
                "content_type": "application/xml",
                "size": 6143,
                "sha256": "9f2c4e0b5d3a1f7e8c6b4a2d0e9f8c7b6a5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f",
                "created_at": "2026-11-23T15:04:05Z",
                "download_url": "https://api.example.com.py/v1/documents/0193a0c4-7a90-7000-8000-000000000001/artifacts/0193a0c4-7a9e-7d21-9c1e-5b1f4f0e2a10/download?expires=1795446245&signature=5d1e…",
                "expires_at": "2026-11-23T15:19:05Z"
            }])),
        (status = 401, description = "No or invalid credentials", body = ErrorBody),
        (status = 404, description = "No such document (or another tenant's)", body = ErrorBody)
    )
)]
pub async fn list_artifacts(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<Vec<ArtifactView>>, ApiError> {
    caller.require(Permission::ReadDocuments)?;
    read_docs::document(&state.store, caller.tenant, id)
        .await?
        .filter(|d| caller.sees(d.company_id))
        .ok_or_else(|| ApiError::not_found("no such document"))?;
    Ok(axum::Json(views(&state, &headers, &caller, id).await?))
}

/// The download URL's query. Both are required; they are read as optional text so that a URL
/// missing either, or with a non-numeric `expires`, gets the same 403 as a wrong signature.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DownloadQuery {
    /// Unix seconds after which the URL is refused.
    #[param(required = true, value_type = i64, example = 1795446245)]
    pub expires: Option<String>,
    /// Lower-case hex HMAC-SHA256 of `"<document id>:<artifact id>:<expires>"`.
    #[param(required = true, value_type = String)]
    pub signature: Option<String>,
    /// `1`: a PDF opens in the browser (`Content-Disposition: inline`) instead of being saved;
    /// any other artifact is saved regardless. Not part of the signature.
    pub inline: Option<String>,
}

fn refused() -> ApiError {
    ApiError::forbidden("the download URL is invalid or expired; list the artifacts again for a fresh one")
}

/// The file name a download is saved as: the CDC (or the printed number, or the document id),
/// the type and version, and the extension of its content type.
fn file_name(document_id: Uuid, a: &kuatia_projections::artifacts::Download) -> String {
    let base = a
        .cdc
        .clone()
        .or_else(|| a.number.clone())
        .unwrap_or_else(|| document_id.to_string());
    let ext = match a.content_type.split(';').next().unwrap_or_default().trim() {
        "application/pdf" => "pdf",
        "application/xml" | "text/xml" => "xml",
        "application/json" => "json",
        _ => "bin",
    };
    let kind = a.kind.replace('_', "-");
    let name = format!("{base}-{kind}-v{}.{ext}", a.version);
    // Only characters that need no quoting in the header.
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Downloads one artifact through a presigned URL (no bearer; the signature is the credential).
#[utoipa::path(
    get,
    path = "/v1/documents/{id}/artifacts/{artifactId}/download",
    tag = "documents",
    params(
        ("id" = Uuid, Path, description = "The document"),
        ("artifactId" = Uuid, Path, description = "The artifact"),
        DownloadQuery
    ),
    responses(
        (status = 200, description = "The artifact's bytes, with its Content-Type and a Content-Disposition naming the file (e.g. `<CDC>-kude-v1.pdf`)", content_type = "application/octet-stream"),
        (status = 403, description = "The signature is wrong or malformed, or the URL expired", body = ErrorBody,
            example = json!({"code": "permission_error", "message": "the download URL is invalid or expired; list the artifacts again for a fresh one", "request_id": "0193a0c4-7a9e-7d21-9c1e-5b1f4f0e2a10"}))
    )
)]
pub async fn download_artifact(
    State(state): State<AppState>,
    path: Result<axum::extract::Path<(Uuid, Uuid)>, PathRejection>,
    query: Result<axum::extract::Query<DownloadQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    // A URL that is not one we sign (ids that are not UUIDs, a repeated or unreadable query) is
    // refused as any changed URL is.
    let (Ok(axum::extract::Path((id, artifact_id))), Ok(axum::extract::Query(q))) = (path, query) else {
        return Err(refused());
    };
    let (Some(expires), Some(signature)) = (q.expires, q.signature) else {
        return Err(refused());
    };
    let Ok(expires) = expires.parse::<i64>() else {
        return Err(refused());
    };
    if !state
        .artifact_urls
        .verify(id, artifact_id, expires, &signature, Utc::now())
    {
        return Err(refused());
    }
    // Signed by us, so the ids were real when it was signed; a document is never deleted.
    let artifact = kuatia_projections::artifacts::download(&state.store, id, artifact_id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such artifact"))?;
    let bytes = state
        .artifacts
        .get(&artifact.sha256)
        .await
        .map_err(|e| ApiError::internal(&e))?
        .ok_or_else(|| {
            tracing::error!(sha256 = %artifact.sha256, %id, %artifact_id, "an artifact's bytes are missing from the store");
            ApiError::new(crate::error::ErrorCode::InternalError, "the artifact's bytes are missing")
        })?;
    let content_type = HeaderValue::from_str(&artifact.content_type)
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    let inline = q.inline.as_deref() == Some("1") && artifact.content_type.starts_with("application/pdf");
    let disposition = HeaderValue::from_str(&format!(
        "{}; filename=\"{}\"",
        if inline { "inline" } else { "attachment" },
        file_name(id, &artifact)
    ))
    .unwrap_or(HeaderValue::from_static("attachment"));
    Ok((
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_DISPOSITION, disposition),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("private, max-age=900"),
            ),
        ],
        bytes,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_origin_comes_from_the_request_and_never_bends_the_url() {
        let mut h = HeaderMap::new();
        assert_eq!(origin(&h), "");
        h.insert("host", HeaderValue::from_static("127.0.0.1:8080"));
        assert_eq!(origin(&h), "http://127.0.0.1:8080");
        h.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        h.insert("x-forwarded-host", HeaderValue::from_static("api.example.com.py"));
        assert_eq!(origin(&h), "https://api.example.com.py");
        h.insert("x-forwarded-host", HeaderValue::from_static("evil.com/x?"));
        assert_eq!(origin(&h), "");
    }
}
