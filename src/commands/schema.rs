//! The `schema` subcommand.

use super::{CommandError, Outcome};

/// Arguments of `trainbench schema`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Carry out `trainbench schema`.
pub fn execute(_args: &Args) -> Result<Outcome, CommandError> {
    Err(CommandError::Other("`schema` is not implemented yet".into()))
}
