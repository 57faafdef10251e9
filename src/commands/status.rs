//! The `status` subcommand: where each run of a Slurm submission stands (pending, running, done, failed with
//! Slurm's reason and the task's log, missing), and `--resume` to submit only the failed and missing runs again.
//! It reads the results folder and the plan file, and asks `squeue`/`sacct`/`scontrol` only where present.

use std::path::PathBuf;
use std::time::Duration;

use super::args::{FormatArg, OutputFormat};
use super::{CommandError, Outcome};
use crate::slurm::status::{self, StatusReport, TaskState};

/// Arguments of `trainbench status`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The results folder a `trainbench run --on slurm --out DIR` submitted into.
    #[arg(value_name = "RESULTS")]
    pub results: PathBuf,
    /// Submit again the runs that failed or are missing (each once; runs queued, running or done are left alone).
    #[arg(long)]
    pub resume: bool,
    /// Wait until no run is queued or running (asks `squeue` every `--poll` seconds), then print the status.
    #[arg(long)]
    pub wait: bool,
    /// Seconds between two questions to Slurm while waiting.
    #[arg(long, value_name = "S", default_value_t = 2.0)]
    pub poll: f64,
    /// Output format (text: a table; JSON: the status of every task).
    #[command(flatten)]
    pub format: FormatArg,
}

/// Carry out `trainbench status`: exit 0 when no run is failed or missing (after `--resume`, when every one was
/// submitted again), 1 otherwise.
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    if !(args.poll.is_finite() && args.poll > 0.0) {
        return Err(CommandError::Input(format!("--poll must be a positive number of seconds, not {}", args.poll)));
    }
    let (plan, mut report) = status::status(&args.results)?;
    if args.resume {
        let submitted = status::resume(&plan, &report)?;
        if submitted.is_empty() {
            eprintln!("nothing to resubmit: no run failed or is missing");
        }
        for s in &submitted {
            eprintln!("submitted job {} ({}): tasks {}", s.job, s.script, crate::slurm::script::array_list(&s.tasks));
        }
        if !submitted.is_empty() && !args.wait {
            report = status::status(&args.results)?.1;
        }
    }
    if args.wait {
        crate::runner::probe::install_interrupt_handler();
        report = status::wait(&args.results, Duration::from_secs_f64(args.poll))?.1;
    }
    print(&report, args.format.get())?;
    let unfinished = report.tasks.iter().any(|t| matches!(t.state, TaskState::Failed | TaskState::Missing));
    Ok(if unfinished { Outcome::Failure } else { Outcome::Success })
}

fn print(report: &StatusReport, format: OutputFormat) -> Result<(), CommandError> {
    match format {
        OutputFormat::Text => outln!("{}", status::render_text(report).trim_end()),
        OutputFormat::Json => {
            outln!("{}", serde_json::to_string_pretty(report)?)
        }
    }
    Ok(())
}
