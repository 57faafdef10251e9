//! [`RunResult`]: the result of one run (what ran, how it ended, what was measured and where) and [`RunOutcome`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use trainbench_contract::RunPlan;

use super::analysis::AnalysisSummary;
use super::environment::Environment;
use super::metrics::Metrics;
use super::{distributed, prediction};

/// Version of the result format written by this build. Bumped on any incompatible change.
pub const FORMAT_VERSION: u32 = 1;

/// The result of one run: what ran, how it ended, what was measured and where.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "trainbench run result")]
pub struct RunResult {
    /// Result format version (see `FORMAT_VERSION`); readers refuse versions they do not know.
    pub format_version: u32,
    /// Name of the spec the run came from (`name` in the spec file).
    pub spec_name: String,
    /// Run identifier, unique within the spec (`resnet50.b32.fp32.1x1.r0`); also the result file stem.
    pub run_id: String,
    /// Backend that executed the run (`tch`, `wgpu`, `mock`).
    pub backend: String,
    /// The fully resolved run plan the backend was given.
    pub plan: RunPlan,
    /// How the run ended.
    pub outcome: RunOutcome,
    /// Measured metrics; `null` when no iteration was measured (failure, out of memory, skipped).
    pub metrics: Option<Metrics>,
    /// Static analysis of the model (parameters, FLOPs, memory estimate); `null` if the analysis failed.
    pub analysis: Option<AnalysisSummary>,
    /// Where, with what and when the run happened.
    pub environment: Environment,
    /// Data-parallel runs: world, strategy, engine, per-rank phases, traffic and bandwidth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distributed: Option<distributed::DistributedResult>,
    /// The local dataset the run read and its input pipeline's own throughput; absent for synthetic data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataSummary>,
    /// The performance model's prediction for this run's configuration on the hardware profile of the machine
    /// it ran on (or why there is none); absent only in results written before predictions were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction: Option<prediction::PredictionSection>,
    /// A run imported from a published MLPerf Training log (`trainbench import mlperf`): what the log states;
    /// absent for runs trainbench trained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlperf: Option<super::mlperf::MlperfRecord>,
}

/// A local dataset as a run read it: the files, the epoch arithmetic, the pipeline's settings, and how fast the
/// pipeline delivers batches on its own (no training), which tells whether a run is input-bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataSummary {
    /// Dataset format (`npy`, ...).
    pub format: String,
    /// The dataset's folder, as resolved when the run started.
    pub path: String,
    /// The files, element types and shapes, in words.
    pub description: String,
    /// Samples in the dataset.
    pub samples: u64,
    /// Samples visited per epoch: full global batches only.
    pub samples_per_epoch: u64,
    /// Global batches per epoch.
    pub batches_per_epoch: u64,
    /// Samples of the last partial global batch, dropped every epoch (each epoch's order is reshuffled, so
    /// different samples are dropped each time).
    pub dropped_per_epoch: u64,
    /// Reading threads (`dataset.workers`; 0: batches read on the training thread).
    pub workers: u32,
    /// Most batches held ahead of training (`dataset.prefetch`; 0 without reading threads).
    pub prefetch: u32,
    /// What an unreadable sample does (`fail`, `skip`).
    pub on_error: String,
    /// Samples that could not be read and were skipped during the run (`on_error = "skip"`).
    pub skipped: u64,
    /// The pipeline measured alone, before the run: batches pulled from a fresh loader with no training.
    pub loader: Option<LoaderThroughput>,
}

/// The input pipeline's throughput measured on its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoaderThroughput {
    /// Batches pulled (of this rank's size).
    pub batches: u64,
    /// Samples pulled.
    pub samples: u64,
    /// Seconds from starting the loader to the last batch.
    pub seconds: f64,
    /// Samples per second the loader delivered.
    pub samples_per_s: f64,
}

impl RunResult {
    /// The kept step times from the steady-state start on: the samples the statistics came from (every
    /// steady step below the step log's cap, a uniform sample of them above it).
    pub fn steady_step_times(&self) -> std::borrow::Cow<'_, [f64]> {
        use std::borrow::Cow;
        let Some(m) = &self.metrics else { return Cow::Borrowed(&[]) };
        let start = m.steady_state.start_index;
        match &m.step_indices {
            None => Cow::Borrowed(m.step_times_s.get(start..).unwrap_or(&[])),
            Some(indices) => Cow::Owned(
                indices.iter().zip(&m.step_times_s).filter(|(i, _)| **i >= start as u64).map(|(_, t)| *t).collect(),
            ),
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum RunOutcome {
    /// All planned iterations (or the whole time budget) were measured.
    Completed,
    /// The device ran out of memory; the sweep went on with the next run.
    OutOfMemory {
        /// Batch size that did not fit.
        batch_size: usize,
        /// The framework's message.
        message: String,
    },
    /// The run failed for another reason.
    Failed {
        /// What went wrong.
        message: String,
    },
    /// The run was stopped early (Ctrl-C or timeout); the iterations measured so far are kept.
    Interrupted {
        /// Why: `interrupted by user` or `timeout after N s`.
        reason: String,
    },
    /// The run was not attempted.
    Skipped {
        /// Why, e.g. a smaller batch of the same model already ran out of memory.
        reason: String,
    },
}

impl RunOutcome {
    /// Short name of the status as written in JSON (`completed`, `out_of_memory`, ...).
    pub fn status(&self) -> &'static str {
        match self {
            RunOutcome::Completed => "completed",
            RunOutcome::OutOfMemory { .. } => "out_of_memory",
            RunOutcome::Failed { .. } => "failed",
            RunOutcome::Interrupted { .. } => "interrupted",
            RunOutcome::Skipped { .. } => "skipped",
        }
    }
}
