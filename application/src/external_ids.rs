//! One live fiscal document per `external_id` (issue 26): within a
//! tenant, a company's `external_id` of one document type names at most one document that has not
//! ended without effect. Posting the same `external_id` with a new `Idempotency-Key` is refused
//! (409, naming the existing document) instead of issuing a second fiscal document; a document
//! that ended `validation_failed`, `rejected`, `failed_terminal` or `invalidated` does not block a
//! corrected resend, which takes the `external_id` over.
//!
//! A claim is a row in the plain table `external_ids`, made with `INSERT … ON CONFLICT DO
//! NOTHING` before the document's append: of two racing requests exactly one wins it. A takeover
//! replaces the holder only where it is still the one read (compare and set), so two racing
//! resends also make one document. A claim whose document was never stored (its request died
//! between the claim and the append) is taken over once it is older than [`ABANDONED_AFTER`].

use chrono::{DateTime, Duration, Utc};
use kuatia_domain::tenancy::TenantId;
use uuid::Uuid;

use crate::event_store::{SharedStore, StoreError};
use crate::projection::SqlValue;

/// The statuses of a document that ended without fiscal effect: its `external_id` is free again.
pub const RELEASING: &[&str] = &["validation_failed", "rejected", "failed_terminal", "invalidated"];

/// A claim whose document was never stored is abandoned after this long.
pub const ABANDONED_AFTER: Duration = Duration::seconds(60);

/// The `external_id` of one company and document type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalId<'a> {
    /// The company.
    pub company_id: Uuid,
    /// `invoice`, `credit_note`, …
    pub doc_type: &'a str,
    /// The integrator's id.
    pub external_id: &'a str,
}

/// What a request may do with an `external_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExternalClaim {
    /// It is this document's now.
    Claimed,
    /// Another document holds it: a live one, or one whose request is still being stored.
    Held {
        /// The document that holds it.
        document_id: Uuid,
    },
}

fn key_params(tenant: TenantId, id: &ExternalId<'_>) -> [SqlValue; 4] {
    [
        SqlValue::Uuid(tenant.as_uuid()),
        SqlValue::Uuid(id.company_id),
        SqlValue::Text(id.doc_type.to_owned()),
        SqlValue::Text(id.external_id.to_owned()),
    ]
}

/// Claims `id` for document `document_id` (which has its idempotency claim already).
pub async fn claim(
    store: &SharedStore,
    tenant: TenantId,
    id: &ExternalId<'_>,
    document_id: Uuid,
    now: DateTime<Utc>,
) -> Result<ExternalClaim, StoreError> {
    let key = key_params(tenant, id);
    for _ in 0..3 {
        let mut params = key.to_vec();
        params.extend([SqlValue::Uuid(document_id), SqlValue::Timestamp(now)]);
        let inserted = store
            .execute(
                "INSERT INTO external_ids (tenant_id, company_id, doc_type, external_id, document_id, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (tenant_id, company_id, doc_type, external_id) DO NOTHING",
                &params,
            )
            .await?;
        if inserted == 1 {
            return Ok(ExternalClaim::Claimed);
        }
        let rows = store
            .query(
                "SELECT e.document_id, e.created_at, (SELECT d.status FROM documents d WHERE d.id = e.document_id) \
                 FROM external_ids e \
                 WHERE e.tenant_id = $1 AND e.company_id = $2 AND e.doc_type = $3 AND e.external_id = $4",
                &key,
            )
            .await?;
        let Some(row) = rows.first() else {
            continue; // released in between: claim again
        };
        let corrupt = || StoreError::Corrupt("unreadable external_ids row".into());
        let holder = row[0].as_uuid().ok_or_else(corrupt)?;
        if holder == document_id {
            // The same request again (an idempotent retry that took its claim over).
            return Ok(ExternalClaim::Claimed);
        }
        let claimed_at = row[1].as_timestamp().ok_or_else(corrupt)?;
        let free = match row[2].non_null().and_then(SqlValue::as_text) {
            Some(status) => RELEASING.contains(&status.as_str()),
            None => now - claimed_at > ABANDONED_AFTER,
        };
        if !free {
            return Ok(ExternalClaim::Held { document_id: holder });
        }
        let mut params = key.to_vec();
        params.extend([
            SqlValue::Uuid(holder),
            SqlValue::Uuid(document_id),
            SqlValue::Timestamp(now),
        ]);
        let taken = store
            .execute(
                "UPDATE external_ids SET document_id = $6, created_at = $7 \
                 WHERE tenant_id = $1 AND company_id = $2 AND doc_type = $3 AND external_id = $4 \
                   AND document_id = $5",
                &params,
            )
            .await?;
        if taken == 1 {
            return Ok(ExternalClaim::Claimed);
        }
        // Another request took it over first: look again.
    }
    Err(StoreError::Invalid(
        "the external_id keeps changing hands under us".into(),
    ))
}

/// Gives `id` back when document `document_id` was not stored after all, so that the corrected
/// request may use it. A claim whose document exists is kept.
pub async fn release(
    store: &SharedStore,
    tenant: TenantId,
    id: &ExternalId<'_>,
    document_id: Uuid,
) -> Result<(), StoreError> {
    let mut params = key_params(tenant, id).to_vec();
    params.push(SqlValue::Uuid(document_id));
    store
        .execute(
            "DELETE FROM external_ids \
             WHERE tenant_id = $1 AND company_id = $2 AND doc_type = $3 AND external_id = $4 \
               AND document_id = $5 AND NOT EXISTS (SELECT 1 FROM documents WHERE id = $5)",
            &params,
        )
        .await?;
    Ok(())
}
