//! KuDE PDFs rendered per second on one core.
//!
//! ```sh
//! cargo bench -p kuatia-infrastructure --bench kude_render
//! ```
//!
//! One thread renders the KuDE of the sample signed invoice (2 lines, A4; the fixture the SIFEN
//! simulator uses) with one `TypstPrinter`, as the KuDE job does, for `KUATIA_BENCH_SECS`
//! (default 5) seconds after one warm-up render, each render with another document number; then
//! the same for the 80 mm ticket and for a 60-line invoice (two A4 pages). Each render reads the XML, draws the QR, compiles the
//! template and writes the PDF; fonts and templates are loaded once per printer.

use kuatia_application::printables::Printable;
use kuatia_domain::print_settings::PrintSettings;
use kuatia_infrastructure::printing::TypstPrinter;
use std::time::{Duration, Instant};

const FE: &str = include_str!("../src/sifen_sim/fixtures/fe-signed-selfsigned-qr.xml");

/// The fixture with `lines` copies of its first item (the layout cost grows with the lines; the
/// signature is not checked by the renderer).
fn with_lines(lines: usize) -> String {
    let start = FE.find("<gCamItem>").expect("item");
    let end = FE.find("</gCamItem>").expect("item end") + "</gCamItem>".len();
    let item = &FE[start..end];
    let last = FE.rfind("</gCamItem>").expect("last item") + "</gCamItem>".len();
    format!("{}{}{}", &FE[..start], item.repeat(lines), &FE[last..])
}

/// The document with number `n` (every render gets another document, so Typst's memoisation
/// cannot replay a whole earlier render).
fn numbered(xml: &str, n: u64) -> Printable {
    let number = format!("<dNumDoc>{:07}</dNumDoc>", n % 9_999_999 + 1);
    Printable::Kude {
        signed_xml: xml.replace("<dNumDoc>0000001</dNumDoc>", &number).into_bytes(),
        watermark: None,
    }
}

fn run(
    printer: &TypstPrinter,
    name: &str,
    xml: &str,
    settings: &PrintSettings,
    window: Duration,
) -> anyhow::Result<()> {
    let first = Instant::now();
    let bytes = printer.render_blocking(&numbered(xml, 0), settings)?.len();
    let cold = first.elapsed();
    let started = Instant::now();
    let mut renders = 0u64;
    while started.elapsed() < window {
        renders += 1;
        std::hint::black_box(printer.render_blocking(&numbered(xml, renders), settings)?);
    }
    let elapsed = started.elapsed();
    let rate = renders as f64 / elapsed.as_secs_f64();
    println!(
        "{name}: {rate:.1} KuDE/s on one core ({:.1} ms each; first render {:.0} ms), {bytes} bytes",
        1000.0 / rate,
        cold.as_secs_f64() * 1000.0
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let secs: u64 = std::env::var("KUATIA_BENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let window = Duration::from_secs(secs.max(1));
    let loading = Instant::now();
    let printer = TypstPrinter::new();
    println!(
        "printer (fonts, templates) ready in {:.0} ms",
        loading.elapsed().as_secs_f64() * 1000.0
    );
    let a4 = PrintSettings::defaults("DEMO S.A.");
    let mut ticket = a4.clone();
    ticket.page_width = Some(80.0);
    run(&printer, "A4, 2 lines", FE, &a4, window)?;
    run(&printer, "ticket 80 mm, 2 lines", FE, &ticket, window)?;
    run(&printer, "A4, 60 lines (2 pages)", &with_lines(60), &a4, window)?;
    Ok(())
}
