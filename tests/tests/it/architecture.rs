//! The folders are the architecture: `domain` stays pure, and the published error catalogue
//! matches the code.

use serde_json::Value;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn metadata() -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // Only the host's dependency graph: resolving every platform would need crates (Android,
    // Windows) that were never downloaded.
    let host = format!("{}-unknown-{}-gnu", std::env::consts::ARCH, std::env::consts::OS);
    let output = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
            &host,
            "--manifest-path",
        ])
        .arg(workspace_root().join("Cargo.toml"))
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("metadata JSON")
}

/// Normal (non-dev, non-build) dependency edges, by package name.
fn graph(meta: &Value) -> HashMap<String, Vec<String>> {
    let names: HashMap<&str, &str> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| (p["id"].as_str().unwrap_or(""), p["name"].as_str().unwrap_or("")))
        .collect();
    let mut edges = HashMap::new();
    for node in meta["resolve"]["nodes"].as_array().expect("nodes") {
        let from = names[node["id"].as_str().unwrap_or("")].to_owned();
        let deps = node["deps"]
            .as_array()
            .expect("deps")
            .iter()
            .filter(|d| {
                d["dep_kinds"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k["kind"].is_null()))
            })
            .map(|d| names[d["pkg"].as_str().unwrap_or("")].to_owned())
            .collect();
        edges.insert(from, deps);
    }
    edges
}

fn reachable(edges: &HashMap<String, Vec<String>>, start: &str, skip: &[&str]) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut queue = VecDeque::from([start.to_owned()]);
    while let Some(name) = queue.pop_front() {
        for dep in edges.get(&name).into_iter().flatten() {
            if !skip.contains(&dep.as_str()) && seen.insert(dep.clone()) {
                queue.push_back(dep.clone());
            }
        }
    }
    seen
}

#[test]
fn domain_depends_on_no_database_web_framework_http_client_or_async_runtime() {
    let edges = graph(&metadata());
    let direct: BTreeSet<_> = edges["kuatia-domain"].iter().cloned().collect();
    let forbidden = ["sqlx", "axum", "tokio", "reqwest", "hyper"];
    for name in forbidden {
        assert!(!direct.contains(name), "domain depends directly on {name}");
    }
    // cqrs-es (whose Aggregate trait the design card mandates) pulls tokio for its EventSink
    // mutex; nothing else may bring an async runtime, and nothing at all may bring the rest.
    let without_cqrs = reachable(&edges, "kuatia-domain", &["cqrs-es"]);
    for name in forbidden {
        assert!(
            !without_cqrs.contains(name),
            "domain reaches {name} other than through cqrs-es"
        );
    }
    let all = reachable(&edges, "kuatia-domain", &[]);
    for name in ["sqlx", "axum", "reqwest", "hyper"] {
        assert!(!all.contains(name), "domain reaches {name}");
    }
}

#[test]
fn dependencies_point_one_way() {
    let edges = graph(&metadata());
    let layers = |crate_name: &str| -> BTreeSet<String> {
        edges[crate_name]
            .iter()
            .filter(|d| d.starts_with("kuatia-"))
            .cloned()
            .collect()
    };
    let set = |names: &[&str]| names.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();
    assert_eq!(layers("kuatia-domain"), set(&[]));
    assert_eq!(layers("kuatia-application"), set(&["kuatia-domain"]));
    assert_eq!(
        layers("kuatia-projections"),
        set(&["kuatia-application", "kuatia-domain"])
    );
    assert_eq!(
        layers("kuatia-infrastructure"),
        set(&["kuatia-application", "kuatia-domain", "kuatia-sifen-rules"])
    );
    // The simulator's rule engine is written from SIFEN's Manual alone: it reaches no code of
    // kuatia, so that a mistake in the DE builder cannot hide in its own checker (issue 25).
    assert!(
        reachable(&edges, "kuatia-sifen-rules", &[])
            .iter()
            .all(|name| name == "kuatia-sifen-rules" || !name.starts_with("kuatia-")),
        "kuatia-sifen-rules reaches a kuatia crate"
    );
    assert!(
        !edges["kuatia-projections"].iter().any(|d| d == "sqlx"),
        "projections speak through SqlTx only"
    );
}

#[test]
fn the_published_error_catalogue_matches_the_code() {
    let doc = std::fs::read_to_string(workspace_root().join("docs/errors.md")).expect("docs/errors.md");
    for (code, status, _) in kuatia_api::error::ERROR_TABLE {
        let row = format!("| `{}` | {} |", code.as_str(), status);
        assert!(doc.contains(&row), "docs/errors.md lacks the row {row}");
    }
}
