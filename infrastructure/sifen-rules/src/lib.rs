//! SIFEN's format rules — the Manual Técnico v150, §12.4 "Validaciones del formato" — checked on
//! a DE's XML: the SIFEN simulator's rule engine.
//!
//! Written from the Manual's text and the XML alone, on purpose: this crate depends on nothing of
//! kuatia (not the domain's DE builder, not its validation), so a mistake in our builder cannot
//! hide in its own checker. `src/table.tsv` is the Manual's table as data (one row per rule:
//! N° Val, field, code, effect, message), extracted by `tests/scripts/sifen_rules_table.py`
//! from `vendor/sifen/manual/manual-tecnico-v150-s12.4.txt`; the checks, one function per rule
//! code, are in one module per group of the table (`a_c`, `d`, `e`, `items`, `transport`, `f_j`). Each
//! group also says which of its rules cannot be checked here, and why. `docs/sifen-rules.md`
//! is rendered from all of it ([`coverage_markdown`]) and a test keeps it current.
//!
//! [`evaluate`] runs every rule in the table's order; the first failing rule whose effect is `R`
//! rejects the DE with its code and message (SIFEN answers only the first error of a rejection,
//! MT p.146); failing `N` rules (and `AO`) are notices of an approval.

#![forbid(unsafe_code)]

mod a_c;
mod codes;
mod d;
mod e;
mod f_j;
pub mod geo;
mod intake;
mod items;
mod table;
mod transport;
pub mod xml;

pub use intake::INTAKE;
pub use table::{Effect, Row, table};
pub use xml::Node;

use chrono::{NaiveDate, NaiveDateTime};
use rust_decimal::Decimal;
use std::str::FromStr;

/// A DE SIFEN holds as approved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approved {
    /// The `rDE` as it was received.
    pub rde: String,
    /// Whether a cancellation event was registered on it.
    pub cancelled: bool,
}

/// A taxpayer in SIFEN's registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taxpayer {
    /// Its name (`dRazCons`).
    pub name: String,
    /// Its state (`ACT`, `SUS`, `SAD`, `BLQ`, `CAN`, `CDE`).
    pub state: String,
}

/// A timbrado SIFEN has on file for an issuer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timbrado {
    /// The first day it is valid (`dFeIniT`).
    pub start: NaiveDate,
    /// The last day, when it has one.
    pub end: Option<NaiveDate>,
}

/// What SIFEN itself holds that some rules read. Every method answers `None` when the data is
/// not there, and a rule that needs it is then not applied (the simulator never invents
/// registry data).
pub trait Registry {
    /// An approved DE by its CDC.
    fn approved(&self, _cdc: &str) -> Option<Approved> {
        None
    }
    /// Every approved DE of an issuer's RUC (without DV) with this type, timbrado,
    /// establishment, point and number (rule 1002).
    fn approved_with_number(&self, _ruc: &str, _key: &NumberKey) -> bool {
        false
    }
    /// A taxpayer by RUC (without DV).
    fn taxpayer(&self, _ruc: &str) -> Option<Taxpayer> {
        None
    }
    /// Whether [`Registry::taxpayer`] knows every taxpayer (a whole registry was loaded), so that
    /// its `None` means "no such RUC" and the rules on inexistent RUCs apply.
    fn knows_every_taxpayer(&self) -> bool {
        false
    }
    /// A timbrado of an issuer's RUC (without DV) by its number.
    fn timbrado(&self, _ruc: &str, _number: &str) -> Option<Timbrado> {
        None
    }
    /// The approved Notas de Crédito that may refer to the Factura with this CDC (rule 2417
    /// adds them up): a superset is fine, the rule reads each one's associated documents.
    fn credit_notes_of(&self, _cdc: &str) -> Vec<Approved> {
        Vec::new()
    }
}

/// The fields that number a DE within a timbrado (rule 1002).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NumberKey {
    /// `iTiDE`.
    pub doc_type: String,
    /// `dNumTim`.
    pub timbrado: String,
    /// `dEst`.
    pub establishment: String,
    /// `dPunExp`.
    pub point: String,
    /// `dNumDoc`.
    pub number: String,
    /// `dSerieNum`, when written.
    pub series: Option<String>,
}

/// A registry that knows nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRegistry;

impl Registry for NoRegistry {}

/// What a check may read besides the XML.
pub struct Facts<'a> {
    /// SIFEN's clock, as Paraguay's wall time (the XML's dates carry no offset).
    pub now: NaiveDateTime,
    /// Whether this is the production environment (rule 1263: the test issuer name).
    pub production: bool,
    /// SIFEN's data.
    pub registry: &'a dyn Registry,
}

/// One DE being judged.
pub struct Ctx<'a> {
    /// `rDE`.
    pub rde: &'a Node,
    /// `rDE/DE`.
    pub de: &'a Node,
    /// What SIFEN holds.
    pub facts: &'a Facts<'a>,
}

impl<'a> Ctx<'a> {
    /// The trimmed text at a path under `DE` (`gDatGralOpe/gEmis/dRucEm`).
    pub fn text(&self, path: &str) -> Option<&'a str> {
        self.de.text_at(path)
    }

    /// Whether an element is at a path under `DE`.
    pub fn has(&self, path: &str) -> bool {
        self.de.at(path).is_some()
    }

    /// The number at a path under `DE`, when it is there and reads as a decimal.
    pub fn dec(&self, path: &str) -> Option<Decimal> {
        self.text(path).and_then(decimal)
    }

    /// The whole number at a path under `DE`, when it is there and reads as one.
    pub fn int(&self, path: &str) -> Option<i64> {
        self.text(path).and_then(|t| t.parse().ok())
    }

    /// `iTiDE`: 1 FE, 4 AFE, 5 NCE, 6 NDE, 7 NRE (0 when unreadable).
    pub fn doc_type(&self) -> i64 {
        self.int("gTimb/iTiDE").unwrap_or(0)
    }

    /// The items (`gDtipDE/gCamItem`).
    pub fn items(&self) -> Vec<&'a Node> {
        self.de.all("gDtipDE/gCamItem")
    }
}

/// Rules 1250, 1306, 1603, 2303: a RUC SIFEN's registry does not hold, when the registry is
/// whole ([`Registry::knows_every_taxpayer`]); `whose` names it in the finding.
pub(crate) fn existing_ruc(ctx: &Ctx<'_>, ruc: Option<&str>, whose: &str) -> Result<(), String> {
    let registry = ctx.facts.registry;
    match ruc {
        Some(ruc) if registry.knows_every_taxpayer() && registry.taxpayer(ruc).is_none() => {
            Err(format!("the {whose} RUC {ruc} is not in the taxpayer registry"))
        }
        _ => Ok(()),
    }
}

/// A decimal as the XML writes it (`1500`, `1500.5`, `0.00000001`).
pub fn decimal(text: &str) -> Option<Decimal> {
    Decimal::from_str(text.trim()).ok()
}

/// A check: `Err` with what is wrong when the DE breaks the rule, `Ok` when it keeps it or the
/// rule does not apply.
pub type Check = fn(&Ctx<'_>) -> Result<(), String>;

/// A rule code of the table and the function that checks it.
#[derive(Clone, Copy)]
pub struct Rule {
    /// The code (`1000`).
    pub code: &'static str,
    /// Its check.
    pub check: Check,
}

/// A rule this crate does not check, and why.
#[derive(Debug, Clone, Copy)]
pub struct NotChecked {
    /// The code.
    pub code: &'static str,
    /// Why (the data SIFEN holds and the simulator does not, or where it is checked instead).
    pub why: &'static str,
}

/// Rules the simulator checks outside this crate (`infrastructure/src/sifen_sim/checks.rs`:
/// schema, CDC, signature, QR, dates; `state.rs`: duplicates, inutilised numbers; `mod.rs`: the
/// synchronous service switched off, 1264), before these.
pub const CHECKED_BY_THE_SIMULATOR_CORE: &[&str] = &[
    "1000", "1001", "1003", "1004", "1005", "1109", "1150", "1151", "1253", "1264", "2500", "2501", "2502",
];

/// Every rule checked here, in no particular order.
pub fn rules() -> Vec<Rule> {
    [
        a_c::RULES,
        d::RULES,
        e::RULES,
        items::RULES,
        transport::RULES,
        f_j::RULES,
    ]
    .concat()
}

/// Every rule not checked here, with the reason.
pub fn not_checked() -> Vec<NotChecked> {
    [
        a_c::NOT_CHECKED,
        d::NOT_CHECKED,
        e::NOT_CHECKED,
        items::NOT_CHECKED,
        transport::NOT_CHECKED,
        f_j::NOT_CHECKED,
    ]
    .concat()
}

/// A broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The rule's code (`dCodRes`).
    pub code: String,
    /// The Manual's message (`dMsgRes`).
    pub message: String,
    /// What exactly is wrong in this DE (for logs; SIFEN's answer carries only the message).
    pub detail: String,
    /// The rule's effect.
    pub effect: Effect,
}

/// The judgement of one DE.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// The first broken rule that rejects, when there is one.
    pub rejection: Option<Finding>,
    /// Broken rules that only notify.
    pub notices: Vec<Finding>,
}

/// Judges an `rDE` (its text) against every rule of this crate. `Err` when the text is not an
/// `rDE` at all (the simulator answers that before).
pub fn evaluate(rde_text: &str, facts: &Facts<'_>) -> Result<Verdict, String> {
    let rde = xml::parse(rde_text)?;
    let de = rde.child("DE").ok_or("no DE element")?;
    let ctx = Ctx { rde: &rde, de, facts };
    let table = table();
    let mut rules = rules();
    rules.sort_by_key(|r| table::position(r.code));
    let mut verdict = Verdict::default();
    for rule in rules {
        let Err(detail) = (rule.check)(&ctx) else {
            continue;
        };
        let row = table.iter().find(|row| row.code == rule.code);
        let finding = Finding {
            code: rule.code.to_owned(),
            message: row.map_or_else(String::new, |r| r.message.clone()),
            detail,
            effect: row.map_or(Effect::Reject, |r| r.effect),
        };
        if finding.effect == Effect::Reject {
            verdict.rejection = Some(finding);
            break;
        }
        verdict.notices.push(finding);
    }
    Ok(verdict)
}

/// `docs/sifen-rules.md`: every rule of the table with where it is checked.
pub fn coverage_markdown() -> String {
    use std::fmt::Write as _;
    let checked: std::collections::BTreeSet<&str> = rules().iter().map(|r| r.code).collect();
    let not = not_checked();
    let mut out = String::from(
        "# SIFEN's format rules and where kuatia checks them\n\n\
         Every rule of the Manual Técnico v150, §12.4 \"Validaciones del formato\" (effect `R` rejects\n\
         the DE, `N` notifies, `AO` approves with an observation), and where it is checked:\n\n\
         - **simulator**: the SIFEN simulator applies it to every DE it receives. The checks are in\n  \
         `infrastructure/sifen-rules` (written from the Manual and the XML alone, sharing no code with\n  \
         the DE builder or validation) or, for the CDC, signature, QR, dates and duplicates, in\n  \
         `infrastructure/src/sifen_sim`.\n\
         - **intake**: `POST /v1/documents` and `/v1/documents/validate` refuse the document first, with\n  \
         the issue code named (docs/issue-codes.md).\n\
         - otherwise, why it cannot be checked here.\n\n\
         This file is rendered from `infrastructure/sifen-rules` (`KUATIA_BLESS=1 cargo test -p\n\
         kuatia-sifen-rules` rewrites it); a test fails when it is out of date.\n\n",
    );
    let rows = table();
    let (mut sim, mut rejecting, mut rejecting_checked) = (0, 0, 0);
    for row in rows {
        let by_sim =
            checked.contains(row.code.as_str()) || CHECKED_BY_THE_SIMULATOR_CORE.contains(&row.code.as_str());
        sim += usize::from(by_sim);
        if row.effect == Effect::Reject {
            rejecting += 1;
            rejecting_checked += usize::from(by_sim);
        }
    }
    let _ = writeln!(
        out,
        "{} rules; {sim} checked by the simulator; {rejecting_checked} of the {rejecting} rejecting rules.\n",
        rows.len()
    );
    out.push_str("| N° | Field | Code | Effect | Message | Checked |\n|---|---|---|---|---|---|\n");
    for row in rows {
        let mut status = Vec::new();
        if checked.contains(row.code.as_str()) || CHECKED_BY_THE_SIMULATOR_CORE.contains(&row.code.as_str()) {
            status.push("simulator".to_owned());
        }
        for (_, issue) in intake::INTAKE.iter().filter(|(c, _)| *c == row.code) {
            status.push(format!("intake (`{issue}`)"));
        }
        if status.is_empty() {
            match not.iter().find(|n| n.code == row.code) {
                Some(n) => status.push(format!("not here: {}", n.why)),
                None => status.push("not yet".to_owned()),
            }
        }
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            row.n,
            row.id,
            row.code,
            row.effect.as_str(),
            row.message.replace('|', "\\|"),
            status.join("; ")
        );
    }
    out
}

#[cfg(test)]
mod tests;
