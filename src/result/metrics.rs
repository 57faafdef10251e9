//! [`Metrics`]: everything measured in one run (throughput, step times, phases, utilization, power, memory, loss,
//! expert load).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use trainbench_contract::target::TargetOutcome;

use super::analysis::MemoryEstimate;
use super::expert_load::ExpertLoad;
use super::sampled::Sampled;
use super::utilization::Mfu;

/// Everything measured in one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Metrics {
    /// Steady-state throughput.
    pub throughput: Throughput,
    /// Statistics of the whole-iteration time over the steady-state samples.
    pub step_time: StepTimeStats,
    /// Whole-iteration time of the kept measured iterations, in seconds, in order (warm-up excluded): every
    /// iteration up to 10,000 of them, beyond that a uniform sample of 10,000 whose indices are in
    /// `step_indices`. [`RunResult::steady_step_times`] gives the ones from the steady-state start on, which the
    /// statistics use and comparisons bootstrap from.
    pub step_times_s: Vec<f64>,
    /// Measured iterations in all (older results: absent, and `step_times_s` holds every one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_seen: Option<u64>,
    /// Iterations kept in `step_times_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_kept: Option<u64>,
    /// When the kept iterations are a sample (`samples_seen` > `samples_kept`): the index of each among the
    /// measured iterations, in order; absent when every iteration is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_indices: Option<Vec<u64>>,
    /// How the warm-up transient was removed.
    pub steady_state: SteadyState,
    /// Mean time and share of each phase of an iteration.
    pub phases: PhaseBreakdown,
    /// Device compute utilisation (NVML).
    pub gpu: Sampled<GpuUtilization>,
    /// Achieved FLOP/s against the device's peak.
    pub flops: FlopUtilization,
    /// Process CPU utilisation and resident memory.
    pub cpu: Sampled<CpuUtilization>,
    /// Power draw and energy (NVML).
    pub power: Sampled<PowerEnergy>,
    /// Memory split by data structure, measured and estimated.
    pub memory: MemoryBreakdown,
    /// Training loss at the first and last measured iteration; `null` if the backend reported none.
    pub loss: Option<LossSummary>,
    /// Time-to-accuracy of a run with a target (`[training.target]`): the evaluation curve and the time, steps
    /// and epochs to the target; absent without a target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_target: Option<TargetOutcome>,
    /// A mixture-of-experts model's routing over the measured steps: tokens per expert per layer, the load's
    /// coefficient of variation, the busiest expert's share, tokens dropped and the load-balancing loss; absent
    /// for a model without MoE layers or a backend that does not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_load: Option<ExpertLoad>,
    /// The L2 norm of the gradient the optimizer stepped with at the first and last measured iteration, over
    /// the whole model (the sum of every rank's share of it: each value counted once over the mesh); absent
    /// where the backend cannot see it (wgpu, parameter servers, WGAN-GP) and in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gradient_norm: Option<GradientNorm>,
    /// The L2 norm of each trained tensor of the whole model after the last measured iteration (gathered from
    /// its shards and stages), in the order one rank holds them: what a layout's run is compared with one
    /// rank's by; absent where the backend does not record it and in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_norms: Option<Vec<f64>>,
}

/// Steady-state throughput: samples over the summed step times of the steady-state iterations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Throughput {
    /// Training samples per second (batch size x steady iterations / their summed time).
    pub samples_per_s: f64,
    /// Items per second, where an item is `item_unit` (tokens for sequence models; equals samples otherwise).
    pub items_per_s: f64,
    /// Unit of `items_per_s` (`samples`, `tokens`, `frames`).
    pub item_unit: String,
    /// Items counted per sample (a sequence model's tokens per sequence; padding is not counted).
    pub items_per_sample: u64,
    /// `items_per_s` per device: over the world size of a data-parallel run, equal to it otherwise; absent in
    /// older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items_per_s_per_device: Option<f64>,
    /// CUDA: the free-running window after the measured steps (no synchronisation between steps). The
    /// headline `samples_per_s` above is the per-step figure, which every backend reports alike and every
    /// statistic (steady state, intervals, comparisons) is computed from; this one is what a loop that never
    /// waits for the device sustains. `null` where steps are synchronous anyway (the CPU) or there was none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_running: Option<FreeRunningThroughput>,
}

/// Throughput of the free-running window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FreeRunningThroughput {
    /// Steps in the window.
    pub steps: u64,
    /// Seconds from its first step to the synchronisation after its last.
    pub seconds: f64,
    /// Training samples per second over the window.
    pub samples_per_s: f64,
    /// `samples_per_s` over the headline per-step figure (above 1: the per-step synchronisation cost that much).
    pub ratio_to_per_step: f64,
}

/// Summary statistics of step times, in seconds. Quantiles use linear interpolation between order statistics
/// (Hyndman & Fan type 7, the default of NumPy and R).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepTimeStats {
    /// Number of samples the statistics are computed from.
    pub n: usize,
    /// Arithmetic mean.
    pub mean_s: f64,
    /// Median.
    pub median_s: f64,
    /// 5th percentile.
    pub p5_s: f64,
    /// 95th percentile.
    pub p95_s: f64,
    /// 99th percentile.
    pub p99_s: f64,
    /// Sample standard deviation (n - 1 denominator; 0 for a single sample).
    pub stdev_s: f64,
    /// Coefficient of variation: stdev / mean.
    pub cv: f64,
    /// Fastest iteration.
    pub min_s: f64,
    /// Slowest iteration.
    pub max_s: f64,
    /// Iterations outside Tukey's fences (below Q1 - 1.5 IQR or above Q3 + 1.5 IQR); kept in the statistics.
    pub outliers: usize,
    /// Bootstrap 95% confidence interval of the median, `[low, high]` (seeded, deterministic), from the kept
    /// steady-state samples.
    pub median_ci95_s: [f64; 2],
    /// Past the step log's cap (`metrics.samples_seen` > `metrics.samples_kept`), the percentiles, the median
    /// and the outlier count come from a quantile sketch, within this relative error; absent when they are
    /// exact (every step kept). Count, mean, stdev, min and max are exact either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentile_relative_error: Option<f64>,
}

/// How the warm-up transient was cut from the measured iterations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SteadyState {
    /// Warm-up iterations run and discarded before measuring (from the plan).
    pub warmup_iterations: u64,
    /// Detection method applied to the measured iterations (`mser-5`).
    pub method: String,
    /// Index of the first measured iteration counted as steady state; earlier ones are excluded.
    pub start_index: usize,
    /// Measured iterations excluded as transient (equals `start_index`).
    pub truncated: usize,
    /// False when the truncation reached its cap (half the measured iterations): the run may have ended
    /// before reaching steady state; measure more iterations.
    pub reached: bool,
}

/// Mean time and share of one phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PhaseStat {
    /// Mean seconds per iteration.
    pub mean_s: f64,
    /// Share of the mean iteration time, in `0..=1`.
    pub share: f64,
}

/// Where the time of an iteration goes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PhaseBreakdown {
    /// True when the device was synchronised between phases, so the split is exact; false means phases
    /// overlap asynchronously and only `total` is trustworthy.
    pub synchronised: bool,
    /// Producing and transferring the input batch (`data_stall` + `data_copy`).
    pub data: PhaseStat,
    /// Of `data`, waiting for the next batch from the dataset pipeline (0 with synthetic data): its share is
    /// the run's stall share, how input-bound it is.
    #[serde(default)]
    pub data_stall: PhaseStat,
    /// Of `data`, moving the batch onto the device (host-to-device copy; on the CPU, the conversion into a
    /// tensor).
    #[serde(default)]
    pub data_copy: PhaseStat,
    /// Forward pass including the loss.
    pub forward: PhaseStat,
    /// Backward pass.
    pub backward: PhaseStat,
    /// Gradient communication.
    pub comm: PhaseStat,
    /// Optimizer step.
    pub optimizer: PhaseStat,
    /// Time of the iteration not attributed to any phase (total minus the phases, at least 0).
    pub other: PhaseStat,
}

/// GPU figures sampled by NVML during the measured iterations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuUtilization {
    /// NVML index of the sampled device.
    pub device_index: u32,
    /// Samples taken.
    pub samples: usize,
    /// Mean percent of time a kernel was running (NVML `utilization.gpu`), 0-100.
    pub utilization_mean_percent: f64,
    /// Highest sampled utilisation, 0-100.
    pub utilization_max_percent: f64,
    /// Mean percent of time device memory was read or written, 0-100.
    pub memory_utilization_mean_percent: f64,
    /// Highest device memory in use (all processes), bytes.
    pub memory_used_max_bytes: u64,
    /// Highest device memory NVML attributes to this process, bytes; `null` when NVML cannot tell (e.g. a
    /// container whose process ids differ from the host's).
    pub process_memory_max_bytes: Option<u64>,
    /// Mean SM clock, MHz.
    pub sm_clock_mean_mhz: f64,
    /// Highest temperature, degrees Celsius.
    pub temperature_max_c: f64,
    /// What the figures cover when it is more than the run's device (`gpu-wide: ...` for a MIG instance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// Achieved floating-point rate against the device peak (FLOPs from the static analysis).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlopUtilization {
    /// Training FLOPs per sample (forward + backward) from the analysis; `null` when the analysis failed.
    pub flops_per_sample: Option<u64>,
    /// Achieved FLOP/s: FLOPs per sample x samples per second (all devices of a data-parallel run together).
    pub achieved_flop_per_s: Option<f64>,
    /// Peak FLOP/s for the run's precision, summed over the devices (the world size of a data-parallel run);
    /// `null` when unknown.
    pub peak_flop_per_s: Option<f64>,
    /// Where the peak comes from (`table: NVIDIA H100 SXM fp32`, `measured: fp32 GEMM`, `backend`), with
    /// `x N devices` when summed.
    pub peak_source: Option<String>,
    /// The arithmetic the peak is the rate of (`bf16`, `fp16`, `tf32`, `fp32`); absent in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_precision: Option<String>,
    /// achieved / peak.
    pub fraction: Option<f64>,
    /// Model FLOP utilisation (and HFU under activation checkpointing) over the peak of the precision the run
    /// computes in, or why it is unavailable; absent in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mfu: Option<Mfu>,
    /// CUDA: the TF32 switches the run used (read back from libtorch); with either on, fp32 runs are measured
    /// against the TF32 tensor-core peak. `null` where TF32 does not exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf32: Option<trainbench_contract::Tf32>,
}

/// Process CPU figures sampled during the measured iterations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CpuUtilization {
    /// Logical cores available to the process.
    pub cores: usize,
    /// Process CPU time (user + system) over wall time x cores, in `0..=1` (TBD's definition).
    pub utilization: f64,
    /// Process CPU time over wall time, in cores (1.0 = one core busy).
    pub busy_cores: f64,
    /// Mean resident set size, bytes.
    pub rss_mean_bytes: u64,
    /// Highest sampled resident set size, bytes.
    pub rss_max_bytes: u64,
    /// Samples taken.
    pub samples: usize,
}

/// Power and energy of the device during the measured iterations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PowerEnergy {
    /// Mean power draw, watts.
    pub mean_power_w: f64,
    /// Highest sampled power draw, watts.
    pub max_power_w: f64,
    /// Energy over the measured window, joules.
    pub energy_j: f64,
    /// Energy per training sample, joules.
    pub energy_per_sample_j: f64,
    /// How energy was obtained: `counter` (NVML total-energy counter) or `integrated` (power samples x time).
    pub method: String,
    /// What the figures cover when it is more than the run's device (`gpu-wide: ...` for a MIG instance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// Memory by data structure: what the backend measured next to what the analysis predicts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryBreakdown {
    /// Measured by the backend from its tensors and allocator.
    pub measured: MemoryMeasuredSummary,
    /// Predicted by the static analysis; `null` when the analysis failed.
    pub estimate: Option<MemoryEstimate>,
    /// The estimate's error against the measured allocator peak: estimated total / peak - 1 (negative: the
    /// analysis predicts less than was allocated); `null` without both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate_error: Option<f64>,
}

/// Memory measured by the backend, bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryMeasuredSummary {
    /// Parameter tensors.
    pub weights_bytes: u64,
    /// Gradient tensors.
    pub gradients_bytes: u64,
    /// Optimizer state tensors.
    pub optimizer_state_bytes: u64,
    /// Peak allocated minus weights, gradients and optimizer state (at least 0): feature maps, their
    /// gradients and framework workspace; `null` without an allocator peak.
    pub activations_and_workspace_bytes: Option<u64>,
    /// Peak bytes allocated by the framework allocator; `null` when the backend cannot tell.
    pub peak_allocated_bytes: Option<u64>,
    /// Bytes reserved by the allocator (allocated + cached); `null` when the backend cannot tell.
    pub reserved_bytes: Option<u64>,
    /// What the forward pass leaves allocated for backward (saved feature maps, masks, the loss): allocated
    /// bytes after it minus before it, the largest over the measured steps; `null` where the allocator keeps
    /// no statistics (the CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activations_bytes: Option<u64>,
    /// Peak allocated minus weights, gradients, optimizer state and activations (at least 0): cuDNN and cuBLAS
    /// workspaces, gradients of feature maps in flight, allocator rounding; `null` without both measurements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_bytes: Option<u64>,
    /// Weights + gradients + optimizer state + activations + workspace over the peak: 1 when the parts fit in
    /// the peak, above 1 by as much as they overlap less than assumed (gradients set to none do not all exist
    /// at the peak); `null` without both measurements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breakdown_to_peak: Option<f64>,
}

/// Training loss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LossSummary {
    /// Loss at the first measured iteration (`null` if not finite).
    pub first: Option<f64>,
    /// Loss at the last measured iteration (`null` if not finite).
    pub last: Option<f64>,
    /// True when every reported loss was finite.
    pub all_finite: bool,
}

/// The gradient's L2 norm over the whole model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GradientNorm {
    /// At the first measured iteration (`null` if not finite: an fp16 step skipped on overflow).
    pub first: Option<f64>,
    /// At the last measured iteration (`null` if not finite).
    pub last: Option<f64>,
}
