//! `kuatia lookup import`: DNIT's registry files into the inactive slot, then one switch; and the
//! CSV files of designations and registry matches.
//!
//! The registry import reads `ruc*.zip` / `ruc*.txt` from a folder on a blocking thread (line by
//! line, as bytes, so that a Latin-1 line is still read — [`kuatia_domain::lookup::line`]) and
//! hands batches of rows to the database writer through a bounded channel, so that parsing and
//! loading overlap. Every line that is not a row is counted and listed with its file and line
//! number: blank lines, broken lines (with the reason) and repeated RUCs (the first occurrence
//! wins). The switch happens only when every file was read and loaded; a failure leaves the
//! active generation untouched.

use chrono::{DateTime, NaiveDate, SubsecRound, Utc};
use kuatia_application::event_store::StoreError;
use kuatia_domain::lookup::csv::{self, Columns, MANDATE_COLUMNS, MandateRow, SIARA_COLUMNS, SiaraRow};
use kuatia_domain::lookup::line::{Encoding, Line, RegistryRow, parse_line};
use serde::Serialize;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::index::{FxBuild, pack_ruc};
use super::registry::{self, SlotWriter, Switch};
use crate::store::Database;

/// Rows per batch handed to the writer.
const BATCH: usize = 20_000;
/// Problems listed in a report (all are counted).
pub const MAX_LISTED: usize = 10_000;
/// How long an import may hold its lease before another may take over.
const LEASE: chrono::Duration = chrono::Duration::hours(2);

/// Why an import did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A file or folder could not be read.
    #[error("{0}")]
    Io(String),
    /// The input is not usable as a whole.
    #[error("{0}")]
    Invalid(String),
    /// Another import holds the lease.
    #[error("another registry import is running (its lease ends at {0})")]
    Busy(DateTime<Utc>),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One registry file found in the folder.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// Path.
    pub path: PathBuf,
    /// Name shown in reports (`ruc3.txt`, or `ruc3.zip:ruc3.txt`).
    pub name: String,
    /// Uncompressed size in bytes (for progress).
    pub bytes: u64,
}

/// The registry files of a folder: every `ruc*.txt` and `ruc*.zip`, in name order. The same
/// stem as both `.zip` and `.txt` is refused (which one is current is not ours to guess).
pub fn find_files(dir: &Path) -> Result<Vec<SourceFile>, ImportError> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| ImportError::Io(format!("reading {}: {e}", dir.display())))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| ImportError::Io(format!("reading {}: {e}", dir.display())))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let lower = name.to_ascii_lowercase();
        if !lower.starts_with("ruc") || !(lower.ends_with(".txt") || lower.ends_with(".zip")) {
            continue;
        }
        let path = entry.path();
        let bytes = if lower.ends_with(".zip") {
            let file = std::fs::File::open(&path).map_err(|e| ImportError::Io(format!("{name}: {e}")))?;
            let mut archive = zip::ZipArchive::new(file)
                .map_err(|e| ImportError::Io(format!("{name}: not a ZIP file: {e}")))?;
            let mut total = 0;
            for i in 0..archive.len() {
                let entry = archive
                    .by_index(i)
                    .map_err(|e| ImportError::Io(format!("{name}: {e}")))?;
                if entry
                    .name()
                    .is_ok_and(|n| n.to_ascii_lowercase().ends_with(".txt"))
                {
                    total += entry.size();
                }
            }
            total
        } else {
            entry
                .metadata()
                .map_err(|e| ImportError::Io(format!("{name}: {e}")))?
                .len()
        };
        files.push(SourceFile { path, name, bytes });
    }
    files.sort_by_key(|a| natural_key(&a.name));
    for pair in files.windows(2) {
        let stem = |f: &SourceFile| f.name[..f.name.len() - 4].to_ascii_lowercase();
        if stem(&pair[0]) == stem(&pair[1]) {
            return Err(ImportError::Invalid(format!(
                "both {} and {} are in the folder; keep one",
                pair[0].name, pair[1].name
            )));
        }
    }
    if files.is_empty() {
        return Err(ImportError::Invalid(format!(
            "no registry files (ruc0.zip … ruc9.zip or ruc0.txt … ruc9.txt) in {}",
            dir.display()
        )));
    }
    Ok(files)
}

/// `ruc10` after `ruc9`.
fn natural_key(name: &str) -> (u64, String) {
    let digits: String = name.chars().skip(3).take_while(char::is_ascii_digit).collect();
    (digits.parse().unwrap_or(u64::MAX), name.to_ascii_lowercase())
}

/// What kind of line a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// An empty line (skipped).
    Blank,
    /// A line that is not a row (skipped).
    Broken,
    /// A RUC already read (skipped; the first occurrence is kept).
    Duplicate,
    /// A row whose DV is not the modulo-11 digit (imported as published).
    DvMismatch,
}

/// One listed problem.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// File name.
    pub file: String,
    /// 1-based line number.
    pub line: u64,
    /// Kind.
    pub kind: ProblemKind,
    /// What is wrong.
    pub message: String,
}

/// Counts of one file.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FileReport {
    /// File name.
    pub file: String,
    /// Lines read.
    pub lines: u64,
    /// Rows loaded.
    pub rows: u64,
    /// Blank lines.
    pub blank: u64,
    /// Broken lines.
    pub broken: u64,
    /// Repeated RUCs.
    pub duplicates: u64,
    /// Lines read as Latin-1 (loaded or not).
    pub latin1: u64,
    /// Rows whose DV differs from modulo 11.
    pub dv_mismatches: u64,
}

/// What a registry import did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportReport {
    /// The new generation (0 for a dry run).
    pub generation: i64,
    /// The publication date recorded.
    pub published: String,
    /// Per file.
    pub files: Vec<FileReport>,
    /// Rows loaded in all.
    pub rows: u64,
    /// Lines in all.
    pub lines: u64,
    /// Blank lines in all.
    pub blank: u64,
    /// Broken lines in all.
    pub broken: u64,
    /// Repeated RUCs in all.
    pub duplicates: u64,
    /// Latin-1 lines in all.
    pub latin1: u64,
    /// DV mismatches in all.
    pub dv_mismatches: u64,
    /// The first [`MAX_LISTED`] problems, in file and line order.
    pub problems: Vec<Problem>,
    /// Problems counted but not listed.
    pub problems_not_listed: u64,
    /// Seconds the import took.
    pub seconds: f64,
}

impl ImportReport {
    fn problem(&mut self, file: &str, line: u64, kind: ProblemKind, message: String) {
        if self.problems.len() < MAX_LISTED {
            self.problems.push(Problem {
                file: file.to_owned(),
                line,
                kind,
                message,
            });
        } else {
            self.problems_not_listed += 1;
        }
    }

    /// Lines not loaded: blank, broken and repeated.
    pub fn rejected(&self) -> u64 {
        self.blank + self.broken + self.duplicates
    }
}

/// Progress of an import, reported after every batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Bytes read so far.
    pub bytes: u64,
    /// Bytes in all files.
    pub total_bytes: u64,
    /// Rows loaded so far.
    pub rows: u64,
}

/// Calls `each` with every line of `file` (bytes without the line break), 1-based, and the
/// bytes consumed.
fn for_each_line(
    file: &SourceFile,
    mut each: impl FnMut(u64, &[u8], u64) -> Result<(), ImportError>,
) -> Result<(), ImportError> {
    let open = std::fs::File::open(&file.path).map_err(|e| ImportError::Io(format!("{}: {e}", file.name)))?;
    let mut read = |reader: &mut dyn BufRead, name: &str| -> Result<(), ImportError> {
        let mut buffer = Vec::with_capacity(256);
        let mut number = 0u64;
        loop {
            buffer.clear();
            let n = reader
                .read_until(b'\n', &mut buffer)
                .map_err(|e| ImportError::Io(format!("{name}: {e}")))?;
            if n == 0 {
                return Ok(());
            }
            number += 1;
            let line = buffer.strip_suffix(b"\n").unwrap_or(&buffer);
            each(number, line, n as u64)?;
        }
    };
    if file.name.to_ascii_lowercase().ends_with(".zip") {
        let mut archive = zip::ZipArchive::new(open)
            .map_err(|e| ImportError::Io(format!("{}: not a ZIP file: {e}", file.name)))?;
        for i in 0..archive.len() {
            let entry = archive
                .by_index(i)
                .map_err(|e| ImportError::Io(format!("{}: {e}", file.name)))?;
            let entry_name = entry.name().map(|n| n.into_owned()).unwrap_or_default();
            if !entry_name.to_ascii_lowercase().ends_with(".txt") {
                continue;
            }
            let name = format!("{}:{entry_name}", file.name);
            let mut reader = BufReader::with_capacity(1 << 20, entry);
            read(&mut reader, &name)?;
        }
        Ok(())
    } else {
        let mut reader = BufReader::with_capacity(1 << 20, open);
        read(&mut reader, &file.name)
    }
}

/// Parses every file, sending batches of rows to `send` (which blocks while the writer is
/// behind). Returns the report without generation and timing.
fn parse_files(
    files: &[SourceFile],
    published: &str,
    mut send: impl FnMut(Vec<RegistryRow>, u64) -> Result<(), ImportError>,
) -> Result<ImportReport, ImportError> {
    let mut report = ImportReport {
        published: published.to_owned(),
        ..ImportReport::default()
    };
    let mut seen: HashMap<u64, (u16, u64), FxBuild> = HashMap::default();
    let mut batch = Vec::with_capacity(BATCH);
    let mut bytes = 0u64;
    for (file_index, file) in files.iter().enumerate() {
        let mut counts = FileReport {
            file: file.name.clone(),
            ..FileReport::default()
        };
        let mut problems = Vec::new();
        for_each_line(file, |number, bytes_of_line, consumed| {
            bytes += consumed;
            counts.lines += 1;
            let (line, encoding) = match parse_line(bytes_of_line) {
                Line::Blank => {
                    counts.blank += 1;
                    problems.push((number, ProblemKind::Blank, "blank line".to_owned()));
                    return Ok(());
                }
                Line::Broken(err, encoding) => {
                    counts.broken += 1;
                    let text = String::from_utf8_lossy(bytes_of_line);
                    let shown: String = text.chars().take(120).collect();
                    problems.push((number, ProblemKind::Broken, format!("{err}: {shown:?}")));
                    (None, encoding)
                }
                Line::Row(row, encoding) => (Some(row), encoding),
            };
            if encoding == Encoding::Latin1 {
                counts.latin1 += 1;
            }
            let Some(row) = line else { return Ok(()) };
            let key = pack_ruc(&row.ruc).unwrap_or(0);
            if let Some((first_file, first_line)) = seen.get(&key) {
                counts.duplicates += 1;
                problems.push((
                    number,
                    ProblemKind::Duplicate,
                    format!(
                        "RUC {} already read at {}:{first_line}; this line is skipped",
                        row.ruc, files[*first_file as usize].name
                    ),
                ));
                return Ok(());
            }
            seen.insert(key, (u16::try_from(file_index).unwrap_or(u16::MAX), number));
            if row.dv_differs_from_modulo11() {
                counts.dv_mismatches += 1;
                problems.push((
                    number,
                    ProblemKind::DvMismatch,
                    format!(
                        "RUC {} has DV {} in the file, modulo 11 gives {}; imported as published",
                        row.ruc,
                        row.dv,
                        kuatia_domain::check_digit::modulo11(&row.ruc)
                    ),
                ));
            }
            counts.rows += 1;
            batch.push(row);
            if batch.len() == BATCH {
                send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)), bytes)?;
            }
            Ok(())
        })?;
        for (line, kind, message) in problems {
            report.problem(&file.name, line, kind, message);
        }
        report.rows += counts.rows;
        report.lines += counts.lines;
        report.blank += counts.blank;
        report.broken += counts.broken;
        report.duplicates += counts.duplicates;
        report.latin1 += counts.latin1;
        report.dv_mismatches += counts.dv_mismatches;
        report.files.push(counts);
    }
    if !batch.is_empty() {
        send(batch, bytes)?;
    }
    Ok(report)
}

/// Reads the files of `dir` without touching the database (`--dry-run`).
pub fn check_dir(dir: &Path, published: NaiveDate) -> Result<ImportReport, ImportError> {
    let started = Instant::now();
    let files = find_files(dir)?;
    let mut report = parse_files(&files, &published.to_string(), |_, _| Ok(()))?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Imports the registry files of `dir` as the publication of `published`, replacing the active
/// generation atomically. `progress` is called after every batch.
pub async fn import_registry(
    database: &Database,
    dir: &Path,
    published: NaiveDate,
    progress: &(dyn Fn(Progress) + Send + Sync),
) -> Result<ImportReport, ImportError> {
    let started = Instant::now();
    let started_at = Utc::now();
    let files = find_files(dir)?;
    let total_bytes: u64 = files.iter().map(|f| f.bytes).sum();
    let store = database.store();
    let now = Utc::now().trunc_subsecs(6);
    let lease = now + LEASE;
    let status = match registry::claim_lease(store.as_ref(), now, lease).await? {
        Some(status) => status,
        None => {
            let held = registry::status(store.as_ref()).await?;
            return Err(ImportError::Busy(held.import_lease.unwrap_or(lease)));
        }
    };
    let result = load(
        database,
        &files,
        published,
        status.active_slot,
        total_bytes,
        progress,
    )
    .await;
    let (report, slot) = match result {
        Ok(ok) => ok,
        Err(err) => {
            if let Err(release) = registry::release_lease(store.as_ref(), lease).await {
                tracing::warn!(error = %release, "releasing the import lease failed");
            }
            return Err(err);
        }
    };
    if report.rows == 0 {
        registry::release_lease(store.as_ref(), lease).await?;
        return Err(ImportError::Invalid(format!(
            "no row could be read from {} ({} lines: {} blank, {} broken); the registry is unchanged",
            dir.display(),
            report.lines,
            report.blank,
            report.broken
        )));
    }
    let mut report = report;
    report.seconds = started.elapsed().as_secs_f64();
    let switch = Switch {
        slot,
        lease,
        published: published.to_string(),
        rows: report.rows as i64,
        rejected: report.rejected() as i64,
        started_at,
        report: serde_json::to_value(&report).unwrap_or_default(),
    };
    match registry::switch(database, &switch).await {
        Ok(generation) => {
            report.generation = generation;
            report.seconds = started.elapsed().as_secs_f64();
            Ok(report)
        }
        Err(err) => {
            let _ = registry::release_lease(store.as_ref(), lease).await;
            Err(match err {
                registry::RegistryError::Store(e) => ImportError::Store(e),
                other => ImportError::Invalid(other.to_string()),
            })
        }
    }
}

/// Empties the inactive slot and fills it from the files; returns the report and the slot.
async fn load(
    database: &Database,
    files: &[SourceFile],
    published: NaiveDate,
    active: u8,
    total_bytes: u64,
    progress: &(dyn Fn(Progress) + Send + Sync),
) -> Result<(ImportReport, u8), ImportError> {
    let slot = 1 - active;
    registry::clear_slot(database, slot).await?;
    let mut writer = SlotWriter::open(database, slot).await?;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(Vec<RegistryRow>, u64)>(2);
    let files = files.to_vec();
    let published = published.to_string();
    let parser = tokio::task::spawn_blocking(move || {
        parse_files(&files, &published, |mut batch, bytes| {
            batch.sort_unstable_by(|a, b| a.ruc.cmp(&b.ruc));
            tx.blocking_send((batch, bytes))
                .map_err(|_| ImportError::Invalid("the database writer stopped".into()))
        })
    });
    let mut rows = 0u64;
    let mut failure = None;
    while let Some((batch, bytes)) = rx.recv().await {
        if let Err(err) = writer.write(&batch).await {
            failure = Some(err);
            break;
        }
        rows += batch.len() as u64;
        progress(Progress {
            bytes,
            total_bytes,
            rows,
        });
    }
    drop(rx);
    let parsed = parser
        .await
        .map_err(|e| ImportError::Invalid(format!("the file reader failed: {e}")))?;
    if let Some(err) = failure {
        return Err(err.into());
    }
    let report = parsed?;
    writer.finish().await?;
    progress(Progress {
        bytes: total_bytes,
        total_bytes,
        rows,
    });
    Ok((report, slot))
}

/// What a CSV import did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CsvReport {
    /// `mandates` or `siara`.
    pub kind: String,
    /// Rows loaded.
    pub rows: u64,
    /// Records refused, with their line and reason.
    pub rejected: Vec<Problem>,
    /// Records whose RUC appeared again later (the last one is kept).
    pub duplicates: u64,
}

fn read_csv(path: &Path, required: &[&str]) -> Result<(Vec<csv::Record>, Columns, String), ImportError> {
    let bytes =
        std::fs::read(path).map_err(|e| ImportError::Io(format!("reading {}: {e}", path.display())))?;
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(err) => err.into_bytes().iter().map(|&b| char::from(b)).collect(),
    };
    let mut records =
        csv::records(&text).map_err(|e| ImportError::Invalid(format!("{}: {e}", path.display())))?;
    if records.is_empty() {
        return Err(ImportError::Invalid(format!(
            "{}: {}",
            path.display(),
            csv::CsvError::Empty
        )));
    }
    let header = records.remove(0);
    let columns = Columns::find(&header, required)
        .map_err(|e| ImportError::Invalid(format!("{}: {e}", path.display())))?;
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok((records, columns, name))
}

/// Replaces the designations (`sifenMandate`) with the rows of a CSV file (columns
/// [`MANDATE_COLUMNS`]), in one transaction.
pub async fn import_mandates(database: &Database, path: &Path) -> Result<CsvReport, ImportError> {
    let (records, columns, name) = read_csv(path, &MANDATE_COLUMNS)?;
    let mut report = CsvReport {
        kind: "mandates".into(),
        ..CsvReport::default()
    };
    let mut rows: HashMap<String, MandateRow> = HashMap::new();
    for record in &records {
        match MandateRow::read(&columns, record) {
            Ok(row) => {
                if rows.insert(row.ruc.clone(), row).is_some() {
                    report.duplicates += 1;
                }
            }
            Err(message) => report.rejected.push(Problem {
                file: name.clone(),
                line: record.line as u64,
                kind: ProblemKind::Broken,
                message,
            }),
        }
    }
    let json: Vec<serde_json::Value> = rows
        .values()
        .map(|r| serde_json::json!([r.ruc, r.group, r.start_date.to_string(), r.link]))
        .collect();
    report.rows = json.len() as u64;
    replace_table(
        database,
        TableKind::Mandates,
        serde_json::Value::Array(json),
        &report,
    )
    .await?;
    Ok(report)
}

/// Replaces the registry matches (`siara`) with the rows of a CSV file (columns
/// [`SIARA_COLUMNS`]), in one transaction.
pub async fn import_siara(database: &Database, path: &Path) -> Result<CsvReport, ImportError> {
    let (records, columns, name) = read_csv(path, &SIARA_COLUMNS)?;
    let mut report = CsvReport {
        kind: "siara".into(),
        ..CsvReport::default()
    };
    let mut rows: HashMap<String, SiaraRow> = HashMap::new();
    for record in &records {
        match SiaraRow::read(&columns, record) {
            Ok(row) => {
                if rows.insert(row.ruc.clone(), row).is_some() {
                    report.duplicates += 1;
                }
            }
            Err(message) => report.rejected.push(Problem {
                file: name.clone(),
                line: record.line as u64,
                kind: ProblemKind::Broken,
                message,
            }),
        }
    }
    let json: Vec<serde_json::Value> = rows
        .values()
        .map(|r| {
            let mut fields = vec![serde_json::Value::from(r.ruc.clone())];
            fields.extend(
                r.fields
                    .iter()
                    .map(|f| serde_json::to_value(f).unwrap_or_default()),
            );
            serde_json::Value::Array(fields)
        })
        .collect();
    report.rows = json.len() as u64;
    replace_table(
        database,
        TableKind::Siara,
        serde_json::Value::Array(json),
        &report,
    )
    .await?;
    Ok(report)
}

#[derive(Clone, Copy)]
enum TableKind {
    Mandates,
    Siara,
}

/// Deletes every row of the table and inserts `rows` (a JSON array of arrays), and records the
/// import, in one transaction.
async fn replace_table(
    database: &Database,
    kind: TableKind,
    rows: serde_json::Value,
    report: &CsvReport,
) -> Result<(), ImportError> {
    let now = Utc::now();
    let report_json = serde_json::to_value(report).unwrap_or_default();
    let rejected = report.rejected.len() as i64;
    let loaded = report.rows as i64;
    let id = uuid::Uuid::now_v7();
    let kind_name = match kind {
        TableKind::Mandates => "mandates",
        TableKind::Siara => "siara",
    };
    const RECORD: &str = "INSERT INTO lookup_imports (id, kind, generation, published, started_at, \
                          finished_at, rows_loaded, rows_rejected, report) \
                          VALUES ($1, $2, NULL, NULL, $3, $3, $4, $5, $6)";
    let err = |e: sqlx::Error| ImportError::Store(StoreError::Database(Box::new(e)));
    match database {
        Database::Postgres(s) => {
            let (delete, insert) = match kind {
                TableKind::Mandates => (
                    "DELETE FROM lookup_mandates",
                    "INSERT INTO lookup_mandates (ruc, mandate_group, start_date, link) \
                     SELECT x ->> 0, x ->> 1, x ->> 2, x ->> 3 FROM jsonb_array_elements($1::jsonb) AS x",
                ),
                TableKind::Siara => (
                    "DELETE FROM lookup_siara",
                    "INSERT INTO lookup_siara (ruc, siara_group, category, legal_type, department, city, \
                       registry_state, last_communication, synchronized_at, source_link) \
                     SELECT x ->> 0, x ->> 1, x ->> 2, x ->> 3, x ->> 4, x ->> 5, x ->> 6, x ->> 7, \
                       x ->> 8, x ->> 9 FROM jsonb_array_elements($1::jsonb) AS x",
                ),
            };
            let mut tx = s.pool().begin().await.map_err(err)?;
            sqlx::query(delete).execute(&mut *tx).await.map_err(err)?;
            sqlx::query(insert)
                .bind(sqlx::types::Json(&rows))
                .execute(&mut *tx)
                .await
                .map_err(err)?;
            sqlx::query(RECORD)
                .bind(id)
                .bind(kind_name)
                .bind(now)
                .bind(loaded)
                .bind(rejected)
                .bind(sqlx::types::Json(&report_json))
                .execute(&mut *tx)
                .await
                .map_err(err)?;
            tx.commit().await.map_err(err)?;
        }
        Database::Sqlite(s) => {
            let (delete, insert) = match kind {
                TableKind::Mandates => (
                    "DELETE FROM lookup_mandates",
                    "INSERT INTO lookup_mandates (ruc, mandate_group, start_date, link) \
                     SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each($1)",
                ),
                TableKind::Siara => (
                    "DELETE FROM lookup_siara",
                    "INSERT INTO lookup_siara (ruc, siara_group, category, legal_type, department, city, \
                       registry_state, last_communication, synchronized_at, source_link) \
                     SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, \
                       value ->> 6, value ->> 7, value ->> 8, value ->> 9 FROM json_each($1)",
                ),
            };
            let mut tx = s.pool().begin_with("BEGIN IMMEDIATE").await.map_err(err)?;
            sqlx::query(delete).execute(&mut *tx).await.map_err(err)?;
            sqlx::query(insert)
                .bind(rows.to_string())
                .execute(&mut *tx)
                .await
                .map_err(err)?;
            sqlx::query(RECORD)
                .bind(id.to_string())
                .bind(kind_name)
                .bind(kuatia_application::hash::format_timestamp(now))
                .bind(loaded)
                .bind(rejected)
                .bind(report_json.to_string())
                .execute(&mut *tx)
                .await
                .map_err(err)?;
            tx.commit().await.map_err(err)?;
        }
    }
    Ok(())
}
