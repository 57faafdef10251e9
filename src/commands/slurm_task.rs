//! The hidden `slurm-task` subcommand: runs one task of a Slurm submission's plan file (see `slurm::task`);
//! started by the batch scripts `trainbench run --on slurm` writes, not by people.

use std::path::PathBuf;

use super::{CommandError, Outcome};
use crate::result::RunOutcome;
use crate::slurm::task::{TaskOutcome, run_task};

/// Arguments of `trainbench slurm-task`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The submission's plan file (`<out>/_slurm/plan.json`).
    #[arg(long, value_name = "FILE")]
    pub plan_file: PathBuf,
    /// The task to run (the array task id, `$SLURM_ARRAY_TASK_ID`).
    #[arg(long, value_name = "N")]
    pub task: usize,
}

/// Carry out `trainbench slurm-task`: exit 0 when the run's result is final (completed, out of memory,
/// skipped, or already there), 1 when it failed or was interrupted (Slurm then records the task as failed).
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    match run_task(&args.plan_file, args.task) {
        Ok(TaskOutcome::AlreadyDone(_)) | Ok(TaskOutcome::Ran(None)) => Ok(Outcome::Success),
        Ok(TaskOutcome::Ran(Some((_, outcome)))) => Ok(match outcome {
            RunOutcome::Failed { .. } | RunOutcome::Interrupted { .. } => Outcome::Failure,
            _ => Outcome::Success,
        }),
        Err(e) => Err(CommandError::Slurm(e)),
    }
}
