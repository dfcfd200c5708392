//! The taxpayer lookup service's adapters (issue 9): importing DNIT's registry
//! files and the designation and registry-match CSVs, generating synthetic registries, the
//! in-memory search index and how instances keep it current, API keys and monthly quotas.
//!
//! The rules (line format, search form, ranking, plans) are `kuatia_domain::lookup`; the HTTP
//! service is `kuatia_api::lookup`. Start with [`registry`] (the two slots and the atomic switch),
//! then [`index`] (how a search runs) and [`live`] (how every instance follows imports).
//! `docs/lookup.md` explains the choices.

pub mod generate;
pub mod import;
pub mod index;
pub mod keys;
pub mod live;
pub mod quota;
pub mod registry;

use kuatia_application::event_store::SharedStore;
use kuatia_application::event_store::{Store, StoreError};
use kuatia_application::intake::TaxpayerRegistry;
use kuatia_application::projection::SqlValue;
use kuatia_domain::document::validation::RegistryAnswer;
use kuatia_domain::ruc::Ruc;

/// What the taxpayer registry says of a buyer's RUC, for the invoicing service's warnings:
/// `Found { state }` when listed, `NotFound` when a registry is imported and does not list it,
/// `NotLoaded` when no registry was ever imported or the database did not answer (a warning is
/// never worth failing an intake for; the failure is logged).
pub async fn registry_answer(store: &dyn Store, ruc: &Ruc) -> RegistryAnswer {
    match registry::state_of(store, ruc.number()).await {
        Ok(None) => RegistryAnswer::NotLoaded,
        Ok(Some(None)) => RegistryAnswer::NotFound,
        Ok(Some(Some(state))) => RegistryAnswer::Found { state },
        Err(err) => {
            tracing::warn!(error = %err, "reading the taxpayer registry failed; no registry warning");
            RegistryAnswer::NotLoaded
        }
    }
}

/// The registry behind intake's [`TaxpayerRegistry`] port: [`registry_answer`] over the store.
#[derive(Clone)]
pub struct StoreRegistry(pub SharedStore);

impl std::fmt::Debug for StoreRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreRegistry")
    }
}

#[async_trait::async_trait]
impl TaxpayerRegistry for StoreRegistry {
    async fn answer(&self, ruc: &Ruc) -> RegistryAnswer {
        registry_answer(self.0.as_ref(), ruc).await
    }

    async fn name_of(&self, ruc: &Ruc) -> Option<String> {
        registry::name_of(self.0.as_ref(), ruc.number())
            .await
            .inspect_err(|err| tracing::warn!(error = %err, "reading the taxpayer registry failed"))
            .ok()
            .flatten()
    }
}

/// An electronic-invoicing designation (`sifenMandate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mandate {
    /// Designation group.
    pub group: String,
    /// Start date (`YYYY-MM-DD`).
    pub start_date: String,
    /// Reference link.
    pub link: String,
}

/// A synchronized registry match (`siara`); absent fields are `None`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Siara {
    /// Group.
    pub group: Option<String>,
    /// Category.
    pub category: Option<String>,
    /// Legal type.
    pub legal_type: Option<String>,
    /// Department.
    pub department: Option<String>,
    /// City.
    pub city: Option<String>,
    /// State in that registry.
    pub registry_state: Option<String>,
    /// Last communication.
    pub last_communication: Option<String>,
    /// When it was synchronized.
    pub synchronized_at: Option<String>,
    /// Link to the source record.
    pub source_link: Option<String>,
}

/// The designation and registry match of a RUC number, each when present.
pub async fn details(store: &dyn Store, ruc: &str) -> Result<(Option<Mandate>, Option<Siara>), StoreError> {
    let param = [SqlValue::Text(ruc.to_owned())];
    let mandate = store
        .query(
            "SELECT mandate_group, start_date, link FROM lookup_mandates WHERE ruc = $1",
            &param,
        )
        .await?
        .first()
        .map(|r| Mandate {
            group: r[0].as_text().unwrap_or_default(),
            start_date: r[1].as_text().unwrap_or_default(),
            link: r[2].as_text().unwrap_or_default(),
        });
    let siara = store
        .query(
            "SELECT siara_group, category, legal_type, department, city, registry_state, \
             last_communication, synchronized_at, source_link FROM lookup_siara WHERE ruc = $1",
            &param,
        )
        .await?
        .first()
        .map(|r| Siara {
            group: r[0].as_text(),
            category: r[1].as_text(),
            legal_type: r[2].as_text(),
            department: r[3].as_text(),
            city: r[4].as_text(),
            registry_state: r[5].as_text(),
            last_communication: r[6].as_text(),
            synchronized_at: r[7].as_text(),
            source_link: r[8].as_text(),
        });
    Ok((mandate, siara))
}
