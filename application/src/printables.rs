//! The printables port: a document's PDF, either SIFEN's KuDE (drawn from the signed DE, which
//! holds everything SIFEN makes mandatory on a KuDE, `dCarQR` included) or the autoimpresor printable
//! (drawn from the canonical document and the autoimpresor authorization). Rendering is CPU
//! work: implementations run it off the async runtime.

use async_trait::async_trait;
use chrono::{NaiveDate, NaiveDateTime};
use kuatia_domain::document::aggregate::DocumentNumber;
use kuatia_domain::document::canonical::CanonicalDocument;
use kuatia_domain::print_settings::PrintSettings;

/// Why rendering failed.
#[derive(Debug, thiserror::Error)]
pub enum PrintError {
    /// The input cannot be printed (for example a signed XML that is not a DE).
    #[error("cannot print: {0}")]
    Input(String),
    /// The renderer failed.
    #[error("rendering failed: {0}")]
    Render(String),
}

/// The issuer as printed on an autoimpresor document (from the company's configuration).
#[derive(Debug, Clone, PartialEq)]
pub struct PrintIssuer {
    /// Legal name.
    pub legal_name: String,
    /// Trade name, when it has one.
    pub trade_name: Option<String>,
    /// RUC with its check digit, `NNNNNNNN-D`.
    pub ruc: String,
    /// Address of the issuing branch.
    pub address: String,
    /// Phone, when known.
    pub phone: Option<String>,
    /// Email, when known.
    pub email: Option<String>,
}

/// An autoimpresor document as printed.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoimpresorPrintable {
    /// The document as stored (normalized).
    pub document: CanonicalDocument,
    /// Who issues it.
    pub issuer: PrintIssuer,
    /// The autoimpresor authorization number.
    pub authorization: String,
    /// Timbrado validity, first day.
    pub valid_from: NaiveDate,
    /// Timbrado validity, last day.
    pub valid_to: NaiveDate,
    /// Timbrado, establishment, point and number.
    pub number: DocumentNumber,
    /// Issue date and time, Paraguay local time.
    pub issued_at: NaiveDateTime,
    /// A watermark across every page (`SIN VALOR FISCAL` for sandbox previews), if any.
    pub watermark: Option<String>,
}

/// What to print.
#[derive(Debug, Clone, PartialEq)]
pub enum Printable {
    /// SIFEN's KuDE, from the signed DE XML (with `gCamFuFD/dCarQR`).
    Kude {
        /// The signed XML, byte for byte as stored.
        signed_xml: Vec<u8>,
        /// A watermark across every page, if any.
        watermark: Option<String>,
    },
    /// The autoimpresor printable.
    Autoimpresor(Box<AutoimpresorPrintable>),
}

/// Renders printables to PDF.
#[async_trait]
pub trait Printer: Send + Sync {
    /// The PDF of `printable` laid out per the company's print `settings` (A4 unless the settings
    /// give another page size, such as the 80 mm ticket).
    async fn render(&self, printable: Printable, settings: &PrintSettings) -> Result<Vec<u8>, PrintError>;

    /// [`render`](Self::render) for work nobody is waiting on (the KuDE of a document just
    /// accepted): it may run below the priority of requests and the SIFEN pipeline, and finish
    /// later when the service is busy.
    async fn render_background(
        &self,
        printable: Printable,
        settings: &PrintSettings,
    ) -> Result<Vec<u8>, PrintError> {
        self.render(printable, settings).await
    }
}
