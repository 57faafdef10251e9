//! The worker protocol between `trainbench run` and the processes it starts: the job a worker is handed
//! ([`WorkerJob`]), the lines it prints back ([`WorkerMessage`]), the typed failure of one rank of a group
//! ([`RankFailure`]) and how a run's outcome reads the failures its ranks reported, and how long a silent worker
//! is given past its runs' timeout ([`HUNG_GRACE`]). Everything else in the runner that starts, serves or
//! reads a worker depends on this module; it depends on none of them.
//!
//! Parent to worker on stdin: the [`WorkerJob`] line, then `stop` when the user stopped the suite; end of input
//! (the parent is gone) stops the worker too. Worker to parent on stdout: [`WorkerMessage`] lines (the devices
//! its runs are placed on, each result; from a group of ranks also each rank's typed failure). Test hooks do not
//! travel in the job: they reach a worker through [`super::hooks::TestHooks::ENV`] only.

use std::io::Write;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use trainbench_contract::mock::MockConfig;
use trainbench_contract::{BackendKind, DeviceInfo, RunPlan};

use super::data::LocalData;
use super::probe::StopCause;
use crate::result::{RunOutcome, RunResult};

/// How long a worker may stay silent beyond its runs' timeout before it is killed as hung (model building,
/// process warm-up and a slow last iteration fit in it).
pub const HUNG_GRACE: Duration = Duration::from_secs(60);

/// What a worker is asked to run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerJob {
    /// The canonical spec (the worker builds the model from it; the hash must match).
    pub spec_canonical: String,
    /// The suite's plans, as the parent has them.
    pub plans: Vec<RunPlan>,
    /// Indices into `plans` of the runs this worker does, in order.
    pub indices: Vec<usize>,
    /// Plans that already ran out of memory in earlier workers (larger batches of their family are skipped).
    pub known_ooms: Vec<RunPlan>,
    /// The backend the suite was placed on (the plans carry the device).
    pub backend: BackendKind,
    /// Show progress on stderr (which the worker shares with the parent).
    pub progress: bool,
    /// The parent's [`RunnerOptions::progress_interval`].
    pub progress_interval: Option<Duration>,
    /// Collectors off.
    pub no_collectors: bool,
    /// Mock backend settings.
    pub mock: MockConfig,
    /// The suite's local dataset, resolved by the parent (the canonical spec's path is relative to a folder
    /// the worker does not know).
    #[serde(default)]
    pub data: Option<LocalData>,
}

/// One line a worker prints on stdout.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerMessage {
    /// A finished run, and what stopped it early (if anything): a [`StopCause::User`] stops the suite.
    Result {
        /// The run's result.
        result: Box<RunResult>,
        /// What stopped it early.
        stop: Option<StopCause>,
    },
    /// The worker cannot run its job (backend not built, spec unreadable): the suite stops.
    Fatal(String),
    /// The devices the job's runs are placed on, as the worker's backend describes them; sent once, before the
    /// first run, so that a run the worker never reports (it died) still records its device.
    Devices(Vec<DeviceInfo>),
    /// A rank of a data-parallel group could not finish its part of a run (sent by that rank, or by trainbench's
    /// launcher for a rank that died): the parent learns which rank failed and how, out of memory included,
    /// without reading stderr.
    RankFailed(RankFailure),
}

/// How a rank's part of a run ended badly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankFailureKind {
    /// The backend ran out of memory (its typed error, [`trainbench_contract::BackendError::OutOfMemory`]).
    OutOfMemory,
    /// The run failed otherwise, or the rank could not run its job.
    Failed,
    /// The rank's process ended badly without saying why (a crash, a signal): told by trainbench's launcher.
    Died,
}

/// A rank of a data-parallel group that could not finish its part: which rank, how, in which run, and why. The
/// rank (or, for a rank that died, trainbench's launcher) sends it to the parent on the worker protocol as a
/// [`WorkerMessage::RankFailed`] line, so the parent learns another rank's failure, out of memory included,
/// without reading text; the same is printed on stderr for people ([`std::fmt::Display`]: `trainbench rank N:
/// run `ID` failed: MESSAGE`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankFailure {
    /// The rank in its group.
    pub rank: usize,
    /// How it failed.
    pub kind: RankFailureKind,
    /// The run it was in (its id), if it was in one.
    #[serde(default)]
    pub run: Option<String>,
    /// The error as the rank saw it.
    pub message: String,
}

impl RankFailure {
    /// Rank `rank`'s failure in a run that ended with `result`; `None` when the run did not fail (completed,
    /// interrupted, skipped).
    pub fn of_result(rank: usize, result: &RunResult) -> Option<RankFailure> {
        let (kind, message) = match &result.outcome {
            RunOutcome::OutOfMemory { message, .. } => (RankFailureKind::OutOfMemory, message),
            RunOutcome::Failed { message } => (RankFailureKind::Failed, message),
            _ => return None,
        };
        Some(RankFailure { rank, kind, run: Some(result.plan.id.clone()), message: message.clone() })
    }
}

impl std::fmt::Display for RankFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.run {
            Some(run) => write!(f, "trainbench rank {}: run `{run}` failed: {}", self.rank, self.message),
            None => write!(f, "trainbench rank {}: {}", self.rank, self.message),
        }
    }
}

/// The outcome of a data-parallel run as its group ended, given the failures its ranks reported
/// ([`RankFailure`]): a run rank 0 reports as failed (its exchange broke off), or that no rank reported, is out of
/// memory when another rank ran out of memory, with that rank's failure (`trainbench rank N: run ... failed:
/// CUDA out of memory ...`) as the message, so the sweep skips larger batches as it does for one worker. Any other
/// outcome is kept. Decided by the failures' kinds, never by their text.
pub fn outcome_with_rank_failures(outcome: RunOutcome, failures: &[RankFailure], batch_size: usize) -> RunOutcome {
    let RunOutcome::Failed { .. } = outcome else { return outcome };
    match failures.iter().find(|f| f.kind == RankFailureKind::OutOfMemory) {
        Some(f) => RunOutcome::OutOfMemory { batch_size, message: f.to_string() },
        None => outcome,
    }
}

/// Write `message` as one line of the worker protocol and flush it.
pub fn print_message(out: &mut dyn Write, message: &WorkerMessage) -> std::io::Result<()> {
    let text = serde_json::to_string(message).map_err(std::io::Error::other)?;
    writeln!(out, "{text}")?;
    out.flush()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn failure(rank: usize, kind: RankFailureKind, message: &str) -> RankFailure {
        RankFailure { rank, kind, run: Some("m.b64.fp32.1x2.r0".into()), message: message.into() }
    }

    #[test]
    fn another_ranks_out_of_memory_makes_the_run_out_of_memory() {
        let failed = RunOutcome::Failed { message: "data-parallel exchange: NCCL: remote process exited".into() };
        let died = RankFailure { rank: 0, kind: RankFailureKind::Died, run: None, message: "the process ended".into() };
        let oom = failure(1, RankFailureKind::OutOfMemory, "CUDA out of memory. Tried to allocate 2.00 GiB");
        assert_eq!(
            outcome_with_rank_failures(failed.clone(), &[died.clone(), oom.clone()], 64),
            RunOutcome::OutOfMemory {
                batch_size: 64,
                message: "trainbench rank 1: run `m.b64.fp32.1x2.r0` failed: CUDA out of memory. Tried to allocate \
                          2.00 GiB"
                    .into()
            }
        );
        // The kind decides, not the text: a failure that merely mentions memory stays a failure.
        let other = failure(1, RankFailureKind::Failed, "CUDA out of memory (but reported as a plain failure)");
        assert_eq!(outcome_with_rank_failures(failed.clone(), &[other, died], 64), failed);
        // Other outcomes are kept whatever the ranks reported.
        assert_eq!(outcome_with_rank_failures(RunOutcome::Completed, &[oom], 64), RunOutcome::Completed);
    }

    #[test]
    fn a_rank_failure_travels_as_one_typed_worker_line() {
        let f = failure(3, RankFailureKind::OutOfMemory, "cuDNN error: CUDNN_STATUS_ALLOC_FAILED");
        let line = serde_json::to_string(&WorkerMessage::RankFailed(f.clone())).unwrap();
        assert!(!line.contains('\n'));
        assert!(line.contains(r#""kind":"out_of_memory""#), "{line}");
        match serde_json::from_str::<WorkerMessage>(&line).unwrap() {
            WorkerMessage::RankFailed(back) => assert_eq!(back, f),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            f.to_string(),
            "trainbench rank 3: run `m.b64.fp32.1x2.r0` failed: cuDNN error: CUDNN_STATUS_ALLOC_FAILED"
        );
    }

    #[test]
    fn a_failed_or_out_of_memory_result_is_a_rank_failure_and_nothing_else_is() {
        let mut result: RunResult = serde_json::from_str(include_str!(
            "../../tests/fixtures/results/fixture-mlp/fixture-mlp.b8.fp32.1x1.r1.json"
        ))
        .unwrap();
        result.outcome = RunOutcome::OutOfMemory { batch_size: 8, message: "out of memory".into() };
        let f = RankFailure::of_result(2, &result).unwrap();
        assert_eq!(
            (f.rank, f.kind, f.run.as_deref()),
            (2, RankFailureKind::OutOfMemory, Some(result.plan.id.as_str()))
        );
        result.outcome = RunOutcome::Failed { message: "shape mismatch".into() };
        assert_eq!(RankFailure::of_result(2, &result).unwrap().kind, RankFailureKind::Failed);
        result.outcome = RunOutcome::Completed;
        assert_eq!(RankFailure::of_result(2, &result), None);
    }
}
