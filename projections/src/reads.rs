//! The read ports of the process managers (`kuatia_application::process::ports`, and the webhook
//! delivery's `WebhookReads`) and of intake (`kuatia_application::intake`), answered from the
//! read models: the configuration (print settings included), the number series, the tenants,
//! the webhook endpoints, the documents, and authentication's (`kuatia_application::access::AccessReads`:
//! API keys and memberships).

use async_trait::async_trait;
use kuatia_application::access::{AccessReads, ApiKeyRow};
use kuatia_application::event_store::{SharedStore, StoreError};
use kuatia_application::intake::{DocumentFacts, IntakeReads};
use kuatia_application::process::ports::{
    CompanyConfig, CompanySnapshot, ConfigurationReads, NumberSeries, TenantReads,
};
use kuatia_application::process::webhook_delivery::{Endpoint, WebhookReads};
use kuatia_domain::access::Role;
use kuatia_domain::certificate::CertificateRecord;
use kuatia_domain::channel::EmissionChannel;
use kuatia_domain::company::{Branch, IssuancePoint};
use kuatia_domain::print_settings::PrintSettings;
use kuatia_domain::tenancy::TenantId;
use std::sync::Arc;
use uuid::Uuid;

use crate::webhooks::{self as endpoints, EndpointRow};
use crate::{access, configuration as config, documents, number_series};

/// The read models behind the process managers' and intake's read ports.
#[derive(Clone)]
pub struct Reads {
    store: SharedStore,
    /// Company snapshots by configuration version (intake reads one row per request, not six
    /// tables).
    snapshots: Arc<config::SnapshotCache>,
}

impl Reads {
    /// Over the store the read models live in.
    pub fn new(store: SharedStore) -> Self {
        Self {
            store,
            snapshots: Arc::default(),
        }
    }
}

fn company_config(c: config::CompanyRow) -> CompanyConfig {
    CompanyConfig {
        id: c.id,
        ruc: c.ruc,
        profile: c.profile,
        config_version: c.config_version,
    }
}

fn facts(row: documents::DocumentRow) -> DocumentFacts {
    DocumentFacts {
        status: row.status,
        cdc: row.cdc,
        number: row.number,
        external_id: row.external_id,
        grand_total: row.grand_total,
    }
}

#[async_trait]
impl IntakeReads for Reads {
    async fn company_snapshot(
        &self,
        tenant: TenantId,
        company: Uuid,
    ) -> Result<Option<Arc<CompanySnapshot>>, StoreError> {
        config::company_snapshot(&self.store, &self.snapshots, tenant, company).await
    }

    async fn companies(
        &self,
        tenant: TenantId,
        only: Option<Uuid>,
    ) -> Result<Vec<CompanyConfig>, StoreError> {
        Ok(config::companies(&self.store, tenant, only)
            .await?
            .into_iter()
            .map(company_config)
            .collect())
    }

    async fn document(&self, tenant: TenantId, id: Uuid) -> Result<Option<DocumentFacts>, StoreError> {
        Ok(documents::document(&self.store, tenant, id).await?.map(facts))
    }

    async fn document_with_cdc(
        &self,
        tenant: TenantId,
        cdc: &str,
    ) -> Result<Option<DocumentFacts>, StoreError> {
        let filter = documents::Filter {
            cdc: Some(cdc.to_owned()),
            ..documents::Filter::default()
        };
        Ok(documents::list(&self.store, tenant, &filter, 1)
            .await?
            .into_iter()
            .next()
            .map(facts))
    }

    async fn credit_note_totals(&self, tenant: TenantId, cdc: &str) -> Result<Vec<String>, StoreError> {
        documents::credit_notes_of(&self.store, tenant, cdc).await
    }
}

#[async_trait]
impl AccessReads for Reads {
    async fn key_by_hash(&self, sha256: &str) -> Result<Option<ApiKeyRow>, StoreError> {
        access::key_by_hash(&self.store, sha256).await
    }

    async fn role_of(&self, tenant: TenantId, user: Uuid) -> Result<Option<Role>, StoreError> {
        Ok(access::membership(&self.store, tenant, user)
            .await?
            .map(|m| m.role))
    }
}

impl std::fmt::Debug for Reads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reads").finish_non_exhaustive()
    }
}

#[async_trait]
impl ConfigurationReads for Reads {
    async fn company(&self, tenant: TenantId, id: Uuid) -> Result<Option<CompanyConfig>, StoreError> {
        Ok(config::company(&self.store, tenant, id)
            .await?
            .map(company_config))
    }

    async fn channel(&self, tenant: TenantId, id: Uuid) -> Result<Option<EmissionChannel>, StoreError> {
        Ok(config::channel(&self.store, tenant, id).await?.map(|c| c.channel))
    }

    async fn branch(&self, tenant: TenantId, id: Uuid) -> Result<Option<Branch>, StoreError> {
        Ok(config::branch(&self.store, tenant, id).await?.map(|b| b.branch))
    }

    async fn issuance_point(&self, tenant: TenantId, id: Uuid) -> Result<Option<IssuancePoint>, StoreError> {
        Ok(config::issuance_point(&self.store, tenant, id)
            .await?
            .map(|p| IssuancePoint {
                point_id: p.id,
                branch_id: p.branch_id,
                code: p.code,
                name: p.name,
                is_default: p.is_default,
            }))
    }

    async fn certificate(&self, tenant: TenantId, id: Uuid) -> Result<Option<CertificateRecord>, StoreError> {
        Ok(config::certificate(&self.store, tenant, id)
            .await?
            .map(|c| c.record))
    }

    async fn print_settings(
        &self,
        tenant: TenantId,
        company: Uuid,
    ) -> Result<Option<PrintSettings>, StoreError> {
        Ok(config::print_settings(&self.store, tenant, company)
            .await?
            .map(|row| row.settings))
    }
}

#[async_trait]
impl NumberSeries for Reads {
    async fn next_number(&self, tenant: TenantId, series: &str) -> Result<Option<u64>, StoreError> {
        number_series::next_number_opt(&self.store, tenant, series).await
    }
}

#[async_trait]
impl TenantReads for Reads {
    async fn is_production(&self, tenant: TenantId) -> Result<bool, StoreError> {
        crate::access::is_production(&self.store, tenant).await
    }
}

impl From<EndpointRow> for Endpoint {
    fn from(row: EndpointRow) -> Self {
        Self {
            id: row.id,
            settings: row.settings,
            secret_id: row.secret_id,
            previous_secret: row.previous_secret,
        }
    }
}

#[async_trait]
impl WebhookReads for Reads {
    async fn endpoint(&self, tenant: TenantId, id: Uuid) -> Result<Option<Endpoint>, StoreError> {
        Ok(endpoints::endpoint(&self.store, tenant, id)
            .await?
            .map(Endpoint::from))
    }

    async fn active_endpoints_for(
        &self,
        tenant: TenantId,
        company: Option<Uuid>,
    ) -> Result<Vec<Endpoint>, StoreError> {
        Ok(endpoints::active_endpoints_for(&self.store, tenant, company)
            .await?
            .into_iter()
            .map(Endpoint::from)
            .collect())
    }

    async fn certificates(&self) -> Result<Vec<(TenantId, Uuid, CertificateRecord)>, StoreError> {
        endpoints::all_certificates(&self.store).await
    }
}
