//! `GET|POST /v1/emission-channels`, `PATCH /v1/emission-channels/{id}`,
//! `GET /v1/emission-channels/readiness`.
//!
//! Secrets (`client_secret`, `api_key`, `csc`) are sealed on arrival and never returned: a view
//! says only whether one is on file. A PATCH changes the fields it names (nested objects merge
//! key by key) and keeps every secret it does not name.

use crate::extract::{Path, Query};
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, NaiveDate, Utc};
use kuatia_application::configuration::{self, ChannelSecrets};
use kuatia_domain::access::Permission;
use kuatia_domain::channel::{
    AutoimpresorSettings, ChannelKind, EmissionChannel, ReadinessContext, SifenEnvironment, SifenSettings,
};
use kuatia_domain::ruc::Ruc;
use kuatia_projections::configuration::{self as read, ChannelRow, CompanyRow};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;
use zeroize::Zeroizing;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::Json;
use crate::routes::certificates::CheckView;
use crate::routes::companies::configuration_error;
use crate::state::AppState;

/// Needed by `GET /v1/emission-channels`.
pub const LIST_CHANNELS: Permission = Permission::ReadConfiguration;
/// Needed by `POST /v1/emission-channels`.
pub const CREATE_CHANNEL: Permission = Permission::ManageConfiguration;
/// Needed by `PATCH /v1/emission-channels/{id}`.
pub const UPDATE_CHANNEL: Permission = Permission::ManageConfiguration;
/// Needed by `GET /v1/emission-channels/readiness`.
pub const CHANNEL_READINESS: Permission = Permission::ReadConfiguration;

/// `credentials` of a request.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CredentialsRequest {
    /// SIFEN's base URL (or the simulator's) for `sifen`; the reporting endpoint for
    /// `autoimpresor`.
    pub endpoint: String,
    /// `sifen` only.
    pub client_id: Option<String>,
    /// `sifen` only; sealed, never returned.
    pub client_secret: Option<String>,
    /// `autoimpresor` only; sealed, never returned.
    pub api_key: Option<String>,
}

/// The `sifen` object of a request.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SifenRequest {
    /// `test` or `production`.
    #[schema(value_type = String, example = "test")]
    pub environment: SifenEnvironment,
    /// Timbrado (8 digits).
    pub timbrado: String,
    /// Start of the timbrado's validity.
    pub timbrado_valid_from: NaiveDate,
    /// IdCSC (1 to 4 digits).
    pub csc_id: String,
    /// The CSC (32 letters and digits); sealed, never returned. Required on creation.
    pub csc: Option<String>,
    /// The company's certificate that signs and opens the TLS connection.
    pub certificate_id: Uuid,
    /// The legal notice a remisión (NRE) carries in `dInfoFisc` (Art. 3 inc. 7 RG 41/2014), 1 to
    /// 3000 characters on one line. No default: without it a remisión on this channel is refused
    /// at intake (`configuration_error`); every other type issues. `null` in a PATCH removes it.
    pub remision_notice: Option<String>,
}

/// The `autoimpresor` object of a request.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AutoimpresorRequest {
    /// Authorization number.
    pub authorization: String,
    /// Declared software.
    pub declared_software: Option<String>,
    /// Timbrado (8 digits).
    pub timbrado: String,
    /// First valid day.
    pub valid_from: NaiveDate,
    /// Last valid day.
    pub valid_to: NaiveDate,
    /// Printing branch.
    pub branch_id: Uuid,
    /// Printing issuance point (of that branch).
    pub issuance_point_id: Uuid,
    /// First authorised number.
    pub range_start: u64,
    /// Last authorised number (at most 9999999).
    pub range_end: u64,
    /// Next number to print (default: range_start).
    pub next_number: Option<u64>,
}

/// `POST /v1/emission-channels` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChannelRequest {
    /// The company (may be omitted with a company-scoped key).
    pub company_id: Option<Uuid>,
    /// `sifen` or `autoimpresor`.
    #[schema(value_type = String, example = "sifen")]
    pub channel: ChannelKind,
    /// Chosen when a document names no channel and the company has several.
    pub is_default: Option<bool>,
    /// endpoint, and client_id/client_secret (`sifen`) or api_key (`autoimpresor`).
    pub credentials: CredentialsRequest,
    /// Required for `sifen`.
    pub sifen: Option<SifenRequest>,
    /// Required for `autoimpresor`.
    pub autoimpresor: Option<AutoimpresorRequest>,
}

/// `credentials` as shown: no secret, only whether one is on file.
#[derive(Debug, Serialize, ToSchema)]
pub struct CredentialsView {
    /// Endpoint.
    pub endpoint: String,
    /// client_id (`sifen`).
    pub client_id: Option<String>,
    /// Whether a client_secret (`sifen`) or api_key (`autoimpresor`) is on file.
    pub secret_configured: bool,
}

/// `sifen` as shown (no CSC).
#[derive(Debug, Serialize, ToSchema)]
pub struct SifenView {
    /// `test` or `production`.
    #[schema(value_type = String)]
    pub environment: SifenEnvironment,
    /// Timbrado.
    pub timbrado: String,
    /// Start of the timbrado's validity.
    pub timbrado_valid_from: NaiveDate,
    /// IdCSC.
    pub csc_id: String,
    /// Always true: a sifen channel cannot exist without its CSC.
    pub csc_configured: bool,
    /// Signing certificate.
    pub certificate_id: Uuid,
    /// The remisión's legal notice (`dInfoFisc`); null: remisiones are refused on this channel.
    pub remision_notice: Option<String>,
}

/// A channel.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChannelView {
    /// Id.
    pub id: Uuid,
    /// Company.
    pub company_id: Uuid,
    /// `sifen` or `autoimpresor`.
    pub channel: String,
    /// Default of its company.
    pub is_default: bool,
    /// Credentials without secrets.
    pub credentials: CredentialsView,
    /// The sifen settings.
    pub sifen: Option<SifenView>,
    /// The autoimpresor settings (authorization, declared_software, timbrado, valid_from,
    /// valid_to, branch_id, issuance_point_id, range_start, range_end, next_number).
    #[schema(value_type = Option<Object>)]
    pub autoimpresor: Option<AutoimpresorSettings>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

impl From<ChannelRow> for ChannelView {
    fn from(row: ChannelRow) -> Self {
        let c = row.channel;
        Self {
            id: c.channel_id,
            company_id: row.company_id,
            channel: c.kind.as_str().to_owned(),
            is_default: c.is_default,
            credentials: CredentialsView {
                endpoint: c.endpoint,
                client_id: c.client_id,
                secret_configured: c.credentials_secret_id.is_some(),
            },
            sifen: c.sifen.map(|s| SifenView {
                environment: s.environment,
                timbrado: s.timbrado,
                timbrado_valid_from: s.timbrado_valid_from,
                csc_id: s.csc_id,
                csc_configured: !s.csc_secret_id.is_nil(),
                certificate_id: s.certificate_id,
                remision_notice: s.remision_notice,
            }),
            autoimpresor: c.autoimpresor,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

/// `company_id` filter.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct CompanyFilter {
    /// Only this company.
    pub company_id: Option<Uuid>,
}

/// Lists the tenant's channels (a company-scoped key: its company's), secrets left out.
#[utoipa::path(
    get,
    path = "/v1/emission-channels",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(CompanyFilter, ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "Channels by company, oldest first", body = [ChannelView]),
        (status = 400, description = "A malformed parameter, or one the route does not define (unknown_parameter)", body = ErrorBody),
        (status = 401, description = "No valid credentials", body = ErrorBody),
        (status = 403, description = "Not this tenant", body = ErrorBody)
    )
)]
pub async fn list_channels(
    State(state): State<AppState>,
    caller: Caller,
    Query(filter): Query<CompanyFilter>,
) -> Result<axum::Json<Vec<ChannelView>>, ApiError> {
    caller.require(LIST_CHANNELS)?;
    let company = caller.company_scope(filter.company_id)?;
    let rows = read::channels(&state.store, caller.tenant, company).await?;
    Ok(axum::Json(rows.into_iter().map(ChannelView::from).collect()))
}

/// Builds the record (secret ids from `existing`, or nil) and the secrets to seal.
fn channel_from(
    request: ChannelRequest,
    channel_id: Uuid,
    existing: Option<&EmissionChannel>,
) -> Result<(EmissionChannel, ChannelSecrets), ApiError> {
    let credentials = request.credentials;
    let (credential, foreign) = match request.channel {
        ChannelKind::Sifen => (credentials.client_secret, credentials.api_key.map(|_| "api_key")),
        ChannelKind::Autoimpresor => (
            credentials.api_key,
            credentials.client_secret.map(|_| "client_secret"),
        ),
    };
    if let Some(field) = foreign {
        // A secret under the other kind's key would be silently dropped: refuse it instead.
        return Err(ApiError::invalid_field(
            &format!("credentials.{field}"),
            "not_allowed",
            format!(
                "a {} channel does not take credentials.{field} (sifen: client_id, client_secret; autoimpresor: api_key)",
                request.channel.as_str()
            ),
        ));
    }
    let mut csc = None;
    let sifen = request.sifen.map(|s| {
        csc = s.csc;
        SifenSettings {
            environment: s.environment,
            timbrado: s.timbrado,
            timbrado_valid_from: s.timbrado_valid_from,
            csc_id: s.csc_id,
            certificate_id: s.certificate_id,
            csc_secret_id: existing
                .and_then(|e| e.sifen.as_ref())
                .map_or(Uuid::nil(), |e| e.csc_secret_id),
            // Trimmed as dInfoFisc is written; an empty one is refused by the record's checks.
            remision_notice: s.remision_notice.map(|n| n.trim().to_owned()),
        }
    });
    let autoimpresor = request.autoimpresor.map(|a| AutoimpresorSettings {
        authorization: a.authorization.trim().to_owned(),
        declared_software: a.declared_software,
        timbrado: a.timbrado,
        valid_from: a.valid_from,
        valid_to: a.valid_to,
        branch_id: a.branch_id,
        issuance_point_id: a.issuance_point_id,
        range_start: a.range_start,
        range_end: a.range_end,
        next_number: a.next_number.unwrap_or(a.range_start),
    });
    let channel = EmissionChannel {
        channel_id,
        kind: request.channel,
        is_default: request.is_default.unwrap_or(false),
        endpoint: credentials.endpoint.trim().to_owned(),
        client_id: credentials.client_id,
        credentials_secret_id: existing.and_then(|e| e.credentials_secret_id),
        sifen,
        autoimpresor,
    };
    let secrets = ChannelSecrets {
        credential: credential.map(Zeroizing::new),
        csc: csc.map(Zeroizing::new),
    };
    Ok((channel, secrets))
}

async fn save(
    state: &AppState,
    caller: &Caller,
    company: &CompanyRow,
    channel: EmissionChannel,
    secrets: ChannelSecrets,
) -> Result<ChannelView, ApiError> {
    let id = channel.channel_id;
    // The destination policy (docs/security.md): a production tenant's SIFEN endpoint or
    // autoimpresor reporting endpoint is https; every tenant's reaches only public or
    // allow-listed addresses (demo tenants anywhere only while public signup is off).
    if let Err(refused) = state
        .destinations
        .check_saved(caller.tenant, &channel.endpoint)
        .await?
    {
        return Err(ApiError::invalid_field(
            "credentials.endpoint",
            refused.code,
            refused.message,
        ));
    }
    configuration::configure_channel(
        &state.store,
        &state.vault,
        caller.tenant,
        &company.stream_id,
        channel,
        secrets,
        caller.metadata(),
    )
    .await
    .map_err(configuration_error)?;
    let row = read::channel(&state.store, caller.tenant, id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::InternalError, "the channel is not readable"))?;
    Ok(row.into())
}

/// Configures an emission channel for a company.
#[utoipa::path(
    post,
    path = "/v1/emission-channels",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body(content = ChannelRequest, example = json!({
        "company_id": "0192f0c6-58a3-7c2e-9d1b-3b1f4c2a9e10",
        "channel": "sifen",
        "is_default": true,
        "credentials": {"endpoint": "http://127.0.0.1:8082"},
        "sifen": {"environment": "test", "timbrado": "12345678", "timbrado_valid_from": "2026-01-01",
                  "csc_id": "0001", "csc": "ABCD0000000000000000000000000000",
                  "certificate_id": "0192f0c7-1111-7c2e-9d1b-3b1f4c2a9e10"}
    })),
    responses(
        (status = 201, description = "Configured (secrets sealed, never returned)", body = ChannelView),
        (status = 400, description = "Invalid field, missing object of the channel, unknown certificate/branch/point", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such company", body = ErrorBody)
    )
)]
pub async fn create_channel(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<ChannelRequest>,
) -> Result<(StatusCode, axum::Json<ChannelView>), ApiError> {
    caller.require(CREATE_CHANNEL)?;
    let company = crate::routes::companies::company_row(&caller, &state.store, body.company_id).await?;
    let (channel, secrets) = channel_from(body, Uuid::now_v7(), None)?;
    let view = save(&state, &caller, &company, channel, secrets).await?;
    Ok((StatusCode::CREATED, axum::Json(view)))
}

/// The request a stored channel corresponds to (without secrets), for merging a PATCH.
fn as_request(c: &EmissionChannel) -> Value {
    json!({
        "channel": c.kind,
        "is_default": c.is_default,
        "credentials": {"endpoint": c.endpoint, "client_id": c.client_id},
        "sifen": c.sifen.as_ref().map(|s| json!({
            "environment": s.environment,
            "timbrado": s.timbrado,
            "timbrado_valid_from": s.timbrado_valid_from,
            "csc_id": s.csc_id,
            "certificate_id": s.certificate_id,
            "remision_notice": s.remision_notice,
        })),
        "autoimpresor": c.autoimpresor,
    })
}

/// Merges `patch` into `base`: objects key by key, anything else replaced.
fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(base), Value::Object(patch)) => {
            for (key, value) in patch {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (slot, value) => *slot = value,
    }
}

/// Changes a channel: the fields named (nested objects merge key by key); secrets not named are
/// kept. The channel's kind and company never change.
#[utoipa::path(
    patch,
    path = "/v1/emission-channels/{id}",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(
        ("id" = Uuid, Path, description = "The channel"),
        ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")
    ),
    request_body(content = Object, description = "Any fields of the creation body but company_id and channel",
                  example = json!({"sifen": {"csc_id": "0002", "csc": "EFGH0000000000000000000000000000"}})),
    responses(
        (status = 200, description = "Changed", body = ChannelView),
        (status = 400, description = "Invalid field", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such channel", body = ErrorBody)
    )
)]
pub async fn update_channel(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
    Json(patch): Json<Map<String, Value>>,
) -> Result<axum::Json<ChannelView>, ApiError> {
    caller.require(UPDATE_CHANNEL)?;
    let row = read::channel(&state.store, caller.tenant, id)
        .await?
        .filter(|r| caller.sees(r.company_id))
        .ok_or_else(|| ApiError::not_found("no such channel"))?;
    for fixed in ["company_id", "channel"] {
        if patch.contains_key(fixed) {
            return Err(ApiError::invalid_field(
                fixed,
                "immutable",
                format!("{fixed} of a channel cannot change; create another channel"),
            ));
        }
    }
    let mut merged = as_request(&row.channel);
    merge(&mut merged, Value::Object(patch));
    let request: ChannelRequest = serde_json::from_value(merged)
        .map_err(|e| ApiError::validation(format!("the merged channel does not match the schema: {e}")))?;
    let company = kuatia_projections::configuration::company(&state.store, caller.tenant, row.company_id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such channel"))?;
    let (channel, secrets) = channel_from(request, id, Some(&row.channel))?;
    Ok(axum::Json(
        save(&state, &caller, &company, channel, secrets).await?,
    ))
}

/// Readiness of one channel (or of a missing one).
#[derive(Debug, Serialize, ToSchema)]
pub struct ChannelReadiness {
    /// `sifen` or `autoimpresor`.
    pub channel: String,
    /// The channel (null: none configured).
    pub channel_id: Option<Uuid>,
    /// Company.
    pub company_id: Uuid,
    /// Every check passed.
    pub ready: bool,
    /// company, branch, issuance_point, timbrado, certificate, csc (sifen); company, branch,
    /// issuance_point, timbrado, numbering_range, print_settings (autoimpresor).
    pub checks: Vec<CheckView>,
    /// An autoimpresor channel's authorised range and how much of it is used (null for SIFEN).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numbering: Option<NumberingView>,
}

/// How much of an autoimpresor range is used: from the series' own count once a number was
/// drawn, else the channel's configured `next_number`.
#[derive(Debug, Serialize, ToSchema)]
pub struct NumberingView {
    /// The timbrado of the range.
    pub timbrado: String,
    /// First authorised number.
    pub range_start: u64,
    /// Last authorised number.
    pub range_end: u64,
    /// The next number to print (`range_end + 1` when the range is used up).
    pub next_number: u64,
    /// Numbers left.
    pub left: u64,
    /// Per cent of the range used, rounded down.
    pub used_percent: u64,
    /// At least 90 % used (`NumberingRangeNearlyExhausted` is recorded at that point): time to
    /// ask SET for a new range.
    pub nearly_exhausted: bool,
}

impl NumberingView {
    fn of(a: &kuatia_domain::channel::AutoimpresorSettings) -> Self {
        let size = a.range_end.saturating_sub(a.range_start) + 1;
        let used = a.next_number.saturating_sub(a.range_start).min(size);
        Self {
            timbrado: a.timbrado.clone(),
            range_start: a.range_start,
            range_end: a.range_end,
            next_number: a.next_number,
            left: size - used,
            used_percent: used * 100 / size,
            nearly_exhausted: a.next_number > kuatia_application::process::autoimpresor::warning_number(a),
        }
    }
}

/// `GET /v1/emission-channels/readiness` response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReadinessView {
    /// Per channel; a kind with no channel in a company is listed as not ready.
    pub channels: Vec<ChannelReadiness>,
}

/// Whether each channel has every record a document on it needs.
#[utoipa::path(
    get,
    path = "/v1/emission-channels/readiness",
    tag = "configuration",
    security(("api_key" = []), ("session" = [])),
    params(CompanyFilter, ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "Readiness per channel", body = ReadinessView),
        (status = 400, description = "A malformed parameter, or one the route does not define (unknown_parameter)", body = ErrorBody),
        (status = 404, description = "No such company", body = ErrorBody)
    )
)]
pub async fn channel_readiness(
    State(state): State<AppState>,
    caller: Caller,
    Query(filter): Query<CompanyFilter>,
) -> Result<axum::Json<ReadinessView>, ApiError> {
    caller.require(CHANNEL_READINESS)?;
    let scope = caller.company_scope(filter.company_id)?;
    let companies = read::companies(&state.store, caller.tenant, scope).await?;
    if scope.is_some() && companies.is_empty() {
        return Err(ApiError::not_found("no such company"));
    }
    let now = Utc::now();
    let today = kuatia_domain::local_time::paraguay_today(now);
    let mut out = Vec::new();
    for company in companies {
        let ruc = Ruc::parse(&company.ruc)
            .map_err(|_| ApiError::new(ErrorCode::InternalError, "a stored RUC is unreadable"))?;
        let locations = read::locations(&state.store, caller.tenant, company.id).await?;
        let certificates: Vec<_> = read::certificates(&state.store, caller.tenant, Some(company.id))
            .await?
            .into_iter()
            .map(|r| r.record)
            .collect();
        let print_settings_saved = read::print_settings(&state.store, caller.tenant, company.id)
            .await?
            .is_some();
        let ctx = ReadinessContext {
            ruc: &ruc,
            branches: &locations,
            certificates: &certificates,
            print_settings_saved,
            now,
            today,
        };
        let channels = read::channels(&state.store, caller.tenant, Some(company.id)).await?;
        for kind in [ChannelKind::Sifen, ChannelKind::Autoimpresor] {
            let of_kind: Vec<&ChannelRow> = channels.iter().filter(|c| c.channel.kind == kind).collect();
            if of_kind.is_empty() {
                out.push(ChannelReadiness {
                    channel: kind.as_str().to_owned(),
                    channel_id: None,
                    company_id: company.id,
                    ready: false,
                    checks: vec![CheckView::from(
                        kuatia_domain::certificate::Check::new(
                            "channel",
                            false,
                            format!("no {} channel is configured", kind.as_str()),
                        )
                        .found("channel_none", &[("kind", &kind.as_str())]),
                    )],
                    numbering: None,
                });
            }
            for row in of_kind {
                // What an autoimpresor range has left is the series' count, not the number the
                // channel was configured with.
                let mut channel = row.channel.clone();
                let mut numbering = None;
                if let Some(a) = channel.autoimpresor.as_mut() {
                    let counted =
                        kuatia_application::intake::series_next(&state.intake, caller.tenant, company.id, a)
                            .await?;
                    a.next_number = counted.unwrap_or(a.next_number);
                    numbering = Some(NumberingView::of(a));
                }
                let checks = channel.readiness(&ctx);
                out.push(ChannelReadiness {
                    channel: kind.as_str().to_owned(),
                    channel_id: Some(row.channel.channel_id),
                    company_id: company.id,
                    ready: checks.iter().all(|c| c.ok),
                    checks: checks.into_iter().map(CheckView::from).collect(),
                    numbering,
                });
            }
        }
    }
    Ok(axum::Json(ReadinessView { channels: out }))
}
