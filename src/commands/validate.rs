//! The `validate` subcommand.

use super::{CommandError, Outcome};

/// Arguments of `trainbench validate`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Carry out `trainbench validate`.
pub fn execute(_args: &Args) -> Result<Outcome, CommandError> {
    Err(CommandError::Other("`validate` is not implemented yet".into()))
}
