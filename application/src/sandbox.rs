//! The sandbox preview (`docs/sandbox.md`): a canonical document run through validation, the DE,
//! its signature and QR, the channel and the printer, with nothing kept. The REST handler
//! (`POST /v1/sandbox/preview`) reads the request and calls [`preview`]; the console calls the
//! same.
//!
//! What makes a preview harmless:
//! - **Nothing is stored.** No event, no job, no artifact, no number series is touched: the DE is
//!   numbered from a reserved test range ([`ESTABLISHMENT`]-[`POINT`]-[`NUMBERS`]) drawn at
//!   random, never from the number series, and the artifacts go back inline in the answer.
//! - **Nothing fiscal.** The issuer is always in SIFEN's test environment, so `dNomEmi` is SIFEN's
//!   test literal and the QR points at the test consultation; printables carry the
//!   [`WATERMARK`].
//! - **Nothing leaves the process** except in [`Mode::SifenDev`], which sends the signed DE to a
//!   SIFEN test endpoint through [`PreviewSifen`]; [`Mode::DemoSimulated`] has SIFEN's checks
//!   answer in process.
//!
//! Whose configuration: without a requester ("anonymous") the seller of the document is the
//! issuer ([`sandbox_issuer`]), signing with a throw-away self-signed certificate for its RUC
//! ([`TestCertificates`]) and SIFEN's generic test CSC. With one (permission `use_sandbox`) the
//! preview runs intake's routing, readiness and validation ([`intake::prepare`]) and signs and
//! prints with the routed company's own configuration: its issuer data, certificate, CSC,
//! authorization and print settings — still numbered from the reserved range, in the test
//! environment, and stored nowhere.

use async_trait::async_trait;
use chrono::{DateTime, Datelike, NaiveDate, Utc};
use kuatia_domain::channel::{ChannelKind, SifenEnvironment};
use kuatia_domain::company::{EconomicActivity, TaxpayerType};
use kuatia_domain::document::aggregate::DocumentNumber;
use kuatia_domain::document::canonical::{self, CanonicalDocument, DocumentType, PartyTaxpayerType};
use kuatia_domain::document::issues::Issue;
use kuatia_domain::document::routing::Routing;
use kuatia_domain::document::validation::{self, RegistryAnswer, Validation, ValidationContext};
use kuatia_domain::print_settings::PrintSettings;
use kuatia_domain::ruc::Ruc;
use kuatia_domain::sifen::de::Issuer;
use kuatia_domain::sifen::exchange::{Answered, DeReception, SoapError};
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::ops::RangeInclusive;
use std::sync::Arc;
use zeroize::Zeroizing;

use crate::event_store::StoreError;
use crate::intake::{self, IntakePorts, Refusal, Requester};
use crate::printables::{AutoimpresorPrintable, PrintIssuer, Printable, Printer};
use crate::process::build::{self, MaterialError, SigningSetup};
use crate::process::ports::Signer;
use crate::process::printing::print_issuer;
use crate::vault::Vault;

/// The watermark across every previewed page.
pub const WATERMARK: &str = "SIN VALOR FISCAL";
/// The reserved establishment of previews.
pub const ESTABLISHMENT: &str = "999";
/// The reserved issuance point of previews.
pub const POINT: &str = "999";
/// The reserved numbers of previews, drawn at random.
pub const NUMBERS: RangeInclusive<u64> = 9_000_000..=9_999_999;
/// The timbrado of anonymous previews.
pub const TIMBRADO: &str = "12345678";
/// The autoimpresor authorization of anonymous previews.
pub const AUTHORIZATION: &str = "SANDBOX";
/// The issuer of the sample invoice (SIFEN's own test RUC); an anonymous preview whose document
/// names no readable seller issues under it.
pub const SAMPLE_RUC: &str = "80069563-1";
/// SIFEN's generic test CSC id.
pub const TEST_CSC_ID: &str = "0001";
/// SIFEN's generic test CSC.
pub const TEST_CSC: &str = "ABCD0000000000000000000000000000";
/// `dInfoFisc` of a previewed remisión when the configuration has no notice of its own.
const REMISION_NOTICE: &str = "Documento de prueba (sandbox de kuatia), sin valor fiscal";

/// What the preview does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// SIFEN channel; SIFEN's checks answer in process.
    DemoSimulated,
    /// SIFEN channel; sent to the SIFEN test endpoint (a simulator by default).
    SifenDev,
    /// Autoimpresor channel; the printable PDF.
    AutoimpresorTest,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 3] = [Self::DemoSimulated, Self::SifenDev, Self::AutoimpresorTest];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DemoSimulated => "demo_simulated",
            Self::SifenDev => "sifen_dev",
            Self::AutoimpresorTest => "autoimpresor_test",
        }
    }

    /// The channel it previews.
    pub fn channel(self) -> ChannelKind {
        match self {
            Self::DemoSimulated | Self::SifenDev => ChannelKind::Sifen,
            Self::AutoimpresorTest => ChannelKind::Autoimpresor,
        }
    }

    /// The mode of a channel when the request names none.
    pub fn of(channel: ChannelKind) -> Self {
        match channel {
            ChannelKind::Sifen => Self::DemoSimulated,
            ChannelKind::Autoimpresor => Self::AutoimpresorTest,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Ports.

/// Who answers a preview's DE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answerer {
    /// SIFEN's checks, run in process: nothing leaves it.
    InProcess,
    /// A SIFEN test endpoint (the configured one, else a simulator started for the preview).
    TestEndpoint,
}

/// The CSC a preview's QR is made with, which the checks must accept for its issuer.
#[derive(Debug, Clone, Copy)]
pub struct PreviewCsc<'a> {
    /// The issuer.
    pub issuer: &'a Ruc,
    /// `IdCSC`.
    pub id: &'a str,
    /// The secret.
    pub secret: &'a str,
}

/// SIFEN's answer to a preview, and where it came from.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The URL it was sent to, or `in-process simulator`.
    pub endpoint: String,
    /// The web service's name as SIFEN's table writes it (`siRecepDE`).
    pub service: &'static str,
    /// The answer.
    pub answered: Answered<DeReception>,
}

/// Where a preview's signed DE goes (siRecepDE, SIFEN's checks, the signature required).
#[async_trait]
pub trait PreviewSifen: Send + Sync {
    /// Sends one signed `rDE` to `answerer`, with `identity_pem` (the signing certificate) as the
    /// TLS client identity where there is TLS.
    async fn send_de(
        &self,
        answerer: Answerer,
        signed_rde: &str,
        identity_pem: &[u8],
        csc: PreviewCsc<'_>,
    ) -> Result<Exchange, SoapError>;
}

/// Throw-away certificates for anonymous previews.
#[async_trait]
pub trait TestCertificates: Send + Sync {
    /// A self-signed certificate with `ruc` in its subject (SIFEN's checks want the signer to be
    /// the issuer), private key and certificate as one PEM.
    async fn for_ruc(&self, ruc: &Ruc) -> Result<Arc<Zeroizing<Vec<u8>>>, String>;
}

/// What a preview reads and talks to.
#[derive(Clone)]
pub struct SandboxPorts {
    /// Intake's reads (company previews are routed and validated as intake does) and the clock.
    pub intake: IntakePorts,
    /// The company's certificate and CSC.
    pub vault: Vault,
    /// Signs the DE.
    pub signer: Arc<dyn Signer>,
    /// Renders the KuDE and the printable.
    pub printer: Arc<dyn Printer>,
    /// Anonymous previews' certificates.
    pub certificates: Arc<dyn TestCertificates>,
    /// SIFEN's checks, in process or at a test endpoint.
    pub sifen: Arc<dyn PreviewSifen>,
}

impl std::fmt::Debug for SandboxPorts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxPorts").finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// The answer.

/// Where the preview went and under which number.
#[derive(Debug, Clone, PartialEq)]
pub struct PreviewRouting {
    /// The channel.
    pub channel: ChannelKind,
    /// The company, branch and point whose configuration was used; `None` for anonymous
    /// previews (the sandbox's configuration).
    pub routed: Option<Routing>,
    /// The timbrado printed and signed.
    pub timbrado: String,
    /// `999-999-9NNNNNN`.
    pub number: String,
}

/// What the channel made of the preview.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// A signed DE, its KuDE and SIFEN's answer.
    Sifen {
        /// The CDC.
        cdc: String,
        /// The signed `rDE` with its QR.
        signed_xml: String,
        /// The KuDE (PDF).
        kude: Vec<u8>,
        /// SIFEN's answer.
        exchange: Box<Exchange>,
    },
    /// The autoimpresor printable.
    Autoimpresor {
        /// The PDF.
        pdf: Vec<u8>,
        /// The authorization printed.
        authorization: String,
        /// Its first valid day.
        valid_from: NaiveDate,
        /// Its last valid day.
        valid_to: NaiveDate,
    },
}

/// A preview.
#[derive(Debug, Clone)]
pub struct Preview {
    /// The mode that ran.
    pub mode: Mode,
    /// Where it went and its number.
    pub routing: PreviewRouting,
    /// The document, normalized (its channel set).
    pub document: CanonicalDocument,
    /// Non-blocking issues.
    pub warnings: Vec<Issue>,
    /// What the channel made of it.
    pub outcome: Outcome,
}

/// Why a preview stopped (nothing was kept either way).
#[derive(Debug)]
pub enum PreviewError {
    /// Intake refused the document (company previews): routing, readiness, scope, store.
    Refused(Refusal),
    /// The document does not pass business validation.
    Invalid(Validation),
    /// The DE cannot be built (a value the XSD refuses that validation let through).
    Unbuildable(String),
    /// The SIFEN test endpoint could not be reached, did not answer, or answered nonsense.
    Upstream(SoapError),
    /// Ours: configuration that vanished, a key that does not load, the printer.
    Internal(String),
}

impl From<StoreError> for PreviewError {
    fn from(e: StoreError) -> Self {
        Self::Refused(Refusal::Store(e))
    }
}

fn internal(what: &str, cause: impl std::fmt::Display) -> PreviewError {
    PreviewError::Internal(format!("sandbox: {what}: {cause}"))
}

// ---------------------------------------------------------------------------------------------
// The sample.

/// The sample invoice (`canonical::sample_invoice`), issued at `now` so SIFEN's 720-hour window
/// holds.
pub fn sample_document(now: DateTime<Utc>) -> Value {
    let mut document = canonical::sample_invoice();
    let local = now.with_timezone(&kuatia_domain::local_time::offset());
    document["issue_datetime"] = json!(local.format("%Y-%m-%dT%H:%M:%S%:z").to_string());
    document
}

/// What an empty request previews: the sample invoice, issued now, with the requester's company
/// and seller filled in when it sees exactly one company (or is scoped to one).
pub async fn sample(ports: &SandboxPorts, requester: Option<&Requester>) -> Result<Value, PreviewError> {
    let mut document = sample_document(ports.intake.clock.now());
    if let Some(requester) = requester {
        let companies = ports
            .intake
            .reads
            .companies(requester.tenant, requester.company_scope)
            .await?;
        if let [company] = companies.as_slice() {
            document["company_id"] = json!(company.id);
            document["seller"] = json!({"ruc": company.ruc, "legal_name": company.profile.legal_name});
        }
    }
    Ok(document)
}

// ---------------------------------------------------------------------------------------------
// Whose configuration.

/// What signing, sending and printing use.
struct Setup {
    routing: PreviewRouting,
    document: CanonicalDocument,
    warnings: Vec<Issue>,
    print_settings: PrintSettings,
    channel: ChannelSetup,
}

enum ChannelSetup {
    Sifen {
        issuer: Box<Issuer>,
        pem: Arc<Zeroizing<Vec<u8>>>,
        csc_id: String,
        csc: Zeroizing<String>,
    },
    Autoimpresor {
        issuer: PrintIssuer,
        authorization: String,
        valid_from: NaiveDate,
        valid_to: NaiveDate,
    },
}

/// The RUC an anonymous preview issues under: the seller's (the buyer's for an autofactura, whose
/// buyer is the issuing company), else the sample's.
pub fn issuer_ruc(document: &CanonicalDocument) -> Ruc {
    let named = if document.doc_type == DocumentType::Autofactura {
        document.buyer.as_ref().and_then(|b| b.ruc.as_deref())
    } else {
        document.seller.ruc.as_deref()
    };
    named.and_then(|r| Ruc::parse(r).ok()).unwrap_or_else(sample_ruc)
}

fn sample_ruc() -> Ruc {
    match Ruc::parse(SAMPLE_RUC) {
        Ok(ruc) => ruc,
        Err(e) => unreachable!("the sample RUC {SAMPLE_RUC} is valid: {e}"),
    }
}

/// The issuer of an anonymous preview: the document's own party for what it says (RUC, names,
/// email, street), sandbox placeholders for what a canonical party does not carry (location in
/// Asunción, phone, activity, timbrado), and the reserved point `999-999`. In SIFEN's test
/// environment, so `dNomEmi` is the test literal whatever the name.
pub fn sandbox_issuer(document: &CanonicalDocument, ruc: &Ruc, today: NaiveDate) -> Issuer {
    let party = if document.doc_type == DocumentType::Autofactura {
        document.buyer.clone().unwrap_or_default()
    } else {
        document.seller.clone()
    };
    let filled = |value: &Option<String>| {
        value
            .as_ref()
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let taxpayer_type = match party.taxpayer_type {
        Some(PartyTaxpayerType::Individual) => TaxpayerType::Individual,
        Some(PartyTaxpayerType::LegalEntity) => TaxpayerType::LegalEntity,
        None if ruc.is_legal_entity() => TaxpayerType::LegalEntity,
        None => TaxpayerType::Individual,
    };
    let street = filled(&party.address);
    Issuer {
        ruc: ruc.clone(),
        taxpayer_type,
        tax_regime: Some(8),
        legal_name: filled(&party.legal_name).unwrap_or_else(|| "kuatia sandbox".to_owned()),
        trade_name: filled(&party.trade_name),
        house_number: if street.is_some() {
            filled(&party.house_number).unwrap_or_else(|| "0".to_owned())
        } else {
            "1234".to_owned()
        },
        address: street.unwrap_or_else(|| "Avda. Mcal. López".to_owned()),
        department_code: 1,
        district_code: Some(1),
        district_name: Some("ASUNCION (DISTRITO)".to_owned()),
        city_code: 1,
        city_name: "ASUNCION (DISTRITO)".to_owned(),
        phone: "021 000 000".to_owned(),
        email: filled(&party.email).unwrap_or_else(|| "sandbox@example.com".to_owned()),
        branch_name: Some("Sandbox".to_owned()),
        economic_activities: vec![EconomicActivity {
            code: "62010".to_owned(),
            description: "Actividades de programación informática".to_owned(),
        }],
        timbrado: TIMBRADO.to_owned(),
        timbrado_valid_from: NaiveDate::from_ymd_opt(today.year(), 1, 1).unwrap_or(today),
        establishment: ESTABLISHMENT.to_owned(),
        point: POINT.to_owned(),
        environment: SifenEnvironment::Test,
        remision_notice: Some(REMISION_NOTICE.to_owned()),
    }
}

/// A preview's number, from the reserved range.
pub fn draw_number() -> u64 {
    rand::rng().random_range(NUMBERS)
}

fn printed_number(timbrado: &str, number: u64) -> DocumentNumber {
    DocumentNumber {
        timbrado: timbrado.to_owned(),
        establishment: ESTABLISHMENT.to_owned(),
        point: POINT.to_owned(),
        number: format!("{number:07}"),
    }
}

async fn anonymous_setup(
    ports: &SandboxPorts,
    mut document: CanonicalDocument,
    mode: Mode,
    now: DateTime<Utc>,
) -> Result<Setup, PreviewError> {
    let channel = mode.channel();
    document.channel = Some(channel);
    let ruc = issuer_ruc(&document);
    // The registry is not asked for anonymous previews: the taxpayer lookup service has its own
    // quotas, which an unauthenticated preview must not get round.
    let validation = validation::validate(
        &document,
        &ValidationContext {
            channel,
            company_ruc: &ruc,
            environment: (channel == ChannelKind::Sifen).then_some(SifenEnvironment::Test),
            now,
            certificate_expires_in_days: None,
            buyer_registry: RegistryAnswer::NotLoaded,
        },
    );
    if !validation.is_valid() {
        return Err(PreviewError::Invalid(validation));
    }
    let today = kuatia_domain::local_time::paraguay_today(now);
    let issuer = sandbox_issuer(&document, &ruc, today);
    let print_settings = {
        let mut settings = PrintSettings::defaults(&issuer.legal_name);
        settings.footer_note = "Vista previa del sandbox de kuatia, sin valor fiscal".to_owned();
        settings
    };
    let channel_setup = match channel {
        ChannelKind::Sifen => ChannelSetup::Sifen {
            pem: ports
                .certificates
                .for_ruc(&ruc)
                .await
                .map_err(|e| internal("generating the throw-away certificate", e))?,
            issuer: Box::new(issuer),
            csc_id: TEST_CSC_ID.to_owned(),
            csc: Zeroizing::new(TEST_CSC.to_owned()),
        },
        ChannelKind::Autoimpresor => {
            // The validity covers the issue date's year, so any date validation accepts prints.
            let year =
                kuatia_domain::local_time::paraguay(document.issue_datetime.with_timezone(&Utc)).year();
            ChannelSetup::Autoimpresor {
                issuer: PrintIssuer {
                    legal_name: issuer.legal_name.clone(),
                    trade_name: issuer.trade_name.clone(),
                    ruc: ruc.to_string(),
                    address: format!("{} {}", issuer.address, issuer.house_number),
                    phone: Some(issuer.phone.clone()),
                    email: Some(issuer.email.clone()),
                },
                authorization: AUTHORIZATION.to_owned(),
                valid_from: NaiveDate::from_ymd_opt(year, 1, 1).unwrap_or(today),
                valid_to: NaiveDate::from_ymd_opt(year, 12, 31).unwrap_or(today),
            }
        }
    };
    Ok(Setup {
        routing: PreviewRouting {
            channel,
            routed: None,
            timbrado: TIMBRADO.to_owned(),
            number: String::new(),
        },
        document,
        warnings: validation.warnings,
        print_settings,
        channel: channel_setup,
    })
}

async fn company_setup(
    ports: &SandboxPorts,
    requester: &Requester,
    document: CanonicalDocument,
    request_hash: String,
    mode: Option<Mode>,
) -> Result<(Setup, Mode), PreviewError> {
    let prepared = intake::prepare(&ports.intake, requester, document, request_hash)
        .await
        .map_err(PreviewError::Refused)?;
    if !prepared.validation.is_valid() {
        return Err(PreviewError::Invalid(prepared.validation));
    }
    let routing = prepared.routing;
    let channel = routing.channel;
    let mode = mode.unwrap_or_else(|| Mode::of(channel));
    if mode.channel() != channel {
        // Only reachable when the mode was implied; an explicit mode named the channel.
        return Err(internal("routing", "the routed channel is not the mode's"));
    }
    let tenant = requester.tenant;
    let config = &ports.intake.config;
    let company = &prepared.snapshot.company;
    let print_settings = config
        .print_settings(tenant, company.id)
        .await?
        .unwrap_or_else(|| PrintSettings::defaults(&company.profile.legal_name));
    let mut document = prepared.document;
    document.channel = Some(channel);
    let (channel_setup, timbrado) = match (&prepared.channel.sifen, &prepared.channel.autoimpresor) {
        (Some(sifen), _) if channel == ChannelKind::Sifen => {
            let material = build::signing_material(
                config.as_ref(),
                &ports.vault,
                tenant,
                company,
                sifen,
                routing.branch_id,
                routing.issuance_point_id,
            )
            .await
            .map_err(|e| match e {
                MaterialError::Missing(what) => internal("the routed configuration", what),
                MaterialError::Store(e) => PreviewError::from(e),
                MaterialError::Vault(what, e) => internal(what, e),
            })?;
            let mut issuer = material.issuer;
            issuer.environment = SifenEnvironment::Test;
            issuer.establishment = ESTABLISHMENT.to_owned();
            issuer.point = POINT.to_owned();
            if issuer.remision_notice.is_none() {
                issuer.remision_notice = Some(REMISION_NOTICE.to_owned());
            }
            (
                ChannelSetup::Sifen {
                    issuer: Box::new(issuer),
                    pem: Arc::new(material.pem),
                    csc_id: sifen.csc_id.clone(),
                    csc: Zeroizing::new(material.csc),
                },
                sifen.timbrado.clone(),
            )
        }
        (_, Some(auto)) if channel == ChannelKind::Autoimpresor => {
            let branch = config
                .branch(tenant, routing.branch_id)
                .await?
                .ok_or_else(|| internal("routing", "the routed branch vanished"))?;
            (
                ChannelSetup::Autoimpresor {
                    issuer: print_issuer(&company.ruc, &company.profile, Some(&branch)),
                    authorization: auto.authorization.clone(),
                    valid_from: auto.valid_from,
                    valid_to: auto.valid_to,
                },
                auto.timbrado.clone(),
            )
        }
        _ => {
            return Err(internal(
                "routing",
                "the routed channel has no settings for its kind",
            ));
        }
    };
    Ok((
        Setup {
            routing: PreviewRouting {
                channel,
                routed: Some(routing),
                timbrado,
                number: String::new(),
            },
            document,
            warnings: prepared.validation.warnings,
            print_settings,
            channel: channel_setup,
        },
        mode,
    ))
}

// ---------------------------------------------------------------------------------------------
// Running it.

async fn render(
    ports: &SandboxPorts,
    printable: Printable,
    settings: &PrintSettings,
) -> Result<Vec<u8>, PreviewError> {
    ports
        .printer
        .render(printable, settings)
        .await
        .map_err(|e| internal("printing", e))
}

/// Runs a preview of `document` (already read as a CanonicalDocumentV1, its channel aligned with
/// `mode`): validated under the requester's configuration (or the sandbox's when there is no
/// requester), numbered from the reserved range, then signed, sent or simulated and printed.
/// Nothing is written anywhere. `request_hash` is intake's (`idempotency::request_hash` of the
/// body).
pub async fn preview(
    ports: &SandboxPorts,
    requester: Option<&Requester>,
    document: CanonicalDocument,
    request_hash: String,
    mode: Option<Mode>,
) -> Result<Preview, PreviewError> {
    let now = ports.intake.clock.now();
    let (setup, mode) = match requester {
        None => {
            let mode = mode.unwrap_or_else(|| Mode::of(document.channel.unwrap_or(ChannelKind::Sifen)));
            (anonymous_setup(ports, document, mode, now).await?, mode)
        }
        Some(requester) => company_setup(ports, requester, document, request_hash, mode).await?,
    };
    let Setup {
        mut routing,
        document,
        warnings,
        print_settings,
        channel,
    } = setup;
    let number = draw_number();
    routing.number = format!("{ESTABLISHMENT}-{POINT}-{number:07}");
    let (document, outcome) = match channel {
        ChannelSetup::Sifen {
            issuer,
            pem,
            csc_id,
            csc,
        } => {
            let key = {
                let (signer, pem) = (ports.signer.clone(), pem.clone());
                tokio::task::spawn_blocking(move || signer.key(&pem))
                    .await
                    .map_err(|e| internal("the signing key", e))?
                    .map_err(|e| internal("the signing key", e))?
            };
            let (document, issuer, csc_id, csc, signed) = tokio::task::spawn_blocking(move || {
                let signed = build::build_and_sign(
                    &document,
                    &SigningSetup {
                        issuer: &issuer,
                        key: key.as_ref(),
                        csc_id: &csc_id,
                        csc: &csc,
                        environment: SifenEnvironment::Test,
                    },
                    "sandbox".to_owned(),
                    number,
                    now,
                );
                (document, issuer, csc_id, csc, signed)
            })
            .await
            .map_err(|e| internal("signing", e))?;
            let signed = signed.map_err(|message| {
                // What the DE builder cannot write is the document's problem; signing and the QR
                // failing are ours.
                if message.starts_with("the DE cannot be built") {
                    PreviewError::Unbuildable(message)
                } else {
                    internal("signing", message)
                }
            })?;
            let answerer = match mode {
                Mode::SifenDev => Answerer::TestEndpoint,
                _ => Answerer::InProcess,
            };
            let kude = render(
                ports,
                Printable::Kude {
                    signed_xml: signed.xml.as_bytes().to_vec(),
                    watermark: Some(WATERMARK.to_owned()),
                },
                &print_settings,
            );
            let csc = PreviewCsc {
                issuer: &issuer.ruc,
                id: &csc_id,
                secret: &csc,
            };
            let exchange = ports.sifen.send_de(answerer, &signed.xml, &pem, csc);
            let (kude, exchange) = tokio::join!(kude, exchange);
            let (kude, exchange) = (kude?, exchange.map_err(PreviewError::Upstream)?);
            (
                document,
                Outcome::Sifen {
                    cdc: signed.cdc,
                    signed_xml: signed.xml,
                    kude,
                    exchange: Box::new(exchange),
                },
            )
        }
        ChannelSetup::Autoimpresor {
            issuer,
            authorization,
            valid_from,
            valid_to,
        } => {
            let issued_at = kuatia_domain::local_time::paraguay(document.issue_datetime.with_timezone(&Utc));
            let printable = AutoimpresorPrintable {
                document: document.clone(),
                issuer,
                authorization: authorization.clone(),
                valid_from,
                valid_to,
                number: printed_number(&routing.timbrado, number),
                issued_at,
                watermark: Some(WATERMARK.to_owned()),
            };
            let pdf = render(
                ports,
                Printable::Autoimpresor(Box::new(printable)),
                &print_settings,
            )
            .await?;
            (
                document,
                Outcome::Autoimpresor {
                    pdf,
                    authorization,
                    valid_from,
                    valid_to,
                },
            )
        }
    };
    Ok(Preview {
        mode,
        routing,
        document,
        warnings,
        outcome,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_issuer_is_the_seller_at_the_reserved_point_in_the_test_environment() {
        let doc = canonical::from_value(sample_document(Utc::now())).expect("sample");
        let ruc = issuer_ruc(&doc);
        assert_eq!(ruc.to_string(), SAMPLE_RUC);
        let issuer = sandbox_issuer(&doc, &ruc, NaiveDate::from_ymd_opt(2026, 5, 1).expect("date"));
        assert_eq!(issuer.legal_name, "DE GENERACION ELECTRONICA S.A.");
        assert_eq!(
            (issuer.establishment.as_str(), issuer.point.as_str()),
            (ESTABLISHMENT, POINT)
        );
        assert_eq!(issuer.environment, SifenEnvironment::Test);
        assert_eq!(issuer.taxpayer_type, TaxpayerType::LegalEntity);
        for _ in 0..1000 {
            assert!(NUMBERS.contains(&draw_number()));
        }
    }

    #[test]
    fn an_unreadable_seller_ruc_issues_under_the_sample_ruc() {
        let mut doc = canonical::from_value(sample_document(Utc::now())).expect("sample");
        doc.seller.ruc = Some("not a ruc".to_owned());
        assert_eq!(issuer_ruc(&doc).to_string(), SAMPLE_RUC);
        doc.seller.ruc = None;
        assert_eq!(issuer_ruc(&doc).to_string(), SAMPLE_RUC);
    }
}
