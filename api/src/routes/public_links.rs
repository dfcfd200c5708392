//! A document's public links: a long-lived, unguessable, revocable link to its printable (the
//! KuDE of a SIFEN document, the PDF of an autoimpresor one) for its customer, to send by
//! WhatsApp or email. Separate from the 15-minute artifact URLs.
//!
//! - `POST /v1/documents/{id}/public-links` makes one (an accepted document only), valid for
//!   `KUATIA_PUBLIC_LINK_DAYS` (90 by default); the answer's `url` holds the token, shown this once
//!   (only its SHA-256 is kept).
//! - `GET /v1/documents/{id}/public-links` lists them (without tokens), `DELETE …/{linkId}`
//!   revokes one at once. Each is an event on the document's timeline.
//! - `GET /p/{token}` (no credentials: the token is one) answers the newest printable inline as
//!   `application/pdf`; an unknown, revoked or expired token, and a document whose printable is not
//!   rendered yet, are 404 in the error shape, the same for each.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use kuatia_application::documents::{self, DocumentsError};
use kuatia_domain::access::Permission;
use kuatia_domain::document::aggregate::{DocumentError, PublicLink};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::Path;
use crate::routes::documents::visible;
use crate::state::AppState;

/// Needed by `POST` and `DELETE` of public links.
pub const MANAGE_PUBLIC_LINKS: Permission = Permission::IssueDocuments;
/// Needed by `GET /v1/documents/{id}/public-links`.
pub const READ_PUBLIC_LINKS: Permission = Permission::ReadDocuments;

/// A public link (its token is in `url` only when it is made).
#[derive(Debug, Serialize, ToSchema)]
pub struct PublicLinkView {
    /// The link's id.
    pub id: Uuid,
    /// The document.
    pub document_id: Uuid,
    /// `/p/{token}`, absolute when the request named its host: given once, when the link is made;
    /// null in the listing.
    pub url: Option<String>,
    /// When it stops working.
    pub expires_at: DateTime<Utc>,
    /// When it was revoked; null while it works.
    pub revoked_at: Option<DateTime<Utc>>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
}

fn view(document_id: Uuid, link: PublicLink, url: Option<String>) -> PublicLinkView {
    PublicLinkView {
        id: link.link_id,
        document_id,
        url,
        expires_at: link.expires_at,
        revoked_at: link.revoked_at,
        created_at: link.created_at,
    }
}

fn refused(e: DocumentsError, status: &str) -> ApiError {
    match e {
        DocumentsError::Refused(DocumentError::NoSuchLink) => ApiError::not_found("no such public link"),
        DocumentsError::Refused(_) => ApiError::new(
            ErrorCode::ConflictError,
            format!("only an accepted document has a public link; this one is `{status}`"),
        ),
        DocumentsError::Conflict => ApiError::new(
            ErrorCode::ConflictError,
            "the document changed meanwhile; try again",
        ),
        DocumentsError::NotFound => ApiError::not_found("no such document"),
        DocumentsError::Store(e) => e.into(),
    }
}

/// Makes a public link to an accepted document's printable, for its customer.
#[utoipa::path(
    post,
    path = "/v1/documents/{id}/public-links",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 201, description = "Made; `url` holds the token, shown this once", body = PublicLinkView),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such document", body = ErrorBody),
        (status = 409, description = "The document is not `accepted`", body = ErrorBody)
    )
)]
pub async fn create_public_link(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Path(id): Path<Uuid>,
) -> Result<Response, ApiError> {
    caller.require(MANAGE_PUBLIC_LINKS)?;
    let row = visible(&state, &caller, id).await?;
    let lifetime = chrono::Duration::days(i64::from(state.public_link_days));
    let clock = state.intake.clock.as_ref();
    let made = documents::create_public_link(
        &state.store,
        clock,
        caller.tenant,
        id,
        lifetime,
        caller.metadata(),
    )
    .await
    .map_err(|e| refused(e, &row.status))?;
    let url = format!("{}/p/{}", crate::routes::artifacts::origin(&headers), made.token);
    Ok((StatusCode::CREATED, axum::Json(view(id, made.link, Some(url)))).into_response())
}

/// A document's public links, oldest first (revoked and expired ones too; no tokens).
#[utoipa::path(
    get,
    path = "/v1/documents/{id}/public-links",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "The links", body = [PublicLinkView]),
        (status = 404, description = "No such document", body = ErrorBody)
    )
)]
pub async fn list_public_links(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<Vec<PublicLinkView>>, ApiError> {
    caller.require(READ_PUBLIC_LINKS)?;
    visible(&state, &caller, id).await?;
    let links = documents::public_links(&state.store, caller.tenant, id).await?;
    Ok(axum::Json(links.into_iter().map(|l| view(id, l, None)).collect()))
}

/// Revokes a public link: it stops working at once (revoking it again answers the same).
#[utoipa::path(
    delete,
    path = "/v1/documents/{id}/public-links/{linkId}",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(
        ("id" = Uuid, Path, description = "The document"),
        ("linkId" = Uuid, Path, description = "The link"),
        ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")
    ),
    responses(
        (status = 204, description = "Revoked"),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such document or link", body = ErrorBody)
    )
)]
pub async fn revoke_public_link(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, link_id)): Path<(Uuid, Uuid)>,
) -> Result<StatusCode, ApiError> {
    caller.require(MANAGE_PUBLIC_LINKS)?;
    let row = visible(&state, &caller, id).await?;
    let clock = state.intake.clock.as_ref();
    documents::revoke_public_link(&state.store, clock, caller.tenant, id, link_id, caller.metadata())
        .await
        .map_err(|e| refused(e, &row.status))?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /p/{token}`: the document's newest printable, inline. Not in the API's OpenAPI document:
/// it is the customer's link, not an integrator's call.
pub async fn open_public_link(
    State(state): State<AppState>,
    axum::extract::Path(token): axum::extract::Path<String>,
) -> Result<Response, ApiError> {
    let gone = || {
        ApiError::not_found("this link does not exist, expired or was revoked; ask the issuer for a new one")
    };
    // A token is 43 base62 characters; anything else is no token of ours (and is not hashed).
    if token.len() != 43 || !token.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(gone());
    }
    let hash = kuatia_application::access::sha256_hex(&token);
    let Some(link) = kuatia_projections::artifacts::public_printable(&state.store, &hash).await? else {
        return Err(gone());
    };
    if link.revoked_at.is_some() || state.intake.clock.now() >= link.expires_at {
        return Err(gone());
    }
    let Some(printable) = link.printable else {
        return Err(ApiError::not_found(
            "the document's PDF is not ready yet; try again in a minute",
        ));
    };
    let bytes = state
        .artifacts
        .get(&printable.sha256)
        .await
        .map_err(|e| ApiError::internal(&e))?
        .ok_or_else(|| {
            tracing::error!(sha256 = %printable.sha256, document = %link.document_id, "a printable's bytes are missing from the store");
            ApiError::new(ErrorCode::InternalError, "the document's PDF is missing")
        })?;
    let name = printable
        .cdc
        .clone()
        .or_else(|| printable.number.clone())
        .unwrap_or_else(|| link.document_id.to_string());
    let disposition = HeaderValue::from_str(&format!("inline; filename=\"{name}.pdf\""))
        .unwrap_or(HeaderValue::from_static("inline"));
    Ok((
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("application/pdf")),
            (header::CONTENT_DISPOSITION, disposition),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("private, no-store"),
            ),
            (
                header::HeaderName::from_static("x-robots-tag"),
                HeaderValue::from_static("noindex"),
            ),
            (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        ],
        bytes,
    )
        .into_response())
}
