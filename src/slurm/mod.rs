//! Running suites on a Slurm cluster: `trainbench run --on slurm` turns every planned run into one task of a
//! job array and submits it; each task runs its run through the normal runner and writes its result into the
//! shared results folder exactly as a local run would; `trainbench status` says which runs are pending,
//! running, done or failed, and resubmits only the failed or missing ones.
//!
//! A submission lives in `<out>/_slurm/` ([`SLURM_DIR`], which result readers skip): `plan.json` the tasks
//! ([`plan_file`]), `array-<k>.sbatch` one batch script per resource shape ([`script`]), `jobs.json` what was
//! submitted ([`submit`]), `logs/<job>_<task>.out` each task's output, `attempts/` results a resubmission
//! replaced. Slurm is asked through its commands (`sbatch`, `squeue`, `sacct`, `scontrol`; [`queue`]) only when
//! they are present; everything else is read from the folder.

pub mod plan_file;
pub mod queue;
pub mod script;
pub mod status;
pub mod submit;
pub mod task;

use std::path::{Path, PathBuf};

pub use crate::result::load::SLURM_DIR;

/// The plan file's name in the submission folder.
pub const PLAN_FILE: &str = "plan.json";
/// The submissions record's name in the submission folder.
pub const JOBS_FILE: &str = "jobs.json";

/// Why a Slurm submission, task or status query failed.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A plan file or argument is not usable; the message says what and how to fix it.
    #[error("{0}")]
    Invalid(String),
    /// A Slurm command failed or is missing.
    #[error("{0}")]
    Slurm(String),
    /// The run itself could not be carried out (the runner's error).
    #[error("{0}")]
    Run(String),
}

impl SlurmError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        SlurmError::Io { path: path.display().to_string(), source }
    }
}

/// The submission folder of a results folder: `<out>/_slurm`.
pub fn submission_dir(out: &Path) -> PathBuf {
    out.join(SLURM_DIR)
}

/// Where the tasks' logs go.
pub fn logs_dir(out: &Path) -> PathBuf {
    submission_dir(out).join("logs")
}

/// The log of array task `task` of job `job` (`#SBATCH --output=.../%A_%a.out`).
pub fn log_path(out: &Path, job: u64, task: usize) -> PathBuf {
    logs_dir(out).join(format!("{job}_{task}.out"))
}
