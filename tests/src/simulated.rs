//! A service whose tenant's `sifen` channel sends to a SIFEN simulator of its own (in process,
//! real HTTP and SOAP): what the end-to-end tests of the pipeline, lots, answers, artifacts,
//! printables, webhooks and examples stand on. It reads as its tenant ([`Ready`]: `f.invoice(…)`,
//! `f.status(…)`, `f.settle(…)`).

use crate::http::id;
use crate::{Ready, TestApp};
use kuatia_application::artifacts::ArtifactStore;
use kuatia_infrastructure::config::Config;
use kuatia_infrastructure::sifen_sim::{self, RunningSimulator, SimConfig};
use serde_json::Value;
use std::time::Duration;

/// The service, its tenant and the simulator its channel sends to.
pub struct Simulated {
    /// The service.
    pub app: TestApp,
    /// The tenant, ready to issue.
    pub r: Ready,
    /// SIFEN, simulated.
    pub sim: RunningSimulator,
}

impl std::ops::Deref for Simulated {
    type Target = Ready;
    fn deref(&self) -> &Ready {
        &self.r
    }
}

/// The tests poll statuses: the per-key rate limit is not what they test.
fn unlimited(config: &mut Config) {
    config.rate_limit_per_key = 100_000;
}

impl Simulated {
    /// A simulator configured as `sim`, a service configured by `adjust`, a tenant `pipeline`.
    pub async fn new(sim: SimConfig, adjust: impl FnOnce(&mut Config)) -> Self {
        Self::named("pipeline", sim, adjust).await
    }

    /// As [`Simulated::new`], with the tenant's slug.
    pub async fn named(slug: &str, sim: SimConfig, adjust: impl FnOnce(&mut Config)) -> Self {
        let sim = sifen_sim::start("127.0.0.1:0", sim).await.expect("simulator");
        let app = TestApp::spawn_with(|c| {
            unlimited(c);
            adjust(c);
        })
        .await;
        let r = app.ready_at(slug, &sim.base_url()).await;
        Self { app, r, sim }
    }

    /// Stops the service and starts it again on the same database with another configuration;
    /// the tenant and the simulator stay.
    pub async fn restart(self, adjust: impl FnOnce(&mut Config)) -> Self {
        let Self { app, r, sim } = self;
        let app = app
            .restart(|c| {
                unlimited(c);
                adjust(c);
            })
            .await
            .expect("restart");
        Self {
            r: r.on(&app),
            app,
            sim,
        }
    }

    /// Posts with a fresh Idempotency-Key; asserts 201 and `queued`, returns the id.
    pub async fn post(&self, doc: &Value) -> String {
        let body = self.r.post(doc).await;
        assert_eq!(body["status"], "queued", "{body}");
        id(&body)
    }

    /// The simulator's counters (`GET /sim/stats`).
    pub async fn stats(&self) -> Value {
        reqwest::get(format!("{}/sim/stats", self.sim.base_url()))
            .await
            .expect("stats")
            .json()
            .await
            .expect("json")
    }

    /// The bytes the service stored under `sha` (its local artifact store).
    pub async fn stored(&self, sha: &str) -> Vec<u8> {
        let store = kuatia_infrastructure::artifacts::LocalArtifacts::new(
            self.app.db.config().data_dir.join("artifacts"),
        );
        store.get(sha).await.expect("read").expect("stored")
    }

    /// The signed XML the pipeline stored (from the local artifact store, by the hash the
    /// timeline recorded).
    pub fn signed_xml(&self, timeline: &[Value]) -> String {
        let sha = timeline
            .iter()
            .find(|e| {
                e["type"] == "ArtifactRecorded" && e["data"]["ArtifactRecorded"]["kind"] == "signed_xml"
            })
            .and_then(|e| e["data"]["ArtifactRecorded"]["sha256"].as_str())
            .expect("a signed_xml artifact")
            .to_owned();
        let path = (self.app.db.config().data_dir.join("artifacts"))
            .join(&sha[..2])
            .join(&sha);
        std::fs::read_to_string(path).expect("the stored signed XML")
    }

    /// How many siRecepEvento requests the simulator has seen.
    pub async fn event_requests(&self) -> u64 {
        self.stats().await["totals"]["requests"]["siRecepEvento"]
            .as_u64()
            .unwrap_or(0)
    }

    /// Settles one document, expects `accepted`, and returns its signed XML.
    pub async fn accepted_xml(&self, doc: &str) -> String {
        let settled = self.settle(&[doc.to_owned()], Duration::from_secs(30)).await;
        assert_eq!(settled[0]["status"], "accepted", "{}", settled[0]);
        let timeline = self.timeline(doc).await;
        self.signed_xml(&timeline)
    }

    /// Posts `doc` while SIFEN answers 0161 (no answer yet) to every siRecepDE, and waits until
    /// the document is `retrying`; returns its id. With [`Simulated::record_approval`], how a
    /// test makes an old approval: the service's clock cannot be moved.
    pub async fn retrying(&self, doc: &Value) -> String {
        let injected = reqwest::Client::new()
            .post(format!("{}/sim/faults", self.sim.base_url()))
            .json(&serde_json::json!({"fault": "0161", "times": 1000, "service": "siRecepDE"}))
            .send()
            .await
            .expect("inject");
        assert!(injected.status().is_success(), "fault injected");
        let id = self.post(doc).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while self.status(&id).await["status"] != "retrying" {
            assert!(std::time::Instant::now() < deadline, "{id} is not retrying");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        id
    }

    /// Records, through the document's own commands, that SIFEN approved `doc` (a retrying one)
    /// at `approved_at`: what a reconciliation by CDC records for a document SIFEN approved long
    /// ago.
    pub async fn record_approval(&self, doc: &str, approved_at: chrono::DateTime<chrono::Utc>) {
        use kuatia_domain::document::aggregate::DocumentCommand;
        let store = self.app.service().database.store();
        let tenant = kuatia_domain::tenancy::TenantId::from_uuid(self.r.tenant.parse().expect("tenant"));
        let id: uuid::Uuid = doc.parse().expect("id");
        let now = chrono::Utc::now();
        for command in [
            DocumentCommand::ResumeSubmission { at: now },
            DocumentCommand::RecordAccepted {
                code: "0422".into(),
                message: "CDC encontrado".into(),
                protocol: Some("1234567890".into()),
                approved_at,
                at: now,
            },
        ] {
            kuatia_application::documents::command(&store, tenant, id, command, Default::default())
                .await
                .expect("record");
        }
    }
}
