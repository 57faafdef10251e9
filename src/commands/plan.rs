//! The `plan` subcommand.

use super::{CommandError, Outcome};

/// Arguments of `trainbench plan`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Carry out `trainbench plan`.
pub fn execute(_args: &Args) -> Result<Outcome, CommandError> {
    Err(CommandError::Other("`plan` is not implemented yet".into()))
}
