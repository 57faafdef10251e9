//! The backend boundary: what a run asks of a backend ([`RunPlan`]), what it gets back ([`RawMeasurements`]).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::capability::BackendKind;
use crate::device::DeviceSelector;
pub use crate::target::{TargetOutcome, TargetPlan};
use trainbench_comm::{GradientExchange, Topology};
use trainbench_data::{BatchSource, EvalSet};
use trainbench_graph::graph::Graph;
use trainbench_graph::training::{OptimizerSpec, Precision};

/// How iterations of one run are bounded after warm-up.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    /// A fixed number of measured iterations.
    Iterations(u64),
    /// Measure for this many seconds (at least one iteration).
    Seconds(f64),
}

/// One fully resolved run: what the runner asks a backend to execute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunPlan {
    /// Stable identifier, e.g. `resnet50.b32.fp32.1x1.r0`; also the result file stem.
    pub id: String,
    /// The configuration this run is a repeat of: the identifier without its `.r<repeat>` suffix
    /// (`resnet50.b32.fp32.1x1`), which compare, report and check group repeats by. Empty in results written
    /// before it was stored (and then left out when such a result is written again).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub config: String,
    /// Global batch size (summed over data-parallel workers).
    pub batch_size: usize,
    /// Precision.
    pub precision: Precision,
    /// The device it runs on (`cpu`, `cuda:0`, `wgpu`, ...): the spec's (or `--device`), mapped when the spec
    /// was planned to a device the suite's backend drives.
    pub device: DeviceSelector,
    /// Machines, workers per machine, the strategy combining their gradients and the link between them
    /// (written flat: `world_size`, `strategy`, `nodes`, `devices_per_node`, `interconnect`).
    #[serde(flatten)]
    pub topology: Topology,
    /// Warm-up iterations (not measured).
    pub warmup: u64,
    /// Measured iterations or time budget.
    pub budget: Budget,
    /// Repeat index (0-based).
    pub repeat: u32,
    /// Seed for weights and synthetic data (spec seed + repeat).
    pub seed: u64,
    /// Optimizer.
    pub optimizer: OptimizerSpec,
    /// Synchronise the device between phases so per-phase times are true (costs a little throughput).
    pub phase_timing: bool,
    /// Per-run timeout in seconds, if any.
    pub timeout_s: Option<f64>,
    /// Intra-op CPU threads the backend may use; `None` keeps the library's default (one per core).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_threads: Option<u32>,
    /// Train to a target instead of for a fixed budget (time-to-accuracy): the metric, its value, how often
    /// the evaluation split is evaluated and the budget that ends a run that never gets there. `None` trains
    /// for `budget` as usual.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetPlan>,
    /// TF32 switches, cuDNN autotuning and fp16's initial loss scale (left out of the JSON when they are the
    /// defaults: PyTorch's).
    #[serde(default, skip_serializing_if = "crate::Numerics::is_default")]
    pub numerics: crate::Numerics,
    /// Activation checkpointing and gradient accumulation (left out of the JSON when neither is used).
    /// With accumulation, `batch_size` is one micro-batch and a step trains on `grad_accumulation` of them.
    #[serde(default, skip_serializing_if = "trainbench_graph::training::StepSchedule::is_default")]
    pub schedule: trainbench_graph::training::StepSchedule,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_errors_and_allocation_failures_out_of_memory() {
        let oom = std::panic::catch_unwind(|| panic!("CUDA out of memory. Tried to allocate 2.00 GiB")).unwrap_err();
        assert!(matches!(
            BackendError::from_panic(oom.as_ref(), 8, "x"),
            BackendError::OutOfMemory { batch_size: 8, .. }
        ));
        let other = std::panic::catch_unwind(|| panic!("{}", String::from("shape mismatch"))).unwrap_err();
        assert_eq!(
            BackendError::from_panic(other.as_ref(), 8, "libtorch call panicked"),
            BackendError::Framework("libtorch call panicked: shape mismatch".into())
        );
        assert!(BackendError::is_oom_message(
            "DefaultCPUAllocator: not enough memory: you tried to allocate 1000 bytes"
        ));
        assert!(!BackendError::is_oom_message("shape mismatch"));
        for variant in [
            "CUDA error: out of memory",
            "CUDA out of memory. Tried to allocate 20.00 MiB",
            "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
            "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
        ] {
            assert!(BackendError::is_oom_message(variant), "{variant}");
        }
    }
}

impl RunPlan {
    /// Samples one optimizer step trains on: `batch_size` per micro-batch times the micro-batches of the
    /// schedule (gradient accumulation).
    pub fn samples_per_step(&self) -> u64 {
        self.batch_size as u64 * self.schedule.micro_batches()
    }
}

#[cfg(any(test, feature = "testing"))]
impl RunPlan {
    /// A small plan for tests: the CPU, fp32, `iterations` measured steps after one warm-up
    /// step, batch 4, seed 7, SGD with lr 0.01 (override fields with struct update syntax); its configuration
    /// is `id` itself (repeat 0 of a configuration of that name).
    pub fn for_tests(id: &str, iterations: u64) -> Self {
        RunPlan {
            id: id.to_string(),
            config: id.to_string(),
            batch_size: 4,
            precision: Precision::Fp32,
            device: DeviceSelector::Cpu,
            topology: Topology::single(),
            warmup: 1,
            budget: Budget::Iterations(iterations),
            repeat: 0,
            seed: 7,
            optimizer: OptimizerSpec::Sgd { lr: 0.01, momentum: 0.0, weight_decay: 0.0, nesterov: false },
            phase_timing: true,
            timeout_s: None,
            cpu_threads: None,
            target: None,
            numerics: crate::Numerics::default(),
            schedule: Default::default(),
        }
    }
}

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

/// Everything a backend measured in one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RawMeasurements {
    /// The warm-up iterations: how many, the first and the last.
    pub warmup_steps: crate::steplog::WarmupSteps,
    /// The measured iterations' phase times and losses, in memory bounded whatever the run's length
    /// ([`crate::steplog::StepLog`]).
    pub steps: crate::steplog::StepLog,
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
    /// With a training target ([`RunPlan::target`]): the evaluations and whether and when the target was
    /// reached; `None` without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetOutcome>,
    /// A free-running window after the measured steps (CUDA: kernels queue ahead of the device); `None` where
    /// every step is synchronous anyway (the CPU) or the run had none (a target, several workers, a stop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_running: Option<FreeRunning>,
    /// The TF32 switches the run used, as read back from the framework; `None` where TF32 does not exist (the
    /// CPU, wgpu).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf32: Option<crate::Tf32>,
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

/// Why a backend could not run a plan.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BackendError {
    /// The backend was compiled out.
    #[error(
        "trainbench was built without feature `{feature}`; rebuild with `--features {feature}` to use the {backend} backend"
    )]
    NotBuilt {
        /// Backend name.
        backend: &'static str,
        /// Cargo feature that enables it.
        feature: &'static str,
    },
    /// A layer, loss or precision the backend cannot execute.
    #[error("the {backend} backend cannot run layer `{layer}` ({op}): {reason}")]
    Unsupported {
        /// Backend name.
        backend: &'static str,
        /// Layer name.
        layer: String,
        /// Operation kind.
        op: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// The device ran out of memory; recorded as the run's outcome.
    #[error("out of memory at batch size {batch_size}: {message}")]
    OutOfMemory {
        /// Batch size that did not fit.
        batch_size: usize,
        /// The framework's message.
        message: String,
    },
    /// The selected device does not exist or cannot be opened.
    #[error("device `{selector}` is not available: {reason}")]
    Device {
        /// Selector as written.
        selector: String,
        /// Why.
        reason: String,
    },
    /// The dataset could not deliver a batch (a corrupt or unreadable file, named in the message).
    #[error("dataset: {0}")]
    Data(String),
    /// Anything else the framework reported.
    #[error("{0}")]
    Framework(String),
}

/// Lower-cased fragments of allocator messages (libtorch's CPU and CUDA allocators, wgpu/cubecl) that mean the
/// device or host ran out of memory.
const OOM_MARKERS: &[&str] = &[
    "out of memory",
    "outofmemory",
    "can't allocate memory",
    "not enough memory",
    "allocation",
    // cuBLAS and cuDNN report their own workspace allocation failures under these status names.
    "cublas_status_alloc_failed",
    "cudnn_status_alloc_failed",
];

impl BackendError {
    /// Whether a framework message reports an allocation failure.
    pub fn is_oom_message(message: &str) -> bool {
        let lower = message.to_ascii_lowercase();
        OOM_MARKERS.iter().any(|m| lower.contains(m))
    }

    /// The error for a panic caught around a framework call at `batch_size`: [`BackendError::OutOfMemory`] when
    /// its message reports an allocation failure, else [`BackendError::Framework`] prefixed with `context`
    /// (`libtorch call panicked`).
    pub fn from_panic(payload: &(dyn std::any::Any + Send), batch_size: usize, context: &str) -> Self {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_string()))
            .unwrap_or_else(|| "unknown panic".to_string());
        if Self::is_oom_message(&message) {
            BackendError::OutOfMemory { batch_size, message }
        } else {
            BackendError::Framework(format!("{context}: {message}"))
        }
    }
}

/// Observes a run as it goes (progress bars, samplers); every method has a no-op default.
pub trait Probe {
    /// Called after each iteration (warm-up included; `measured` tells which).
    fn step(&mut self, _index: u64, _measured: bool, _phases: &PhaseTimes) {}
    /// Polled between iterations; returning true stops the run early, keeping what was measured.
    fn should_stop(&self) -> bool {
        false
    }
}

/// A probe that observes nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProbe;
impl Probe for NoProbe {}

/// What a backend is handed for one run besides its plan and graph. Each concern the runner supplies (where
/// iterations are reported; later stages add where batches come from and how gradients are exchanged) is one
/// field, so adding one does not change the [`Backend`] signature.
pub struct RunContext<'a> {
    /// Receives every iteration and says when to stop.
    pub probe: &'a mut dyn Probe,
    /// Where training batches come from: `None` means synthetic data the backend generates itself
    /// (`init::synthetic_input`); `Some` is a dataset read on the host, whose batches the backend copies to its
    /// device, timing the wait for each batch and the copy separately.
    pub data: Option<&'a mut dyn BatchSource>,
    /// The data-parallel exchange this worker calls after each backward pass (`None`: a single worker). It
    /// also says which slice of the global batch this worker trains on ([`GradientExchange::worker`]).
    pub exchange: Option<&'a mut dyn GradientExchange>,
    /// The evaluation split of a run with a target ([`RunPlan::target`]): every batch is evaluated (forward
    /// only) at each evaluation; `None` when the plan has no target.
    pub eval: Option<&'a EvalSet>,
}

impl<'a> RunContext<'a> {
    /// A context that only reports to `probe`: synthetic data, a single rank.
    pub fn new(probe: &'a mut dyn Probe) -> Self {
        RunContext { probe, data: None, exchange: None, eval: None }
    }

    /// The next training batch from [`RunContext::data`] and the seconds spent waiting for it (the stall);
    /// `None` with synthetic data. A [`DataError`](trainbench_data::DataError) becomes [`BackendError::Data`],
    /// naming the file.
    pub fn next_batch(&mut self) -> Option<Result<(trainbench_data::HostBatch, f64), BackendError>> {
        Some(crate::batch::fetch(self.data.as_deref_mut()?))
    }
}

/// A training backend: lowers a workload graph and trains it, measuring as it goes.
pub trait Backend {
    /// Which backend this is; its static [`crate::Capabilities`] follow from it.
    fn kind(&self) -> BackendKind;
    /// Short name (`tch`, `wgpu`, `mock`).
    fn name(&self) -> &'static str {
        self.kind().name()
    }
    /// Devices this backend can run on here.
    fn devices(&self) -> Vec<DeviceInfo>;
    /// Refuse, before anything runs, a plan this backend cannot execute (unsupported layer or precision) or a
    /// device it cannot open here.
    fn check(&self, plan: &RunPlan, graph: &Graph) -> Result<(), BackendError>;
    /// Iterations of a throw-away run the runner trains before the first measured run on each device in a
    /// process, to pay one-time costs (thread pools, lazy library initialisation, kernel compilation) outside
    /// every measurement; 0 (the default) when the backend has none.
    fn process_warmup_iterations(&self) -> u64 {
        0
    }
    /// Refuse, from the plan and graph alone, what this backend cannot run on this host: what its static
    /// [`crate::Capabilities`] declare (device family, precision, layers it never runs, layers whose CPU
    /// feature this host lacks, then what its lowering refuses: [`crate::lowering`]). No device is opened and
    /// no engine is needed, so specs are checked with it when they are validated and planned. Topologies
    /// (world size) are left to `check`, since one sweep may mix runnable and unrunnable ones.
    fn supports(&self, plan: &RunPlan, graph: &Graph) -> Result<(), BackendError> {
        match self.kind().capabilities().refusal(plan, graph, crate::cpu::CpuFeatures::host()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
    /// Train `graph` as `plan` says with what `ctx` supplies, reporting each iteration to `ctx.probe`.
    fn run_in(
        &mut self,
        plan: &RunPlan,
        graph: &Graph,
        ctx: &mut RunContext<'_>,
    ) -> Result<RawMeasurements, BackendError>;
    /// Measure the device for the performance model (`trainbench calibrate`): matrix products and convolutions
    /// per precision, a memory triad, the fixed cost of one operation and, on an accelerator, the host-to-device
    /// copy. The default refuses: a backend that cannot time its own kernels says so.
    fn calibrate(
        &mut self,
        request: &crate::calibrate::CalibrationRequest,
    ) -> Result<crate::calibrate::Measurement, BackendError> {
        Err(BackendError::Framework(format!(
            "the {} backend cannot calibrate `{}`: it has no kernel timing; calibrate with the tch backend",
            self.name(),
            request.device
        )))
    }
    /// Train `graph` as `plan` says on its own (synthetic data, one rank), reporting each iteration to `probe`.
    fn run(&mut self, plan: &RunPlan, graph: &Graph, probe: &mut dyn Probe) -> Result<RawMeasurements, BackendError> {
        self.run_in(plan, graph, &mut RunContext::new(probe))
    }
}
