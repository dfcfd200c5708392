//! Configuration records: the use cases behind `/v1/companies`, `/v1/branches` and
//! `/v1/issuance-points` (channels and certificates follow).

use kuatia_domain::company::{self, Company, CompanyCommand, CompanyError, CompanyProfile};
use kuatia_domain::ruc::Ruc;
use kuatia_domain::tenancy::TenantId;
use uuid::Uuid;

use crate::aggregate::{CommandExecutor, ExecuteError};
use crate::event_store::{EventMetadata, SharedStore, StoreError};

/// Why a configuration change did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ConfigurationError {
    /// The RUC is registered already in this tenant.
    #[error("a company with this RUC is already registered")]
    Duplicate,
    /// The branch or point code is taken.
    #[error("the code {0} is already used")]
    DuplicateCode(String),
    /// No such record for this caller.
    #[error("not found")]
    NotFound,
    /// A concurrent change won.
    #[error("a concurrent change won; retry")]
    Conflict,
    /// A domain rule refused it.
    #[error(transparent)]
    Refused(CompanyError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn from_execute(err: ExecuteError<CompanyError>) -> ConfigurationError {
    match err {
        ExecuteError::Rejected(CompanyError::AlreadyRegistered) => ConfigurationError::Duplicate,
        ExecuteError::Rejected(CompanyError::NotRegistered) | ExecuteError::NotFound => {
            ConfigurationError::NotFound
        }
        ExecuteError::Rejected(CompanyError::DuplicateCode(code)) => ConfigurationError::DuplicateCode(code),
        ExecuteError::Rejected(e) => ConfigurationError::Refused(e),
        ExecuteError::Conflict(_) => ConfigurationError::Conflict,
        ExecuteError::Store(e) => ConfigurationError::Store(e),
    }
}

/// Registers a company; returns its id.
pub async fn register_company(
    store: &SharedStore,
    tenant: TenantId,
    ruc: Ruc,
    profile: CompanyProfile,
    metadata: EventMetadata,
) -> Result<Uuid, ConfigurationError> {
    let company_id = Uuid::now_v7();
    let stream = company::stream_id(tenant, &ruc);
    let executor = CommandExecutor::<Company>::new(store.clone(), ());
    let command = CompanyCommand::Register {
        company_id,
        ruc,
        profile,
    };
    match executor.execute(tenant, &stream, command, metadata).await {
        Ok(_) => Ok(company_id),
        // Two registrations of one RUC racing: the loser finds the stream taken.
        Err(ExecuteError::Conflict(_)) => Err(ConfigurationError::Duplicate),
        Err(other) => Err(from_execute(other)),
    }
}

/// Runs a command on an existing company (profile update, new branch, new issuance point).
pub async fn change_company(
    store: &SharedStore,
    tenant: TenantId,
    company_stream: &str,
    command: CompanyCommand,
    metadata: EventMetadata,
) -> Result<(), ConfigurationError> {
    let executor = CommandExecutor::<Company>::new(store.clone(), ());
    executor
        .execute(tenant, company_stream, command, metadata)
        .await
        .map_err(from_execute)?;
    Ok(())
}
