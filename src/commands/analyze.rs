//! The `analyze` subcommand.

use super::{CommandError, Outcome};

/// Arguments of `trainbench analyze`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Carry out `trainbench analyze`.
pub fn execute(_args: &Args) -> Result<Outcome, CommandError> {
    Err(CommandError::Other("`analyze` is not implemented yet".into()))
}
