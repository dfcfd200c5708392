//! Rules of §12.4 groups E1–E7 (FE, AFE, notes, remisión, conditions of the operation): see the crate's documentation.
//!
//! Each check reads the Manual's observation for its code (MT v150 pp.168–174) and the field
//! tables of groups E1–E7 (pp.74–86) for the codes and their descriptions.

use crate::xml::Node;
use crate::{Check, Ctx, NotChecked, Rule, geo};
use chrono::{Datelike, NaiveDate};

/// The rules checked here.
pub(crate) const RULES: &[Rule] = &[
    // E1: FE.
    rule("1350", rule_1350),
    rule("1351", rule_1351),
    rule("1352", rule_1352),
    rule("1400", rule_1400),
    rule("1401", rule_1401),
    rule("1402", rule_1402),
    // E4: AFE.
    rule("2550", rule_2550),
    rule("2551", rule_2551),
    rule("2562", rule_2562),
    rule("2553", rule_2553),
    rule("2552", rule_2552),
    rule("2561", rule_2561),
    rule("2555", rule_2555),
    rule("2557", rule_2557),
    rule("2556", rule_2556),
    rule("2558", rule_2558),
    rule("2559", rule_2559),
    // E5: NCE, NDE.
    rule("1450", rule_1450),
    rule("1451", rule_1451),
    rule("1452", rule_1452),
    // E6: NRE.
    rule("2600", rule_2600),
    rule("2601", rule_2601),
    rule("2606", rule_2606),
    rule("2602", rule_2602),
    rule("2603", rule_2603),
    rule("2604", rule_2604),
    rule("2605", rule_2605),
    // E7: conditions of the operation.
    rule("1500", rule_1500),
    rule("1501", rule_1501),
    rule("1503", rule_1503),
    rule("1502", rule_1502),
    rule("1550", rule_1550),
    rule("1551", rule_1551),
    rule("1552", rule_1552),
    rule("1553", rule_1553),
    rule("1554", rule_1554),
    rule("1555", rule_1555),
    rule("1556", rule_1556),
    rule("1557", rule_1557),
    rule("1600", rule_1600),
    rule("1601", rule_1601),
    rule("1602", rule_1602),
    rule("1604", rule_1604),
    rule("1650", rule_1650),
    rule("1651", rule_1651),
    rule("1700", rule_1700),
    rule("1701", rule_1701),
    rule("1702", rule_1702),
    rule("1703", rule_1703),
    rule("1704", rule_1704),
    rule("1705", rule_1705),
    rule("1706", rule_1706),
    rule("1603", rule_1603),
    rule("1750", rule_1750),
    rule("1751", rule_1751),
];

/// A rule entry.
const fn rule(code: &'static str, check: Check) -> Rule {
    Rule { code, check }
}

/// The rules of these groups not checked here, and why.
pub(crate) const NOT_CHECKED: &[NotChecked] = &[];

// ---------------------------------------------------------------------------------------------
// Code tables (the field tables of groups E1–E7) and shared helpers.

/// E011/E012 `iIndPres`/`dDesIndPres` (p.74; code 9 "Otro": the issuer writes its own).
const IND_PRES: &[(&str, &[&str])] = &[
    ("1", &["Operación presencial"]),
    ("2", &["Operación electrónica"]),
    ("3", &["Operación telemarketing"]),
    ("4", &["Venta a domicilio"]),
    ("5", &["Operación bancaria"]),
    // The Manual prints `6=” Operación cíclica”`: the space after the opening quote is typography.
    ("6", &["Operación cíclica"]),
];

/// E401/E402 `iMotEmi`/`dDesMotEmi` (p.77).
const MOT_EMI_NC: &[(&str, &[&str])] = &[
    ("1", &["Devolución y Ajuste de precios"]),
    ("2", &["Devolución"]),
    ("3", &["Descuento"]),
    ("4", &["Bonificación"]),
    ("5", &["Crédito incobrable"]),
    ("6", &["Recupero de costo"]),
    ("7", &["Recupero de gasto"]),
    ("8", &["Ajuste de precio"]),
];

/// E501/E502 `iMotEmiNR`/`dDesMotEmiNR` (pp.78–79; code 99 "Otro": the issuer writes its own).
/// The Manual names codes 1 and 11 in two ways: E501 lists "Traslado por venta" and
/// "Exhibición o demostración", E502's descriptions read "Traslado por ventas" and "Exhibición o
/// Demostración". A DE written either way follows the Manual, so both are accepted.
const MOT_EMI_NR: &[(&str, &[&str])] = &[
    ("1", &["Traslado por ventas", "Traslado por venta"]),
    ("2", &["Traslado por consignación"]),
    ("3", &["Exportación"]),
    ("4", &["Traslado por compra"]),
    ("5", &["Importación"]),
    ("6", &["Traslado por devolución"]),
    ("7", &["Traslado entre locales de la empresa"]),
    ("8", &["Traslado de bienes por transformación"]),
    ("9", &["Traslado de bienes por reparación"]),
    ("10", &["Traslado por emisor móvil"]),
    ("11", &["Exhibición o Demostración", "Exhibición o demostración"]),
    ("12", &["Participación en ferias"]),
    ("13", &["Traslado de encomienda"]),
    ("14", &["Decomiso"]),
];

/// E503/E504 `iRespEmiNR`/`dDesRespEmiNR` (p.79).
const RESP_EMI_NR: &[(&str, &[&str])] = &[
    ("1", &["Emisor de la factura"]),
    ("2", &["Poseedor de la factura y bienes"]),
    ("3", &["Empresa transportista"]),
    ("4", &["Despachante de Aduanas"]),
    ("5", &["Agente de transporte o intermediario"]),
];

/// E601/E602 `iCondOpe`/`dDCondOpe` (p.80).
const COND_OPE: &[(&str, &[&str])] = &[("1", &["Contado"]), ("2", &["Crédito"])];

/// E606/E607 `iTiPago`/`dDesTiPag` (pp.81–82; code 99 "Otro": the issuer writes its own). The
/// Manual's E607 list numbers "Pago Móvil" 7 by a typo; it is code 17 (E606).
const TI_PAGO: &[(&str, &[&str])] = &[
    ("1", &["Efectivo"]),
    ("2", &["Cheque"]),
    ("3", &["Tarjeta de crédito"]),
    ("4", &["Tarjeta de débito"]),
    ("5", &["Transferencia"]),
    ("6", &["Giro"]),
    ("7", &["Billetera electrónica"]),
    ("8", &["Tarjeta empresarial"]),
    ("9", &["Vale"]),
    ("10", &["Retención"]),
    ("11", &["Pago por anticipo"]),
    ("12", &["Valor fiscal"]),
    ("13", &["Valor comercial"]),
    ("14", &["Compensación"]),
    ("15", &["Permuta"]),
    ("16", &["Pago bancario"]),
    ("17", &["Pago Móvil"]),
    ("18", &["Donación"]),
    ("19", &["Promoción"]),
    ("20", &["Consumo Interno"]),
    ("21", &["Pago Electrónico"]),
];

/// E621/E622 `iDenTarj`/`dDesDenTarj` (p.83; code 99 "Otro": the issuer writes its own).
const DEN_TARJ: &[(&str, &[&str])] = &[
    ("1", &["Visa"]),
    ("2", &["Mastercard"]),
    ("3", &["American Express"]),
    ("4", &["Maestro"]),
    ("5", &["Panal"]),
    ("6", &["Cabal"]),
];

/// E641/E642 `iCondCred`/`dDCondCred` (p.84).
const COND_CRED: &[(&str, &[&str])] = &[("1", &["Plazo"]), ("2", &["Cuota"])];

/// Whether the description at `desc` of `group` is the one of the code at `code`: one of the
/// table's names, or any non-empty text for the table's "other" code (`free`). Nothing to judge
/// when the code is absent (the schema requires it).
fn described(
    group: &Node,
    code: &str,
    desc: &str,
    table: &[(&str, &[&str])],
    free: Option<&str>,
) -> Result<(), String> {
    let Some(value) = group.text_at(code) else {
        return Ok(());
    };
    let written = group.text_at(desc).unwrap_or("");
    if free == Some(value) {
        return if written.is_empty() {
            Err(format!("{code} {value} with an empty {desc}"))
        } else {
            Ok(())
        };
    }
    match table.iter().find(|(c, _)| *c == value) {
        Some((_, names)) if names.contains(&written) => Ok(()),
        Some((_, names)) => Err(format!(
            "{desc} \"{written}\" is not \"{}\", the description of {code} {value}",
            names[0]
        )),
        None => Err(format!("{code} {value} has no description in the Manual's table")),
    }
}

/// `described` on the group at a path under `DE`, when it is there.
fn described_at(
    ctx: &Ctx<'_>,
    group: &str,
    code: &str,
    desc: &str,
    table: &[(&str, &[&str])],
    free: Option<&str>,
) -> Result<(), String> {
    ctx.de
        .at(group)
        .map_or(Ok(()), |g| described(g, code, desc, table, free))
}

/// A date of the XML (`2019-09-10`, or the date of `2019-09-10T08:00:00`).
fn date(text: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(text.get(..10)?, "%Y-%m-%d").ok()
}

/// The date of emission of the DE (D002 `dFeEmiDE`).
fn emission(ctx: &Ctx<'_>) -> Option<NaiveDate> {
    ctx.text("gDatGralOpe/dFeEmiDE").and_then(date)
}

/// A group that must be there for some document types and absent for the others.
fn group_for_types(ctx: &Ctx<'_>, path: &str, types: &[i64], present: bool) -> Result<(), String> {
    let wanted = types.contains(&ctx.doc_type());
    match (present, wanted, ctx.has(path)) {
        (true, true, false) => Err(format!("iTiDE {} without {path}", ctx.doc_type())),
        (false, false, true) => Err(format!("{path} in a DE of iTiDE {}", ctx.doc_type())),
        _ => Ok(()),
    }
}

/// Every `gCamCond/gPaConEIni` (E605, 0–999).
fn payments<'a>(ctx: &Ctx<'a>) -> Vec<&'a Node> {
    ctx.de.all("gDtipDE/gCamCond/gPaConEIni")
}

/// `gCamCond/iCondOpe`, when the group is there.
fn cond_ope<'a>(ctx: &Ctx<'a>) -> Option<&'a str> {
    ctx.text("gDtipDE/gCamCond/iCondOpe")
}

/// `gPagCred/iCondCred`, when the group is there.
fn cond_cred<'a>(ctx: &Ctx<'a>) -> Option<&'a str> {
    ctx.text("gDtipDE/gCamCond/gPagCred/iCondCred")
}

// ---------------------------------------------------------------------------------------------
// E1: FE.

/// 1350: FE (C002=1) requires gCamFE (E010).
fn rule_1350(ctx: &Ctx<'_>) -> Result<(), String> {
    group_for_types(ctx, "gDtipDE/gCamFE", &[1], true)
}

/// 1351: another type (C002≠1) must not carry gCamFE.
fn rule_1351(ctx: &Ctx<'_>) -> Result<(), String> {
    group_for_types(ctx, "gDtipDE/gCamFE", &[1], false)
}

/// 1352: dDesIndPres (E012) is the description of iIndPres (E011).
fn rule_1352(ctx: &Ctx<'_>) -> Result<(), String> {
    described_at(
        ctx,
        "gDtipDE/gCamFE",
        "iIndPres",
        "dDesIndPres",
        IND_PRES,
        Some("9"),
    )
}

/// 1400: a B2G operation (D202 iTiOpe=3) requires gCompPub (E020). The group lives in gCamFE,
/// so only an FE can carry it; other types are not judged.
fn rule_1400(ctx: &Ctx<'_>) -> Result<(), String> {
    if ctx.doc_type() == 1
        && ctx.text("gDatGralOpe/gDatRec/iTiOpe") == Some("3")
        && !ctx.has("gDtipDE/gCamFE/gCompPub")
    {
        return Err("iTiOpe 3 (B2G) without gCamFE/gCompPub".into());
    }
    Ok(())
}

/// 1401: gCompPub only with iTiOpe=3.
fn rule_1401(ctx: &Ctx<'_>) -> Result<(), String> {
    if ctx.has("gDtipDE/gCamFE/gCompPub") {
        let tiope = ctx.text("gDatGralOpe/gDatRec/iTiOpe").unwrap_or("");
        if tiope != "3" {
            return Err(format!("gCompPub with iTiOpe {tiope}, not 3 (B2G)"));
        }
    }
    Ok(())
}

/// 1402: dFeCodCont (E025) may not be after the DE's date of emission. The Manual's observation
/// names that date "(D202)", a typo for D002 `dFeEmiDE`; the dates are compared as days.
fn rule_1402(ctx: &Ctx<'_>) -> Result<(), String> {
    let contract = ctx.text("gDtipDE/gCamFE/gCompPub/dFeCodCont").and_then(date);
    if let (Some(contract), Some(emitted)) = (contract, emission(ctx))
        && contract > emitted
    {
        return Err(format!("dFeCodCont {contract} is after dFeEmiDE {emitted}"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// E4: AFE.

/// 2550: AFE (C002=4) requires gCamAE (E300).
fn rule_2550(ctx: &Ctx<'_>) -> Result<(), String> {
    group_for_types(ctx, "gDtipDE/gCamAE", &[4], true)
}

/// 2551: another type must not carry gCamAE.
fn rule_2551(ctx: &Ctx<'_>) -> Result<(), String> {
    group_for_types(ctx, "gDtipDE/gCamAE", &[4], false)
}

/// 2562: a seller identified by Paraguayan cédula or passport (E304 1 or 2) must not be a
/// taxpayer: its document number (E306) has no RUC, or that RUC is cancelled (CAN) or
/// definitively cancelled (CDE). A number the registry does not know is not judged.
fn rule_2562(ctx: &Ctx<'_>) -> Result<(), String> {
    let Some(ae) = ctx.de.at("gDtipDE/gCamAE") else {
        return Ok(());
    };
    if !matches!(ae.text_at("iTipIDVen"), Some("1" | "2")) {
        return Ok(());
    }
    let Some(number) = ae.text_at("dNumIDVen") else {
        return Ok(());
    };
    match ctx.facts.registry.taxpayer(number) {
        Some(t) if t.state != "CAN" && t.state != "CDE" => Err(format!(
            "the seller's dNumIDVen {number} is a taxpayer's RUC in state {}",
            t.state
        )),
        _ => Ok(()),
    }
}

/// The department, district (optional) and city at these fields of gCamAE are related: the
/// city is in the district and the district in the department (with no district, the city's
/// district is in the department). A code missing from SET's tables relates to nothing.
fn related(ctx: &Ctx<'_>, dep: &str, dis: &str, ciu: &str) -> Result<(), String> {
    let Some(ae) = ctx.de.at("gDtipDE/gCamAE") else {
        return Ok(());
    };
    let code = |field: &str| -> Result<Option<u32>, String> {
        ae.text_at(field)
            .map(|t| t.parse().map_err(|_| format!("{field} \"{t}\" is not a code")))
            .transpose()
    };
    let (Some(dep_code), Some(ciu_code)) = (code(dep)?, code(ciu)?) else {
        return Ok(());
    };
    if geo::department(dep_code).is_none() {
        return Err(format!("{dep} {dep_code} is not a department"));
    }
    let city = geo::city(ciu_code).ok_or_else(|| format!("{ciu} {ciu_code} is not a city"))?;
    let dis_code = match code(dis)? {
        Some(d) if d != city.parent => {
            return Err(format!(
                "{ciu} {ciu_code} is not in {dis} {d} (it is in district {})",
                city.parent
            ));
        }
        _ => city.parent,
    };
    let district = geo::district(dis_code).ok_or_else(|| format!("{dis} {dis_code} is not a district"))?;
    if district.parent != dep_code {
        return Err(format!(
            "district {dis_code} is not in {dep} {dep_code} (it is in department {})",
            district.parent
        ));
    }
    Ok(())
}

/// The description at `desc` of gCamAE is the name SET's table gives the code at `code`, when
/// the code is written.
fn named(
    ctx: &Ctx<'_>,
    code: &str,
    desc: &str,
    lookup: fn(u32) -> Option<&'static geo::Place>,
) -> Result<(), String> {
    let Some(ae) = ctx.de.at("gDtipDE/gCamAE") else {
        return Ok(());
    };
    let Some(value) = ae.text_at(code) else {
        return Ok(());
    };
    let place = value
        .parse()
        .ok()
        .and_then(lookup)
        .ok_or_else(|| format!("{code} {value} is not in SET's table"))?;
    let written = ae.text_at(desc).unwrap_or("");
    if written == place.name {
        Ok(())
    } else {
        Err(format!(
            "{desc} \"{written}\" is not \"{}\", the name of {code} {value}",
            place.name
        ))
    }
}

/// 2553: the seller's department (E310), district (E312) and city (E314) are related.
fn rule_2553(ctx: &Ctx<'_>) -> Result<(), String> {
    related(ctx, "cDepVen", "cDisVen", "cCiuVen")
}

/// 2552: dDesDepVen (E311) is the name of cDepVen (E310).
fn rule_2552(ctx: &Ctx<'_>) -> Result<(), String> {
    named(ctx, "cDepVen", "dDesDepVen", geo::department)
}

/// 2561: dDesDisVen (E313) is the name of cDisVen (E312).
fn rule_2561(ctx: &Ctx<'_>) -> Result<(), String> {
    named(ctx, "cDisVen", "dDesDisVen", geo::district)
}

/// 2555: dDesCiuVen (E315) is the name of cCiuVen (E314).
fn rule_2555(ctx: &Ctx<'_>) -> Result<(), String> {
    named(ctx, "cCiuVen", "dDesCiuVen", geo::city)
}

/// 2557: the transaction's department (E317), district (E319) and city (E321) are related.
fn rule_2557(ctx: &Ctx<'_>) -> Result<(), String> {
    related(ctx, "cDepProv", "cDisProv", "cCiuProv")
}

/// 2556: dDesDepProv (E318) is the name of cDepProv (E317).
fn rule_2556(ctx: &Ctx<'_>) -> Result<(), String> {
    named(ctx, "cDepProv", "dDesDepProv", geo::department)
}

/// 2558: dDesDisProv (E320) is the name of cDisProv (E319).
fn rule_2558(ctx: &Ctx<'_>) -> Result<(), String> {
    named(ctx, "cDisProv", "dDesDisProv", geo::district)
}

/// 2559: dDesCiuProv (E322) is the name of cCiuProv (E321).
fn rule_2559(ctx: &Ctx<'_>) -> Result<(), String> {
    named(ctx, "cCiuProv", "dDesCiuProv", geo::city)
}

// ---------------------------------------------------------------------------------------------
// E5: NCE, NDE.

/// 1450: NCE and NDE (C002 5 or 6) require gCamNCDE (E400).
fn rule_1450(ctx: &Ctx<'_>) -> Result<(), String> {
    group_for_types(ctx, "gDtipDE/gCamNCDE", &[5, 6], true)
}

/// 1451: other types must not carry gCamNCDE.
fn rule_1451(ctx: &Ctx<'_>) -> Result<(), String> {
    group_for_types(ctx, "gDtipDE/gCamNCDE", &[5, 6], false)
}

/// 1452: dDesMotEmi (E402) is the description of iMotEmi (E401).
fn rule_1452(ctx: &Ctx<'_>) -> Result<(), String> {
    described_at(ctx, "gDtipDE/gCamNCDE", "iMotEmi", "dDesMotEmi", MOT_EMI_NC, None)
}

// ---------------------------------------------------------------------------------------------
// E6: NRE.

/// 2600: NRE (C002=7) requires gCamNRE (E500).
fn rule_2600(ctx: &Ctx<'_>) -> Result<(), String> {
    group_for_types(ctx, "gDtipDE/gCamNRE", &[7], true)
}

/// 2601: other types must not carry gCamNRE.
fn rule_2601(ctx: &Ctx<'_>) -> Result<(), String> {
    group_for_types(ctx, "gDtipDE/gCamNRE", &[7], false)
}

/// 2606: a transfer between the company's premises (E501=7) names the issuer as the receiver:
/// dRucRec (D206) equals dRucEm (D101). A receiver without a RUC does not.
fn rule_2606(ctx: &Ctx<'_>) -> Result<(), String> {
    if ctx.text("gDtipDE/gCamNRE/iMotEmiNR") != Some("7") {
        return Ok(());
    }
    let issuer = ctx.text("gDatGralOpe/gEmis/dRucEm").unwrap_or("");
    match ctx.text("gDatGralOpe/gDatRec/dRucRec") {
        Some(receiver) if receiver == issuer => Ok(()),
        Some(receiver) => Err(format!(
            "iMotEmiNR 7 with dRucRec {receiver}, not the issuer's dRucEm {issuer}"
        )),
        None => Err(format!(
            "iMotEmiNR 7 with a receiver without RUC (the issuer's dRucEm is {issuer})"
        )),
    }
}

/// 2602: dDesMotEmiNR (E502) is the description of iMotEmiNR (E501).
fn rule_2602(ctx: &Ctx<'_>) -> Result<(), String> {
    described_at(
        ctx,
        "gDtipDE/gCamNRE",
        "iMotEmiNR",
        "dDesMotEmiNR",
        MOT_EMI_NR,
        Some("99"),
    )
}

/// 2603: dDesRespEmiNR (E504) is the description of iRespEmiNR (E503).
fn rule_2603(ctx: &Ctx<'_>) -> Result<(), String> {
    described_at(
        ctx,
        "gDtipDE/gCamNRE",
        "iRespEmiNR",
        "dDesRespEmiNR",
        RESP_EMI_NR,
        None,
    )
}

/// 2604: the month of the invoice's estimated date (E506 dFecEm) is not after the month of the
/// remisión's emission (year and month compared).
fn rule_2604(ctx: &Ctx<'_>) -> Result<(), String> {
    let future = ctx.text("gDtipDE/gCamNRE/dFecEm").and_then(date);
    if let (Some(future), Some(emitted)) = (future, emission(ctx))
        && (future.year(), future.month()) > (emitted.year(), emitted.month())
    {
        return Err(format!("dFecEm {future} is in a month after dFeEmiDE {emitted}"));
    }
    Ok(())
}

/// 2605: a transfer for a sale (E501=1) with no associated document (H001 gCamDEAsoc) requires
/// dFecEm (E506).
fn rule_2605(ctx: &Ctx<'_>) -> Result<(), String> {
    if ctx.text("gDtipDE/gCamNRE/iMotEmiNR") == Some("1")
        && !ctx.has("gCamDEAsoc")
        && !ctx.has("gDtipDE/gCamNRE/dFecEm")
    {
        return Err("iMotEmiNR 1 without gCamDEAsoc nor dFecEm".into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// E7: conditions of the operation.

/// 1500: FE and AFE (C002 1 or 4) require gCamCond (E600).
fn rule_1500(ctx: &Ctx<'_>) -> Result<(), String> {
    group_for_types(ctx, "gDtipDE/gCamCond", &[1, 4], true)
}

/// 1501: other types must not carry gCamCond.
fn rule_1501(ctx: &Ctx<'_>) -> Result<(), String> {
    group_for_types(ctx, "gDtipDE/gCamCond", &[1, 4], false)
}

/// 1503: an AFE is a cash operation (E601=1).
fn rule_1503(ctx: &Ctx<'_>) -> Result<(), String> {
    match cond_ope(ctx) {
        Some(c) if ctx.doc_type() == 4 && c != "1" => Err(format!("AFE with iCondOpe {c}, not 1 (Contado)")),
        _ => Ok(()),
    }
}

/// 1502: dDCondOpe (E602) is the description of iCondOpe (E601).
fn rule_1502(ctx: &Ctx<'_>) -> Result<(), String> {
    described_at(ctx, "gDtipDE/gCamCond", "iCondOpe", "dDCondOpe", COND_OPE, None)
}

/// 1550: a cash operation (E601=1) requires gPaConEIni (E605).
fn rule_1550(ctx: &Ctx<'_>) -> Result<(), String> {
    if cond_ope(ctx) == Some("1") && payments(ctx).is_empty() {
        return Err("iCondOpe 1 (Contado) without gPaConEIni".into());
    }
    Ok(())
}

/// 1551: a credit operation (E601=2) with an initial payment (E645 dMonEnt) requires
/// gPaConEIni.
fn rule_1551(ctx: &Ctx<'_>) -> Result<(), String> {
    if cond_ope(ctx) == Some("2") && ctx.has("gDtipDE/gCamCond/gPagCred/dMonEnt") && payments(ctx).is_empty()
    {
        return Err("iCondOpe 2 with dMonEnt but without gPaConEIni".into());
    }
    Ok(())
}

/// 1552: a credit operation without an initial payment must not carry gPaConEIni.
fn rule_1552(ctx: &Ctx<'_>) -> Result<(), String> {
    if cond_ope(ctx) == Some("2")
        && !ctx.has("gDtipDE/gCamCond/gPagCred/dMonEnt")
        && !payments(ctx).is_empty()
    {
        return Err("iCondOpe 2 without dMonEnt but with gPaConEIni".into());
    }
    Ok(())
}

/// 1553: in an FE (only), a bank payment (E606=16) needs the presence indicator "Operación
/// bancaria" (E011=5).
fn rule_1553(ctx: &Ctx<'_>) -> Result<(), String> {
    if ctx.doc_type() != 1 {
        return Ok(());
    }
    let Some(presence) = ctx.text("gDtipDE/gCamFE/iIndPres") else {
        return Ok(());
    };
    if presence != "5" && payments(ctx).iter().any(|p| p.text_at("iTiPago") == Some("16")) {
        return Err(format!(
            "iTiPago 16 (Pago bancario) with iIndPres {presence}, not 5"
        ));
    }
    Ok(())
}

/// The first failure of a check over every gPaConEIni.
fn each_payment(ctx: &Ctx<'_>, check: impl Fn(&Node) -> Result<(), String>) -> Result<(), String> {
    payments(ctx).into_iter().try_for_each(check)
}

/// 1554: dDesTiPag (E607) is the description of iTiPago (E606).
fn rule_1554(ctx: &Ctx<'_>) -> Result<(), String> {
    each_payment(ctx, |p| described(p, "iTiPago", "dDesTiPag", TI_PAGO, Some("99")))
}

/// 1555: dDMoneTiPag (E610) is the description of cMoneTiPag (E609) in SET's currency table.
fn rule_1555(ctx: &Ctx<'_>) -> Result<(), String> {
    each_payment(ctx, |p| {
        let Some(code) = p.text_at("cMoneTiPag") else {
            return Ok(());
        };
        let written = p.text_at("dDMoneTiPag").unwrap_or("");
        match crate::codes::currency(code) {
            Some(name) if name == written => Ok(()),
            Some(name) => Err(format!(
                "dDMoneTiPag \"{written}\" is not \"{name}\", the name of {code}"
            )),
            None => Err(format!("cMoneTiPag {code} is not in SET's currency table")),
        }
    })
}

/// 1556: a payment in a currency other than PYG (E609≠PYG) requires dTiCamTiPag (E611).
fn rule_1556(ctx: &Ctx<'_>) -> Result<(), String> {
    each_payment(ctx, |p| match p.text_at("cMoneTiPag") {
        Some(code) if code != "PYG" && p.child("dTiCamTiPag").is_none() => {
            Err(format!("cMoneTiPag {code} without dTiCamTiPag"))
        }
        _ => Ok(()),
    })
}

/// 1557: a payment in PYG must not carry dTiCamTiPag.
fn rule_1557(ctx: &Ctx<'_>) -> Result<(), String> {
    each_payment(ctx, |p| {
        if p.text_at("cMoneTiPag") == Some("PYG") && p.child("dTiCamTiPag").is_some() {
            return Err("cMoneTiPag PYG with dTiCamTiPag".into());
        }
        Ok(())
    })
}

/// A sub-group of gPaConEIni that belongs to some payment types (`present`: required for them;
/// otherwise: forbidden for the others).
fn payment_group(ctx: &Ctx<'_>, group: &str, types: &[&str], present: bool) -> Result<(), String> {
    each_payment(ctx, |p| {
        let kind = p.text_at("iTiPago").unwrap_or("");
        let wanted = types.contains(&kind);
        match (present, wanted, p.child(group).is_some()) {
            (true, true, false) => Err(format!("iTiPago {kind} without {group}")),
            (false, false, true) => Err(format!("{group} with iTiPago {kind}")),
            _ => Ok(()),
        }
    })
}

/// 1600: a card payment (E606 3 or 4) requires gPagTarCD (E620).
fn rule_1600(ctx: &Ctx<'_>) -> Result<(), String> {
    payment_group(ctx, "gPagTarCD", &["3", "4"], true)
}

/// 1601: other payment types must not carry gPagTarCD.
fn rule_1601(ctx: &Ctx<'_>) -> Result<(), String> {
    payment_group(ctx, "gPagTarCD", &["3", "4"], false)
}

/// 1602: dDesDenTarj (E622) is the description of iDenTarj (E621).
fn rule_1602(ctx: &Ctx<'_>) -> Result<(), String> {
    each_payment(ctx, |p| {
        p.child("gPagTarCD").map_or(Ok(()), |card| {
            described(card, "iDenTarj", "dDesDenTarj", DEN_TARJ, Some("99"))
        })
    })
}

/// 1604: the card processor's check digit (E625 dDVProTar) is the modulo 11 of its RUC (E624
/// dRUCProTar), when both are written.
fn rule_1604(ctx: &Ctx<'_>) -> Result<(), String> {
    each_payment(ctx, |p| {
        let Some(card) = p.child("gPagTarCD") else {
            return Ok(());
        };
        let (Some(ruc), Some(dv)) = (card.text_at("dRUCProTar"), card.text_at("dDVProTar")) else {
            return Ok(());
        };
        if ruc.is_empty() || !ruc.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(format!("dRUCProTar \"{ruc}\" is not a RUC"));
        }
        let expected = crate::codes::check_digit(ruc);
        if dv.parse::<u32>().ok() == Some(expected) {
            Ok(())
        } else {
            Err(format!(
                "dDVProTar {dv} is not {expected}, the check digit of dRUCProTar {ruc}"
            ))
        }
    })
}

/// 1650: a cheque payment (E606=2) requires gPagCheq (E630).
fn rule_1650(ctx: &Ctx<'_>) -> Result<(), String> {
    payment_group(ctx, "gPagCheq", &["2"], true)
}

/// 1651: other payment types must not carry gPagCheq.
fn rule_1651(ctx: &Ctx<'_>) -> Result<(), String> {
    payment_group(ctx, "gPagCheq", &["2"], false)
}

/// 1700: a credit operation (E601=2) requires gPagCred (E640).
fn rule_1700(ctx: &Ctx<'_>) -> Result<(), String> {
    if cond_ope(ctx) == Some("2") && !ctx.has("gDtipDE/gCamCond/gPagCred") {
        return Err("iCondOpe 2 (Crédito) without gPagCred".into());
    }
    Ok(())
}

/// 1701: another condition (E601≠2) must not carry gPagCred.
fn rule_1701(ctx: &Ctx<'_>) -> Result<(), String> {
    match cond_ope(ctx) {
        Some(c) if c != "2" && ctx.has("gDtipDE/gCamCond/gPagCred") => {
            Err(format!("gPagCred with iCondOpe {c}"))
        }
        _ => Ok(()),
    }
}

/// 1702: dDCondCred (E642) is the description of iCondCred (E641).
fn rule_1702(ctx: &Ctx<'_>) -> Result<(), String> {
    described_at(
        ctx,
        "gDtipDE/gCamCond/gPagCred",
        "iCondCred",
        "dDCondCred",
        COND_CRED,
        None,
    )
}

/// A field of gPagCred that belongs to one credit condition (`present`: required for it;
/// otherwise: forbidden for the others).
fn credit_field(ctx: &Ctx<'_>, field: &str, condition: &str, present: bool) -> Result<(), String> {
    let Some(cond) = cond_cred(ctx) else {
        return Ok(());
    };
    let has = ctx.has(&format!("gDtipDE/gCamCond/gPagCred/{field}"));
    match (present, cond == condition, has) {
        (true, true, false) => Err(format!("iCondCred {cond} without {field}")),
        (false, false, true) => Err(format!("{field} with iCondCred {cond}")),
        _ => Ok(()),
    }
}

/// 1703: a term credit (E641=1) requires dPlazoCre (E643).
fn rule_1703(ctx: &Ctx<'_>) -> Result<(), String> {
    credit_field(ctx, "dPlazoCre", "1", true)
}

/// 1704: another credit condition must not carry dPlazoCre.
fn rule_1704(ctx: &Ctx<'_>) -> Result<(), String> {
    credit_field(ctx, "dPlazoCre", "1", false)
}

/// 1705: a credit in instalments (E641=2) requires dCuotas (E644).
fn rule_1705(ctx: &Ctx<'_>) -> Result<(), String> {
    credit_field(ctx, "dCuotas", "2", true)
}

/// 1706: another credit condition must not carry dCuotas.
fn rule_1706(ctx: &Ctx<'_>) -> Result<(), String> {
    credit_field(ctx, "dCuotas", "2", false)
}

/// 1603: the card processor's RUC (E624 dRUCProTar) exists (judged only when the registry is
/// whole).
fn rule_1603(ctx: &Ctx<'_>) -> Result<(), String> {
    for card in ctx.de.all("gDtipDE/gCamCond/gPaConEIni/gPagTarCD") {
        crate::existing_ruc(ctx, card.text_at("dRUCProTar"), "card processor's")?;
    }
    Ok(())
}

/// 1750: a credit in instalments (E641=2) requires the instalments group gCuotas (E650).
fn rule_1750(ctx: &Ctx<'_>) -> Result<(), String> {
    credit_field(ctx, "gCuotas", "2", true)
}

/// 1751: another credit condition than instalments (E641≠2) must not carry gCuotas (E650).
fn rule_1751(ctx: &Ctx<'_>) -> Result<(), String> {
    credit_field(ctx, "gCuotas", "2", false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::support;
    use crate::{Registry, Taxpayer};

    const FE: &str = "set-examples-2019/FE_v150_20190910.xml";
    const AFE: &str = "set-examples-2019/AFE_v150_20190910.xml";
    const NC: &str = "set-examples-2019/NC_v150_20190910.xml";
    const ND: &str = "set-examples-2019/ND_v150_20190910.xml";
    const NRE: &str = "set-examples-2019/NRE_v150_20190910.xml";
    const GEN_FE: &str = "generated/fe-signed-selfsigned-qr.xml";
    const GEN_NC: &str = "generated/nc-signed-selfsigned-qr.xml";
    const ALL: &[&str] = &[FE, AFE, NC, ND, NRE, GEN_FE, GEN_NC];

    /// A vector without the blanks between tags (SET's examples are indented), so that a
    /// mutation can name neighbouring elements.
    fn vector(path: &str) -> String {
        let xml = support::vector(path);
        let mut out = String::with_capacity(xml.len());
        let mut rest = xml.as_str();
        while let Some(i) = rest.find('>') {
            out.push_str(&rest[..=i]);
            rest = &rest[i + 1..];
            let trimmed = rest.trim_start();
            if trimmed.starts_with('<') {
                rest = trimmed;
            }
        }
        out.push_str(rest);
        out
    }

    /// The text with the first `from` replaced by `to` (which must be there).
    fn with(xml: &str, from: &str, to: &str) -> String {
        assert!(xml.contains(from), "{from:?} is not in the document");
        xml.replacen(from, to, 1)
    }

    /// The first element of this name, whole.
    fn element(xml: &str, name: &str) -> String {
        let start = xml
            .find(&format!("<{name}>"))
            .unwrap_or_else(|| panic!("no {name}"));
        let close = format!("</{name}>");
        let end = xml[start..].find(&close).expect("its end") + start + close.len();
        xml[start..end].to_owned()
    }

    /// The text without the first element of this name.
    fn cut(xml: &str, name: &str) -> String {
        with(xml, &element(xml, name), "")
    }

    /// Asserts that `code` passes on the baseline and fails on the mutated text.
    fn breaks(code: &str, baseline: &str, mutated: &str) {
        assert_eq!(support::check(code, baseline), Ok(()), "{code} on the baseline");
        assert!(
            support::check(code, mutated).is_err(),
            "{code} should fail on:\n{mutated}"
        );
    }

    /// Asserts that `code` passes on the mutated text (the rule does not apply or is kept).
    fn keeps(code: &str, mutated: &str) {
        assert_eq!(support::check(code, mutated), Ok(()), "{code}");
    }

    #[test]
    fn every_baseline_keeps_every_rule_of_these_groups() {
        for path in ALL {
            let xml = vector(path);
            for rule in RULES {
                assert_eq!(support::check(rule.code, &xml), Ok(()), "{} on {path}", rule.code);
            }
        }
    }

    #[test]
    fn the_document_type_groups_are_required_and_forbidden_by_type() {
        let fe = vector(GEN_FE);
        let nc = vector(NC);
        let afe = vector(AFE);
        let nre = vector(NRE);
        let cam_fe = element(&fe, "gCamFE");
        let cam_ae = element(&afe, "gCamAE");
        let cam_nc = element(&nc, "gCamNCDE");
        let cam_nre = element(&nre, "gCamNRE");
        let cam_cond = element(&fe, "gCamCond");
        breaks("1350", &fe, &cut(&fe, "gCamFE"));
        breaks(
            "1351",
            &nc,
            &with(&nc, "<gCamNCDE>", &format!("{cam_fe}<gCamNCDE>")),
        );
        breaks("2550", &afe, &cut(&afe, "gCamAE"));
        breaks(
            "2551",
            &fe,
            &with(&fe, "</gCamFE>", &format!("</gCamFE>{cam_ae}")),
        );
        breaks("1450", &nc, &cut(&nc, "gCamNCDE"));
        breaks("1450", &vector(ND), &cut(&vector(ND), "gCamNCDE"));
        breaks(
            "1451",
            &fe,
            &with(&fe, "</gCamFE>", &format!("</gCamFE>{cam_nc}")),
        );
        breaks("2600", &nre, &cut(&nre, "gCamNRE"));
        breaks(
            "2601",
            &fe,
            &with(&fe, "</gCamFE>", &format!("</gCamFE>{cam_nre}")),
        );
        breaks("1500", &fe, &cut(&fe, "gCamCond"));
        breaks("1500", &afe, &cut(&afe, "gCamCond"));
        breaks(
            "1501",
            &nc,
            &with(&nc, "</gCamNCDE>", &format!("</gCamNCDE>{cam_cond}")),
        );
    }

    #[test]
    fn descriptions_must_be_the_manuals() {
        let fe = vector(GEN_FE);
        let set_fe = vector(FE);
        let nc = vector(NC);
        let nre = vector(NRE);
        let afe = vector(AFE);
        for (code, base, from, to) in [
            ("1352", &fe, "Operación presencial", "Operacion presencial"),
            ("1452", &nc, "Recupero de costo", "Recupero de gasto"),
            (
                "2602",
                &nre,
                "Traslado por consignación",
                "Traslado por consignacion",
            ),
            (
                "2603",
                &nre,
                "<dDesRespEmiNR>Emisor de la factura",
                "<dDesRespEmiNR>Empresa transportista",
            ),
            ("1502", &fe, "Contado", "Crédito"),
            ("1502", &afe, "<dDCondOpe>Contado", "<dDCondOpe>Contado."),
            ("1554", &fe, "Efectivo", "Cheque"),
            ("1555", &fe, "<dDMoneTiPag>Guarani", "<dDMoneTiPag>Guaraní"),
            ("1555", &afe, "<dDMoneTiPag>Guarani", "<dDMoneTiPag>US Dollar"),
            ("1702", &set_fe, "<dDCondCred>Plazo", "<dDCondCred>Cuota"),
            ("2552", &afe, "<dDesDepVen>CAPITAL", "<dDesDepVen>CENTRAL"),
            (
                "2561",
                &afe,
                "<dDesDisVen>ASUNCION (DISTRITO)",
                "<dDesDisVen>ASUNCION",
            ),
            (
                "2555",
                &afe,
                "<dDesCiuVen>ASUNCION (DISTRITO)",
                "<dDesCiuVen>LUQUE",
            ),
            ("2556", &afe, "<dDesDepProv>CAPITAL", "<dDesDepProv>Capital"),
            (
                "2558",
                &afe,
                "<dDesDisProv>ASUNCION (DISTRITO)",
                "<dDesDisProv>ASUNCIÓN (DISTRITO)",
            ),
            (
                "2559",
                &afe,
                "<dDesCiuProv>ASUNCION (DISTRITO)",
                "<dDesCiuProv>ASUNCION",
            ),
        ] {
            breaks(code, base, &with(base, from, to));
        }
        // A code outside the table has no description.
        breaks("1452", &nc, &with(&nc, "<iMotEmi>6", "<iMotEmi>9"));
        breaks("2552", &afe, &with(&afe, "<cDepVen>1<", "<cDepVen>99<"));
        breaks("1555", &fe, &with(&fe, "<cMoneTiPag>PYG", "<cMoneTiPag>XXX"));
        // The "other" codes take the issuer's own text, but not an empty one.
        keeps(
            "1352",
            &with(
                &fe,
                "<iIndPres>1</iIndPres><dDesIndPres>Operación presencial",
                "<iIndPres>9</iIndPres><dDesIndPres>Por correo",
            ),
        );
        keeps(
            "1554",
            &with(
                &fe,
                "<iTiPago>1</iTiPago><dDesTiPag>Efectivo",
                "<iTiPago>99</iTiPago><dDesTiPag>Trueque",
            ),
        );
        breaks(
            "1554",
            &fe,
            &with(
                &fe,
                "<iTiPago>1</iTiPago><dDesTiPag>Efectivo",
                "<iTiPago>99</iTiPago><dDesTiPag> ",
            ),
        );
        keeps(
            "2602",
            &with(&nre, "<iMotEmiNR>2</iMotEmiNR>", "<iMotEmiNR>99</iMotEmiNR>\n"),
        );
        // Both of the Manual's spellings of reasons 1 and 11.
        for (code, name) in [
            ("1", "Traslado por ventas"),
            ("1", "Traslado por venta"),
            ("11", "Exhibición o Demostración"),
            ("11", "Exhibición o demostración"),
            ("7", "Traslado entre locales de la empresa"),
        ] {
            let xml = with(
                &nre,
                "<iMotEmiNR>2</iMotEmiNR>",
                &format!("<iMotEmiNR>{code}</iMotEmiNR>"),
            );
            keeps("2602", &with(&xml, "Traslado por consignación", name));
        }
        // Other currencies by SET's table.
        keeps(
            "1555",
            &with(
                &afe,
                "<cMoneTiPag>PYG</cMoneTiPag><dDMoneTiPag>Guarani",
                "<cMoneTiPag>USD</cMoneTiPag><dDMoneTiPag>US Dollar",
            ),
        );
    }

    #[test]
    fn public_procurement_goes_with_b2g_and_is_not_dated_after_the_fe() {
        let fe = vector(GEN_FE);
        let comp = "<gCompPub><dModCont>CD</dModCont><dEntCont>12345</dEntCont><dAnoCont>25</dAnoCont>\
                    <dSecCont>1234567</dSecCont><dFeCodCont>2025-01-10</dFeCodCont></gCompPub>";
        let b2g = with(&fe, "<iTiOpe>1</iTiOpe>", "<iTiOpe>3</iTiOpe>");
        let b2g_comp = with(&b2g, "</dDesIndPres>", &format!("</dDesIndPres>{comp}"));
        breaks("1400", &fe, &b2g);
        keeps("1400", &b2g_comp);
        breaks(
            "1401",
            &fe,
            &with(&fe, "</dDesIndPres>", &format!("</dDesIndPres>{comp}")),
        );
        keeps("1401", &b2g_comp);
        keeps("1402", &b2g_comp);
        keeps("1402", &with(&b2g_comp, "2025-01-10", "2025-01-15"));
        breaks("1402", &fe, &with(&b2g_comp, "2025-01-10", "2025-01-16"));
    }

    struct Seller(&'static str);

    impl Registry for Seller {
        fn taxpayer(&self, ruc: &str) -> Option<Taxpayer> {
            (ruc == "1111111").then(|| Taxpayer {
                name: "Belén Bosco".into(),
                state: self.0.into(),
            })
        }
    }

    #[test]
    fn an_afe_seller_with_a_cedula_or_passport_is_no_active_taxpayer() {
        let afe = vector(AFE);
        assert!(support::check_with("2562", &afe, &Seller("ACT")).is_err());
        assert!(support::check_with("2562", &afe, &Seller("SUS")).is_err());
        let passport = with(
            &afe,
            "<iTipIDVen>1</iTipIDVen><dDTipIDVen>Cédula paraguaya",
            "<iTipIDVen>2</iTipIDVen><dDTipIDVen>Pasaporte",
        );
        assert!(support::check_with("2562", &passport, &Seller("ACT")).is_err());
        for state in ["CAN", "CDE"] {
            assert_eq!(support::check_with("2562", &afe, &Seller(state)), Ok(()));
        }
        let foreign = with(
            &afe,
            "<iTipIDVen>1</iTipIDVen><dDTipIDVen>Cédula paraguaya",
            "<iTipIDVen>3</iTipIDVen><dDTipIDVen>Cédula extranjera",
        );
        assert_eq!(support::check_with("2562", &foreign, &Seller("ACT")), Ok(()));
        keeps("2562", &afe);
    }

    #[test]
    fn the_afe_places_are_related() {
        let afe = vector(AFE);
        // Luque (5946) is a city of district 159, in department 12 (CENTRAL).
        let luque = with(
            &afe,
            "<cCiuVen>1</cCiuVen><dDesCiuVen>ASUNCION (DISTRITO)",
            "<cCiuVen>5946</cCiuVen><dDesCiuVen>LUQUE",
        );
        breaks("2553", &afe, &luque);
        keeps("2555", &luque);
        let district = with(
            &luque,
            "<cDisVen>1</cDisVen><dDesDisVen>ASUNCION (DISTRITO)",
            "<cDisVen>159</cDisVen><dDesDisVen>LUQUE",
        );
        // The city is now in the district, but the district is not in CAPITAL.
        assert!(support::check("2553", &district).is_err());
        let central = with(
            &district,
            "<cDepVen>1</cDepVen><dDesDepVen>CAPITAL",
            "<cDepVen>12</cDepVen><dDesDepVen>CENTRAL",
        );
        keeps("2553", &central);
        keeps("2552", &central);
        keeps("2561", &central);
        // Without a district, the city's district must be in the department.
        keeps(
            "2553",
            &cut(&central, "cDisVen").replacen("<dDesDisVen>LUQUE</dDesDisVen>", "", 1),
        );
        breaks("2553", &afe, &with(&afe, "<cCiuVen>1<", "<cCiuVen>999999<"));
        breaks(
            "2557",
            &afe,
            &with(
                &afe,
                "<cCiuProv>1</cCiuProv><dDesCiuProv>ASUNCION (DISTRITO)",
                "<cCiuProv>5946</cCiuProv><dDesCiuProv>LUQUE",
            ),
        );
        breaks(
            "2557",
            &afe,
            &with(
                &afe,
                "<cDepProv>1</cDepProv><dDesDepProv>CAPITAL",
                "<cDepProv>12</cDepProv><dDesDepProv>CENTRAL",
            ),
        );
    }

    #[test]
    fn the_remision_rules() {
        let nre = vector(NRE);
        let internal = with(
            &with(&nre, "<iMotEmiNR>2</iMotEmiNR>", "<iMotEmiNR>7</iMotEmiNR>"),
            "Traslado por consignación",
            "Traslado entre locales de la empresa",
        );
        breaks("2606", &nre, &internal);
        keeps("2606", &with(&internal, "<dRucRec>80002201", "<dRucRec>80004464"));
        // The month of the invoice may not come after the remisión's (emitted 2019-03-12).
        keeps("2604", &with(&nre, "2019-02-18", "2019-03-31"));
        breaks("2604", &nre, &with(&nre, "2019-02-18", "2019-04-01"));
        breaks("2604", &nre, &with(&nre, "2019-02-18", "2020-01-01"));
        // A transfer for a sale without associated documents needs the invoice's date.
        let sale = with(
            &with(&nre, "<iMotEmiNR>2</iMotEmiNR>", "<iMotEmiNR>1</iMotEmiNR>"),
            "Traslado por consignación",
            "Traslado por venta",
        );
        keeps("2605", &sale);
        keeps("2605", &cut(&sale, "gCamDEAsoc"));
        keeps("2605", &cut(&sale, "dFecEm"));
        breaks("2605", &nre, &cut(&cut(&sale, "gCamDEAsoc"), "dFecEm"));
        keeps("2605", &cut(&cut(&nre, "gCamDEAsoc"), "dFecEm"));
    }

    #[test]
    fn the_condition_of_the_operation() {
        let fe = vector(GEN_FE);
        let set_fe = vector(FE);
        let afe = vector(AFE);
        breaks(
            "1503",
            &afe,
            &with(
                &afe,
                "<iCondOpe>1</iCondOpe><dDCondOpe>Contado",
                "<iCondOpe>2</iCondOpe><dDCondOpe>Crédito",
            ),
        );
        keeps("1503", &set_fe);
        // Cash needs the payments; credit only with an initial payment.
        breaks("1550", &fe, &cut(&fe, "gPaConEIni"));
        let pay = element(&fe, "gPaConEIni");
        let down = with(
            &set_fe,
            "<dPlazoCre>28</dPlazoCre>",
            "<dPlazoCre>28</dPlazoCre><dMonEnt>1000</dMonEnt>",
        );
        breaks("1551", &set_fe, &down);
        keeps("1551", &with(&down, "<gPagCred>", &format!("{pay}<gPagCred>")));
        keeps("1552", &with(&down, "<gPagCred>", &format!("{pay}<gPagCred>")));
        breaks(
            "1552",
            &set_fe,
            &with(&set_fe, "<gPagCred>", &format!("{pay}<gPagCred>")),
        );
        // Bank payments only with a bank operation.
        let bank = with(
            &fe,
            "<iTiPago>1</iTiPago><dDesTiPag>Efectivo",
            "<iTiPago>16</iTiPago><dDesTiPag>Pago bancario",
        );
        breaks("1553", &fe, &bank);
        keeps(
            "1553",
            &with(
                &bank,
                "<iIndPres>1</iIndPres><dDesIndPres>Operación presencial",
                "<iIndPres>5</iIndPres><dDesIndPres>Operación bancaria",
            ),
        );
        keeps("1554", &bank);
        // Exchange rates by currency.
        let usd = with(
            &fe,
            "<cMoneTiPag>PYG</cMoneTiPag><dDMoneTiPag>Guarani",
            "<cMoneTiPag>USD</cMoneTiPag><dDMoneTiPag>US Dollar",
        );
        breaks("1556", &fe, &usd);
        keeps(
            "1556",
            &with(
                &usd,
                "</dDMoneTiPag>",
                "</dDMoneTiPag><dTiCamTiPag>7300</dTiCamTiPag>",
            ),
        );
        keeps("1555", &usd);
        breaks(
            "1557",
            &fe,
            &with(
                &fe,
                "</dDMoneTiPag>",
                "</dDMoneTiPag><dTiCamTiPag>1</dTiCamTiPag>",
            ),
        );
    }

    #[test]
    fn cards_and_cheques() {
        let fe = vector(GEN_FE);
        let card = "<gPagTarCD><iDenTarj>1</iDenTarj><dDesDenTarj>Visa</dDesDenTarj>\
                    <dRUCProTar>80013884</dRUCProTar><dDVProTar>8</dDVProTar><iForProPa>1</iForProPa></gPagTarCD>";
        let cheque = "<gPagCheq><dNumCheq>00001234</dNumCheq><dBcoEmi>Banco X</dBcoEmi></gPagCheq>";
        let by_card = with(
            &fe,
            "<iTiPago>1</iTiPago><dDesTiPag>Efectivo",
            "<iTiPago>3</iTiPago><dDesTiPag>Tarjeta de crédito",
        );
        breaks("1600", &fe, &by_card);
        let with_card = with(&by_card, "</dDMoneTiPag>", &format!("</dDMoneTiPag>{card}"));
        keeps("1600", &with_card);
        keeps("1601", &with_card);
        keeps("1602", &with_card);
        keeps("1604", &with_card);
        breaks(
            "1601",
            &fe,
            &with(&fe, "</dDMoneTiPag>", &format!("</dDMoneTiPag>{card}")),
        );
        breaks(
            "1602",
            &fe,
            &with(&with_card, "<dDesDenTarj>Visa", "<dDesDenTarj>Mastercard"),
        );
        breaks("1604", &fe, &with(&with_card, "<dDVProTar>8", "<dDVProTar>7"));
        keeps("1604", &cut(&with_card, "dDVProTar"));
        let by_cheque = with(
            &fe,
            "<iTiPago>1</iTiPago><dDesTiPag>Efectivo",
            "<iTiPago>2</iTiPago><dDesTiPag>Cheque",
        );
        breaks("1650", &fe, &by_cheque);
        keeps(
            "1650",
            &with(&by_cheque, "</dDMoneTiPag>", &format!("</dDMoneTiPag>{cheque}")),
        );
        keeps(
            "1651",
            &with(&by_cheque, "</dDMoneTiPag>", &format!("</dDMoneTiPag>{cheque}")),
        );
        breaks(
            "1651",
            &fe,
            &with(&fe, "</dDMoneTiPag>", &format!("</dDMoneTiPag>{cheque}")),
        );
    }

    #[test]
    fn credit() {
        let fe = vector(GEN_FE);
        let set_fe = vector(FE);
        breaks(
            "1700",
            &fe,
            &with(
                &fe,
                "<iCondOpe>1</iCondOpe><dDCondOpe>Contado",
                "<iCondOpe>2</iCondOpe><dDCondOpe>Crédito",
            ),
        );
        let cred = element(&set_fe, "gPagCred");
        breaks(
            "1701",
            &fe,
            &with(&fe, "</gPaConEIni>", &format!("</gPaConEIni>{cred}")),
        );
        breaks("1703", &set_fe, &cut(&set_fe, "dPlazoCre"));
        let quota = with(&set_fe, "<iCondCred>1</iCondCred>", "<iCondCred>2</iCondCred>").replacen(
            "<dDCondCred>Plazo",
            "<dDCondCred>Cuota",
            1,
        );
        breaks("1704", &set_fe, &quota);
        breaks("1705", &set_fe, &quota);
        let quotas = with(
            &cut(&quota, "dPlazoCre"),
            "</dDCondCred>",
            "</dDCondCred><dCuotas>1</dCuotas>",
        );
        let instalment = "<gCuotas><cMoneCuo>PYG</cMoneCuo><dDMoneCuo>Guarani</dDMoneCuo><dMonCuota>10</dMonCuota></gCuotas>";
        let quotas = with(&quotas, "</dCuotas>", &format!("</dCuotas>{instalment}"));
        for code in ["1702", "1703", "1704", "1705", "1706", "1750", "1751"] {
            keeps(code, &quotas);
        }
        // Instalments without their group.
        breaks("1750", &quotas, &cut(&quotas, "gCuotas"));
        breaks(
            "1706",
            &set_fe,
            &with(&set_fe, "</dPlazoCre>", "</dPlazoCre><dCuotas>1</dCuotas>"),
        );
        breaks(
            "1751",
            &set_fe,
            &with(&set_fe, "</dPlazoCre>", &format!("</dPlazoCre>{instalment}")),
        );
    }
}
