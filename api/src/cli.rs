//! The `kuatia` command line.

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use kuatia_application::event_store::{ReadFilter, SharedStore};
use kuatia_application::hash::ChainVerifier;
use kuatia_domain::tenancy::TenantId;
use kuatia_infrastructure::config::Config;
use kuatia_projections::{registry, runtime};
use std::io::Write;
use std::process::ExitCode;

/// kuatia: electronic invoicing for Paraguay.
#[derive(Debug, Parser)]
#[command(
    name = "kuatia",
    version,
    about = "kuatia: electronic invoicing for Paraguay (SIFEN v150 and autoimpresor), with the taxpayer (RUC) lookup service beside it.",
    long_about = "kuatia: electronic invoicing for Paraguay. Integrators send sales documents as JSON; kuatia validates, numbers, signs and submits them to SIFEN (or renders autoimpresor printables) and reports back through status endpoints and webhooks.\n\nWith no subcommand it runs `serve`. Without DATABASE_URL it runs in demo mode on ./data/kuatia.db (see README \"Demo mode\")."
)]
pub struct Cli {
    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP services and the background workers (the default).
    Serve,
    /// Apply pending database migrations and exit.
    Migrate,
    /// Inspect or rebuild read models.
    #[command(subcommand)]
    Projections(ProjectionsCommand),
    /// Read the event log.
    #[command(subcommand)]
    Events(EventsCommand),
    /// Run the SIFEN simulator: SIFEN's SOAP services, checks and codes, with
    /// fault injection, for development and tests.
    SifenSim(SifenSimArgs),
    /// The taxpayer (RUC) lookup service: import the registry, generate test registries,
    /// manage its API keys.
    #[command(subcommand)]
    Lookup(crate::lookup::cli::LookupCommand),
    /// The sealed secrets (certificate keys, CSCs, credentials).
    #[command(subcommand)]
    Secrets(SecretsCommand),
    /// The job queue: list jobs, retry or discard one (each change recorded as an event).
    #[command(subcommand)]
    Jobs(JobsCommand),
    /// The operators of the whole service (support staff): the console's operators' room opens
    /// to them (each change recorded as an event).
    #[command(subcommand)]
    Operators(OperatorsCommand),
    /// Benchmark fixtures: `bench seed` writes a realistic history (docs/benchmarks.md, "At
    /// scale").
    #[command(subcommand)]
    Bench(BenchCommand),
}

/// `kuatia bench …`
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Write a realistic history through the real store: tenants with a company, a branch and
    /// point, a certificate and both channels (made by the API's use cases), then documents of
    /// every type and final status with their whole event chains (about 10 events each) and
    /// their artifacts as small blobs. Prints a JSON summary (tenants, their owner keys,
    /// documents, events, seconds) on standard output; progress goes to standard error. Meant for
    /// a database of its own: it refuses a database seeded with the same --seed.
    Seed {
        /// Documents in all.
        #[arg(long, default_value_t = 100_000)]
        documents: u64,
        /// Tenants (one company each).
        #[arg(long, default_value_t = 10)]
        tenants: u32,
        /// The random generator's seed (the same seed writes the same documents).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The share of the documents in the first tenant (0 to 1); the others share the rest.
        #[arg(long, default_value_t = 0.1)]
        large_share: f64,
        /// Documents per group-committed append.
        #[arg(long, default_value_t = 500)]
        batch: usize,
        /// The history spans this many days before now.
        #[arg(long, default_value_t = 365)]
        days: u32,
    },
}

/// `kuatia operators …`
#[derive(Debug, Subcommand)]
pub enum OperatorsCommand {
    /// Make a registered person an operator. Recorded as `OperatorAdded`.
    Add {
        /// Their email (a user of the service).
        email: String,
        /// Who: recorded as the event's actor (default: the OS user).
        #[arg(long)]
        actor: Option<String>,
    },
    /// End a person's operator rights. Recorded as `OperatorRemoved`.
    Remove {
        /// Their email.
        email: String,
        /// Who: recorded as the event's actor (default: the OS user).
        #[arg(long)]
        actor: Option<String>,
    },
    /// The operators' emails.
    List,
}

/// `kuatia jobs …`
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Jobs, the most recently changed first: id, kind, status, attempts, next attempt, last error.
    List {
        /// pending, failed (pending after a failed attempt), running, succeeded or dead.
        #[arg(long, value_parser = parse_job_status)]
        status: Option<kuatia_application::jobs::JobListStatus>,
        /// Only this kind (`sifen.submit`, `webhook.deliver`, …).
        #[arg(long)]
        kind: Option<String>,
        /// Only jobs about this document (its id).
        #[arg(long)]
        document: Option<uuid::Uuid>,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Make a dead or waiting job due now, with one more attempt. Recorded as `JobRetried`.
    Retry {
        /// The job's id.
        id: uuid::Uuid,
        /// Why (kept in the event).
        #[arg(long)]
        reason: Option<String>,
        /// Who: recorded as the event's actor (default: the OS user).
        #[arg(long)]
        actor: Option<String>,
    },
    /// Make a waiting job dead without running it. Recorded as `JobDiscarded`.
    Discard {
        /// The job's id.
        id: uuid::Uuid,
        /// Why (required; kept in the event and the job's last error).
        #[arg(long)]
        reason: String,
        /// Who: recorded as the event's actor (default: the OS user).
        #[arg(long)]
        actor: Option<String>,
    },
    /// Remove succeeded jobs older than a number of days (the service does it hourly with
    /// KUATIA_JOB_RETENTION_DAYS); pending, running and dead jobs stay. Prints how many went.
    Prune {
        /// Days a succeeded job is kept (default: KUATIA_JOB_RETENTION_DAYS, 30).
        #[arg(long)]
        older_than_days: Option<u32>,
    },
}

fn parse_job_status(text: &str) -> Result<kuatia_application::jobs::JobListStatus, String> {
    kuatia_application::jobs::JobListStatus::parse(text)
        .ok_or_else(|| format!("{text:?} is not one of pending, failed, running, succeeded, dead"))
}

/// `kuatia secrets …`
#[derive(Debug, Subcommand)]
pub enum SecretsCommand {
    /// Re-seal under KUATIA_MASTER_KEY every secret sealed under an earlier key (given in
    /// KUATIA_MASTER_KEY_PREVIOUS); exit 1 if any secret does not open. Safe beside running
    /// instances and safe to run again.
    Rotate,
}

/// `kuatia sifen-sim …`
#[derive(Debug, clap::Args)]
pub struct SifenSimArgs {
    /// Address to listen on.
    #[arg(long, env = "KUATIA_SIFEN_SIM_LISTEN", default_value = "127.0.0.1:8082")]
    pub listen: String,
    /// Keep approvals, lots and events in this JSON file across restarts.
    #[arg(long)]
    pub state: Option<std::path::PathBuf>,
    /// Accept another CSC for QR hashes: `RUC:ID:CSC` or `ID:CSC` (repeatable; the generic
    /// test CSCs 0001 and 0002 are always accepted).
    #[arg(long = "csc")]
    pub cscs: Vec<kuatia_infrastructure::sifen_sim::CscEntry>,
    /// A timbrado on file, `RUC:NUMBER:START[:END]` (dates as 2024-01-31; repeatable): the
    /// rules of MT §12.4 on the timbrado's validity apply to DEs of the timbrados listed.
    #[arg(long = "timbrado")]
    pub timbrados: Vec<kuatia_infrastructure::sifen_sim::SimTimbrado>,
    /// Milliseconds a lot stays "en procesamiento" (0361).
    #[arg(long, default_value_t = 2000)]
    pub lot_processing_ms: u64,
    /// Delay added to every answer, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub latency_ms: u64,
    /// Share (0–1) of requests processed whose answer is withheld.
    #[arg(long, default_value_t = 0.0)]
    pub drop_rate: f64,
    /// Share (0–1) of requests answered with an HTML HTTP 500.
    #[arg(long, default_value_t = 0.0)]
    pub error_rate: f64,
    /// Share (0–1) of requests answered with 0161 (server unavailable).
    #[arg(long, default_value_t = 0.0)]
    pub unavailable_rate: f64,
    /// A fault drawn at random on one operation, `OPERATION:FAULT:RATE` (repeatable):
    /// `siConsDE:0161:0.05` answers 5 % of siConsDE's requests with 0161, `*:0162:0.01` 1 % of
    /// every operation's with 0162. FAULT is `drop`, `timeout`, `http500`, `fault` or any
    /// four-digit code, answered in the operation's own shape with nothing processed.
    #[arg(long = "fault", value_name = "OPERATION:FAULT:RATE", value_parser = parse_random_fault)]
    pub faults: Vec<String>,
    /// Seed of the random faults, for reproducible runs.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Refuse documents and events without a signature (as SIFEN does).
    #[arg(long)]
    pub require_signature: bool,
    /// Validate each rDE (siRecepDE_v150.xsd) and event group (siRecepEvento_v150.xsd) against
    /// SIFEN's v150 schemas in this folder, as SIFEN does; a document that breaks them is
    /// answered 0160. Needs xmllint (Debian: libxml2-utils).
    #[arg(long, env = "SIFEN_XSD_DIR", value_name = "DIR")]
    pub xsd_dir: Option<std::path::PathBuf>,
    /// Serve HTTPS (TLS 1.2, like SIFEN) with this server certificate, PEM (leaf first);
    /// with --tls-key. Clients trust it as an extra root. Plain HTTP without it.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The server certificate's private key, PEM (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Require TLS client certificates and verify them against these CA certificates (PEM).
    /// Without it (and without --require-client-cert) a client certificate is asked for but
    /// not required.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub client_ca: Option<std::path::PathBuf>,
    /// Require a TLS client certificate but accept any, self-signed included (SIFEN requires
    /// mutual TLS; test certificates are self-signed). Its RUC must be in its subject
    /// serialNumber (else 0007).
    #[arg(long, requires = "tls_cert")]
    pub require_client_cert: bool,
}

/// `--fault`: checked as it is read, kept as written.
fn parse_random_fault(text: &str) -> Result<String, String> {
    text.parse::<kuatia_infrastructure::sifen_sim::RandomFault>()?;
    Ok(text.to_owned())
}

impl SifenSimArgs {
    /// The TLS side, when --tls-cert is given.
    fn tls(&self) -> anyhow::Result<Option<kuatia_infrastructure::sifen_sim::SimTls>> {
        let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) else {
            return Ok(None);
        };
        Ok(Some(kuatia_infrastructure::sifen_sim::SimTls::from_files(
            cert,
            key,
            self.client_ca.as_deref(),
            self.require_client_cert,
        )?))
    }

    fn config(self) -> kuatia_infrastructure::sifen_sim::SimConfig {
        let mut config = kuatia_infrastructure::sifen_sim::SimConfig {
            state_file: self.state,
            lot_processing_ms: self.lot_processing_ms,
            latency_ms: self.latency_ms,
            drop_rate: self.drop_rate,
            error_rate: self.error_rate,
            unavailable_rate: self.unavailable_rate,
            seed: self.seed,
            require_signature: self.require_signature,
            xsd_dir: self.xsd_dir,
            faults: self.faults,
            ..Default::default()
        };
        config.cscs.extend(self.cscs);
        config.timbrados = self.timbrados;
        config
    }
}

/// `kuatia projections …`
#[derive(Debug, Subcommand)]
pub enum ProjectionsCommand {
    /// Empty a projection and replay it from position 0 (never a side-effect subscription).
    Rebuild {
        /// The projection to rebuild.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        name: Option<String>,
        /// Rebuild every projection without side effects.
        #[arg(long)]
        all: bool,
    },
    /// Name, kind, position and lag of every projection.
    Status,
}

/// `kuatia events …`
#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// Write a tenant's events as NDJSON (stored form, with hashes), in global order. An unknown
    /// tenant, document or stream is an error (exit 1), never an empty export.
    Export {
        /// Tenant id (UUID).
        #[arg(long)]
        tenant: TenantId,
        /// Only events after this global position.
        #[arg(long, default_value_t = 0)]
        after: i64,
        /// Only this document's events (its id, as the API answers it).
        #[arg(long, conflicts_with = "stream")]
        document: Option<uuid::Uuid>,
        /// Only this stream (the internal stream id, `document:<tenant>:<document>`, …).
        #[arg(long)]
        stream: Option<String>,
    },
    /// Check hash chains; exit 1 naming the first broken event. With --file, check an export
    /// offline (no database is opened): every hash, every chain link, positions rising.
    Verify {
        /// An NDJSON export (`kuatia events export`) to check instead of the database; `-` reads
        /// standard input.
        #[arg(long, value_name = "FILE")]
        file: Option<std::path::PathBuf>,
    },
}

/// Runs the command line; returns the process exit code.
pub async fn run(cli: Cli) -> ExitCode {
    let config = match Config::load() {
        Ok(config) => config,
        Err(err) => {
            eprintln!("kuatia: {err}");
            return ExitCode::from(2);
        }
    };
    kuatia_infrastructure::telemetry::init(config.log_format);
    let result = match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(config).await,
        Command::Migrate => migrate(&config).await,
        Command::Projections(cmd) => projections(&config, cmd).await,
        Command::Events(cmd) => events(&config, cmd).await,
        Command::SifenSim(args) => sifen_sim(args).await,
        Command::Lookup(cmd) => crate::lookup::cli::run(&config, cmd).await,
        Command::Secrets(SecretsCommand::Rotate) => rotate_secrets(&config).await,
        Command::Jobs(cmd) => jobs(&config, cmd).await,
        Command::Operators(cmd) => operators(&config, cmd).await,
        Command::Bench(BenchCommand::Seed {
            documents,
            tenants,
            seed,
            large_share,
            batch,
            days,
        }) => {
            let options = crate::seed::SeedOptions {
                documents,
                tenants,
                seed,
                large_share,
                batch,
                days,
            };
            bench_seed(&config, &options).await
        }
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("kuatia: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(config: Config) -> anyhow::Result<ExitCode> {
    // The handlers come first: a SIGTERM that arrives while the service starts is then queued and
    // honoured once it runs, instead of killing the process with the default action.
    #[cfg(unix)]
    let (mut term, mut interrupt) = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
            signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
        )
    };
    let service = crate::compose::start(config).await?;
    #[cfg(unix)]
    tokio::select! {
        _ = term.recv() => {}
        _ = interrupt.recv() => {}
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await?;
    tracing::info!("shutdown signal received; draining");
    service.stop().await?;
    Ok(ExitCode::SUCCESS)
}

async fn sifen_sim(args: SifenSimArgs) -> anyhow::Result<ExitCode> {
    use kuatia_infrastructure::sifen_sim;
    let listen = args.listen.clone();
    let tls = args.tls()?;
    let simulator = sifen_sim::Simulator::new(args.config())?;
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let addr = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(%addr, scheme, "SIFEN simulator listening");
    println!("SIFEN simulator on {scheme}://{addr} (stats: {scheme}://{addr}/sim/stats)");
    let shutdown = async {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            if let (Ok(mut term), Ok(mut interrupt)) =
                (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
            {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = interrupt.recv() => {}
                }
                return;
            }
        }
        let _ = tokio::signal::ctrl_c().await;
    };
    match tls {
        Some(tls) => sifen_sim::serve_tls_with_shutdown(listener, simulator, tls, shutdown).await,
        None => sifen_sim::serve_with_shutdown(listener, simulator, shutdown).await,
    }
    .context("serving the SIFEN simulator")?;
    Ok(ExitCode::SUCCESS)
}

async fn rotate_secrets(config: &Config) -> anyhow::Result<ExitCode> {
    let sealer = crate::compose::existing_sealer(config)?;
    let current = kuatia_application::vault::Sealer::key_id(&sealer).to_owned();
    let previous = kuatia_application::vault::Sealer::previous_key_ids(&sealer);
    let database = crate::compose::open_database(config).await?;
    let vault = kuatia_application::vault::Vault::new(database.store(), std::sync::Arc::new(sealer));
    let report = vault.rotate(500).await;
    database.close().await;
    let report = report.context("rotating the sealed secrets")?;
    println!(
        "current master key {current}; earlier keys held: {}",
        if previous.is_empty() {
            "none".to_owned()
        } else {
            previous.join(", ")
        }
    );
    let total: u64 = report.rotated.values().sum();
    for (key, n) in &report.rotated {
        println!("re-sealed {n} secret(s) sealed under {key}");
    }
    println!("re-sealed {total} secret(s) in all");
    if report.failed.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for (id, key, why) in &report.failed {
        eprintln!("kuatia: secret {id} (under key {key}) left as it is: {why}");
    }
    eprintln!(
        "kuatia: {} secret(s) did not open; add their master key to KUATIA_MASTER_KEY_PREVIOUS and run again",
        report.failed.len()
    );
    Ok(ExitCode::FAILURE)
}

async fn bench_seed(config: &Config, options: &crate::seed::SeedOptions) -> anyhow::Result<ExitCode> {
    if !(0.0..=1.0).contains(&options.large_share) {
        bail!("--large-share must be between 0 and 1");
    }
    let database = crate::compose::open_database(config).await?;
    let store = database.store();
    let ports = crate::seed::SeedPorts::new(store, config)?;
    let bar = progress_bar("documents");
    bar.set_length(options.documents);
    let progress = |n: u64| bar.set_position(n);
    let report = crate::seed::seed(&ports, options, &progress).await;
    bar.finish_and_clear();
    database.close().await;
    let report = report?;
    let summary = serde_json::json!({
        "backend": format!("{:?}", database.backend()),
        "documents": report.documents,
        "events": report.events,
        "artifacts": report.artifacts,
        "artifact_bytes": report.artifact_bytes,
        "document_secs": (report.document_secs * 100.0).round() / 100.0,
        "events_per_sec": (report.events as f64 / report.document_secs.max(1e-9)).round(),
        "build_secs": (report.build_secs * 100.0).round() / 100.0,
        "artifact_secs": (report.artifact_secs * 100.0).round() / 100.0,
        "append_wait_secs": (report.append_wait_secs * 100.0).round() / 100.0,
        "tenants": report.tenants.iter().map(|t| serde_json::json!({
            "slug": t.slug,
            "tenant_id": t.id,
            "company_id": t.company_id,
            "ruc": t.ruc,
            "documents": t.documents,
            "api_key": t.api_key.as_str(),
        })).collect::<Vec<_>>(),
    });
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(ExitCode::SUCCESS)
}

async fn migrate(config: &Config) -> anyhow::Result<ExitCode> {
    let database = crate::compose::open_database(config).await?;
    database.close().await;
    println!("migrations applied ({:?})", database.backend());
    Ok(ExitCode::SUCCESS)
}

fn progress_bar(name: &str) -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>20} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(name.to_owned());
    bar
}

async fn projections(config: &Config, cmd: ProjectionsCommand) -> anyhow::Result<ExitCode> {
    let database = crate::compose::open_database(config).await?;
    let store = database.store();
    let result = match cmd {
        ProjectionsCommand::Status => projection_status(&store).await,
        ProjectionsCommand::Rebuild { name, all } => {
            let targets = if all {
                registry::all()
                    .into_iter()
                    .filter(|p| p.kind() != kuatia_application::event_store::ProjectionKind::SideEffect)
                    .collect()
            } else {
                let name = name.unwrap_or_default();
                match registry::by_name(&name) {
                    Some(p) => vec![p],
                    None => {
                        let known: Vec<_> = registry::all().iter().map(|p| p.name()).collect();
                        bail!("no projection named {name:?}; known: {}", known.join(", "))
                    }
                }
            };
            for projection in targets {
                let bar = progress_bar(projection.name());
                let progress = |position: i64, head: i64| {
                    bar.set_length(head.max(0) as u64);
                    bar.set_position(position.max(0) as u64);
                };
                let started = std::time::Instant::now();
                let head = store.head_position().await?;
                let applied = runtime::rebuild(&store, projection.as_ref(), &progress).await?;
                let secs = started.elapsed().as_secs_f64();
                bar.finish_and_clear();
                // A projection reads only its streams' events: the log's length over the time
                // says how fast the whole log was gone through.
                println!(
                    "rebuilt {}: {applied} events replayed in {secs:.1} s ({:.0} events/s), over a log of \
                     {head} events ({:.0} events/s)",
                    projection.name(),
                    applied as f64 / secs.max(1e-9),
                    head as f64 / secs.max(1e-9)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    };
    database.close().await;
    result
}

async fn projection_status(store: &SharedStore) -> anyhow::Result<ExitCode> {
    let statuses = store.subscription_statuses().await?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<24} {:<12} {:>12} {:>10}  LAST_ERROR",
        "NAME", "KIND", "POSITION", "LAG"
    )?;
    for s in statuses {
        writeln!(
            out,
            "{:<24} {:<12} {:>12} {:>10}  {}",
            s.name,
            s.kind,
            s.position,
            s.lag,
            s.last_error.unwrap_or_else(|| "-".into())
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn events(config: &Config, cmd: EventsCommand) -> anyhow::Result<ExitCode> {
    // An auditor checks what they were given without access to the service's database.
    if let EventsCommand::Verify { file: Some(file) } = &cmd {
        return verify_file(file);
    }
    let database = crate::compose::open_database(config).await?;
    let store = database.store();
    let result = match cmd {
        EventsCommand::Export {
            tenant,
            after,
            document,
            stream,
        } => {
            let stream = document
                .map(|id| kuatia_domain::document::aggregate::stream_id(tenant, id))
                .or(stream);
            export(&store, tenant, after, stream, document).await
        }
        EventsCommand::Verify { .. } => verify(&store).await,
    };
    database.close().await;
    result
}

/// Whether the tenant exists: a row in the tenants read model, or (a tenant written by a test
/// or an import, without its tenant stream) at least one event.
async fn tenant_known(store: &SharedStore, tenant: TenantId) -> anyhow::Result<bool> {
    use kuatia_application::projection::SqlValue;
    let rows = store
        .query(
            "SELECT id FROM tenants WHERE id = $1",
            &[SqlValue::Uuid(tenant.as_uuid())],
        )
        .await?;
    if !rows.is_empty() {
        return Ok(true);
    }
    let any = store
        .read_all_raw(&ReadFilter {
            limit: 1,
            tenant: Some(tenant),
            ..ReadFilter::default()
        })
        .await?;
    Ok(!any.is_empty())
}

async fn export(
    store: &SharedStore,
    tenant: TenantId,
    after: i64,
    stream: Option<String>,
    document: Option<uuid::Uuid>,
) -> anyhow::Result<ExitCode> {
    if !tenant_known(store, tenant).await? {
        bail!("no tenant {tenant}: nothing to export");
    }
    if let Some(stream_id) = &stream {
        let first = store
            .read_all_raw(&ReadFilter {
                limit: 1,
                tenant: Some(tenant),
                stream_id: Some(stream_id.clone()),
                ..ReadFilter::default()
            })
            .await?;
        if first.is_empty() {
            match document {
                Some(id) => bail!("no document {id} in tenant {tenant}"),
                None => {
                    bail!("no stream {stream_id:?} in tenant {tenant} (a document's events: --document <id>)")
                }
            }
        }
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut filter = ReadFilter {
        after,
        limit: 1000,
        tenant: Some(tenant),
        stream_id: stream,
        ..ReadFilter::default()
    };
    loop {
        // Each body written out as the text it is stored as (and hashed over), unparsed.
        let page = store.read_all_raw_json(&filter).await?;
        let Some(last) = page.last() else { break };
        filter.after = last.global_position;
        for event in &page {
            serde_json::to_writer(&mut out, event)?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Prints where a chain broke, in the one format both `verify`s use.
fn print_break(broken: &kuatia_application::hash::ChainBreak) {
    println!(
        "BROKEN: event {} (global position {}, stream {}, version {}): {}",
        broken.event_id, broken.global_position, broken.stream_id, broken.stream_version, broken.reason
    );
}

/// `kuatia events verify --file`: the chains of an export, with no database. Every stream must
/// be whole (from its first version): an export cut with `--after` does not verify.
fn verify_file(path: &std::path::Path) -> anyhow::Result<ExitCode> {
    use std::io::BufRead;
    let reader: Box<dyn BufRead> = if path.as_os_str() == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?,
        ))
    };
    let mut verifier = ChainVerifier::default();
    for (n, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let event: kuatia_application::event_store::RecordedEvent = serde_json::from_str(&line)
            .with_context(|| format!("line {} of {} is not an exported event", n + 1, path.display()))?;
        if let Err(broken) = verifier.check(&event) {
            print_break(&broken);
            return Ok(ExitCode::FAILURE);
        }
    }
    println!(
        "ok: {} events in {} streams verified, last position {}",
        verifier.checked(),
        verifier.streams(),
        verifier.last_position().unwrap_or(0)
    );
    Ok(ExitCode::SUCCESS)
}

async fn verify(store: &SharedStore) -> anyhow::Result<ExitCode> {
    let found = kuatia_application::support::verify_store(store, &|_, _| {}).await?;
    if let Some(broken) = &found.broken {
        print_break(broken);
        return Ok(ExitCode::FAILURE);
    }
    println!(
        "ok: {} events in {} streams verified, head position {}",
        found.checked, found.streams, found.head
    );
    Ok(ExitCode::SUCCESS)
}

/// The operator a support command records: `--actor`, else the OS user.
fn operator(actor: Option<String>) -> String {
    actor
        .filter(|a| !a.trim().is_empty())
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
        .or_else(|| std::env::var("LOGNAME").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "unknown".to_owned())
}

use kuatia_application::support::job_status;

async fn jobs(config: &Config, cmd: JobsCommand) -> anyhow::Result<ExitCode> {
    let database = crate::compose::open_database(config).await?;
    let queue = database.jobs();
    let store = database.store();
    let result = match cmd {
        JobsCommand::List {
            status,
            kind,
            document,
            limit,
        } => list_jobs(queue.as_ref(), status, kind, document, limit).await,
        JobsCommand::Retry { id, reason, actor } => {
            let job =
                kuatia_application::support::retry_job(&store, queue.as_ref(), id, &operator(actor), reason)
                    .await;
            said_change(job, "retried")
        }
        JobsCommand::Discard { id, reason, actor } => {
            let job = kuatia_application::support::discard_job(
                &store,
                queue.as_ref(),
                id,
                &operator(actor),
                &reason,
            )
            .await;
            said_change(job, "discarded")
        }
        JobsCommand::Prune { older_than_days } => {
            match older_than_days.unwrap_or(config.job_retention_days) {
                0 => Err(anyhow::anyhow!(
                    "KUATIA_JOB_RETENTION_DAYS is 0 (keep every job): give --older-than-days"
                )),
                days => kuatia_application::jobs::prune_succeeded(
                    queue.as_ref(),
                    std::time::Duration::from_secs(u64::from(days) * 86_400),
                    10_000,
                )
                .await
                .map(|n| {
                    println!("removed {n} succeeded job(s) older than {days} day(s)");
                    ExitCode::SUCCESS
                })
                .map_err(Into::into),
            }
        }
    };
    database.close().await;
    result
}

async fn list_jobs(
    queue: &dyn kuatia_application::jobs::JobQueue,
    status: Option<kuatia_application::jobs::JobListStatus>,
    kind: Option<String>,
    document: Option<uuid::Uuid>,
    limit: usize,
) -> anyhow::Result<ExitCode> {
    let jobs = queue
        .list(&kuatia_application::jobs::JobFilter {
            status,
            kind,
            document,
            limit,
        })
        .await?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<36} {:<24} {:<9} {:>8}  {:<24}  LAST_ERROR",
        "ID", "KIND", "STATUS", "ATTEMPTS", "NEXT_ATTEMPT"
    )?;
    for job in &jobs {
        writeln!(
            out,
            "{:<36} {:<24} {:<9} {:>8}  {:<24}  {}",
            job.id,
            job.kind,
            job_status(job),
            format!("{}/{}", job.attempts, job.max_attempts),
            kuatia_application::hash::format_timestamp(job.next_attempt_at),
            job.last_error
                .as_deref()
                .map(|e| e.replace('\n', " "))
                .unwrap_or_else(|| "-".into())
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Says what a retry or discard made of the job (recorded as an event of the tenant's `support`
/// stream by `kuatia_application::support`), or why nothing changed. The queue change and the
/// event are two commits: a failed append is reported (exit 1) after the change.
fn said_change(
    changed: Result<kuatia_application::jobs::Job, kuatia_application::support::SupportError>,
    done: &str,
) -> anyhow::Result<ExitCode> {
    let job = changed?;
    println!(
        "{done} job {} ({}): now {}, attempts {}/{}",
        job.id,
        job.kind,
        job_status(&job),
        job.attempts,
        job.max_attempts
    );
    Ok(ExitCode::SUCCESS)
}

async fn operators(config: &Config, cmd: OperatorsCommand) -> anyhow::Result<ExitCode> {
    use kuatia_application::support;
    let database = crate::compose::open_database(config).await?;
    let store = database.store();
    let result = match cmd {
        OperatorsCommand::Add { email, actor } => {
            let known = kuatia_application::identity::user_by_email(&store, &email).await?;
            if known.is_none() {
                database.close().await;
                bail!(
                    "no user {email:?}: the person registers first (POST /v1/auth/register or an invitation)"
                );
            }
            if support::add_operator(&store, &email, &operator(actor)).await? {
                println!("{email} is now an operator");
            } else {
                println!("{email} was already an operator");
            }
            Ok(ExitCode::SUCCESS)
        }
        OperatorsCommand::Remove { email, actor } => {
            if support::remove_operator(&store, &email, &operator(actor)).await? {
                println!("{email} is no longer an operator");
                Ok(ExitCode::SUCCESS)
            } else {
                println!("{email} is not an operator");
                Ok(ExitCode::FAILURE)
            }
        }
        OperatorsCommand::List => {
            for email in support::operators(&store).await? {
                println!("{email}");
            }
            Ok(ExitCode::SUCCESS)
        }
    };
    database.close().await;
    result
}
