//! `POST /v1/documents` throughput over HTTP, on SQLite and PostgreSQL.
//!
//! # What it measures
//!
//! For each backend the real service (the composition root, port 0, on a fresh database, rate
//! limit per key raised to 10 000 000/min so that it never answers 429) gets one tenant with a
//! company (RUC 80069563-1, the seller of [`sample_invoice`]), a branch `001`, an issuance
//! point `001`, a self-signed certificate for that RUC and a default `sifen` channel using it
//! (endpoint `http://127.0.0.1:9`: nothing listens there). Then 64 client tasks sharing one
//! `reqwest::Client` post documents back to back: the body is [`sample_invoice`] with the
//! company's `company_id`, a unique `external_id` and an `issue_datetime` of now (the sample's
//! fixed date goes stale after 30 days), each request with a unique
//! `Idempotency-Key`. The full request path runs: authentication, idempotency claim, routing,
//! readiness (certificate included), validation, the append of the document's events with their
//! inline projections, and the response.
//!
//! The clients run for a warm-up of 2 s (not counted), then for the measured window
//! (`KUATIA_BENCH_SECS`, default 10 s). A request counts when it *starts* inside the window;
//! the clients start none after it and the elapsed time runs until the last one has answered,
//! so `docs/s = documents / elapsed`. Only `201` answers whose status is `queued` count as
//! documents; latencies (p50, p90, p99, max) are those of the counted requests, start of the
//! request to the end of its body. Any other answer is an error: the first one is printed, and
//! the bench exits non-zero when more than 1 % of a backend's measured requests fail.
//!
//! Client and service share the machine (and one tokio runtime): on a small machine the figures
//! are those of the whole loop, not of the service alone.
//!
//! # At a fixed rate (`KUATIA_BENCH_RATE=N`)
//!
//! Back to back, 64 clients that always wait measure the queue as much as the service: by
//! Little's law the mean latency is 64 / throughput whatever the service does. With
//! `KUATIA_BENCH_RATE=N` the same 64 clients offer `N` documents/s in all instead (open loop, as
//! wrk2 does): client `c` sends its `k`-th request at `start + (k·64 + c) / N`. A client whose
//! previous answer is late sends at once, and the latency is counted from the moment the request
//! was *due*, not from when it could be sent, so a slow service is not hidden by clients that
//! waited for it (coordinated omission). The table then answers "at N documents/s, how long does
//! an answer take"; `docs/s` shows whether the service kept up with the offered rate.
//!
//! # End to end (`KUATIA_BENCH_E2E=1`)
//!
//! The same load, but with the service's job workers (the service's default, 256;
//! `KUATIA_BENCH_WORKERS=N` for another number) and the channel pointing at an in-process SIFEN
//! simulator (real HTTP and SOAP, signatures and QR checked): every document is numbered, signed,
//! sent and accepted. After the clients stop, the bench waits until every document is final and
//! reports each accepted document's posted → accepted time (the `documents` row's creation to
//! its `DocumentAccepted` event; p50/p90/p99), `docs/s` = `documents / (last acceptance − first
//! post)` and `accepted/s`, the acceptance rate while the clients post (from the 10th percentile
//! of the acceptance times to the last post).
//!
//! The two rates answer different questions. `docs/s` includes the pipeline's fill time: every
//! document waits for its lot to be processed (2 s at the simulator, as SIFEN's lots take time)
//! and polled, so a run that posts for 7 s cannot show more than about `documents / (7 s + the
//! latency)` however fast the pipeline is. `accepted/s` is the rate at which the pipeline
//! delivers acceptances once it is running and while intake still shares the cores with it (its
//! filling, the first tenth of the acceptances, and its draining after the last post left out):
//! at an offered rate it keeps up with, it equals the offered rate (and the p99 stays at the
//! lot's processing time plus a poll); at one it cannot, it is the pipeline's capacity under that
//! load (and the latency grows with the window). To find the capacity, offer more than it
//! (`KUATIA_BENCH_RATE`) for a window several times the fill time (`KUATIA_BENCH_SECS=20`) and
//! read `accepted/s`.
//!
//! # With a history (`KUATIA_BENCH_HISTORY=N`)
//!
//! Before the run, `N` documents of 50 other tenants are written into the same database by the
//! scale fixture (`kuatia bench seed`'s library, `kuatia_api::seed`): the same load then meets
//! tables that already hold that history (issue 30; docs/benchmarks.md, "At scale").
//!
//! # Backends
//!
//! - **SQLite**: a new file in a temporary folder, removed afterwards.
//! - **PostgreSQL**, when reachable at `KUATIA_BENCH_POSTGRES_URL` (an admin URL allowed to
//!   create databases; default `postgres://postgres@127.0.0.1:5432/postgres`): a new database,
//!   dropped afterwards (the same as `KUATIA_TEST_POSTGRES_URL` does for the tests). Skipped with
//!   a message otherwise.
//!
//! `KUATIA_BENCH_BACKENDS=postgres` (or `sqlite`) runs only the one named; both by default.
//!
//! # Running
//!
//! ```text
//! cargo bench -p kuatia-tests --bench documents_http
//! KUATIA_BENCH_SECS=3 cargo bench -p kuatia-tests --bench documents_http
//! KUATIA_BENCH_E2E=1 KUATIA_BENCH_SECS=10 cargo bench -p kuatia-tests --bench documents_http
//! ```

use anyhow::{Context, Result, bail};
use base64::Engine;
use kuatia_domain::document::canonical::sample_invoice;
use kuatia_infrastructure::selfsigned::SelfSigned;
use kuatia_infrastructure::store::redact_url;
use kuatia_tests::{Backend, TestApp, TestDb};
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::Connection;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Barrier;
use uuid::Uuid;

/// The service binary's allocator (`api/src/main.rs`): the service measured here runs in this
/// process.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Default measured seconds.
const DEFAULT_SECS: u64 = 10;
/// Warm-up before the measured window.
const WARM_UP: Duration = Duration::from_secs(2);
/// Concurrent client tasks.
const CLIENTS: usize = 64;
/// Default admin URL of the PostgreSQL server.
const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
/// The seller RUC of [`sample_invoice`].
const RUC: &str = "80069563-1";
const PASSWORD: &str = "bench pfx pass";
/// `KUATIA_BENCH_WORKERS=N`: the service's job workers in end-to-end mode (default: the
/// service's default, `KUATIA_WORKERS`).
fn e2e_workers() -> Result<usize> {
    match std::env::var("KUATIA_BENCH_WORKERS") {
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => bail!("KUATIA_BENCH_WORKERS={v:?}: expected a number of workers, at least 1"),
        },
        Err(_) => Ok(kuatia_infrastructure::config::Config::default().workers),
    }
}
/// How long end-to-end mode waits for the last document to be accepted.
const E2E_SETTLE: Duration = Duration::from_secs(300);

/// `KUATIA_BENCH_E2E=1`: measure posted → accepted through the SIFEN pipeline and the simulator.
fn end_to_end() -> bool {
    std::env::var("KUATIA_BENCH_E2E").is_ok_and(|v| v == "1")
}

/// `KUATIA_BENCH_RATE=N`: the documents/s the clients offer together (open loop); `None`: back
/// to back.
fn offered_rate() -> Result<Option<f64>> {
    match std::env::var("KUATIA_BENCH_RATE") {
        Ok(v) => match v.trim().parse::<f64>() {
            Ok(rate) if rate.is_finite() && rate > 0.0 => Ok(Some(rate)),
            _ => bail!("KUATIA_BENCH_RATE={v:?}: expected documents per second, more than 0"),
        },
        Err(_) => Ok(None),
    }
}

/// `KUATIA_BENCH_BACKENDS=sqlite,postgres` (the default: both): which backends run, as (SQLite,
/// PostgreSQL).
fn wanted_backends() -> Result<(bool, bool)> {
    let Ok(list) = std::env::var("KUATIA_BENCH_BACKENDS") else {
        return Ok((true, true));
    };
    let (mut sqlite, mut postgres) = (false, false);
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match name {
            "sqlite" => sqlite = true,
            "postgres" => postgres = true,
            _ => bail!("KUATIA_BENCH_BACKENDS={list:?}: expected sqlite and/or postgres, comma-separated"),
        }
    }
    if !(sqlite || postgres) {
        bail!("KUATIA_BENCH_BACKENDS={list:?}: names no backend");
    }
    Ok((sqlite, postgres))
}

/// Largest share of failed requests tolerated per backend.
const MAX_FAILURE_RATE: f64 = 0.01;

fn main() -> Result<()> {
    let secs = match std::env::var("KUATIA_BENCH_SECS") {
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .with_context(|| format!("KUATIA_BENCH_SECS={v:?}"))?,
        Err(_) => DEFAULT_SECS,
    };
    if secs == 0 {
        bail!("KUATIA_BENCH_SECS must be at least 1");
    }
    let rate = offered_rate()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let failed = runtime.block_on(run(Duration::from_secs(secs), cores, rate))?;
    if !failed.is_empty() {
        bail!(
            "more than {:.0} % of the requests failed on: {}",
            MAX_FAILURE_RATE * 100.0,
            failed.join(", ")
        );
    }
    Ok(())
}

/// Runs every reachable backend; returns those whose failure rate is too high.
async fn run(window: Duration, cores: usize, rate: Option<f64>) -> Result<Vec<&'static str>> {
    if end_to_end() {
        println!("kuatia end-to-end benchmark: POST /v1/documents → accepted by the SIFEN simulator");
    } else {
        println!("kuatia POST /v1/documents benchmark");
    }
    let env: String = [
        "KUATIA_BENCH_BACKENDS",
        "KUATIA_BENCH_E2E",
        "KUATIA_BENCH_RATE",
        "KUATIA_BENCH_SECS",
        "KUATIA_BENCH_WORKERS",
    ]
    .iter()
    .filter_map(|name| std::env::var(name).ok().map(|v| format!("{name}={v} ")))
    .collect();
    println!("command: {env}cargo bench -p kuatia-tests --bench documents_http");
    println!("argv:    {}", std::env::args().collect::<Vec<_>>().join(" "));
    let load = rate.map_or_else(
        || "back to back".to_owned(),
        |r| format!("{r} documents/s offered, latency from the due time"),
    );
    println!(
        "cores={cores}  clients={CLIENTS} ({load})  warm-up={}s  window={}s  body={} bytes",
        WARM_UP.as_secs(),
        window.as_secs(),
        invoice_body(
            &invoice_template(Uuid::nil()),
            "BENCH-00-00000000-00000000000000000000000000000000"
        )
        .len()
    );
    println!();

    let (sqlite, postgres) = wanted_backends()?;
    let mut backends = Vec::new();
    if sqlite {
        backends.push(Backend::Sqlite);
    }
    let admin_url =
        std::env::var("KUATIA_BENCH_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_owned());
    match tokio::time::timeout(Duration::from_secs(5), sqlx::PgConnection::connect(&admin_url)).await {
        _ if !postgres => {}
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            backends.push(Backend::Postgres(admin_url));
        }
        Ok(Err(err)) => println!(
            "postgres: skipped, cannot connect to {}: {err}",
            redact_url(&admin_url)
        ),
        Err(_) => println!(
            "postgres: skipped, no answer from {} within 5 s",
            redact_url(&admin_url)
        ),
    }

    let mut rows = Vec::new();
    for backend in &backends {
        let row = bench_backend(backend, window, rate)
            .await
            .with_context(|| format!("benchmarking {}", backend.name()))?;
        rows.push(row);
    }

    println!();
    println!(
        "{:<9} {:>8} {:>9} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>7}",
        "backend",
        "docs",
        "elapsed",
        "docs/s",
        "accepted/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "errors"
    );
    let mut failed = Vec::new();
    for row in &rows {
        println!(
            "{:<9} {:>8} {:>8.2}s {:>10.1} {:>10} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>7}",
            row.backend,
            row.latencies.len(),
            row.elapsed.as_secs_f64(),
            row.latencies.len() as f64 / row.elapsed.as_secs_f64(),
            row.accepting
                .map_or_else(|| "-".to_owned(), |rate| format!("{rate:.1}")),
            millis(percentile(&row.latencies, 0.50)),
            millis(percentile(&row.latencies, 0.90)),
            millis(percentile(&row.latencies, 0.99)),
            millis(row.latencies.last().copied().unwrap_or(0)),
            row.errors,
        );
        let total = row.latencies.len() + row.errors;
        if total == 0 || row.errors as f64 / total as f64 > MAX_FAILURE_RATE {
            failed.push(row.backend);
        }
    }
    Ok(failed)
}

/// The bench's `/metrics` bearer token.
const METRICS_TOKEN: &str = "bench-metrics";

/// Per job kind, the seconds job attempts took in all and their number, from the service's
/// `kuatia_job_duration_seconds` histogram (the process's metrics live as long as it does: the
/// caller subtracts what an earlier backend left).
async fn job_seconds(app: &TestApp) -> std::collections::BTreeMap<String, (f64, f64)> {
    let mut kinds = std::collections::BTreeMap::new();
    let Ok(response) = app
        .client
        .get(format!("{}/metrics", app.base))
        .bearer_auth(METRICS_TOKEN)
        .send()
        .await
    else {
        return kinds;
    };
    let text = response.text().await.unwrap_or_default();
    for line in text.lines() {
        let (series, value) = match line.rsplit_once(' ') {
            Some((series, value)) => (series, value.parse::<f64>().unwrap_or(0.0)),
            None => continue,
        };
        let (sum, rest) = if let Some(rest) = series.strip_prefix("kuatia_job_duration_seconds_sum{") {
            (true, rest)
        } else if let Some(rest) = series.strip_prefix("kuatia_job_duration_seconds_count{") {
            (false, rest)
        } else {
            continue;
        };
        let Some(kind) = rest.split("kind=\"").nth(1).and_then(|k| k.split('"').next()) else {
            continue;
        };
        let entry = kinds.entry(kind.to_owned()).or_insert((0.0, 0.0));
        if sum {
            entry.0 += value;
        } else {
            entry.1 += value;
        }
    }
    kinds
}

/// Where the job workers' time went: per kind, worker-seconds, attempts and per accepted document.
fn print_job_seconds(
    backend: &str,
    before: &std::collections::BTreeMap<String, (f64, f64)>,
    after: &std::collections::BTreeMap<String, (f64, f64)>,
    documents: usize,
) {
    println!("{backend:<9} job worker time:  kind  seconds  attempts  ms/attempt  ms/document");
    for (kind, (sum, count)) in after {
        let (sum0, count0) = before.get(kind).copied().unwrap_or((0.0, 0.0));
        let (sum, count) = (sum - sum0, count - count0);
        if count <= 0.0 {
            continue;
        }
        println!(
            "{backend:<9}   {kind:<18} {sum:>8.1} {count:>9.0} {:>11.1} {:>12.1}",
            1000.0 * sum / count,
            1000.0 * sum / documents.max(1) as f64
        );
    }
}

/// What one backend did in the measured window.
struct Row {
    backend: &'static str,
    elapsed: Duration,
    /// End to end: the acceptance rate while the clients post, once the pipeline has filled
    /// (documents/s; `steady_rate`); `elapsed` includes the fill and the drain.
    accepting: Option<f64>,
    /// Latencies of the counted documents, microseconds, sorted.
    latencies: Vec<u32>,
    errors: usize,
}

/// A tenant ready to emit: its id, owner key and the body every request starts from.
struct Setup {
    tenant: String,
    key: String,
    /// [`invoice_template`] for the tenant's company.
    template: Value,
}

async fn bench_backend(backend: &Backend, window: Duration, rate: Option<f64>) -> Result<Row> {
    let db = TestDb::on(backend).await.context("creating the database")?;
    match backend {
        Backend::Sqlite => println!("sqlite:   {}", db.url),
        Backend::Postgres(_) => println!("postgres: {}", redact_url(&db.url)),
    }
    // Intake only: no job workers, so the SIFEN pipeline does not share the two cores. End to
    // end: workers on, the channel pointing at an in-process SIFEN simulator.
    let sim = if end_to_end() {
        Some(
            kuatia_infrastructure::sifen_sim::start("127.0.0.1:0", Default::default())
                .await
                .context("starting the SIFEN simulator")?,
        )
    } else {
        None
    };
    let workers = if sim.is_some() { e2e_workers()? } else { 0 };
    let app = TestApp::spawn_on(db, |config| {
        config.rate_limit_per_key = 10_000_000;
        config.rate_limit_per_tenant = 10_000_000;
        config.workers = workers;
        config.metrics_bearer_token = Some(kuatia_infrastructure::config::Secret::new(METRICS_TOKEN));
    })
    .await
    .context("starting the service")?;
    history(&app).await?;
    let endpoint = sim
        .as_ref()
        .map_or_else(|| "http://127.0.0.1:9".to_owned(), |s| s.base_url());
    let jobs_before = job_seconds(&app).await;
    let result = drive(backend.name(), &app, window, rate, &endpoint).await;
    let result = match (result, &sim) {
        (Ok(row), Some(_)) => {
            let settled = settle(backend.name(), &app, row).await;
            if let Ok(row) = &settled {
                print_job_seconds(
                    backend.name(),
                    &jobs_before,
                    &job_seconds(&app).await,
                    row.latencies.len(),
                );
            }
            settled
        }
        (result, _) => result,
    };
    // The service stops before its database is dropped (removed folder, DROP DATABASE).
    app.stop().await;
    result
}

/// `KUATIA_BENCH_HISTORY=N`: before the run, `N` documents of 50 other tenants (the first with a
/// tenth of them) written by `kuatia bench seed`'s library, so that intake and the pipeline run
/// with that history present (issue 30). None by default.
async fn history(app: &TestApp) -> Result<()> {
    let documents: u64 = match std::env::var("KUATIA_BENCH_HISTORY") {
        Ok(v) => v
            .trim()
            .parse()
            .with_context(|| format!("KUATIA_BENCH_HISTORY={v:?}: expected a number of documents"))?,
        Err(_) => return Ok(()),
    };
    if documents == 0 {
        return Ok(());
    }
    let ports = kuatia_api::seed::SeedPorts::new(app.service().database.store(), &app.db.config())?;
    let options = kuatia_api::seed::SeedOptions {
        documents,
        tenants: 50,
        ..Default::default()
    };
    let started = Instant::now();
    let report = kuatia_api::seed::seed(&ports, &options, &|_| {}).await?;
    println!(
        "history: {} documents, {} events of {} tenants written in {:.1} s",
        report.documents,
        report.events,
        report.tenants.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

async fn drive(
    backend: &'static str,
    app: &TestApp,
    window: Duration,
    rate: Option<f64>,
    endpoint: &str,
) -> Result<Row> {
    let setup = setup(app, endpoint).await?;

    // One shared client for the load, with a connection per task kept alive.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(CLIENTS * 2)
        .http1_only()
        .tcp_nodelay(true)
        .build()?;
    let url = format!("{}/v1/documents", app.base);

    // Pre-flight: one document, to show what a counted answer is.
    let response = post(&client, &url, &setup, "BENCH-PREFLIGHT").await?;
    let status = response.status().as_u16();
    let body = response.text().await?;
    let parsed: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    println!(
        "{backend:<9} pre-flight: HTTP {status}, document status {}",
        parsed["status"]
    );
    if status != 201 || !is_queued(body.as_bytes()) {
        println!("{backend:<9} pre-flight body: {body}");
    }

    let shared = Arc::new(Shared {
        client,
        url,
        setup,
        first_error: AtomicBool::new(false),
        backend,
        rate,
    });
    let start = Arc::new(Barrier::new(CLIENTS + 1));
    let mut tasks = Vec::with_capacity(CLIENTS);
    let began = Instant::now() + Duration::from_millis(50);
    let measure_from = began + WARM_UP;
    let measure_to = measure_from + window;
    for task in 0..CLIENTS {
        tasks.push(tokio::spawn(client_task(
            shared.clone(),
            start.clone(),
            task,
            began,
            measure_from,
            measure_to,
        )));
    }
    start.wait().await;
    let mut latencies = Vec::new();
    let mut errors = 0;
    let mut warm_up = (0, 0);
    let mut last_end = measure_from;
    for task in tasks {
        let outcome = task.await??;
        latencies.extend(outcome.latencies);
        errors += outcome.errors;
        warm_up.0 += outcome.warm_up_ok;
        warm_up.1 += outcome.warm_up_errors;
        last_end = last_end.max(outcome.last_end);
    }
    latencies.sort_unstable();
    println!(
        "{backend:<9} warm-up: {} documents, {} errors; measured: {} documents, {errors} errors",
        warm_up.0,
        warm_up.1,
        latencies.len()
    );
    Ok(Row {
        backend,
        elapsed: last_end.saturating_duration_since(measure_from),
        accepting: None,
        latencies,
        errors,
    })
}

/// End-to-end mode: waits until every stored document is final, then replaces the row's
/// latencies with each document's posted → accepted time and its elapsed time with first post →
/// last acceptance, as read from the `documents` read model.
async fn settle(backend: &'static str, app: &TestApp, row: Row) -> Result<Row> {
    use kuatia_application::projection::SqlValue;
    let store = app.service().database.store();
    let deadline = Instant::now() + E2E_SETTLE;
    loop {
        let open = store
            .query(
                "SELECT COUNT(*) FROM documents WHERE status NOT IN ('accepted', 'rejected', 'failed_terminal')",
                &[],
            )
            .await?;
        let open = open.first().and_then(|r| r[0].as_i64()).unwrap_or(0);
        if open == 0 {
            break;
        }
        if Instant::now() > deadline {
            bail!("{open} documents not final after {E2E_SETTLE:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Accepted when its `DocumentAccepted` was recorded (the row's `updated_at` moves on with the
    // KuDE's artifact, later).
    let rows = store
        .query(
            "SELECT d.status, d.created_at, e.recorded_at FROM documents d \
             LEFT JOIN events e ON e.stream_id = d.stream_id AND e.event_type = 'DocumentAccepted'",
            &[],
        )
        .await?;
    let (mut first, mut last, mut last_post) = (None, None, None);
    let mut accepted_at = Vec::with_capacity(rows.len());
    let mut latencies = Vec::with_capacity(rows.len());
    let mut errors = 0;
    for r in &rows {
        let Some(created) = r[1].as_timestamp() else {
            continue;
        };
        last_post = Some(last_post.map_or(created, |l: chrono::DateTime<chrono::Utc>| l.max(created)));
        // Rejected or failed documents have no `DocumentAccepted`: they count as errors.
        let updated = match r[2].as_timestamp() {
            Some(updated) if matches!(&r[0], SqlValue::Text(s) if s == "accepted") => updated,
            _ => {
                errors += 1;
                continue;
            }
        };
        first = Some(first.map_or(created, |f: chrono::DateTime<chrono::Utc>| f.min(created)));
        last = Some(last.map_or(updated, |l: chrono::DateTime<chrono::Utc>| l.max(updated)));
        accepted_at.push(updated);
        let micros = (updated - created).num_microseconds().unwrap_or(i64::MAX);
        latencies.push(u32::try_from(micros).unwrap_or(u32::MAX));
    }
    latencies.sort_unstable();
    let elapsed = match (first, last) {
        (Some(f), Some(l)) => (l - f).to_std().unwrap_or_default(),
        _ => Duration::ZERO,
    };
    let accepting = last_post.and_then(|last_post| steady_rate(&mut accepted_at, last_post));
    println!(
        "{backend:<9} end to end: {} documents accepted, {errors} not, posted → accepted (intake answered {} in the window)",
        latencies.len(),
        row.latencies.len()
    );
    Ok(Row {
        backend,
        elapsed,
        accepting,
        latencies,
        errors,
    })
}

/// What the client tasks share.
struct Shared {
    client: reqwest::Client,
    url: String,
    setup: Setup,
    /// Whether an error body has been printed already.
    first_error: AtomicBool,
    backend: &'static str,
    /// Documents/s offered by all clients together; `None`: back to back.
    rate: Option<f64>,
}

/// What one client task did.
struct TaskOutcome {
    /// Microseconds of each counted request of the measured window.
    latencies: Vec<u32>,
    errors: usize,
    warm_up_ok: usize,
    warm_up_errors: usize,
    /// When its last measured request answered.
    last_end: Instant,
}

async fn client_task(
    shared: Arc<Shared>,
    start: Arc<Barrier>,
    task: usize,
    began: Instant,
    measure_from: Instant,
    measure_to: Instant,
) -> Result<TaskOutcome> {
    let mut outcome = TaskOutcome {
        latencies: Vec::with_capacity(1024),
        errors: 0,
        warm_up_ok: 0,
        warm_up_errors: 0,
        last_end: measure_from,
    };
    start.wait().await;
    let mut n = 0u64;
    loop {
        // Back to back: now. At a rate: when this request is due, even if that has passed.
        let sent = match shared.rate {
            None => Instant::now(),
            Some(rate) => {
                let slot = n as f64 * CLIENTS as f64 + task as f64;
                let due = began + Duration::from_secs_f64(slot / rate);
                tokio::time::sleep_until(due.into()).await;
                due
            }
        };
        if sent >= measure_to {
            break;
        }
        n += 1;
        let external_id = format!("BENCH-{task:02}-{n:08}-{}", Uuid::now_v7().simple());
        let result = match post(&shared.client, &shared.url, &shared.setup, &external_id).await {
            Ok(response) => {
                let status = response.status().as_u16();
                match response.bytes().await {
                    Ok(body) if status == 201 && is_queued(&body) => Ok(()),
                    Ok(body) => Err(format!("HTTP {status}: {}", String::from_utf8_lossy(&body))),
                    Err(err) => Err(format!("HTTP {status}, reading the body: {err}")),
                }
            }
            Err(err) => Err(format!("request failed: {err:#}")),
        };
        let done = Instant::now();
        let measured = sent >= measure_from;
        match result {
            Ok(()) if measured => {
                let micros = done.duration_since(sent).as_micros();
                outcome.latencies.push(u32::try_from(micros).unwrap_or(u32::MAX));
            }
            Ok(()) => outcome.warm_up_ok += 1,
            Err(message) => {
                if measured {
                    outcome.errors += 1;
                } else {
                    outcome.warm_up_errors += 1;
                }
                if !shared.first_error.swap(true, Ordering::Relaxed) {
                    println!("{:<9} first error: {message}", shared.backend);
                }
            }
        }
        if measured {
            outcome.last_end = outcome.last_end.max(done);
        }
    }
    Ok(outcome)
}

/// `POST /v1/documents` of the sample invoice with this `external_id`.
async fn post(
    client: &reqwest::Client,
    url: &str,
    setup: &Setup,
    external_id: &str,
) -> Result<reqwest::Response> {
    Ok(client
        .post(url)
        .bearer_auth(&setup.key)
        .header("X-Tenant-Id", &setup.tenant)
        .header("Content-Type", "application/json")
        .header("Idempotency-Key", Uuid::now_v7().to_string())
        .body(invoice_body(&setup.template, external_id))
        .send()
        .await?)
}

/// [`sample_invoice`] for `company`, issued now (Paraguay, UTC−3): the sample's fixed
/// `issue_datetime` (2026-03-02) goes stale, and a document issued more than 30 days before it is
/// sent is stored as `validation_failed` (rule 1150) — still a `201`.
fn invoice_template(company: Uuid) -> Value {
    let paraguay = chrono::FixedOffset::west_opt(3 * 3600).expect("UTC-3");
    let now = chrono::Utc::now().with_timezone(&paraguay) - chrono::Duration::minutes(1);
    let mut body = sample_invoice();
    body["company_id"] = json!(company);
    body["issue_datetime"] = json!(now.format("%Y-%m-%dT%H:%M:%S%:z").to_string());
    body
}

/// `template` with `external_id`, serialised.
fn invoice_body(template: &Value, external_id: &str) -> Vec<u8> {
    let mut body = template.clone();
    body["external_id"] = json!(external_id);
    serde_json::to_vec(&body).expect("a JSON value serialises")
}

/// Whether a document view says `"status":"queued"` (the service writes compact JSON).
fn is_queued(body: &[u8]) -> bool {
    const NEEDLE: &[u8] = br#""status":"queued""#;
    body.windows(NEEDLE.len()).any(|w| w == NEEDLE)
}

/// A tenant with a company, branch 001, issuance point 001, a certificate for the company's
/// RUC and a default `sifen` channel using it.
async fn setup(app: &TestApp, endpoint: &str) -> Result<Setup> {
    let (tenant, key) = app.tenant("bench").await;
    let send = |method: Method, path: &str, body: Value| {
        let request = app.as_key(method, path, &key, &tenant).json(&body);
        let path = path.to_owned();
        async move {
            let response = request.send().await.with_context(|| format!("POST {path}"))?;
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            if status != 201 {
                bail!("POST {path}: HTTP {status}: {body}");
            }
            body["id"]
                .as_str()
                .map(str::to_owned)
                .with_context(|| format!("POST {path}: no id in {body}"))
        }
    };
    let company = send(Method::POST, "/v1/companies", TestApp::company_body(RUC)).await?;
    let branch = send(
        Method::POST,
        "/v1/branches",
        json!({"company_id": company, "code": "001", "name": "Casa central"}),
    )
    .await?;
    send(
        Method::POST,
        "/v1/issuance-points",
        json!({"branch_id": branch, "code": "001"}),
    )
    .await?;
    let pfx = SelfSigned::for_ruc("DE GENERACION ELECTRONICA S.A.", RUC, 365)
        .pfx(PASSWORD)
        .context("making the certificate")?;
    let certificate = send(
        Method::POST,
        "/v1/certificates",
        json!({
            "company_id": company,
            "pfx_base64": base64::engine::general_purpose::STANDARD.encode(pfx),
            "password": PASSWORD,
        }),
    )
    .await?;
    send(
        Method::POST,
        "/v1/emission-channels",
        json!({
            "company_id": company,
            "channel": "sifen",
            "is_default": true,
            "credentials": {"endpoint": endpoint},
            "sifen": {
                "environment": "test",
                "timbrado": "12345678",
                "timbrado_valid_from": "2026-01-01",
                "csc_id": "0001",
                "csc": "ABCD0000000000000000000000000000",
                "certificate_id": certificate,
            },
        }),
    )
    .await?;
    Ok(Setup {
        tenant,
        key,
        template: invoice_template(company.parse().context("company id")?),
    })
}

/// The acceptance rate while the clients still post (documents/s): the acceptances between the
/// 10th percentile of the acceptance times (the pipeline has filled: the first lots waited for the
/// simulator's processing time) and the last post, over that span. The drain after the last post
/// is left out: intake no longer shares the cores then, so it would flatter the pipeline. `None`
/// with fewer than 10 acceptances or when the pipeline had not filled before the last post (a
/// window too short).
fn steady_rate(
    accepted_at: &mut [chrono::DateTime<chrono::Utc>],
    last_post: chrono::DateTime<chrono::Utc>,
) -> Option<f64> {
    if accepted_at.len() < 10 {
        return None;
    }
    accepted_at.sort_unstable();
    let from = accepted_at[accepted_at.len() / 10];
    let span = (last_post - from).to_std().ok().filter(|span| !span.is_zero())?;
    let accepted = accepted_at
        .iter()
        .filter(|&&at| at > from && at <= last_post)
        .count();
    Some(accepted as f64 / span.as_secs_f64())
}

/// The value at quantile `q` of sorted microsecond latencies.
fn percentile(latencies: &[u32], q: f64) -> u32 {
    if latencies.is_empty() {
        return 0;
    }
    let index = ((latencies.len() - 1) as f64 * q).round() as usize;
    latencies[index]
}

fn millis(micros: u32) -> f64 {
    f64::from(micros) / 1000.0
}
