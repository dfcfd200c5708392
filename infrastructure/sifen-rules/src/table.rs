//! The Manual's table of §12.4 as data: `table.tsv`, one row per rule code.

use std::sync::OnceLock;

/// What breaking a rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// `R`: the DE is rejected.
    Reject,
    /// `N`: SIFEN notifies and approves.
    Notify,
    /// `AO`: approved with an observation.
    Observe,
}

impl Effect {
    /// As the Manual writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reject => "R",
            Self::Notify => "N",
            Self::Observe => "AO",
        }
    }
}

/// One row of §12.4.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// `N° Val`.
    pub n: u32,
    /// The field it is about (`A002`, `D102`, `E506`…), as the Manual writes it.
    pub id: String,
    /// The code SIFEN answers (`1000`).
    pub code: String,
    /// `R`, `N` or `AO`.
    pub effect: Effect,
    /// The Manual's message (`dMsgRes`).
    pub message: String,
}

/// Every row, in the Manual's order.
pub fn table() -> &'static [Row] {
    static TABLE: OnceLock<Vec<Row>> = OnceLock::new();
    TABLE.get_or_init(|| parse(include_str!("table.tsv")))
}

fn parse(text: &str) -> Vec<Row> {
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .filter_map(|line| {
            let cols: Vec<&str> = line.split('\t').collect();
            let [n, id, code, effect, message] = cols.as_slice() else {
                return None;
            };
            Some(Row {
                n: n.parse().ok()?,
                id: (*id).to_owned(),
                code: (*code).to_owned(),
                effect: match *effect {
                    "R" => Effect::Reject,
                    "N" => Effect::Notify,
                    "AO" => Effect::Observe,
                    _ => return None,
                },
                message: (*message).to_owned(),
            })
        })
        .collect()
}

/// Where a code stands in the Manual's order (unknown codes last).
pub(crate) fn position(code: &str) -> usize {
    table().iter().position(|r| r.code == code).unwrap_or(usize::MAX)
}
