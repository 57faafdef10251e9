//! Reading result files for report, compare, check and audit: single files or whole results folders
//! (recursively), checked against the format version; and the configuration a result belongs to.

use std::path::{Path, PathBuf};

use super::index::INDEX_FILE;
use super::run::{FORMAT_VERSION, RunResult};

/// A result file read from disk.
#[derive(Debug, Clone)]
pub struct LoadedResult {
    /// Where it was read from.
    pub path: PathBuf,
    /// The result.
    pub result: RunResult,
}

/// Why result files could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file or folder could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid JSON or does not match the result format.
    #[error("{path}: not a trainbench result: {message}")]
    Parse {
        /// The path.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// The file was written by a format version this build does not read.
    #[error(
        "{path}: result format version {found} is not supported (this trainbench reads version {FORMAT_VERSION}); \
         hint: use the trainbench version that wrote it"
    )]
    Version {
        /// The path.
        path: PathBuf,
        /// Version found in the file.
        found: u64,
    },
    /// A folder held no result files.
    #[error("{path}: no result files found (looked for *.json, recursively)")]
    Empty {
        /// The folder.
        path: PathBuf,
    },
}

/// True for files a results folder may hold that are not run results (the suite index, shape snapshots).
fn is_auxiliary(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name == INDEX_FILE || name.ends_with(".shape.json") || name.ends_with(".schema.json")
}

/// Read one result file.
pub fn load_file(path: &Path) -> Result<LoadedResult, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io { path: path.to_path_buf(), source })?;
    parse_result(path, &text)
}

/// Parse the text of a result file; `path` is only used in messages.
pub fn parse_result(path: &Path, text: &str) -> Result<LoadedResult, LoadError> {
    // The common case in one pass: a result of this format version that parses. Anything else (another
    // version, a damaged file) is read again through a JSON value, whose errors name what is wrong.
    if let Ok(result) = serde_json::from_str::<RunResult>(text)
        && result.format_version == FORMAT_VERSION
    {
        return Ok(LoadedResult { path: path.to_path_buf(), result });
    }
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| LoadError::Parse { path: path.to_path_buf(), message: e.to_string() })?;
    match value.get("format_version").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(FORMAT_VERSION) => {}
        Some(found) => return Err(LoadError::Version { path: path.to_path_buf(), found }),
        None => {
            return Err(LoadError::Parse { path: path.to_path_buf(), message: "no `format_version` field".into() });
        }
    }
    let result: RunResult = serde_json::from_value(value)
        .map_err(|e| LoadError::Parse { path: path.to_path_buf(), message: e.to_string() })?;
    Ok(LoadedResult { path: path.to_path_buf(), result })
}

/// The folder a Slurm submission keeps its plan file, batch scripts, logs and replaced results in, inside a
/// results folder (`trainbench run --on slurm`; an earlier submission replaced by `--overwrite` is kept as
/// `_slurm-<time>`); no spec name starts with `_`, so these folders never hold a spec's results.
pub const SLURM_DIR: &str = "_slurm";

/// Collect the result files under `path`: the file itself, or every `*.json` below a folder (sorted, skipping
/// the suite index, shape snapshots and a Slurm submission's folder, [`SLURM_DIR`]).
pub fn result_files(path: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let meta = std::fs::metadata(path).map_err(|source| LoadError::Io { path: path.to_path_buf(), source })?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut out = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|source| LoadError::Io { path: dir.clone(), source })?;
        for entry in entries {
            let entry = entry.map_err(|source| LoadError::Io { path: dir.clone(), source })?;
            let p = entry.path();
            let file_type = entry.file_type().map_err(|source| LoadError::Io { path: p.clone(), source })?;
            if file_type.is_dir() {
                if !entry.file_name().to_string_lossy().starts_with(SLURM_DIR) {
                    stack.push(p);
                }
            } else if p.extension().is_some_and(|e| e == "json") && !is_auxiliary(&p) {
                out.push(p);
            }
        }
    }
    out.sort();
    if out.is_empty() {
        return Err(LoadError::Empty { path: path.to_path_buf() });
    }
    Ok(out)
}

/// Read every result under each of `paths` (files or folders), in a stable order.
pub fn load_all<P: AsRef<Path>>(paths: &[P]) -> Result<Vec<LoadedResult>, LoadError> {
    let mut out = Vec::new();
    for p in paths {
        for file in result_files(p.as_ref())? {
            out.push(load_file(&file)?);
        }
    }
    Ok(out)
}

impl RunResult {
    /// The configuration this result is a repeat of (`resnet50.b32.fp32.1x1`), which compare, report and check
    /// group repeats by: the one its plan stored.
    pub fn config_id(&self) -> &str {
        if self.plan.config.is_empty() {
            // A result written before plans stored their configuration: recover it from the run id.
            config_from_run_id(&self.run_id)
        } else {
            &self.plan.config
        }
    }
}

/// The run identifier without its repeat suffix: `resnet50.b32.fp32.1x1.r3` -> `resnet50.b32.fp32.1x1`.
/// Identifiers without a `.r<N>` suffix are returned unchanged. Only for results without `plan.config`.
fn config_from_run_id(run_id: &str) -> &str {
    match run_id.rsplit_once('.') {
        Some((head, tail))
            if tail.len() > 1 && tail.starts_with('r') && tail[1..].chars().all(|c| c.is_ascii_digit()) =>
        {
            head
        }
        _ => run_id,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_is_the_plans_or_parsed_from_an_older_results_run_id() {
        let text = include_str!("../../tests/fixtures/results/fixture-mlp/fixture-mlp.b8.fp32.1x1.r1.json");
        let mut r: RunResult = serde_json::from_str(text).unwrap();
        r.plan.config.clear();
        assert_eq!(r.config_id(), "fixture-mlp.b8.fp32.1x1");
        r.plan.config = "stored".into();
        assert_eq!(r.config_id(), "stored");
        let mut json: serde_json::Value = serde_json::from_str(text).unwrap();
        json["plan"].as_object_mut().unwrap().remove("config");
        let older: RunResult = serde_json::from_value(json).unwrap();
        assert_eq!((older.plan.config.as_str(), older.config_id()), ("", "fixture-mlp.b8.fp32.1x1"));
    }

    #[test]
    fn a_run_id_loses_only_its_repeat_suffix() {
        assert_eq!(config_from_run_id("resnet50.b32.fp32.1x1.r0"), "resnet50.b32.fp32.1x1");
        assert_eq!(config_from_run_id("resnet50.b32.fp32.1x1.r12"), "resnet50.b32.fp32.1x1");
        assert_eq!(config_from_run_id("resnet50.b32.fp32.1x1"), "resnet50.b32.fp32.1x1");
        assert_eq!(config_from_run_id("m.rx"), "m.rx");
        assert_eq!(config_from_run_id("m.r"), "m.r");
        assert_eq!(config_from_run_id("r1"), "r1");
    }
}
