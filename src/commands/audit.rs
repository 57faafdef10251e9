//! The `audit` subcommand: verify a result's integrity, re-run it here, and say whether it reproduces; given a
//! folder, every result in it (as `report` and `compare` read folders), one after the other.

use std::path::PathBuf;

use super::args::{FormatArg, OutputFormat};
use super::{CommandError, Outcome};
use crate::audit::{self, AuditOptions, AuditReport, AuditVerdict, rerun};
use crate::backend_registry::BackendChoice;
use crate::compare::{self, CompareOptions};
use crate::result::load;

/// Arguments of `trainbench audit`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The result file to audit, or a folder: every result in it (the suite index and shape snapshots skipped).
    #[arg(value_name = "RESULT")]
    pub result: PathBuf,
    /// Backend for the re-run (default: the one that produced the result).
    #[arg(long, value_enum)]
    pub backend: Option<BackendChoice>,
    /// Device selector for the re-run (default: the result's).
    #[arg(long, value_name = "D")]
    pub device: Option<trainbench_contract::DeviceSelector>,
    /// Largest difference of median step time, throughput and peak memory that counts as reproduced.
    #[arg(long, default_value = "10%", value_parser = compare::parse_threshold)]
    pub tolerance: f64,
    /// Keep the re-runs' results in this folder (default: a temporary folder, removed afterwards).
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

/// Carry out `trainbench audit`: each result in turn; the exit status is the worst verdict's.
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    let files = load::result_files(&args.result).map_err(|e| CommandError::Input(e.to_string()))?;
    let mut reports = Vec::with_capacity(files.len());
    for file in &files {
        reports.push(audit_one(args, file)?);
    }
    let json = args.format.get() == OutputFormat::Json;
    match (json, reports.as_slice()) {
        (true, [one]) => outln!("{}", pretty(one)?),
        (true, all) => outln!("{}", pretty(&all)?),
        (false, all) => {
            let text: Vec<String> = all.iter().map(audit::render).collect();
            out!("{}", text.join("\n"));
        }
    }
    let worst = reports.iter().map(|r| verdict_outcome(r.verdict)).max_by_key(|o| severity(*o));
    Ok(worst.unwrap_or(Outcome::Success))
}

/// Audit one result file: its integrity, and unless `--integrity-only`, a re-run here.
fn audit_one(args: &Args, file: &std::path::Path) -> Result<AuditReport, CommandError> {
    let loaded = load::load_file(file).map_err(|e| CommandError::Input(e.to_string()))?;
    if args.integrity_only {
        return Ok(audit::integrity_report(&loaded.result));
    }
    let opts = AuditOptions { tolerance: args.tolerance, compare: CompareOptions::default() };
    let temp = std::env::temp_dir().join(format!("trainbench-audit-{}", std::process::id()));
    let out_dir = args.out.clone().unwrap_or_else(|| temp.clone());
    let rerun_opts = rerun::RerunOptions { backend: args.backend, device: args.device, out_dir, progress: !args.quiet };
    let r = audit::audit(&loaded.result, &opts, |original| rerun::rerun_here(original, &rerun_opts));
    if args.out.is_none() {
        let _ = std::fs::remove_dir_all(&temp);
    }
    r.map_err(|source| CommandError::Rerun { path: loaded.path.display().to_string(), source })
}

fn pretty<T: serde::Serialize + ?Sized>(value: &T) -> Result<String, CommandError> {
    Ok(serde_json::to_string_pretty(value)?)
}

fn verdict_outcome(v: AuditVerdict) -> Outcome {
    match v {
        AuditVerdict::Reproduced | AuditVerdict::Consistent => Outcome::Success,
        AuditVerdict::NotReproduced => Outcome::Failure,
        AuditVerdict::Invalid => Outcome::InvalidInput,
    }
}

/// Invalid input outranks a finding, which outranks success.
fn severity(o: Outcome) -> u8 {
    match o {
        Outcome::InvalidInput => 2,
        Outcome::Failure => 1,
        _ => 0,
    }
}
