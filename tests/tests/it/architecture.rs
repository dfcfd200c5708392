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

/// The `.rs` files under `dir`, by module path (`routes::documents`, `process::sifen::lots`).
fn modules(dir: &std::path::Path) -> std::collections::BTreeMap<String, PathBuf> {
    fn walk(dir: &std::path::Path, prefix: &[String], out: &mut std::collections::BTreeMap<String, PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("a source folder")
            .map(|e| e.expect("an entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_owned();
            if path.is_dir() {
                let mut inner = prefix.to_vec();
                inner.push(name);
                walk(&path, &inner, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let mut module = prefix.to_vec();
                if !matches!(name.as_str(), "mod" | "lib" | "main") {
                    module.push(name);
                }
                out.insert(module.join("::"), path);
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(dir, &[], &mut out);
    out
}

/// The code of a file without its comments and its `#[cfg(test)]` module (tests may reach
/// anything).
fn code_of(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).expect("a source file");
    let text = text.split("\n#[cfg(test)]\nmod tests").next().unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Which files of the crate in `dir` each file uses: every `crate::a::b` path and every
/// `super::` path, resolved to the deepest module that has a file. A module folder counts as one
/// unit with its own file (`sifen.rs` and `sifen/lots.rs`: a parent and its children may use each
/// other, as Rust's privacy expects).
fn module_graph(dir: &std::path::Path) -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let files = modules(dir);
    let unit = |module: &str| -> String {
        // The top-level module a path belongs to, below the crate's flat folders: `routes::x`
        // stays `routes::x`, `process::sifen::lots` becomes `process::sifen`.
        let parts: Vec<&str> = module.split("::").collect();
        let depth = if matches!(parts.first(), Some(&("routes" | "process" | "lookup"))) {
            2
        } else {
            1
        };
        parts[..parts.len().min(depth)].join("::")
    };
    let resolve = |path: &str| -> Option<String> {
        let parts: Vec<&str> = path.split("::").collect();
        (1..=parts.len())
            .rev()
            .map(|n| parts[..n].join("::"))
            .find(|m| files.contains_key(m))
    };
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut graph = std::collections::BTreeMap::new();
    for (module, path) in &files {
        if module.is_empty() {
            continue;
        }
        let code = code_of(path);
        let mut uses = BTreeSet::new();
        // The path after `crate::` or `super::` at `at`, without a function or macro called at
        // its end (`crate::openapi()` is the crate root's function, not the `openapi` module).
        let path_at = |at: usize| -> String {
            let rest: String = code[at..].chars().take_while(|c| word(*c)).collect();
            let called = code[at + rest.len()..].starts_with(['(', '!']);
            let rest = rest.trim_end_matches(':');
            match rest.rsplit_once("::") {
                Some((head, _)) if called => head.to_owned(),
                None if called => String::new(),
                _ => rest.to_owned(),
            }
        };
        for (at, _) in code.match_indices("crate::") {
            let rest = path_at(at + 7);
            if let Some(target) = resolve(&rest) {
                uses.insert(unit(&target));
            }
        }
        for (at, _) in code.match_indices("super::") {
            let mut base: Vec<&str> = module.split("::").collect();
            if !path.ends_with("mod.rs") {
                base.pop();
            }
            let rest = path_at(at + 7);
            let full = match (base.is_empty(), rest.is_empty()) {
                (true, _) => rest.clone(),
                (false, true) => base.join("::"),
                (false, false) => format!("{}::{rest}", base.join("::")),
            };
            if let Some(target) = resolve(&full) {
                uses.insert(unit(&target));
            }
        }
        let me = unit(module);
        uses.remove(&me);
        uses.remove("");
        graph.entry(me).or_insert_with(BTreeSet::new).extend(uses);
    }
    graph
}

/// The import circles of a module graph: each strongly connected set of more than one unit.
fn circles(graph: &std::collections::BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut queue = VecDeque::from([from.to_owned()]);
        while let Some(m) = queue.pop_front() {
            for next in graph.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    queue.push_back(next.clone());
                }
            }
        }
        seen
    };
    let mut found: Vec<Vec<String>> = Vec::new();
    for m in graph.keys() {
        let mine = reach(m);
        if !mine.contains(m) || found.iter().any(|c| c.contains(m)) {
            continue;
        }
        let circle: Vec<String> = mine.into_iter().filter(|o| reach(o).contains(m)).collect();
        found.push(circle);
    }
    found
}

#[test]
fn no_import_circle_between_the_files_of_api_or_application() {
    for krate in ["api", "application"] {
        let graph = module_graph(&workspace_root().join(krate).join("src"));
        assert!(graph.len() > 10, "{krate}: the module graph was read ({graph:?})");
        let circles = circles(&graph);
        assert!(circles.is_empty(), "{krate} has import circles: {circles:?}");
    }
}

#[test]
fn the_circle_check_finds_a_circle() {
    let mut graph = std::collections::BTreeMap::new();
    graph.insert("a".to_owned(), BTreeSet::from(["b".to_owned()]));
    graph.insert("b".to_owned(), BTreeSet::from(["c".to_owned()]));
    graph.insert("c".to_owned(), BTreeSet::from(["a".to_owned()]));
    graph.insert("d".to_owned(), BTreeSet::from(["a".to_owned()]));
    assert_eq!(
        circles(&graph),
        vec![vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]]
    );
}

/// What `api` may name of the read models and of the adapters: the composition root builds
/// adapters, the CLI runs operator commands, and query handlers read read models. The process
/// managers and the intake use case live in `application` behind ports.
#[test]
fn api_holds_no_workflow_and_builds_no_adapter_outside_the_composition_root() {
    let src = workspace_root().join("api/src");
    // Files that may name adapters: the composition root, the CLI, the lookup service's own
    // wiring. The HTTP handlers may read the read models (query handlers), nothing else.
    let builds_adapters = |module: &str| {
        matches!(module, "compose" | "cli" | "demo" | "serve" | "metrics") || module.starts_with("lookup")
    };
    let reads_models = |module: &str| module.starts_with("routes::");
    let adapters = [
        "kuatia_projections::",
        "kuatia_infrastructure::sifen_soap",
        "kuatia_infrastructure::sifen::sign",
        "kuatia_infrastructure::webhook_sender",
        "kuatia_infrastructure::delivery",
        "kuatia_infrastructure::destination",
        "SifenClient",
        "SigningKey",
    ];
    let mut offenders = Vec::new();
    for (module, path) in modules(&src) {
        if builds_adapters(&module) {
            continue;
        }
        let code = code_of(&path);
        for adapter in adapters {
            if code.contains(adapter) && !(adapter == "kuatia_projections::" && reads_models(&module)) {
                offenders.push(format!("{module}: {adapter}"));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "api names adapters outside the composition root: {offenders:?}"
    );
    assert!(
        !src.join("pipeline.rs").exists() && !src.join("sifen_build.rs").exists(),
        "the SIFEN process manager lives in application::process"
    );
    assert!(
        !src.join("autoimpresor.rs").exists() && !src.join("printing.rs").exists(),
        "the autoimpresor and printing process managers live in application::process"
    );
    assert!(
        !src.join("sandbox.rs").exists(),
        "the sandbox preview is a use case in application::sandbox, its adapters in infrastructure::sandbox"
    );
}
