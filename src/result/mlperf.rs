//! [`MlperfRecord`]: what a published MLPerf Training log says about its run, kept in a result imported by
//! `trainbench import mlperf` (its time to train, submission fields, hyperparameters and system description).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An imported MLPerf run, as its log and its system description state it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MlperfRecord {
    /// The log file it was read from.
    pub source: String,
    /// The system folder's name (`results/<system>/`).
    pub system: String,
    /// `submission_benchmark` (else the benchmark folder's name).
    pub benchmark: String,
    /// `submission_division`, `submission_org`, `submission_platform`, `submission_status`, as logged.
    pub submission: BTreeMap<String, Value>,
    /// `run_start`, milliseconds since the Unix epoch.
    pub run_start_ms: i64,
    /// Seconds from `run_start` to `run_stop`.
    pub run_s: f64,
    /// Whether `run_stop`'s status is `success`: then `run_s` is the run's time to train.
    pub converged: bool,
    /// The logged hyperparameters and sizes (`global_batch_size`, `opt_*`, `seed`, `train_samples`, ...).
    pub hyperparameters: BTreeMap<String, Value>,
    /// Each `eval_accuracy`: `samples_count` (or `epoch_num`) and the value.
    pub evals: Vec<(f64, f64)>,
    /// The system description JSON beside the results (`systems/<system>.json`); absent when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_description: Option<BTreeMap<String, Value>>,
}

impl MlperfRecord {
    /// The time to train in seconds, for a run that converged.
    pub fn time_to_train_s(&self) -> Option<f64> {
        self.converged.then_some(self.run_s)
    }
}
