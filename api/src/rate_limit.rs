//! Rate limiting at the edge: which bucket a request counts against, and the `X-RateLimit-*`
//! headers on its answer. The counting itself is
//! `kuatia_application::rate_limit`.
//!
//! Authenticated requests count against their API key (or console user), and against their
//! tenant's ceiling (all its keys and users together), in [`crate::auth::Caller`];
//! unauthenticated endpoints take [`PerIp`], which counts against the peer address. The request
//! middleware leaves an empty [`RateLimitSlot`] in every request; whichever check runs fills it,
//! and the middleware copies the decision into the response headers.

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue};
use kuatia_application::rate_limit::Decision;
use kuatia_domain::tenancy::TenantId;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::error::ApiError;
use crate::state::AppState;

/// Where a request's rate-limit decision is left for the response headers.
#[derive(Debug, Clone, Default)]
pub struct RateLimitSlot(pub Arc<Mutex<Option<Decision>>>);

impl RateLimitSlot {
    /// Keeps the tighter of the decisions made for one request (its key's and its tenant's): a
    /// refusal, else the one with fewer requests left.
    fn put(&self, decision: Decision) {
        let mut slot = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let tighter = match *slot {
            None => true,
            Some(kept) => {
                (!decision.allowed && kept.allowed)
                    || (decision.allowed == kept.allowed && decision.remaining < kept.remaining)
            }
        };
        if tighter {
            *slot = Some(decision);
        }
    }

    /// Writes `X-RateLimit-Limit`, `-Remaining` and `-Reset` (unix seconds) when a check ran.
    pub fn write_headers(&self, headers: &mut HeaderMap) {
        let decision = *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(d) = decision {
            headers.insert("x-ratelimit-limit", HeaderValue::from(d.limit));
            headers.insert("x-ratelimit-remaining", HeaderValue::from(d.remaining));
            headers.insert("x-ratelimit-reset", HeaderValue::from(d.reset_at.timestamp()));
        }
    }
}

/// Counts one request against `key` and refuses it with 429 when the bucket is spent.
pub async fn enforce(
    parts: &Parts,
    state: &AppState,
    key: &str,
    tenant: TenantId,
    limit: u32,
) -> Result<(), ApiError> {
    let now = chrono::Utc::now();
    let decision = state.limiter.check(key, tenant, limit, now).await?;
    if let Some(slot) = parts.extensions.get::<RateLimitSlot>() {
        slot.put(decision);
    }
    if decision.allowed {
        Ok(())
    } else {
        Err(ApiError::rate_limited(&decision, now))
    }
}

/// Taken by unauthenticated endpoints: counts the request against the peer IP.
#[derive(Debug, Clone, Copy)]
pub struct PerIp;

impl FromRequestParts<AppState> for PerIp {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let ip = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map_or_else(|| "unknown".to_owned(), |c| c.0.ip().to_string());
        enforce(
            parts,
            state,
            &format!("ip:{ip}"),
            TenantId::SYSTEM,
            state.rate_limit_per_ip,
        )
        .await?;
        Ok(Self)
    }
}
