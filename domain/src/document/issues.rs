//! Validation issues and the catalogue of their codes (every issue has a JSON path
//! in `field` and a stable `code`). `docs/issue-codes.md` and the OpenAPI document are generated
//! from / checked against [`CATALOGUE`], so a code cannot be added without being documented.

use serde::{Deserialize, Serialize};

/// One problem (or warning) of a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    /// JSON path: `items[2].tax_amount`, `$` for the whole body.
    pub field: String,
    /// Stable code from [`CATALOGUE`].
    pub code: String,
    /// Human-readable, with the expected value where there is one.
    pub message: String,
}

impl Issue {
    /// An issue.
    pub fn new(field: impl Into<String>, code: &str, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            code: code.to_owned(),
            message: message.into(),
        }
    }
}

/// The codes, as constants.
pub mod codes {
    /// The body is not JSON.
    pub const MALFORMED_JSON: &str = "malformed_json";
    /// A field has the wrong JSON type.
    pub const INVALID_TYPE: &str = "invalid_type";
    /// A field is not one of its allowed values.
    pub const INVALID_ENUM: &str = "invalid_enum";
    /// A field the contract does not have.
    pub const UNKNOWN_FIELD: &str = "unknown_field";
    /// A required field is missing.
    pub const REQUIRED: &str = "required";
    /// A value is malformed (date, date-time, length).
    pub const INVALID_FORMAT: &str = "invalid_format";
    /// A currency other than PYG.
    pub const UNSUPPORTED_CURRENCY: &str = "unsupported_currency";
    /// A tax rate other than 0, 5, 10.
    pub const INVALID_TAX_RATE: &str = "invalid_tax_rate";

    // Business errors (`validation`): the document is stored as `validation_failed`.

    /// A document type the channel cannot issue (`receipt` on `sifen`).
    pub const UNSUPPORTED_DOCUMENT_TYPE: &str = "unsupported_document_type";
    /// A text shorter or longer than its field allows.
    pub const INVALID_LENGTH: &str = "invalid_length";
    /// An identifier without its fixed form (8-digit timbrado, 44-character CDC, …).
    pub const INVALID_PATTERN: &str = "invalid_pattern";
    /// A code outside its SIFEN list (unit, presence, transaction type, reason, country, …).
    pub const INVALID_CODE: &str = "invalid_code";
    /// A field the document's type or another field's value makes necessary is missing.
    pub const CONDITIONALLY_REQUIRED: &str = "conditionally_required";
    /// A value SIFEN's format or rules refuse, found when intake builds the DE the pipeline
    /// will send (the message names the field and the rule).
    pub const INVALID_FOR_SIFEN: &str = "invalid_for_sifen";
    /// A field the document's type or another field's value rules out is present.
    pub const NOT_ALLOWED: &str = "not_allowed";
    /// A RUC that is not of the form `NNNNNNNN-D`.
    pub const INVALID_RUC: &str = "invalid_ruc";
    /// A RUC or CDC whose check digit does not belong to it.
    pub const INVALID_CHECK_DIGIT: &str = "invalid_check_digit";
    /// `seller.ruc` is not the company's RUC.
    pub const SELLER_RUC_MISMATCH: &str = "seller_ruc_mismatch";
    /// The seller's name is SIFEN's test literal on a production channel.
    pub const TEST_NAME_IN_PRODUCTION: &str = "test_name_in_production";
    /// The buyer of an autofactura is not the issuing company.
    pub const AUTOFACTURA_BUYER_NOT_ISSUER: &str = "autofactura_buyer_not_issuer";
    /// A remisión between the company's own premises (motive 7) to another RUC.
    pub const REMISION_BUYER_NOT_ISSUER: &str = "remision_buyer_not_issuer";
    /// A foreign buyer in Paraguay, or a domestic one abroad.
    pub const BUYER_COUNTRY_MISMATCH: &str = "buyer_country_mismatch";
    /// (sifen) A city code that is not in SET's geographic table.
    pub const UNKNOWN_CITY_CODE: &str = "unknown_city_code";
    /// (sifen) A department that is not the city's (the message names the right one).
    pub const CITY_DEPARTMENT_MISMATCH: &str = "city_department_mismatch";
    /// (sifen) A city name that is not the table's name for the code (the message names it).
    pub const CITY_NAME_MISMATCH: &str = "city_name_mismatch";
    /// An unnamed buyer on a document of 60 000 000 PYG or more.
    pub const ANONYMOUS_TOTAL_LIMIT: &str = "anonymous_total_limit";
    /// Issued before 2018-11-22, or more than 720 hours ago on `sifen`.
    pub const ISSUE_DATETIME_TOO_OLD: &str = "issue_datetime_too_old";
    /// Issued more than 120 hours from now on `sifen`.
    pub const ISSUE_DATETIME_IN_FUTURE: &str = "issue_datetime_in_future";
    /// A document without lines.
    pub const NO_ITEMS: &str = "no_items";
    /// More than 999 lines.
    pub const TOO_MANY_ITEMS: &str = "too_many_items";
    /// A quantity or installment that is zero or negative.
    pub const MUST_BE_POSITIVE: &str = "must_be_positive";
    /// A negative unit price.
    pub const MUST_NOT_BE_NEGATIVE: &str = "must_not_be_negative";
    /// A quantity or unit price with more than 8 decimal places.
    pub const TOO_MANY_DECIMALS: &str = "too_many_decimals";
    /// An amount in PYG with decimals.
    pub const FRACTIONAL_GUARANIES: &str = "fractional_guaranies";
    /// A number beyond what SIFEN's schema can carry.
    pub const AMOUNT_OUT_OF_RANGE: &str = "amount_out_of_range";
    /// An amount more than 1 Gs away from its computed value (the message has the expected one).
    pub const AMOUNT_MISMATCH: &str = "amount_mismatch";
    /// A due date before the issue date.
    pub const DUE_DATE_BEFORE_ISSUE_DATE: &str = "due_date_before_issue_date";
    /// A credit or debit note whose CDC is not an invoice's.
    pub const ASSOCIATED_DOCUMENT_NOT_INVOICE: &str = "associated_document_not_invoice";
    /// A credit or debit note's associated CDC was issued by another taxpayer.
    pub const ASSOCIATED_DOCUMENT_OTHER_ISSUER: &str = "associated_document_other_issuer";
    /// `associated_document.document_id` names no document of the tenant, or one without a CDC
    /// SIFEN approved.
    pub const ASSOCIATED_DOCUMENT_NOT_FOUND: &str = "associated_document_not_found";
    /// A credit note whose total is more than the invoice it adjusts (rule 2417).
    pub const CREDIT_NOTE_EXCEEDS_INVOICE: &str = "credit_note_exceeds_invoice";
    /// Warning: the associated CDC is the company's own but kuatia issued no document with it.
    pub const ASSOCIATED_DOCUMENT_UNKNOWN: &str = "associated_document_unknown";

    // Warnings: they never block.

    /// The taxpayer registry does not know the buyer's RUC.
    pub const BUYER_RUC_NOT_FOUND: &str = "buyer_ruc_not_found";
    /// The taxpayer registry lists the buyer's RUC in a state other than ACTIVO.
    pub const BUYER_RUC_NOT_ACTIVE: &str = "buyer_ruc_not_active";
    /// The signing certificate expires within 30 days.
    pub const CERTIFICATE_EXPIRING_SOON: &str = "certificate_expiring_soon";
}

/// Every code: `(code, blocking, meaning)`. Structural codes make `POST /v1/documents` answer 400
/// (nothing stored); the others mark a stored document `validation_failed`; warnings
/// (`blocking = false`) never block.
pub const CATALOGUE: &[(&str, bool, &str)] = &[
    (codes::MALFORMED_JSON, true, "the body is not valid JSON"),
    (
        codes::INVALID_TYPE,
        true,
        "a field has the wrong JSON type (a string where a number goes, say)",
    ),
    (
        codes::INVALID_ENUM,
        true,
        "a field is not one of its allowed values",
    ),
    (
        codes::UNKNOWN_FIELD,
        true,
        "a field the contract does not define (typos are refused, not ignored)",
    ),
    (codes::REQUIRED, true, "a required field is missing"),
    (
        codes::INVALID_FORMAT,
        true,
        "a malformed value: a date, a date-time without offset, a length",
    ),
    (
        codes::UNSUPPORTED_CURRENCY,
        true,
        "a currency other than PYG (the only one of the formal schema)",
    ),
    (codes::INVALID_TAX_RATE, true, "a tax rate other than 0, 5 or 10"),
    (
        codes::UNSUPPORTED_DOCUMENT_TYPE,
        true,
        "a document type the channel cannot issue: `receipt` is not a SIFEN v150 document (use autoimpresor)",
    ),
    (
        codes::INVALID_LENGTH,
        true,
        "a text too short or too long (external_id 1–100, item description 1–120, names 4–255 …)",
    ),
    (
        codes::INVALID_PATTERN,
        true,
        "an identifier without its fixed form: timbrado 8 digits, establishment and point 3, number 7, CDC 44 characters, house number up to 6 digits …",
    ),
    (
        codes::INVALID_CODE,
        true,
        "a code outside its SIFEN list: unit, presence, transaction_type, reason, constancia type, card brand, department, city, country",
    ),
    (
        codes::CONDITIONALLY_REQUIRED,
        true,
        "a field the document type or another field makes necessary is missing (the message says why)",
    ),
    (
        codes::INVALID_FOR_SIFEN,
        true,
        "a value SIFEN's format or rules refuse, found when intake builds the DE the pipeline will send (the message names the field and the rule): a transport without vehicle, a carrier without driver, a remisión for a sale without transport.invoice_date …",
    ),
    (
        codes::NOT_ALLOWED,
        true,
        "a field the document type or another field rules out is present (the message says why)",
    ),
    (
        codes::INVALID_RUC,
        true,
        "a RUC that is not of the form NNNNNNNN-D",
    ),
    (
        codes::INVALID_CHECK_DIGIT,
        true,
        "the check digit of a RUC or CDC is wrong (the message names the right one)",
    ),
    (
        codes::SELLER_RUC_MISMATCH,
        true,
        "seller.ruc is not the RUC of the issuing company",
    ),
    (
        codes::TEST_NAME_IN_PRODUCTION,
        true,
        "the seller's name is SIFEN's test-environment literal on a production channel (rule 1263)",
    ),
    (
        codes::AUTOFACTURA_BUYER_NOT_ISSUER,
        true,
        "the buyer of an autofactura is not the issuing company (rules 1315–1317)",
    ),
    (
        codes::REMISION_BUYER_NOT_ISSUER,
        true,
        "a remisión between the company's own premises (reason 7) names a receiver whose RUC is not the company's (rule 2606)",
    ),
    (
        codes::BUYER_COUNTRY_MISMATCH,
        true,
        "a foreign buyer with country PRY, or a domestic buyer with another country (rule 1320)",
    ),
    (
        codes::UNKNOWN_CITY_CODE,
        true,
        "(sifen) buyer.city_code / seller.city_code: a city that is not in SET's geographic table (vendor/sifen/geography)",
    ),
    (
        codes::CITY_DEPARTMENT_MISMATCH,
        true,
        "(sifen) buyer.department_code / seller.department_code: not the department of the city in SET's geographic table; the message names the right one (rules 1328, 2206, 2553)",
    ),
    (
        codes::CITY_NAME_MISMATCH,
        true,
        "(sifen) buyer.city_name / seller.city_name: not the name SET's geographic table gives the city (case, accents and extra blanks aside); the message names it. city_name may be omitted: the table's name is written",
    ),
    (
        codes::ANONYMOUS_TOTAL_LIMIT,
        true,
        "an unnamed buyer (innominado) on a document of 60 000 000 PYG or more (rule 1321)",
    ),
    (
        codes::ISSUE_DATETIME_TOO_OLD,
        true,
        "issued before 2018-11-22, or (sifen) more than 720 hours before now (rules 1156, 1150)",
    ),
    (
        codes::ISSUE_DATETIME_IN_FUTURE,
        true,
        "(sifen) issued more than 120 hours after now (rule 1151)",
    ),
    (codes::NO_ITEMS, true, "the document has no lines"),
    (
        codes::TOO_MANY_ITEMS,
        true,
        "more than 999 lines (SIFEN gCamItem)",
    ),
    (
        codes::MUST_BE_POSITIVE,
        true,
        "a quantity or an installment amount that is zero or negative",
    ),
    (codes::MUST_NOT_BE_NEGATIVE, true, "a negative unit price"),
    (
        codes::TOO_MANY_DECIMALS,
        true,
        "a quantity or unit price with more than 8 decimal places",
    ),
    (
        codes::FRACTIONAL_GUARANIES,
        true,
        "an amount in PYG with decimals (line totals, taxes, totals and installments are whole guaraníes)",
    ),
    (
        codes::AMOUNT_OUT_OF_RANGE,
        true,
        "a number beyond SIFEN's schema (amounts under 10^15, quantities under 10^10)",
    ),
    (
        codes::AMOUNT_MISMATCH,
        true,
        "an amount more than 1 Gs away from its computed value; the message states the expected value",
    ),
    (
        codes::DUE_DATE_BEFORE_ISSUE_DATE,
        true,
        "a due date (of the credit or of an installment) before the issue date",
    ),
    (
        codes::ASSOCIATED_DOCUMENT_NOT_INVOICE,
        true,
        "a credit or debit note whose associated CDC is not an invoice's (rule 2414)",
    ),
    (
        codes::ASSOCIATED_DOCUMENT_OTHER_ISSUER,
        true,
        "a credit or debit note whose associated CDC was issued by another taxpayer (the CDC carries its issuer's RUC)",
    ),
    (
        codes::ASSOCIATED_DOCUMENT_NOT_FOUND,
        true,
        "associated_document.document_id names no document of the tenant, or one SIFEN has not approved (it has no CDC to refer to)",
    ),
    (
        codes::CREDIT_NOTE_EXCEEDS_INVOICE,
        true,
        "a credit note that, with the live credit notes before it, adds up to more than the total of the invoice it adjusts, one of the tenant's (rule 2417)",
    ),
    (
        codes::BUYER_RUC_NOT_FOUND,
        false,
        "the taxpayer registry does not know the buyer's RUC",
    ),
    (
        codes::BUYER_RUC_NOT_ACTIVE,
        false,
        "the taxpayer registry lists the buyer's RUC in a state other than ACTIVO",
    ),
    (
        codes::ASSOCIATED_DOCUMENT_UNKNOWN,
        false,
        "the associated CDC is the company's own but kuatia issued no document with it (issued elsewhere? SIFEN refuses a note whose invoice it does not hold)",
    ),
    (
        codes::CERTIFICATE_EXPIRING_SOON,
        false,
        "the sifen channel's signing certificate expires within 30 days",
    ),
];

/// Codes of refusals before validation (routing and channel readiness): `POST /v1/documents`
/// answers them as 400 `configuration_error` (or `certificate_error`), nothing stored; the
/// validate endpoint lists them as errors with `routing` null (routing) or set (readiness). Two
/// come later, on a queued document that then ends `failed_terminal`: `configuration_error`, the
/// autoimpresor channel's refusal, and `document_build_failed`, a SIFEN DE that could not be built
/// or signed.
pub const CONFIGURATION_CODES: &[(&str, &str)] = &[
    (
        "ambiguous_default",
        "several channels, branches or points and not exactly one marked is_default: name one",
    ),
    (
        "missing_configuration",
        "no company, channel, branch or issuance point to route the document to",
    ),
    (
        "unknown_reference",
        "a named company, branch or point that is not the tenant's, the company's or the channel's",
    ),
    (
        "configuration_not_ready",
        "the routed channel is not ready (timbrado validity, numbering range, …) or lacks what the document's type needs (a remisión on sifen: configuration.sifen.remision_notice); the field names the check",
    ),
    (
        "certificate_not_ready",
        "the sifen channel's certificate fails a check (expired, wrong RUC, key, size, usage): certificate_error",
    ),
    (
        "configuration_error",
        "autoimpresor, after queuing: the document cannot be printed on its channel's authorization (issue date or today outside the validity dates, or the range exhausted); it ends failed_terminal without a number (field `autoimpresor`, docs/autoimpresor.md)",
    ),
    (
        "document_build_failed",
        "sifen, after queuing: the DE could not be built or signed, or the channel's setup became unusable; the document ends failed_terminal without a number (field `sifen`), with a document.failed webhook",
    ),
];

/// Whether `code` is structural (the body is not a CanonicalDocumentV1).
pub fn is_structural(code: &str) -> bool {
    [
        codes::MALFORMED_JSON,
        codes::INVALID_TYPE,
        codes::INVALID_ENUM,
        codes::UNKNOWN_FIELD,
        codes::REQUIRED,
        codes::INVALID_FORMAT,
        codes::UNSUPPORTED_CURRENCY,
        codes::INVALID_TAX_RATE,
    ]
    .contains(&code)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The published catalogue; this test keeps it from drifting.
    const PUBLISHED: &str = include_str!("../../../docs/issue-codes.md");

    fn kind(code: &str, blocking: bool) -> &'static str {
        match (is_structural(code), blocking) {
            (true, _) => "structural",
            (false, true) => "error",
            (false, false) => "warning",
        }
    }

    #[test]
    fn every_catalogue_code_is_published_with_its_kind_in_catalogue_order() {
        let mut from = 0;
        for (code, blocking, _) in CATALOGUE {
            let row = format!("| `{code}` | {} |", kind(code, *blocking));
            let at = PUBLISHED[from..]
                .find(&row)
                .unwrap_or_else(|| panic!("docs/issue-codes.md lacks {row:?} after byte {from}"));
            from += at + row.len();
        }
        let rows = PUBLISHED.lines().filter(|l| l.starts_with("| `")).count();
        assert_eq!(
            rows,
            CATALOGUE.len() + CONFIGURATION_CODES.len(),
            "a published code the catalogues lack"
        );
    }

    #[test]
    fn configuration_codes_are_published_and_match_routing() {
        use crate::document::routing;
        for (code, _) in CONFIGURATION_CODES {
            assert!(
                PUBLISHED.contains(&format!("| `{code}` | configuration |")),
                "{code} is not in docs/issue-codes.md"
            );
        }
        for code in [
            routing::AMBIGUOUS_DEFAULT,
            routing::MISSING_CONFIGURATION,
            routing::UNKNOWN_REFERENCE,
        ] {
            assert!(CONFIGURATION_CODES.iter().any(|(c, _)| *c == code), "{code}");
        }
    }

    #[test]
    fn codes_are_unique_snake_case_and_structural_codes_block() {
        let mut seen = std::collections::HashSet::new();
        for (code, blocking, meaning) in CATALOGUE {
            assert!(seen.insert(*code), "{code} twice");
            assert!(
                code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{code} is not snake_case"
            );
            assert!(!meaning.is_empty());
            assert!(*blocking || !is_structural(code), "{code}");
        }
        let structural = CATALOGUE.iter().filter(|(c, _, _)| is_structural(c)).count();
        assert_eq!(structural, 8, "the structural codes are the parser's");
    }
}
