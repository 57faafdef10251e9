//! Rules of the map's "Invariants" about what links what: the front binary links no training library, the
//! library names no backend crate, the crates depend on each other only downwards, and only the backend registry
//! (plus two error texts and the build id) asks a cargo feature what a build can do.

use std::collections::BTreeSet;

use super::{code_only, root, rust_files, shown};

/// Crates that train or talk to a training transport: only the engine binary reaches them (through
/// `trainbench_linked`).
const TRAINING_CRATES: [&str; 4] =
    ["trainbench_linked", "trainbench_backend_tch", "trainbench_backend_wgpu", "trainbench_transport_mpi"];

/// Files of `src/` where `cfg!(feature = ...)` may appear: the registry's `built`, the transport's error texts,
/// the build id.
const FEATURE_QUESTIONS_ALLOWED: [&str; 3] =
    ["src/backend_registry.rs", "src/runner/dist/transport.rs", "src/handoff.rs"];

/// The trainbench crates each library crate may depend on (the layering of the map's "Crates" table).
const ALLOWED_DEPENDENCIES: [(&str, &[&str]); 8] = [
    ("trainbench-graph", &[]),
    ("trainbench-data", &["trainbench-graph"]),
    ("trainbench-comm", &["trainbench-graph"]),
    ("trainbench-contract", &["trainbench-graph", "trainbench-data", "trainbench-comm"]),
    ("trainbench-backend-tch", &["trainbench-contract", "trainbench-graph", "trainbench-data", "trainbench-comm"]),
    ("trainbench-backend-wgpu", &["trainbench-contract", "trainbench-graph", "trainbench-data", "trainbench-comm"]),
    ("trainbench-transport-mpi", &["trainbench-comm"]),
    (
        "trainbench-linked",
        &[
            "trainbench-contract",
            "trainbench-comm",
            "trainbench-backend-tch",
            "trainbench-backend-wgpu",
            "trainbench-transport-mpi",
        ],
    ),
];

#[test]
fn only_the_engine_binary_names_a_training_crate() {
    let engine = root().join("src/bin/trainbench-engine.rs");
    let mut offenders = Vec::new();
    for path in rust_files(&root().join("src")) {
        let code = code_only(&std::fs::read_to_string(&path).unwrap_or_default());
        for name in TRAINING_CRATES {
            let allowed = path == engine && name == "trainbench_linked";
            if !allowed && code.contains(name) {
                offenders.push(format!("{} names {name}", shown(&path)));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "the front binary and the library must link no training library (only src/bin/trainbench-engine.rs names \
         trainbench_linked):\n  {}",
        offenders.join("\n  ")
    );
}

#[test]
fn only_the_registry_asks_a_cargo_feature() {
    let mut offenders = Vec::new();
    for path in rust_files(&root().join("src")) {
        let shown_path = shown(&path);
        if FEATURE_QUESTIONS_ALLOWED.contains(&shown_path.as_str()) {
            continue;
        }
        let code = code_only(&std::fs::read_to_string(&path).unwrap_or_default());
        for (n, line) in code.lines().enumerate() {
            let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
            if compact.contains("cfg!(feature") || compact.contains("cfg(feature") || compact.contains("(feature=") {
                offenders.push(format!("{shown_path}:{}", n + 1));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "a cargo feature asked outside {FEATURE_QUESTIONS_ALLOWED:?} (ask `backend_registry::built` or the `Linked` \
         table instead):\n  {}",
        offenders.join("\n  ")
    );
}

#[test]
fn crates_depend_only_downwards() {
    let mut offenders = Vec::new();
    for (name, allowed) in ALLOWED_DEPENDENCIES {
        let manifest = root().join("crates").join(name).join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| panic!("{}: {e}", shown(&manifest)));
        let used = trainbench_dependencies(&text);
        let allowed: BTreeSet<&str> = allowed.iter().copied().collect();
        for dep in used.iter().filter(|d| !allowed.contains(d.as_str())) {
            offenders.push(format!("{name} depends on {dep}"));
        }
    }
    let listed: BTreeSet<&str> = ALLOWED_DEPENDENCIES.iter().map(|(n, _)| *n).collect();
    for entry in std::fs::read_dir(root().join("crates")).expect("crates/ is readable").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().join("Cargo.toml").is_file() && !listed.contains(name.as_str()) {
            offenders.push(format!("crates/{name} has no place in the layering (add it to ALLOWED_DEPENDENCIES)"));
        }
    }
    assert!(offenders.is_empty(), "dependencies against the map's layering:\n  {}", offenders.join("\n  "));
}

/// The trainbench crates a manifest's `[dependencies]` (and its target-specific dependency tables) name.
fn trainbench_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut in_dependencies = false;
    let mut out = BTreeSet::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_dependencies = line.ends_with("dependencies]") && !line.contains("dev-dependencies");
            continue;
        }
        if in_dependencies && line.starts_with("trainbench-") {
            let name: String = line.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            out.insert(name);
        }
    }
    out
}
