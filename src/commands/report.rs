//! The `report` subcommand: HTML, Markdown (+ SVG plots) and CSV reports of result sets.

use std::path::PathBuf;

use super::{CommandError, Outcome};
use crate::report;
use crate::result::load;

/// Arguments of `trainbench report`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Result files or results folders (searched recursively).
    #[arg(required = true, value_name = "RESULTS")]
    pub results: Vec<PathBuf>,
    /// Output folder: receives index.html, report.md, the plots as SVG files, and runs.csv.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Carry out `trainbench report`.
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    let results = load::load_all(&args.results).map_err(|e| CommandError::Input(e.to_string()))?;
    let files = report::write_report(&results, &args.out)?;
    outln!(
        "wrote {} ({} runs), {}, {} and {} plot(s)",
        files.html.display(),
        results.len(),
        files.markdown.display(),
        files.csv.display(),
        files.svgs.len()
    );
    Ok(Outcome::Success)
}
