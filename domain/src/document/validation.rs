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
// Parties.

fn seller_rules(doc: &CanonicalDocument, ctx: &ValidationContext<'_>, out: &mut Vec<Issue>) {
    let seller = &doc.seller;
    if doc.doc_type == DocumentType::Autofactura {
        vendor_rules(seller, ctx, out);
        return;
    }
    if let Some(text) = &seller.ruc
        && let Some(ruc) = parse_ruc(out, "seller.ruc", text)
        && &ruc != ctx.company_ruc
    {
        push(
            out,
            "seller.ruc",
            codes::SELLER_RUC_MISMATCH,
            format!("seller.ruc {ruc} is not the company's RUC {}", ctx.company_ruc),
        );
    }
    let production =
        ctx.channel == ChannelKind::Sifen && ctx.environment == Some(SifenEnvironment::Production);
    if production
        && seller
            .legal_name
            .as_deref()
            .is_some_and(|name| name.trim() == TEST_ISSUER_NAME)
    {
        push(
            out,
            "seller.legal_name",
            codes::TEST_NAME_IN_PRODUCTION,
            "seller.legal_name is SIFEN's test-environment literal, which production refuses (rule 1263)",
        );
    }
}

/// The seller of an autofactura: a non-taxpayer or foreigner (gCamAE).
fn vendor_rules(seller: &Party, ctx: &ValidationContext<'_>, out: &mut Vec<Issue>) {
    const WHY: &str = "an autofactura describes the person the company buys from (gCamAE)";
    not_allowed(
        out,
        "seller.ruc",
        seller.ruc.is_some(),
        "the seller of an autofactura is a non-taxpayer (the company is the buyer)",
    );
    if required(out, "seller.document_type", seller.document_type.is_some(), WHY) {
        let accepted = matches!(
            seller.document_type,
            Some(IdDocumentType::Ci | IdDocumentType::Passport | IdDocumentType::ForeignId)
        );
        not_allowed(
            out,
            "seller.document_type",
            !accepted,
            "the seller of an autofactura is identified by ci, passport or foreign_id",
        );
    }
    if required(
        out,
        "seller.document_number",
        seller.document_number.is_some(),
        WHY,
    ) {
        document_number_rules(out, "seller.document_number", seller.document_number.as_deref());
    }
    if required(out, "seller.legal_name", seller.legal_name.is_some(), WHY)
        && let Some(name) = &seller.legal_name
    {
        text_of(out, "seller.legal_name", name, facts::SELLER_NAME);
    }
    address_rules(out, "seller", seller, Some(WHY), true);
    if ctx.channel == ChannelKind::Sifen {
        place_rules(out, "seller", seller);
    }
}

fn document_number_rules(out: &mut Vec<Issue>, field: &str, number: Option<&str>) {
    if let Some(number) = number {
        let Length { min, max } = facts::ID_NUMBER;
        pattern_issue(
            out,
            field,
            pattern(number, min, max, alphanumeric_or_dash),
            &format!("{min} to {max} letters, digits or dashes"),
        );
    }
}

/// Address, house number and (in Paraguay) department and city codes of `prefix`.
/// `needed`: why the address is required, if it is; `domestic`: whether codes go with it.
fn address_rules(out: &mut Vec<Issue>, prefix: &str, party: &Party, needed: Option<&str>, domestic: bool) {
    let field = |name: &str| format!("{prefix}.{name}");
    if let Some(why) = needed {
        required(out, &field("address"), party.address.is_some(), why);
    }
    if let Some(address) = &party.address {
        text_of(out, &field("address"), address, facts::ADDRESS);
    }
    if needed.is_some() || party.address.is_some() {
        let why = "an address comes with its house number (rule 1330)";
        required(out, &field("house_number"), party.house_number.is_some(), why);
        if domestic {
            let why = "an address in Paraguay comes with its department and city (rules 1324, 1327)";
            required(
                out,
                &field("department_code"),
                party.department_code.is_some(),
                why,
            );
            required(out, &field("city_code"), party.city_code.is_some(), why);
        }
    }
    if let Some(number) = &party.house_number {
        let Length { min, max } = facts::HOUSE_NUMBER;
        pattern_issue(
            out,
            &field("house_number"),
            pattern(number, min, max, u8::is_ascii_digit),
            &format!("{min} to {max} digits (0 when the house has no number)"),
        );
    }
    if let Some(code) = party.department_code
        && !DEPARTMENT_CODES.contains(&code)
    {
        push(
            out,
            field("department_code"),
            codes::INVALID_CODE,
            format!("department_code {code} is not a SIFEN department (1 to 20)"),
        );
    }
    if let Some(code) = party.city_code
        && !CITY_CODES.contains(&code)
    {
        push(
            out,
            field("city_code"),
            codes::INVALID_CODE,
            format!("city_code {code} is not a SIFEN city code (1 to 99999)"),
        );
    }
    if let Some(name) = &party.city_name {
        text_length(out, &field("city_name"), name, 1, CITY_NAME_MAX);
        if name.chars().any(char::is_control) {
            push(
                out,
                field("city_name"),
                codes::INVALID_PATTERN,
                format!("{prefix}.city_name must be one line of text, without control characters"),
            );
        }
    }
}

/// The place of `prefix`'s address in SET's geographic table, as the DE writes it (`sifen`
/// only; see the module doc): a city that exists, in the department given, under the name given.
/// Codes out of range and malformed names are [`address_rules`]' issues and are not repeated.
fn place_rules(out: &mut Vec<Issue>, prefix: &str, party: &Party) {
    let field = |name: &str| format!("{prefix}.{name}");
    let (Some(department), Some(city)) = (party.department_code, party.city_code) else {
        return;
    };
    if party.address.is_none() || !DEPARTMENT_CODES.contains(&department) || !CITY_CODES.contains(&city) {
        return;
    }
    match geography::resolve(department, None, city) {
        Ok(place) => {
            let well_formed = |name: &&String| {
                let length = name.trim().chars().count();
                (1..=CITY_NAME_MAX).contains(&length)
                    && name.chars().count() <= CITY_NAME_MAX
                    && !name.chars().any(char::is_control)
            };
            if let Some(given) = party.city_name.as_ref().filter(well_formed)
                && !geography::same_name(given, &place.city.name)
            {
                push(
                    out,
                    field("city_name"),
                    codes::CITY_NAME_MISMATCH,
                    format!(
                        "{prefix}.city_name {:?} is not the name of city {city}: SET's geographic table \
                         calls it {:?} (omit city_name or send that name)",
                        given.trim(),
                        place.city.name
                    ),
                );
            }
        }
        Err(PlaceError::CityNotInDepartment {
            city,
            department: right,
            ..
        }) => push(
            out,
            field("department_code"),
            codes::CITY_DEPARTMENT_MISMATCH,
            format!(
                "{prefix}.department_code {department} is not the department of city {} ({}): SET's \
                 geographic table puts it in department {} {}",
                city.code, city.name, right.code, right.name
            ),
        ),
        Err(_) => push(
            out,
            field("city_code"),
            codes::UNKNOWN_CITY_CODE,
            format!("{prefix}.city_code {city} is not a city of SET's geographic table"),
        ),
    }
}

fn buyer_rules(
    doc: &CanonicalDocument,
    ctx: &ValidationContext<'_>,
    grand_total: Option<Decimal>,
    out: &mut Vec<Issue>,
) {
    let Some(buyer) = &doc.buyer else {
        if profile(doc.doc_type).buyer == Need::Required {
            required(
                out,
                "buyer",
                false,
                &format!("a {} names its buyer", doc.doc_type.as_str()),
            );
        } else if doc.doc_type != DocumentType::Autofactura {
            anonymous_limit(doc, grand_total, out);
        }
        return;
    };
    if doc.doc_type == DocumentType::Autofactura {
        autofactura_buyer_rules(buyer, ctx, out);
        return;
    }
    let op = operation_type(buyer);
    let anonymous = op == OperationType::Anonymous || buyer.document_type == Some(IdDocumentType::Innominado);
    if let Some(text) = &buyer.ruc {
        parse_ruc(out, "buyer.ruc", text);
    }
    identity_rules(buyer, op, out);
    if !anonymous {
        required(
            out,
            "buyer.legal_name",
            buyer.legal_name.is_some(),
            "a named buyer has a name (dNomRec)",
        );
    }
    if let Some(name) = &buyer.legal_name {
        text_of(out, "buyer.legal_name", name, facts::NAME);
    }
    if ctx.channel == ChannelKind::Sifen {
        sifen_contact_rules(buyer, out);
    }
    country_rules(buyer, op, out);
    let foreign = op == OperationType::Foreign;
    let needed = if doc.doc_type == DocumentType::Remision {
        Some("a remisión names where the goods go (rule 1318)")
    } else if foreign {
        Some("a foreign buyer has an address (rule 1318)")
    } else {
        None
    };
    address_rules(out, "buyer", buyer, needed, !foreign);
    if ctx.channel == ChannelKind::Sifen && !foreign {
        place_rules(out, "buyer", buyer);
    }
    if anonymous {
        anonymous_limit(doc, grand_total, out);
    }
}

/// What SIFEN's `gDatRec` takes of the buyer's contact fields (`dNomFanRec`, `dEmailRec`), checked
/// at intake so that a document accepted on the `sifen` channel is one `build_rde` can write (the
/// fuzzer found an email with a blank inside accepted here and refused there). Other channels
/// print these fields as given.
fn sifen_contact_rules(buyer: &Party, out: &mut Vec<Issue>) {
    if let Some(name) = &buyer.trade_name {
        text_of(out, "buyer.trade_name", name, facts::TRADE_NAME);
    }
    if let Some(email) = &buyer.email {
        pattern_issue(
            out,
            "buyer.email",
            is_sifen_email(email),
            "an email address SIFEN accepts (tEmail: letters, digits, '.', '-' and '_', then \
             @domain.tld, no blanks)",
        );
    }
}

/// Top-level fields SIFEN's document does not carry: free-form, or kuatia's own.
const NOT_IN_THE_DE: &[&str] = &["external_id", "metadata", "delivery"];

/// No text of a `sifen` document holds a control character (line breaks and tabs included) or
/// U+FFFE / U+FFFF: `build_rde` refuses them in every element it writes, so intake refuses them
/// first (the fuzzer found a `\r` in an address and a `\t` in a name let in here). Every string
/// of the document is checked, by its JSON path, but for [`NOT_IN_THE_DE`] and fields that
/// already have an issue.
fn control_character_rules(doc: &CanonicalDocument, out: &mut Vec<Issue>) {
    let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(doc) else {
        return;
    };
    let mut stack: Vec<(String, &serde_json::Value)> = fields
        .iter()
        .filter(|(key, _)| !NOT_IN_THE_DE.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value))
        .collect();
    let mut found = Vec::new();
    while let Some((path, value)) = stack.pop() {
        match value {
            serde_json::Value::String(text)
                if text
                    .chars()
                    .any(|c| c.is_control() || matches!(c, '\u{FFFE}' | '\u{FFFF}')) =>
            {
                found.push(path);
            }
            serde_json::Value::Array(values) => {
                stack.extend(
                    values
                        .iter()
                        .enumerate()
                        .map(|(i, v)| (format!("{path}[{i}]"), v)),
                );
            }
            serde_json::Value::Object(fields) => {
                stack.extend(fields.iter().map(|(key, v)| (format!("{path}.{key}"), v)));
            }
            _ => {}
        }
    }
    found.sort();
    for path in found {
        if !out.iter().any(|issue| issue.field == path) {
            push(
                out,
                path.clone(),
                codes::INVALID_PATTERN,
                format!(
                    "{path} must be one line of text, without control characters (line breaks and tabs \
                     included): SIFEN refuses them"
                ),
            );
        }
    }
}

/// RUC and identity document against the operation type.
fn identity_rules(buyer: &Party, op: OperationType, out: &mut Vec<Issue>) {
    use IdDocumentType::{Innominado, Ruc as RucDocument};
    use OperationType::{Anonymous, B2b, B2c, Foreign};
    let has_ruc = buyer.ruc.is_some();
    match op {
        B2b => {
            required(out, "buyer.ruc", has_ruc, "a b2b buyer is a taxpayer (rule 1300)");
        }
        Foreign => not_allowed(
            out,
            "buyer.ruc",
            has_ruc,
            "a foreign buyer is not a taxpayer (rule 1300)",
        ),
        Anonymous => not_allowed(out, "buyer.ruc", has_ruc, "an anonymous buyer has no RUC"),
        B2c => {}
    }
    let document_type = buyer.document_type;
    if has_ruc && matches!(op, B2b | B2c) {
        not_allowed(
            out,
            "buyer.document_type",
            document_type.is_some_and(|t| t != RucDocument),
            "a buyer with a RUC is identified by it: ruc or nothing (rule 1310)",
        );
    }
    if op != B2b && document_type == Some(RucDocument) {
        required(
            out,
            "buyer.ruc",
            has_ruc,
            "document_type ruc names the buyer's RUC",
        );
    }
    match op {
        B2b | Foreign => not_allowed(
            out,
            "buyer.document_type",
            document_type == Some(Innominado),
            "innominado is for consumers only, b2c or anonymous (rule 1319)",
        ),
        Anonymous => not_allowed(
            out,
            "buyer.document_type",
            document_type.is_some_and(|t| t != Innominado),
            "an anonymous buyer is innominado",
        ),
        B2c if !has_ruc && document_type != Some(Innominado) => {
            let why = "a consumer without RUC is identified by a document (rules 1310, 1311)";
            required(out, "buyer.document_type", document_type.is_some(), why);
            required(out, "buyer.document_number", buyer.document_number.is_some(), why);
        }
        B2c => {}
    }
    document_number_rules(out, "buyer.document_number", buyer.document_number.as_deref());
}

fn country_rules(buyer: &Party, op: OperationType, out: &mut Vec<Issue>) {
    let country = buyer.country.as_deref();
    if let Some(code) = country
        && !pattern(code, 3, 3, u8::is_ascii_uppercase)
    {
        push(
            out,
            "buyer.country",
            codes::INVALID_CODE,
            format!("country {code:?} is not an ISO 3166 alpha-3 code (three capital letters)"),
        );
        return;
    }
    if let Some(code) = country
        && facts::country(code).is_none()
    {
        // Found by the fuzzer: "ARO" passed here and the DE builder refused it.
        push(
            out,
            "buyer.country",
            codes::INVALID_CODE,
            format!("country {code} is not in SIFEN's list of countries (ISO 3166 alpha-3)"),
        );
        return;
    }
    if op == OperationType::Foreign {
        if required(
            out,
            "buyer.country",
            country.is_some(),
            "a foreign buyer's country, other than PRY (rule 1320)",
        ) && country == Some(PARAGUAY)
        {
            push(
                out,
                "buyer.country",
                codes::BUYER_COUNTRY_MISMATCH,
                "a foreign buyer's country is not PRY (rule 1320)",
            );
        }
    } else if let Some(code) = country
        && code != PARAGUAY
    {
        push(
            out,
            "buyer.country",
            codes::BUYER_COUNTRY_MISMATCH,
            format!("country {code} is abroad: such a buyer's operation_type is foreign (rule 1320)"),
        );
    }
}

/// Rule 1321: an unnamed buyer only below 60 000 000 PYG, unless the goods are medical samples.
fn anonymous_limit(doc: &CanonicalDocument, grand_total: Option<Decimal>, out: &mut Vec<Issue>) {
    if doc.transaction_type == Some(facts::MEDICAL_SAMPLES) {
        return;
    }
    if let Some(total) = grand_total
        && total >= Decimal::from(ANONYMOUS_LIMIT)
    {
        push(
            out,
            "buyer",
            codes::ANONYMOUS_TOTAL_LIMIT,
            format!(
                "an unnamed buyer (innominado) is allowed only below {ANONYMOUS_LIMIT} PYG (rule 1321); this document totals {}: name the buyer",
                total.normalize()
            ),
        );
    }
}

/// The buyer of an autofactura is the company itself (rules 1315–1317).
fn autofactura_buyer_rules(buyer: &Party, ctx: &ValidationContext<'_>, out: &mut Vec<Issue>) {
    match &buyer.ruc {
        None => push(
            out,
            "buyer.ruc",
            codes::AUTOFACTURA_BUYER_NOT_ISSUER,
            format!(
                "the buyer of an autofactura is the issuing company: omit buyer or give its RUC {} (rules 1315–1317)",
                ctx.company_ruc
            ),
        ),
        Some(text) => {
            if let Some(ruc) = parse_ruc(out, "buyer.ruc", text)
                && &ruc != ctx.company_ruc
            {
                push(
                    out,
                    "buyer.ruc",
                    codes::AUTOFACTURA_BUYER_NOT_ISSUER,
                    format!(
                        "buyer.ruc {ruc} is not the company's RUC {}: the buyer of an autofactura is the issuing company (rules 1315–1317)",
                        ctx.company_ruc
                    ),
                );
            }
        }
    }
    not_allowed(
        out,
        "buyer.operation_type",
        buyer.operation_type.is_some_and(|op| op != OperationType::B2c),
        "the company buys in an autofactura as b2c (rule 1316)",
    );
}

// ---------------------------------------------------------------------------------------------
// Lines and totals.

fn below(value: Decimal, limit: i64) -> bool {
    value.abs() < Decimal::from(limit)
}

fn out_of_range(out: &mut Vec<Issue>, field: &str, value: impl std::fmt::Display) {
    push(
        out,
        field,
        codes::AMOUNT_OUT_OF_RANGE,
        format!("{field} {value} is beyond what SIFEN can carry"),
    );
}

/// Checks a declared amount of whole guaraníes against its expected value (when it could be
/// computed) and returns the value the sums go on with: the declared one within 1 Gs, else the
/// expected one (see the module's decisions).
fn settle(out: &mut Vec<Issue>, field: &str, declared: Amount, expected: Option<Decimal>) -> Option<Decimal> {
    let value = declared.get();
    if !below(value, AMOUNT_LIMIT) {
        out_of_range(out, field, declared);
        return expected;
    }
    if let Some(expected) = expected {
        let within = value
            .checked_sub(expected)
            .is_some_and(|d| d.abs() <= Decimal::ONE);
        if !within {
            push(
                out,
                field,
                codes::AMOUNT_MISMATCH,
                format!("{field}: expected {}, got {declared}", expected.normalize()),
            );
            return Some(expected);
        }
    }
    if !value.fract().is_zero() {
        push(
            out,
            field,
            codes::FRACTIONAL_GUARANIES,
            format!("{field} {declared} has decimals; guaraníes have none"),
        );
        return expected.or(Some(half_up(value)));
    }
    Some(value)
}

/// A quantity or unit price: in range, at most 8 decimals. `None` when out of range.
fn factor(out: &mut Vec<Issue>, field: &str, value: Amount, limit: i64) -> Option<Decimal> {
    let d = value.get();
    if !below(d, limit) {
        out_of_range(out, field, value);
        return None;
    }
    if d.normalize().scale() > MAX_DECIMALS {
        push(
            out,
            field,
            codes::TOO_MANY_DECIMALS,
            format!("{field} {value} has more than {MAX_DECIMALS} decimal places"),
        );
    }
    Some(d)
}

/// Lines, then totals; returns the settled grand total (`None` for an unpriced type or when it
/// cannot be computed).
fn item_rules(doc: &CanonicalDocument, out: &mut Vec<Issue>) -> Option<Decimal> {
    let profile = profile(doc.doc_type);
    if doc.items.is_empty() {
        push(out, "items", codes::NO_ITEMS, "a document has at least one line");
    } else if doc.items.len() > MAX_ITEMS {
        push(
            out,
            "items",
            codes::TOO_MANY_ITEMS,
            format!(
                "{} lines; SIFEN takes at most {MAX_ITEMS} (gCamItem)",
                doc.items.len()
            ),
        );
    }
    let mut totals = Vec::with_capacity(doc.items.len());
    let mut taxes = Vec::with_capacity(doc.items.len());
    for (i, item) in doc.items.iter().enumerate() {
        line_fields(i, item, &profile, out);
        let quantity = quantity_rules(i, item, out);
        if profile.priced {
            let (total, tax) = line_amounts(i, item, quantity, profile.taxed, out);
            totals.push(total);
            taxes.push(tax);
        }
    }
    if !profile.priced || doc.items.is_empty() {
        return None;
    }
    totals_rules(doc, sum(&totals), sum(&taxes), out)
}

fn sum(values: &[Option<Decimal>]) -> Option<Decimal> {
    values
        .iter()
        .try_fold(Decimal::ZERO, |acc, v| acc.checked_add((*v)?))
}

/// Texts and codes of a line.
fn line_fields(i: usize, item: &Item, profile: &Profile, out: &mut Vec<Issue>) {
    text_length(out, &format!("items[{i}].description"), &item.description, 1, 120);
    if let Some(code) = &item.code {
        text_of(out, &format!("items[{i}].code"), code, facts::ITEM_CODE);
    }
    if let Some(unit) = item.unit
        && facts::unit(unit).is_none()
    {
        push(
            out,
            format!("items[{i}].unit"),
            codes::INVALID_CODE,
            format!("unit {unit} is not a SIFEN unit of measure (cUniMed; 77 is UNI)"),
        );
    }
    let zero_rate = item.tax_rate.get().is_zero();
    not_allowed(
        out,
        &format!("items[{i}].exemption"),
        item.exemption.is_some() && !zero_rate,
        "exemption qualifies tax_rate 0 only",
    );
    not_allowed(
        out,
        &format!("items[{i}].tax_rate"),
        !profile.taxed && !zero_rate,
        "an autofactura carries no IVA (rule 1901): tax_rate is 0",
    );
}

/// The quantity, when it can take part in the arithmetic.
fn quantity_rules(i: usize, item: &Item, out: &mut Vec<Issue>) -> Option<Decimal> {
    let field = format!("items[{i}].quantity");
    let quantity = factor(out, &field, item.quantity, QUANTITY_LIMIT)?;
    if quantity <= Decimal::ZERO {
        push(
            out,
            field,
            codes::MUST_BE_POSITIVE,
            format!("quantity {} is not above 0", item.quantity),
        );
        return None;
    }
    Some(quantity)
}

/// The settled line total and tax.
fn line_amounts(
    i: usize,
    item: &Item,
    quantity: Option<Decimal>,
    taxed: bool,
    out: &mut Vec<Issue>,
) -> (Option<Decimal>, Option<Decimal>) {
    let price_field = format!("items[{i}].unit_price");
    let price = factor(out, &price_field, item.unit_price, AMOUNT_LIMIT).filter(|p| {
        let ok = !p.is_sign_negative();
        if !ok {
            push(
                out,
                &price_field,
                codes::MUST_NOT_BE_NEGATIVE,
                format!("unit_price {} is negative", item.unit_price),
            );
        }
        ok
    });
    let total_field = format!("items[{i}].total_amount");
    // None: a factor is unusable (already an issue); Some(None): the product is too large.
    let product = quantity
        .zip(price)
        .map(|(q, p)| q.checked_mul(p).map(half_up).filter(|t| below(*t, AMOUNT_LIMIT)));
    if let Some(None) = product {
        push(
            out,
            &total_field,
            codes::AMOUNT_OUT_OF_RANGE,
            format!("quantity × unit_price of items[{i}] is beyond what SIFEN can carry"),
        );
    }
    let total = settle(out, &total_field, item.total_amount, product.flatten());
    let rate = item.tax_rate.get();
    let expected_tax = if taxed {
        total
            .and_then(|t| t.checked_mul(rate))
            .zip(Decimal::ONE_HUNDRED.checked_add(rate))
            .and_then(|(n, d)| n.checked_div(d))
            .map(half_up)
    } else {
        Some(Decimal::ZERO)
    };
    let tax = settle(
        out,
        &format!("items[{i}].tax_amount"),
        item.tax_amount,
        expected_tax,
    );
    (total, tax)
}

fn totals_rules(
    doc: &CanonicalDocument,
    grand_total: Option<Decimal>,
    tax_total: Option<Decimal>,
    out: &mut Vec<Issue>,
) -> Option<Decimal> {
    let totals = &doc.totals;
    let grand = settle(out, "totals.grand_total", totals.grand_total, grand_total);
    let tax = settle(out, "totals.tax_total", totals.tax_total, tax_total);
    let subtotal = grand.zip(tax).and_then(|(g, t)| g.checked_sub(t));
    settle(out, "totals.subtotal", totals.subtotal, subtotal);
    grand
}

// ---------------------------------------------------------------------------------------------
// Payment terms.

fn payment_rules(doc: &CanonicalDocument, grand_total: Option<Decimal>, out: &mut Vec<Issue>) {
    if !profile(doc.doc_type).payment_terms {
        return;
    }
    let terms = &doc.payment_terms;
    match terms.condition {
        PaymentCondition::Cash => {
            let why = "a cash sale is paid at once";
            not_allowed(out, "payment_terms.due_date", terms.due_date.is_some(), why);
            not_allowed(
                out,
                "payment_terms.installments",
                terms.installments.is_some(),
                why,
            );
        }
        PaymentCondition::Credit => {
            not_allowed(
                out,
                "payment_terms.condition",
                doc.doc_type == DocumentType::Autofactura,
                "an autofactura is paid cash (rule 1503)",
            );
            credit_rules(doc, terms, grand_total, out);
        }
    }
    method_rules(terms, out);
}

fn credit_rules(
    doc: &CanonicalDocument,
    terms: &PaymentTerms,
    grand_total: Option<Decimal>,
    out: &mut Vec<Issue>,
) {
    let installments = terms.installments.as_deref().unwrap_or_default();
    required(
        out,
        "payment_terms.due_date",
        terms.due_date.is_some() || !installments.is_empty(),
        "a credit sale has a due_date or installments (rule 1700)",
    );
    let issued = issue_date(doc);
    let mut due_dates = Vec::new();
    if let Some(date) = terms.due_date {
        due_dates.push(("payment_terms.due_date".to_owned(), date));
    }
    let mut amounts = Vec::with_capacity(installments.len());
    for (i, installment) in installments.iter().enumerate() {
        let field = format!("payment_terms.installments[{i}].amount");
        let amount = settle(out, &field, installment.amount, None);
        if amount.is_some_and(|a| a <= Decimal::ZERO) {
            push(
                out,
                field,
                codes::MUST_BE_POSITIVE,
                format!("installment amount {} is not above 0", installment.amount),
            );
        }
        amounts.push(amount);
        due_dates.push((
            format!("payment_terms.installments[{i}].due_date"),
            installment.due_date,
        ));
    }
    for (field, date) in due_dates {
        if date < issued {
            push(
                out,
                field,
                codes::DUE_DATE_BEFORE_ISSUE_DATE,
                format!("due date {date} is before the issue date {issued}"),
            );
        }
    }
    if let (false, Some(sum), Some(total)) = (installments.is_empty(), sum(&amounts), grand_total)
        && sum != total
    {
        push(
            out,
            "payment_terms.installments",
            codes::AMOUNT_MISMATCH,
            format!(
                "payment_terms.installments add up to the grand total: expected {}, got {}",
                total.normalize(),
                sum.normalize()
            ),
        );
    }
}

/// Card and cheque details go with their methods (rules 1600, 1650).
fn method_rules(terms: &PaymentTerms, out: &mut Vec<Issue>) {
    let card = terms.method == Some(PaymentMethod::Card);
    if card {
        required(
            out,
            "payment_terms.card",
            terms.card.is_some(),
            "method card needs the brand and whether it is a credit or debit card (rule 1600)",
        );
    } else {
        not_allowed(
            out,
            "payment_terms.card",
            terms.card.is_some(),
            "card details go with method card",
        );
    }
    if let Some(details) = &terms.card
        && facts::card_brand(&details.brand).is_none()
    {
        push(
            out,
            "payment_terms.card.brand",
            codes::INVALID_CODE,
            format!(
                "card brand {:?} is not one of {}",
                details.brand,
                facts::card_brand_names().collect::<Vec<_>>().join(", ")
            ),
        );
    }
    let check = terms.method == Some(PaymentMethod::Check);
    if check {
        required(
            out,
            "payment_terms.check",
            terms.check.is_some(),
            "method check needs the cheque's number and bank (rule 1650)",
        );
    } else {
        not_allowed(
            out,
            "payment_terms.check",
            terms.check.is_some(),
            "cheque details go with method check",
        );
    }
    if let Some(details) = &terms.check {
        let Length { min, max } = facts::CHECK_NUMBER;
        pattern_issue(
            out,
            "payment_terms.check.number",
            pattern(&details.number, min, max, u8::is_ascii_digit),
            &format!("{min} to {max} digits"),
        );
        text_of(out, "payment_terms.check.bank", &details.bank, facts::CHECK_BANK);
    }
}

// ---------------------------------------------------------------------------------------------
// The associated document (iTipDocAso).

fn associated_document_rules(doc: &CanonicalDocument, issuer: &Ruc, out: &mut Vec<Issue>) {
    let profile = profile(doc.doc_type);
    match (&doc.associated_document, profile.associated_document) {
        (None, Need::Required) => {
            let why = if profile.constancia {
                "an autofactura refers to its seller's constancia (rule 2416)"
            } else {
                "a credit or debit note refers to the invoice it adjusts (rule 2400)"
            };
            required(out, "associated_document", false, why);
        }
        (None, _) => {}
        (Some(_), Need::NotAllowed) => not_allowed(
            out,
            "associated_document",
            true,
            &format!("a {} refers to no document", doc.doc_type.as_str()),
        ),
        (Some(a), _) if profile.constancia => constancia_rules(a, out),
        (Some(a), _) => reference_rules(a, doc.doc_type, issuer, out),
    }
}

/// One field of a printed document: name, presence, and the value with its digit count.
type PrintedField<'a> = (&'static str, bool, Option<(&'a str, usize)>);

/// The printed document's fields: name, presence, and the value with its digit count (a date
/// has none).
fn printed_fields(a: &AssociatedDocument) -> [PrintedField<'_>; 5] {
    fn digits(v: &Option<String>, n: usize) -> Option<(&str, usize)> {
        v.as_deref().map(|s| (s, n))
    }
    [
        (
            "timbrado",
            a.timbrado.is_some(),
            digits(&a.timbrado, TIMBRADO_DIGITS),
        ),
        (
            "establishment",
            a.establishment.is_some(),
            digits(&a.establishment, ESTABLISHMENT_DIGITS),
        ),
        ("point", a.point.is_some(), digits(&a.point, ESTABLISHMENT_DIGITS)),
        (
            "number",
            a.number.is_some(),
            digits(&a.number, facts::NUMBER_DIGITS),
        ),
        ("issue_date", a.issue_date.is_some(), None),
    ]
}

fn constancia_fields(a: &AssociatedDocument) -> [(&'static str, bool); 3] {
    [
        ("constancia_type", a.constancia_type.is_some()),
        ("constancia_number", a.constancia_number.is_some()),
        ("constancia_control", a.constancia_control.is_some()),
    ]
}

/// An electronic (CDC) or printed document.
fn reference_rules(a: &AssociatedDocument, doc_type: DocumentType, issuer: &Ruc, out: &mut Vec<Issue>) {
    for (name, present) in constancia_fields(a) {
        not_allowed(
            out,
            &format!("associated_document.{name}"),
            present,
            "a constancia is an autofactura's associated document (rule 2434)",
        );
    }
    // A reference by document_id is resolved at intake, which fills the CDC or reports
    // associated_document_not_found.
    if a.cdc.is_none() && a.document_id.is_some() {
        return;
    }
    let printed = printed_fields(a);
    if let Some(cdc) = &a.cdc {
        for (name, present, _) in printed {
            not_allowed(
                out,
                &format!("associated_document.{name}"),
                present,
                "with a cdc the document is electronic, not printed",
            );
        }
        let note = matches!(doc_type, DocumentType::CreditNote | DocumentType::DebitNote);
        if cdc_rules(cdc, out) && note {
            if !cdc.starts_with("01") {
                push(
                    out,
                    "associated_document.cdc",
                    codes::ASSOCIATED_DOCUMENT_NOT_INVOICE,
                    format!(
                        "a credit or debit note adjusts an invoice, whose CDC starts with 01, not {} (rule 2414)",
                        cdc.get(..2).unwrap_or_default()
                    ),
                );
            }
            // The CDC carries its issuer's RUC (positions 3–11): a note adjusts the company's own
            // invoice, never another taxpayer's.
            let cdc_issuer = (
                cdc.get(2..10).unwrap_or_default().trim_start_matches('0'),
                cdc.get(10..11).unwrap_or_default(),
            );
            let own = (
                issuer.number().trim_start_matches('0'),
                issuer.check_digit().to_string(),
            );
            if cdc_issuer != (own.0, own.1.as_str()) {
                push(
                    out,
                    "associated_document.cdc",
                    codes::ASSOCIATED_DOCUMENT_OTHER_ISSUER,
                    format!(
                        "a credit or debit note adjusts one of the company's own invoices: this CDC was issued by RUC {}-{}, not {}-{}",
                        cdc_issuer.0, cdc_issuer.1, own.0, own.1
                    ),
                );
            }
        }
        return;
    }
    if printed.iter().all(|(_, present, _)| !present) {
        required(
            out,
            "associated_document.cdc",
            false,
            "give the electronic document's cdc, or the printed one's timbrado, establishment, point, number and issue_date (rule 2402)",
        );
        return;
    }
    for (name, present, digits) in printed {
        let field = format!("associated_document.{name}");
        required(
            out,
            &field,
            present,
            "a printed document is named by all five fields",
        );
        if let Some((value, n)) = digits {
            pattern_issue(
                out,
                &field,
                pattern(value, n, n, u8::is_ascii_digit),
                &format!("{n} digits"),
            );
        }
    }
}

/// A CDC's form and check digit; whether both are right.
fn cdc_rules(cdc: &str, out: &mut Vec<Issue>) -> bool {
    const FIELD: &str = "associated_document.cdc";
    let bytes = cdc.as_bytes();
    let form = bytes.len() == 44
        && bytes
            .iter()
            .enumerate()
            .all(|(i, b)| b.is_ascii_digit() || (i == 9 && (b'A'..=b'D').contains(b)));
    if !form {
        pattern_issue(
            out,
            FIELD,
            false,
            "44 characters, all digits but the RUC's last (0-9 or A-D)",
        );
        return false;
    }
    let (Some(base), Some(last)) = (cdc.get(..43), bytes.last()) else {
        return false;
    };
    let expected = modulo11(base);
    let given = last - b'0';
    if expected != given {
        push(
            out,
            FIELD,
            codes::INVALID_CHECK_DIGIT,
            format!("the check digit of CDC {base} is {expected}, not {given}"),
        );
        return false;
    }
    true
}

fn constancia_rules(a: &AssociatedDocument, out: &mut Vec<Issue>) {
    let why = "an autofactura's associated document is a constancia (rule 2418)";
    not_allowed(out, "associated_document.cdc", a.cdc.is_some(), why);
    for (name, present, _) in printed_fields(a) {
        not_allowed(out, &format!("associated_document.{name}"), present, why);
    }
    if required(
        out,
        "associated_document.constancia_type",
        a.constancia_type.is_some(),
        "1 (not a taxpayer) or 2 (microproducer)",
    ) && let Some(t) = a.constancia_type
        && facts::constancia_type(t).is_none()
    {
        push(
            out,
            "associated_document.constancia_type",
            codes::INVALID_CODE,
            format!("constancia_type {t} is not 1 (not a taxpayer) or 2 (microproducer)"),
        );
    }
    if let Some(number) = &a.constancia_number {
        let n = facts::CONSTANCIA_NUMBER_DIGITS;
        pattern_issue(
            out,
            "associated_document.constancia_number",
            pattern(number, n, n, u8::is_ascii_digit),
            &format!("{n} digits"),
        );
    }
    if let Some(control) = &a.constancia_control {
        let n = facts::CONSTANCIA_CONTROL_LENGTH;
        pattern_issue(
            out,
            "associated_document.constancia_control",
            pattern(control, n, n, alphanumeric_or_dash),
            &format!("{n} letters, digits or dashes"),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Reason, transport and the SIFEN extensions.

fn type_field_rules(doc: &CanonicalDocument, ctx: &ValidationContext<'_>, out: &mut Vec<Issue>) {
    let profile = profile(doc.doc_type);
    let (need, reasons) = profile.reason;
    match (doc.reason, need) {
        (None, Need::Required) => {
            required(
                out,
                "reason",
                false,
                &format!("the motive of a {} (one of {reasons:?})", doc.doc_type.as_str()),
            );
        }
        (Some(_), Need::NotAllowed) => not_allowed(
            out,
            "reason",
            true,
            "reason is the motive of a credit note, debit note or remisión",
        ),
        (Some(r), _) if !reasons.contains(&r) => push(
            out,
            "reason",
            codes::INVALID_CODE,
            format!(
                "reason {r} is not a motive of a {}: one of {reasons:?}",
                doc.doc_type.as_str()
            ),
        ),
        _ => {}
    }
    // Rule 2606: goods moved between the company's own premises go to the company itself.
    if doc.doc_type == DocumentType::Remision && doc.reason == Some(7) {
        let buyer_ruc = doc.buyer.as_ref().and_then(|b| b.ruc.as_deref());
        let same = buyer_ruc
            .and_then(|text| Ruc::parse(text).ok())
            .is_some_and(|ruc| ruc.number() == ctx.company_ruc.number());
        if !same {
            push(
                out,
                "buyer.ruc",
                codes::REMISION_BUYER_NOT_ISSUER,
                format!(
                    "a remisión between the company's own premises (reason 7) goes to the company itself: buyer.ruc must be {} (rule 2606), not {}",
                    ctx.company_ruc,
                    buyer_ruc.unwrap_or("absent")
                ),
            );
        }
    }
    let transport = doc.transport.as_ref().is_some_and(|t| !t.is_empty());
    match profile.transport {
        Need::Required => {
            required(
                out,
                "transport",
                transport,
                "a remisión carries its transport data (gTransp, rule 2100)",
            );
        }
        Need::NotAllowed => not_allowed(
            out,
            "transport",
            doc.transport.is_some(),
            &format!("a {} carries no transport data", doc.doc_type.as_str()),
        ),
        Need::Optional => {}
    }
    if let Some(p) = doc.presence
        && !PRESENCE_CODES.contains(&p)
    {
        push(
            out,
            "presence",
            codes::INVALID_CODE,
            format!("presence {p} is not one of {PRESENCE_CODES:?} (iIndPres)"),
        );
    }
    if let Some(t) = doc.transaction_type
        && facts::transaction_type(t).is_none()
    {
        push(
            out,
            "transaction_type",
            codes::INVALID_CODE,
            format!(
                "transaction_type {t} is not 1 to {} (iTipTra)",
                facts::TRANSACTION_TYPES.len()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::canonical::{self, sample_invoice};
    use chrono::{SecondsFormat, TimeZone};
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// An electronic invoice's CDC.
    const INVOICE_CDC: &str = "01800695631001001000000122025011511234567899";
    /// A remisión's CDC (SET's example).
    const REMISION_CDC: &str = "07800044649001001900018322019031217200146403";

    fn company() -> Ruc {
        Ruc::parse("80069563-1").expect("the SET test emitter")
    }

    /// Forty-five minutes after the sample's issue (2026-03-02T10:15:00-03:00).
    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 2, 14, 0, 0).unwrap()
    }

    fn check_with(doc: Value, adjust: impl FnOnce(&mut ValidationContext<'_>)) -> Validation {
        let ruc = company();
        let mut ctx = ValidationContext {
            channel: ChannelKind::Sifen,
            company_ruc: &ruc,
            environment: Some(SifenEnvironment::Test),
            now: now(),
            certificate_expires_in_days: Some(200),
            buyer_registry: RegistryAnswer::NotLoaded,
        };
        adjust(&mut ctx);
        let doc = canonical::from_value(doc).expect("structurally valid");
        validate(&doc, &ctx)
    }

    fn check(doc: Value) -> Validation {
        check_with(doc, |_| {})
    }

    fn pairs(issues: &[Issue]) -> Vec<(&str, &str)> {
        issues
            .iter()
            .map(|i| (i.field.as_str(), i.code.as_str()))
            .collect()
    }

    /// The (field, code) pairs of the errors of `doc`.
    fn errors_of(doc: Value) -> Vec<(String, String)> {
        check(doc).errors.into_iter().map(|i| (i.field, i.code)).collect()
    }

    fn expect(doc: Value, expected: &[(&str, &str)]) {
        let v = check(doc);
        assert_eq!(pairs(&v.errors), expected, "{:#?}", v.errors);
    }

    fn valid(doc: Value) {
        expect(doc, &[]);
    }

    /// The sample invoice, edited.
    fn edit(change: impl FnOnce(&mut Value)) -> Value {
        let mut doc = sample_invoice();
        change(&mut doc);
        doc
    }

    /// A JSON number with exactly these digits.
    fn n(text: &str) -> Value {
        serde_json::from_str(text).expect("a number")
    }

    /// An invoice of one line, totals from `total` and `tax`.
    fn one_line(quantity: Value, price: Value, rate: u8, tax: i64, total: i64) -> Value {
        edit(|d| {
            d["items"] = json!([{"description": "Línea", "quantity": quantity, "unit_price": price,
                "tax_rate": rate, "tax_amount": tax, "total_amount": total}]);
            d["totals"] = json!({"subtotal": total - tax, "tax_total": tax, "grand_total": total});
        })
    }

    fn message_of(v: &Validation, field: &str) -> String {
        v.errors
            .iter()
            .chain(&v.warnings)
            .find(|i| i.field == field)
            .map(|i| i.message.clone())
            .unwrap_or_default()
    }

    fn vendor() -> Value {
        json!({"legal_name": "Juan Benítez", "document_type": "ci", "document_number": "1234567",
               "address": "Compañía Potrero", "house_number": "0", "department_code": 11,
               "city_code": 3383})
    }

    fn autofactura() -> Value {
        edit(|d| {
            d["type"] = json!("autofactura");
            d["seller"] = vendor();
            d.as_object_mut().expect("object").remove("buyer");
            d["items"] = json!([{"description": "Mandioca (kg)", "quantity": 100, "unit_price": 3000,
                "tax_rate": 0, "tax_amount": 0, "total_amount": 300000, "unit": 83}]);
            d["totals"] = json!({"subtotal": 300000, "tax_total": 0, "grand_total": 300000});
            d["payment_terms"] = json!({"condition": "cash", "method": "cash"});
            d["associated_document"] = json!({"constancia_type": 1,
                "constancia_number": "12345678901", "constancia_control": "AB12-CD3"});
        })
    }

    fn remision() -> Value {
        edit(|d| {
            d["type"] = json!("remision");
            d["reason"] = json!(1);
            d["transport"] = json!({"kind": "own", "vehicle": "ABC 123"});
            d["buyer"]["address"] = json!("Av. Mariscal López");
            d["buyer"]["house_number"] = json!("1234");
            d["buyer"]["department_code"] = json!(1);
            d["buyer"]["city_code"] = json!(1);
        })
    }

    #[test]
    fn a_remision_between_the_company_s_premises_goes_to_the_company_itself() {
        // Rule 2606: reason 7 needs the receiver's RUC to be the issuer's.
        let moved = |buyer_ruc: Option<&str>| {
            edit(|d| {
                *d = remision();
                d["reason"] = json!(7);
                match buyer_ruc {
                    Some(ruc) => d["buyer"]["ruc"] = json!(ruc),
                    None => {
                        d["buyer"] = json!({"operation_type": "b2c", "legal_name": "Juan Pérez",
                            "document_type": "ci", "document_number": "1234567",
                            "address": "Av. Mariscal López", "house_number": "1234",
                            "department_code": 1, "city_code": 1});
                    }
                }
            })
        };
        valid(moved(Some("80069563-1")));
        let v = check(moved(Some("80013884-8")));
        assert_eq!(pairs(&v.errors), vec![("buyer.ruc", "remision_buyer_not_issuer")]);
        assert!(
            message_of(&v, "buyer.ruc").contains("80069563-1"),
            "{:#?}",
            v.errors
        );
        expect(moved(None), &[("buyer.ruc", "remision_buyer_not_issuer")]);
        // Other motives may go to anyone.
        valid(remision());
    }

    fn note(kind: &str) -> Value {
        edit(|d| {
            d["type"] = json!(kind);
            d["reason"] = json!(2);
            d["associated_document"] = json!({"cdc": INVOICE_CDC});
        })
    }

    #[test]
    fn the_sample_invoice_is_valid_without_warnings() {
        let v = check(sample_invoice());
        assert!(v.is_valid(), "{:#?}", v.errors);
        assert!(v.warnings.is_empty(), "{:#?}", v.warnings);
    }

    #[test]
    fn every_issue_is_reported_at_once() {
        let doc = edit(|d| {
            d["external_id"] = json!("   ");
            d["type"] = json!("receipt");
            d["buyer"]["ruc"] = json!("80013884-1");
            d["items"][1]["tax_amount"] = json!(2700);
        });
        let v = check(doc);
        assert_eq!(
            pairs(&v.errors),
            vec![
                ("external_id", "invalid_length"),
                ("type", "unsupported_document_type"),
                ("buyer.ruc", "invalid_check_digit"),
                ("items[1].tax_amount", "amount_mismatch"),
            ]
        );
        assert_eq!(
            message_of(&v, "buyer.ruc"),
            "the check digit of RUC 80013884 is 8, not 1"
        );
        assert_eq!(
            message_of(&v, "items[1].tax_amount"),
            "items[1].tax_amount: expected 2619, got 2700"
        );
    }

    #[test]
    fn one_guarani_off_passes_and_two_fail_with_the_expected_value() {
        valid(edit(|d| d["items"][1]["tax_amount"] = json!(2620)));
        valid(edit(|d| d["items"][1]["tax_amount"] = json!(2618)));
        valid(edit(|d| d["totals"]["grand_total"] = json!(165001)));
        let v = check(edit(|d| d["items"][1]["tax_amount"] = json!(2621)));
        assert_eq!(pairs(&v.errors), vec![("items[1].tax_amount", "amount_mismatch")]);
        assert!(message_of(&v, "items[1].tax_amount").ends_with("expected 2619, got 2621"));
        let v = check(edit(|d| d["totals"]["grand_total"] = json!(165002)));
        assert_eq!(pairs(&v.errors), vec![("totals.grand_total", "amount_mismatch")]);
        assert!(message_of(&v, "totals.grand_total").ends_with("expected 165000, got 165002"));
        expect(
            edit(|d| d["items"][0]["total_amount"] = json!(109998)),
            &[("items[0].total_amount", "amount_mismatch")],
        );
        expect(
            edit(|d| d["totals"]["subtotal"] = json!(165000)),
            &[("totals.subtotal", "amount_mismatch")],
        );
        expect(
            edit(|d| d["totals"]["tax_total"] = json!(0)),
            &[("totals.tax_total", "amount_mismatch")],
        );
    }

    #[test]
    fn a_wrong_line_counts_at_its_right_value_in_the_totals() {
        // The caller summed its wrong tax: the line and the total are both wrong, and the
        // total's expected value is that of the corrected document.
        let v = check(edit(|d| {
            d["items"][1]["tax_amount"] = json!(5000);
            d["totals"]["tax_total"] = json!(15000);
            d["totals"]["subtotal"] = json!(150000);
        }));
        assert_eq!(
            pairs(&v.errors),
            vec![
                ("items[1].tax_amount", "amount_mismatch"),
                ("totals.tax_total", "amount_mismatch"),
                ("totals.subtotal", "amount_mismatch"),
            ]
        );
        assert!(message_of(&v, "totals.tax_total").ends_with("expected 12619, got 15000"));
        assert!(message_of(&v, "totals.subtotal").ends_with("expected 152381, got 150000"));
    }

    #[test]
    fn rounding_is_half_up_to_whole_guaranies() {
        // 10 500 at 5 %: 500 exactly; 110 000 at 10 %: 10 000; 55 000 at 5 %: 2 619.04… → 2 619.
        valid(one_line(json!(1), json!(10500), 5, 500, 10500));
        let v = check(one_line(json!(1), json!(10500), 5, 502, 10500));
        assert!(message_of(&v, "items[0].tax_amount").ends_with("expected 500, got 502"));
        // 2.5 × 1 = 2.5 → 3 (half-even would say 2 and accept 1).
        valid(one_line(n("2.5"), json!(1), 0, 0, 3));
        let v = check(one_line(n("2.5"), json!(1), 0, 0, 1));
        // The totals summed the wrong line: they are expected at the corrected value too.
        assert_eq!(
            pairs(&v.errors),
            vec![
                ("items[0].total_amount", "amount_mismatch"),
                ("totals.grand_total", "amount_mismatch"),
                ("totals.subtotal", "amount_mismatch"),
            ]
        );
        assert!(message_of(&v, "items[0].total_amount").ends_with("expected 3, got 1"));
        // 10 % of 16 500: 1 500 exactly; of 16 505: 1 500.45… → 1 500; of 16 506: 1 500.54… → 1 501.
        valid(one_line(json!(1), json!(16500), 10, 1500, 16500));
        valid(one_line(json!(1), json!(16505), 10, 1500, 16505));
        let v = check(one_line(json!(1), json!(16506), 10, 1503, 16506));
        assert!(message_of(&v, "items[0].tax_amount").ends_with("expected 1501, got 1503"));
    }

    #[test]
    fn decimal_quantities_are_exact() {
        // In binary floating point 1.15 × 10 = 11.499…, which would round to 11.
        let v = check(one_line(n("1.15"), json!(10), 0, 0, 10));
        assert!(message_of(&v, "items[0].total_amount").ends_with("expected 12, got 10"));
        valid(one_line(n("1.15"), json!(10), 0, 0, 12));
        // 0.3 × 5 = 1.5 → 2 (floating point: 1.4999…).
        let v = check(one_line(n("0.3"), json!(5), 0, 0, 0));
        assert!(message_of(&v, "items[0].total_amount").ends_with("expected 2, got 0"));
        // 0.1 × 3 000 = 300, three times: 900, not 900.0000000000001.
        valid(edit(|d| {
            let line = json!({"description": "Décimo", "quantity": n("0.1"), "unit_price": 3000,
                "tax_rate": 10, "tax_amount": 27, "total_amount": 300});
            d["items"] = json!([line.clone(), line.clone(), line]);
            d["totals"] = json!({"subtotal": 819, "tax_total": 81, "grand_total": 900});
        }));
        // A unit price may have decimals; amounts may not.
        valid(one_line(json!(3), n("3333.33"), 0, 0, 10000));
        expect(
            one_line(n("0.123456789"), json!(1000), 0, 0, 123),
            &[("items[0].quantity", "too_many_decimals")],
        );
    }

    #[test]
    fn quantities_prices_and_amounts_have_their_ranges() {
        expect(
            edit(|d| d["items"][0]["quantity"] = json!(0)),
            &[("items[0].quantity", "must_be_positive")],
        );
        expect(
            edit(|d| d["items"][0]["unit_price"] = json!(-110000)),
            &[("items[0].unit_price", "must_not_be_negative")],
        );
        expect(
            edit(|d| d["items"][0]["total_amount"] = n("110000.4")),
            &[("items[0].total_amount", "fractional_guaranies")],
        );
        expect(
            edit(|d| d["items"][0]["quantity"] = n("100000000000")),
            &[("items[0].quantity", "amount_out_of_range")],
        );
        expect(
            edit(|d| {
                d["items"][0]["quantity"] = n("9999999999");
                d["items"][0]["unit_price"] = n("999999999999999");
            }),
            &[("items[0].total_amount", "amount_out_of_range")],
        );
        expect(
            edit(|d| d["totals"]["grand_total"] = n("1e28")),
            &[("totals.grand_total", "amount_out_of_range")],
        );
    }

    #[test]
    fn lines_have_their_counts_texts_and_codes() {
        expect(edit(|d| d["items"] = json!([])), &[("items", "no_items")]);
        let line = json!({"description": "x", "quantity": 1, "unit_price": 100, "tax_rate": 0,
            "tax_amount": 0, "total_amount": 100});
        expect(
            edit(|d| {
                d["items"] = Value::Array(vec![line; 1000]);
                d["totals"] = json!({"subtotal": 100000, "tax_total": 0, "grand_total": 100000});
            }),
            &[("items", "too_many_items")],
        );
        expect(
            edit(|d| {
                d["items"][0]["description"] = json!(" ");
                d["items"][0]["code"] = json!("C".repeat(51));
                d["items"][0]["unit"] = json!(78);
                d["items"][0]["exemption"] = json!("exempt");
                d["items"][1]["description"] = json!("é".repeat(121));
                d["items"][1]["unit"] = json!(77);
            }),
            &[
                ("items[0].description", "invalid_length"),
                ("items[0].code", "invalid_length"),
                ("items[0].unit", "invalid_code"),
                ("items[0].exemption", "not_allowed"),
                ("items[1].description", "invalid_length"),
            ],
        );
        valid(one_line(json!(1), json!(5000), 0, 0, 5000));
    }

    #[test]
    fn the_seller_is_the_company() {
        expect(
            edit(|d| d["seller"]["ruc"] = json!("80013884-8")),
            &[("seller.ruc", "seller_ruc_mismatch")],
        );
        expect(
            edit(|d| d["seller"]["ruc"] = json!("80069563-2")),
            &[("seller.ruc", "invalid_check_digit")],
        );
        expect(
            edit(|d| d["seller"]["ruc"] = json!("80069563")),
            &[("seller.ruc", "invalid_ruc")],
        );
        valid(edit(|d| {
            d["seller"].as_object_mut().expect("object").remove("ruc");
        }));
        let test_name = edit(|d| d["seller"]["legal_name"] = json!(TEST_ISSUER_NAME));
        assert!(
            check(test_name.clone()).is_valid(),
            "the literal is right in test"
        );
        let v = check_with(test_name, |c| {
            c.environment = Some(SifenEnvironment::Production);
        });
        assert_eq!(
            pairs(&v.errors),
            vec![("seller.legal_name", "test_name_in_production")]
        );
    }

    fn at(when: DateTime<Utc>) -> Value {
        let local = when.with_timezone(&local_time::offset());
        edit(|d| d["issue_datetime"] = json!(local.to_rfc3339_opts(SecondsFormat::Secs, false)))
    }

    #[test]
    fn the_issue_datetime_is_within_sifens_window() {
        let hours = TimeDelta::hours;
        valid(at(now() - hours(719)));
        valid(at(now() + hours(119)));
        let v = check(at(now() - hours(721)));
        assert_eq!(
            pairs(&v.errors),
            vec![("issue_datetime", "issue_datetime_too_old")]
        );
        assert!(message_of(&v, "issue_datetime").contains("721 hours ago"));
        expect(
            at(now() + hours(121)),
            &[("issue_datetime", "issue_datetime_in_future")],
        );
        let autoimpresor = |c: &mut ValidationContext<'_>| c.channel = ChannelKind::Autoimpresor;
        assert!(check_with(at(now() - hours(2000)), autoimpresor).is_valid());
        assert!(check_with(at(now() + hours(2000)), autoimpresor).is_valid());
        let first = Utc.with_ymd_and_hms(2018, 11, 22, 3, 0, 0).unwrap();
        assert!(check_with(at(first), autoimpresor).is_valid());
        let v = check_with(at(first - hours(1)), autoimpresor);
        assert_eq!(
            pairs(&v.errors),
            vec![("issue_datetime", "issue_datetime_too_old")]
        );
        assert!(message_of(&v, "issue_datetime").contains("2018-11-22"));
    }

    #[test]
    fn each_document_type_has_a_valid_minimal_example() {
        valid(sample_invoice());
        valid(edit(|d| {
            d.as_object_mut().expect("object").remove("buyer");
        }));
        valid(note("credit_note"));
        valid(note("debit_note"));
        valid(edit(|d| {
            d["type"] = json!("credit_note");
            d["reason"] = json!(8);
            d["associated_document"] = json!({"timbrado": "12345678", "establishment": "001",
                "point": "002", "number": "0000123", "issue_date": "2026-02-01"});
        }));
        valid(remision());
        valid(autofactura());
        let receipt = edit(|d| d["type"] = json!("receipt"));
        assert_eq!(
            pairs(&check(receipt.clone()).errors),
            vec![("type", "unsupported_document_type")]
        );
        let on_autoimpresor = check_with(receipt, |c| {
            c.channel = ChannelKind::Autoimpresor;
            c.environment = None;
        });
        assert!(on_autoimpresor.is_valid(), "{:#?}", on_autoimpresor.errors);
    }

    #[test]
    fn notes_refer_to_an_invoice_with_a_reason() {
        assert_eq!(modulo11(&INVOICE_CDC[..43]), 9);
        // Without `reason`, motive 1: only the reference is missing.
        expect(
            edit(|d| d["type"] = json!("credit_note")),
            &[("associated_document", "conditionally_required")],
        );
        for kind in ["credit_note", "debit_note", "remision"] {
            let parsed =
                crate::document::canonical::from_value(edit(|d| d["type"] = json!(kind))).expect("parses");
            assert_eq!(parsed.reason, Some(1), "{kind}");
        }
        let invoice = crate::document::canonical::from_value(edit(|_| {})).expect("parses");
        assert_eq!(invoice.reason, None, "an invoice gets no motive");
        let wrong_digit = format!("{}8", &INVOICE_CDC[..43]);
        let v = check(edit(|d| {
            d["type"] = json!("debit_note");
            d["reason"] = json!(9);
            d["associated_document"] = json!({"cdc": wrong_digit});
        }));
        assert_eq!(
            pairs(&v.errors),
            vec![
                ("associated_document.cdc", "invalid_check_digit"),
                ("reason", "invalid_code"),
            ]
        );
        assert!(message_of(&v, "associated_document.cdc").ends_with("is 9, not 8"));
        expect(
            edit(|d| {
                d["type"] = json!("credit_note");
                d["reason"] = json!(1);
                d["associated_document"] = json!({"cdc": &INVOICE_CDC[..43], "timbrado": "12345678",
                    "constancia_type": 1});
            }),
            &[
                ("associated_document.constancia_type", "not_allowed"),
                ("associated_document.timbrado", "not_allowed"),
                ("associated_document.cdc", "invalid_pattern"),
            ],
        );
        expect(
            edit(|d| {
                d["type"] = json!("credit_note");
                d["reason"] = json!(1);
                d["associated_document"] = json!({"cdc": REMISION_CDC});
            }),
            &[
                ("associated_document.cdc", "associated_document_not_invoice"),
                ("associated_document.cdc", "associated_document_other_issuer"),
            ],
        );
        // An invoice of another taxpayer (SET's example FE, RUC 80013884-8): the CDC carries it.
        let v = check(edit(|d| {
            d["type"] = json!("credit_note");
            d["reason"] = json!(1);
            d["associated_document"] = json!({"cdc": "01800138848001001123456412018121817819792239"});
        }));
        assert_eq!(
            pairs(&v.errors),
            vec![("associated_document.cdc", "associated_document_other_issuer")]
        );
        assert!(
            message_of(&v, "associated_document.cdc").contains("RUC 80013884-8, not 80069563-1"),
            "{:?}",
            v.errors
        );
        expect(
            edit(|d| {
                d["type"] = json!("credit_note");
                d["reason"] = json!(1);
                d["associated_document"] = json!({"timbrado": "12345678", "establishment": "001",
                    "point": "1", "issue_date": "2026-02-01"});
            }),
            &[
                ("associated_document.point", "invalid_pattern"),
                ("associated_document.number", "conditionally_required"),
            ],
        );
        expect(
            edit(|d| {
                d["type"] = json!("credit_note");
                d["reason"] = json!(1);
                d["associated_document"] = json!({});
            }),
            &[("associated_document.cdc", "conditionally_required")],
        );
        expect(edit(|d| d["reason"] = json!(1)), &[("reason", "not_allowed")]);
        // An invoice may refer to a remisión.
        valid(edit(|d| d["associated_document"] = json!({"cdc": REMISION_CDC})));
    }

    #[test]
    fn a_remision_moves_goods_to_an_address_and_ignores_prices() {
        valid(edit(|d| {
            *d = remision();
            d["items"][0]["tax_amount"] = json!(1);
            d["totals"]["grand_total"] = json!(0);
            d["payment_terms"] = json!({"condition": "credit"});
        }));
        expect(
            edit(|d| {
                d["type"] = json!("remision");
                d["transport"] = json!({});
            }),
            &[
                ("buyer.address", "conditionally_required"),
                ("buyer.house_number", "conditionally_required"),
                ("buyer.department_code", "conditionally_required"),
                ("buyer.city_code", "conditionally_required"),
                ("transport", "conditionally_required"),
            ],
        );
        expect(
            edit(|d| {
                *d = remision();
                d["reason"] = json!(15);
                d["items"][0]["quantity"] = json!(0);
            }),
            &[
                ("items[0].quantity", "must_be_positive"),
                ("reason", "invalid_code"),
            ],
        );
        expect(edit(|d| d["transport"] = json!({"vehicle": "x"})), &[]);
        expect(
            edit(|d| {
                *d = note("credit_note");
                d["transport"] = json!({"vehicle": "x"});
            }),
            &[("transport", "not_allowed")],
        );
    }

    #[test]
    fn an_autofactura_is_bought_by_the_company_from_a_non_taxpayer_without_iva() {
        valid(edit(|d| {
            *d = autofactura();
            d["buyer"] = json!({"ruc": "80069563-1", "operation_type": "b2c"});
        }));
        expect(
            edit(|d| {
                *d = autofactura();
                d["seller"]["ruc"] = json!("80069563-1");
                d["buyer"] = sample_invoice()["buyer"].clone();
                d["payment_terms"] = json!({"condition": "credit", "due_date": "2026-04-01"});
                d["associated_document"] = json!({"cdc": INVOICE_CDC});
            }),
            &[
                ("seller.ruc", "not_allowed"),
                ("buyer.ruc", "autofactura_buyer_not_issuer"),
                ("buyer.operation_type", "not_allowed"),
                ("payment_terms.condition", "not_allowed"),
                ("associated_document.cdc", "not_allowed"),
                ("associated_document.constancia_type", "conditionally_required"),
            ],
        );
        expect(
            edit(|d| {
                *d = autofactura();
                d["items"][0]["tax_rate"] = json!(10);
                d["items"][0]["tax_amount"] = json!(27273);
            }),
            &[
                ("items[0].tax_rate", "not_allowed"),
                ("items[0].tax_amount", "amount_mismatch"),
            ],
        );
        expect(
            edit(|d| {
                *d = autofactura();
                d["seller"] = json!({"legal_name": "Ana", "document_type": "ruc"});
                d["associated_document"] = json!({"constancia_type": 3, "constancia_number": "1"});
            }),
            &[
                ("seller.document_type", "not_allowed"),
                ("seller.document_number", "conditionally_required"),
                ("seller.legal_name", "invalid_length"),
                ("seller.address", "conditionally_required"),
                ("seller.house_number", "conditionally_required"),
                ("seller.department_code", "conditionally_required"),
                ("seller.city_code", "conditionally_required"),
                ("associated_document.constancia_type", "invalid_code"),
                ("associated_document.constancia_number", "invalid_pattern"),
            ],
        );
    }

    #[test]
    fn credit_needs_a_due_date_or_installments_that_add_up() {
        let credit = |terms: Value| edit(|d| d["payment_terms"] = terms);
        valid(credit(json!({"condition": "credit", "due_date": "2026-04-01"})));
        valid(credit(json!({"condition": "credit", "installments": [
            {"due_date": "2026-04-01", "amount": 100000}, {"due_date": "2026-05-01", "amount": 65000}]})));
        expect(
            credit(json!({"condition": "credit"})),
            &[("payment_terms.due_date", "conditionally_required")],
        );
        let v = check(credit(json!({"condition": "credit", "installments": [
            {"due_date": "2026-03-01", "amount": 100000}, {"due_date": "2026-05-01", "amount": 60000}]})));
        assert_eq!(
            pairs(&v.errors),
            vec![
                (
                    "payment_terms.installments[0].due_date",
                    "due_date_before_issue_date"
                ),
                ("payment_terms.installments", "amount_mismatch"),
            ]
        );
        assert!(message_of(&v, "payment_terms.installments").ends_with("expected 165000, got 160000"));
        expect(
            credit(
                json!({"condition": "credit", "due_date": "2026-03-01", "installments": [
                {"due_date": "2026-04-01", "amount": 0}, {"due_date": "2026-05-01", "amount": n("165000.5")}]}),
            ),
            &[
                ("payment_terms.installments[0].amount", "must_be_positive"),
                ("payment_terms.installments[1].amount", "fractional_guaranies"),
                ("payment_terms.due_date", "due_date_before_issue_date"),
                ("payment_terms.installments", "amount_mismatch"),
            ],
        );
        expect(
            credit(json!({"condition": "cash", "due_date": "2026-04-01", "installments": []})),
            &[
                ("payment_terms.due_date", "not_allowed"),
                ("payment_terms.installments", "not_allowed"),
            ],
        );
        // Notes carry no payment condition in SIFEN: their terms are not checked.
        valid(edit(|d| {
            *d = note("credit_note");
            d["payment_terms"] = json!({"condition": "credit"});
        }));
    }

    #[test]
    fn cards_and_cheques_come_with_their_details() {
        let terms = |t: Value| edit(|d| d["payment_terms"] = t);
        valid(terms(json!({"condition": "cash", "method": "card",
            "card": {"brand": "visa", "kind": "debit"}})));
        valid(terms(json!({"condition": "cash", "method": "check",
            "check": {"number": "1234", "bank": "Banco Continental"}})));
        expect(
            terms(json!({"condition": "cash", "method": "card"})),
            &[("payment_terms.card", "conditionally_required")],
        );
        expect(
            terms(json!({"condition": "cash", "method": "check"})),
            &[("payment_terms.check", "conditionally_required")],
        );
        expect(
            terms(json!({"condition": "cash", "method": "bank_transfer",
                "card": {"brand": "diners", "kind": "credit"},
                "check": {"number": "123456789", "bank": "BNF"}})),
            &[
                ("payment_terms.card", "not_allowed"),
                ("payment_terms.card.brand", "invalid_code"),
                ("payment_terms.check", "not_allowed"),
                ("payment_terms.check.number", "invalid_pattern"),
                ("payment_terms.check.bank", "invalid_length"),
            ],
        );
    }

    fn with_buyer(buyer: Value) -> Value {
        edit(|d| d["buyer"] = buyer)
    }

    #[test]
    fn the_operation_type_decides_what_identifies_the_buyer() {
        valid(with_buyer(
            json!({"operation_type": "b2c", "legal_name": "Juan Pérez",
            "document_type": "ci", "document_number": "1234567"}),
        ));
        valid(with_buyer(
            json!({"operation_type": "b2c", "legal_name": "Juan Pérez",
            "ruc": ruc_of("4444440")}),
        ));
        valid(with_buyer(json!({"operation_type": "anonymous"})));
        valid(with_buyer(json!({"document_type": "innominado"})));
        expect(
            with_buyer(json!({"operation_type": "b2b", "legal_name": "CLIENTE S.A.",
                "document_type": "ruc"})),
            &[("buyer.ruc", "conditionally_required")],
        );
        expect(
            with_buyer(json!({"operation_type": "b2c", "legal_name": "Juan Pérez"})),
            &[
                ("buyer.document_type", "conditionally_required"),
                ("buyer.document_number", "conditionally_required"),
            ],
        );
        expect(
            with_buyer(json!({"ruc": "80013884-8", "legal_name": "CLIENTE S.A.",
                "document_type": "ci", "document_number": "12 34"})),
            &[
                ("buyer.document_type", "not_allowed"),
                ("buyer.document_number", "invalid_pattern"),
            ],
        );
        expect(
            with_buyer(json!({"operation_type": "anonymous", "ruc": "80013884-8",
                "document_type": "ci"})),
            &[
                ("buyer.ruc", "not_allowed"),
                ("buyer.document_type", "not_allowed"),
            ],
        );
        expect(
            with_buyer(
                json!({"operation_type": "b2b", "ruc": "80013884-8", "legal_name": "CLI",
                "document_type": "innominado"}),
            ),
            &[
                ("buyer.document_type", "not_allowed"),
                ("buyer.document_type", "not_allowed"),
                ("buyer.legal_name", "invalid_length"),
            ],
        );
        expect(
            edit(|d| {
                *d = note("credit_note");
                d.as_object_mut().expect("object").remove("buyer");
            }),
            &[("buyer", "conditionally_required")],
        );
    }

    /// A RUC with its right check digit.
    fn ruc_of(number: &str) -> String {
        Ruc::from_number(number).expect("a number").to_string()
    }

    #[test]
    fn a_buyer_email_or_trade_name_sifen_cannot_write_is_refused_on_the_sifen_channel() {
        // Found by the canonical_document fuzz target: validation accepted the blank inside the
        // address, and build_rde then refused the document it had let in.
        expect(
            edit(|d| d["buyer"]["email"] = json!("c ompras@cliente.com.py")),
            &[("buyer.email", "invalid_pattern")],
        );
        expect(
            edit(|d| d["buyer"]["email"] = json!("compras@localhost")),
            &[("buyer.email", "invalid_pattern")],
        );
        expect(
            edit(|d| d["buyer"]["trade_name"] = json!("ABC")),
            &[("buyer.trade_name", "invalid_length")],
        );
        valid(edit(|d| {
            d["buyer"]["email"] = json!(" compras_01@cliente-sa.com.py ");
            d["buyer"]["trade_name"] = json!("Cliente");
        }));
        let printed = check_with(
            edit(|d| d["buyer"]["email"] = json!("c ompras@cliente.com.py")),
            |ctx| {
                ctx.channel = ChannelKind::Autoimpresor;
                ctx.environment = None;
            },
        );
        assert!(
            !pairs(&printed.errors)
                .iter()
                .any(|(field, _)| *field == "buyer.email"),
            "autoimpresor prints the email as given: {:#?}",
            printed.errors
        );
    }

    #[test]
    fn control_characters_sifen_refuses_are_refused_on_the_sifen_channel() {
        // Found by the canonical_document fuzz target: an autofactura seller's address with a
        // carriage return, accepted here and refused by build_rde.
        expect(
            edit(|d| {
                d["buyer"]["legal_name"] = json!("CLIENTE\tS.A.");
                d["items"][1]["description"] = json!("Soporte\r\n(horas)");
            }),
            &[
                ("buyer.legal_name", "invalid_pattern"),
                ("items[1].description", "invalid_pattern"),
            ],
        );
        expect(
            edit(|d| {
                d["buyer"]["address"] = json!("Palma\u{0}");
                d["buyer"]["house_number"] = json!("12");
                d["buyer"]["department_code"] = json!(1);
                d["buyer"]["city_code"] = json!(1);
                d["buyer"]["city_name"] = json!("ASUNCION\n");
                d["metadata"] = json!({"note": "free\ntext"});
            }),
            &[
                ("buyer.city_name", "invalid_pattern"),
                ("buyer.address", "invalid_pattern"),
            ],
        );
        let printed = check_with(
            edit(|d| d["items"][0]["description"] = json!("Línea 1\nLínea 2")),
            |ctx| {
                ctx.channel = ChannelKind::Autoimpresor;
                ctx.environment = None;
            },
        );
        assert!(
            !pairs(&printed.errors)
                .iter()
                .any(|(field, _)| *field == "items[0].description"),
            "{:#?}",
            printed.errors
        );
    }

    #[test]
    fn foreign_buyers_are_abroad_with_an_address_and_no_ruc() {
        valid(with_buyer(
            json!({"operation_type": "foreign", "legal_name": "ACME Corp",
            "country": "ARG", "address": "Av. Corrientes", "house_number": "1234",
            "document_type": "passport", "document_number": "AB123456"}),
        ));
        expect(
            with_buyer(json!({"operation_type": "foreign", "legal_name": "ACME Corp",
                "ruc": "80013884-8"})),
            &[
                ("buyer.ruc", "not_allowed"),
                ("buyer.country", "conditionally_required"),
                ("buyer.address", "conditionally_required"),
                ("buyer.house_number", "conditionally_required"),
            ],
        );
        expect(
            with_buyer(json!({"operation_type": "foreign", "legal_name": "ACME Corp",
                "country": "PRY", "address": "Palma", "house_number": "12"})),
            &[("buyer.country", "buyer_country_mismatch")],
        );
        expect(
            edit(|d| d["buyer"]["country"] = json!("ARG")),
            &[("buyer.country", "buyer_country_mismatch")],
        );
        expect(
            edit(|d| d["buyer"]["country"] = json!("py")),
            &[("buyer.country", "invalid_code")],
        );
        // Three capital letters, but no country SIFEN knows (the fuzzer's "ARO").
        expect(
            with_buyer(json!({"operation_type": "foreign", "legal_name": "ACME Corp",
                "country": "ARO", "address": "Av. Corrientes", "house_number": "1234"})),
            &[("buyer.country", "invalid_code")],
        );
        expect(
            edit(|d| {
                d["buyer"]["address"] = json!("Palma");
                d["buyer"]["house_number"] = json!("12a");
                d["buyer"]["department_code"] = json!(21);
                d["buyer"]["city_code"] = json!(0);
            }),
            &[
                ("buyer.house_number", "invalid_pattern"),
                ("buyer.department_code", "invalid_code"),
                ("buyer.city_code", "invalid_code"),
            ],
        );
        assert_eq!(
            operation_type(&Party {
                country: Some("BRA".into()),
                ..Party::default()
            }),
            OperationType::Foreign
        );
        assert_eq!(
            operation_type(&Party {
                ruc: Some("80013884-8".into()),
                ..Party::default()
            }),
            OperationType::B2b
        );
        assert_eq!(operation_type(&Party::default()), OperationType::Anonymous);
    }

    #[test]
    fn an_unnamed_buyer_is_allowed_below_sixty_million_guaranies() {
        let big = |buyer: Option<Value>, transaction_type: Option<u8>| {
            let mut d = one_line(json!(1), json!(60_000_000), 10, 5_454_545, 60_000_000);
            match buyer {
                Some(b) => d["buyer"] = b,
                None => {
                    d.as_object_mut().expect("object").remove("buyer");
                }
            }
            if let Some(t) = transaction_type {
                d["transaction_type"] = json!(t);
            }
            d
        };
        expect(big(None, None), &[("buyer", "anonymous_total_limit")]);
        expect(
            big(Some(json!({"document_type": "innominado"})), None),
            &[("buyer", "anonymous_total_limit")],
        );
        valid(big(None, Some(13)));
        valid(big(Some(sample_invoice()["buyer"].clone()), None));
        valid(one_line(json!(1), json!(59_999_999), 10, 5_454_545, 59_999_999));
    }

    #[test]
    fn extension_codes_are_in_their_lists() {
        valid(edit(|d| {
            d["presence"] = json!(9);
            d["transaction_type"] = json!(13);
            d["items"][0]["unit"] = json!(2366);
        }));
        expect(
            edit(|d| {
                d["presence"] = json!(7);
                d["transaction_type"] = json!(14);
                d["items"][0]["unit"] = json!(0);
            }),
            &[
                ("items[0].unit", "invalid_code"),
                ("presence", "invalid_code"),
                ("transaction_type", "invalid_code"),
            ],
        );
    }

    #[test]
    fn warnings_never_make_a_document_invalid() {
        let v = check_with(sample_invoice(), |c| {
            c.buyer_registry = RegistryAnswer::NotFound;
            c.certificate_expires_in_days = Some(12);
        });
        assert!(v.is_valid());
        assert_eq!(
            pairs(&v.warnings),
            vec![
                ("buyer.ruc", "buyer_ruc_not_found"),
                ("$", "certificate_expiring_soon"),
            ]
        );
        assert!(message_of(&v, "$").contains("expires in 12 days"));
        let v = check_with(sample_invoice(), |c| {
            c.buyer_registry = RegistryAnswer::Found {
                state: "SUSPENSION TEMPORAL".into(),
            };
        });
        assert!(v.is_valid());
        assert_eq!(pairs(&v.warnings), vec![("buyer.ruc", "buyer_ruc_not_active")]);
        assert!(message_of(&v, "buyer.ruc").contains("SUSPENSION TEMPORAL"));
        let quiet = check_with(sample_invoice(), |c| {
            c.buyer_registry = RegistryAnswer::Found {
                state: "ACTIVO".into(),
            };
            c.certificate_expires_in_days = Some(31);
        });
        assert!(quiet.warnings.is_empty());
        let autoimpresor = check_with(sample_invoice(), |c| {
            c.channel = ChannelKind::Autoimpresor;
            c.certificate_expires_in_days = Some(3);
        });
        assert!(autoimpresor.warnings.is_empty());
        let v = check_with(edit(|d| d["external_id"] = json!("")), |c| {
            c.certificate_expires_in_days = Some(-2);
        });
        assert!(!v.is_valid());
        assert!(message_of(&v, "$").contains("expired 2 days ago"));
    }

    /// A line: quantity in hundredths, unit price, rate.
    fn arb_line() -> impl Strategy<Value = (i128, i128, u8)> {
        (
            1i128..=100_000,
            0i128..=5_000_000,
            prop::sample::select(vec![0u8, 5, 10]),
        )
    }

    /// Half-up of `a / b` for `a ≥ 0`, `b > 0`, in integers.
    fn half_up_div(a: i128, b: i128) -> i128 {
        (2 * a + b) / (2 * b)
    }

    /// A valid invoice of these lines, computed with integer arithmetic, and its tax amounts.
    fn invoice_of(lines: &[(i128, i128, u8)]) -> (Value, Vec<i128>) {
        let mut items = Vec::new();
        let mut taxes = Vec::new();
        let (mut grand, mut tax_total) = (0, 0);
        for &(hundredths, price, rate) in lines {
            let total = half_up_div(hundredths * price, 100);
            let tax = half_up_div(total * i128::from(rate), 100 + i128::from(rate));
            grand += total;
            tax_total += tax;
            taxes.push(tax);
            items.push(json!({"description": "Línea",
                "quantity": n(&format!("{}.{:02}", hundredths / 100, hundredths % 100)),
                "unit_price": n(&price.to_string()), "tax_rate": rate,
                "tax_amount": n(&tax.to_string()), "total_amount": n(&total.to_string())}));
        }
        let doc = edit(|d| {
            d["items"] = Value::Array(items);
            d["totals"] = json!({"subtotal": n(&(grand - tax_total).to_string()),
                "tax_total": n(&tax_total.to_string()), "grand_total": n(&grand.to_string())});
        });
        (doc, taxes)
    }

    proptest! {
        #[test]
        fn random_valid_invoices_pass_and_one_bad_tax_is_one_error_at_its_line(
            lines in prop::collection::vec(arb_line(), 1..12),
            pick in any::<prop::sample::Index>(),
            off in 2i128..100_000,
            down in any::<bool>(),
        ) {
            let (doc, taxes) = invoice_of(&lines);
            let v = check(doc.clone());
            prop_assert!(v.errors.is_empty(), "{:#?}", v.errors);
            let k = pick.index(lines.len());
            let wrong = if down { taxes[k] - off } else { taxes[k] + off };
            let mut bad = doc;
            bad["items"][k]["tax_amount"] = n(&wrong.to_string());
            let found = errors_of(bad);
            prop_assert_eq!(
                found,
                vec![(format!("items[{k}].tax_amount"), "amount_mismatch".to_owned())]
            );
        }
    }
    #[test]
    fn a_city_name_is_one_line_of_one_to_thirty_characters() {
        let with_city = |name: &str| {
            edit(|d| {
                d["buyer"]["address"] = json!("Ruta 2");
                d["buyer"]["house_number"] = json!("0");
                d["buyer"]["department_code"] = json!(11);
                d["buyer"]["city_code"] = json!(3383);
                d["buyer"]["city_name"] = json!(name);
            })
        };
        valid(with_city("CIUDAD DEL ESTE"));
        expect(
            with_city("CIUDAD DEL ESTE, ALTO PARANA, PARAGUAY"),
            &[("buyer.city_name", "invalid_length")],
        );
        expect(with_city("  "), &[("buyer.city_name", "invalid_length")]);
        expect(
            with_city("CIUDAD\nDEL ESTE"),
            &[("buyer.city_name", "invalid_pattern")],
        );
        let mut seller = autofactura();
        seller["seller"]["city_name"] = json!("x".repeat(31));
        expect(seller, &[("seller.city_name", "invalid_length")]);
    }

    /// A sample invoice whose buyer lives at department `department`, city `city`.
    fn buyer_at(department: u16, city: u32, name: Option<&str>) -> Value {
        edit(|d| {
            d["buyer"]["address"] = json!("Ruta 2");
            d["buyer"]["house_number"] = json!("0");
            d["buyer"]["department_code"] = json!(department);
            d["buyer"]["city_code"] = json!(city);
            if let Some(name) = name {
                d["buyer"]["city_name"] = json!(name);
            }
        })
    }

    #[test]
    fn a_buyer_in_luque_is_valid_with_or_without_the_tables_name() {
        valid(buyer_at(12, 5946, None));
        valid(buyer_at(12, 5946, Some("Luque")));
        valid(buyer_at(1, 1, Some("Asunción (Distrito)")));
    }

    #[test]
    fn a_department_that_is_not_the_citys_is_refused_naming_the_right_one() {
        // Department 11 (Alto Paraná) with city 6: Aguará is in Concepción.
        let doc = buyer_at(11, 6, None);
        expect(
            doc.clone(),
            &[("buyer.department_code", "city_department_mismatch")],
        );
        let message = message_of(&check(doc), "buyer.department_code");
        assert!(message.contains("department 2 CONCEPCION"), "{message}");
        // 19 is in the XSD's list but no city of SET's table is there.
        expect(
            buyer_at(19, 1, None),
            &[("buyer.department_code", "city_department_mismatch")],
        );
    }

    #[test]
    fn a_city_name_that_is_not_the_tables_is_refused_naming_the_right_one() {
        let doc = buyer_at(2, 6, Some("LUQUE"));
        expect(doc.clone(), &[("buyer.city_name", "city_name_mismatch")]);
        let message = message_of(&check(doc), "buyer.city_name");
        assert!(message.contains("\"AGUARA\""), "{message}");
        // Both wrong: each field its issue.
        expect(
            buyer_at(11, 6, Some("LUQUE")),
            &[("buyer.department_code", "city_department_mismatch")],
        );
    }

    #[test]
    fn a_city_code_outside_the_table_is_unknown() {
        expect(
            buyer_at(1, 99_999, None),
            &[("buyer.city_code", "unknown_city_code")],
        );
        // Out of SIFEN's range: invalid_code alone.
        expect(buyer_at(1, 100_000, None), &[("buyer.city_code", "invalid_code")]);
    }

    #[test]
    fn the_autofactura_seller_and_the_remision_delivery_are_placed_too() {
        let mut seller = autofactura();
        seller["seller"]["department_code"] = json!(12);
        expect(
            seller.clone(),
            &[("seller.department_code", "city_department_mismatch")],
        );
        seller["seller"]["department_code"] = json!(11);
        seller["seller"]["city_name"] = json!("CIUDAD PTE. FRANCO");
        expect(seller, &[("seller.city_name", "city_name_mismatch")]);
        let mut far = remision();
        far["buyer"]["department_code"] = json!(1);
        far["buyer"]["city_code"] = json!(5946);
        let message = message_of(&check(far.clone()), "buyer.department_code");
        assert!(message.contains("department 12 CENTRAL"), "{message}");
        expect(far, &[("buyer.department_code", "city_department_mismatch")]);
    }

    #[test]
    fn places_are_not_checked_off_sifen_where_no_printable_shows_them() {
        let autoimpresor = |doc: Value| {
            let v = check_with(doc, |ctx| {
                ctx.channel = ChannelKind::Autoimpresor;
                ctx.environment = None;
                ctx.certificate_expires_in_days = None;
            });
            v.errors
                .into_iter()
                .map(|i| (i.field, i.code))
                .collect::<Vec<_>>()
        };
        assert_eq!(autoimpresor(buyer_at(11, 6, Some("LUQUE"))), vec![]);
        assert_eq!(
            autoimpresor(buyer_at(21, 6, None)),
            vec![("buyer.department_code".to_owned(), "invalid_code".to_owned())]
        );
    }
}
