//! `GET /v1/events`: the tenant's events in global (commit) order, for reconciliation jobs and
//! auditors (ARCHITECTURE "Read side"). A job keeps the last `position` it read and asks for
//! `after` it next time; nothing is skipped or repeated, because positions are commit-ordered.

use crate::extract::Query;
use axum::extract::State;
use chrono::{DateTime, Utc};
use kuatia_application::event_store::{EventMetadata, ReadFilter};
use kuatia_domain::access::Permission;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// Needed by `GET /v1/events`.
pub const READ_EVENTS: Permission = Permission::ReadAudit;

/// `GET /v1/events` query.
#[derive(Debug, Deserialize, IntoParams)]
pub struct EventsQuery {
    /// Only events after this global position (default 0).
    pub after: Option<i64>,
    /// At most this many, 1 to 1000 (default 100).
    pub limit: Option<usize>,
}

/// One event.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventView {
    /// Global, commit-ordered position.
    pub position: i64,
    /// Event id (UUIDv7).
    pub event_id: Uuid,
    /// Aggregate type (`tenant`, `company`, `document`, …).
    pub stream_type: String,
    /// Stream id.
    pub stream_id: String,
    /// Version within the stream.
    pub version: u64,
    /// Type name.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Schema version of `data` (current after upcasting).
    pub schema_version: u32,
    /// The event body as stored: an object named after the event type carrying its fields, or
    /// just the event type's name (a string) for an event without fields
    /// (`"WebhookEndpointDeactivated"`).
    #[schema(value_type = Value)]
    pub data: serde_json::Value,
    /// Actor, request, correlation and causation ids.
    #[schema(value_type = Object)]
    pub metadata: EventMetadata,
    /// Database time of the commit.
    pub recorded_at: DateTime<Utc>,
    /// Hash chain link (hex SHA-256; see docs/adr/0001-event-store.md).
    pub hash: String,
}

/// A page of events.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventsPage {
    /// The events, in global order.
    pub events: Vec<EventView>,
    /// Pass as `after` for the next page (the last position, or the `after` asked when empty).
    pub next_after: i64,
}

/// The tenant's events in commit order.
#[utoipa::path(
    get,
    path = "/v1/events",
    tag = "audit",
    security(("api_key" = []), ("session" = [])),
    params(EventsQuery, ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "A page of events", body = EventsPage),
        (status = 400, description = "after below 0 or limit outside 1..=1000", body = ErrorBody),
        (status = 403, description = "Role not allowed, or a company-scoped key", body = ErrorBody)
    )
)]
pub async fn list_events(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<EventsQuery>,
) -> Result<axum::Json<EventsPage>, ApiError> {
    caller.require(READ_EVENTS)?;
    if caller.company_id.is_some() {
        // Events are not tagged by company yet; a scoped key would see other companies' data.
        return Err(ApiError::forbidden(
            "a company-scoped key cannot read the tenant's event log",
        ));
    }
    let after = query.after.unwrap_or(0);
    if after < 0 {
        return Err(ApiError::invalid_field(
            "after",
            "out_of_range",
            "after is a position, 0 or more",
        ));
    }
    let limit = query.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid_field(
            "limit",
            "out_of_range",
            "limit is 1 to 1000",
        ));
    }
    let events = state
        .store
        .read_all(&ReadFilter {
            after,
            limit,
            tenant: Some(caller.tenant),
            stream_id: None,
        })
        .await?;
    let next_after = events.last().map_or(after, |e| e.global_position);
    Ok(axum::Json(EventsPage {
        events: events
            .into_iter()
            .map(|e| EventView {
                position: e.global_position,
                event_id: e.event_id,
                stream_type: e.stream_type,
                stream_id: e.stream_id,
                version: e.stream_version,
                event_type: e.event_type,
                schema_version: e.schema_version,
                data: e.payload,
                metadata: e.metadata,
                recorded_at: e.recorded_at,
                hash: e.hash,
            })
            .collect(),
        next_after,
    }))
}
