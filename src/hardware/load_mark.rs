//! The mark a calibration keeps of the machine's load while it was measured (`calibration.load`), written by
//! `trainbench calibrate` (`crate::calibrate::machine_load`) and shown by `trainbench predict`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The machine's load over a calibration, against the limits of a quiet machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadMark {
    /// True when a figure was over its limit: the calibration was taken on a loaded machine (stored only with
    /// `calibrate --allow-loaded`); its figures hold the other work's share.
    pub loaded: bool,
    /// Each figure over its limit, with its value and limit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exceeded: Vec<String>,
    /// Logical cores the calibration could use.
    pub cores: u64,
    /// The largest load of other work per core seen (1-minute load average less the calibration's own threads,
    /// over the cores).
    #[schemars(range(min = 0.0))]
    pub others_per_core: f64,
    /// Share of the machine's CPU time stolen by the hypervisor over the calibration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_share: Option<f64>,
    /// Coefficient of variation of a fixed probe kernel timed between the suites.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_cv: Option<f64>,
    /// How far the machine's own speed moved over the calibration: the standard deviation of the log of the
    /// probe's median at each checkpoint. Judged against no limit; a prediction's interval carries it as a term
    /// common to the whole step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub probe_drift: Option<f64>,
    /// Limit of `others_per_core`.
    pub limit_others_per_core: f64,
    /// Limit of `steal_share`.
    pub limit_steal_share: f64,
    /// Limit of `probe_cv`.
    pub limit_probe_cv: f64,
    /// True when `--allow-loaded` was passed.
    pub allowed_loaded: bool,
}

impl LoadMark {
    /// The line `predict` shows for a loaded calibration (`None` for a quiet one).
    pub fn warning(&self) -> Option<String> {
        self.loaded.then(|| {
            format!(
                "calibrated on a loaded machine ({}): its figures hold other work's share",
                self.exceeded.join(", ")
            )
        })
    }
}
