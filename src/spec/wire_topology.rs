//! The `[topology]` table of spec version 1 as written in TOML: where and how the model is trained (backend,
//! device, nodes and workers, strategy, interconnect, isolation). Doc comments here become the JSON Schema's
//! descriptions; `wire.rs` re-exports these types.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
pub use trainbench_comm::{Interconnect, PipelineSchedule};

/// Where and how the model is trained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    /// Training backend: `auto` picks tch when built in, else wgpu, else fails with a hint.
    #[serde(default)]
    pub backend: BackendChoice,
    /// Device selector: `cpu`, `cuda`, `cuda:N`, `wgpu`, `wgpu:N`, `wgpu:discrete|integrated|cpu`.
    #[serde(default = "d_device")]
    pub device: String,
    /// Machines.
    #[serde(default = "d_one")]
    #[schemars(range(min = 1))]
    pub nodes: usize,
    /// Devices per machine.
    #[serde(default = "d_one")]
    #[schemars(range(min = 1))]
    pub devices_per_node: usize,
    /// Parallelism strategy (PAI's job classes: single = 1w1g, all-reduce = 1wng / AllReduce,
    /// parameter-server = PS/worker; ZeRO's sharded stages zero-1, zero-2 and zero-3, also named fsdp).
    #[serde(default)]
    pub strategy: Strategy,
    /// MiB of gradients per all-reduce bucket, or per sharded unit with `zero-1` and `zero-2` (default 25,
    /// PyTorch DDP's); `zero-3` shards one unit per recomputable block instead. Not simulated by `mock`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0009765625))]
    pub bucket_mb: Option<f64>,
    /// Exchange beside the computation (default true): each gradient bucket during the backward pass as soon
    /// as its gradients exist (`all-reduce`, `zero-1`, `zero-2`), each block's weights gathered while the block
    /// before it computes (`zero-3`); `false` exchanges between the computation. Not simulated by `mock`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<bool>,
    /// Parameter-server ranks beside the workers (`strategy = "parameter-server"` only); each holds a shard of
    /// the weights (whole tensors, balanced by size) and its optimizer state.
    // Left out of the canonical form at its default, so specs written before the key existed keep their hash.
    #[serde(default = "d_one", skip_serializing_if = "is_one")]
    #[schemars(range(min = 1))]
    pub parameter_servers: usize,
    /// Link between devices, used by the communication model and recorded in results.
    #[serde(default)]
    pub interconnect: Interconnect,
    /// Tensor-parallel degree: ranks each layer's matrices are split over (Megatron-style: attention by heads,
    /// the MLP column- then row-parallel, the vocabulary split). Must divide the heads, key/value heads, FFN
    /// width, vocabulary and world size. Ranks are placed tensor-innermost, so a tensor group stays inside a node.
    // Left out of the canonical form at its default, as are the mesh keys below.
    #[serde(default = "d_one", skip_serializing_if = "is_one")]
    #[schemars(range(min = 1))]
    pub tensor_parallel: usize,
    /// Pipeline-parallel degree: stages the model's blocks are cut into (balanced by FLOPs). The data-parallel
    /// degree, along which `strategy` runs, is the world size over tensor x pipeline degrees.
    #[serde(default = "d_one", skip_serializing_if = "is_one")]
    #[schemars(range(min = 1))]
    pub pipeline_parallel: usize,
    /// Sequence parallelism inside each tensor group (needs `tensor_parallel` > 1): norms and dropout on
    /// sequence shards, all-gather before and reduce-scatter after each parallel region.
    #[serde(default, skip_serializing_if = "is_false")]
    pub sequence_parallel: bool,
    /// Pipeline schedule (needs `pipeline_parallel` > 1; default `1f1b`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_schedule: Option<PipelineSchedule>,
    /// Micro-batches per step through the pipeline (needs `pipeline_parallel` > 1; default the pipeline
    /// degree). Must divide each data-parallel rank's batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub microbatches: Option<usize>,
    /// Model chunks per pipeline rank (`pipeline_schedule = "interleaved-1f1b"` only, at least 2 there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub virtual_stages: Option<usize>,
    /// The pipeline's cut, given: blocks (decoder or ViT layers) in each chunk, in model order, one entry per
    /// chunk (`pipeline_parallel` x `virtual_stages`; each at least 1, summing to the model's blocks), e.g.
    /// `[16, 16, 16, 16, 16, 16, 15, 15]` for 126 layers over 8 stages. Chunk `c` runs on pipeline rank
    /// `c mod pipeline_parallel`. Absent: the blocks are balanced by FLOPs, and their count must divide by the
    /// chunks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_layers: Option<Vec<usize>>,
    /// Expert-parallel degree (mixture-of-experts models only): ranks each MoE layer's experts are sharded
    /// over, along the data-parallel dimension; tokens reach their experts by all-to-all. Must divide the
    /// experts and the world size; `strategy = "all-reduce"` with `overlap = false` (the default with it).
    #[serde(default = "d_one", skip_serializing_if = "is_one")]
    #[schemars(range(min = 1))]
    pub expert_parallel: usize,
}

impl TopologySpec {
    /// The device mesh the spec asks for, defaults resolved (microbatches: the pipeline degree; one virtual
    /// stage; `1f1b`), with the given tensor and pipeline degrees (a sweep entry's, or the table's).
    pub fn mesh_with(&self, tensor_parallel: usize, pipeline_parallel: usize) -> trainbench_comm::Mesh {
        let pipelined = pipeline_parallel > 1;
        trainbench_comm::Mesh {
            tensor_parallel: tensor_parallel.max(1),
            pipeline_parallel: pipeline_parallel.max(1),
            sequence_parallel: self.sequence_parallel && tensor_parallel > 1,
            pipeline_schedule: if pipelined { self.pipeline_schedule.unwrap_or_default() } else { Default::default() },
            microbatches: if pipelined { self.microbatches.unwrap_or(pipeline_parallel).max(1) } else { 1 },
            virtual_stages: if pipelined { self.virtual_stages.unwrap_or(1).max(1) } else { 1 },
            expert_parallel: self.expert_parallel.max(1),
        }
    }
}

impl Default for TopologySpec {
    fn default() -> Self {
        Self {
            backend: BackendChoice::Auto,
            device: d_device(),
            nodes: 1,
            devices_per_node: 1,
            strategy: Strategy::Single,
            bucket_mb: None,
            overlap: None,
            parameter_servers: 1,
            interconnect: Interconnect::Pcie,
            tensor_parallel: 1,
            pipeline_parallel: 1,
            sequence_parallel: false,
            pipeline_schedule: None,
            microbatches: None,
            virtual_stages: None,
            pipeline_layers: None,
            expert_parallel: 1,
        }
    }
}

fn d_device() -> String {
    "cpu".to_string()
}
fn d_one() -> usize {
    1
}
fn is_one(n: &usize) -> bool {
    *n == 1
}
fn is_false(b: &bool) -> bool {
    !*b
}

/// One entry of `sweep.topologies`: fields left out are taken from `[topology]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TopologyOverride {
    /// Machines.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub nodes: Option<usize>,
    /// Devices per machine.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub devices_per_node: Option<usize>,
    /// Parallelism strategy.
    #[serde(default)]
    pub strategy: Option<Strategy>,
    /// Parameter-server ranks (`strategy = "parameter-server"` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub parameter_servers: Option<usize>,
    /// Interconnect.
    #[serde(default)]
    pub interconnect: Option<Interconnect>,
    /// Tensor-parallel degree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub tensor_parallel: Option<usize>,
    /// Pipeline-parallel degree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub pipeline_parallel: Option<usize>,
    /// Expert-parallel degree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub expert_parallel: Option<usize>,
}

/// Where the repeats of a spec run (see `run.isolation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// Each repeat in a fresh process of its own (all batch sizes, precisions and topologies of that repeat
    /// share it).
    #[default]
    Process,
    /// Every run in the `trainbench run` process.
    Shared,
}

/// Which backend trains the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    /// tch if built in, else wgpu.
    #[default]
    Auto,
    /// libtorch through tch (CPU, CUDA).
    Tch,
    /// burn's wgpu backend (Vulkan, Metal, DX12, software Vulkan).
    Wgpu,
    /// The deterministic mock backend (for tests of trainbench itself; measures nothing real).
    Mock,
}

/// Parallelism strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// One worker, one device (PAI 1w1g).
    #[default]
    Single,
    /// Synchronous data parallelism with all-reduce of gradients (PAI 1wng / AllReduce).
    AllReduce,
    /// Data parallelism through parameter servers (PAI PS/worker).
    ParameterServer,
    /// ZeRO stage 1: optimizer state sharded over the workers.
    #[serde(rename = "zero-1")]
    Zero1,
    /// ZeRO stage 2: optimizer state and gradients sharded.
    #[serde(rename = "zero-2")]
    Zero2,
    /// ZeRO stage 3 (FSDP): optimizer state, gradients and weights sharded.
    #[serde(rename = "zero-3")]
    Zero3,
    /// FSDP's name for ZeRO stage 3: planned, run and recorded as `zero-3`.
    Fsdp,
}

impl Strategy {
    /// Name as written in specs.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Single => "single",
            Strategy::AllReduce => "all-reduce",
            Strategy::ParameterServer => "parameter-server",
            Strategy::Zero1 => "zero-1",
            Strategy::Zero2 => "zero-2",
            Strategy::Zero3 => "zero-3",
            Strategy::Fsdp => "fsdp",
        }
    }

    /// Whether it is one of ZeRO's sharded stages.
    pub fn is_sharded(self) -> bool {
        matches!(self, Strategy::Zero1 | Strategy::Zero2 | Strategy::Zero3 | Strategy::Fsdp)
    }
}
