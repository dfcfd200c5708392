//! Rules of §12.4 groups A, B and C (signed fields, emission, timbrado): see the crate's documentation.
//!
//! 1000, 1001, 1003, 1004 and 1005 (CDC, signing time, late transmission) are checked by the
//! simulator's core.

use crate::{Ctx, NotChecked, NumberKey, Rule, Timbrado};
use chrono::NaiveDate;

/// The rules checked here.
pub(crate) const RULES: &[Rule] = &[
    Rule {
        code: "1002",
        check: rule_1002,
    },
    Rule {
        code: "1050",
        check: rule_1050,
    },
    Rule {
        code: "1051",
        check: rule_1051,
    },
    Rule {
        code: "1100",
        check: rule_1100,
    },
    Rule {
        code: "1103",
        check: rule_1103,
    },
    Rule {
        code: "1107",
        check: rule_1107,
    },
    Rule {
        code: "1108",
        check: rule_1108,
    },
];

/// The rules of these groups not checked here, and why.
pub(crate) const NOT_CHECKED: &[NotChecked] = &[
    NotChecked {
        code: "1101",
        why: "needs Marangatu's timbrados: whether a number is the issuer's and for which DE types (the registry's None means no data, not \"not the issuer's\")",
    },
    NotChecked {
        code: "1102",
        why: "needs the timbrado's medium of generation in Marangatu",
    },
    NotChecked {
        code: "1104",
        why: "needs the timbrado's state in Marangatu (proposed: a state on Registry::timbrado)",
    },
    NotChecked {
        code: "1105",
        why: "needs the establishments authorised by the timbrado in Marangatu",
    },
    NotChecked {
        code: "1106",
        why: "needs the points of expedition authorised by the timbrado in Marangatu",
    },
    NotChecked {
        code: "1110",
        why: "needs the series the issuer has used before and when each started (SIFEN's history of series)",
    },
];

/// `dRucEm`, the issuer's RUC without DV.
fn issuer_ruc<'a>(ctx: &Ctx<'a>) -> Option<&'a str> {
    ctx.text("gDatGralOpe/gEmis/dRucEm")
}

/// The timbrado SIFEN holds for the DE's `dRucEm` and `dNumTim`, when it has one.
fn registered_timbrado(ctx: &Ctx<'_>) -> Option<Timbrado> {
    let ruc = issuer_ruc(ctx)?;
    let number = ctx.text("gTimb/dNumTim")?;
    ctx.facts.registry.timbrado(ruc, number)
}

/// A date (`AAAA-MM-DD`) at a path.
fn date_at(ctx: &Ctx<'_>, path: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(ctx.text(path)?, "%Y-%m-%d").ok()
}

/// The date part of `dFeEmiDE` (`AAAA-MM-DDThh:mm:ss`).
pub(crate) fn emission_date(ctx: &Ctx<'_>) -> Option<NaiveDate> {
    let text = ctx.text("gDatGralOpe/dFeEmiDE")?;
    NaiveDate::parse_from_str(text.get(..10)?, "%Y-%m-%d").ok()
}

/// 1002: another DE was approved with the same type, timbrado, number, establishment, point and
/// series (the registry answers for the issuer's RUC).
fn rule_1002(ctx: &Ctx<'_>) -> Result<(), String> {
    let Some(ruc) = issuer_ruc(ctx) else { return Ok(()) };
    let field = |path: &str| ctx.text(path).map(str::to_owned);
    let (Some(doc_type), Some(timbrado), Some(establishment), Some(point), Some(number)) = (
        field("gTimb/iTiDE"),
        field("gTimb/dNumTim"),
        field("gTimb/dEst"),
        field("gTimb/dPunExp"),
        field("gTimb/dNumDoc"),
    ) else {
        return Ok(());
    };
    let key = NumberKey {
        doc_type,
        timbrado,
        establishment,
        point,
        number,
        series: field("gTimb/dSerieNum"),
    };
    if ctx.facts.registry.approved_with_number(ruc, &key) {
        return Err(format!(
            "a DE type {} with timbrado {} number {}-{}-{}{} is already approved",
            key.doc_type,
            key.timbrado,
            key.establishment,
            key.point,
            key.number,
            key.series
                .as_deref()
                .map(|s| format!(" series {s}"))
                .unwrap_or_default()
        ));
    }
    Ok(())
}

/// 1050: contingency emission (iTipEmi 2) is not allowed in this stage.
fn rule_1050(ctx: &Ctx<'_>) -> Result<(), String> {
    match ctx.text("gOpeDE/iTipEmi") {
        Some("2") => Err("iTipEmi 2 (contingency) is not allowed".into()),
        _ => Ok(()),
    }
}

/// 1051: dDesTipEmi is the description of iTipEmi (B003: 1 "Normal", 2 "Contingencia").
fn rule_1051(ctx: &Ctx<'_>) -> Result<(), String> {
    let Some(code) = ctx.text("gOpeDE/iTipEmi") else {
        return Ok(());
    };
    let expected = match code {
        "1" => "Normal",
        "2" => "Contingencia",
        _ => return Err(format!("iTipEmi {code} has no description")),
    };
    described(
        ctx.text("gOpeDE/dDesTipEmi"),
        expected,
        "dDesTipEmi",
        "iTipEmi",
        code,
    )
}

/// 1100: dDesTiDE is the description of iTiDE (C003; 9 and 10 are only in the XSD).
fn rule_1100(ctx: &Ctx<'_>) -> Result<(), String> {
    let Some(code) = ctx.text("gTimb/iTiDE") else {
        return Ok(());
    };
    let expected = match code {
        "1" => "Factura electrónica",
        "2" => "Factura electrónica de exportación",
        "3" => "Factura electrónica de importación",
        "4" => "Autofactura electrónica",
        "5" => "Nota de crédito electrónica",
        "6" => "Nota de débito electrónica",
        "7" => "Nota de remisión electrónica",
        "8" => "Comprobante de retención electrónico",
        "9" => "Boleta de venta electrónica",
        "10" => "Boleta resimple electrónica",
        _ => return Err(format!("iTiDE {code} has no description")),
    };
    described(ctx.text("gTimb/dDesTiDE"), expected, "dDesTiDE", "iTiDE", code)
}

/// `Err` unless a description is exactly the expected one.
pub(crate) fn described(
    found: Option<&str>,
    expected: &str,
    field: &str,
    code_field: &str,
    code: &str,
) -> Result<(), String> {
    match found {
        Some(text) if text == expected => Ok(()),
        Some(text) => Err(format!(
            "{field} \"{text}\" is not \"{expected}\" ({code_field} {code})"
        )),
        None => Err(format!(
            "{field} is missing ({code_field} {code} is \"{expected}\")"
        )),
    }
}

/// 1103: the emission date (D002) is within the timbrado's validity (C008–C009). The dates are
/// SIFEN's when the registry has the timbrado (rules 1107/1108 hold the XML's to them), else the
/// XML's own dFeIniT and dFeFinT.
fn rule_1103(ctx: &Ctx<'_>) -> Result<(), String> {
    let Some(emitted) = emission_date(ctx) else {
        return Ok(());
    };
    let (start, end) = match registered_timbrado(ctx) {
        Some(t) => (Some(t.start), t.end),
        None => (date_at(ctx, "gTimb/dFeIniT"), date_at(ctx, "gTimb/dFeFinT")),
    };
    if let Some(start) = start.filter(|s| emitted < *s) {
        return Err(format!(
            "dFeEmiDE {emitted} is before the timbrado's start {start}"
        ));
    }
    if let Some(end) = end.filter(|e| emitted > *e) {
        return Err(format!("dFeEmiDE {emitted} is after the timbrado's end {end}"));
    }
    Ok(())
}

/// 1107: dFeIniT is the start of the timbrado SIFEN holds.
fn rule_1107(ctx: &Ctx<'_>) -> Result<(), String> {
    let Some(timbrado) = registered_timbrado(ctx) else {
        return Ok(());
    };
    match ctx.text("gTimb/dFeIniT") {
        Some(text) if NaiveDate::parse_from_str(text, "%Y-%m-%d").ok() == Some(timbrado.start) => Ok(()),
        Some(text) => Err(format!(
            "dFeIniT {text} is not the timbrado's start {}",
            timbrado.start
        )),
        None => Ok(()),
    }
}

/// 1108: dFeFinT, when written, is the end of the timbrado SIFEN holds (a timbrado without an
/// end has no dFeFinT to state).
fn rule_1108(ctx: &Ctx<'_>) -> Result<(), String> {
    let Some(timbrado) = registered_timbrado(ctx) else {
        return Ok(());
    };
    let Some(text) = ctx.text("gTimb/dFeFinT") else {
        return Ok(());
    };
    let written = NaiveDate::parse_from_str(text, "%Y-%m-%d").ok();
    match timbrado.end {
        Some(end) if written == Some(end) => Ok(()),
        Some(end) => Err(format!("dFeFinT {text} is not the timbrado's end {end}")),
        None => Err(format!("dFeFinT {text} is written but the timbrado has no end")),
    }
}

#[cfg(test)]
mod tests {
    use crate::tests::support;
    use crate::{NumberKey, Registry, Timbrado};
    use chrono::NaiveDate;

    const FE: &str = "set-examples-2019/FE_v150_20190910.xml";
    const ND: &str = "set-examples-2019/ND_v150_20190910.xml";
    const GEN_FE: &str = "generated/fe-signed-selfsigned-qr.xml";

    fn mutated(path: &str, from: &str, to: &str) -> (String, String) {
        let base = support::vector(path);
        assert!(base.contains(from), "{path} has no {from:?}");
        let broken = base.replacen(from, to, 1);
        (base, broken)
    }

    #[test]
    fn each_rule_holds_on_its_baseline_and_fails_on_a_mutation() {
        let cases: &[(&str, &str, &str, &str)] = &[
            ("1050", FE, "<iTipEmi>1</iTipEmi>", "<iTipEmi>2</iTipEmi>"),
            (
                "1051",
                FE,
                "<dDesTipEmi>Normal</dDesTipEmi>",
                "<dDesTipEmi>normal</dDesTipEmi>",
            ),
            ("1051", GEN_FE, "<iTipEmi>1</iTipEmi>", "<iTipEmi>2</iTipEmi>"),
            (
                "1100",
                FE,
                "<dDesTiDE>Factura electrónica</dDesTiDE>",
                "<dDesTiDE>Factura electronica</dDesTiDE>",
            ),
            ("1100", GEN_FE, "<iTiDE>1</iTiDE>", "<iTiDE>5</iTiDE>"),
            (
                "1103",
                FE,
                "<dFeIniT>2018-10-12</dFeIniT>",
                "<dFeIniT>2018-12-19</dFeIniT>",
            ),
            (
                "1103",
                ND,
                "<dFeFinT>2019-09-30</dFeFinT>",
                "<dFeFinT>2019-04-08</dFeFinT>",
            ),
        ];
        for (code, path, from, to) in cases {
            let (base, broken) = mutated(path, from, to);
            assert!(support::check(code, &base).is_ok(), "{code} on {path}");
            assert!(
                support::check(code, &broken).is_err(),
                "{code} on {path} with {to}"
            );
        }
    }

    /// A registry with one timbrado and one approved number.
    struct Known {
        timbrado: Timbrado,
        approved: NumberKey,
    }

    impl Registry for Known {
        fn approved_with_number(&self, ruc: &str, key: &NumberKey) -> bool {
            ruc == "80013884" && *key == self.approved
        }
        fn timbrado(&self, ruc: &str, number: &str) -> Option<Timbrado> {
            (ruc == "80013884" && number == "12557209").then(|| self.timbrado.clone())
        }
    }

    fn day(text: &str) -> NaiveDate {
        NaiveDate::parse_from_str(text, "%Y-%m-%d").unwrap()
    }

    fn known(start: &str, end: Option<&str>, number: &str) -> Known {
        Known {
            timbrado: Timbrado {
                start: day(start),
                end: end.map(day),
            },
            approved: NumberKey {
                doc_type: "1".into(),
                timbrado: "12557209".into(),
                establishment: "001".into(),
                point: "001".into(),
                number: number.into(),
                series: None,
            },
        }
    }

    #[test]
    fn registry_rules_read_the_timbrado_and_the_approved_numbers() {
        let fe = support::vector(FE);
        let right = known("2018-10-12", None, "1234565");
        for code in ["1002", "1103", "1107", "1108"] {
            assert!(support::check_with(code, &fe, &right).is_ok(), "{code}");
        }
        // 1002: the same type, timbrado, establishment, point and number was approved.
        assert!(support::check_with("1002", &fe, &known("2018-10-12", None, "1234564")).is_err());
        let with_series = fe.replacen(
            "<!--<dSerieNum>AA</dSerieNum>!-->",
            "<dSerieNum>AA</dSerieNum>",
            1,
        );
        assert!(support::check_with("1002", &with_series, &known("2018-10-12", None, "1234564")).is_ok());
        // 1107: the XML's start is not SIFEN's.
        assert!(support::check_with("1107", &fe, &known("2018-10-13", None, "1")).is_err());
        // 1103: SIFEN's validity ended before the emission, whatever the XML says.
        assert!(support::check_with("1103", &fe, &known("2018-10-12", Some("2018-12-17"), "1")).is_err());
        assert!(support::check_with("1103", &fe, &known("2018-10-12", Some("2018-12-18"), "1")).is_ok());
        // 1108: the XML states an end the timbrado does not have, or another one.
        let nd_registry = |end: Option<&str>| Known {
            timbrado: Timbrado {
                start: day("2018-09-19"),
                end: end.map(day),
            },
            approved: known("2018-09-19", None, "1").approved,
        };
        let nd = support::vector(ND)
            .replacen("<dRucEm>929023</dRucEm>", "<dRucEm>80013884</dRucEm>", 1)
            .replacen("<dNumTim>12557335</dNumTim>", "<dNumTim>12557209</dNumTim>", 1);
        assert!(support::check_with("1108", &nd, &nd_registry(Some("2019-09-30"))).is_ok());
        assert!(support::check_with("1108", &nd, &nd_registry(Some("2019-10-30"))).is_err());
        assert!(support::check_with("1108", &nd, &nd_registry(None)).is_err());
    }
}
