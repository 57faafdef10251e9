//! The batch scripts of a submission: one Slurm job array per distinct [`Resources`] shape (a job array's
//! tasks share their resources), whose array indices are the plan file's task numbers, so array task `N` runs
//! task `N`. The scripts are plain `sbatch` files, written next to the results for users to read and edit;
//! `trainbench status --resume` submits them again with `--array` set to the tasks left to do.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use super::plan_file::{PlanFile, Resources};

/// What the command line asks of Slurm beyond the spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlurmOptions {
    /// `--partition`.
    pub partition: Option<String>,
    /// `--account`.
    pub account: Option<String>,
    /// `--time`, verbatim (Slurm's formats: `MM`, `HH:MM:SS`, `D-HH`); replaces the limit derived from
    /// `run.timeout_s`.
    pub time: Option<String>,
    /// Further `sbatch` options, one `#SBATCH` line each (`--qos=high`, `--constraint=a100`, `--overcommit`).
    pub extra: Vec<String>,
}

/// A Slurm option that would not stay one `#SBATCH` option (values shown escaped).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlurmOptionError {
    /// `--partition` or `--account` is not one word.
    #[error("{flag} `{value}` must be one word (Slurm's name for it), without spaces or line breaks")]
    NotOneWord {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: String,
    },
    /// `--time` is not a Slurm time limit.
    #[error("--time `{0}` is not a Slurm time limit: write minutes (`30`), `H:MM:SS` or `D-HH:MM`")]
    BadTime(String),
    /// A `--slurm-arg` is not one sbatch option on one line.
    #[error("--slurm-arg `{0}` must be one sbatch option on one line, such as `--slurm-arg=--qos=high`")]
    BadExtra(String),
}

impl SlurmOptions {
    /// Refuse values that would not stay one `#SBATCH` option each (a line break, a partition with spaces, a
    /// `--slurm-arg` that is not an option), naming the flag and the value.
    pub fn check(&self) -> Result<(), SlurmOptionError> {
        let word = |flag: &'static str, v: &str| {
            if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
                Err(SlurmOptionError::NotOneWord { flag, value: v.escape_debug().to_string() })
            } else {
                Ok(())
            }
        };
        if let Some(p) = &self.partition {
            word("--partition", p)?;
        }
        if let Some(a) = &self.account {
            word("--account", a)?;
        }
        if let Some(t) = &self.time {
            if t.is_empty() || !t.chars().all(|c| c.is_ascii_digit() || c == ':' || c == '-') {
                return Err(SlurmOptionError::BadTime(t.escape_debug().to_string()));
            }
        }
        for a in &self.extra {
            if !a.starts_with('-') || a.chars().any(char::is_control) {
                return Err(SlurmOptionError::BadExtra(a.escape_debug().to_string()));
            }
        }
        Ok(())
    }
}

/// One batch script: a job array over the tasks sharing one resource shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchScript {
    /// File name in the submission folder (`array-0.sbatch`).
    pub name: String,
    /// The plan file's tasks it runs, ascending.
    pub tasks: Vec<usize>,
    /// The script's text.
    pub text: String,
}

/// File name of the `k`th batch script.
pub fn script_name(k: usize) -> String {
    format!("array-{k}.sbatch")
}

/// The batch scripts of `plan`, whose plan file is `plan_path` and whose logs go to `logs` (absolute paths).
pub fn batch_scripts(plan: &PlanFile, plan_path: &Path, logs: &Path, opts: &SlurmOptions) -> Vec<BatchScript> {
    let mut groups: BTreeMap<&Resources, Vec<usize>> = BTreeMap::new();
    for (n, task) in plan.tasks.iter().enumerate() {
        groups.entry(&task.resources).or_default().push(n);
    }
    // In the order of each group's first task, so array-0 holds task 0.
    let mut groups: Vec<(&Resources, Vec<usize>)> = groups.into_iter().collect();
    groups.sort_by_key(|(_, tasks)| tasks.first().copied());
    groups
        .into_iter()
        .enumerate()
        .map(|(k, (resources, tasks))| {
            let text = render(plan, plan_path, logs, opts, resources, &tasks);
            BatchScript { name: script_name(k), tasks, text }
        })
        .collect()
}

/// Slurm's array-index list of `tasks` (ascending): `0-3,7,9-10`.
pub fn array_list(tasks: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < tasks.len() {
        let start = tasks[i];
        let mut end = start;
        while i + 1 < tasks.len() && tasks[i + 1] == end + 1 {
            i += 1;
            end = tasks[i];
        }
        parts.push(if end == start { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    parts.join(",")
}

/// Quote `s` for a POSIX shell when it needs it.
fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

fn render(
    plan: &PlanFile,
    plan_path: &Path,
    logs: &Path,
    opts: &SlurmOptions,
    r: &Resources,
    tasks: &[usize],
) -> String {
    let runs = |n: usize| if n == 1 { "run" } else { "runs" };
    let mut s = String::new();
    let _ = writeln!(s, "#!/bin/bash");
    let _ = writeln!(
        s,
        "# Written by `trainbench run --on slurm`: {} {} of {}, one array task each; array task N runs task N of the plan \
         file.",
        tasks.len(),
        runs(tasks.len()),
        plan.suites.iter().map(|x| x.spec_name.as_str()).collect::<Vec<_>>().join(", ")
    );
    let _ = writeln!(s, "# Each task writes its result to {} as a local run would.", plan.out.display());
    let _ = writeln!(
        s,
        "# Edit freely: `trainbench status {} --resume` submits this file again for the failed or missing tasks.",
        plan.out.display()
    );
    let _ = writeln!(s, "#SBATCH --job-name=trainbench");
    let _ = writeln!(s, "#SBATCH --array={}", array_list(tasks));
    let _ = writeln!(s, "#SBATCH --output={}", logs.join("%A_%a.out").display());
    let _ = writeln!(s, "#SBATCH --ntasks={}", r.ntasks);
    let _ = writeln!(s, "#SBATCH --nodes={}", r.nodes);
    if r.ntasks > 1 {
        let _ = writeln!(s, "#SBATCH --ntasks-per-node={}", r.ntasks.div_ceil(r.nodes));
    }
    if r.gpus_per_node > 0 {
        let _ = writeln!(s, "#SBATCH --gpus-per-node={}", r.gpus_per_node);
    }
    if let Some(c) = r.cpus_per_task {
        let _ = writeln!(s, "#SBATCH --cpus-per-task={c}");
    }
    match (&opts.time, r.minutes) {
        (Some(t), _) => {
            let _ = writeln!(s, "#SBATCH --time={t}");
        }
        (None, Some(m)) => {
            let _ = writeln!(
                s,
                "# --time: run.timeout_s plus {} s to start and to write the result",
                super::plan_file::TIME_MARGIN_S
            );
            let _ = writeln!(s, "#SBATCH --time={m}");
        }
        (None, None) => {
            let _ = writeln!(s, "# no --time: the spec sets no run.timeout_s (the partition's default limit applies)");
        }
    }
    if r.ntasks == 1 && (opts.time.is_some() || r.minutes.is_some()) {
        // The script execs trainbench, so the batch shell is trainbench: SIGINT stops the run as Ctrl-C does,
        // recorded `interrupted` with what it measured, before Slurm's time limit kills it without a result.
        let _ = writeln!(
            s,
            "# SIGINT 60 s before the time limit: the run stops as `interrupted` and its result is written"
        );
        let _ = writeln!(s, "#SBATCH --signal=B:INT@60");
    }
    if let Some(p) = &opts.partition {
        let _ = writeln!(s, "#SBATCH --partition={p}");
    }
    if let Some(a) = &opts.account {
        let _ = writeln!(s, "#SBATCH --account={a}");
    }
    for extra in &opts.extra {
        let _ = writeln!(s, "#SBATCH {extra}");
    }
    let _ = writeln!(s, "set -euo pipefail");
    let _ = writeln!(s, "TRAINBENCH=\"${{TRAINBENCH:-{}}}\"", plan.exe.display());
    let plan_arg = shell_quote(&plan_path.display().to_string());
    if r.ntasks > 1 {
        // Every rank runs the task; the ranks find their rank and world size in srun's variables, rank 0 writes.
        let _ = writeln!(
            s,
            "# As trainbench's own mpirun launch: cross-memory attach between local ranks where this node allows it."
        );
        let _ = writeln!(
            s,
            "export OMPI_MCA_btl_vader_single_copy_mechanism=\"${{OMPI_MCA_btl_vader_single_copy_mechanism:-$(\"$TRAINBENCH\" \
             single-copy 2>/dev/null || echo none)}}\""
        );
        let _ = writeln!(
            s,
            "exec srun --mpi=pmix --ntasks={} \"$TRAINBENCH\" slurm-task --plan-file {plan_arg} --task \"$SLURM_ARRAY_TASK_ID\"",
            r.ntasks
        );
    } else {
        let _ = writeln!(s, "exec \"$TRAINBENCH\" slurm-task --plan-file {plan_arg} --task \"$SLURM_ARRAY_TASK_ID\"");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_lists_compress_runs() {
        assert_eq!(array_list(&[]), "");
        assert_eq!(array_list(&[3]), "3");
        assert_eq!(array_list(&[0, 1, 2, 3, 7, 9, 10]), "0-3,7,9-10");
    }

    #[test]
    fn options_that_would_break_the_script_are_refused() {
        let ok = SlurmOptions {
            partition: Some("gpu".into()),
            account: Some("proj-1".into()),
            time: Some("1-02:00:00".into()),
            extra: vec!["--qos=high".into()],
        };
        assert_eq!(ok.check(), Ok(()));
        let bad = |o: SlurmOptions| o.check().unwrap_err().to_string();
        assert!(bad(SlurmOptions { partition: Some("a b".into()), ..ok.clone() }).starts_with("--partition"));
        assert!(bad(SlurmOptions { time: Some("1h".into()), ..ok.clone() }).starts_with("--time `1h`"));
        assert!(bad(SlurmOptions { extra: vec!["qos=high".into()], ..ok.clone() }).starts_with("--slurm-arg"));
        assert!(bad(SlurmOptions { extra: vec!["--a\n#SBATCH --b".into()], ..ok }).starts_with("--slurm-arg"));
    }

    #[test]
    fn quoting_leaves_plain_paths_alone() {
        assert_eq!(shell_quote("/a/b.json"), "/a/b.json");
        assert_eq!(shell_quote("/a b/it's"), r"'/a b/it'\''s'");
    }
}
