//! Writing results: each file atomically (temporary file in the same folder, fsync, rename, fsync of the
//! folder), so a crash or Ctrl-C never leaves a half-written result; and the suite index rewritten after each run.
//! [`existing_results`] finds the files a set of suites would replace, so a caller can refuse before any run.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::Suite;
use crate::result::{FORMAT_VERSION, INDEX_FILE, IndexEntry, RunResult, SuiteIndex};

/// Write `bytes` to `path` atomically: readers see the old file or the new one, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("result");
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)?;
        // Make the rename itself durable (a no-op error on platforms that cannot open folders).
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Serialise as pretty JSON with a final newline and write atomically.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let mut text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
    text.push('\n');
    write_atomic(path, text.as_bytes())
}

/// File name of a run's result.
pub fn result_file_name(run_id: &str) -> String {
    format!("{run_id}.json")
}

/// Where a run's result goes: `<out_dir>/<spec name>/<run id>.json`.
pub fn result_path(out_dir: &Path, spec_name: &str, run_id: &str) -> PathBuf {
    out_dir.join(spec_name).join(result_file_name(run_id))
}

/// The result files running `suites` into `out_dir` would replace (those already there), in plan order.
pub fn existing_results(out_dir: &Path, suites: &[Suite]) -> Vec<PathBuf> {
    suites
        .iter()
        .flat_map(|suite| suite.plans.iter().map(|plan| result_path(out_dir, &suite.spec_name, &plan.id)))
        .filter(|path| path.is_file())
        .collect()
}

/// The results folder of one suite, its index kept in memory and rewritten after every run.
#[derive(Debug)]
pub struct SuiteWriter {
    dir: PathBuf,
    index: SuiteIndex,
}

impl SuiteWriter {
    /// Open (creating it) the folder for a spec's results. An existing index of the same spec is kept and its
    /// entries replaced run by run; an index of another spec version (different hash) is started afresh.
    pub fn open(dir: PathBuf, spec_name: &str, spec_sha256: &str) -> std::io::Result<Self> {
        fs::create_dir_all(&dir)?;
        let existing: Option<SuiteIndex> =
            fs::read_to_string(dir.join(INDEX_FILE)).ok().and_then(|s| serde_json::from_str(&s).ok());
        let runs = existing
            .filter(|i| i.format_version == FORMAT_VERSION && i.spec_sha256 == spec_sha256)
            .map(|i| i.runs)
            .unwrap_or_default();
        let index = SuiteIndex {
            format_version: FORMAT_VERSION,
            spec_name: spec_name.to_string(),
            spec_sha256: spec_sha256.to_string(),
            updated_at: String::new(),
            runs,
        };
        Ok(Self { dir, index })
    }

    /// The folder results go to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Write a run's result, then the updated index; returns the result's path.
    pub fn record(&mut self, result: &RunResult) -> std::io::Result<PathBuf> {
        let file = result_file_name(&result.run_id);
        let path = self.dir.join(&file);
        write_json(&path, result)?;
        let entry = IndexEntry {
            run_id: result.run_id.clone(),
            outcome: result.outcome.clone(),
            file,
            samples_per_s: result.metrics.as_ref().map(|m| m.throughput.samples_per_s),
        };
        match self.index.runs.iter_mut().find(|e| e.run_id == entry.run_id) {
            Some(e) => *e = entry,
            None => self.index.runs.push(entry),
        }
        self.index.updated_at = result.environment.finished_at.clone();
        write_json(&self.dir.join(INDEX_FILE), &self.index)?;
        Ok(path)
    }

    /// The index as written so far.
    pub fn index(&self) -> &SuiteIndex {
        &self.index
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporaries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("a.json")]);
    }

    #[test]
    fn failed_write_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        // The target is a folder: the rename fails, the temporary file must not stay behind.
        let target = dir.path().join("sub");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("x"), "keep").unwrap();
        assert!(write_atomic(&target, b"data").is_err());
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("sub")]);
    }
}
