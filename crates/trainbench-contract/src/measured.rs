//! What a backend measured in one run ([`RawMeasurements`]: the steps, memory, device, versions, MoE routing),
//! the figures it is built from ([`MemoryMeasured`], [`FreeRunning`], [`DeviceInfo`]) and the weights' digest
//! workers compare.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::numerics::Tf32;
use crate::routing::RoutingTally;
use crate::steplog::{StepLog, WarmupSteps};
use crate::target::TargetOutcome;

/// Memory figures measured by a backend, in bytes; `None` where the backend cannot tell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryMeasured {
    /// Bytes of parameter tensors.
    pub weights: u64,
    /// Bytes of gradient tensors.
    pub gradients: u64,
    /// Bytes of optimizer state tensors (momentum, moments).
    pub optimizer_state: u64,
    /// Peak bytes allocated by the framework allocator during measured steps.
    pub peak_allocated: Option<u64>,
    /// Bytes reserved by the framework allocator (allocated + cached).
    pub reserved: Option<u64>,
    /// Bytes the forward pass left allocated for backward (saved activations, the loss), measured as the
    /// allocator's allocated bytes after the forward pass minus before it (largest over measured steps);
    /// `None` where the allocator keeps no statistics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activations: Option<u64>,
}

/// A free-running window: steps run back to back with no synchronisation and no per-step reading of results,
/// then one synchronisation, as a training loop that never looks at its loss runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FreeRunning {
    /// Steps in the window.
    pub steps: u64,
    /// Wall-clock seconds from the window's first step to the synchronisation after its last.
    pub seconds: f64,
}

/// A device a backend can run on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceInfo {
    /// Selector that picks it (`cpu`, `cuda:0`, `wgpu:1`).
    pub selector: String,
    /// Human-readable name.
    pub name: String,
    /// Kind: `cpu`, `cuda`, `discrete-gpu`, `integrated-gpu`, `software`.
    pub kind: String,
    /// Device memory in bytes, if known.
    pub memory_bytes: Option<u64>,
    /// Peak fp32 FLOP/s, if known (table or measured).
    pub peak_flops_fp32: Option<f64>,
    /// Free-form details (driver, API, compute capability).
    pub details: BTreeMap<String, String>,
}

/// What an expert-parallel rank's communication moved and took over a run (warm-up included): the
/// all-to-alls of the dispatch and the combine (forward and backward, and the counts before them) and the
/// all-reduce of the experts' gradients over the ranks holding the same experts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExpertTraffic {
    /// Ranks each expert-parallel group shards the experts over.
    pub degree: usize,
    /// Optimizer steps the figures cover.
    pub steps: u64,
    /// All-to-all calls.
    pub all_to_all_calls: u64,
    /// Bytes this rank passed to its all-to-alls (its whole send buffers, fp32; its own block included).
    pub all_to_all_bytes: u64,
    /// Seconds this rank spent in all-to-all calls (waiting for its peers included).
    pub all_to_all_s: f64,
    /// Bytes of expert gradients this rank all-reduced over its replicas (its whole buffer, fp32).
    pub expert_gradient_bytes: u64,
}

/// Everything a backend measured in one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RawMeasurements {
    /// The warm-up iterations: how many, the first and the last.
    pub warmup_steps: WarmupSteps,
    /// The measured iterations' phase times and losses, in memory bounded whatever the run's length
    /// ([`crate::steplog::StepLog`]).
    pub steps: StepLog,
    /// Memory.
    pub memory: MemoryMeasured,
    /// The device actually used.
    pub device: Option<DeviceInfo>,
    /// Library versions the backend ran with (`libtorch`, `cuda`, `cudnn`, `burn`, `wgpu`...).
    pub versions: BTreeMap<String, String>,
    /// True when the run was stopped early (interrupt or timeout); the steps so far are kept.
    pub interrupted: bool,
    /// Data-parallel workers: a digest of the trained weights after the last step ([`weights_digest`]), which
    /// must be the same on every worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights_digest: Option<String>,
    /// With a training target ([`crate::plan::RunPlan::target`]): the evaluations and whether and when the
    /// target was reached; `None` without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetOutcome>,
    /// A free-running window after the measured steps (CUDA: kernels queue ahead of the device); `None` where
    /// every step is synchronous anyway (the CPU) or the run had none (a target, several workers, a stop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_running: Option<FreeRunning>,
    /// The TF32 switches the run used, as read back from the framework; `None` where TF32 does not exist (the
    /// CPU, wgpu).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf32: Option<Tf32>,
    /// A mixture-of-experts model's routing over the measured steps (tokens per expert, dropped, the
    /// load-balancing loss), as this worker routed its own tokens; `None` for a model without MoE layers or a
    /// backend that does not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<RoutingTally>,
    /// A pipeline-parallel run: what this rank's stage measured; `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<PipelineMeasured>,
    /// A rank of a tensor group: what it sent over the group per step ([`TensorTraffic`]); `None` elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_traffic: Option<TensorTraffic>,
    /// An expert-parallel rank's communication ([`ExpertTraffic`]); `None` without expert parallelism.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert: Option<ExpertTraffic>,
    /// The squared L2 norm of the gradient the optimizer stepped with, at the first and last measured step, as
    /// far as this rank owns it ([`GradientSquares`]); `None` where the backend cannot see that gradient.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gradient_squares: Option<GradientSquares>,
    /// The L2 norm of each trained tensor of the whole model after the last step (gathered from the ranks that
    /// hold its shards or stages), in the order one rank holds them; on the rank that gathers them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_norms: Option<Vec<f64>>,
}

/// The sum of the squares of the gradient values a rank owns, at the first and last measured step: the gradient
/// the optimizer steps with (the mean over the data-parallel replicas, unscaled), each value counted once over
/// the whole mesh (a value every rank of a group holds is weighted by one over the group's size), so the sum
/// over the ranks is the squared norm of one rank's gradient of the same global batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct GradientSquares {
    /// At the first measured step.
    pub first: f64,
    /// At the last measured step.
    pub last: f64,
    /// Measured steps that recorded one.
    pub steps: u64,
}

impl GradientSquares {
    /// `squares` recorded as the latest measured step's (the first too when `track` is empty).
    pub fn record(track: &mut Option<GradientSquares>, squares: f64) {
        match track {
            Some(t) => {
                t.last = squares;
                t.steps += 1;
            }
            None => *track = Some(GradientSquares { first: squares, last: squares, steps: 1 }),
        }
    }

    /// The ranks' tracks summed (the whole mesh's squares); `None` when any rank has none or the ranks recorded
    /// different numbers of steps.
    pub fn sum<'a>(tracks: impl IntoIterator<Item = Option<&'a GradientSquares>>) -> Option<GradientSquares> {
        let mut total: Option<GradientSquares> = None;
        for t in tracks {
            let t = t?;
            total = Some(match total {
                None => *t,
                Some(s) if s.steps == t.steps => {
                    GradientSquares { first: s.first + t.first, last: s.last + t.last, steps: s.steps }
                }
                Some(_) => return None,
            });
        }
        total
    }
}

/// What one pipeline rank measured over the measured steps of a pipeline-parallel run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PipelineMeasured {
    /// Pipeline rank (stage).
    pub stage: usize,
    /// The model chunks it ran, in model order.
    pub chunks: Vec<usize>,
    /// Mean seconds per measured step blocked waiting for a peer: its sends and receives and the agreement that
    /// ends each step.
    pub idle_s: f64,
    /// Mean seconds per measured step.
    pub step_s: f64,
    /// Bytes it sent to other stages per step (activations forward, their gradients back).
    pub bytes_sent_per_step: u64,
    /// Micro-batches (chunk micro-batches when interleaved) whose activations it held at once, at most.
    pub microbatches_held: usize,
    /// Bytes it sent per step averaging its gradients over its stage's replicas (the data-parallel dimension),
    /// as a ring all-reduce moves them (`2 (d - 1) / d` of the values it passed); 0 with one replica.
    #[serde(default)]
    pub data_bytes_per_step: u64,
}

/// Bytes one rank of a tensor group sends over the group per training step, by kind of collective, as ring
/// algorithms move them (an all-reduce of `S` bytes over `t` ranks sends `2 (t - 1) / t x S`, an all-gather of
/// a block of `S` bytes `(t - 1) x S`, a reduce-scatter of `S` bytes `(t - 1) / t x S`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TensorTraffic {
    /// By all-reduces (tensor parallelism's copy and reduce, the vocabulary-parallel loss).
    pub all_reduce: u64,
    /// By all-gathers (sequence parallelism's gathers, the loss's maximum).
    pub all_gather: u64,
    /// By reduce-scatters (sequence parallelism's scatters).
    pub reduce_scatter: u64,
}

/// A digest of weights (FNV-1a over the bits of every value, in order), as 16 hex digits: equal weights give
/// equal digests, and a single flipped bit changes it.
pub fn weights_digest<'a>(tensors: impl IntoIterator<Item = &'a [f32]>) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for t in tensors {
        for v in t {
            for b in v.to_bits().to_le_bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::GradientSquares;

    #[test]
    fn gradient_squares_keep_the_first_and_last_step_and_sum_over_ranks_only_when_they_agree() {
        let mut a = None;
        for s in [4.0, 3.0, 2.0] {
            GradientSquares::record(&mut a, s);
        }
        assert_eq!(a, Some(GradientSquares { first: 4.0, last: 2.0, steps: 3 }));
        let b = GradientSquares { first: 1.0, last: 0.5, steps: 3 };
        assert_eq!(
            GradientSquares::sum([a.as_ref(), Some(&b)]),
            Some(GradientSquares { first: 5.0, last: 2.5, steps: 3 })
        );
        // A rank that recorded none, or another number of steps, leaves the mesh without a norm.
        assert_eq!(GradientSquares::sum([a.as_ref(), None]), None);
        let short = GradientSquares { steps: 2, ..b };
        assert_eq!(GradientSquares::sum([a.as_ref(), Some(&short)]), None);
    }
}
