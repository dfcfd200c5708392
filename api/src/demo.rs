//! Demo mode: on first start with the embedded default (or `KUATIA_DEMO=1`), a
//! demo tenant that can issue at once, seeded through the same use cases the API runs: a company
//! (RUC 80069563-1), branch 001 with issuance point 001, a self-signed certificate with that RUC in
//! its subject, a `sifen` channel (test environment) pointing at the built-in simulator, an
//! `autoimpresor` channel, and print settings. The owner API key is written to
//! `<data_dir>/demo-api-key` (mode 0600) and printed with a ready-to-paste `curl`.
//!
//! Every step checks what exists first, so a start interrupted half-way finishes the seed on the
//! next start, and a second instance starting at the same time finds the slug taken and reuses
//! what the first one made.

use anyhow::Context;
use chrono::{Datelike, Duration, NaiveDate, Utc};
use kuatia_application::access::{self, KeyRequest};
use kuatia_application::configuration::{self, CertificateUpload, ChannelSecrets};
use kuatia_application::event_store::EventMetadata;
use kuatia_domain::access::Role;
use kuatia_domain::channel::{
    AutoimpresorSettings, ChannelKind, EmissionChannel, SifenEnvironment, SifenSettings,
};
use kuatia_domain::company::{
    Branch, CompanyCommand, CompanyProfile, EconomicActivity, IssuancePoint, TaxpayerType,
};
use kuatia_domain::print_settings::PrintSettings;
use kuatia_domain::ruc::Ruc;
use kuatia_domain::tenancy::{Environment, TenantId, TenantSlug};
use kuatia_infrastructure::config::Config;
use kuatia_infrastructure::selfsigned::SelfSigned;
use kuatia_projections::configuration as read;
use std::path::Path;
use uuid::Uuid;
use zeroize::Zeroizing;

use crate::state::AppState;

/// The demo tenant's slug.
pub const SLUG: &str = "demo";
/// The demo company's RUC.
pub const RUC: &str = "80069563-1";
/// The CSC of SIFEN's test examples, accepted by the simulator.
pub const CSC: &str = "ABCD0000000000000000000000000000";

/// What the demo seed left for the person starting the service.
#[derive(Debug)]
pub struct Demo {
    /// The tenant.
    pub tenant: TenantId,
    /// An owner key (`kt_test_…`).
    pub api_key: Zeroizing<String>,
    /// The company.
    pub company_id: Uuid,
    /// The console's demo login (an owner of the tenant): email and password; `None` when the
    /// user exists but its password file is gone.
    pub console_login: Option<(String, Zeroizing<String>)>,
}

/// The console's demo user.
pub const CONSOLE_EMAIL: &str = "demo@kuatia.com.py";

/// The console's demo user, an owner of the demo tenant, with its password saved in
/// `<data_dir>/demo-console-password` (mode 0600): registered, invited and accepted through the
/// identity use cases, once.
async fn console_login(
    state: &AppState,
    config: &Config,
    tenant: TenantId,
) -> anyhow::Result<Option<(String, Zeroizing<String>)>> {
    use kuatia_application::identity;
    let path = config.data_dir.join("demo-console-password");
    if let Ok(saved) = std::fs::read_to_string(&path) {
        return Ok(Some((
            CONSOLE_EMAIL.to_owned(),
            Zeroizing::new(saved.trim().to_owned()),
        )));
    }
    let password = Zeroizing::new(access::random_base62(20));
    let user = match identity::register(&state.store, CONSOLE_EMAIL, &password, Some("Demo".to_owned())).await
    {
        Ok(user) => user,
        // Registered before, its password file since removed: the console login is not shown.
        Err(identity::IdentityError::EmailRefused) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let stream = kuatia_domain::tenant::stream_id(&TenantSlug::parse(SLUG).context("demo slug")?);
    let invitation = identity::invite(
        &state.store,
        tenant,
        &stream,
        CONSOLE_EMAIL,
        Role::Owner,
        Role::Owner,
        metadata(),
    )
    .await
    .context("inviting the demo console user")?;
    identity::accept_invitation(&state.store, tenant, &stream, invitation.id, &user, metadata())
        .await
        .context("accepting the demo console invitation")?;
    write_key(&path, &password).context("saving the demo console password")?;
    Ok(Some((CONSOLE_EMAIL.to_owned(), password)))
}

fn metadata() -> EventMetadata {
    EventMetadata {
        actor: Some("system:demo".to_owned()),
        ..EventMetadata::default()
    }
}

fn key_file(config: &Config) -> std::path::PathBuf {
    config.data_dir.join("demo-api-key")
}

fn write_key(path: &Path, key: &str) -> anyhow::Result<()> {
    use std::io::Write;
    if let Some(dir) = path.parent() {
        kuatia_infrastructure::create_private_dir_all(dir)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(key.as_bytes())?;
    file.sync_all()?;
    Ok(())
}

async fn tenant_and_key(state: &AppState, config: &Config) -> anyhow::Result<(TenantId, Zeroizing<String>)> {
    let path = key_file(config);
    let slug = TenantSlug::parse(SLUG).context("demo slug")?;
    let existing = kuatia_projections::access::tenant_id_by_slug(&state.store, SLUG).await?;
    let tenant = match existing {
        Some(tenant) => tenant,
        None => match access::create_tenant(
            &state.store,
            slug.clone(),
            "Demo".to_owned(),
            Environment::Demo,
            metadata(),
        )
        .await
        {
            Ok((tenant, key)) => {
                write_key(&path, &key.key).context("saving the demo API key")?;
                return Ok((tenant, Zeroizing::new(key.key)));
            }
            Err(access::AccessError::SlugTaken) => {
                kuatia_projections::access::tenant_id_by_slug(&state.store, SLUG)
                    .await?
                    .context("the demo tenant vanished")?
            }
            Err(e) => return Err(e.into()),
        },
    };
    // The tenant exists: reuse the saved key while it still authenticates, else issue another.
    if let Ok(saved) = std::fs::read_to_string(&path) {
        let saved = Zeroizing::new(saved.trim().to_owned());
        if let Some(row) =
            kuatia_projections::access::key_by_hash(&state.store, &access::sha256_hex(&saved)).await?
            && row.tenant_id == tenant
            && row.is_active(Utc::now())
        {
            return Ok((tenant, saved));
        }
    }
    let key = access::issue_key(
        &state.store,
        tenant,
        &kuatia_domain::tenant::stream_id(&slug),
        Environment::Demo,
        KeyRequest {
            name: "demo".to_owned(),
            role: Role::Owner,
            company_id: None,
            expires_at: None,
        },
        Role::Owner,
        metadata(),
    )
    .await?;
    write_key(&path, &key.key).context("saving the demo API key")?;
    Ok((tenant, Zeroizing::new(key.key)))
}

fn profile() -> CompanyProfile {
    CompanyProfile {
        legal_name: "DEMO S.A.".to_owned(),
        trade_name: Some("Kuatia Demo".to_owned()),
        taxpayer_type: TaxpayerType::LegalEntity,
        tax_regime_code: Some(8),
        address: "Avda. Mcal. López".to_owned(),
        house_number: "1234".to_owned(),
        department_code: 1,
        department_name: "CAPITAL".to_owned(),
        district_code: Some(1),
        district_name: Some("ASUNCION (DISTRITO)".to_owned()),
        city_code: 1,
        city_name: "ASUNCION (DISTRITO)".to_owned(),
        phone: "021 000 000".to_owned(),
        email: "facturas@demo.com.py".to_owned(),
        economic_activities: vec![EconomicActivity {
            code: "62010".to_owned(),
            description: "Actividades de programación informática".to_owned(),
        }],
    }
}

/// Seeds what is missing and returns the key to print.
pub async fn seed(state: &AppState, config: &Config) -> anyhow::Result<Demo> {
    let (tenant, api_key) = tenant_and_key(state, config).await?;
    let store = &state.store;
    let ruc = Ruc::parse(RUC).context("demo RUC")?;
    let company = match read::companies(store, tenant, None).await?.into_iter().next() {
        Some(company) => company,
        None => {
            let id =
                configuration::register_company(store, tenant, ruc.clone(), profile(), metadata()).await?;
            read::company(store, tenant, id)
                .await?
                .context("the demo company")?
        }
    };
    let change = |command: CompanyCommand| {
        configuration::change_company(store, tenant, &company.stream_id, command, metadata())
    };

    if read::branches(store, tenant, Some(company.id)).await?.is_empty() {
        change(CompanyCommand::AddBranch(Branch {
            branch_id: Uuid::now_v7(),
            code: "001".to_owned(),
            name: "Casa central".to_owned(),
            address: None,
            house_number: None,
            city_code: None,
            city_name: None,
            department_code: None,
            department_name: None,
            is_default: true,
        }))
        .await?;
    }
    let locations = read::locations(store, tenant, company.id).await?;
    let (branch_id, _, points) = locations.first().context("the demo branch")?.clone();
    let point_id = match points.first() {
        Some((point, _)) => *point,
        None => {
            let point_id = Uuid::now_v7();
            change(CompanyCommand::AddIssuancePoint(IssuancePoint {
                point_id,
                branch_id,
                code: "001".to_owned(),
                name: Some("Caja 1".to_owned()),
                is_default: true,
            }))
            .await?;
            point_id
        }
    };

    let certificate_id = match read::certificates(store, tenant, Some(company.id)).await?.first() {
        Some(row) => row.record.certificate_id,
        None => {
            let password = Zeroizing::new(access::generate_key(Environment::Demo).secret);
            let pfx = tokio::task::spawn_blocking({
                let password = password.clone();
                move || SelfSigned::for_ruc("DEMO S.A.", RUC, 825).pfx(&password)
            })
            .await
            .context("generating the demo certificate")??;
            configuration::add_certificate(
                store,
                &state.vault,
                &state.pfx_slots,
                tenant,
                &company.stream_id,
                CertificateUpload {
                    pfx,
                    password,
                    label: Some("demo (self-signed)".to_owned()),
                },
                metadata(),
            )
            .await?
            .certificate_id
        }
    };

    let channels = read::channels(store, tenant, Some(company.id)).await?;
    let today = kuatia_domain::local_time::paraguay_today(Utc::now());
    let sim = format!("http://{}", config.sifen_sim_listen);
    if !channels.iter().any(|c| c.channel.kind == ChannelKind::Sifen) {
        let channel = EmissionChannel {
            channel_id: Uuid::now_v7(),
            kind: ChannelKind::Sifen,
            is_default: true,
            endpoint: sim.clone(),
            client_id: None,
            credentials_secret_id: None,
            sifen: Some(SifenSettings {
                environment: SifenEnvironment::Test,
                timbrado: "12345678".to_owned(),
                timbrado_valid_from: NaiveDate::from_ymd_opt(today.year(), 1, 1).unwrap_or(today),
                csc_id: "0001".to_owned(),
                certificate_id,
                csc_secret_id: Uuid::nil(),
                remision_notice: None,
            }),
            autoimpresor: None,
        };
        let secrets = ChannelSecrets {
            credential: None,
            csc: Some(Zeroizing::new(CSC.to_owned())),
        };
        configuration::configure_channel(
            store,
            &state.vault,
            tenant,
            &company.stream_id,
            channel,
            secrets,
            metadata(),
        )
        .await?;
    }
    if !channels
        .iter()
        .any(|c| c.channel.kind == ChannelKind::Autoimpresor)
    {
        let channel = EmissionChannel {
            channel_id: Uuid::now_v7(),
            kind: ChannelKind::Autoimpresor,
            is_default: false,
            endpoint: format!("{sim}/autoimpresor"),
            client_id: None,
            credentials_secret_id: None,
            sifen: None,
            autoimpresor: Some(AutoimpresorSettings {
                authorization: "DEMO-AUT-0001".to_owned(),
                declared_software: Some("kuatia".to_owned()),
                timbrado: "87654321".to_owned(),
                valid_from: today - Duration::days(1),
                valid_to: today + Duration::days(365),
                branch_id,
                issuance_point_id: point_id,
                range_start: 1,
                range_end: 100_000,
                next_number: 1,
            }),
        };
        configuration::configure_channel(
            store,
            &state.vault,
            tenant,
            &company.stream_id,
            channel,
            ChannelSecrets::default(),
            metadata(),
        )
        .await?;
    }
    if read::print_settings(store, tenant, company.id).await?.is_none() {
        let mut settings = PrintSettings::defaults(&company.profile.legal_name);
        settings.business_activity = "Actividades de programación informática".to_owned();
        settings.footer_note = "Documento de demostración, sin valor fiscal".to_owned();
        change(CompanyCommand::SetPrintSettings {
            settings_id: Uuid::now_v7(),
            settings,
        })
        .await?;
    }
    let console_login = console_login(state, config, tenant).await?;
    Ok(Demo {
        tenant,
        api_key,
        company_id: company.id,
        console_login,
    })
}

/// Writes `<data_dir>/demo-invoice.json`: the sample invoice for the demo company, issued now
/// (SIFEN accepts documents issued up to 720 h before they are sent).
pub fn write_sample_invoice(config: &Config, demo: &Demo) -> anyhow::Result<std::path::PathBuf> {
    let mut invoice = kuatia_domain::document::canonical::sample_invoice();
    invoice["company_id"] = serde_json::json!(demo.company_id);
    let now = Utc::now().with_timezone(&kuatia_domain::local_time::offset());
    invoice["issue_datetime"] = serde_json::json!(now.format("%Y-%m-%dT%H:%M:%S%:z").to_string());
    invoice["seller"]["legal_name"] = serde_json::json!("DEMO S.A.");
    let path = config.data_dir.join("demo-invoice.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&invoice)?)?;
    Ok(path)
}

/// The banner printed to standard output (never to the log).
pub fn banner(demo: &Demo, base_url: &str, invoice: &Path) -> String {
    format!(
        "\n  kuatia demo mode: tenant {tenant}, company {company} (RUC {RUC})\n\
         \n  API key (owner; also in the data folder's demo-api-key):\n    {key}\n\
         \n  Issue an invoice (a new external_id each time; the same key retries it safely):\n\
         \n    id=DEMO-$(date +%s)\n\
         \x20   curl -s -X POST {base_url}/v1/documents \\\n\
         \x20     -H 'Authorization: Bearer {key}' \\\n\
         \x20     -H 'X-Tenant-Id: {tenant}' \\\n\
         \x20     -H \"Idempotency-Key: $id\" -H 'Content-Type: application/json' \\\n\
         \x20     -d \"$(sed \"s/ERP-0001/$id/\" {invoice})\"\n\
         \n  Is everything ready?  curl -s {base_url}/v1/emission-channels/readiness -H … (same two headers)\n\
         \n  API reference: {base_url}/docs\n{console}",
        console = match &demo.console_login {
            Some((email, password)) => format!(
                "\n  Web console: {base_url}/console  (log in as {email}, password {}; also in the data\n\
                 \x20 folder's demo-console-password)\n",
                password.as_str()
            ),
            None => format!("\n  Web console: {base_url}/console\n"),
        },
        tenant = demo.tenant,
        company = demo.company_id,
        key = demo.api_key.as_str(),
        invoice = invoice.display(),
    )
}
