//! The registry tables (`migrations/*/0013_lookup.sql`): which slot is active, reading a whole
//! generation, and the writes of an import (lease, load into the inactive slot, switch).
//!
//! Reads that must see one generation run in one transaction (REPEATABLE READ on PostgreSQL,
//! a WAL snapshot on SQLite). Bulk loading uses each backend's fast path: `COPY` on PostgreSQL,
//! `INSERT … SELECT FROM json_each(?)` batches on SQLite.

use chrono::{DateTime, Utc};
use kuatia_application::event_store::{Store, StoreError};
use kuatia_application::hash::format_timestamp;
use kuatia_application::projection::SqlValue;
use kuatia_domain::lookup::line::RegistryRow;
use sqlx::Row;

use crate::store::Database;

use super::index::{Index, IndexBuilder};

fn db_error(err: sqlx::Error) -> StoreError {
    StoreError::Database(Box::new(err))
}

/// Why a whole-generation read or the switch did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The generation changed while it was read (a later import emptied the slot): read again.
    #[error("{0}")]
    Changed(String),
    /// The import's lease expired and another import took it.
    #[error("the import lease expired and was taken by another import")]
    LeaseLost,
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What `lookup_registry` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryStatus {
    /// Registry generation (0: nothing imported yet).
    pub generation: i64,
    /// The slot readers use (0 or 1).
    pub active_slot: u8,
    /// Publication date of the active generation.
    pub published: Option<String>,
    /// When it was imported.
    pub imported_at: Option<DateTime<Utc>>,
    /// Its number of taxpayers.
    pub row_count: i64,
    /// Until when an import holds the lease, if one runs.
    pub import_lease: Option<DateTime<Utc>>,
}

fn status_from(row: &[SqlValue]) -> Result<RegistryStatus, StoreError> {
    let int = |i: usize| row.get(i).and_then(SqlValue::as_i64);
    Ok(RegistryStatus {
        generation: int(0).ok_or_else(|| StoreError::Corrupt("lookup_registry.generation".into()))?,
        active_slot: u8::from(int(1) == Some(1)),
        published: row.get(2).and_then(SqlValue::as_text),
        imported_at: row.get(3).and_then(SqlValue::as_timestamp),
        row_count: int(4).unwrap_or(0),
        import_lease: row.get(5).and_then(SqlValue::as_timestamp),
    })
}

/// The registry's state.
pub async fn status(store: &dyn Store) -> Result<RegistryStatus, StoreError> {
    let rows = store
        .query(
            "SELECT generation, active_slot, published, imported_at, row_count, import_lease \
             FROM lookup_registry WHERE id = 1",
            &[],
        )
        .await?;
    status_from(
        rows.first()
            .ok_or_else(|| StoreError::Corrupt("lookup_registry is empty".into()))?,
    )
}

/// The active generation number (the cheap check of the refresher).
pub async fn generation(store: &dyn Store) -> Result<i64, StoreError> {
    let rows = store
        .query("SELECT generation FROM lookup_registry WHERE id = 1", &[])
        .await?;
    Ok(rows.first().and_then(|r| r[0].as_i64()).unwrap_or(0))
}

/// Rows read per page while loading a generation.
const PAGE: i64 = 20_000;

macro_rules! page_sql {
    ($slot:literal) => {
        concat!(
            "SELECT ruc, name, dv, state FROM lookup_taxpayers_",
            $slot,
            " WHERE ruc > $1 ORDER BY ruc LIMIT $2"
        )
    };
}

/// One page of `(ruc, name, dv, state)`.
type Rows = Vec<(String, String, i64, String)>;

/// Reads the active generation whole, in one snapshot, into an index. The rows are handed to
/// the builder page by page on a blocking thread, and the index is built there.
pub async fn load_index(database: &Database) -> Result<Index, RegistryError> {
    let mut builder = IndexBuilder::new();
    let status;
    match database {
        Database::Postgres(s) => {
            let mut tx = s.pool().begin().await.map_err(db_error)?;
            sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
            status = pg_status(&mut tx).await?;
            let mut after = String::new();
            loop {
                let sql = if status.active_slot == 0 {
                    page_sql!("0")
                } else {
                    page_sql!("1")
                };
                let rows: Rows = sqlx::query(sql)
                    .bind(&after)
                    .bind(PAGE)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(db_error)?
                    .iter()
                    .map(|r| {
                        Ok((
                            r.try_get::<String, _>(0)?,
                            r.try_get::<String, _>(1)?,
                            i64::from(r.try_get::<i16, _>(2)?),
                            r.try_get::<String, _>(3)?,
                        ))
                    })
                    .collect::<Result<_, sqlx::Error>>()
                    .map_err(db_error)?;
                let Some(last) = rows.last() else { break };
                after = last.0.clone();
                builder = push_page(builder, rows).await?;
            }
            tx.commit().await.map_err(db_error)?;
        }
        Database::Sqlite(s) => {
            let mut tx = s.pool().begin().await.map_err(db_error)?;
            status = sqlite_status(&mut tx).await?;
            let mut after = String::new();
            loop {
                let sql = if status.active_slot == 0 {
                    page_sql!("0")
                } else {
                    page_sql!("1")
                };
                let rows: Rows = sqlx::query(sql)
                    .bind(&after)
                    .bind(PAGE)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(db_error)?
                    .iter()
                    .map(|r| {
                        Ok((
                            r.try_get::<String, _>(0)?,
                            r.try_get::<String, _>(1)?,
                            r.try_get::<i64, _>(2)?,
                            r.try_get::<String, _>(3)?,
                        ))
                    })
                    .collect::<Result<_, sqlx::Error>>()
                    .map_err(db_error)?;
                let Some(last) = rows.last() else { break };
                after = last.0.clone();
                builder = push_page(builder, rows).await?;
            }
            tx.commit().await.map_err(db_error)?;
        }
    }
    // TRUNCATE is not MVCC-safe: a snapshot taken before a later import emptied this slot would
    // read it empty. The row count of the same snapshot catches that (the caller retries).
    if builder.len() as i64 != status.row_count {
        return Err(RegistryError::Changed(format!(
            "registry generation {} has {} rows but {} were read; it changed while loading",
            status.generation,
            status.row_count,
            builder.len()
        )));
    }
    let (generation, published) = (status.generation, status.published);
    tokio::task::spawn_blocking(move || builder.finish(generation, published))
        .await
        .map_err(|e| StoreError::Database(format!("building the search index: {e}").into()).into())
}

async fn push_page(mut builder: IndexBuilder, rows: Rows) -> Result<IndexBuilder, StoreError> {
    tokio::task::spawn_blocking(move || {
        for (ruc, name, dv, state) in &rows {
            builder.push(ruc, u8::try_from(*dv).unwrap_or(0), name, state);
        }
        builder
    })
    .await
    .map_err(|e| StoreError::Database(format!("loading the search index: {e}").into()))
}

const STATUS_SQL: &str = "SELECT generation, active_slot, published, imported_at, row_count, import_lease \
                          FROM lookup_registry WHERE id = 1";

async fn pg_status(conn: &mut sqlx::PgConnection) -> Result<RegistryStatus, StoreError> {
    let row = sqlx::query(STATUS_SQL)
        .fetch_one(&mut *conn)
        .await
        .map_err(db_error)?;
    Ok(RegistryStatus {
        generation: row.try_get(0).map_err(db_error)?,
        active_slot: u8::from(row.try_get::<i16, _>(1).map_err(db_error)? == 1),
        published: row.try_get(2).map_err(db_error)?,
        imported_at: row.try_get(3).map_err(db_error)?,
        row_count: row.try_get(4).map_err(db_error)?,
        import_lease: row.try_get(5).map_err(db_error)?,
    })
}

async fn sqlite_status(conn: &mut sqlx::SqliteConnection) -> Result<RegistryStatus, StoreError> {
    let row = sqlx::query(STATUS_SQL)
        .fetch_one(&mut *conn)
        .await
        .map_err(db_error)?;
    let time = |i: usize| -> Result<Option<DateTime<Utc>>, StoreError> {
        let text: Option<String> = row.try_get(i).map_err(db_error)?;
        Ok(text.and_then(|t| SqlValue::Text(t).as_timestamp()))
    };
    Ok(RegistryStatus {
        generation: row.try_get(0).map_err(db_error)?,
        active_slot: u8::from(row.try_get::<i64, _>(1).map_err(db_error)? == 1),
        published: row.try_get(2).map_err(db_error)?,
        imported_at: time(3)?,
        row_count: row.try_get(4).map_err(db_error)?,
        import_lease: time(5)?,
    })
}

/// Takes the import lease until `until`, unless another import holds an unexpired one. Returns
/// the registry's state, or `None` when another import runs.
pub async fn claim_lease(
    store: &dyn Store,
    now: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<Option<RegistryStatus>, StoreError> {
    let claimed = store
        .execute(
            "UPDATE lookup_registry SET import_lease = $1 \
             WHERE id = 1 AND (import_lease IS NULL OR import_lease < $2)",
            &[SqlValue::Timestamp(until), SqlValue::Timestamp(now)],
        )
        .await?;
    if claimed == 0 {
        return Ok(None);
    }
    status(store).await.map(Some)
}

/// Gives the lease up (after a failed import).
pub async fn release_lease(store: &dyn Store, until: DateTime<Utc>) -> Result<(), StoreError> {
    store
        .execute(
            "UPDATE lookup_registry SET import_lease = NULL WHERE id = 1 AND import_lease = $1",
            &[SqlValue::Timestamp(until)],
        )
        .await?;
    Ok(())
}

/// Empties an (inactive) slot.
pub async fn clear_slot(database: &Database, slot: u8) -> Result<(), StoreError> {
    match database {
        Database::Postgres(s) => {
            let sql = if slot == 0 {
                "TRUNCATE lookup_taxpayers_0"
            } else {
                "TRUNCATE lookup_taxpayers_1"
            };
            sqlx::query(sql).execute(s.pool()).await.map_err(db_error)?;
        }
        Database::Sqlite(s) => {
            let sql = if slot == 0 {
                "DELETE FROM lookup_taxpayers_0"
            } else {
                "DELETE FROM lookup_taxpayers_1"
            };
            let mut tx = s.pool().begin_with("BEGIN IMMEDIATE").await.map_err(db_error)?;
            sqlx::query(sql).execute(&mut *tx).await.map_err(db_error)?;
            tx.commit().await.map_err(db_error)?;
        }
    }
    Ok(())
}

/// Appends `text` to a COPY text-format field (backslash, tab and line breaks escaped).
fn copy_field(out: &mut Vec<u8>, text: &str) {
    for b in text.bytes() {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            _ => out.push(b),
        }
    }
}

/// Writes rows into an inactive slot.
pub enum SlotWriter {
    /// One `COPY … FROM STDIN` for the whole import.
    Postgres(sqlx::postgres::PgCopyIn<sqlx::pool::PoolConnection<sqlx::Postgres>>),
    /// Batches of `INSERT … SELECT FROM json_each`, one transaction each.
    Sqlite(sqlx::SqlitePool, u8),
}

impl SlotWriter {
    /// Starts writing into `slot`.
    pub async fn open(database: &Database, slot: u8) -> Result<Self, StoreError> {
        match database {
            Database::Postgres(s) => {
                use sqlx::postgres::PgPoolCopyExt;
                let sql = if slot == 0 {
                    "COPY lookup_taxpayers_0 (ruc, name, dv, old_ruc, state) FROM STDIN"
                } else {
                    "COPY lookup_taxpayers_1 (ruc, name, dv, old_ruc, state) FROM STDIN"
                };
                Ok(Self::Postgres(s.pool().copy_in_raw(sql).await.map_err(db_error)?))
            }
            Database::Sqlite(s) => Ok(Self::Sqlite(s.pool().clone(), slot)),
        }
    }

    /// Writes a batch.
    pub async fn write(&mut self, rows: &[RegistryRow]) -> Result<(), StoreError> {
        match self {
            Self::Postgres(copy) => {
                let mut out = Vec::with_capacity(rows.len() * 64);
                for row in rows {
                    copy_field(&mut out, &row.ruc);
                    out.push(b'\t');
                    copy_field(&mut out, &row.name);
                    out.push(b'\t');
                    out.push(b'0' + row.dv);
                    out.push(b'\t');
                    copy_field(&mut out, &row.old_ruc);
                    out.push(b'\t');
                    copy_field(&mut out, &row.state);
                    out.push(b'\n');
                }
                copy.send(out).await.map_err(db_error)?;
            }
            Self::Sqlite(pool, slot) => {
                let json: Vec<(&str, &str, u8, &str, &str)> = rows
                    .iter()
                    .map(|r| {
                        (
                            r.ruc.as_str(),
                            r.name.as_str(),
                            r.dv,
                            r.old_ruc.as_str(),
                            r.state.as_str(),
                        )
                    })
                    .collect();
                let json = serde_json::to_string(&json)
                    .map_err(|e| StoreError::Invalid(format!("encoding a batch: {e}")))?;
                let sql = if *slot == 0 {
                    "INSERT INTO lookup_taxpayers_0 (ruc, name, dv, old_ruc, state) \
                     SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4 FROM json_each($1)"
                } else {
                    "INSERT INTO lookup_taxpayers_1 (ruc, name, dv, old_ruc, state) \
                     SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4 FROM json_each($1)"
                };
                let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.map_err(db_error)?;
                sqlx::query(sql)
                    .bind(json)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                tx.commit().await.map_err(db_error)?;
            }
        }
        Ok(())
    }

    /// Ends the load.
    pub async fn finish(self) -> Result<(), StoreError> {
        if let Self::Postgres(copy) = self {
            copy.finish().await.map_err(db_error)?;
        }
        Ok(())
    }
}

/// What the switch records.
#[derive(Debug, Clone)]
pub struct Switch {
    /// The slot that was loaded.
    pub slot: u8,
    /// The lease the import holds (the switch fails if it lost it).
    pub lease: DateTime<Utc>,
    /// Publication date.
    pub published: String,
    /// Rows loaded.
    pub rows: i64,
    /// Lines rejected (broken or duplicate).
    pub rejected: i64,
    /// When the import started.
    pub started_at: DateTime<Utc>,
    /// The import report.
    pub report: serde_json::Value,
}

/// Makes the loaded slot active and records the import, in one transaction; returns the new
/// generation.
pub async fn switch(database: &Database, switch: &Switch) -> Result<i64, RegistryError> {
    let now = Utc::now();
    let id = uuid::Uuid::now_v7();
    const UPDATE: &str = "UPDATE lookup_registry SET generation = generation + 1, active_slot = $1, \
                          published = $2, imported_at = $3, row_count = $4, import_lease = NULL \
                          WHERE id = 1 AND import_lease = $5 RETURNING generation";
    const RECORD: &str = "INSERT INTO lookup_imports (id, kind, generation, published, started_at, \
                          finished_at, rows_loaded, rows_rejected, report) \
                          VALUES ($1, 'registry', $2, $3, $4, $5, $6, $7, $8)";
    let lost = || RegistryError::LeaseLost;
    match database {
        Database::Postgres(s) => {
            let mut tx = s.pool().begin().await.map_err(db_error)?;
            let generation: i64 = sqlx::query_scalar(UPDATE)
                .bind(i16::from(switch.slot))
                .bind(&switch.published)
                .bind(now)
                .bind(switch.rows)
                .bind(switch.lease)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_error)?
                .ok_or_else(lost)?;
            sqlx::query(RECORD)
                .bind(id)
                .bind(generation)
                .bind(&switch.published)
                .bind(switch.started_at)
                .bind(now)
                .bind(switch.rows)
                .bind(switch.rejected)
                .bind(sqlx::types::Json(&switch.report))
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
            tx.commit().await.map_err(db_error)?;
            Ok(generation)
        }
        Database::Sqlite(s) => {
            let mut tx = s.pool().begin_with("BEGIN IMMEDIATE").await.map_err(db_error)?;
            let generation: i64 = sqlx::query_scalar(UPDATE)
                .bind(i64::from(switch.slot))
                .bind(&switch.published)
                .bind(format_timestamp(now))
                .bind(switch.rows)
                .bind(format_timestamp(switch.lease))
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_error)?
                .ok_or_else(lost)?;
            sqlx::query(RECORD)
                .bind(id.to_string())
                .bind(generation)
                .bind(&switch.published)
                .bind(format_timestamp(switch.started_at))
                .bind(format_timestamp(now))
                .bind(switch.rows)
                .bind(switch.rejected)
                .bind(switch.report.to_string())
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
            tx.commit().await.map_err(db_error)?;
            Ok(generation)
        }
    }
}

/// The registered name of a RUC number in the active slot; `None` when no registry is loaded or
/// it does not know the number.
pub async fn name_of(store: &dyn Store, ruc: &str) -> Result<Option<String>, StoreError> {
    let rows = store
        .query(
            "SELECT t.name FROM lookup_registry r \
               JOIN lookup_taxpayers_0 t ON r.active_slot = 0 AND t.ruc = $1 WHERE r.id = 1 \
             UNION ALL \
             SELECT t.name FROM lookup_registry r \
               JOIN lookup_taxpayers_1 t ON r.active_slot = 1 AND t.ruc = $1 WHERE r.id = 1",
            &[SqlValue::Text(ruc.to_owned())],
        )
        .await?;
    Ok(rows.iter().find_map(|r| r[0].as_text()))
}

/// The registry's answer about one RUC number, in one statement (so one snapshot), from the
/// active slot: `Some(state)` when listed, `None` when not, and an error when nothing was ever
/// imported (see [`super::registry_answer`]).
pub async fn state_of(store: &dyn Store, ruc: &str) -> Result<Option<Option<String>>, StoreError> {
    let rows = store
        .query(
            "SELECT r.generation, t.state FROM lookup_registry r \
               LEFT JOIN lookup_taxpayers_0 t ON r.active_slot = 0 AND t.ruc = $1 WHERE r.id = 1 \
             UNION ALL \
             SELECT r.generation, t.state FROM lookup_registry r \
               JOIN lookup_taxpayers_1 t ON r.active_slot = 1 AND t.ruc = $1 WHERE r.id = 1",
            &[SqlValue::Text(ruc.to_owned())],
        )
        .await?;
    let generation = rows.first().and_then(|r| r[0].as_i64()).unwrap_or(0);
    if generation == 0 {
        return Ok(None);
    }
    Ok(Some(rows.iter().find_map(|r| r[1].as_text())))
}
