//! How a suite is run ([`RunnerOptions`]), why it could not run at all ([`RunnerError`]) and what it produced
//! ([`SuiteReport`]): the values every layer of the runner shares.

use std::path::PathBuf;
use std::time::Duration;

use trainbench_contract::BackendError;
use trainbench_contract::mock::MockConfig;

use super::hooks::TestHooks;
use super::probe::{self, StopFlag};
use crate::predict::record::RunProfile;
use crate::result::RunResult;

/// How to run a suite.
#[derive(Debug, Clone, Default)]
pub struct RunnerOptions {
    /// Results root; each suite writes to `<out_dir>/<spec name>/`.
    pub out_dir: PathBuf,
    /// Show each run's progress on stderr: a bar on a terminal, else a line every `progress_interval`.
    pub progress: bool,
    /// Time between progress lines when stderr is not a terminal; `None`: [`probe::PROGRESS_INTERVAL`].
    pub progress_interval: Option<Duration>,
    /// Run the background collectors (CPU, NVML); off to measure their overhead.
    pub no_collectors: bool,
    /// Settings of the mock backend.
    pub mock: MockConfig,
    /// Stop request shared with the caller (Ctrl-C is honoured as well).
    pub stop: StopFlag,
    /// The `trainbench` executable that runs a repeat in a process of its own (`trainbench worker`); `None`
    /// runs every repeat in this process whatever `run.isolation` says (the results record which).
    pub worker_exe: Option<PathBuf>,
    /// Hooks for trainbench's own tests; the default (all off) for real runs.
    pub test_hooks: TestHooks,
    /// The hardware profile each result's `prediction` is made on (`trainbench run --hardware`, else this
    /// machine's calibrated profile); the default records that none was given.
    pub hardware: RunProfile,
}

impl RunnerOptions {
    /// How [`RunProbe::new`] shows progress: not at all, or at this interval between lines in a log.
    pub(crate) fn progress_display(&self) -> Option<Duration> {
        self.progress.then(|| self.progress_interval.unwrap_or(probe::PROGRESS_INTERVAL))
    }

    /// The mock backend's settings, with its test hooks applied.
    pub(crate) fn mock_config(&self) -> MockConfig {
        self.test_hooks.mock_config(&self.mock)
    }
}

/// Why a suite could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The backend is not usable in this build.
    #[error("{0}")]
    Backend(BackendError),
    /// A worker process could not be started or could not run its job.
    #[error("{0}")]
    Worker(String),
    /// A result could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// What a suite produced.
#[derive(Debug, Clone)]
pub struct SuiteReport {
    /// Folder the results were written to.
    pub dir: PathBuf,
    /// Results in run order (only runs that were reached).
    pub results: Vec<RunResult>,
    /// True when Ctrl-C stopped the suite before all runs were done.
    pub interrupted: bool,
}
