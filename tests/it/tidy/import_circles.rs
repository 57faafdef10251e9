//! The map's rule "no import circle among the files of any folder of any crate", checked by
//! `scripts/import_cycles.py` over each crate's whole `src/` (a circle anywhere in a crate is a circle in the
//! folder that holds it).

use super::{root, shown, source_roots};

#[test]
fn no_crate_has_an_import_circle() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let mut failures = Vec::new();
    for src in source_roots() {
        let output = std::process::Command::new(&python)
            .arg(root().join("scripts/import_cycles.py"))
            .arg(src.strip_prefix(root()).unwrap_or(&src))
            .current_dir(root())
            .output();
        let output = match output {
            Ok(o) => o,
            Err(e) => panic!("could not run {python} scripts/import_cycles.py: {e} (set PYTHON to a Python 3)"),
        };
        if !output.status.success() {
            let stdout = String::from_utf8_lossy(&output.stdout);
            let circles: Vec<&str> = stdout.lines().filter(|l| l.starts_with("import circle")).collect();
            let stderr = String::from_utf8_lossy(&output.stderr);
            failures.push(format!("{}:\n    {}{}", shown(&src), circles.join("\n    "), stderr.trim()));
        }
    }
    assert!(
        failures.is_empty(),
        "import circles (move the shared items to a file below, the orchestration above; `mod.rs` only declares):\n  {}",
        failures.join("\n  ")
    );
}
