//! Groups B, C and D of the DE: the operation, the timbrado, the commercial fields, the issuer
//! and the receiver.

use super::*;

pub(super) fn write_operation(xml: &mut Xml, kind: Kind, issuer: &Issuer, code: &str) -> Result<(), DeError> {
    xml.open("gOpeDE");
    xml.leaf("iTipEmi", "1");
    xml.leaf("dDesTipEmi", "Normal");
    xml.leaf("dCodSeg", code);
    if kind == Kind::Remision {
        let notice = issuer.remision_notice.as_deref().ok_or_else(|| {
            missing(
                "issuer.remision_notice",
                "a remisión carries the legal notice of Art. 3 inc. 7 RG 41/2014 in dInfoFisc",
            )
        })?;
        xml.leaf("dInfoFisc", text("issuer.remision_notice", notice, 1, 3000)?);
    }
    xml.close("gOpeDE");
    Ok(())
}

pub(super) fn write_timbrado(
    xml: &mut Xml,
    kind: Kind,
    issuer: &Issuer,
    establishment: &str,
    point: &str,
    number: u64,
) -> Result<(), DeError> {
    let timbrado = document_digits("issuer.timbrado", &issuer.timbrado, TIMBRADO_DIGITS)?;
    let from = issuer.timbrado_valid_from;
    if from < NaiveDate::from_ymd_opt(2018, 5, 1).unwrap_or(NaiveDate::MIN) {
        return Err(invalid(
            "issuer.timbrado_valid_from",
            "must not be before 2018-05-01 (tdFeIniT)",
        ));
    }
    let from = date("issuer.timbrado_valid_from", from)?;
    xml.open("gTimb");
    xml.num("iTiDE", kind.code());
    xml.leaf("dDesTiDE", kind.description());
    xml.leaf("dNumTim", timbrado);
    xml.leaf("dEst", establishment);
    xml.leaf("dPunExp", point);
    xml.leaf("dNumDoc", &format!("{number:07}"));
    xml.leaf("dFeIniT", &from);
    xml.close("gTimb");
    Ok(())
}

pub(super) fn write_commercial(xml: &mut Xml, doc: &CanonicalDocument, kind: Kind) -> Result<(), DeError> {
    xml.open("gOpeCom");
    if matches!(kind, Kind::Invoice | Kind::Autofactura) {
        let code = doc.transaction_type.unwrap_or(1);
        let description = facts::transaction_type(code)
            .ok_or_else(|| unknown("transaction_type", code, "transaction types (iTipTra)"))?;
        // Rule 2413: a sale of fiscal credit carries the resolution's number (H013, dNumResCF),
        // which the canonical document has no field for.
        if code == facts::SALE_OF_FISCAL_CREDIT {
            return Err(invalid(
                "transaction_type",
                "12 (Venta de crédito fiscal) needs the number of the fiscal credit resolution (dNumResCF, rule 2413), which kuatia cannot carry yet",
            ));
        }
        xml.num("iTipTra", code);
        xml.leaf("dDesTipTra", description);
    }
    xml.leaf("iTImp", "1");
    xml.leaf("dDesTImp", "IVA");
    xml.leaf("cMoneOpe", CURRENCY);
    xml.leaf("dDesMoneOpe", CURRENCY_NAME);
    xml.close("gOpeCom");
    Ok(())
}

/// The place of `prefix`'s address (`issuer`, `buyer`, `seller`) in SET's geographic table
/// ([`geography::resolve`]): the codes exist and agree, and each name given (`city_name`,
/// `district_name`) is the table's name for its code. The DE writes the table's names.
pub(super) fn place(
    prefix: &str,
    department: u16,
    district: Option<u16>,
    city: u32,
    city_name: Option<&str>,
    district_name: Option<&str>,
) -> Result<Place, DeError> {
    const TABLE: &str = "SET's geographic table";
    let field = |name: &str| format!("{prefix}.{name}");
    let place = geography::resolve(department, district, city).map_err(|e| match e {
        PlaceError::UnknownCity(code) => unknown(field("city_code"), code, "cities (SET's geographic table)"),
        PlaceError::UnknownDistrict(code) => {
            unknown(field("district_code"), code, "districts (SET's geographic table)")
        }
        PlaceError::UnknownDepartment(code) => unknown(
            field("department_code"),
            code,
            "departments (SET's geographic table)",
        ),
        e @ PlaceError::CityNotInDistrict { .. } => invalid(field("district_code"), format!("{e} ({TABLE})")),
        e @ PlaceError::CityNotInDepartment { .. } => {
            invalid(field("department_code"), format!("{e} ({TABLE})"))
        }
    })?;
    let names = [
        ("city_name", city_name, "city", place.city.code, &place.city.name),
        (
            "district_name",
            district_name,
            "district",
            u32::from(place.district.code),
            &place.district.name,
        ),
    ];
    for (name, given, what, code, table) in names {
        if let Some(given) = given
            && !geography::same_name(given, table)
        {
            return Err(invalid(
                field(name),
                format!("{what} {code} is {table:?} in {TABLE}, not {:?}", given.trim()),
            ));
        }
    }
    Ok(place)
}

/// `cDep*`, `dDesDep*`, `cDis*`, `dDesDis*`, `cCiu*`, `dDesCiu*` of `place`, in the XSD's order;
/// `suffix` names the group's fields (`Emi`, `Rec`, `Sal`, `Ent`, `Ven`, `Prov`).
pub(super) fn write_place(xml: &mut Xml, suffix: &str, place: &Place) {
    xml.num(&format!("cDep{suffix}"), place.department.code);
    xml.leaf(&format!("dDesDep{suffix}"), &place.department.name);
    xml.num(&format!("cDis{suffix}"), place.district.code);
    xml.leaf(&format!("dDesDis{suffix}"), &place.district.name);
    xml.num(&format!("cCiu{suffix}"), place.city.code);
    xml.leaf(&format!("dDesCiu{suffix}"), &place.city.name);
}

pub(super) fn write_issuer(xml: &mut Xml, issuer: &Issuer) -> Result<(), DeError> {
    let name = match issuer.environment {
        SifenEnvironment::Test => facts::TEST_ISSUER_NAME,
        SifenEnvironment::Production => text_of("issuer.legal_name", &issuer.legal_name, NAME)?,
    };
    xml.open("gEmis");
    xml.leaf("dRucEm", issuer.ruc.number());
    xml.num("dDVEmi", issuer.ruc.check_digit());
    xml.num("iTipCont", issuer.taxpayer_code());
    if let Some(regime) = issuer.tax_regime {
        if !(1..=8).contains(&regime) {
            return Err(unknown("issuer.tax_regime", regime, "tax regimes (cTipReg 1-8)"));
        }
        xml.num("cTipReg", regime);
    }
    xml.leaf("dNomEmi", name);
    xml.leaf_opt(
        "dNomFanEmi",
        opt_text(
            "issuer.trade_name",
            issuer.trade_name.as_deref(),
            TRADE_NAME.min,
            TRADE_NAME.max,
        )?,
    );
    xml.leaf("dDirEmi", text_of("issuer.address", &issuer.address, ADDRESS)?);
    xml.leaf(
        "dNumCas",
        &house_number("issuer.house_number", &issuer.house_number)?,
    );
    if issuer.district_name.is_some() && issuer.district_code.is_none() {
        return Err(missing(
            "issuer.district_code",
            "a district name comes with its code",
        ));
    }
    write_place(xml, "Emi", &issuer.place()?);
    xml.leaf("dTelEmi", text("issuer.phone", &issuer.phone, 6, 15)?);
    xml.leaf("dEmailE", email("issuer.email", &issuer.email)?);
    xml.leaf_opt(
        "dDenSuc",
        opt_text("issuer.branch_name", issuer.branch_name.as_deref(), 1, 30)?,
    );
    let activities = &issuer.economic_activities;
    if activities.is_empty() || activities.len() > 9 {
        return Err(invalid(
            "issuer.economic_activities",
            "one to nine economic activities (gActEco)",
        ));
    }
    for (i, activity) in activities.iter().enumerate() {
        let field = format!("issuer.economic_activities[{i}]");
        let code = activity.code.trim();
        if !(1..=8).contains(&code.len())
            || !code.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
        {
            return Err(invalid(
                format!("{field}.code"),
                "must be 1 to 8 digits or capitals",
            ));
        }
        xml.open("gActEco");
        xml.leaf("cActEco", code);
        xml.leaf(
            "dDesActEco",
            text(&format!("{field}.description"), &activity.description, 1, 300)?,
        );
        xml.close("gActEco");
    }
    xml.close("gEmis");
    Ok(())
}

/// A domestic address: street, number and its place in SET's geographic table.
pub(super) struct Address {
    pub(super) street: String,
    pub(super) number: String,
    pub(super) place: Place,
}

/// The address of `party` at `prefix` (`buyer`, `seller`), if it has one.
pub(super) fn party_address(prefix: &str, party: &Party) -> Result<Option<Address>, DeError> {
    let Some(street) = &party.address else {
        return Ok(None);
    };
    let field = |name: &str| format!("{prefix}.{name}");
    let why = "an address comes with its house number, department and city (rules 1324-1330)";
    let street = text_of(&field("address"), street, ADDRESS)?.to_owned();
    let number = house_number(
        &field("house_number"),
        party
            .house_number
            .as_deref()
            .ok_or_else(|| missing(field("house_number"), why))?,
    )?;
    let code = party
        .department_code
        .ok_or_else(|| missing(field("department_code"), why))?;
    let city = party.city_code.ok_or_else(|| missing(field("city_code"), why))?;
    let place = place(prefix, code, None, city, party.city_name.as_deref(), None)?;
    Ok(Some(Address {
        street,
        number,
        place,
    }))
}

pub(super) fn country_name(field: &str, code: &str) -> Result<&'static str, DeError> {
    facts::country(code).ok_or_else(|| unknown(field, code, "countries (ISO 3166 alpha-3)"))
}

/// The receiver's identity document (`iTipIDRec`, `dDTipIDRec`).
pub(super) fn receiver_document(kind: IdDocumentType) -> Option<(u8, &'static str)> {
    match kind {
        IdDocumentType::Ci => Some((1, "Cédula paraguaya")),
        IdDocumentType::Passport => Some((2, "Pasaporte")),
        IdDocumentType::ForeignId => Some((3, "Cédula extranjera")),
        IdDocumentType::Innominado => Some((5, "Innominado")),
        IdDocumentType::DiplomaticCard => Some((6, "Tarjeta Diplomática de exoneración fiscal")),
        // Code 9 takes a free description of 9 to 41 characters.
        IdDocumentType::Other => Some((9, "Otro documento de identidad")),
        IdDocumentType::Ruc => None,
    }
}

/// `gDatRec`; returns the receiver as the QR names it.
pub(super) fn write_receiver(
    xml: &mut Xml,
    doc: &CanonicalDocument,
    kind: Kind,
    issuer: &Issuer,
) -> Result<Receiver, DeError> {
    xml.open("gDatRec");
    let receiver = if kind == Kind::Autofactura {
        // The company buys from itself on paper (rules 1315-1317).
        xml.leaf("iNatRec", "1");
        xml.leaf("iTiOpe", "2");
        xml.leaf("cPaisRec", PARAGUAY);
        xml.leaf("dDesPaisRe", "Paraguay");
        xml.num("iTiContRec", issuer.taxpayer_code());
        xml.leaf("dRucRec", issuer.ruc.number());
        xml.num("dDVRec", issuer.ruc.check_digit());
        xml.leaf("dNomRec", text_of("issuer.legal_name", &issuer.legal_name, NAME)?);
        Receiver::Ruc(issuer.ruc.number().to_owned())
    } else {
        let anonymous = Party::default();
        let buyer = match &doc.buyer {
            Some(buyer) => buyer,
            None if kind == Kind::Invoice => &anonymous,
            None => {
                return Err(missing(
                    "buyer",
                    format!("a {} names its buyer", doc.doc_type.as_str()),
                ));
            }
        };
        let op = if doc.buyer.is_some() {
            operation_type(buyer)
        } else {
            OperationType::Anonymous
        };
        write_buyer(xml, kind, buyer, op)?
    };
    xml.close("gDatRec");
    Ok(receiver)
}

pub(super) fn write_buyer(
    xml: &mut Xml,
    kind: Kind,
    buyer: &Party,
    op: OperationType,
) -> Result<Receiver, DeError> {
    let foreign = op == OperationType::Foreign;
    let innominado = op == OperationType::Anonymous
        || (buyer.ruc.is_none() && buyer.document_type == Some(IdDocumentType::Innominado));
    let ruc = match (&buyer.ruc, op) {
        (Some(text), OperationType::B2b | OperationType::B2c) => {
            Some(Ruc::parse(text).map_err(|e| invalid("buyer.ruc", e.to_string()))?)
        }
        (Some(_), _) => {
            return Err(invalid(
                "buyer.ruc",
                "a foreign or anonymous buyer has no RUC (rule 1300)",
            ));
        }
        (None, OperationType::B2b) => {
            return Err(missing("buyer.ruc", "a b2b buyer is a taxpayer (rule 1300)"));
        }
        (None, _) => None,
    };
    let country = match (buyer.country.as_deref(), foreign) {
        (Some(code), true) if code != PARAGUAY => code,
        (_, true) => {
            return Err(invalid(
                "buyer.country",
                "a foreign buyer's country is given and is not PRY (rule 1320)",
            ));
        }
        (None, false) => PARAGUAY,
        (Some(code), false) if code == PARAGUAY => PARAGUAY,
        (Some(_), false) => {
            return Err(invalid(
                "buyer.country",
                "a buyer abroad is a foreign operation (rule 1320)",
            ));
        }
    };
    // An unnamed DE is "0" and "Sin Nombre" whatever else was given (D210, D211).
    let name = match (buyer.legal_name.as_deref(), innominado) {
        (_, true) => "Sin Nombre",
        (Some(name), false) => text_of("buyer.legal_name", name, NAME)?,
        (None, false) => return Err(missing("buyer.legal_name", "a named buyer has a name (dNomRec)")),
    };
    let trade_name = opt_text(
        "buyer.trade_name",
        buyer.trade_name.as_deref(),
        TRADE_NAME.min,
        TRADE_NAME.max,
    )?;
    let buyer_email = buyer
        .email
        .as_deref()
        .map(|e| email("buyer.email", e))
        .transpose()?;

    xml.leaf("iNatRec", if ruc.is_some() { "1" } else { "2" });
    xml.leaf(
        "iTiOpe",
        match op {
            OperationType::B2b => "1",
            OperationType::Foreign => "4",
            OperationType::B2c | OperationType::Anonymous => "2",
        },
    );
    xml.leaf("cPaisRec", country);
    xml.leaf("dDesPaisRe", country_name("buyer.country", country)?);
    let receiver = if let Some(ruc) = &ruc {
        let legal_entity = match buyer.taxpayer_type {
            Some(PartyTaxpayerType::LegalEntity) => true,
            Some(PartyTaxpayerType::Individual) => false,
            None => ruc.is_legal_entity(),
        };
        xml.leaf("iTiContRec", if legal_entity { "2" } else { "1" });
        xml.leaf("dRucRec", ruc.number());
        xml.num("dDVRec", ruc.check_digit());
        Receiver::Ruc(ruc.number().to_owned())
    } else if foreign {
        // No identity document for B2F (rules 1322, 1323); the QR then carries 0.
        Receiver::OtherId("0".to_owned())
    } else {
        let (code, description) = if innominado {
            (5, "Innominado")
        } else {
            let kind = buyer.document_type.ok_or_else(|| {
                missing(
                    "buyer.document_type",
                    "a consumer without RUC is identified by a document (rules 1310, 1311)",
                )
            })?;
            receiver_document(kind)
                .ok_or_else(|| missing("buyer.ruc", "document_type ruc names the buyer's RUC"))?
        };
        let number = match (buyer.document_number.as_deref(), innominado) {
            (_, true) => "0",
            (Some(number), false) => id_number("buyer.document_number", number)?,
            (None, false) => {
                return Err(missing(
                    "buyer.document_number",
                    "a consumer without RUC is identified by a document (rule 1311)",
                ));
            }
        };
        xml.num("iTipIDRec", code);
        xml.leaf("dDTipIDRec", description);
        xml.leaf("dNumIDRec", number);
        Receiver::OtherId(number.to_owned())
    };
    xml.leaf("dNomRec", name);
    xml.leaf_opt("dNomFanRec", trade_name);
    if foreign {
        let why = "a foreign buyer has an address with its house number (rules 1318, 1330)";
        let street = buyer
            .address
            .as_deref()
            .ok_or_else(|| missing("buyer.address", why))?;
        let number = buyer
            .house_number
            .as_deref()
            .ok_or_else(|| missing("buyer.house_number", why))?;
        xml.leaf("dDirRec", text_of("buyer.address", street, ADDRESS)?);
        xml.leaf("dNumCasRec", &house_number("buyer.house_number", number)?);
    } else {
        match party_address("buyer", buyer)? {
            Some(a) => {
                xml.leaf("dDirRec", &a.street);
                xml.leaf("dNumCasRec", &a.number);
                write_place(xml, "Rec", &a.place);
            }
            None if kind == Kind::Remision => {
                return Err(missing(
                    "buyer.address",
                    "a remisión names where the goods go (rule 1318)",
                ));
            }
            None => {}
        }
    }
    xml.leaf_opt("dEmailRec", buyer_email);
    Ok(receiver)
}
