//! What the scenario tests of the process managers share: the ground a scenario stands on (a
//! fresh store, a vault, a tenant), a clock the scenario sets, a destination policy that lets
//! everything through (the policy has its own tests), a directory for the artifacts removed
//! with the scenario, the jobs a scenario runs, and the company's head office.

use async_trait::async_trait;
use chrono::{DateTime, Duration as TimeDelta, Utc};
use kuatia_application::event_store::{SharedStore, StoreError};
use kuatia_application::jobs::{Job, JobState};
use kuatia_application::process::ports::{Clock, Destinations, RefusedDestination};
use kuatia_application::vault::Vault;
use kuatia_application::worker::JobHandler;
use kuatia_domain::company::{Branch, CompanyProfile, IssuancePoint};
use kuatia_domain::tenancy::TenantId;
use kuatia_infrastructure::artifacts::{ArtifactLocation, ObjectArtifacts};
use kuatia_infrastructure::store::Database;
use kuatia_infrastructure::vault::AesGcmSealer;
use kuatia_tests::{ScratchDir, TestDb};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use uuid::Uuid;

/// What every scenario stands on: a fresh database (the backend under test), its store, a vault
/// over it, a new tenant and a directory for the artifacts.
pub(crate) struct Ground {
    pub(crate) db: TestDb,
    pub(crate) artifacts: ScratchDir,
    pub(crate) database: Database,
    pub(crate) store: SharedStore,
    pub(crate) vault: Vault,
    pub(crate) tenant: TenantId,
}

impl Ground {
    /// Opens it.
    pub(crate) async fn new() -> Self {
        let db = TestDb::new().await;
        let database = db.open().await;
        let store = database.store();
        let sealer =
            AesGcmSealer::from_base64("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").expect("a key");
        Self {
            db,
            artifacts: ScratchDir::new(),
            vault: Vault::new(store.clone(), Arc::new(sealer)),
            store,
            database,
            tenant: TenantId::from_uuid(Uuid::now_v7()),
        }
    }
}

/// The artifact store on a scenario's directory.
pub(crate) fn artifact_store(dir: &ScratchDir) -> Arc<ObjectArtifacts> {
    Arc::new(ObjectArtifacts::open(&ArtifactLocation::Local(dir.0.clone())).expect("artifacts"))
}

/// A job of `kind` for `tenant`, in its first attempt of ten, running since `now`.
pub(crate) fn running_job(
    tenant: TenantId,
    kind: &str,
    payload: serde_json::Value,
    now: DateTime<Utc>,
) -> Job {
    Job {
        id: Uuid::now_v7(),
        kind: kind.into(),
        idempotency_key: Uuid::now_v7().to_string(),
        tenant_id: tenant,
        payload,
        state: JobState::Running,
        attempts: 1,
        max_attempts: 10,
        next_attempt_at: now,
        lease_owner: None,
        lease_expires_at: None,
        last_error: None,
    }
}

/// The handler of `kind` among `handlers`.
pub(crate) fn handler(handlers: Vec<Arc<dyn JobHandler>>, kind: &str) -> Arc<dyn JobHandler> {
    handlers
        .into_iter()
        .find(|h| h.kind() == kind)
        .expect("a handler of the kind")
}

/// The test company's profile ([`kuatia_tests::TestApp::company_body`] without its RUC).
pub(crate) fn profile() -> CompanyProfile {
    let mut profile = kuatia_tests::TestApp::company_body(kuatia_tests::RUC);
    profile.as_object_mut().unwrap().remove("ruc");
    serde_json::from_value(profile).expect("a profile")
}

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

/// Branch 001, the company's default ("Casa central"), with no address.
pub(crate) fn head_office(branch_id: Uuid) -> Branch {
    Branch {
        branch_id,
        code: "001".into(),
        name: "Casa central".into(),
        address: None,
        house_number: None,
        city_code: None,
        city_name: None,
        department_code: None,
        department_name: None,
        is_default: true,
    }
}

/// Issuance point 001 of `branch_id`, its default.
pub(crate) fn point_001(point_id: Uuid, branch_id: Uuid) -> IssuancePoint {
    IssuancePoint {
        point_id,
        branch_id,
        code: "001".into(),
        name: None,
        is_default: true,
    }
}
