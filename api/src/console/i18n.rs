//! The console's words: one Fluent catalogue per language (`api/locales/es.ftl`, `en.ftl`),
//! compiled into the binary, and the formats of Paraguay (money as `Gs. 1.500.000`, dates in
//! America/Asunción, a CDC in groups of four).
//!
//! Spanish (es-PY) is the default; the user's choice (the `kuatia_lang` cookie the console's
//! language switch sets), else the browser's `Accept-Language`, picks English.

use std::collections::HashMap;
use std::sync::LazyLock;

use axum::http::HeaderMap;
use fluent_bundle::concurrent::FluentBundle;
use fluent_bundle::{FluentArgs, FluentResource, FluentValue};
use kuatia_domain::format;

/// The cookie that holds the user's language.
pub const LANG_COOKIE: &str = "kuatia_lang";

/// A language of the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// Spanish as written in Paraguay (the default).
    Es,
    /// English.
    En,
}

impl Lang {
    /// The tag of `<html lang>`.
    pub fn tag(self) -> &'static str {
        match self {
            Self::Es => "es-PY",
            Self::En => "en",
        }
    }

    /// `es` or `en`.
    pub fn code(self) -> &'static str {
        match self {
            Self::Es => "es",
            Self::En => "en",
        }
    }

    /// `es` → Spanish, `en` → English, anything else none.
    pub fn parse(code: &str) -> Option<Self> {
        match code.trim().to_ascii_lowercase().as_str() {
            "es" => Some(Self::Es),
            "en" => Some(Self::En),
            _ => None,
        }
    }

    /// The user's choice (cookie), else the first of `Accept-Language` the console speaks, else
    /// Spanish.
    pub fn of_request(headers: &HeaderMap) -> Self {
        if let Some(chosen) = super::cookie(headers, LANG_COOKIE).and_then(Self::parse) {
            return chosen;
        }
        let accepted = headers
            .get(axum::http::header::ACCEPT_LANGUAGE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let mut ranked: Vec<(f32, &str)> = accepted
            .split(',')
            .filter_map(|part| {
                let mut pieces = part.split(';');
                let tag = pieces.next()?.trim();
                let weight = pieces
                    .find_map(|p| p.trim().strip_prefix("q="))
                    .and_then(|q| q.parse::<f32>().ok())
                    .unwrap_or(1.0);
                Some((weight, tag))
            })
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
        ranked
            .into_iter()
            .find_map(|(_, tag)| Self::parse(tag.split('-').next().unwrap_or(tag)))
            .unwrap_or(Self::Es)
    }
}

/// The catalogues' sources.
pub const SOURCES: [(Lang, &str); 2] = [
    (Lang::Es, include_str!("../../locales/es.ftl")),
    (Lang::En, include_str!("../../locales/en.ftl")),
];

struct Catalogue {
    bundle: FluentBundle<FluentResource>,
}

static CATALOGUES: LazyLock<HashMap<&'static str, Catalogue>> = LazyLock::new(|| {
    SOURCES
        .iter()
        .map(|(lang, source)| {
            let resource =
                FluentResource::try_new((*source).to_owned()).unwrap_or_else(|(partial, _)| partial);
            let id: unic_langid::LanguageIdentifier = lang.tag().parse().unwrap_or_default();
            let mut bundle = FluentBundle::new_concurrent(vec![id]);
            // No Unicode isolation marks around values: the pages are left-to-right.
            bundle.set_use_isolating(false);
            // The resource parsed once; a duplicate key would be a catalogue test failure.
            let _ = bundle.add_resource(resource);
            (lang.code(), Catalogue { bundle })
        })
        .collect()
});

/// The message ids of a catalogue's source, in order (a message starts a line: `id = …`).
pub fn keys(source: &str) -> Vec<String> {
    source
        .lines()
        .filter(|line| line.starts_with(|c: char| c.is_ascii_alphabetic()))
        .filter_map(|line| line.split_once('=').map(|(id, _)| id.trim().to_owned()))
        .collect()
}

/// The translator a page renders with.
#[derive(Debug, Clone, Copy)]
pub struct Tr {
    /// Its language.
    pub lang: Lang,
}

impl Tr {
    /// The message `key`; the key itself when the catalogue lacks it (a test keeps both
    /// catalogues complete).
    pub fn t(&self, key: &str) -> String {
        self.format(key, None)
    }

    /// The message `key` with one variable.
    pub fn t1(&self, key: &str, name: &str, value: impl std::fmt::Display) -> String {
        self.tn(key, &[(name, &value)])
    }

    /// The message `key` with its variables.
    pub fn tn(&self, key: &str, values: &[(&str, &dyn std::fmt::Display)]) -> String {
        let mut args = FluentArgs::new();
        for (name, value) in values {
            args.set((*name).to_owned(), FluentValue::from(value.to_string()));
        }
        self.format(key, Some(&args))
    }

    fn format(&self, key: &str, args: Option<&FluentArgs<'_>>) -> String {
        let Some(catalogue) = CATALOGUES.get(self.lang.code()) else {
            return key.to_owned();
        };
        let Some(pattern) = catalogue.bundle.get_message(key).and_then(|m| m.value()) else {
            return key.to_owned();
        };
        let mut errors = Vec::new();
        catalogue
            .bundle
            .format_pattern(pattern, args, &mut errors)
            .into_owned()
    }

    /// What a check found in words: `check-<key>` with its values, dates and moments as
    /// Paraguay writes them, counts grouped, the names of failed certificate checks said
    /// (`setup-check-<name>`), and a branch, point or certificate id named by `name_of` (kind,
    /// id); the English `message` when the finding has no key.
    pub fn finding(
        &self,
        finding: &kuatia_domain::certificate::Finding,
        message: &str,
        name_of: &dyn Fn(&str, &str) -> Option<String>,
    ) -> String {
        if finding.key.is_empty() {
            return message.to_owned();
        }
        let values: Vec<(&str, String)> = finding
            .values
            .iter()
            .map(|(name, value)| {
                let words = match *name {
                    "failed" => value
                        .split(',')
                        .map(|check| self.t(&format!("setup-check-{check}")))
                        .collect::<Vec<_>>()
                        .join(", "),
                    "branch" | "point" | "certificate" => {
                        name_of(name, value).unwrap_or_else(|| value.clone())
                    }
                    "left" | "next" | "end" | "days" | "count" | "bits" | "min" => format::quantity(value),
                    _ => {
                        if let Ok(date) = chrono::NaiveDate::parse_from_str(value, "%Y-%m-%d") {
                            date.format("%d/%m/%Y").to_string()
                        } else if let Ok(at) = chrono::DateTime::parse_from_rfc3339(value) {
                            local(at.with_timezone(&chrono::Utc))
                        } else {
                            value.clone()
                        }
                    }
                };
                (*name, words)
            })
            .collect();
        let args: Vec<(&str, &dyn std::fmt::Display)> = values
            .iter()
            .map(|(name, words)| (*name, words as &dyn std::fmt::Display))
            .collect();
        self.tn(&format!("check-{}", finding.key), &args)
    }

    /// A status in words (`status-<status>`).
    pub fn status(&self, status: &str) -> String {
        self.t(&format!("status-{status}"))
    }

    /// A document type in words (`type-<type>`).
    pub fn doc_type(&self, doc_type: &str) -> String {
        self.t(&format!("type-{doc_type}"))
    }

    /// An event type in words (`event-<type>`, else the type as stored).
    pub fn event(&self, event_type: &str) -> String {
        let key = format!("event-{event_type}");
        let text = self.t(&key);
        if text == key { event_type.to_owned() } else { text }
    }
}

/// Guaraníes as Paraguay writes them: `Gs. 1.500.000` (a fraction, rare, after a comma).
pub fn money(amount: &str) -> String {
    format!("Gs. {}", format::quantity(amount.trim().trim_matches('"')))
}

/// A CDC in groups of four digits, as the KuDE prints it.
pub use format::cdc_groups;

/// A moment as Paraguay's clock shows it: `27/11/2026 14:05`.
pub fn local(at: chrono::DateTime<chrono::Utc>) -> String {
    kuatia_domain::local_time::paraguay(at)
        .format("%d/%m/%Y %H:%M")
        .to_string()
}

/// A moment to the second, for the audit timeline: `27/11/2026 14:05:09`.
pub fn local_seconds(at: chrono::DateTime<chrono::Utc>) -> String {
    kuatia_domain::local_time::paraguay(at)
        .format("%d/%m/%Y %H:%M:%S")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_catalogues_have_the_same_keys_and_parse_cleanly() {
        let mut sets = Vec::new();
        for (lang, source) in SOURCES {
            if let Err((_, errors)) = FluentResource::try_new(source.to_owned()) {
                panic!("{} does not parse: {errors:?}", lang.code());
            }
            let keys = keys(source);
            let unique: std::collections::BTreeSet<_> = keys.iter().cloned().collect();
            assert_eq!(unique.len(), keys.len(), "{} repeats a key", lang.code());
            sets.push((lang, unique));
        }
        let (es, en) = (&sets[0].1, &sets[1].1);
        let only_es: Vec<_> = es.difference(en).collect();
        let only_en: Vec<_> = en.difference(es).collect();
        assert!(
            only_es.is_empty() && only_en.is_empty(),
            "only in es: {only_es:?}; only in en: {only_en:?}"
        );
        assert!(es.len() > 50, "the catalogues hold the console's words");
    }

    #[test]
    fn every_status_and_type_has_words_in_both_languages() {
        for lang in [Lang::Es, Lang::En] {
            let tr = Tr { lang };
            for status in kuatia_domain::document::aggregate::DocumentStatus::ALL {
                let key = format!("status-{}", status.as_str());
                assert_ne!(tr.t(&key), key, "{key} in {}", lang.code());
            }
        }
        assert_eq!(Tr { lang: Lang::Es }.t("status-accepted"), "Aprobado");
    }

    #[test]
    fn every_finding_of_a_check_has_words_in_both_languages() {
        for lang in [Lang::Es, Lang::En] {
            let tr = Tr { lang };
            for key in kuatia_domain::certificate::FINDINGS {
                let id = format!("check-{key}");
                assert_ne!(tr.t(&id), id, "{id} in {}", lang.code());
            }
        }
    }

    #[test]
    fn a_finding_is_said_with_its_values_as_paraguay_writes_them() {
        use kuatia_domain::certificate::{Check, Finding};
        let es = Tr { lang: Lang::Es };
        let expiring = Check::new("validity_period", true, "valid until …").found(
            "validity_ok",
            &[("to", &"2027-03-01T15:00:00+00:00"), ("days", &1200)],
        );
        assert_eq!(
            es.finding(&expiring.finding, &expiring.message, &|_, _| None),
            "válido hasta el 01/03/2027 12:00 (faltan 1.200 días)"
        );
        let failing = Check::new("certificate", false, "…").found(
            "certificate_failing",
            &[
                ("certificate", &"0191c6a2-0000-7000-8000-000000000001"),
                ("failed", &"validity_period,ruc_matches_company"),
            ],
        );
        let named = |kind: &str, id: &str| {
            (kind == "certificate" && id.ends_with("0001")).then(|| "Firma 2026".to_owned())
        };
        assert_eq!(
            es.finding(&failing.finding, &failing.message, &named),
            "El certificado Firma 2026 falla en: Vigencia, RUC del titular"
        );
        let from = Check::new("timbrado", true, "…").found(
            "timbrado_from",
            &[("timbrado", &"12345678"), ("from", &"2026-01-01")],
        );
        assert_eq!(
            Tr { lang: Lang::En }.finding(&from.finding, &from.message, &|_, _| None),
            "Timbrado 12345678, valid from 01/01/2026"
        );
        // A check that says nothing more is said by its message.
        assert_eq!(
            es.finding(&Finding::default(), "as it was", &|_, _| None),
            "as it was"
        );
    }

    #[test]
    fn money_is_written_as_in_paraguay() {
        assert_eq!(money("1500000"), "Gs. 1.500.000");
        assert_eq!(money("1500000.00"), "Gs. 1.500.000");
        assert_eq!(money("999"), "Gs. 999");
        assert_eq!(money("1000"), "Gs. 1.000");
        assert_eq!(money("0"), "Gs. 0");
        assert_eq!(money("-25000"), "Gs. -25.000");
        assert_eq!(money("1234.5"), "Gs. 1.234,5");
    }

    #[test]
    fn the_language_is_the_users_choice_else_the_browsers_else_spanish() {
        let mut headers = HeaderMap::new();
        assert_eq!(Lang::of_request(&headers), Lang::Es);
        headers.insert("accept-language", "en-US,en;q=0.9,es;q=0.8".parse().unwrap());
        assert_eq!(Lang::of_request(&headers), Lang::En);
        headers.insert("accept-language", "de-DE,es-PY;q=0.7,en;q=0.5".parse().unwrap());
        assert_eq!(Lang::of_request(&headers), Lang::Es);
        headers.insert("cookie", "kuatia_lang=en".parse().unwrap());
        assert_eq!(Lang::of_request(&headers), Lang::En);
    }
}
