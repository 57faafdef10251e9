//! The hidden `worker` subcommand: runs the repeat `trainbench run` hands it in a process of its own (see
//! `runner::worker`). Not meant to be typed by people.

use super::{CommandError, Outcome};

/// Arguments of `trainbench worker` (the job comes on standard input).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// This process is one rank of a data-parallel group started by an MPI launcher.
    #[arg(long)]
    pub ranks: bool,
}

/// Carry out `trainbench worker`.
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    match crate::runner::worker::serve(args.ranks) {
        Ok(true) => Ok(Outcome::Success),
        Ok(false) => Ok(Outcome::Failure),
        Err(e) => Err(CommandError::Other(e)),
    }
}
