//! `GET /v1/schemas/canonical-document`: the JSON Schema intake checks a document against
//! (`crate::schema`), published standalone. Open to anyone, as `/openapi.json` is: it is the
//! `CanonicalDocument` component of that document with the components it reaches in `$defs`.

use axum::Json;
use serde_json::Value;

/// The JSON Schema 2020-12 of a CanonicalDocumentV1, as intake, `POST /v1/documents/validate`
/// and the sandbox check it: every missing, unknown or mistyped field is named at once.
#[utoipa::path(
    get,
    path = "/v1/schemas/canonical-document",
    tag = "documents",
    responses(
        (status = 200, description = "The JSON Schema (2020-12) of CanonicalDocumentV1: the OpenAPI component CanonicalDocument with the components it references in `$defs`", body = Object)
    )
)]
pub async fn canonical_document_schema() -> Json<Value> {
    Json(crate::schema::CANONICAL_DOCUMENT.schema().clone())
}
