//! Business validation of a canonical document (docs/issue-codes.md): what a
//! document that is structurally a CanonicalDocumentV1 ([`super::canonical::parse`]) must also
//! meet before it is issued. [`validate`] returns every issue at once, each with a JSON path and a
//! stable code of [`super::issues::CATALOGUE`]; errors block, warnings never do.
//!
//! Pure: no IO and no clock. What the rules need from outside (the routed channel, the company's
//! RUC, now, the certificate's remaining days, what the taxpayer registry said of the buyer) comes
//! in as a [`ValidationContext`]. Money is exact ([`Decimal`]), never floating point, and every
//! operation on input-derived numbers is checked, so a huge number is an issue, not a panic.
//!
//! Start at [`validate`]; `profile` is the table of what each document type asks for.
//!
//! # Decisions where the specs leave room
//!
//! - **Tolerance without cascades.** Each line total, line tax and total is compared with its
//!   computed value; more than 1 Gs apart is `amount_mismatch` ("expected 2619, got 2700"). The
//!   sums go on with the *settled* value of each figure: the declared one when within 1 Gs (so a
//!   caller's own rounding carries into its totals), the computed one otherwise. One wrong line
//!   is then one issue at that line, and the totals' expected values are those of the corrected
//!   document. Rejected: summing declared values (a wrong line's total would surface only on the
//!   second attempt) and summing computed values (per-line tolerances would pile up on totals).
//! - **Rounding.** `total_amount = quantity × unit_price` and
//!   `tax_amount = total_amount × rate / (100 + rate)`, each rounded half-up (away from zero) to
//!   whole guaraníes; the tax is computed from the settled line total, as SIFEN's dLiqIVAItem is
//!   from dTotOpeItem.
//! - **Decimals.** Amounts that change hands (line totals, taxes, totals, installments) are whole
//!   guaraníes (`fractional_guaranies`). `unit_price` is a rate per unit, not an amount, and may
//!   have up to 8 decimal places like SIFEN's dPUniProSer (`tMontoBase`); `quantity` too
//!   (`tdCantProSer`). Ranges are the schema's: amounts below 10^15, quantities below 10^10.
//! - **Remisión** carries no prices, taxes or totals in SIFEN (no gValorItem, gCamIVA, gTotSub):
//!   they are not checked and the mapping ignores them; quantities still are. Nor are its
//!   payment terms (no gCamCond).
//! - **Autofactura** carries no IVA (rule 1901): every line's tax_rate must be 0 and tax_amount and
//!   tax_total are expected to be 0. Its canonical `seller` is the person the company buys from
//!   (gCamAE: a non-taxpayer, so no RUC, but an identity document, name and address), and its
//!   `buyer` is the issuing company itself (rules 1315–1317): omit it, or give the company's RUC.
//!   Cash only (rule 1503). The associated document is the seller's constancia; only its type is
//!   required, since the sources read do not settle which constancia needs number and control
//!   (their forms are checked when given).
//! - **Payment terms** are checked where SIFEN has gCamCond (invoice, autofactura) and on receipts
//!   (printed); credit and debit notes and remisiones ignore them (rule 1501). Credit needs a
//!   `due_date` or installments; installments add up exactly to the grand total (no rounding is
//!   involved). `method: card` needs `payment_terms.card` and `check` needs
//!   `payment_terms.check`: no defaults, since a credit card and a debit card are different SIFEN
//!   codes and a cheque number cannot be invented. Details for another method are refused.
//! - **Buyer.** Only invoices and receipts may omit it; an omitted buyer is an unnamed consumer
//!   (innominado) and meets the 60 000 000 PYG limit. An omitted `operation_type` is derived by
//!   [`operation_type`], which the SIFEN mapping should use too. The Manual's rules on the receiver's RUC and identity apply to
//!   the effective operation type: b2b needs a RUC; foreign needs a country other than PRY and an
//!   address with house number, and has no RUC (its document type and number are simply not
//!   sent); a non-taxpayer consumer needs document type and number; innominado only for b2c.
//!   An address, when given or needed, comes with a house number and, in Paraguay, department and
//!   city codes (rules 1318, 1330, 1324, 1327). Named buyers need a name (dNomRec, 4–255).
//! - **Places.** On the `sifen` channel, every address the DE writes (a domestic buyer's, which is
//!   also a remisión's delivery place, and an autofactura seller's) is checked against SET's
//!   geographic table ([`crate::geography`]) as SIFEN checks it (rules 1328, 1329, 2206, 2208,
//!   2553–2559): the city exists (`unknown_city_code`), the department is the city's
//!   (`city_department_mismatch`, naming the right one), and a `city_name` given is the table's
//!   name for the code (`city_name_mismatch`, naming it; case, accents and extra blanks do not
//!   count). `city_name` is optional: the DE always writes the table's name, and the district
//!   derived from the city. An autoimpresor printable shows none of these codes or names, so
//!   other channels keep only the range checks (`invalid_code`). A code out of range or a name
//!   malformed is that issue alone, not also a mismatch.
//! - **Associated document.** Either a `cdc` (44 characters, modulo-11 check digit) or all five
//!   printed fields, never both; notes may only refer to invoices (CDC starting with `01`, rule
//!   2414). Constancia fields are for autofactura only (rule 2434).
//! - **Dates.** The issue date (in Paraguay) is not before 2018-11-22 on every channel; SIFEN's
//!   window (720 h before to 120 h after now) applies to the `sifen` channel only, `now` standing
//!   for the sending time. Due dates are compared with the issue date in Paraguay.
//! - **Environment.** On a production `sifen` channel, the seller's name may not be SIFEN's
//!   test-environment literal (rule 1263); the mapping writes that literal in test itself.
//! - **Warnings.** Registry warnings only for a buyer RUC that parses, and only from the answer
//!   given in the context (`NotLoaded`: nothing). The certificate warning covers 30 days or less,
//!   already expired included (its refusal is readiness's business, not validation's).

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use rust_decimal::Decimal;
use serde::Serialize;

use super::canonical::{
    Amount, AssociatedDocument, CanonicalDocument, DocumentType, IdDocumentType, Item, OperationType, Party,
    PaymentCondition, PaymentMethod, PaymentTerms,
};
use super::issues::{Issue, codes};
use crate::channel::{ChannelKind, SifenEnvironment};
use crate::check_digit::modulo11;
use crate::geography::{self, PlaceError};
use crate::local_time;
use crate::ruc::{Ruc, RucError};
use crate::sifen::de::is_sifen_email;
use crate::sifen::facts::{
    self, AMOUNT_LIMIT, CITY_CODES, CITY_NAME_MAX, DEPARTMENT_CODES, ESTABLISHMENT_DIGITS, Length,
    MAX_DECIMALS, MAX_ITEMS, PARAGUAY, PRESENCE_CODES, QUANTITY_LIMIT, TEST_ISSUER_NAME, TIMBRADO_DIGITS,
    half_up,
};

mod associated;
mod lines;
mod parties;
#[cfg(test)]
mod tests;

use associated::*;
use lines::*;
use parties::*;

/// What validation needs besides the document; built per request, it lives as long as the call.
#[derive(Debug, Clone)]
pub struct ValidationContext<'a> {
    /// The channel the document was routed to.
    pub channel: ChannelKind,
    /// The issuing company's RUC.
    pub company_ruc: &'a Ruc,
    /// The sifen channel's environment (`None` on autoimpresor).
    pub environment: Option<SifenEnvironment>,
    /// Now: SIFEN's emission window is measured from it.
    pub now: DateTime<Utc>,
    /// Days until the sifen channel's signing certificate expires (negative: expired).
    pub certificate_expires_in_days: Option<i64>,
    /// What the taxpayer registry said of `buyer.ruc`.
    pub buyer_registry: RegistryAnswer,
}

/// The taxpayer registry's answer about the buyer's RUC, as looked up by the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RegistryAnswer {
    /// Not looked up (no registry, or it did not answer): no warning.
    #[default]
    NotLoaded,
    /// The registry does not know the RUC.
    NotFound,
    /// The registry knows it, in this state (`ACTIVO`, `SUSPENDIDO`, …).
    Found {
        /// The registry's state.
        state: String,
    },
}

/// A line's total by the rules: quantity × unit price, rounded half up to the guaraní (`None`
/// when it overflows).
pub fn line_total(quantity: Decimal, unit_price: Decimal) -> Option<Decimal> {
    quantity.checked_mul(unit_price).map(half_up)
}

/// The IVA included in a taxed line's total at `rate` (5 or 10): total × rate / (100 + rate),
/// rounded half up to the guaraní; the rule the validator holds `tax_amount` to, and what the
/// console's issue form computes.
pub fn included_tax(total: Decimal, rate: Decimal) -> Option<Decimal> {
    total
        .checked_mul(rate)
        .zip(Decimal::ONE_HUNDRED.checked_add(rate))
        .and_then(|(n, d)| n.checked_div(d))
        .map(half_up)
}

/// The outcome: blocking errors and non-blocking warnings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Validation {
    /// Blocking issues: the document cannot be issued as it is.
    pub errors: Vec<Issue>,
    /// Issues that never block.
    pub warnings: Vec<Issue>,
}

impl Validation {
    /// Whether there is no error (warnings do not count).
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Every business issue of `doc` at once, in document order, then the warnings.
pub fn validate(doc: &CanonicalDocument, ctx: &ValidationContext<'_>) -> Validation {
    let mut lines = Vec::new();
    let grand_total = item_rules(doc, &mut lines);
    let mut errors = Vec::new();
    header_rules(doc, ctx, &mut errors);
    seller_rules(doc, ctx, &mut errors);
    buyer_rules(doc, ctx, grand_total, &mut errors);
    errors.append(&mut lines);
    payment_rules(doc, grand_total, &mut errors);
    associated_document_rules(doc, ctx.company_ruc, &mut errors);
    type_field_rules(doc, ctx, &mut errors);
    if ctx.channel == ChannelKind::Sifen {
        control_character_rules(doc, &mut errors);
    }
    Validation {
        errors,
        warnings: warnings(doc, ctx),
    }
}

// ---------------------------------------------------------------------------------------------
// What each type asks for.

/// Whether a field is needed, optional or ruled out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Must be present.
    Required,
    /// May be present.
    Optional,
    /// Must be absent.
    NotAllowed,
}

/// What one document type asks for.
#[derive(Debug, Clone, Copy)]
struct Profile {
    /// `buyer`.
    buyer: Need,
    /// `reason`, and its codes.
    reason: (Need, &'static [u8]),
    /// `associated_document`.
    associated_document: Need,
    /// Whether the associated document is a constancia rather than a document.
    constancia: bool,
    /// `transport`.
    transport: Need,
    /// Whether payment terms are checked.
    payment_terms: bool,
    /// Whether prices, taxes and totals are checked.
    priced: bool,
    /// Whether lines carry IVA.
    taxed: bool,
}

/// What one type asks for.
fn profile(doc_type: DocumentType) -> Profile {
    use Need::{NotAllowed, Optional, Required};
    let base = Profile {
        buyer: Required,
        reason: (NotAllowed, &[]),
        associated_document: Optional,
        constancia: false,
        transport: NotAllowed,
        payment_terms: false,
        priced: true,
        taxed: true,
    };
    match doc_type {
        DocumentType::Invoice => Profile {
            buyer: Optional,
            transport: Optional,
            payment_terms: true,
            ..base
        },
        DocumentType::Receipt => Profile {
            buyer: Optional,
            payment_terms: true,
            ..base
        },
        DocumentType::CreditNote | DocumentType::DebitNote => Profile {
            reason: (Required, &facts::NOTE_REASON_CODES),
            associated_document: Required,
            ..base
        },
        DocumentType::Remision => Profile {
            reason: (Required, &facts::REMISION_REASON_CODES),
            transport: Required,
            priced: false,
            ..base
        },
        DocumentType::Autofactura => Profile {
            buyer: Optional,
            associated_document: Required,
            constancia: true,
            payment_terms: true,
            taxed: false,
            ..base
        },
    }
}

/// The operation type of a buyer: the given one; else b2b with a RUC, foreign with a country
/// other than PRY, b2c with an identity document, anonymous without.
pub fn operation_type(buyer: &Party) -> OperationType {
    if let Some(op) = buyer.operation_type {
        op
    } else if buyer.ruc.is_some() {
        OperationType::B2b
    } else if buyer.country.as_deref().is_some_and(|c| c != PARAGUAY) {
        OperationType::Foreign
    } else if buyer.document_number.is_some() && buyer.document_type != Some(IdDocumentType::Innominado) {
        OperationType::B2c
    } else {
        OperationType::Anonymous
    }
}

// ---------------------------------------------------------------------------------------------
// Limits of kuatia's own rules (SIFEN's tables and limits are in `crate::sifen::facts`).

/// Rule 1321: an unnamed buyer only below this total (PYG).
const ANONYMOUS_LIMIT: i64 = 60_000_000;
/// Rule 1150: at most this many hours before sending.
const PAST_WINDOW_HOURS: i64 = 720;
/// Rule 1151: at most this many hours after sending.
const FUTURE_WINDOW_HOURS: i64 = 120;
/// Warn about the certificate this many days ahead.
const CERTIFICATE_WARNING_DAYS: i64 = 30;

// ---------------------------------------------------------------------------------------------
// Small helpers.

fn push(out: &mut Vec<Issue>, field: impl Into<String>, code: &str, message: impl Into<String>) {
    out.push(Issue::new(field, code, message));
}

fn required(out: &mut Vec<Issue>, field: &str, present: bool, why: &str) -> bool {
    if !present {
        push(
            out,
            field,
            codes::CONDITIONALLY_REQUIRED,
            format!("{field} is required: {why}"),
        );
    }
    present
}

fn not_allowed(out: &mut Vec<Issue>, field: &str, present: bool, why: &str) {
    if present {
        push(
            out,
            field,
            codes::NOT_ALLOWED,
            format!("{field} is not allowed: {why}"),
        );
    }
}

/// `min..=max` characters, blanks around not counting towards `min`.
fn text_length(out: &mut Vec<Issue>, field: &str, value: &str, min: usize, max: usize) {
    let trimmed = value.trim().chars().count();
    let length = value.chars().count();
    if trimmed < min || length > max {
        push(
            out,
            field,
            codes::INVALID_LENGTH,
            format!("{field} must have {min} to {max} characters, not {trimmed}"),
        );
    }
}

/// A text of [`Length`] `length` ([`text_length`]).
fn text_of(out: &mut Vec<Issue>, field: &str, value: &str, length: Length) {
    text_length(out, field, value, length.min, length.max);
}

/// `min..=max` ASCII characters, each accepted by `allowed`.
fn pattern(value: &str, min: usize, max: usize, allowed: fn(&u8) -> bool) -> bool {
    (min..=max).contains(&value.len()) && value.as_bytes().iter().all(allowed)
}

fn pattern_issue(out: &mut Vec<Issue>, field: &str, ok: bool, form: &str) {
    if !ok {
        push(
            out,
            field,
            codes::INVALID_PATTERN,
            format!("{field} must be {form}"),
        );
    }
}

fn alphanumeric_or_dash(b: &u8) -> bool {
    b.is_ascii_alphanumeric() || *b == b'-'
}

/// A RUC, or the issue of a text that is not one.
fn parse_ruc(out: &mut Vec<Issue>, field: &str, text: &str) -> Option<Ruc> {
    match Ruc::parse(text) {
        Ok(ruc) => Some(ruc),
        Err(e @ RucError::CheckDigit { .. }) => {
            push(out, field, codes::INVALID_CHECK_DIGIT, e.to_string());
            None
        }
        Err(e @ RucError::Format) => {
            push(out, field, codes::INVALID_RUC, format!("{field}: {e}"));
            None
        }
    }
}

/// The calendar day of the issue in Paraguay (dFeEmiDE).
fn issue_date(doc: &CanonicalDocument) -> NaiveDate {
    local_time::paraguay(doc.issue_datetime.with_timezone(&Utc)).date()
}

// ---------------------------------------------------------------------------------------------
// The document's head.

fn header_rules(doc: &CanonicalDocument, ctx: &ValidationContext<'_>, out: &mut Vec<Issue>) {
    text_length(out, "external_id", &doc.external_id, 1, 100);
    if doc.doc_type == DocumentType::Receipt && ctx.channel == ChannelKind::Sifen {
        push(
            out,
            "type",
            codes::UNSUPPORTED_DOCUMENT_TYPE,
            "receipt is not an electronic document type of SIFEN v150; issue it on an autoimpresor channel",
        );
    }
    issue_datetime_rules(doc, ctx, out);
}

fn issue_datetime_rules(doc: &CanonicalDocument, ctx: &ValidationContext<'_>, out: &mut Vec<Issue>) {
    const FIELD: &str = "issue_datetime";
    let issued = doc.issue_datetime.with_timezone(&Utc);
    if NaiveDate::from_ymd_opt(2018, 11, 22).is_some_and(|first| issue_date(doc) < first) {
        push(
            out,
            FIELD,
            codes::ISSUE_DATETIME_TOO_OLD,
            format!(
                "issue_datetime {} is before 2018-11-22, when electronic invoicing began (rule 1156)",
                doc.issue_datetime
            ),
        );
        return;
    }
    if ctx.channel != ChannelKind::Sifen {
        return;
    }
    let hours = ctx.now.signed_duration_since(issued).num_hours();
    let past = ctx.now.checked_sub_signed(TimeDelta::hours(PAST_WINDOW_HOURS));
    let future = ctx.now.checked_add_signed(TimeDelta::hours(FUTURE_WINDOW_HOURS));
    if past.is_some_and(|limit| issued < limit) {
        push(
            out,
            FIELD,
            codes::ISSUE_DATETIME_TOO_OLD,
            format!(
                "issue_datetime is {hours} hours ago; SIFEN accepts documents issued at most {PAST_WINDOW_HOURS} hours (30 days) before they are sent (rule 1150)"
            ),
        );
    } else if future.is_some_and(|limit| issued > limit) {
        push(
            out,
            FIELD,
            codes::ISSUE_DATETIME_IN_FUTURE,
            format!(
                "issue_datetime is {} hours ahead; SIFEN accepts documents issued at most {FUTURE_WINDOW_HOURS} hours (5 days) after they are sent (rule 1151)",
                -hours
            ),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Warnings.

fn warnings(doc: &CanonicalDocument, ctx: &ValidationContext<'_>) -> Vec<Issue> {
    let mut out = Vec::new();
    let buyer_ruc = doc
        .buyer
        .as_ref()
        .and_then(|b| b.ruc.as_deref())
        .and_then(|t| Ruc::parse(t).ok());
    if let Some(ruc) = buyer_ruc {
        match &ctx.buyer_registry {
            RegistryAnswer::NotLoaded => {}
            RegistryAnswer::NotFound => push(
                &mut out,
                "buyer.ruc",
                codes::BUYER_RUC_NOT_FOUND,
                format!(
                    "the taxpayer registry does not know RUC {ruc}; SIFEN may reject the document (rules 1306–1308)"
                ),
            ),
            RegistryAnswer::Found { state } if !state.trim().eq_ignore_ascii_case("ACTIVO") => {
                push(
                    &mut out,
                    "buyer.ruc",
                    codes::BUYER_RUC_NOT_ACTIVE,
                    format!(
                        "the taxpayer registry lists RUC {ruc} as {state}, not ACTIVO; SIFEN may reject the document (rules 1306–1308)"
                    ),
                );
            }
            RegistryAnswer::Found { .. } => {}
        }
    }
    if ctx.channel == ChannelKind::Sifen
        && let Some(days) = ctx.certificate_expires_in_days
        && days <= CERTIFICATE_WARNING_DAYS
    {
        let when = match days {
            d if d < 0 => format!("expired {} days ago", -d),
            0 => "expires today".to_owned(),
            1 => "expires in 1 day".to_owned(),
            d => format!("expires in {d} days"),
        };
        push(
            &mut out,
            "$",
            codes::CERTIFICATE_EXPIRING_SOON,
            format!("the channel's signing certificate {when}; renew it"),
        );
    }
    out
}
