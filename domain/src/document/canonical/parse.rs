//! From a request body to a [`CanonicalDocument`] or the structural issues that stop it: JSON
//! syntax, serde's first problem turned into an issue with a path and a stable code, the closed
//! value sets the types cannot express, the contract's defaults, and the forms of dates.

use chrono::{DateTime, FixedOffset, NaiveDate};
use serde_json::Value;

use super::{CURRENCY, CanonicalDocument, DocumentType};
use crate::document::issues::{Issue, codes};

/// The form of a date-time, with an example: what the message of a malformed one says.
pub const DATE_TIME_FORM: &str =
    "a date-time with its UTC offset (RFC 3339), e.g. 2026-11-26T10:15:00-03:00 (Paraguay is -03:00)";

/// The form of a date, with an example.
pub const DATE_FORM: &str = "a date YYYY-MM-DD, e.g. 2026-11-26";

/// Why `input` is not a date-time of the document (`issue_datetime`), naming the expected form;
/// `None` when it is one. The JSON Schema check of the API and the parser below give this same
/// message.
pub fn date_time_problem(input: &str) -> Option<String> {
    let error = input.parse::<DateTime<FixedOffset>>().err()?;
    Some(if input.parse::<chrono::NaiveDateTime>().is_ok() {
        format!("{input:?} has no UTC offset: expected {DATE_TIME_FORM}")
    } else if input.parse::<NaiveDate>().is_ok() {
        format!("{input:?} is a date without a time: expected {DATE_TIME_FORM}")
    } else {
        format!("{input:?} is not a date-time ({error}): expected {DATE_TIME_FORM}")
    })
}

/// Why `input` is not a date of the document (due dates, `associated_document.issue_date`),
/// naming the expected form; `None` when it is one.
pub fn date_problem(input: &str) -> Option<String> {
    let error = input.parse::<NaiveDate>().err()?;
    Some(if input.parse::<DateTime<FixedOffset>>().is_ok() {
        format!("{input:?} is a date-time: expected {DATE_FORM}")
    } else {
        format!("{input:?} is not a date ({error}): expected {DATE_FORM}")
    })
}

/// Dates and date-times parsed as chrono's own `Deserialize` does (`FromStr`), with a message
/// that says the expected form instead of chrono's ("premature end of input").
pub(super) mod form {
    use chrono::{DateTime, FixedOffset, NaiveDate};
    use serde::de::Error;
    use serde::{Deserialize, Deserializer};

    pub fn date_time<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<FixedOffset>, D::Error> {
        let text = String::deserialize(d)?;
        match super::date_time_problem(&text) {
            None => text.parse().map_err(D::Error::custom),
            Some(problem) => Err(D::Error::custom(problem)),
        }
    }

    pub fn date<'de, D: Deserializer<'de>>(d: D) -> Result<NaiveDate, D::Error> {
        let text = String::deserialize(d)?;
        match super::date_problem(&text) {
            None => text.parse().map_err(D::Error::custom),
            Some(problem) => Err(D::Error::custom(problem)),
        }
    }

    pub fn optional_date<'de, D: Deserializer<'de>>(d: D) -> Result<Option<NaiveDate>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|text| match super::date_problem(&text) {
                None => text.parse().map_err(D::Error::custom),
                Some(problem) => Err(D::Error::custom(problem)),
            })
            .transpose()
    }
}

/// Turns a serde error at `path` into an issue with a stable code.
fn structural_issue(path: &str, message: &str) -> Issue {
    let field = if path.is_empty() || path == "." {
        "$".to_owned()
    } else {
        path.to_owned()
    };
    let (code, message) = if message.starts_with("unknown field") {
        (codes::UNKNOWN_FIELD, message.to_owned())
    } else if message.starts_with("missing field") {
        (codes::REQUIRED, message.to_owned())
    } else if message.starts_with("unknown variant") {
        (codes::INVALID_ENUM, message.to_owned())
    } else if message.starts_with("invalid length") {
        (codes::INVALID_FORMAT, message.to_owned())
    } else if message.starts_with("invalid type") || message.starts_with("invalid value") {
        (codes::INVALID_TYPE, message.to_owned())
    } else {
        (codes::INVALID_FORMAT, message.to_owned())
    };
    Issue::new(field, code, message)
}

/// Parses a request body. Errors: JSON syntax (one issue at `$`), or the first structural
/// problem serde meets, then every enum problem of the contract's closed value sets.
pub fn parse(body: &[u8]) -> Result<CanonicalDocument, Vec<Issue>> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        vec![Issue::new(
            "$",
            codes::MALFORMED_JSON,
            format!("malformed JSON at line {} column {}: {e}", e.line(), e.column()),
        )]
    })?;
    from_value(value)
}

/// Parses an already decoded JSON value.
pub fn from_value(value: Value) -> Result<CanonicalDocument, Vec<Issue>> {
    if !value.is_object() {
        return Err(vec![Issue::new(
            "$",
            codes::INVALID_TYPE,
            "the document must be a JSON object",
        )]);
    }
    let mut document: CanonicalDocument = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        vec![structural_issue(&path, &e.inner().to_string())]
    })?;
    apply_defaults(&mut document);
    let issues = enum_issues(&document);
    if issues.is_empty() {
        Ok(document)
    } else {
        Err(issues)
    }
}

/// The contract's defaults, applied once where every document is parsed, so that
/// what is validated, stored and built is the same: a credit or debit note without `reason` has
/// motive 1 ("Devolución y Ajuste de precios"), a remisión motive 1 ("Traslado por ventas").
pub fn apply_defaults(document: &mut CanonicalDocument) {
    if document.reason.is_none()
        && matches!(
            document.doc_type,
            DocumentType::CreditNote | DocumentType::DebitNote | DocumentType::Remision
        )
    {
        document.reason = Some(1);
    }
}

/// The closed value sets the types cannot express: currency and tax rate.
fn enum_issues(document: &CanonicalDocument) -> Vec<Issue> {
    let mut issues = Vec::new();
    if document.currency != CURRENCY {
        issues.push(Issue::new(
            "currency",
            codes::UNSUPPORTED_CURRENCY,
            format!(
                "currency {:?} is not supported; the only currency is PYG",
                document.currency
            ),
        ));
    }
    for (i, item) in document.items.iter().enumerate() {
        if crate::sifen::facts::iva_rate(item.tax_rate.get()).is_none() {
            issues.push(Issue::new(
                format!("items[{i}].tax_rate"),
                codes::INVALID_TAX_RATE,
                format!("tax_rate {} is not one of 0, 5, 10", item.tax_rate),
            ));
        }
    }
    issues
}

/// A valid invoice, for tests and examples.
pub fn sample_invoice() -> Value {
    serde_json::json!({
        "external_id": "ERP-0001",
        "type": "invoice",
        "issue_datetime": "2026-03-02T10:15:00-03:00",
        "currency": "PYG",
        "seller": {"ruc": "80069563-1", "legal_name": "DE GENERACION ELECTRONICA S.A."},
        "buyer": {"ruc": "80013884-8", "legal_name": "CLIENTE S.A.", "operation_type": "b2b",
                  "document_type": "ruc", "email": "compras@cliente.com.py"},
        "items": [
            {"description": "Licencia anual", "quantity": 1, "unit_price": 110000, "tax_rate": 10,
             "tax_amount": 10000, "total_amount": 110000},
            {"description": "Soporte (horas)", "quantity": 2, "unit_price": 27500, "tax_rate": 5,
             "tax_amount": 2619, "total_amount": 55000}
        ],
        "totals": {"subtotal": 152381, "tax_total": 12619, "grand_total": 165000},
        "payment_terms": {"condition": "cash", "method": "bank_transfer"}
    })
}
