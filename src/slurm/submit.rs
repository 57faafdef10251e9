//! Submitting: writing a submission's folder (plan file, batch scripts, logs folder) and handing batch scripts
//! to `sbatch`, recording each job in `jobs.json` so `status` knows which job ran which task and where its log is.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::plan_file::PlanFile;
use super::queue::have;
use super::script::{BatchScript, SlurmOptions, array_list, batch_scripts};
use super::{JOBS_FILE, PLAN_FILE, SlurmError, logs_dir, submission_dir};
use crate::runner::output::{write_atomic, write_json};

/// One `sbatch` of a batch script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submission {
    /// Slurm's array job id.
    pub job: u64,
    /// The batch script's file name in the submission folder.
    pub script: String,
    /// The plan file's tasks submitted (the array indices).
    pub tasks: Vec<usize>,
    /// When, RFC 3339 UTC.
    pub submitted_at: String,
}

/// Every `sbatch` of a submission, oldest first (`jobs.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submissions {
    /// The jobs.
    pub jobs: Vec<Submission>,
}

impl Submissions {
    /// Read `jobs.json` of the submission folder of `out` (none yet: empty).
    pub fn read(out: &Path) -> Result<Self, SlurmError> {
        let path = submission_dir(out).join(JOBS_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| SlurmError::Invalid(format!("{}: not a trainbench jobs record: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Submissions::default()),
            Err(e) => Err(SlurmError::io(&path, e)),
        }
    }

    fn write(&self, out: &Path) -> Result<(), SlurmError> {
        let path = submission_dir(out).join(JOBS_FILE);
        write_json(&path, self).map_err(|source| SlurmError::io(&path, source))
    }

    /// The latest job that ran (or runs) `task`.
    pub fn latest_for(&self, task: usize) -> Option<&Submission> {
        self.jobs.iter().rev().find(|s| s.tasks.contains(&task))
    }
}

/// Write the submission folder of `plan` (`<out>/_slurm/`: the plan file, one batch script per resource shape,
/// the logs folder), each task naming its script; returns the scripts as written.
pub fn write_submission(plan: &mut PlanFile, opts: &SlurmOptions) -> Result<Vec<BatchScript>, SlurmError> {
    let dir = submission_dir(&plan.out);
    let logs = logs_dir(&plan.out);
    std::fs::create_dir_all(&logs).map_err(|e| SlurmError::io(&logs, e))?;
    let plan_path = dir.join(PLAN_FILE);
    let scripts = batch_scripts(plan, &plan_path, &logs, opts);
    for s in &scripts {
        for &n in &s.tasks {
            if let Some(t) = plan.tasks.get_mut(n) {
                t.script = s.name.clone();
            }
        }
    }
    plan.write(&plan_path)?;
    for s in &scripts {
        let path = dir.join(&s.name);
        write_atomic(&path, s.text.as_bytes()).map_err(|e| SlurmError::io(&path, e))?;
    }
    Ok(scripts)
}

/// Submit `tasks` of batch script `script` (in the submission folder of `out`) as one job array, and record it.
pub fn submit(out: &Path, script: &str, tasks: &[usize]) -> Result<Submission, SlurmError> {
    if !have("sbatch") {
        return Err(SlurmError::Slurm(
            "`sbatch` is not on the PATH: run this on a Slurm login node (or start a local Slurm with \
             scripts/slurm-local.sh start); the batch scripts are written, see `--dry-run`"
                .into(),
        ));
    }
    let path: PathBuf = submission_dir(out).join(script);
    let array = format!("--array={}", array_list(tasks));
    let output = std::process::Command::new("sbatch")
        .arg("--parsable")
        .arg(&array)
        .arg(&path)
        .output()
        .map_err(|e| SlurmError::Slurm(format!("`sbatch` could not be started: {e}")))?;
    if !output.status.success() {
        // Array indices are task numbers; Slurm caps them below MaxArraySize (1001 unless the cluster raises it).
        let hint = if tasks.iter().any(|&t| t >= 1000) {
            "; array indices are the plan's task numbers, which Slurm keeps below its MaxArraySize (1001 by \
             default, see `scontrol show config`): submit the sweep in parts, into separate `--out` folders"
        } else {
            ""
        };
        return Err(SlurmError::Slurm(format!(
            "`sbatch {array} {}` failed ({}): {}{hint}",
            path.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let job = parse_job_id(&text)
        .ok_or_else(|| SlurmError::Slurm(format!("`sbatch --parsable` printed `{}`, not a job id", text.trim())))?;
    let submission = Submission {
        job,
        script: script.to_string(),
        tasks: tasks.to_vec(),
        submitted_at: crate::manifest::rfc3339(std::time::SystemTime::now()),
    };
    let mut all = Submissions::read(out)?;
    all.jobs.push(submission.clone());
    all.write(out)?;
    Ok(submission)
}

/// The job id `sbatch --parsable` prints: `123` or `123;cluster`.
pub fn parse_job_id(text: &str) -> Option<u64> {
    text.lines().rev().find(|l| !l.trim().is_empty())?.split(';').next()?.trim().parse().ok()
}

/// Make room for a new submission into `out`: an earlier one that was submitted is refused unless `overwrite`,
/// which keeps it as `_slurm-<unix seconds>` (never-submitted dry runs are simply replaced); with `overwrite`,
/// existing results of the runs about to be submitted are moved to the new submission's `attempts/` (a task
/// never runs again a run whose final result is there). Returns the results moved.
pub fn prepare(out: &Path, overwrite: bool, results: &[PathBuf]) -> Result<Vec<PathBuf>, SlurmError> {
    let dir = submission_dir(out);
    if dir.exists() {
        let submitted = !Submissions::read(out).map(|s| s.jobs.is_empty()).unwrap_or(false);
        if submitted && !overwrite {
            return Err(SlurmError::Invalid(format!(
                "{} already holds a Slurm submission: see it with `trainbench status {}` (`--resume` submits its \
                 failed or missing runs again), pass `--overwrite` to start a new one (the earlier one is kept \
                 beside it), or choose another `--out`",
                out.display(),
                out.display()
            )));
        }
        if submitted {
            let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            let kept = out.join(format!("{}-{secs}", super::SLURM_DIR));
            std::fs::rename(&dir, &kept).map_err(|e| SlurmError::io(&dir, e))?;
        } else {
            for f in [PLAN_FILE, JOBS_FILE] {
                let _ = std::fs::remove_file(dir.join(f));
            }
        }
    }
    let mut moved = Vec::new();
    if overwrite {
        let attempts = dir.join("attempts");
        for path in results.iter().filter(|p| p.is_file()) {
            std::fs::create_dir_all(&attempts).map_err(|e| SlurmError::io(&attempts, e))?;
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let target = attempts.join(name);
            std::fs::rename(path, &target).map_err(|e| SlurmError::io(path, e))?;
            moved.push(target);
        }
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_with_and_without_a_cluster() {
        assert_eq!(parse_job_id("123\n"), Some(123));
        assert_eq!(parse_job_id("45;big\n"), Some(45));
        assert_eq!(parse_job_id("sbatch: warning: x\n46\n"), Some(46));
        assert_eq!(parse_job_id("nope"), None);
    }
}
