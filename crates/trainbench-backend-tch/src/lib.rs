//! trainbench's libtorch backend: lowers the workload graph to libtorch functional ops through tch and trains
//! it on the CPU or a CUDA device, timing each phase of every iteration.
//!
//! Construct it with [`TchBackend::new`] and drive it through the [`Backend`] trait: `check` refuses what it
//! cannot run (with the layer and the reason), `run` trains and measures.
//!
//! # What one run does
//! - Weights: every tensor `trainbench_graph::params::tensors` declares, with the values of
//!   `trainbench_graph::init::initial_values` (identical on every backend), fp32 master copies.
//! - Data: with synthetic data, a pool of up to 4 synthetic batches (`init::synthetic_input`, data steps 0..k)
//!   generated before the run in host memory (pinned on CUDA) and cycled; the data phase is the host-to-device
//!   copy of one batch (a no-copy handle on the CPU). With a dataset (`RunContext::data`), each step waits for
//!   the next host batch (the stall), checks it against the graph's inputs and copies it into tensors (pinned,
//!   non-blocking on CUDA; the conversion on the CPU): `data_s` = stall + copy. A dataset error fails the run
//!   with `BackendError::Data`.
//! - Target (time-to-accuracy): evaluation of the evaluation split under `no_grad` (losses and, for a
//!   cross-entropy loss, argmax accuracy of its logits), as often as the target says; the run ends at the target
//!   or its budget. Batch norm uses batch statistics in evaluation as in training.
//! - Forward: graph nodes in topological order, outputs freed after their last consumer; ReLU after
//!   convolution / batch norm / linear / add, and residual adds, run in place when their input has no other
//!   consumer (as torchvision does). Losses are averaged over the batch and summed.
//! - Backward, then the optimizer (`optim`): on CUDA the fused SGD / Adam / AdamW kernels through the shim
//!   (`fused`), with fp16's loss scale and found-infinity flag on the device; on the CPU libtorch's C++
//!   `torch::optim`. Gradients are set to none after each step.
//! - Precision: bf16 = autocast to bfloat16 (CPU or CUDA); fp16 = CUDA autocast to half with dynamic loss
//!   scaling (GradScaler semantics, initial scale `plan.numerics.loss_scale`), refused on the CPU. On CUDA the
//!   TF32 switches and cuDNN autotuning are set from `plan.numerics` and what libtorch reads back is recorded.
//! - Timing (`clock`): on the CPU host clocks between phases (ops are synchronous); on CUDA with
//!   `plan.phase_timing`, CUDA events at each phase boundary (`events`) and one synchronisation at the step's
//!   end, so phases are device time and the CPU still queues ahead; without it, only each step's total. After
//!   the measured steps, a CUDA run adds a free-running window (up to 50 steps, one synchronisation).
//! - Memory: weights, gradients and optimizer state from tensor sizes (the fused optimizers' state as
//!   allocated); on CUDA, the caching allocator's allocated bytes before and after each forward pass
//!   (activations), and peak allocated and peak reserved bytes over the measured iterations (reset after
//!   warm-up) through the C++ shim. libtorch's CPU allocator keeps no statistics, so CPU runs report `None`.
//! - Out of memory: any allocation failure (the caching allocator's, cuBLAS's and cuDNN's
//!   `*_STATUS_ALLOC_FAILED`, the host's) becomes [`BackendError::OutOfMemory`]; the run's tensors are dropped and
//!   the CUDA cache emptied, so the next run starts clean.
//! - Devices: each CUDA device reports its PCI bus id (the CUDA driver's), which tells NVML which GPU to sample;
//!   without a device, the refusal names the driver's CUDA version and libtorch's.
//!
//! # Lowering notes
//! - RoI align: proposals are the fixed grid of [`ops::roi_boxes`]; bins average `sampling_ratio^2` bilinear
//!   samples taken with `grid_sampler_2d` (torchvision's `roi_align` is not part of libtorch).
//! - Attention: `nn.MultiheadAttention` layout (packed or separate projections) with
//!   `scaled_dot_product_attention`, no attention dropout.
//! - Recurrent layers: `at::lstm` / `at::gru`, batch first, zero initial state; on CUDA with cuDNN the weights
//!   are flattened into one cuDNN buffer once per run (`_cudnn_rnn_flatten_weight`, as `flatten_parameters()`).
//! - Tied weights (`Node::tied_to`) are one tensor, counted and optimised once; sinusoidal position tables
//!   and RoI sampling grids are computed once per run.
//! - WGAN-GP (the zoo's `critic_batch` convention, see `train`): one critic step with gradient penalty, then
//!   one generator step with the critic frozen, each with its own optimizer built from the plan's optimizer
//!   spec; n_critic = 1; the reported loss is the critic's.

pub mod autograd;
pub mod calibrate;
pub mod check;
mod checkpoint;
mod clock;
pub mod device;
mod dist;
pub mod events;
pub mod feed;
pub mod fused;
pub mod loss;
pub mod lower;
pub mod nccl;
pub mod ops;
mod optim;
mod overlap;
pub mod shim;
mod step;
pub mod transformer_ops;
mod zero;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

use tch::{Device, TchError};
use trainbench_comm::GradientExchange;
use trainbench_contract::{Backend, BackendError, BackendKind, DeviceInfo, RawMeasurements, RunContext, RunPlan};
use trainbench_data::BatchSource;
use trainbench_graph::Graph;

/// The libtorch backend (CPU and CUDA).
#[derive(Debug, Default, Clone, Copy)]
pub struct TchBackend;

impl TchBackend {
    /// A backend instance; cheap, holds no device state between runs.
    pub fn new() -> Self {
        Self
    }
}

/// Set libtorch's intra-op threads for a run: `Some(n)` pins `n`, `None` restores the count libtorch chose at
/// start (one per core), so one run's setting never leaks into the next run in the process.
fn set_threads(threads: Option<u32>) {
    static DEFAULT: OnceLock<i32> = OnceLock::new();
    let default = *DEFAULT.get_or_init(tch::get_num_threads);
    let wanted = threads.map_or(default, |n| i32::try_from(n).unwrap_or(i32::MAX));
    if tch::get_num_threads() != wanted {
        tch::set_num_threads(wanted);
    }
}

/// Map a libtorch error of a run to the backend contract's error.
fn map_error(err: TchError, batch_size: usize) -> BackendError {
    let message = err.to_string();
    if BackendError::is_oom_message(&message) {
        // Keep the first line: libtorch appends a long C++ backtrace.
        let first = message.lines().next().unwrap_or("");
        let first = first.strip_prefix("Internal torch error: ").unwrap_or(first).to_string();
        BackendError::OutOfMemory { batch_size, message: first }
    } else {
        BackendError::Framework(message)
    }
}

impl Backend for TchBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Tch
    }

    fn devices(&self) -> Vec<DeviceInfo> {
        device::all()
    }

    fn check(&self, plan: &RunPlan, graph: &Graph) -> Result<(), BackendError> {
        check::check(plan, graph).map(|_| ())
    }

    /// libtorch starts its intra-op thread pool, initialises oneDNN and (on CUDA) cuBLAS/cuDNN handles and the
    /// caching allocator on first use: five iterations cover forward, backward and optimizer kernels.
    fn process_warmup_iterations(&self) -> u64 {
        5
    }

    fn calibrate(
        &mut self,
        request: &trainbench_contract::calibrate::CalibrationRequest,
    ) -> Result<trainbench_contract::calibrate::Measurement, BackendError> {
        let dev = device::to_tch(request.device)?;
        set_threads(request.cpu_threads);
        match catch_unwind(AssertUnwindSafe(|| calibrate::calibrate(request, dev))) {
            Ok(r) => r.map_err(calibrate::map),
            Err(panic) => Err(BackendError::from_panic(panic.as_ref(), 0, "libtorch call panicked")),
        }
    }

    fn run_in(
        &mut self,
        plan: &RunPlan,
        graph: &Graph,
        ctx: &mut RunContext<'_>,
    ) -> Result<RawMeasurements, BackendError> {
        let dev = check::check(plan, graph)?;
        let probe = &mut *ctx.probe;
        let source = ctx.data.as_deref_mut().map(|d| -> &mut dyn BatchSource { d });
        let eval = ctx.eval;
        // Re-borrowed for this call (the closure shortens the trait object's lifetime to the borrow's).
        let given = ctx.exchange.as_deref_mut().map(|x| -> &mut dyn GradientExchange { x });
        let exchange = check::exchange_for(plan, graph, given)?;
        set_threads(plan.cpu_threads);
        let wgan = check::wgan_roles_if_any(graph)?;
        // Everything a run allocates lives inside this closure, so it is freed before the cache is emptied.
        let result = catch_unwind(AssertUnwindSafe(|| -> Result<RawMeasurements, BackendError> {
            let mut session = step::Session::new(plan, graph, dev, wgan, exchange, source.is_none())
                .map_err(|e| map_error(e, plan.batch_size))?;
            session.run(probe, source, eval)
        }));
        let result = match result {
            Ok(r) => r,
            Err(panic) => Err(BackendError::from_panic(panic.as_ref(), plan.batch_size, "libtorch call panicked")),
        };
        if let Device::Cuda(_) = dev {
            // Return cached blocks so that the next run (e.g. a smaller batch after an OOM) starts clean.
            let _ = shim::cuda_empty_cache();
        }
        let mut raw = result?;
        raw.device = Some(device::info(dev));
        raw.versions = device::versions(dev);
        Ok(raw)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn oom_messages_are_recognised() {
        let e = map_error(TchError::Torch("CUDA out of memory. Tried\nbacktrace".into()), 64);
        assert_eq!(e, BackendError::OutOfMemory { batch_size: 64, message: "CUDA out of memory. Tried".into() });
        // Every way libtorch 2.13 and the CUDA libraries say an allocation failed, as tch hands them over.
        for (raw, first) in [
            (
                "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of \
                 139.80 GiB of which 1.2 GiB is free.\nException raised from malloc",
                "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 139.80 GiB of which \
                 1.2 GiB is free.",
            ),
            (
                "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported",
                "CUDA error: out of memory",
            ),
            (
                "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\nframe #0",
                "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
            ),
            ("cuDNN error: CUDNN_STATUS_ALLOC_FAILED\nException raised from", "cuDNN error: CUDNN_STATUS_ALLOC_FAILED"),
            (
                "DefaultCPUAllocator: not enough memory: you tried to allocate 8589934592 bytes.",
                "DefaultCPUAllocator: not enough memory: you tried to allocate 8589934592 bytes.",
            ),
        ] {
            assert_eq!(
                map_error(TchError::Torch(raw.into()), 8),
                BackendError::OutOfMemory { batch_size: 8, message: first.into() },
                "{raw}"
            );
        }
        // Not allocation failures.
        for raw in ["CUDA error: an illegal memory access was encountered", "cuDNN error: CUDNN_STATUS_BAD_PARAM"] {
            assert!(matches!(map_error(TchError::Torch(raw.into()), 8), BackendError::Framework(_)), "{raw}");
        }
    }
}
