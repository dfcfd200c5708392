//! The transport of a remisión (extension `transport`), read leniently: each key keeps the JSON
//! value as sent beside what it reads as.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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
