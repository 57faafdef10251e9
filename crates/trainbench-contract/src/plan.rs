//! What a run asks of a backend: one fully resolved run ([`RunPlan`]) and how its measured iterations are
//! bounded ([`Budget`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::device::DeviceSelector;
use crate::numerics::Numerics;
use crate::target::TargetPlan;
use trainbench_comm::Topology;
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
    /// (written flat: `world_size`, `strategy`, `nodes`, `devices_per_node`, `interconnect`, and `mesh` with
    /// tensor or pipeline parallelism).
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
    #[serde(default, skip_serializing_if = "Numerics::is_default")]
    pub numerics: Numerics,
    /// Activation checkpointing and gradient accumulation (left out of the JSON when neither is used).
    /// With accumulation, `batch_size` is one micro-batch and a step trains on `grad_accumulation` of them.
    #[serde(default, skip_serializing_if = "trainbench_graph::training::StepSchedule::is_default")]
    pub schedule: trainbench_graph::training::StepSchedule,
    /// A pipeline's cut as given (`topology.pipeline_layers`): the blocks of each chunk in model order, one
    /// entry per chunk (pipeline degree x virtual stages). Empty: the blocks are balanced by FLOPs. Left out
    /// of the JSON when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pipeline_layers: Vec<usize>,
}

impl RunPlan {
    /// The pipeline cut to pass to `trainbench_graph::stages::cut_stages`: the given block counts, or `None`
    /// to balance by FLOPs.
    pub fn given_cut(&self) -> Option<&[usize]> {
        (!self.pipeline_layers.is_empty()).then_some(self.pipeline_layers.as_slice())
    }

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
            numerics: Numerics::default(),
            schedule: Default::default(),
            pipeline_layers: Vec::new(),
        }
    }
}
