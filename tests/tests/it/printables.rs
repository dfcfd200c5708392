//! Printables end to end: SIFEN documents posted over HTTP, accepted by the simulator, get a
//! KuDE PDF whose text (`pdftotext`) holds the mandatory fields of a KuDE and whose QR
//! (`pdftoppm` + `zbarimg`) decodes to the signed XML's `dCarQR`; regenerate-pdf records a new
//! version laid out per the current print settings; the autoimpresor printable through the port.
//!
//! Needs poppler-utils (`pdftotext`, `pdftoppm`, `pdfinfo`) and zbar-tools (`zbarimg`).

use kuatia_application::artifacts::ArtifactStore;
use kuatia_application::printables::{Printable, Printer};
use kuatia_domain::document::canonical::sample_invoice;
use kuatia_infrastructure::sifen_sim::SimConfig;
use kuatia_tests::ScratchDir;
use kuatia_tests::{Simulated, hours_ago, id, send};
use reqwest::Method;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// An associated invoice for the notes (any CDC with a right check digit).
const INVOICE_CDC: &str = "01800695631001001000000122025011511234567899";

/// A service whose tenant's sifen channel sends to the simulator.
async fn served() -> Simulated {
    Simulated::named("printables", SimConfig::default(), |_| {}).await
}

/// Posts with a fresh Idempotency-Key: the id and the answer.
async fn post(f: &Simulated, doc: &Value) -> (String, Value) {
    let body = f.r.post(doc).await;
    (id(&body), body)
}

/// Waits until the document has `version` of its `kind` artifact; returns its bytes.
async fn wait_for(f: &Simulated, doc: &str, kind: &str, version: u64) -> Vec<u8> {
    let sha = f.wait_recorded(doc, kind, version, Duration::from_secs(60)).await;
    f.stored(&sha).await
}

/// Writes `bytes` as `name` in `dir`.
fn write(dir: &ScratchDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.0.join(name);
    std::fs::write(&path, bytes).expect("write");
    path
}

fn tool(name: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(name)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("`{name}` is needed (Debian: poppler-utils, zbar-tools): {e}"));
    assert!(
        out.status.success(),
        "{name} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn arg(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// The PDF's text with whitespace runs collapsed to one space.
fn text(pdf: &Path) -> String {
    tool("pdftotext", &[arg(pdf), "-"])
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the QR on page 1 decodes to.
fn qr(pdf: &Path) -> String {
    let png = pdf.with_extension("");
    tool(
        "pdftoppm",
        &[
            "-png",
            "-r",
            "300",
            "-f",
            "1",
            "-l",
            "1",
            "-singlefile",
            arg(pdf),
            arg(&png),
        ],
    );
    // QR codes only: other symbologies find phantom barcodes in the printed text (an I2/5 in
    // the CDC's digits once read "444253" beside the QR).
    let decoded = tool(
        "zbarimg",
        &[
            "--raw",
            "-q",
            "-Sdisable",
            "-Sqrcode.enable",
            arg(&png.with_extension("png")),
        ],
    );
    decoded.trim_end_matches('\n').to_owned()
}

/// `(pages, width in pt)` from `pdfinfo`.
fn info(pdf: &Path) -> (u32, f64) {
    let out = tool("pdfinfo", &[arg(pdf)]);
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or_else(|| panic!("no {name} in {out}"))
            .to_owned()
    };
    let pages = field("Pages:").parse().expect("pages");
    let size = field("Page size:");
    let width = size
        .split_whitespace()
        .next()
        .expect("width")
        .parse()
        .expect("number");
    (pages, width)
}

/// `dCarQR` of a signed XML, unescaped.
fn dcarqr(xml: &str) -> String {
    let start = xml.find("<dCarQR>").expect("dCarQR") + "<dCarQR>".len();
    let end = xml[start..].find("</dCarQR>").expect("end") + start;
    xml[start..end].replace("&amp;", "&")
}

fn grouped(cdc: &str) -> String {
    cdc.as_bytes()
        .chunks(4)
        .map(|c| std::str::from_utf8(c).expect("digits"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn assert_has(text: &str, what: &str, needles: &[&str]) {
    for n in needles {
        assert!(text.contains(n), "{what}: no {n:?} in the KuDE text:\n{text}");
    }
}

/// The checks every KuDE passes: a KuDE's mandatory content in its text, A4, one page, and a
/// QR on page 1 that decodes to the XML's `dCarQR`.
#[allow(clippy::too_many_arguments)]
fn check_kude(
    path: &Path,
    xml: &str,
    kind: &str,
    title: &str,
    number: &str,
    cdc: &str,
    timbrado: &str,
    valid_from: &str,
    extra: &[&str],
) {
    let text = text(path);
    assert_has(
        &text,
        kind,
        &[
            title,
            "RUC: 80069563-1",
            &format!("Timbrado N°: {timbrado}"),
            &format!("Fecha de inicio de vigencia: {valid_from}"),
            number,
            &grouped(cdc),
            "https://ekuatia.set.gov.py/consultas-test/",
            "ESTE DOCUMENTO ES UNA REPRESENTACIÓN GRÁFICA DE UN DOCUMENTO ELECTRÓNICO (XML)",
            "Página 1/1",
        ],
    );
    assert_has(&text, kind, extra);
    if kind == "remision" {
        assert!(
            !text.contains("TOTAL DE LA OPERACIÓN"),
            "a remisión has no totals"
        );
    } else {
        assert!(text.contains("TOTAL DE LA OPERACIÓN"), "{kind}: totals");
    }
    let (pages, width) = info(path);
    assert_eq!(pages, 1, "{kind}");
    assert!(
        (width - 595.28).abs() < 0.5,
        "{kind}: A4 by default, got {width} pt"
    );
    assert_eq!(qr(path), dcarqr(xml), "{kind}: the QR is dCarQR exactly");
}

#[tokio::test]
async fn every_sifen_type_gets_a_kude_with_the_mandatory_fields_and_a_qr_that_decodes_to_dcarqr() {
    let f = served().await;
    let scratch = ScratchDir::new();
    let note = |kind: &str| {
        let mut d = f.invoice(&format!("P-{kind}"));
        d["type"] = json!(kind);
        d["reason"] = json!(2);
        d["associated_document"] = json!({"cdc": INVOICE_CDC});
        d
    };
    let mut autofactura = f.invoice("P-autofactura");
    autofactura["type"] = json!("autofactura");
    // The seller lives in Asunción (department 1, city 1 of SET's geographic table).
    autofactura["seller"] = json!({"legal_name": "Juan Benítez", "document_type": "ci",
        "document_number": "1234567", "address": "Compañía Potrero", "house_number": "0",
        "department_code": 1, "city_code": 1});
    autofactura.as_object_mut().expect("object").remove("buyer");
    autofactura["items"] = json!([{"description": "Mandioca (kg)", "quantity": 100, "unit_price": 3000,
        "tax_rate": 0, "tax_amount": 0, "total_amount": 300000, "unit": 83}]);
    autofactura["totals"] = json!({"subtotal": 300000, "tax_total": 0, "grand_total": 300000});
    autofactura["payment_terms"] = json!({"condition": "cash", "method": "cash"});
    autofactura["associated_document"] = json!({"constancia_type": 1,
        "constancia_number": "12345678901", "constancia_control": "AB12-CD3"});

    // (type, body, title, what else the KuDE must show)
    let cases: Vec<(&str, Value, &str, Vec<&str>)> = vec![
        (
            "invoice",
            f.invoice("P-invoice"),
            "KuDE de Factura Electrónica",
            vec![
                "Licencia anual",
                "110.000",
                "55.000",
                "165.000",
                "2.619",
                "10.000",
                "12.619",
                "80013884-8",
                "Contado",
            ],
        ),
        (
            "credit_note",
            note("credit_note"),
            "KuDE de Nota de Crédito Electrónica",
            vec!["165.000", "12.619", &INVOICE_CDC[..4]],
        ),
        (
            "debit_note",
            note("debit_note"),
            "KuDE de Nota de Débito Electrónica",
            vec!["165.000", "12.619"],
        ),
        (
            "autofactura",
            autofactura,
            "KuDE de Autofactura Electrónica",
            vec!["Juan Benítez", "Mandioca (kg)", "300.000"],
        ),
    ];
    let mut posted = Vec::new();
    for (kind, body, _, _) in &cases {
        let (doc, answer) = post(&f, body).await;
        assert_eq!(answer["status"], "queued", "{kind}: {answer}");
        posted.push(doc);
    }
    for ((kind, _, title, extra), doc) in cases.iter().zip(&posted) {
        let pdf = wait_for(&f, doc, "kude", 1).await;
        let (status, s) = send(f.req(Method::GET, &format!("/v1/documents/{doc}/status"))).await;
        assert_eq!(status, 200);
        assert_eq!(s["status"], "accepted", "{kind}: {s}");
        let cdc = s["cdc"].as_str().expect("cdc");
        let number = s["number"].as_str().expect("number");
        let (_, xml_sha) = f.recorded(doc, "signed_xml").await.remove(0);
        let xml = String::from_utf8(f.stored(&xml_sha).await).expect("utf-8");

        let path = write(&scratch, &format!("{kind}.pdf"), &pdf);
        check_kude(
            &path,
            &xml,
            kind,
            title,
            number,
            cdc,
            "12345678",
            "01/01/2024",
            extra,
        );
    }
    f.app.stop().await;
}

#[tokio::test]
async fn a_long_invoice_numbers_its_pages_and_regenerate_pdf_adds_a_ticket_version() {
    let f = served().await;
    let scratch = ScratchDir::new();
    // 60 lines: two A4 pages, totals on the last.
    let mut long = f.invoice("P-long");
    long["items"] = Value::Array(
        (1..=60)
            .map(|n| {
                json!({"description": format!("Artículo número {n}"), "code": format!("A{n:03}"),
                       "quantity": 1, "unit_price": 11000, "tax_rate": 10, "tax_amount": 1000,
                       "total_amount": 11000})
            })
            .collect(),
    );
    long["totals"] = json!({"subtotal": 600000, "tax_total": 60000, "grand_total": 660000});
    let (doc, _) = post(&f, &long).await;

    // A document with nothing printable: 409 in the contract's error shape.
    let mut invalid = f.invoice("P-invalid");
    invalid["totals"]["grand_total"] = json!(1);
    let (bad, answer) = post(&f, &invalid).await;
    assert_eq!(answer["status"], "validation_failed", "{answer}");
    let (status, body) = send(f.req(Method::POST, &format!("/v1/documents/{bad}/regenerate-pdf"))).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "conflict_error", "{body}");
    assert!(body["request_id"].is_string(), "{body}");

    let pdf = wait_for(&f, &doc, "kude", 1).await;
    let path = write(&scratch, "long.pdf", &pdf);
    let (pages, width) = info(&path);
    assert_eq!(pages, 2);
    assert!((width - 595.28).abs() < 0.5);
    let first = tool("pdftotext", &["-f", "1", "-l", "1", arg(&path), "-"]);
    let last = tool("pdftotext", &["-f", "2", "-l", "2", arg(&path), "-"]);
    assert!(first.contains("Página 1/2"), "{first}");
    assert!(last.contains("Página 2/2"), "{last}");
    assert!(
        !first.contains("TOTAL DE LA OPERACIÓN"),
        "totals only on the last page"
    );
    assert!(
        last.contains("TOTAL DE LA OPERACIÓN") && last.contains("660.000"),
        "{last}"
    );
    assert!(first.contains("Artículo número 1\n") || first.contains("Artículo número 1 "));
    assert!(last.contains("Artículo número 60"), "{last}");

    // The company switches to the 80 mm ticket; a regenerated KuDE follows, v1 stays.
    let (status, saved) = send(f.req(Method::PUT, "/v1/print-settings").json(&json!({
        "company_id": f.r.company, "logo_text": "DE GENERACION", "business_activity": "Software",
        "footer_note": "Gracias", "copy_label": "ORIGINAL", "show_logo": false, "show_item_tax": true,
        "show_payment_terms": true, "show_copy_label": true, "page_width": 80,
    })))
    .await;
    assert!(status == 200 || status == 201, "{status}: {saved}");
    let (status, queued) = send(f.req(Method::POST, &format!("/v1/documents/{doc}/regenerate-pdf"))).await;
    assert_eq!(status, 202, "{queued}");
    assert_eq!(queued["type"], "kude", "{queued}");
    assert_eq!(queued["version"], 2, "{queued}");
    let ticket = wait_for(&f, &doc, "kude", 2).await;
    let versions = f.recorded(&doc, "kude").await;
    assert_eq!(versions.iter().map(|(v, _)| *v).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(f.stored(&versions[0].1).await, pdf, "version 1 is unchanged");
    let path = write(&scratch, "ticket.pdf", &ticket);
    let (pages, width) = info(&path);
    assert_eq!(pages, 1, "a ticket roll is one page");
    assert!((width - 226.77).abs() < 0.5, "80 mm = 226.77 pt, got {width}");
    let (_, xml_sha) = f.recorded(&doc, "signed_xml").await.remove(0);
    let xml = String::from_utf8(f.stored(&xml_sha).await).expect("utf-8");
    assert_eq!(qr(&path), dcarqr(&xml), "the ticket's QR is dCarQR too");
    let text = text(&path);
    assert_has(
        &text,
        "ticket",
        &["RUC: 80069563-1", "660.000", "Artículo número 60"],
    );
    f.app.stop().await;
}

#[tokio::test]
async fn the_autoimpresor_printable_shows_its_number_timbrado_validity_and_authorization() {
    use chrono::NaiveDate;
    use kuatia_application::printables::{AutoimpresorPrintable, PrintIssuer};
    use kuatia_domain::document::aggregate::DocumentNumber;
    use kuatia_domain::print_settings::PrintSettings;
    let printer = kuatia_infrastructure::printing::TypstPrinter::new();
    let printable = |watermark: Option<&str>| {
        Printable::Autoimpresor(Box::new(AutoimpresorPrintable {
            document: kuatia_domain::document::canonical::from_value(sample_invoice()).expect("sample"),
            issuer: PrintIssuer {
                legal_name: "DE GENERACION ELECTRONICA S.A.".into(),
                trade_name: None,
                ruc: "80069563-1".into(),
                address: "Avda. Mcal. López 1234, Asunción".into(),
                phone: Some("021 000 000".into()),
                email: None,
            },
            authorization: "AUT-2026-001".into(),
            valid_from: NaiveDate::from_ymd_opt(2026, 1, 1).expect("date"),
            valid_to: NaiveDate::from_ymd_opt(2026, 12, 31).expect("date"),
            number: DocumentNumber {
                timbrado: "87654321".into(),
                establishment: "001".into(),
                point: "002".into(),
                number: "0000042".into(),
            },
            issued_at: NaiveDate::from_ymd_opt(2026, 3, 2)
                .and_then(|d| d.and_hms_opt(10, 15, 0))
                .expect("time"),
            watermark: watermark.map(str::to_owned),
        }))
    };
    let mut settings = PrintSettings::defaults("DE GENERACION ELECTRONICA S.A.");
    settings.business_activity = "Desarrollo de software".into();
    settings.footer_note = "Gracias por su compra".into();
    settings.copy_label = kuatia_domain::print_settings::CopyLabel::Copia;
    settings.template_elements = Some(vec![json!({"type": "text", "text": "Pie adicional"})]);
    let dir = std::env::temp_dir().join(format!("kuatia-autoimpresor-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).expect("dir");

    let pdf = printer.render(printable(None), &settings).await.expect("render");
    let path = dir.join("autoimpresor.pdf");
    std::fs::write(&path, &pdf).expect("write");
    let t = text(&path);
    assert_has(
        &t,
        "autoimpresor",
        &[
            "FACTURA",
            "N° 001-002-0000042",
            "Timbrado N°: 87654321",
            "Vigencia: 01/01/2026 al 31/12/2026",
            "Autorización autoimpresor N°: AUT-2026-001",
            "RUC: 80069563-1",
            "02/03/2026 10:15:00",
            "Desarrollo de software",
            "Gracias por su compra",
            "Pie adicional",
            "COPIA",
            "165.000",
            "12.619",
            "Página 1/1",
        ],
    );
    let raw = tool("pdftotext", &["-raw", arg(&path), "-"]);
    assert!(!raw.contains("FISCAL"), "no watermark unless given");
    assert!(t.contains("Impuesto"), "show_item_tax is on: {t}");

    // Without the copy label and the item tax, with a watermark, on a ticket.
    settings.show_copy_label = false;
    settings.show_item_tax = false;
    settings.page_width = Some(80.0);
    let pdf = printer
        .render(printable(Some("SIN VALOR FISCAL")), &settings)
        .await
        .expect("render");
    let path = dir.join("autoimpresor-ticket.pdf");
    std::fs::write(&path, &pdf).expect("write");
    let t = text(&path);
    assert_has(&t, "ticket", &["N° 001-002-0000042", "AUT-2026-001"]);
    // The watermark is diagonal: in content order (`-raw`) its words stay together.
    let raw = tool("pdftotext", &["-raw", arg(&path), "-"])
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(raw.contains("SIN VALOR FISCAL"), "{raw}");
    assert!(!t.contains("COPIA"), "show_copy_label is off");
    assert!(!t.contains("IVA 10 %:"), "show_item_tax is off");
    let (_, width) = info(&path);
    assert!((width - 226.77).abs() < 0.5, "{width}");
}

/// A DE built, signed and given its QR the way the SIFEN pipeline does (`sifen.prepare`).
fn signed_de(document: Value, remision_notice: Option<&str>) -> (String, String) {
    use kuatia_domain::channel::SifenEnvironment;
    use kuatia_domain::company::{EconomicActivity, TaxpayerType};
    use kuatia_domain::sifen::de::{self, DeInput, Issuer};
    use kuatia_domain::sifen::qr::{self, Csc, QrData};
    use kuatia_infrastructure::sifen::sign::{self, SigningKey};
    let issuer = Issuer {
        ruc: kuatia_domain::ruc::Ruc::parse("80069563-1").expect("ruc"),
        taxpayer_type: TaxpayerType::LegalEntity,
        tax_regime: Some(8),
        legal_name: "DE GENERACION ELECTRONICA S.A.".into(),
        trade_name: None,
        address: "Avda. Mcal. López".into(),
        house_number: "1234".into(),
        department_code: 1,
        district_code: Some(1),
        district_name: Some("ASUNCION (DISTRITO)".into()),
        city_code: 1,
        city_name: "ASUNCION (DISTRITO)".into(),
        phone: "021000000".into(),
        email: "facturas@example.com.py".into(),
        branch_name: Some("Casa central".into()),
        economic_activities: vec![EconomicActivity {
            code: "62010".into(),
            description: "Programación informática".into(),
        }],
        timbrado: "12345678".into(),
        timbrado_valid_from: chrono::NaiveDate::from_ymd_opt(2024, 1, 1).expect("date"),
        establishment: "001".into(),
        point: "001".into(),
        environment: SifenEnvironment::Test,
        remision_notice: remision_notice.map(str::to_owned),
    };
    let document = kuatia_domain::document::canonical::from_value(document).expect("valid");
    let built = de::build_rde(&DeInput {
        document: &document,
        issuer: &issuer,
        number: 7,
        security_code: "123456789",
        signed_at: kuatia_domain::local_time::paraguay(chrono::Utc::now()),
    })
    .expect("built");
    let (pkey, cert) = kuatia_infrastructure::selfsigned::SelfSigned::for_ruc(
        "DE GENERACION ELECTRONICA S.A.",
        "80069563-1",
        30,
    )
    .generate()
    .expect("certificate");
    let key = SigningKey::new(pkey, &cert).expect("key");
    let signed = sign::sign_de(&built.xml, &key).expect("signed");
    let url = qr::qr_url(
        &QrData {
            environment: SifenEnvironment::Test,
            cdc: built.cdc.as_str(),
            emitted_at: &built.issued_at,
            receiver: built.qr_receiver(),
            total: &built.total,
            total_iva: &built.total_iva,
            items: built.item_count,
            digest_value: &signed.digest_value,
        },
        &Csc {
            id: "0001",
            secret: "ABCD0000000000000000000000000000",
        },
    )
    .expect("qr");
    let mut xml = signed.xml;
    sign::append_qr(&mut xml, &url).expect("qr appended");
    (xml, built.cdc.as_str().to_owned())
}

// The service cannot issue a remisión yet (the SIFEN pipeline's issuer has no `remision_notice`
// for dInfoFisc), so its KuDE is rendered through the port from a DE signed as the pipeline signs.
#[tokio::test]
async fn a_remision_kude_shows_its_transport_and_fiscal_notice_and_no_totals() {
    let mut remision = sample_invoice();
    remision["issue_datetime"] = json!(hours_ago(1));
    remision["type"] = json!("remision");
    remision["reason"] = json!(1);
    remision["buyer"]["address"] = json!("Av. Mariscal López");
    remision["buyer"]["house_number"] = json!("1234");
    remision["buyer"]["department_code"] = json!(1);
    remision["buyer"]["city_code"] = json!(1);
    remision["transport"] = json!({
        "kind": "own", "distance_km": 12, "invoice_date": &hours_ago(1)[..10],
        "vehicle": {"type": "Camión", "brand": "Scania", "plate": "ABC123"},
        "carrier": {"name": "Transportes SA", "ruc": "80013884-8", "address": "Ruta 1",
                    "driver_document": "1234567", "driver_name": "Pedro Gómez",
                    "driver_address": "Luque"}
    });
    let (xml, cdc) = signed_de(remision, Some("Traslado conforme a la RG 41/2014"));
    let printer = kuatia_infrastructure::printing::TypstPrinter::new();
    let settings = kuatia_domain::print_settings::PrintSettings::defaults("DE GENERACION ELECTRONICA S.A.");
    let pdf = printer
        .render(
            Printable::Kude {
                signed_xml: xml.clone().into_bytes(),
                watermark: None,
            },
            &settings,
        )
        .await
        .expect("render");
    let dir = std::env::temp_dir().join(format!("kuatia-remision-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("remision.pdf");
    std::fs::write(&path, &pdf).expect("write");
    check_kude(
        &path,
        &xml,
        "remision",
        "KuDE de Nota de Remisión Electrónica",
        "001-001-0000007",
        &cdc,
        "12345678",
        "01/01/2024",
        &[
            "Traslado conforme a la RG 41/2014",
            "Licencia anual",
            "Av. Mariscal López",
            "Transportes SA",
            "Pedro Gómez",
            "Scania",
        ],
    );
}

/// MT §13.4.3: the KuDE's "Subtotal exentas" is dSubExe alone. An invoice whose only line is
/// exonerated (iAfecIVA 2) shows 0 exentas and its exonerated sales on their own line.
#[tokio::test]
async fn an_exonerated_only_invoice_prints_zero_exentas_and_its_exoneradas_on_their_own_line() {
    let mut invoice = sample_invoice();
    invoice["issue_datetime"] = json!(hours_ago(1));
    invoice["items"] = json!([{
        "description": "Maquinaria agrícola", "quantity": 1, "unit_price": 3600000,
        "tax_rate": 0, "tax_amount": 0, "total_amount": 3600000, "exemption": "exonerated"
    }]);
    invoice["totals"] = json!({"subtotal": 3600000, "tax_total": 0, "grand_total": 3600000});
    let (xml, _) = signed_de(invoice, None);
    assert!(
        xml.contains("<dSubExe>0</dSubExe><dSubExo>3600000</dSubExo>"),
        "{xml}"
    );
    let printer = kuatia_infrastructure::printing::TypstPrinter::new();
    let settings = kuatia_domain::print_settings::PrintSettings::defaults("DE GENERACION ELECTRONICA S.A.");
    let pdf = printer
        .render(
            Printable::Kude {
                signed_xml: xml.into_bytes(),
                watermark: None,
            },
            &settings,
        )
        .await
        .expect("render");
    let dir = std::env::temp_dir().join(format!("kuatia-exonerated-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("exonerated.pdf");
    std::fs::write(&path, &pdf).expect("write");
    // Line by line, as laid out: each label beside its figure.
    let layout = tool("pdftotext", &["-layout", arg(&path), "-"]);
    let figure = |label: &str| -> String {
        let line = layout
            .lines()
            .find(|l| l.contains(label))
            .unwrap_or_else(|| panic!("no {label:?} in\n{layout}"));
        line.split_whitespace().last().unwrap_or_default().to_owned()
    };
    assert_eq!(figure("Subtotal exentas"), "0", "{layout}");
    assert_eq!(figure("Subtotal exoneradas"), "3.600.000", "{layout}");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn regenerate_pdf_of_an_autoimpresor_document_adds_a_printable_version() {
    let f = crate::autoimpresor::Fx::new("printables-auto", (1, 100), 30, 0).await;
    let doc = f.post(&f.receipt("P-auto-1")).await;
    f.until(std::slice::from_ref(&doc), Duration::from_secs(30), |s| {
        s["status"] == "accepted"
    })
    .await;
    let (status, queued) = send(f.req(Method::POST, &format!("/v1/documents/{doc}/regenerate-pdf"))).await;
    assert_eq!(status, 202, "{queued}");
    assert_eq!(queued["type"], "printable_pdf", "{queued}");
    assert_eq!(queued["version"], 2, "{queued}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let printed = loop {
        let printed = f.recorded(&doc, "printable_pdf").await;
        if printed.len() == 2 {
            break printed;
        }
        assert!(std::time::Instant::now() < deadline, "no version 2: {printed:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(printed.iter().map(|(v, _)| *v).collect::<Vec<_>>(), vec![1, 2]);
    let store =
        kuatia_infrastructure::artifacts::LocalArtifacts::new(f.app.db.config().data_dir.join("artifacts"));
    let dir = std::env::temp_dir().join(format!("kuatia-auto-regen-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).expect("dir");
    for (version, sha) in &printed {
        let pdf = store.get(sha).await.expect("read").expect("stored");
        let path = dir.join(format!("v{version}.pdf"));
        std::fs::write(&path, &pdf).expect("write");
        assert_has(
            &text(&path),
            &format!("printable v{version}"),
            &[
                "N° 001-001-0000001",
                "Timbrado N°: 87654321",
                "AUT-2026-001",
                "165.000",
            ],
        );
    }
    f.app.stop().await;
}
