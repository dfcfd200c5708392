//! The canonical document as `POST /v1/documents` receives it: any bytes go through the JSON
//! parser (`canonical::parse`); a document that parses is validated on both channels (places
//! against SET's geographic table on `sifen`), and one that passes on the `sifen` channel is built
//! into SIFEN's unsigned `rDE`, as intake does before it accepts it (issue 25: what intake accepts,
//! the pipeline builds). Nothing here may panic: a bad body is a list of issues; a document the
//! builder refuses is refused at intake with the builder's issue, which must name a field of the
//! document (a configured issuer never makes a valid document unbuildable). The seeds cover the
//! five types and the remisión's `transport` block.

#![no_main]

use chrono::{DateTime, NaiveDate, Utc};
use kuatia_domain::channel::{ChannelKind, SifenEnvironment};
use kuatia_domain::company::{EconomicActivity, TaxpayerType};
use kuatia_domain::document::canonical;
use kuatia_domain::document::validation::{self, RegistryAnswer, ValidationContext};
use kuatia_domain::local_time;
use kuatia_domain::ruc::Ruc;
use kuatia_domain::sifen::de::{self, DeInput, Issuer};
use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

/// The issuing company's RUC: the seller of the test vectors and of `sample_invoice`.
const COMPANY_RUC: &str = "80069563-1";

/// A fixed "now", a day after `sample_invoice`'s issue date, so that SIFEN's emission window
/// (720 h before to 120 h after now) holds for the seeds and runs are reproducible.
fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-03T12:00:00Z")
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_default()
}

static RUC: LazyLock<Ruc> = LazyLock::new(|| Ruc::parse(COMPANY_RUC).expect("the company RUC parses"));

/// The issuer of the `rDE`, as a configured company, branch and point would give it.
static ISSUER: LazyLock<Issuer> = LazyLock::new(|| Issuer {
    ruc: RUC.clone(),
    taxpayer_type: TaxpayerType::LegalEntity,
    tax_regime: Some(8),
    legal_name: "DE GENERACION ELECTRONICA S.A.".into(),
    trade_name: Some("Kuatia fuzz".into()),
    address: "Calle 1".into(),
    house_number: "0".into(),
    department_code: 1,
    district_code: Some(1),
    district_name: Some("ASUNCION (DISTRITO)".into()),
    city_code: 1,
    city_name: "ASUNCION (DISTRITO)".into(),
    phone: "021123456".into(),
    email: "demo@example.com".into(),
    branch_name: Some("Casa central".into()),
    economic_activities: vec![EconomicActivity {
        code: "62010".into(),
        description: "Actividades de programacion informatica".into(),
    }],
    timbrado: "12558946".into(),
    timbrado_valid_from: NaiveDate::from_ymd_opt(2022, 8, 25).unwrap_or_default(),
    establishment: "001".into(),
    point: "001".into(),
    environment: SifenEnvironment::Test,
    remision_notice: Some("Traslado conforme a la RG 41/2014".into()),
});

fn context(channel: ChannelKind, environment: Option<SifenEnvironment>) -> ValidationContext<'static> {
    ValidationContext {
        channel,
        company_ruc: &RUC,
        environment,
        now: now(),
        certificate_expires_in_days: Some(12),
        buyer_registry: RegistryAnswer::Found {
            state: "SUSPENSION TEMPORAL".into(),
        },
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(document) = canonical::parse(data) else {
        return;
    };
    let on_sifen = validation::validate(
        &document,
        &context(ChannelKind::Sifen, Some(SifenEnvironment::Test)),
    );
    let _ = validation::validate(
        &document,
        &context(ChannelKind::Sifen, Some(SifenEnvironment::Production)),
    );
    let _ = validation::validate(&document, &context(ChannelKind::Autoimpresor, None));
    if let Some(buyer) = &document.buyer {
        let _ = validation::operation_type(buyer);
    }
    if on_sifen.is_valid() {
        let built = de::build_rde(&DeInput {
            document: &document,
            issuer: &ISSUER,
            number: 1234,
            security_code: "123456789",
            signed_at: local_time::paraguay(now()),
        });
        // What the builder refuses, intake refuses with the builder's issue: it names a field of
        // the document, never the (valid) issuer's configuration.
        if let Err(err) = built {
            let issue = err.issue();
            let field = issue.field.as_str();
            if field.starts_with("issuer.") || field == "$" || field == "security_code" {
                panic!("a valid issuer made a validated document unbuildable: {err}");
            }
        }
    }
});
