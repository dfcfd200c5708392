//! The event store and job queue, on PostgreSQL ([`postgres`]) and SQLite ([`sqlite`]).
//!
//! Both implement `kuatia_application::event_store::Store` and `jobs::JobQueue` with the same
//! guarantees (see `docs/adr/0001-event-store.md`); the conformance suite in `tests/` runs against
//! both. [`Database::connect`] picks the backend from the URL and applies the migrations.

mod common;
mod group;
pub mod postgres;
mod sql_value;
pub mod sqlite;

use kuatia_application::event_store::{SharedStore, StoreError};
use kuatia_application::jobs::JobQueue;
use kuatia_application::projection::{Backend, Projection};
use kuatia_application::upcast::UpcasterChain;
use std::sync::Arc;

/// How to open the database.
#[derive(Debug, Clone)]
pub struct DatabaseOptions {
    /// `postgres://…` or `sqlite://path` (created when missing).
    pub url: String,
    /// PostgreSQL role the service switches to after connecting (`SET ROLE`); `None` to stay the
    /// connecting user. Must be a role the migrations granted (`kuatia_app`).
    pub app_role: Option<String>,
    /// Largest pool size.
    pub max_connections: u32,
}

impl DatabaseOptions {
    /// Options for a URL with the defaults: role `kuatia_app`, 16 connections.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            app_role: Some("kuatia_app".to_owned()),
            max_connections: 16,
        }
    }
}

/// An open, migrated database with its store.
#[derive(Clone)]
pub enum Database {
    /// PostgreSQL.
    Postgres(Arc<postgres::PgStore>),
    /// SQLite.
    Sqlite(Arc<sqlite::SqliteStore>),
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Postgres(_) => "Database::Postgres",
            Self::Sqlite(_) => "Database::Sqlite",
        })
    }
}

impl Database {
    /// Connects, applies pending migrations, and opens the store with its inline projections and
    /// upcasters.
    pub async fn connect(
        options: &DatabaseOptions,
        inline: Vec<Arc<dyn Projection>>,
        upcasters: Arc<UpcasterChain>,
    ) -> Result<Self, StoreError> {
        if options.url.starts_with("postgres://") || options.url.starts_with("postgresql://") {
            Ok(Self::Postgres(Arc::new(
                postgres::PgStore::connect(options, inline, upcasters).await?,
            )))
        } else if options.url.starts_with("sqlite:") {
            Ok(Self::Sqlite(Arc::new(
                sqlite::SqliteStore::connect(options, inline, upcasters).await?,
            )))
        } else {
            Err(StoreError::Invalid(format!(
                "unsupported database URL (expected postgres:// or sqlite://): {}",
                redact_url(&options.url)
            )))
        }
    }

    /// The store port.
    pub fn store(&self) -> SharedStore {
        match self {
            Self::Postgres(s) => s.clone(),
            Self::Sqlite(s) => s.clone(),
        }
    }

    /// The job queue port.
    pub fn jobs(&self) -> Arc<dyn JobQueue> {
        match self {
            Self::Postgres(s) => s.clone(),
            Self::Sqlite(s) => s.clone(),
        }
    }

    /// Which backend.
    pub fn backend(&self) -> Backend {
        match self {
            Self::Postgres(_) => Backend::Postgres,
            Self::Sqlite(_) => Backend::Sqlite,
        }
    }

    /// Closes the pools.
    pub async fn close(&self) {
        match self {
            Self::Postgres(s) => s.close().await,
            Self::Sqlite(s) => s.close().await,
        }
    }
}

/// A database URL without its password, for logs and errors.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end && url[scheme_end + 3..at].contains(':') => {
            let userinfo = &url[scheme_end + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{}:[redacted]{}", &url[..scheme_end + 3], user, &url[at..])
        }
        _ => url.to_owned(),
    }
}

fn db_error(err: sqlx::Error) -> StoreError {
    StoreError::Database(Box::new(err))
}

/// Like [`db_error`], but a unique violation becomes [`StoreError::Duplicate`] naming the
/// constraint (SQLite names the columns instead: `table.column`).
fn write_error(err: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &err
        && db.is_unique_violation()
    {
        let name = db.constraint().map(str::to_owned).unwrap_or_else(|| {
            db.message()
                .rsplit(": ")
                .next()
                .unwrap_or("unique constraint")
                .to_owned()
        });
        return StoreError::Duplicate(name);
    }
    db_error(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_from_database_urls() {
        assert_eq!(
            redact_url("postgres://kuatia:s3cret@db:5432/kuatia"),
            "postgres://kuatia:[redacted]@db:5432/kuatia"
        );
        assert_eq!(
            redact_url("sqlite://./data/kuatia.db"),
            "sqlite://./data/kuatia.db"
        );
    }
}
