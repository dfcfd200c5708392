//! The composition root: the one place that picks adapters and wires them into ports.
//!
//! `main.rs` calls [`start`] for `kuatia serve`; the black-box tests call it too, with port 0
//! and a fresh database, so they run exactly what production runs. No other module constructs
//! an adapter.

use anyhow::Context;
use kuatia_application::intake::IntakePorts;
use kuatia_application::process::autoimpresor::{Autoimpresor, AutoimpresorPorts};
use kuatia_application::process::delivery::{self, Deliveries, DeliveryPorts, DeliverySettings};
use kuatia_application::process::ports::{Clock, SystemClock};
use kuatia_application::process::printing::{Printing, PrintingPorts};
use kuatia_application::process::sifen::{LotSettings, Pipeline, SifenPorts};
use kuatia_application::process::webhook_delivery::{self, WebhookDelivery, WebhookPorts};
use kuatia_application::sandbox::SandboxPorts;
use kuatia_application::upcast;
use kuatia_application::worker::{WorkerConfig, WorkerPool};
use kuatia_infrastructure::config::Config;
use kuatia_infrastructure::destination::TenantDestinations;
use kuatia_infrastructure::number_reporter::HttpNumberReporter;
use kuatia_infrastructure::sifen::sign::OpensslSigner;
use kuatia_infrastructure::sifen_soap::{SoapClientConfig, SoapConnector};
use kuatia_infrastructure::store::{Database, DatabaseOptions};
use kuatia_infrastructure::vault::AesGcmSealer;
use kuatia_projections::{registry, runtime};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::state::AppState;

/// Opens (and migrates) the configured database with the service's projections and upcasters,
/// and makes sure every projection has its checkpoint row, so that status, metrics and rebuilds
/// see them all from the first moment.
pub async fn open_database(config: &Config) -> anyhow::Result<Database> {
    let options = DatabaseOptions {
        url: config.database_url.expose().to_owned(),
        app_role: Some(config.db_role.clone()).filter(|r| !r.is_empty()),
        max_connections: config.db_max_connections,
    };
    let database = Database::connect(&options, registry::inline(), Arc::new(upcast::registered()))
        .await
        .context("opening the database")?;
    for projection in registry::subscriptions() {
        database
            .store()
            .register_projection(projection.as_ref())
            .await
            .with_context(|| format!("registering projection {}", projection.name()))?;
    }
    Ok(database)
}

/// The master key: `KUATIA_MASTER_KEY`, or in demo mode the generated `<data_dir>/master.key`;
/// with the earlier keys of `KUATIA_MASTER_KEY_PREVIOUS` during a rotation. Only the service
/// (`serve` in demo mode) creates a key; see [`existing_sealer`] for every other command.
pub fn sealer(config: &Config) -> anyhow::Result<AesGcmSealer> {
    with_previous(config, current_sealer(config, true)?)
}

/// [`sealer`] for the commands (`secrets rotate`, …): they use the master key there is and never
/// create one (issue 26: a rotation run without `KUATIA_MASTER_KEY` wrote a new key, with which
/// the next start ran).
pub fn existing_sealer(config: &Config) -> anyhow::Result<AesGcmSealer> {
    with_previous(config, current_sealer(config, false)?)
}

fn with_previous(config: &Config, current: AesGcmSealer) -> anyhow::Result<AesGcmSealer> {
    match &config.master_key_previous {
        Some(list) => current
            .with_previous(list.expose())
            .context("KUATIA_MASTER_KEY_PREVIOUS"),
        None => Ok(current),
    }
}

fn current_sealer(config: &Config, may_create: bool) -> anyhow::Result<AesGcmSealer> {
    match &config.master_key {
        Some(key) => Ok(AesGcmSealer::from_base64(key.expose())?),
        None if config.demo_mode() && !may_create => AesGcmSealer::load(&config.data_dir)?.ok_or_else(|| {
            anyhow::anyhow!(
                "KUATIA_MASTER_KEY is not set and {} holds no demo master key: set KUATIA_MASTER_KEY \
                 to the key that sealed this database's secrets (this command never creates one)",
                config.data_dir.join("master.key").display()
            )
        }),
        None if config.demo_mode() => {
            let (sealer, created) = AesGcmSealer::load_or_create(&config.data_dir)?;
            if created {
                tracing::warn!(
                    dir = %config.data_dir.display(),
                    "demo mode: generated a master key into master.key; set KUATIA_MASTER_KEY for real data"
                );
            }
            Ok(sealer)
        }
        None => anyhow::bail!(
            "KUATIA_MASTER_KEY is not set: it seals certificates and credentials (generate one with \
             `openssl rand -base64 32`)"
        ),
    }
}

/// The key that signs artifact download URLs: `KUATIA_ARTIFACT_URL_KEY`, or derived from the
/// master key (`KUATIA_MASTER_KEY`, or demo mode's `<data_dir>/master.key`, which `sealer` has
/// created by now).
fn artifact_url_key(config: &Config) -> anyhow::Result<Vec<u8>> {
    use base64::Engine;
    if let Some(key) = config
        .artifact_url_key
        .as_ref()
        .filter(|k| !k.expose().is_empty())
    {
        return Ok(key.expose().as_bytes().to_vec());
    }
    let master = match &config.master_key {
        Some(key) => key.expose().to_owned(),
        None => std::fs::read_to_string(config.data_dir.join("master.key"))
            .context("reading the master key to derive the artifact URL key")?,
    };
    let master = zeroize::Zeroizing::new(
        base64::engine::general_purpose::STANDARD
            .decode(master.trim())
            .context("the master key is not base64")?,
    );
    Ok(crate::routes::artifacts::derive_url_key(&master))
}

/// The delivery ports with the configured mail server (`KUATIA_SMTP_URL`, `KUATIA_SMTP_FROM`),
/// WhatsApp (`KUATIA_WHATSAPP_*`) and Telegram (`KUATIA_TELEGRAM_*`) adapters.
fn messaging(config: &Config, ports: DeliveryPorts) -> DeliveryPorts {
    use kuatia_infrastructure::delivery::{SmtpMailer, Telegram, WhatsApp};
    let mailer = config
        .smtp_url
        .as_ref()
        .filter(|u| !u.expose().is_empty())
        .map(|url| {
            SmtpMailer::from_url(url.expose(), &config.smtp_from)
                .map(|m| Arc::new(m) as Arc<dyn delivery::Mailer>)
        });
    if let Some(Err(e)) = &mailer {
        tracing::warn!(error = %e, "the mail server setting is unusable; email deliveries will fail");
    }
    let whatsapp = match (&config.whatsapp_token, &config.whatsapp_phone_number_id) {
        (Some(token), Some(phone)) => Some(Arc::new(WhatsApp::new(
            &config.whatsapp_base_url,
            token.expose(),
            phone,
        )) as Arc<dyn delivery::ChatSender>),
        _ => None,
    };
    let telegram = config.telegram_bot_token.as_ref().map(|token| {
        Arc::new(Telegram::new(&config.telegram_base_url, token.expose())) as Arc<dyn delivery::ChatSender>
    });
    DeliveryPorts {
        mailer,
        whatsapp,
        telegram,
        ..ports
    }
}

/// A running service.
pub struct Service {
    /// Where the invoicing API listens.
    pub addr: SocketAddr,
    /// The database it runs on.
    pub database: Database,
    /// Where the taxpayer lookup API listens, when enabled.
    pub lookup_addr: Option<SocketAddr>,
    shutdown: CancellationToken,
    task: JoinHandle<anyhow::Result<()>>,
    /// The in-process SIFEN simulator (demo mode); it stops when the service is dropped.
    pub sifen_sim: Option<kuatia_infrastructure::sifen_sim::RunningSimulator>,
}

impl Service {
    /// Starts a graceful shutdown: stop accepting, let in-flight requests and jobs finish within
    /// the grace period, release job leases, close the pool.
    pub fn begin_shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Shuts down and waits until everything has stopped.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.task.await.context("the service task panicked")?
    }

    /// Waits until the service stops (after [`Service::begin_shutdown`] or a fatal error).
    pub async fn wait(self) -> anyhow::Result<()> {
        self.task.await.context("the service task panicked")?
    }
}

/// Starts the invoicing API, the subscription runtime and the job workers.
pub async fn start(config: Config) -> anyhow::Result<Service> {
    // Trace export for this service's spans, when configured; stopped (flushed) last, below.
    let otlp = match config.trace_export()? {
        Some(settings) => {
            if !kuatia_infrastructure::telemetry::is_installed() {
                tracing::warn!(
                    "an OTLP endpoint is set but the trace layer is not installed; no span will be exported"
                );
            }
            let exporter = kuatia_infrastructure::telemetry::otlp::OtlpExporter::start_with(&settings)
                .context("starting the OTLP trace exporter")?;
            tracing::info!(
                url = %settings.url,
                service = %settings.service_name,
                sampler = ?settings.sampler,
                headers = settings.headers.len(),
                "exporting traces over OTLP/HTTP"
            );
            Some(exporter)
        }
        None => None,
    };
    let database = open_database(&config).await?;
    let store = database.store();
    let jobs = database.jobs();
    let sealer = sealer(&config)?;
    let vault = kuatia_application::vault::Vault::new(store.clone(), Arc::new(sealer));
    // The master key is proven before anything runs: a wrong one would leave
    // documents waiting on secrets that never open.
    let keys = vault.prove().await.context("proving the master key")?;
    tracing::info!(
        key = %keys.current,
        previous = ?keys.previous,
        sealed = ?keys.in_use,
        "master key proven: it opens every sealed secret"
    );
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, database = ?database, "kuatia listening");
    // The taxpayer lookup service (issue 9) on its own listener, when enabled; stopped below,
    // before the database closes.
    let lookup = crate::lookup::start(&config, &database).await?;
    let lookup_addr = lookup.as_ref().map(|l| l.addr);

    let limiter = Arc::new(kuatia_application::rate_limit::RateLimiter::new(store.clone()));
    // The read models behind the use cases' read ports, and the clock they all read.
    let reads = Arc::new(kuatia_projections::reads::Reads::new(store.clone()));
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let artifact_location = config.artifact_location()?;
    let artifacts: Arc<dyn kuatia_application::artifacts::ArtifactStore> = Arc::new(
        kuatia_infrastructure::artifacts::ObjectArtifacts::open(&artifact_location)
            .with_context(|| format!("opening the artifact store {artifact_location:?}"))?,
    );
    let artifact_urls = Arc::new(crate::routes::artifacts::UrlSigner::new(
        artifact_url_key(&config)?,
        config.artifact_url_ttl_secs,
    ));
    let printer: Arc<dyn kuatia_application::printables::Printer> =
        Arc::new(kuatia_infrastructure::printing::TypstPrinter::new());
    let policy = Arc::new(kuatia_infrastructure::destination::Policy {
        allow: kuatia_infrastructure::destination::Policy::parse_allow_list(&config.private_destinations())
            .map_err(|e| anyhow::anyhow!("KUATIA_PRIVATE_DESTINATIONS: {e}"))?,
        demo_unrestricted: !config.public_signup,
    });
    let destinations: Arc<dyn kuatia_application::process::ports::Destinations> =
        Arc::new(TenantDestinations::new(policy, reads.clone()));
    // The webhook deliveries: the jobs and the endpoints' `test` share them.
    let webhooks = Arc::new(
        WebhookDelivery::new(WebhookPorts {
            store: store.clone(),
            jobs: jobs.clone(),
            vault: vault.clone(),
            endpoints: reads.clone(),
            sender: Arc::new(kuatia_infrastructure::webhook_sender::WebhookSender::default()),
            destinations: destinations.clone(),
            clock: clock.clone(),
        })
        .with_retry_scale(config.delivery_retry_scale),
    );
    let intake = IntakePorts {
        reads: reads.clone(),
        config: reads.clone(),
        series: reads.clone(),
        registry: Arc::new(kuatia_infrastructure::lookup::StoreRegistry(store.clone())),
        clock: clock.clone(),
    };
    // The sandbox previews with the same use cases, SIFEN's checks in process or at a test
    // endpoint, and throw-away certificates for anonymous previews.
    let sandbox = SandboxPorts {
        intake: intake.clone(),
        vault: vault.clone(),
        signer: Arc::new(OpensslSigner),
        printer: printer.clone(),
        certificates: Arc::new(kuatia_infrastructure::sandbox::ThrowawayCertificates::default()),
        sifen: Arc::new(kuatia_infrastructure::sandbox::PreviewEndpoints {
            target: match &config.sandbox_sifen_url {
                Some(url) => kuatia_infrastructure::sandbox::SifenTarget::Url(url.clone()),
                None => kuatia_infrastructure::sandbox::SifenTarget::OwnSimulator,
            },
            ..kuatia_infrastructure::sandbox::PreviewEndpoints::default()
        }),
    };
    // The deliveries: the jobs, and the console's "send by email" (AppState).
    let deliveries = Deliveries::new(
        messaging(
            &config,
            DeliveryPorts {
                store: store.clone(),
                jobs: jobs.clone(),
                artifacts: artifacts.clone(),
                mailer: None,
                whatsapp: None,
                telegram: None,
                clock: clock.clone(),
            },
        ),
        DeliverySettings {
            retry_scale: config.delivery_retry_scale,
            printable_wait_secs: config.printable_wait_secs,
        },
    );
    let state = AppState {
        store: store.clone(),
        jobs: jobs.clone(),
        access: reads.clone(),
        metrics_token: config.metrics_bearer_token.clone().map(Arc::new),
        prometheus: crate::metrics::handle(),
        max_body_bytes: config.max_body_bytes,
        public_signup: config.public_signup,
        insecure_cookies: config.insecure_cookies,
        limiter: limiter.clone(),
        rate_limit_per_key: config.rate_limit_per_key,
        rate_limit_per_ip: config.rate_limit_per_ip,
        rate_limit_per_tenant: config.rate_limit_per_tenant,
        vault,
        pfx_slots: Arc::new(kuatia_application::vault::PfxSlots::new(
            Arc::new(kuatia_infrastructure::vault::P12Reader),
            config.pfx_workers,
            config.pfx_queue,
        )),
        intake: intake.clone(),
        artifacts: artifacts.clone(),
        printer: printer.clone(),
        artifact_urls,
        public_link_days: config.public_link_days,
        destinations: destinations.clone(),
        webhook_delivery: webhooks.clone(),
        mail_configured: config.smtp_url.as_ref().is_some_and(|u| !u.expose().is_empty()),
        deliveries: deliveries.clone(),
        sandbox,
        operator_task: Default::default(),
        projections: Arc::new(RegisteredProjections(store.clone())),
    };
    // Demo mode runs the SIFEN simulator in-process; the demo channel points at it.
    let sifen_sim = if config.demo_mode() {
        let sim = kuatia_infrastructure::sifen_sim::start(
            &config.sifen_sim_listen.to_string(),
            kuatia_infrastructure::sifen_sim::SimConfig {
                state_file: Some(config.data_dir.join("sifen-sim.json")),
                ..Default::default()
            },
        )
        .await
        .with_context(|| format!("starting the SIFEN simulator on {}", config.sifen_sim_listen))?;
        tracing::info!(addr = %sim.addr, "demo mode: SIFEN simulator listening");
        Some(sim)
    } else {
        None
    };
    if let Some(sim) = &sifen_sim {
        let mut config = config.clone();
        config.sifen_sim_listen = sim.addr;
        let demo = crate::demo::seed(&state, &config)
            .await
            .context("seeding the demo tenant")?;
        tracing::info!(tenant = %demo.tenant, "demo mode: the demo tenant is ready");
        let invoice =
            crate::demo::write_sample_invoice(&config, &demo).context("writing the demo invoice")?;
        println!(
            "{}",
            crate::demo::banner(&demo, &format!("http://{addr}"), &invoice)
        );
    }
    let jobs_vault = state.vault.clone();
    let autoimpresor_vault = state.vault.clone();
    let router = crate::app(state);
    let shutdown = CancellationToken::new();
    let grace = Duration::from_secs(config.shutdown_grace_secs);

    let subscriptions = runtime::spawn(
        store.clone(),
        registry::subscriptions(),
        runtime::RuntimeConfig::default(),
        shutdown.clone(),
    );
    let pipeline = Pipeline::new(SifenPorts {
        store: store.clone(),
        vault: jobs_vault,
        artifacts: artifacts.clone(),
        config: reads.clone(),
        series: reads.clone(),
        sifen: Arc::new(SoapConnector::new(SoapClientConfig {
            connect_timeout_ms: config.sifen_connect_timeout_ms,
            read_timeout_ms: config.sifen_read_timeout_ms,
            extra_roots_file: config.sifen_extra_roots_file.clone(),
            ..Default::default()
        })),
        signer: Arc::new(OpensslSigner),
        destinations: destinations.clone(),
        clock: clock.clone(),
    })
    .with_retry_scale(config.sifen_retry_scale)
    .with_lots(
        LotSettings {
            window: Duration::from_millis(config.sifen_lot_window_ms),
            poll: Duration::from_millis(config.sifen_lot_poll_ms.unwrap_or(if config.demo_mode() {
                1_000
            } else {
                600_000
            })),
        },
        jobs.clone(),
    );
    let scan_jobs = jobs.clone();
    let printing = Printing::new(PrintingPorts {
        store: store.clone(),
        artifacts: artifacts.clone(),
        printer: printer.clone(),
        config: reads.clone(),
        clock: clock.clone(),
    });
    let autoimpresor = Autoimpresor::new(AutoimpresorPorts {
        store: store.clone(),
        vault: autoimpresor_vault,
        artifacts: artifacts.clone(),
        printer: printer.clone(),
        config: reads.clone(),
        series: reads.clone(),
        reporter: Arc::new(HttpNumberReporter::new()),
        destinations: destinations.clone(),
        clock: clock.clone(),
    });
    // The KuDE job waits on renders of background priority (`Printer::render_background`):
    // it gets a pool of its own, one worker per core, so that a backlog of KuDEs under load never
    // holds the workers the SIFEN pipeline and the deliveries need.
    let (renders, handlers): (Vec<_>, Vec<_>) = pipeline
        .handlers()
        .into_iter()
        .chain(printing.handlers())
        .chain(autoimpresor.handlers())
        .chain(webhooks.handlers())
        .chain(deliveries.handlers())
        .partition(|h| h.kind() == kuatia_application::documents::KUDE_RENDER);
    let pool = |handlers: Vec<Arc<dyn kuatia_application::worker::JobHandler>>, workers: usize| {
        handlers
            .into_iter()
            .fold(
                WorkerPool::new(
                    jobs.clone(),
                    WorkerConfig {
                        workers,
                        shutdown_grace: grace,
                        ..WorkerConfig::default()
                    },
                )
                .with_wake(store.position_hint()),
                WorkerPool::with_handler,
            )
            .spawn(shutdown.clone())
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = pool(handlers, config.workers);
    let render_workers = pool(renders, config.workers.min(cores));

    let flusher = limiter.spawn_flusher(Duration::from_secs(1), shutdown.clone());
    // The certificate.expiring scan: every instance's timer queues the same job per period (its key
    // names the period), so the scan runs once per period however many instances there are.
    let certificate_timer = {
        let (shutdown, every) = (
            shutdown.clone(),
            Duration::from_secs(config.certificate_scan_secs.max(1)),
        );
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    _ = tick.tick() => {
                        let job = webhook_delivery::certificate_scan_job(chrono::Utc::now(), every);
                        if let Err(e) = scan_jobs.enqueue(&job).await {
                            tracing::warn!(error = %e, "queuing the certificate scan failed");
                        }
                    }
                }
            }
        })
    };
    // Idempotency keys older than their 24 h window are removed hourly (claims check expiry
    // themselves, so this only keeps the table small), and so are succeeded jobs past their
    // retention (docs/operations.md, "Storage").
    let purger = {
        let (store, shutdown) = (store.clone(), shutdown.clone());
        let (jobs, retention) = (jobs.clone(), config.job_retention_days);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(3600));
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    _ = every.tick() => {
                        match kuatia_application::idempotency::purge_expired(&store, chrono::Utc::now()).await {
                            Ok(0) => {}
                            Ok(n) => tracing::info!(removed = n, "expired idempotency keys removed"),
                            Err(e) => tracing::warn!(error = %e, "purging idempotency keys failed"),
                        }
                        if retention > 0 {
                            let age = Duration::from_secs(u64::from(retention) * 86_400);
                            match kuatia_application::jobs::prune_succeeded(jobs.as_ref(), age, 10_000).await {
                                Ok(0) => {}
                                Ok(n) => tracing::info!(removed = n, retention_days = retention, "succeeded jobs pruned"),
                                Err(e) => tracing::warn!(error = %e, "pruning succeeded jobs failed"),
                            }
                        }
                    }
                }
            }
        })
    };
    let server_shutdown = shutdown.clone();
    let limits = crate::serve::Limits::of(&config);
    let db = database.clone();
    let task = tokio::spawn(async move {
        let router = router.layer(crate::serve::body_deadline(limits.body_read_timeout));
        let server = crate::serve::serve(listener, router, limits, server_shutdown.clone());
        let deadline = async {
            server_shutdown.cancelled().await;
            tokio::time::sleep(grace).await;
        };
        let served: anyhow::Result<()> = tokio::select! {
            () = server => Ok(()),
            () = deadline => {
                tracing::warn!("requests still in flight after the shutdown grace period; closing them");
                Ok(())
            }
        };
        // A fatal server error must stop the background work too.
        server_shutdown.cancel();
        let _ = subscriptions.await;
        let _ = workers.await;
        let _ = render_workers.await;
        let _ = flusher.await;
        let _ = purger.await;
        let _ = certificate_timer.await;
        if let Some(lookup) = lookup {
            let _ = lookup.stop().await;
        }
        db.close().await;
        if let Some(otlp) = otlp {
            otlp.shutdown(Duration::from_secs(2)).await;
        }
        tracing::info!("kuatia stopped");
        served
    });
    Ok(Service {
        addr,
        lookup_addr,
        database,
        shutdown,
        task,
        sifen_sim,
    })
}

/// The projections' registry and runtime, for the operators' room: the code
/// `kuatia projections rebuild` runs.
struct RegisteredProjections(kuatia_application::event_store::SharedStore);

#[async_trait::async_trait]
impl kuatia_application::support::ProjectionAdmin for RegisteredProjections {
    fn rebuildable(&self, name: &str) -> Option<bool> {
        registry::by_name(name)
            .map(|p| p.kind() != kuatia_application::event_store::ProjectionKind::SideEffect)
    }

    async fn rebuild(&self, name: &str, progress: &(dyn Fn(i64, i64) + Send + Sync)) -> Result<u64, String> {
        let projection = registry::by_name(name).ok_or_else(|| format!("no projection named {name:?}"))?;
        runtime::rebuild(&self.0, projection.as_ref(), progress)
            .await
            .map_err(|e| e.to_string())
    }
}
