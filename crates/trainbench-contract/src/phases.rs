//! Where one training iteration's time went: [`PhaseTimes`], the figure every backend reports per step.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Wall-clock seconds spent in each phase of one training iteration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PhaseTimes {
    /// Producing and transferring the input batch: [`PhaseTimes::stall_s`] + [`PhaseTimes::copy_s`].
    pub data_s: f64,
    /// Of `data_s`, the time the training loop waited for its next batch from the dataset pipeline (0 with
    /// synthetic data, whose batches are ready before the run starts).
    #[serde(default)]
    pub stall_s: f64,
    /// Of `data_s`, moving the batch onto the device: the host-to-device copy on an accelerator (from pinned
    /// memory on CUDA), the conversion of the host values into a tensor on the CPU.
    #[serde(default)]
    pub copy_s: f64,
    /// Forward pass including the loss.
    pub forward_s: f64,
    /// Backward pass.
    pub backward_s: f64,
    /// Gradient communication (0 on a single device).
    pub comm_s: f64,
    /// Optimizer step.
    pub optimizer_s: f64,
    /// Whole iteration, end to end.
    pub total_s: f64,
}
