use super::*;
use chrono::NaiveDate;
use kuatia_application::printables::{AutoimpresorPrintable, PrintIssuer};
use kuatia_domain::document::aggregate::DocumentNumber;
use kuatia_domain::document::canonical::{from_value, sample_invoice};

const FE: &str = include_str!("../sifen_sim/fixtures/fe-signed-selfsigned-qr.xml");
const NC: &str = include_str!("../../../vendor/sifen/vectors/generated/nc-signed-selfsigned-qr.xml");

fn kude(xml: &str) -> Printable {
    Printable::Kude {
        signed_xml: xml.as_bytes().to_vec(),
        watermark: None,
    }
}

fn ticket() -> PrintSettings {
    let mut s = PrintSettings::defaults("DEMO S.A.");
    s.page_width = Some(80.0);
    s
}

pub(super) fn autoimpresor_sample() -> AutoimpresorPrintable {
    AutoimpresorPrintable {
        document: from_value(sample_invoice()).expect("sample"),
        issuer: PrintIssuer {
            legal_name: "DEMO S.A.".into(),
            trade_name: Some("Demo".into()),
            ruc: "80069563-1".into(),
            address: "Avda. España 1234, Asunción".into(),
            phone: Some("021 123 456".into()),
            email: Some("facturacion@demo.com.py".into()),
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
        watermark: Some("SIN VALOR FISCAL".into()),
    }
}

fn is_pdf(bytes: &[u8]) -> bool {
    bytes.starts_with(b"%PDF-") && bytes.len() > 1000
}

#[test]
fn every_layout_renders_to_a_pdf() {
    let printer = TypstPrinter::new();
    let a4 = PrintSettings::defaults("DEMO S.A.");
    for (name, printable, settings) in [
        ("FE A4", kude(FE), a4.clone()),
        ("FE ticket", kude(FE), ticket()),
        ("NC A4", kude(NC), a4.clone()),
        (
            "autoimpresor A4",
            Printable::Autoimpresor(Box::new(autoimpresor_sample())),
            a4.clone(),
        ),
        (
            "autoimpresor ticket",
            Printable::Autoimpresor(Box::new(autoimpresor_sample())),
            ticket(),
        ),
    ] {
        let pdf = printer
            .render_blocking(&printable, &settings)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(is_pdf(&pdf), "{name}");
    }
}

#[test]
fn a_logo_is_printed_when_the_settings_say_so() {
    use base64::Engine as _;
    let printer = TypstPrinter::new();
    let mut settings = PrintSettings::defaults("DEMO S.A.");
    settings.logo_image_data_url = Some(format!(
        "data:image/jpeg;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(include_bytes!("testdata/logo.jpg"))
    ));
    let without = printer.render_blocking(&kude(FE), &settings).expect("without");
    settings.show_logo = true;
    let with = printer.render_blocking(&kude(FE), &settings).expect("with");
    assert!(
        is_pdf(&with) && with.len() > without.len(),
        "the image is embedded"
    );
    let auto = Printable::Autoimpresor(Box::new(autoimpresor_sample()));
    let with = printer.render_blocking(&auto, &settings).expect("autoimpresor");
    settings.show_logo = false;
    let without = printer.render_blocking(&auto, &settings).expect("autoimpresor");
    assert!(with.len() > without.len(), "the image is embedded");
}

#[test]
fn the_same_input_renders_the_same_bytes() {
    let printer = TypstPrinter::new();
    let settings = PrintSettings::defaults("DEMO S.A.");
    let one = printer.render_blocking(&kude(FE), &settings).expect("one");
    let two = printer.render_blocking(&kude(FE), &settings).expect("two");
    assert_eq!(one, two);
}

#[test]
fn a_signed_xml_that_is_not_a_de_is_an_input_error() {
    let printer = TypstPrinter::new();
    let settings = PrintSettings::defaults("DEMO S.A.");
    let err = printer
        .render_blocking(&kude("<a/>"), &settings)
        .expect_err("refused");
    assert!(matches!(err, PrintError::Input(_)), "{err}");
}

#[test]
fn a_narrow_page_is_a_ticket_and_a_wide_one_keeps_its_size() {
    let narrow = Page::of(&ticket(), None);
    assert!(narrow.ticket);
    assert_eq!((narrow.width_mm, narrow.height_mm), (80.0, None));
    let a4 = Page::of(&PrintSettings::defaults("X"), Some(" ".into()));
    assert!(!a4.ticket);
    assert_eq!(
        (a4.width_mm, a4.height_mm, a4.watermark),
        (210.0, Some(297.0), None)
    );
    let mut letter = PrintSettings::defaults("X");
    letter.page_width = Some(215.9);
    letter.page_height = Some(279.4);
    let letter = Page::of(&letter, None);
    assert_eq!((letter.width_mm, letter.height_mm), (215.9, Some(279.4)));
}

/// Writes sample PDFs (the pictures of `docs/printables.md`):
/// `KUATIA_PRINT_DIR=/tmp/p cargo test -p kuatia-infrastructure printing::tests::samples -- --ignored`.
#[test]
#[ignore = "writes sample PDFs for the documentation"]
fn samples() {
    let dir = std::path::PathBuf::from(std::env::var("KUATIA_PRINT_DIR").expect("KUATIA_PRINT_DIR"));
    std::fs::create_dir_all(&dir).expect("dir");
    let printer = TypstPrinter::new();
    let a4 = PrintSettings::defaults("DEMO S.A.");
    let mut auto_settings = a4.clone();
    auto_settings.logo_text = "DEMO".into();
    auto_settings.business_activity = "Desarrollo de software".into();
    auto_settings.footer_note = "Gracias por su preferencia".into();
    let mut sample = autoimpresor_sample();
    sample.watermark = None;
    for (name, printable, settings) in [
        ("kude-a4", kude(FE), a4.clone()),
        ("kude-nc-a4", kude(NC), a4.clone()),
        ("kude-ticket", kude(FE), ticket()),
        (
            "autoimpresor-a4",
            Printable::Autoimpresor(Box::new(sample.clone())),
            auto_settings.clone(),
        ),
        (
            "autoimpresor-preview",
            Printable::Autoimpresor(Box::new(autoimpresor_sample())),
            auto_settings,
        ),
    ] {
        let pdf = printer.render_blocking(&printable, &settings).expect(name);
        std::fs::write(dir.join(format!("{name}.pdf")), pdf).expect("write");
    }
}
