//! What several groups of rules read: SET's check digit (modulo 11) and the code lists the
//! schema carries (countries, currencies).

use crate::xml::Node;
use std::collections::HashMap;
use std::sync::OnceLock;

/// SET's check digit of a RUC or of a CDC's first 43 characters (MT §10.2): each
/// character a digit, a letter standing for the digits of its ASCII code; the digits weighted 2,
/// 3, …, 11, 2, … from the right; 11 − (sum mod 11), or 0 when the remainder is 0 or 1.
pub(crate) fn check_digit(text: &str) -> u32 {
    let digits: Vec<u32> = text
        .chars()
        .flat_map(|c| match c.to_digit(10) {
            Some(d) => vec![d],
            None => u32::from(c.to_ascii_uppercase())
                .to_string()
                .chars()
                .filter_map(|d| d.to_digit(10))
                .collect(),
        })
        .collect();
    let (mut weight, mut total) = (2, 0);
    for d in digits.iter().rev() {
        if weight > 11 {
            weight = 2;
        }
        total += d * weight;
        weight += 1;
    }
    match total % 11 {
        r if r > 1 => 11 - r,
        _ => 0,
    }
}

/// Every `xs:enumeration` of a schema's simple type (the first when `type_name` is empty), with
/// its documentation (or the `CodeName` inside it): (value, documentation).
pub(crate) fn enumeration(xsd: &str, type_name: &str) -> Vec<(String, String)> {
    fn find<'a>(node: &'a Node, type_name: &str) -> Option<&'a Node> {
        if node.name == "simpleType" && (type_name.is_empty() || node.attr("name") == Some(type_name)) {
            return Some(node);
        }
        node.children.iter().find_map(|c| find(c, type_name))
    }
    let Ok(root) = crate::xml::parse(xsd) else {
        return Vec::new();
    };
    find(&root, type_name)
        .and_then(|t| t.child("restriction"))
        .map(|r| {
            r.children("enumeration")
                .filter_map(|e| {
                    let doc = e.at("annotation/documentation")?;
                    let name = doc.child("CodeName").map_or(doc.text.trim(), |n| n.text.trim());
                    Some((e.attr("value")?.trim().to_owned(), name.to_owned()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// TABLA 4 – CODIFICACION DE PAISES (MT p.211, "Remitimos archivo en formato XSD"):
/// `Paises_v100.xsd`, ISO 3166-1 alpha-3 code → its names (the file lists MKD twice, as
/// "Macedonia del Norte" and "ex República Yugoslava de Macedonia": either is taken).
fn countries() -> &'static HashMap<String, Vec<String>> {
    static COUNTRIES: OnceLock<HashMap<String, Vec<String>>> = OnceLock::new();
    COUNTRIES.get_or_init(|| {
        let mut names: HashMap<String, Vec<String>> = HashMap::new();
        for (code, name) in enumeration(include_str!("../../../vendor/sifen/xsd/v150/Paises_v100.xsd"), "") {
            names.entry(code).or_default().push(name);
        }
        names
    })
}

/// A country's names (empty for a code not in the table).
pub(crate) fn country_names(code: &str) -> &'static [String] {
    countries().get(code).map_or(&[], Vec::as_slice)
}

/// ISO 4217 currencies and SIFEN's description of each (`Monedas_v150.xsd`, `CodeName`: PYG
/// "Guarani").
pub(crate) fn currency(code: &str) -> Option<&'static str> {
    static LIST: OnceLock<HashMap<String, String>> = OnceLock::new();
    LIST.get_or_init(|| {
        enumeration(
            include_str!("../../../vendor/sifen/xsd/v150/Monedas_v150.xsd"),
            "",
        )
        .into_iter()
        .collect()
    })
    .get(code)
    .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_digits_of_rucs_and_cdcs_and_the_code_lists() {
        for (ruc, dv) in [
            ("80069563", 1),
            ("44444401", 7),
            ("80013884", 8),
            ("80002201", 7),
            ("80002577", 6),
            ("929023", 0),
            ("80004464", 9),
            ("80089752", 8),
        ] {
            assert_eq!(check_digit(ruc), dv, "{ruc}");
        }
        // The Manual's example CDC (MT §10.2): check digit 8.
        assert_eq!(check_digit("0144444401700100100145282201701251587326098"), 8);
        // A letter counts as the digits of its ASCII code: "A" is "65".
        assert_eq!(check_digit("1234567A"), check_digit("123456765"));
        assert_eq!(currency("PYG"), Some("Guarani"));
        assert_eq!(currency("USD"), Some("US Dollar"));
        assert_eq!(currency("ABC"), None);
        assert_eq!(country_names("PRY"), ["Paraguay".to_owned()]);
        assert_eq!(country_names("BRA"), ["Brasil".to_owned()]);
        assert_eq!(country_names("MKD").len(), 2);
        assert!(country_names("PY").is_empty());
        assert!(countries().len() > 200);
    }
}
