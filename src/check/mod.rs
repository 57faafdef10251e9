//! Golden shape snapshots for users' CI: compare the shape of results with golden files, or write them.
//!
//! Golden file of a result: `<golden dir>/<spec name>/<configuration name>.shape.json`, e.g.
//! `golden/resnet50-sweep/resnet50.b32.fp32.1x1.shape.json`, where the name is the run id without `.rN` as a run
//! of the result's plan is named now ([`crate::result::identity::ConfigurationIdentity::name`]: a result written
//! before the strategy was in every data-parallel id gets `…1x2-z2`, not `…1x2`). Repeats of one configuration
//! share one golden file: they must have the same shape.

pub mod shape;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use shape::{SHAPE_FORMAT, Shape, shape_of};

use crate::result::{LoadedResult, RunOutcome};

/// Why a check could not be carried out (as opposed to a shape mismatch, which is a [`CheckStatus`]).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// A golden file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A golden file is not a valid shape snapshot.
    #[error("{path}: not a shape snapshot: {message}; hint: regenerate it with `trainbench check --update`")]
    BadGolden {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// A spec name or run identifier cannot be used as a file name.
    #[error("`{0}` cannot be used as a golden file name (contains a path separator or is `.`/`..`)")]
    BadName(String),
}

/// What checking one result against its golden file found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckStatus {
    /// The shapes are equal.
    Matches,
    /// The shapes differ; `diff` is a unified diff from the golden file to the result's shape.
    Differs {
        /// Unified diff, golden (`-`) to result (`+`).
        diff: String,
    },
    /// No golden file exists for this configuration.
    Missing,
    /// `--update` wrote (or rewrote) the golden file.
    Written {
        /// True when a golden file existed and its content changed.
        changed: bool,
    },
    /// A `skipped` repeat (not attempted, e.g. after an earlier repeat ran out of memory) of a configuration that
    /// has attempted repeats in the same check: it measured nothing, so it is not compared.
    NotRun {
        /// The runner's reason for skipping it.
        reason: String,
    },
    /// `--update` with another result of the same configuration, whose shape differs, earlier in the list.
    Conflict {
        /// Unified diff between the two shapes.
        diff: String,
        /// The earlier result.
        other: PathBuf,
    },
}

/// The outcome of checking one result.
#[derive(Debug, Clone)]
pub struct CheckReport {
    /// The result file.
    pub result: PathBuf,
    /// Its golden file.
    pub golden: PathBuf,
    /// What was found.
    pub status: CheckStatus,
}

impl CheckReport {
    /// True when this report should fail the command (mismatch, missing golden file, conflict).
    pub fn is_failure(&self) -> bool {
        matches!(self.status, CheckStatus::Differs { .. } | CheckStatus::Missing | CheckStatus::Conflict { .. })
    }
}

fn safe_component(name: &str) -> Result<&str, CheckError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\']) {
        return Err(CheckError::BadName(name.to_string()));
    }
    Ok(name)
}

/// Path of the golden file for a shape under `dir`.
pub fn golden_path(dir: &Path, shape: &Shape) -> Result<PathBuf, CheckError> {
    let spec = safe_component(&shape.spec)?;
    let config = safe_component(&shape.config)?;
    Ok(dir.join(spec).join(format!("{config}.shape.json")))
}

/// A unified diff between two shape texts, labelled `golden` and `result`.
pub fn shape_diff(golden: &str, current: &str, golden_label: &str, current_label: &str) -> String {
    similar::TextDiff::from_lines(golden, current)
        .unified_diff()
        .context_radius(2)
        .header(golden_label, current_label)
        .to_string()
}

fn read_golden(path: &Path) -> Result<Option<Shape>, CheckError> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| CheckError::BadGolden { path: path.to_path_buf(), message: e.to_string() }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CheckError::Io { path: path.to_path_buf(), source }),
    }
}

/// Check (or with `update`, write) the golden shape of every result, in order.
pub fn check_results(
    results: &[LoadedResult],
    golden_dir: &Path,
    update: bool,
) -> Result<Vec<CheckReport>, CheckError> {
    let mut reports = Vec::with_capacity(results.len());
    // Shapes written in this invocation, so repeats of one configuration are checked against each other.
    let mut written: BTreeMap<PathBuf, (Shape, PathBuf)> = BTreeMap::new();
    // Configurations with at least one attempted (not skipped) repeat in this check.
    let mut attempted = std::collections::BTreeSet::new();
    for loaded in results {
        if !matches!(loaded.result.outcome, RunOutcome::Skipped { .. }) {
            attempted.insert(golden_path(golden_dir, &shape_of(&loaded.result))?);
        }
    }
    for loaded in results {
        let shape = shape_of(&loaded.result);
        let golden = golden_path(golden_dir, &shape)?;
        let status =
            if let (RunOutcome::Skipped { reason }, true) = (&loaded.result.outcome, attempted.contains(&golden)) {
                CheckStatus::NotRun { reason: reason.clone() }
            } else if update {
                if let Some((first, first_path)) = written.get(&golden) {
                    if *first == shape {
                        CheckStatus::Written { changed: false }
                    } else {
                        let diff = shape_diff(
                            &first.to_text(),
                            &shape.to_text(),
                            &first_path.display().to_string(),
                            &loaded.path.display().to_string(),
                        );
                        CheckStatus::Conflict { diff, other: first_path.clone() }
                    }
                } else {
                    let previous = read_golden(&golden).unwrap_or(None);
                    if let Some(parent) = golden.parent() {
                        std::fs::create_dir_all(parent)
                            .map_err(|source| CheckError::Io { path: parent.to_path_buf(), source })?;
                    }
                    std::fs::write(&golden, shape.to_text())
                        .map_err(|source| CheckError::Io { path: golden.clone(), source })?;
                    let changed = previous.is_some_and(|p| p != shape);
                    written.insert(golden.clone(), (shape, loaded.path.clone()));
                    CheckStatus::Written { changed }
                }
            } else {
                match read_golden(&golden)? {
                    None => CheckStatus::Missing,
                    Some(expected) if expected == shape => CheckStatus::Matches,
                    Some(expected) => CheckStatus::Differs {
                        diff: shape_diff(
                            &expected.to_text(),
                            &shape.to_text(),
                            &golden.display().to_string(),
                            &loaded.path.display().to_string(),
                        ),
                    },
                }
            };
        reports.push(CheckReport { result: loaded.path.clone(), golden, status });
    }
    Ok(reports)
}

/// Render the reports for the terminal: one line per result, diffs after mismatches, and a summary line.
pub fn render(reports: &[CheckReport]) -> String {
    let mut out = String::new();
    for r in reports {
        let result = r.result.display();
        let golden = r.golden.display();
        match &r.status {
            CheckStatus::Matches => out.push_str(&format!("ok        {result}\n")),
            CheckStatus::NotRun { reason } => {
                out.push_str(&format!("not run   {result}: {reason}; not compared\n"))
            }
            CheckStatus::Written { changed: false } => out.push_str(&format!("written   {golden}\n")),
            CheckStatus::Written { changed: true } => out.push_str(&format!("updated   {golden} (shape changed)\n")),
            CheckStatus::Missing => out.push_str(&format!(
                "missing   {result}: no golden file {golden}\n          hint: create it with `trainbench check --update`\n"
            )),
            CheckStatus::Differs { diff } => {
                out.push_str(&format!("MISMATCH  {result}: shape differs from {golden}\n"));
                out.push_str(diff);
                out.push_str(
                    "          hint: if the change is intended, accept it with `trainbench check --update`\n",
                );
            }
            CheckStatus::Conflict { diff, other } => {
                out.push_str(&format!(
                    "CONFLICT  {result}: same configuration as {} but a different shape; golden file not rewritten\n",
                    other.display()
                ));
                out.push_str(diff);
            }
        }
    }
    let failed = reports.iter().filter(|r| r.is_failure()).count();
    out.push_str(&format!("{} result(s) checked, {failed} failed\n", reports.len()));
    out
}
