//! The sandbox preview (`docs/sandbox.md`): a canonical
//! document run through validation, the DE, its signature and QR, the channel and the printer,
//! with nothing kept. The route is `crate::routes::sandbox`; this module is the preview itself.
//!
//! What makes a preview harmless:
//! - **Nothing is stored.** No event, no job, no artifact, no number series is touched: the DE is
//!   numbered from a reserved test range ([`ESTABLISHMENT`]-[`POINT`]-[`NUMBERS`]) drawn at
//!   random, never from `number_series`, and the artifacts go back inline in the answer.
//! - **Nothing fiscal.** The issuer is always in SIFEN's test environment, so `dNomEmi` is SIFEN's
//!   test literal and the QR points at the test consultation; printables carry the
//!   [`WATERMARK`].
//! - **Nothing leaves the process** except in [`Mode::SifenDev`], which sends the signed DE
//!   through the SOAP client to a SIFEN test endpoint (a simulator of its own by default,
//!   [`SifenTarget`]). [`Mode::DemoSimulated`] runs the simulator's checks in process: its router
//!   answers the same SOAP request without a socket.
//!
//! Whose configuration: without credentials ("anonymous") the seller of the document is the
//! issuer ([`sandbox_issuer`]), signing with a throw-away self-signed certificate for its RUC
//! ([`throwaway_pem`], generated once per RUC and process) and SIFEN's generic test CSC. With an
//! API key or console session (permission `use_sandbox`) the preview runs intake's routing,
//! readiness and validation (`routes::documents::prepare`) and signs and prints with the routed
//! company's own configuration: its issuer data, certificate, CSC, authorization and print
//! settings — still numbered from the reserved range, in the test environment, and stored
//! nowhere.

use axum::body::Body;
use axum::http::{Request, header};
use chrono::{DateTime, Datelike, NaiveDate, Utc};
use kuatia_application::printables::{AutoimpresorPrintable, PrintIssuer, Printable};
use kuatia_domain::channel::{ChannelKind, SifenEnvironment};
use kuatia_domain::company::{EconomicActivity, IssuancePoint, TaxpayerType};
use kuatia_domain::document::aggregate::DocumentNumber;
use kuatia_domain::document::canonical::{self, CanonicalDocument, DocumentType, PartyTaxpayerType};
use kuatia_domain::document::issues::{Issue, codes};
use kuatia_domain::document::validation::{self, RegistryAnswer, Validation, ValidationContext};
use kuatia_domain::print_settings::PrintSettings;
use kuatia_domain::ruc::Ruc;
use kuatia_domain::sifen::de::Issuer;
use kuatia_infrastructure::selfsigned::SelfSigned;
use kuatia_infrastructure::sifen::sign::SigningKey;
use kuatia_infrastructure::sifen_sim::{self, CscEntry, SimConfig};
use kuatia_infrastructure::sifen_soap::client::{Answered, ClientIdentity, MAX_ANSWER_BYTES, SifenClient};
use kuatia_infrastructure::sifen_soap::messages::{self, DeReception};
use kuatia_infrastructure::sifen_soap::{Service, SoapError};
use kuatia_projections::configuration as read;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex, OnceLock};
use tower::ServiceExt;
use utoipa::ToSchema;
use uuid::Uuid;
use zeroize::Zeroizing;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorCode};
use crate::routes::documents::{self as intake, Refusal, issues_json};
use crate::state::AppState;
use kuatia_application::process::build::{self as sifen_build, SigningSetup};

/// The watermark across every page of a preview's PDF.
pub const WATERMARK: &str = "SIN VALOR FISCAL";
/// The establishment of every preview: no real branch is numbered from it.
pub const ESTABLISHMENT: &str = "999";
/// The issuance point of every preview.
pub const POINT: &str = "999";
/// The reserved test numbers: a preview draws one at random, so no series is read or advanced.
pub const NUMBERS: RangeInclusive<u64> = 9_000_000..=9_999_999;
/// The timbrado of anonymous previews.
pub const TIMBRADO: &str = "12345678";
/// The authorization number printed on anonymous autoimpresor previews.
pub const AUTHORIZATION: &str = "SANDBOX";
/// The issuer of the sample invoice (SIFEN's test emitter), and of anonymous previews whose
/// document names no issuer RUC.
pub const SAMPLE_RUC: &str = "80069563-1";
/// SIFEN's generic test CSC (IdCSC `0001`), accepted by its test environment and the simulator.
pub const TEST_CSC_ID: &str = "0001";
/// Its secret.
pub const TEST_CSC: &str = "ABCD0000000000000000000000000000";

/// What the preview does (schema SandboxMode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = SandboxMode)]
pub enum Mode {
    /// SIFEN channel; the simulator's answer, computed in process.
    DemoSimulated,
    /// SIFEN channel; sent to the SIFEN test endpoint (a simulator by default).
    SifenDev,
    /// Autoimpresor channel; the printable PDF.
    AutoimpresorTest,
}

impl Mode {
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
    fn of(channel: ChannelKind) -> Self {
        match channel {
            ChannelKind::Sifen => Self::DemoSimulated,
            ChannelKind::Autoimpresor => Self::AutoimpresorTest,
        }
    }

    const ALL: [Mode; 3] = [Self::DemoSimulated, Self::SifenDev, Self::AutoimpresorTest];
}

pub use crate::state::{Sandbox, SifenTarget};

/// One artifact, inline.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = SandboxArtifact)]
pub struct PreviewArtifact {
    /// `signed_xml`, `kude`, `channel_response` or `printable_pdf`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `application/xml` or `application/pdf`.
    pub content_type: String,
    /// Text artifacts (XML), as is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Binary artifacts (PDF), base64.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
}

impl PreviewArtifact {
    fn text(kind: &str, content_type: &str, body: String) -> Self {
        Self {
            kind: kind.to_owned(),
            content_type: content_type.to_owned(),
            body: Some(body),
            body_base64: None,
        }
    }

    fn binary(kind: &str, content_type: &str, bytes: &[u8]) -> Self {
        use base64::Engine;
        Self {
            kind: kind.to_owned(),
            content_type: content_type.to_owned(),
            body: None,
            body_base64: Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
        }
    }
}

/// Where the preview went and under which number.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = SandboxRouting)]
pub struct PreviewRouting {
    /// The company whose configuration was used; null for anonymous previews.
    pub company_id: Option<Uuid>,
    /// Its branch; null for anonymous previews.
    pub branch_id: Option<Uuid>,
    /// Its issuance point; null for anonymous previews.
    pub issuance_point_id: Option<Uuid>,
    /// `sifen` or `autoimpresor`.
    pub channel: ChannelKind,
    /// `sandbox` (anonymous: the seller as issuer, a throw-away certificate, the generic test
    /// CSC) or `company` (the routed company's configuration).
    pub configuration: String,
    /// The timbrado printed and signed.
    pub timbrado: String,
    /// `999-999-9NNNNNN`: the reserved test range, never a real series.
    pub number: String,
}

/// The answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = SandboxPreviewResponse)]
pub struct PreviewResponse {
    /// The mode that ran.
    pub mode: Mode,
    /// The channel previewed.
    pub channel: ChannelKind,
    /// Always false.
    pub fiscal_impact: bool,
    /// Always `none`.
    pub persistence: String,
    /// Where it went and its number.
    pub routing: PreviewRouting,
    /// The normalized canonical document.
    #[schema(value_type = Object)]
    pub document: Value,
    /// Signed XML, KuDE and SIFEN's answer (sifen); the printable PDF (autoimpresor).
    pub artifacts: Vec<PreviewArtifact>,
    /// The channel's answer: SIFEN's (`status`, `code`, `message`, `protocol`, `cdc`, …) or the
    /// autoimpresor printer's.
    #[schema(value_type = Object)]
    pub response: Value,
    /// Non-blocking issues `{field, code, message}`.
    #[schema(value_type = Vec<Object>)]
    pub warnings: Value,
}

// ---------------------------------------------------------------------------------------------
// The request.

/// A request split into its mode and its document.
#[derive(Debug, Clone, PartialEq)]
pub struct PreviewRequest {
    /// `mode`, when given.
    pub mode: Option<Mode>,
    /// The document's JSON, `mode` removed; `None` for an empty body (or one with only `mode`).
    pub document: Option<Value>,
}

fn refused(issues: Vec<Issue>) -> ApiError {
    ApiError::validation(format!(
        "the preview request is not valid: {} problem(s); see details.errors",
        issues.len()
    ))
    .with_details(json!({ "errors": issues_json(&issues) }))
}

/// Reads a body: empty (or `null`, or `{}` with at most `mode`) previews the sample invoice.
pub fn read_request(body: &[u8]) -> Result<PreviewRequest, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(PreviewRequest {
            mode: None,
            document: None,
        });
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        refused(vec![Issue::new(
            "$",
            codes::MALFORMED_JSON,
            format!("malformed JSON at line {} column {}: {e}", e.line(), e.column()),
        )])
    })?;
    let mut object = match value {
        Value::Null => serde_json::Map::new(),
        Value::Object(object) => object,
        _ => {
            return Err(refused(vec![Issue::new(
                "$",
                codes::INVALID_TYPE,
                "the body must be a JSON object (a canonical document, optionally with mode)",
            )]));
        }
    };
    let mode = match object.remove("mode") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(Mode::ALL.into_iter().find(|m| m.as_str() == text).ok_or_else(
            || {
                refused(vec![Issue::new(
                    "mode",
                    codes::INVALID_ENUM,
                    format!("unknown mode {text:?}; expected demo_simulated, sifen_dev or autoimpresor_test"),
                )])
            },
        )?),
        Some(_) => {
            return Err(refused(vec![Issue::new(
                "mode",
                codes::INVALID_TYPE,
                "mode must be a string: demo_simulated, sifen_dev or autoimpresor_test",
            )]));
        }
    };
    Ok(PreviewRequest {
        mode,
        document: (!object.is_empty()).then_some(Value::Object(object)),
    })
}

/// The sample invoice (`canonical::sample_invoice`), issued now so SIFEN's 720-hour window holds.
pub fn sample_document(now: DateTime<Utc>) -> Value {
    let mut document = canonical::sample_invoice();
    let local = now.with_timezone(&kuatia_domain::local_time::offset());
    document["issue_datetime"] = json!(local.format("%Y-%m-%dT%H:%M:%S%:z").to_string());
    document
}

/// The channel a document names, if it names a valid one (an invalid one is structure's issue).
fn named_channel(document: &Value) -> Option<ChannelKind> {
    serde_json::from_value(document.get("channel")?.clone()).ok()
}

/// Sets the document's channel from an explicit mode, refusing a document that names the other
/// channel.
fn align_channel(document: &mut Value, mode: Option<Mode>) -> Result<(), ApiError> {
    let Some(mode) = mode else { return Ok(()) };
    match named_channel(document) {
        Some(named) if named != mode.channel() => Err(refused(vec![Issue::new(
            "channel",
            codes::NOT_ALLOWED,
            format!(
                "channel {} does not go with mode {}, which previews the {} channel",
                named.as_str(),
                mode.as_str(),
                mode.channel().as_str()
            ),
        )])),
        _ => {
            document["channel"] = json!(mode.channel());
            Ok(())
        }
    }
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
        timbrado: String,
    },
}

fn validation_refused(validation: &Validation) -> ApiError {
    ApiError::validation(format!(
        "the document does not pass validation: {} error(s); see details.errors",
        validation.errors.len()
    ))
    .with_details(json!({
        "errors": issues_json(&validation.errors),
        "warnings": issues_json(&validation.warnings),
    }))
}

/// The RUC an anonymous preview issues under: the seller's (the buyer's for an autofactura, whose
/// buyer is the issuing company), else the sample's.
fn issuer_ruc(document: &CanonicalDocument) -> Result<Ruc, ApiError> {
    let named = if document.doc_type == DocumentType::Autofactura {
        document.buyer.as_ref().and_then(|b| b.ruc.as_deref())
    } else {
        document.seller.ruc.as_deref()
    };
    match named.and_then(|r| Ruc::parse(r).ok()) {
        Some(ruc) => Ok(ruc),
        None => Ruc::parse(SAMPLE_RUC).map_err(|e| internal("the sample RUC", e)),
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

/// `dInfoFisc` of a previewed remisión when the configuration has no notice of its own.
const REMISION_NOTICE: &str = "Documento de prueba (sandbox de kuatia), sin valor fiscal";

/// The number of a preview, `999-999-9NNNNNN` under `timbrado`.
fn draw_number() -> u64 {
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
    mut value: Value,
    mode: Option<Mode>,
    now: DateTime<Utc>,
) -> Result<(Setup, Mode), ApiError> {
    align_channel(&mut value, mode)?;
    let document = crate::schema::canonical_document(value).map_err(|issues| {
        ApiError::validation(format!(
            "the body is not a CanonicalDocumentV1: {} problem(s); see details.errors",
            issues.len()
        ))
        .with_details(json!({ "errors": issues_json(&issues) }))
    })?;
    let mode = mode.unwrap_or_else(|| Mode::of(document.channel.unwrap_or(ChannelKind::Sifen)));
    let channel = mode.channel();
    let mut document = document;
    document.channel = Some(channel);
    let ruc = issuer_ruc(&document)?;
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
        return Err(validation_refused(&validation));
    }
    let today = kuatia_domain::local_time::paraguay_today(now);
    let issuer = sandbox_issuer(&document, &ruc, today);
    let print_settings = {
        let mut settings = PrintSettings::defaults(&issuer.legal_name);
        settings.footer_note = "Vista previa del sandbox de kuatia, sin valor fiscal".to_owned();
        settings
    };
    let (channel_setup, timbrado) = match channel {
        ChannelKind::Sifen => {
            let pem = throwaway_pem(&ruc).await?;
            (
                ChannelSetup::Sifen {
                    issuer: Box::new(issuer),
                    pem,
                    csc_id: TEST_CSC_ID.to_owned(),
                    csc: Zeroizing::new(TEST_CSC.to_owned()),
                },
                TIMBRADO.to_owned(),
            )
        }
        ChannelKind::Autoimpresor => {
            // The validity covers the issue date's year, so any date validation accepts prints.
            let year =
                kuatia_domain::local_time::paraguay(document.issue_datetime.with_timezone(&Utc)).year();
            (
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
                    timbrado: TIMBRADO.to_owned(),
                },
                TIMBRADO.to_owned(),
            )
        }
    };
    Ok((
        Setup {
            routing: PreviewRouting {
                company_id: None,
                branch_id: None,
                issuance_point_id: None,
                channel,
                configuration: "sandbox".to_owned(),
                timbrado,
                number: String::new(),
            },
            document,
            warnings: validation.warnings,
            print_settings,
            channel: channel_setup,
        },
        mode,
    ))
}

/// Fills in an authenticated caller's company and seller in the sample invoice when the caller
/// sees exactly one company (or its key is scoped to one).
async fn tenant_sample(state: &AppState, caller: &Caller, now: DateTime<Utc>) -> Result<Value, ApiError> {
    let mut document = sample_document(now);
    let companies = read::companies(&state.store, caller.tenant, caller.company_id).await?;
    if let [company] = companies.as_slice() {
        document["company_id"] = json!(company.id);
        document["seller"] = json!({"ruc": company.ruc, "legal_name": company.profile.legal_name});
    }
    Ok(document)
}

fn internal(what: &str, cause: impl std::fmt::Display) -> ApiError {
    ApiError::internal(&std::io::Error::other(format!("sandbox: {what}: {cause}")))
}

async fn company_setup(
    state: &AppState,
    caller: &Caller,
    mut value: Value,
    mode: Option<Mode>,
) -> Result<(Setup, Mode), ApiError> {
    align_channel(&mut value, mode)?;
    let body = serde_json::to_vec(&value).map_err(|e| internal("re-encoding the body", e))?;
    let prepared = match intake::prepare(state, caller, &body).await {
        Ok(prepared) => prepared,
        Err(Refusal::Api(e)) => return Err(e),
        Err(refusal) => return Err(refusal.into_error()),
    };
    if !prepared.validation.is_valid() {
        return Err(validation_refused(&prepared.validation));
    }
    let routing = prepared.routing;
    let channel = routing.channel;
    let mode = match mode {
        Some(mode) => mode,
        None => Mode::of(channel),
    };
    let tenant = caller.tenant;
    let company = &prepared.snapshot.company;
    let branch = read::branch(&state.store, tenant, routing.branch_id)
        .await?
        .map(|b| b.branch)
        .ok_or_else(|| internal("routing", "the routed branch vanished"))?;
    let print_settings = read::print_settings(&state.store, tenant, company.id)
        .await?
        .map_or_else(
            || PrintSettings::defaults(&company.profile.legal_name),
            |row| row.settings,
        );
    let mut document = prepared.document;
    document.channel = Some(channel);
    let (channel_setup, timbrado) = match (&prepared.channel.sifen, &prepared.channel.autoimpresor) {
        (Some(sifen), _) if channel == ChannelKind::Sifen => {
            let point = read::issuance_point(&state.store, tenant, routing.issuance_point_id)
                .await?
                .ok_or_else(|| internal("routing", "the routed issuance point vanished"))?;
            let point = IssuancePoint {
                point_id: point.id,
                branch_id: point.branch_id,
                code: point.code,
                name: point.name,
                is_default: point.is_default,
            };
            let ruc =
                Ruc::parse(&company.ruc).map_err(|_| internal("company", "an unreadable stored RUC"))?;
            let mut issuer = Issuer::from_config(&ruc, &company.profile, &branch, &point, sifen);
            issuer.environment = SifenEnvironment::Test;
            issuer.establishment = ESTABLISHMENT.to_owned();
            issuer.point = POINT.to_owned();
            if issuer.remision_notice.is_none() {
                issuer.remision_notice = Some(REMISION_NOTICE.to_owned());
            }
            let certificate = read::certificate(&state.store, tenant, sifen.certificate_id)
                .await?
                .ok_or_else(|| internal("certificate", "the channel's certificate vanished"))?;
            let pem = state
                .vault
                .get(tenant, certificate.record.secret_id)
                .await
                .map_err(|e| ApiError::internal(&e))?;
            let csc = state
                .vault
                .get(tenant, sifen.csc_secret_id)
                .await
                .map_err(|e| ApiError::internal(&e))?;
            let csc = String::from_utf8(csc.to_vec()).map_err(|_| internal("CSC", "not UTF-8"))?;
            (
                ChannelSetup::Sifen {
                    issuer: Box::new(issuer),
                    pem: Arc::new(pem),
                    csc_id: sifen.csc_id.clone(),
                    csc: Zeroizing::new(csc),
                },
                sifen.timbrado.clone(),
            )
        }
        (_, Some(auto)) if channel == ChannelKind::Autoimpresor => (
            ChannelSetup::Autoimpresor {
                issuer: kuatia_application::process::printing::print_issuer(
                    &company.ruc,
                    &company.profile,
                    Some(&branch),
                ),
                authorization: auto.authorization.clone(),
                valid_from: auto.valid_from,
                valid_to: auto.valid_to,
                timbrado: auto.timbrado.clone(),
            },
            auto.timbrado.clone(),
        ),
        _ => {
            return Err(internal(
                "routing",
                "the routed channel has no settings for its kind",
            ));
        }
    };
    if mode.channel() != channel {
        // Only reachable when the mode was implied; an explicit mode named the channel.
        return Err(internal("routing", "the routed channel is not the mode's"));
    }
    Ok((
        Setup {
            routing: PreviewRouting {
                company_id: Some(routing.company_id),
                branch_id: Some(routing.branch_id),
                issuance_point_id: Some(routing.issuance_point_id),
                channel,
                configuration: "company".to_owned(),
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
// The throw-away certificate.

/// How long a generated certificate is reused.
const THROWAWAY_REUSE: chrono::TimeDelta = chrono::TimeDelta::days(30);
/// Most RUCs whose certificates are kept.
const THROWAWAY_KEPT: usize = 256;

type PemCell = Arc<tokio::sync::OnceCell<(DateTime<Utc>, Arc<Zeroizing<Vec<u8>>>)>>;

fn throwaway_cache() -> &'static Mutex<HashMap<String, PemCell>> {
    static CACHE: OnceLock<Mutex<HashMap<String, PemCell>>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

/// A self-signed certificate with `ruc` in its subject (the simulator checks that the signer is
/// the issuer), key and certificate as one PEM. RSA key generation takes a good part of a
/// second, so each RUC's is generated once per process, off the async runtime, and reused for
/// [`THROWAWAY_REUSE`].
pub async fn throwaway_pem(ruc: &Ruc) -> Result<Arc<Zeroizing<Vec<u8>>>, ApiError> {
    let key = ruc.to_string();
    let now = Utc::now();
    let cell = {
        let mut cache = throwaway_cache()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let stale = cache
            .get(&key)
            .and_then(|cell| cell.get())
            .is_some_and(|(made, _)| now - *made > THROWAWAY_REUSE);
        if stale {
            cache.remove(&key);
        }
        if cache.len() >= THROWAWAY_KEPT && !cache.contains_key(&key) {
            cache.clear();
        }
        cache.entry(key.clone()).or_default().clone()
    };
    let (_, pem) = cell
        .get_or_try_init(|| async move {
            let pem = tokio::task::spawn_blocking(move || -> Result<Zeroizing<Vec<u8>>, String> {
                let text = |e: &dyn std::fmt::Display| e.to_string();
                let (private_key, certificate) = SelfSigned::for_ruc("kuatia sandbox", &key, 90)
                    .generate()
                    .map_err(|e| text(&e))?;
                let mut pem = Zeroizing::new(private_key.private_key_to_pem_pkcs8().map_err(|e| text(&e))?);
                pem.extend_from_slice(&certificate.to_pem().map_err(|e| text(&e))?);
                Ok(pem)
            })
            .await
            .map_err(|e| internal("generating the throw-away certificate", e))?
            .map_err(|e| internal("generating the throw-away certificate", e))?;
            Ok::<_, ApiError>((Utc::now(), Arc::new(pem)))
        })
        .await?;
    Ok(pem.clone())
}

// ---------------------------------------------------------------------------------------------
// Running it.

/// SIFEN's answer and where it came from.
struct Exchange {
    endpoint: String,
    answered: Answered<DeReception>,
}

/// The simulator's configuration for one preview: SIFEN's checks, the signature required, the
/// preview's CSC accepted (before the generic ones, which the simulator would try first), and no
/// state file.
fn simulator_config(issuer: &Ruc, csc_id: &str, csc: &str) -> SimConfig {
    let mut cscs = vec![CscEntry {
        ruc: Some(issuer.to_string()),
        id: csc_id.to_owned(),
        csc: csc.to_owned(),
    }];
    cscs.extend(sifen_sim::generic_test_cscs());
    SimConfig {
        require_signature: true,
        cscs,
        state_file: None,
        ..SimConfig::default()
    }
}

/// `demo_simulated`: the simulator's router answers the SOAP request in process, through the
/// same checks and the same answer as over HTTP; nothing leaves the process and the simulator
/// is dropped with its memory.
async fn simulate(xml: &str, config: SimConfig) -> Result<Exchange, ApiError> {
    let simulator = sifen_sim::Simulator::new(config).map_err(|e| internal("the simulator", e))?;
    let envelope = messages::recep_de(1, xml).map_err(|e| internal("the SOAP request", e))?;
    let request = Request::post(Service::RecepDe.path())
        .header(header::CONTENT_TYPE, "application/soap+xml; charset=utf-8")
        .body(Body::from(envelope))
        .map_err(|e| internal("the SOAP request", e))?;
    let response = match simulator.router().oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    let status = response.status().as_u16();
    let body = axum::body::to_bytes(response.into_body(), MAX_ANSWER_BYTES)
        .await
        .map_err(|e| internal("the simulator's answer", e))?;
    let result =
        messages::parse_recep_de(status, &body).map_err(|e| internal("the simulator's answer", e))?;
    Ok(Exchange {
        endpoint: "in-process simulator".to_owned(),
        answered: Answered {
            result,
            status,
            raw: String::from_utf8_lossy(&body).into_owned(),
        },
    })
}

/// A failed exchange with the SIFEN test endpoint, in the contract's terms.
fn upstream(e: &SoapError) -> ApiError {
    match e {
        SoapError::Config(_) | SoapError::InvalidRequest(_) => ApiError::internal(e),
        SoapError::NotSent { .. } => ApiError::new(
            ErrorCode::UpstreamError,
            "the SIFEN test endpoint could not be reached; nothing was sent",
        ),
        SoapError::OutcomeUnknown { timeout: true, .. } => ApiError::new(
            ErrorCode::UpstreamError,
            "the SIFEN test endpoint did not answer in time",
        )
        .with_status(axum::http::StatusCode::GATEWAY_TIMEOUT),
        other => ApiError::new(
            ErrorCode::UpstreamError,
            format!("the SIFEN test endpoint answered something unreadable: {other}"),
        ),
    }
}

impl Sandbox {
    /// `sifen_dev`: siRecepDE through the SOAP client, with the signing certificate as the TLS
    /// client identity (SIFEN's test environment asks for it).
    async fn send(&self, xml: &str, pem: &[u8], config: SimConfig) -> Result<Exchange, ApiError> {
        let identity = ClientIdentity::from_pem(pem.to_vec());
        match &self.sifen_target {
            SifenTarget::Url(url) => self.post(url, xml, &identity).await,
            SifenTarget::OwnSimulator => {
                let simulator = sifen_sim::start("127.0.0.1:0", config)
                    .await
                    .map_err(|e| internal("starting the simulator", e))?;
                let exchange = self.post(&simulator.base_url(), xml, &identity).await;
                drop(simulator);
                exchange
            }
        }
    }

    async fn post(&self, url: &str, xml: &str, identity: &ClientIdentity) -> Result<Exchange, ApiError> {
        let client = SifenClient::new(url, &self.soap, Some(identity), None).map_err(|e| upstream(&e))?;
        let answered = client.send_de(1, xml).await.map_err(|e| upstream(&e))?;
        Ok(Exchange {
            endpoint: client.url(Service::RecepDe),
            answered,
        })
    }
}

async fn render(
    state: &AppState,
    printable: Printable,
    settings: &PrintSettings,
) -> Result<Vec<u8>, ApiError> {
    state
        .printer
        .render(printable, settings)
        .await
        .map_err(|e| ApiError::internal(&e))
}

/// SIFEN's answer as the preview's `response`.
fn answer_json(exchange: &Exchange, cdc: &str) -> Value {
    let result = &exchange.answered.result;
    json!({
        "endpoint": exchange.endpoint,
        "service": Service::RecepDe.name(),
        "http_status": exchange.answered.status,
        "status": result.status.as_str(),
        "approved": result.status.is_approved(),
        "code": result.code(),
        "message": result.results.first().map(|r| r.message.as_str()),
        "cdc": result.cdc.as_deref().unwrap_or(cdc),
        "protocol": result.authorization,
        "processed_at": result.processed_at,
        "digest_value": result.digest_value,
        "results": result.results,
    })
}

/// Runs a preview: the request read, the document validated under the caller's configuration
/// (or the sandbox's), numbered from the reserved range, then signed, sent or simulated and
/// printed. Nothing is written anywhere.
pub async fn preview(
    state: &AppState,
    sandbox: &Sandbox,
    caller: Option<&Caller>,
    body: &[u8],
) -> Result<PreviewResponse, ApiError> {
    let request = read_request(body)?;
    let now = Utc::now();
    let (setup, mode) = match caller {
        None => {
            let document = request.document.unwrap_or_else(|| sample_document(now));
            anonymous_setup(document, request.mode, now).await?
        }
        Some(caller) => {
            let document = match request.document {
                Some(document) => document,
                None => tenant_sample(state, caller, now).await?,
            };
            company_setup(state, caller, document, request.mode).await?
        }
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
    let normalized = serde_json::to_value(&document).map_err(|e| internal("the document", e))?;
    let (artifacts, response) = match channel {
        ChannelSetup::Sifen {
            issuer,
            pem,
            csc_id,
            csc,
        } => {
            let simulator = simulator_config(&issuer.ruc, &csc_id, &csc);
            let signed = {
                let pem = pem.clone();
                tokio::task::spawn_blocking(move || {
                    let key = SigningKey::from_pem(&pem).map_err(|e| format!("the signing key: {e}"))?;
                    let signing = SigningSetup {
                        issuer: &issuer,
                        key: &key,
                        csc_id: &csc_id,
                        csc: &csc,
                        environment: SifenEnvironment::Test,
                    };
                    sifen_build::build_and_sign(&document, &signing, "sandbox".to_owned(), number, now)
                })
                .await
                .map_err(|e| internal("signing", e))?
            };
            let signed = signed.map_err(|message| {
                // What the DE builder cannot write (a value the XSD refuses that validation let
                // through) is the document's problem; signing and the QR failing are ours.
                if message.starts_with("the DE cannot be built") {
                    ApiError::validation(message.clone()).with_details(json!({
                        "errors": [{"field": "$", "code": codes::INVALID_FORMAT, "message": message}]
                    }))
                } else {
                    internal("signing", message)
                }
            })?;
            let kude = render(
                state,
                Printable::Kude {
                    signed_xml: signed.xml.as_bytes().to_vec(),
                    watermark: Some(WATERMARK.to_owned()),
                },
                &print_settings,
            );
            let exchange = async {
                match mode {
                    Mode::SifenDev => sandbox.send(&signed.xml, &pem, simulator).await,
                    _ => simulate(&signed.xml, simulator).await,
                }
            };
            let (kude, exchange) = tokio::join!(kude, exchange);
            let (kude, exchange) = (kude?, exchange?);
            let response = answer_json(&exchange, &signed.cdc);
            let artifacts = vec![
                PreviewArtifact::text("signed_xml", "application/xml", signed.xml),
                PreviewArtifact::binary("kude", "application/pdf", &kude),
                PreviewArtifact::text("channel_response", "application/xml", exchange.answered.raw),
            ];
            (artifacts, response)
        }
        ChannelSetup::Autoimpresor {
            issuer,
            authorization,
            valid_from,
            valid_to,
            timbrado,
        } => {
            let issued_at = kuatia_domain::local_time::paraguay(document.issue_datetime.with_timezone(&Utc));
            let printable = AutoimpresorPrintable {
                document,
                issuer,
                authorization: authorization.clone(),
                valid_from,
                valid_to,
                number: printed_number(&timbrado, number),
                issued_at,
                watermark: Some(WATERMARK.to_owned()),
            };
            let pdf = render(
                state,
                Printable::Autoimpresor(Box::new(printable)),
                &print_settings,
            )
            .await?;
            let response = json!({
                "status": "printed",
                "number": routing.number,
                "timbrado": timbrado,
                "authorization": authorization,
                "valid_from": valid_from,
                "valid_to": valid_to,
                "reported": false,
                "message": "printed in process with a SIN VALOR FISCAL watermark; a preview is reported to no endpoint",
            });
            (
                vec![PreviewArtifact::binary("printable_pdf", "application/pdf", &pdf)],
                response,
            )
        }
    };
    Ok(PreviewResponse {
        mode,
        channel: routing.channel,
        fiscal_impact: false,
        persistence: "none".to_owned(),
        routing,
        document: normalized,
        artifacts,
        response,
        warnings: issues_json(&warnings),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_body_or_one_with_only_a_mode_previews_the_sample() {
        for body in [&b""[..], b"  \n", b"null", b"{}"] {
            assert_eq!(
                read_request(body).expect("read"),
                PreviewRequest {
                    mode: None,
                    document: None
                }
            );
        }
        let only_mode = read_request(br#"{"mode": "sifen_dev"}"#).expect("read");
        assert_eq!(only_mode.mode, Some(Mode::SifenDev));
        assert_eq!(only_mode.document, None);
    }

    #[test]
    fn a_bad_mode_or_body_is_a_validation_error_naming_the_field() {
        for (body, field, code) in [
            (&br#"{"mode": "production"}"#[..], "mode", "invalid_enum"),
            (br#"{"mode": 3}"#, "mode", "invalid_type"),
            (b"[1, 2]", "$", "invalid_type"),
            (b"{not json", "$", "malformed_json"),
        ] {
            let e = read_request(body).expect_err("refused");
            assert_eq!(e.code, ErrorCode::ValidationError);
            let details = e.details.expect("details");
            assert_eq!(details["errors"][0]["field"], field, "{details}");
            assert_eq!(details["errors"][0]["code"], code, "{details}");
        }
    }

    #[test]
    fn an_explicit_mode_sets_the_channel_and_refuses_the_other_one() {
        let mut doc = json!({"external_id": "x"});
        align_channel(&mut doc, Some(Mode::AutoimpresorTest)).expect("aligned");
        assert_eq!(doc["channel"], "autoimpresor");
        let mut doc = json!({"channel": "sifen"});
        let e = align_channel(&mut doc, Some(Mode::AutoimpresorTest)).expect_err("refused");
        assert_eq!(e.details.expect("details")["errors"][0]["field"], "channel");
    }

    #[tokio::test]
    async fn sifen_dev_sends_to_a_configured_endpoint_and_an_unreachable_one_is_an_upstream_error() {
        let sim = sifen_sim::start(
            "127.0.0.1:0",
            SimConfig {
                require_signature: true,
                ..SimConfig::default()
            },
        )
        .await
        .expect("simulator");
        let now = Utc::now();
        let document = canonical::from_value(sample_document(now)).expect("sample");
        let ruc = issuer_ruc(&document).expect("the issuer's RUC");
        let issuer = sandbox_issuer(&document, &ruc, kuatia_domain::local_time::paraguay_today(now));
        let pem = throwaway_pem(&ruc).await.expect("certificate");
        let again = throwaway_pem(&ruc).await.expect("certificate");
        assert!(Arc::ptr_eq(&pem, &again), "one certificate per RUC and process");
        let key = SigningKey::from_pem(&pem).expect("key");
        let signed = sifen_build::build_and_sign(
            &document,
            &SigningSetup {
                issuer: &issuer,
                key: &key,
                csc_id: TEST_CSC_ID,
                csc: TEST_CSC,
                environment: SifenEnvironment::Test,
            },
            "sandbox".to_owned(),
            draw_number(),
            now,
        )
        .expect("signed");
        let checks = || simulator_config(&ruc, TEST_CSC_ID, TEST_CSC);

        let configured = Sandbox {
            sifen_target: SifenTarget::Url(sim.base_url()),
            ..Sandbox::default()
        };
        let exchange = configured.send(&signed.xml, &pem, checks()).await.expect("sent");
        let answer = &exchange.answered.result;
        assert!(answer.status.is_approved(), "{answer:?}");
        assert!(
            exchange.endpoint.starts_with(&sim.base_url()),
            "{}",
            exchange.endpoint
        );
        assert_eq!(sim.simulator.stats().approvals.get(&signed.cdc), Some(&1));

        let nowhere = Sandbox {
            sifen_target: SifenTarget::Url("http://127.0.0.1:9".to_owned()),
            ..Sandbox::default()
        };
        let e = nowhere
            .send(&signed.xml, &pem, checks())
            .await
            .err()
            .expect("unreachable");
        assert_eq!((e.code, e.status.as_u16()), (ErrorCode::UpstreamError, 502));

        // The in-process simulation applies the same checks: a tampered DE is refused.
        let tampered = signed.xml.replacen("<dTotGralOpe>", "<dTotGralOpe>1", 1);
        let refused = simulate(&tampered, checks()).await.expect("answered");
        assert!(
            !refused.answered.result.status.is_approved(),
            "{:?}",
            refused.answered.result
        );
        let approved = simulate(&signed.xml, checks()).await.expect("answered");
        assert_eq!(approved.answered.result.code(), Some("0260"));
    }

    #[test]
    fn the_sandbox_issuer_is_the_seller_at_the_reserved_point_in_the_test_environment() {
        let doc = canonical::from_value(sample_document(Utc::now())).expect("sample");
        let ruc = issuer_ruc(&doc).expect("the issuer's RUC");
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
}
