//! Monthly request allowances of the lookup service, counted in the database:
//! per key (its plan) and, without a key, per client IP.
//!
//! Same design as the invoicing service's per-minute limiter (`kuatia_application::rate_limit`):
//! a database commit per request would cap the service at the database's commit rate, so each
//! instance counts in memory and, every second, adds its new counts to the shared row
//! (`lookup_usage`) and reads the total back. A subject an instance has not seen this month is
//! read from the database first, so a restarted or another instance continues from the stored
//! total. Bounds: one instance alone is exact; several instances together can admit more than
//! the limit only by what reaches the others between two flushes; a crash (not a clean stop,
//! which flushes) forgets at most the last second of counts.

use chrono::{DateTime, Utc};
use kuatia_application::event_store::{SharedStore, StoreError};
use kuatia_application::projection::SqlValue;
use kuatia_domain::lookup::plan::period_at;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// The verdict on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaDecision {
    /// Whether the request may proceed (a refused request is not counted).
    pub allowed: bool,
    /// The monthly limit.
    pub limit: u64,
    /// Requests left this month after this one.
    pub remaining: u64,
    /// When the month ends (the allowance renews).
    pub resets_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy)]
struct Counter {
    /// Total of all instances as of the last flush (including ours).
    global: i64,
    /// Ours since the last flush.
    unflushed: i64,
    last_seen: Instant,
}

/// Counters not used for this long are forgotten after a flush (and read again if needed).
const IDLE: Duration = Duration::from_secs(600);

/// The monthly counters of one instance.
pub struct Quotas {
    store: SharedStore,
    counters: Mutex<HashMap<(String, String), Counter>>,
}

impl std::fmt::Debug for Quotas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quotas").finish_non_exhaustive()
    }
}

impl Quotas {
    /// Counters over the shared rows.
    pub fn new(store: SharedStore) -> Self {
        Self {
            store,
            counters: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Counter>> {
        self.counters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn stored(&self, subject: &str, period: &str) -> Result<i64, StoreError> {
        let rows = self
            .store
            .query(
                "SELECT used FROM lookup_usage WHERE subject = $1 AND period = $2",
                &[
                    SqlValue::Text(subject.to_owned()),
                    SqlValue::Text(period.to_owned()),
                ],
            )
            .await?;
        Ok(rows.first().and_then(|r| r[0].as_i64()).unwrap_or(0))
    }

    /// Counts one request of `subject` against `limit` for the month of `now`, unless the
    /// allowance is spent.
    pub async fn check(
        &self,
        subject: &str,
        limit: u64,
        now: DateTime<Utc>,
    ) -> Result<QuotaDecision, StoreError> {
        let period = period_at(now);
        let slot = (subject.to_owned(), period.name.clone());
        let known = self.lock().contains_key(&slot);
        if !known {
            let global = self.stored(subject, &period.name).await?;
            self.lock().entry(slot.clone()).or_insert(Counter {
                global,
                unflushed: 0,
                last_seen: Instant::now(),
            });
        }
        let mut counters = self.lock();
        let counter = counters.entry(slot).or_insert(Counter {
            global: 0,
            unflushed: 0,
            last_seen: Instant::now(),
        });
        counter.last_seen = Instant::now();
        let limit_i = i64::try_from(limit).unwrap_or(i64::MAX);
        let allowed = counter.global + counter.unflushed < limit_i;
        if allowed {
            counter.unflushed += 1;
        }
        let used = counter.global + counter.unflushed;
        Ok(QuotaDecision {
            allowed,
            limit,
            remaining: u64::try_from(limit_i - used).unwrap_or(0),
            resets_at: period.resets_at,
        })
    }

    /// Adds this instance's new counts to the shared rows and reads the totals back; forgets
    /// past months and idle subjects.
    pub async fn flush(&self, now: DateTime<Utc>) -> Result<(), StoreError> {
        let current = period_at(now).name;
        let pending: Vec<((String, String), Counter)> = self
            .lock()
            .iter()
            .filter(|(_, c)| c.unflushed > 0)
            .map(|(k, c)| (k.clone(), *c))
            .collect();
        for ((subject, period), counter) in pending {
            self.store
                .execute(
                    "INSERT INTO lookup_usage (subject, period, used) VALUES ($1, $2, $3) \
                     ON CONFLICT (subject, period) DO UPDATE SET used = lookup_usage.used + excluded.used",
                    &[
                        SqlValue::Text(subject.clone()),
                        SqlValue::Text(period.clone()),
                        SqlValue::Int(counter.unflushed),
                    ],
                )
                .await?;
            let global = self.stored(&subject, &period).await?;
            if let Some(c) = self.lock().get_mut(&(subject, period)) {
                c.global = global;
                c.unflushed -= counter.unflushed;
            }
        }
        self.lock()
            .retain(|(_, period), c| c.unflushed > 0 || (*period == current && c.last_seen.elapsed() < IDLE));
        Ok(())
    }

    /// Flushes every `every` until `shutdown` completes, and once more then.
    pub fn spawn_flusher(
        self: Arc<Self>,
        every: Duration,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> JoinHandle<()> {
        tokio::spawn(async move {
            tokio::pin!(shutdown);
            loop {
                let stop = tokio::select! {
                    () = &mut shutdown => true,
                    () = tokio::time::sleep(every) => false,
                };
                if let Err(err) = self.flush(Utc::now()).await {
                    tracing::warn!(error = %err, "flushing lookup quota counters failed");
                }
                if stop {
                    return;
                }
            }
        })
    }
}
