//! The table, the coverage document and the engine's order.

use super::*;

#[test]
fn every_rule_checked_here_is_a_code_of_the_table_and_none_is_both_checked_and_excused() {
    let codes: std::collections::BTreeSet<&str> = table().iter().map(|r| r.code.as_str()).collect();
    for rule in rules() {
        assert!(
            codes.contains(rule.code),
            "rule {} is not in table.tsv",
            rule.code
        );
        assert!(
            !not_checked().iter().any(|n| n.code == rule.code),
            "rule {} is checked and also excused",
            rule.code
        );
    }
    for n in not_checked() {
        assert!(
            codes.contains(n.code),
            "excused rule {} is not in table.tsv",
            n.code
        );
    }
}

#[test]
fn the_coverage_document_is_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/sifen-rules.md");
    let rendered = coverage_markdown();
    if std::env::var_os("KUATIA_BLESS").is_some() {
        std::fs::write(&path, &rendered).expect("write docs/sifen-rules.md");
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == rendered,
        "docs/sifen-rules.md is out of date: run KUATIA_BLESS=1 cargo test -p kuatia-sifen-rules"
    );
}

/// The baselines every group's tests mutate: SET's own examples of each type and XMLGEN's
/// documents break no rule checked here (SET's examples are from 2019, so no rule may depend on
/// today's date; each is judged at its own signing time).
#[test]
fn the_reference_documents_break_no_rule() {
    for path in [
        "set-examples-2019/FE_v150_20190910.xml",
        "set-examples-2019/AFE_v150_20190910.xml",
        "set-examples-2019/NC_v150_20190910.xml",
        "set-examples-2019/ND_v150_20190910.xml",
        "set-examples-2019/NRE_v150_20190910.xml",
        "generated/fe-signed-selfsigned-qr.xml",
        "generated/nc-signed-selfsigned-qr.xml",
    ] {
        let broken: Vec<_> = support::broken(&support::vector(path))
            .into_iter()
            .filter(|(code, _)| !set_example_breaks().any(|(c, p, _)| c == code && p == path))
            .collect();
        assert!(broken.is_empty(), "{path} breaks {broken:?}");
    }
}

/// The (rule, vector, why) pairs where SET's own 2019 examples break a rule as the Manual words
/// it: each group lists its own, quoting the Manual, and the test above skips exactly those.
fn set_example_breaks() -> impl Iterator<Item = (&'static str, &'static str, &'static str)> {
    let by_code = [
        crate::items::SET_EXAMPLE_BREAKS,
        crate::transport::SET_EXAMPLE_BREAKS,
        crate::d::SET_EXAMPLE_BREAKS,
    ];
    let f_j = crate::f_j::REFERENCE_BREAKS
        .iter()
        .map(|&(path, code, why)| (code, path, why));
    by_code.into_iter().flatten().copied().chain(f_j)
}

/// Support for the groups' tests.
pub(crate) mod support {
    use crate::*;

    /// The `rDE` of a vector of `vendor/sifen/vectors` by its path there
    /// (`set-examples-2019/FE_v150_20190910.xml`; SET's examples wrap it in a SOAP envelope).
    pub(crate) fn vector(path: &str) -> String {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../vendor/sifen/vectors")
            .join(path);
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let start = text.find("<rDE").expect("an rDE");
        let end = text.rfind("</rDE>").expect("an rDE's end") + "</rDE>".len();
        text[start..end].to_owned()
    }

    /// SIFEN's clock one hour after the DE's signing time (or its emission when unsigned).
    pub(crate) fn clock_for(xml: &str) -> NaiveDateTime {
        let root = xml::parse(xml).expect("XML");
        let de = root.child("DE").expect("DE");
        let stamp = de
            .text_at("dFecFirma")
            .or_else(|| de.text_at("gDatGralOpe/dFeEmiDE"))
            .expect("a date");
        NaiveDateTime::parse_from_str(stamp, "%Y-%m-%dT%H:%M:%S").expect("date") + chrono::Duration::hours(1)
    }

    /// Runs one rule on a DE, with no registry data, in the test environment.
    pub(crate) fn check(code: &str, xml: &str) -> Result<(), String> {
        check_with(code, xml, &NoRegistry)
    }

    /// Runs one rule on a DE with a registry.
    pub(crate) fn check_with(code: &str, xml: &str, registry: &dyn Registry) -> Result<(), String> {
        let root = xml::parse(xml).expect("XML");
        let de = root.child("DE").expect("DE");
        let facts = Facts {
            now: clock_for(xml),
            production: false,
            registry,
        };
        let ctx = Ctx {
            rde: &root,
            de,
            facts: &facts,
        };
        let rule = rules()
            .into_iter()
            .find(|r| r.code == code)
            .unwrap_or_else(|| panic!("no rule {code}"));
        (rule.check)(&ctx)
    }

    /// Every rule of this crate that a DE breaks (not only the first), by code.
    pub(crate) fn broken(xml: &str) -> Vec<(String, String)> {
        let root = xml::parse(xml).expect("XML");
        let de = root.child("DE").expect("DE");
        let facts = Facts {
            now: clock_for(xml),
            production: false,
            registry: &NoRegistry,
        };
        let ctx = Ctx {
            rde: &root,
            de,
            facts: &facts,
        };
        rules()
            .into_iter()
            .filter_map(|r| (r.check)(&ctx).err().map(|e| (r.code.to_owned(), e)))
            .collect()
    }
}

/// A registry holding these taxpayers and, when `whole`, nobody else.
struct Holding {
    rucs: &'static [&'static str],
    whole: bool,
}

impl Registry for Holding {
    fn taxpayer(&self, ruc: &str) -> Option<Taxpayer> {
        self.rucs.contains(&ruc).then(|| Taxpayer {
            name: "X".into(),
            state: "ACT".into(),
        })
    }
    fn knows_every_taxpayer(&self) -> bool {
        self.whole
    }
}

/// Rules 1250, 1306, 1603, 2303: a RUC the registry does not hold is inexistent only when the
/// registry is whole; a partial one (the simulator's by default) judges nobody.
#[test]
fn inexistent_rucs_are_refused_only_by_a_whole_registry() {
    use support::{check_with, vector};
    let fe = vector("generated/fe-signed-selfsigned-qr.xml");
    let nre = vector("set-examples-2019/NRE_v150_20190910.xml");
    let card = fe.replacen(
        "<gPaConEIni><iTiPago>1</iTiPago><dDesTiPag>Efectivo</dDesTiPag><dMonTiPag>165000.0000</dMonTiPag><cMoneTiPag>PYG</cMoneTiPag><dDMoneTiPag>Guarani</dDMoneTiPag></gPaConEIni>",
        "<gPaConEIni><iTiPago>3</iTiPago><dDesTiPag>Tarjeta de crédito</dDesTiPag><dMonTiPag>165000.0000</dMonTiPag><cMoneTiPag>PYG</cMoneTiPag><dDMoneTiPag>Guarani</dDMoneTiPag><gPagTarCD><iDenTarj>1</iDenTarj><dDesDenTarj>Visa</dDesDenTarj><dRUCProTar>80002201</dRUCProTar><dDVProTar>7</dDVProTar><iForProPa>1</iForProPa></gPagTarCD></gPaConEIni>",
        1,
    );
    assert_ne!(card, fe);
    let cases = [
        ("1250", &fe, "80069563"),
        ("1306", &fe, "80013884"),
        ("1603", &card, "80002201"),
        ("2303", &nre, "80002577"),
    ];
    let everyone: &[&str] = &["80069563", "80013884", "80002201", "80002577", "80004464"];
    for (code, xml, ruc) in cases {
        let all = Holding {
            rucs: everyone,
            whole: true,
        };
        assert_eq!(check_with(code, xml, &all), Ok(()), "{code}: held");
        let others: Vec<&str> = everyone.iter().copied().filter(|r| *r != ruc).collect();
        let without = Holding {
            rucs: Box::leak(others.into_boxed_slice()),
            whole: true,
        };
        assert!(check_with(code, xml, &without).is_err(), "{code}: {ruc} not held");
        let partial = Holding {
            rucs: &[],
            whole: false,
        };
        assert_eq!(
            check_with(code, xml, &partial),
            Ok(()),
            "{code}: a partial registry"
        );
    }
}

/// Rule 2412: a payment by retention reports the voucher's number in an associated document.
#[test]
fn a_payment_by_retention_names_its_voucher() {
    let fe = support::vector("generated/fe-signed-selfsigned-qr.xml");
    assert_eq!(support::check("2412", &fe), Ok(()));
    let by_retention = fe.replacen(
        "<iTiPago>1</iTiPago><dDesTiPag>Efectivo</dDesTiPag>",
        "<iTiPago>10</iTiPago><dDesTiPag>Retención</dDesTiPag>",
        1,
    );
    assert!(support::check("2412", &by_retention).is_err());
    let with_voucher = by_retention.replacen(
        "</gTotSub>",
        "</gTotSub><gCamDEAsoc><iTipDocAso>2</iTipDocAso><dNumComRet>001-001-0000001</dNumComRet></gCamDEAsoc>",
        1,
    );
    assert_eq!(support::check("2412", &with_voucher), Ok(()));
}
