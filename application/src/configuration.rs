//! Configuration records: the use cases behind `/v1/companies`, `/v1/branches`,
//! `/v1/issuance-points`, `/v1/print-settings`, `/v1/certificates` and `/v1/emission-channels`.
//! Every change is a command on the company aggregate, so who changed what and when is in the
//! company's stream; secrets go to the [`Vault`] first and the events carry their ids.

use kuatia_domain::certificate::CertificateRecord;
use kuatia_domain::channel::{EmissionChannel, csc_issue};
use kuatia_domain::company::{self, Company, CompanyCommand, CompanyError, CompanyProfile};
use kuatia_domain::ruc::Ruc;
use kuatia_domain::tenancy::TenantId;
use uuid::Uuid;
use zeroize::Zeroizing;

use crate::aggregate::{CommandExecutor, ExecuteError};
use crate::event_store::{EventMetadata, SharedStore, StoreError};
use crate::vault::{PfxError, PfxSlots, Vault, VaultError};

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
    /// The uploaded PFX could not be opened.
    #[error(transparent)]
    Pfx(#[from] PfxError),
    /// Sealing or opening a secret failed.
    #[error(transparent)]
    Vault(#[from] VaultError),
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

/// An uploaded certificate, before it is opened.
pub struct CertificateUpload {
    /// The PKCS#12 bytes.
    pub pfx: Vec<u8>,
    /// Its password.
    pub password: Zeroizing<String>,
    /// Free label.
    pub label: Option<String>,
}

/// Opens a PFX in the pool `slots` (off the async runtime: key derivation is deliberately slow),
/// seals its key and chain, and records the certificate on the company.
pub async fn add_certificate(
    store: &SharedStore,
    vault: &Vault,
    slots: &PfxSlots,
    tenant: TenantId,
    company_stream: &str,
    upload: CertificateUpload,
    metadata: EventMetadata,
) -> Result<CertificateRecord, ConfigurationError> {
    let CertificateUpload { pfx, password, label } = upload;
    let opened = slots.open(pfx, password).await?;
    let secret_id = vault.put(tenant, "certificate", opened.pem.as_bytes()).await?;
    let record = CertificateRecord {
        certificate_id: Uuid::now_v7(),
        label,
        facts: opened.facts,
        secret_id,
    };
    change_company(
        store,
        tenant,
        company_stream,
        CompanyCommand::AddCertificate(record.clone()),
        metadata,
    )
    .await?;
    Ok(record)
}

/// Secrets given with a channel request (absent: keep what is on file).
#[derive(Default)]
pub struct ChannelSecrets {
    /// `client_secret` (`sifen`) or `api_key` (`autoimpresor`).
    pub credential: Option<Zeroizing<String>>,
    /// The CSC (`sifen`).
    pub csc: Option<Zeroizing<String>>,
}

fn invalid(field: &str, code: &str, message: &str) -> ConfigurationError {
    ConfigurationError::Refused(CompanyError::Invalid(vec![(
        field.to_owned(),
        code.to_owned(),
        message.to_owned(),
    )]))
}

/// Creates or replaces a channel. `channel` carries the secret ids on file (nil when none);
/// every secret given is sealed anew and its new id recorded.
pub async fn configure_channel(
    store: &SharedStore,
    vault: &Vault,
    tenant: TenantId,
    company_stream: &str,
    mut channel: EmissionChannel,
    secrets: ChannelSecrets,
    metadata: EventMetadata,
) -> Result<EmissionChannel, ConfigurationError> {
    let mut issues: Vec<(String, String, String)> = channel
        .issues()
        .into_iter()
        .map(|i| (i.field, i.code.to_owned(), i.message))
        .collect();
    if let (Some(settings), csc) = (&channel.sifen, &secrets.csc) {
        match csc {
            Some(csc) => issues.extend(csc_issue(csc).map(|i| (i.field, i.code.to_owned(), i.message))),
            None if settings.csc_secret_id.is_nil() => issues.push((
                "sifen.csc".into(),
                "required".into(),
                "a sifen channel needs the CSC SIFEN issued".into(),
            )),
            None => {}
        }
    } else if secrets.csc.is_some() {
        return Err(invalid(
            "sifen.csc",
            "not_allowed",
            "only a sifen channel takes a CSC",
        ));
    }
    if secrets
        .credential
        .as_ref()
        .is_some_and(|c| c.is_empty() || c.len() > 1024)
    {
        issues.push((
            "credentials".into(),
            "invalid_length".into(),
            "a credential has 1 to 1024 characters".into(),
        ));
    }
    if !issues.is_empty() {
        return Err(ConfigurationError::Refused(CompanyError::Invalid(issues)));
    }
    let kind = match channel.kind {
        kuatia_domain::channel::ChannelKind::Sifen => "client_secret",
        kuatia_domain::channel::ChannelKind::Autoimpresor => "api_key",
    };
    if let Some(credential) = &secrets.credential {
        channel.credentials_secret_id = Some(vault.put(tenant, kind, credential.as_bytes()).await?);
    }
    if let (Some(settings), Some(csc)) = (channel.sifen.as_mut(), &secrets.csc) {
        settings.csc_secret_id = vault.put(tenant, "csc", csc.as_bytes()).await?;
    }
    change_company(
        store,
        tenant,
        company_stream,
        CompanyCommand::ConfigureChannel(channel.clone()),
        metadata,
    )
    .await?;
    Ok(channel)
}
