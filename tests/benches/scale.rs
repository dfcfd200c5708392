//! Scale: how the costs grow with years of documents (issue 30).
//!
//! # What it measures
//!
//! On a fresh database of each backend, `kuatia bench seed` (the release binary, as an operator
//! runs it) writes `KUATIA_BENCH_DOCUMENTS` documents (default 1 000 000) for
//! `KUATIA_BENCH_TENANTS` tenants (default 50; the first holds `KUATIA_BENCH_LARGE_PERCENT` per
//! cent of the documents, default 10), with
//! their event chains (about ten events each) and their artifacts. Then, over that history:
//!
//! 1. **Bytes** per document: the events table (rows, then its indexes), the read models (rows,
//!    then indexes), on PostgreSQL from `pg_table_size`/`pg_indexes_size`, on SQLite from the
//!    file; and the artifact store's bytes per document's artifact set (their contents, and the
//!    disk they take).
//! 2. **`kuatia events verify`**, **`kuatia events export --tenant <the large one>`** (to a
//!    pipe that counts its lines) and **`kuatia projections rebuild --all`**, each the release
//!    binary in a child process: elapsed time, events/s, and the child's peak resident memory
//!    (`/usr/bin/time`'s `%M`).
//! 3. The service started on that database (in this process): **`/v1/events` paging** from 0 to
//!    the head of the large tenant, 1 000 events a request (the most the API gives), in events/s;
//!    then **the document list** of the large tenant, p50/p99 of `KUATIA_BENCH_REQUESTS` requests
//!    (default 200, after 20 not counted) for each filter and the search, one request at a time.
//!
//! Intake with the history present is `documents_http` with `KUATIA_BENCH_HISTORY=N`.
//!
//! # Running
//!
//! ```text
//! cargo build --release -p kuatia-api
//! KUATIA_BENCH_DOCUMENTS=1000000 cargo bench -p kuatia-tests --bench scale
//! KUATIA_BENCH_BACKENDS=sqlite KUATIA_BENCH_DOCUMENTS=100000 cargo bench -p kuatia-tests --bench scale
//! ```
//!
//! `KUATIA_BENCH_BACKENDS=postgres|sqlite` (default postgres), `KUATIA_BENCH_POSTGRES_URL` (an
//! admin URL allowed to create databases; default `postgres://postgres@127.0.0.1:5432/postgres`),
//! `KUATIA_BENCH_KUATIA` (the binary; default `$CARGO_TARGET_DIR/release/kuatia`, else
//! `target/release/kuatia`). `KUATIA_BENCH_KEEP=1` keeps the database and prints its URL.

use anyhow::{Context, Result, bail};
use kuatia_tests::{Backend, TestApp, TestDb};
use reqwest::Method;
use serde_json::Value;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

fn env_u64(name: &str, default: u64) -> Result<u64> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .with_context(|| format!("{name}={v:?}: expected a number")),
        Err(_) => Ok(default),
    }
}

fn binary() -> Result<PathBuf> {
    if let Ok(path) = std::env::var("KUATIA_BENCH_KUATIA") {
        return Ok(PathBuf::from(path));
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join("release/kuatia");
    if !path.exists() {
        bail!(
            "{} is missing: run `cargo build --release -p kuatia-api` first",
            path.display()
        );
    }
    Ok(path)
}

/// A finished child: its standard output, seconds and peak resident memory.
struct Ran {
    stdout: Vec<u8>,
    secs: f64,
    max_rss_mib: f64,
}

/// Runs `kuatia <args>` on the database under `/usr/bin/time` (its peak resident memory);
/// `lines_only` counts standard output's lines instead of keeping it (an export of a million
/// events).
fn run(bin: &Path, env: &[(String, String)], args: &[&str], lines_only: bool) -> Result<(Ran, u64)> {
    let time = Path::new("/usr/bin/time");
    if !time.exists() {
        bail!("/usr/bin/time is missing (Debian's package `time`): it measures the commands' peak memory");
    }
    let rss_file = std::env::temp_dir().join(format!("kuatia-scale-rss-{}", uuid::Uuid::now_v7().simple()));
    let started = Instant::now();
    let mut child = Command::new(time)
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&rss_file)
        .arg(bin)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("KUATIA_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let mut out = child.stdout.take().context("stdout")?;
    let mut stdout = Vec::new();
    let mut lines = 0u64;
    if lines_only {
        let mut reader = std::io::BufReader::with_capacity(1 << 20, out);
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line)? > 0 {
            lines += 1;
            line.clear();
        }
    } else {
        out.read_to_end(&mut stdout)?;
    }
    let status = child.wait()?;
    let secs = started.elapsed().as_secs_f64();
    if !status.success() {
        bail!("kuatia {} failed ({status})", args.join(" "));
    }
    let kib: f64 = std::fs::read_to_string(&rss_file)
        .ok()
        .and_then(|t| t.trim().lines().last()?.trim().parse().ok())
        .unwrap_or(f64::NAN);
    let _ = std::fs::remove_file(&rss_file);
    Ok((
        Ran {
            stdout,
            secs,
            max_rss_mib: kib / 1024.0,
        },
        lines,
    ))
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn du(path: &Path) -> (u64, u64) {
    let (mut logical, mut disk) = (0u64, 0u64);
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                logical += meta.len();
                disk += std::os::unix::fs::MetadataExt::blocks(&meta) * 512;
            }
        }
    }
    (logical, disk)
}

async fn sizes(db: &TestDb, backend: &Backend, documents: u64) -> Result<()> {
    let url = db.config().database_url.expose().to_owned();
    let per = |bytes: i64| bytes as f64 / documents as f64;
    match backend {
        Backend::Postgres(_) => {
            use sqlx::Connection;
            let mut conn = sqlx::PgConnection::connect(&url).await?;
            let rows: Vec<(String, i64, i64)> = sqlx::query_as(
                "SELECT c.relname::text, pg_table_size(c.oid), pg_indexes_size(c.oid) FROM pg_class c \
                 JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY pg_total_relation_size(c.oid) DESC",
            )
            .fetch_all(&mut conn)
            .await?;
            let (mut rm_rows, mut rm_idx) = (0i64, 0i64);
            for (name, table, indexes) in &rows {
                if name == "events" {
                    println!(
                        "postgres  bytes/doc  events        rows {:>7.0}  indexes {:>7.0}",
                        per(*table),
                        per(*indexes)
                    );
                } else {
                    rm_rows += table;
                    rm_idx += indexes;
                }
            }
            println!(
                "postgres  bytes/doc  other tables  rows {:>7.0}  indexes {:>7.0}",
                per(rm_rows),
                per(rm_idx)
            );
            for (name, table, indexes) in rows.iter().take(8) {
                println!(
                    "postgres  bytes/doc    {name:<22} rows {:>7.0}  indexes {:>7.0}",
                    per(*table),
                    per(*indexes)
                );
            }
            let _ = conn.close().await;
        }
        Backend::Sqlite => {
            let path = url.trim_start_matches("sqlite://");
            let (logical, _) = du(Path::new(path).parent().unwrap_or(Path::new(".")));
            let (artifacts, _) = du(&Path::new(path)
                .parent()
                .unwrap_or(Path::new("."))
                .join("artifacts"));
            println!(
                "sqlite    bytes/doc  database file (rows and indexes, WAL checkpointed) {:>7.0}",
                per((logical - artifacts) as i64)
            );
        }
    }
    Ok(())
}

async fn scale(
    backend: Backend,
    documents: u64,
    tenants: u64,
    large_percent: u64,
    requests: u64,
) -> Result<()> {
    let name = backend.name();
    let bin = binary()?;
    let db = TestDb::on(&backend).await?;
    let data_dir = std::env::temp_dir().join(format!("kuatia-scale-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&data_dir)?;
    let config = db.config();
    let env = vec![
        ("DATABASE_URL".to_owned(), config.database_url.expose().to_owned()),
        (
            "KUATIA_MASTER_KEY".to_owned(),
            kuatia_tests::TEST_MASTER_KEY.to_owned(),
        ),
        ("KUATIA_DATA_DIR".to_owned(), data_dir.display().to_string()),
    ];
    let (seeded, _) = run(
        &bin,
        &env,
        &[
            "bench",
            "seed",
            "--documents",
            &documents.to_string(),
            "--tenants",
            &tenants.to_string(),
            "--large-share",
            &format!("{}", large_percent as f64 / 100.0),
        ],
        false,
    )?;
    let summary: Value = serde_json::from_slice(&seeded.stdout).context("the seed's summary")?;
    let events = summary["events"].as_u64().unwrap_or(0);
    println!(
        "{name:<8}  seed       documents={documents} events={events} tenants={tenants}  elapsed={:>8.1}s  {:>8.0} events/s (documents only: {} s)  peak RSS {:.0} MiB",
        seeded.secs,
        events as f64 / summary["document_secs"].as_f64().unwrap_or(f64::NAN),
        summary["document_secs"],
        seeded.max_rss_mib
    );
    let large = summary["tenants"][0].clone();
    let tenant = large["tenant_id"].as_str().context("tenant")?.to_owned();
    let key = large["api_key"].as_str().context("key")?.to_owned();
    let artifacts = summary["artifacts"].as_u64().unwrap_or(0);
    let (logical, disk) = du(&data_dir.join("artifacts"));
    let (logical, disk) = if logical == 0 {
        du(&data_dir)
    } else {
        (logical, disk)
    };
    println!(
        "{name:<8}  artifacts  {artifacts} blobs  {:.0} bytes/document's set ({:.0} on disk)",
        logical as f64 / documents as f64,
        disk as f64 / documents as f64
    );
    sizes(&db, &backend, documents).await?;

    let (verified, _) = run(&bin, &env, &["events", "verify"], false)?;
    let all_events: u64 = String::from_utf8_lossy(&verified.stdout)
        .split_whitespace()
        .find_map(|w| w.parse().ok())
        .unwrap_or(events);
    println!(
        "{name:<8}  verify     events={all_events}  elapsed={:>8.1}s  {:>8.0} events/s  peak RSS {:.0} MiB",
        verified.secs,
        all_events as f64 / verified.secs,
        verified.max_rss_mib
    );
    let (exported, lines) = run(&bin, &env, &["events", "export", "--tenant", &tenant], true)?;
    println!(
        "{name:<8}  export     events={lines} (tenant {})  elapsed={:>8.1}s  {:>8.0} events/s  peak RSS {:.0} MiB",
        large["slug"].as_str().unwrap_or("?"),
        exported.secs,
        lines as f64 / exported.secs,
        exported.max_rss_mib
    );
    let (rebuilt, _) = run(&bin, &env, &["projections", "rebuild", "--all"], false)?;
    let text = String::from_utf8_lossy(&rebuilt.stdout).to_string();
    // Each projection goes through the whole log (replaying only its streams' events).
    let replayed: u64 = text
        .lines()
        .filter_map(|l| {
            l.split("over a log of ")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    for line in text.lines() {
        println!("{name:<8}  rebuild      {line}");
    }
    println!(
        "{name:<8}  rebuild    --all replayed={replayed}  elapsed={:>8.1}s  {:>8.0} events/s  peak RSS {:.0} MiB",
        rebuilt.secs,
        replayed as f64 / rebuilt.secs,
        rebuilt.max_rss_mib
    );

    // The service on the seeded database.
    let app = TestApp::spawn_on(db, |c| {
        c.data_dir = data_dir.clone();
        c.rate_limit_per_key = 10_000_000;
    })
    .await?;
    let get = |path: String| app.as_key(Method::GET, &path, &key, &tenant);
    let started = Instant::now();
    let (mut after, mut paged, mut pages) = (0i64, 0u64, 0u64);
    loop {
        let page: Value = get(format!("/v1/events?after={after}&limit=1000"))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let list = page["events"].as_array().context("events")?;
        if list.is_empty() {
            break;
        }
        paged += list.len() as u64;
        pages += 1;
        after = page["next_after"].as_i64().context("next_after")?;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{name:<8}  /v1/events paging  events={paged} pages={pages}  elapsed={secs:>8.1}s  {:>8.0} events/s",
        paged as f64 / secs
    );

    // One document of the large tenant to find by its names.
    let sample: Value = get("/v1/documents?status=accepted&limit=1".to_owned())
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let doc = &sample["documents"][0];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let company = text(&large["company_id"]);
    let cdc = text(&doc["cdc"]);
    let external = text(&doc["external_id"]);
    let number = text(&doc["number"]);
    let issued = chrono::Utc::now() - chrono::Duration::days(200);
    let from = issued.format("%Y-%m-%dT00:00:00Z").to_string();
    let to = (issued + chrono::Duration::days(7))
        .format("%Y-%m-%dT00:00:00Z")
        .to_string();
    let queries = [
        ("no filter".to_owned(), String::new()),
        ("company_id".to_owned(), format!("company_id={company}")),
        ("status=accepted".to_owned(), "status=accepted".to_owned()),
        ("status=invalidated".to_owned(), "status=invalidated".to_owned()),
        (
            "channel=autoimpresor".to_owned(),
            "channel=autoimpresor".to_owned(),
        ),
        ("external_id".to_owned(), format!("external_id={external}")),
        ("cdc".to_owned(), format!("cdc={cdc}")),
        ("ruc (buyer)".to_owned(), "ruc=80013884-8".to_owned()),
        (
            "date range (7 days)".to_owned(),
            format!("date_from={from}&date_to={to}"),
        ),
        (
            "status+channel+date".to_owned(),
            format!("status=accepted&channel=sifen&date_from={from}&date_to={to}"),
        ),
        ("q=number".to_owned(), format!("q={number}")),
        ("q=cdc".to_owned(), format!("q={cdc}")),
        ("q=buyer name".to_owned(), "q=cliente".to_owned()),
        ("q=name, no match".to_owned(), "q=zzzzqqq".to_owned()),
    ];
    for (label, query) in &queries {
        let path = format!("/v1/documents?limit=50&{query}");
        let mut times = Vec::with_capacity(requests as usize);
        let mut found = 0usize;
        for i in 0..(requests + 20) {
            let t = Instant::now();
            let response = get(path.clone()).send().await?;
            let status = response.status();
            let body: Value = response.json().await?;
            if !status.is_success() {
                bail!("{path}: {status} {body}");
            }
            if i >= 20 {
                times.push(t.elapsed().as_secs_f64() * 1000.0);
                found = body["documents"].as_array().map_or(0, Vec::len);
            }
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{name:<8}  list  {label:<22} found={found:<3} p50={:>7.2}ms p99={:>7.2}ms max={:>7.2}ms",
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            times.last().copied().unwrap_or(0.0)
        );
    }
    if std::env::var("KUATIA_BENCH_KEEP").is_ok_and(|v| v == "1") {
        println!(
            "{name:<8}  kept: DATABASE_URL={} KUATIA_DATA_DIR={}",
            env[0].1,
            data_dir.display()
        );
        let TestApp { service, db, .. } = app;
        if let Some(service) = service {
            service.stop().await?;
        }
        std::mem::forget(db);
    } else {
        app.stop().await;
        let _ = std::fs::remove_dir_all(&data_dir);
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<()> {
    let documents = env_u64("KUATIA_BENCH_DOCUMENTS", 1_000_000)?;
    let tenants = env_u64("KUATIA_BENCH_TENANTS", 50)?;
    // Per cent of the documents in the first (large) tenant.
    let large = env_u64("KUATIA_BENCH_LARGE_PERCENT", 10)?;
    let requests = env_u64("KUATIA_BENCH_REQUESTS", 200)?;
    let backends = std::env::var("KUATIA_BENCH_BACKENDS").unwrap_or_else(|_| "postgres".to_owned());
    for backend in backends.split(',') {
        let backend = match backend.trim() {
            "postgres" => Backend::Postgres(
                std::env::var("KUATIA_BENCH_POSTGRES_URL")
                    .unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_owned()),
            ),
            "sqlite" => Backend::Sqlite,
            other => bail!("KUATIA_BENCH_BACKENDS: unknown backend {other:?}"),
        };
        let started = Instant::now();
        scale(backend, documents, tenants, large, requests).await?;
        println!("total {:.0} s", started.elapsed().as_secs_f64());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}
