//! The table, the coverage document and the engine's order.

use super::*;

#[test]
fn every_rule_checked_here_is_a_code_of_the_table_and_none_is_both_checked_and_excused() {
    let codes: std::collections::BTreeSet<&str> = table().iter().map(|r| r.code.as_str()).collect();
    for rule in rules() {
        assert!(codes.contains(rule.code), "rule {} is not in table.tsv", rule.code);
        assert!(
            !not_checked().iter().any(|n| n.code == rule.code),
            "rule {} is checked and also excused",
            rule.code
        );
    }
    for n in not_checked() {
        assert!(codes.contains(n.code), "excused rule {} is not in table.tsv", n.code);
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
        let broken = support::broken(&support::vector(path));
        assert!(broken.is_empty(), "{path} breaks {broken:?}");
    }
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
        let ctx = Ctx { rde: &root, de, facts: &facts };
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
        let ctx = Ctx { rde: &root, de, facts: &facts };
        rules()
            .into_iter()
            .filter_map(|r| (r.check)(&ctx).err().map(|e| (r.code.to_owned(), e)))
            .collect()
    }
}
