//! What a KuDE shows, read from the signed DE (`rDE`) and nothing else (SIFEN's rule:
//! nothing may appear that is not in the signed XML, except the legends and the optional logo). Every value
//! is formatted here; `templates/kude.typ` lays the strings out.

use serde::Serialize;

use super::format::{self, amount, cdc_groups, currency_decimals, date, quantity};
use crate::sifen_soap::xml::{self, Element};
use kuatia_application::printables::PrintError;

/// SIFEN's consultation page in production and in test.
const CONSULT_PROD: &str = "https://ekuatia.set.gov.py/consultas/";
const CONSULT_TEST: &str = "https://ekuatia.set.gov.py/consultas-test/";

/// The data `kude.typ` reads (`/data.json`).
#[derive(Debug, Clone, Serialize)]
pub struct KudeData {
    /// "KuDE de Factura Electrónica", ….
    pub title: String,
    /// `iTiDE`: 1 FE, 4 AFE, 5 NCE, 6 NDE, 7 NRE (not sent to the template: see `Page`).
    #[serde(skip)]
    pub doc_type: u8,
    /// The type as printed in the timbrado box ("FACTURA ELECTRÓNICA").
    pub type_caps: String,
    /// Issuer block.
    pub issuer: IssuerBlock,
    /// Timbrado block.
    pub timbrado: String,
    /// Start of the timbrado's validity, `dd/mm/yyyy`.
    pub timbrado_from: String,
    /// `001-001-0000001`.
    pub number: String,
    /// Emission date and time, `dd/mm/yyyy hh:mm:ss`.
    pub emitted_at: String,
    /// Label/value pairs of the operation (condition, currency, …), in order.
    pub operation: Vec<Pair>,
    /// Label/value pairs of the receiver.
    pub receiver: Vec<Pair>,
    /// Extra blocks (associated document, autofactura seller, remisión transport): a title and
    /// its pairs.
    pub blocks: Vec<Block>,
    /// Whether the items carry values (not for a remisión).
    pub valued: bool,
    /// The lines.
    pub items: Vec<ItemRow>,
    /// Totals, when the type has them.
    pub totals: Option<Totals>,
    /// `dInfoFisc` (remisión: the legal text), printed as is.
    pub fiscal_info: Option<String>,
    /// `dInfAdic` (J003), printed as is.
    pub additional_info: Option<String>,
    /// The SIFEN consultation URL.
    pub consult_url: String,
    /// The CDC in 11 groups of four.
    pub cdc: String,
    /// The QR's content (`dCarQR`), for reference; the QR itself is `/qr.svg`.
    pub qr: String,
}

/// The issuer, as the header prints it.
#[derive(Debug, Clone, Serialize)]
pub struct IssuerBlock {
    /// `dNomEmi`.
    pub name: String,
    /// `dNomFanEmi`.
    pub trade_name: Option<String>,
    /// `dRucEm-dDVEmi`.
    pub ruc: String,
    /// `dDirEmi` and number.
    pub address: String,
    /// City and department.
    pub city: String,
    /// `dTelEmi`.
    pub phone: Option<String>,
    /// `dEmailE`.
    pub email: Option<String>,
    /// `cActEco - dDesActEco`, each.
    pub activities: Vec<String>,
    /// `dDenSuc`.
    pub branch: Option<String>,
}

/// A label and its value.
#[derive(Debug, Clone, Serialize)]
pub struct Pair {
    /// Label.
    pub label: String,
    /// Value.
    pub value: String,
}

/// A titled group of pairs.
#[derive(Debug, Clone, Serialize)]
pub struct Block {
    /// Title.
    pub title: String,
    /// Pairs.
    pub pairs: Vec<Pair>,
}

/// One line of the item table.
#[derive(Debug, Clone, Serialize)]
pub struct ItemRow {
    /// `dCodInt`.
    pub code: String,
    /// `dDesProSer`.
    pub description: String,
    /// `dDesUniMed`.
    pub unit: String,
    /// `dCantProSer`.
    pub quantity: String,
    /// `dPUniProSer`.
    pub price: String,
    /// `dDescItem`.
    pub discount: String,
    /// Value in the exempt column.
    pub exempt: String,
    /// Value in the 5 % column.
    pub iva5: String,
    /// Value in the 10 % column.
    pub iva10: String,
}

/// The totals block.
#[derive(Debug, Clone, Serialize)]
pub struct Totals {
    /// Subtotals by class (exentas `dSubExe`, 5 %, 10 %), when the type has them.
    pub by_class: Option<[String; 3]>,
    /// Subtotal of exonerated sales (`dSubExo`), when not zero.
    pub exonerated: Option<String>,
    /// `dTotDesc`, when not zero.
    pub discount: Option<String>,
    /// `dTotGralOpe`, with the currency.
    pub total: String,
    /// `dTotalGs`, when the currency is not PYG.
    pub total_gs: Option<String>,
    /// `dIVA5`, `dIVA10`, `dTotIVA`, when the type has IVA.
    pub iva: Option<[String; 3]>,
    /// Currency code (`cMoneOpe`).
    pub currency: String,
}

fn pair(label: &str, value: impl Into<String>) -> Pair {
    Pair {
        label: label.to_owned(),
        value: value.into(),
    }
}

/// The text of the element at `path` (local names separated by `/`), below `from`.
fn text<'a>(from: &'a Element, path: &str) -> Option<&'a str> {
    let mut at = from;
    for step in path.split('/') {
        at = at.child(step)?;
    }
    let t = at.text.trim();
    (!t.is_empty()).then_some(t)
}

fn owned(from: &Element, path: &str) -> Option<String> {
    text(from, path).map(str::to_owned)
}

/// The KuDE's title and the type in capitals, by `iTiDE` (MT §13.3).
fn titles(doc_type: u8) -> Result<(&'static str, &'static str), PrintError> {
    Ok(match doc_type {
        1 => ("KuDE de Factura Electrónica", "FACTURA ELECTRÓNICA"),
        4 => ("KuDE de Autofactura Electrónica", "AUTOFACTURA ELECTRÓNICA"),
        5 => (
            "KuDE de Nota de Crédito Electrónica",
            "NOTA DE CRÉDITO ELECTRÓNICA",
        ),
        6 => ("KuDE de Nota de Débito Electrónica", "NOTA DE DÉBITO ELECTRÓNICA"),
        7 => (
            "KuDE de Nota de Remisión Electrónica",
            "NOTA DE REMISIÓN ELECTRÓNICA",
        ),
        other => {
            return Err(PrintError::Input(format!("iTiDE {other} has no KuDE model")));
        }
    })
}

fn address(street: Option<&str>, number: Option<&str>) -> String {
    match (street, number) {
        (Some(s), Some(n)) if n != "0" => format!("{s} {n}"),
        (Some(s), _) => s.to_owned(),
        (None, _) => String::new(),
    }
}

fn join_some(parts: &[Option<&str>], sep: &str) -> String {
    parts
        .iter()
        .flatten()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(sep)
}

/// Reads a signed `rDE` into what its KuDE prints.
pub fn read(signed_xml: &[u8]) -> Result<KudeData, PrintError> {
    let text_xml = std::str::from_utf8(signed_xml)
        .map_err(|_| PrintError::Input("the signed XML is not UTF-8".into()))?;
    let root = xml::parse(text_xml).map_err(|e| PrintError::Input(format!("the signed XML: {e}")))?;
    let de = root
        .find("DE")
        .ok_or_else(|| PrintError::Input("no DE element in the signed XML".into()))?;
    let cdc = de
        .attr("Id")
        .ok_or_else(|| PrintError::Input("the DE has no Id (CDC)".into()))?
        .trim()
        .to_owned();
    let qr = root
        .find("dCarQR")
        .map(|e| e.text.trim().to_owned())
        .filter(|q| !q.is_empty())
        .ok_or_else(|| PrintError::Input("no gCamFuFD/dCarQR in the signed XML".into()))?;
    let missing = |what: &str| PrintError::Input(format!("the DE has no {what}"));

    let timb = de.child("gTimb").ok_or_else(|| missing("gTimb"))?;
    let doc_type: u8 = text(timb, "iTiDE")
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| missing("iTiDE"))?;
    let (title, type_caps) = titles(doc_type)?;
    let general = de.child("gDatGralOpe").ok_or_else(|| missing("gDatGralOpe"))?;
    let emis = general.child("gEmis").ok_or_else(|| missing("gEmis"))?;
    let specific = de.child("gDtipDE");

    let issuer = IssuerBlock {
        name: owned(emis, "dNomEmi").unwrap_or_default(),
        trade_name: owned(emis, "dNomFanEmi"),
        ruc: format!(
            "{}-{}",
            text(emis, "dRucEm").unwrap_or_default(),
            text(emis, "dDVEmi").unwrap_or_default()
        ),
        address: address(text(emis, "dDirEmi"), text(emis, "dNumCas")),
        city: join_some(&[text(emis, "dDesCiuEmi"), text(emis, "dDesDepEmi")], " - "),
        phone: owned(emis, "dTelEmi"),
        email: owned(emis, "dEmailE"),
        activities: emis
            .children_named("gActEco")
            .map(|a| join_some(&[text(a, "cActEco"), text(a, "dDesActEco")], " - "))
            .collect(),
        branch: owned(emis, "dDenSuc"),
    };

    let currency = general
        .child("gOpeCom")
        .and_then(|o| owned(o, "cMoneOpe"))
        .unwrap_or_else(|| "PYG".to_owned());
    let decimals = currency_decimals(&currency);

    // The operation: emission, condition (and instalments), currency, exchange rate, type.
    let mut operation = vec![pair(
        "Fecha y hora de emisión",
        date(text(general, "dFeEmiDE").unwrap_or_default()),
    )];
    if let Some(cond) = specific.and_then(|s| s.child("gCamCond")) {
        operation.push(pair(
            "Condición de venta",
            text(cond, "dDCondOpe").unwrap_or_default(),
        ));
        if let Some(credit) = cond.child("gPagCred") {
            if let Some(term) = text(credit, "dPlazoCre") {
                operation.push(pair("Plazo", term));
            }
            if let Some(n) = text(credit, "dCuotas") {
                operation.push(pair("Cantidad de cuotas", n));
            }
        }
    }
    if let Some(com) = general.child("gOpeCom") {
        operation.push(pair(
            "Moneda",
            join_some(&[text(com, "cMoneOpe"), text(com, "dDesMoneOpe")], " - "),
        ));
        if let Some(rate) = text(com, "dTiCam") {
            operation.push(pair("Tipo de cambio", format::quantity(rate)));
        }
        if let Some(kind) = text(com, "dDesTipTra") {
            operation.push(pair("Tipo de transacción", kind));
        }
    }
    if let Some(pres) = specific
        .and_then(|s| s.child("gCamFE"))
        .and_then(|f| text(f, "dDesIndPres"))
    {
        operation.push(pair("Indicador de presencia", pres));
    }

    // The receiver.
    let mut receiver = Vec::new();
    if let Some(rec) = general.child("gDatRec") {
        receiver.push(pair(
            "Nombre o razón social",
            text(rec, "dNomRec").unwrap_or_default(),
        ));
        if let Some(ruc) = text(rec, "dRucRec") {
            let dv = text(rec, "dDVRec").unwrap_or_default();
            receiver.push(pair("RUC", format!("{ruc}-{dv}")));
        } else if let Some(id) = text(rec, "dNumIDRec") {
            let kind = text(rec, "dDTipIDRec").unwrap_or("Documento");
            receiver.push(pair(kind, id));
        }
        let place = address(text(rec, "dDirRec"), text(rec, "dNumCasRec"));
        if !place.is_empty() {
            receiver.push(pair("Dirección", place));
        }
        let city = join_some(&[text(rec, "dDesCiuRec"), text(rec, "dDesDepRec")], " - ");
        if !city.is_empty() {
            receiver.push(pair("Ciudad", city));
        }
        if let Some(phone) = text(rec, "dTelRec") {
            receiver.push(pair("Teléfono", phone));
        }
        if let Some(email) = text(rec, "dEmailRec") {
            receiver.push(pair("Correo electrónico", email));
        }
    }

    let mut blocks = Vec::new();
    // Notes: the reason; notes and autofacturas: the associated document.
    if let Some(note) = specific.and_then(|s| s.child("gCamNCDE"))
        && let Some(reason) = text(note, "dDesMotEmi")
    {
        blocks.push(Block {
            title: "Motivo de emisión".into(),
            pairs: vec![pair("Motivo", reason)],
        });
    }
    for asoc in de.children_named("gCamDEAsoc") {
        let mut pairs = vec![pair(
            "Tipo de documento asociado",
            text(asoc, "dDesTipDocAso").unwrap_or_default(),
        )];
        if let Some(cdc) = text(asoc, "dCdCDERef") {
            pairs.push(pair("CDC", cdc_groups(cdc)));
        }
        if let Some(timbrado) = text(asoc, "dNTimDI") {
            pairs.push(pair("Timbrado", timbrado));
            pairs.push(pair(
                "Número",
                join_some(
                    &[
                        text(asoc, "dEstDocAso"),
                        text(asoc, "dPExpDocAso"),
                        text(asoc, "dNumDocAso"),
                    ],
                    "-",
                ),
            ));
        }
        if let Some(kind) = text(asoc, "dDTipoDocAso") {
            pairs.push(pair("Tipo de documento impreso", kind));
        }
        if let Some(at) = text(asoc, "dFecEmiDI") {
            pairs.push(pair("Fecha de emisión", date(at)));
        }
        if let Some(kind) = text(asoc, "dDesTipCons") {
            pairs.push(pair("Constancia", kind));
        }
        if let Some(n) = text(asoc, "dNumCons") {
            pairs.push(pair("Número de constancia", n));
        }
        if let Some(n) = text(asoc, "dNumControl") {
            pairs.push(pair("Número de control", n));
        }
        blocks.push(Block {
            title: "Documento asociado".into(),
            pairs,
        });
    }
    // Autofactura: the seller.
    if let Some(ae) = specific.and_then(|s| s.child("gCamAE")) {
        let mut pairs = vec![
            pair(
                "Naturaleza del vendedor",
                text(ae, "dDesNatVen").unwrap_or_default(),
            ),
            pair("Nombre", text(ae, "dNomVen").unwrap_or_default()),
            pair(
                text(ae, "dDTipIDVen").unwrap_or("Documento"),
                text(ae, "dNumIDVen").unwrap_or_default(),
            ),
            pair("Dirección", address(text(ae, "dDirVen"), text(ae, "dNumCasVen"))),
        ];
        let city = join_some(&[text(ae, "dDesCiuVen"), text(ae, "dDesDepVen")], " - ");
        if !city.is_empty() {
            pairs.push(pair("Ciudad", city));
        }
        if let Some(place) = text(ae, "dDirProv") {
            pairs.push(pair(
                "Lugar de la transacción",
                join_some(
                    &[Some(place), text(ae, "dDesCiuProv"), text(ae, "dDesDepProv")],
                    " - ",
                ),
            ));
        }
        blocks.push(Block {
            title: "Datos del vendedor".into(),
            pairs,
        });
    }
    // Remisión: motive, responsible, transport.
    if let Some(nr) = specific.and_then(|s| s.child("gCamNRE")) {
        let mut pairs = vec![pair("Motivo", text(nr, "dDesMotEmiNR").unwrap_or_default())];
        if let Some(resp) = text(nr, "dDesRespEmiNR") {
            pairs.push(pair("Responsable de la emisión", resp));
        }
        if let Some(km) = text(nr, "dKmR") {
            pairs.push(pair("Kilómetros estimados", km));
        }
        blocks.push(Block {
            title: "Datos de la remisión".into(),
            pairs,
        });
    }
    if let Some(tr) = specific.and_then(|s| s.child("gTransp")) {
        let mut pairs = Vec::new();
        for (label, path) in [
            ("Tipo de transporte", "dDesTipTrans"),
            ("Modalidad", "dDesModTrans"),
        ] {
            if let Some(v) = text(tr, path) {
                pairs.push(pair(label, v));
            }
        }
        if let Some(v) = text(tr, "dIniTras") {
            pairs.push(pair("Inicio del traslado", date(v)));
        }
        if let Some(v) = text(tr, "dFinTras") {
            pairs.push(pair("Fin del traslado", date(v)));
        }
        if let Some(sal) = tr.child("gCamSal") {
            pairs.push(pair(
                "Salida",
                join_some(
                    &[
                        Some(address(text(sal, "dDirLocSal"), text(sal, "dNumCasSal")).as_str()),
                        text(sal, "dDesCiuSal"),
                    ],
                    " - ",
                ),
            ));
        }
        for ent in tr.children_named("gCamEnt") {
            pairs.push(pair(
                "Entrega",
                join_some(
                    &[
                        Some(address(text(ent, "dDirLocEnt"), text(ent, "dNumCasEnt")).as_str()),
                        text(ent, "dDesCiuEnt"),
                    ],
                    " - ",
                ),
            ));
        }
        for veh in tr.children_named("gVehTras") {
            pairs.push(pair(
                "Vehículo",
                join_some(
                    &[
                        text(veh, "dTiVehTras"),
                        text(veh, "dMarVeh"),
                        text(veh, "dNroMatVeh"),
                        text(veh, "dNroIDVeh"),
                        text(veh, "dNroVuelo"),
                    ],
                    " ",
                ),
            ));
        }
        if let Some(carrier) = tr.child("gCamTrans") {
            if let Some(name) = text(carrier, "dNomTrans") {
                let id = match text(carrier, "dRucTrans") {
                    Some(ruc) => format!("RUC {ruc}-{}", text(carrier, "dDVTrans").unwrap_or_default()),
                    None => text(carrier, "dNumIDTrans").unwrap_or_default().to_owned(),
                };
                pairs.push(pair("Transportista", join_some(&[Some(name), Some(&id)], " - ")));
            }
            if let Some(driver) = text(carrier, "dNomChof") {
                pairs.push(pair(
                    "Chofer",
                    join_some(&[Some(driver), text(carrier, "dNumIDChof")], " - "),
                ));
            }
        }
        if !pairs.is_empty() {
            blocks.push(Block {
                title: "Datos del traslado".into(),
                pairs,
            });
        }
    }

    // Items.
    let mut valued = false;
    let items = specific
        .map(|s| {
            s.children_named("gCamItem")
                .map(|item| {
                    let value = item.child("gValorItem");
                    valued |= value.is_some();
                    let total = value
                        .and_then(|v| text(v, "gValorRestaItem/dTotOpeItem"))
                        .unwrap_or("0");
                    let (mut exempt, mut iva5, mut iva10) = (String::new(), String::new(), String::new());
                    if value.is_some() {
                        match item.child("gCamIVA") {
                            Some(iva) => {
                                let rate = text(iva, "dTasaIVA").unwrap_or("0");
                                let affected = text(iva, "iAfecIVA").unwrap_or("1");
                                let taxed = match (
                                    text(iva, "dBasGravIVA")
                                        .and_then(|b| b.parse::<rust_decimal::Decimal>().ok()),
                                    text(iva, "dLiqIVAItem")
                                        .and_then(|b| b.parse::<rust_decimal::Decimal>().ok()),
                                ) {
                                    (Some(b), Some(l)) => b + l,
                                    _ => total.parse().unwrap_or_default(),
                                };
                                let whole: rust_decimal::Decimal = total.parse().unwrap_or_default();
                                let slot = match rate {
                                    "5" => &mut iva5,
                                    "10" => &mut iva10,
                                    _ => &mut exempt,
                                };
                                match affected {
                                    // Exonerado, exento: all of it in the exempt column.
                                    "2" | "3" => exempt = amount(total, decimals),
                                    // Gravado parcial: the taxed part in its rate's column, the
                                    // rest exempt.
                                    "4" => {
                                        *slot = format::amount_of(taxed, decimals);
                                        exempt = format::amount_of(whole - taxed, decimals);
                                    }
                                    _ => *slot = amount(total, decimals),
                                }
                            }
                            // No IVA (autofactura): the value, untaxed.
                            None => exempt = amount(total, decimals),
                        }
                    }
                    ItemRow {
                        code: owned(item, "dCodInt").unwrap_or_default(),
                        description: owned(item, "dDesProSer").unwrap_or_default(),
                        unit: owned(item, "dDesUniMed").unwrap_or_default(),
                        quantity: quantity(text(item, "dCantProSer").unwrap_or_default()),
                        price: value
                            .and_then(|v| text(v, "dPUniProSer"))
                            .map(|p| amount_or_quantity(p, decimals))
                            .unwrap_or_default(),
                        discount: value
                            .and_then(|v| text(v, "gValorRestaItem/dDescItem"))
                            .map(|d| amount(d, decimals))
                            .unwrap_or_default(),
                        exempt,
                        iva5,
                        iva10,
                    }
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();

    let totals = de.child("gTotSub").map(|t| {
        let get = |name: &str| text(t, name).map(|v| amount(v, decimals));
        let zero = || amount("0", decimals);
        let has_classes = ["dSub10", "dSub5", "dSubExe", "dSubExo"]
            .iter()
            .any(|name| t.child(name).is_some());
        // MT §13.4.3: "Exentas" is F002 (dSubExe) alone; exonerated sales (F003, dSubExo) are
        // not exempt ones and have their own line when there are any.
        let exempt = get("dSubExe").unwrap_or_else(zero);
        let exonerated = text(t, "dSubExo")
            .filter(|v| v.parse::<rust_decimal::Decimal>().is_ok_and(|d| !d.is_zero()))
            .map(|v| amount(v, decimals));
        Totals {
            exonerated,
            by_class: has_classes.then(|| {
                [
                    exempt,
                    get("dSub5").unwrap_or_else(zero),
                    get("dSub10").unwrap_or_else(zero),
                ]
            }),
            discount: text(t, "dTotDesc")
                .filter(|d| d.parse::<rust_decimal::Decimal>().is_ok_and(|d| !d.is_zero()))
                .map(|d| amount(d, decimals)),
            total: get("dTotGralOpe").or_else(|| get("dTotOpe")).unwrap_or_else(zero),
            total_gs: text(t, "dTotalGs").map(|v| amount(v, 0)),
            iva: t.child("dTotIVA").map(|_| {
                [
                    get("dIVA5").unwrap_or_else(zero),
                    get("dIVA10").unwrap_or_else(zero),
                    get("dTotIVA").unwrap_or_else(zero),
                ]
            }),
            currency: currency.clone(),
        }
    });

    let consult_url = if qr.contains("consultas-test") {
        CONSULT_TEST
    } else {
        CONSULT_PROD
    };
    Ok(KudeData {
        title: title.to_owned(),
        doc_type,
        type_caps: type_caps.to_owned(),
        issuer,
        timbrado: owned(timb, "dNumTim").unwrap_or_default(),
        timbrado_from: date(text(timb, "dFeIniT").unwrap_or_default()),
        number: join_some(
            &[text(timb, "dEst"), text(timb, "dPunExp"), text(timb, "dNumDoc")],
            "-",
        ),
        emitted_at: date(text(general, "dFeEmiDE").unwrap_or_default()),
        operation,
        receiver,
        blocks,
        valued,
        items,
        totals,
        fiscal_info: de.find("dInfoFisc").map(|e| e.text.trim().to_owned()),
        additional_info: de.find("dInfAdic").map(|e| e.text.trim().to_owned()),
        consult_url: consult_url.to_owned(),
        cdc: cdc_groups(&cdc),
        qr,
    })
}

/// A unit price: whole guaraníes print as amounts, fractions keep their decimals.
fn amount_or_quantity(text: &str, decimals: u32) -> String {
    match text.parse::<rust_decimal::Decimal>() {
        Ok(v) if v.fract().is_zero() || decimals > 0 => format::amount_of(v, decimals),
        Ok(v) => format::quantity_of(v),
        Err(_) => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FE: &str = include_str!("../sifen_sim/fixtures/fe-signed-selfsigned-qr.xml");

    #[test]
    fn the_sample_invoice_reads_into_every_mandatory_field() {
        let k = read(FE.as_bytes()).expect("read");
        assert_eq!(k.title, "KuDE de Factura Electrónica");
        assert_eq!(k.issuer.ruc, "80069563-1");
        assert_eq!(k.timbrado, "12558946");
        assert_eq!(k.timbrado_from, "25/08/2022");
        assert_eq!(k.number, "001-001-0000001");
        assert_eq!(k.cdc, "0180 0695 6310 0100 1000 0001 2202 5011 5112 3456 7899");
        assert!(k.consult_url.ends_with("consultas-test/"));
        assert_eq!(k.items.len(), 2);
        assert_eq!(k.items[0].iva10, "110.000");
        assert_eq!(k.items[1].iva5, "55.000");
        assert_eq!(k.items[1].price, "27.500");
        let t = k.totals.expect("totals");
        assert_eq!(t.total, "165.000");
        assert_eq!(t.iva, Some(["2.619".into(), "10.000".into(), "12.619".into()]));
        assert!(k.qr.starts_with("https://ekuatia.set.gov.py/consultas-test/qr?nVersion=150&Id="));
        assert!(k.receiver.iter().any(|p| p.value == "80013884-8"));
    }

    /// MT §13.4.3: "Subtotal exentas" is dSubExe alone; an exonerated-only invoice shows 0 there
    /// and its exonerated sales on their own line.
    #[test]
    fn exonerated_sales_are_not_printed_as_exempt() {
        let exonerated_only = FE.replace(
            "<dSubExe>0</dSubExe><dSubExo>0</dSubExo><dSub5>55000</dSub5><dSub10>110000</dSub10>",
            "<dSubExe>0</dSubExe><dSubExo>3600000</dSubExo><dSub5>0</dSub5><dSub10>0</dSub10>",
        );
        assert_ne!(exonerated_only, FE);
        let t = read(exonerated_only.as_bytes())
            .expect("read")
            .totals
            .expect("totals");
        assert_eq!(t.by_class, Some(["0".into(), "0".into(), "0".into()]));
        assert_eq!(t.exonerated.as_deref(), Some("3.600.000"));
        let both = FE.replace(
            "<dSubExe>0</dSubExe><dSubExo>0</dSubExo>",
            "<dSubExe>1500</dSubExe><dSubExo>2000</dSubExo>",
        );
        let t = read(both.as_bytes()).expect("read").totals.expect("totals");
        assert_eq!(t.by_class.expect("classes")[0], "1.500");
        assert_eq!(t.exonerated.as_deref(), Some("2.000"));
        // None exonerated: no such line.
        assert_eq!(
            read(FE.as_bytes())
                .expect("read")
                .totals
                .expect("totals")
                .exonerated,
            None
        );
    }

    #[test]
    fn a_document_without_a_qr_is_refused() {
        let without = FE
            .replace("<dCarQR>", "<dOther>")
            .replace("</dCarQR>", "</dOther>");
        assert!(matches!(read(without.as_bytes()), Err(PrintError::Input(_))));
        assert!(matches!(read(b"not xml"), Err(PrintError::Input(_))));
    }
}
