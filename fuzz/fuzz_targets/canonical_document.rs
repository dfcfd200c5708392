//! The canonical document as `POST /v1/documents` receives it: any bytes go through the JSON
//! parser (`canonical::parse`); a document that parses is validated on both channels, its cities
//! are checked as intake checks them, and one that passes on the `sifen` channel is built into
//! SIFEN's unsigned `rDE`, as the pipeline would. Nothing here may panic: a bad body is a list of
//! issues, and a document validation accepts must not crash the builder.

#![no_main]

use chrono::{DateTime, NaiveDate, Utc};
use kuatia_domain::channel::{ChannelKind, SifenEnvironment};
use kuatia_domain::company::{EconomicActivity, TaxpayerType};
use kuatia_domain::document::canonical;
use kuatia_domain::document::validation::{self, RegistryAnswer, ValidationContext};
use kuatia_domain::local_time;
use kuatia_domain::ruc::Ruc;
use kuatia_domain::sifen::de::{self, CityNames, DeInput, Issuer, NoCityNames};
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

/// Names every city, so that the builder is reached for any city code.
struct EveryCity;

impl CityNames for EveryCity {
    fn city_name(&self, code: u32) -> Option<String> {
        Some(format!("CIUDAD {code}"))
    }
}

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
    let _ = validation::unnamed_cities(&document, ISSUER.city_code, &NoCityNames);
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
            cities: &EveryCity,
        });
        // A document the sifen channel accepts is one the pipeline can build.
        if let Err(err) = built {
            panic!("validation accepted a document the rDE builder refuses: {err}");
        }
    }
});
