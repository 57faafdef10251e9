//! The `run` subcommand.

use super::{CommandError, Outcome};

/// Arguments of `trainbench run`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Carry out `trainbench run`.
pub fn execute(_args: &Args) -> Result<Outcome, CommandError> {
    Err(CommandError::Other("`run` is not implemented yet".into()))
}
