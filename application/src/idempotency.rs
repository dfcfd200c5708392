//! `Idempotency-Key` of `POST /v1/documents`: per tenant
//! and key, 24 hours. The same key with the same body (compared as canonical JSON) answers the
//! original response again; with another body it is refused; requests racing with one key make
//! one document.
//!
//! A claim is a row in the plain table `idempotency_keys` made with `INSERT … ON CONFLICT DO
//! NOTHING`, so exactly one request wins it. The claim names the document id up front: whoever
//! creates the document appends to that id's stream with "no stream yet" as the expected
//! version, so even a request that takes over an abandoned claim (its owner crashed) cannot make
//! a second document — it finds the first.
//!
//! The answer is not stored: once the claimed document exists (its row in the inline `documents`
//! read model, written in the append transaction), a repeat is [`Claim::Stored`] and the caller
//! rebuilds the original answer from the document's intake events, which never change. That
//! keeps intake at one write besides the append. Rows written before this (with `response` set)
//! still replay what they stored.

use chrono::{DateTime, Duration, Utc};
use kuatia_domain::tenancy::TenantId;
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::event_store::{SharedStore, StoreError};
use crate::projection::SqlValue;

/// How long a key is remembered.
pub const WINDOW: Duration = Duration::hours(24);

/// Longest accepted key.
pub const MAX_KEY_LEN: usize = 255;

/// What a request with a key may do.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// This request owns the key: create document `document_id`.
    Claimed {
        /// The id the document must get.
        document_id: Uuid,
    },
    /// The key was used with this body and its document was stored: answer its intake again.
    Stored {
        /// The document.
        document_id: Uuid,
    },
    /// The key was used with this body and its answer was stored (rows written by earlier
    /// versions): send this again.
    Replay {
        /// The original response body.
        response: Value,
    },
    /// The key was used with another body.
    Mismatch,
    /// Another request with this key and body is still running (or died): its document id and
    /// when it claimed the key.
    InFlight {
        /// The id that request creates.
        document_id: Uuid,
        /// When it claimed.
        claimed_at: DateTime<Utc>,
    },
}

/// SHA-256 of the body as canonical JSON (object keys sorted, no insignificant whitespace), so
/// that the same document sent with its fields in another order is the same request.
pub fn request_hash(body: &Value) -> String {
    // serde_json's map is ordered by key (no `preserve_order`), so serialising is canonical; it
    // is written straight into the hash, never held as a string.
    let mut hasher = HashWriter(Sha256::new());
    // Writing a `Value` into a writer that cannot fail cannot fail.
    let _ = serde_json::to_writer(&mut hasher, body);
    hex::encode(hasher.0.finalize())
}

/// Feeds what is written into a SHA-256.
struct HashWriter(Sha256);

impl std::io::Write for HashWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Claims `key` for a request whose body hashes to `hash`.
pub async fn claim(
    store: &SharedStore,
    tenant: TenantId,
    key: &str,
    hash: &str,
    now: DateTime<Utc>,
) -> Result<Claim, StoreError> {
    for _ in 0..3 {
        let document_id = Uuid::now_v7();
        let inserted = store
            .execute(
                "INSERT INTO idempotency_keys (tenant_id, key, request_hash, document_id, response, created_at, \
                   expires_at) VALUES ($1, $2, $3, $4, NULL, $5, $6) ON CONFLICT (tenant_id, key) DO NOTHING",
                &[
                    SqlValue::Uuid(tenant.as_uuid()),
                    SqlValue::Text(key.to_owned()),
                    SqlValue::Text(hash.to_owned()),
                    SqlValue::Uuid(document_id),
                    SqlValue::Timestamp(now),
                    SqlValue::Timestamp(now + WINDOW),
                ],
            )
            .await?;
        if inserted == 1 {
            return Ok(Claim::Claimed { document_id });
        }
        let rows = store
            .query(
                "SELECT k.request_hash, k.document_id, k.response, k.created_at, k.expires_at, \
                   (SELECT COUNT(*) FROM documents d WHERE d.id = k.document_id) \
                 FROM idempotency_keys k WHERE k.tenant_id = $1 AND k.key = $2",
                &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Text(key.to_owned())],
            )
            .await?;
        let Some(row) = rows.first() else {
            continue; // expired and removed in between: claim again
        };
        let corrupt = || StoreError::Corrupt("unreadable idempotency key row".into());
        let expires_at = row[4].as_timestamp().ok_or_else(corrupt)?;
        if expires_at <= now {
            store
                .execute(
                    "DELETE FROM idempotency_keys WHERE tenant_id = $1 AND key = $2 AND expires_at <= $3",
                    &[
                        SqlValue::Uuid(tenant.as_uuid()),
                        SqlValue::Text(key.to_owned()),
                        SqlValue::Timestamp(now),
                    ],
                )
                .await?;
            continue;
        }
        if row[0].as_text().as_deref() != Some(hash) {
            return Ok(Claim::Mismatch);
        }
        if let Some(response) = row[2].non_null() {
            let response = match response {
                SqlValue::Json(v) => v.clone(),
                SqlValue::Text(t) => serde_json::from_str(t).map_err(|_| corrupt())?,
                _ => return Err(corrupt()),
            };
            return Ok(Claim::Replay { response });
        }
        let document_id = row[1].as_uuid().ok_or_else(corrupt)?;
        if row[5].as_i64().is_some_and(|n| n > 0) {
            return Ok(Claim::Stored { document_id });
        }
        return Ok(Claim::InFlight {
            document_id,
            claimed_at: row[3].as_timestamp().ok_or_else(corrupt)?,
        });
    }
    Err(StoreError::Invalid(
        "the idempotency key keeps expiring under us".into(),
    ))
}

/// Gives a key back when its request stored nothing (a configuration error, say), so that the
/// corrected request may use it. A key whose document exists is kept, whatever the caller
/// believed.
pub async fn release(
    store: &SharedStore,
    tenant: TenantId,
    key: &str,
    document_id: Uuid,
) -> Result<(), StoreError> {
    store
        .execute(
            "DELETE FROM idempotency_keys WHERE tenant_id = $1 AND key = $2 AND document_id = $3 \
               AND response IS NULL AND NOT EXISTS (SELECT 1 FROM documents WHERE id = $3)",
            &[
                SqlValue::Uuid(tenant.as_uuid()),
                SqlValue::Text(key.to_owned()),
                SqlValue::Uuid(document_id),
            ],
        )
        .await?;
    Ok(())
}

/// Removes expired keys (a periodic job).
pub async fn purge_expired(store: &SharedStore, now: DateTime<Utc>) -> Result<u64, StoreError> {
    store
        .execute(
            "DELETE FROM idempotency_keys WHERE expires_at <= $1",
            &[SqlValue::Timestamp(now)],
        )
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_ignores_key_order_and_whitespace_but_not_values() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": {"y": [1, 2], "x": "z"}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":{"x":"z","y":[1,2]},"b":1}"#).unwrap();
        let c: Value = serde_json::from_str(r#"{"a":{"x":"z","y":[2,1]},"b":1}"#).unwrap();
        assert_eq!(request_hash(&a), request_hash(&b));
        assert_ne!(request_hash(&a), request_hash(&c));
        // The same digest as hashing the canonical text (keys stored before this change match).
        assert_eq!(
            request_hash(&a),
            hex::encode(Sha256::digest(r#"{"a":{"x":"z","y":[1,2]},"b":1}"#.as_bytes()))
        );
    }
}
