//! Contract §4.1: `GET /health` and `GET /ready`.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use std::time::Duration;
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::state::AppState;

/// Health response (contract §2.16).
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`.
    pub status: &'static str,
    /// Service version.
    pub version: &'static str,
}

const OK: Health = Health {
    status: "ok",
    version: env!("CARGO_PKG_VERSION"),
};

/// The process is up.
#[utoipa::path(
    get,
    path = "/health",
    tag = "health",
    responses((status = 200, description = "The service is running", body = Health))
)]
pub async fn health() -> Json<Health> {
    Json(OK)
}

/// The database answers within two seconds.
#[utoipa::path(
    get,
    path = "/ready",
    tag = "health",
    responses(
        (status = 200, description = "Ready to serve", body = Health),
        (status = 503, description = "A dependency is not ready", body = ErrorBody)
    )
)]
pub async fn ready(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    match tokio::time::timeout(Duration::from_secs(2), state.store.ping()).await {
        Ok(Ok(())) => Ok(Json(OK)),
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "readiness check failed");
            Err(ApiError::new(
                ErrorCode::ReadinessCheckFailed,
                "the database is not reachable",
            ))
        }
        Err(_) => Err(ApiError::new(
            ErrorCode::ReadinessCheckFailed,
            "the database did not answer within 2 s",
        )),
    }
}
