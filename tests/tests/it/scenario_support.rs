//! What the scenario tests of the process managers share: a clock the scenario sets, a
//! destination policy that lets everything through (the policy has its own tests), and a
//! directory for the artifacts removed with the scenario.

use async_trait::async_trait;
use chrono::{DateTime, Duration as TimeDelta, Utc};
use kuatia_application::event_store::StoreError;
use kuatia_application::process::ports::{Clock, Destinations, RefusedDestination};
use kuatia_domain::tenancy::TenantId;
use std::net::SocketAddr;
use std::sync::Mutex;
use uuid::Uuid;

/// The scenario's time.
pub(crate) struct SetClock(pub(crate) Mutex<DateTime<Utc>>);

impl SetClock {
    /// Starting at `now`.
    pub(crate) fn at(now: DateTime<Utc>) -> Self {
        Self(Mutex::new(now))
    }

    /// Moves the time on.
    pub(crate) fn advance(&self, by: TimeDelta) {
        *self.0.lock().unwrap() += by;
    }
}

impl Clock for SetClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
}

/// Every destination allowed, connecting as it resolves.
pub(crate) struct Anywhere;

#[async_trait]
impl Destinations for Anywhere {
    async fn check(&self, _tenant: TenantId, _url: &str) -> Result<Option<SocketAddr>, String> {
        Ok(None)
    }
    async fn check_saved(
        &self,
        _tenant: TenantId,
        _url: &str,
    ) -> Result<Result<(), RefusedDestination>, StoreError> {
        Ok(Ok(()))
    }
}

/// A directory of the scenario's artifacts, removed with it.
pub(crate) struct TempDir(pub(crate) std::path::PathBuf);

impl TempDir {
    /// A new, empty one.
    pub(crate) fn new() -> Self {
        let path = std::env::temp_dir().join(format!("kuatia-scenario-{}", Uuid::now_v7()));
        std::fs::create_dir_all(&path).expect("a directory");
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
