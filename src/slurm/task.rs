//! One array task (`trainbench slurm-task --plan-file F --task N`, started by a submission's batch script): runs
//! task `N` of the plan file through the normal runner, so isolation, timeouts, atomic result writing and the
//! suite index work as in a local run. A run whose result is already final is not run again; a failed or
//! interrupted earlier result is moved to `_slurm/attempts/` before the run replaces it, so nothing written is
//! lost. Started as several ranks by `srun` (a data-parallel run), every rank runs the task and rank 0 writes.

use std::path::{Path, PathBuf};

use trainbench_contract::RunPlan;

use super::plan_file::PlanFile;
use super::status::is_final;
use super::{SlurmError, submission_dir};
use crate::digest::sha256_hex;
use crate::result::{RunOutcome, RunResult};
use crate::runner::{self, RunnerOptions, Suite, probe};

/// How a task ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskOutcome {
    /// The run ran; its result was written here, with this outcome (`None` on ranks other than 0).
    Ran(Option<(PathBuf, RunOutcome)>),
    /// A final result was already there: nothing ran.
    AlreadyDone(PathBuf),
}

/// Run task `n` of the plan file at `plan_path`.
pub fn run_task(plan_path: &Path, n: usize) -> Result<TaskOutcome, SlurmError> {
    let plan = PlanFile::read(plan_path)?;
    let (task, spec) = plan.task(n)?;
    let rank0 = !runner::dist::LauncherEnv::get().is_secondary_rank();
    let path = plan.result_path(task);
    if rank0 {
        eprintln!("trainbench: Slurm task {n}: run `{}` of `{}` -> {}", task.plan.id, spec.spec_name, path.display());
    }
    // Every rank reads the shared folder, so all of them skip a run that is done (none waits for the others).
    if let Some(earlier) = read_result(&path) {
        if is_final(&earlier.outcome) {
            if rank0 {
                eprintln!("trainbench: its result is already there ({}): not run again", earlier.outcome.status());
            }
            return Ok(TaskOutcome::AlreadyDone(path));
        }
        if rank0 {
            let kept = keep_attempt(&plan, &task.plan, &path)?;
            eprintln!("trainbench: the earlier {} result was moved to {}", earlier.outcome.status(), kept.display());
        }
    }
    let mut suite =
        Suite::from_spec_text(&spec.source, &spec.spec_canonical).map_err(|e| SlurmError::Invalid(e.to_string()))?;
    if sha256_hex(&suite.spec_canonical) != sha256_hex(&spec.spec_canonical) {
        return Err(SlurmError::Invalid(format!(
            "the spec of task {n} does not read back to the same canonical form with this trainbench ({}); submit \
             the specs again with it",
            crate::manifest::VERSION
        )));
    }
    suite.plans = vec![task.plan.clone()];
    suite.backend = spec.backend;
    suite.data = spec.data.clone();
    probe::install_interrupt_handler();
    let opts = RunnerOptions {
        out_dir: plan.out.clone(),
        progress: true,
        progress_interval: probe::progress_interval_from_env().map_err(|e| SlurmError::Invalid(e.to_string()))?,
        no_collectors: plan.no_collectors,
        mock: plan.mock.clone(),
        worker_exe: std::env::current_exe().ok(),
        ..RunnerOptions::default()
    };
    let mut written: Option<(PathBuf, RunOutcome)> = None;
    runner::run_suite(&suite, &opts, &mut |r: &RunResult, p: &Path| {
        written = Some((p.to_path_buf(), r.outcome.clone()));
    })
    .map_err(|e| SlurmError::Run(e.to_string()))?;
    if let Some((p, outcome)) = &written {
        eprintln!("trainbench: {} {} -> {}", outcome.status(), task.plan.id, p.display());
    }
    Ok(TaskOutcome::Ran(written))
}

fn read_result(path: &Path) -> Option<RunResult> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

/// Move an earlier result of `plan` aside into `_slurm/attempts/<run id>.<n>.json` (the first free `n`).
fn keep_attempt(file: &PlanFile, plan: &RunPlan, path: &Path) -> Result<PathBuf, SlurmError> {
    let dir = submission_dir(&file.out).join("attempts");
    std::fs::create_dir_all(&dir).map_err(|e| SlurmError::io(&dir, e))?;
    let mut k = 1;
    let target = loop {
        let candidate = dir.join(format!("{}.{k}.json", plan.id));
        if !candidate.exists() {
            break candidate;
        }
        k += 1;
    };
    std::fs::rename(path, &target).map_err(|e| SlurmError::io(path, e))?;
    Ok(target)
}
