//! `GET /metrics`, Prometheus text format, behind `METRICS_BEARER_TOKEN`.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::state::AppState;

/// Compares in time independent of where the first difference is.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Prometheus exposition of HTTP, job and subscription metrics.
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
pub async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let Some(expected) = state.metrics_token.as_deref() else {
        return Err(ApiError::not_found("metrics are disabled"));
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if !presented.is_some_and(|token| constant_time_eq(token.as_bytes(), expected.expose().as_bytes())) {
        let mut response = ApiError::new(
            ErrorCode::AuthenticationError,
            "a valid metrics bearer token is required",
        )
        .into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"metrics\""),
        );
        return Ok(response);
    }

    let statuses = state.store.subscription_statuses().await?;
    let head = state.store.head_position().await?;
    metrics::gauge!("kuatia_events_head_position").set(head as f64);
    for s in &statuses {
        metrics::gauge!("kuatia_subscription_position", "subscription" => s.name.clone())
            .set(s.position as f64);
        metrics::gauge!("kuatia_subscription_lag_events", "subscription" => s.name.clone()).set(s.lag as f64);
        metrics::gauge!("kuatia_subscription_failing", "subscription" => s.name.clone())
            .set(if s.last_error.is_some() { 1.0 } else { 0.0 });
    }
    let counts = state.jobs.counts().await?;
    let kinds: std::collections::BTreeSet<&str> = counts.iter().map(|c| c.kind.as_str()).collect();
    for kind in kinds {
        // Every state of a known kind, so a drained state reads 0 instead of its last value.
        for job_state in kuatia_application::jobs::JobState::ALL {
            let n = counts
                .iter()
                .find(|c| c.kind == kind && c.state == job_state)
                .map_or(0, |c| c.count);
            metrics::gauge!("kuatia_jobs", "kind" => kind.to_owned(), "state" => job_state.as_str())
                .set(n as f64);
        }
    }
    // Waiting jobs whose last attempt failed (what `kuatia jobs list --status failed` lists), by
    // kind: every kind with jobs, so a recovered kind reads 0.
    let failed = state
        .store
        .query(
            "SELECT kind, count(*) FROM jobs WHERE state = 'pending' AND last_error IS NOT NULL GROUP BY kind",
            &[],
        )
        .await?;
    for kind in counts
        .iter()
        .map(|c| c.kind.as_str())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let n = failed
            .iter()
            .find(|row| row.first().and_then(|v| v.as_text()).as_deref() == Some(kind))
            .and_then(|row| row.get(1).and_then(|v| v.as_i64()))
            .unwrap_or(0);
        metrics::gauge!("kuatia_jobs_failed", "kind" => kind.to_owned()).set(n as f64);
    }
    // Documents by pipeline status, every status so a drained one reads 0.
    let documents = kuatia_projections::documents::count_by_status(&state.store).await?;
    for status in kuatia_domain::document::aggregate::DocumentStatus::ALL {
        let n = documents
            .iter()
            .find(|(s, _)| s == status.as_str())
            .map_or(0, |(_, n)| *n);
        metrics::gauge!("kuatia_documents", "status" => status.as_str()).set(n as f64);
    }
    // Webhook deliveries by status, every status so a drained one reads 0.
    let deliveries = kuatia_application::webhooks::counts(&state.store).await?;
    for status in kuatia_application::webhooks::DeliveryStatus::ALL {
        let n = deliveries
            .iter()
            .find(|(s, _)| *s == status)
            .map_or(0, |(_, n)| *n);
        metrics::gauge!("kuatia_webhook_deliveries", "status" => status.as_str()).set(n as f64);
    }

    // Time left on each certificate (negative once it has expired): alert well before SIFEN and
    // the signature refuse it (the `certificate.expiring` webhook warns at 30, 7 and 1 days).
    let now = chrono::Utc::now();
    for (tenant, company, certificate) in kuatia_projections::webhooks::all_certificates(&state.store).await?
    {
        let left = (certificate.facts.not_after - now).num_seconds() as f64;
        metrics::gauge!(
            "kuatia_certificate_expiry_seconds",
            "tenant_id" => tenant.to_string(),
            "company_id" => company.to_string(),
            "certificate_id" => certificate.certificate_id.to_string()
        )
        .set(left);
    }

    let body = state.prometheus.render();
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        body,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn token_comparison_needs_the_exact_bytes() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
