//! The unsigned SIFEN v150 document (`rDE`) of a canonical document: [`build_rde`] maps a
//! [`CanonicalDocument`] and the issuer's configuration ([`Issuer`]) to the XML that the signer
//! signs, with its CDC and the values the QR needs (the Manual Técnico v150, section E).
//!
//! Pure: the sequence number, the security code (drawn by the caller from a CSPRNG) and the
//! signing time come in as arguments; places are named from SET's geographic table
//! ([`crate::geography`]). Start at [`build_rde`]; the tables of code → description, the limits
//! and the rounding it shares with intake validation are in [`super::facts`].
//!
//! # The serialisation is canonical by construction
//!
//! A signer elsewhere digests the `<DE …>…</DE>` substring as Exclusive C14N would output it, so
//! the writer never leaves room for a canonicaliser to change anything: no whitespace between
//! tags, no prefixes, no self-closing or empty elements (an empty optional is omitted), `Id` as
//! the only attribute inside `rDE`'s `DE`, and text escaped exactly as C14N escapes text (`&`,
//! `<`, `>` and carriage return; quotes stay literal). Values are trimmed; control characters are
//! refused rather than rewritten, since the XSD's `noEmptyString` pattern rejects line breaks and
//! silently editing a description would change what the customer signed off. Output goes to a
//! `String` with `push_str`: no DOM, no XML library.
//!
//! # Decisions where the sources leave room
//!
//! - **Amounts are recomputed** from quantity and unit price with SIFEN's formulas (the Manual's E7 formulas),
//!   not copied from the canonical totals: `dTotOpeItem = half_up(price × quantity)` in whole
//!   guaraníes; the item's IVA as the Manual defines it (E735, E736), to the 8 decimals the fields
//!   allow: `dBasGravIVA = total × 100 / (100 + rate)` and `dLiqIVAItem = dBasGravIVA × rate / 100`,
//!   each rounded half away from zero to 8 decimals, as XMLGEN writes them. The totals of
//!   `gTotSub` (dIVA5, dIVA10, dTotIVA, the bases) are the exact sums of the items' figures
//!   (F015–F020), so every figure SIFEN recomputes (rules 1909–1913, 2366–2377) agrees to within
//!   10⁻⁸ whatever its tolerance. The canonical document keeps whole guaraníes (the canonical document's
//!   tax amount, validated within 1 Gs of `half_up(total × rate / (100 + rate))`); the KuDE prints
//!   the figures rounded to the guaraní. `dRedon` is 0 (allowed,
//!   "si no cuenta con redondeo completar con cero"), so `dTotGralOpe = dTotOpe`.
//! - **Zero-valued discount and advance fields** of each line and of `gTotSub` are written, as the
//!   verified XMLGEN vector does; `dTotalGs` and exchange rates are not (PYG, rules 1207–1210).
//! - **Autofactura** has no `gCamIVA` (rule 1901) and its `gTotSub` has no subtotals by rate, IVA
//!   or bases (F002–F005, F015–F020); its receiver is the issuer itself (rules 1315–1317) and its
//!   `gCamAE` place of transaction is the seller's address.
//! - **Remisión** has no `gOpeCom`, `gCamCond`, `gValorItem`, `gCamIVA` or `gTotSub`; the QR then
//!   uses 0 for both totals. Its transport data come from the canonical `transport` object
//!   ([`crate::document::canonical::Transport`]), checked here against what `gTransp` takes;
//!   departure is the issuer's address and delivery the buyer's. `dInfoFisc` carries the issuer's configured legal notice
//!   ([`Issuer::remision_notice`], the sifen channel's `remision_notice`): the exact wording of
//!   Art. 3 inc. 7 RG 41/2014 is not in the sources read, so none is invented and there is no
//!   default. Intake refuses a remisión on a channel without one
//!   ([`crate::channel::EmissionChannel::document_checks`]).
//! - **Descriptions come from codes**, never from configuration or the caller, where the XSD or
//!   SET lists them (every `dDes*` literal, units, countries; departments, districts and cities
//!   from SET's geographic table, [`crate::geography`]). Every place the DE writes (the issuer's
//!   address, the receiver's, the remisión's departure and delivery, the autofactura seller's)
//!   must agree with the table: the city exists, the department is the city's and so is the
//!   district when one is given; a name given (the issuer's configured names, a party's
//!   `city_name`) must be the table's name for the code, compared without case or accents, and
//!   the DE writes the table's exact name. The district (`cDis*`, `dDesDis*`, optional in every
//!   group) is always written, derived from the city: SIFEN checks it against the city (rules
//!   1255–1259, 1328, 1329, 2206, 2208, 2553–2559) and it costs nothing. Rejected: taking names
//!   from the tenant's configuration (a name typed once for a company went out on every buyer of
//!   that code, right or wrong). Intake checks the same ([`crate::document::validation`]).
//! - **Strictness**: anything the XSD would refuse is a typed [`DeError`] naming the field, never
//!   a panic and never a silently dropped value.

use chrono::{Datelike, NaiveDate, NaiveDateTime, Utc};
use rust_decimal::Decimal;
use serde_json::{Map, Value};

use super::cdc::{Cdc, CdcError, CdcParts};
use super::facts::{
    self, ADDRESS, AMOUNT_LIMIT, CURRENCY, CURRENCY_NAME, ESTABLISHMENT_DIGITS, Length, MAX_DECIMALS, NAME,
    PARAGUAY, QUANTITY_LIMIT, TIMBRADO_DIGITS, TRADE_NAME, half_up,
};
use super::qr::QrReceiver;
use crate::channel::{SifenEnvironment, SifenSettings};
use crate::company::{Branch, CompanyProfile, EconomicActivity, IssuancePoint, TaxpayerType};
use crate::document::canonical::{
    self, AssociatedDocument, CanonicalDocument, CardKind, CarrierDocumentType, DocumentType, Exemption,
    Given, IdDocumentType, Item, OperationType, Party, PartyTaxpayerType, PaymentCondition, PaymentMethod,
    TransportKind, TransportMode,
};
use crate::document::validation::operation_type;
use crate::geography::{self, Place, PlaceError};
use crate::local_time;
use crate::ruc::Ruc;

mod items;
mod parties;
#[cfg(test)]
mod tests;
mod transport;

use items::*;
use parties::*;
use transport::*;

/// The XML declaration and `rDE`'s opening tag, exactly as the signer expects them.
const RDE_OPEN: &str = concat!(
    r#"<?xml version="1.0" encoding="UTF-8"?>"#,
    r#"<rDE xmlns="http://ekuatia.set.gov.py/sifen/xsd" "#,
    r#"xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" "#,
    r#"xsi:schemaLocation="http://ekuatia.set.gov.py/sifen/xsd siRecepDE_v150.xsd">"#,
    "<dVerFor>150</dVerFor>"
);

/// Everything the DE needs from configuration: the company, the branch (establecimiento), the
/// issuance point and the sifen channel. Built per document; see [`Issuer::from_config`].
#[derive(Debug, Clone, PartialEq)]
pub struct Issuer {
    /// RUC and check digit (`dRucEm`, `dDVEmi`).
    pub ruc: Ruc,
    /// Person or legal entity (`iTipCont`).
    pub taxpayer_type: TaxpayerType,
    /// Tax regime (`cTipReg`, 1–8).
    pub tax_regime: Option<u8>,
    /// Legal name (`dNomEmi` in production; the test literal replaces it in test).
    pub legal_name: String,
    /// Trade name (`dNomFanEmi`, 4–255).
    pub trade_name: Option<String>,
    /// Street (`dDirEmi`).
    pub address: String,
    /// House number, digits (`dNumCas`; 0 without number).
    pub house_number: String,
    /// Department code (`cDepEmi`), the city's department in SET's geographic table.
    pub department_code: u16,
    /// District code, the city's district when given (`cDisEmi` is written from the city anyway).
    pub district_code: Option<u16>,
    /// District name as configured: when given, it must be the table's name of the district.
    pub district_name: Option<String>,
    /// City code (`cCiuEmi`).
    pub city_code: u32,
    /// City name as configured: when not empty, it must be the table's name of the city, which
    /// is what `dDesCiuEmi` carries.
    pub city_name: String,
    /// Phone, 6–15 characters (`dTelEmi`).
    pub phone: String,
    /// Email (`dEmailE`).
    pub email: String,
    /// The branch's name (`dDenSuc`, 1–30).
    pub branch_name: Option<String>,
    /// One to nine economic activities (`gActEco`).
    pub economic_activities: Vec<EconomicActivity>,
    /// Timbrado number, 8 digits (`dNumTim`).
    pub timbrado: String,
    /// Start of the timbrado's validity (`dFeIniT`).
    pub timbrado_valid_from: NaiveDate,
    /// Establishment code, 3 digits (`dEst`).
    pub establishment: String,
    /// Issuance point code, 3 digits (`dPunExp`).
    pub point: String,
    /// Test or production.
    pub environment: SifenEnvironment,
    /// The legal notice every remisión carries in `dInfoFisc` (Art. 3 inc. 7 RG 41/2014).
    pub remision_notice: Option<String>,
}

impl Issuer {
    /// The issuer of documents of `point` at `branch` of the company, on the sifen channel.
    /// The branch's address, when it has one, replaces the company's (and the company's district,
    /// which belongs to the company's address); so does the branch's city, with its own name or
    /// none (then the table's).
    pub fn from_config(
        ruc: &Ruc,
        company: &CompanyProfile,
        branch: &Branch,
        point: &IssuancePoint,
        sifen: &SifenSettings,
    ) -> Self {
        let own_address = branch.address.is_some() || branch.city_code.is_some();
        let pick = |own: &Option<String>, company: &String| own.clone().unwrap_or_else(|| company.clone());
        Self {
            ruc: ruc.clone(),
            taxpayer_type: company.taxpayer_type,
            tax_regime: company.tax_regime_code,
            legal_name: company.legal_name.clone(),
            trade_name: company.trade_name.clone(),
            address: pick(&branch.address, &company.address),
            house_number: pick(&branch.house_number, &company.house_number),
            department_code: branch.department_code.unwrap_or(company.department_code),
            district_code: if own_address { None } else { company.district_code },
            district_name: if own_address {
                None
            } else {
                company.district_name.clone()
            },
            city_code: branch.city_code.unwrap_or(company.city_code),
            city_name: match branch.city_code {
                Some(_) => branch.city_name.clone().unwrap_or_default(),
                None => company.city_name.clone(),
            },
            phone: company.phone.clone(),
            email: company.email.clone(),
            branch_name: Some(branch.name.clone()),
            economic_activities: company.economic_activities.clone(),
            timbrado: sifen.timbrado.clone(),
            timbrado_valid_from: sifen.timbrado_valid_from,
            establishment: branch.code.clone(),
            point: point.code.clone(),
            environment: sifen.environment,
            remision_notice: sifen.remision_notice.clone(),
        }
    }

    /// The issuer's address in SET's geographic table (`cDepEmi` … `dDesCiuEmi`, and `gCamSal`).
    fn place(&self) -> Result<Place, DeError> {
        let city_name = Some(self.city_name.as_str()).filter(|n| !n.trim().is_empty());
        place(
            "issuer",
            self.department_code,
            self.district_code,
            self.city_code,
            city_name,
            self.district_name.as_deref(),
        )
    }

    fn taxpayer_code(&self) -> u8 {
        match self.taxpayer_type {
            TaxpayerType::Individual => 1,
            TaxpayerType::LegalEntity => 2,
        }
    }
}

/// What [`build_rde`] needs; lives for one call.
#[derive(Clone, Copy)]
pub struct DeInput<'a> {
    /// The document, which passed validation.
    pub document: &'a CanonicalDocument,
    /// Its issuer.
    pub issuer: &'a Issuer,
    /// The sequence number (`dNumDoc`), 1 to 9 999 999.
    pub number: u64,
    /// `dCodSeg`: nine digits, not all zero, different from the number, from a CSPRNG.
    pub security_code: &'a str,
    /// When it is signed, Paraguay's wall-clock time (`dFecFirma`).
    pub signed_at: NaiveDateTime,
}

impl std::fmt::Debug for DeInput<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeInput")
            .field("document", &self.document.external_id)
            .field("number", &self.number)
            .field("signed_at", &self.signed_at)
            .finish_non_exhaustive()
    }
}

/// Who receives the document, as the QR names them (owned; see [`BuiltDe::qr_receiver`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Receiver {
    /// `iNatRec` 1: `dRucRec`.
    Ruc(String),
    /// `iNatRec` 2: `dNumIDRec`, `"0"` when none is written (foreign receiver).
    OtherId(String),
}

/// The unsigned document and what the signer and the QR need from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltDe {
    /// The CDC (`DE@Id`).
    pub cdc: Cdc,
    /// The whole unsigned `rDE`, XML declaration included, without `Signature` and `gCamFuFD`
    /// (the signer inserts them right after `</DE>`).
    pub xml: String,
    /// `dFeEmiDE` as written.
    pub issued_at: String,
    /// The receiver as the QR names it.
    pub receiver: Receiver,
    /// `dTotGralOpe` as written, `"0"` without `gTotSub` (remisión).
    pub total: String,
    /// `dTotIVA` as written, `"0"` when absent (remisión, autofactura).
    pub total_iva: String,
    /// Number of `gCamItem`.
    pub item_count: usize,
}

impl BuiltDe {
    /// The receiver in the QR builder's terms.
    pub fn qr_receiver(&self) -> QrReceiver<'_> {
        match &self.receiver {
            Receiver::Ruc(ruc) => QrReceiver::Ruc(ruc),
            Receiver::OtherId(id) => QrReceiver::OtherId(id),
        }
    }

    /// The `<DE Id="…">…</DE>` element, the part the signature covers.
    pub fn de_element(&self) -> &str {
        let start = self.xml.find("<DE ").unwrap_or(0);
        let end = self
            .xml
            .rfind("</DE>")
            .map_or(self.xml.len(), |i| i + "</DE>".len());
        &self.xml[start..end]
    }
}

/// Why a DE cannot be written. Fields are named by their canonical JSON path (`items[2].unit`),
/// `issuer.*` for configuration, or the argument's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeError {
    /// Receipts are not SIFEN documents.
    #[error("a {0} is not an electronic document of SIFEN v150")]
    UnsupportedDocumentType(&'static str),
    /// Only PYG.
    #[error("currency {0:?} is not supported; SIFEN documents are written in PYG")]
    UnsupportedCurrency(String),
    /// Something the DE needs is absent.
    #[error("{field} is required: {why}")]
    Missing {
        /// Where.
        field: String,
        /// Why the DE needs it.
        why: String,
    },
    /// A value the XSD or a SIFEN rule would refuse.
    #[error("{field}: {reason}")]
    Invalid {
        /// Where.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// A code that is not in its list.
    #[error("{field}: {code} is not in SIFEN's list of {list}")]
    UnknownCode {
        /// Where.
        field: String,
        /// The code.
        code: String,
        /// Which list.
        list: &'static str,
    },
    /// An amount beyond `tMontoBase` (below 10^15, at most 8 decimals).
    #[error("{field} is beyond what SIFEN can carry")]
    OutOfRange {
        /// Where.
        field: String,
    },
    /// The CDC's parts do not fit.
    #[error(transparent)]
    Cdc(#[from] CdcError),
}

impl DeError {
    /// The intake issue that says the same (issue 25: what validation accepts, the builder
    /// builds): intake builds the DE of every `sifen` document before it is numbered, and a
    /// document it cannot build is refused with this issue rather than stuck in the pipeline.
    pub fn issue(&self) -> crate::document::issues::Issue {
        use crate::document::issues::{Issue, codes};
        let (field, code) = match self {
            Self::UnsupportedDocumentType(_) => ("type".to_owned(), codes::UNSUPPORTED_DOCUMENT_TYPE),
            Self::UnsupportedCurrency(_) => ("currency".to_owned(), codes::UNSUPPORTED_CURRENCY),
            Self::Missing { field, .. } => (field.clone(), codes::CONDITIONALLY_REQUIRED),
            Self::Invalid { field, .. } => (field.clone(), codes::INVALID_FOR_SIFEN),
            Self::UnknownCode { field, .. } => (field.clone(), codes::INVALID_CODE),
            Self::OutOfRange { field } => (field.clone(), codes::AMOUNT_OUT_OF_RANGE),
            Self::Cdc(_) => ("$".to_owned(), codes::INVALID_FOR_SIFEN),
        };
        Issue::new(field, code, self.to_string())
    }
}

fn missing(field: impl Into<String>, why: impl Into<String>) -> DeError {
    DeError::Missing {
        field: field.into(),
        why: why.into(),
    }
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> DeError {
    DeError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

fn unknown(field: impl Into<String>, code: impl std::fmt::Display, list: &'static str) -> DeError {
    DeError::UnknownCode {
        field: field.into(),
        code: code.to_string(),
        list,
    }
}

// ---------------------------------------------------------------------------------------------
// The writer.

/// Escapes text as Exclusive C14N writes it.
fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\r' => out.push_str("&#xD;"),
            c => out.push(c),
        }
    }
}

/// An XML string under construction; elements only, no attributes but `DE@Id`.
struct Xml {
    out: String,
}

impl Xml {
    fn open(&mut self, tag: &str) {
        self.out.push('<');
        self.out.push_str(tag);
        self.out.push('>');
    }

    fn close(&mut self, tag: &str) {
        self.out.push_str("</");
        self.out.push_str(tag);
        self.out.push('>');
    }

    /// `<tag>text</tag>`; `text` is never empty (callers check, or generate it).
    fn leaf(&mut self, tag: &str, text: &str) {
        debug_assert!(!text.is_empty(), "empty {tag}");
        self.open(tag);
        escape_into(&mut self.out, text);
        self.close(tag);
    }

    fn leaf_opt(&mut self, tag: &str, text: Option<&str>) {
        if let Some(text) = text {
            self.leaf(tag, text);
        }
    }

    fn num(&mut self, tag: &str, value: impl std::fmt::Display) {
        self.leaf(tag, &value.to_string());
    }
}

// ---------------------------------------------------------------------------------------------
// Checks of single values.

/// A text of `min..=max` characters after trimming, without control characters.
fn text<'v>(field: &str, value: &'v str, min: usize, max: usize) -> Result<&'v str, DeError> {
    let value = value.trim();
    if let Some(c) = value
        .chars()
        .find(|c| c.is_control() || matches!(c, '\u{FFFE}' | '\u{FFFF}'))
    {
        return Err(invalid(
            field,
            format!("control character {c:?} (line breaks and tabs included) is not allowed"),
        ));
    }
    let n = value.chars().count();
    if n < min || n > max {
        return Err(invalid(
            field,
            format!("must have {min} to {max} characters, not {n}"),
        ));
    }
    Ok(value)
}

fn opt_text<'v>(
    field: &str,
    value: Option<&'v str>,
    min: usize,
    max: usize,
) -> Result<Option<&'v str>, DeError> {
    value.map(|v| text(field, v, min, max)).transpose()
}

/// Exactly `n` digits.
fn digits<'v>(field: &str, value: &'v str, n: usize) -> Result<&'v str, DeError> {
    let value = value.trim();
    if value.len() == n && value.bytes().all(|b| b.is_ascii_digit()) {
        Ok(value)
    } else {
        Err(invalid(field, format!("must be {n} digits")))
    }
}

/// `tdNumTim`, `tdNumDoc`: `n` digits, not all zero.
fn document_digits<'v>(field: &str, value: &'v str, n: usize) -> Result<&'v str, DeError> {
    let value = digits(field, value, n)?;
    if value.bytes().all(|b| b == b'0') {
        return Err(invalid(field, "must not be all zeros"));
    }
    Ok(value)
}

/// A text of [`Length`] `length` ([`text`]).
fn text_of<'v>(field: &str, value: &'v str, length: Length) -> Result<&'v str, DeError> {
    text(field, value, length.min, length.max)
}

/// `tdNumCas`: up to six digits ([`facts::HOUSE_NUMBER`]), written as the integer.
fn house_number(field: &str, value: &str) -> Result<String, DeError> {
    let value = value.trim();
    let Length { min, max } = facts::HOUSE_NUMBER;
    if (min..=max).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_digit()) {
        let digits = value.trim_start_matches('0');
        Ok(if digits.is_empty() { "0" } else { digits }.to_owned())
    } else {
        Err(invalid(
            field,
            format!("must be {min} to {max} digits (0 when the house has no number)"),
        ))
    }
}

/// `tdNumDocId`: 1–20 letters, digits or dashes ([`facts::ID_NUMBER`]).
fn id_number<'v>(field: &str, value: &'v str) -> Result<&'v str, DeError> {
    let value = value.trim();
    let Length { min, max } = facts::ID_NUMBER;
    if (min..=max).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        Ok(value)
    } else {
        Err(invalid(
            field,
            format!("must be {min} to {max} letters, digits or dashes"),
        ))
    }
}

/// Whether `value` (blanks around aside) matches SIFEN's `tEmail`:
/// `[0-9a-zA-Z][0-9a-zA-Z.\-_]*@([0-9a-zA-Z][0-9a-zA-Z\-_]*\.)+[a-zA-Z]{2,9}`. Validation
/// refuses, at intake, what [`build_rde`] would refuse here.
pub fn is_sifen_email(value: &str) -> bool {
    let value = value.trim();
    let local_ok = |s: &str| {
        let mut bytes = s.bytes();
        bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
            && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    };
    let label_ok = |s: &str| {
        let mut bytes = s.bytes();
        bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
            && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
    };
    value.split_once('@').is_some_and(|(local, domain)| {
        let labels: Vec<&str> = domain.split('.').collect();
        local_ok(local)
            && labels.len() >= 2
            && labels.split_last().is_some_and(|(tld, rest)| {
                (2..=9).contains(&tld.len())
                    && tld.bytes().all(|b| b.is_ascii_alphabetic())
                    && rest.iter().all(|l| label_ok(l))
            })
    })
}

/// `tEmail` ([`is_sifen_email`]).
fn email<'v>(field: &str, value: &'v str) -> Result<&'v str, DeError> {
    let value = value.trim();
    if is_sifen_email(value) {
        Ok(value)
    } else {
        Err(invalid(
            field,
            format!("{value:?} is not an email address SIFEN accepts (tEmail)"),
        ))
    }
}

/// `tFecAAAAMMDDguion`: a date of the years 2000 to 9999.
fn date(field: &str, value: NaiveDate) -> Result<String, DeError> {
    if (2000..=9999).contains(&value.year()) {
        Ok(value.format("%Y-%m-%d").to_string())
    } else {
        Err(invalid(field, "the year must be 2000 to 9999"))
    }
}

fn date_time(field: &str, value: NaiveDateTime) -> Result<String, DeError> {
    if (2000..=9999).contains(&value.year()) {
        Ok(value.format("%Y-%m-%dT%H:%M:%S").to_string())
    } else {
        Err(invalid(field, "the year must be 2000 to 9999"))
    }
}

/// `tMontoBase` (or a narrower decimal type): `0 <= value < limit`, at most `scale` decimals;
/// written without exponent or trailing zeros.
fn decimal(field: &str, value: Decimal, limit: i64, scale: u32) -> Result<String, DeError> {
    let value = value.normalize();
    if value.is_sign_negative() && !value.is_zero() {
        return Err(invalid(field, "must not be negative"));
    }
    if value >= Decimal::from(limit) || value.scale() > scale {
        return Err(DeError::OutOfRange {
            field: field.to_owned(),
        });
    }
    // Normalising keeps the sign of a negative zero; SIFEN takes none.
    Ok(if value.is_zero() {
        "0".to_owned()
    } else {
        value.to_string()
    })
}

/// Amounts: below 10^15, at most 8 decimals (`tMontoBase`).
fn money(field: &str, value: Decimal) -> Result<String, DeError> {
    decimal(field, value, AMOUNT_LIMIT, MAX_DECIMALS)
}

// ---------------------------------------------------------------------------------------------
// The document.

/// Writes the unsigned `rDE` of `input.document`.
pub fn build_rde(input: &DeInput<'_>) -> Result<BuiltDe, DeError> {
    let doc = input.document;
    let issuer = input.issuer;
    let kind = Kind::of(doc.doc_type)?;
    if doc.currency != CURRENCY {
        return Err(DeError::UnsupportedCurrency(doc.currency.clone()));
    }
    if doc.items.is_empty() || doc.items.len() > facts::MAX_ITEMS {
        return Err(invalid(
            "items",
            format!("a DE has 1 to {} lines (gCamItem)", facts::MAX_ITEMS),
        ));
    }
    let code = digits("security_code", input.security_code, 9)?;
    if code.parse::<u64>().ok() == Some(input.number) {
        return Err(invalid(
            "security_code",
            "must differ from the document number (B004)",
        ));
    }
    let issued = local_time::paraguay(doc.issue_datetime.with_timezone(&Utc));
    let issued_at = date_time("issue_datetime", issued)?;
    let signed_at = date_time("signed_at", input.signed_at)?;
    if issued.date() < issuer.timbrado_valid_from {
        return Err(invalid(
            "issue_datetime",
            format!(
                "is before the timbrado's validity, which starts on {} (rule 1103)",
                issuer.timbrado_valid_from
            ),
        ));
    }
    let establishment = digits(
        "issuer.establishment",
        &issuer.establishment,
        ESTABLISHMENT_DIGITS,
    )?;
    let point = digits("issuer.point", &issuer.point, ESTABLISHMENT_DIGITS)?;
    let cdc = Cdc::build(&CdcParts {
        document_type: kind.code(),
        ruc: &issuer.ruc,
        establishment,
        point,
        number: input.number,
        taxpayer_type: issuer.taxpayer_code(),
        issue_date: issued.date(),
        emission_type: 1,
        security_code: code,
    })?;

    let lines = kind.priced().then(|| compute_lines(doc, kind)).transpose()?;
    let totals = lines.as_deref().map(totals).transpose()?;

    let mut xml = Xml {
        out: String::with_capacity(4096 + 1024 * doc.items.len()),
    };
    xml.out.push_str(RDE_OPEN);
    xml.out.push_str("<DE Id=\"");
    xml.out.push_str(cdc.as_str());
    xml.out.push_str("\">");
    xml.num("dDVId", cdc.check_digit());
    xml.leaf("dFecFirma", &signed_at);
    xml.leaf("dSisFact", "1");
    write_operation(&mut xml, kind, issuer, code)?;
    write_timbrado(&mut xml, kind, issuer, establishment, point, input.number)?;

    xml.open("gDatGralOpe");
    xml.leaf("dFeEmiDE", &issued_at);
    if kind != Kind::Remision {
        write_commercial(&mut xml, doc, kind)?;
    }
    write_issuer(&mut xml, issuer)?;
    let receiver = write_receiver(&mut xml, doc, kind, issuer)?;
    xml.close("gDatGralOpe");

    xml.open("gDtipDE");
    write_type_fields(&mut xml, doc, kind)?;
    if let Some(totals) = &totals
        && matches!(kind, Kind::Invoice | Kind::Autofactura)
    {
        write_payment(&mut xml, doc, issued.date(), &totals.grand)?;
    }
    write_items(&mut xml, doc, kind, lines.as_deref())?;
    // An invoice's transport is optional (E900); an empty object says nothing.
    if let Some(transport) = doc.transport.as_ref().filter(|t| !t.is_empty())
        && matches!(kind, Kind::Invoice | Kind::Remision)
    {
        let transport = Transport::check(transport)?;
        write_transport(&mut xml, doc, kind, &transport, issued.date(), issuer)?;
    } else if kind == Kind::Remision {
        return Err(missing(
            "transport",
            "a remisión carries its transport data (gTransp, rule 2100)",
        ));
    }
    xml.close("gDtipDE");

    let (total, total_iva) = match &totals {
        Some(t) => {
            write_totals(&mut xml, kind, t);
            let iva = if kind == Kind::Autofactura {
                "0".to_owned()
            } else {
                t.iva.clone()
            };
            (t.grand.clone(), iva)
        }
        None => ("0".to_owned(), "0".to_owned()),
    };
    write_associated(&mut xml, doc, kind, issuer)?;
    xml.out.push_str("</DE></rDE>");

    Ok(BuiltDe {
        cdc,
        xml: xml.out,
        issued_at,
        receiver,
        total,
        total_iva,
        item_count: doc.items.len(),
    })
}

/// The five SIFEN types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Invoice,
    Autofactura,
    CreditNote,
    DebitNote,
    Remision,
}

impl Kind {
    fn of(doc_type: DocumentType) -> Result<Self, DeError> {
        Ok(match doc_type {
            DocumentType::Invoice => Self::Invoice,
            DocumentType::Autofactura => Self::Autofactura,
            DocumentType::CreditNote => Self::CreditNote,
            DocumentType::DebitNote => Self::DebitNote,
            DocumentType::Remision => Self::Remision,
            DocumentType::Receipt => return Err(DeError::UnsupportedDocumentType("receipt")),
        })
    }

    /// `iTiDE`.
    fn code(self) -> u8 {
        match self {
            Self::Invoice => 1,
            Self::Autofactura => 4,
            Self::CreditNote => 5,
            Self::DebitNote => 6,
            Self::Remision => 7,
        }
    }

    /// `dDesTiDE`.
    fn description(self) -> &'static str {
        match self {
            Self::Invoice => "Factura electrónica",
            Self::Autofactura => "Autofactura electrónica",
            Self::CreditNote => "Nota de crédito electrónica",
            Self::DebitNote => "Nota de débito electrónica",
            Self::Remision => "Nota de remisión electrónica",
        }
    }

    /// Whether lines carry prices (gValorItem) and the document has totals (gTotSub).
    fn priced(self) -> bool {
        self != Self::Remision
    }

    /// Whether lines carry gCamIVA.
    fn taxed(self) -> bool {
        matches!(self, Self::Invoice | Self::CreditNote | Self::DebitNote)
    }
}
