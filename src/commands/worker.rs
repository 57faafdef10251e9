//! The hidden `worker` subcommand: runs the repeat `trainbench run` hands it in a process of its own (see
//! `runner::worker`). Not meant to be typed by people.

use super::{CommandError, Outcome};

/// Arguments of `trainbench worker` (none: the job comes on standard input).
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Carry out `trainbench worker`.
pub fn execute(_args: &Args) -> Result<Outcome, CommandError> {
    match crate::runner::worker::serve() {
        Ok(true) => Ok(Outcome::Success),
        Ok(false) => Ok(Outcome::Failure),
        Err(e) => Err(CommandError::Other(e)),
    }
}
