//! The subscription runtime: one loop per catch-up projection, and the rebuild procedure.
//!
//! A loop runs batches (each one transaction: checkpoint row lock, events, read-model writes,
//! checkpoint) until caught up, then waits for the store's position hint (LISTEN/NOTIFY on
//! PostgreSQL, an in-process signal on SQLite) or the poll interval, whichever comes first:
//! notifications are a hint, polling is the guarantee. A failing batch is rolled back, its error
//! recorded on the checkpoint row (shown by `kuatia projections status`), and retried with
//! backoff; the projection never skips an event.

use kuatia_application::event_store::{BatchOutcome, ProjectionKind, SharedStore, StoreError};
use kuatia_application::projection::Projection;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Runtime settings.
#[derive(Debug, Clone, Copy)]
pub struct RuntimeConfig {
    /// Longest wait between checks when no hint arrives.
    pub poll_interval: Duration,
    /// Events per batch (per transaction).
    pub batch_size: usize,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(1),
            batch_size: 500,
        }
    }
}

/// Starts one loop per catch-up projection; the handle completes after shutdown.
pub fn spawn(
    store: SharedStore,
    projections: Vec<Arc<dyn Projection>>,
    config: RuntimeConfig,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let loops: Vec<_> = projections
            .into_iter()
            .filter(|p| p.kind() != ProjectionKind::Inline)
            .map(|p| tokio::spawn(run(store.clone(), p, config, shutdown.clone())))
            .collect();
        for handle in loops {
            let _ = handle.await;
        }
    })
}

async fn run(
    store: SharedStore,
    projection: Arc<dyn Projection>,
    config: RuntimeConfig,
    shutdown: CancellationToken,
) {
    let mut hint = store.position_hint();
    let mut failures: u32 = 0;
    while let Err(err) = store.register_projection(projection.as_ref()).await {
        tracing::warn!(projection = projection.name(), error = %err, "registering the projection failed");
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(config.poll_interval) => {}
        }
    }
    while !shutdown.is_cancelled() {
        match store.run_batch(projection.as_ref(), config.batch_size).await {
            Ok(BatchOutcome::Applied { .. }) => {
                failures = 0;
            }
            Ok(BatchOutcome::CaughtUp | BatchOutcome::Busy) => {
                failures = 0;
                tokio::select! {
                    _ = shutdown.cancelled() => {}
                    _ = hint.changed() => {}
                    _ = tokio::time::sleep(config.poll_interval) => {}
                }
            }
            Err(err) => {
                failures = failures.saturating_add(1);
                tracing::error!(projection = projection.name(), error = %err, "projection batch failed; retrying");
                let _ = store
                    .record_projection_error(projection.name(), &err.to_string())
                    .await;
                let delay = config.poll_interval * 2u32.saturating_pow(failures.min(6));
                tokio::select! {
                    _ = shutdown.cancelled() => {}
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

/// Runs batches until the projection has caught up with the head; returns the events applied.
pub async fn catch_up(
    store: &SharedStore,
    projection: &dyn Projection,
    batch_size: usize,
    progress: &(dyn Fn(i64, i64) + Send + Sync),
) -> Result<u64, StoreError> {
    store.register_projection(projection).await?;
    let mut applied = 0u64;
    loop {
        match store.run_batch(projection, batch_size).await? {
            BatchOutcome::Applied { count, position } => {
                applied += count as u64;
                progress(position, store.head_position().await?);
            }
            BatchOutcome::CaughtUp => return Ok(applied),
            BatchOutcome::Busy => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Why a rebuild did not run.
#[derive(Debug, thiserror::Error)]
pub enum RebuildError {
    /// The projection causes side effects (jobs); replaying it would repeat them.
    #[error("{0} has side effects (it writes jobs) and is never rebuilt")]
    SideEffects(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Empties a projection and replays it from position 0. Inline projections are rebuilt in one
/// transaction that holds appends back; catch-up ones are reset (under their checkpoint lock)
/// and caught up; then the tables are refreshed for the planner
/// ([`kuatia_application::event_store::Store::refresh_tables`]; a refresh that fails is logged,
/// the rebuild stands).
/// Side-effect subscriptions are refused.
pub async fn rebuild(
    store: &SharedStore,
    projection: &dyn Projection,
    progress: &(dyn Fn(i64, i64) + Send + Sync),
) -> Result<u64, RebuildError> {
    let replayed = match projection.kind() {
        ProjectionKind::SideEffect => return Err(RebuildError::SideEffects(projection.name().to_owned())),
        ProjectionKind::Inline => store.rebuild_inline(projection, progress).await?,
        ProjectionKind::CatchUp => {
            store.register_projection(projection).await?;
            store.reset_projection(projection).await?;
            catch_up(store, projection, 1000, progress).await?
        }
    };
    // Every row was deleted and written again: the planner's statistics go with them. The
    // rebuild itself has succeeded (committed) by now: a refresh that fails (no connection as the
    // owner, say) is said, and left to autovacuum, not reported as a failed rebuild.
    if let Err(err) = store.refresh_tables(projection).await {
        tracing::warn!(
            projection = projection.name(),
            error = %err,
            "refreshing the rebuilt tables' statistics failed; autovacuum will analyse them later"
        );
    }
    Ok(replayed)
}
