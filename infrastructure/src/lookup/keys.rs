//! API keys of the lookup service (`kuatia lookup keys create|list|revoke`), created by the
//! operator, and their resolution on every request.
//!
//! A key is `kl_` and 40 random base62 characters; only its SHA-256 is stored, as for tenant keys
//! (`kuatia_application::access` explains why a fast hash is right for random keys). Requests
//! resolve keys through [`KeyCache`], which keeps an answer (found or not) for a few seconds so
//! that a request does not cost a database read; a revocation therefore takes effect on every
//! instance within that time.

use chrono::{DateTime, Utc};
use kuatia_application::access::sha256_hex;
use kuatia_application::event_store::{SharedStore, Store, StoreError};
use kuatia_application::projection::SqlValue;
use kuatia_domain::lookup::plan::Plan;
use rand::Rng;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// What every lookup key starts with.
pub const KEY_PREFIX: &str = "kl_";
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A lookup key as stored (never the key itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupKey {
    /// Id.
    pub id: Uuid,
    /// Who it is for.
    pub name: String,
    /// Plan.
    pub plan: Plan,
    /// Monthly limit set for this key; `None` uses the plan's configured limit.
    pub monthly_limit: Option<u64>,
    /// First 12 characters, for listings.
    pub prefix: String,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Revoked, if it was.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// Why a key cannot be created or revoked.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The enterprise plan has no default limit.
    #[error("the enterprise plan has no default monthly limit: give one with --limit")]
    LimitRequired,
    /// The name is empty.
    #[error("a key needs a name (who it is for)")]
    NameRequired,
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn key_from(row: &[SqlValue]) -> Result<LookupKey, StoreError> {
    let corrupt = |what: &str| StoreError::Corrupt(format!("lookup_api_keys.{what}"));
    let plan_text = row[2].as_text().ok_or_else(|| corrupt("plan"))?;
    Ok(LookupKey {
        id: row[0].as_uuid().ok_or_else(|| corrupt("id"))?,
        name: row[1].as_text().ok_or_else(|| corrupt("name"))?,
        plan: Plan::parse(&plan_text).ok_or_else(|| corrupt("plan"))?,
        monthly_limit: row[3].as_i64().map(|n| n.max(0) as u64),
        prefix: row[4].as_text().ok_or_else(|| corrupt("prefix"))?,
        created_at: row[5].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
        revoked_at: row[6].as_timestamp(),
    })
}

/// Creates a key; returns it and the secret, which is shown once and never stored.
pub async fn create_key(
    store: &dyn Store,
    name: &str,
    plan: Plan,
    monthly_limit: Option<u64>,
    now: DateTime<Utc>,
) -> Result<(LookupKey, String), KeyError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(KeyError::NameRequired);
    }
    if plan == Plan::Enterprise && monthly_limit.is_none() {
        return Err(KeyError::LimitRequired);
    }
    let mut rng = rand::rng();
    let random: String = (0..40)
        .map(|_| char::from(BASE62[rng.random_range(0..BASE62.len())]))
        .collect();
    let secret = format!("{KEY_PREFIX}{random}");
    let key = LookupKey {
        id: Uuid::now_v7(),
        name: name.to_owned(),
        plan,
        monthly_limit,
        prefix: secret.chars().take(12).collect(),
        created_at: now,
        revoked_at: None,
    };
    store
        .execute(
            "INSERT INTO lookup_api_keys (id, name, plan, monthly_limit, prefix, key_sha256, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                SqlValue::Uuid(key.id),
                SqlValue::Text(key.name.clone()),
                SqlValue::Text(plan.as_str().to_owned()),
                monthly_limit.map_or(
                    SqlValue::TypedNull(kuatia_application::projection::SqlType::Int),
                    |n| SqlValue::Int(i64::try_from(n).unwrap_or(i64::MAX)),
                ),
                SqlValue::Text(key.prefix.clone()),
                SqlValue::Text(sha256_hex(&secret)),
                SqlValue::Timestamp(now),
            ],
        )
        .await?;
    Ok((key, secret))
}

/// Every key, oldest first.
pub async fn list_keys(store: &dyn Store) -> Result<Vec<LookupKey>, StoreError> {
    store
        .query(
            "SELECT id, name, plan, monthly_limit, prefix, created_at, revoked_at \
             FROM lookup_api_keys ORDER BY created_at, id",
            &[],
        )
        .await?
        .iter()
        .map(|r| key_from(r))
        .collect()
}

/// Revokes the key with this id or prefix; returns it, or `None` when no active key matches.
pub async fn revoke_key(
    store: &dyn Store,
    id_or_prefix: &str,
    now: DateTime<Utc>,
) -> Result<Option<LookupKey>, StoreError> {
    let id_or_prefix = id_or_prefix.trim();
    let target = list_keys(store)
        .await?
        .into_iter()
        .find(|k| k.revoked_at.is_none() && (k.id.to_string() == id_or_prefix || k.prefix == id_or_prefix));
    let Some(mut key) = target else {
        return Ok(None);
    };
    store
        .execute(
            "UPDATE lookup_api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
            &[SqlValue::Uuid(key.id), SqlValue::Timestamp(now)],
        )
        .await?;
    key.revoked_at = Some(now);
    Ok(Some(key))
}

/// The active key whose secret this is.
pub async fn find_by_secret(store: &dyn Store, secret: &str) -> Result<Option<LookupKey>, StoreError> {
    let rows = store
        .query(
            "SELECT id, name, plan, monthly_limit, prefix, created_at, revoked_at \
             FROM lookup_api_keys WHERE key_sha256 = $1 AND revoked_at IS NULL",
            &[SqlValue::Text(sha256_hex(secret))],
        )
        .await?;
    rows.first().map(|r| key_from(r)).transpose()
}

/// Most answers the cache keeps (it is emptied when full: a flood of made-up keys cannot grow it).
const CACHE_CAPACITY: usize = 10_000;

/// Resolves keys with a short memory.
pub struct KeyCache {
    store: SharedStore,
    ttl: Duration,
    entries: Mutex<HashMap<String, (Instant, Option<LookupKey>)>>,
}

impl std::fmt::Debug for KeyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyCache")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl KeyCache {
    /// A cache keeping answers for `ttl`.
    pub fn new(store: SharedStore, ttl: Duration) -> Self {
        Self {
            store,
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The active key of `secret`, if any.
    pub async fn resolve(&self, secret: &str) -> Result<Option<LookupKey>, StoreError> {
        let hash = sha256_hex(secret);
        if let Some((at, key)) = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&hash)
            && at.elapsed() < self.ttl
        {
            return Ok(key.clone());
        }
        let key = if secret.starts_with(KEY_PREFIX) {
            find_by_secret(self.store.as_ref(), secret).await?
        } else {
            None
        };
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if entries.len() >= CACHE_CAPACITY {
            entries.clear();
        }
        entries.insert(hash, (Instant::now(), key.clone()));
        Ok(key)
    }
}

/// This month's use of every subject (`key:<id>`, `ip:<address>`).
pub async fn usage(store: &dyn Store, period: &str) -> Result<HashMap<String, u64>, StoreError> {
    Ok(store
        .query(
            "SELECT subject, used FROM lookup_usage WHERE period = $1",
            &[SqlValue::Text(period.to_owned())],
        )
        .await?
        .iter()
        .filter_map(|r| Some((r[0].as_text()?, r[1].as_i64()?.max(0) as u64)))
        .collect())
}
