//! The `import` subcommand: results published elsewhere read into trainbench results, so `report` can put a
//! user's runs beside them. `import mlperf PATH` reads MLPerf Training logs in the `results/<system>/<benchmark>/
//! result_*.txt` layout (docs/mlperf.md); each log becomes `<out>/mlperf-<benchmark>/<system>.r<N>.json`. A
//! malformed or truncated line is reported with its file and line, the rest is still read, and the exit code is 2.

use std::path::PathBuf;

use super::{CommandError, Outcome};
use crate::mlperf::import::scan;
use crate::mlperf::imported::to_result;
use crate::mlperf::score::{TrainTime, cell, time_to_train};
use crate::runner::output::{result_path, write_json};

/// Arguments of `trainbench import`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to import.
    #[command(subcommand)]
    pub source: Source,
}

/// The formats `import` reads.
#[derive(Debug, clap::Subcommand)]
pub enum Source {
    /// MLPerf Training logs: a `training_results_v*` organisation folder (`<org>/results/<system>/<benchmark>/
    /// result_N.txt`, system descriptions in `<org>/systems/<system>.json`), a folder of organisations, or a
    /// `results` folder.
    Mlperf {
        /// The folder.
        #[arg(value_name = "PATH")]
        path: PathBuf,
        /// Results folder; each log is written to `<DIR>/mlperf-<benchmark>/<system>.r<N>.json`.
        #[arg(long, value_name = "DIR", default_value = "results")]
        out: PathBuf,
    },
}

/// Carry out `trainbench import`.
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    let Source::Mlperf { path, out } = &args.source;
    if !path.is_dir() {
        return Err(CommandError::Input(format!("{}: not a folder", path.display())));
    }
    let found = scan(path);
    for issue in &found.issues {
        eprintln!("error: {issue}");
    }
    for log in &found.logs {
        let result = to_result(log);
        let file = result_path(out, &result.spec_name, &result.run_id);
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|source| CommandError::Io { path: dir.display().to_string(), source })?;
        }
        write_json(&file, &result).map_err(|source| CommandError::Io { path: file.display().to_string(), source })?;
        let time = time_to_train(&result).unwrap_or(TrainTime::NotConverged);
        outln!(
            "{}: {} {} time to train {} -> {}",
            log.record.source,
            result.spec_name,
            result.run_id,
            cell(time),
            file.display()
        );
    }
    outln!("imported {} log(s), {} problem(s)", found.logs.len(), found.issues.len());
    Ok(if found.issues.is_empty() { Outcome::Success } else { Outcome::InvalidInput })
}
