//! How long the console's pages take to render for a tenant with many documents.
//!
//! # What it measures
//!
//! The real service (port 0, a fresh SQLite file, or a fresh PostgreSQL database with
//! `KUATIA_BENCH_BACKENDS=postgres`; no job workers, so nothing else shares the cores) gets one
//! tenant ready to issue (a company, branch and point 001, a certificate, a sifen channel) and
//! `KUATIA_BENCH_DOCUMENTS` documents (default 100 000) posted through `POST /v1/documents` by 32
//! clients: every one stored, numbered later (they stay `queued`: the pipeline is off). A user of
//! the tenant logs in through the console's form. Then each page is asked for
//! `KUATIA_BENCH_REQUESTS` times (default 200), one request at a time after 10 not counted, and the
//! time from the request to the end of its body is reported (p50, p99, max), with the statements
//! the page sent to the database (`X-Kuatia-Statements`):
//!
//! - home (`/console`: counts per status today, this month, in all, summed from
//!   `document_counts`; deliveries waiting;
//!   certificates; readiness),
//! - the list (`/console/documents`, the newest 50), and its next page by cursor,
//! - the list filtered by status, and searched by a reference (`external_id`), by a RUC and by a
//!   part of a name (every document matches these two: the newest 50 are shown), and by a word no
//!   name holds (every buyer name is read to say so),
//! - a document (`/console/documents/{id}`), the newest one,
//! - its audit timeline (`/console/documents/{id}/audit`, the chain checked).
//!
//! Client and service share the machine, as a browser and a small server would.
//!
//! # Running
//!
//! ```text
//! cargo bench -p kuatia-tests --bench console_pages
//! KUATIA_BENCH_DOCUMENTS=10000 KUATIA_BENCH_REQUESTS=100 cargo bench -p kuatia-tests --bench console_pages
//! ```

use anyhow::{Context, Result, bail};
use kuatia_tests::{Backend, TestApp, TestDb};
use reqwest::Method;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use uuid::Uuid;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CLIENTS: usize = 32;
const EMAIL: &str = "oficina@example.com.py";
const PASSWORD: &str = "a long enough secret";

fn env_number(name: &str, default: usize) -> Result<usize> {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().with_context(|| format!("{name}={v:?}")),
        Err(_) => Ok(default),
    }
}

fn main() -> Result<()> {
    let documents = env_number("KUATIA_BENCH_DOCUMENTS", 100_000)?;
    let requests = env_number("KUATIA_BENCH_REQUESTS", 200)?;
    let backend = match std::env::var("KUATIA_BENCH_BACKENDS").as_deref() {
        Err(_) | Ok("sqlite") => Backend::Sqlite,
        Ok("postgres") => Backend::Postgres(
            std::env::var("KUATIA_BENCH_POSTGRES_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned()),
        ),
        Ok(other) => bail!("KUATIA_BENCH_BACKENDS={other:?}: sqlite or postgres"),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(run(backend, documents, requests))
}

async fn run(backend: Backend, documents: usize, requests: usize) -> Result<()> {
    let db = TestDb::on(&backend).await.context("creating the database")?;
    let app = TestApp::spawn_on(db, |config| {
        config.rate_limit_per_key = 100_000_000;
        config.rate_limit_per_tenant = 100_000_000;
        config.workers = 0;
        config.insecure_cookies = true;
    })
    .await
    .context("starting the service")?;
    let ready = app.ready_at("bench", "http://127.0.0.1:9").await;
    let seeded = Instant::now();
    let first = seed(&app, &ready.tenant, &ready.key, &ready.company, documents).await?;
    println!(
        "{}: {documents} documents posted in {:.1} s",
        backend.name(),
        seeded.elapsed().as_secs_f64()
    );
    let cookie = member_session(&app, &ready.tenant, &ready.key).await?;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let base = app.base.clone();
    let get = |path: String| {
        let client = client.clone();
        let cookie = cookie.clone();
        let url = format!("{base}{path}");
        async move {
            let started = Instant::now();
            let response = client.get(&url).header("cookie", cookie).send().await?;
            let status = response.status().as_u16();
            let statements = response
                .headers()
                .get("x-kuatia-statements")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or(0);
            let body = response.bytes().await?;
            if status != 200 {
                bail!("{url}: HTTP {status}: {}", String::from_utf8_lossy(&body));
            }
            Ok::<_, anyhow::Error>((started.elapsed(), statements, body))
        }
    };
    // The newest document, and a cursor into the middle of the list.
    let list = get("/console/documents".to_owned()).await?.2;
    let text = String::from_utf8_lossy(&list);
    let cursor = text
        .split("cursor=")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .context("the list has a next page")?
        .to_owned();
    let newest = text
        .split("data-id=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .context("the list shows a document")?
        .to_owned();
    let pages = [
        ("home", "/console".to_owned()),
        ("list", "/console/documents".to_owned()),
        ("list, next page", format!("/console/documents?cursor={cursor}")),
        ("list, status", "/console/documents?status=queued".to_owned()),
        ("search, reference", format!("/console/documents?q={first}")),
        ("search, RUC", "/console/documents?q=80013884-8".to_owned()),
        ("search, name", "/console/documents?q=cliente".to_owned()),
        ("search, no name", "/console/documents?q=ferreteria".to_owned()),
        ("document", format!("/console/documents/{newest}")),
        ("audit", format!("/console/documents/{newest}/audit")),
    ];
    println!(
        "{:<18} {:>9} {:>9} {:>9} {:>11}",
        "page", "p50 ms", "p99 ms", "max ms", "statements"
    );
    for (name, path) in pages {
        for _ in 0..10 {
            get(path.clone()).await?;
        }
        let mut times = Vec::with_capacity(requests);
        let mut statements = 0;
        for _ in 0..requests {
            let (took, n, _) = get(path.clone()).await?;
            times.push(took);
            statements = n;
        }
        times.sort();
        let at = |q: f64| times[((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1];
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "{name:<18} {:>9.2} {:>9.2} {:>9.2} {statements:>11}",
            ms(at(0.50)),
            ms(at(0.99)),
            ms(*times.last().unwrap_or(&Duration::ZERO))
        );
    }
    app.stop().await;
    Ok(())
}

/// Posts `n` invoices (32 clients, the sample invoice, buyer `CLIENTE S.A.` RUC 80013884-8);
/// answers the first one's `external_id`, which the search finds exactly.
async fn seed(app: &TestApp, tenant: &str, key: &str, company: &str, n: usize) -> Result<String> {
    let paraguay = chrono::FixedOffset::west_opt(3 * 3600).context("UTC-3")?;
    let issued = (chrono::Utc::now().with_timezone(&paraguay) - chrono::Duration::minutes(5))
        .format("%Y-%m-%dT%H:%M:%S%:z")
        .to_string();
    let mut template = kuatia_domain::document::canonical::sample_invoice();
    template["company_id"] = json!(company);
    template["issue_datetime"] = json!(issued);
    let template = Arc::new(template);
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let (client, url) = (app.client.clone(), format!("{}/v1/documents", app.base));
        let (tenant, key) = (tenant.to_owned(), key.to_owned());
        let (template, next) = (template.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, anyhow::Error>(());
                }
                let mut body: Value = (*template).clone();
                body["external_id"] = json!(format!("BENCH-{i:07}"));
                let response = client
                    .post(&url)
                    .bearer_auth(&key)
                    .header("X-Tenant-Id", &tenant)
                    .header("Idempotency-Key", Uuid::now_v7().to_string())
                    .json(&body)
                    .send()
                    .await?;
                if response.status() != 201 {
                    bail!("seeding: HTTP {}: {}", response.status(), response.text().await?);
                }
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok("BENCH-0000000".to_owned())
}

/// Registers a user, makes it an owner of the tenant (invitation accepted), logs it in through
/// the console's form; answers the browser's cookie header.
async fn member_session(app: &TestApp, tenant: &str, key: &str) -> Result<String> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let base = &app.base;
    client
        .post(format!("{base}/v1/users"))
        .json(&json!({"email": EMAIL, "password": PASSWORD}))
        .send()
        .await?;
    let invitation: Value = app
        .as_key(Method::POST, "/v1/memberships", key, tenant)
        .json(&json!({"email": EMAIL, "role": "owner"}))
        .send()
        .await?
        .json()
        .await?;
    let token = invitation["accept_url"]
        .as_str()
        .and_then(|u| u.rsplit('/').next())
        .context("accept_url")?
        .to_owned();
    let login = client
        .post(format!("{base}/v1/auth/login"))
        .json(&json!({"email": EMAIL, "password": PASSWORD}))
        .send()
        .await?;
    let session = login
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .context("session cookie")?
        .to_owned();
    let accepted = client
        .post(format!("{base}/v1/invitations/{token}/accept"))
        .header("cookie", &session)
        .send()
        .await?;
    if !accepted.status().is_success() {
        bail!("accepting: HTTP {}", accepted.status());
    }
    Ok(session)
}
