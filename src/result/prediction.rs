//! The `prediction` section of a result: what the performance model (`crate::predict`) said the run's step
//! would take on the hardware profile of the machine it ran on, recorded beside the measurement so `report` can
//! put predicted against measured for every run; or why no prediction was made.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The model's prediction for the run's own configuration, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum PredictionSection {
    /// Predicted on the profile named in `profile`.
    Predicted(Box<RecordedPrediction>),
    /// No prediction was made.
    Absent {
        /// Why: no profile found, a profile calibrated on another backend or device, or one that lacks what the
        /// configuration needs (a link, a peak for the precision).
        reason: String,
    },
}

impl PredictionSection {
    /// The prediction, when one was made.
    pub fn predicted(&self) -> Option<&RecordedPrediction> {
        match self {
            PredictionSection::Predicted(p) => Some(p),
            PredictionSection::Absent { .. } => None,
        }
    }
}

/// Where the profile came from and what kind of figures it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileRef {
    /// The profile's `name`.
    pub name: String,
    /// Where it was read: a path, or `shipped:<name>` for a profile compiled into trainbench.
    pub origin: String,
    /// How it was chosen: `--hardware` (named on the command line) or `this-machine` (this machine's calibrated
    /// profile, `$TRAINBENCH_HARDWARE` or `hardware/this-machine.toml`, whose calibration matched the run's
    /// backend and device).
    pub chosen_by: String,
    /// Whether its figures were measured on a machine (`trainbench calibrate`) rather than taken from a datasheet.
    pub calibrated: bool,
    /// When the calibration was measured (RFC 3339), for calibrated profiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibrated_at: Option<String>,
    /// Backend and device selector the calibration measured (`tch cpu`), for calibrated profiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibrated_on: Option<String>,
}

/// Predicted seconds per phase of one step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PredictedPhases {
    /// Getting the batch onto the device: the copy over the host link plus the predicted wait for the input
    /// pipeline (`input_wait_s`).
    pub data_s: f64,
    /// Forward pass, loss included.
    pub forward_s: f64,
    /// Backward pass.
    pub backward_s: f64,
    /// Optimizer step.
    pub optimizer_s: f64,
    /// Gradient exchange.
    pub comm_s: f64,
}

/// Shares of the predicted serial step, in `0..=1`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PredictedShares {
    /// T_data / T_iter.
    pub data: f64,
    /// T_compute / T_iter (forward + backward + optimizer).
    pub compute: f64,
    /// T_comm / T_iter.
    pub comm: f64,
}

/// Where the predicted compute time goes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PredictedBound {
    /// Seconds of layer phases limited by FLOPs.
    pub compute_bound_s: f64,
    /// Seconds of layer phases and optimizer limited by bytes moved.
    pub memory_bound_s: f64,
    /// Seconds of fixed per-operation cost (dispatch, kernel launch).
    pub overhead_s: f64,
}

/// The input pipeline as the model counted it (runs reading a local dataset).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PredictedInput {
    /// The loader's own samples per second, measured before the run (`data.loader.samples_per_s`).
    pub loader_samples_per_s: f64,
    /// Seconds the loader takes for one device batch on its own.
    pub loader_batch_s: f64,
    /// Whether reading threads prefetch batches while the step computes (`dataset.workers > 0`).
    pub prefetched: bool,
    /// The predicted wait per step: the whole batch time without reading threads, else what the batch time
    /// exceeds the rest of the step by (0 when the pipeline keeps ahead).
    pub input_wait_s: f64,
}

/// One configuration's prediction as recorded in its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordedPrediction {
    /// The hardware profile predicted on.
    pub profile: ProfileRef,
    /// The model's version: which terms it has (see docs/performance-model.md).
    pub model: String,
    /// Workers the prediction assumed (the plan's world size).
    pub world_size: usize,
    /// Samples per device and step.
    pub per_device_batch: usize,
    /// Predicted serial step time (PAI's model, no overlap), seconds: what the measured step time is compared
    /// with.
    pub step_time_s: f64,
    /// Predicted step time with input prefetch and the exchange overlapped with backward, seconds.
    pub step_time_overlapped_s: f64,
    /// Global batch over the predicted serial step time.
    pub samples_per_s: f64,
    /// Predicted phases.
    pub phases: PredictedPhases,
    /// Data / compute / comm shares of the predicted serial step.
    pub shares: PredictedShares,
    /// Compute- vs memory-bound split of the predicted compute time.
    pub bound: PredictedBound,
    /// The exchange's link and formula (`none` without exchange).
    pub comm_link: String,
    /// Bytes each worker sends per step in the prediction.
    pub comm_bytes_per_worker: f64,
    /// The input pipeline term (runs reading a local dataset; absent for synthetic data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<PredictedInput>,
    /// The range the serial step time falls in with the interval's probability (80%), by the uncertainty of the
    /// terms that price it; absent in results recorded before predictions carried one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<PredictedInterval>,
}

/// A predicted step time's range.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PredictedInterval {
    /// The share of outcomes the range is meant to hold (0.8).
    pub level: f64,
    /// Shortest step time of the range, seconds.
    pub low_s: f64,
    /// Longest step time of the range, seconds.
    pub high_s: f64,
}
