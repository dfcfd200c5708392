//! `configuration` (inline): companies, branches, issuance points, print settings, certificates
//! and emission channels, from the company streams, and the queries the configuration endpoints
//! run. No secret is here: certificates and channels refer to sealed secrets by id.
//!
//! Inline, so that a company can be used the moment its creation returns. Updates carry the
//! stream version and only apply forward, so a replayed event changes nothing.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use kuatia_application::event_store::{ProjectionKind, RecordedEvent, SharedStore, StoreError};
use kuatia_application::process::ports::CompanyConfig;
use kuatia_application::projection::{Projection, SqlTx, SqlValue};
use kuatia_domain::certificate::CertificateRecord;
use kuatia_domain::channel::{BranchWithPoints, EmissionChannel};
use kuatia_domain::company::{Branch, CompanyEvent, CompanyProfile};
use kuatia_domain::tenancy::TenantId;
use uuid::Uuid;

/// The projection.
#[derive(Debug, Default, Clone, Copy)]
pub struct Configuration;

impl Configuration {
    /// Its stable name.
    pub const NAME: &'static str = "configuration";
}

#[async_trait]
impl Projection for Configuration {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn kind(&self) -> ProjectionKind {
        ProjectionKind::Inline
    }

    fn tables(&self) -> &'static [&'static str] {
        &[
            "companies",
            "branches",
            "issuance_points",
            "print_settings",
            "certificates",
            "emission_channels",
        ]
    }

    fn stream_types(&self) -> Option<&'static [&'static str]> {
        Some(&["company"])
    }

    async fn apply(&self, tx: &mut dyn SqlTx, event: &RecordedEvent) -> Result<(), StoreError> {
        if event.stream_type != "company" {
            return Ok(());
        }
        let decoded: CompanyEvent = serde_json::from_value(event.payload.clone())
            .map_err(|e| StoreError::Corrupt(format!("company event {}: {e}", event.event_id)))?;
        let to_json =
            |p: &CompanyProfile| serde_json::to_value(p).map_err(|e| StoreError::Corrupt(e.to_string()));
        let company_id = decoded.company_id();
        match decoded {
            CompanyEvent::CompanyRegistered {
                company_id,
                ruc,
                profile,
            } => {
                tx.execute(
                    "INSERT INTO companies (id, tenant_id, ruc, legal_name, profile, stream_id, version, created_at, \
                       updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) ON CONFLICT (id) DO NOTHING",
                    &[
                        SqlValue::Uuid(company_id),
                        SqlValue::Uuid(event.tenant_id.as_uuid()),
                        SqlValue::Text(ruc.to_string()),
                        SqlValue::Text(profile.legal_name.clone()),
                        SqlValue::Json(to_json(&profile)?),
                        SqlValue::Text(event.stream_id.clone()),
                        SqlValue::Int(event.stream_version as i64),
                        SqlValue::Timestamp(event.recorded_at),
                    ],
                )
                .await?;
            }
            CompanyEvent::BranchAdded { company_id, branch } => {
                let details =
                    serde_json::to_value(&branch).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                tx.execute(
                    "INSERT INTO branches (id, tenant_id, company_id, code, name, details, is_default, created_at, \
                       version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING",
                    &[
                        SqlValue::Uuid(branch.branch_id),
                        SqlValue::Uuid(event.tenant_id.as_uuid()),
                        SqlValue::Uuid(company_id),
                        SqlValue::Text(branch.code.clone()),
                        SqlValue::Text(branch.name.clone()),
                        SqlValue::Json(details),
                        SqlValue::Bool(branch.is_default),
                        SqlValue::Timestamp(event.recorded_at),
                        SqlValue::Int(event.stream_version as i64),
                    ],
                )
                .await?;
            }
            CompanyEvent::BranchUpdated { branch, .. } => {
                tx.execute(
                    "UPDATE branches SET name = $2, details = $3, is_default = $4, version = $5, updated_at = $6 \
                     WHERE id = $1 AND version < $5",
                    &[
                        SqlValue::Uuid(branch.branch_id),
                        SqlValue::Text(branch.name.clone()),
                        SqlValue::Json(json(&branch)?),
                        SqlValue::Bool(branch.is_default),
                        SqlValue::Int(event.stream_version as i64),
                        SqlValue::Timestamp(event.recorded_at),
                    ],
                )
                .await?;
            }
            CompanyEvent::IssuancePointUpdated { point, .. } => {
                tx.execute(
                    "UPDATE issuance_points SET name = $2, is_default = $3, version = $4, updated_at = $5 \
                     WHERE id = $1 AND version < $4",
                    &[
                        SqlValue::Uuid(point.point_id),
                        point.name.clone().map_or(SqlValue::Null, SqlValue::Text),
                        SqlValue::Bool(point.is_default),
                        SqlValue::Int(event.stream_version as i64),
                        SqlValue::Timestamp(event.recorded_at),
                    ],
                )
                .await?;
            }
            CompanyEvent::PrintSettingsChanged {
                company_id,
                settings_id,
                settings,
            } => {
                let json = serde_json::to_value(&settings).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                tx.execute(
                    "INSERT INTO print_settings (company_id, tenant_id, id, settings, version, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $6) \
                     ON CONFLICT (company_id) DO UPDATE SET settings = excluded.settings, version = excluded.version, \
                       updated_at = excluded.updated_at WHERE print_settings.version < excluded.version",
                    &[
                        SqlValue::Uuid(company_id),
                        SqlValue::Uuid(event.tenant_id.as_uuid()),
                        SqlValue::Uuid(settings_id),
                        SqlValue::Json(json),
                        SqlValue::Int(event.stream_version as i64),
                        SqlValue::Timestamp(event.recorded_at),
                    ],
                )
                .await?;
            }
            CompanyEvent::IssuancePointAdded { company_id, point } => {
                tx.execute(
                    "INSERT INTO issuance_points (id, tenant_id, company_id, branch_id, code, name, is_default, \
                       created_at, version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING",
                    &[
                        SqlValue::Uuid(point.point_id),
                        SqlValue::Uuid(event.tenant_id.as_uuid()),
                        SqlValue::Uuid(company_id),
                        SqlValue::Uuid(point.branch_id),
                        SqlValue::Text(point.code.clone()),
                        point.name.clone().map_or(SqlValue::Null, SqlValue::Text),
                        SqlValue::Bool(point.is_default),
                        SqlValue::Timestamp(event.recorded_at),
                        SqlValue::Int(event.stream_version as i64),
                    ],
                )
                .await?;
            }
            CompanyEvent::CertificateAdded {
                company_id,
                certificate,
            } => {
                tx.execute(
                    "INSERT INTO certificates (id, tenant_id, company_id, record, created_at) \
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",
                    &[
                        SqlValue::Uuid(certificate.certificate_id),
                        SqlValue::Uuid(event.tenant_id.as_uuid()),
                        SqlValue::Uuid(company_id),
                        SqlValue::Json(json(&certificate)?),
                        SqlValue::Timestamp(event.recorded_at),
                    ],
                )
                .await?;
            }
            CompanyEvent::EmissionChannelConfigured { company_id, channel } => {
                tx.execute(
                    "INSERT INTO emission_channels (id, tenant_id, company_id, kind, record, version, created_at, \
                       updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7) \
                     ON CONFLICT (id) DO UPDATE SET record = excluded.record, version = excluded.version, \
                       updated_at = excluded.updated_at WHERE emission_channels.version < excluded.version",
                    &[
                        SqlValue::Uuid(channel.channel_id),
                        SqlValue::Uuid(event.tenant_id.as_uuid()),
                        SqlValue::Uuid(company_id),
                        SqlValue::Text(channel.kind.as_str().to_owned()),
                        SqlValue::Json(json(&channel)?),
                        SqlValue::Int(event.stream_version as i64),
                        SqlValue::Timestamp(event.recorded_at),
                    ],
                )
                .await?;
            }
            CompanyEvent::CompanyProfileUpdated { company_id, profile } => {
                tx.execute(
                    "UPDATE companies SET legal_name = $2, profile = $3, version = $4, updated_at = $5 \
                     WHERE id = $1 AND version < $4",
                    &[
                        SqlValue::Uuid(company_id),
                        SqlValue::Text(profile.legal_name.clone()),
                        SqlValue::Json(to_json(&profile)?),
                        SqlValue::Int(event.stream_version as i64),
                        SqlValue::Timestamp(event.recorded_at),
                    ],
                )
                .await?;
            }
        }
        // Any change moves the configuration version (what intake's cache compares).
        tx.execute(
            "UPDATE companies SET config_version = $2 WHERE id = $1 AND config_version < $2",
            &[
                SqlValue::Uuid(company_id),
                SqlValue::Int(event.stream_version as i64),
            ],
        )
        .await?;
        Ok(())
    }
}

/// A company as the API shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct CompanyRow {
    /// Id.
    pub id: Uuid,
    /// RUC with DV.
    pub ruc: String,
    /// Profile.
    pub profile: CompanyProfile,
    /// Stream.
    pub stream_id: String,
    /// Registered.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
    /// Stream version of the last change to anything of its configuration.
    pub config_version: i64,
}

fn json<T: serde::Serialize>(value: &T) -> Result<serde_json::Value, StoreError> {
    serde_json::to_value(value).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn from_json<T: serde::de::DeserializeOwned>(value: &SqlValue, what: &str) -> Result<T, StoreError> {
    match value {
        SqlValue::Json(v) => serde_json::from_value(v.clone()),
        SqlValue::Text(t) => serde_json::from_str(t),
        _ => return Err(corrupt(what)),
    }
    .map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("unreadable {what}"))
}

fn company_row(r: &[SqlValue]) -> Result<CompanyRow, StoreError> {
    let profile = match &r[2] {
        SqlValue::Json(v) => serde_json::from_value(v.clone()),
        SqlValue::Text(t) => serde_json::from_str(t),
        _ => return Err(corrupt("company profile")),
    }
    .map_err(|e| StoreError::Corrupt(format!("company profile: {e}")))?;
    Ok(CompanyRow {
        id: r[0].as_uuid().ok_or_else(|| corrupt("company id"))?,
        ruc: r[1].as_text().ok_or_else(|| corrupt("ruc"))?,
        profile,
        stream_id: r[3].as_text().ok_or_else(|| corrupt("stream id"))?,
        created_at: r[4].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
        updated_at: r[5].as_timestamp().ok_or_else(|| corrupt("updated_at"))?,
        config_version: r[6].as_i64().ok_or_else(|| corrupt("config_version"))?,
    })
}

/// The tenant's companies (only `only` when the caller is scoped to one), by RUC.
pub async fn companies(
    store: &SharedStore,
    tenant: TenantId,
    only: Option<Uuid>,
) -> Result<Vec<CompanyRow>, StoreError> {
    let rows = match only {
        None => store
            .query(
                "SELECT id, ruc, profile, stream_id, created_at, updated_at, config_version FROM companies \
                     WHERE tenant_id = $1 ORDER BY ruc",
                &[SqlValue::Uuid(tenant.as_uuid())],
            )
            .await?,
        Some(id) => store
            .query(
                "SELECT id, ruc, profile, stream_id, created_at, updated_at, config_version FROM companies \
                     WHERE tenant_id = $1 AND id = $2",
                &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(id)],
            )
            .await?,
    };
    rows.iter().map(|r| company_row(r)).collect()
}

/// One company of the tenant.
pub async fn company(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
) -> Result<Option<CompanyRow>, StoreError> {
    Ok(companies(store, tenant, Some(id)).await?.into_iter().next())
}

/// A branch.
#[derive(Debug, Clone, PartialEq)]
pub struct BranchRow {
    /// Its company.
    pub company_id: Uuid,
    /// The branch.
    pub branch: Branch,
    /// Added.
    pub created_at: DateTime<Utc>,
}

fn branch_row(r: &[SqlValue]) -> Result<BranchRow, StoreError> {
    let branch = match &r[1] {
        SqlValue::Json(v) => serde_json::from_value(v.clone()),
        SqlValue::Text(t) => serde_json::from_str(t),
        _ => return Err(corrupt("branch details")),
    }
    .map_err(|e| StoreError::Corrupt(format!("branch: {e}")))?;
    Ok(BranchRow {
        company_id: r[0].as_uuid().ok_or_else(|| corrupt("branch company"))?,
        branch,
        created_at: r[2].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
    })
}

/// The tenant's branches, of one company or all (`scope` limits a company-scoped caller).
pub async fn branches(
    store: &SharedStore,
    tenant: TenantId,
    company: Option<Uuid>,
) -> Result<Vec<BranchRow>, StoreError> {
    let rows = match company {
        Some(company) => {
            store
                .query(
                    "SELECT company_id, details, created_at FROM branches WHERE tenant_id = $1 AND company_id = $2 \
                     ORDER BY code",
                    &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(company)],
                )
                .await?
        }
        None => {
            store
                .query(
                    "SELECT company_id, details, created_at FROM branches WHERE tenant_id = $1 \
                     ORDER BY company_id, code",
                    &[SqlValue::Uuid(tenant.as_uuid())],
                )
                .await?
        }
    };
    rows.iter().map(|r| branch_row(r)).collect()
}

/// One branch of the tenant.
pub async fn branch(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
) -> Result<Option<BranchRow>, StoreError> {
    let rows = store
        .query(
            "SELECT company_id, details, created_at FROM branches WHERE tenant_id = $1 AND id = $2",
            &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(id)],
        )
        .await?;
    rows.first().map(|r| branch_row(r)).transpose()
}

/// An issuance point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointRow {
    /// Id.
    pub id: Uuid,
    /// Company.
    pub company_id: Uuid,
    /// Branch.
    pub branch_id: Uuid,
    /// Code.
    pub code: String,
    /// Name.
    pub name: Option<String>,
    /// Default of its branch.
    pub is_default: bool,
    /// Added.
    pub created_at: DateTime<Utc>,
}

fn point_row(r: &[SqlValue]) -> Result<PointRow, StoreError> {
    Ok(PointRow {
        id: r[0].as_uuid().ok_or_else(|| corrupt("point id"))?,
        company_id: r[1].as_uuid().ok_or_else(|| corrupt("point company"))?,
        branch_id: r[2].as_uuid().ok_or_else(|| corrupt("point branch"))?,
        code: r[3].as_text().ok_or_else(|| corrupt("point code"))?,
        name: r[4].non_null().and_then(SqlValue::as_text),
        is_default: r[5].as_i64().is_some_and(|v| v != 0),
        created_at: r[6].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
    })
}

/// One issuance point of the tenant.
pub async fn issuance_point(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
) -> Result<Option<PointRow>, StoreError> {
    let rows = store
        .query(
            "SELECT id, company_id, branch_id, code, name, is_default, created_at FROM issuance_points \
             WHERE tenant_id = $1 AND id = $2",
            &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(id)],
        )
        .await?;
    rows.first().map(|r| point_row(r)).transpose()
}

/// The tenant's issuance points (of one company, of one branch, when given), by company, branch
/// and code.
pub async fn issuance_points(
    store: &SharedStore,
    tenant: TenantId,
    company: Option<Uuid>,
    branch: Option<Uuid>,
) -> Result<Vec<PointRow>, StoreError> {
    let null = || SqlValue::TypedNull(kuatia_application::projection::SqlType::Uuid);
    let rows = store
        .query(
            "SELECT id, company_id, branch_id, code, name, is_default, created_at FROM issuance_points \
             WHERE tenant_id = $1 AND ($2 IS NULL OR company_id = $2) AND ($3 IS NULL OR branch_id = $3) \
             ORDER BY company_id, branch_id, code",
            &[
                SqlValue::Uuid(tenant.as_uuid()),
                company.map_or_else(null, SqlValue::Uuid),
                branch.map_or_else(null, SqlValue::Uuid),
            ],
        )
        .await?;
    rows.iter().map(|r| point_row(r)).collect()
}

/// Saved print settings of a company.
#[derive(Debug, Clone, PartialEq)]
pub struct PrintSettingsRow {
    /// Record id.
    pub id: Uuid,
    /// The settings.
    pub settings: kuatia_domain::print_settings::PrintSettings,
    /// First saved.
    pub created_at: DateTime<Utc>,
    /// Last saved.
    pub updated_at: DateTime<Utc>,
}

/// A company's saved print settings, if any.
pub async fn print_settings(
    store: &SharedStore,
    tenant: TenantId,
    company: Uuid,
) -> Result<Option<PrintSettingsRow>, StoreError> {
    let rows = store
        .query(
            "SELECT id, settings, created_at, updated_at FROM print_settings WHERE tenant_id = $1 AND company_id = $2",
            &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(company)],
        )
        .await?;
    rows.first()
        .map(|r| {
            let settings = match &r[1] {
                SqlValue::Json(v) => serde_json::from_value(v.clone()),
                SqlValue::Text(t) => serde_json::from_str(t),
                _ => return Err(corrupt("print settings")),
            }
            .map_err(|e| StoreError::Corrupt(format!("print settings: {e}")))?;
            Ok(PrintSettingsRow {
                id: r[0].as_uuid().ok_or_else(|| corrupt("settings id"))?,
                settings,
                created_at: r[2].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
                updated_at: r[3].as_timestamp().ok_or_else(|| corrupt("updated_at"))?,
            })
        })
        .transpose()
}

/// A certificate of a company (no secret).
#[derive(Debug, Clone, PartialEq)]
pub struct CertificateRow {
    /// Its company.
    pub company_id: Uuid,
    /// The record.
    pub record: CertificateRecord,
    /// Uploaded.
    pub created_at: DateTime<Utc>,
}

fn certificate_row(r: &[SqlValue]) -> Result<CertificateRow, StoreError> {
    Ok(CertificateRow {
        company_id: r[0].as_uuid().ok_or_else(|| corrupt("certificate company"))?,
        record: from_json(&r[1], "certificate")?,
        created_at: r[2].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
    })
}

/// The tenant's certificates, of one company or all, newest first.
pub async fn certificates(
    store: &SharedStore,
    tenant: TenantId,
    company: Option<Uuid>,
) -> Result<Vec<CertificateRow>, StoreError> {
    let rows = match company {
        Some(company) => {
            store
                .query(
                    "SELECT company_id, record, created_at FROM certificates WHERE tenant_id = $1 AND company_id = $2 \
                     ORDER BY created_at DESC, id",
                    &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(company)],
                )
                .await?
        }
        None => {
            store
                .query(
                    "SELECT company_id, record, created_at FROM certificates WHERE tenant_id = $1 \
                     ORDER BY created_at DESC, id",
                    &[SqlValue::Uuid(tenant.as_uuid())],
                )
                .await?
        }
    };
    rows.iter().map(|r| certificate_row(r)).collect()
}

/// One certificate of the tenant.
pub async fn certificate(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
) -> Result<Option<CertificateRow>, StoreError> {
    let rows = store
        .query(
            "SELECT company_id, record, created_at FROM certificates WHERE tenant_id = $1 AND id = $2",
            &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(id)],
        )
        .await?;
    rows.first().map(|r| certificate_row(r)).transpose()
}

/// An emission channel of a company (secret ids only).
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelRow {
    /// Its company.
    pub company_id: Uuid,
    /// The record.
    pub channel: EmissionChannel,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

fn channel_row(r: &[SqlValue]) -> Result<ChannelRow, StoreError> {
    Ok(ChannelRow {
        company_id: r[0].as_uuid().ok_or_else(|| corrupt("channel company"))?,
        channel: from_json(&r[1], "emission channel")?,
        created_at: r[2].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
        updated_at: r[3].as_timestamp().ok_or_else(|| corrupt("updated_at"))?,
    })
}

/// The tenant's channels, of one company or all, in creation order.
pub async fn channels(
    store: &SharedStore,
    tenant: TenantId,
    company: Option<Uuid>,
) -> Result<Vec<ChannelRow>, StoreError> {
    let rows = match company {
        Some(company) => {
            store
                .query(
                    "SELECT company_id, record, created_at, updated_at FROM emission_channels \
                     WHERE tenant_id = $1 AND company_id = $2 ORDER BY created_at, id",
                    &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(company)],
                )
                .await?
        }
        None => {
            store
                .query(
                    "SELECT company_id, record, created_at, updated_at FROM emission_channels \
                     WHERE tenant_id = $1 ORDER BY company_id, created_at, id",
                    &[SqlValue::Uuid(tenant.as_uuid())],
                )
                .await?
        }
    };
    rows.iter().map(|r| channel_row(r)).collect()
}

/// One channel of the tenant.
pub async fn channel(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
) -> Result<Option<ChannelRow>, StoreError> {
    let rows = store
        .query(
            "SELECT company_id, record, created_at, updated_at FROM emission_channels \
             WHERE tenant_id = $1 AND id = $2",
            &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(id)],
        )
        .await?;
    rows.first().map(|r| channel_row(r)).transpose()
}

/// A company's branches with their issuance points: `(branch id, is_default, [(point id,
/// is_default)])`, the shape default resolution and readiness take.
pub async fn locations(
    store: &SharedStore,
    tenant: TenantId,
    company: Uuid,
) -> Result<Vec<BranchWithPoints>, StoreError> {
    let branches = branches(store, tenant, Some(company)).await?;
    let points = store
        .query(
            "SELECT branch_id, id, is_default FROM issuance_points WHERE tenant_id = $1 AND company_id = $2 \
             ORDER BY code",
            &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(company)],
        )
        .await?;
    let mut out: Vec<BranchWithPoints> = branches
        .into_iter()
        .map(|b| (b.branch.branch_id, b.branch.is_default, Vec::new()))
        .collect();
    for p in &points {
        let branch = p[0].as_uuid().ok_or_else(|| corrupt("point branch"))?;
        let id = p[1].as_uuid().ok_or_else(|| corrupt("point id"))?;
        let is_default = p[2].as_i64().is_some_and(|v| v != 0);
        if let Some(entry) = out.iter_mut().find(|(b, _, _)| *b == branch) {
            entry.2.push((id, is_default));
        }
    }
    Ok(out)
}

/// What intake needs of a company's configuration, read together: the intake port's type.
pub use kuatia_application::process::ports::CompanySnapshot;

/// Company snapshots kept per process, keyed by tenant and company and reused while the
/// company's `config_version` stays the same — so intake reads one row, not six tables, per
/// request, and still sees a change made through any instance at once (the version is read from
/// the database on every request).
#[derive(Debug, Default)]
pub struct SnapshotCache {
    entries: std::sync::Mutex<std::collections::HashMap<(TenantId, Uuid), std::sync::Arc<CompanySnapshot>>>,
}

impl SnapshotCache {
    /// At most this many companies are kept; past it the cache starts over.
    const CAPACITY: usize = 10_000;

    fn get(&self, tenant: TenantId, company: &CompanyConfig) -> Option<std::sync::Arc<CompanySnapshot>> {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        entries
            .get(&(tenant, company.id))
            .filter(|s| s.company.config_version == company.config_version)
            .cloned()
    }

    fn put(&self, tenant: TenantId, snapshot: std::sync::Arc<CompanySnapshot>) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if entries.len() >= Self::CAPACITY {
            entries.clear();
        }
        entries.insert((tenant, snapshot.company.id), snapshot);
    }
}

/// A company's configuration for intake: from `cache` when its `config_version` has not moved,
/// otherwise read and cached. `None`: no such company in the tenant.
pub async fn company_snapshot(
    store: &SharedStore,
    cache: &SnapshotCache,
    tenant: TenantId,
    company_id: Uuid,
) -> Result<Option<std::sync::Arc<CompanySnapshot>>, StoreError> {
    let Some(company) = company(store, tenant, company_id).await? else {
        return Ok(None);
    };
    let company = CompanyConfig {
        id: company.id,
        ruc: company.ruc,
        profile: company.profile,
        config_version: company.config_version,
    };
    if let Some(hit) = cache.get(tenant, &company) {
        return Ok(Some(hit));
    }
    // Read after the version: a change landing in between makes this snapshot newer than its
    // label, never older, and the next request reloads.
    let snapshot = std::sync::Arc::new(CompanySnapshot {
        channels: channels(store, tenant, Some(company_id))
            .await?
            .into_iter()
            .map(|r| r.channel)
            .collect(),
        locations: locations(store, tenant, company_id).await?,
        certificates: certificates(store, tenant, Some(company_id))
            .await?
            .into_iter()
            .map(|r| r.record)
            .collect(),
        print_settings_saved: print_settings(store, tenant, company_id).await?.is_some(),
        company,
    });
    cache.put(tenant, snapshot.clone());
    Ok(Some(snapshot))
}
