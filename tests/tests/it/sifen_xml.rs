//! The SIFEN v150 DE writer (`kuatia_domain::sifen::de`) against the official XSD: each of the
//! five document types, and many generated documents that pass validation, must validate with
//! `xmllint --schema siRecepDE_v150.xsd` once a placeholder signature and QR are appended (the
//! schema requires both; the writer leaves them to the signer).
//!
//! The XSD folder is `$SIFEN_XSD_DIR`, else `shared/sifen/xsd/v150` beside the repository.
//! xmllint (Debian's `libxml2-utils`) is required: without it these tests fail, they do not skip.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use kuatia_domain::channel::{ChannelKind, SifenEnvironment};
use kuatia_domain::company::{EconomicActivity, TaxpayerType};
use kuatia_domain::document::canonical::{self, CanonicalDocument};
use kuatia_domain::document::validation::{RegistryAnswer, ValidationContext, validate};
use kuatia_domain::local_time;
use kuatia_domain::ruc::Ruc;
use kuatia_domain::sifen::cdc::{Cdc, CdcParts};
use kuatia_domain::sifen::de::{BuiltDe, DeInput, Issuer, build_rde};
use proptest::prelude::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// XSD validation.

fn xsd_dir() -> PathBuf {
    kuatia_tests::sifen_xsd_dir()
}

fn schema() -> PathBuf {
    let schema = xsd_dir().join("siRecepDE_v150.xsd");
    assert!(
        schema.is_file(),
        "the SIFEN XSD is not at {}: set SIFEN_XSD_DIR, put shared/ beside the repository or restore vendor/sifen",
        schema.display()
    );
    let dsig = xsd_dir().join("xmldsig-core-schema.xsd");
    assert!(
        dsig.is_file(),
        "{} is missing (imported by DE_v150.xsd)",
        dsig.display()
    );
    schema
}

/// A syntactically valid `ds:Signature` and a `gCamFuFD` with a 100+ character `dCarQR`, as the
/// schema requires after `DE`. Placeholders only: nothing here is a real signature.
pub(crate) fn with_placeholders(built: &BuiltDe) -> String {
    let cdc = built.cdc.as_str();
    let base64 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    let tail = format!(
        concat!(
            r#"<Signature xmlns="http://www.w3.org/2000/09/xmldsig#"><SignedInfo>"#,
            r#"<CanonicalizationMethod Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/>"#,
            r#"<SignatureMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"/>"#,
            r##"<Reference URI="#{cdc}"><Transforms>"##,
            r#"<Transform Algorithm="http://www.w3.org/2000/09/xmldsig#enveloped-signature"/>"#,
            r#"<Transform Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/></Transforms>"#,
            r#"<DigestMethod Algorithm="http://www.w3.org/2001/04/xmlenc#sha256"/>"#,
            r#"<DigestValue>{b}</DigestValue></Reference></SignedInfo>"#,
            r#"<SignatureValue>{b}</SignatureValue><KeyInfo><X509Data>"#,
            r#"<X509Certificate>{b}</X509Certificate></X509Data></KeyInfo></Signature>"#,
            r#"<gCamFuFD><dCarQR>https://ekuatia.set.gov.py/consultas-test/qr?nVersion=150&amp;Id={cdc}"#,
            r#"&amp;dTotGralOpe={total}&amp;cHashQR=0000000000000000000000000000000000000000000000000000000000000000"#,
            r#"</dCarQR></gCamFuFD></rDE>"#
        ),
        cdc = cdc,
        b = base64,
        total = built.total,
    );
    let body = built
        .xml
        .strip_suffix("</rDE>")
        .expect("the unsigned rDE ends with </rDE>");
    format!("{body}{tail}")
}

/// Validates `built` against the XSD; the error carries xmllint's output and the file.
fn xsd_check(built: &BuiltDe) -> Result<(), String> {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let file = std::env::temp_dir().join(format!(
        "kuatia-sifen-{}-{}.xml",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&file, with_placeholders(built)).expect("write the temporary XML");
    // --nonet: every include and import of the XSD is local, and tests never reach the network.
    let output = Command::new("xmllint")
        .arg("--noout")
        .arg("--nonet")
        .arg("--schema")
        .arg(schema())
        .arg(&file)
        .output();
    let output = match output {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "xmllint is not installed: the SIFEN XML tests need it (Debian: apt-get install libxml2-utils)"
        ),
        Err(e) => panic!("cannot run xmllint: {e}"),
    };
    if output.status.success() {
        let _ = std::fs::remove_file(&file);
        Ok(())
    } else {
        Err(format!(
            "xmllint refused {} (kept for inspection):\n{}{}",
            file.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// Fixtures.

const COMPANY_RUC: &str = "80069563-1";

fn issuer(environment: SifenEnvironment) -> Issuer {
    Issuer {
        ruc: Ruc::parse(COMPANY_RUC).expect("ruc"),
        taxpayer_type: TaxpayerType::LegalEntity,
        tax_regime: Some(8),
        legal_name: "DE GENERACION ELECTRONICA S.A.".into(),
        trade_name: Some("Demo & Cía".into()),
        address: "Avda. España".into(),
        house_number: "1234".into(),
        department_code: 1,
        district_code: Some(1),
        district_name: Some("ASUNCION (DISTRITO)".into()),
        city_code: 1,
        city_name: "ASUNCION (DISTRITO)".into(),
        phone: "021123456".into(),
        email: "facturacion@demo.com.py".into(),
        branch_name: Some("Casa central".into()),
        economic_activities: vec![
            EconomicActivity {
                code: "62010".into(),
                description: "Actividades de programación informática".into(),
            },
            EconomicActivity {
                code: "47190".into(),
                description: "Otras actividades de venta al por menor".into(),
            },
        ],
        timbrado: "12558946".into(),
        timbrado_valid_from: NaiveDate::from_ymd_opt(2022, 8, 25).expect("date"),
        establishment: "001".into(),
        point: "002".into(),
        environment,
        remision_notice: Some("Traslado de mercaderías conforme a la RG N° 41/2014".into()),
    }
}

/// The canonical document of `value`, which must also pass validation on the sifen channel.
pub(crate) fn valid_document(value: Value) -> CanonicalDocument {
    let document = canonical::from_value(value.clone())
        .unwrap_or_else(|issues| panic!("structurally invalid: {issues:#?}\n{value:#}"));
    let ruc = Ruc::parse(COMPANY_RUC).expect("ruc");
    let now = document.issue_datetime.with_timezone(&Utc) + TimeDelta::minutes(5);
    let context = ValidationContext {
        channel: ChannelKind::Sifen,
        company_ruc: &ruc,
        environment: Some(SifenEnvironment::Test),
        now,
        certificate_expires_in_days: Some(365),
        buyer_registry: RegistryAnswer::NotLoaded,
    };
    let validation = validate(&document, &context);
    assert!(
        validation.is_valid(),
        "the fixture does not pass validation: {:#?}\n{value:#}",
        validation.errors
    );
    document
}

pub(crate) fn build(document: &CanonicalDocument, environment: SifenEnvironment, number: u64) -> BuiltDe {
    let issuer = issuer(environment);
    let signed = local_time::paraguay(document.issue_datetime.with_timezone(&Utc) + TimeDelta::minutes(1));
    build_rde(&DeInput {
        document,
        issuer: &issuer,
        number,
        security_code: "482913067",
        signed_at: signed,
    })
    .unwrap_or_else(|e| panic!("the DE was not built: {e}"))
}

/// An exact decimal `digits × 10^-scale`, written as a JSON number with exactly those digits.
#[derive(Debug, Clone, Copy)]
struct Dec(i128, u32);

fn json_number(d: Dec) -> Value {
    let Dec(digits, scale) = d;
    let text = if scale == 0 {
        digits.to_string()
    } else {
        let p = 10i128.pow(scale);
        format!("{}.{:0width$}", digits / p, digits % p, width = scale as usize)
    };
    serde_json::from_str(&text).expect("a number")
}

/// Half-up division of non-negative integers.
fn div_half_up(n: i128, d: i128) -> i128 {
    (2 * n + d) / (2 * d)
}

/// A line with its canonical amounts: total = half_up(quantity × price),
/// tax = half_up(total × rate / (100 + rate)), in whole guaraníes.
fn line(description: &str, quantity: Dec, price: Dec, rate: u8) -> (Value, i128, i128) {
    let total = div_half_up(quantity.0 * price.0, 10i128.pow(quantity.1 + price.1));
    let tax = div_half_up(total * i128::from(rate), 100 + i128::from(rate));
    (
        json!({"description": description, "quantity": json_number(quantity),
               "unit_price": json_number(price), "tax_rate": rate, "tax_amount": i64::try_from(tax).expect("small"),
               "total_amount": i64::try_from(total).expect("small")}),
        total,
        tax,
    )
}

/// `items` and `totals` of these lines, and the grand total.
fn priced(lines: Vec<(Value, i128, i128)>) -> (Value, Value, i128) {
    let grand: i128 = lines.iter().map(|l| l.1).sum();
    let tax: i128 = lines.iter().map(|l| l.2).sum();
    let items: Vec<Value> = lines.into_iter().map(|l| l.0).collect();
    let n = |v: i128| i64::try_from(v).expect("small");
    (
        json!(items),
        json!({"subtotal": n(grand - tax), "tax_total": n(tax), "grand_total": n(grand)}),
        grand,
    )
}

pub(crate) fn invoice_cdc() -> String {
    let ruc = Ruc::parse(COMPANY_RUC).expect("ruc");
    Cdc::build(&CdcParts {
        document_type: 1,
        ruc: &ruc,
        establishment: "001",
        point: "002",
        number: 41,
        taxpayer_type: 2,
        issue_date: NaiveDate::from_ymd_opt(2026, 2, 27).expect("date"),
        emission_type: 1,
        security_code: "100200300",
    })
    .expect("cdc")
    .to_string()
}

pub(crate) fn remision_cdc() -> String {
    let ruc = Ruc::parse(COMPANY_RUC).expect("ruc");
    Cdc::build(&CdcParts {
        document_type: 7,
        ruc: &ruc,
        establishment: "001",
        point: "002",
        number: 12,
        taxpayer_type: 2,
        issue_date: NaiveDate::from_ymd_opt(2025, 12, 29).expect("date"),
        emission_type: 1,
        security_code: "700800900",
    })
    .expect("cdc")
    .to_string()
}

fn base(kind: &str) -> Value {
    let (items, totals, _) = priced(vec![
        line("Licencia anual <Pro> & soporte", Dec(1, 0), Dec(110_000, 0), 10),
        line("Horas de \"consultoría\"", Dec(25, 1), Dec(27_500, 0), 5),
        line("Libro técnico", Dec(3, 0), Dec(450_005, 1), 0),
    ]);
    json!({
        "external_id": format!("IT-{kind}"),
        "type": kind,
        "issue_datetime": "2026-03-02T10:15:00-03:00",
        "currency": "PYG",
        "seller": {"ruc": COMPANY_RUC, "legal_name": "DE GENERACION ELECTRONICA S.A."},
        "buyer": {"ruc": "80013884-8", "legal_name": "CLIENTE S.A.", "operation_type": "b2b",
                  "email": "compras@cliente.com.py", "address": "Mcal. López", "house_number": "3500",
                  "department_code": 1, "city_code": 1},
        "items": items,
        "totals": totals,
        "payment_terms": {"condition": "cash", "method": "bank_transfer"}
    })
}

pub(crate) fn invoice() -> Value {
    base("invoice")
}

pub(crate) fn note(kind: &str) -> Value {
    let mut value = base(kind);
    value["reason"] = json!(2);
    value["associated_document"] = json!({"cdc": invoice_cdc()});
    value
}

pub(crate) fn autofactura() -> Value {
    let (items, totals, _) = priced(vec![
        line("Mandioca (kg)", Dec(100, 0), Dec(3_000, 0), 0),
        line("Huevos (docena)", Dec(12, 0), Dec(14_000, 0), 0),
    ]);
    json!({
        "external_id": "IT-AFE",
        "type": "autofactura",
        "issue_datetime": "2026-03-02T10:15:00-03:00",
        "currency": "PYG",
        "seller": {"legal_name": "Juan Benítez", "document_type": "ci", "document_number": "1234567",
                   "address": "Compañía Potrero", "house_number": "0", "department_code": 11,
                   "city_code": 3383},
        "items": items,
        "totals": totals,
        "payment_terms": {"condition": "cash", "method": "cash"},
        "associated_document": {"constancia_type": 1, "constancia_number": "01236563890",
                                "constancia_control": "06563890"}
    })
}

pub(crate) fn remision() -> Value {
    let mut value = base("remision");
    value["reason"] = json!(1);
    value["payment_terms"] = json!({"condition": "credit"});
    value["transport"] = json!({
        "kind": "third_party", "mode": "land", "freight_payer": 2, "distance_km": 330,
        "start_date": "2026-03-03", "end_date": "2026-03-04", "invoice_date": "2026-03-05",
        "vehicle": {"type": "Camión", "brand": "Scania", "plate": "ABC123"},
        "carrier": {"name": "Transportes del Este S.R.L.", "ruc": "80002201-7",
                    "address": "Ruta 7 km 5", "driver_document": "3456789",
                    "driver_name": "Pedro Gómez", "driver_address": "Ciudad del Este"}
    });
    value
}

// ---------------------------------------------------------------------------------------------
// The five types.

#[test]
fn an_invoice_validates_against_the_xsd() {
    let built = build(&valid_document(invoice()), SifenEnvironment::Test, 1);
    xsd_check(&built).unwrap_or_else(|e| panic!("{e}"));
    assert!(built.xml.starts_with(concat!(
        r#"<?xml version="1.0" encoding="UTF-8"?><rDE xmlns="http://ekuatia.set.gov.py/sifen/xsd" "#,
        r#"xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" "#,
        r#"xsi:schemaLocation="http://ekuatia.set.gov.py/sifen/xsd siRecepDE_v150.xsd">"#,
        r#"<dVerFor>150</dVerFor><DE Id=""#
    )));
    assert!(built.xml.ends_with("</DE></rDE>"));
    assert!(
        built
            .xml
            .contains("<dDesProSer>Licencia anual &lt;Pro&gt; &amp; soporte</dDesProSer>")
    );
    // 110 000 + 68 750 + 135 002 (3 × 45 000.5 = 135 001.5, half up).
    assert_eq!(built.total, "313752");
    assert_eq!(built.item_count, 3);
}

#[test]
fn a_production_invoice_validates_against_the_xsd() {
    let built = build(
        &valid_document(invoice()),
        SifenEnvironment::Production,
        9_999_999,
    );
    xsd_check(&built).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        built
            .xml
            .contains("<dNomEmi>DE GENERACION ELECTRONICA S.A.</dNomEmi>")
    );
}

#[test]
fn credit_and_debit_notes_validate_against_the_xsd() {
    for kind in ["credit_note", "debit_note"] {
        let built = build(&valid_document(note(kind)), SifenEnvironment::Test, 2);
        xsd_check(&built).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert!(
            built
                .xml
                .contains(&format!("<dCdCDERef>{}</dCdCDERef>", invoice_cdc()))
        );
    }
}

#[test]
fn an_autofactura_validates_against_the_xsd() {
    let built = build(&valid_document(autofactura()), SifenEnvironment::Test, 3);
    xsd_check(&built).unwrap_or_else(|e| panic!("{e}"));
    assert!(built.xml.contains("<dDesCiuVen>CIUDAD DEL ESTE</dDesCiuVen>"));
    assert_eq!(built.total_iva, "0");
}

#[test]
fn a_remision_validates_against_the_xsd() {
    let built = build(&valid_document(remision()), SifenEnvironment::Test, 4);
    xsd_check(&built).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((built.total.as_str(), built.total_iva.as_str()), ("0", "0"));
    assert!(built.xml.contains("<gCamTrans><iNatTrans>1</iNatTrans>"));
}

#[test]
fn the_xsd_check_itself_refuses_a_broken_document() {
    let mut built = build(&valid_document(invoice()), SifenEnvironment::Test, 5);
    built.xml = built.xml.replace("<dSisFact>1</dSisFact>", "");
    let error = xsd_check(&built).expect_err("dSisFact is required");
    assert!(error.contains("dSisFact") || error.contains("gOpeDE"), "{error}");
}

// ---------------------------------------------------------------------------------------------
// Generated documents.

/// A buyer for a priced document (invoice and notes): b2b, b2c with RUC or CI, foreign,
/// anonymous.
fn arb_buyer(invoice: bool) -> impl Strategy<Value = Option<Value>> {
    let ruc =
        (1_000_000u32..99_999_999).prop_map(|n| Ruc::from_number(&n.to_string()).expect("ruc").to_string());
    let name = prop::sample::select(vec![
        "Cliente S.A.",
        "José Núñez & Hijos",
        "Ñandutí <Import>",
        "O'Higgins SRL",
    ]);
    prop_oneof![
        (ruc.clone(), name.clone(), any::<bool>()).prop_map(|(ruc, name, legal)| Some(json!({
            "ruc": ruc, "legal_name": name, "operation_type": "b2b",
            "taxpayer_type": if legal { "legal_entity" } else { "individual" },
            "trade_name": "Nombre de fantasía"
        }))),
        (ruc, name.clone()).prop_map(|(ruc, name)| Some(json!({
            "ruc": ruc, "legal_name": name, "operation_type": "b2c",
            "address": "Calle \"Palma\" 3", "house_number": "0", "department_code": 1, "city_code": 1
        }))),
        (
            1u32..99_999_999,
            name.clone(),
            prop::sample::select(vec!["ci", "passport", "foreign_id", "diplomatic_card", "other"])
        )
            .prop_map(|(n, name, kind)| Some(json!({
                "legal_name": name, "operation_type": "b2c", "document_type": kind,
                "document_number": n.to_string(), "email": "cliente.final@correo.com.py"
            }))),
        name.prop_map(|name| Some(json!({
            "legal_name": name, "operation_type": "foreign", "country": "ARG",
            "address": "Av. Corrientes", "house_number": "1500"
        }))),
        Just(Some(json!({"operation_type": "anonymous"}))),
        Just(if invoice {
            None
        } else {
            Some(json!({"operation_type": "anonymous"}))
        }),
    ]
}

/// Lines: quantities with up to 3 decimals, prices with up to 2, any of the three rates.
fn arb_lines(taxed: bool) -> impl Strategy<Value = Vec<(Value, i128, i128)>> {
    let rates = if taxed { vec![0u8, 5, 10] } else { vec![0u8] };
    prop::collection::vec(
        (
            prop_oneof![4 => 1i64..100, 1 => 1i64..50_000],
            0u32..=3,
            prop_oneof![4 => 0i64..20_000_000, 1 => 0i64..2_000_000_000],
            0u32..=2,
            prop::sample::select(rates),
            prop::sample::select(vec![
                "Tornillos M8",
                "Servicio técnico",
                "Café 500 g",
                "A&B <x>",
                "Ítem",
            ]),
        )
            .prop_map(|(q, qs, p, ps, rate, description)| {
                line(description, Dec(q.into(), qs), Dec(p.into(), ps), rate)
            }),
        1..12,
    )
}

/// Payment terms of an invoice.
fn arb_terms() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec!["cash", "bank_transfer", "other"])
            .prop_map(|m| json!({"condition": "cash", "method": m})),
        (prop::sample::select(vec!["visa", "mastercard", "american_express", "maestro", "panal", "cabal", "other"]), any::<bool>())
            .prop_map(|(brand, credit)| json!({"condition": "cash", "method": "card",
                "card": {"brand": brand, "kind": if credit { "credit" } else { "debit" }}})),
        (1u32..99_999_999).prop_map(|n| json!({"condition": "cash", "method": "check",
            "check": {"number": (n % 100_000_000).to_string(), "bank": "Banco Continental"}})),
        (0i64..365).prop_map(|days| json!({"condition": "credit",
            "due_date": (NaiveDate::from_ymd_opt(2026, 3, 2).expect("date") + TimeDelta::days(days)).to_string()})),
    ]
}

/// An unnamed buyer only below 60 000 000 PYG (rule 1321): above, a named consumer instead.
fn named_above_limit(buyer: Option<Value>, grand: i128) -> Value {
    let unnamed = buyer
        .as_ref()
        .is_none_or(|b| b["operation_type"] == json!("anonymous"));
    if unnamed && grand >= 60_000_000 {
        json!({"legal_name": "Consumidor Identificado", "operation_type": "b2c",
               "document_type": "ci", "document_number": "1234567"})
    } else {
        buyer.unwrap_or(Value::Null)
    }
}

/// Splits `grand` into `n` whole installments that add up to it.
fn installments(grand: i128, n: usize) -> Value {
    let n = n.max(1) as i128;
    let share = grand / n;
    let mut list = Vec::new();
    for i in 0..n {
        let amount = if i + 1 == n {
            grand - share * (n - 1)
        } else {
            share
        };
        let due = NaiveDate::from_ymd_opt(2026, 4, 1).expect("date") + TimeDelta::days(30 * i as i64);
        list.push(json!({"due_date": due.to_string(), "amount": i64::try_from(amount).expect("small")}));
    }
    json!({"condition": "credit", "installments": list})
}

pub(crate) fn arb_document() -> impl Strategy<Value = Value> {
    // Issued before 2026-03-01 in Paraguay, so that every due date below comes after it.
    let issue = (0i64..(60 * 24 * 59)).prop_map(|minutes| {
        let start: DateTime<Utc> = "2026-01-01T03:00:00Z".parse().expect("utc");
        (start + TimeDelta::minutes(minutes)).to_rfc3339()
    });
    let installments_count = prop_oneof![3 => Just(0usize), 1 => 1usize..5];
    let reference = prop_oneof![
        2 => Just(None),
        1 => Just(Some(json!({"cdc": remision_cdc()}))),
        1 => Just(Some(json!({"timbrado": "55554444", "establishment": "003", "point": "001",
                              "number": "0000077", "issue_date": "2025-12-30"}))),
    ];
    let invoice = (
        (arb_lines(true), arb_buyer(true), arb_terms()),
        (
            installments_count,
            prop::sample::select(vec![1u8, 2, 3, 4, 5, 6, 9]),
            // 12, a sale of fiscal credit, needs a resolution's number kuatia cannot carry (2413).
            prop::sample::select(vec![1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13]),
            reference,
        ),
    )
        .prop_map(
            |((lines, buyer, terms), (n_installments, presence, transaction, reference))| {
                let (items, totals, grand) = priced(lines);
                let mut value = json!({"type": "invoice", "items": items, "totals": totals,
                "payment_terms": terms, "presence": presence, "transaction_type": transaction});
                if let Some(reference) = reference {
                    value["associated_document"] = reference;
                }
                if n_installments > 0 && grand > n_installments as i128 {
                    value["payment_terms"] = installments(grand, n_installments);
                }
                value["buyer"] = named_above_limit(buyer, grand);
                value
            },
        );
    let notes = (
        arb_lines(true),
        arb_buyer(false),
        1u8..=8,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(lines, buyer, reason, credit, printed)| {
            let (items, totals, grand) = priced(lines);
            let buyer = named_above_limit(buyer, grand);
            let associated = if printed {
                json!({"timbrado": "55554444", "establishment": "001", "point": "001",
                       "number": "0000123", "issue_date": "2025-05-30"})
            } else {
                json!({"cdc": invoice_cdc()})
            };
            json!({"type": if credit { "credit_note" } else { "debit_note" }, "items": items,
                   "totals": totals, "reason": reason, "associated_document": associated,
                   "buyer": buyer, "payment_terms": {"condition": "cash"}})
        });
    let autofactura = (arb_lines(false), 1u8..=2, any::<bool>()).prop_map(|(lines, constancia, foreign)| {
        let (items, totals, _) = priced(lines);
        let mut value = autofactura();
        value["items"] = items;
        value["totals"] = totals;
        value["associated_document"]["constancia_type"] = json!(constancia);
        if foreign {
            value["seller"]["document_type"] = json!("passport");
            value["seller"]["document_number"] = json!("AB-123456");
            value["seller"]["country"] = json!("BRA");
        }
        value
    });
    let remision = (
        arb_lines(true),
        prop::sample::select(vec![1u8, 2, 3, 7, 13, 14, 99]),
        1u32..=99_999,
        any::<bool>(),
    )
        .prop_map(|(lines, reason, km, with_id)| {
            let (items, totals, _) = priced(lines);
            let mut value = remision();
            value["items"] = items;
            value["totals"] = totals;
            value["reason"] = json!(reason);
            if reason == 7 {
                // Between the company's own premises: to the company itself (rule 2606).
                value["buyer"]["ruc"] = json!(COMPANY_RUC);
            }
            value["transport"]["distance_km"] = json!(km);
            value["transport"]
                .as_object_mut()
                .expect("object")
                .remove("start_date");
            value["transport"]
                .as_object_mut()
                .expect("object")
                .remove("end_date");
            if with_id {
                value["transport"]["vehicle"] =
                    json!({"type": "Furgón", "brand": "Kia", "id": "9BWZZZ377VT004251"});
                value["transport"]
                    .as_object_mut()
                    .expect("object")
                    .remove("carrier");
            }
            value
        });
    (
        prop_oneof![4 => invoice, 3 => notes, 1 => autofactura, 1 => remision],
        issue,
        1u32..1_000_000,
    )
        .prop_map(|(mut value, issued, n)| {
            if value["type"] != json!("autofactura") && value["seller"].is_null() {
                value["seller"] = json!({"ruc": COMPANY_RUC});
            }
            value["external_id"] = json!(format!("GEN-{n}"));
            if let Some(date) = value.get_mut("transport").and_then(|t| t.get_mut("invoice_date")) {
                // The future invoice's date: the remisión's own day (rules 2604, 2605).
                let at: DateTime<Utc> = issued.parse().expect("rfc3339");
                *date = json!(local_time::paraguay(at).date().to_string());
            }
            value["issue_datetime"] = json!(issued);
            value["currency"] = json!("PYG");
            if value["buyer"].is_null() {
                value.as_object_mut().expect("object").remove("buyer");
            }
            value
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn generated_documents_that_pass_validation_validate_against_the_xsd(
        value in arb_document(),
        number in 1u64..=9_999_999,
        production in any::<bool>(),
    ) {
        let document = valid_document(value.clone());
        let environment = if production { SifenEnvironment::Production } else { SifenEnvironment::Test };
        let built = build(&document, environment, number);
        prop_assert_eq!(built.item_count, document.items.len());
        if let Err(e) = xsd_check(&built) {
            prop_assert!(false, "{}\n{:#}", e, value);
        }
    }
}
