//! The taxpayer lookup service on 2 000 000 generated taxpayers, on SQLite and PostgreSQL:
//! import time, then searches over HTTP with 64 concurrent clients.
//!
//! # What it measures
//!
//! 1. `kuatia lookup generate` writes the registry files (`KUATIA_BENCH_ROWS` taxpayers, default
//!    2 000 000, seed 42) into a temporary folder once; not timed as part of the import.
//! 2. Per backend, on a fresh database: `import_registry` of those files (parse, load into the
//!    inactive slot, switch), timed end to end — the figure the ≤ 60 s target is about.
//! 3. The real service starts on that database with the lookup listener on port 0 (anonymous
//!    allowance raised so that it never answers 429); the time until `/ready` is the index load.
//! 4. 64 client tasks sharing one keep-alive `reqwest::Client` send a fixed mix of requests back
//!    to back, built from 20 000 taxpayers sampled from the files:
//!    - 25 % full names, words shuffled and lower-cased (`juan gonzalez benitez`);
//!    - 25 % partial names, a surname and the start of another word (`benitez jua`);
//!    - 10 % a single surname (`vera`: the large result sets);
//!    - 10 % a full name with one letter changed (the similar tier);
//!    - 20 % RUC prefixes of 4 to 7 digits;
//!    - 5 % exact records (`/api/ruc/{ruc}-{dv}`);
//!    - 5 % counts (`/api/search/count`) of a surname and a word start.
//!
//!    A warm-up of 2 s is not counted; then the measured window (`KUATIA_BENCH_SECS`, default
//!    10 s). A request counts when it starts inside the window; only `200` answers count, anything
//!    else is an error (the first is printed; the bench fails above 1 %). Latencies are from the
//!    start of the request to the end of its body.
//!
//! Client, service and database share the machine (and one tokio runtime for client and
//! service): on a small machine the figures are those of the whole loop.
//!
//! # Running
//!
//! ```text
//! cargo bench -p kuatia-tests --bench lookup_http
//! KUATIA_BENCH_ROWS=200000 KUATIA_BENCH_SECS=5 cargo bench -p kuatia-tests --bench lookup_http
//! ```
//!
//! `KUATIA_BENCH_NO_CACHE=1` turns off the service's cache of recent answers
//! (`KUATIA_LOOKUP_CACHE_ENTRIES=0`): every search is computed. `KUATIA_BENCH_INDEX=1` times the
//! search index alone, single-threaded, without cache, database or HTTP.
//!
//! PostgreSQL: `KUATIA_BENCH_POSTGRES_URL` (an admin URL allowed to create databases; default
//! `postgres://postgres@127.0.0.1:5432/postgres`), skipped when unreachable.

use anyhow::{Context, Result, bail};
use kuatia_infrastructure::lookup::generate::{GenerateOptions, generate};
use kuatia_infrastructure::lookup::import::import_registry;
use kuatia_infrastructure::store::redact_url;
use kuatia_tests::{Backend, ScratchDir, TestApp, TestDb};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use sqlx::Connection;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Barrier;

/// The service binary's allocator (`api/src/main.rs`): the service measured here runs in this
/// process.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DEFAULT_ROWS: usize = 2_000_000;
const DEFAULT_SECS: u64 = 10;
const WARM_UP: Duration = Duration::from_secs(2);
const CLIENTS: usize = 64;
const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
const MAX_FAILURE_RATE: f64 = 0.01;
const SAMPLE: usize = 20_000;
const REQUESTS: usize = 300_000;

/// The kinds of request in the mix, with their share in per cent.
const MIX: [(&str, u32); 7] = [
    ("full name", 25),
    ("partial name", 25),
    ("surname", 10),
    ("typo", 10),
    ("ruc prefix", 20),
    ("exact ruc", 5),
    ("count", 5),
];

fn env_number<T: std::str::FromStr>(name: &str, default: T) -> Result<T> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("{name}={v:?} is not a number")),
        Err(_) => Ok(default),
    }
}

fn main() -> Result<()> {
    let rows: usize = env_number("KUATIA_BENCH_ROWS", DEFAULT_ROWS)?;
    let secs: u64 = env_number("KUATIA_BENCH_SECS", DEFAULT_SECS)?;
    if secs == 0 || rows == 0 {
        bail!("KUATIA_BENCH_SECS and KUATIA_BENCH_ROWS must be at least 1");
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let failed = runtime.block_on(run(rows, Duration::from_secs(secs), cores))?;
    if !failed.is_empty() {
        bail!(
            "more than {:.0} % of the requests failed on: {}",
            MAX_FAILURE_RATE * 100.0,
            failed.join(", ")
        );
    }
    Ok(())
}

/// One backend's figures.
struct Row {
    backend: &'static str,
    import: Duration,
    load: Duration,
    elapsed: Duration,
    /// Microseconds, sorted, per kind of request (index into [`MIX`]).
    latencies: Vec<Vec<u32>>,
    errors: usize,
}

impl Row {
    fn all(&self) -> Vec<u32> {
        let mut all: Vec<u32> = self.latencies.iter().flatten().copied().collect();
        all.sort_unstable();
        all
    }
}

async fn run(rows: usize, window: Duration, cores: usize) -> Result<Vec<&'static str>> {
    println!("kuatia taxpayer lookup benchmark");
    let env: Vec<String> = [
        "KUATIA_BENCH_ROWS",
        "KUATIA_BENCH_SECS",
        "KUATIA_BENCH_NO_CACHE",
        "KUATIA_BENCH_INDEX",
    ]
    .iter()
    .filter_map(|k| std::env::var(k).ok().map(|v| format!("{k}={v} ")))
    .collect();
    println!(
        "command: {}cargo bench -p kuatia-tests --bench lookup_http",
        env.concat()
    );
    println!(
        "cores={cores}  clients={CLIENTS}  rows={rows}  warm-up={}s  window={}s",
        WARM_UP.as_secs(),
        window.as_secs()
    );

    let files = ScratchDir::new();
    let started = Instant::now();
    let summary = generate(
        &files.0,
        &GenerateOptions {
            rows,
            seed: 42,
            ..GenerateOptions::default()
        },
    )?;
    let bytes: u64 = summary
        .files
        .iter()
        .map(|(p, _)| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    println!(
        "generated {} taxpayers ({} MB in {} files) in {:.1} s",
        summary.rows,
        bytes / 1_000_000,
        summary.files.len(),
        started.elapsed().as_secs_f64()
    );
    let requests = request_mix(&files.0, REQUESTS)?;
    println!();
    if std::env::var("KUATIA_BENCH_INDEX").is_ok_and(|v| v == "1") {
        index_only(&files.0, &requests)?;
        return Ok(Vec::new());
    }

    let mut backends = vec![Backend::Sqlite];
    let admin_url =
        std::env::var("KUATIA_BENCH_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_owned());
    match tokio::time::timeout(Duration::from_secs(5), sqlx::PgConnection::connect(&admin_url)).await {
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            backends.push(Backend::Postgres(admin_url));
        }
        Ok(Err(err)) => println!(
            "postgres: skipped, cannot connect to {}: {err}",
            redact_url(&admin_url)
        ),
        Err(_) => println!("postgres: skipped, no answer from {}", redact_url(&admin_url)),
    }

    let requests = Arc::new(requests);
    let mut results = Vec::new();
    for backend in &backends {
        results.push(
            bench_backend(backend, &files.0, window, requests.clone())
                .await
                .with_context(|| format!("benchmarking {}", backend.name()))?,
        );
    }

    println!();
    println!(
        "{:<9} {:>9} {:>9} {:>9} {:>10} {:>8} {:>8} {:>8} {:>8} {:>7}",
        "backend",
        "import s",
        "load s",
        "requests",
        "req/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "errors"
    );
    let mut failed = Vec::new();
    for row in &results {
        let all = row.all();
        println!(
            "{:<9} {:>9.1} {:>9.1} {:>9} {:>10.0} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>7}",
            row.backend,
            row.import.as_secs_f64(),
            row.load.as_secs_f64(),
            all.len(),
            all.len() as f64 / row.elapsed.as_secs_f64(),
            millis(percentile(&all, 0.50)),
            millis(percentile(&all, 0.90)),
            millis(percentile(&all, 0.99)),
            millis(all.last().copied().unwrap_or(0)),
            row.errors
        );
        let total = all.len() + row.errors;
        if total == 0 || row.errors as f64 / total as f64 > MAX_FAILURE_RATE {
            failed.push(row.backend);
        }
    }
    println!();
    println!(
        "{:<9} {:<13} {:>9} {:>8} {:>8} {:>8}",
        "backend", "kind", "requests", "p50 ms", "p99 ms", "max ms"
    );
    for row in &results {
        for (k, (kind, _)) in MIX.iter().enumerate() {
            let l = &row.latencies[k];
            println!(
                "{:<9} {:<13} {:>9} {:>8.2} {:>8.2} {:>8.2}",
                row.backend,
                kind,
                l.len(),
                millis(percentile(l, 0.50)),
                millis(percentile(l, 0.99)),
                millis(l.last().copied().unwrap_or(0))
            );
        }
    }
    Ok(failed)
}

/// A request of the mix: its kind (index into [`MIX`]) and path.
type Request = (usize, String);

/// Builds `n` requests from taxpayers sampled from the files.
fn request_mix(dir: &std::path::Path, n: usize) -> Result<Vec<Request>> {
    let mut rng = StdRng::seed_from_u64(7);
    // Reservoir sample of (ruc, dv, name) over every line.
    let mut sample: Vec<(String, String, String)> = Vec::with_capacity(SAMPLE);
    let mut seen = 0usize;
    let mut paths: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read(&path)?;
        for line in text.split(|&b| b == b'\n') {
            let line = String::from_utf8_lossy(line);
            let fields: Vec<&str> = line.split('|').collect();
            if fields.len() < 6 {
                continue;
            }
            seen += 1;
            let row = (fields[0].to_owned(), fields[2].to_owned(), fields[1].to_owned());
            if sample.len() < SAMPLE {
                sample.push(row);
            } else {
                let j = rng.random_range(0..seen);
                if j < SAMPLE {
                    sample[j] = row;
                }
            }
        }
    }
    if sample.is_empty() {
        bail!("no taxpayers in the generated files");
    }
    let total: u32 = MIX.iter().map(|(_, w)| w).sum();
    let encode = |s: &str| {
        s.replace(' ', "%20")
            .replace(',', "%2C")
            .replace('&', "%26")
            .replace('|', "%7C")
    };
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let (ruc, dv, name) = &sample[rng.random_range(0..sample.len())];
        // Words of three letters or more (a shorter `q` alone is a 400 by design).
        let words: Vec<String> = name
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= 3)
            .map(str::to_lowercase)
            .collect();
        if words.is_empty() {
            continue;
        }
        let mut pick = rng.random_range(0..total);
        let mut kind = 0;
        for (k, (_, w)) in MIX.iter().enumerate() {
            if pick < *w {
                kind = k;
                break;
            }
            pick -= w;
        }
        let path = match kind {
            0 => {
                let mut w = words.clone();
                w.shuffle(&mut rng);
                format!("/api/search?q={}", encode(&w.join(" ")))
            }
            1 => {
                let first = &words[0];
                let other = words
                    .get(1 + rng.random_range(0..words.len().max(2) - 1))
                    .unwrap_or(first);
                let cut: String = other.chars().take(rng.random_range(3..=5)).collect();
                format!("/api/search?q={}", encode(&format!("{first} {cut}")))
            }
            2 => format!("/api/search?q={}", encode(&words[0])),
            3 => {
                let mut w = words.clone();
                let i = rng.random_range(0..w.len());
                if w[i].chars().count() >= 5 {
                    let mut chars: Vec<char> = w[i].chars().collect();
                    let at = rng.random_range(1..chars.len());
                    chars[at] = if chars[at] == 'z' { 's' } else { 'z' };
                    w[i] = chars.into_iter().collect();
                }
                format!("/api/search?q={}", encode(&w.join(" ")))
            }
            4 => {
                let len = rng.random_range(4..=7).min(ruc.len());
                format!("/api/search?q={}", &ruc[..len])
            }
            5 => format!("/api/ruc/{ruc}-{dv}"),
            _ => {
                let first = &words[0];
                let other = words.last().unwrap_or(first);
                let cut: String = other.chars().take(3).collect();
                format!("/api/search/count?q={}", encode(&format!("{first} {cut}")))
            }
        };
        out.push((kind, path));
    }
    Ok(out)
}

async fn bench_backend(
    backend: &Backend,
    files: &std::path::Path,
    window: Duration,
    requests: Arc<Vec<Request>>,
) -> Result<Row> {
    let db = TestDb::on(backend).await.context("creating the database")?;
    match backend {
        Backend::Sqlite => println!("sqlite:   {}", db.url),
        Backend::Postgres(_) => println!("postgres: {}", redact_url(&db.url)),
    }
    let database = db.open().await;
    let started = Instant::now();
    let report = import_registry(
        &database,
        files,
        chrono::NaiveDate::from_ymd_opt(2026, 3, 31).expect("date"),
        &|_| {},
    )
    .await?;
    let import = started.elapsed();
    println!(
        "{:<9} import: {} rows in {:.1} s ({:.0} rows/s)",
        backend.name(),
        report.rows,
        import.as_secs_f64(),
        report.rows as f64 / import.as_secs_f64()
    );
    database.close().await;

    let started = Instant::now();
    let no_cache = std::env::var("KUATIA_BENCH_NO_CACHE").is_ok_and(|v| v == "1");
    let app = TestApp::spawn_on(db, |c| {
        c.lookup_enabled = true;
        c.lookup_listen = "127.0.0.1:0".parse().expect("address");
        c.lookup_quota_anonymous = 1_000_000_000_000;
        c.lookup_refresh_secs = 3600;
        c.workers = 1;
        c.metrics_bearer_token = Some(kuatia_infrastructure::config::Secret::new("bench"));
        if no_cache {
            c.lookup_cache_entries = 0;
        }
    })
    .await
    .context("starting the service")?;
    let base = format!(
        "http://{}",
        app.service().lookup_addr.context("no lookup listener")?
    );
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(CLIENTS * 2)
        .http1_only()
        .tcp_nodelay(true)
        .build()?;
    loop {
        let r = client.get(format!("{base}/ready")).send().await?;
        if r.status() == 200 {
            break;
        }
        if started.elapsed() > Duration::from_secs(300) {
            bail!("the registry did not load within 5 minutes");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let load = started.elapsed();
    let health: serde_json::Value = client.get(format!("{base}/health")).send().await?.json().await?;
    println!(
        "{:<9} service ready in {:.1} s (registry generation {}, {} taxpayers in memory)",
        backend.name(),
        load.as_secs_f64(),
        health["generation"],
        health["taxpayers"]
    );
    let result = drive(backend.name(), client.clone(), &base, window, requests).await;
    let metrics = client
        .get(format!("{base}/metrics"))
        .bearer_auth("bench")
        .send()
        .await?
        .text()
        .await?;
    let stat = |name: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let (hits, misses) = (
        stat("kuatia_lookup_cache_hits"),
        stat("kuatia_lookup_cache_misses"),
    );
    println!(
        "{:<9} name searches answered from the cache of recent answers: {:.0} % of {:.0}",
        backend.name(),
        100.0 * hits / (hits + misses).max(1.0),
        hits + misses
    );
    app.stop().await;
    let (elapsed, latencies, errors) = result?;
    Ok(Row {
        backend: backend.name(),
        import,
        load,
        elapsed,
        latencies,
        errors,
    })
}

async fn drive(
    backend: &'static str,
    client: reqwest::Client,
    base: &str,
    window: Duration,
    requests: Arc<Vec<Request>>,
) -> Result<(Duration, Vec<Vec<u32>>, usize)> {
    let first_error = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(CLIENTS + 1));
    let began = Instant::now() + Duration::from_millis(50);
    let measure_from = began + WARM_UP;
    let measure_to = measure_from + window;
    let mut tasks = Vec::with_capacity(CLIENTS);
    for task in 0..CLIENTS {
        let (client, base, requests, start, first_error) = (
            client.clone(),
            base.to_owned(),
            requests.clone(),
            start.clone(),
            first_error.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut latencies: Vec<Vec<u32>> = vec![Vec::new(); MIX.len()];
            let mut errors = 0usize;
            let mut last_end = measure_from;
            start.wait().await;
            let mut i = task * (requests.len() / CLIENTS);
            loop {
                let sent = Instant::now();
                if sent >= measure_to {
                    break;
                }
                let (kind, path) = &requests[i % requests.len()];
                i += 1;
                let outcome = match client.get(format!("{base}{path}")).send().await {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        match r.bytes().await {
                            Ok(_) if status == 200 => Ok(()),
                            Ok(body) => Err(format!(
                                "{path}: HTTP {status}: {}",
                                String::from_utf8_lossy(&body)
                            )),
                            Err(e) => Err(format!("{path}: reading the body: {e}")),
                        }
                    }
                    Err(e) => Err(format!("{path}: {e}")),
                };
                let done = Instant::now();
                let measured = sent >= measure_from;
                match outcome {
                    Ok(()) if measured => {
                        latencies[*kind]
                            .push(u32::try_from(done.duration_since(sent).as_micros()).unwrap_or(u32::MAX));
                        last_end = last_end.max(done);
                    }
                    Ok(()) => {}
                    Err(message) => {
                        if measured {
                            errors += 1;
                            last_end = last_end.max(done);
                        }
                        if !first_error.swap(true, Ordering::Relaxed) {
                            println!("{backend:<9} first error: {message}");
                        }
                    }
                }
            }
            (latencies, errors, last_end)
        }));
    }
    start.wait().await;
    let mut latencies: Vec<Vec<u32>> = vec![Vec::new(); MIX.len()];
    let mut errors = 0;
    let mut last_end = measure_from;
    for task in tasks {
        let (l, e, end) = task.await?;
        for (all, mine) in latencies.iter_mut().zip(l) {
            all.extend(mine);
        }
        errors += e;
        last_end = last_end.max(end);
    }
    for l in &mut latencies {
        l.sort_unstable();
    }
    Ok((
        last_end.saturating_duration_since(measure_from),
        latencies,
        errors,
    ))
}

/// `KUATIA_BENCH_INDEX=1`: the search index alone, single-threaded, built straight from the
/// files (no database, no HTTP, no cache of recent answers): what each kind of request costs
/// the CPU when it is new.
fn index_only(dir: &std::path::Path, requests: &[Request]) -> Result<()> {
    use kuatia_domain::lookup::line::{Line, parse_line};
    use kuatia_domain::lookup::query::{SearchQuery, parse_query};
    let started = Instant::now();
    let mut builder = kuatia_infrastructure::lookup::index::IndexBuilder::new();
    let mut paths: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    paths.sort();
    for path in paths {
        let bytes = std::fs::read(&path)?;
        for line in bytes.split(|&b| b == b'\n') {
            if let Line::Row(row, _) = parse_line(line) {
                builder.push(&row.ruc, row.dv, &row.name, &row.state);
            }
        }
    }
    let read = started.elapsed();
    let index = builder.finish(1, None);
    println!(
        "index: {} taxpayers, {} words, {} MB, built in {:.1} s (+{:.1} s reading)",
        index.len(),
        index.words(),
        index.heap_bytes() / 1_000_000,
        (started.elapsed() - read).as_secs_f64(),
        read.as_secs_f64()
    );
    let decode = |s: &str| {
        s.replace("%20", " ")
            .replace("%2C", ",")
            .replace("%26", "&")
            .replace("%7C", "|")
    };
    let mut per_kind: Vec<Vec<(u32, String)>> = vec![Vec::new(); MIX.len()];
    let all_started = Instant::now();
    for (kind, path) in requests {
        let t = Instant::now();
        if let Some(ruc) = path.strip_prefix("/api/ruc/") {
            let number = ruc.split('-').next().unwrap_or(ruc);
            std::hint::black_box(index.find(number).map(|r| index.taxpayer(r)));
        } else {
            let q = decode(path.split("q=").nth(1).unwrap_or(""));
            let query: SearchQuery = parse_query(&q).map_err(|e| anyhow::anyhow!("{q}: {e}"))?;
            if path.starts_with("/api/search/count") {
                std::hint::black_box(index.search_uncached(&query, None, 0, 0));
            } else {
                let (page, _) = index.search_uncached(&query, None, 0, 20);
                for id in page.ids {
                    std::hint::black_box(index.taxpayer(id));
                }
            }
        }
        per_kind[*kind].push((
            u32::try_from(t.elapsed().as_micros()).unwrap_or(u32::MAX),
            path.clone(),
        ));
    }
    let total = all_started.elapsed();
    println!(
        "{} searches in {:.2} s: {:.0} µs each on average, {:.0} searches/s on one core",
        requests.len(),
        total.as_secs_f64(),
        total.as_secs_f64() * 1e6 / requests.len() as f64,
        requests.len() as f64 / total.as_secs_f64()
    );
    println!(
        "{:<13} {:>8} {:>9} {:>9} {:>9} {:>9}  slowest",
        "kind", "count", "mean µs", "p50 µs", "p99 µs", "max µs"
    );
    for (k, (kind, _)) in MIX.iter().enumerate() {
        let l = &mut per_kind[k];
        l.sort_unstable();
        let micros: Vec<u32> = l.iter().map(|(m, _)| *m).collect();
        let mean = micros.iter().map(|&m| f64::from(m)).sum::<f64>() / micros.len().max(1) as f64;
        println!(
            "{:<13} {:>8} {:>9.0} {:>9} {:>9} {:>9}  {}",
            kind,
            micros.len(),
            mean,
            percentile(&micros, 0.5),
            percentile(&micros, 0.99),
            micros.last().copied().unwrap_or(0),
            l.last().map_or("", |(_, p)| p.as_str())
        );
    }
    Ok(())
}

fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((sorted.len() as f64) * p).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn millis(micros: u32) -> f64 {
    f64::from(micros) / 1000.0
}
