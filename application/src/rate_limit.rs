//! Request limits that hold across instances: bucket `requests_minute`, fixed
//! one-minute windows, counted in the database.
//!
//! Writing a counter row on every request would put a database commit (and an fsync) on every
//! call. Instead each instance counts in memory and, every second, adds its new counts to the
//! shared row and reads the total back ("sloppy counters"). A bucket an instance has not seen in
//! the current window is first read from the database, so a client cannot get a fresh allowance by
//! moving to another instance; what several instances admit together can exceed the limit only by
//! what arrives between two flushes.

use chrono::{DateTime, Duration, DurationRound, Utc};
use kuatia_domain::tenancy::TenantId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::event_store::{SharedStore, StoreError};
use crate::projection::SqlValue;

/// Window length.
pub const WINDOW: Duration = Duration::minutes(1);

/// The verdict on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// The bucket's limit per window.
    pub limit: u32,
    /// Requests left in this window.
    pub remaining: u32,
    /// When the window ends.
    pub reset_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy)]
struct Counter {
    tenant: TenantId,
    /// Total of all instances as of the last flush (including ours).
    global: i64,
    /// Ours since the last flush.
    unflushed: i64,
}

/// The limiter of one instance.
pub struct RateLimiter {
    store: SharedStore,
    counters: Mutex<HashMap<(String, DateTime<Utc>), Counter>>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter").finish_non_exhaustive()
    }
}

fn window_of(now: DateTime<Utc>) -> DateTime<Utc> {
    now.duration_trunc(WINDOW).unwrap_or(now)
}

impl RateLimiter {
    /// A limiter over the shared counters.
    pub fn new(store: SharedStore) -> Self {
        Self {
            store,
            counters: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, DateTime<Utc>), Counter>> {
        self.counters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn stored(&self, key: &str, window: DateTime<Utc>) -> Result<i64, StoreError> {
        let rows = self
            .store
            .query(
                "SELECT count FROM rate_limit_windows WHERE bucket_key = $1 AND window_start = $2",
                &[SqlValue::Text(key.to_owned()), SqlValue::Timestamp(window)],
            )
            .await?;
        Ok(rows.first().and_then(|r| r[0].as_i64()).unwrap_or(0))
    }

    /// Counts one request against `key` (refused requests do not count) and decides.
    pub async fn check(
        &self,
        key: &str,
        tenant: TenantId,
        limit: u32,
        now: DateTime<Utc>,
    ) -> Result<Decision, StoreError> {
        let window = window_of(now);
        let slot = (key.to_owned(), window);
        let known = self.lock().contains_key(&slot);
        if !known {
            let global = self.stored(key, window).await?;
            self.lock().entry(slot.clone()).or_insert(Counter {
                tenant,
                global,
                unflushed: 0,
            });
        }
        let mut counters = self.lock();
        let counter = counters.entry(slot).or_insert(Counter {
            tenant,
            global: 0,
            unflushed: 0,
        });
        let used = counter.global + counter.unflushed;
        let allowed = used < i64::from(limit);
        if allowed {
            counter.unflushed += 1;
        }
        let used = counter.global + counter.unflushed;
        Ok(Decision {
            allowed,
            limit,
            remaining: u32::try_from(i64::from(limit) - used).unwrap_or(0),
            reset_at: window + WINDOW,
        })
    }

    /// Adds this instance's new counts to the shared rows, reads the totals back, and forgets
    /// finished windows (in memory and, for windows over an hour old, in the database).
    pub async fn flush(&self, now: DateTime<Utc>) -> Result<(), StoreError> {
        let current = window_of(now);
        let pending: Vec<((String, DateTime<Utc>), Counter)> = {
            let mut counters = self.lock();
            counters.retain(|(_, window), _| *window >= current);
            counters.iter().map(|(k, c)| (k.clone(), *c)).collect()
        };
        for ((key, window), counter) in pending {
            if counter.unflushed > 0 {
                self.store
                    .execute(
                        "INSERT INTO rate_limit_windows (bucket_key, window_start, tenant_id, count) \
                         VALUES ($1, $2, $3, $4) ON CONFLICT (bucket_key, window_start) \
                         DO UPDATE SET count = rate_limit_windows.count + excluded.count",
                        &[
                            SqlValue::Text(key.clone()),
                            SqlValue::Timestamp(window),
                            SqlValue::Uuid(counter.tenant.as_uuid()),
                            SqlValue::Int(counter.unflushed),
                        ],
                    )
                    .await?;
            }
            let global = self.stored(&key, window).await?;
            if let Some(c) = self.lock().get_mut(&(key, window)) {
                c.global = global;
                c.unflushed -= counter.unflushed;
            }
        }
        self.store
            .execute(
                "DELETE FROM rate_limit_windows WHERE window_start < $1",
                &[SqlValue::Timestamp(current - Duration::hours(1))],
            )
            .await?;
        Ok(())
    }

    /// Flushes every `every` until shutdown, and once more then.
    pub fn spawn_flusher(
        self: Arc<Self>,
        every: std::time::Duration,
        shutdown: CancellationToken,
    ) -> JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                let stop = tokio::select! {
                    _ = shutdown.cancelled() => true,
                    _ = tokio::time::sleep(every) => false,
                };
                if let Err(err) = self.flush(Utc::now()).await {
                    tracing::warn!(error = %err, "flushing rate-limit counters failed");
                }
                if stop {
                    return;
                }
            }
        })
    }
}
