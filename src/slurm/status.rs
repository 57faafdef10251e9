//! Where each task of a submission stands: read from its results (a result file is the last word on a run that
//! wrote one), its jobs record and logs, and Slurm's queue and accounting when they can be asked; and which tasks
//! `--resume` submits again (failed or missing ones, never one queued, running or done).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::plan_file::PlanFile;
use super::queue::{self, QueueView};
use super::submit::{Submission, Submissions, submit};
use super::{PLAN_FILE, SlurmError, log_path, submission_dir};
use crate::result::{RunOutcome, RunResult};

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Waiting in Slurm's queue.
    Pending,
    /// Running.
    Running,
    /// Its result is written: completed, or a final outcome of the run itself (out of memory, skipped).
    Done,
    /// It ended without a usable result: the run failed or was interrupted, or the task ended before writing.
    Failed,
    /// Never submitted, or submitted but unknown to Slurm and without a log or result.
    Missing,
}

impl TaskState {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            TaskState::Pending => "pending",
            TaskState::Running => "running",
            TaskState::Done => "done",
            TaskState::Failed => "failed",
            TaskState::Missing => "missing",
        }
    }

    /// Whether `--resume` submits the task again.
    pub fn resubmitted(self) -> bool {
        matches!(self, TaskState::Failed | TaskState::Missing)
    }
}

/// One task's state and the evidence for it.
#[derive(Debug, Clone, Serialize)]
pub struct TaskStatus {
    /// The plan file's task number (the array index).
    pub task: usize,
    /// The run.
    pub run_id: String,
    /// Where it stands.
    pub state: TaskState,
    /// The outcome its result records, when it wrote one (`completed`, `failed`, ...).
    pub outcome: Option<String>,
    /// The latest job that ran it.
    pub job: Option<u64>,
    /// Slurm's state of that job's task, when Slurm could say.
    pub slurm_state: Option<String>,
    /// Why, in one line: Slurm's reason, the run's failure message, what is missing.
    pub detail: String,
    /// The task's log, when it exists.
    pub log: Option<PathBuf>,
}

/// A submission's status.
#[derive(Debug, Clone, Serialize)]
pub struct StatusReport {
    /// The results folder.
    pub out: PathBuf,
    /// Every task, in plan order.
    pub tasks: Vec<TaskStatus>,
    /// What could not be asked of Slurm.
    pub notes: Vec<String>,
}

impl StatusReport {
    /// How many tasks are in each state.
    pub fn counts(&self) -> BTreeMap<TaskState, usize> {
        let mut c = BTreeMap::new();
        for t in &self.tasks {
            *c.entry(t.state).or_insert(0) += 1;
        }
        c
    }

    /// Whether some task is still queued or running.
    pub fn active(&self) -> bool {
        self.tasks.iter().any(|t| matches!(t.state, TaskState::Pending | TaskState::Running))
    }
}

/// Read the plan file of the submission in results folder `out`.
pub fn read_plan(out: &Path) -> Result<PlanFile, SlurmError> {
    let path = submission_dir(out).join(PLAN_FILE);
    if !path.is_file() {
        return Err(SlurmError::Invalid(format!(
            "{} holds no Slurm submission ({} is missing): submit specs with `trainbench run SPEC --on slurm --out {}`",
            out.display(),
            path.display(),
            out.display()
        )));
    }
    PlanFile::read(&path)
}

/// The status of every task of the submission in `out`.
pub fn status(out: &Path) -> Result<(PlanFile, StatusReport), SlurmError> {
    let plan = read_plan(out)?;
    let jobs = Submissions::read(out)?;
    let ids: Vec<u64> = jobs.jobs.iter().map(|s| s.job).collect();
    let view = queue::ask(&ids);
    let tasks = (0..plan.tasks.len()).map(|n| task_status(&plan, &jobs, &view, out, n)).collect();
    Ok((plan, StatusReport { out: out.to_path_buf(), tasks, notes: view.notes }))
}

/// A run's result that ended it for good: completed, or an outcome of the run itself that a second attempt
/// would repeat (out of memory, skipped after a smaller batch ran out of memory).
pub fn is_final(outcome: &RunOutcome) -> bool {
    matches!(outcome, RunOutcome::Completed | RunOutcome::OutOfMemory { .. } | RunOutcome::Skipped { .. })
}

fn first_line(s: &str) -> String {
    let line = s.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let cut: String = line.chars().take(200).collect();
    if cut.len() < line.len() { format!("{cut} [...]") } else { cut }
}

fn task_status(plan: &PlanFile, jobs: &Submissions, view: &QueueView, out: &Path, n: usize) -> TaskStatus {
    let task = &plan.tasks[n];
    let latest: Option<&Submission> = jobs.latest_for(n);
    let job = latest.map(|s| s.job);
    let slurm = job.and_then(|j| view.tasks.get(&(j, n)));
    let log = job.map(|j| log_path(out, j, n)).filter(|p| p.is_file());
    let mut status = TaskStatus {
        task: n,
        run_id: task.plan.id.clone(),
        state: TaskState::Missing,
        outcome: None,
        job,
        slurm_state: slurm.map(|s| s.state.clone()),
        detail: String::new(),
        log,
    };
    let slurm_says = |s: &queue::SlurmTask| {
        let mut d = format!("Slurm: {}", s.state);
        if let Some(r) = &s.reason {
            d.push_str(&format!(" ({r})"));
        }
        if let Some(e) = s.exit_code.as_deref().filter(|e| *e != "0:0") {
            d.push_str(&format!(", exit code {e}"));
        }
        d
    };
    if let Some(s) = slurm.filter(|s| s.is_active()) {
        status.state = if s.state == "RUNNING" { TaskState::Running } else { TaskState::Pending };
        status.detail = slurm_says(s);
        return status;
    }
    let spec = plan.suites.get(task.suite).map_or("", |x| x.spec_name.as_str());
    let path = crate::runner::output::result_path(out, spec, &task.plan.id);
    if path.is_file() {
        match std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<RunResult>(&t).map_err(|e| e.to_string()))
        {
            Ok(r) => {
                status.outcome = Some(r.outcome.status().to_string());
                if is_final(&r.outcome) {
                    status.state = TaskState::Done;
                    status.detail = path.display().to_string();
                } else {
                    status.state = TaskState::Failed;
                    status.detail = match &r.outcome {
                        RunOutcome::Failed { message } => first_line(message),
                        RunOutcome::Interrupted { reason } => first_line(reason),
                        _ => String::new(),
                    };
                }
            }
            Err(e) => {
                status.state = TaskState::Failed;
                status.detail = format!("its result file {} cannot be read: {e}", path.display());
            }
        }
        return status;
    }
    status.detail = match (latest, slurm, &status.log) {
        (None, _, _) => "never submitted".to_string(),
        (Some(_), Some(s), _) => {
            status.state = TaskState::Failed;
            format!("{}; it wrote no result", slurm_says(s))
        }
        (Some(_), None, Some(_)) => {
            status.state = TaskState::Failed;
            "the task ended without writing a result".to_string()
        }
        (Some(s), None, None) => format!("job {} is unknown to Slurm, and the task left no log or result", s.job),
    };
    status
}

/// The last `n` non-empty lines of a log.
pub fn log_tail(path: &Path, n: usize) -> Vec<String> {
    let text = std::fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let lines: Vec<String> = text.lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}

/// Submit again every failed or missing task of `report`, one job array per batch script; returns the new
/// submissions (none when nothing is left to do).
pub fn resume(plan: &PlanFile, report: &StatusReport) -> Result<Vec<Submission>, SlurmError> {
    let mut by_script: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for t in report.tasks.iter().filter(|t| t.state.resubmitted()) {
        let script = plan.tasks.get(t.task).map_or("", |x| x.script.as_str());
        by_script.entry(script).or_default().push(t.task);
    }
    let mut out = Vec::new();
    for (script, tasks) in by_script {
        if script.is_empty() || !submission_dir(&report.out).join(script).is_file() {
            return Err(SlurmError::Invalid(format!(
                "task {} has no batch script in {} (the submission folder was changed by hand?); submit the specs again",
                tasks[0],
                submission_dir(&report.out).display()
            )));
        }
        out.push(submit(&report.out, script, &tasks)?);
    }
    Ok(out)
}

/// The status as text: a table of the tasks, then each failed task's log tail, what Slurm could not be asked,
/// and the counts.
pub fn render_text(report: &StatusReport) -> String {
    use std::fmt::Write as _;
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    t.set_header(["task", "run", "state", "job", "detail"]);
    for s in &report.tasks {
        let outcome = s.outcome.as_deref().filter(|o| *o != "completed").map(|o| format!(" ({o})")).unwrap_or_default();
        let job = s.job.map(|j| format!("{j}_{}", s.task)).unwrap_or_else(|| "-".into());
        t.add_row([
            s.task.to_string(),
            s.run_id.clone(),
            format!("{}{outcome}", s.state.name()),
            job,
            s.detail.clone(),
        ]);
    }
    let mut out = format!("{t}\n");
    for s in report.tasks.iter().filter(|s| s.state == TaskState::Failed) {
        let _ = writeln!(out, "task {} ({}) failed: {}", s.task, s.run_id, s.detail);
        match &s.log {
            Some(log) => {
                let _ = writeln!(out, "  log: {}", log.display());
                for line in log_tail(log, 8) {
                    let _ = writeln!(out, "    | {line}");
                }
            }
            None => {
                let _ = writeln!(out, "  no log");
            }
        }
    }
    for note in &report.notes {
        let _ = writeln!(out, "note: {note}");
    }
    let counts = report.counts();
    let all = [TaskState::Done, TaskState::Failed, TaskState::Running, TaskState::Pending, TaskState::Missing];
    let parts: Vec<String> =
        all.iter().map(|s| format!("{} {}", counts.get(s).copied().unwrap_or(0), s.name())).collect();
    let _ = writeln!(out, "{} tasks: {}", report.tasks.len(), parts.join(", "));
    out
}

/// Ask again every `interval` until no task of the submission in `out` is queued or running; the last status.
pub fn wait(out: &Path, interval: std::time::Duration) -> Result<(PlanFile, StatusReport), SlurmError> {
    if !queue::have("squeue") {
        return Err(SlurmError::Slurm(
            "waiting needs `squeue` on the PATH (run it on the cluster's login node); `trainbench status` without \
             `--wait` reads the results folder alone"
                .into(),
        ));
    }
    loop {
        let (plan, report) = status(out)?;
        if !report.active() || crate::runner::probe::interrupted() {
            return Ok((plan, report));
        }
        std::thread::sleep(interval);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use trainbench_contract::{BackendKind, RunPlan};

    use super::*;
    use crate::slurm::plan_file::{PlanSuite, PlanTask, Resources};
    use crate::slurm::queue::SlurmTask;

    fn plan(out: &Path, n: usize) -> PlanFile {
        let task = |i: usize| {
            let p = RunPlan::for_tests(&format!("s.b{i}.fp32.1x1.r0"), 5);
            let resources = Resources::of(&p, BackendKind::Mock);
            PlanTask { suite: 0, plan: p, resources, script: "array-0.sbatch".into() }
        };
        PlanFile {
            format_version: crate::slurm::plan_file::PLAN_FORMAT_VERSION,
            out: out.to_path_buf(),
            exe: PathBuf::from("/bin/true"),
            suites: vec![PlanSuite {
                source: "s.toml".into(),
                spec_name: "s".into(),
                spec_canonical: String::new(),
                backend: BackendKind::Mock,
                data: None,
            }],
            tasks: (0..n).map(task).collect(),
            no_collectors: false,
            mock: Default::default(),
        }
    }

    fn write_result(out: &Path, run_id: &str, outcome: RunOutcome) {
        let text = include_str!("../../tests/fixtures/results/fixture-mlp/fixture-mlp.b8.fp32.1x1.r1.json");
        let mut r: RunResult = serde_json::from_str(text).unwrap();
        r.run_id = run_id.to_string();
        r.outcome = outcome;
        std::fs::create_dir_all(out.join("s")).unwrap();
        std::fs::write(out.join(format!("s/{run_id}.json")), serde_json::to_string(&r).unwrap()).unwrap();
    }

    fn slurm(state: &str, reason: Option<&str>) -> SlurmTask {
        SlurmTask { state: state.into(), reason: reason.map(String::from), exit_code: Some("1:0".into()) }
    }

    #[test]
    fn each_task_is_classified_from_results_jobs_logs_and_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let plan = plan(out, 8);
        // Job 7 ran tasks 0-6; task 7 was never submitted.
        let jobs = Submissions {
            jobs: vec![Submission {
                job: 7,
                script: "array-0.sbatch".into(),
                tasks: (0..7).collect(),
                submitted_at: String::new(),
            }],
        };
        let mut view = QueueView::default();
        view.tasks.insert((7, 0), slurm("PENDING", Some("Resources")));
        view.tasks.insert((7, 1), slurm("RUNNING", None));
        write_result(out, "s.b2.fp32.1x1.r0", RunOutcome::Completed);
        write_result(out, "s.b3.fp32.1x1.r0", RunOutcome::Failed { message: "\nboom\nframe #0".into() });
        view.tasks.insert((7, 4), slurm("TIMEOUT", None));
        std::fs::create_dir_all(crate::slurm::logs_dir(out)).unwrap();
        std::fs::write(log_path(out, 7, 5), "line 1\n\nerror: it broke\n").unwrap();
        // Task 6: submitted, unknown to Slurm, no log, no result.
        let states: Vec<(TaskState, String)> = (0..8)
            .map(|n| {
                let s = task_status(&plan, &jobs, &view, out, n);
                (s.state, s.detail)
            })
            .collect();
        assert_eq!(states[0], (TaskState::Pending, "Slurm: PENDING (Resources), exit code 1:0".into()));
        assert_eq!(states[1].0, TaskState::Running);
        assert_eq!(states[2].0, TaskState::Done);
        assert_eq!(states[3], (TaskState::Failed, "boom".into()));
        assert_eq!(states[4], (TaskState::Failed, "Slurm: TIMEOUT, exit code 1:0; it wrote no result".into()));
        assert_eq!(states[5], (TaskState::Failed, "the task ended without writing a result".into()));
        assert_eq!(
            states[6],
            (TaskState::Missing, "job 7 is unknown to Slurm, and the task left no log or result".into())
        );
        assert_eq!(states[7], (TaskState::Missing, "never submitted".into()));
        assert_eq!(log_tail(&log_path(out, 7, 5), 1), vec!["error: it broke".to_string()]);
        let resubmitted: Vec<usize> =
            (0..8).filter(|&n| task_status(&plan, &jobs, &view, out, n).state.resubmitted()).collect();
        assert_eq!(resubmitted, [3, 4, 5, 6, 7]);
    }

    #[test]
    fn a_failed_or_interrupted_result_is_not_final_an_out_of_memory_one_is() {
        assert!(is_final(&RunOutcome::Completed));
        assert!(is_final(&RunOutcome::OutOfMemory { batch_size: 8, message: String::new() }));
        assert!(!is_final(&RunOutcome::Failed { message: String::new() }));
        assert!(!is_final(&RunOutcome::Interrupted { reason: String::new() }));
    }
}
