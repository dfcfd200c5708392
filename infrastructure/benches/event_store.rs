//! Event store throughput benchmark, on SQLite and PostgreSQL.
//!
//! # What it measures
//!
//! For each backend, against a fresh, migrated, otherwise empty database:
//!
//! 1. **Append throughput** (events/s) with 1, 8 and 64 concurrent writers (tokio tasks), each
//!    call appending one event; then 64 writers appending 10 events per call (`batch=10`). Every
//!    writer owns a few streams of its own tenant and appends round-robin to them with
//!    `ExpectedVersion::Exact` (tracked per stream, `NoStream` for the first append), so the full
//!    append path runs: advisory lock / write mutex, head lookup, hash chain, insert, commit. The
//!    payload is a ~300-byte invoice line. Each scenario appends a fixed number of events and
//!    reports `events / elapsed`, plus the p50 and p99 latency of one `append` call.
//! 2. **Catch-up read throughput** (events/s): `read_all` with `ReadFilter { after, limit: 1000 }`
//!    paging from position 0 to the head (everything the append scenarios wrote), then the same
//!    with `read_all_raw` (no upcasting).
//!
//! Before the timed scenarios an untimed warm-up round opens the pool's connections (and their
//! prepared-statement caches) so that connection setup is not billed to the first scenario.
//! No inline projections and an empty upcaster chain are used: this is the store alone.
//!
//! # Backends
//!
//! - **SQLite**, always: a new file `kuatia-bench-<uuid>.db` under `std::env::temp_dir()`
//!   (WAL, `synchronous = FULL`, as in production), deleted at the end.
//! - **PostgreSQL**, when reachable: the bench connects to an admin URL, runs
//!   `CREATE DATABASE kuatia_bench_<random>`, benchmarks against that database (pool of 70
//!   connections, so 64 writers each get one; the service role `kuatia_app`, created by the
//!   migrations) and ends with `DROP DATABASE … WITH (FORCE)`. If the server cannot be reached the
//!   PostgreSQL rows are skipped with a message.
//!
//! # Running
//!
//! ```text
//! cargo bench -p kuatia-infrastructure --bench event_store
//! ```
//!
//! Environment variables:
//!
//! - `KUATIA_BENCH_EVENTS`: events appended per append scenario (default 20000; the batched
//!   scenario makes a tenth as many calls).
//! - `KUATIA_BENCH_POSTGRES_URL`: admin URL of the PostgreSQL server; its user must be allowed to
//!   create and drop databases (default `postgres://postgres@127.0.0.1:5432/postgres`).
//!
//! Output is one line per backend and scenario, e.g.
//!
//! ```text
//! postgres  append     writers=64  batch=1   events=20000   elapsed= 17.88s      1119 events/s  p50=55.21ms p99=89.29ms
//! postgres  read_all   page=1000            events=80128   elapsed=  0.75s    106562 events/s
//! ```
//!
//! (p50/p99 are the latencies of single `append` calls; the read rows count every event in the
//! store, warm-up included.)

use anyhow::{Context, Result, bail};
use kuatia_application::event_store::{
    AppendRequest, EventMetadata, ExpectedVersion, NewEvent, ReadFilter, SharedStore, StreamRef,
};
use kuatia_application::upcast::UpcasterChain;
use kuatia_domain::tenancy::TenantId;
use kuatia_infrastructure::store::{Database, DatabaseOptions, redact_url};
use serde_json::{Value, json};
use sqlx::AssertSqlSafe;
use sqlx::postgres::PgPoolOptions;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Barrier;
use uuid::Uuid;

/// Default events per append scenario.
const DEFAULT_EVENTS: usize = 20_000;
/// Default admin URL of the PostgreSQL server.
const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
/// PostgreSQL pool size: 64 writers plus headroom.
const POSTGRES_CONNECTIONS: u32 = 70;
/// Streams each writer appends to, round-robin.
const STREAMS_PER_WRITER: usize = 4;
/// Page size of the catch-up reads.
const PAGE: usize = 1000;
/// The append scenarios: (concurrent writers, events per append call).
const APPEND_SCENARIOS: [(usize, usize); 4] = [(1, 1), (8, 1), (64, 1), (64, 10)];

fn main() -> Result<()> {
    let events = match std::env::var("KUATIA_BENCH_EVENTS") {
        Ok(v) => v
            .trim()
            .parse::<usize>()
            .with_context(|| format!("KUATIA_BENCH_EVENTS={v:?}"))?,
        Err(_) => DEFAULT_EVENTS,
    };
    if events == 0 {
        bail!("KUATIA_BENCH_EVENTS must be at least 1");
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(run(events, cores))
}

async fn run(events: usize, cores: usize) -> Result<()> {
    let payload_bytes = invoice_line(1, 0).to_string().len();
    println!("kuatia event store benchmark");
    println!(
        "cores={cores}  events/append scenario={events}  payload={payload_bytes} bytes  \
         streams/writer={STREAMS_PER_WRITER}  read page={PAGE}"
    );
    println!();

    // SQLite: always.
    let file = std::env::temp_dir().join(format!("kuatia-bench-{}.db", Uuid::now_v7()));
    let url = format!("sqlite://{}", file.display());
    println!("sqlite: {}", file.display());
    let result = bench_backend("sqlite", DatabaseOptions::new(url), events).await;
    for suffix in ["", "-wal", "-shm"] {
        let mut path = file.clone().into_os_string();
        path.push(suffix);
        let _ = std::fs::remove_file(path);
    }
    result?;
    println!();

    // PostgreSQL: when reachable.
    let admin_url =
        std::env::var("KUATIA_BENCH_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_owned());
    let admin = match PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(5))
        .connect(&admin_url)
        .await
    {
        Ok(pool) => pool,
        Err(err) => {
            println!(
                "postgres: skipped, cannot connect to {}: {err}",
                redact_url(&admin_url)
            );
            return Ok(());
        }
    };
    let name = format!("kuatia_bench_{}", Uuid::now_v7().simple());
    sqlx::query(AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&admin)
        .await
        .with_context(|| format!("CREATE DATABASE {name}"))?;
    let url = with_database(&admin_url, &name)?;
    println!("postgres: {}", redact_url(&url));
    let mut options = DatabaseOptions::new(url);
    options.max_connections = POSTGRES_CONNECTIONS;
    let result = bench_backend("postgres", options, events).await;
    // Dropped whatever happened (FORCE ends connections a failed run may have left open).
    let dropped = sqlx::query(AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&admin)
    .await;
    admin.close().await;
    result?;
    dropped.with_context(|| format!("DROP DATABASE {name}"))?;
    Ok(())
}

/// Runs every scenario on one backend, printing a line per scenario.
async fn bench_backend(backend: &str, options: DatabaseOptions, events: usize) -> Result<()> {
    let db = Database::connect(&options, Vec::new(), Arc::new(UpcasterChain::new()))
        .await
        .with_context(|| format!("connecting to {backend}"))?;
    let result = scenarios(backend, &db.store(), events).await;
    db.close().await;
    result
}

async fn scenarios(backend: &str, store: &SharedStore, events: usize) -> Result<()> {
    // Warm-up: open the pool's connections (64 concurrent writers) without timing it.
    append_scenario(store, 64, 1, 128).await?;

    for (writers, batch) in APPEND_SCENARIOS {
        let run = append_scenario(store, writers, batch, events).await?;
        println!(
            "{backend:<9} {:<10} writers={writers:<3} batch={batch:<3} events={:<7} elapsed={:>6.2}s {:>9.0} events/s  \
             p50={:.2}ms p99={:.2}ms",
            "append",
            run.events,
            run.elapsed.as_secs_f64(),
            run.events as f64 / run.elapsed.as_secs_f64(),
            millis(percentile(&run.latencies, 0.50)),
            millis(percentile(&run.latencies, 0.99)),
        );
    }

    for raw in [false, true] {
        let (count, elapsed) = catch_up(store, raw).await?;
        println!(
            "{backend:<9} {:<10} page={PAGE:<5}           events={count:<7} elapsed={:>6.2}s {:>9.0} events/s",
            if raw { "read_raw" } else { "read_all" },
            elapsed.as_secs_f64(),
            count as f64 / elapsed.as_secs_f64(),
        );
    }
    Ok(())
}

/// What one append scenario did.
struct AppendRun {
    events: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

/// `writers` tasks append `events` events in total, `batch` per call.
async fn append_scenario(
    store: &SharedStore,
    writers: usize,
    batch: usize,
    events: usize,
) -> Result<AppendRun> {
    let calls = events.div_ceil(batch);
    let start = Arc::new(Barrier::new(writers + 1));
    let mut tasks = Vec::with_capacity(writers);
    for w in 0..writers {
        // Spread the calls evenly: the first `calls % writers` writers make one more.
        let my_calls = calls / writers + usize::from(w < calls % writers);
        tasks.push(tokio::spawn(writer(
            store.clone(),
            start.clone(),
            my_calls,
            batch,
        )));
    }
    start.wait().await;
    let started = Instant::now();
    let mut latencies = Vec::with_capacity(calls);
    for task in tasks {
        latencies.extend(task.await??);
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    Ok(AppendRun {
        events: calls * batch,
        elapsed,
        latencies,
    })
}

/// One writer: its own tenant and streams, `calls` appends of `batch` events, round-robin over
/// its streams with the exact expected version. Returns the latency of each call.
async fn writer(
    store: SharedStore,
    start: Arc<Barrier>,
    calls: usize,
    batch: usize,
) -> Result<Vec<Duration>> {
    let tenant_id = TenantId::from_uuid(Uuid::now_v7());
    let mut streams: Vec<(StreamRef, u64)> = (0..STREAMS_PER_WRITER)
        .map(|_| {
            let stream = StreamRef {
                tenant_id,
                stream_type: "bench".to_owned(),
                stream_id: Uuid::now_v7().to_string(),
            };
            (stream, 0)
        })
        .collect();
    let metadata = EventMetadata {
        actor: Some("system:bench".to_owned()),
        request_id: None,
        correlation_id: Some(Uuid::now_v7().to_string()),
        causation_id: None,
        trace_parent: None,
    };
    let mut latencies = Vec::with_capacity(calls);
    start.wait().await;
    for call in 0..calls {
        let (stream, version) = &mut streams[call % STREAMS_PER_WRITER];
        let events = (1..=batch as u64)
            .map(|i| NewEvent::new("InvoiceLineAdded", 1, invoice_line(*version + i, call)))
            .collect();
        let request = AppendRequest {
            stream: stream.clone(),
            expected: ExpectedVersion::from_current(*version),
            events,
            metadata: metadata.clone(),
            jobs: Vec::new(),
        };
        let began = Instant::now();
        let outcome = store.append(request).await?;
        latencies.push(began.elapsed());
        *version = outcome.stream_version;
    }
    Ok(latencies)
}

/// Pages through the whole log from position 0 to the head; returns events read and time taken.
async fn catch_up(store: &SharedStore, raw: bool) -> Result<(usize, Duration)> {
    let head = store.head_position().await?;
    let started = Instant::now();
    let mut after = 0;
    let mut count = 0;
    while after < head {
        let filter = ReadFilter {
            after,
            limit: PAGE,
            ..ReadFilter::default()
        };
        let page = if raw {
            store.read_all_raw(&filter).await?
        } else {
            store.read_all(&filter).await?
        };
        let Some(last) = page.last() else { break };
        after = last.global_position;
        count += page.len();
    }
    Ok((count, started.elapsed()))
}

/// A realistic event body: one line of an invoice (~300 bytes of JSON).
fn invoice_line(line_no: u64, seed: usize) -> Value {
    json!({
        "line_no": line_no,
        "item_code": format!("SKU-{:06}", seed % 1_000_000),
        "description": "Servicio de mantenimiento preventivo de equipos informáticos",
        "unit_of_measure": 77,
        "quantity": "2.000",
        "unit_price": "150000",
        "currency": "PYG",
        "discount": "0",
        "vat_affectation": 1,
        "vat_rate": 10,
        "vat_base": "272727",
        "vat_amount": "27273",
        "line_total": "300000"
    })
}

/// The latency at quantile `q` of sorted `latencies`.
fn percentile(latencies: &[Duration], q: f64) -> Duration {
    if latencies.is_empty() {
        return Duration::ZERO;
    }
    let index = ((latencies.len() - 1) as f64 * q).round() as usize;
    latencies[index]
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `url` with its database name replaced by `database` (query string kept).
fn with_database(url: &str, database: &str) -> Result<String> {
    let authority = url.find("://").context("the PostgreSQL URL has no scheme")? + 3;
    let (base, query) = url.split_at(url.find('?').unwrap_or(url.len()));
    let path = base[authority..].find('/').map_or(base.len(), |i| authority + i);
    Ok(format!("{}/{database}{query}", &base[..path]))
}
