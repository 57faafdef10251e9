//! A result as the store keeps it ([`RunRecord`]): its identities, when and at which revision it ran, the
//! software it used, its metric values and its raw steps, compressed; and the checks a result passes before it
//! is recorded (readable, of this format version, consistent by audit's integrity check, measured).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::codec;
use super::series::{self, MachineIdentity, Metric};
use crate::audit::integrity;
use crate::digest::sha256_hex;
use crate::result::RunResult;
use crate::result::load::{self, LoadError};

/// One recorded run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// SHA-256 of the result's content: the same run recorded twice has the same key.
    pub run_key: String,
    /// The run identifier (`toy.b8.fp32.1x1.r0`).
    pub run_id: String,
    /// The spec's name.
    pub spec_name: String,
    /// Configuration identity ([`series::configuration_key`]).
    pub config_key: String,
    /// The configuration in words (the run identifier without its repeat).
    pub config_label: String,
    /// Machine identity ([`MachineIdentity::key`]).
    pub machine_key: String,
    /// The machine in words.
    pub machine_label: String,
    /// The repeat number of the run within its invocation.
    pub repeat: u32,
    /// When the run started, RFC 3339 UTC.
    pub started_at: String,
    /// The revision of the code under test the run measured, if known.
    pub revision: Option<String>,
    /// Software and host ([`series::software`]).
    pub software: BTreeMap<String, String>,
    /// The file the run was recorded from.
    pub source: String,
    /// Steady-state steps kept.
    pub step_count: u64,
    /// The steady-state step times, compressed ([`codec`]).
    pub steps: Vec<u8>,
    /// The value of each metric measured.
    pub metrics: BTreeMap<Metric, f64>,
}

impl RunRecord {
    /// The record of a result read from `source`, measured at `revision`.
    pub fn of(result: &RunResult, source: &Path, revision: Option<String>) -> Self {
        let steps = result.steady_step_times();
        let machine = MachineIdentity::of(result);
        Self {
            run_key: sha256_hex(&serde_json::to_string(result).unwrap_or_default()),
            run_id: result.run_id.clone(),
            spec_name: result.spec_name.clone(),
            config_key: series::configuration_key(result),
            config_label: result.config_id().to_string(),
            machine_key: machine.key(),
            machine_label: machine.label(),
            repeat: result.plan.repeat,
            started_at: result.environment.started_at.clone(),
            revision,
            software: series::software(result),
            source: source.display().to_string(),
            step_count: steps.len() as u64,
            steps: codec::encode(&steps),
            metrics: series::metric_values(result).into_iter().collect(),
        }
    }

    /// The steady-state step times (empty when the stored blob is damaged).
    pub fn step_times(&self) -> Vec<f64> {
        codec::decode(&self.steps).unwrap_or_default()
    }
}

/// Why a result file is not recorded.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// It could not be read, is not a result, or is of another format version.
    #[error("{0}")]
    Load(#[from] LoadError),
    /// Audit's integrity check failed: the figures do not follow from the samples.
    #[error("{path}: fails the integrity check: {field}: {message}")]
    Integrity {
        /// The file.
        path: String,
        /// The first field at fault.
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

/// What reading one file for the store gave.
#[derive(Debug)]
pub enum Prepared {
    /// A run to record.
    Run(Box<RunRecord>),
    /// A run with nothing measured (failed, out of memory, skipped): nothing to record, and why.
    Unmeasured {
        /// The file.
        path: String,
        /// Its outcome (`out_of_memory`, ...).
        status: &'static str,
    },
}

/// Read one result file and check it for the store.
pub fn prepare(path: &Path, revision: Option<String>) -> Result<Prepared, Refused> {
    let loaded = load::load_file(path)?;
    if let Some(issue) = integrity::verify(&loaded.result).into_iter().next() {
        return Err(Refused::Integrity {
            path: path.display().to_string(),
            field: issue.field,
            message: issue.message,
        });
    }
    let record = RunRecord::of(&loaded.result, path, revision);
    if record.metrics.is_empty() {
        return Ok(Prepared::Unmeasured { path: path.display().to_string(), status: loaded.result.outcome.status() });
    }
    Ok(Prepared::Run(Box::new(record)))
}

/// [`prepare`] every file (with no revision), on as many threads as the process may use; the answers are in
/// the order of `files`.
pub fn prepare_all(files: &[PathBuf]) -> Vec<Result<Prepared, Refused>> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from).clamp(1, files.len().max(1));
    let share = files.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = files
            .chunks(share)
            .map(|part| scope.spawn(move || part.iter().map(|f| prepare(f, None)).collect::<Vec<_>>()))
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    })
}

/// The revision of the code under test when none is given: `GITHUB_SHA`, then `CI_COMMIT_SHA`, then the commit
/// checked out in the working directory when it is a git repository.
pub fn default_revision() -> Option<String> {
    for var in ["GITHUB_SHA", "CI_COMMIT_SHA"] {
        if let Ok(v) = std::env::var(var)
            && !v.trim().is_empty()
        {
            return Some(v.trim().to_string());
        }
    }
    super::git::text(Path::new("."), &["rev-parse", "HEAD"])
}
