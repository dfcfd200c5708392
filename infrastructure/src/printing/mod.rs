//! Printables (SIFEN's KuDE and the autoimpresor printable) rendered to PDF with Typst.
//!
//! Start at [`TypstPrinter`]. Rendering is three steps:
//! 1. read the input into plain, already formatted data ([`kude::read`] from the signed DE,
//!    [`autoimpresor::data`] from the canonical document), serialised as `/data.json`;
//! 2. draw the QR (`dCarQR`, byte for byte) as `/qr.svg` and take the logo as `/logo.jpg`;
//! 3. compile the embedded template (`templates/kude.typ` or `templates/autoimpresor.typ`, both
//!    importing `templates/common.typ`) in a [`World`] that knows only those files and the fonts
//!    bundled with Typst (Libertinus Serif, DejaVu Sans Mono), then export the PDF.
//!
//! Fonts, the standard library and the parsed templates are built once per printer and shared
//! by every render ([`Shared`]); Typst's own memoisation (comemo) then reuses layout work
//! between renders, and is trimmed after each one so it cannot grow without bound. Rendering is
//! CPU work: a render someone waits for runs under `spawn_blocking`, one nobody waits for (the
//! KuDE job) on the low-priority threads of [`background`].
//!
//! Layout follows the print settings: `page_width`/`page_height`
//! in millimetres (A4 by default); a width of 110 mm or less is a till roll and gets the ticket
//! layout (MT §13.6), whose height grows with the content unless `page_height` is set.
//! The KuDE takes only the page size and the logo from the settings: SIFEN allows nothing on a
//! KuDE that is not in the signed XML but the logo and the legends.

pub mod autoimpresor;
pub mod background;
pub use kuatia_domain::format;
pub mod kude;

use async_trait::async_trait;
use base64::Engine as _;
use kuatia_application::printables::{PrintError, Printable, Printer};
use kuatia_domain::print_settings::PrintSettings;
use serde::Serialize;
use std::sync::Arc;
use typst::diag::{FileError, FileResult, SourceDiagnostic};
use typst::foundations::{Bytes, Datetime};
use typst::syntax::{FileId, RootedPath, Source, VirtualPath, VirtualRoot};
use typst::text::{Font, FontBook};
use typst::utils::LazyHash;
use typst::{Library, LibraryExt, World};
use typst_layout::PagedDocument;

/// The templates, compiled into the binary.
const COMMON_TYP: &str = include_str!("../../templates/common.typ");
const KUDE_TYP: &str = include_str!("../../templates/kude.typ");
const AUTOIMPRESOR_TYP: &str = include_str!("../../templates/autoimpresor.typ");

/// Widths at or under this many millimetres get the ticket layout.
pub const TICKET_MAX_WIDTH_MM: f64 = 110.0;

/// Comemo entries unused for this many renders are dropped after each render.
const CACHE_MAX_AGE: usize = 20;

/// What never changes between renders: fonts, the standard library, the parsed templates.
struct Shared {
    library: LazyHash<Library>,
    book: LazyHash<FontBook>,
    fonts: Vec<Font>,
    common: Source,
    kude: Source,
    autoimpresor: Source,
    data_id: FileId,
    qr_id: FileId,
    logo_id: FileId,
}

fn file_id(path: &str) -> FileId {
    let vpath = VirtualPath::new(path).expect("a static, valid virtual path");
    RootedPath::new(VirtualRoot::Project, vpath).intern()
}

impl Shared {
    fn new() -> Self {
        let fonts: Vec<Font> = typst_assets::fonts()
            .flat_map(|data| Font::iter(Bytes::new(data)))
            .collect();
        Self {
            library: LazyHash::new(Library::default()),
            book: LazyHash::new(FontBook::from_fonts(&fonts)),
            fonts,
            common: Source::new(file_id("/common.typ"), COMMON_TYP.to_owned()),
            kude: Source::new(file_id("/kude.typ"), KUDE_TYP.to_owned()),
            autoimpresor: Source::new(file_id("/autoimpresor.typ"), AUTOIMPRESOR_TYP.to_owned()),
            data_id: file_id("/data.json"),
            qr_id: file_id("/qr.svg"),
            logo_id: file_id("/logo.jpg"),
        }
    }
}

/// One render's view of the files: the shared templates and fonts plus this document's data.
struct RenderWorld<'a> {
    shared: &'a Shared,
    main: FileId,
    data: Bytes,
    qr: Option<Bytes>,
    logo: Option<Bytes>,
}

impl World for RenderWorld<'_> {
    fn library(&self) -> &LazyHash<Library> {
        &self.shared.library
    }

    fn book(&self) -> &LazyHash<FontBook> {
        &self.shared.book
    }

    fn main(&self) -> FileId {
        self.main
    }

    fn source(&self, id: FileId) -> FileResult<Source> {
        let s = self.shared;
        [&s.common, &s.kude, &s.autoimpresor]
            .into_iter()
            .find(|source| source.id() == id)
            .cloned()
            .ok_or_else(|| not_found(id))
    }

    fn file(&self, id: FileId) -> FileResult<Bytes> {
        let s = self.shared;
        let found = if id == s.data_id {
            Some(self.data.clone())
        } else if id == s.qr_id {
            self.qr.clone()
        } else if id == s.logo_id {
            self.logo.clone()
        } else {
            self.source(id)
                .ok()
                .map(|source| Bytes::from_string(source.text().to_owned()))
        };
        found.ok_or_else(|| not_found(id))
    }

    fn font(&self, index: usize) -> Option<Font> {
        self.shared.fonts.get(index).cloned()
    }

    fn today(&self, _offset: Option<typst::foundations::Duration>) -> Option<Datetime> {
        // The templates print only dates from the document; none depends on the clock.
        None
    }
}

fn not_found(id: FileId) -> FileError {
    FileError::NotFound(std::path::PathBuf::from(id.vpath().get_with_slash()))
}

/// How the page is laid out, from the print settings.
///
/// Numbers go to the templates as text (`float(…)` there): with serde_json's
/// `arbitrary_precision` (which the workspace enables for exact amounts) Typst's JSON reader
/// would see every number as a dictionary.
#[derive(Debug, Clone, Serialize)]
struct Page {
    #[serde(serialize_with = "as_text")]
    width_mm: f64,
    /// `None`: as tall as the content (ticket roll).
    #[serde(serialize_with = "as_optional_text")]
    height_mm: Option<f64>,
    ticket: bool,
    watermark: Option<String>,
}

fn as_text<S: serde::Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&value.to_string())
}

fn as_optional_text<S: serde::Serializer>(value: &Option<f64>, serializer: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(v) => serializer.serialize_str(&v.to_string()),
        None => serializer.serialize_none(),
    }
}

impl Page {
    fn of(settings: &PrintSettings, watermark: Option<String>) -> Self {
        let width = settings.page_width.filter(|w| w.is_finite() && *w > 0.0);
        let height = settings.page_height.filter(|h| h.is_finite() && *h > 0.0);
        let ticket = width.is_some_and(|w| w <= TICKET_MAX_WIDTH_MM);
        Self {
            width_mm: width.unwrap_or(210.0),
            height_mm: if ticket {
                height
            } else {
                Some(height.unwrap_or(297.0))
            },
            ticket,
            watermark: watermark.filter(|w| !w.trim().is_empty()),
        }
    }
}

#[derive(Serialize)]
struct Input<'a, T: Serialize> {
    page: &'a Page,
    /// Whether `/logo.jpg` is there to print (`show_logo` and a logo image).
    logo: bool,
    doc: &'a T,
}

/// The QR of `content` as SVG (error correction M; the template sizes it).
fn qr_svg(content: &str) -> Result<String, PrintError> {
    let code = qrcode::QrCode::with_error_correction_level(content.as_bytes(), qrcode::EcLevel::M)
        .map_err(|e| PrintError::Input(format!("the QR cannot hold dCarQR: {e}")))?;
    Ok(code
        .render::<qrcode::render::svg::Color<'_>>()
        .quiet_zone(true)
        .module_dimensions(4, 4)
        .build())
}

/// The logo image of the settings, when it is to be printed (a JPEG data URL; checked on save).
fn logo(settings: &PrintSettings) -> Option<Bytes> {
    if !settings.show_logo {
        return None;
    }
    let data = settings
        .logo_image_data_url
        .as_deref()?
        .strip_prefix("data:image/jpeg;base64,")?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .ok()?;
    Some(Bytes::new(bytes))
}

/// Typst's errors with where they are (`/kude.typ:12`), for the log.
fn diagnostics(world: &RenderWorld<'_>, what: &str, errors: &[SourceDiagnostic]) -> PrintError {
    use typst::WorldExt as _;
    let messages: Vec<String> = errors
        .iter()
        .map(|d| {
            let place = d.span.id().and_then(|id| {
                let source = world.source(id).ok()?;
                let line = source.lines().byte_to_line(world.range(d.span)?.start)?;
                Some(format!("{}:{}", id.vpath().get_with_slash(), line + 1))
            });
            match place {
                Some(place) => format!("{place}: {}", d.message),
                None => d.message.to_string(),
            }
        })
        .collect();
    PrintError::Render(format!("{what}: {}", messages.join("; ")))
}

/// Renders printables with Typst. Cheap to clone; clones share fonts and templates.
#[derive(Clone)]
pub struct TypstPrinter {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for TypstPrinter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypstPrinter")
            .field("fonts", &self.shared.fonts.len())
            .finish_non_exhaustive()
    }
}

impl Default for TypstPrinter {
    fn default() -> Self {
        Self::new()
    }
}

impl TypstPrinter {
    /// A renderer with the embedded templates and fonts (loads the fonts: build it once).
    pub fn new() -> Self {
        Self {
            shared: Arc::new(Shared::new()),
        }
    }

    /// Renders on the calling thread (CPU work: call it off the async runtime, or use
    /// [`Printer::render`], which does).
    pub fn render_blocking(
        &self,
        printable: &Printable,
        settings: &PrintSettings,
    ) -> Result<Vec<u8>, PrintError> {
        let s = &*self.shared;
        let logo = logo(settings);
        let (main, data, qr, title) = match printable {
            Printable::Kude {
                signed_xml,
                watermark,
            } => {
                let doc = kude::read(signed_xml)?;
                let page = Page::of(settings, watermark.clone());
                let data = serde_json::to_vec(&Input {
                    page: &page,
                    logo: logo.is_some(),
                    doc: &doc,
                })
                .map_err(|e| PrintError::Render(format!("the data: {e}")))?;
                let title = format!("{} {}", doc.title, doc.number);
                (s.kude.id(), data, Some(qr_svg(&doc.qr)?), title)
            }
            Printable::Autoimpresor(p) => {
                let page = Page::of(settings, p.watermark.clone());
                let doc = autoimpresor::data(p, settings, logo.is_some());
                let data = serde_json::to_vec(&Input {
                    page: &page,
                    logo: logo.is_some(),
                    doc: &doc,
                })
                .map_err(|e| PrintError::Render(format!("the data: {e}")))?;
                let title = format!("{} {}", doc.type_caps, doc.number);
                (s.autoimpresor.id(), data, None, title)
            }
        };
        let world = RenderWorld {
            shared: s,
            main,
            data: Bytes::new(data),
            qr: qr.map(Bytes::from_string),
            logo,
        };
        let compiled = typst::compile::<PagedDocument>(&world);
        let result = compiled
            .output
            .map_err(|errors| diagnostics(&world, "the template", &errors))
            .and_then(|document| {
                let options = typst_pdf::PdfOptions {
                    ident: typst::foundations::Smart::Custom(title),
                    ..typst_pdf::PdfOptions::default()
                };
                typst_pdf::pdf(&document, &options).map_err(|errors| diagnostics(&world, "the PDF", &errors))
            });
        typst::comemo::evict(CACHE_MAX_AGE);
        result
    }
}

#[async_trait]
impl Printer for TypstPrinter {
    async fn render(&self, printable: Printable, settings: &PrintSettings) -> Result<Vec<u8>, PrintError> {
        let (printer, settings) = (self.clone(), settings.clone());
        tokio::task::spawn_blocking(move || printer.render_blocking(&printable, &settings))
            .await
            .map_err(|e| PrintError::Render(format!("the rendering task: {e}")))?
    }

    async fn render_background(
        &self,
        printable: Printable,
        settings: &PrintSettings,
    ) -> Result<Vec<u8>, PrintError> {
        let (printer, settings) = (self.clone(), settings.clone());
        background::run(move || printer.render_blocking(&printable, &settings))
            .await
            .map_err(|_| PrintError::Render("the background rendering task stopped".into()))?
    }
}

#[cfg(test)]
mod tests;
