//! The taxpayer lookup service (issue 9): its own listener
//! (`KUATIA_LOOKUP_LISTEN`, default `127.0.0.1:8081`), router and OpenAPI document
//! (`/openapi.json`, reference page at `/docs`), next to the invoicing API in the same process.
//!
//! [`start`] is what `kuatia serve` calls (from [`crate::compose`]); [`app`] builds the router
//! (tests drive it); [`cli`] holds `kuatia lookup …`. Handlers search the in-memory index that
//! `kuatia_infrastructure::lookup::live` keeps current; [`meter`] counts every `/api` request
//! against a key's plan or the client IP's allowance. `docs/lookup.md` is the operator's guide.

pub mod cli;
pub mod meter;
pub mod routes;

use anyhow::Context;
use axum::Router;
use kuatia_application::event_store::SharedStore;
use kuatia_domain::lookup::plan::Plan;
use kuatia_infrastructure::config::{Config, Secret};
use kuatia_infrastructure::lookup::keys::{KeyCache, LookupKey};
use kuatia_infrastructure::lookup::live::LiveIndex;
use kuatia_infrastructure::lookup::quota::Quotas;
use kuatia_infrastructure::store::Database;
use metrics_exporter_prometheus::PrometheusHandle;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tower_http::catch_panic::CatchPanicLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use utoipa_swagger_ui::SwaggerUi;

use crate::error::{ApiError, ErrorBody, ErrorCode};

/// Monthly limits by plan, and of anonymous callers per IP (configurable: `KUATIA_LOOKUP_QUOTA_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Per client IP without a key.
    pub anonymous: u64,
    /// `dev` keys.
    pub dev: u64,
    /// `starter` keys.
    pub starter: u64,
    /// `business` keys.
    pub business: u64,
}

impl Limits {
    /// The configured limits.
    pub fn from_config(config: &Config) -> Self {
        Self {
            anonymous: config.lookup_quota_anonymous,
            dev: config.lookup_quota_dev,
            starter: config.lookup_quota_starter,
            business: config.lookup_quota_business,
        }
    }

    /// A key's limit: its own when set, else its plan's (an enterprise key always has its own).
    pub fn of(&self, key: &LookupKey) -> u64 {
        key.monthly_limit.unwrap_or(match key.plan {
            Plan::Dev => self.dev,
            Plan::Starter => self.starter,
            Plan::Business => self.business,
            Plan::Enterprise => u64::MAX,
        })
    }
}

/// What the lookup handlers share.
#[derive(Clone)]
pub struct LookupState {
    /// The registry index in use.
    pub index: Arc<LiveIndex>,
    /// The database (keys, counters, designations, registry matches).
    pub store: SharedStore,
    /// Monthly counters.
    pub quotas: Arc<Quotas>,
    /// Key resolution.
    pub keys: Arc<KeyCache>,
    /// Monthly limits.
    pub limits: Limits,
    /// Bearer token of `/metrics`; `None` disables it.
    pub metrics_token: Option<Arc<Secret>>,
    /// Renders the Prometheus exposition.
    pub prometheus: PrometheusHandle,
}

/// The document's fixed parts.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "kuatia taxpayer lookup API",
        version = "0.1.0",
        description = "Search Paraguay's taxpayer registry (DNIT's published RUC list) by name or RUC, read one \
                       taxpayer's record, count matches. Requests count against a monthly allowance: per key \
                       (`X-API-Key`, plans dev, starter, business, enterprise; keys are issued by the operator) or, \
                       without a key, per client IP. Every answer carries X-RateLimit-Limit, -Remaining and -Reset; \
                       a spent allowance answers 429 with Retry-After. Errors have `code`, `message`, `request_id` \
                       (the ErrorCode schema lists the codes)."
    ),
    components(schemas(ErrorBody, ErrorCode)),
    tags(
        (name = "lookup", description = "Search and exact record"),
        (name = "health", description = "Liveness, readiness and metrics")
    ),
    modifiers(&Security)
)]
pub struct LookupDoc;

struct Security;

impl utoipa::Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "lookup_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-API-Key",
                "A lookup key (kl_…) issued by the operator: `kuatia lookup keys create --plan starter --name …`",
            ))),
        );
        components.add_security_scheme(
            "metrics_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("METRICS_BEARER_TOKEN"))
                    .build(),
            ),
        );
    }
}

/// The metered `/api` routes and the service routes, with the OpenAPI document.
fn routes() -> (
    (Router<LookupState>, Router<LookupState>),
    utoipa::openapi::OpenApi,
) {
    let (metered, mut api) = OpenApiRouter::with_openapi(LookupDoc::openapi())
        .routes(routes!(routes::search))
        .routes(routes!(routes::count))
        .routes(routes!(routes::ruc))
        .split_for_parts();
    let (service, service_api) = OpenApiRouter::new()
        .routes(routes!(routes::health))
        .routes(routes!(routes::ready))
        .routes(routes!(routes::metrics))
        .split_for_parts();
    api.merge(service_api);
    ((metered, service), api)
}

/// The lookup service's OpenAPI document.
pub fn openapi() -> utoipa::openapi::OpenApi {
    routes().1
}

/// The whole lookup router.
pub fn app(state: LookupState) -> Router {
    let ((metered, service), api) = routes();
    let metered = metered.route_layer(axum::middleware::from_fn_with_state(state.clone(), meter::meter));
    metered
        .merge(service)
        .merge(SwaggerUi::new("/docs").url("/openapi.json", api))
        .fallback(|| async { ApiError::not_found("no such resource") })
        .with_state(state)
        .layer(CatchPanicLayer::custom(crate::middleware::panic_response))
        .layer(axum::middleware::from_fn(crate::middleware::request_context))
}

/// A running lookup listener.
pub struct LookupService {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its index (for tests and the composition root).
    pub index: Arc<LiveIndex>,
    shutdown: CancellationToken,
    task: Option<JoinHandle<anyhow::Result<()>>>,
}

impl std::fmt::Debug for LookupService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LookupService")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl LookupService {
    /// Stops accepting, lets in-flight requests finish, flushes the quota counters.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        match self.task.take() {
            Some(task) => task.await.context("the lookup service task panicked")?,
            None => Ok(()),
        }
    }
}

impl Drop for LookupService {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Starts the lookup listener on `config.lookup_listen` when `config.lookup_enabled`, over the
/// given (migrated) database: the registry is loaded in the background (`/ready` says when),
/// then followed every `KUATIA_LOOKUP_REFRESH_SECS`.
pub async fn start(config: &Config, database: &Database) -> anyhow::Result<Option<LookupService>> {
    if !config.lookup_enabled {
        return Ok(None);
    }
    let listener = tokio::net::TcpListener::bind(config.lookup_listen)
        .await
        .with_context(|| format!("binding the lookup listener {}", config.lookup_listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "kuatia lookup listening");
    let store = database.store();
    let index = LiveIndex::with_cache_entries(database.clone(), config.lookup_cache_entries);
    let quotas = Arc::new(Quotas::new(store.clone()));
    let state = LookupState {
        index: index.clone(),
        store: store.clone(),
        quotas: quotas.clone(),
        keys: Arc::new(KeyCache::new(
            store,
            Duration::from_secs(config.lookup_key_cache_secs),
        )),
        limits: Limits::from_config(config),
        metrics_token: config.metrics_bearer_token.clone().map(Arc::new),
        prometheus: crate::metrics::handle(),
    };
    let shutdown = CancellationToken::new();
    let refresher = index.clone().spawn_refresher(
        Duration::from_secs(config.lookup_refresh_secs.max(1)),
        shutdown.clone().cancelled_owned(),
    );
    let flusher = quotas.spawn_flusher(Duration::from_secs(1), shutdown.clone().cancelled_owned());
    let grace = Duration::from_secs(config.shutdown_grace_secs);
    let router = app(state);
    let limits = crate::serve::Limits::of(config);
    let stop = shutdown.clone();
    let task = tokio::spawn(async move {
        let router = router.layer(crate::serve::body_deadline(limits.body_read_timeout));
        let server = crate::serve::serve(listener, router, limits, stop.clone());
        let deadline = async {
            stop.cancelled().await;
            tokio::time::sleep(grace).await;
        };
        let served: anyhow::Result<()> = tokio::select! {
            () = server => Ok(()),
            () = deadline => Ok(()),
        };
        stop.cancel();
        let _ = refresher.await;
        // The flusher flushes once more when it sees the shutdown: counts survive a restart.
        let _ = flusher.await;
        tracing::info!("kuatia lookup stopped");
        served
    });
    Ok(Some(LookupService {
        addr,
        index,
        shutdown,
        task: Some(task),
    }))
}
