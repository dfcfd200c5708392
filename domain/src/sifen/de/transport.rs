//! `gTransp`: the transport of a remisión (or of an invoice that carries it), from the canonical
//! `transport` object.

use super::*;

/// The canonical `transport` ([`canonical::Transport`]), checked against what `gTransp` takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Transport {
    /// `kind`: "own" (1) or "third_party" (2) → iTipTrans.
    pub(super) kind: Option<u8>,
    /// `mode`: "land" (default), "river", "air", "multimodal" → iModTrans.
    pub(super) mode: u8,
    /// `freight_payer`: iRespFlete 1–5, default 1 (the invoice's issuer).
    pub(super) freight_payer: u8,
    /// `responsible`: iRespEmiNR 1–5, default 1 (the invoice's issuer).
    pub(super) responsible: u8,
    /// `distance_km`: dKmR, 1–99999 (remisión).
    pub(super) distance_km: Option<u32>,
    /// `invoice_date`: dFecEm, the date the invoice of a sale will be issued (remisión).
    pub(super) invoice_date: Option<NaiveDate>,
    /// `start_date` (dIniTras), default the issue date on a remisión.
    pub(super) start: Option<NaiveDate>,
    /// `end_date` (dFinTras), default the start.
    pub(super) end: Option<NaiveDate>,
    pub(super) vehicle: Option<Vehicle>,
    pub(super) carrier: Option<Carrier>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Vehicle {
    /// `type` (dTiVehTras, 4–10).
    pub(super) kind: String,
    /// `brand` (dMarVeh, 1–10).
    pub(super) brand: String,
    /// `id` (dNroIDVeh, 1–20): identification number.
    pub(super) id: Option<String>,
    /// `plate` (dNroMatVeh, 1–7).
    pub(super) plate: Option<String>,
    /// `flight` (dNroVuelo, 6): air transport only.
    pub(super) flight: Option<String>,
}

/// A taxpayer carrier by RUC, anyone else by identity document (code, description, number).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CarrierIdentity {
    Ruc(Ruc),
    Document(u8, &'static str, String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Carrier {
    /// `name` (dNomTrans, 4–60).
    pub(super) name: String,
    /// `ruc`, or `document_type` and `document_number`.
    pub(super) identity: CarrierIdentity,
    /// `address`: dDomFisc (1–150).
    pub(super) address: String,
    /// `driver_document`: dNumIDChof.
    pub(super) driver_document: String,
    /// `driver_name`: dNomChof (4–60).
    pub(super) driver_name: String,
    /// `driver_address`: dDirChof (1–255).
    pub(super) driver_address: String,
}

/// A key that was sent with a value other than `null`.
pub(super) fn present<T>(given: &Option<Given<T>>) -> Option<&Given<T>> {
    given.as_ref().filter(|g| !g.is_null())
}

/// The text sent at `field`.
pub(super) fn str_of<'v, T>(field: &str, given: &'v Given<T>) -> Result<&'v str, DeError> {
    given
        .sent()
        .as_str()
        .ok_or_else(|| invalid(field, "must be a string"))
}

/// The text sent at `field` when one was sent (`null` is none).
pub(super) fn string<'v, T>(field: &str, given: &'v Option<Given<T>>) -> Result<Option<&'v str>, DeError> {
    present(given).map(|g| str_of(field, g)).transpose()
}

pub(super) fn code_of<C: Copy + Into<u64>>(
    field: &str,
    given: &Given<C>,
    range: std::ops::RangeInclusive<u64>,
) -> Result<C, DeError> {
    given
        .value()
        .copied()
        .filter(|v| range.contains(&(*v).into()))
        .ok_or_else(|| {
            invalid(
                field,
                format!("must be a whole number from {} to {}", range.start(), range.end()),
            )
        })
}

pub(super) fn date_of(field: &str, given: &Given<NaiveDate>) -> Result<NaiveDate, DeError> {
    str_of(field, given)?;
    given
        .value()
        .copied()
        .ok_or_else(|| invalid(field, "must be a date, YYYY-MM-DD"))
}

/// The first key of `other` (the keys `known` does not list), refused.
pub(super) fn refuse_unknown(
    prefix: &str,
    other: &Map<String, Value>,
    known: &[&str],
) -> Result<(), DeError> {
    match other.keys().next() {
        Some(key) => Err(invalid(
            format!("{prefix}.{key}"),
            format!("unknown field; known fields are {}", known.join(", ")),
        )),
        None => Ok(()),
    }
}

impl Transport {
    pub(super) fn check(t: &canonical::Transport) -> Result<Self, DeError> {
        refuse_unknown("transport", &t.other, canonical::Transport::KEYS)?;
        let kind = present(&t.kind)
            .map(|g| {
                str_of("transport.kind", g)?;
                match g.value() {
                    Some(TransportKind::Own) => Ok(1),
                    Some(TransportKind::ThirdParty) => Ok(2),
                    None => Err(invalid("transport.kind", "must be own or third_party")),
                }
            })
            .transpose()?;
        let mode = present(&t.mode)
            .map(|g| {
                str_of("transport.mode", g)?;
                match g.value() {
                    Some(TransportMode::Land) => Ok(1),
                    Some(TransportMode::River) => Ok(2),
                    Some(TransportMode::Air) => Ok(3),
                    Some(TransportMode::Multimodal) => Ok(4),
                    None => Err(invalid(
                        "transport.mode",
                        "must be land, river, air or multimodal",
                    )),
                }
            })
            .transpose()?
            .unwrap_or(1);
        let small = |given: &Option<Given<u8>>, field: &str| -> Result<u8, DeError> {
            present(given)
                .map(|g| code_of(field, g, 1..=5))
                .transpose()
                .map(|c| c.unwrap_or(1))
        };
        let vehicle = present(&t.vehicle).map(|v| Vehicle::check(v, mode)).transpose()?;
        if mode == 3 && vehicle.as_ref().is_some_and(|v| v.flight.is_none()) {
            return Err(missing(
                "transport.vehicle.flight",
                "air transport names its flight (dNroVuelo)",
            ));
        }
        Ok(Self {
            kind,
            mode,
            freight_payer: small(&t.freight_payer, "transport.freight_payer")?,
            responsible: small(&t.responsible, "transport.responsible")?,
            distance_km: present(&t.distance_km)
                .map(|g| code_of("transport.distance_km", g, 1..=99_999))
                .transpose()?,
            invoice_date: present(&t.invoice_date)
                .map(|g| date_of("transport.invoice_date", g))
                .transpose()?,
            start: present(&t.start_date)
                .map(|g| date_of("transport.start_date", g))
                .transpose()?,
            end: present(&t.end_date)
                .map(|g| date_of("transport.end_date", g))
                .transpose()?,
            vehicle,
            carrier: present(&t.carrier).map(Carrier::check).transpose()?,
        })
    }
}

impl Vehicle {
    pub(super) fn check(given: &Given<canonical::Vehicle>, mode: u8) -> Result<Self, DeError> {
        const P: &str = "transport.vehicle";
        let v = given.value().ok_or_else(|| invalid(P, "must be an object"))?;
        refuse_unknown(P, &v.other, canonical::Vehicle::KEYS)?;
        // `null` is no value for the optional keys, and not a text for the required ones.
        let req =
            |given: &Option<Given<String>>, key: &str, min: usize, max: usize| -> Result<String, DeError> {
                let field = format!("{P}.{key}");
                let g = given
                    .as_ref()
                    .ok_or_else(|| missing(&field, "a vehicle has its type and brand (gVehTras)"))?;
                Ok(text(&field, str_of(&field, g)?, min, max)?.to_owned())
            };
        let opt = |given: &Option<Given<String>>,
                   key: &str,
                   min: usize,
                   max: usize|
         -> Result<Option<String>, DeError> {
            let field = format!("{P}.{key}");
            string(&field, given)?
                .map(|s| Ok(text(&field, s, min, max)?.to_owned()))
                .transpose()
        };
        let id = opt(&v.id, "id", 1, 20)?;
        let plate = opt(&v.plate, "plate", 1, 7)?;
        if id.is_none() && plate.is_none() {
            return Err(missing(
                format!("{P}.plate"),
                "a vehicle is identified by its plate or its identification number (dTipIdenVeh)",
            ));
        }
        let flight = opt(&v.flight, "flight", 6, 6)?;
        if flight.is_some() && mode != 3 {
            return Err(invalid(format!("{P}.flight"), "only air transport has a flight"));
        }
        Ok(Self {
            kind: req(&v.kind, "type", 4, 10)?,
            brand: req(&v.brand, "brand", 1, 10)?,
            id,
            plate,
            flight,
        })
    }
}

impl Carrier {
    pub(super) fn check(given: &Given<canonical::Carrier>) -> Result<Self, DeError> {
        const P: &str = "transport.carrier";
        let c = given.value().ok_or_else(|| invalid(P, "must be an object"))?;
        refuse_unknown(P, &c.other, canonical::Carrier::KEYS)?;
        let why = "a carrier has name, address and driver (gCamTrans)";
        let field = |key: &str| format!("{P}.{key}");
        let req =
            |given: &Option<Given<String>>, key: &str, min: usize, max: usize| -> Result<String, DeError> {
                let field = field(key);
                let v = string(&field, given)?.ok_or_else(|| missing(&field, why))?;
                Ok(text(&field, v, min, max)?.to_owned())
            };
        let ruc = string(&field("ruc"), &c.ruc)?
            .map(|r| Ruc::parse(r).map_err(|e| invalid(field("ruc"), e.to_string())))
            .transpose()?;
        let identity = if let Some(ruc) = ruc {
            if string(&field("document_type"), &c.document_type)?.is_some()
                || string(&field("document_number"), &c.document_number)?.is_some()
            {
                return Err(invalid(
                    field("document_type"),
                    "a carrier with a RUC is identified by it (E985)",
                ));
            }
            CarrierIdentity::Ruc(ruc)
        } else {
            let why = "a carrier without RUC is identified by a document (E985)";
            let kind = match string(&field("document_type"), &c.document_type)? {
                Some(_) => match c.document_type.as_ref().and_then(Given::value) {
                    Some(CarrierDocumentType::Ci) => (1, "Cédula paraguaya"),
                    Some(CarrierDocumentType::Passport) => (2, "Pasaporte"),
                    Some(CarrierDocumentType::ForeignId) => (3, "Cédula extranjera"),
                    Some(CarrierDocumentType::ResidenceCard) => (4, "Carnet de residencia"),
                    None => {
                        return Err(invalid(
                            field("document_type"),
                            "must be ci, passport, foreign_id or residence_card",
                        ));
                    }
                },
                None => return Err(missing(field("document_type"), why)),
            };
            let number_field = field("document_number");
            let number =
                string(&number_field, &c.document_number)?.ok_or_else(|| missing(&number_field, why))?;
            CarrierIdentity::Document(kind.0, kind.1, id_number(&number_field, number)?.to_owned())
        };
        let driver_field = field("driver_document");
        let driver_document =
            string(&driver_field, &c.driver_document)?.ok_or_else(|| missing(&driver_field, why))?;
        Ok(Self {
            name: req(&c.name, "name", 4, 60)?,
            identity,
            address: req(&c.address, "address", 1, 150)?,
            driver_document: id_number(&driver_field, driver_document)?.to_owned(),
            driver_name: req(&c.driver_name, "driver_name", 4, 60)?,
            driver_address: req(&c.driver_address, "driver_address", 1, 255)?,
        })
    }
}

pub(super) fn write_transport(
    xml: &mut Xml,
    doc: &CanonicalDocument,
    kind: Kind,
    t: &Transport,
    issued: NaiveDate,
    issuer: &Issuer,
) -> Result<(), DeError> {
    let remision = kind == Kind::Remision;
    let start = match (t.start, remision) {
        (Some(start), _) => Some(start),
        (None, true) => Some(issued),
        (None, false) => None,
    };
    let end = t.end.or(start);
    if let (Some(s), Some(e)) = (start, end)
        && e < s
    {
        return Err(invalid("transport.end_date", "must not be before start_date"));
    }
    if t.end.is_some() && start.is_none() {
        return Err(missing(
            "transport.start_date",
            "an end date comes with its start (E910)",
        ));
    }
    let delivery = doc
        .buyer
        .as_ref()
        .filter(|b| operation_type(b) != OperationType::Foreign)
        .map(|b| party_address("buyer", b))
        .transpose()?
        .flatten();
    if remision {
        if t.kind.is_none() {
            return Err(missing(
                "transport.kind",
                "a remisión says whose transport it is (iTipTrans)",
            ));
        }
        if delivery.is_none() {
            return Err(missing(
                "buyer.address",
                "a remisión names where the goods go (gCamEnt)",
            ));
        }
        if t.vehicle.is_none() {
            return Err(missing(
                "transport.vehicle",
                "a remisión names its vehicle (gVehTras)",
            ));
        }
        let carrier_optional = t.mode == 1 && t.vehicle.as_ref().is_some_and(|v| v.id.is_some());
        if t.carrier.is_none() && !carrier_optional {
            return Err(missing(
                "transport.carrier",
                "a remisión names its carrier (gCamTrans)",
            ));
        }
    }
    xml.open("gTransp");
    if let Some(k) = t.kind {
        xml.num("iTipTrans", k);
        xml.leaf("dDesTipTrans", if k == 1 { "Propio" } else { "Tercero" });
    }
    xml.num("iModTrans", t.mode);
    let mode = match t.mode {
        1 => "Terrestre",
        2 => "Fluvial",
        3 => "Aéreo",
        _ => "Multimodal",
    };
    xml.leaf("dDesModTrans", mode);
    xml.num("iRespFlete", t.freight_payer);
    if let Some(start) = start {
        if start < NaiveDate::from_ymd_opt(2018, 5, 1).unwrap_or(NaiveDate::MIN) {
            return Err(invalid("transport.start_date", "must not be before 2018-05-01"));
        }
        xml.leaf("dIniTras", &date("transport.start_date", start)?);
    }
    if let Some(end) = end {
        xml.leaf("dFinTras", &date("transport.end_date", end)?);
    }
    // Departure: the issuer's address.
    xml.open("gCamSal");
    xml.leaf("dDirLocSal", text_of("issuer.address", &issuer.address, ADDRESS)?);
    xml.leaf(
        "dNumCasSal",
        &house_number("issuer.house_number", &issuer.house_number)?,
    );
    write_place(xml, "Sal", &issuer.place()?);
    xml.close("gCamSal");
    if let Some(a) = &delivery {
        xml.open("gCamEnt");
        xml.leaf("dDirLocEnt", &a.street);
        xml.leaf("dNumCasEnt", &a.number);
        write_place(xml, "Ent", &a.place);
        xml.close("gCamEnt");
    }
    if let Some(v) = &t.vehicle {
        xml.open("gVehTras");
        xml.leaf("dTiVehTras", &v.kind);
        xml.leaf("dMarVeh", &v.brand);
        xml.leaf("dTipIdenVeh", if v.id.is_some() { "1" } else { "2" });
        xml.leaf_opt("dNroIDVeh", v.id.as_deref());
        xml.leaf_opt("dNroMatVeh", v.plate.as_deref());
        xml.leaf_opt("dNroVuelo", v.flight.as_deref());
        xml.close("gVehTras");
    }
    if let Some(c) = &t.carrier {
        xml.open("gCamTrans");
        match &c.identity {
            CarrierIdentity::Ruc(ruc) => {
                xml.leaf("iNatTrans", "1");
                xml.leaf("dNomTrans", &c.name);
                xml.leaf("dRucTrans", ruc.number());
                xml.num("dDVTrans", ruc.check_digit());
            }
            CarrierIdentity::Document(code, name, number) => {
                xml.leaf("iNatTrans", "2");
                xml.leaf("dNomTrans", &c.name);
                xml.num("iTipIDTrans", code);
                xml.leaf("dDTipIDTrans", name);
                xml.leaf("dNumIDTrans", number);
            }
        }
        xml.leaf("dNumIDChof", &c.driver_document);
        xml.leaf("dNomChof", &c.driver_name);
        xml.leaf("dDomFisc", &c.address);
        xml.leaf("dDirChof", &c.driver_address);
        xml.close("gCamTrans");
    }
    xml.close("gTransp");
    Ok(())
}
