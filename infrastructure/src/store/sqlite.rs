//! The SQLite backend (the embedded, one-command default).
//!
//! SQLite has one writer at a time. Every write transaction here is `BEGIN IMMEDIATE` (a deferred
//! `BEGIN` that reads first can fail to upgrade with SQLITE_BUSY), and inside one process writers
//! queue on an async mutex first so they wait in order instead of in SQLite's busy handler. With
//! one writer, `AUTOINCREMENT` positions are commit-ordered. WAL mode lets readers run beside the
//! writer; `synchronous = FULL` because a committed fiscal event must survive a power cut.
//! New events are announced in-process through a watch channel; subscribers also poll.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use kuatia_application::aggregate_cache::AggregateCache;
use kuatia_application::event_store::{
    AppendOutcome, AppendRequest, BatchOutcome, EventMetadata, ProjectionKind, ReadFilter, RecordedEvent,
    Store, StoreError, SubscriptionStatus,
};
use kuatia_application::hash::format_timestamp;
use kuatia_application::jobs::{
    Job, JobCount, JobFilter, JobListStatus, JobQueue, JobState, NewJob, RELEASED,
};
use kuatia_application::projection::Projection;
use kuatia_application::upcast::UpcasterChain;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{AssertSqlSafe, Row, SqliteConnection, SqlitePool, Transaction};
use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Mutex, MutexGuard, watch};
use uuid::Uuid;

use super::common::{StreamHead, is_unique_violation, outcomes, plan, raise, tenant, upcast};
use super::group::{self, BatchAppend, GroupCommit};
use super::sql_value::{SqliteSqlTx, bind_sqlite, decode_sqlite_row};
use super::{DatabaseOptions, db_error, write_error};
use kuatia_application::projection::SqlValue;

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

macro_rules! event_columns {
    () => {
        "global_position, event_id, tenant_id, stream_type, stream_id, stream_version, event_type, \
         schema_version, payload, metadata, recorded_at, prev_hash, hash"
    };
}

macro_rules! job_columns {
    () => {
        "id, kind, idempotency_key, tenant_id, payload, state, attempts, max_attempts, next_attempt_at, \
         lease_owner, lease_expires_at, last_error"
    };
}

fn seconds(d: Duration) -> String {
    format!("+{:.3} seconds", d.as_secs_f64())
}

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

    async fn read_raw_on(
        conn: &mut SqliteConnection,
        filter: &ReadFilter,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        let limit = filter.limit.clamp(1, 100_000) as i64;
        let tenant = filter.tenant.map(|t| t.as_uuid().to_string());
        let rows = sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE global_position > $1 AND ($3 IS NULL OR tenant_id = $3) \
              AND ($4 IS NULL OR stream_id = $4) AND ($5 IS NULL OR event_type = $5) \
              AND ($6 IS NULL OR stream_id IN ( \
                   SELECT stream_id FROM companies WHERE id = $6 AND tenant_id = $3 \
                   UNION ALL SELECT stream_id FROM documents WHERE company_id = $6 AND tenant_id = $3)) \
              ORDER BY global_position LIMIT $2"
        ))
        .bind(filter.after)
        .bind(limit)
        .bind(tenant)
        .bind(filter.stream_id.clone())
        .bind(filter.event_type.clone())
        .bind(filter.company.map(|c| c.to_string()))
        .fetch_all(&mut *conn)
        .await
        .map_err(db_error)?;
        rows.iter().map(event_from_row).collect()
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

/// The stored events of one stream with versions in `after + 1 ..= upto`, in version order, not
/// upcast (the store's reads and a projection's `SqlTx` upcast them).
pub(crate) async fn stream_events(
    conn: &mut SqliteConnection,
    stream_id: &str,
    after: u64,
    upto: u64,
) -> Result<Vec<RecordedEvent>, StoreError> {
    let rows = sqlx::query(concat!(
        "SELECT ",
        event_columns!(),
        " FROM events WHERE stream_id = $1 AND stream_version > $2 AND stream_version <= $3 \
         ORDER BY stream_version"
    ))
    .bind(stream_id)
    .bind(i64::try_from(after).unwrap_or(i64::MAX))
    .bind(i64::try_from(upto).unwrap_or(i64::MAX))
    .fetch_all(&mut *conn)
    .await
    .map_err(db_error)?;
    rows.iter().map(event_from_row).collect()
}

fn event_from_row(row: &SqliteRow) -> Result<RecordedEvent, StoreError> {
    let corrupt = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let text = |name: &str| row.try_get::<String, _>(name).map_err(corrupt);
    Ok(RecordedEvent {
        global_position: row.try_get("global_position").map_err(corrupt)?,
        event_id: parse_uuid("event_id", &text("event_id")?)?,
        tenant_id: tenant(parse_uuid("tenant_id", &text("tenant_id")?)?),
        stream_type: text("stream_type")?,
        stream_id: text("stream_id")?,
        stream_version: row.try_get::<i64, _>("stream_version").map_err(corrupt)? as u64,
        event_type: text("event_type")?,
        schema_version: row.try_get::<i64, _>("schema_version").map_err(corrupt)? as u32,
        payload: parse_json("payload", &text("payload")?)?,
        metadata: parse_json::<EventMetadata>("metadata", &text("metadata")?)?,
        recorded_at: parse_time("recorded_at", &text("recorded_at")?)?,
        prev_hash: row.try_get("prev_hash").map_err(corrupt)?,
        hash: text("hash")?,
    })
}

fn job_from_row(row: &SqliteRow) -> Result<Job, StoreError> {
    let corrupt = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
    let text = |name: &str| row.try_get::<String, _>(name).map_err(corrupt);
    let opt_text = |name: &str| row.try_get::<Option<String>, _>(name).map_err(corrupt);
    let state = text("state")?;
    Ok(Job {
        id: parse_uuid("id", &text("id")?)?,
        kind: text("kind")?,
        idempotency_key: text("idempotency_key")?,
        tenant_id: tenant(parse_uuid("tenant_id", &text("tenant_id")?)?),
        payload: parse_json("payload", &text("payload")?)?,
        state: JobState::parse(&state).ok_or_else(|| StoreError::Corrupt(format!("job state {state}")))?,
        attempts: row.try_get::<i64, _>("attempts").map_err(corrupt)? as u32,
        max_attempts: row.try_get::<i64, _>("max_attempts").map_err(corrupt)? as u32,
        next_attempt_at: parse_time("next_attempt_at", &text("next_attempt_at")?)?,
        lease_owner: opt_text("lease_owner")?,
        lease_expires_at: opt_text("lease_expires_at")?
            .map(|t| parse_time("lease_expires_at", &t))
            .transpose()?,
        last_error: opt_text("last_error")?,
    })
}

/// Writes a job on an open connection (inside the caller's transaction).
pub(crate) async fn insert_job(conn: &mut SqliteConnection, job: &NewJob) -> Result<bool, StoreError> {
    let result = sqlx::query(concat!(
        "INSERT INTO jobs (id, tenant_id, kind, idempotency_key, payload, state, max_attempts, next_attempt_at, \
           created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, 'pending', $6, COALESCE($7, ",
        now!(),
        "), ",
        now!(),
        ", ",
        now!(),
        ") ON CONFLICT (idempotency_key) DO NOTHING"
    ))
    .bind(Uuid::now_v7().to_string())
    .bind(job.tenant_id.as_uuid().to_string())
    .bind(&job.kind)
    .bind(&job.idempotency_key)
    .bind(job.payload.to_string())
    .bind(i64::from(job.max_attempts.max(1)))
    .bind(job.run_at.map(format_timestamp))
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(result.rows_affected() == 1)
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

    async fn apply_events(
        &self,
        conn: &mut SqliteConnection,
        projection: &dyn Projection,
        events: &[RecordedEvent],
    ) -> Result<(), StoreError> {
        for event in events {
            let event = upcast(&self.upcasters, event.clone());
            let mut tx = SqliteSqlTx {
                conn: &mut *conn,
                upcasters: &self.upcasters,
            };
            projection
                .apply(&mut tx, &event)
                .await
                .map_err(|e| StoreError::Projection {
                    name: projection.name().to_owned(),
                    message: format!("at position {}: {e}", event.global_position),
                })?;
        }
        Ok(())
    }
}

#[async_trait]
impl BatchAppend for SqliteInner {
    async fn append_batch(
        &self,
        requests: &[AppendRequest],
    ) -> Result<Vec<Result<AppendOutcome, StoreError>>, StoreError> {
        let (_guard, mut tx) = self.begin_write().await?;
        let now: String = sqlx::query_scalar(concat!("SELECT ", now!()))
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
        let now = parse_time("now", &now)?;
        let mut heads = HashMap::new();
        for request in requests {
            let stream_id = &request.stream.stream_id;
            if heads.contains_key(stream_id) {
                continue;
            }
            let row = sqlx::query(
                "SELECT stream_version, hash, tenant_id, stream_type FROM events \
                 WHERE stream_id = $1 ORDER BY stream_version DESC LIMIT 1",
            )
            .bind(stream_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_error)?;
            if let Some(row) = row {
                heads.insert(
                    stream_id.clone(),
                    StreamHead {
                        version: row.try_get::<i64, _>("stream_version").map_err(db_error)? as u64,
                        hash: row.try_get("hash").map_err(db_error)?,
                        tenant_id: parse_uuid(
                            "tenant_id",
                            &row.try_get::<String, _>("tenant_id").map_err(db_error)?,
                        )?,
                        stream_type: row.try_get("stream_type").map_err(db_error)?,
                    },
                );
            }
        }
        let (mut planned, refusals) = plan(requests, &mut heads, now);
        for p in &mut planned {
            let metadata = serde_json::to_string(&requests[p.index].metadata)
                .map_err(|e| StoreError::Invalid(e.to_string()))?;
            for event in &mut p.events {
                let inserted = sqlx::query_scalar::<_, i64>(
                    "INSERT INTO events (event_id, tenant_id, stream_type, stream_id, stream_version, event_type, \
                       schema_version, payload, metadata, recorded_at, prev_hash, hash) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING global_position",
                )
                .bind(event.event_id.to_string())
                .bind(event.tenant_id.as_uuid().to_string())
                .bind(&event.stream_type)
                .bind(&event.stream_id)
                .bind(event.stream_version as i64)
                .bind(&event.event_type)
                .bind(i64::from(event.schema_version))
                .bind(event.payload.to_string())
                .bind(&metadata)
                .bind(format_timestamp(event.recorded_at))
                .bind(&event.prev_hash)
                .bind(&event.hash)
                .fetch_one(&mut *tx)
                .await;
                event.global_position = match inserted {
                    Ok(position) => position,
                    Err(err) if is_unique_violation(&err, "events_stream_version_key") => {
                        return Err(StoreError::VersionConflict {
                            stream_id: event.stream_id.clone(),
                            expected: requests[p.index].expected,
                            actual: p.current,
                        });
                    }
                    Err(err) => return Err(db_error(err)),
                };
            }
        }
        let events: Vec<RecordedEvent> = planned.iter().flat_map(|p| p.events.iter().cloned()).collect();
        for projection in &self.inline {
            self.apply_events(&mut tx, projection.as_ref(), &events).await?;
        }
        for p in &planned {
            for job in &requests[p.index].jobs {
                insert_job(&mut tx, job).await?;
            }
        }
        tx.commit().await.map_err(db_error)?;
        if let Some(last) = events.last() {
            raise(&self.hint, last.global_position);
        }
        Ok(outcomes(planned, refusals))
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn append(&self, request: AppendRequest) -> Result<AppendOutcome, StoreError> {
        group::append_all(&self.group, &self.inner, vec![request])
            .await
            .pop()
            .unwrap_or_else(|| Err(StoreError::Invalid("no append result".into())))
    }

    async fn append_all(&self, requests: Vec<AppendRequest>) -> Vec<Result<AppendOutcome, StoreError>> {
        group::append_all(&self.group, &self.inner, requests).await
    }

    async fn load_stream(&self, stream_id: &str) -> Result<Vec<RecordedEvent>, StoreError> {
        self.load_stream_after(stream_id, 0).await
    }

    async fn load_stream_after(&self, stream_id: &str, after: u64) -> Result<Vec<RecordedEvent>, StoreError> {
        let mut conn = self.inner.pool.acquire().await.map_err(db_error)?;
        let events = stream_events(&mut conn, stream_id, after, u64::MAX).await?;
        Ok(events
            .into_iter()
            .map(|e| upcast(&self.inner.upcasters, e))
            .collect())
    }

    fn aggregate_cache(&self) -> Option<&AggregateCache> {
        Some(&self.inner.aggregates)
    }

    async fn read_all(&self, filter: &ReadFilter) -> Result<Vec<RecordedEvent>, StoreError> {
        let raw = self.read_all_raw(filter).await?;
        Ok(raw
            .into_iter()
            .map(|e| upcast(&self.inner.upcasters, e))
            .collect())
    }

    async fn read_all_raw(&self, filter: &ReadFilter) -> Result<Vec<RecordedEvent>, StoreError> {
        let mut conn = self.inner.pool.acquire().await.map_err(db_error)?;
        Self::read_raw_on(&mut conn, filter).await
    }

    async fn head_position(&self) -> Result<i64, StoreError> {
        sqlx::query_scalar("SELECT COALESCE(max(global_position), 0) FROM events")
            .fetch_one(&self.inner.pool)
            .await
            .map_err(db_error)
    }

    fn position_hint(&self) -> watch::Receiver<i64> {
        self.inner.hint.subscribe()
    }

    async fn register_projection(&self, projection: &dyn Projection) -> Result<(), StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        sqlx::query(concat!(
            "INSERT INTO subscriptions (name, kind, updated_at) VALUES ($1, $2, ",
            now!(),
            ") ON CONFLICT (name) DO UPDATE SET kind = excluded.kind"
        ))
        .bind(projection.name())
        .bind(projection.kind().as_str())
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    async fn run_batch(
        &self,
        projection: &dyn Projection,
        max_events: usize,
    ) -> Result<BatchOutcome, StoreError> {
        // The write lock is the checkpoint lock: one batch at a time, and a batch in another
        // process waits for this one and then reads the moved checkpoint.
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let checkpoint: Option<i64> =
            sqlx::query_scalar("SELECT position FROM subscriptions WHERE name = $1")
                .bind(projection.name())
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_error)?;
        let Some(checkpoint) = checkpoint else {
            return Err(StoreError::Invalid(format!(
                "projection {} is not registered",
                projection.name()
            )));
        };
        let filter = ReadFilter {
            after: checkpoint,
            limit: max_events,
            ..ReadFilter::default()
        };
        let events = Self::read_raw_on(&mut tx, &filter).await?;
        let Some(last) = events.last().map(|e| e.global_position) else {
            return Ok(BatchOutcome::CaughtUp);
        };
        self.inner.apply_events(&mut tx, projection, &events).await?;
        sqlx::query(concat!(
            "UPDATE subscriptions SET position = $2, last_error = NULL, updated_at = ",
            now!(),
            " WHERE name = $1"
        ))
        .bind(projection.name())
        .bind(last)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(BatchOutcome::Applied {
            count: events.len(),
            position: last,
        })
    }

    async fn record_projection_error(&self, name: &str, error: &str) -> Result<(), StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        sqlx::query(concat!(
            "UPDATE subscriptions SET last_error = $2, updated_at = ",
            now!(),
            " WHERE name = $1"
        ))
        .bind(name)
        .bind(error)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    async fn reset_projection(&self, projection: &dyn Projection) -> Result<(), StoreError> {
        if projection.kind() == ProjectionKind::SideEffect {
            return Err(StoreError::Invalid(format!(
                "{} has side effects and is never rebuilt",
                projection.name()
            )));
        }
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let updated = sqlx::query(concat!(
            "UPDATE subscriptions SET position = 0, last_error = NULL, updated_at = ",
            now!(),
            " WHERE name = $1"
        ))
        .bind(projection.name())
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::Invalid(format!(
                "projection {} is not registered",
                projection.name()
            )));
        }
        Self::delete_tables(&mut tx, projection).await?;
        tx.commit().await.map_err(db_error)
    }

    async fn rebuild_inline(
        &self,
        projection: &dyn Projection,
        progress: &(dyn Fn(i64, i64) + Send + Sync),
    ) -> Result<u64, StoreError> {
        if projection.kind() != ProjectionKind::Inline {
            return Err(StoreError::Invalid(format!(
                "{} is not an inline projection",
                projection.name()
            )));
        }
        let (_guard, mut tx) = self.inner.begin_write().await?;
        Self::delete_tables(&mut tx, projection).await?;
        let head: i64 = sqlx::query_scalar("SELECT COALESCE(max(global_position), 0) FROM events")
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
        let mut position = 0;
        let mut applied = 0u64;
        loop {
            let filter = ReadFilter {
                after: position,
                limit: 1000,
                ..ReadFilter::default()
            };
            let events = Self::read_raw_on(&mut tx, &filter).await?;
            let Some(last) = events.last().map(|e| e.global_position) else {
                break;
            };
            applied += events.len() as u64;
            self.inner.apply_events(&mut tx, projection, &events).await?;
            position = last;
            progress(position, head);
        }
        sqlx::query(concat!(
            "INSERT INTO subscriptions (name, kind, position, updated_at) VALUES ($1, 'inline', $2, ",
            now!(),
            ") ON CONFLICT (name) DO UPDATE SET position = excluded.position, last_error = NULL, \
               updated_at = excluded.updated_at"
        ))
        .bind(projection.name())
        .bind(head)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(applied)
    }

    async fn subscription_statuses(&self) -> Result<Vec<SubscriptionStatus>, StoreError> {
        let head = self.head_position().await?;
        let rows = sqlx::query(
            "SELECT name, kind, position, last_error, updated_at FROM subscriptions ORDER BY name",
        )
        .fetch_all(&self.inner.pool)
        .await
        .map_err(db_error)?;
        rows.iter()
            .map(|row| {
                let kind: String = row.try_get("kind").map_err(db_error)?;
                let position = if kind == "inline" {
                    head
                } else {
                    row.try_get("position").map_err(db_error)?
                };
                let updated_at: String = row.try_get("updated_at").map_err(db_error)?;
                Ok(SubscriptionStatus {
                    name: row.try_get("name").map_err(db_error)?,
                    kind,
                    position,
                    lag: head - position,
                    last_error: row.try_get("last_error").map_err(db_error)?,
                    updated_at: Some(parse_time("updated_at", &updated_at)?),
                })
            })
            .collect()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.inner.pool)
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn query(&self, sql: &'static str, params: &[SqlValue]) -> Result<Vec<Vec<SqlValue>>, StoreError> {
        let rows = bind_sqlite(sqlx::query(sql), params)
            .fetch_all(&self.inner.pool)
            .await
            .map_err(db_error)?;
        rows.iter().map(decode_sqlite_row).collect()
    }

    async fn execute(&self, sql: &'static str, params: &[SqlValue]) -> Result<u64, StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let affected = bind_sqlite(sqlx::query(sql), params)
            .execute(&mut *tx)
            .await
            .map(|r| r.rows_affected())
            .map_err(write_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(affected)
    }
}

#[async_trait]
impl JobQueue for SqliteStore {
    async fn enqueue(&self, job: &NewJob) -> Result<bool, StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let inserted = insert_job(&mut tx, job).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(inserted)
    }

    async fn claim(
        &self,
        worker: &str,
        kinds: &[String],
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, StoreError> {
        let kinds = serde_json::to_string(kinds).map_err(|e| StoreError::Invalid(e.to_string()))?;
        let (_guard, mut tx) = self.inner.begin_write().await?;
        sqlx::query(concat!(
            "UPDATE jobs SET state = 'dead', lease_owner = NULL, lease_expires_at = NULL, updated_at = ",
            now!(),
            ", last_error = COALESCE(last_error || '; ', '') || 'lease expired during the last attempt' \
             WHERE state = 'running' AND lease_expires_at < ",
            now!(),
            " AND attempts >= max_attempts"
        ))
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        let rows = sqlx::query(concat!(
            "UPDATE jobs SET state = 'running', lease_owner = $1, attempts = attempts + 1, lease_expires_at = ",
            now_plus!("$2"),
            ", updated_at = ",
            now!(),
            // Two searches of `jobs_due_by_kind_idx` (state, kind, due time); one OR of both
            // made SQLite scan the table.
            " WHERE id IN ( \
               SELECT id FROM ( \
                 SELECT id, next_attempt_at FROM jobs \
                 WHERE state = 'pending' AND kind IN (SELECT value FROM json_each($3)) \
                   AND next_attempt_at <= ",
            now!(),
            " AND attempts < max_attempts \
                 UNION ALL \
                 SELECT id, next_attempt_at FROM jobs \
                 WHERE state = 'running' AND kind IN (SELECT value FROM json_each($3)) \
                   AND lease_expires_at < ",
            now!(),
            " AND attempts < max_attempts) \
               ORDER BY next_attempt_at LIMIT $4) \
             RETURNING ",
            job_columns!()
        ))
        .bind(worker)
        .bind(seconds(lease))
        .bind(kinds)
        .bind(limit.max(1) as i64)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error)?;
        let jobs = rows.iter().map(job_from_row).collect::<Result<Vec<_>, _>>()?;
        tx.commit().await.map_err(db_error)?;
        Ok(jobs)
    }

    async fn complete(&self, job_id: Uuid, worker: &str) -> Result<bool, StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let result = sqlx::query(concat!(
            "UPDATE jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL, updated_at = ",
            now!(),
            " WHERE id = $1 AND lease_owner = $2 AND state = 'running'"
        ))
        .bind(job_id.to_string())
        .bind(worker)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(result.rows_affected() == 1)
    }

    async fn fail(
        &self,
        job_id: Uuid,
        worker: &str,
        error: &str,
        retry_in: Option<Duration>,
    ) -> Result<Option<JobState>, StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let state: Option<String> = sqlx::query_scalar(concat!(
            "UPDATE jobs SET \
               state = CASE WHEN $3 IS NULL OR attempts >= max_attempts THEN 'dead' ELSE 'pending' END, \
               next_attempt_at = CASE WHEN $3 IS NULL THEN next_attempt_at ELSE ",
            now_plus!("$3"),
            " END, last_error = $4, lease_owner = NULL, lease_expires_at = NULL, updated_at = ",
            now!(),
            " WHERE id = $1 AND lease_owner = $2 AND state = 'running' RETURNING state"
        ))
        .bind(job_id.to_string())
        .bind(worker)
        .bind(retry_in.map(seconds))
        .bind(error)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(state.as_deref().and_then(JobState::parse))
    }

    async fn extend_lease(&self, job_id: Uuid, worker: &str, lease: Duration) -> Result<bool, StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let result = sqlx::query(concat!(
            "UPDATE jobs SET lease_expires_at = ",
            now_plus!("$3"),
            ", updated_at = ",
            now!(),
            " WHERE id = $1 AND lease_owner = $2 AND state = 'running'"
        ))
        .bind(job_id.to_string())
        .bind(worker)
        .bind(seconds(lease))
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(result.rows_affected() == 1)
    }

    async fn release(&self, worker: &str) -> Result<u64, StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let result = sqlx::query(concat!(
            "UPDATE jobs SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL, \
               attempts = max(attempts - 1, 0), last_error = COALESCE(last_error || '; ', '') || $2, \
               next_attempt_at = ",
            now!(),
            ", updated_at = ",
            now!(),
            " WHERE lease_owner = $1 AND state = 'running'"
        ))
        .bind(worker)
        .bind(RELEASED)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(result.rows_affected())
    }

    async fn get(&self, job_id: Uuid) -> Result<Option<Job>, StoreError> {
        let row = sqlx::query(concat!("SELECT ", job_columns!(), " FROM jobs WHERE id = $1"))
            .bind(job_id.to_string())
            .fetch_optional(&self.inner.pool)
            .await
            .map_err(db_error)?;
        row.as_ref().map(job_from_row).transpose()
    }

    async fn get_by_key(&self, key: &str) -> Result<Option<Job>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            job_columns!(),
            " FROM jobs WHERE idempotency_key = $1"
        ))
        .bind(key)
        .fetch_optional(&self.inner.pool)
        .await
        .map_err(db_error)?;
        row.as_ref().map(job_from_row).transpose()
    }

    async fn list(&self, filter: &JobFilter) -> Result<Vec<Job>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            job_columns!(),
            " FROM jobs WHERE ($1 IS NULL OR state = $1) AND ($2 = 0 OR last_error IS NOT NULL) \
              AND ($3 IS NULL OR kind = $3) \
              AND ($4 IS NULL OR payload LIKE $4 OR idempotency_key LIKE $4) \
              ORDER BY updated_at DESC, id DESC LIMIT $5"
        ))
        .bind(filter.status.map(|s| s.state().as_str()))
        .bind(i64::from(filter.status == Some(JobListStatus::Failed)))
        .bind(filter.kind.clone())
        .bind(filter.document_pattern())
        .bind(filter.limit.clamp(1, 100_000) as i64)
        .fetch_all(&self.inner.pool)
        .await
        .map_err(db_error)?;
        rows.iter().map(job_from_row).collect()
    }

    async fn retry(&self, job_id: Uuid) -> Result<Option<Job>, StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let result = sqlx::query(concat!(
            "UPDATE jobs SET state = 'pending', max_attempts = max(max_attempts, attempts + 1), \
               next_attempt_at = ",
            now!(),
            ", updated_at = ",
            now!(),
            " WHERE id = $1 AND state IN ('pending', 'dead')"
        ))
        .bind(job_id.to_string())
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        if result.rows_affected() == 0 {
            return Ok(None);
        }
        self.get(job_id).await
    }

    async fn discard(&self, job_id: Uuid, note: &str) -> Result<Option<Job>, StoreError> {
        let (_guard, mut tx) = self.inner.begin_write().await?;
        let result = sqlx::query(concat!(
            "UPDATE jobs SET state = 'dead', last_error = $2, updated_at = ",
            now!(),
            " WHERE id = $1 AND state = 'pending'"
        ))
        .bind(job_id.to_string())
        .bind(note)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        if result.rows_affected() == 0 {
            return Ok(None);
        }
        self.get(job_id).await
    }

    async fn counts(&self) -> Result<Vec<JobCount>, StoreError> {
        let rows = sqlx::query(
            "SELECT kind, state, count(*) AS n FROM jobs GROUP BY kind, state ORDER BY kind, state",
        )
        .fetch_all(&self.inner.pool)
        .await
        .map_err(db_error)?;
        rows.iter()
            .map(|row| {
                let state: String = row.try_get("state").map_err(db_error)?;
                Ok(JobCount {
                    kind: row.try_get("kind").map_err(db_error)?,
                    state: JobState::parse(&state)
                        .ok_or_else(|| StoreError::Corrupt(format!("job state {state}")))?,
                    count: row.try_get("n").map_err(db_error)?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_file_is_read_from_the_url() {
        assert_eq!(
            database_file("sqlite://./data/kuatia.db"),
            Some("./data/kuatia.db".into())
        );
        assert_eq!(
            database_file("sqlite:/tmp/x.db?mode=rwc"),
            Some("/tmp/x.db".into())
        );
        assert_eq!(database_file("sqlite::memory:"), None);
    }
}
