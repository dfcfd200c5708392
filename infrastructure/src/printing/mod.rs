//! Printables (KuDE and autoimpresor PDFs) rendered from Typst templates.
//!
//! Placeholder while the renderer is built: every render fails with a clear error.

use async_trait::async_trait;
use kuatia_application::printables::{PrintError, Printable, Printer};
use kuatia_domain::print_settings::PrintSettings;

/// Renders printables with Typst.
#[derive(Debug, Default, Clone)]
pub struct TypstPrinter;

impl TypstPrinter {
    /// A renderer with the embedded templates and fonts.
    pub fn new() -> Self {
        Self
    }
}

#[async_trait]
impl Printer for TypstPrinter {
    async fn render(&self, _printable: Printable, _settings: &PrintSettings) -> Result<Vec<u8>, PrintError> {
        Err(PrintError::Render("the Typst renderer is not built yet".to_owned()))
    }
}
