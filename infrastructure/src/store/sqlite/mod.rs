//! The SQLite backend (the embedded, one-command default).
//!
//! SQLite has one writer at a time. Every write transaction here is `BEGIN IMMEDIATE` (a deferred
//! `BEGIN` that reads first can fail to upgrade with SQLITE_BUSY), and inside one process writers
//! queue on an async mutex first so they wait in order instead of in SQLite's busy handler. With
//! one writer, `AUTOINCREMENT` positions are commit-ordered. WAL mode lets readers run beside the
//! writer; `synchronous = FULL` because a committed fiscal event must survive a power cut.
//! New events are announced in-process through a watch channel; subscribers also poll.
//!
//! Here: the store's types, opening it, the write transaction and the column parsers. Beside:
//! `read.rs` (reading events), `append.rs` (the grouped append transaction and inline
//! projections), `store.rs` (the `Store` trait: reads, subscriptions, projections, queries),
//! `jobs.rs` (the job queue), `tests.rs`.

use chrono::{DateTime, Utc};
use kuatia_application::aggregate_cache::AggregateCache;
use kuatia_application::event_store::{Store, StoreError};
use kuatia_application::projection::Projection;
use kuatia_application::upcast::UpcasterChain;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{AssertSqlSafe, SqliteConnection, SqlitePool, Transaction};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Mutex, MutexGuard, watch};
use uuid::Uuid;

use super::group::GroupCommit;
use super::{DatabaseOptions, db_error};

/// The migrations of this backend, embedded in the binary.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations/sqlite");

/// SQLite's clock in the stored timestamp format (SQLite gives milliseconds; padded to micros).
macro_rules! now {
    () => {
        "(strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')"
    };
}

/// SQLite's clock plus the modifier bound at the given parameter (`'+1.500 seconds'`).
macro_rules! now_plus {
    ($param:literal) => {
        concat!("(strftime('%Y-%m-%dT%H:%M:%f', 'now', ", $param, ") || '000Z')")
    };
}

// Declared after the clock macros above, which they use.
mod append;
mod jobs;
mod read;
mod store;
#[cfg(test)]
mod tests;

pub(crate) use jobs::insert_job;
pub(crate) use read::stream_events;

/// The event store and job queue on SQLite.
pub struct SqliteStore {
    inner: Arc<SqliteInner>,
    group: GroupCommit,
}

/// What the store and its group-commit tasks share.
struct SqliteInner {
    /// Folded aggregates by stream (`Store::aggregate_cache`).
    aggregates: AggregateCache,
    pool: SqlitePool,
    write: Mutex<()>,
    inline: Vec<Arc<dyn Projection>>,
    upcasters: Arc<UpcasterChain>,
    hint: watch::Sender<i64>,
}

/// Most events one grouped transaction carries.
const MAX_GROUP_EVENTS: usize = 1000;

/// The database file of a `sqlite:` URL, if it names one.
pub fn database_file(url: &str) -> Option<std::path::PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or("");
    (!path.is_empty() && !path.starts_with(":memory:")).then(|| std::path::PathBuf::from(path))
}

impl SqliteStore {
    /// Opens (creating the file and its folder when missing), migrates, and opens the store.
    pub async fn connect(
        options: &DatabaseOptions,
        inline: Vec<Arc<dyn Projection>>,
        upcasters: Arc<UpcasterChain>,
    ) -> Result<Self, StoreError> {
        if let Some(parent) = database_file(&options.url)
            .as_deref()
            .and_then(std::path::Path::parent)
            && !parent.as_os_str().is_empty()
        {
            crate::create_private_dir_all(parent)
                .map_err(|e| StoreError::Database(format!("creating {}: {e}", parent.display()).into()))?;
        }
        // A database file this open creates is its owner's alone, and so are its -wal and -shm
        // files (later ones take the database file's mode).
        let created = database_file(&options.url).filter(|f| !f.exists());
        let connect = SqliteConnectOptions::from_str(&options.url)
            .map_err(db_error)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(30))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(options.max_connections.clamp(2, 16))
            .connect_with(connect)
            .await
            .map_err(|e| StoreError::Database(format!("opening {}: {e}", options.url).into()))?;
        if let Some(file) = created {
            for suffix in ["", "-wal", "-shm"] {
                let path = std::path::PathBuf::from(format!("{}{suffix}", file.display()));
                if path.exists() {
                    crate::make_private(&path).map_err(|e| {
                        StoreError::Database(format!("making {} private: {e}", path.display()).into())
                    })?;
                }
            }
        }
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|e| StoreError::Database(format!("applying migrations: {e}").into()))?;
        let head: i64 = sqlx::query_scalar("SELECT COALESCE(max(global_position), 0) FROM events")
            .fetch_one(&pool)
            .await
            .map_err(db_error)?;
        let (hint, _) = watch::channel(head);
        let store = Self {
            inner: Arc::new(SqliteInner {
                aggregates: AggregateCache::default(),
                pool,
                write: Mutex::new(()),
                inline,
                upcasters,
                hint,
            }),
            group: GroupCommit::new(MAX_GROUP_EVENTS),
        };
        for projection in store.inner.inline.clone() {
            store.register_projection(projection.as_ref()).await?;
        }
        Ok(store)
    }

    /// The pool (for read models and health checks).
    pub fn pool(&self) -> &SqlitePool {
        &self.inner.pool
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.inner.pool.close().await;
    }

    async fn delete_tables(
        conn: &mut SqliteConnection,
        projection: &dyn Projection,
    ) -> Result<(), StoreError> {
        for table in projection.tables() {
            sqlx::query(AssertSqlSafe(format!(
                "DELETE FROM \"{}\"",
                table.replace('"', "\"\"")
            )))
            .execute(&mut *conn)
            .await
            .map_err(db_error)?;
        }
        Ok(())
    }
}

impl SqliteInner {
    /// Starts a write transaction: in-process queue first, then `BEGIN IMMEDIATE`.
    async fn begin_write(
        &self,
    ) -> Result<(MutexGuard<'_, ()>, Transaction<'static, sqlx::Sqlite>), StoreError> {
        let guard = self.write.lock().await;
        let tx = self.pool.begin_with("BEGIN IMMEDIATE").await.map_err(db_error)?;
        Ok((guard, tx))
    }
}

fn parse_time(column: &str, text: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt(format!("{column} {text:?}: {e}")))
}

fn parse_uuid(column: &str, text: &str) -> Result<Uuid, StoreError> {
    Uuid::parse_str(text).map_err(|e| StoreError::Corrupt(format!("{column} {text:?}: {e}")))
}

fn parse_json<T: serde::de::DeserializeOwned>(column: &str, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
}
