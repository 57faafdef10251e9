//! The `schema` subcommand: prints the JSON Schema of spec files.

use super::{CommandError, Outcome};
use crate::spec::schema::spec_schema_text;

/// Arguments of `trainbench schema`.
///
/// Prints the spec schema. A `--result` flag (the result file schema) belongs next to this one once the
/// result module provides its schema.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Carry out `trainbench schema`.
pub fn execute(_args: &Args) -> Result<Outcome, CommandError> {
    print!("{}", spec_schema_text());
    Ok(Outcome::Success)
}
