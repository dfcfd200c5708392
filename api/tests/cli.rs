//! The `kuatia` binary as an operator uses it: `serve` and SIGTERM, `migrate`,
//! `projections status|rebuild`, `events export|verify`. Runs the real binary on a fresh SQLite
//! database (the store behind these commands is tested on both backends in `tests/`).

use sqlx::Connection;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("kuatia-cli-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Self { dir }
    }

    fn url(&self) -> String {
        format!("sqlite://{}/kuatia.db", self.dir.display())
    }

    fn kuatia(&self, args: &[&str]) -> Command {
        let mut cmd = self.kuatia_with_defaults(args);
        cmd.env("DATABASE_URL", self.url());
        cmd
    }

    /// Without DATABASE_URL: the embedded default, `./data/kuatia.db` under the working folder.
    fn kuatia_with_defaults(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kuatia"));
        cmd.args(args)
            .current_dir(&self.dir)
            .env_remove("DATABASE_URL")
            .env("KUATIA_LISTEN", "127.0.0.1:0")
            .env("RUST_LOG", "info");
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.kuatia(args).output().expect("run kuatia")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Sends SIGTERM and waits (at most 15 s) for the process to exit.
fn sigterm_and_wait(child: &mut std::process::Child) -> std::process::ExitStatus {
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill")
            .success()
    );
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "kuatia did not stop after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Writes a few events through the library, as the service would.
async fn seed(url: &str, tenant: uuid::Uuid) {
    use kuatia_application::event_store::{
        AppendRequest, EventMetadata, ExpectedVersion, NewEvent, StreamRef,
    };
    use kuatia_domain::tenancy::TenantId;
    let options = kuatia_infrastructure::store::DatabaseOptions::new(url);
    let db = kuatia_infrastructure::store::Database::connect(
        &options,
        kuatia_projections::registry::inline(),
        std::sync::Arc::new(kuatia_application::upcast::UpcasterChain::new()),
    )
    .await
    .expect("open");
    for (stream, count) in [("doc-1", 3u64), ("doc-2", 2)] {
        for v in 0..count {
            db.store()
                .append(AppendRequest {
                    stream: StreamRef {
                        tenant_id: TenantId::from_uuid(tenant),
                        stream_type: "document".into(),
                        stream_id: stream.into(),
                    },
                    expected: ExpectedVersion::from_current(v),
                    events: vec![NewEvent::new("Recorded", 1, serde_json::json!({"v": v}))],
                    metadata: EventMetadata::default(),
                    jobs: Vec::new(),
                })
                .await
                .expect("append");
        }
    }
    db.close().await;
}

#[test]
fn serve_starts_on_sqlite_under_data_by_default_and_stops_cleanly_on_sigterm() {
    let scratch = Scratch::new();
    let mut child = scratch
        .kuatia_with_defaults(&[])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines.next().expect("a log line").expect("utf-8");
        let entry: serde_json::Value = serde_json::from_str(&line).expect("JSON log lines");
        if entry["message"] == "kuatia listening" {
            break entry["addr"].as_str().expect("addr").to_owned();
        }
    };
    let mut stream = std::net::TcpStream::connect(&addr).expect("connect");
    use std::io::{Read, Write};
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    assert!(response.contains("\"status\":\"ok\""), "{response}");
    let response_id = response
        .lines()
        .find_map(|l| l.strip_prefix("x-request-id: "))
        .expect("X-Request-Id header")
        .trim()
        .to_owned();
    assert!(
        scratch.dir.join("data/kuatia.db").exists(),
        "the embedded database is under ./data"
    );
    // The request's log line carries the same request id.
    let served = loop {
        let line = lines.next().expect("a log line").expect("utf-8");
        let entry: serde_json::Value = serde_json::from_str(&line).expect("JSON log lines");
        if entry["message"] == "request served" {
            break entry;
        }
    };
    assert_eq!(served["span"]["request_id"], response_id.as_str(), "{served}");
    assert_eq!(served["span"]["route"], "/health");

    let status = sigterm_and_wait(&mut child);
    assert!(status.success(), "clean exit after SIGTERM: {status:?}");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(rest.iter().any(|l| l.contains("kuatia stopped")), "{rest:?}");
}

#[test]
fn a_sigterm_during_startup_still_ends_in_a_clean_stop() {
    let scratch = Scratch::new();
    let mut child = scratch
        .kuatia(&[])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    // The first log line is written once the handlers are installed but before startup ends.
    let _ = lines.next();
    let status = sigterm_and_wait(&mut child);
    assert!(
        status.success(),
        "a signal during startup is honoured gracefully: {status:?}"
    );
}

#[test]
fn migrate_then_projection_status_and_rebuild() {
    let scratch = Scratch::new();
    let migrate = scratch.run(&["migrate"]);
    assert!(migrate.status.success(), "{migrate:?}");
    let tenant = uuid::Uuid::now_v7();
    tokio::runtime::Runtime::new()
        .expect("rt")
        .block_on(seed(&scratch.url(), tenant));

    let status = scratch.run(&["projections", "status"]);
    assert!(status.status.success());
    let text = stdout(&status);
    assert!(text.contains("stream_index") && text.contains("inline"), "{text}");
    let counts_line = text
        .lines()
        .find(|l| l.starts_with("event_type_counts"))
        .expect("listed");
    assert!(
        counts_line.split_whitespace().any(|w| w == "5"),
        "lag 5 before any catch-up: {counts_line}"
    );

    let rebuild = scratch.run(&["projections", "rebuild", "--all"]);
    assert!(rebuild.status.success(), "{rebuild:?}");
    let text = stdout(&rebuild);
    assert!(text.contains("rebuilt stream_index: 5 events replayed"), "{text}");
    assert!(
        text.contains("rebuilt event_type_counts: 5 events replayed"),
        "{text}"
    );
    let after = stdout(&scratch.run(&["projections", "status"]));
    let counts_line = after
        .lines()
        .find(|l| l.starts_with("event_type_counts"))
        .expect("listed");
    let cols: Vec<&str> = counts_line.split_whitespace().collect();
    assert_eq!((cols[2], cols[3]), ("5", "0"), "{counts_line}");

    let unknown = scratch.run(&["projections", "rebuild", "no_such_thing"]);
    assert!(!unknown.status.success());
    assert!(
        String::from_utf8_lossy(&unknown.stderr)
            .contains("known: stream_index, access, configuration, event_type_counts")
    );
}

#[test]
fn export_writes_ndjson_and_verify_names_the_first_tampered_event() {
    let scratch = Scratch::new();
    let tenant = uuid::Uuid::now_v7();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(seed(&scratch.url(), tenant));

    let export = scratch.run(&["events", "export", "--tenant", &tenant.to_string()]);
    assert!(export.status.success());
    let lines: Vec<serde_json::Value> = stdout(&export)
        .lines()
        .map(|l| serde_json::from_str(l).expect("NDJSON"))
        .collect();
    assert_eq!(lines.len(), 5);
    assert!(
        lines
            .windows(2)
            .all(|w| w[0]["global_position"].as_i64() < w[1]["global_position"].as_i64())
    );
    assert!(
        lines
            .iter()
            .all(|l| l["hash"].as_str().is_some_and(|h| h.len() == 64))
    );
    let after = scratch.run(&[
        "events",
        "export",
        "--tenant",
        &tenant.to_string(),
        "--after",
        "3",
    ]);
    assert_eq!(stdout(&after).lines().count(), 2);
    let other = scratch.run(&["events", "export", "--tenant", &uuid::Uuid::now_v7().to_string()]);
    assert_eq!(
        stdout(&other).lines().count(),
        0,
        "another tenant's export is empty"
    );

    let ok = scratch.run(&["events", "verify"]);
    assert!(ok.status.success(), "{ok:?}");
    assert!(
        stdout(&ok).contains("ok: 5 events in 2 streams verified"),
        "{}",
        stdout(&ok)
    );

    // An attacker with the database file removes the guard and rewrites history.
    let victim: String = rt.block_on(async {
        let mut conn = sqlx::SqliteConnection::connect(&scratch.url())
            .await
            .expect("connect");
        sqlx::query("DROP TRIGGER events_no_update")
            .execute(&mut conn)
            .await
            .expect("drop trigger");
        sqlx::query(
            "UPDATE events SET payload = '{\"v\":99}' WHERE stream_id = 'doc-1' AND stream_version = 2",
        )
        .execute(&mut conn)
        .await
        .expect("tamper");
        sqlx::query_scalar("SELECT event_id FROM events WHERE stream_id = 'doc-1' AND stream_version = 2")
            .fetch_one(&mut conn)
            .await
            .expect("id")
    });
    let broken = scratch.run(&["events", "verify"]);
    assert!(!broken.status.success(), "verify must fail on a tampered log");
    let text = stdout(&broken);
    assert!(text.contains(&format!("BROKEN: event {victim}")), "{text}");
    assert!(text.contains("stream doc-1, version 2"), "{text}");
}

#[test]
fn a_bad_setting_is_a_clear_error_and_exit_code_2() {
    let scratch = Scratch::new();
    let output = scratch
        .kuatia(&["migrate"])
        .env("KUATIA_WORKERS", "lots")
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .to_lowercase()
            .contains("workers")
    );
}

#[test]
fn no_secret_of_the_access_flow_reaches_a_log_line() {
    let scratch = Scratch::new();
    let mut child = scratch
        .kuatia(&[])
        .env("RUST_LOG", "debug")
        .env("KUATIA_INSECURE_COOKIES", "1")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let (lines_tx, lines_rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let mut log = Vec::new();
    let addr = loop {
        let line = lines_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("a log line");
        log.push(line.clone());
        if let Ok(entry) = serde_json::from_str::<serde_json::Value>(&line)
            && entry["message"] == "kuatia listening"
        {
            break entry["addr"].as_str().expect("addr").to_owned();
        }
    };
    let base = format!("http://{addr}");
    let password = "a very secret password 42";
    let secrets = tokio::runtime::Runtime::new().expect("rt").block_on(async {
        let client = reqwest::Client::new();
        let tenant: serde_json::Value = client
            .post(format!("{base}/v1/tenants"))
            .json(&serde_json::json!({"slug": "acme", "name": "Acme"}))
            .send()
            .await
            .expect("tenant")
            .json()
            .await
            .expect("json");
        let (id, owner) = (
            tenant["id"].as_str().expect("id"),
            tenant["bootstrap_api_key"].as_str().expect("key"),
        );
        let issued: serde_json::Value = client
            .post(format!("{base}/v1/api-keys"))
            .bearer_auth(owner)
            .header("X-Tenant-Id", id)
            .json(&serde_json::json!({"name": "erp", "role": "issuer"}))
            .send()
            .await
            .expect("key")
            .json()
            .await
            .expect("json");
        client
            .post(format!("{base}/v1/users"))
            .json(&serde_json::json!({"email": "ana@example.com", "password": password}))
            .send()
            .await
            .expect("user");
        client
            .post(format!("{base}/v1/memberships"))
            .bearer_auth(owner)
            .header("X-Tenant-Id", id)
            .json(&serde_json::json!({"email": "ana@example.com", "role": "admin"}))
            .send()
            .await
            .expect("member");
        let login = client
            .post(format!("{base}/v1/auth/login"))
            .json(&serde_json::json!({"email": "ana@example.com", "password": password}))
            .send()
            .await
            .expect("login");
        let cookie = login.headers()["set-cookie"].to_str().expect("ascii").to_owned();
        let session = cookie
            .split(';')
            .next()
            .expect("pair")
            .trim_start_matches("kuatia_session=")
            .to_owned();
        // A failed login with a wrong password must not log the attempt's password either.
        client
            .post(format!("{base}/v1/auth/login"))
            .json(&serde_json::json!({"email": "ana@example.com", "password": "wrong but secret 99"}))
            .send()
            .await
            .expect("bad login");
        vec![
            owner.to_owned(),
            issued["key"].as_str().expect("key").to_owned(),
            password.to_owned(),
            "wrong but secret 99".to_owned(),
            session,
        ]
    });
    let _ = sigterm_and_wait(&mut child);
    let _ = reader.join();
    log.extend(lines_rx.try_iter());
    assert!(
        log.len() > 10,
        "the flow was logged at debug level: {} lines",
        log.len()
    );
    for secret in &secrets {
        assert!(secret.len() >= 12);
        for line in &log {
            assert!(
                !line.contains(secret.as_str()),
                "a secret reached the log: {line}"
            );
        }
    }
}
