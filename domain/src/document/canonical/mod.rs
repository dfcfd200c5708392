//! CanonicalDocumentV1 with its optional extensions, as typed
//! Rust. Unknown fields are refused at every level but `metadata`, so a typo never vanishes.
//! Money and quantities are exact decimals ([`Amount`]), parsed from the JSON number's own
//! digits (serde_json's `arbitrary_precision`), never through floating point.
//!
//! [`parse`] turns a request body into a document or the list of structural issues (JSON syntax,
//! types, unknown or missing fields, enum values, including the contract's single currency and
//! its three tax rates), each with a JSON path and a stable code. Business rules are in
//! [`super::validation`].

use chrono::{DateTime, FixedOffset, NaiveDate};
use rust_decimal::Decimal;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::issues::{Issue, codes};
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

// ---------------------------------------------------------------------------------------------
// The transport of a remisión (extension `transport`).

/// A value of the `transport` object as sent, and what it reads as when it is a `T`.
///
/// The `transport` object is read leniently: a key of the wrong type, or `null`, does not make the
/// document unparseable. On the `sifen` channel intake builds the DE, which refuses what `gTransp`
/// cannot carry and names the key at fault ([`crate::sifen::de`]); other channels keep the
/// transport as sent. The JSON value is kept, so the document serializes back exactly as it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Given<T> {
    /// The JSON value as sent (`null` included).
    sent: Value,
    /// `sent` read as a `T`; `None` when it is not one.
    value: Option<T>,
}

impl<T: FromJson> Given<T> {
    /// `sent`, read as a `T` where it is one.
    pub fn read(sent: Value) -> Self {
        let value = T::from_json(&sent);
        Self { sent, value }
    }
}

impl<T> Given<T> {
    /// The value, when what was sent is a `T`.
    pub fn value(&self) -> Option<&T> {
        self.value.as_ref()
    }

    /// The JSON value as sent.
    pub fn sent(&self) -> &Value {
        &self.sent
    }

    /// Whether `null` was sent.
    pub fn is_null(&self) -> bool {
        self.sent.is_null()
    }
}

/// A type a [`Given`] value reads as.
pub trait FromJson: Sized {
    /// The value `json` is, if it is one.
    fn from_json(json: &Value) -> Option<Self>;
}

impl FromJson for String {
    fn from_json(json: &Value) -> Option<Self> {
        json.as_str().map(str::to_owned)
    }
}

impl FromJson for u8 {
    fn from_json(json: &Value) -> Option<Self> {
        json.as_u64().and_then(|n| n.try_into().ok())
    }
}

impl FromJson for u32 {
    fn from_json(json: &Value) -> Option<Self> {
        json.as_u64().and_then(|n| n.try_into().ok())
    }
}

/// A date `YYYY-MM-DD`.
impl FromJson for NaiveDate {
    fn from_json(json: &Value) -> Option<Self> {
        NaiveDate::parse_from_str(json.as_str()?, "%Y-%m-%d").ok()
    }
}

/// Whose means of transport (`transport.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// `own`: the issuer's (iTipTrans 1).
    Own,
    /// `third_party`: someone else's (2).
    ThirdParty,
}

impl FromJson for TransportKind {
    fn from_json(json: &Value) -> Option<Self> {
        match json.as_str()? {
            "own" => Some(Self::Own),
            "third_party" => Some(Self::ThirdParty),
            _ => None,
        }
    }
}

/// The means of transport (`transport.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportMode {
    /// `land` (iModTrans 1, the default).
    Land,
    /// `river` (2).
    River,
    /// `air` (3).
    Air,
    /// `multimodal` (4).
    Multimodal,
}

impl FromJson for TransportMode {
    fn from_json(json: &Value) -> Option<Self> {
        match json.as_str()? {
            "land" => Some(Self::Land),
            "river" => Some(Self::River),
            "air" => Some(Self::Air),
            "multimodal" => Some(Self::Multimodal),
            _ => None,
        }
    }
}

/// The identity document of a carrier without RUC (`transport.carrier.document_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CarrierDocumentType {
    /// `ci`: cédula paraguaya.
    Ci,
    /// `passport`.
    Passport,
    /// `foreign_id`: foreign identity card.
    ForeignId,
    /// `residence_card`: carnet de residencia.
    ResidenceCard,
}

impl FromJson for CarrierDocumentType {
    fn from_json(json: &Value) -> Option<Self> {
        match json.as_str()? {
            "ci" => Some(Self::Ci),
            "passport" => Some(Self::Passport),
            "foreign_id" => Some(Self::ForeignId),
            "residence_card" => Some(Self::ResidenceCard),
            _ => None,
        }
    }
}

/// `key` of `map`, taken out and read.
fn take<T: FromJson>(map: &mut Map<String, Value>, key: &str) -> Option<Given<T>> {
    map.remove(key).map(Given::read)
}

/// `given`, put back in `map` as sent.
fn put<T>(map: &mut Map<String, Value>, key: &str, given: Option<Given<T>>) {
    if let Some(given) = given {
        map.insert(key.to_owned(), given.sent);
    }
}

/// The transport data of a remisión, optional on an invoice (extension `transport`; see
/// docs/sifen-channel.md, "The transport of a remisión"). Each key is `None` when absent; any
/// object parses (see [`Given`]), keys it does not know included, which are kept in `other`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Map<String, Value>", into = "Map<String, Value>")]
pub struct Transport {
    /// `kind`: `own` or `third_party`.
    pub kind: Option<Given<TransportKind>>,
    /// `mode`: `land`, `river`, `air` or `multimodal`.
    pub mode: Option<Given<TransportMode>>,
    /// `freight_payer`: who pays the freight, a code 1–5.
    pub freight_payer: Option<Given<u8>>,
    /// `responsible`: who issues the remisión, a code 1–5.
    pub responsible: Option<Given<u8>>,
    /// `distance_km`: the estimated kilometres.
    pub distance_km: Option<Given<u32>>,
    /// `invoice_date`: the date the invoice of a sale will be issued.
    pub invoice_date: Option<Given<NaiveDate>>,
    /// `start_date`: when the transport starts.
    pub start_date: Option<Given<NaiveDate>>,
    /// `end_date`: when it ends.
    pub end_date: Option<Given<NaiveDate>>,
    /// `vehicle`.
    pub vehicle: Option<Given<Vehicle>>,
    /// `carrier`.
    pub carrier: Option<Given<Carrier>>,
    /// The keys that are none of the above, as sent.
    pub other: Map<String, Value>,
}

impl Transport {
    /// The keys of the object, in the order a message lists them.
    pub const KEYS: &'static [&'static str] = &[
        "kind",
        "mode",
        "freight_payer",
        "responsible",
        "distance_km",
        "invoice_date",
        "start_date",
        "end_date",
        "vehicle",
        "carrier",
    ];

    /// Whether the object has no key at all (`{}`).
    pub fn is_empty(&self) -> bool {
        self.kind.is_none()
            && self.mode.is_none()
            && self.freight_payer.is_none()
            && self.responsible.is_none()
            && self.distance_km.is_none()
            && self.invoice_date.is_none()
            && self.start_date.is_none()
            && self.end_date.is_none()
            && self.vehicle.is_none()
            && self.carrier.is_none()
            && self.other.is_empty()
    }
}

impl From<Map<String, Value>> for Transport {
    fn from(mut map: Map<String, Value>) -> Self {
        Self {
            kind: take(&mut map, "kind"),
            mode: take(&mut map, "mode"),
            freight_payer: take(&mut map, "freight_payer"),
            responsible: take(&mut map, "responsible"),
            distance_km: take(&mut map, "distance_km"),
            invoice_date: take(&mut map, "invoice_date"),
            start_date: take(&mut map, "start_date"),
            end_date: take(&mut map, "end_date"),
            vehicle: take(&mut map, "vehicle"),
            carrier: take(&mut map, "carrier"),
            other: map,
        }
    }
}

impl From<Transport> for Map<String, Value> {
    fn from(t: Transport) -> Self {
        let mut map = t.other;
        put(&mut map, "kind", t.kind);
        put(&mut map, "mode", t.mode);
        put(&mut map, "freight_payer", t.freight_payer);
        put(&mut map, "responsible", t.responsible);
        put(&mut map, "distance_km", t.distance_km);
        put(&mut map, "invoice_date", t.invoice_date);
        put(&mut map, "start_date", t.start_date);
        put(&mut map, "end_date", t.end_date);
        put(&mut map, "vehicle", t.vehicle);
        put(&mut map, "carrier", t.carrier);
        map
    }
}

/// `transport.vehicle`: any object reads as one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vehicle {
    /// `type`: what vehicle it is.
    pub kind: Option<Given<String>>,
    /// `brand`.
    pub brand: Option<Given<String>>,
    /// `id`: its identification number.
    pub id: Option<Given<String>>,
    /// `plate`: its registration plate.
    pub plate: Option<Given<String>>,
    /// `flight`: the flight number (air transport).
    pub flight: Option<Given<String>>,
    /// The keys that are none of the above, as sent.
    pub other: Map<String, Value>,
}

impl Vehicle {
    /// The keys of the object, in the order a message lists them.
    pub const KEYS: &'static [&'static str] = &["type", "brand", "id", "plate", "flight"];
}

impl FromJson for Vehicle {
    fn from_json(json: &Value) -> Option<Self> {
        let mut map = json.as_object()?.clone();
        Some(Self {
            kind: take(&mut map, "type"),
            brand: take(&mut map, "brand"),
            id: take(&mut map, "id"),
            plate: take(&mut map, "plate"),
            flight: take(&mut map, "flight"),
            other: map,
        })
    }
}

/// `transport.carrier`: any object reads as one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Carrier {
    /// `name`.
    pub name: Option<Given<String>>,
    /// `ruc`, for a taxpayer.
    pub ruc: Option<Given<String>>,
    /// `document_type`, for anyone else.
    pub document_type: Option<Given<CarrierDocumentType>>,
    /// `document_number`, with `document_type`.
    pub document_number: Option<Given<String>>,
    /// `address`: the carrier's fiscal address.
    pub address: Option<Given<String>>,
    /// `driver_document`: the driver's identity document number.
    pub driver_document: Option<Given<String>>,
    /// `driver_name`.
    pub driver_name: Option<Given<String>>,
    /// `driver_address`.
    pub driver_address: Option<Given<String>>,
    /// The keys that are none of the above, as sent.
    pub other: Map<String, Value>,
}

impl Carrier {
    /// The keys of the object, in the order a message lists them.
    pub const KEYS: &'static [&'static str] = &[
        "name",
        "ruc",
        "document_type",
        "document_number",
        "address",
        "driver_document",
        "driver_name",
        "driver_address",
    ];
}

impl FromJson for Carrier {
    fn from_json(json: &Value) -> Option<Self> {
        let mut map = json.as_object()?.clone();
        Some(Self {
            name: take(&mut map, "name"),
            ruc: take(&mut map, "ruc"),
            document_type: take(&mut map, "document_type"),
            document_number: take(&mut map, "document_number"),
            address: take(&mut map, "address"),
            driver_document: take(&mut map, "driver_document"),
            driver_name: take(&mut map, "driver_name"),
            driver_address: take(&mut map, "driver_address"),
            other: map,
        })
    }
}

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
mod form {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn codes_of(result: Result<CanonicalDocument, Vec<Issue>>) -> Vec<(String, String)> {
        result
            .expect_err("refused")
            .into_iter()
            .map(|i| (i.field, i.code))
            .collect()
    }

    fn with(path: &[&str], value: Value) -> Value {
        let mut doc = sample_invoice();
        let mut slot = &mut doc;
        for key in path {
            slot = match key.parse::<usize>() {
                Ok(i) => &mut slot[i],
                Err(_) => &mut slot[*key],
            };
        }
        *slot = value;
        doc
    }

    #[test]
    fn the_sample_parses_and_round_trips_digit_for_digit() {
        let doc = from_value(sample_invoice()).expect("valid");
        assert_eq!(doc.items.len(), 2);
        assert_eq!(doc.items[1].tax_amount, Amount::from(2619));
        let again = serde_json::to_value(&doc).expect("json");
        assert_eq!(again["items"][1]["unit_price"], serde_json::json!(27500));
        let exact = parse(br#"{"x": 0}"#);
        assert!(exact.is_err());
        let tenth = with(
            &["items", "0", "quantity"],
            serde_json::from_str("0.1").expect("n"),
        );
        let doc = from_value(tenth).expect("valid");
        assert_eq!(doc.items[0].quantity.get().to_string(), "0.1");
        assert_eq!(
            (doc.items[0].quantity.get() * Decimal::from(3)).to_string(),
            "0.3",
            "exact decimals, not binary floating point"
        );
    }

    #[test]
    fn structural_problems_name_their_path_and_code() {
        assert_eq!(
            codes_of(parse(b"{not json")),
            vec![("$".to_owned(), "malformed_json".to_owned())]
        );
        assert_eq!(
            codes_of(from_value(with(
                &["items", "1", "tax_ratee"],
                serde_json::json!(5)
            ))),
            vec![("items[1].tax_ratee".to_owned(), "unknown_field".to_owned())]
        );
        assert_eq!(
            codes_of(from_value(with(&["type"], serde_json::json!("factura")))),
            vec![("type".to_owned(), "invalid_enum".to_owned())]
        );
        assert_eq!(
            codes_of(from_value(with(
                &["items", "0", "unit_price"],
                serde_json::json!("110000")
            ))),
            vec![("items[0].unit_price".to_owned(), "invalid_type".to_owned())]
        );
        assert_eq!(
            codes_of(from_value(with(
                &["issue_datetime"],
                serde_json::json!("2026-03-02T10:15:00")
            ))),
            vec![("issue_datetime".to_owned(), "invalid_format".to_owned())]
        );
        let issues = from_value(with(
            &["issue_datetime"],
            serde_json::json!("2026-11-26T10:15:00"),
        ))
        .expect_err("no offset");
        assert!(
            issues[0].message.contains("no UTC offset")
                && issues[0].message.contains("2026-11-26T10:15:00-03:00"),
            "{issues:?}"
        );
        let issues = from_value(with(
            &["payment_terms", "due_date"],
            serde_json::json!("26/11/2026"),
        ))
        .expect_err("not a date");
        assert_eq!(issues[0].field, "payment_terms.due_date");
        assert_eq!(issues[0].code, "invalid_format");
        assert!(issues[0].message.contains("2026-11-26"), "{issues:?}");
        let mut missing = sample_invoice();
        missing.as_object_mut().expect("object").remove("totals");
        assert_eq!(
            codes_of(from_value(missing)),
            vec![("$".to_owned(), "required".to_owned())]
        );
    }

    #[test]
    fn only_pyg_and_the_three_tax_rates_are_accepted() {
        let doc = with(&["currency"], serde_json::json!("USD"));
        let doc = {
            let mut d = doc;
            d["items"][0]["tax_rate"] = serde_json::json!(7);
            d
        };
        assert_eq!(
            codes_of(from_value(doc)),
            vec![
                ("currency".to_owned(), "unsupported_currency".to_owned()),
                ("items[0].tax_rate".to_owned(), "invalid_tax_rate".to_owned())
            ]
        );
    }
    #[test]
    fn any_transport_object_parses_into_its_keys_and_serializes_back_as_sent() {
        let sent = serde_json::json!({"kind": "own", "mode": "boat", "freight_payer": 2,
            "responsible": null, "distance_km": "12", "invoice_date": "2026-3-5",
            "vehicle": {"type": "Camión", "colour": "red"}, "carrier": 5, "zz": [1]});
        let doc = from_value(with(&["transport"], sent.clone())).expect("any object parses");
        let t = doc.transport.as_ref().expect("transport");
        assert_eq!(t.kind.as_ref().and_then(Given::value), Some(&TransportKind::Own));
        assert!(
            t.mode
                .as_ref()
                .is_some_and(|g| g.value().is_none() && g.sent() == "boat")
        );
        assert_eq!(t.freight_payer.as_ref().and_then(Given::value), Some(&2));
        assert!(t.responsible.as_ref().is_some_and(Given::is_null));
        assert!(t.distance_km.as_ref().is_some_and(|g| g.value().is_none()));
        assert_eq!(
            t.invoice_date.as_ref().and_then(Given::value),
            NaiveDate::from_ymd_opt(2026, 3, 5).as_ref()
        );
        let vehicle = t.vehicle.as_ref().and_then(Given::value).expect("an object");
        assert_eq!(
            vehicle.kind.as_ref().and_then(Given::value).map(String::as_str),
            Some("Camión")
        );
        assert_eq!(vehicle.other.keys().collect::<Vec<_>>(), ["colour"]);
        assert!(t.carrier.as_ref().is_some_and(|g| g.value().is_none()));
        assert_eq!(t.other.keys().collect::<Vec<_>>(), ["zz"]);
        assert!(!t.is_empty());
        assert_eq!(serde_json::to_value(&doc).expect("json")["transport"], sent);
        let empty = from_value(with(&["transport"], serde_json::json!({}))).expect("valid");
        assert!(empty.transport.as_ref().is_some_and(Transport::is_empty));
        assert_eq!(
            codes_of(from_value(with(&["transport"], serde_json::json!("x")))),
            vec![("transport".to_owned(), "invalid_type".to_owned())]
        );
    }

    #[test]
    fn parties_may_name_their_city() {
        let doc = from_value(with(
            &["buyer", "city_name"],
            serde_json::json!("CIUDAD DEL ESTE"),
        ))
        .expect("valid");
        let buyer = doc.buyer.expect("buyer");
        assert_eq!(buyer.city_name.as_deref(), Some("CIUDAD DEL ESTE"));
        let doc = from_value(with(&["seller", "city_name"], serde_json::json!("LUQUE"))).expect("valid");
        assert_eq!(doc.seller.city_name.as_deref(), Some("LUQUE"));
        assert_eq!(
            codes_of(from_value(with(&["buyer", "city_name"], serde_json::json!(182)))),
            vec![("buyer.city_name".to_owned(), "invalid_type".to_owned())]
        );
    }
}
