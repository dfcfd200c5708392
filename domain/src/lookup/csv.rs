//! The CSV files of e-invoicing designations (`sifenMandate`) and registry matches (`siara`),
//! whose columns `docs/lookup.md` documents.
//!
//! RFC 4180: comma-separated, a header row, fields optionally in double quotes (a quote inside is
//! doubled; a quoted field may span lines). Columns are found by their header name
//! (case-insensitive), so their order does not matter and extra columns are ignored.

use chrono::NaiveDate;

use crate::ruc::Ruc;

/// A CSV record with the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// 1-based line number.
    pub line: usize,
    /// The fields.
    pub fields: Vec<String>,
}

/// A file that is not CSV.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CsvError {
    /// A quoted field is not closed.
    #[error("line {0}: a quoted field is not closed")]
    UnclosedQuote(usize),
    /// No header row.
    #[error("the file is empty (a header row is required)")]
    Empty,
    /// A required column is missing from the header.
    #[error("the header has no column {0:?} (required: {1})")]
    MissingColumn(String, String),
}

/// Splits CSV text into records (blank lines are skipped).
pub fn records(text: &str) -> Result<Vec<Record>, CsvError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = Vec::new();
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut line = 1;
    let mut start = 1;
    let mut quoted = false;
    let mut was_quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = false,
                '\n' => {
                    line += 1;
                    field.push(c);
                }
                _ => field.push(c),
            }
            continue;
        }
        match c {
            '"' if field.is_empty() && !was_quoted => {
                quoted = true;
                was_quoted = true;
            }
            ',' => {
                fields.push(std::mem::take(&mut field));
                was_quoted = false;
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                fields.push(std::mem::take(&mut field));
                if !(fields.len() == 1 && fields[0].trim().is_empty() && !was_quoted) {
                    out.push(Record {
                        line: start,
                        fields: std::mem::take(&mut fields),
                    });
                }
                fields.clear();
                was_quoted = false;
                line += 1;
                start = line;
            }
            _ => field.push(c),
        }
    }
    if quoted {
        return Err(CsvError::UnclosedQuote(start));
    }
    if !field.is_empty() || !fields.is_empty() || was_quoted {
        fields.push(field);
        out.push(Record { line: start, fields });
    }
    Ok(out)
}

/// The header of a CSV file: where each required column is.
#[derive(Debug, Clone)]
pub struct Columns {
    positions: Vec<usize>,
}

impl Columns {
    /// Finds `required` in `header` (case-insensitive, surrounding spaces ignored).
    pub fn find(header: &Record, required: &[&str]) -> Result<Self, CsvError> {
        let positions = required
            .iter()
            .map(|name| {
                header
                    .fields
                    .iter()
                    .position(|h| h.trim().eq_ignore_ascii_case(name))
                    .ok_or_else(|| CsvError::MissingColumn((*name).to_owned(), required.join(",")))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { positions })
    }

    /// The `i`-th required column of `record`, trimmed (empty when the record is short).
    pub fn get<'r>(&self, record: &'r Record, i: usize) -> &'r str {
        self.positions
            .get(i)
            .and_then(|&p| record.fields.get(p))
            .map_or("", |f| f.trim())
    }
}

/// The columns of a designations file, in this order.
pub const MANDATE_COLUMNS: [&str; 4] = ["ruc", "group", "start_date", "link"];

/// The columns of a registry-match file, in this order.
pub const SIARA_COLUMNS: [&str; 10] = [
    "ruc",
    "group",
    "category",
    "legal_type",
    "department",
    "city",
    "registry_state",
    "last_communication",
    "synchronized_at",
    "source_link",
];

/// An electronic-invoicing designation of a taxpayer (`sifenMandate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MandateRow {
    /// RUC number without DV.
    pub ruc: String,
    /// The designation group.
    pub group: String,
    /// When the obligation starts (`YYYY-MM-DD`).
    pub start_date: NaiveDate,
    /// The reference link (resolution or publication).
    pub link: String,
}

/// A synchronized registry match of a taxpayer (`siara`). Empty fields are `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiaraRow {
    /// RUC number without DV.
    pub ruc: String,
    /// The other fields, in [`SIARA_COLUMNS`] order after `ruc`.
    pub fields: [Option<String>; 9],
}

fn ruc_number(text: &str) -> Result<String, String> {
    Ruc::parse_lenient(&text.to_ascii_uppercase())
        .map(|r| r.number().to_owned())
        .map_err(|e| format!("ruc {text:?}: {e}"))
}

impl MandateRow {
    /// Reads one record; the error says which field is wrong.
    pub fn read(columns: &Columns, record: &Record) -> Result<Self, String> {
        let ruc = ruc_number(columns.get(record, 0))?;
        let group = columns.get(record, 1);
        if group.is_empty() {
            return Err("group is empty".into());
        }
        let date = columns.get(record, 2);
        let start_date = NaiveDate::parse_from_str(date, "%Y-%m-%d")
            .map_err(|_| format!("start_date {date:?} is not YYYY-MM-DD"))?;
        Ok(Self {
            ruc,
            group: group.to_owned(),
            start_date,
            link: columns.get(record, 3).to_owned(),
        })
    }
}

impl SiaraRow {
    /// Reads one record; the error says which field is wrong.
    pub fn read(columns: &Columns, record: &Record) -> Result<Self, String> {
        let ruc = ruc_number(columns.get(record, 0))?;
        let fields = std::array::from_fn(|i| {
            let value = columns.get(record, i + 1);
            (!value.is_empty()).then(|| value.to_owned())
        });
        Ok(Self { ruc, fields })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_fields_may_hold_commas_quotes_and_line_breaks() {
        let text = "ruc,group\n80069563-1,\"A, \"\"B\"\"\"\n\n\"4567890\",\"two\nlines\"\r\nlast,row";
        let recs = records(text).expect("csv");
        assert_eq!(recs.len(), 4);
        assert_eq!(recs[1].fields, ["80069563-1", "A, \"B\""]);
        assert_eq!(recs[2].line, 4);
        assert_eq!(recs[2].fields, ["4567890", "two\nlines"]);
        assert_eq!((recs[3].line, recs[3].fields.len()), (6, 2));
        assert_eq!(records("a,\"b"), Err(CsvError::UnclosedQuote(1)));
    }

    #[test]
    fn mandate_rows_are_found_by_header_name() {
        let recs = records(
            "Link,RUC,start_date,group\nhttps://x/1,80069563-1,2026-07-01,G1\nx,80069563-2,2026-07-01,G1\n",
        )
        .expect("csv");
        let columns = Columns::find(&recs[0], &MANDATE_COLUMNS).expect("header");
        let row = MandateRow::read(&columns, &recs[1]).expect("row");
        assert_eq!(row.ruc, "80069563");
        assert_eq!(row.group, "G1");
        assert_eq!(row.link, "https://x/1");
        let err = MandateRow::read(&columns, &recs[2]).expect_err("wrong dv");
        assert!(err.contains("check digit"), "{err}");
        assert!(matches!(
            Columns::find(&recs[0], &SIARA_COLUMNS),
            Err(CsvError::MissingColumn(..))
        ));
    }

    #[test]
    fn empty_siara_fields_are_absent() {
        let header = SIARA_COLUMNS.join(",");
        let recs = records(&format!("{header}\n4567890,G,C,,D,CITY,,,,\n")).expect("csv");
        let columns = Columns::find(&recs[0], &SIARA_COLUMNS).expect("header");
        let row = SiaraRow::read(&columns, &recs[1]).expect("row");
        assert_eq!(row.fields[0].as_deref(), Some("G"));
        assert_eq!(row.fields[2], None);
        assert_eq!(row.fields[4].as_deref(), Some("CITY"));
    }
}
