//! CanonicalDocumentV1 with its optional extensions, as typed
//! Rust. Unknown fields are refused at every level but `metadata`, so a typo never vanishes.
//! Money and quantities are exact decimals ([`Amount`]), parsed from the JSON number's own
//! digits (serde_json's `arbitrary_precision`), never through floating point.
//!
//! [`parse`] turns a request body into a document or the list of structural issues (JSON syntax,
//! types, unknown or missing fields, enum values, including the contract's single currency and
//! its three tax rates), each with a JSON path and a stable code. Business rules are in
//! [`super::validation`].
//!
//! Here: the document's types. Beside: `parse.rs` (body → document or issues, defaults, date
//! forms), `transport.rs` (the remisión's lenient `transport` extension), `tests.rs`.

use chrono::{DateTime, FixedOffset, NaiveDate};
use rust_decimal::Decimal;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::channel::ChannelKind;

/// An exact decimal: money (guaraníes), quantities, rates. JSON: a number, kept digit for digit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Amount(pub Decimal);

impl Amount {
    /// The decimal.
    pub fn get(self) -> Decimal {
        self.0
    }
}

impl From<Decimal> for Amount {
    fn from(d: Decimal) -> Self {
        Self(d)
    }
}

impl From<i64> for Amount {
    fn from(v: i64) -> Self {
        Self(Decimal::from(v))
    }
}

impl std::fmt::Display for Amount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.normalize().fmt(f)
    }
}

impl Serialize for Amount {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        rust_decimal::serde::arbitrary_precision::serialize(&self.0.normalize(), serializer)
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Only JSON numbers: a string "100" is a type error, as the contract's schema says.
        let value = Value::deserialize(deserializer)?;
        match value {
            Value::Number(n) => n
                .as_str()
                .parse::<Decimal>()
                .or_else(|_| Decimal::from_scientific(n.as_str()))
                .map(Self)
                .map_err(|_| {
                    serde::de::Error::custom(format!(
                        "invalid type: number {n} is out of range, expected a decimal number"
                    ))
                }),
            other => Err(serde::de::Error::custom(format!(
                "invalid type: {}, expected a number",
                kind_of(&other)
            ))),
        }
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Document types of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DocumentType {
    /// Factura electrónica (iTiDE 1).
    Invoice,
    /// Nota de crédito electrónica (5).
    CreditNote,
    /// Nota de débito electrónica (6).
    DebitNote,
    /// Nota de remisión electrónica (7).
    Remision,
    /// A receipt: not a SIFEN document; autoimpresor only.
    Receipt,
    /// Autofactura electrónica (4).
    Autofactura,
}

impl DocumentType {
    /// The contract's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Invoice => "invoice",
            Self::CreditNote => "credit_note",
            Self::DebitNote => "debit_note",
            Self::Remision => "remision",
            Self::Receipt => "receipt",
            Self::Autofactura => "autofactura",
        }
    }

    /// SIFEN's iTiDE, when the type is a SIFEN document.
    pub fn sifen_code(self) -> Option<u8> {
        match self {
            Self::Invoice => Some(1),
            Self::Autofactura => Some(4),
            Self::CreditNote => Some(5),
            Self::DebitNote => Some(6),
            Self::Remision => Some(7),
            Self::Receipt => None,
        }
    }
}

/// `operation_type` of a party.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OperationType {
    /// Business to business (iTiOpe 1).
    B2b,
    /// Business to consumer (2).
    B2c,
    /// A foreign buyer (4, B2F).
    Foreign,
    /// An unnamed consumer (innominado).
    Anonymous,
}

/// `document_type` of a party.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum IdDocumentType {
    /// A RUC (taxpayer).
    Ruc,
    /// Cédula paraguaya.
    Ci,
    /// Passport.
    Passport,
    /// Foreign identity card.
    ForeignId,
    /// Diplomatic card.
    DiplomaticCard,
    /// Unnamed.
    Innominado,
    /// Something else.
    Other,
}

/// Person or legal entity (extension `buyer.taxpayer_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum PartyTaxpayerType {
    /// A natural person.
    Individual,
    /// A legal entity.
    LegalEntity,
}

/// A seller or buyer (all optional, plus the buyer extensions).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Party {
    /// RUC, `NNNNNNNN-D`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ruc: Option<String>,
    /// Legal name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub legal_name: Option<String>,
    /// Trade name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trade_name: Option<String>,
    /// Email.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// b2b, b2c, foreign, anonymous.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation_type: Option<OperationType>,
    /// Kind of identity document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document_type: Option<IdDocumentType>,
    /// Its number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document_number: Option<String>,
    /// Extension: person or legal entity (default: from the RUC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taxpayer_type: Option<PartyTaxpayerType>,
    /// Extension: street address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Extension: house number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub house_number: Option<String>,
    /// Extension: city code of SET's geographic table (`vendor/sifen/geography`; Asunción 1,
    /// Luque 5946); on sifen, unknown is `unknown_city_code`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub city_code: Option<u32>,
    /// Extension, optional: the name of `city_code` in SET's geographic table (1–30 characters;
    /// case, accents and extra blanks do not count). The SIFEN document always carries the
    /// table's exact name (`dDesCiuRec`, `dDesCiuVen`); on sifen another name is
    /// `city_name_mismatch`, whose message names the table's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub city_name: Option<String>,
    /// Extension: department code, the city's in SET's geographic table (Central 12); on sifen
    /// another is `city_department_mismatch`, whose message names the city's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub department_code: Option<u16>,
    /// Extension: ISO 3166 alpha-3 country (default PRY; required for `foreign`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
}

/// `items[].exemption` for tax rate 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Exemption {
    /// Exento (iAfecIVA 3).
    Exempt,
    /// Exonerado (iAfecIVA 2).
    Exonerated,
}

/// A line (all required, plus extensions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Item {
    /// Description.
    pub description: String,
    /// Quantity.
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub quantity: Amount,
    /// Unit price, IVA included.
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub unit_price: Amount,
    /// 0, 5 or 10.
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub tax_rate: Amount,
    /// IVA included in `total_amount`.
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub tax_amount: Amount,
    /// quantity × unit_price.
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub total_amount: Amount,
    /// Extension: the seller's item code (default: the line number).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Extension: SIFEN unit code (default 77, "UNI").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<u16>,
    /// Extension: for tax rate 0, exempt (default) or exonerated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exemption: Option<Exemption>,
}

/// Totals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Totals {
    /// grand_total − tax_total.
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub subtotal: Amount,
    /// Σ tax_amount.
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub tax_total: Amount,
    /// Σ total_amount.
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub grand_total: Amount,
}

/// cash or credit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum PaymentCondition {
    /// Contado.
    Cash,
    /// Crédito.
    Credit,
}

/// How it is paid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum PaymentMethod {
    /// Efectivo.
    Cash,
    /// Tarjeta.
    Card,
    /// Transferencia.
    BankTransfer,
    /// Cheque.
    Check,
    /// Otro.
    Other,
}

/// An installment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Installment {
    /// When.
    #[serde(deserialize_with = "form::date")]
    pub due_date: NaiveDate,
    /// How much.
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub amount: Amount,
}

/// Card kind (extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CardKind {
    /// Tarjeta de crédito.
    Credit,
    /// Tarjeta de débito.
    Debit,
}

/// `payment_terms.card` (extension).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Card {
    /// Brand (visa, mastercard, american_express, maestro, panal, cabal, other).
    pub brand: String,
    /// Credit or debit.
    pub kind: CardKind,
}

/// `payment_terms.check` (extension): a cheque (its schema keeps the wire name `Check`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = Check))]
#[serde(deny_unknown_fields)]
pub struct Cheque {
    /// Cheque number.
    pub number: String,
    /// Issuing bank.
    pub bank: String,
}

/// Payment terms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PaymentTerms {
    /// cash or credit.
    pub condition: PaymentCondition,
    /// Method.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<PaymentMethod>,
    /// Due date (credit).
    #[serde(default, deserialize_with = "form::optional_date")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due_date: Option<NaiveDate>,
    /// Installments (credit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub installments: Option<Vec<Installment>>,
    /// Extension: card details.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub card: Option<Card>,
    /// Extension: cheque details.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<Cheque>,
}

/// manual or automatic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DeliveryMode {
    /// The issuer delivers from the console.
    Manual,
    /// The service delivers through the channels.
    Automatic,
}

/// A delivery channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DeliveryChannel {
    /// Email.
    Email,
    /// WhatsApp.
    Whatsapp,
    /// Telegram.
    Telegram,
    /// The issuer's webhooks (issuer only).
    Webhook,
}

/// `delivery.customer`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CustomerDelivery {
    /// Mode.
    pub mode: DeliveryMode,
    /// email, whatsapp, telegram.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channels: Option<Vec<DeliveryChannel>>,
    /// Email.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// Phone (WhatsApp).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phone: Option<String>,
    /// Telegram chat.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub telegram_chat_id: Option<String>,
}

/// `delivery.issuer`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct IssuerDelivery {
    /// Mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<DeliveryMode>,
    /// email, whatsapp, telegram, webhook.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channels: Option<Vec<DeliveryChannel>>,
    /// Emails.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emails: Option<Vec<String>>,
    /// Notify the issuer's webhooks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook: Option<bool>,
}

/// Delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Delivery {
    /// To the customer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub customer: Option<CustomerDelivery>,
    /// To the issuer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<IssuerDelivery>,
}

/// `associated_document` (extension; credit and debit notes, autofactura): an electronic
/// document by CDC, a printed one by its numbers, or (autofactura) a constancia.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AssociatedDocument {
    /// Extension: one of the tenant's own documents, by its id; intake fills `cdc` from it
    /// (the document must be one SIFEN approved).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document_id: Option<Uuid>,
    /// CDC of an electronic document (44 digits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cdc: Option<String>,
    /// Timbrado of a printed document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timbrado: Option<String>,
    /// Establishment (3 digits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub establishment: Option<String>,
    /// Issuance point (3 digits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub point: Option<String>,
    /// Number (7 digits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub number: Option<String>,
    /// Issue date.
    #[serde(default, deserialize_with = "form::optional_date")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_date: Option<NaiveDate>,
    /// Autofactura: constancia type (1 no taxpayer, 2 microproducer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constancia_type: Option<u8>,
    /// Autofactura: constancia number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constancia_number: Option<String>,
    /// Autofactura: constancia control code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constancia_control: Option<String>,
}

/// The document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CanonicalDocument {
    /// The company (optional with a company-scoped key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub company_id: Option<Uuid>,
    /// Branch (default resolution when omitted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch_id: Option<Uuid>,
    /// Issuance point (default resolution when omitted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuance_point_id: Option<Uuid>,
    /// Channel (default resolution when omitted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<ChannelKind>,
    /// The caller's id.
    pub external_id: String,
    /// Document type.
    #[serde(rename = "type")]
    pub doc_type: DocumentType,
    /// With its UTC offset: `2026-11-26T10:15:00-03:00` (RFC 3339).
    #[serde(deserialize_with = "form::date_time")]
    pub issue_datetime: DateTime<FixedOffset>,
    /// `PYG` (anything else is refused as `unsupported_currency`).
    pub currency: String,
    /// Seller.
    pub seller: Party,
    /// Buyer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buyer: Option<Party>,
    /// Lines.
    pub items: Vec<Item>,
    /// Totals.
    pub totals: Totals,
    /// Payment terms.
    pub payment_terms: PaymentTerms,
    /// Delivery.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<Delivery>,
    /// Free-form.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<Map<String, Value>>,
    /// Extension: the document a note or autofactura refers to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub associated_document: Option<AssociatedDocument>,
    /// Extension: motive code (iMotEmi for notes, iMotEmiNR for remisión).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<u8>,
    /// Extension: transport data of a remisión: `kind`, `mode`, `freight_payer`, `responsible`,
    /// `distance_km`, `invoice_date` (the future invoice's date, rule 2605), `start_date`,
    /// `end_date`, `vehicle`, `carrier` (docs/sifen-channel.md, "The transport of a remisión").
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub transport: Option<Transport>,
    /// Extension: iIndPres (default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence: Option<u8>,
    /// Extension: iTipTra (default 1 goods, 2 services).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transaction_type: Option<u8>,
}

/// The only currency of the formal schema: the guaraní.
pub const CURRENCY: &str = crate::sifen::facts::CURRENCY;

mod parse;
mod transport;

use parse::form;
pub use parse::{
    DATE_FORM, DATE_TIME_FORM, apply_defaults, date_problem, date_time_problem, from_value, parse,
    sample_invoice,
};
pub use transport::{
    Carrier, CarrierDocumentType, FromJson, Given, Transport, TransportKind, TransportMode, Vehicle,
};

#[cfg(test)]
mod tests;
