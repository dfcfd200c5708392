//! The `kuatia` binary as an operator uses it: `serve` and SIGTERM, `migrate`,
//! `projections status|rebuild`, `events export|verify`. Runs the real binary on a fresh SQLite
//! database (the store behind these commands is tested on both backends in `tests/`), except
//! the fault-and-scale test at the end: two instances on one fresh PostgreSQL database, run by
//! its own step of `.ci/run` (it is `#[ignore]`d otherwise). `cli/readme.rs` runs the README's
//! first hour as written with this binary.

#[path = "cli/readme.rs"]
mod readme;

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
        cmd.env("DATABASE_URL", self.url())
            .env(
                "KUATIA_MASTER_KEY",
                "a3VhdGlhLXRlc3QtbWFzdGVyLWtleS0zMi1ieXRlcyE=",
            )
            // The SIFEN simulators and webhook receivers of these tests listen on loopback.
            .env("KUATIA_PRIVATE_DESTINATIONS", "127.0.0.0/8");
        cmd
    }

    /// Without DATABASE_URL: the embedded default, `./data/kuatia.db` under the working folder.
    fn kuatia_with_defaults(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kuatia"));
        cmd.args(args)
            .current_dir(&self.dir)
            .env_remove("DATABASE_URL")
            .env("KUATIA_LISTEN", "127.0.0.1:0")
            .env("KUATIA_LOOKUP_LISTEN", "127.0.0.1:0")
            .env("RUST_LOG", "info");
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.kuatia(args).output().expect("run kuatia")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // A failed test leaves its folder (and the logs some tests write there) to be read.
        if std::thread::panicking() {
            eprintln!("kept {} for inspection", self.dir.display());
            return;
        }
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
                        stream_type: "ledger".into(),
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
    // `access` reads tenant streams only: none of the five (ledger) events is replayed, but
    // the whole log is gone through.
    assert!(
        text.contains("rebuilt access: 0 events replayed")
            && text
                .lines()
                .all(|l| !l.starts_with("rebuilt") || l.contains("over a log of 5 events")),
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
        String::from_utf8_lossy(&unknown.stderr).contains(
            "known: stream_index, access, configuration, documents, number_series, event_type_counts"
        )
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
    let unknown = uuid::Uuid::now_v7();
    let other = scratch.run(&["events", "export", "--tenant", &unknown.to_string()]);
    assert!(
        !other.status.success(),
        "an unknown tenant is an error, not an empty export"
    );
    assert_eq!(stdout(&other).lines().count(), 0);
    assert!(
        String::from_utf8_lossy(&other.stderr).contains(&format!("no tenant {unknown}")),
        "{other:?}"
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
fn a_documents_export_is_verified_offline_and_unknown_ids_are_errors() {
    let scratch = Scratch::new();
    let tenant = uuid::Uuid::now_v7();
    let document = uuid::Uuid::now_v7();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(seed(&scratch.url(), tenant));
    rt.block_on(seed_document(&scratch.url(), tenant, document));

    // By the document's id, as the API answers it, not the internal stream id.
    let export = scratch.run(&[
        "events",
        "export",
        "--tenant",
        &tenant.to_string(),
        "--document",
        &document.to_string(),
    ]);
    assert!(export.status.success(), "{export:?}");
    let text = stdout(&export);
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(
        text.lines()
            .all(|l| l.contains(&format!("document:{tenant}:{document}")))
    );

    // Unknown document, unknown stream: errors naming them, nothing printed.
    let missing = uuid::Uuid::now_v7();
    let none = scratch.run(&[
        "events",
        "export",
        "--tenant",
        &tenant.to_string(),
        "--document",
        &missing.to_string(),
    ]);
    assert!(!none.status.success());
    assert_eq!(stdout(&none), "");
    assert!(
        String::from_utf8_lossy(&none.stderr).contains(&format!("no document {missing}")),
        "{none:?}"
    );
    let bare = scratch.run(&[
        "events",
        "export",
        "--tenant",
        &tenant.to_string(),
        "--stream",
        &document.to_string(),
    ]);
    assert!(
        !bare.status.success(),
        "a bare document id is not a stream id: {bare:?}"
    );
    assert!(
        String::from_utf8_lossy(&bare.stderr).contains("--document"),
        "{bare:?}"
    );

    // The auditor's side: the file alone, with no database to reach.
    let file = scratch.dir.join("events.ndjson");
    std::fs::write(&file, &text).expect("write");
    let offline = |path: &std::path::Path| {
        scratch
            .kuatia_with_defaults(&["events", "verify", "--file", path.to_str().expect("path")])
            .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/nothing")
            .env(
                "KUATIA_MASTER_KEY",
                "a3VhdGlhLXRlc3QtbWFzdGVyLWtleS0zMi1ieXRlcyE=",
            )
            .output()
            .expect("run")
    };
    let ok = offline(&file);
    assert!(ok.status.success(), "{ok:?}");
    assert!(
        stdout(&ok).contains("ok: 3 events in 1 streams verified"),
        "{}",
        stdout(&ok)
    );

    // A changed payload is named; so are events put out of order.
    let mut lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let mut tampered = lines.clone();
    tampered[1]["payload"] = serde_json::json!({"v": 99});
    let victim = tampered[1]["event_id"].as_str().expect("id").to_owned();
    let write = |name: &str, events: &[serde_json::Value]| {
        let path = scratch.dir.join(name);
        let body: String = events.iter().map(|e| format!("{e}\n")).collect();
        std::fs::write(&path, body).expect("write");
        path
    };
    let broken = offline(&write("tampered.ndjson", &tampered));
    assert!(!broken.status.success());
    assert!(
        stdout(&broken).contains(&format!("BROKEN: event {victim}")),
        "{}",
        stdout(&broken)
    );
    assert!(
        stdout(&broken).contains("does not match the recomputed"),
        "{}",
        stdout(&broken)
    );
    lines.swap(1, 2);
    let swapped = offline(&write("swapped.ndjson", &lines));
    assert!(!swapped.status.success());
    assert!(stdout(&swapped).contains("BROKEN: event"), "{}", stdout(&swapped));
    let garbage = offline(&write(
        "garbage.ndjson",
        &[serde_json::json!({"not": "an event"})],
    ));
    assert!(!garbage.status.success());
    assert!(
        String::from_utf8_lossy(&garbage.stderr).contains("line 1"),
        "{garbage:?}"
    );
}

/// Appends three events to the stream of document `document` of `tenant`, as the API names it.
async fn seed_document(url: &str, tenant: uuid::Uuid, document: uuid::Uuid) {
    use kuatia_application::event_store::{
        AppendRequest, EventMetadata, ExpectedVersion, NewEvent, StreamRef,
    };
    use kuatia_domain::tenancy::TenantId;
    let options = kuatia_infrastructure::store::DatabaseOptions::new(url);
    let db = kuatia_infrastructure::store::Database::connect(
        &options,
        Vec::new(),
        std::sync::Arc::new(kuatia_application::upcast::UpcasterChain::new()),
    )
    .await
    .expect("open");
    let tenant = TenantId::from_uuid(tenant);
    for v in 0..3u64 {
        db.store()
            .append(AppendRequest {
                stream: StreamRef {
                    tenant_id: tenant,
                    stream_type: "ledger".into(),
                    stream_id: kuatia_domain::document::aggregate::stream_id(tenant, document),
                },
                expected: ExpectedVersion::from_current(v),
                events: vec![NewEvent::new("Recorded", 1, serde_json::json!({"v": v}))],
                metadata: EventMetadata::default(),
                jobs: Vec::new(),
            })
            .await
            .expect("append");
    }
    db.close().await;
}

#[test]
fn jobs_are_listed_retried_and_discarded_and_each_change_is_an_event() {
    use kuatia_application::jobs::NewJob;
    use kuatia_domain::tenancy::TenantId;
    let scratch = Scratch::new();
    let tenant = uuid::Uuid::now_v7();
    let document = uuid::Uuid::now_v7();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (dead, waiting) = rt.block_on(async {
        let options = kuatia_infrastructure::store::DatabaseOptions::new(scratch.url());
        let db = kuatia_infrastructure::store::Database::connect(
            &options,
            Vec::new(),
            std::sync::Arc::new(kuatia_application::upcast::UpcasterChain::new()),
        )
        .await
        .expect("open");
        let jobs = db.jobs();
        let mut stuck = NewJob::new(
            "sifen.submit",
            format!("submit:{document}"),
            TenantId::from_uuid(tenant),
            serde_json::json!({"document_id": document}),
        );
        stuck.max_attempts = 1;
        jobs.enqueue(&stuck).await.expect("enqueue");
        jobs.enqueue(&NewJob::new(
            "webhook.deliver",
            "deliver:1",
            TenantId::from_uuid(tenant),
            serde_json::json!({}),
        ))
        .await
        .expect("enqueue");
        let claimed = jobs
            .claim(
                "w",
                &["sifen.submit".to_owned()],
                1,
                std::time::Duration::from_secs(30),
            )
            .await
            .expect("claim");
        jobs.fail(claimed[0].id, "w", "SIFEN answered 0160", None)
            .await
            .expect("fail");
        let waiting = jobs.get_by_key("deliver:1").await.expect("get").expect("job");
        db.close().await;
        (claimed[0].id, waiting.id)
    });

    let list = |args: &[&str]| {
        let mut all = vec!["jobs", "list"];
        all.extend_from_slice(args);
        let out = scratch.run(&all);
        assert!(out.status.success(), "{out:?}");
        stdout(&out)
    };
    let everything = list(&[]);
    assert!(
        everything.contains(&dead.to_string()) && everything.contains(&waiting.to_string()),
        "{everything}"
    );
    let dead_only = list(&["--status", "dead"]);
    assert!(dead_only.contains(&dead.to_string()), "{dead_only}");
    assert!(dead_only.contains("SIFEN answered 0160"), "{dead_only}");
    assert!(!dead_only.contains(&waiting.to_string()), "{dead_only}");
    assert!(!list(&["--kind", "webhook.deliver"]).contains(&dead.to_string()));
    let about = list(&["--document", &document.to_string()]);
    assert!(
        about.contains(&dead.to_string()) && !about.contains(&waiting.to_string()),
        "{about}"
    );
    let bad = scratch.run(&["jobs", "list", "--status", "stuck"]);
    assert!(!bad.status.success());

    // Retry the dead job: due again with one attempt more, recorded with who and why.
    let retried = scratch.run(&[
        "jobs",
        "retry",
        &dead.to_string(),
        "--reason",
        "SIFEN is back",
        "--actor",
        "ana",
    ]);
    assert!(retried.status.success(), "{retried:?}");
    assert!(
        stdout(&retried).contains("now failed, attempts 1/2"),
        "{}",
        stdout(&retried)
    );
    assert!(list(&["--status", "failed"]).contains(&dead.to_string()));

    // Discard needs a reason; a waiting job becomes dead without running.
    let no_reason = scratch.run(&["jobs", "discard", &waiting.to_string()]);
    assert!(!no_reason.status.success());
    let discarded = scratch.run(&[
        "jobs",
        "discard",
        &waiting.to_string(),
        "--reason",
        "endpoint gone",
        "--actor",
        "ana",
    ]);
    assert!(discarded.status.success(), "{discarded:?}");
    let dead_now = list(&["--status", "dead"]);
    assert!(dead_now.contains("discarded by ana: endpoint gone"), "{dead_now}");
    // Nothing to change: an error naming why, and no event.
    let again = scratch.run(&["jobs", "discard", &waiting.to_string(), "--reason", "x"]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("is dead"),
        "{again:?}"
    );
    let missing = scratch.run(&["jobs", "retry", &uuid::Uuid::now_v7().to_string()]);
    assert!(!missing.status.success());

    let export = scratch.run(&["events", "export", "--tenant", &tenant.to_string()]);
    assert!(export.status.success(), "{export:?}");
    let events: Vec<serde_json::Value> = stdout(&export)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let types: Vec<&str> = events.iter().filter_map(|e| e["event_type"].as_str()).collect();
    assert_eq!(types, ["JobRetried", "JobDiscarded"]);
    assert_eq!(events[0]["metadata"]["actor"], "operator:ana");
    assert_eq!(events[0]["payload"]["JobRetried"]["reason"], "SIFEN is back");
    assert_eq!(
        events[1]["payload"]["JobDiscarded"]["job_id"],
        waiting.to_string()
    );
    assert_eq!(events[1]["stream_id"], format!("support:{tenant}"));
}

#[test]
fn bench_seed_writes_a_history_that_verifies_and_rebuilds_and_jobs_prune_says_what_went() {
    let scratch = Scratch::new();
    let seeded = scratch.run(&[
        "bench",
        "seed",
        "--documents",
        "60",
        "--tenants",
        "2",
        "--seed",
        "5",
    ]);
    assert!(seeded.status.success(), "{seeded:?}");
    let summary: serde_json::Value = serde_json::from_str(&stdout(&seeded)).expect("a JSON summary");
    assert_eq!(summary["documents"], 60);
    assert_eq!(summary["backend"], "Sqlite");
    let tenants = summary["tenants"].as_array().expect("tenants");
    assert_eq!(tenants.len(), 2);
    assert_eq!(
        (&tenants[0]["documents"], &tenants[1]["documents"]),
        (&6.into(), &54.into())
    );
    assert!(
        tenants[0]["api_key"]
            .as_str()
            .is_some_and(|k| k.starts_with("kt_test_"))
    );
    let verified = scratch.run(&["events", "verify"]);
    assert!(stdout(&verified).starts_with("ok: "), "{verified:?}");
    let rebuilt = scratch.run(&["projections", "rebuild", "documents"]);
    assert!(
        stdout(&rebuilt).contains("rebuilt documents: ") && stdout(&rebuilt).contains(" events/s)"),
        "{rebuilt:?}"
    );
    // The same seed twice on one database: refused, naming why.
    let again = scratch.run(&[
        "bench",
        "seed",
        "--documents",
        "10",
        "--tenants",
        "1",
        "--seed",
        "5",
    ]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("exists already"),
        "{again:?}"
    );
    let bad = scratch.run(&["bench", "seed", "--large-share", "2"]);
    assert!(!bad.status.success());

    let pruned = scratch.run(&["jobs", "prune", "--older-than-days", "7"]);
    assert!(pruned.status.success(), "{pruned:?}");
    assert_eq!(
        stdout(&pruned).trim(),
        "removed 0 succeeded job(s) older than 7 day(s)"
    );
    let by_default = scratch.run(&["jobs", "prune"]);
    assert!(
        stdout(&by_default).contains("older than 30 day(s)"),
        "{by_default:?}"
    );
    let keep = scratch
        .kuatia(&["jobs", "prune"])
        .env("KUATIA_JOB_RETENTION_DAYS", "0")
        .output()
        .expect("run");
    assert!(!keep.status.success());
    assert!(
        String::from_utf8_lossy(&keep.stderr).contains("--older-than-days"),
        "{keep:?}"
    );
}

#[test]
fn operators_are_added_and_removed_by_email_and_each_change_is_an_event() {
    let scratch = Scratch::new();
    assert!(scratch.run(&["migrate"]).status.success());
    // Only a registered person becomes an operator.
    let unknown = scratch.run(&["operators", "add", "soporte@kuatia.com.py", "--actor", "ana"]);
    assert!(!unknown.status.success());
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("no user"),
        "{unknown:?}"
    );
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let options = kuatia_infrastructure::store::DatabaseOptions::new(scratch.url());
        let db = kuatia_infrastructure::store::Database::connect(
            &options,
            Vec::new(),
            std::sync::Arc::new(kuatia_application::upcast::UpcasterChain::new()),
        )
        .await
        .expect("open");
        kuatia_application::identity::register(
            &db.store(),
            "Soporte@Kuatia.com.py",
            "a long enough secret",
            None,
        )
        .await
        .expect("register");
        db.close().await;
    });
    let added = scratch.run(&["operators", "add", "Soporte@Kuatia.com.py", "--actor", "ana"]);
    assert!(added.status.success(), "{added:?}");
    assert!(
        stdout(&added).contains("soporte@kuatia.com.py is now an operator")
            || stdout(&added).contains("is now an operator")
    );
    let again = scratch.run(&["operators", "add", "soporte@kuatia.com.py", "--actor", "ana"]);
    assert!(stdout(&again).contains("already"), "{again:?}");
    assert_eq!(
        stdout(&scratch.run(&["operators", "list"])).trim(),
        "soporte@kuatia.com.py"
    );
    let removed = scratch.run(&["operators", "remove", "soporte@kuatia.com.py", "--actor", "luis"]);
    assert!(removed.status.success(), "{removed:?}");
    assert!(
        !scratch
            .run(&["operators", "remove", "soporte@kuatia.com.py"])
            .status
            .success()
    );
    assert_eq!(stdout(&scratch.run(&["operators", "list"])).trim(), "");

    // One event per change, on the system's support stream, with who did it.
    let export = scratch.run(&["events", "export", "--tenant", &uuid::Uuid::nil().to_string()]);
    assert!(export.status.success(), "{export:?}");
    let events: Vec<serde_json::Value> = stdout(&export)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .filter(|e: &serde_json::Value| e["stream_type"] == "support")
        .collect();
    let types: Vec<&str> = events.iter().filter_map(|e| e["event_type"].as_str()).collect();
    assert_eq!(types, ["OperatorAdded", "OperatorRemoved"]);
    assert_eq!(events[0]["metadata"]["actor"], "operator:ana");
    assert_eq!(events[1]["metadata"]["actor"], "operator:luis");
    assert_eq!(
        events[0]["payload"]["OperatorAdded"]["email"],
        "soporte@kuatia.com.py"
    );
    assert_eq!(events[0]["stream_id"], format!("support:{}", uuid::Uuid::nil()));
}

#[test]
fn help_says_what_kuatia_is_not_how_the_crate_is_built() {
    let scratch = Scratch::new();
    let output = scratch.run(&["--help"]);
    assert!(output.status.success());
    let text = stdout(&output);
    assert!(
        text.starts_with("kuatia: electronic invoicing for Paraguay"),
        "{text}"
    );
    assert!(!text.contains("HTTP routers"), "{text}");
    for command in [
        "serve",
        "migrate",
        "events",
        "projections",
        "sifen-sim",
        "secrets",
    ] {
        assert!(text.contains(command), "--help lists {command}: {text}");
    }
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
fn no_secret_of_the_access_and_configuration_flow_reaches_a_log_line() {
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
        // Configuration secrets: the PFX and its password (also a wrong one), the CSC, the
        // client secret and the autoimpresor API key.
        let as_owner = |method: reqwest::Method, path: &str| {
            client
                .request(method, format!("{base}{path}"))
                .bearer_auth(owner)
                .header("X-Tenant-Id", id)
        };
        let company: serde_json::Value = as_owner(reqwest::Method::POST, "/v1/companies")
            .json(&serde_json::json!({
                "ruc": "80069563-1", "legal_name": "DEMO S.A.", "taxpayer_type": "legal_entity",
                "address": "Avda. Mcal. López", "house_number": "1234", "department_code": 1,
                "department_name": "CAPITAL", "city_code": 1, "city_name": "ASUNCION (DISTRITO)",
                "phone": "021000000", "email": "a@example.com",
                "economic_activities": [{"code": "62010", "description": "Programación"}]
            }))
            .send()
            .await
            .expect("company")
            .json()
            .await
            .expect("json");
        let company_id = company["id"].as_str().expect("company id");
        let pfx_password = "pfx password that is secret 7";
        let pfx = kuatia_infrastructure::selfsigned::SelfSigned::for_ruc("DEMO S.A.", "80069563-1", 90)
            .pfx(pfx_password)
            .expect("pfx");
        use base64::Engine;
        let pfx_base64 = base64::engine::general_purpose::STANDARD.encode(&pfx);
        let refused = as_owner(reqwest::Method::POST, "/v1/certificates")
            .json(&serde_json::json!({"company_id": company_id, "pfx_base64": pfx_base64,
                                      "password": "wrong pfx password 123"}))
            .send()
            .await
            .expect("upload");
        assert_eq!(refused.status().as_u16(), 400);
        let refusal = refused.text().await.expect("body");
        assert!(!refusal.contains("wrong pfx password 123"), "{refusal}");
        let certificate: serde_json::Value = as_owner(reqwest::Method::POST, "/v1/certificates")
            .json(&serde_json::json!({"company_id": company_id, "pfx_base64": pfx_base64,
                                      "password": pfx_password}))
            .send()
            .await
            .expect("upload")
            .json()
            .await
            .expect("json");
        let csc = "CSCSECRET0000000000000000000042Z";
        let client_secret = "client secret of sifen 31337";
        let channel = as_owner(reqwest::Method::POST, "/v1/emission-channels")
            .json(&serde_json::json!({
                "company_id": company_id, "channel": "sifen",
                "credentials": {"endpoint": "http://127.0.0.1:9", "client_id": "cid", "client_secret": client_secret},
                "sifen": {"environment": "test", "timbrado": "12345678", "timbrado_valid_from": "2026-01-01",
                          "csc_id": "0001", "csc": csc, "certificate_id": certificate["id"]}
            }))
            .send()
            .await
            .expect("channel");
        assert_eq!(channel.status().as_u16(), 201);
        let shown = channel.text().await.expect("body");
        assert!(!shown.contains(csc) && !shown.contains(client_secret), "{shown}");
        vec![
            owner.to_owned(),
            issued["key"].as_str().expect("key").to_owned(),
            password.to_owned(),
            "wrong but secret 99".to_owned(),
            session,
            pfx_password.to_owned(),
            "wrong pfx password 123".to_owned(),
            pfx_base64[pfx_base64.len() / 2..pfx_base64.len() / 2 + 40].to_owned(),
            csc.to_owned(),
            client_secret.to_owned(),
            "a3VhdGlhLXRlc3QtbWFzdGVyLWtleS0zMi1ieXRlcyE=".to_owned(),
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

/// A started `kuatia serve`: its address and its standard output, line by line. Killed when
/// dropped, so that a failing test leaves no service behind.
struct Running {
    child: std::process::Child,
    addr: String,
    stdout: std::sync::mpsc::Receiver<String>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(cmd: Command) -> Running {
    start_logged(cmd, None)
}

/// [`start`], appending the service's log lines to `log` when given.
fn start_logged(mut cmd: Command, log: Option<&std::path::Path>) -> Running {
    let mut log = log.map(|path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("the log file")
    });
    let mut child = cmd
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut lines = BufReader::new(stderr).lines();
    let mut keep = move |line: &str| {
        use std::io::Write;
        if let Some(file) = log.as_mut() {
            let _ = writeln!(file, "{line}");
        }
    };
    let addr = loop {
        let line = lines.next().expect("a log line").expect("utf-8");
        keep(&line);
        if let Ok(entry) = serde_json::from_str::<serde_json::Value>(&line)
            && entry["message"] == "kuatia listening"
        {
            break entry["addr"].as_str().expect("addr").to_owned();
        }
    };
    // Keep draining the log so the child never blocks on a full pipe.
    std::thread::spawn(move || {
        for line in lines {
            match line {
                Ok(line) => keep(&line),
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {}
                Err(_) => break,
            }
        }
    });
    Running {
        child,
        addr,
        stdout: rx,
    }
}

/// The demo banner's API key and the curl's tenant header.
fn banner_key_and_tenant(stdout: &std::sync::mpsc::Receiver<String>) -> (String, String) {
    let (mut key, mut tenant) = (None, None);
    while key.is_none() || tenant.is_none() {
        let line = stdout
            .recv_timeout(Duration::from_secs(60))
            .expect("the demo banner");
        let line = line.trim();
        if line.starts_with("kt_test_") {
            key = Some(line.to_owned());
        }
        if let Some(rest) = line.strip_prefix("-H 'X-Tenant-Id: ") {
            tenant = Some(
                rest.trim_end_matches('\\')
                    .trim()
                    .trim_end_matches('\'')
                    .to_owned(),
            );
        }
    }
    (key.expect("key"), tenant.expect("tenant"))
}

#[test]
fn a_start_whose_master_key_did_not_seal_the_secrets_is_refused_naming_the_keys() {
    // Issue 26 item 1: demo mode's master.key was replaced (a command once wrote a new one); the
    // next start ran with it, `/ready` green, documents stuck.
    let scratch = Scratch::new();
    let first = start(scratch.kuatia_with_defaults(&[]));
    let master = scratch.dir.join("data/master.key");
    assert!(master.exists());
    drop(first);
    std::fs::remove_file(&master).expect("remove the key");
    let output = scratch.kuatia_with_defaults(&[]).output().expect("run kuatia");
    assert!(!output.status.success(), "the start is refused");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "kuatia: proving the master key: the master key does not open this database's sealed secrets"
        ) && stderr.contains("Set KUATIA_MASTER_KEY to the key that sealed them"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("kuatia listening"),
        "refused before it listens: {stderr}"
    );
    // The same with a key given explicitly.
    let output = scratch
        .kuatia(&[])
        .env(
            "DATABASE_URL",
            format!("sqlite://{}/data/kuatia.db", scratch.dir.display()),
        )
        .output()
        .expect("run kuatia");
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("does not open this database's sealed secrets"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn demo_mode_seeds_a_tenant_that_is_ready_to_issue_once_and_prints_a_working_curl() {
    let scratch = Scratch::new();
    // The built-in SIFEN simulator listens on a port of its own, the same in both runs.
    let sim_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let sim_listen = format!("127.0.0.1:{sim_port}");
    let demo = || {
        let mut cmd = scratch.kuatia_with_defaults(&[]);
        cmd.env("KUATIA_SIFEN_SIM_LISTEN", &sim_listen);
        cmd
    };
    let mut first = start(demo());
    let (key, tenant) = banner_key_and_tenant(&first.stdout);
    let data = scratch.dir.join("data");
    let saved = std::fs::read_to_string(data.join("demo-api-key")).expect("the saved key");
    assert_eq!(saved.trim(), key);
    assert!(
        data.join("master.key").exists(),
        "demo mode generates a master key"
    );
    // The data folder, the database (and its WAL), the master key and the artifacts are the
    // owner's alone (they were created world-readable).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |path: &std::path::Path| {
            std::fs::metadata(path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode(&data), 0o700, "the data folder");
        for file in ["kuatia.db", "kuatia.db-wal", "master.key", "demo-api-key"] {
            assert_eq!(mode(&data.join(file)), 0o600, "{file}");
        }
        assert_eq!(mode(&data.join("artifacts")), 0o700, "the artifacts folder");
    }

    let rt = tokio::runtime::Runtime::new().expect("rt");
    let get = |addr: &str, path: &str| {
        let url = format!("http://{addr}{path}");
        rt.block_on(async {
            let response = reqwest::Client::new()
                .get(url)
                .bearer_auth(&key)
                .header("X-Tenant-Id", &tenant)
                .send()
                .await
                .expect("request");
            assert_eq!(response.status().as_u16(), 200);
            response.json::<serde_json::Value>().await.expect("json")
        })
    };
    // The banner's curl, as a newcomer pastes it.
    let readiness = get(&first.addr, "/v1/emission-channels/readiness");
    let channels = readiness["channels"].as_array().expect("channels");
    let kinds: Vec<&str> = channels.iter().filter_map(|c| c["channel"].as_str()).collect();
    assert_eq!(kinds, vec!["sifen", "autoimpresor"], "{readiness}");
    for channel in channels {
        assert_eq!(channel["ready"], true, "{channel}");
    }
    // The sifen channel points at the simulator this process runs, and it answers.
    let configured = get(&first.addr, "/v1/emission-channels");
    let sifen = configured
        .as_array()
        .and_then(|all| all.iter().find(|c| c["channel"] == "sifen"))
        .cloned()
        .unwrap_or_else(|| panic!("a sifen channel in {configured}"));
    let endpoint = sifen["credentials"]["endpoint"]
        .as_str()
        .expect("endpoint")
        .to_owned();
    assert_eq!(endpoint, format!("http://{sim_listen}"), "{sifen}");
    let stats: serde_json::Value = rt.block_on(async {
        reqwest::get(format!("{endpoint}/sim/stats"))
            .await
            .expect("the simulator answers")
            .json()
            .await
            .expect("json")
    });
    assert!(stats["totals"].is_object(), "{stats}");
    // The banner's other curl: the sample invoice it wrote is received and queued.
    let invoice = std::fs::read(data.join("demo-invoice.json")).expect("the demo invoice");
    let issued: serde_json::Value = rt.block_on(async {
        reqwest::Client::new()
            .post(format!("http://{}/v1/documents", first.addr))
            .bearer_auth(&key)
            .header("X-Tenant-Id", &tenant)
            .header("Idempotency-Key", "demo-1")
            .header("Content-Type", "application/json")
            .body(invoice)
            .send()
            .await
            .expect("request")
            .json()
            .await
            .expect("json")
    });
    assert_eq!(issued["status"], "queued", "{issued}");
    // The built-in simulator approves it: numbered, signed, sent and accepted in moments.
    let doc_id = issued["id"].as_str().expect("id").to_owned();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let accepted = loop {
        let status = get(&first.addr, &format!("/v1/documents/{doc_id}/status"));
        if status["status"] == "accepted" {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "not accepted: {status}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(accepted["number"], "001-001-0000001", "{accepted}");
    // The KuDE is rendered after the acceptance: the log is complete once its artifact is in.
    loop {
        let timeline = get(&first.addr, &format!("/v1/documents/{doc_id}/timeline"));
        let kude = timeline.as_array().is_some_and(|events| {
            events
                .iter()
                .any(|e| e["type"] == "ArtifactRecorded" && e["data"]["ArtifactRecorded"]["kind"] == "kude")
        });
        if kude {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no KuDE: {timeline}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The autoimpresor channel reports its numbers to the built-in simulator, which takes them
    // (they retried for ever against a path it did not serve).
    let mut receipt: serde_json::Value = serde_json::from_slice(
        &std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/autoimpresor-receipt.json"
        ))
        .expect("the example"),
    )
    .expect("json");
    receipt["issue_datetime"] = serde_json::json!(chrono::Utc::now().to_rfc3339());
    let demo_invoice: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("demo-invoice.json")).expect("the demo invoice"))
            .expect("json");
    receipt["company_id"] = demo_invoice["company_id"].clone();
    let printed: serde_json::Value = rt.block_on(async {
        reqwest::Client::new()
            .post(format!("http://{}/v1/documents", first.addr))
            .bearer_auth(&key)
            .header("X-Tenant-Id", &tenant)
            .header("Idempotency-Key", "demo-receipt-1")
            .json(&receipt)
            .send()
            .await
            .expect("request")
            .json()
            .await
            .expect("json")
    });
    let receipt_id = printed["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{printed}"))
        .to_owned();
    loop {
        let timeline = get(&first.addr, &format!("/v1/documents/{receipt_id}/timeline"));
        if timeline
            .as_array()
            .is_some_and(|events| events.iter().any(|e| e["type"] == "NumberReported"))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline + Duration::from_secs(15),
            "not reported: {timeline}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats: serde_json::Value = rt.block_on(async {
        reqwest::get(format!("{endpoint}/sim/stats"))
            .await
            .expect("the simulator answers")
            .json()
            .await
            .expect("json")
    });
    assert_eq!(stats["totals"]["autoimpresor_reports"], 1, "{stats}");
    let certificates = get(&first.addr, "/v1/certificates");
    assert_eq!(certificates[0]["ruc"], "80069563-1");
    assert_eq!(certificates[0]["status"], "valid");
    let events_before = get(&first.addr, "/v1/events?limit=1000")["events"]
        .as_array()
        .map(Vec::len);
    assert!(sigterm_and_wait(&mut first.child).success());

    // A second start seeds nothing new and prints the same key.
    let mut second = start(demo());
    let (again, same_tenant) = banner_key_and_tenant(&second.stdout);
    assert_eq!(
        (again.as_str(), same_tenant.as_str()),
        (key.as_str(), tenant.as_str())
    );
    let events_after = get(&second.addr, "/v1/events?limit=1000")["events"]
        .as_array()
        .map(Vec::len);
    assert_eq!(events_before, events_after);
    assert!(sigterm_and_wait(&mut second.child).success());

    // With DATABASE_URL set (production-like), nothing is seeded and no banner is printed.
    let mut production = start(scratch.kuatia(&[]));
    assert!(
        production.stdout.recv_timeout(Duration::from_secs(2)).is_err(),
        "no demo banner outside demo mode"
    );
    assert!(sigterm_and_wait(&mut production.child).success());
    let tenants = rt.block_on(async {
        use sqlx::Connection;
        let mut conn = sqlx::SqliteConnection::connect(&scratch.url())
            .await
            .expect("open");
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM tenants")
            .fetch_one(&mut conn)
            .await
            .expect("count")
    });
    assert_eq!(tenants, 0);
}

#[test]
fn sifen_sim_serves_sifen_soap_and_stops_cleanly_on_sigterm() {
    let scratch = Scratch::new();
    let mut child = scratch
        .kuatia_with_defaults(&[
            "sifen-sim",
            "--listen",
            "127.0.0.1:0",
            "--csc",
            "80069563:0003:IJKL0000000000000000000000000000",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let line = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("SIFEN simulator on "))
        .expect("the simulator's address");
    let base = line
        .trim_start_matches("SIFEN simulator on ")
        .split_whitespace()
        .next()
        .expect("url")
        .to_owned();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (stats, soap_status, soap_body) = rt.block_on(async {
        let stats: serde_json::Value = reqwest::get(format!("{base}/sim/stats"))
            .await
            .expect("stats")
            .json()
            .await
            .expect("json");
        // A siConsDE for a CDC it never saw: SIFEN's "not found" in a SOAP 1.2 envelope.
        let envelope = kuatia_infrastructure::sifen_soap::messages::cons_de(
            1,
            "01800695631001001000000122025011511234567899",
        )
        .expect("envelope");
        let response = reqwest::Client::new()
            .post(format!("{base}/de/ws/consultas/consulta.wsdl"))
            .header("Content-Type", "application/xml; charset=utf-8")
            .body(envelope)
            .send()
            .await
            .expect("soap");
        let status = response.status().as_u16();
        (stats, status, response.bytes().await.expect("body").to_vec())
    });
    assert!(stats["totals"].is_object(), "{stats}");
    assert_eq!(soap_status, 200);
    let parsed = kuatia_infrastructure::sifen_soap::messages::parse_cons_de(soap_status, &soap_body)
        .expect("a SIFEN answer");
    assert!(!parsed.is_found(), "{parsed:?}");
    assert!(sigterm_and_wait(&mut child).success());
}

#[test]
fn sifen_sim_over_tls_requires_a_client_certificate_when_told() {
    let scratch = Scratch::new();
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&scratch.dir)
            .output()
            .expect("openssl is needed (Debian: openssl)");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=IP:127.0.0.1",
        "-addext",
        "basicConstraints=critical,CA:FALSE",
        "-keyout",
        "server.key",
        "-out",
        "server.pem",
    ]);
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=DEMO S.A./serialNumber=RUC80069563-1",
        "-addext",
        "basicConstraints=critical,CA:FALSE",
        "-keyout",
        "client.key",
        "-out",
        "client.pem",
    ]);
    let mut child = scratch
        .kuatia_with_defaults(&[
            "sifen-sim",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            "server.pem",
            "--tls-key",
            "server.key",
            "--require-client-cert",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let line = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("SIFEN simulator on "))
        .expect("the simulator's address");
    let base = line
        .trim_start_matches("SIFEN simulator on ")
        .split_whitespace()
        .next()
        .expect("url")
        .to_owned();
    assert!(base.starts_with("https://127.0.0.1:"), "{line}");
    let read = |name: &str| std::fs::read(scratch.dir.join(name)).expect("a generated file");
    let server = reqwest::Certificate::from_pem(&read("server.pem")).expect("server certificate");
    let mut identity = read("client.key");
    identity.extend(read("client.pem"));
    let identity = reqwest::Identity::from_pem(&identity).expect("client identity");
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (without, with) = rt.block_on(async {
        let get = |client: reqwest::Client| {
            let url = format!("{base}/sim/stats");
            async move { client.get(url).send().await.map(|r| r.status().as_u16()) }
        };
        let anonymous = reqwest::Client::builder()
            .tls_certs_merge([server.clone()])
            .build()
            .expect("client");
        let identified = reqwest::Client::builder()
            .tls_certs_merge([server])
            .identity(identity)
            .build()
            .expect("client");
        (get(anonymous).await, get(identified).await)
    });
    assert!(
        without.is_err(),
        "a client without a certificate is refused: {without:?}"
    );
    assert_eq!(with.expect("a client with a certificate is served"), 200);
    assert!(sigterm_and_wait(&mut child).success());
}

/// `kill -KILL`, and waits for the process to be gone.
fn sigkill(child: &mut std::process::Child) {
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .expect("kill")
            .success()
    );
    let _ = child.wait();
}

/// Over `base`: a tenant with one company ready to issue on SIFEN (branch 001, issuance point
/// 001, a self-signed certificate, the default channel pointing at the simulator `sim_url`).
/// Returns the tenant id, its owner's API key and the company id.
async fn seed_sifen_issuer(
    http: &reqwest::Client,
    base: &str,
    slug: &str,
    sim_url: &str,
) -> (String, String, String) {
    use base64::Engine;
    use serde_json::{Value, json};
    let created: Value = http
        .post(format!("{base}/v1/tenants"))
        .json(&json!({"slug": slug, "name": format!("{slug} S.A.")}))
        .send()
        .await
        .expect("tenant")
        .json()
        .await
        .expect("json");
    let tenant = created["id"].as_str().expect("id").to_owned();
    let key = created["bootstrap_api_key"].as_str().expect("key").to_owned();
    let post = |path: &str, body: Value| {
        let request = http
            .post(format!("{base}{path}"))
            .bearer_auth(&key)
            .header("X-Tenant-Id", &tenant)
            .json(&body);
        async move {
            let response = request.send().await.expect("request");
            let status = response.status().as_u16();
            let body: Value = response.json().await.expect("json");
            assert_eq!(status, 201, "{body}");
            body["id"].as_str().expect("id").to_owned()
        }
    };
    let company = post(
        "/v1/companies",
        json!({
            "ruc": "80069563-1", "legal_name": "DE GENERACION ELECTRONICA S.A.",
            "taxpayer_type": "legal_entity", "tax_regime_code": 8, "address": "Avda. Mcal. López",
            "house_number": "1234", "department_code": 1, "department_name": "CAPITAL", "city_code": 1,
            "city_name": "ASUNCION (DISTRITO)", "phone": "021 000 000", "email": "facturas@example.com.py",
            "economic_activities": [{"code": "62010", "description": "Programación informática"}]
        }),
    )
    .await;
    let branch = post(
        "/v1/branches",
        json!({"company_id": company, "code": "001", "name": "Casa central"}),
    )
    .await;
    post("/v1/issuance-points", json!({"branch_id": branch, "code": "001"})).await;
    let pfx = kuatia_infrastructure::selfsigned::SelfSigned::for_ruc(
        "DE GENERACION ELECTRONICA S.A.",
        "80069563-1",
        365,
    )
    .pfx("issuer pfx")
    .expect("pfx");
    let certificate = post(
        "/v1/certificates",
        json!({
            "company_id": company,
            "pfx_base64": base64::engine::general_purpose::STANDARD.encode(pfx),
            "password": "issuer pfx",
        }),
    )
    .await;
    post(
        "/v1/emission-channels",
        json!({
            "company_id": company, "channel": "sifen", "is_default": true,
            "credentials": {"endpoint": sim_url},
            "sifen": {"environment": "test", "timbrado": "12345678", "timbrado_valid_from": "2024-01-01",
                      "csc_id": "0001", "csc": "ABCD0000000000000000000000000000",
                      "certificate_id": certificate},
        }),
    )
    .await;
    (tenant, key, company)
}

#[test]
fn documents_flowing_through_sigkills_all_end_accepted_once_with_gap_free_numbers() {
    use rand::Rng;
    use serde_json::{Value, json};

    const DOCS: usize = 300;
    const KILLS: usize = 3;
    let scratch = Scratch::new();

    // SIFEN's stand-in runs apart and outlives every kill of the service.
    let mut sim = scratch
        .kuatia_with_defaults(&["sifen-sim", "--listen", "127.0.0.1:0", "--require-signature"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the simulator");
    let sim_url = BufReader::new(sim.stdout.take().expect("stdout"))
        .lines()
        .map_while(Result::ok)
        .find_map(|l| {
            l.strip_prefix("SIFEN simulator on ")
                .and_then(|rest| rest.split_whitespace().next())
                .map(str::to_owned)
        })
        .expect("the simulator's address");

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let data = scratch.dir.join("data");
    let serve = || {
        let mut cmd = scratch.kuatia(&[]);
        cmd.env("KUATIA_LISTEN", format!("127.0.0.1:{port}"))
            .env("KUATIA_DATA_DIR", &data)
            .env("KUATIA_RATE_LIMIT_PER_KEY", "1000000")
            .env("KUATIA_RATE_LIMIT_PER_TENANT", "1000000")
            .env("KUATIA_WORKERS", "8")
            .env("KUATIA_SIFEN_READ_TIMEOUT_MS", "2000")
            .env("KUATIA_SIFEN_RETRY_SCALE", "0.001")
            // Documents submitted together go out in lots; poll them as often as a test can
            // wait (SIFEN's own guide asks for 10 minutes between polls).
            .env("KUATIA_SIFEN_LOT_POLL_MS", "300");
        start(cmd)
    };
    let mut service = serve();

    let rt = tokio::runtime::Runtime::new().expect("rt");
    let http = reqwest::Client::new();
    let (tenant, key, company) = rt.block_on(seed_sifen_issuer(&http, &base, "crash", &sim_url));

    // The clients: every document is posted until it is answered 201, with the same key across
    // the service's deaths (so a retry replays or takes over, never duplicates).
    let poster = {
        let (http, base, tenant, key) = (http.clone(), base.clone(), tenant.clone(), key.clone());
        let company = company.clone();
        rt.spawn(async move {
            let paraguay = chrono::FixedOffset::west_opt(3 * 3600).expect("offset");
            let issued = (chrono::Utc::now().with_timezone(&paraguay) - chrono::Duration::minutes(5))
                .format("%Y-%m-%dT%H:%M:%S%:z")
                .to_string();
            let mut ids = Vec::new();
            for n in 0..DOCS {
                let mut doc = kuatia_domain::document::canonical::sample_invoice();
                doc["external_id"] = json!(format!("CRASH-{n}"));
                doc["company_id"] = json!(company);
                doc["issue_datetime"] = json!(issued);
                loop {
                    let answer = http
                        .post(format!("{base}/v1/documents"))
                        .bearer_auth(&key)
                        .header("X-Tenant-Id", &tenant)
                        .header("Idempotency-Key", format!("crash-{n}"))
                        .json(&doc)
                        .send()
                        .await;
                    if let Ok(response) = answer {
                        let status = response.status().as_u16();
                        let body = response.json::<Value>().await.unwrap_or(Value::Null);
                        if status == 201 {
                            ids.push(body["id"].as_str().expect("id").to_owned());
                            break;
                        }
                        // 409 while a dead instance's claim is still held; nothing else.
                        assert!(matches!(status, 409 | 503), "document {n}: HTTP {status}: {body}");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            ids
        })
    };

    // Killed at random moments while documents flow, and started again.
    let mut rng = rand::rng();
    for _ in 0..KILLS {
        std::thread::sleep(Duration::from_millis(rng.random_range(300..1500)));
        sigkill(&mut service.child);
        service = serve();
    }
    let ids = rt.block_on(poster).expect("the poster");
    assert_eq!(ids.len(), DOCS);

    // Every document ends accepted, numbered 1..=DOCS without a gap or a repeat.
    let deadline = Instant::now() + Duration::from_secs(120);
    let statuses: Vec<Value> = loop {
        let statuses: Vec<Value> = rt.block_on(async {
            let mut all = Vec::new();
            for id in &ids {
                let status: Value = http
                    .get(format!("{base}/v1/documents/{id}/status"))
                    .bearer_auth(&key)
                    .header("X-Tenant-Id", &tenant)
                    .send()
                    .await
                    .expect("status")
                    .json()
                    .await
                    .expect("json");
                all.push(status);
            }
            all
        });
        let open = statuses.iter().filter(|s| s["status"] != "accepted").count();
        if open == 0 {
            break statuses;
        }
        assert!(
            Instant::now() < deadline,
            "{open} documents not accepted: {:?}",
            statuses.iter().find(|s| s["status"] != "accepted")
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let numbers: std::collections::BTreeSet<String> = statuses
        .iter()
        .map(|s| s["number"].as_str().expect("number").to_owned())
        .collect();
    let expected: std::collections::BTreeSet<String> =
        (1..=DOCS).map(|n| format!("001-001-{n:07}")).collect();
    assert_eq!(
        numbers, expected,
        "numbers are gap-free and unique across the crashes"
    );

    // SIFEN approved each CDC exactly once and never saw one again after approving it.
    let stats: Value = rt.block_on(async {
        reqwest::get(format!("{sim_url}/sim/stats"))
            .await
            .expect("stats")
            .json()
            .await
            .expect("json")
    });
    let approvals = stats["approvals"].as_object().expect("approvals");
    assert_eq!(approvals.len(), DOCS, "{stats}");
    assert!(approvals.values().all(|n| n == 1), "{stats}");
    assert_eq!(
        stats["totals"]["duplicates"], 0,
        "no CDC resent after its approval: {stats}"
    );

    assert!(sigterm_and_wait(&mut service.child).success());
    // The hash chains are intact after the kills.
    let verify = scratch.run(&["events", "verify"]);
    assert!(verify.status.success(), "{verify:?}");
    assert!(sigterm_and_wait(&mut sim).success());
}

/// A process that must not outlive the test, even a failing one: killed when dropped.
struct Guarded(std::process::Child);

impl Drop for Guarded {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A fresh PostgreSQL database of one test's own, on the server named by
/// `KUATIA_TEST_POSTGRES_URL` (its admin database; default the local server), dropped with the
/// guard, as `kuatia_tests::TestDb` does for the black-box tests.
struct PgScratch {
    admin: String,
    name: String,
    /// The URL the services connect with.
    url: String,
}

impl PgScratch {
    /// `None` (after saying why) when the server cannot be reached.
    fn create(rt: &tokio::runtime::Runtime) -> Option<Self> {
        let admin = std::env::var("KUATIA_TEST_POSTGRES_URL")
            .ok()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
        let name = format!("kuatia_test_{}", uuid::Uuid::now_v7().simple());
        let mut url = reqwest::Url::parse(&admin).expect("KUATIA_TEST_POSTGRES_URL is a URL");
        url.set_path(&name);
        let connected = rt.block_on(async {
            let mut conn = tokio::time::timeout(Duration::from_secs(5), sqlx::PgConnection::connect(&admin))
                .await
                .map_err(|_| "no answer within 5 s".to_owned())?
                .map_err(|e| e.to_string())?;
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&mut conn)
                .await
                .expect("create the test database");
            Ok::<_, String>(())
        });
        if let Err(why) = connected {
            eprintln!("skipped: PostgreSQL (KUATIA_TEST_POSTGRES_URL) is unreachable: {why}");
            return None;
        }
        Some(Self {
            admin,
            name,
            url: url.to_string(),
        })
    }

    async fn connect(&self) -> sqlx::PgConnection {
        sqlx::PgConnection::connect(&self.url)
            .await
            .expect("connect to the test database")
    }
}

impl Drop for PgScratch {
    fn drop(&mut self) {
        if std::thread::panicking() && std::env::var_os("KUATIA_TEST_KEEP_DB").is_some() {
            eprintln!("kept the database {} for inspection", self.name);
            return;
        }
        let (admin, name) = (self.admin.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            rt.block_on(async move {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&admin).await {
                    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                    )))
                    .execute(&mut conn)
                    .await;
                }
            });
        })
        .join();
    }
}

/// One webhook request as the receiver got it, and what it answered.
#[derive(Debug, Clone)]
struct Received {
    event_id: String,
    event_type: String,
    signature: String,
    body: Vec<u8>,
    answered: u16,
}

/// A webhook receiver on port 0 that records every request and answers 200, or now and then
/// 500 (never to an event's third attempt or later, so that every event gets through with a
/// few retries and none exhausts its schedule).
fn webhook_receiver(
    rt: &tokio::runtime::Runtime,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<Received>>>) {
    use axum::http::{HeaderMap, StatusCode};
    use std::sync::{Arc, Mutex};
    type Log = Arc<Mutex<Vec<Received>>>;
    async fn receive(
        axum::extract::State(log): axum::extract::State<Log>,
        headers: HeaderMap,
        body: axum::body::Bytes,
    ) -> StatusCode {
        use rand::Rng;
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let event_id = header("x-webhook-id");
        let mut log = log.lock().expect("the receiver's log");
        let earlier = log.iter().filter(|r| r.event_id == event_id).count();
        let answered = if earlier < 2 && rand::rng().random_bool(0.25) {
            500
        } else {
            200
        };
        log.push(Received {
            event_type: header("x-webhook-event"),
            signature: header("x-webhook-signature"),
            event_id,
            body: body.to_vec(),
            answered,
        });
        StatusCode::from_u16(answered).expect("a status")
    }
    let log: Log = Arc::default();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind the receiver");
    let url = format!("http://{}/hooks/kuatia", listener.local_addr().expect("addr"));
    let app = axum::Router::new()
        .route("/hooks/kuatia", axum::routing::post(receive))
        .with_state(log.clone());
    rt.spawn(async move { axum::serve(listener, app).await });
    (url, log)
}

/// Whether `signature` (`t=<unix>,v1=<hex>…`) signs `body` with `secret`, as a receiver checks
/// it (tests/scripts/verify_webhook.py does the same with openssl): the HMAC-SHA-256 of
/// `<t>.<body>` matches one `v1`, compared in constant time, and `t` is within 5 minutes.
fn signature_verifies(signature: &str, body: &[u8], secret: &str) -> bool {
    use hmac::{KeyInit, Mac};
    let fields: Vec<(&str, &str)> = signature
        .split(',')
        .filter_map(|part| part.split_once('='))
        .collect();
    let Some(t) = fields.iter().find(|(k, _)| *k == "t").map(|(_, v)| *v) else {
        return false;
    };
    let fresh = t
        .parse::<i64>()
        .is_ok_and(|t| (chrono::Utc::now().timestamp() - t).abs() <= 300);
    fresh
        && fields
            .iter()
            .filter(|(k, _)| *k == "v1")
            .filter_map(|(_, v)| hex::decode(v).ok())
            .any(|v1| {
                let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret.as_bytes())
                    .expect("HMAC takes any key length");
                mac.update(t.as_bytes());
                mac.update(b".");
                mac.update(body);
                mac.verify_slice(&v1).is_ok()
            })
}

/// Every row of every table of the projections a rebuild may replay, as JSON text, sorted.
async fn read_models(conn: &mut sqlx::PgConnection) -> Vec<(&'static str, Vec<String>)> {
    let mut all = Vec::new();
    for projection in kuatia_projections::registry::all()
        .into_iter()
        .filter(|p| p.kind() != kuatia_application::event_store::ProjectionKind::SideEffect)
    {
        for table in projection.tables() {
            let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT to_jsonb(t)::text FROM {table} t ORDER BY 1"
            )))
            .fetch_all(&mut *conn)
            .await
            .expect("a read model");
            all.push((*table, rows));
        }
    }
    all
}

/// The fault-and-scale test (issue 10): two `kuatia serve` on one PostgreSQL database share the
/// load of clients that alternate between them, while each instance in turn is SIGKILLed and
/// started again and the SIFEN simulator fails a good share of its answers. Once settled: every
/// document accepted, numbered without a gap, its CDC approved by SIFEN exactly once; every
/// webhook event the log implies delivered, in order per document, signed with the endpoint's
/// secret; the read models equal a rebuild; the hash chains verify. About 2.5 minutes on two
/// cores; each phase is timed on stderr (`--nocapture`).
#[test]
#[ignore = "the fault-and-scale step of .ci/run runs it (needs PostgreSQL)"]
fn two_instances_on_one_postgres_survive_sigkills_with_documents_accepted_once_and_webhooks_delivered() {
    use rand::Rng;
    use serde_json::{Value, json};
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const DOCS: usize = 400;
    const CLIENTS: usize = 8;
    let began = Instant::now();
    let phase = |what: &str| eprintln!("[{:>6.1} s] {what}", began.elapsed().as_secs_f64());
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let Some(pg) = PgScratch::create(&rt) else {
        return;
    };
    let scratch = Scratch::new();

    // SIFEN's stand-in, faulty on every operation: of its answers 12 % are an HTML 500, 22 % are
    // withheld after the request was processed (the client cannot know whether a lot or a DE
    // was taken), 6 % are SIFEN's own 0161 "unavailable" (nothing processed), another 3 % of
    // siConsDE's and siResultLoteDE's are 0162, and every answer comes late. An answer that is
    // not a verdict must never be taken for "not found": the simulator counts every CDC sent
    // again after its approval, and that count must stay 0. Not more faults: after an unknown
    // outcome a retry asks for the CDC and for its lot before it resends, so it needs three
    // answers in a row; at 50 % faults that is one attempt in eight, and with the retry
    // schedule's growing delays the last documents would outlast any bound a CI step can afford.
    let seed: u64 = rand::rng().random();
    let mut sim = Guarded(
        scratch
            .kuatia_with_defaults(&[
                "sifen-sim",
                "--listen",
                "127.0.0.1:0",
                "--require-signature",
                "--error-rate",
                "0.12",
                "--drop-rate",
                "0.22",
                "--unavailable-rate",
                "0.06",
                "--fault",
                "siConsDE:0162:0.03",
                "--fault",
                "siResultLoteDE:0162:0.03",
                "--latency-ms",
                "40",
                "--lot-processing-ms",
                "500",
                "--seed",
                &seed.to_string(),
            ])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(scratch.dir.join("sifen-sim.log")).expect("the simulator's log"))
            .spawn()
            .expect("spawn the simulator"),
    );
    let sim_url = BufReader::new(sim.0.stdout.take().expect("stdout"))
        .lines()
        .map_while(Result::ok)
        .find_map(|l| {
            l.strip_prefix("SIFEN simulator on ")
                .and_then(|rest| rest.split_whitespace().next())
                .map(str::to_owned)
        })
        .expect("the simulator's address");
    let (hook_url, received) = webhook_receiver(&rt);

    // Two instances on one database and one artifact store, each on a port of its own that it
    // gets back when restarted.
    let ports: Vec<u16> = (0..2)
        .map(|_| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port()
        })
        .collect();
    let bases: Arc<Vec<String>> = Arc::new(ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect());
    let data = scratch.dir.join("data");
    let serve = |i: usize| {
        let mut cmd = scratch.kuatia(&[]);
        cmd.env("DATABASE_URL", &pg.url)
            .env("KUATIA_LISTEN", format!("127.0.0.1:{}", ports[i]))
            .env("KUATIA_LOOKUP_ENABLED", "false")
            .env("KUATIA_DATA_DIR", &data)
            .env("KUATIA_DB_MAX_CONNECTIONS", "12")
            .env("KUATIA_RATE_LIMIT_PER_KEY", "1000000")
            .env("KUATIA_RATE_LIMIT_PER_TENANT", "1000000")
            .env("KUATIA_WORKERS", "12")
            .env("KUATIA_SHUTDOWN_GRACE_SECS", "5")
            .env("KUATIA_SIFEN_READ_TIMEOUT_MS", "1500")
            // SIFEN retries after 6 ms … 1.4 s instead of 30 s … 2 h, deliveries after 60 ms ….
            .env("KUATIA_SIFEN_RETRY_SCALE", "0.0002")
            .env("KUATIA_SIFEN_LOT_POLL_MS", "300")
            .env("KUATIA_DELIVERY_RETRY_SCALE", "0.001");
        start_logged(cmd, Some(&scratch.dir.join(format!("instance-{i}.log"))))
    };
    let mut instances = vec![serve(0), serve(1)];
    phase(&format!(
        "simulator (seed {seed}), receiver and two instances up; logs in {}",
        scratch.dir.display()
    ));

    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let (tenant, key, company) = rt.block_on(seed_sifen_issuer(&http, &bases[0], "scale", &sim_url));
    // The receiver subscribes to every event (over the other instance).
    let secret = rt.block_on(async {
        let response = http
            .post(format!("{}/v1/webhooks", bases[1]))
            .bearer_auth(&key)
            .header("X-Tenant-Id", &tenant)
            .json(&json!({"url": hook_url, "events": ["*"], "description": "fault-and-scale receiver"}))
            .send()
            .await
            .expect("webhook");
        assert_eq!(response.status().as_u16(), 201);
        let body: Value = response.json().await.expect("json");
        body["secret"].as_str().expect("the secret").to_owned()
    });

    // The clients, several at a time, alternate between the instances; a request that fails
    // (the instance died under it, or a dead instance's claim on its key is still held) is sent
    // again with the same Idempotency-Key to the other instance, then to the first, and so on.
    let next = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicUsize::new(0));
    let resent = Arc::new(AtomicUsize::new(0));
    let paraguay = chrono::FixedOffset::west_opt(3 * 3600).expect("offset");
    let issued = (chrono::Utc::now().with_timezone(&paraguay) - chrono::Duration::minutes(5))
        .format("%Y-%m-%dT%H:%M:%S%:z")
        .to_string();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (http, bases, tenant, key) = (http.clone(), bases.clone(), tenant.clone(), key.clone());
            let (next, answered, resent) = (next.clone(), answered.clone(), resent.clone());
            let (company, issued) = (company.clone(), issued.clone());
            rt.spawn(async move {
                let mut ids = Vec::new();
                loop {
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    if n >= DOCS {
                        return ids;
                    }
                    let mut doc = kuatia_domain::document::canonical::sample_invoice();
                    doc["external_id"] = json!(format!("SCALE-{n}"));
                    doc["company_id"] = json!(company);
                    doc["issue_datetime"] = json!(issued);
                    for attempt in 0.. {
                        let base = &bases[(n + attempt) % 2];
                        let answer = http
                            .post(format!("{base}/v1/documents"))
                            .bearer_auth(&key)
                            .header("X-Tenant-Id", &tenant)
                            .header("Idempotency-Key", format!("scale-{n}"))
                            .json(&doc)
                            .send()
                            .await;
                        if let Ok(response) = answer {
                            let status = response.status().as_u16();
                            let body = response.json::<Value>().await.unwrap_or(Value::Null);
                            if status == 201 {
                                ids.push((n, body["id"].as_str().expect("id").to_owned()));
                                answered.fetch_add(1, Ordering::SeqCst);
                                break;
                            }
                            assert!(
                                matches!(status, 409 | 503),
                                "document {n}, attempt {attempt}: HTTP {status}: {body}"
                            );
                        }
                        resent.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            })
        })
        .collect();

    // Mid-run, each instance in turn is killed and started again.
    let mut rng = rand::rng();
    for (victim, at) in [(1, DOCS / 3), (0, 2 * DOCS / 3)] {
        let deadline = Instant::now() + Duration::from_secs(120);
        while answered.load(Ordering::SeqCst) < at {
            assert!(
                Instant::now() < deadline,
                "the load stalled before {at} documents"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(0..500)));
        sigkill(&mut instances[victim].child);
        phase(&format!(
            "instance {victim} killed after {} documents were answered",
            answered.load(Ordering::SeqCst)
        ));
        std::thread::sleep(Duration::from_millis(rng.random_range(200..1500)));
        instances[victim] = serve(victim);
        phase(&format!("instance {victim} restarted"));
    }
    let mut ids: Vec<(usize, String)> = clients
        .into_iter()
        .flat_map(|c| rt.block_on(c).expect("a client"))
        .collect();
    ids.sort();
    assert_eq!(ids.len(), DOCS);
    let distinct: BTreeSet<&String> = ids.iter().map(|(_, id)| id).collect();
    assert_eq!(distinct.len(), DOCS, "one document per Idempotency-Key");
    phase(&format!(
        "{DOCS} documents answered 201 ({} requests sent again)",
        resent.load(Ordering::SeqCst)
    ));

    // Settled: every document final and no job left to run (pending or running), watched in the
    // database. A dead instance's leased jobs come back once their lease (60 s) expires.
    let settle_by = Instant::now() + Duration::from_secs(180);
    let mut report_at = Instant::now();
    let stats_of = |sql: &'static str| {
        rt.block_on(async {
            let mut conn = pg.connect().await;
            let rows: Vec<(String, i64)> = sqlx::query_as(sql).fetch_all(&mut conn).await.expect("a count");
            rows
        })
    };
    loop {
        let open =
            stats_of("SELECT status, count(*) FROM documents WHERE status <> 'accepted' GROUP BY status");
        let busy = stats_of(
            "SELECT kind || ' ' || state, count(*) FROM jobs WHERE state IN ('pending', 'running') \
             GROUP BY 1",
        );
        if open.is_empty() && busy.is_empty() {
            break;
        }
        if Instant::now() >= report_at {
            phase(&format!("still open: documents {open:?}, jobs {busy:?}"));
            report_at += Duration::from_secs(10);
        }
        if Instant::now() > settle_by {
            // What is left, document by document: its events and its unfinished jobs.
            let stuck = stats_of(
                "SELECT d.id::text || ' ' || d.status || ' events: ' || \
                   (SELECT string_agg(e.event_type, ', ' ORDER BY e.stream_version) FROM events e \
                    WHERE e.stream_id = d.stream_id) || ' jobs: ' || \
                   coalesce((SELECT string_agg(j.idempotency_key || ' ' || j.state || ' attempts ' || \
                      j.attempts || ' due in ' || (j.next_attempt_at - clock_timestamp())::text || \
                      ' lease ' || coalesce(j.lease_owner, '-') || ' error ' || coalesce(j.last_error, '-'), \
                      '; ') FROM jobs j WHERE j.payload->>'document_id' = d.id::text \
                      AND j.state <> 'succeeded'), '-'), 0::bigint \
                 FROM documents d WHERE d.status <> 'accepted'",
            );
            let other = stats_of(
                "SELECT kind || ' ' || state || ': ' || coalesce(last_error, '-'), count(*) FROM jobs \
                 WHERE state IN ('pending', 'running', 'dead') GROUP BY 1",
            );
            panic!(
                "not settled: documents {open:?}, jobs {busy:?}\n{}\nall unfinished jobs: {other:?}",
                stuck
                    .iter()
                    .map(|(line, _)| line.as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    phase("every document accepted and the job queue empty");
    let dead = stats_of(
        "SELECT kind || ': ' || coalesce(last_error, '-'), count(*) FROM jobs WHERE state = 'dead' \
         GROUP BY 1",
    );
    assert!(dead.is_empty(), "jobs given up: {dead:?}");

    // Over the API (alternating instances): accepted, numbered 1..=DOCS without a gap or a repeat.
    let get = |base: &str, path: String| {
        let request = http
            .get(format!("{base}{path}"))
            .bearer_auth(&key)
            .header("X-Tenant-Id", &tenant);
        async move {
            let response = request.send().await.expect("request");
            assert_eq!(response.status().as_u16(), 200);
            response.json::<Value>().await.expect("json")
        }
    };
    let statuses: Vec<Value> = rt.block_on(async {
        let mut all = Vec::new();
        for (n, id) in &ids {
            all.push(get(&bases[n % 2], format!("/v1/documents/{id}/status")).await);
        }
        all
    });
    let not_accepted: Vec<&Value> = statuses.iter().filter(|s| s["status"] != "accepted").collect();
    assert!(not_accepted.is_empty(), "{not_accepted:?}");
    let numbers: BTreeSet<String> = statuses
        .iter()
        .map(|s| s["number"].as_str().expect("number").to_owned())
        .collect();
    let expected: BTreeSet<String> = (1..=DOCS).map(|n| format!("001-001-{n:07}")).collect();
    assert_eq!(
        numbers, expected,
        "numbers gap-free and unique across both instances"
    );

    // SIFEN approved each document's CDC, and each exactly once.
    let cdcs: BTreeSet<String> = statuses
        .iter()
        .map(|s| s["cdc"].as_str().expect("cdc").to_owned())
        .collect();
    let stats: Value = rt.block_on(async {
        reqwest::get(format!("{sim_url}/sim/stats"))
            .await
            .expect("stats")
            .json()
            .await
            .expect("json")
    });
    let approvals = stats["approvals"].as_object().expect("approvals");
    let approved: BTreeSet<String> = approvals.keys().cloned().collect();
    assert_eq!(approved, cdcs, "SIFEN approved exactly the documents' CDCs");
    assert!(approvals.values().all(|n| n == 1), "{stats}");
    // Every unknown outcome was settled by asking SIFEN, never by sending an approved CDC again
    // (counted as each request arrives, whatever it was then answered).
    assert_eq!(stats["totals"]["duplicates"], 0, "{stats}");
    assert_eq!(stats["totals"]["resent_after_approval"], 0, "{stats}");
    assert_eq!(
        stats["resent_after_approval"]
            .as_object()
            .map(serde_json::Map::len),
        Some(0),
        "{stats}"
    );
    assert!(
        stats["totals"]["faults"]["0161"].as_u64().unwrap_or(0) > 0,
        "SIFEN answered unavailable: {stats}"
    );
    phase(&format!("simulator totals: {}", stats["totals"]));

    // Every webhook event that the documents' events imply reached the receiver with a 2xx,
    // each request's signature verifies, and the receiver got no event that the log does not
    // imply.
    // (The webhook events by id, and each document's in log order.)
    let (implied, per_document) = rt.block_on(async {
        let mut implied = BTreeMap::<String, &'static str>::new();
        let mut per_document = BTreeMap::<String, Vec<String>>::new();
        let mut after = 0;
        loop {
            let page = get(
                &bases[after as usize % 2],
                format!("/v1/events?after={after}&limit=1000"),
            )
            .await;
            let events = page["events"].as_array().expect("events");
            if events.is_empty() {
                break (implied, per_document);
            }
            for event in events.iter().filter(|e| e["stream_type"] == "document") {
                let decoded: kuatia_domain::document::aggregate::DocumentEvent =
                    serde_json::from_value(event["data"].clone()).expect("a document event");
                if let Some(kind) = kuatia_domain::webhook::webhook_event_type(&decoded) {
                    let id: uuid::Uuid = event["event_id"].as_str().expect("id").parse().expect("uuid");
                    let id = format!("evt_{}", id.simple());
                    per_document
                        .entry(event["stream_id"].as_str().expect("stream").to_owned())
                        .or_default()
                        .push(id.clone());
                    implied.insert(id, kind);
                }
            }
            after = page["next_after"].as_i64().expect("next_after");
        }
    });
    let received = received.lock().expect("the receiver's log").clone();
    let bad: Vec<&Received> = received
        .iter()
        .filter(|r| !signature_verifies(&r.signature, &r.body, &secret))
        .collect();
    assert!(bad.is_empty(), "signatures that do not verify: {bad:?}");
    for r in &received {
        let body: Value = serde_json::from_slice(&r.body).expect("a JSON body");
        assert_eq!(body["id"], r.event_id.as_str(), "{body}");
        assert_eq!(body["type"], r.event_type.as_str(), "{body}");
        assert_eq!(
            implied.get(&r.event_id).copied(),
            Some(r.event_type.as_str()),
            "an event the log does not imply: {body}"
        );
    }
    let delivered: BTreeSet<&String> = received
        .iter()
        .filter(|r| r.answered == 200)
        .map(|r| &r.event_id)
        .collect();
    let lost: Vec<&String> = implied.keys().filter(|id| !delivered.contains(id)).collect();
    assert!(
        lost.is_empty(),
        "{} webhook events never delivered: {lost:?}",
        lost.len()
    );
    // In order per document: an event is first tried only after the one before it got its 2xx.
    for ids in per_document.values() {
        for pair in ids.windows(2) {
            let delivered = received
                .iter()
                .position(|r| r.event_id == pair[0] && r.answered == 200)
                .expect("delivered, as checked above");
            let tried = received
                .iter()
                .position(|r| r.event_id == pair[1])
                .expect("tried, as checked above");
            assert!(
                delivered < tried,
                "{} was sent before {} was delivered",
                pair[1],
                pair[0]
            );
        }
    }
    let by_type = implied.values().fold(BTreeMap::<&str, usize>::new(), |mut m, t| {
        *m.entry(t).or_default() += 1;
        m
    });
    let refused = received.iter().filter(|r| r.answered != 200).count();
    phase(&format!(
        "{} webhook events {by_type:?} delivered in {} requests ({refused} answered 500)",
        implied.len(),
        received.len()
    ));
    let undelivered = stats_of(
        "SELECT status, count(*) FROM webhook_deliveries WHERE status <> 'delivered' GROUP BY status",
    );
    assert!(
        undelivered.is_empty(),
        "deliveries not delivered: {undelivered:?}"
    );

    // Both instances stop cleanly; then the read models equal a rebuild from the log, and the
    // hash chains verify.
    for instance in &mut instances {
        assert!(sigterm_and_wait(&mut instance.child).success());
    }
    let kuatia = |args: &[&str]| {
        scratch
            .kuatia(args)
            .env("DATABASE_URL", &pg.url)
            .env("KUATIA_LOOKUP_ENABLED", "false")
            .output()
            .expect("run kuatia")
    };
    let incremental = rt.block_on(async { read_models(&mut pg.connect().await).await });
    let rebuild = kuatia(&["projections", "rebuild", "--all"]);
    assert!(rebuild.status.success(), "{rebuild:?}");
    let rebuilt = rt.block_on(async { read_models(&mut pg.connect().await).await });
    for ((table, before), (_, after)) in incremental.iter().zip(&rebuilt) {
        if before != after {
            let gone: Vec<&String> = before.iter().filter(|r| !after.contains(r)).take(3).collect();
            let new: Vec<&String> = after.iter().filter(|r| !before.contains(r)).take(3).collect();
            panic!(
                "{table}: {} rows built incrementally, {} rebuilt; only incremental: {gone:#?}; \
                 only rebuilt: {new:#?}",
                before.len(),
                after.len()
            );
        }
    }
    let verify = kuatia(&["events", "verify"]);
    assert!(verify.status.success(), "{verify:?}");
    phase(&format!(
        "read models equal a rebuild; {}",
        stdout(&verify).trim()
    ));
    assert!(sigterm_and_wait(&mut sim.0).success());
}

/// Issue 26: a command other than the service never creates a master key. `secrets rotate` in a
/// data folder without one (demo mode: no DATABASE_URL) and without KUATIA_MASTER_KEY refuses,
/// naming what to set, and leaves no master.key behind for the next start to run with.
#[test]
fn secrets_rotate_without_a_master_key_creates_none_and_says_which_to_set() {
    let scratch = Scratch::new();
    let output = scratch
        .kuatia_with_defaults(&["secrets", "rotate"])
        .env_remove("KUATIA_MASTER_KEY")
        .env_remove("KUATIA_DEMO")
        .output()
        .expect("run kuatia");
    assert!(!output.status.success(), "{output:?}");
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("KUATIA_MASTER_KEY") && err.contains("never creates one"),
        "{err}"
    );
    assert!(!scratch.dir.join("data/master.key").exists(), "a key was created");
}

#[test]
fn secrets_rotate_reseals_under_the_new_key_and_names_the_rows_it_cannot_open() {
    use kuatia_application::vault::{Sealer, Vault};
    use kuatia_infrastructure::vault::AesGcmSealer;
    use std::sync::Arc;
    // The Scratch's key seals first; the new key replaces it; a third key nobody configured.
    let (old, new, stray) = (
        "a3VhdGlhLXRlc3QtbWFzdGVyLWtleS0zMi1ieXRlcyE=",
        "bmV3LW1hc3Rlci1rZXktb2Yta3VhdGlhLTMyLWJ5dGU=",
        "c3RyYXktbWFzdGVyLWtleS1ub2JvZHktaGFzLTMyYnk=",
    );
    let scratch = Scratch::new();
    assert!(scratch.run(&["migrate"]).status.success());
    let config = |key: &str| kuatia_infrastructure::config::Config {
        database_url: kuatia_infrastructure::config::Secret::new(scratch.url()),
        master_key: Some(kuatia_infrastructure::config::Secret::new(key)),
        ..Default::default()
    };
    let sealer = |key: &str| AesGcmSealer::from_base64(key).expect("a key");
    let tenant = kuatia_domain::tenancy::TenantId::from_uuid(uuid::Uuid::now_v7());
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (kept, lost) = rt.block_on(async {
        let db = kuatia_api::compose::open_database(&config(old))
            .await
            .expect("db");
        let vault = Vault::new(db.store(), Arc::new(sealer(old)));
        let csc = vault
            .put(tenant, "csc", b"ABCD0000000000000000000000000000")
            .await
            .expect("put");
        let pem = vault
            .put(tenant, "certificate", b"-----BEGIN-----")
            .await
            .expect("put");
        let stray_vault = Vault::new(db.store(), Arc::new(sealer(stray)));
        let lost = stray_vault.put(tenant, "csc", b"EFGH").await.expect("put");
        db.close().await;
        (vec![csc, pem], lost)
    });
    let rotate = |previous: &str| {
        let output = scratch
            .kuatia(&["secrets", "rotate"])
            .env("KUATIA_MASTER_KEY", new)
            .env("KUATIA_MASTER_KEY_PREVIOUS", previous)
            .output()
            .expect("run kuatia");
        (
            output.status.code(),
            stdout(&output),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };

    // The stray row does not open: exit 1, naming it; the others are re-sealed.
    let (code, out, err) = rotate(old);
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(out.contains("re-sealed 2 secret(s) in all"), "{out}");
    assert!(
        out.contains(&format!("sealed under {}", sealer(old).key_id())),
        "{out}"
    );
    assert!(
        err.contains(&lost.to_string()) && err.contains(sealer(stray).key_id()),
        "{err}"
    );
    // With the stray key given too, the last row follows; a third run has nothing to do.
    let (code, out, err) = rotate(&format!("{old},{stray}"));
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("re-sealed 1 secret(s) in all"), "{out}");
    let (code, out, _) = rotate("");
    assert_eq!(code, Some(0));
    assert!(out.contains("re-sealed 0 secret(s) in all"), "{out}");

    // Everything opens under the new key alone.
    rt.block_on(async {
        let db = kuatia_api::compose::open_database(&config(new))
            .await
            .expect("db");
        let vault = Vault::new(db.store(), Arc::new(sealer(new)));
        let opened = vault.get(tenant, kept[0]).await.expect("the CSC opens");
        assert_eq!(opened.as_slice(), b"ABCD0000000000000000000000000000");
        assert!(vault.get(tenant, kept[1]).await.is_ok());
        assert_eq!(vault.get(tenant, lost).await.expect("opens").as_slice(), b"EFGH");
        db.close().await;
    });
}
