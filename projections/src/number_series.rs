//! `number_series` (inline): the next number of each number series, from `DocumentTransformed`
//! (SIFEN: company, timbrado, establishment, point, document type) and `DocumentRenderingStarted`
//! (autoimpresor: the channel's authorised range, `api/src/autoimpresor.rs`).
//!
//! The transform job reads the series' next number, builds the document with it and appends
//! `DocumentTransformed`. This projection runs in that append's transaction and moves the series
//! on only when the recorded number is exactly its next one; otherwise it fails, and with it the
//! append: someone else drew that number first, and the job draws again. So a number is used
//! once, and a series never skips one (a number is only consumed by the commit that records it),
//! whatever the number of workers and instances. A rebuild replays the same numbers in order.

use async_trait::async_trait;
use kuatia_application::event_store::{ProjectionKind, RecordedEvent, SharedStore, StoreError};
use kuatia_application::projection::{Projection, SqlTx, SqlValue};
use kuatia_domain::document::aggregate::DocumentEvent;
use kuatia_domain::tenancy::TenantId;

/// The projection.
#[derive(Debug, Default, Clone, Copy)]
pub struct NumberSeries;

impl NumberSeries {
    /// Its stable name.
    pub const NAME: &'static str = "number_series";
}

/// The message of the refusal when a number is not its series' next (the transform job
/// recognises it and draws again).
pub const NOT_NEXT: &str = "not the series' next number";

#[async_trait]
impl Projection for NumberSeries {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn kind(&self) -> ProjectionKind {
        ProjectionKind::Inline
    }

    fn tables(&self) -> &'static [&'static str] {
        &["number_series"]
    }

    async fn apply(&self, tx: &mut dyn SqlTx, event: &RecordedEvent) -> Result<(), StoreError> {
        if event.stream_type != "document"
            || !matches!(
                event.event_type.as_str(),
                "DocumentTransformed" | "DocumentRenderingStarted"
            )
        {
            return Ok(());
        }
        let (series, number) = match serde_json::from_value::<DocumentEvent>(event.payload.clone()) {
            Ok(
                DocumentEvent::DocumentTransformed { series, number, .. }
                | DocumentEvent::DocumentRenderingStarted { series, number, .. },
            ) => (series, number),
            _ => {
                return Err(StoreError::Corrupt(format!(
                    "document event {} does not decode",
                    event.event_id
                )));
            }
        };
        if series.is_empty() {
            // Recorded before series were named: nothing to keep.
            return Ok(());
        }
        let drawn: i64 = number
            .number
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("number {:?}", number.number)))?;
        // The first number of a series opens it; after that only the next one moves it on.
        let moved = tx
            .execute(
                "INSERT INTO number_series (tenant_id, series, next_number) VALUES ($1, $2, $3) \
                 ON CONFLICT (tenant_id, series) DO UPDATE SET next_number = excluded.next_number \
                 WHERE number_series.next_number = $4",
                &[
                    SqlValue::Uuid(event.tenant_id.as_uuid()),
                    SqlValue::Text(series.clone()),
                    SqlValue::Int(drawn + 1),
                    SqlValue::Int(drawn),
                ],
            )
            .await?;
        if moved == 1 {
            Ok(())
        } else {
            Err(StoreError::Invalid(format!("{series} {drawn}: {NOT_NEXT}")))
        }
    }
}

/// The next number of a series (1 for a series never used).
pub async fn next_number(store: &SharedStore, tenant: TenantId, series: &str) -> Result<u64, StoreError> {
    Ok(next_number_opt(store, tenant, series).await?.unwrap_or(1))
}

/// The next number of a series, `None` for a series never used (an autoimpresor series opens at
/// its channel's configured `next_number`).
pub async fn next_number_opt(
    store: &SharedStore,
    tenant: TenantId,
    series: &str,
) -> Result<Option<u64>, StoreError> {
    let rows = store
        .query(
            "SELECT next_number FROM number_series WHERE tenant_id = $1 AND series = $2",
            &[
                SqlValue::Uuid(tenant.as_uuid()),
                SqlValue::Text(series.to_owned()),
            ],
        )
        .await?;
    Ok(rows
        .first()
        .and_then(|r| r[0].as_i64())
        .map(|n| u64::try_from(n).unwrap_or(1)))
}
