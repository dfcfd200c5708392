//! The read ports of the process managers (`kuatia_application::process::ports`), answered from
//! the read models: the configuration (print settings included), the number series, the
//! tenants.

use async_trait::async_trait;
use kuatia_application::event_store::{SharedStore, StoreError};
use kuatia_application::process::ports::{CompanyConfig, ConfigurationReads, NumberSeries, TenantReads};
use kuatia_domain::certificate::CertificateRecord;
use kuatia_domain::channel::EmissionChannel;
use kuatia_domain::company::{Branch, IssuancePoint};
use kuatia_domain::print_settings::PrintSettings;
use kuatia_domain::tenancy::TenantId;
use uuid::Uuid;

use crate::{configuration as config, number_series};

/// The read models behind the process managers' read ports.
#[derive(Clone)]
pub struct Reads {
    store: SharedStore,
}

impl Reads {
    /// Over the store the read models live in.
    pub fn new(store: SharedStore) -> Self {
        Self { store }
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
            .map(|c| CompanyConfig {
                id: c.id,
                ruc: c.ruc,
                profile: c.profile,
                config_version: c.config_version,
            }))
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
