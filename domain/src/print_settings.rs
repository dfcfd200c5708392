//! Print settings of a company's printables (autoimpresor).

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Largest logo, decoded.
pub const MAX_LOGO_BYTES: usize = 512 * 1024;

/// Which copy a printable says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum CopyLabel {
    /// The original.
    #[serde(rename = "ORIGINAL")]
    Original,
    /// A copy.
    #[serde(rename = "COPIA")]
    Copia,
}

/// The settings (every field of the contract's PrintSettingsRequest but `company_id`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PrintSettings {
    /// Text shown in place of (or beside) the logo.
    pub logo_text: String,
    /// `data:image/jpeg;base64,…`, under 512 KiB decoded.
    pub logo_image_data_url: Option<String>,
    /// File name of the logo.
    pub logo_image_name: Option<String>,
    /// Activity line.
    pub business_activity: String,
    /// Footer.
    pub footer_note: String,
    /// ORIGINAL or COPIA.
    pub copy_label: CopyLabel,
    /// Print the logo.
    pub show_logo: bool,
    /// Print each item's tax.
    pub show_item_tax: bool,
    /// Print the payment terms.
    pub show_payment_terms: bool,
    /// Print the copy label.
    pub show_copy_label: bool,
    /// Millimetres (default A4, 210); 80 means the ticket layout.
    pub page_width: Option<f64>,
    /// Millimetres (default A4, 297).
    pub page_height: Option<f64>,
    /// Free-form layout elements (objects).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<Object>>))]
    pub template_elements: Option<Vec<Value>>,
}

impl PrintSettings {
    /// What a company prints with before it saves its own settings.
    pub fn defaults(legal_name: &str) -> Self {
        Self {
            logo_text: legal_name.to_owned(),
            logo_image_data_url: None,
            logo_image_name: None,
            business_activity: String::new(),
            footer_note: String::new(),
            copy_label: CopyLabel::Original,
            show_logo: false,
            show_item_tax: true,
            show_payment_terms: true,
            show_copy_label: true,
            page_width: None,
            page_height: None,
            template_elements: None,
        }
    }

    /// Every problem at once: `(field, code, message)`.
    pub fn issues(&self) -> Vec<(String, String, String)> {
        let mut issues = Vec::new();
        let mut push = |field: &str, code: &str, message: String| {
            issues.push((field.to_owned(), code.to_owned(), message))
        };
        if let Some(url) = &self.logo_image_data_url {
            match logo_bytes(url) {
                Err(message) => push("logo_image_data_url", "invalid_logo", message),
                Ok(n) if n > MAX_LOGO_BYTES => push(
                    "logo_image_data_url",
                    "logo_too_large",
                    format!("the logo is {n} bytes; at most {MAX_LOGO_BYTES}"),
                ),
                Ok(_) => {}
            }
        }
        for (field, value, range) in [
            ("page_width", self.page_width, 40.0..=1000.0),
            ("page_height", self.page_height, 40.0..=3000.0),
        ] {
            if let Some(mm) = value
                && !(mm.is_finite() && range.contains(&mm))
            {
                push(
                    field,
                    "out_of_range",
                    format!("{field} is in millimetres, {} to {}", range.start(), range.end()),
                );
            }
        }
        if self.template_elements.as_ref().is_some_and(|e| e.len() > 500) {
            push(
                "template_elements",
                "too_many",
                "at most 500 template elements".to_owned(),
            );
        }
        if self.logo_text.chars().count() > 255 {
            push(
                "logo_text",
                "too_long",
                "logo_text has at most 255 characters".to_owned(),
            );
        }
        issues
    }
}

/// The decoded size of a JPEG data URL, or why it is not one.
fn logo_bytes(url: &str) -> Result<usize, String> {
    let data = url
        .strip_prefix("data:image/jpeg;base64,")
        .ok_or_else(|| "the logo must be a data URL of a JPEG image (data:image/jpeg;base64,…)".to_owned())?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|_| "the logo is not valid base64".to_owned())?;
    if !bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return Err("the logo is not a JPEG image".to_owned());
    }
    Ok(bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jpeg_url(len: usize) -> String {
        let mut bytes = vec![0xFF, 0xD8, 0xFF, 0xE0];
        bytes.resize(len, 0);
        format!(
            "data:image/jpeg;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        )
    }

    #[test]
    fn a_small_jpeg_logo_passes_and_anything_else_is_named() {
        let mut s = PrintSettings::defaults("ACME");
        s.logo_image_data_url = Some(jpeg_url(10_000));
        assert!(s.issues().is_empty());
        for (url, code) in [
            (jpeg_url(MAX_LOGO_BYTES + 1), "logo_too_large"),
            ("data:image/png;base64,iVBORw0KGgo=".to_owned(), "invalid_logo"),
            ("data:image/jpeg;base64,!!!".to_owned(), "invalid_logo"),
            ("data:image/jpeg;base64,iVBORw0KGgo=".to_owned(), "invalid_logo"),
        ] {
            s.logo_image_data_url = Some(url);
            let issues = s.issues();
            assert_eq!(issues.len(), 1, "{issues:?}");
            assert_eq!(
                (issues[0].0.as_str(), issues[0].1.as_str()),
                ("logo_image_data_url", code)
            );
        }
    }

    #[test]
    fn page_sizes_are_sensible_millimetres() {
        let mut s = PrintSettings::defaults("ACME");
        s.page_width = Some(80.0);
        s.page_height = Some(297.0);
        assert!(s.issues().is_empty());
        s.page_width = Some(0.5);
        s.page_height = Some(f64::INFINITY);
        let fields: Vec<String> = s.issues().into_iter().map(|i| i.0).collect();
        assert_eq!(fields, vec!["page_width", "page_height"]);
    }
}
