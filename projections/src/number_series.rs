//! `number_series` (inline): the next number of each number series, from `DocumentTransformed`
//! (SIFEN: company, timbrado, establishment, point, document type) and `DocumentRenderingStarted`
//! (autoimpresor: the channel's authorised range, `kuatia_application::process::autoimpresor`).
//!
//! The transform job reads the series' next number, builds the document with it and appends
//! `DocumentTransformed`. This projection runs in that append's transaction and moves the series
//! on only when the recorded number is exactly its next one; otherwise it fails, and with it the
//! append: someone else drew that number first, and the job draws again. So a number is used
//! once, and a series never skips one (a number is only consumed by the commit that records it),
//! whatever the number of workers and instances. A rebuild replays the same numbers in order.

use async_trait::async_trait;
use kuatia_application::event_store::{ProjectionKind, RecordedEvent, SharedStore, StoreError};
use kuatia_application::projection::{Backend, Projection, SqlTx, SqlValue, json_row_chunks};
use kuatia_domain::document::aggregate::DocumentEvent;
use kuatia_domain::tenancy::TenantId;
use serde_json::json;
use std::collections::HashSet;
use uuid::Uuid;

/// The projection.
#[derive(Debug, Default, Clone, Copy)]
pub struct NumberSeries;

impl NumberSeries {
    /// Its stable name.
    pub const NAME: &'static str = "number_series";
}

/// The message of the refusal when a number is not its series' next (the process managers
/// recognise it and draw again): the port's words.
pub use kuatia_application::process::ports::NOT_NEXT;

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
        let Some((series, drawn)) = drawn(event)? else {
            return Ok(());
        };
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

    /// On PostgreSQL, when each series' numbers in the batch follow one another (a numbering
    /// turn's documents, in number order), one statement per
    /// [`MAX_JSON_PARAM_BYTES`](kuatia_application::projection::MAX_JSON_PARAM_BYTES) of series
    /// moves each series from its first number to past its last — only if the first is its next
    /// number (or the series is new), exactly where `apply` would have moved it number by number
    /// or failed. Otherwise event by event.
    async fn apply_all(&self, tx: &mut dyn SqlTx, events: &[RecordedEvent]) -> Result<(), StoreError> {
        // Per series, in order of first appearance: tenant, series, first and last number.
        let mut runs: Vec<(Uuid, String, i64, i64)> = Vec::new();
        let mut consecutive = tx.backend() == Backend::Postgres;
        for event in events {
            if !consecutive {
                break;
            }
            let Some((series, drawn)) = drawn(event)? else {
                continue;
            };
            let tenant = event.tenant_id.as_uuid();
            match runs.iter_mut().find(|r| r.0 == tenant && r.1 == series) {
                Some(run) if run.3 + 1 == drawn => run.3 = drawn,
                Some(_) => consecutive = false,
                None => runs.push((tenant, series, drawn, drawn)),
            }
        }
        if !consecutive {
            return self.apply_each(tx, events).await;
        }
        let rows = runs
            .iter()
            .map(|(tenant, series, first, last)| {
                json!({"tenant_id": tenant, "series": series, "first": first, "last": last})
            })
            .collect();
        let mut moved: HashSet<(Uuid, String)> = HashSet::with_capacity(runs.len());
        for chunk in json_row_chunks(rows) {
            // Under the append lock nothing else writes the table: an existing series moves only
            // from its next number, a new one opens.
            let rows = tx
                .query(
                    "WITH r AS (SELECT * FROM jsonb_to_recordset($1) \
                       AS r(tenant_id uuid, series text, first bigint, last bigint)), \
                     moved AS (UPDATE number_series AS n SET next_number = r.last + 1 FROM r \
                       WHERE n.tenant_id = r.tenant_id AND n.series = r.series AND n.next_number = r.first \
                       RETURNING n.tenant_id, n.series), \
                     opened AS (INSERT INTO number_series (tenant_id, series, next_number) \
                       SELECT r.tenant_id, r.series, r.last + 1 FROM r WHERE NOT EXISTS ( \
                         SELECT 1 FROM number_series AS n WHERE n.tenant_id = r.tenant_id AND n.series = r.series) \
                       ON CONFLICT (tenant_id, series) DO NOTHING RETURNING tenant_id, series) \
                     SELECT tenant_id, series FROM moved UNION ALL SELECT tenant_id, series FROM opened",
                    &[SqlValue::Json(chunk)],
                )
                .await?;
            for row in rows {
                if let [SqlValue::Uuid(tenant), SqlValue::Text(series)] = row.as_slice() {
                    moved.insert((*tenant, series.clone()));
                }
            }
        }
        match runs
            .into_iter()
            .find(|(tenant, series, ..)| !moved.contains(&(*tenant, series.clone())))
        {
            None => Ok(()),
            Some((_, series, first, _)) => Err(StoreError::Invalid(format!("{series} {first}: {NOT_NEXT}"))),
        }
    }
}

/// The series and number a numbering event draws (`None` for other events, and for numbers
/// recorded before series were named: nothing to keep).
fn drawn(event: &RecordedEvent) -> Result<Option<(String, i64)>, StoreError> {
    if event.stream_type != "document"
        || !matches!(
            event.event_type.as_str(),
            "DocumentTransformed" | "DocumentRenderingStarted"
        )
    {
        return Ok(None);
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
        return Ok(None);
    }
    let drawn: i64 = number
        .number
        .parse()
        .map_err(|_| StoreError::Corrupt(format!("number {:?}", number.number)))?;
    Ok(Some((series, drawn)))
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
