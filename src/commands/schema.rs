//! The `schema` subcommand: prints the JSON Schema of spec files (or, with `--result`, of result files; with
//! `--hardware`, of hardware profiles).

use super::{CommandError, Outcome};
use crate::spec::schema::spec_schema_text;

/// Arguments of `trainbench schema`.
///
/// Prints the spec schema, the result schema with `--result`, the hardware profile schema with `--hardware`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the schema of result files instead (`schema/result.schema.json`).
    #[arg(long, conflicts_with = "hardware")]
    pub result: bool,
    /// Print the schema of hardware profiles instead (`schema/hardware.schema.json`).
    #[arg(long)]
    pub hardware: bool,
}

/// Carry out `trainbench schema`.
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    if args.result {
        out!("{}", crate::result::result_schema_text());
        return Ok(Outcome::Success);
    }
    if args.hardware {
        out!("{}", crate::hardware::hardware_schema_text());
        return Ok(Outcome::Success);
    }
    out!("{}", spec_schema_text());
    Ok(Outcome::Success)
}
