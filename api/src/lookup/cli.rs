//! `kuatia lookup …`: import the registry and the CSVs, generate synthetic registries, manage the
//! lookup service's keys, and show what is loaded.

use anyhow::{Context, bail};
use chrono::NaiveDate;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use kuatia_domain::lookup::plan::{Plan, period_at};
use kuatia_infrastructure::config::Config;
use kuatia_infrastructure::lookup::generate::{GenerateOptions, generate};
use kuatia_infrastructure::lookup::import::{self, CsvReport, ImportReport};
use kuatia_infrastructure::lookup::{keys, registry};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// `kuatia lookup …`
#[derive(Debug, Subcommand)]
pub enum LookupCommand {
    /// Import DNIT's registry files (ruc0.zip … ruc9.zip, or .txt) and/or the CSV files of
    /// designations and registry matches (columns: docs/lookup.md).
    Import(ImportArgs),
    /// Write synthetic registry files in DNIT's format (for tests, demos, benchmarks).
    Generate(GenerateArgs),
    /// The lookup service's API keys.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// The registry in use and the last imports.
    Status,
}

/// `kuatia lookup import …`
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Folder holding ruc0.zip … ruc9.zip (or ruc0.txt … ruc9.txt).
    #[arg(long, requires = "published")]
    pub dir: Option<PathBuf>,
    /// The publication date of the files (DNIT's "Actualizado al …"), YYYY-MM-DD; answered as
    /// `publicationDateText`.
    #[arg(long, requires = "dir")]
    pub published: Option<NaiveDate>,
    /// A CSV of e-invoicing designations (`sifenMandate`): ruc,group,start_date,link.
    #[arg(long)]
    pub mandates: Option<PathBuf>,
    /// A CSV of registry matches (`siara`): ruc,group,category,legal_type,department,city,
    /// registry_state,last_communication,synchronized_at,source_link.
    #[arg(long)]
    pub siara: Option<PathBuf>,
    /// Read and check the registry files without importing them.
    #[arg(long)]
    pub dry_run: bool,
    /// Also write the full report (every problem, with file and line) as JSON to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// `kuatia lookup generate …`
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Taxpayers to generate.
    #[arg(long, default_value_t = 1000)]
    pub rows: usize,
    /// Folder to write ruc0.txt … ruc9.txt into (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Seed of the random choices (the same seed writes the same files).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Write ruc0.zip … ruc9.zip, as DNIT publishes them.
    #[arg(long)]
    pub zip: bool,
    /// Names containing `|`.
    #[arg(long, default_value_t = 0)]
    pub pipes: usize,
    /// Rows written in Latin-1.
    #[arg(long, default_value_t = 0)]
    pub latin1: usize,
    /// Extra blank lines.
    #[arg(long, default_value_t = 0)]
    pub blank: usize,
    /// Extra broken lines.
    #[arg(long, default_value_t = 0)]
    pub broken: usize,
}

/// `kuatia lookup keys …`
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key; it is printed once.
    Create {
        /// dev, starter, business or enterprise.
        #[arg(long)]
        plan: String,
        /// Who it is for.
        #[arg(long)]
        name: String,
        /// Monthly limit of this key (required for enterprise; otherwise the plan's).
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Every key with its plan, limit and this month's use.
    List,
    /// Revoke a key by id or prefix (effective on every instance within KUATIA_LOOKUP_KEY_CACHE_SECS).
    Revoke {
        /// The key's id or its 12-character prefix.
        key: String,
    },
}

/// Runs a lookup command.
pub async fn run(config: &Config, cmd: LookupCommand) -> anyhow::Result<ExitCode> {
    if let LookupCommand::Generate(args) = cmd {
        return generate_files(args);
    }
    if let LookupCommand::Import(args) = &cmd
        && args.dry_run
    {
        return dry_run(args);
    }
    let database = crate::compose::open_database(config).await?;
    let result = match cmd {
        LookupCommand::Import(args) => import_files(&database, args).await,
        LookupCommand::Keys(cmd) => keys_command(config, &database, cmd).await,
        LookupCommand::Status => status(&database).await,
        LookupCommand::Generate(_) => unreachable!("handled above"),
    };
    database.close().await;
    result
}

fn generate_files(args: GenerateArgs) -> anyhow::Result<ExitCode> {
    let started = std::time::Instant::now();
    let summary = generate(
        &args.out,
        &GenerateOptions {
            rows: args.rows,
            seed: args.seed,
            zip: args.zip,
            pipes: args.pipes,
            latin1: args.latin1,
            blank: args.blank,
            broken: args.broken,
        },
    )
    .with_context(|| format!("writing into {}", args.out.display()))?;
    println!(
        "wrote {} taxpayers ({} persons, {} companies) into {} files in {} in {:.1} s",
        summary.rows,
        summary.persons,
        summary.rows - summary.persons,
        summary.files.len(),
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
    let states: Vec<String> = summary.states.iter().map(|(s, n)| format!("{s} {n}")).collect();
    println!("states: {}", states.join(", "));
    if summary.pipes + summary.latin1 + summary.blank + summary.broken > 0 {
        println!(
            "quirks: {} names with '|', {} Latin-1 rows, {} blank lines, {} broken lines",
            summary.pipes, summary.latin1, summary.blank, summary.broken
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn dry_run(args: &ImportArgs) -> anyhow::Result<ExitCode> {
    let (Some(dir), Some(published)) = (&args.dir, args.published) else {
        bail!("--dry-run checks registry files: give --dir and --published");
    };
    let report = import::check_dir(dir, published)?;
    print_report(&report, "checked (nothing imported)");
    write_report(args.report.as_ref(), &report)?;
    Ok(ExitCode::SUCCESS)
}

fn write_report(path: Option<&PathBuf>, report: &impl serde::Serialize) -> anyhow::Result<()> {
    if let Some(path) = path {
        let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        serde_json::to_writer_pretty(file, report)?;
        println!("full report: {}", path.display());
    }
    Ok(())
}

/// Problems printed on the terminal (all are in the report).
const PRINTED: usize = 50;

fn print_report(report: &ImportReport, what: &str) {
    println!(
        "{what}: {} taxpayers from {} files (published {}) in {:.1} s{}",
        report.rows,
        report.files.len(),
        report.published,
        report.seconds,
        if report.generation > 0 {
            format!(", registry generation {}", report.generation)
        } else {
            String::new()
        }
    );
    println!(
        "lines {}: {} blank, {} broken, {} repeated RUCs (skipped); {} read as Latin-1; {} DV differing from modulo 11 (kept)",
        report.lines, report.blank, report.broken, report.duplicates, report.latin1, report.dv_mismatches
    );
    for file in &report.files {
        println!(
            "  {:<24} {:>9} lines {:>9} rows {:>5} blank {:>5} broken {:>5} repeated {:>5} latin1",
            file.file, file.lines, file.rows, file.blank, file.broken, file.duplicates, file.latin1
        );
    }
    for p in report.problems.iter().take(PRINTED) {
        println!("  {}:{} {:?}: {}", p.file, p.line, p.kind, p.message);
    }
    let unprinted = report.problems.len().saturating_sub(PRINTED) as u64 + report.problems_not_listed;
    if unprinted > 0 {
        println!("  … and {unprinted} more (see --report FILE, or the lookup_imports table)");
    }
}

fn print_csv(report: &CsvReport) {
    println!(
        "{}: {} rows imported (replacing the previous ones), {} refused, {} repeated RUCs (the last one kept)",
        report.kind,
        report.rows,
        report.rejected.len(),
        report.duplicates
    );
    for p in report.rejected.iter().take(PRINTED) {
        println!("  {}:{} {}", p.file, p.line, p.message);
    }
}

async fn import_files(
    database: &kuatia_infrastructure::store::Database,
    args: ImportArgs,
) -> anyhow::Result<ExitCode> {
    if args.dir.is_none() && args.mandates.is_none() && args.siara.is_none() {
        bail!(
            "nothing to import: give --dir DIR --published YYYY-MM-DD, --mandates FILE and/or --siara FILE"
        );
    }
    if let (Some(dir), Some(published)) = (&args.dir, args.published) {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix:>10} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta}) {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_prefix("registry");
        let progress = |p: import::Progress| {
            bar.set_length(p.total_bytes);
            bar.set_position(p.bytes);
            bar.set_message(format!("{} rows", p.rows));
        };
        let result = import::import_registry(database, dir, published, &progress).await;
        bar.finish_and_clear();
        let report = result?;
        print_report(&report, "imported");
        write_report(args.report.as_ref(), &report)?;
    }
    if let Some(path) = &args.mandates {
        print_csv(&import::import_mandates(database, path).await?);
    }
    if let Some(path) = &args.siara {
        print_csv(&import::import_siara(database, path).await?);
    }
    Ok(ExitCode::SUCCESS)
}

async fn keys_command(
    config: &Config,
    database: &kuatia_infrastructure::store::Database,
    cmd: KeysCommand,
) -> anyhow::Result<ExitCode> {
    let store = database.store();
    let limits = super::Limits::from_config(config);
    match cmd {
        KeysCommand::Create { plan, name, limit } => {
            let Some(plan) = Plan::parse(&plan) else {
                let known: Vec<_> = Plan::ALL.iter().map(Plan::as_str).collect();
                bail!("no plan {plan:?}; plans: {}", known.join(", "));
            };
            let (key, secret) =
                keys::create_key(store.as_ref(), &name, plan, limit, chrono::Utc::now()).await?;
            println!("{secret}");
            eprintln!(
                "created lookup key {} ({}, plan {}, {} requests/month) for {:?}; the key above is shown once",
                key.id,
                key.prefix,
                key.plan,
                limits.of(&key),
                key.name
            );
        }
        KeysCommand::List => {
            let period = period_at(chrono::Utc::now()).name;
            let usage = keys::usage(store.as_ref(), &period).await?;
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "{:<36}  {:<12}  {:<10}  {:>12}  {:>12}  {:<10}  NAME",
                "ID",
                "PREFIX",
                "PLAN",
                "LIMIT/MONTH",
                format!("USED {period}"),
                "STATE"
            )?;
            for key in keys::list_keys(store.as_ref()).await? {
                writeln!(
                    out,
                    "{:<36}  {:<12}  {:<10}  {:>12}  {:>12}  {:<10}  {}",
                    key.id,
                    key.prefix,
                    key.plan,
                    limits.of(&key),
                    usage.get(&format!("key:{}", key.id)).copied().unwrap_or(0),
                    if key.revoked_at.is_some() {
                        "revoked"
                    } else {
                        "active"
                    },
                    key.name
                )?;
            }
        }
        KeysCommand::Revoke { key } => {
            match keys::revoke_key(store.as_ref(), &key, chrono::Utc::now()).await? {
                Some(key) => println!("revoked lookup key {} ({}, {:?})", key.id, key.prefix, key.name),
                None => bail!("no active lookup key with id or prefix {key:?}"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn status(database: &kuatia_infrastructure::store::Database) -> anyhow::Result<ExitCode> {
    let status = registry::status(database.store().as_ref()).await?;
    if status.generation == 0 {
        println!("no registry imported yet: kuatia lookup import --dir DIR --published YYYY-MM-DD");
    } else {
        println!(
            "registry generation {}: {} taxpayers, published {}, imported {}",
            status.generation,
            status.row_count,
            status.published.as_deref().unwrap_or("-"),
            status
                .imported_at
                .map_or_else(|| "-".to_owned(), |t| t.to_rfc3339())
        );
    }
    if let Some(lease) = status.import_lease {
        println!("an import is running (lease until {})", lease.to_rfc3339());
    }
    Ok(ExitCode::SUCCESS)
}
