//! The `check` subcommand: compare the shape of results with golden files (or write them with `--update`).

use std::path::PathBuf;

use super::{CommandError, Outcome};
use crate::check;
use crate::result::load;

/// Arguments of `trainbench check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Folder of golden shape files: `<DIR>/<spec>/<run id without .rN>.shape.json`.
    #[arg(long, value_name = "DIR")]
    pub golden: PathBuf,
    /// Write (or overwrite) the golden files from these results instead of checking.
    #[arg(long)]
    pub update: bool,
    /// Result files or results folders (searched recursively).
    #[arg(required = true, value_name = "RESULT")]
    pub results: Vec<PathBuf>,
}

/// Carry out `trainbench check`.
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    let results = load::load_all(&args.results).map_err(|e| CommandError::Input(e.to_string()))?;
    let reports = check::check_results(&results, &args.golden, args.update).map_err(|e| match e {
        check::CheckError::Io { path, source } => CommandError::Io { path: path.display().to_string(), source },
        other => CommandError::Input(other.to_string()),
    })?;
    out!("{}", check::render(&reports));
    Ok(if reports.iter().any(check::CheckReport::is_failure) { Outcome::Failure } else { Outcome::Success })
}
