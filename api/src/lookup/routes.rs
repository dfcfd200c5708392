//! The lookup endpoints: `GET /api/search`, `/api/search/count`,
//! `/api/ruc/{ruc_dv_or_ruc}`, and the service's `/health`, `/ready` and `/metrics`.
//!
//! Search and exact lookups read the in-memory index of the current registry generation
//! (`kuatia_infrastructure::lookup::live`); only a keyed exact lookup reads the database (its
//! designation and registry match). Every `/api` request has been counted by [`super::meter`]
//! before it gets here.

use crate::extract::{Path, Query};
use axum::Json;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use kuatia_domain::lookup::query::{DEFAULT_LIMIT, MAX_LIMIT, RucLookup, SearchQuery, parse_query};
use kuatia_domain::lookup::state::filter_form;
use kuatia_infrastructure::lookup::index::{Index, StateMask};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;
use utoipa::ToSchema;

use super::LookupState;
use super::meter::Caller;
use crate::error::{ApiError, ErrorBody, ErrorCode};

/// A search result.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchItem {
    /// Taxpayer name as published (`APELLIDOS, NOMBRES` for persons).
    #[schema(example = "DE GENERACION ELECTRONICA S.A.")]
    pub name: String,
    /// RUC number without check digit.
    #[schema(example = "80069563")]
    pub ruc: String,
    /// Check digit.
    #[schema(example = "1")]
    pub dv: String,
    /// RUC and check digit together.
    #[schema(example = "80069563-1")]
    pub full_ruc: String,
    /// Registry state (`ACTIVO`, `SUSPENSION TEMPORAL`, `CANCELADO`, `BLOQUEADO`,
    /// `CANCELADO DEFINITIVO`, …).
    #[schema(example = "ACTIVO")]
    pub state: String,
    /// Publication date of the registry this comes from (`YYYY-MM-DD`, as given to the import).
    #[schema(example = "2026-03-31")]
    pub publication_date_text: Option<String>,
}

/// `GET /api/search/count` answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct CountResponse {
    /// Number of matches (what `/api/search` would list without a limit).
    pub count: u64,
}

/// An electronic-invoicing designation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SifenMandate {
    /// Designation group.
    pub group: String,
    /// When the obligation starts (`YYYY-MM-DD`).
    pub start_date: String,
    /// Reference link (resolution or publication).
    pub link: String,
}

/// A synchronized registry match.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SiaraMatch {
    /// Group.
    pub group: Option<String>,
    /// Category.
    pub category: Option<String>,
    /// Legal type.
    pub legal_type: Option<String>,
    /// Department.
    pub department: Option<String>,
    /// City.
    pub city: Option<String>,
    /// State in that registry.
    pub registry_state: Option<String>,
    /// Last communication.
    pub last_communication: Option<String>,
    /// When the match was synchronized.
    pub synchronized_at: Option<String>,
    /// Link to the source record.
    pub source_link: Option<String>,
}

/// The exact record of one RUC: the search fields, and with a key the designation and registry
/// match when there are.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaxpayerRecord {
    /// The search fields.
    #[serde(flatten)]
    pub item: SearchItem,
    /// Present only with a key and an imported designation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sifen_mandate: Option<SifenMandate>,
    /// Present only with a key and a synchronized registry match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub siara: Option<SiaraMatch>,
}

fn item(index: &Index, id: u32) -> SearchItem {
    let t = index.taxpayer(id);
    SearchItem {
        full_ruc: format!("{}-{}", t.ruc, t.dv),
        dv: t.dv.to_string(),
        ruc: t.ruc,
        name: t.name,
        state: t.state,
        publication_date_text: index.published().map(str::to_owned),
    }
}

/// The index, or 503 while the first load runs.
fn loaded(state: &LookupState) -> Result<Arc<Index>, ApiError> {
    if !state.index.is_loaded() {
        return Err(ApiError::new(
            ErrorCode::ReadinessCheckFailed,
            "the taxpayer registry is still loading; retry in a few seconds",
        )
        .with_header(header::RETRY_AFTER, "5"));
    }
    Ok(state.index.current())
}

/// `q`, `state` (repeatable), `limit` and `offset`, checked.
struct SearchParams {
    query: SearchQuery,
    mask: StateMask,
    limit: usize,
    offset: usize,
}

fn bad(field: &str, code: &str, message: impl Into<String>) -> ApiError {
    ApiError::invalid_field(field, code, message)
}

fn params(pairs: &[(String, String)], index: &Index, paged: bool) -> Result<SearchParams, ApiError> {
    let q = pairs
        .iter()
        .find(|(k, _)| k == "q")
        .map_or("", |(_, v)| v.as_str());
    let query = parse_query(q).map_err(|e| bad("q", "invalid_query", e.to_string()))?;
    let states: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| k == "state")
        .flat_map(|(_, v)| v.split(',').map(filter_form).collect::<Vec<_>>())
        .filter(|s| !s.is_empty())
        .collect();
    let mask = index.state_mask(&states).map_err(|e| {
        ApiError::validation(format!("state: {e}")).with_details(serde_json::json!({
            "errors": [{"field": "state", "code": "unknown_state", "message": e.to_string()}],
            "known_states": e.known,
        }))
    })?;
    let number = |name: &str, default: usize| -> Result<usize, ApiError> {
        match pairs.iter().find(|(k, _)| k == name) {
            None => Ok(default),
            Some((_, v)) => v
                .trim()
                .parse()
                .map_err(|_| bad(name, "invalid_number", format!("{name} must be a whole number"))),
        }
    };
    let (limit, offset) = if paged {
        (number("limit", DEFAULT_LIMIT)?, number("offset", 0)?)
    } else {
        (0, 0)
    };
    if paged && !(1..=MAX_LIMIT).contains(&limit) {
        return Err(bad(
            "limit",
            "out_of_range",
            format!("limit must be between 1 and {MAX_LIMIT}"),
        ));
    }
    Ok(SearchParams {
        query,
        mask,
        limit,
        offset,
    })
}

/// Taxpayers by name or RUC, best match first.
#[utoipa::path(
    get,
    path = "/api/search",
    tag = "lookup",
    security((), ("lookup_key" = [])),
    params(
        ("q" = String, Query, description = "A name (any case, accents and word order; 3 to 200 characters) or a RUC: digits \
            (dots allowed) match RUCs by prefix, digits with `-DV` match that RUC exactly"),
        ("state" = Option<Vec<String>>, Query, explode = true, description = "Keep these states only (repeatable; `SUSPENSION_TEMPORAL` \
            or `SUSPENSION TEMPORAL`); an unknown state is a 400 listing the known ones"),
        ("limit" = Option<u32>, Query, description = "Results per page, 1 to 100 (default 20)"),
        ("offset" = Option<u32>, Query, description = "Results to skip (default 0)"),
        ("X-API-Key" = Option<String>, Header, description = "A lookup key: counts against its plan instead of the IP's allowance")
    ),
    responses(
        (status = 200, description = "Matches: for a name exact (same words in any order), then the name starting with the \
            query, then every word beginning a word of the name, then similar words (one typo); alphabetical within each; \
            for a RUC prefix in RUC order", body = Vec<SearchItem>,
            headers(("X-RateLimit-Limit" = u64), ("X-RateLimit-Remaining" = u64), ("X-RateLimit-Reset" = i64, description = "Unix time the monthly allowance renews"))),
        (status = 400, description = "q shorter than 3 characters, a bad limit or offset, an unknown state", body = ErrorBody),
        (status = 401, description = "An unknown or revoked X-API-Key", body = ErrorBody),
        (status = 429, description = "The monthly allowance is spent (Retry-After: seconds until the next month)", body = ErrorBody),
        (status = 503, description = "The registry is still loading", body = ErrorBody)
    )
)]
pub async fn search(
    State(state): State<LookupState>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let index = loaded(&state)?;
    let p = params(&pairs, &index, true)?;
    let (page, total) = index.search(&p.query, p.mask, p.offset, p.limit);
    let items: Vec<SearchItem> = page.ids.iter().map(|&id| item(&index, id)).collect();
    let mut response = Json(items).into_response();
    response
        .headers_mut()
        .insert("x-total-count", HeaderValue::from(total));
    Ok(response)
}

/// The number of matches of a search.
#[utoipa::path(
    get,
    path = "/api/search/count",
    tag = "lookup",
    security((), ("lookup_key" = [])),
    params(
        ("q" = String, Query, description = "As for /api/search"),
        ("state" = Option<Vec<String>>, Query, explode = true, description = "As for /api/search"),
        ("X-API-Key" = Option<String>, Header, description = "A lookup key")
    ),
    responses(
        (status = 200, description = "How many results /api/search lists without a limit", body = CountResponse),
        (status = 400, description = "As for /api/search", body = ErrorBody),
        (status = 401, description = "An unknown or revoked X-API-Key", body = ErrorBody),
        (status = 429, description = "The monthly allowance is spent", body = ErrorBody),
        (status = 503, description = "The registry is still loading", body = ErrorBody)
    )
)]
pub async fn count(
    State(state): State<LookupState>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Json<CountResponse>, ApiError> {
    let index = loaded(&state)?;
    let p = params(&pairs, &index, false)?;
    Ok(Json(CountResponse {
        count: index.count(&p.query, p.mask),
    }))
}

/// The exact record of one RUC.
#[utoipa::path(
    get,
    path = "/api/ruc/{ruc_dv_or_ruc}",
    tag = "lookup",
    security((), ("lookup_key" = [])),
    params(
        ("ruc_dv_or_ruc" = String, Path, description = "`80069563-1` or `80069563`", example = "80069563-1"),
        ("X-API-Key" = Option<String>, Header, description = "With a key the record also carries `sifenMandate` and `siara` when present")
    ),
    responses(
        (status = 200, description = "The taxpayer", body = TaxpayerRecord),
        (status = 400, description = "Not a RUC, or a check digit that does not belong to it", body = ErrorBody),
        (status = 401, description = "An unknown or revoked X-API-Key", body = ErrorBody),
        (status = 404, description = "The registry does not list this RUC", body = ErrorBody),
        (status = 429, description = "The monthly allowance is spent", body = ErrorBody),
        (status = 503, description = "The registry is still loading", body = ErrorBody)
    )
)]
pub async fn ruc(
    State(state): State<LookupState>,
    Extension(caller): Extension<Caller>,
    Path(text): Path<String>,
) -> Result<Json<TaxpayerRecord>, ApiError> {
    let index = loaded(&state)?;
    let lookup = RucLookup::parse(&text).map_err(|e| bad("ruc", "invalid_ruc", e.to_string()))?;
    let id = index.find(&lookup.number);
    let record_dv = id.map(|id| index.taxpayer(id).dv);
    if let Some(err) = lookup.check_digit_error(record_dv) {
        return Err(bad("ruc", "invalid_check_digit", err.to_string()));
    }
    let Some(id) = id else {
        return Err(ApiError::not_found(format!(
            "the registry does not list RUC {}",
            lookup.number
        )));
    };
    let mut record = TaxpayerRecord {
        item: item(&index, id),
        sifen_mandate: None,
        siara: None,
    };
    if matches!(caller, Caller::Key(_)) {
        let (mandate, siara) =
            kuatia_infrastructure::lookup::details(state.store.as_ref(), &lookup.number).await?;
        record.sifen_mandate = mandate.map(|m| SifenMandate {
            group: m.group,
            start_date: m.start_date,
            link: m.link,
        });
        record.siara = siara.map(|s| SiaraMatch {
            group: s.group,
            category: s.category,
            legal_type: s.legal_type,
            department: s.department,
            city: s.city,
            registry_state: s.registry_state,
            last_communication: s.last_communication,
            synchronized_at: s.synchronized_at,
            source_link: s.source_link,
        });
    }
    Ok(Json(record))
}

/// Health answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct LookupHealth {
    /// `ok`.
    pub status: &'static str,
    /// Service version.
    pub version: &'static str,
    /// Registry generation in use (0: nothing imported yet; -1: not loaded yet).
    pub generation: i64,
    /// Taxpayers in it.
    pub taxpayers: usize,
    /// Its publication date.
    pub published: Option<String>,
}

fn health_of(state: &LookupState) -> LookupHealth {
    let index = state.index.current();
    LookupHealth {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
        generation: index.generation(),
        taxpayers: index.len(),
        published: index.published().map(str::to_owned),
    }
}

/// The process is up.
#[utoipa::path(
    get,
    path = "/health",
    tag = "health",
    responses((status = 200, description = "The lookup service is running", body = LookupHealth))
)]
pub async fn health(State(state): State<LookupState>) -> Json<LookupHealth> {
    Json(health_of(&state))
}

/// The database answers and the registry is loaded.
#[utoipa::path(
    get,
    path = "/ready",
    tag = "health",
    responses(
        (status = 200, description = "Ready to serve", body = LookupHealth),
        (status = 503, description = "The database does not answer or the registry is still loading", body = ErrorBody)
    )
)]
pub async fn ready(State(state): State<LookupState>) -> Result<Json<LookupHealth>, ApiError> {
    match tokio::time::timeout(Duration::from_secs(2), state.store.ping()).await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "lookup readiness check failed");
            return Err(ApiError::new(
                ErrorCode::ReadinessCheckFailed,
                "the database is not reachable",
            ));
        }
        Err(_) => {
            return Err(ApiError::new(
                ErrorCode::ReadinessCheckFailed,
                "the database did not answer within 2 s",
            ));
        }
    }
    if !state.index.is_loaded() {
        return Err(ApiError::new(
            ErrorCode::ReadinessCheckFailed,
            "the taxpayer registry is still loading",
        ));
    }
    Ok(Json(health_of(&state)))
}

/// Prometheus exposition (HTTP metrics of both services and the registry's gauges), behind
/// `METRICS_BEARER_TOKEN` as on the invoicing listener.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "health",
    security(("metrics_token" = [])),
    responses(
        (status = 200, description = "Prometheus text exposition format 0.0.4", content_type = "text/plain", body = String),
        (status = 401, description = "Missing or wrong metrics token", body = ErrorBody),
        (status = 404, description = "Metrics are disabled (no METRICS_BEARER_TOKEN configured)", body = ErrorBody)
    )
)]
pub async fn metrics(State(state): State<LookupState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let Some(expected) = state.metrics_token.as_deref() else {
        return Err(ApiError::not_found("metrics are disabled"));
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let matches = presented.is_some_and(|token| {
        token.len() == expected.expose().len()
            && token
                .bytes()
                .zip(expected.expose().bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    });
    if !matches {
        return Err(ApiError::new(
            ErrorCode::AuthenticationError,
            "a valid metrics bearer token is required",
        )
        .with_header(header::WWW_AUTHENTICATE, "Bearer realm=\"metrics\""));
    }
    let index = state.index.current();
    ::metrics::gauge!("kuatia_lookup_registry_generation").set(index.generation() as f64);
    ::metrics::gauge!("kuatia_lookup_registry_taxpayers").set(index.len() as f64);
    ::metrics::gauge!("kuatia_lookup_index_bytes").set(index.heap_bytes() as f64);
    ::metrics::gauge!("kuatia_lookup_index_load_seconds").set(state.index.last_load().as_secs_f64());
    let (hits, misses) = index.cache_stats();
    ::metrics::gauge!("kuatia_lookup_cache_hits").set(hits as f64);
    ::metrics::gauge!("kuatia_lookup_cache_misses").set(misses as f64);
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        state.prometheus.render(),
    )
        .into_response())
}
