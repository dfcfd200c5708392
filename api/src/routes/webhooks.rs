//! `/v1/webhooks` — endpoints (create with the secret shown
//! once, list, patch, logical delete, deactivate, `rotate-secret`), `test`, the deliveries
//! listing, one delivery with its payload and every attempt, and `replay`.
//!
//! A URL is checked when saved: an absolute `http(s)` URL; in a production tenant `https` only
//! and a host that resolves to public addresses only (the sender checks again before every
//! attempt). A company-scoped key sees and manages only its company's endpoints.

use crate::extract::{Path, Query};
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use kuatia_application::webhooks::{self as app, DeliveryRow, DeliveryStatus, WebhooksError};
use kuatia_domain::access::Permission;
use kuatia_domain::tenancy::Environment;
use kuatia_domain::webhook::EndpointSettings;
use kuatia_projections::webhooks::{self as read, EndpointRow};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::Json;
use crate::routes::companies::invalid;
use crate::state::AppState;

/// Needed to read endpoints and deliveries.
pub const READ_WEBHOOKS: Permission = Permission::ReadConfiguration;
/// Needed to create, change, test and replay.
pub const MANAGE_WEBHOOKS: Permission = Permission::ManageConfiguration;

/// `POST /v1/webhooks` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"url": "https://erp.example.com/kuatia", "events": ["document.accepted", "document.rejected"], "description": "ERP"}))]
pub struct WebhookRequest {
    /// Only this company's events (a company-scoped key: its company); absent: every company.
    pub company_id: Option<Uuid>,
    /// Where events are POSTed (`https://` in a production tenant).
    pub url: String,
    /// Free text (at most 500 characters).
    pub description: Option<String>,
    /// Event types (`document.accepted`, …) or `["*"]` for all.
    pub events: Vec<String>,
    /// Default true.
    pub active: Option<bool>,
}

/// `PATCH /v1/webhooks/{id}` body: the fields to change.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"events": ["*"], "active": true}))]
pub struct WebhookPatch {
    /// New URL.
    pub url: Option<String>,
    /// New description.
    pub description: Option<String>,
    /// New event list.
    pub events: Option<Vec<String>>,
    /// Turn deliveries on or off.
    pub active: Option<bool>,
}

/// An endpoint (no secret).
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookView {
    /// Id.
    pub id: Uuid,
    /// Only this company's events; null: all companies.
    pub company_id: Option<Uuid>,
    /// URL.
    pub url: String,
    /// Description.
    pub description: Option<String>,
    /// Subscribed event types.
    pub events: Vec<String>,
    /// Whether deliveries are made.
    pub active: bool,
    /// After a rotation: until when the previous secret also signs.
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

impl From<EndpointRow> for WebhookView {
    fn from(row: EndpointRow) -> Self {
        let now = Utc::now();
        Self {
            id: row.id,
            company_id: row.settings.company_id,
            url: row.settings.url,
            description: row.settings.description,
            events: row.settings.events,
            active: row.settings.active,
            previous_secret_expires_at: row.previous_secret.map(|(_, until)| until).filter(|u| *u > now),
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

/// An endpoint with its signing secret (creation and rotation only: it is never shown again).
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookWithSecret {
    /// The endpoint.
    #[serde(flatten)]
    pub webhook: WebhookView,
    /// `whsec_…`: the HMAC key of `X-Webhook-Signature`. Store it now.
    #[schema(example = "whsec_3bFq9XyZ…")]
    pub secret: String,
}

/// A delivery.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryView {
    /// Id (what `replay` takes).
    pub id: Uuid,
    /// The webhook event's id (`X-Webhook-Id`), the same across retries and replays.
    pub event_id: String,
    /// Event type.
    pub event_type: String,
    /// The document, for document events.
    pub document_id: Option<Uuid>,
    /// `pending`, `delivering`, `delivered`, `retrying`, `failed`.
    pub status: String,
    /// Attempts since the delivery was queued (or replayed).
    pub attempts: u32,
    /// The receiver's last HTTP status.
    pub last_status_code: Option<u16>,
    /// What went wrong last.
    pub last_error: Option<String>,
    /// When the next attempt is due.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Recorded.
    pub created_at: DateTime<Utc>,
    /// Delivered.
    pub delivered_at: Option<DateTime<Utc>>,
}

impl From<DeliveryRow> for DeliveryView {
    fn from(row: DeliveryRow) -> Self {
        Self {
            id: row.id,
            event_id: row.event_id,
            event_type: row.event_type,
            document_id: row.document_id,
            status: row.status.as_str().to_owned(),
            attempts: row.attempts,
            last_status_code: row.last_status_code,
            last_error: row.last_error,
            next_attempt_at: row.next_attempt_at,
            created_at: row.created_at,
            delivered_at: row.delivered_at,
        }
    }
}

/// `POST /v1/webhooks/{id}/test` answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct TestResult {
    /// Whether the receiver answered 2xx.
    pub delivered: bool,
    /// The receiver's HTTP status (null: no answer).
    pub status_code: Option<u16>,
    /// What went wrong.
    pub error: Option<String>,
    /// The recorded delivery.
    pub delivery: DeliveryView,
}

/// `POST /v1/webhooks/{id}/replay` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    /// The stored delivery to send again (same event id, same body).
    pub delivery_id: Uuid,
}

/// `company_id` filter.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct WebhookFilter {
    /// Only this company's endpoints.
    pub company_id: Option<Uuid>,
}

/// Deliveries filter.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct DeliveryFilter {
    /// Only this status (`pending`, `delivering`, `delivered`, `retrying`, `failed`).
    pub status: Option<String>,
    /// 1 to 100, default 25.
    pub limit: Option<u32>,
}

fn webhooks_error(err: WebhooksError) -> ApiError {
    match err {
        WebhooksError::NotFound => ApiError::not_found("no such webhook endpoint"),
        WebhooksError::Conflict => ApiError::new(ErrorCode::ConflictError, "a concurrent change won; retry"),
        WebhooksError::Invalid(issues) => invalid(issues),
        WebhooksError::Vault(e) => ApiError::internal(&e),
        WebhooksError::Store(e) => ApiError::internal(&e),
    }
}

fn schema<T: serde::de::DeserializeOwned>(raw: serde_json::Value) -> Result<T, ApiError> {
    serde_json::from_value(raw)
        .map_err(|e| ApiError::validation(format!("the body does not match the schema: {e}")))
}

fn visible(caller: &Caller, row: &EndpointRow) -> bool {
    match (caller.company_id, row.settings.company_id) {
        (None, _) => true,
        (Some(scope), Some(company)) => scope == company,
        (Some(_), None) => false,
    }
}

async fn find(state: &AppState, caller: &Caller, id: Uuid) -> Result<EndpointRow, ApiError> {
    read::endpoint(&state.store, caller.tenant, id)
        .await?
        .filter(|row| visible(caller, row))
        .ok_or_else(|| ApiError::not_found("no such webhook endpoint"))
}

/// The rules of a URL and event list, with the DNS check in production.
async fn check(state: &AppState, caller: &Caller, settings: &EndpointSettings) -> Result<(), ApiError> {
    let environment = kuatia_projections::access::tenant(&state.store, caller.tenant)
        .await?
        .map_or(Environment::Production, |t| t.environment);
    let issues = settings.issues(environment);
    if !issues.is_empty() {
        return Err(invalid(issues));
    }
    if let Err(refused) = state
        .destinations
        .check_saved(caller.tenant, &settings.url)
        .await?
    {
        return Err(ApiError::invalid_field("url", refused.code, refused.message));
    }
    Ok(())
}

/// Lists the tenant's endpoints (a company-scoped key: its company's), oldest first.
#[utoipa::path(
    get,
    path = "/v1/webhooks",
    tag = "webhooks",
    security(("api_key" = []), ("session" = [])),
    params(WebhookFilter, ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "Endpoints (no secrets)", body = [WebhookView]),
        (status = 400, description = "A malformed parameter, or one the route does not define (unknown_parameter)", body = ErrorBody),
        (status = 401, description = "No valid credentials", body = ErrorBody),
        (status = 403, description = "Not this tenant, or a role without read access", body = ErrorBody)
    )
)]
pub async fn list_webhooks(
    State(state): State<AppState>,
    caller: Caller,
    Query(filter): Query<WebhookFilter>,
) -> Result<axum::Json<Vec<WebhookView>>, ApiError> {
    caller.require(READ_WEBHOOKS)?;
    let company = caller.company_scope(filter.company_id)?;
    let rows = read::endpoints(&state.store, caller.tenant, company).await?;
    Ok(axum::Json(
        rows.into_iter()
            .filter(|r| visible(&caller, r))
            .map(WebhookView::from)
            .collect(),
    ))
}

/// Creates an endpoint; the answer carries its signing secret, shown this once.
#[utoipa::path(
    post,
    path = "/v1/webhooks",
    tag = "webhooks",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body = WebhookRequest,
    responses(
        (status = 201, description = "Created; `secret` is shown only now", body = WebhookWithSecret),
        (status = 400, description = "validation_error: a bad URL (`invalid_url`, `https_required`, `url_not_allowed` for a private address in production) or event", body = ErrorBody),
        (status = 401, description = "No valid credentials", body = ErrorBody),
        (status = 403, description = "Not this tenant, or a role that may not manage configuration", body = ErrorBody),
        (status = 404, description = "No such company", body = ErrorBody)
    )
)]
pub async fn create_webhook(
    State(state): State<AppState>,
    caller: Caller,
    Json(request): Json<WebhookRequest>,
) -> Result<(StatusCode, axum::Json<WebhookWithSecret>), ApiError> {
    caller.require(MANAGE_WEBHOOKS)?;
    let company_id = match caller.company_scope(request.company_id)? {
        Some(id) => Some(
            crate::routes::companies::company_row(&caller, &state.store, Some(id))
                .await?
                .id,
        ),
        None => None,
    };
    let settings = EndpointSettings {
        company_id,
        url: request.url.trim().to_owned(),
        description: request.description,
        events: request.events,
        active: request.active.unwrap_or(true),
    };
    check(&state, &caller, &settings).await?;
    let (id, secret) = app::create_endpoint(
        &state.store,
        &state.vault,
        caller.tenant,
        settings,
        caller.metadata(),
    )
    .await
    .map_err(webhooks_error)?;
    let row = find(&state, &caller, id).await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(WebhookWithSecret {
            webhook: row.into(),
            secret: secret.to_string(),
        }),
    ))
}

/// Changes the fields it names.
#[utoipa::path(
    patch,
    path = "/v1/webhooks/{id}",
    tag = "webhooks",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "Endpoint"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body = WebhookPatch,
    responses(
        (status = 200, description = "Changed", body = WebhookView),
        (status = 400, description = "validation_error", body = ErrorBody),
        (status = 401, description = "No valid credentials", body = ErrorBody),
        (status = 403, description = "Not this tenant, or a role that may not manage configuration", body = ErrorBody),
        (status = 404, description = "No such endpoint", body = ErrorBody)
    )
)]
pub async fn update_webhook(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
    Json(raw): Json<serde_json::Value>,
) -> Result<axum::Json<WebhookView>, ApiError> {
    caller.require(MANAGE_WEBHOOKS)?;
    // The endpoint first: another tenant's id is 404 whatever the body.
    let row = find(&state, &caller, id).await?;
    let patch: WebhookPatch = schema(raw)?;
    let mut settings = row.settings.clone();
    if let Some(url) = patch.url {
        settings.url = url.trim().to_owned();
    }
    if let Some(description) = patch.description {
        settings.description = Some(description);
    }
    if let Some(events) = patch.events {
        settings.events = events;
    }
    if let Some(active) = patch.active {
        settings.active = active;
    }
    check(&state, &caller, &settings).await?;
    app::update_endpoint(&state.store, caller.tenant, id, settings, caller.metadata())
        .await
        .map_err(webhooks_error)?;
    Ok(axum::Json(find(&state, &caller, id).await?.into()))
}

/// Deletes an endpoint logically: no more deliveries; it leaves the listings.
#[utoipa::path(
    delete,
    path = "/v1/webhooks/{id}",
    tag = "webhooks",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "Endpoint"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "Deleted (logically)", body = WebhookView),
        (status = 401, description = "No valid credentials", body = ErrorBody),
        (status = 403, description = "Not this tenant, or a role that may not manage configuration", body = ErrorBody),
        (status = 404, description = "No such endpoint", body = ErrorBody)
    )
)]
pub async fn delete_webhook(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<WebhookView>, ApiError> {
    caller.require(MANAGE_WEBHOOKS)?;
    let mut row = find(&state, &caller, id).await?;
    app::delete_endpoint(&state.store, caller.tenant, id, caller.metadata())
        .await
        .map_err(webhooks_error)?;
    row.settings.active = false;
    Ok(axum::Json(row.into()))
}

/// Stops deliveries (queued ones end `failed`); PATCH `active: true` turns them on again.
#[utoipa::path(
    post,
    path = "/v1/webhooks/{id}/deactivate",
    tag = "webhooks",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "Endpoint"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "Deactivated", body = WebhookView),
        (status = 401, description = "No valid credentials", body = ErrorBody),
        (status = 403, description = "Not this tenant, or a role that may not manage configuration", body = ErrorBody),
        (status = 404, description = "No such endpoint", body = ErrorBody)
    )
)]
pub async fn deactivate_webhook(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<WebhookView>, ApiError> {
    caller.require(MANAGE_WEBHOOKS)?;
    find(&state, &caller, id).await?;
    app::deactivate_endpoint(&state.store, caller.tenant, id, caller.metadata())
        .await
        .map_err(webhooks_error)?;
    Ok(axum::Json(find(&state, &caller, id).await?.into()))
}

/// A new signing secret, shown once; the previous one keeps signing for 24 h (every delivery
/// carries both `v1=` signatures meanwhile).
#[utoipa::path(
    post,
    path = "/v1/webhooks/{id}/rotate-secret",
    tag = "webhooks",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "Endpoint"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "Rotated; `secret` is shown only now", body = WebhookWithSecret),
        (status = 401, description = "No valid credentials", body = ErrorBody),
        (status = 403, description = "Not this tenant, or a role that may not manage configuration", body = ErrorBody),
        (status = 404, description = "No such endpoint", body = ErrorBody)
    )
)]
pub async fn rotate_webhook_secret(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<WebhookWithSecret>, ApiError> {
    caller.require(MANAGE_WEBHOOKS)?;
    find(&state, &caller, id).await?;
    let secret = app::rotate_secret(
        &state.store,
        &state.vault,
        caller.tenant,
        id,
        Utc::now(),
        caller.metadata(),
    )
    .await
    .map_err(webhooks_error)?;
    let row = find(&state, &caller, id).await?;
    Ok(axum::Json(WebhookWithSecret {
        webhook: row.into(),
        secret: secret.to_string(),
    }))
}

/// Sends a signed `webhook.test` now and answers with what the receiver said.
#[utoipa::path(
    post,
    path = "/v1/webhooks/{id}/test",
    tag = "webhooks",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "Endpoint"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "Sent (see `delivered` and `status_code`)", body = TestResult),
        (status = 401, description = "No valid credentials", body = ErrorBody),
        (status = 403, description = "Not this tenant, or a role that may not manage configuration", body = ErrorBody),
        (status = 404, description = "No such endpoint", body = ErrorBody)
    )
)]
pub async fn test_webhook(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<TestResult>, ApiError> {
    caller.require(MANAGE_WEBHOOKS)?;
    let endpoint = find(&state, &caller, id).await?;
    let (row, sent) = state
        .webhook_delivery
        .send_test(caller.tenant, &endpoint.into())
        .await
        .map_err(|e| {
            ApiError::new(
                ErrorCode::InternalError,
                format!("the test could not be recorded: {e:?}"),
            )
        })?;
    Ok(axum::Json(TestResult {
        delivered: row.status == DeliveryStatus::Delivered,
        status_code: sent.status_code,
        error: sent.error,
        delivery: row.into(),
    }))
}

/// The endpoint's recent deliveries, newest first.
#[utoipa::path(
    get,
    path = "/v1/webhooks/{id}/deliveries",
    tag = "webhooks",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "Endpoint"), DeliveryFilter, ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "Recent deliveries", body = [DeliveryView]),
        (status = 400, description = "validation_error: a bad status or limit", body = ErrorBody),
        (status = 401, description = "No valid credentials", body = ErrorBody),
        (status = 403, description = "Not this tenant", body = ErrorBody),
        (status = 404, description = "No such endpoint", body = ErrorBody)
    )
)]
pub async fn list_deliveries(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
    Query(filter): Query<DeliveryFilter>,
) -> Result<axum::Json<Vec<DeliveryView>>, ApiError> {
    caller.require(READ_WEBHOOKS)?;
    let status = match filter.status.as_deref() {
        None => None,
        Some(s) => Some(DeliveryStatus::parse(s).ok_or_else(|| {
            ApiError::invalid_field(
                "status",
                "invalid_enum",
                "one of pending, delivering, delivered, retrying, failed",
            )
        })?),
    };
    let limit = filter.limit.unwrap_or(25);
    if !(1..=100).contains(&limit) {
        return Err(ApiError::invalid_field(
            "limit",
            "out_of_range",
            "limit is 1 to 100",
        ));
    }
    find(&state, &caller, id).await?;
    let rows = app::deliveries(&state.store, caller.tenant, id, status, limit).await?;
    Ok(axum::Json(rows.into_iter().map(DeliveryView::from).collect()))
}

/// One attempt of a delivery, with the receiver's answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptView {
    /// The round: 0 for the first, one more for each replay.
    pub replay: u32,
    /// The attempt's number within its round, from 1.
    pub attempt: u32,
    /// When it ended.
    pub at: DateTime<Utc>,
    /// What it left the delivery as: `delivered`, `retrying` or `failed`.
    pub status: String,
    /// The receiver's HTTP status, when it answered.
    pub status_code: Option<u16>,
    /// What went wrong (no answer, a refused destination, a status other than 2xx).
    pub error: Option<String>,
}

/// A delivery with the payload every attempt sends and every attempt's answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryDetail {
    /// The delivery, as the list shows it.
    #[serde(flatten)]
    pub delivery: DeliveryView,
    /// The endpoint.
    pub endpoint_id: Uuid,
    /// How many times it was replayed.
    pub replays: u32,
    /// The JSON body every attempt POSTs (signed as sent, byte for byte).
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
    /// Every attempt, oldest first.
    pub history: Vec<AttemptView>,
}

/// A delivery of the endpoint, with its payload and every attempt.
#[utoipa::path(
    get,
    path = "/v1/webhooks/{id}/deliveries/{delivery_id}",
    tag = "webhooks",
    security(("api_key" = []), ("session" = [])),
    params(
        ("id" = Uuid, Path, description = "Endpoint"),
        ("delivery_id" = Uuid, Path, description = "Delivery"),
        ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")
    ),
    responses(
        (status = 200, description = "The delivery, its payload and attempts", body = DeliveryDetail),
        (status = 400, description = "A malformed id", body = ErrorBody),
        (status = 401, description = "No valid credentials", body = ErrorBody),
        (status = 403, description = "Not this tenant", body = ErrorBody),
        (status = 404, description = "No such endpoint or delivery", body = ErrorBody)
    )
)]
pub async fn get_delivery(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, delivery_id)): Path<(Uuid, Uuid)>,
) -> Result<axum::Json<DeliveryDetail>, ApiError> {
    caller.require(READ_WEBHOOKS)?;
    find(&state, &caller, id).await?;
    let row = app::delivery(&state.store, caller.tenant, delivery_id)
        .await?
        .filter(|d| d.endpoint_id == id)
        .ok_or_else(|| ApiError::not_found("no such delivery of this endpoint"))?;
    let history = app::attempts(&state.store, caller.tenant, row.id)
        .await?
        .into_iter()
        .map(|a| AttemptView {
            replay: a.replay,
            attempt: a.attempt,
            at: a.at,
            status: a.status.as_str().to_owned(),
            status_code: a.status_code,
            error: a.error,
        })
        .collect();
    let payload = serde_json::from_str(&row.body).unwrap_or(serde_json::Value::String(row.body.clone()));
    Ok(axum::Json(DeliveryDetail {
        endpoint_id: row.endpoint_id,
        replays: row.replays,
        payload,
        history,
        delivery: row.into(),
    }))
}

/// Queues a stored delivery again: the same event id and body, a fresh attempt count.
#[utoipa::path(
    post,
    path = "/v1/webhooks/{id}/replay",
    tag = "webhooks",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "Endpoint"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body = ReplayRequest,
    responses(
        (status = 202, description = "Queued", body = DeliveryView),
        (status = 401, description = "No valid credentials", body = ErrorBody),
        (status = 403, description = "Not this tenant, or a role that may not manage configuration", body = ErrorBody),
        (status = 404, description = "No such endpoint or delivery", body = ErrorBody)
    )
)]
pub async fn replay_delivery(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
    Json(raw): Json<serde_json::Value>,
) -> Result<(StatusCode, axum::Json<DeliveryView>), ApiError> {
    caller.require(MANAGE_WEBHOOKS)?;
    find(&state, &caller, id).await?;
    let request: ReplayRequest = schema(raw)?;
    let delivery = app::delivery(&state.store, caller.tenant, request.delivery_id)
        .await?
        .filter(|d| d.endpoint_id == id)
        .ok_or_else(|| ApiError::not_found("no such delivery of this endpoint"))?;
    let row = app::requeue(&state.store, caller.tenant, delivery.id, Utc::now())
        .await?
        .ok_or_else(|| ApiError::not_found("no such delivery of this endpoint"))?;
    state
        .jobs
        .enqueue(&kuatia_application::webhooks::deliver_job(&row))
        .await?;
    Ok((StatusCode::ACCEPTED, axum::Json(row.into())))
}
