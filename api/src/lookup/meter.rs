//! Who is asking and whether their month's allowance has room.
//!
//! Runs before every `/api` handler: a request with `X-API-Key` counts against the key's plan
//! (an unknown or revoked key is 401); one without counts against its client IP's anonymous
//! allowance. A spent allowance answers 429 with `Retry-After` (seconds until the month ends in
//! Paraguay) and the API's error body (docs/errors.md); every answer carries `X-RateLimit-Limit`,
//! `-Remaining` and `-Reset` (unix time of the renewal). The counting itself is
//! `kuatia_infrastructure::lookup::quota`.

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use kuatia_infrastructure::lookup::keys::LookupKey;
use kuatia_infrastructure::lookup::quota::QuotaDecision;
use std::net::SocketAddr;

use super::LookupState;
use crate::error::{ApiError, ErrorCode};

/// Header carrying a lookup key.
pub const API_KEY_HEADER: &str = "x-api-key";

/// Who a request counts against (in request extensions for the handlers).
#[derive(Debug, Clone)]
pub enum Caller {
    /// A lookup key.
    Key(Box<LookupKey>),
    /// No key: the client IP.
    Anonymous(String),
}

fn write_headers(headers: &mut HeaderMap, decision: &QuotaDecision) {
    headers.insert("x-ratelimit-limit", HeaderValue::from(decision.limit));
    headers.insert("x-ratelimit-remaining", HeaderValue::from(decision.remaining));
    headers.insert(
        "x-ratelimit-reset",
        HeaderValue::from(decision.resets_at.timestamp()),
    );
}

/// The middleware (install with `axum::middleware::from_fn_with_state` as a route layer).
pub async fn meter(State(state): State<LookupState>, mut req: Request, next: Next) -> Response {
    let presented = req
        .headers()
        .get(API_KEY_HEADER)
        .map(|v| v.to_str().unwrap_or("").trim().to_owned());
    let caller = match presented {
        Some(secret) => match state.keys.resolve(&secret).await {
            Ok(Some(key)) => Caller::Key(Box::new(key)),
            Ok(None) => {
                return ApiError::new(
                    ErrorCode::AuthenticationError,
                    "the X-API-Key is not a valid lookup key (unknown or revoked)",
                )
                .into_response();
            }
            Err(err) => return ApiError::from(err).into_response(),
        },
        None => {
            let ip = req
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map_or_else(|| "unknown".to_owned(), |c| c.0.ip().to_string());
            Caller::Anonymous(ip)
        }
    };
    let (subject, limit, plan) = match &caller {
        Caller::Key(key) => (format!("key:{}", key.id), state.limits.of(key), key.plan.as_str()),
        Caller::Anonymous(ip) => (format!("ip:{ip}"), state.limits.anonymous, "anonymous"),
    };
    let now = chrono::Utc::now();
    let decision = match state.quotas.check(&subject, limit, now).await {
        Ok(decision) => decision,
        Err(err) => return ApiError::from(err).into_response(),
    };
    if !decision.allowed {
        ::metrics::counter!("kuatia_lookup_quota_refusals_total", "plan" => plan).increment(1);
        let retry_after = (decision.resets_at - now).num_seconds().max(1);
        let mut response = ApiError::new(
            ErrorCode::RateLimitError,
            "the monthly request allowance is spent; it renews at the start of next month \
             (contact the operator for a larger plan)",
        )
        .with_details(serde_json::json!({
            "bucket": "lookup_monthly",
            "plan": plan,
            "limit": decision.limit,
            "reset_at": decision.resets_at,
        }))
        .with_header_value(header::RETRY_AFTER, HeaderValue::from(retry_after))
        .into_response();
        write_headers(response.headers_mut(), &decision);
        return response;
    }
    req.extensions_mut().insert(caller);
    let mut response = next.run(req).await;
    write_headers(response.headers_mut(), &decision);
    response
}
