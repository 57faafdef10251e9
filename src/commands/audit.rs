//! The `audit` subcommand: verify a result's integrity, re-run it here, and say whether it reproduces.

use std::path::PathBuf;

use super::args::{FormatArg, OutputFormat};
use super::{CommandError, Outcome};
use crate::audit::{self, AuditOptions, AuditVerdict, rerun};
use crate::backends::BackendChoice;
use crate::compare::{self, CompareOptions};
use crate::result::load;

/// Arguments of `trainbench audit`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The result file to audit.
    #[arg(value_name = "RESULT")]
    pub result: PathBuf,
    /// Backend for the re-run (default: the one that produced the result).
    #[arg(long, value_enum)]
    pub backend: Option<BackendChoice>,
    /// Device selector for the re-run (default: the result's).
    #[arg(long, value_name = "D")]
    pub device: Option<trainbench_workload::DeviceSelector>,
    /// Largest difference of median step time, throughput and peak memory that counts as reproduced.
    #[arg(long, default_value = "10%", value_parser = compare::parse_threshold)]
    pub tolerance: f64,
    /// Keep the re-run's result in this folder (default: a temporary folder, removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Only check the file's integrity (spec hash, recomputed summaries); do not re-run.
    #[arg(long)]
    pub integrity_only: bool,
    /// Output format (`--json` is the same as `--format json`).
    #[command(flatten)]
    pub format: FormatArg,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Carry out `trainbench audit`.
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    let loaded = load::load_file(&args.result).map_err(|e| CommandError::Input(e.to_string()))?;
    let opts = AuditOptions { tolerance: args.tolerance, compare: CompareOptions::default() };
    let temp = std::env::temp_dir().join(format!("trainbench-audit-{}", std::process::id()));
    let out_dir = args.out.clone().unwrap_or_else(|| temp.clone());
    let rerun_opts = rerun::RerunOptions { backend: args.backend, device: args.device, out_dir, progress: !args.quiet };
    let report = if args.integrity_only {
        audit::integrity_report(&loaded.result)
    } else {
        let r = audit::audit(&loaded.result, &opts, |original| rerun::rerun_here(original, &rerun_opts));
        if args.out.is_none() {
            let _ = std::fs::remove_dir_all(&temp);
        }
        r.map_err(|e| CommandError::Other(format!("re-running {}: {e}", loaded.path.display())))?
    };
    if args.format.get() == OutputFormat::Json {
        outln!("{}", serde_json::to_string_pretty(&report).map_err(|e| CommandError::Other(e.to_string()))?);
    } else {
        out!("{}", audit::render(&report));
    }
    Ok(match report.verdict {
        AuditVerdict::Reproduced | AuditVerdict::Consistent => Outcome::Success,
        AuditVerdict::NotReproduced => Outcome::Failure,
        AuditVerdict::Invalid => Outcome::InvalidInput,
    })
}
