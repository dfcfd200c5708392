//! Binding and reading [`SqlValue`]s on each backend, and the [`SqlTx`] implementations that
//! projections write through.

use async_trait::async_trait;
use kuatia_application::event_store::{RecordedEvent, StoreError};
use kuatia_application::hash::format_timestamp;
use kuatia_application::jobs::NewJob;
use kuatia_application::projection::{Backend, SqlTx, SqlType, SqlValue};
use kuatia_application::upcast::UpcasterChain;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::Query;
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Column, PgConnection, Postgres, Row, Sqlite, SqliteConnection, TypeInfo, ValueRef};

use super::common::upcast;
use super::db_error;

pub(crate) fn bind_pg<'q>(
    mut query: Query<'q, Postgres, PgArguments>,
    params: &[SqlValue],
) -> Query<'q, Postgres, PgArguments> {
    for param in params {
        query = match param {
            SqlValue::Null | SqlValue::TypedNull(SqlType::Text) => query.bind(None::<String>),
            SqlValue::TypedNull(SqlType::Int) => query.bind(None::<i64>),
            SqlValue::TypedNull(SqlType::Bool) => query.bind(None::<bool>),
            SqlValue::TypedNull(SqlType::Json) => query.bind(None::<sqlx::types::Json<serde_json::Value>>),
            SqlValue::TypedNull(SqlType::Uuid) => query.bind(None::<uuid::Uuid>),
            SqlValue::TypedNull(SqlType::Timestamp) => query.bind(None::<chrono::DateTime<chrono::Utc>>),
            SqlValue::Int(v) => query.bind(*v),
            SqlValue::Text(v) => query.bind(v.clone()),
            SqlValue::Bool(v) => query.bind(*v),
            SqlValue::Json(v) => query.bind(sqlx::types::Json(v.clone())),
            SqlValue::Uuid(v) => query.bind(*v),
            SqlValue::Timestamp(v) => query.bind(*v),
            SqlValue::Date(v) => query.bind(*v),
        };
    }
    query
}

pub(crate) fn bind_sqlite<'q>(
    mut query: Query<'q, Sqlite, SqliteArguments>,
    params: &[SqlValue],
) -> Query<'q, Sqlite, SqliteArguments> {
    for param in params {
        query = match param {
            SqlValue::Null | SqlValue::TypedNull(_) => query.bind(None::<String>),
            SqlValue::Int(v) => query.bind(*v),
            SqlValue::Text(v) => query.bind(v.clone()),
            SqlValue::Bool(v) => query.bind(i64::from(*v)),
            SqlValue::Json(v) => query.bind(v.to_string()),
            SqlValue::Uuid(v) => query.bind(v.to_string()),
            SqlValue::Timestamp(v) => query.bind(format_timestamp(*v)),
            SqlValue::Date(v) => query.bind(v.format("%Y-%m-%d").to_string()),
        };
    }
    query
}

fn decode_error(column: &str, err: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("column {column}: {err}"))
}

pub(crate) fn decode_pg_row(row: &PgRow) -> Result<Vec<SqlValue>, StoreError> {
    let mut values = Vec::with_capacity(row.columns().len());
    for (i, column) in row.columns().iter().enumerate() {
        let raw = row.try_get_raw(i).map_err(db_error)?;
        if raw.is_null() {
            values.push(SqlValue::Null);
            continue;
        }
        let err = |e: sqlx::Error| decode_error(column.name(), e);
        let value = match column.type_info().name() {
            "INT2" => SqlValue::Int(i64::from(row.try_get::<i16, _>(i).map_err(err)?)),
            "INT4" => SqlValue::Int(i64::from(row.try_get::<i32, _>(i).map_err(err)?)),
            "INT8" => SqlValue::Int(row.try_get::<i64, _>(i).map_err(err)?),
            "BOOL" => SqlValue::Bool(row.try_get::<bool, _>(i).map_err(err)?),
            "TEXT" | "VARCHAR" | "BPCHAR" | "NAME" => {
                SqlValue::Text(row.try_get::<String, _>(i).map_err(err)?)
            }
            "UUID" => SqlValue::Uuid(row.try_get::<uuid::Uuid, _>(i).map_err(err)?),
            "JSON" | "JSONB" => SqlValue::Json(row.try_get::<serde_json::Value, _>(i).map_err(err)?),
            "TIMESTAMPTZ" => {
                SqlValue::Timestamp(row.try_get::<chrono::DateTime<chrono::Utc>, _>(i).map_err(err)?)
            }
            "DATE" => SqlValue::Date(row.try_get::<chrono::NaiveDate, _>(i).map_err(err)?),
            other => return Err(decode_error(column.name(), format!("unsupported type {other}"))),
        };
        values.push(value);
    }
    Ok(values)
}

pub(crate) fn decode_sqlite_row(row: &SqliteRow) -> Result<Vec<SqlValue>, StoreError> {
    let mut values = Vec::with_capacity(row.columns().len());
    for (i, column) in row.columns().iter().enumerate() {
        let raw = row.try_get_raw(i).map_err(db_error)?;
        if raw.is_null() {
            values.push(SqlValue::Null);
            continue;
        }
        let storage = raw.type_info().name().to_owned();
        let err = |e: sqlx::Error| decode_error(column.name(), e);
        let value = match storage.as_str() {
            "INTEGER" | "INT8" | "BIGINT" | "BOOLEAN" => {
                SqlValue::Int(row.try_get_unchecked::<i64, _>(i).map_err(err)?)
            }
            "TEXT" => SqlValue::Text(row.try_get_unchecked::<String, _>(i).map_err(err)?),
            other => {
                return Err(decode_error(
                    column.name(),
                    format!("unsupported storage class {other}"),
                ));
            }
        };
        values.push(value);
    }
    Ok(values)
}

/// A PostgreSQL transaction as projections see it.
pub(crate) struct PgSqlTx<'a> {
    pub conn: &'a mut PgConnection,
    pub upcasters: &'a UpcasterChain,
}

#[async_trait]
impl SqlTx for PgSqlTx<'_> {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    async fn execute(&mut self, sql: &'static str, params: &[SqlValue]) -> Result<u64, StoreError> {
        let result = bind_pg(sqlx::query(sql), params)
            .execute(&mut *self.conn)
            .await
            .map_err(db_error)?;
        Ok(result.rows_affected())
    }

    async fn query(
        &mut self,
        sql: &'static str,
        params: &[SqlValue],
    ) -> Result<Vec<Vec<SqlValue>>, StoreError> {
        let rows = bind_pg(sqlx::query(sql), params)
            .fetch_all(&mut *self.conn)
            .await
            .map_err(db_error)?;
        rows.iter().map(decode_pg_row).collect()
    }

    async fn enqueue_job(&mut self, job: &NewJob) -> Result<bool, StoreError> {
        super::postgres::insert_job(&mut *self.conn, job).await
    }

    async fn load_stream_upto(
        &mut self,
        stream_id: &str,
        upto: u64,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        let events = super::postgres::stream_events(&mut *self.conn, stream_id, 0, upto).await?;
        Ok(events.into_iter().map(|e| upcast(self.upcasters, e)).collect())
    }
}

/// A SQLite transaction as projections see it.
pub(crate) struct SqliteSqlTx<'a> {
    pub conn: &'a mut SqliteConnection,
    pub upcasters: &'a UpcasterChain,
}

#[async_trait]
impl SqlTx for SqliteSqlTx<'_> {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    async fn execute(&mut self, sql: &'static str, params: &[SqlValue]) -> Result<u64, StoreError> {
        let result = bind_sqlite(sqlx::query(sql), params)
            .execute(&mut *self.conn)
            .await
            .map_err(db_error)?;
        Ok(result.rows_affected())
    }

    async fn query(
        &mut self,
        sql: &'static str,
        params: &[SqlValue],
    ) -> Result<Vec<Vec<SqlValue>>, StoreError> {
        let rows = bind_sqlite(sqlx::query(sql), params)
            .fetch_all(&mut *self.conn)
            .await
            .map_err(db_error)?;
        rows.iter().map(decode_sqlite_row).collect()
    }

    async fn enqueue_job(&mut self, job: &NewJob) -> Result<bool, StoreError> {
        super::sqlite::insert_job(&mut *self.conn, job).await
    }

    async fn load_stream_upto(
        &mut self,
        stream_id: &str,
        upto: u64,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        let events = super::sqlite::stream_events(&mut *self.conn, stream_id, 0, upto).await?;
        Ok(events.into_iter().map(|e| upcast(self.upcasters, e)).collect())
    }
}
