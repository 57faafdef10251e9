//! Writing results: each file atomically (temporary file in the same folder, fsync, rename, fsync of the
//! folder), so a crash or Ctrl-C never leaves a half-written result; and the suite index rewritten after each run,
//! under a lock on the folder and merged with what is on disk, so processes writing results of the same suite at
//! once (the tasks of a Slurm job array) never drop each other's entries.
//! [`existing_results`] finds the files a set of suites would replace, so a caller can refuse before any run.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::suite::Suite;
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
        let runs = read_index(&dir)
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

    /// Write a run's result, then the updated index; returns the result's path. The index is read again under
    /// the folder's lock and this run's entry merged in, so entries other processes wrote meanwhile stay.
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
        let _lock = IndexLock::acquire(&self.dir)?;
        if let Some(on_disk) = read_index(&self.dir)
            .filter(|i| i.format_version == FORMAT_VERSION && i.spec_sha256 == self.index.spec_sha256)
        {
            for e in on_disk.runs {
                if !self.index.runs.iter().any(|mine| mine.run_id == e.run_id) {
                    self.index.runs.push(e);
                }
            }
        }
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

/// The suite index in `dir`, when there is a readable one.
fn read_index(dir: &Path) -> Option<SuiteIndex> {
    fs::read_to_string(dir.join(INDEX_FILE)).ok().and_then(|s| serde_json::from_str(&s).ok())
}

/// An exclusive advisory lock (`flock`) on a results folder itself (no lock file is left beside the results),
/// held until dropped; the kernel releases it when the process ends, so a crashed writer never leaves the
/// folder locked.
struct IndexLock {
    _dir: File,
}

impl IndexLock {
    fn acquire(dir: &Path) -> std::io::Result<Self> {
        let handle = File::open(dir)?;
        lock_exclusive(&handle)?;
        Ok(IndexLock { _dir: handle })
    }
}

/// Block until this process holds `file`'s exclusive `flock` (released when it is closed).
#[cfg(unix)]
fn lock_exclusive(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: `flock` has no memory-safety preconditions; the descriptor belongs to `file`, open for the call.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Without `flock`, writers of one folder must not overlap.
#[cfg(not(unix))]
fn lock_exclusive(_file: &File) -> std::io::Result<()> {
    Ok(())
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

    fn result(run_id: &str) -> RunResult {
        let text = include_str!("../../tests/fixtures/results/fixture-mlp/fixture-mlp.b8.fp32.1x1.r1.json");
        let mut r: RunResult = serde_json::from_str(text).unwrap();
        r.run_id = run_id.to_string();
        r
    }

    #[test]
    fn writers_of_the_same_suite_at_once_keep_every_entry() {
        // Two processes (array tasks) open the folder before either wrote: each must keep the other's entry.
        let dir = tempfile::tempdir().unwrap();
        let mut a = SuiteWriter::open(dir.path().to_path_buf(), "s", "sha").unwrap();
        let mut b = SuiteWriter::open(dir.path().to_path_buf(), "s", "sha").unwrap();
        a.record(&result("s.b8.r0")).unwrap();
        b.record(&result("s.b8.r1")).unwrap();
        a.record(&result("s.b8.r2")).unwrap();
        let index: SuiteIndex =
            serde_json::from_str(&fs::read_to_string(dir.path().join(INDEX_FILE)).unwrap()).unwrap();
        let ids: Vec<&str> = index.runs.iter().map(|e| e.run_id.as_str()).collect();
        assert_eq!(ids, ["s.b8.r0", "s.b8.r1", "s.b8.r2"]);
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
