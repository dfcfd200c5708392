//! The PostgreSQL backend.
//!
//! Commit order = global order: every append transaction takes one transaction-scoped advisory
//! lock ([`APPEND_LOCK`]) *before* it draws its position from the sequence, so appends commit in
//! position order and a reader that sees position N never later finds a lower one. Subscriptions
//! lock their checkpoint row with `FOR UPDATE SKIP LOCKED`, so one instance runs each; jobs are
//! claimed the same way. New events are announced with `NOTIFY kuatia_events` by a statement
//! trigger; subscribers also poll, because notifications are not durable.
//!
//! Here: the store's types, connecting and closing. Beside: `read.rs` (reading events),
//! `append.rs` (the grouped append transaction and inline projections), `store.rs` (the `Store`
//! trait: reads, subscriptions, projections, queries), `jobs.rs` (the job queue).

use kuatia_application::aggregate_cache::AggregateCache;
use kuatia_application::event_store::{Store, StoreError};
use kuatia_application::projection::Projection;
use kuatia_application::upcast::UpcasterChain;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgListener, PgPoolOptions};
use sqlx::{AssertSqlSafe, Executor, PgConnection, PgPool};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::common::raise;
use super::group::GroupCommit;
use super::{DatabaseOptions, db_error, redact_url};

mod append;
mod jobs;
mod read;
mod store;

pub(crate) use jobs::insert_job;
pub(crate) use read::stream_events;

/// The migrations of this backend, embedded in the binary.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations/postgres");

/// The advisory lock key every append holds until it commits ("kuatia" + 1).
pub const APPEND_LOCK: i64 = 0x6b75_6174_6961_0001;

/// NOTIFY channel of new events.
pub const EVENTS_CHANNEL: &str = "kuatia_events";

/// The event store and job queue on PostgreSQL.
pub struct PgStore {
    inner: Arc<PgInner>,
    group: GroupCommit,
    listener: Option<JoinHandle<()>>,
}

/// What the store and its group-commit tasks share.
struct PgInner {
    /// Folded aggregates by stream (`Store::aggregate_cache`).
    aggregates: AggregateCache,
    pool: PgPool,
    /// The configured login (the migrations' user, the tables' owner): vacuums and analyses a
    /// rebuilt projection's tables, which the application role may not.
    owner_url: String,
    inline: Vec<Arc<dyn Projection>>,
    upcasters: Arc<UpcasterChain>,
    hint: watch::Sender<i64>,
}

/// Most events one grouped transaction carries.
const MAX_GROUP_EVENTS: usize = 1000;

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl PgStore {
    /// Connects as the configured user, applies migrations, then opens the service pool, which
    /// switches every connection to the application role.
    pub async fn connect(
        options: &DatabaseOptions,
        inline: Vec<Arc<dyn Projection>>,
        upcasters: Arc<UpcasterChain>,
    ) -> Result<Self, StoreError> {
        let url = options.url.clone();
        let owner = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(10))
            .connect(&url)
            .await
            .map_err(|e| StoreError::Database(format!("connecting to {}: {e}", redact_url(&url)).into()))?;
        MIGRATOR
            .run(&owner)
            .await
            .map_err(|e| StoreError::Database(format!("applying migrations: {e}").into()))?;
        owner.close().await;

        let role = options.app_role.clone().filter(|r| !r.is_empty());
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(2))
            .acquire_timeout(Duration::from_secs(10))
            .after_connect(move |conn, _meta| {
                let role = role.clone();
                Box::pin(async move {
                    if let Some(role) = role {
                        conn.execute(AssertSqlSafe(format!("SET ROLE {}", quote_ident(&role))))
                            .await?;
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await
            .map_err(|e| StoreError::Database(format!("opening the service pool (SET ROLE): {e}").into()))?;

        let head: i64 = sqlx::query_scalar("SELECT COALESCE(max(global_position), 0) FROM events")
            .fetch_one(&pool)
            .await
            .map_err(db_error)?;
        let (hint, _) = watch::channel(head);
        let listener = Self::spawn_listener(&pool, hint.clone()).await?;
        let store = Self {
            inner: Arc::new(PgInner {
                aggregates: AggregateCache::default(),
                pool,
                owner_url: url,
                inline,
                upcasters,
                hint,
            }),
            group: GroupCommit::new(MAX_GROUP_EVENTS),
            listener: Some(listener),
        };
        for projection in store.inner.inline.clone() {
            store.register_projection(projection.as_ref()).await?;
        }
        Ok(store)
    }

    async fn spawn_listener(pool: &PgPool, hint: watch::Sender<i64>) -> Result<JoinHandle<()>, StoreError> {
        let mut listener = PgListener::connect_with(pool).await.map_err(db_error)?;
        listener.listen(EVENTS_CHANNEL).await.map_err(db_error)?;
        Ok(tokio::spawn(async move {
            loop {
                match listener.recv().await {
                    Ok(notification) => {
                        if let Ok(position) = notification.payload().parse::<i64>() {
                            raise(&hint, position);
                        }
                    }
                    Err(err) => {
                        // PgListener reconnects on the next recv; notifications sent meanwhile are
                        // lost, which is why subscribers poll too.
                        tracing::warn!(error = %err, "event notification listener failed; reconnecting");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        }))
    }

    /// The service pool (for read models and health checks).
    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    /// Stops the listener and closes the pool.
    pub async fn close(&self) {
        if let Some(listener) = &self.listener {
            listener.abort();
        }
        self.inner.pool.close().await;
    }

    async fn delete_tables(conn: &mut PgConnection, projection: &dyn Projection) -> Result<(), StoreError> {
        for table in projection.tables() {
            sqlx::query(AssertSqlSafe(format!("DELETE FROM {}", quote_ident(table))))
                .execute(&mut *conn)
                .await
                .map_err(db_error)?;
        }
        Ok(())
    }
}
