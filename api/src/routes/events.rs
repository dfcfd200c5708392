//! `GET /v1/events`: the tenant's events in global (commit) order, for reconciliation jobs and
//! auditors. A job keeps the last `position` it read and asks for
//! `after` it next time; nothing is skipped or repeated, because positions are commit-ordered.
//! Filters by type, document and company; a company-scoped key reads its company's events only
//! (what "company's events" means: [`ReadFilter::company`], docs/events.md). Each event carries
//! its chain links (`prev_hash`, `hash`) and its actor resolved to `{type, id, name}`
//! ([`resolve_actors`]), the stored metadata unchanged beside it.

use crate::extract::Query;
use axum::extract::State;
use chrono::{DateTime, Utc};
use kuatia_application::event_store::{EventMetadata, ReadFilter};
use kuatia_domain::access::Permission;
use kuatia_domain::tenancy::TenantId;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// Needed by `GET /v1/events`.
pub const READ_EVENTS: Permission = Permission::ReadAudit;

/// `GET /v1/events` query. A parameter not listed here is refused (400 naming it), so that a
/// misspelt filter never reads as "no filter".
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Only events after this global position (default 0).
    pub after: Option<i64>,
    /// At most this many, 1 to 1000 (default 100).
    pub limit: Option<usize>,
    /// Only events of this type (`DocumentReceived`; the catalogue is docs/events.md).
    #[serde(rename = "type")]
    pub event_type: Option<String>,
    /// Only this document's events (its id).
    pub document: Option<Uuid>,
    /// Only this company's events: its own stream (configuration) and its documents'. A
    /// company-scoped key always reads its own company's; another company is 404.
    pub company: Option<Uuid>,
}

/// Who caused an event, resolved when it is read: a key renamed later shows its current name, a
/// deleted key its id with `name` null. The stored `metadata.actor` is kept as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ActorView {
    /// `api_key`, `user`, `system` (a worker of the service), `anonymous` (a sign-up), or
    /// what the stored actor says before its first `:`.
    #[serde(rename = "type")]
    pub actor_type: String,
    /// The key's or user's id, or the worker's name (`sifen`).
    pub id: String,
    /// The key's name or the user's email, when they still exist; null otherwise.
    pub name: Option<String>,
}

/// Resolves stored actors (`api_key:<id>`, `user:<id>`, `system:<worker>`) to [`ActorView`]s,
/// reading each distinct one once from the key and user read models.
pub async fn resolve_actors(
    state: &AppState,
    tenant: TenantId,
    actors: &[String],
) -> Result<HashMap<String, ActorView>, ApiError> {
    let mut resolved = HashMap::new();
    for actor in actors {
        if resolved.contains_key(actor) {
            continue;
        }
        let (actor_type, id) = actor.split_once(':').unwrap_or(("unknown", actor));
        let name = match (actor_type, Uuid::parse_str(id)) {
            ("api_key", Ok(key)) => kuatia_projections::access::key_by_id(&state.store, tenant, key)
                .await?
                .map(|row| row.name),
            ("user", Ok(user)) => kuatia_application::identity::user_by_id(&state.store, user)
                .await?
                .map(|u| u.email),
            _ => None,
        };
        resolved.insert(
            actor.clone(),
            ActorView {
                actor_type: actor_type.to_owned(),
                id: id.to_owned(),
                name,
            },
        );
    }
    Ok(resolved)
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
    pub data: Box<serde_json::value::RawValue>,
    /// Actor, request, correlation and causation ids, as stored (and hashed).
    #[schema(value_type = Object)]
    pub metadata: EventMetadata,
    /// Who caused it, resolved now; null when the event has no actor.
    pub actor: Option<ActorView>,
    /// Database time of the commit.
    pub recorded_at: DateTime<Utc>,
    /// The previous event's `hash` in this stream; null for its first event.
    pub prev_hash: Option<String>,
    /// Hash chain link (hex SHA-256 over the stored event and `prev_hash`; see
    /// docs/adr/0001-event-store.md).
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
        (status = 400, description = "after below 0, limit outside 1..=1000, a malformed filter or an unknown parameter (named in `details.errors`)", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "A company-scoped key named another company", body = ErrorBody)
    )
)]
pub async fn list_events(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<EventsQuery>,
) -> Result<axum::Json<EventsPage>, ApiError> {
    caller.require(READ_EVENTS)?;
    // A company-scoped key reads its own company's events; another company is "not found", as
    // on every route that takes a company.
    let company = caller.company_scope(query.company)?;
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
    if query
        .event_type
        .as_deref()
        .is_some_and(|t| t.is_empty() || t.len() > 100 || !t.chars().all(|c| c.is_ascii_alphanumeric()))
    {
        return Err(ApiError::invalid_field(
            "type",
            "invalid_format",
            "type is an event type name, letters and digits (docs/events.md)",
        ));
    }
    // The bodies as stored text, parsed only where an upcaster applies (issue 30).
    let events = state
        .store
        .read_all_json(&ReadFilter {
            after,
            limit,
            tenant: Some(caller.tenant),
            stream_id: query
                .document
                .map(|id| kuatia_domain::document::aggregate::stream_id(caller.tenant, id)),
            event_type: query.event_type,
            company,
            stream_types: None,
        })
        .await?;
    let next_after = events.last().map_or(after, |e| e.global_position);
    let named: Vec<String> = events.iter().filter_map(|e| e.metadata.actor.clone()).collect();
    let actors = resolve_actors(&state, caller.tenant, &named).await?;
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
                actor: e.metadata.actor.as_deref().and_then(|a| actors.get(a).cloned()),
                metadata: e.metadata,
                recorded_at: e.recorded_at,
                prev_hash: e.prev_hash,
                hash: e.hash,
            })
            .collect(),
        next_after,
    }))
}
