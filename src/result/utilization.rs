//! Model and hardware FLOP utilisation (MFU, HFU) of a run, each beside the peak it divides by: the figure,
//! the arithmetic it is the rate of, where it comes from, and over how many devices it is summed.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::sampled::Sampled;

/// The peak a utilisation divides by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PeakUsed {
    /// The denominator, FLOP/s: one device's peak x `devices`.
    pub flop_per_s: f64,
    /// One device's peak, FLOP/s.
    pub per_device_flop_per_s: f64,
    /// Devices whose peaks are summed (the world size of a data-parallel run, 1 otherwise; every rank is
    /// taken to have rank 0's device).
    pub devices: usize,
    /// The arithmetic the peak is the rate of (`bf16`, `fp16`: dense tensor cores; `tf32`: dense TF32 tensor
    /// cores; `fp32`: plain fp32 or a CPU's fp32 GEMM rate).
    pub precision: String,
    /// Where the peak comes from (`table: H100 SXM bf16 tensor (dense)`, `measured: trainbench fp32 GEMM`).
    pub source: String,
}

/// Model FLOP utilisation: the model's FLOPs by a stated convention, at the run's throughput, over the peak of
/// the precision the run computes in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelFlopUtilization {
    /// Model FLOPs per training sample (the analysis's `model_flops.per_sample`).
    pub model_flops_per_sample: u64,
    /// How they are counted (the analysis's `model_flops.convention`).
    pub convention: String,
    /// Model FLOPs per sample x samples per second (all devices together).
    pub achieved_flop_per_s: f64,
    /// achieved / the peak's `flop_per_s`.
    pub mfu: f64,
    /// The denominator.
    pub peak: PeakUsed,
    /// Hardware FLOP utilisation, present when the run recomputes activations (activation checkpointing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hfu: Option<HardwareFlopUtilization>,
}

/// Hardware FLOP utilisation: the work the hardware did, recomputation included, over the same peak as MFU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HardwareFlopUtilization {
    /// Hardware FLOPs per sample: the analysis's training FLOPs plus the forward FLOPs recomputed.
    pub hardware_flops_per_sample: u64,
    /// Of those, the recomputed forward FLOPs.
    pub recomputed_flops_per_sample: u64,
    /// The checkpointing that recomputes them (`full`, `every_n`).
    pub checkpointing: String,
    /// Hardware FLOPs per sample x samples per second.
    pub achieved_flop_per_s: f64,
    /// achieved / the peak's `flop_per_s` (the same peak as MFU).
    pub hfu: f64,
}

/// MFU as a result records it: the figures, or why there are none (no analysis, no peak of the run's
/// precision).
pub type Mfu = Sampled<ModelFlopUtilization>;
