//! `GET /health` and `GET /ready`.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use std::time::Duration;
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::state::AppState;
use kuatia_application::vault::VaultError;

/// Health response.
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

/// The database answers within two seconds, and the master key opens every sealed secret (a
/// secret sealed under a key this instance does not hold — another instance rotated to a key
/// this one was not given — makes it not ready, naming the keys).
#[utoipa::path(
    get,
    path = "/ready",
    tag = "health",
    responses(
        (status = 200, description = "Ready to serve", body = Health),
        (status = 503, description = "The database does not answer, or the master key does not open every sealed secret", body = ErrorBody)
    )
)]
pub async fn ready(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    match tokio::time::timeout(Duration::from_secs(2), state.store.ping()).await {
        Ok(Ok(())) => match state.vault.check_keys().await {
            Ok(_) => Ok(Json(OK)),
            Err(VaultError::KeysNotHeld(check)) => {
                tracing::error!(%check, "readiness check failed");
                Err(ApiError::new(ErrorCode::ReadinessCheckFailed, check.to_string()))
            }
            Err(err) => {
                tracing::warn!(error = %err, "readiness check failed");
                Err(ApiError::new(
                    ErrorCode::ReadinessCheckFailed,
                    "the database is not reachable",
                ))
            }
        },
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
