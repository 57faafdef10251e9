//! Reading published MLPerf Training results: the `results/<system>/<benchmark>/result_*.txt` layout of
//! MLCommons' `training_results_v*` repositories (under `PATH`, `PATH/results`, or `PATH/<org>/results`), each
//! log summarised into an [`MlperfRecord`], with the system description `systems/<system>.json` beside
//! `results/`. A malformed or truncated line is an [`ImportIssue`] naming the file and the line; the rest of the
//! file and of the folder is still read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::line::{EventType, MllogLine, parse_line};
use crate::result::mlperf::MlperfRecord;

/// A problem with one file (and line) of the folder.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{}: {message}", .file.display(), .line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ImportIssue {
    /// The file.
    pub file: PathBuf,
    /// The line (1-based), when the problem is one line.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

/// One log read: its record, and its place in the layout.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedLog {
    /// The run's index (`result_<N>.txt`).
    pub index: u32,
    /// What the log says.
    pub record: MlperfRecord,
}

/// Everything a folder held: the logs read (sorted by system, benchmark and index) and the problems found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportScan {
    /// The logs read.
    pub logs: Vec<ImportedLog>,
    /// The problems, in the order found.
    pub issues: Vec<ImportIssue>,
}

const SUBMISSION: [&str; 4] = ["submission_division", "submission_org", "submission_platform", "submission_status"];

/// Keys that are events, not hyperparameters.
const EVENTS: [&str; 14] = [
    "cache_clear",
    "init_start",
    "init_stop",
    "run_start",
    "run_stop",
    "block_start",
    "block_stop",
    "epoch_start",
    "epoch_stop",
    "eval_start",
    "eval_stop",
    "eval_accuracy",
    "submission_benchmark",
    "submission_entry",
];

/// Why a log's lines are no run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    /// It has no `run_start` line.
    #[error("no `run_start` line")]
    NoRunStart,
    /// It has no `run_stop` line.
    #[error("no `run_stop` line (a truncated log?)")]
    NoRunStop,
}

/// Summarise one log's lines; an error when it lacks `run_start` or `run_stop`.
pub fn summarise(file: &Path, system: &str, benchmark: &str, lines: &[MllogLine]) -> Result<MlperfRecord, LogError> {
    let point = |key: &str| lines.iter().find(|l| l.key == key && l.event_type != EventType::IntervalEnd);
    let start = point("run_start").ok_or(LogError::NoRunStart)?.time_ms;
    let stop = lines.iter().find(|l| l.key == "run_stop").ok_or(LogError::NoRunStop)?;
    let status = stop.meta("status").and_then(Value::as_str).unwrap_or("");
    let mut submission = BTreeMap::new();
    let mut hyperparameters = BTreeMap::new();
    for l in lines.iter().filter(|l| l.event_type == EventType::PointInTime && !EVENTS.contains(&l.key.as_str())) {
        let map = if SUBMISSION.contains(&l.key.as_str()) { &mut submission } else { &mut hyperparameters };
        map.entry(l.key.clone()).or_insert_with(|| l.value.clone());
    }
    let evals = lines
        .iter()
        .filter(|l| l.key == "eval_accuracy")
        .filter_map(|l| {
            let at = l.meta("samples_count").or_else(|| l.meta("epoch_num")).and_then(Value::as_f64)?;
            Some((at, l.value.as_f64()?))
        })
        .collect();
    Ok(MlperfRecord {
        source: file.display().to_string(),
        system: system.to_string(),
        benchmark: point("submission_benchmark").and_then(|l| l.value.as_str()).unwrap_or(benchmark).to_string(),
        submission,
        run_start_ms: start,
        run_s: (stop.time_ms - start) as f64 / 1000.0,
        converged: status == "success",
        hyperparameters,
        evals,
        system_description: None,
    })
}

/// Read one log file: its lines (the malformed ones become issues) and their summary.
pub fn read_log(file: &Path, system: &str, benchmark: &str, issues: &mut Vec<ImportIssue>) -> Option<MlperfRecord> {
    let issue = |line: Option<usize>, message: String| ImportIssue { file: file.to_path_buf(), line, message };
    let text = match std::fs::read(file) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => {
            issues.push(issue(None, e.to_string()));
            return None;
        }
    };
    let mut lines = Vec::new();
    for (n, text) in text.lines().enumerate() {
        match parse_line(text) {
            Ok(Some(l)) => lines.push(l),
            Ok(None) => {}
            Err(e) => issues.push(issue(Some(n + 1), e.to_string())),
        }
    }
    match summarise(file, system, benchmark, &lines) {
        Ok(record) => Some(record),
        Err(e) => {
            issues.push(issue(None, format!("{e}; the log is not imported")));
            None
        }
    }
}

/// The `results` folders under `root`: `root` itself, `root/results`, or `root/<org>/results`.
fn results_dirs(root: &Path) -> Vec<PathBuf> {
    if root.file_name().is_some_and(|n| n == "results") {
        return vec![root.to_path_buf()];
    }
    if root.join("results").is_dir() {
        return vec![root.join("results")];
    }
    sorted_dirs(root).into_iter().map(|d| d.join("results")).filter(|d| d.is_dir()).collect()
}

fn sorted_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir()).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// The run index of a `result_<N>.txt` file name.
fn result_index(name: &str) -> Option<u32> {
    name.strip_prefix("result_")?.strip_suffix(".txt")?.parse().ok()
}

/// The system description beside `results/` (`systems/<system>.json`), or an issue.
fn system_description(results: &Path, system: &str, issues: &mut Vec<ImportIssue>) -> Option<BTreeMap<String, Value>> {
    let file = results.parent()?.join("systems").join(format!("{system}.json"));
    let text = std::fs::read_to_string(&file).ok()?;
    match serde_json::from_str::<BTreeMap<String, Value>>(&text) {
        Ok(map) => Some(map),
        Err(e) => {
            issues.push(ImportIssue { file, line: Some(e.line()), message: format!("not a JSON object: {e}") });
            None
        }
    }
}

/// Read every log under `root` (see the module docs).
pub fn scan(root: &Path) -> ImportScan {
    let mut scan = ImportScan::default();
    let dirs = results_dirs(root);
    if dirs.is_empty() {
        scan.issues.push(ImportIssue {
            file: root.to_path_buf(),
            line: None,
            message: "no `results/<system>/<benchmark>/result_*.txt` layout here".into(),
        });
    }
    for results in dirs {
        for system_dir in sorted_dirs(&results) {
            let system = system_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let description = system_description(&results, &system, &mut scan.issues);
            for bench_dir in sorted_dirs(&system_dir) {
                let benchmark = bench_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let mut files: Vec<(u32, PathBuf)> = std::fs::read_dir(&bench_dir)
                    .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect::<Vec<_>>())
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|p| Some((result_index(&p.file_name()?.to_string_lossy())?, p)))
                    .collect();
                files.sort();
                for (index, file) in files {
                    if let Some(mut record) = read_log(&file, &system, &benchmark, &mut scan.issues) {
                        record.system_description = description.clone();
                        scan.logs.push(ImportedLog { index, record });
                    }
                }
            }
        }
    }
    scan
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn result_files_are_named_by_index() {
        assert_eq!(result_index("result_3.txt"), Some(3));
        assert_eq!(result_index("result_x.txt"), None);
        assert_eq!(result_index("summary.txt"), None);
    }

    #[test]
    fn a_log_without_run_stop_is_named_and_not_imported() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("result_0.txt");
        let start = r#":::MLLOG {"namespace": "", "time_ms": 1000, "event_type": "INTERVAL_START", "key": "run_start", "value": null, "metadata": {}}"#;
        std::fs::write(&file, format!("{start}\n:::MLLOG {{\"namespace\": \"\", \"time_ms\": 20")).unwrap();
        let mut issues = Vec::new();
        assert_eq!(read_log(&file, "sys", "llama31_8b", &mut issues), None);
        assert_eq!(issues.len(), 2);
        assert_eq!(issues[0].line, Some(2));
        assert!(issues[0].to_string().starts_with(&format!("{}:2: ", file.display())), "{}", issues[0]);
        assert!(issues[1].message.contains("run_stop"), "{}", issues[1]);
    }
}
