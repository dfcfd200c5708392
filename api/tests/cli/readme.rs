//! The README's "Your first hour", run as written: its fenced `sh` blocks, in order, in one
//! `bash -euo pipefail`, from the repository's folder, with `KUATIA` naming this build's binary
//! and free ports in `PORT`, `LOOKUP_PORT`, `SIM_PORT` and `HOOK_PORT` (the README's defaults
//! are 8080–8083). On PostgreSQL when `KUATIA_TEST_POSTGRES_URL` is set (the README honours a
//! `DATABASE_URL` already set), else on the README's own SQLite default. After the last block a
//! few checks read what the README left behind: the variables it captured and the files it
//! downloaded.

use super::{PgScratch, Scratch};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// The fenced `sh` blocks of the README's section `heading`, in order.
fn sh_blocks(readme: &str, heading: &str) -> Vec<String> {
    let start = readme
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("the README has no section {heading:?}"));
    let section = &readme[start + heading.len() + 2..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in section.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(current.is_none(), "an unclosed block in {heading:?}");
    blocks
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Checks run before the README's last block (which stops the services), on what the blocks
/// left: each prints `ok <what>` or fails the script.
const CHECKS: &str = r#"
check() { if eval "$2"; then echo "ok $1"; else echo "FAILED $1" >&2; exit 1; fi; }
final() { curl -s $B/v1/documents/$1/status "${ERP[@]}" | jq -r .status; }
check invoice-accepted '[ "$(final $INVOICE)" = accepted ]'
check credit-note-accepted '[ "$(final $NOTE)" = accepted ]'
for doc in debit-note remision autofactura autoimpresor-invoice autoimpresor-receipt; do
  check "$doc-accepted" '[ "$(final $(cat $doc.id))" = accepted ]'
done
check kude-is-a-pdf '[ "$(head -c 5 factura.pdf)" = "%PDF-" ]'
check xml-is-signed 'grep -q "<SignatureValue>" factura.xml && grep -q "<dCarQR>" factura.xml'
check webhook-test-received 'grep -q "^/hooks webhook.test " hooks.log'
check webhook-accepted-received 'grep -q "^/hooks document.accepted .*\"document_id\":\"$INVOICE\"" hooks.log'
check autoimpresor-report-received 'grep -q "^/autoimpresor - .*\"event\":\"issued\"" hooks.log'
"#;

/// Checks run after the last block.
const STOPPED: &str = r#"
for pid in $KUATIA_PID $SIM_PID $HOOK_PID; do wait $pid || true; done
check services-stopped '! kill -0 $KUATIA_PID $SIM_PID $HOOK_PID 2> /dev/null'
"#;

#[test]
fn the_readme_first_hour_runs_as_written_against_a_fresh_service() {
    let readme = std::fs::read_to_string(repository().join("README.md")).expect("README.md");
    let blocks = sh_blocks(&readme, "## Your first hour");
    assert!(blocks.len() >= 8, "the first hour's blocks: {blocks:#?}");
    let scratch = Scratch::new();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let postgres = std::env::var_os("KUATIA_TEST_POSTGRES_URL")
        .filter(|u| !u.is_empty())
        .and_then(|_| PgScratch::create(&rt));

    // Whatever happens, the services the blocks started end with the script: a background job
    // left running would outlive the test.
    let mut script = String::from(
        "set -euo pipefail\n\
         trap 'kill $(jobs -p) 2> /dev/null || true' EXIT\n",
    );
    let (stop, blocks) = blocks.split_last().expect("blocks");
    assert!(
        stop.contains("kill "),
        "the last block stops the services: {stop}"
    );
    for (i, block) in blocks.iter().enumerate() {
        script.push_str(&format!("echo '== block {}' >&2\n{block}", i + 1));
    }
    script.push_str(CHECKS);
    script.push_str(&format!("echo '== the last block' >&2\n{stop}"));
    script.push_str(STOPPED);

    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(&script)
        .current_dir(repository())
        .env("KUATIA", env!("CARGO_BIN_EXE_kuatia"))
        .env("PORT", free_port().to_string())
        .env("LOOKUP_PORT", free_port().to_string())
        .env("SIM_PORT", free_port().to_string())
        .env("HOOK_PORT", free_port().to_string())
        // mktemp -d makes the README's folder here, removed with the scratch folder.
        .env("TMPDIR", &scratch.dir)
        .env("RUST_LOG", "info")
        .env_remove("DATABASE_URL")
        .env_remove("KUATIA_CONFIG")
        .env_remove("KUATIA_MASTER_KEY")
        .env_remove("KUATIA_DEMO")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(pg) = &postgres {
        command.env("DATABASE_URL", &pg.url);
    }
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let started = Instant::now();
    let mut child = command.spawn().expect("bash");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if started.elapsed() > Duration::from_secs(120) {
            // The whole group: bash and whatever it started.
            let _ = Command::new("kill")
                .args(["-KILL", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let (out, err) = (out.join().expect("stdout"), err.join().expect("stderr"));
    let log = std::fs::read_dir(&scratch.dir)
        .ok()
        .and_then(|mut dirs| dirs.next())
        .and_then(|dir| dir.ok())
        .and_then(|dir| std::fs::read_to_string(dir.path().join("kuatia.log")).ok())
        .unwrap_or_default();
    let tail: String = {
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    };
    assert!(
        status.is_some_and(|s| s.success()),
        "the README's first hour failed ({status:?} after {:.1} s)\n--- stdout\n{out}\n--- stderr\n{err}\n\
         --- the service's last log lines\n{tail}",
        started.elapsed().as_secs_f64()
    );
    for check in [
        "invoice-accepted",
        "credit-note-accepted",
        "debit-note-accepted",
        "remision-accepted",
        "autofactura-accepted",
        "autoimpresor-invoice-accepted",
        "autoimpresor-receipt-accepted",
        "kude-is-a-pdf",
        "xml-is-signed",
        "webhook-test-received",
        "webhook-accepted-received",
        "autoimpresor-report-received",
        "services-stopped",
    ] {
        assert!(
            out.contains(&format!("\nok {check}\n")),
            "{check}\n--- stdout\n{out}"
        );
    }
    eprintln!(
        "the first hour took {:.1} s on {}",
        started.elapsed().as_secs_f64(),
        if postgres.is_some() {
            "PostgreSQL"
        } else {
            "SQLite"
        }
    );
    drop(postgres);
}

#[test]
fn the_readme_blocks_are_found_in_order() {
    let text = "# x\n\n## Your first hour\n\ntext\n\n```sh\na\nb\n```\n\n```\nnot sh\n```\n\n```sh\nc\n```\n\n## Next\n\n```sh\nd\n```\n";
    assert_eq!(sh_blocks(text, "## Your first hour"), vec!["a\nb\n", "c\n"]);
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn every_relative_link_of_the_readme_and_docs_reaches_its_file_and_heading() {
    let root = repository();
    let mut pages = vec![root.join("README.md")];
    let mut folders = vec![root.join("docs")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("docs") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    let headings = |path: &Path| -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.strip_prefix('#'))
            .map(|rest| anchor(rest.trim_start_matches('#')))
            .collect()
    };
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("a page");
        for (at, _) in text.match_indices("](") {
            let rest = &text[at + 2..];
            let Some(end) = rest.find(')') else { continue };
            let link = &rest[..end];
            if link.contains("://") || link.starts_with("mailto:") || link.contains(char::is_whitespace) {
                continue;
            }
            let (file, fragment) = link.split_once('#').unwrap_or((link, ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                page.parent().expect("folder").join(file)
            };
            if !target.exists() {
                broken.push(format!("{}: {link} (no such file)", page.display()));
            } else if !fragment.is_empty()
                && target.extension().is_some_and(|e| e == "md")
                && !headings(&target).iter().any(|h| h == fragment)
            {
                broken.push(format!("{}: {link} (no such heading)", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
    // The one docs/configuration.md gives for demo mode, named.
    let configuration = std::fs::read_to_string(root.join("docs/configuration.md")).expect("configuration");
    assert!(configuration.contains("(../README.md#demo-mode)"));
}
