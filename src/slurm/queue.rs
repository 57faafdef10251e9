//! Asking Slurm about a submission's jobs: `squeue` for tasks still queued or running, then `sacct` (when the
//! cluster keeps accounting) or `scontrol show job` (for jobs the controller still remembers) for how finished
//! tasks ended. Each command is asked only when it is on the `PATH`; what could not be asked is returned as a
//! note, never an error. The parsers are pure functions of the commands' output.

use std::collections::BTreeMap;
use std::process::Command;

/// What Slurm says about one array task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmTask {
    /// Slurm's state (`PENDING`, `RUNNING`, `COMPLETED`, `FAILED`, `TIMEOUT`, `CANCELLED`, `OUT_OF_MEMORY`, ...).
    pub state: String,
    /// Slurm's reason (`Resources`, `Priority`, `NonZeroExitCode`, ...), `None` when it gives none.
    pub reason: Option<String>,
    /// The exit code (`1:0`), when known.
    pub exit_code: Option<String>,
}

impl SlurmTask {
    /// Still waiting or running.
    pub fn is_active(&self) -> bool {
        matches!(
            self.state.as_str(),
            "PENDING" | "RUNNING" | "CONFIGURING" | "COMPLETING" | "REQUEUED" | "RESIZING" | "SUSPENDED" | "STAGE_OUT"
        )
    }
}

/// Slurm's view of a submission's jobs: `(job, task) -> state`, and what could not be asked.
#[derive(Debug, Clone, Default)]
pub struct QueueView {
    /// Array tasks Slurm reported, by array job id and task index.
    pub tasks: BTreeMap<(u64, usize), SlurmTask>,
    /// What could not be asked (a command missing or failing), for the status output.
    pub notes: Vec<String>,
}

/// Whether `cmd` is on the `PATH`.
pub fn have(cmd: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(cmd).is_file()))
}

fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd).args(args).output().map_err(|e| format!("`{cmd}` could not be started: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        // The last line is the one that says why (`fatal: ...`); earlier ones are the steps that led there.
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("");
        Err(format!("`{cmd}` failed ({}): {last}", out.status))
    }
}

/// Ask Slurm about array jobs `jobs`.
pub fn ask(jobs: &[u64]) -> QueueView {
    let mut view = QueueView::default();
    if jobs.is_empty() {
        return view;
    }
    if have("squeue") {
        // Every job of the queue, filtered here: `-j` fails outright on a job id the controller forgot.
        match run("squeue", &["-h", "-r", "-o", "%F|%K|%T|%r"]) {
            Ok(text) => view.tasks.extend(parse_squeue(&text).into_iter().filter(|((j, _), _)| jobs.contains(j))),
            Err(e) => view.notes.push(e),
        }
    } else {
        view.notes.push(
            "`squeue` is not on the PATH: queued and running tasks cannot be told apart from missing ones".into(),
        );
    }
    let ids: Vec<String> = jobs.iter().map(u64::to_string).collect();
    let finished = if have("sacct") {
        run("sacct", &["-n", "-P", "-X", "-j", &ids.join(","), "--format=JobID,State,ExitCode,Reason"])
            .map(|t| parse_sacct(&t))
    } else {
        Err("`sacct` is not on the PATH".to_string())
    };
    let finished = match finished {
        Ok(tasks) => tasks,
        Err(sacct) if have("scontrol") => {
            let mut tasks = BTreeMap::new();
            let mut forgotten = Vec::new();
            for id in &ids {
                match run("scontrol", &["-o", "show", "job", id]) {
                    Ok(text) => tasks.extend(parse_scontrol(&text)),
                    Err(_) => forgotten.push(id.clone()),
                }
            }
            if !forgotten.is_empty() {
                view.notes.push(format!(
                    "{sacct}; `scontrol` no longer knows job(s) {}: how their tasks ended is read from the results and logs",
                    forgotten.join(", ")
                ));
            }
            tasks
        }
        Err(sacct) => {
            view.notes
                .push(format!("{sacct}; no `scontrol` either: how tasks ended is read from the results and logs"));
            BTreeMap::new()
        }
    };
    for (key, task) in finished {
        // The queue's view of a task still there is the newer one.
        view.tasks.entry(key).or_insert(task);
    }
    view
}

fn reason(r: &str) -> Option<String> {
    let r = r.trim();
    (!r.is_empty() && r != "None" && r != "(null)").then(|| r.to_string())
}

/// `squeue -h -r -o '%F|%K|%T|%r'` lines: array job id, task index, state, reason.
pub fn parse_squeue(text: &str) -> BTreeMap<(u64, usize), SlurmTask> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.trim().split('|');
            let job = f.next()?.trim().parse().ok()?;
            let task = f.next()?.trim().parse().ok()?;
            let state = f.next()?.trim().to_string();
            Some(((job, task), SlurmTask { state, reason: reason(f.next().unwrap_or("")), exit_code: None }))
        })
        .collect()
}

/// `sacct -n -P -X --format=JobID,State,ExitCode,Reason` lines; array tasks' ids read `<job>_<task>` (a pending
/// remainder `<job>_[1-3]` is left out: `squeue` reports those).
pub fn parse_sacct(text: &str) -> BTreeMap<(u64, usize), SlurmTask> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.trim().split('|');
            let (job, task) = f.next()?.split_once('_')?;
            let key = (job.parse().ok()?, task.parse().ok()?);
            // `CANCELLED by 0` -> `CANCELLED`.
            let state = f.next()?.split_whitespace().next()?.to_string();
            let exit_code = f.next().map(|e| e.trim().to_string()).filter(|e| !e.is_empty());
            Some((key, SlurmTask { state, reason: reason(f.next().unwrap_or("")), exit_code }))
        })
        .collect()
}

/// `scontrol -o show job <id>` lines (one per array task, `Key=Value` fields).
pub fn parse_scontrol(text: &str) -> BTreeMap<(u64, usize), SlurmTask> {
    text.lines()
        .filter_map(|line| {
            let fields: BTreeMap<&str, &str> = line.split_whitespace().filter_map(|kv| kv.split_once('=')).collect();
            let job = fields.get("ArrayJobId")?.parse().ok()?;
            let task = fields.get("ArrayTaskId")?.parse().ok()?;
            let state = fields.get("JobState")?.to_string();
            let exit_code = fields.get("ExitCode").map(|s| s.to_string());
            Some(((job, task), SlurmTask { state, reason: fields.get("Reason").and_then(|r| reason(r)), exit_code }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_lines_give_each_array_task() {
        let t = parse_squeue("4|2|PENDING|Resources\n4|0|RUNNING|None\n9|N/A|PENDING|Priority\ngarbage\n");
        assert_eq!(t.len(), 2);
        assert_eq!(
            t[&(4, 2)],
            SlurmTask { state: "PENDING".into(), reason: Some("Resources".into()), exit_code: None }
        );
        assert!(t[&(4, 0)].is_active() && t[&(4, 0)].reason.is_none());
    }

    #[test]
    fn sacct_lines_give_states_exit_codes_and_reasons() {
        let t = parse_sacct(
            "12_0|COMPLETED|0:0|None\n12_1|FAILED|1:0|NonZeroExitCode\n12_[2-3]|PENDING|0:0|Priority\n12_4|CANCELLED by 0|0:15|\n",
        );
        assert_eq!(t.len(), 3);
        assert_eq!(t[&(12, 1)].reason.as_deref(), Some("NonZeroExitCode"));
        assert_eq!(t[&(12, 1)].exit_code.as_deref(), Some("1:0"));
        assert_eq!(t[&(12, 4)].state, "CANCELLED");
        assert!(!t[&(12, 0)].is_active());
    }

    #[test]
    fn scontrol_lines_give_states() {
        let line = "JobId=7 ArrayJobId=5 ArrayTaskId=3 JobName=trainbench JobState=FAILED Reason=NonZeroExitCode \
                    Dependency=(null) ExitCode=1:0\nJobId=8 ArrayJobId=5 ArrayTaskId=4 JobState=RUNNING Reason=None";
        let t = parse_scontrol(line);
        assert_eq!(t[&(5, 3)].state, "FAILED");
        assert_eq!(t[&(5, 3)].exit_code.as_deref(), Some("1:0"));
        assert_eq!(t[&(5, 4)].reason, None);
    }
}
