//! Group E of the DE: the fields of each document type, the seller of an autofactura, the lines
//! and their totals, payment, and the associated document.

use super::*;

pub(super) fn write_type_fields(xml: &mut Xml, doc: &CanonicalDocument, kind: Kind) -> Result<(), DeError> {
    match kind {
        Kind::Invoice => {
            let code = doc.presence.unwrap_or(1);
            let description = facts::presence(code)
                .ok_or_else(|| unknown("presence", code, "presence indicators (iIndPres)"))?;
            xml.open("gCamFE");
            xml.num("iIndPres", code);
            xml.leaf("dDesIndPres", description);
            xml.close("gCamFE");
        }
        Kind::Autofactura => write_seller(xml, &doc.seller)?,
        Kind::CreditNote | Kind::DebitNote => {
            let code = doc
                .reason
                .ok_or_else(|| missing("reason", "the motive of a credit or debit note (iMotEmi)"))?;
            let description = facts::note_reason(code)
                .ok_or_else(|| unknown("reason", code, "credit and debit note motives (iMotEmi)"))?;
            xml.open("gCamNCDE");
            xml.num("iMotEmi", code);
            xml.leaf("dDesMotEmi", description);
            xml.close("gCamNCDE");
        }
        Kind::Remision => {
            let code = doc
                .reason
                .ok_or_else(|| missing("reason", "the motive of a remisión (iMotEmiNR)"))?;
            let description = facts::remision_reason(code)
                .ok_or_else(|| unknown("reason", code, "remisión motives (iMotEmiNR)"))?;
            let transport = doc
                .transport
                .as_ref()
                .map(Transport::check)
                .transpose()?
                .ok_or_else(|| {
                    missing(
                        "transport",
                        "a remisión carries its transport data (gTransp, rule 2100)",
                    )
                })?;
            let distance = transport.distance_km.ok_or_else(|| {
                missing(
                    "transport.distance_km",
                    "a remisión states the estimated kilometres (dKmR)",
                )
            })?;
            let responsible = transport.responsible;
            let responsible_name = facts::remision_responsible(responsible).ok_or_else(|| {
                unknown(
                    "transport.responsible",
                    responsible,
                    "remisión issuers (iRespEmiNR)",
                )
            })?;
            // Rule 2605: goods moved for a sale (motive 1) whose invoice is not referenced (H001)
            // carry the date the invoice will be issued (E506), on or after the remisión's.
            let issued = crate::local_time::paraguay(doc.issue_datetime.with_timezone(&Utc)).date();
            // Rule 2604: no later than the remisión's month.
            let invoice_date = match transport.invoice_date {
                Some(date)
                    if date < issued || (date.year(), date.month()) != (issued.year(), issued.month()) =>
                {
                    return Err(invalid(
                        "transport.invoice_date",
                        format!(
                            "the invoice's future date (dFecEm) is from the remisión's date, {issued}, to the end of its month (rule 2604)"
                        ),
                    ));
                }
                None if code == 1 && doc.associated_document.is_none() => {
                    return Err(missing(
                        "transport.invoice_date",
                        "goods moved for a sale (reason 1) whose invoice is not referenced in associated_document state the date the invoice will be issued (dFecEm, rule 2605)",
                    ));
                }
                date => date,
            };
            xml.open("gCamNRE");
            xml.num("iMotEmiNR", code);
            xml.leaf("dDesMotEmiNR", description);
            xml.num("iRespEmiNR", responsible);
            xml.leaf("dDesRespEmiNR", responsible_name);
            xml.num("dKmR", distance);
            if let Some(date) = invoice_date {
                xml.leaf("dFecEm", &date.format("%Y-%m-%d").to_string());
            }
            xml.close("gCamNRE");
        }
    }
    Ok(())
}

/// `gCamAE`: the non-taxpayer or foreigner an autofactura buys from.
pub(super) fn write_seller(xml: &mut Xml, seller: &Party) -> Result<(), DeError> {
    let why = "an autofactura describes the person the company buys from (gCamAE)";
    let foreign = seller.country.as_deref().is_some_and(|c| c != PARAGUAY);
    let (id_code, id_name) = match seller.document_type {
        Some(IdDocumentType::Ci) => (1, "Cédula paraguaya"),
        Some(IdDocumentType::Passport) => (2, "Pasaporte"),
        Some(IdDocumentType::ForeignId) => (3, "Cédula extranjera"),
        Some(_) => {
            return Err(invalid(
                "seller.document_type",
                "the seller of an autofactura is identified by ci, passport or foreign_id",
            ));
        }
        None => return Err(missing("seller.document_type", why)),
    };
    let number = id_number(
        "seller.document_number",
        seller
            .document_number
            .as_deref()
            .ok_or_else(|| missing("seller.document_number", why))?,
    )?;
    let name = text_of(
        "seller.legal_name",
        seller
            .legal_name
            .as_deref()
            .ok_or_else(|| missing("seller.legal_name", why))?,
        facts::SELLER_NAME,
    )?;
    // Only the seller's address is known: it is also the place of the transaction.
    let address = party_address("seller", seller)?.ok_or_else(|| missing("seller.address", why))?;
    xml.open("gCamAE");
    if foreign {
        xml.leaf("iNatVen", "2");
        xml.leaf("dDesNatVen", "Extranjero");
    } else {
        xml.leaf("iNatVen", "1");
        xml.leaf("dDesNatVen", "No contribuyente");
    }
    xml.num("iTipIDVen", id_code);
    xml.leaf("dDTipIDVen", id_name);
    xml.leaf("dNumIDVen", number);
    xml.leaf("dNomVen", name);
    xml.leaf("dDirVen", &address.street);
    xml.leaf("dNumCasVen", &address.number);
    write_place(xml, "Ven", &address.place);
    xml.leaf("dDirProv", &address.street);
    write_place(xml, "Prov", &address.place);
    xml.close("gCamAE");
    Ok(())
}

/// The amounts of one line, in whole guaraníes.
#[derive(Debug, Clone)]
pub(super) struct Line {
    /// `dPUniProSer` as written.
    pub(super) price: String,
    /// `dTotBruOpeItem` = `dTotOpeItem` (no discounts, no advances).
    pub(super) total: Decimal,
    /// `iAfecIVA`: 1 taxed, 2 exonerated, 3 exempt.
    pub(super) affectation: u8,
    /// 0, 5 or 10.
    pub(super) rate: u8,
    /// `dBasGravIVA`.
    pub(super) base: Decimal,
    /// `dLiqIVAItem`.
    pub(super) iva: Decimal,
}

pub(super) fn compute_lines(doc: &CanonicalDocument, kind: Kind) -> Result<Vec<Line>, DeError> {
    doc.items
        .iter()
        .enumerate()
        .map(|(i, item)| line(i, item, kind))
        .collect()
}

pub(super) fn line(i: usize, item: &Item, kind: Kind) -> Result<Line, DeError> {
    let field = |name: &str| format!("items[{i}].{name}");
    let quantity = item.quantity.get();
    quantity_text(&field("quantity"), quantity)?;
    let price = item.unit_price.get();
    let price_text = money(&field("unit_price"), price)?;
    let total = quantity
        .checked_mul(price)
        .map(half_up)
        .filter(|t| *t < Decimal::from(AMOUNT_LIMIT))
        .ok_or_else(|| DeError::OutOfRange {
            field: field("total_amount"),
        })?;
    let rate = facts::iva_rate(item.tax_rate.get())
        .ok_or_else(|| unknown(field("tax_rate"), item.tax_rate, "IVA rates (0, 5, 10)"))?;
    let (affectation, rate) = if !kind.taxed() {
        (3, 0)
    } else if rate == 0 {
        match item.exemption {
            Some(Exemption::Exonerated) => (2, 0),
            Some(Exemption::Exempt) | None => (3, 0),
        }
    } else {
        (1, rate)
    };
    // The Manual's own arithmetic (E735, E736), to 8 decimals as the fields allow: the base is
    // the total over 1.05 or 1.1, the IVA the base times the rate. Both are then far inside any
    // tolerance SIFEN applies when it recomputes them (rules 1909–1913), which whole guaraníes
    // were not: base × rate/100 could miss the whole-guaraní IVA by 0.55 Gs.
    let (base, iva) = if affectation == 1 {
        let r = Decimal::from(rate);
        let eight = |d: Decimal| facts::half_up_to(d, MAX_DECIMALS);
        let base = total
            .checked_mul(Decimal::ONE_HUNDRED)
            .and_then(|n| n.checked_div(Decimal::ONE_HUNDRED + r))
            .map(eight)
            .ok_or_else(|| DeError::OutOfRange {
                field: field("tax_amount"),
            })?;
        let iva = base
            .checked_mul(r)
            .and_then(|n| n.checked_div(Decimal::ONE_HUNDRED))
            .map(eight)
            .ok_or_else(|| DeError::OutOfRange {
                field: field("tax_amount"),
            })?;
        (base, iva)
    } else {
        (Decimal::ZERO, Decimal::ZERO)
    };
    Ok(Line {
        price: price_text,
        total,
        affectation,
        rate,
        base,
        iva,
    })
}

/// `tdCantProSer`: above 0, below 10^10, at most 8 decimals.
pub(super) fn quantity_text(field: &str, quantity: Decimal) -> Result<String, DeError> {
    if quantity <= Decimal::ZERO {
        return Err(invalid(field, "must be above 0"));
    }
    decimal(field, quantity, QUANTITY_LIMIT, MAX_DECIMALS)
}

/// The totals of `gTotSub`, as written.
pub(super) struct Totals {
    pub(super) exempt: String,
    pub(super) exonerated: String,
    pub(super) sub5: String,
    pub(super) sub10: String,
    pub(super) grand: String,
    pub(super) iva5: String,
    pub(super) iva10: String,
    pub(super) iva: String,
    pub(super) base5: String,
    pub(super) base10: String,
    pub(super) base: String,
}

pub(super) fn totals(lines: &[Line]) -> Result<Totals, DeError> {
    let sum = |field: &str, pick: &dyn Fn(&Line) -> Option<Decimal>| -> Result<String, DeError> {
        let total = lines
            .iter()
            .filter_map(pick)
            .try_fold(Decimal::ZERO, |acc, v| acc.checked_add(v))
            .ok_or_else(|| DeError::OutOfRange {
                field: field.to_owned(),
            })?;
        money(field, total)
    };
    let by = |affectation: u8, rate: u8| {
        move |l: &Line| (l.affectation == affectation && l.rate == rate).then_some(l.total)
    };
    Ok(Totals {
        exempt: sum("totals.dSubExe", &by(3, 0))?,
        exonerated: sum("totals.dSubExo", &by(2, 0))?,
        sub5: sum("totals.dSub5", &by(1, 5))?,
        sub10: sum("totals.dSub10", &by(1, 10))?,
        grand: sum("totals.grand_total", &|l| Some(l.total))?,
        iva5: sum("totals.dIVA5", &|l| (l.rate == 5).then_some(l.iva))?,
        iva10: sum("totals.dIVA10", &|l| (l.rate == 10).then_some(l.iva))?,
        iva: sum("totals.tax_total", &|l| Some(l.iva))?,
        base5: sum("totals.dBaseGrav5", &|l| (l.rate == 5).then_some(l.base))?,
        base10: sum("totals.dBaseGrav10", &|l| (l.rate == 10).then_some(l.base))?,
        base: sum("totals.dTBasGraIVA", &|l| Some(l.base))?,
    })
}

/// `gCamCond` (invoice, autofactura).
pub(super) fn write_payment(
    xml: &mut Xml,
    doc: &CanonicalDocument,
    issued: NaiveDate,
    grand_total: &str,
) -> Result<(), DeError> {
    let terms = &doc.payment_terms;
    xml.open("gCamCond");
    match terms.condition {
        PaymentCondition::Cash => {
            xml.leaf("iCondOpe", "1");
            xml.leaf("dDCondOpe", "Contado");
            xml.open("gPaConEIni");
            let method = terms.method.unwrap_or(PaymentMethod::Cash);
            let (code, description): (u8, &str) = match method {
                PaymentMethod::Cash => (1, "Efectivo"),
                PaymentMethod::Check => (2, "Cheque"),
                PaymentMethod::Card => match terms.card.as_ref().map(|c| c.kind) {
                    Some(CardKind::Credit) => (3, "Tarjeta de crédito"),
                    Some(CardKind::Debit) => (4, "Tarjeta de débito"),
                    None => {
                        return Err(missing(
                            "payment_terms.card",
                            "method card needs the brand and whether it is a credit or debit card (rule 1600)",
                        ));
                    }
                },
                PaymentMethod::BankTransfer => (5, "Transferencia"),
                // Code 99 takes a free description of 4 to 30 characters.
                PaymentMethod::Other => (99, "Otro"),
            };
            xml.num("iTiPago", code);
            xml.leaf("dDesTiPag", description);
            xml.leaf("dMonTiPag", grand_total);
            xml.leaf("cMoneTiPag", CURRENCY);
            xml.leaf("dDMoneTiPag", CURRENCY_NAME);
            if let (PaymentMethod::Card, Some(card)) = (method, &terms.card) {
                let (brand, brand_name) = facts::card_brand(&card.brand).ok_or_else(|| {
                    unknown("payment_terms.card.brand", &card.brand, "card brands (iDenTarj)")
                })?;
                xml.open("gPagTarCD");
                xml.num("iDenTarj", brand);
                xml.leaf("dDesDenTarj", brand_name);
                // iForProPa: 2 "Pago Electrónico" for an electronic operation, else 1 POS.
                xml.leaf("iForProPa", if doc.presence == Some(2) { "2" } else { "1" });
                xml.close("gPagTarCD");
            }
            if method == PaymentMethod::Check {
                let check = terms.check.as_ref().ok_or_else(|| {
                    missing(
                        "payment_terms.check",
                        "method check needs the cheque's number and bank (rule 1650)",
                    )
                })?;
                let number = check.number.trim();
                let Length { min, max } = facts::CHECK_NUMBER;
                if !(min..=max).contains(&number.len()) || !number.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(invalid(
                        "payment_terms.check.number",
                        format!("must be {min} to {max} digits"),
                    ));
                }
                let bank = text_of("payment_terms.check.bank", &check.bank, facts::CHECK_BANK)?;
                if bank.contains("  ") {
                    return Err(invalid("payment_terms.check.bank", "must not hold double spaces"));
                }
                xml.open("gPagCheq");
                xml.leaf("dNumCheq", &format!("{number:0>max$}"));
                xml.leaf("dBcoEmi", bank);
                xml.close("gPagCheq");
            }
            xml.close("gPaConEIni");
        }
        PaymentCondition::Credit => {
            xml.leaf("iCondOpe", "2");
            xml.leaf("dDCondOpe", "Crédito");
            xml.open("gPagCred");
            let installments = terms.installments.as_deref().unwrap_or_default();
            if installments.is_empty() {
                let due = terms.due_date.ok_or_else(|| {
                    missing(
                        "payment_terms.due_date",
                        "a credit sale has a due_date or installments (rule 1700)",
                    )
                })?;
                let days = (due - issued).num_days();
                if days < 0 {
                    return Err(invalid(
                        "payment_terms.due_date",
                        "must not be before the issue date",
                    ));
                }
                xml.leaf("iCondCred", "1");
                xml.leaf("dDCondCred", "Plazo");
                xml.leaf("dPlazoCre", &format!("{days} días"));
            } else {
                if installments.len() > 999 {
                    return Err(invalid("payment_terms.installments", "at most 999 installments"));
                }
                xml.leaf("iCondCred", "2");
                xml.leaf("dDCondCred", "Cuota");
                xml.num("dCuotas", installments.len());
                for (i, installment) in installments.iter().enumerate() {
                    let field = format!("payment_terms.installments[{i}]");
                    let amount = decimal(
                        &format!("{field}.amount"),
                        installment.amount.get(),
                        AMOUNT_LIMIT,
                        4,
                    )?;
                    let due = date(&format!("{field}.due_date"), installment.due_date)?;
                    xml.open("gCuotas");
                    xml.leaf("cMoneCuo", CURRENCY);
                    xml.leaf("dDMoneCuo", CURRENCY_NAME);
                    xml.leaf("dMonCuota", &amount);
                    xml.leaf("dVencCuo", &due);
                    xml.close("gCuotas");
                }
            }
            xml.close("gPagCred");
        }
    }
    xml.close("gCamCond");
    Ok(())
}

pub(super) fn write_items(
    xml: &mut Xml,
    doc: &CanonicalDocument,
    kind: Kind,
    lines: Option<&[Line]>,
) -> Result<(), DeError> {
    for (i, item) in doc.items.iter().enumerate() {
        let field = |name: &str| format!("items[{i}].{name}");
        let number = (i + 1).to_string();
        let code = match &item.code {
            Some(code) => text_of(&field("code"), code, facts::ITEM_CODE)?,
            None => &number,
        };
        let unit = item.unit.unwrap_or(facts::DEFAULT_UNIT);
        let unit_name =
            facts::unit(unit).ok_or_else(|| unknown(field("unit"), unit, "units of measure (cUniMed)"))?;
        xml.open("gCamItem");
        xml.leaf("dCodInt", code);
        xml.leaf(
            "dDesProSer",
            text(&field("description"), &item.description, 1, 2000)?,
        );
        xml.num("cUniMed", unit);
        xml.leaf("dDesUniMed", unit_name);
        xml.leaf(
            "dCantProSer",
            &quantity_text(&field("quantity"), item.quantity.get())?,
        );
        if let Some(line) = lines.and_then(|l| l.get(i)) {
            let total = money(&field("total_amount"), line.total)?;
            xml.open("gValorItem");
            xml.leaf("dPUniProSer", &line.price);
            xml.leaf("dTotBruOpeItem", &total);
            xml.open("gValorRestaItem");
            xml.leaf("dDescItem", "0");
            xml.leaf("dDescGloItem", "0");
            xml.leaf("dAntPreUniIt", "0");
            xml.leaf("dAntGloPreUniIt", "0");
            xml.leaf("dTotOpeItem", &total);
            xml.close("gValorRestaItem");
            xml.close("gValorItem");
            if kind.taxed() {
                xml.open("gCamIVA");
                xml.num("iAfecIVA", line.affectation);
                xml.leaf(
                    "dDesAfecIVA",
                    match line.affectation {
                        1 => "Gravado IVA",
                        2 => "Exonerado (Art. 100 - Ley 6380/2019)",
                        _ => "Exento",
                    },
                );
                xml.leaf("dPropIVA", if line.affectation == 1 { "100" } else { "0" });
                xml.num("dTasaIVA", line.rate);
                xml.leaf("dBasGravIVA", &money(&field("tax_amount"), line.base)?);
                xml.leaf("dLiqIVAItem", &money(&field("tax_amount"), line.iva)?);
                xml.leaf("dBasExe", "0");
                xml.close("gCamIVA");
            }
        }
        xml.close("gCamItem");
    }
    Ok(())
}

pub(super) fn write_totals(xml: &mut Xml, kind: Kind, t: &Totals) {
    let taxed = kind.taxed();
    xml.open("gTotSub");
    if taxed {
        xml.leaf("dSubExe", &t.exempt);
        xml.leaf("dSubExo", &t.exonerated);
        xml.leaf("dSub5", &t.sub5);
        xml.leaf("dSub10", &t.sub10);
    }
    xml.leaf("dTotOpe", &t.grand);
    for tag in [
        "dTotDesc",
        "dTotDescGlotem",
        "dTotAntItem",
        "dTotAnt",
        "dPorcDescTotal",
        "dDescTotal",
        "dAnticipo",
        "dRedon",
    ] {
        xml.leaf(tag, "0");
    }
    xml.leaf("dTotGralOpe", &t.grand);
    if taxed {
        xml.leaf("dIVA5", &t.iva5);
        xml.leaf("dIVA10", &t.iva10);
        xml.leaf("dLiqTotIVA5", "0");
        xml.leaf("dLiqTotIVA10", "0");
        xml.leaf("dTotIVA", &t.iva);
        xml.leaf("dBaseGrav5", &t.base5);
        xml.leaf("dBaseGrav10", &t.base10);
        xml.leaf("dTBasGraIVA", &t.base);
    }
    xml.close("gTotSub");
}

/// `gCamDEAsoc`.
pub(super) fn write_associated(
    xml: &mut Xml,
    doc: &CanonicalDocument,
    kind: Kind,
    issuer: &Issuer,
) -> Result<(), DeError> {
    let Some(a) = &doc.associated_document else {
        return match kind {
            Kind::CreditNote | Kind::DebitNote => Err(missing(
                "associated_document",
                "a credit or debit note refers to the invoice it adjusts (rule 2400)",
            )),
            Kind::Autofactura => Err(missing(
                "associated_document",
                "an autofactura refers to its seller's constancia (rule 2416)",
            )),
            Kind::Invoice | Kind::Remision => Ok(()),
        };
    };
    xml.open("gCamDEAsoc");
    if kind == Kind::Autofactura {
        write_constancia(xml, a)?;
    } else if let Some(cdc) = &a.cdc {
        let cdc = Cdc::parse(cdc.trim()).map_err(|e| invalid("associated_document.cdc", e.to_string()))?;
        xml.leaf("iTipDocAso", "1");
        xml.leaf("dDesTipDocAso", "Electrónico");
        xml.leaf("dCdCDERef", cdc.as_str());
    } else {
        let why = "a printed document is named by timbrado, establishment, point, number and issue_date";
        fn get<'v>(name: &str, value: &'v Option<String>, why: &str) -> Result<&'v str, DeError> {
            value
                .as_deref()
                .ok_or_else(|| missing(format!("associated_document.{name}"), why))
        }
        let timbrado = document_digits(
            "associated_document.timbrado",
            get("timbrado", &a.timbrado, why)?,
            TIMBRADO_DIGITS,
        )?;
        // Rule 2440: a printed document was not numbered under an electronic timbrado.
        if timbrado.trim_start_matches('0') == issuer.timbrado.trim_start_matches('0') {
            return Err(invalid(
                "associated_document.timbrado",
                format!(
                    "{timbrado} is the company's electronic timbrado: a printed document has a printed timbrado (rule 2440); refer to an electronic document by its cdc or document_id"
                ),
            ));
        }
        let establishment = digits(
            "associated_document.establishment",
            get("establishment", &a.establishment, why)?,
            ESTABLISHMENT_DIGITS,
        )?;
        let point = digits(
            "associated_document.point",
            get("point", &a.point, why)?,
            ESTABLISHMENT_DIGITS,
        )?;
        let number = document_digits(
            "associated_document.number",
            get("number", &a.number, why)?,
            facts::NUMBER_DIGITS,
        )?;
        let issued = a
            .issue_date
            .ok_or_else(|| missing("associated_document.issue_date", why))?;
        // A note adjusts an invoice; an invoice or remisión refers to the other one.
        let (printed, printed_name) = match kind {
            Kind::Invoice => (4, "Nota de remisión"),
            _ => (1, "Factura"),
        };
        xml.leaf("iTipDocAso", "2");
        xml.leaf("dDesTipDocAso", "Impreso");
        xml.leaf("dNTimDI", timbrado);
        xml.leaf("dEstDocAso", establishment);
        xml.leaf("dPExpDocAso", point);
        xml.leaf("dNumDocAso", number);
        xml.num("iTipoDocAso", printed);
        xml.leaf("dDTipoDocAso", printed_name);
        xml.leaf("dFecEmiDI", &date("associated_document.issue_date", issued)?);
    }
    xml.close("gCamDEAsoc");
    Ok(())
}

pub(super) fn write_constancia(xml: &mut Xml, a: &AssociatedDocument) -> Result<(), DeError> {
    let kind = a.constancia_type.ok_or_else(|| {
        missing(
            "associated_document.constancia_type",
            "1 (not a taxpayer) or 2 (microproducer)",
        )
    })?;
    let name = facts::constancia_type(kind).ok_or_else(|| {
        unknown(
            "associated_document.constancia_type",
            kind,
            "constancias (iTipCons)",
        )
    })?;
    xml.leaf("iTipDocAso", "3");
    xml.leaf("dDesTipDocAso", "Constancia Electrónica");
    xml.num("iTipCons", kind);
    xml.leaf("dDesTipCons", name);
    if let Some(number) = &a.constancia_number {
        let number = digits(
            "associated_document.constancia_number",
            number,
            facts::CONSTANCIA_NUMBER_DIGITS,
        )?;
        if number.bytes().all(|b| b == b'0') {
            return Err(invalid(
                "associated_document.constancia_number",
                "must not be all zeros",
            ));
        }
        xml.leaf("dNumCons", number);
    }
    if let Some(control) = &a.constancia_control {
        let control = control.trim();
        let length = facts::CONSTANCIA_CONTROL_LENGTH;
        if control.len() != length || !control.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return Err(invalid(
                "associated_document.constancia_control",
                format!("must be {length} letters, digits or dashes"),
            ));
        }
        xml.leaf("dNumControl", control);
    }
    Ok(())
}
