//! A document for its auditor: its stream exactly as stored, as NDJSON that
//! `kuatia events verify --file` checks offline; the hash chain checked by the service; and the
//! document as it stood at any event of its stream. Each calls `kuatia_application::audit`.

use super::*;
use kuatia_application::audit;

/// The hash chain of a document's stream, checked when asked.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChainView {
    /// Whether every event's hash covers its own bytes and the previous event's hash.
    pub verified: bool,
    /// The events checked (all of the stream when verified; up to the break otherwise).
    pub events: u64,
    /// The last event's hash: what an auditor's own copy must end with.
    pub head_hash: Option<String>,
    /// Where the chain broke: the stream version and why; null when verified.
    pub broken_at: Option<ChainBreakView>,
}

/// Where a chain broke.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChainBreakView {
    /// The offending event's version in the stream.
    pub version: u64,
    /// Its global position.
    pub position: i64,
    /// What is wrong.
    pub reason: String,
}

/// The document as it stood at one event.
#[derive(Debug, Serialize, ToSchema)]
pub struct StateAsOfView {
    /// The stream version the state was folded to (the one asked for, or the last one when a
    /// later one was asked).
    pub version: u64,
    /// The document's state then (status, number, CDC, SIFEN's answer, artifacts, deliveries…),
    /// as the service folds it from the events.
    #[schema(value_type = Object)]
    pub state: Value,
}

/// `GET /v1/documents/{id}/state` query.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct StateQuery {
    /// The stream version (≥ 1): the state right after that event.
    pub version: Option<String>,
}

/// A document's events exactly as stored, one JSON object a line, oldest first: what
/// `kuatia events verify --file` checks with no database (and `kuatia events export --document`
/// writes).
#[utoipa::path(
    get,
    path = "/v1/documents/{id}/events",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "The stream as NDJSON", content_type = "application/x-ndjson", body = String),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such document", body = ErrorBody)
    )
)]
pub async fn document_events(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<Response, ApiError> {
    caller.require(READ_TIMELINE)?;
    visible(&state, &caller, id).await?;
    let events = audit::document_stream(&state.store, caller.tenant, id).await?;
    let mut body = Vec::new();
    for event in &events {
        serde_json::to_writer(&mut body, event).map_err(|e| ApiError::internal(&e))?;
        body.push(b'\n');
    }
    Ok(attachment("application/x-ndjson", &format!("{id}.ndjson"), body))
}

/// Checks the hash chain of a document's stream now, in the service.
#[utoipa::path(
    get,
    path = "/v1/documents/{id}/chain",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "Checked", body = ChainView),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such document", body = ErrorBody)
    )
)]
pub async fn document_chain(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<ChainView>, ApiError> {
    caller.require(READ_TIMELINE)?;
    visible(&state, &caller, id).await?;
    let events = audit::document_stream(&state.store, caller.tenant, id).await?;
    let view = match audit::verify(&events) {
        Ok(checked) => ChainView {
            verified: true,
            events: checked,
            head_hash: events.last().map(|e| e.hash.clone()),
            broken_at: None,
        },
        Err(broken) => ChainView {
            verified: false,
            events: broken.stream_version.saturating_sub(1),
            head_hash: events.last().map(|e| e.hash.clone()),
            broken_at: Some(ChainBreakView {
                version: broken.stream_version,
                position: broken.global_position,
                reason: broken.reason,
            }),
        },
    };
    Ok(axum::Json(view))
}

/// The document as it stood right after the event of stream version `version`: replays its
/// stream up to that event (a version past the last gives the document as it is).
#[utoipa::path(
    get,
    path = "/v1/documents/{id}/state",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(StateQuery, ("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "The state then", body = StateAsOfView),
        (status = 400, description = "No version, or one that is not a number ≥ 1", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such document", body = ErrorBody)
    )
)]
pub async fn document_state_as_of(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
    Query(query): Query<StateQuery>,
) -> Result<axum::Json<StateAsOfView>, ApiError> {
    caller.require(READ_TIMELINE)?;
    visible(&state, &caller, id).await?;
    let version = query
        .version
        .as_deref()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|v| *v >= 1)
        .ok_or_else(|| {
            ApiError::invalid_field(
                "version",
                "invalid_format",
                "version is the stream version of an event of the document, a number from 1",
            )
        })?;
    let (version, document) = audit::state_as_of(&state.store, caller.tenant, id, version)
        .await?
        .ok_or_else(|| ApiError::not_found("no such document"))?;
    let state = serde_json::to_value(&document).map_err(|e| ApiError::internal(&e))?;
    Ok(axum::Json(StateAsOfView { version, state }))
}
